/* quant_x86.c: quant.c's int8 kernels for AVX2, where AVX-512 VNNI or AVX-VNNI (when the
 * build has them) replace two of its instructions by one.
 *
 * Quantizing activations (simd_q8_absmax, simd_q8_round: the reference's bits), the matmul
 * of one row of x at a time for groups that are a multiple of 32 (simd_q8_matmul_rows),
 * and the prefill GEMM's register tile, which takes several rows of x at once and gives
 * each output the bits the row path gives it (so a prompt run at once and token by token
 * agree exactly). With AVX-512 VNNI (simd.h: SIMD_Q8_EXACT) both give quant.c's
 * reference's bits: the exact tile keeps sixteen rows of x in a register's lanes; without
 * it they differ from the reference only in the order of their float additions (a group's
 * eight lanes are summed at the end of the row), and the tile is a 256-bit one. simd.h
 * says which of them a build has.
 */
#include "simd/simd.h"

#if defined(SIMD_Q8_X86)
#include <immintrin.h>  /* AVX2 (and VNNI) intrinsics */
#include <math.h>       /* NAN */
#include <stddef.h>     /* size_t */
#include <stdint.h>     /* int8_t, int32_t, uint8_t, uint32_t */
#include <string.h>     /* memcpy */

#include "quant.h"      /* QuantMatrix, quant_groups, QUANT_Q_MAX */

#define QUANT_CHUNK 32      /* int8s per AVX2 register: the SIMD matmul needs group % 32 == 0 */
#define QUANT_LANES 8       /* floats (or int32s) per AVX2 register */
#define QUANT_ROW_TILE 4    /* rows of w per pass of the SIMD matmul: each x load feeds four rows */
/* A single row of x against a w of at least this many int8s reads w as four sequential
 * runs of rows rather than four adjacent rows at a time: such a w comes from memory at
 * every token, and the four runs stream it faster (Zen 4, one thread, decode: a random
 * s110m in int8 62 -> 160 tokens/s, s15m's 1117 -> 1210; AVX2 code 60 -> 159 and 1034 ->
 * 1172). Below it (the shipped model's 16 KiB matrices) w stays in the caches. Measured,
 * not derived: s15m's smallest matrix is 81 KiB. */
#define QUANT_STREAM_BYTES (72 << 10)

/* The GEMM's tile is inlined into its callers, where its shape is constant: only then do its
 * loops unroll and its sums stay in registers. */
/* IN_REGISTER(v) keeps the vector v in a register for its next uses: without it gcc 12
 * folds each use of a value loaded once into an instruction that loads it again (the VNNI
 * tile's four uses of a column's starting lanes and chunks of w: 52 loads a group instead
 * of 28, and the loads, not the multiplies, then bound the tile). Not on the AVX2 path,
 * whose 16 registers it would crowd (10 % slower there). */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#define ALWAYS_INLINE inline
#define IN_REGISTER(v) ((void)0)
#endif

/* The exact dot product of a (n,) and b (n,), int8 values (quant.c's dot_i8): the values of
 * a short last group past its last whole register. */
static int32_t dot_i8(const int8_t *a, const int8_t *b, int n) {
    int32_t sum = 0;
    for (int i = 0; i < n; i++) sum += (int32_t)a[i] * (int32_t)b[i];
    return sum;
}

/* absmax_reference over the whole registers of x (n,), eight values at a time; quant.c
 * takes the rest. max is exact, so the result is the same. */
float simd_q8_absmax(const float *x, int n, int *done) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 vmax = _mm256_setzero_ps(), vnan = _mm256_setzero_ps();
    int i = 0;
    for (; i + QUANT_LANES <= n; i += QUANT_LANES) {
        __m256 v = _mm256_loadu_ps(x + i);
        vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, v));
        vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));  /* _mm256_max_ps drops NaN */
    }
    *done = i;
    if (_mm256_movemask_ps(vnan)) return NAN;
    float lanes[QUANT_LANES];
    _mm256_storeu_ps(lanes, vmax);
    float amax = 0.0f;
    for (int j = 0; j < QUANT_LANES; j++)
        if (lanes[j] > amax) amax = lanes[j];
    return amax;
}

/* round_reference, eight values at a time, bit for bit: the same IEEE division, then
 * round half away from zero built from truncation (v - trunc(v) is exact). Returns how
 * many it did (whole registers); quant.c rounds the rest. */
int simd_q8_round(int8_t *q, const float *x, int n, float scale) {
    const __m256 vscale = _mm256_set1_ps(scale), sign = _mm256_set1_ps(-0.0f);
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 qmax = _mm256_set1_ps((float)QUANT_Q_MAX);
    const __m256 qmin = _mm256_set1_ps((float)-QUANT_Q_MAX);
    int i = 0;
    for (; i + QUANT_LANES <= n; i += QUANT_LANES) {
        __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), vscale);
        __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __m256 away = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)), half, _CMP_GE_OQ);
        __m256 step = _mm256_and_ps(away, _mm256_or_ps(_mm256_and_ps(sign, v), one));  /* +-1 */
        __m256 r = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(t, step), qmin), qmax);
        __m256i r32 = _mm256_cvttps_epi32(r);      /* exact: r is an integer in [-127, 127] */
        __m128i r16 = _mm_packs_epi32(_mm256_castsi256_si128(r32),
                                      _mm256_extracti128_si256(r32, 1));
        _mm_storel_epi64((__m128i *)(q + i), _mm_packs_epi16(r16, r16));
    }
    return i;
}

/* acc + a * b, fused when the build has FMA (-mavx2 alone does not). */
static inline __m256 mul_add(__m256 a, __m256 b, __m256 acc) {
#ifdef __FMA__
    return _mm256_fmadd_ps(a, b, acc);
#else
    return _mm256_add_ps(acc, _mm256_mul_ps(a, b));
#endif
}

/* acc + a group's integer lanes dot (8 x int32) times x's scale xs and w's ws: lanes x (xs x
 * ws), dot_row_reference's order within each lane. */
static inline __m256 scaled_add(__m256 acc, __m256i dot, float xs, float ws) {
    return mul_add(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(xs * ws), acc);
}

/* acc (8 x int32) plus the 32 products x[i] * w[i] of int8 registers x and w, four per
 * lane; ax = |x|. The multiply instructions take one unsigned and one signed operand, so
 * the sign of x moves onto w: x * w = |x| * (w with x's sign). Safe because every q is in
 * [-127, 127]: |x| fits in a u8, negating w cannot overflow (it could for -128), and
 * maddubs's int16 sums of two products stay <= 2 * 127 * 127 = 32258 < 32767, where a
 * -128 would give 2 * 128 * 128 = 32768 and saturate. */
static inline __m256i dot32_add(__m256i acc, __m256i ax, __m256i x, __m256i w) {
    __m256i sw = _mm256_sign_epi8(w, x);   /* w * sign(x), and 0 where x is 0 */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, ax, sw);   /* u8 x s8, four products per int32 lane */
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, ax, sw);   /* the same, VEX-encoded (no AVX-512) */
#else
    __m256i pairs = _mm256_maddubs_epi16(ax, sw);                          /* 16 x int16 */
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
}

/* The sum of the eight lanes of v. */
static inline float sum_lanes(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* v with t added to its lane 0. */
static inline __m256i add_lane0(__m256i v, int32_t t) {
    return _mm256_add_epi32(v, _mm256_setr_epi32(t, 0, 0, 0, 0, 0, 0, 0));
}

/* The 32 bytes at p (a chunk of a row of x or of w). */
static inline __m256i load_chunk(const int8_t *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}

/* The float steps of the row path, after each group's integer lanes: two forms.
 *
 * In builds with the exact tile (simd.h: SIMD_Q8_EXACT) each group's lanes are summed to
 * its exact int32 dot product, and then quant.c's dot_row_reference's steps follow: acc +=
 * (float)dot * (x's scale * w's scale), group after group, so every output has the
 * reference's bits (the GEMM below keeps them too). Elsewhere each group's eight lanes are
 * converted, scaled and accumulated in eight float lanes (scaled_add), summed at the end
 * (sum_lanes): the reference's terms added in another order.
 *   RowAcc, row_zero, row_add_group, row_sum        one column
 *   Rows4Acc, rows4_zero, rows4_add_group, rows4_sums   four columns, x's group shared */
#if defined(SIMD_Q8_EXACT)
/* The sums of the eight int32 lanes of a, b, c and d: (4,), exact. */
static inline __m128i sum_lanes4_i32(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

typedef float RowAcc;
static inline RowAcc row_zero(void) { return 0.0f; }
static inline RowAcc row_add_group(RowAcc acc, __m256i dot, float xs, float ws) {
    __m128i s = sum_lanes4_i32(dot, dot, dot, dot);
    return acc + (float)_mm_cvtsi128_si32(s) * (xs * ws);
}
static inline float row_sum(RowAcc acc) { return acc; }

typedef __m128 Rows4Acc;   /* the four columns' sums */
static inline Rows4Acc rows4_zero(void) { return _mm_setzero_ps(); }
static inline Rows4Acc rows4_add_group(Rows4Acc acc, const __m256i dot[4], float xs,
                                       float ws0, float ws1, float ws2, float ws3) {
    __m128 terms = _mm_cvtepi32_ps(sum_lanes4_i32(dot[0], dot[1], dot[2], dot[3]));
    __m128 scales = _mm_mul_ps(_mm_set1_ps(xs), _mm_setr_ps(ws0, ws1, ws2, ws3));
    return _mm_add_ps(acc, _mm_mul_ps(terms, scales));
}
static inline void rows4_sums(float sums[4], Rows4Acc acc) { _mm_storeu_ps(sums, acc); }
#else
typedef __m256 RowAcc;
static inline RowAcc row_zero(void) { return _mm256_setzero_ps(); }
static inline RowAcc row_add_group(RowAcc acc, __m256i dot, float xs, float ws) {
    return scaled_add(acc, dot, xs, ws);
}
static inline float row_sum(RowAcc acc) { return sum_lanes(acc); }

typedef struct {
    __m256 acc[4];
} Rows4Acc;
static inline Rows4Acc rows4_zero(void) {
    Rows4Acc a;
    for (int r = 0; r < 4; r++) a.acc[r] = _mm256_setzero_ps();
    return a;
}
static inline Rows4Acc rows4_add_group(Rows4Acc a, const __m256i dot[4], float xs,
                                       float ws0, float ws1, float ws2, float ws3) {
    a.acc[0] = scaled_add(a.acc[0], dot[0], xs, ws0);
    a.acc[1] = scaled_add(a.acc[1], dot[1], xs, ws1);
    a.acc[2] = scaled_add(a.acc[2], dot[2], xs, ws2);
    a.acc[3] = scaled_add(a.acc[3], dot[3], xs, ws3);
    return a;
}
static inline void rows4_sums(float sums[4], Rows4Acc a) {
    for (int r = 0; r < 4; r++) sums[r] = sum_lanes(a.acc[r]);
}
#endif

/* x · w for one activation row x and one weight row w (q (cols,), scales (groups,)):
 * dot_row_reference's terms for group % 32 == 0, each group's int32 sums in eight lanes,
 * then the build's float steps (above). The last group may be shorter than group: its
 * values past the last whole register are summed in scalar code and added to lane 0. */
static float dot_row_avx2(const int8_t *xq, const float *xs, const int8_t *wq,
                          const float *ws, int cols, int group, int groups) {
    RowAcc acc = row_zero();
    int whole_groups = cols / group, c = 0;   /* c runs over the row, group after group */
    for (int g = 0; g < groups; g++) {
        int end = g < whole_groups ? c + group : cols;
        __m256i dot = _mm256_setzero_si256();
        for (; c + QUANT_CHUNK <= end; c += QUANT_CHUNK) {
            __m256i x = load_chunk(xq + c);
            dot = dot32_add(dot, _mm256_abs_epi8(x), x, load_chunk(wq + c));
        }
        if (c < end) {   /* only in a short last group */
            dot = add_lane0(dot, dot_i8(xq + c, wq + c, end - c));
            c = end;
        }
        acc = row_add_group(acc, dot, xs[g], ws[g]);
    }
    return row_sum(acc);
}

/* sums (4,) = x · w_r for QUANT_ROW_TILE = 4 weight rows w_r, step rows apart (q rows
 * step * cols apart, scale rows step * groups apart): dot_row_avx2 four times over, each x
 * register loaded once for the four rows. Each row sees dot_row_avx2's operations in its
 * order, so an output has the same bits whichever of the two computes it. */
static void dot_rows4_avx2(float *sums, const int8_t *xq, const float *xs, const int8_t *wq,
                           const float *ws, size_t step, int cols, int group, int groups) {
    size_t q_step = step * (size_t)cols, s_step = step * (size_t)groups;
    const int8_t *w0 = wq, *w1 = w0 + q_step, *w2 = w1 + q_step, *w3 = w2 + q_step;
    const float *s0 = ws, *s1 = s0 + s_step, *s2 = s1 + s_step, *s3 = s2 + s_step;
    Rows4Acc acc = rows4_zero();
    int whole_groups = cols / group, c = 0;
    for (int g = 0; g < groups; g++) {
        int end = g < whole_groups ? c + group : cols;
        __m256i dot[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                          _mm256_setzero_si256(), _mm256_setzero_si256()};
        for (; c + QUANT_CHUNK <= end; c += QUANT_CHUNK) {
            __m256i x = load_chunk(xq + c);
            __m256i ax = _mm256_abs_epi8(x);
            dot[0] = dot32_add(dot[0], ax, x, load_chunk(w0 + c));
            dot[1] = dot32_add(dot[1], ax, x, load_chunk(w1 + c));
            dot[2] = dot32_add(dot[2], ax, x, load_chunk(w2 + c));
            dot[3] = dot32_add(dot[3], ax, x, load_chunk(w3 + c));
        }
        if (c < end) {   /* only in a short last group */
            dot[0] = add_lane0(dot[0], dot_i8(xq + c, w0 + c, end - c));
            dot[1] = add_lane0(dot[1], dot_i8(xq + c, w1 + c, end - c));
            dot[2] = add_lane0(dot[2], dot_i8(xq + c, w2 + c, end - c));
            dot[3] = add_lane0(dot[3], dot_i8(xq + c, w3 + c, end - c));
            c = end;
        }
        acc = rows4_add_group(acc, dot, xs[g], s0[g], s1[g], s2[g], s3[g]);
    }
    rows4_sums(sums, acc);
}

/* Columns o0 .. of quant_matmul_block for group % 32 == 0: tiles of QUANT_ROW_TILE rows of
 * w, then single rows; for N > 1 a tile's rows of w (4 x cols bytes) stay in L1 while the
 * N rows of x go past them. A single row of x against a large w (decode) takes its tiles'
 * four rows a quarter of the columns apart instead, so w is read as four sequential runs.
 * Every output has dot_row_avx2's bits in each case. Returns o1 (o0 for other groups). */
int simd_q8_matmul_rows(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1) {
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group), OC = w->rows;
    int o = o0;
    if (group % QUANT_CHUNK != 0) return o0;   /* the reference's (quant.c) */
    if (N == 1 && (size_t)OC * (size_t)cols >= QUANT_STREAM_BYTES) {
        /* decode of a large w: four sequential runs of rows, a quarter of the range apart */
        int quarter = (o1 - o0) / QUANT_ROW_TILE;
        for (int i = 0; i < quarter; i++) {
            float sums[QUANT_ROW_TILE];
            dot_rows4_avx2(sums, xq, xs, w->q + (size_t)(o0 + i) * (size_t)cols,
                           w->scale + (size_t)(o0 + i) * (size_t)groups, (size_t)quarter, cols,
                           group, groups);
            for (int r = 0; r < QUANT_ROW_TILE; r++) {
                int c = o0 + i + r * quarter;
                out[c] = sums[r] + (bias ? bias[c] : 0.0f);
            }
        }
        o = o0 + QUANT_ROW_TILE * quarter;   /* the tiles below take the rows left over */
    }
    for (; o + QUANT_ROW_TILE <= o1; o += QUANT_ROW_TILE) {
        const int8_t *wq = w->q + (size_t)o * (size_t)cols;
        const float *ws = w->scale + (size_t)o * (size_t)groups;
        for (int n = 0; n < N; n++) {
            const int8_t *xq_n = xq + (size_t)n * (size_t)cols;
            const float *xs_n = xs + (size_t)n * (size_t)groups;
            float sums[QUANT_ROW_TILE], *out_n = out + (size_t)n * (size_t)OC;
            dot_rows4_avx2(sums, xq_n, xs_n, wq, ws, 1, cols, group, groups);
            for (int r = 0; r < QUANT_ROW_TILE; r++)
                out_n[o + r] = sums[r] + (bias ? bias[o + r] : 0.0f);
        }
    }
    for (; o < o1; o++) {   /* the rows left over from the tiles */
        const int8_t *wq = w->q + (size_t)o * (size_t)cols;
        const float *ws = w->scale + (size_t)o * (size_t)groups;
        for (int n = 0; n < N; n++)
            out[(size_t)n * (size_t)OC + (size_t)o] =
                dot_row_avx2(xq + (size_t)n * (size_t)cols, xs + (size_t)n * (size_t)groups,
                             wq, ws, cols, group, groups) + (bias ? bias[o] : 0.0f);
    }
    return o;
}

/* -- The prefill GEMM: several rows of x at once -- */

#if defined(SIMD_Q8_EXACT)
/* The exact tile (AVX-512 VNNI): a 512-bit register's sixteen int32 lanes are sixteen rows
 * of x, each lane one (row of x, row of w) pair's whole dot product for the group, so that
 * after the group the lanes hold the reference's exact int32 dot products and its float
 * steps follow sixteen rows at a time: (float)dot * (x's scale * w's scale), added to that
 * pair's sum, group after group: the reference's bits.
 *
 * x is first packed (pack_rows): a block of QUANT_XT_ROWS rows, 4 values (a quad) of each
 * row side by side, + 128 so that they are unsigned bytes (x + 128 is in [1, 255]: every q
 * is in [-127, 127]): quad k of the block is 32 rows x 4 bytes, two registers. One
 * vpdpbusd then adds to sixteen rows' lanes the products of their quad k with the same
 * four values of one row of w, broadcast from memory: 64 products. The + 128 adds 128
 * times the sum of those four w to each lane, so each pair's lanes start the group from
 * -128 times the sum of the group's w (xt_starts). Padding rows are 0 (x + 128 = 128):
 * their lanes end each group at 0 and are never stored.
 *   tile              QUANT_XT_ROWS rows (two registers of lanes) x QUANT_XT_COLS columns
 *   per quad          2 loads of x, QUANT_XT_COLS broadcasts of w, 2 x QUANT_XT_COLS
 *                     vpdpbusd (512 products for four columns)
 *   per group         2 x QUANT_XT_COLS x (convert, two multiplies, add) */
#define QUANT_XT_ROWS 32          /* rows of x per tile: two registers of 16 lanes */
#define QUANT_XT_COLS 4           /* rows of w (output columns) per tile */
#define QUANT_XT_MAX_COLS 4096    /* the widest x the tile takes: a packed block of 32 rows
                                   * fills 128 KiB of the stack */
#define QUANT_XT_MAX_GROUPS 256   /* the most groups in a row the tile takes */
_Static_assert(QUANT_XT_COLS == SIMD_Q8_GEMM_COLS, "simd.h announces this tile");

/* xp (quads, QUANT_XT_ROWS, 4) = rows n0 .. n0+rows-1 of xq (cols a row) + 128, quad by
 * quad, and xsp (groups, QUANT_XT_ROWS) = their scales; rows past them 128 (x = 0) and
 * scale 0. */
static void pack_rows(uint8_t *xp, float *xsp, const int8_t *xq, const float *xs, int rows,
                      int cols, int groups) {
    int quads = cols / 4;
    for (int r = 0; r < QUANT_XT_ROWS; r++) {
        const int8_t *x_r = xq + (size_t)r * (size_t)cols;
        for (int k = 0; k < quads; k++) {
            uint32_t v = 0;
            if (r < rows) memcpy(&v, x_r + 4 * k, 4);
            v ^= 0x80808080u;
            memcpy(xp + ((size_t)k * QUANT_XT_ROWS + (size_t)r) * 4, &v, 4);
        }
        for (int g = 0; g < groups; g++)
            xsp[(size_t)g * QUANT_XT_ROWS + (size_t)r] =
                r < rows ? xs[(size_t)r * (size_t)groups + (size_t)g] : 0.0f;
    }
}

/* starts[g] (QUANT_XT_COLS,) = -128 x the sum of group g of rows o .. o+3 of w: their
 * whole chunks' lanes by vpdpbusd, the four rows' lanes summed at once, the rest (a group
 * that is not a multiple of 32) in scalar code. */
static void xt_starts(int32_t (*starts)[QUANT_XT_COLS], const QuantMatrix *w, int o) {
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group);
    const int8_t *w_c[QUANT_XT_COLS];
    for (int c = 0; c < QUANT_XT_COLS; c++) w_c[c] = w->q + (size_t)(o + c) * (size_t)cols;
    _Static_assert(QUANT_XT_COLS == 4, "sum_lanes4_i32 sums four rows' lanes");
    for (int g = 0; g < groups; g++) {
        int at = g * group, end = at + group < cols ? at + group : cols;
        __m256i lanes[QUANT_XT_COLS];   /* -128 x sums of four w */
        for (int c = 0; c < QUANT_XT_COLS; c++) lanes[c] = _mm256_setzero_si256();
        for (; at + QUANT_CHUNK <= end; at += QUANT_CHUNK)
            for (int c = 0; c < QUANT_XT_COLS; c++)
                lanes[c] = _mm256_sub_epi32(lanes[c],
                                            _mm256_dpbusd_epi32(_mm256_setzero_si256(),
                                                                _mm256_set1_epi8(-128),
                                                                load_chunk(w_c[c] + at)));
        _mm_storeu_si128((__m128i *)starts[g],
                         sum_lanes4_i32(lanes[0], lanes[1], lanes[2], lanes[3]));
        for (; at < end; at++)
            for (int c = 0; c < QUANT_XT_COLS; c++) starts[g][c] -= 128 * w_c[c][at];
    }
}

/* The four bytes of w at p as one int32, for a broadcast. */
static inline int32_t load_quad(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* out rows n0 .. n0+rows-1 (rows <= QUANT_XT_ROWS), columns o .. o+3 = those rows of x
 * (packed: xp, xsp) times rows o .. o+3 of w (their starts), + bias. */
static void xt_tile(float *out, const uint8_t *xp, const float *xsp, const QuantMatrix *w,
                    int32_t (*starts)[QUANT_XT_COLS], const float *bias, int rows, int o) {
    enum { C = QUANT_XT_COLS };
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group), OC = w->rows;
    const int8_t *w0 = w->q + (size_t)o * (size_t)cols;
    const float *ws0 = w->scale + (size_t)o * (size_t)groups;
    __m512 acc[2][C];
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < C; c++) acc[h][c] = _mm512_setzero_ps();
    for (int g = 0, k = 0; g < groups; g++) {
        int k_end = (g + 1) * group < cols ? (g + 1) * group / 4 : cols / 4;
        __m512i dot[2][C];
        for (int c = 0; c < C; c++) dot[0][c] = dot[1][c] = _mm512_set1_epi32(starts[g][c]);
        for (; k < k_end; k++) {
            const uint8_t *xk = xp + (size_t)k * QUANT_XT_ROWS * 4;
            __m512i x_lo = _mm512_loadu_si512(xk), x_hi = _mm512_loadu_si512(xk + 64);
            for (int c = 0; c < C; c++) {
                __m512i w_k =
                    _mm512_set1_epi32(load_quad(w0 + (size_t)c * (size_t)cols + 4 * (size_t)k));
                dot[0][c] = _mm512_dpbusd_epi32(dot[0][c], x_lo, w_k);
                dot[1][c] = _mm512_dpbusd_epi32(dot[1][c], x_hi, w_k);
            }
            for (int c = 0; c < C; c++) {
                IN_REGISTER(dot[0][c]);
                IN_REGISTER(dot[1][c]);
            }
        }
        for (int h = 0; h < 2; h++) {
            __m512 xs_g = _mm512_loadu_ps(xsp + (size_t)g * QUANT_XT_ROWS + 16 * h);
            for (int c = 0; c < C; c++) {
                float ws = ws0[(size_t)c * (size_t)groups + (size_t)g];
                __m512 scale = _mm512_mul_ps(xs_g, _mm512_set1_ps(ws));
                acc[h][c] = _mm512_add_ps(acc[h][c],
                                          _mm512_mul_ps(_mm512_cvtepi32_ps(dot[h][c]), scale));
            }
        }
    }
    /* + bias (or + 0, as the reference adds it: -0 becomes +0), then rows of four columns:
     * a 4 x 4 transpose in each 128-bit quarter gives rows 4q + i in quarter q of row_i */
    for (int h = 0; h < 2; h++) {
        __m512 v[C];
        for (int c = 0; c < C; c++)
            v[c] = _mm512_add_ps(acc[h][c], _mm512_set1_ps(bias ? bias[o + c] : 0.0f));
        __m512 t0 = _mm512_unpacklo_ps(v[0], v[1]), t1 = _mm512_unpackhi_ps(v[0], v[1]);
        __m512 t2 = _mm512_unpacklo_ps(v[2], v[3]), t3 = _mm512_unpackhi_ps(v[2], v[3]);
        __m512 row_i[4] = {
            _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2))),
            _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2))),
            _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3))),
            _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3)))};
        float quarters[4][16];
        for (int i = 0; i < 4; i++) _mm512_storeu_ps(quarters[i], row_i[i]);
        for (int q = 0; q < 4; q++)
            for (int i = 0; i < 4; i++) {
                int r = 16 * h + 4 * q + i;
                if (r < rows)
                    memcpy(out + (size_t)r * (size_t)OC + (size_t)o, quarters[i] + 4 * q,
                           4 * sizeof(float));
            }
    }
}

/* Rows 0 .. N-1 (any N) and columns o0 .. o1-1 (a multiple of QUANT_XT_COLS): blocks of
 * QUANT_XT_ROWS rows packed once, the column tiles inside. */
void simd_q8_gemm_tiles(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1) {
    int cols = w->cols, groups = quant_groups(cols, w->group), OC = w->rows;
    uint8_t xp[QUANT_XT_MAX_COLS * QUANT_XT_ROWS];            /* 128 KiB */
    float xsp[QUANT_XT_MAX_GROUPS * QUANT_XT_ROWS];           /* 32 KiB */
    int32_t starts[QUANT_XT_MAX_GROUPS][QUANT_XT_COLS];        /* 4 KiB */
    for (int n = 0; n < N; n += QUANT_XT_ROWS) {
        int rows = N - n < QUANT_XT_ROWS ? N - n : QUANT_XT_ROWS;
        pack_rows(xp, xsp, xq + (size_t)n * (size_t)cols, xs + (size_t)n * (size_t)groups,
                  rows, cols, groups);
        for (int o = o0; o < o1; o += QUANT_XT_COLS) {
            xt_starts(starts, w, o);
            xt_tile(out + (size_t)n * (size_t)OC, xp, xsp, w, starts, bias, rows, o);
        }
    }
}

/* Whether the tile takes w: rows of at most QUANT_XT_MAX_COLS values in at most
 * QUANT_XT_MAX_GROUPS groups that are whole quads (the last group too). */
int simd_q8_gemm_takes(const QuantMatrix *w) {
    return w->cols <= QUANT_XT_MAX_COLS && w->cols % 4 == 0 && w->group % 4 == 0 &&
           quant_groups(w->cols, w->group) <= QUANT_XT_MAX_GROUPS;
}

#else   /* the 256-bit tile */
/* The 256-bit tile: QUANT_GEMM_R rows of x by QUANT_GEMM_C rows of w (output columns):
 * per group, each chunk of x is prepared once for the tile's rows of w and each chunk of w
 * loaded once for its rows of x, and every (row of x, row of w) pair keeps dot_row_avx2's eight float
 * lanes in a register of its own. The vocabulary:
 *   GemmX            a chunk of 32 values of x, prepared for the multiplies (gemm_x)
 *   gemm_start       a pair's integer lanes before its products with one chunk of w
 *   gemm_dot_add     those lanes plus the products of a GemmX with that chunk of w
 * They keep dot_row_avx2's integer lanes exactly (lane j: the products of values 4j .. 4j+3
 * of each chunk; integer sums are exact, however they are formed), and the float steps are
 * dot_row_avx2's in its order (the lanes converted, times x's scale times w's, added with
 * mul_add, group after group; sum_lanes; + bias): every output has the bits the row path
 * gives it. */
#define QUANT_GEMM_X_CHUNKS 2   /* the most chunks of a group the tile takes (groups of 64) */

#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
/* With VNNI, x moves to unsigned rather than its sign onto w: x + 128 is in [1, 255] (every
 * q is in [-127, 127]), and vpdpbusd's lanes then gain 128 times w's lane sums, which a
 * pair starts below by subtracting them (formed once per group of a column tile's rows of
 * w, for all the rows of x: gemm_starts). One instruction per pair and chunk, where the
 * sign trick takes two. */
typedef __m256i GemmX;   /* x + 128 as unsigned bytes */
#define GEMM_HAS_STARTS 1

static inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#endif
}

static inline GemmX gemm_x(const int8_t *p) {
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)p), _mm256_set1_epi8(-128));
}

static inline __m256i gemm_start(__m256i acc, __m256i w) {   /* acc - 128 * w's lane sums */
    return _mm256_sub_epi32(acc, dpbusd(_mm256_setzero_si256(), _mm256_set1_epi8(-128), w));
}

static inline __m256i gemm_dot_add(__m256i acc, GemmX x, __m256i w) {
    return dpbusd(acc, x, w);
}
#else
/* Without VNNI, dot32_add's sign trick (maddubs's int16 pair sums could saturate on
 * x + 128): each row of x keeps x and |x|. */
typedef struct {
    __m256i x, ax;
} GemmX;

static inline GemmX gemm_x(const int8_t *p) {
    GemmX v;
    v.x = _mm256_loadu_si256((const __m256i *)p);
    v.ax = _mm256_abs_epi8(v.x);
    return v;
}

static inline __m256i gemm_start(__m256i acc, __m256i w) {
    (void)w;
    return acc;
}
#define GEMM_HAS_STARTS 0   /* every pair starts from zero */

static inline __m256i gemm_dot_add(__m256i acc, GemmX x, __m256i w) {
    return dot32_add(acc, x.ax, x.x, w);
}
#endif

#if defined(__AVX512VL__)   /* 32 vector registers: 16 pairs' float lanes and 4 rows of x */
#define QUANT_GEMM_R 4
#define QUANT_GEMM_C 4
#else                        /* 16: 8 pairs' float lanes, 2 rows of x (x and |x|) */
#define QUANT_GEMM_R 2
#define QUANT_GEMM_C 4
#endif
_Static_assert(QUANT_GEMM_C == 4, "gemm_scales forms four columns' scales in one register");
_Static_assert(QUANT_GEMM_R == SIMD_Q8_GEMM_ROWS && QUANT_GEMM_C == SIMD_Q8_GEMM_COLS,
               "simd.h announces this tile");
#define QUANT_GEMM_SCALE_GROUPS 32   /* groups whose scale products are formed at a time */
#define QUANT_GEMM_MAX_GROUPS 512    /* the most groups in a row the tile takes (16,384
                                      * columns of groups of 32): its columns' scales, side
                                      * by side, fill 8 KiB of the stack */

/* scale[k] (QUANT_GEMM_R, QUANT_GEMM_C) = x's scale times w's for group g0 + k, k < g1 - g0,
 * of the tile's rows of x (scales xs0, groups apart) and of w (ws4: the columns' scales side
 * by side, a group's four in a row), as dot_row_avx2 forms them: four columns in one
 * multiply. Formed ahead of the loop over those groups, which broadcasts each from memory
 * into its multiply-add (read as a plain float: _mm256_broadcast_ss's pointer would make gcc
 * keep the tile's sums in memory). */
static ALWAYS_INLINE void gemm_scales(float scale[][QUANT_GEMM_R][QUANT_GEMM_C], const float *xs0,
                                      float (*ws4)[QUANT_GEMM_C], int groups, int g0,
                                      int g1) {
    for (int g = g0; g < g1; g++) {
        __m128 w_scale = _mm_loadu_ps(ws4[g]);
        for (int r = 0; r < QUANT_GEMM_R; r++)
            _mm_storeu_ps(scale[g - g0][r],
                          _mm_mul_ps(_mm_set1_ps(xs0[(size_t)r * (size_t)groups + (size_t)g]),
                                     w_scale));
    }
}

/* starts[g][c] (whole groups, QUANT_GEMM_C) = the lanes a pair of group g and column o + c
 * starts from: gemm_start over the group's chunks of that row of w. */
static void gemm_starts(__m256i (*starts)[QUANT_GEMM_C], const QuantMatrix *w, int o) {
    int cols = w->cols, group = w->group;
    for (int g = 0; g < cols / group; g++)
        for (int c = 0; c < QUANT_GEMM_C; c++) {
            const int8_t *w_c = w->q + (size_t)(o + c) * (size_t)cols + (size_t)g * (size_t)group;
            __m256i start = _mm256_setzero_si256();
            for (int i = 0; i < group; i += QUANT_CHUNK)
                start = gemm_start(start, load_chunk(w_c + i));
            starts[g][c] = start;
        }
}

/* out rows n .. n+QUANT_GEMM_R-1, columns o .. o+QUANT_GEMM_C-1 = those rows of x times
 * those rows of w (their scales ws4, as gemm_scales takes them; their pairs' starting
 * lanes starts, as gemm_starts forms them, unread without VNNI), + bias, for chunks =
 * group / 32 of 1 or 2 (a constant at each call: the group's prepared chunks of x stay in
 * registers). */
static ALWAYS_INLINE void gemm_tile_avx2(float *out, const int8_t *xq, const float *xs,
                                         const QuantMatrix *w, float (*ws4)[QUANT_GEMM_C],
                                         __m256i (*starts)[QUANT_GEMM_C],
                                         const float *bias, int n, int o, int chunks) {
    enum { R = QUANT_GEMM_R, C = QUANT_GEMM_C };
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group), OC = w->rows;
    int whole_groups = cols / group;
    const int8_t *x0 = xq + (size_t)n * (size_t)cols, *w0 = w->q + (size_t)o * (size_t)cols;
    const float *xs0 = xs + (size_t)n * (size_t)groups;
    __m256 acc[R][C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    float scale[QUANT_GEMM_SCALE_GROUPS][R][C];
    int g = 0;
    while (g < whole_groups) {
        int g1 = whole_groups - g < QUANT_GEMM_SCALE_GROUPS ? whole_groups
                                                             : g + QUANT_GEMM_SCALE_GROUPS;
        gemm_scales(scale, xs0, ws4, groups, g, g1);
        for (float (*s_g)[C] = scale[0]; g < g1; g++, s_g += R) {
            size_t at = (size_t)g * (size_t)group;
            GemmX x[R][QUANT_GEMM_X_CHUNKS];
            for (int r = 0; r < R; r++)
                for (int k = 0; k < chunks; k++)
                    x[r][k] = gemm_x(x0 + (size_t)r * (size_t)cols + at + (size_t)k * QUANT_CHUNK);
            for (int c = 0; c < C; c++) {
                const int8_t *w_c = w0 + (size_t)c * (size_t)cols + at;
                __m256i start = GEMM_HAS_STARTS ? starts[g][c] : _mm256_setzero_si256();
                __m256i w_k[QUANT_GEMM_X_CHUNKS];
                for (int k = 0; k < chunks; k++) w_k[k] = load_chunk(w_c + k * QUANT_CHUNK);
#if GEMM_HAS_STARTS
                IN_REGISTER(start);
                for (int k = 0; k < chunks; k++) IN_REGISTER(w_k[k]);
#endif
                for (int r = 0; r < R; r++) {
                    __m256i dot = start;
                    for (int k = 0; k < chunks; k++) dot = gemm_dot_add(dot, x[r][k], w_k[k]);
                    acc[r][c] = mul_add(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(s_g[r][c]),
                                        acc[r][c]);
                }
            }
        }
    }
    if (g < groups) {   /* a short last group (once per tile): its values past the last
                         * whole chunk summed in scalar code and added to lane 0, as
                         * dot_row_avx2 does */
        size_t at = (size_t)g * (size_t)group;
        int len = cols - g * group, whole = len / QUANT_CHUNK * QUANT_CHUNK;
        gemm_scales(scale, xs0, ws4, groups, g, g + 1);
        for (int c = 0; c < C; c++) {
            const int8_t *w_c = w0 + (size_t)c * (size_t)cols + at;
            for (int r = 0; r < R; r++) {
                const int8_t *x_r = x0 + (size_t)r * (size_t)cols + at;
                __m256i dot = _mm256_setzero_si256();
                for (int i = 0; i < whole; i += QUANT_CHUNK)
                    dot = gemm_dot_add(gemm_start(dot, load_chunk(w_c + i)), gemm_x(x_r + i),
                                       load_chunk(w_c + i));
                dot = add_lane0(dot, dot_i8(x_r + whole, w_c + whole, len - whole));
                acc[r][c] = mul_add(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(scale[0][r][c]),
                                    acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            out[(size_t)(n + r) * (size_t)OC + (size_t)(o + c)] =
                sum_lanes(acc[r][c]) + (bias ? bias[o + c] : 0.0f);
}

/* Tiles over rows 0 .. N-1 and columns o0 .. o1-1 (N and o1 - o0 multiples of the tile),
 * column tiles outside: a tile's rows of w, and their scales set side by side once for all
 * the rows of x, stay in L1 while the rows of x go past. */
void simd_q8_gemm_tiles(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1) {
    int chunks = w->group / QUANT_CHUNK, groups = quant_groups(w->cols, w->group);
    float ws4[QUANT_GEMM_MAX_GROUPS][QUANT_GEMM_C];
    __m256i starts[GEMM_HAS_STARTS ? QUANT_GEMM_MAX_GROUPS : 1][QUANT_GEMM_C];   /* 64 KiB */
    for (int o = o0; o < o1; o += QUANT_GEMM_C) {
        for (int g = 0; g < groups; g++)
            for (int c = 0; c < QUANT_GEMM_C; c++)
                ws4[g][c] = w->scale[(size_t)(o + c) * (size_t)groups + (size_t)g];
        if (GEMM_HAS_STARTS) gemm_starts(starts, w, o);
        for (int n = 0; n < N; n += QUANT_GEMM_R) {
            if (chunks == 1) gemm_tile_avx2(out, xq, xs, w, ws4, starts, bias, n, o, 1);
            else gemm_tile_avx2(out, xq, xs, w, ws4, starts, bias, n, o, QUANT_GEMM_X_CHUNKS);
        }
    }
}

/* Whether the tile takes w's groups: those of one or two chunks (other multiples of 32 go
 * one row at a time: their chunks of x would not stay in registers), at most
 * QUANT_GEMM_MAX_GROUPS of them in a row. */
int simd_q8_gemm_takes(const QuantMatrix *w) {
    return (w->group == QUANT_CHUNK || w->group == QUANT_GEMM_X_CHUNKS * QUANT_CHUNK) &&
           quant_groups(w->cols, w->group) <= QUANT_GEMM_MAX_GROUPS;
}
#endif   /* SIMD_Q8_EXACT */

#else
/* ISO C wants a declaration in every translation unit: a build without AVX2 has nothing
 * else here. */
typedef int simd_quant_x86_none;
#endif /* SIMD_Q8_X86 */

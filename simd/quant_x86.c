/* quant_x86.c: quant.c's int8 kernels for AVX2, where AVX-512 VNNI or AVX-VNNI (when the
 * build has them) replace the multiply's instructions by one.
 *
 * Quantizing activations (simd_q8_quantize), the matmul of one row of x at a
 * time for groups that are a multiple of 32, or of 16 in rows of a multiple of 32
 * (simd_q8_matmul_rows), and the prefill GEMM's
 * register tile, which takes several rows of x at once (simd_q8_gemm_tiles): each gives
 * quant.c's reference's bits, so a prompt run at once and token by token agree exactly.
 * Both matmuls form each group's exact int32 dot product in vector lanes and then follow
 * the reference's float steps; the row path's lanes are values of one row, the tile's
 * lanes are rows of x. With AVX-512 VNNI, rows of w in quant.h's packed layout go to a
 * third kernel (simd_q8_matmul_packed, at the end), whose lanes are rows of w, for one row
 * of x and for many; the two above serve the rest (other groups, the rows after a
 * matrix's last block of 16, other builds).
 */
#include "simd/simd.h"

#if defined(SIMD_Q8_X86)
#include <immintrin.h>  /* AVX2 (and VNNI) intrinsics */
#include <math.h>       /* NAN, isfinite */
#include <stddef.h>     /* size_t */
#include <stdint.h>     /* int8_t, int32_t, uint8_t, uint32_t */
#include <string.h>     /* memcpy, memset */

#include "quant.h"      /* QuantMatrix, quant_groups, QUANT_Q_MAX */

#define QUANT_CHUNK 32      /* int8s per AVX2 register: the row path needs group % 32 == 0,
                             * or groups of 16 (two a register) in rows of a multiple of 32 */
#define QUANT_ROW_TILE 4    /* rows of w per pass of the SIMD matmul: each x load feeds four rows */
/* Rows of x against a w of at least this many int8s read w as four sequential runs of
 * rows rather than four adjacent rows at a time: such a w comes from memory at every
 * token, and the prefetchers stream four runs faster. Below it (the shipped model's 16 KiB
 * matrices) w stays in the caches. A measured choice, not a derived one (s15m's smallest
 * matrix is 81 KiB; docs/performance.md, Where the speed comes from). */
#define QUANT_STREAM_BYTES (72 << 10)
/* Bytes ahead of its reads at which the row path asks for each row of a cold w's next line
 * (QuantMatrix.cold), and for its scales' line an eighth of that ahead (a scale serves 32
 * int8s; a quarter for groups of 16), on the cores simd_prefetch_rows names; the packed
 * rows' decode likewise for each of its four runs, on those simd_prefetch_packed names.
 * There the hardware's prefetcher alone leaves a w read from memory short of the
 * bandwidth; on a w in the caches the prefetches only cost, hence cold matrices only
 * (docs/performance.md, Where the speed comes from). */
#define QUANT_PREFETCH_BYTES 2048

/* The exact dot product of a (n,) and b (n,), int8 values (quant.c's dot_i8): the values of
 * a short last group past its last whole register. */
static int32_t dot_i8(const int8_t *a, const int8_t *b, int n) {
    int32_t sum = 0;
    for (int i = 0; i < n; i++) sum += (int32_t)a[i] * (int32_t)b[i];
    return sum;
}

/* -- Quantizing activations --
 *
 * quant.c's quant_quantize for a row's groups whose length is a whole number of float
 * registers (QUANT_LANES floats), a group in registers at a time: its largest |x| (exact:
 * a max is the same in any order; NaN if a value is NaN), quant.c's scale_for (the same
 * division), then round_reference lane by lane: the same IEEE division, then round half
 * away from zero as a truncation, trunc(v + (the largest float below 0.5, with v's sign)):
 * the same integer as roundf(v) for every float |v| < 2^22 (all of them checked), and here
 * |v| <= 127 x (x / scale, scale = max|x| / 127; up to 2x that where the scale is
 * subnormal), then the clamp to +-127. */
#if defined(__AVX512F__)
#define QUANT_LANES 16
/* |x| of x's whole registers (n a multiple of 16): their largest, or NaN if one is NaN */
static inline float group_absmax(const float *x, int n) {
    __m512 vmax = _mm512_setzero_ps();
    __mmask16 nan = 0;
    for (int i = 0; i < n; i += QUANT_LANES) {
        __m512 v = _mm512_loadu_ps(x + i);
        vmax = _mm512_max_ps(vmax, _mm512_abs_ps(v));
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);   /* _mm512_max_ps drops NaN */
    }
    return nan ? NAN : _mm512_reduce_max_ps(vmax);
}
/* q (n,) = round_reference of x (n,), n a multiple of 16 */
static inline void group_round(int8_t *q, const float *x, int n, float scale) {
    const __m512 vscale = _mm512_set1_ps(scale), sign = _mm512_set1_ps(-0.0f);
    const __m512 below_half = _mm512_set1_ps(0x1.fffffep-2f);
    const __m512i qmin = _mm512_set1_epi32(-QUANT_Q_MAX);
    for (int i = 0; i < n; i += QUANT_LANES) {
        __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + i), vscale);
        __m512 nudge = _mm512_or_ps(_mm512_and_ps(v, sign), below_half);   /* +-(0.5 - ulp) */
        __m512i r = _mm512_cvttps_epi32(_mm512_add_ps(v, nudge));
        /* the clamp: -127 here, +127 by the saturating narrowing */
        _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtsepi32_epi8(_mm512_max_epi32(r, qmin)));
    }
}
#else
#define QUANT_LANES 8
static inline float group_absmax(const float *x, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 vmax = _mm256_setzero_ps(), vnan = _mm256_setzero_ps();
    for (int i = 0; i < n; i += QUANT_LANES) {
        __m256 v = _mm256_loadu_ps(x + i);
        vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, v));
        vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));  /* _mm256_max_ps drops NaN */
    }
    if (_mm256_movemask_ps(vnan)) return NAN;
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
static inline void group_round(int8_t *q, const float *x, int n, float scale) {
    const __m256 vscale = _mm256_set1_ps(scale), sign = _mm256_set1_ps(-0.0f);
    const __m256 below_half = _mm256_set1_ps(0x1.fffffep-2f);
    const __m256i qmin = _mm256_set1_epi32(-QUANT_Q_MAX);
    for (int i = 0; i < n; i += QUANT_LANES) {
        __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), vscale);
        __m256 nudge = _mm256_or_ps(_mm256_and_ps(v, sign), below_half);   /* +-(0.5 - ulp) */
        __m256i r32 = _mm256_max_epi32(_mm256_cvttps_epi32(_mm256_add_ps(v, nudge)), qmin);
        __m128i r16 = _mm_packs_epi32(_mm256_castsi256_si128(r32),   /* +127: saturating */
                                      _mm256_extracti128_si256(r32, 1));
        _mm_storel_epi64((__m128i *)(q + i), _mm_packs_epi16(r16, r16));
    }
}
#endif

int simd_q8_quantize(int8_t *q, float *scale, const float *x, int cols, int group) {
    int groups = quant_groups(cols, group), whole = 0;
    for (int at = 0; whole < groups; whole++, at += group) {   /* the scales first: ... */
        int n = cols - at < group ? cols - at : group;
        if (n % QUANT_LANES != 0) break;   /* quant.c does this group and the rest */
        float s = group_absmax(x + at, n) / (float)QUANT_Q_MAX;   /* quant.c's scale_for */
        scale[whole] = isfinite(s) ? s : NAN;
    }
    for (int g = 0, at = 0; g < whole; g++, at += group) {   /* ... then the values */
        int n = cols - at < group ? cols - at : group;
        if (scale[g] > 0.0f)
            group_round(q + at, x + at, n, scale[g]);
        else   /* zero (all-zero group, or underflow) or NaN */
            memset(q + at, 0, (size_t)n);
    }
    return whole;
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

/* v with t added to its lane 0. */
static inline __m256i add_lane0(__m256i v, int32_t t) {
    return _mm256_add_epi32(v, _mm256_setr_epi32(t, 0, 0, 0, 0, 0, 0, 0));
}

/* The 32 bytes at p (a chunk of a row of x or of w). */
static inline __m256i load_chunk(const int8_t *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}

/* Per 128-bit half, the sums of a's, b's, c's and d's four int32 lanes there: (a, b, c, d)
 * of the low half, then of the high half, exact. */
static inline __m256i rows4_halves(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i ab = _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
    __m256i cd = _mm256_add_epi32(_mm256_unpacklo_epi32(c, d), _mm256_unpackhi_epi32(c, d));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
}

/* The sums of the eight int32 lanes of a, b, c and d: (4,), exact. */
static inline __m128i sum_lanes4_i32(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i h = rows4_halves(a, b, c, d);
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX512BW__)
/* rows4_halves on 512 bits: per 128-bit block, the sums of each of a, b, c, d's four
 * lanes there. */
static inline __m512i rows4_blocks512(__m512i a, __m512i b, __m512i c, __m512i d) {
    __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
}
#endif

/* -- One row of x at a time (decode) --
 *
 * Each group's products gather in eight int32 lanes (dot32_add), which are then summed to
 * the group's exact dot product; quant.c's dot_row_reference's float steps follow: acc +=
 * (float)dot * (x's scale * w's scale), group after group. Every output has the
 * reference's bits. */

/* x · w for one activation row x and one weight row w (q (cols,), scales (groups,)):
 * dot_row_reference for group % 32 == 0. The last group may be shorter than group: its
 * values past the last whole register are summed in scalar code and added to lane 0. */
static float dot_row_avx2(const int8_t *xq, const float *xs, const int8_t *wq,
                          const float *ws, int cols, int group, int groups) {
    float acc = 0.0f;
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
        int32_t sum = _mm_cvtsi128_si32(sum_lanes4_i32(dot, dot, dot, dot));
        acc += (float)sum * (xs[g] * ws[g]);
    }
    return acc;
}

/* (a[0], a[1], b[0], b[1]): two rows' scales of a pair of groups. */
static inline __m128 scale_pairs(const float *a, const float *b) {
    __m128 lo = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)a));
    return _mm_loadh_pi(lo, (const __m64 *)b);
}

/* acc (4,) + the four rows' terms of groups g and g + 1: terms (8,) = the exact sums of
 * group g for rows 0-3, then of g + 1, each times xs[g] x s_r[r][g] (the reference's float
 * steps: group g's before g + 1's). */
static inline __m128 add_group_pair(__m128 acc, __m256 terms, const float *xs,
                                    const float *const s_r[4], int g) {
    __m128 s01 = scale_pairs(s_r[0] + g, s_r[1] + g);
    __m128 s23 = scale_pairs(s_r[2] + g, s_r[3] + g);
    __m128 s_g = _mm_shuffle_ps(s01, s23, _MM_SHUFFLE(2, 0, 2, 0));
    __m128 s_g1 = _mm_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 1, 3, 1));
    acc = _mm_add_ps(acc, _mm_mul_ps(_mm256_castps256_ps128(terms),
                                     _mm_mul_ps(_mm_set1_ps(xs[g]), s_g)));
    return _mm_add_ps(acc, _mm_mul_ps(_mm256_extractf128_ps(terms, 1),
                                      _mm_mul_ps(_mm_set1_ps(xs[g + 1]), s_g1)));
}

/* dot_rows4_avx2 for groups of 32 and cols a multiple of 32 (llama.cpp's Q8_0, quantize's
 * files), two groups at a time: the four rows' lanes of both groups are summed to their
 * 8 exact group sums by one reduction, the scales loaded in pairs, and the reference's
 * float steps follow, group g's before g + 1's. The 256-bit loop of one group at a time
 * spent a reduction, four scalar scale loads and its loop's bookkeeping per group.
 *   - AVX-512 VNNI: a group pair is one 512-bit register; w ^ 0x80 = w + 128 (in [1,
 *     255]) is the unsigned operand and x the signed one, so each lane starts from -128
 *     times the sum of its four x and ends at its four exact products (no sign step);
 *   - otherwise two 256-bit chunks, each dot32_add's sign trick.
 * w_r, s_r: the four rows' q and scales; prefetch 1: each step asks for the rows' lines
 * QUANT_PREFETCH_BYTES ahead. Same bits as dot_rows4_avx2's own loop. */
static inline __attribute__((always_inline)) void
dot_rows4_pairs(float *sums, const int8_t *xq, const float *xs, const int8_t *const w_r[4],
                const float *const s_r[4], int groups, int prefetch) {
    __m128 acc = _mm_setzero_ps();   /* the four rows' sums */
    int g = 0;
    for (; g + 2 <= groups; g += 2) {   /* a line (64 int8s) of each row a step */
        size_t at = (size_t)g * QUANT_CHUNK;
        if (prefetch)
            for (int r = 0; r < 4; r++) {
                _mm_prefetch((const char *)(w_r[r] + at) + QUANT_PREFETCH_BYTES, _MM_HINT_T0);
                if (g % 16 == 0)   /* a line of scales */
                    _mm_prefetch((const char *)(s_r[r] + g) + QUANT_PREFETCH_BYTES / 8,
                                 _MM_HINT_T0);
            }
#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX512BW__)
        const __m512i flip = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
        __m512i x = _mm512_loadu_si512(xq + at);
        __m512i start = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, flip, x));
        __m512i d[4];
        for (int r = 0; r < 4; r++) {
            __m512i w = _mm512_xor_si512(_mm512_loadu_si512(w_r[r] + at), flip);   /* w + 128 */
            d[r] = _mm512_dpbusd_epi32(start, w, x);
        }
        /* per 128-bit block, the four rows' sums of its four lanes: blocks 0-1 are group g,
         * 2-3 group g + 1; then blocks 0 + 1 and 2 + 3 */
        __m512i blocks = rows4_blocks512(d[0], d[1], d[2], d[3]);
        __m256i dots = _mm512_castsi512_si256(_mm512_add_epi32(
            _mm512_shuffle_i32x4(blocks, blocks, _MM_SHUFFLE(2, 0, 2, 0)),
            _mm512_shuffle_i32x4(blocks, blocks, _MM_SHUFFLE(3, 1, 3, 1))));
#else
        const __m256i zero = _mm256_setzero_si256();
        __m256i x0 = load_chunk(xq + at), x1 = load_chunk(xq + at + QUANT_CHUNK);
        __m256i ax0 = _mm256_abs_epi8(x0), ax1 = _mm256_abs_epi8(x1), d0[4], d1[4];
        for (int r = 0; r < 4; r++) {
            d0[r] = dot32_add(zero, ax0, x0, load_chunk(w_r[r] + at));
            d1[r] = dot32_add(zero, ax1, x1, load_chunk(w_r[r] + at + QUANT_CHUNK));
        }
        /* per 128-bit half, the four rows' sums of its four lanes: group g's, g + 1's; then
         * the halves of each group added */
        __m256i lo = rows4_halves(d0[0], d0[1], d0[2], d0[3]);
        __m256i hi = rows4_halves(d1[0], d1[1], d1[2], d1[3]);
        __m256i dots = _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20),
                                        _mm256_permute2x128_si256(lo, hi, 0x31));
#endif
        /* g: rows 0-3, then g + 1 */
        acc = add_group_pair(acc, _mm256_cvtepi32_ps(dots), xs, s_r, g);
    }
    if (g < groups) {   /* an odd last group: dot_rows4_avx2's steps */
        size_t at = (size_t)g * QUANT_CHUNK;
        __m256i x = load_chunk(xq + at), ax = _mm256_abs_epi8(x), d[4];
        for (int r = 0; r < 4; r++)
            d[r] = dot32_add(_mm256_setzero_si256(), ax, x, load_chunk(w_r[r] + at));
        __m128 terms = _mm_cvtepi32_ps(sum_lanes4_i32(d[0], d[1], d[2], d[3]));
        __m128 scales = _mm_mul_ps(_mm_set1_ps(xs[g]),
                                   _mm_setr_ps(s_r[0][g], s_r[1][g], s_r[2][g], s_r[3][g]));
        acc = _mm_add_ps(acc, _mm_mul_ps(terms, scales));
    }
    _mm_storeu_ps(sums, acc);
}

/* dot_rows4_avx2 for groups of 16 (GGUF Q6_K's) and cols a multiple of 32: a chunk of 32
 * values is two groups, one a 128-bit half, so one reduction of the four rows' lanes per
 * half (rows4_halves) gives both groups' 8 exact sums, and dot_rows4_pairs's float steps
 * follow, group g's before g + 1's. prefetch 1: each row's lines asked for
 * QUANT_PREFETCH_BYTES ahead, its scales' as far ahead in values. Same bits as
 * dot_rows4_avx2's own loop. */
static inline __attribute__((always_inline)) void
dot_rows4_g16(float *sums, const int8_t *xq, const float *xs, const int8_t *const w_r[4],
              const float *const s_r[4], int groups, int prefetch) {
    __m128 acc = _mm_setzero_ps();   /* the four rows' sums */
    const __m256i zero = _mm256_setzero_si256();
    for (int g = 0; g < groups; g += 2) {   /* groups is even: cols % 32 == 0 */
        size_t at = (size_t)g * 16;
        if (prefetch && g % 4 == 0)   /* a line (64 int8s) of each row */
            for (int r = 0; r < 4; r++) {
                _mm_prefetch((const char *)(w_r[r] + at) + QUANT_PREFETCH_BYTES, _MM_HINT_T0);
                if (g % 16 == 0)   /* a line of scales */
                    _mm_prefetch((const char *)(s_r[r] + g) + QUANT_PREFETCH_BYTES / 4,
                                 _MM_HINT_T0);
            }
        __m256i x = load_chunk(xq + at), ax = _mm256_abs_epi8(x), d[4];
        for (int r = 0; r < 4; r++) d[r] = dot32_add(zero, ax, x, load_chunk(w_r[r] + at));
        /* per 128-bit half, the four rows' sums of its four lanes: group g's, then g + 1's */
        acc = add_group_pair(acc, _mm256_cvtepi32_ps(rows4_halves(d[0], d[1], d[2], d[3])),
                             xs, s_r, g);
    }
    _mm_storeu_ps(sums, acc);
}

/* sums (4,) = x · w_r for QUANT_ROW_TILE = 4 weight rows w_r, step rows apart (q rows
 * step * cols apart, scale rows step * groups apart): dot_row_avx2 four times over, each x
 * register loaded once for the four rows; prefetch 1: each row's lines asked for
 * QUANT_PREFETCH_BYTES ahead. Each row sees dot_row_avx2's operations in its order, so an
 * output has the same bits whichever of the two computes it. */
static void dot_rows4_avx2(float *sums, const int8_t *xq, const float *xs, const int8_t *wq,
                           const float *ws, size_t step, int cols, int group, int groups,
                           int prefetch) {
    size_t q_step = step * (size_t)cols, s_step = step * (size_t)groups;
    const int8_t *w0 = wq, *w1 = w0 + q_step, *w2 = w1 + q_step, *w3 = w2 + q_step;
    const float *s0 = ws, *s1 = s0 + s_step, *s2 = s1 + s_step, *s3 = s2 + s_step;
    const int8_t *const w_r[4] = {w0, w1, w2, w3};
    const float *const s_r[4] = {s0, s1, s2, s3};
    if (group == QUANT_CHUNK && cols % QUANT_CHUNK == 0) {
        if (prefetch)   /* constant in each call, as the inlined loop wants */
            dot_rows4_pairs(sums, xq, xs, w_r, s_r, groups, 1);
        else
            dot_rows4_pairs(sums, xq, xs, w_r, s_r, groups, 0);
        return;
    }
    if (group == QUANT_CHUNK / 2) {   /* cols % 32 == 0 (simd_q8_matmul_rows) */
        if (prefetch)
            dot_rows4_g16(sums, xq, xs, w_r, s_r, groups, 1);
        else
            dot_rows4_g16(sums, xq, xs, w_r, s_r, groups, 0);
        return;
    }
    __m128 acc = _mm_setzero_ps();   /* the four rows' sums */
    int whole_groups = cols / group, c = 0;
    for (int g = 0; g < groups; g++) {
        int end = g < whole_groups ? c + group : cols;
        __m256i dot[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                          _mm256_setzero_si256(), _mm256_setzero_si256()};
        for (; c + QUANT_CHUNK <= end; c += QUANT_CHUNK) {
            __m256i x = load_chunk(xq + c);
            __m256i ax = _mm256_abs_epi8(x);
            if (prefetch && c % 64 == 0) {   /* a line of each row, as dot_rows4_pairs */
                _mm_prefetch((const char *)(w0 + c) + QUANT_PREFETCH_BYTES, _MM_HINT_T0);
                _mm_prefetch((const char *)(w1 + c) + QUANT_PREFETCH_BYTES, _MM_HINT_T0);
                _mm_prefetch((const char *)(w2 + c) + QUANT_PREFETCH_BYTES, _MM_HINT_T0);
                _mm_prefetch((const char *)(w3 + c) + QUANT_PREFETCH_BYTES, _MM_HINT_T0);
            }
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
        __m128 terms = _mm_cvtepi32_ps(sum_lanes4_i32(dot[0], dot[1], dot[2], dot[3]));
        __m128 scales = _mm_mul_ps(_mm_set1_ps(xs[g]), _mm_setr_ps(s0[g], s1[g], s2[g], s3[g]));
        acc = _mm_add_ps(acc, _mm_mul_ps(terms, scales));
    }
    _mm_storeu_ps(sums, acc);
}

/* Columns o0 .. of quant_matmul_block for group % 32 == 0, or groups of 16 in rows of a
 * multiple of 32: tiles of QUANT_ROW_TILE rows of w, then single rows (groups of 16: left
 * to the reference); a tile's rows of w (4 x cols bytes) stay in L1 while the N rows of x
 * go past them. A large w takes its tiles' four rows a quarter of the columns apart, so
 * that it is read as four sequential runs (decode, and prompts too short for the GEMM).
 * Every output has the reference's bits in each case. Returns the first column it did
 * not do (o0 for other groups). */
int simd_q8_matmul_rows(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1) {
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group), OC = w->rows;
    int o = o0, prefetch = w->cold && simd_prefetch_rows();
    int g16 = group == QUANT_CHUNK / 2 && cols % QUANT_CHUNK == 0;
    if (group % QUANT_CHUNK != 0 && !g16) return o0;   /* the reference's (quant.c) */
    if ((size_t)OC * (size_t)cols >= QUANT_STREAM_BYTES) {
        /* a large w: four sequential runs of rows, a quarter of the range apart; a tile's
         * four rows stay in L1 while the rows of x (one in decode, a few in a short
         * prompt) go past them; the first asks for the rows' next lines if w is cold and
         * the core pays for it (simd_prefetch_rows) */
        int quarter = (o1 - o0) / QUANT_ROW_TILE;
        for (int i = 0; i < quarter; i++)
            for (int n = 0; n < N; n++) {
                float sums[QUANT_ROW_TILE], *out_n = out + (size_t)n * (size_t)OC;
                dot_rows4_avx2(sums, xq + (size_t)n * (size_t)cols, xs + (size_t)n * (size_t)groups,
                               w->q + (size_t)(o0 + i) * (size_t)cols,
                               w->scale + (size_t)(o0 + i) * (size_t)groups, (size_t)quarter,
                               cols, group, groups, prefetch && n == 0);
                for (int r = 0; r < QUANT_ROW_TILE; r++) {
                    int c = o0 + i + r * quarter;
                    out_n[c] = sums[r] + (bias ? bias[c] : 0.0f);
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
            dot_rows4_avx2(sums, xq_n, xs_n, wq, ws, 1, cols, group, groups, 0);
            for (int r = 0; r < QUANT_ROW_TILE; r++)
                out_n[o + r] = sums[r] + (bias ? bias[o + r] : 0.0f);
        }
    }
    if (g16) return o;   /* the rows left over: the reference's */
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

/* -- The prefill GEMM: several rows of x at once --
 *
 * The tile's vector lanes are rows of x: each int32 lane gathers one (row of x, row of w)
 * pair's whole dot product for a group, so that after the group the lanes hold the
 * reference's exact int32 dot products and its float steps follow, a register of rows at a
 * time: (float)dot * (x's scale * w's scale), added to that pair's sum, group after group:
 * every output gets the reference's bits, as from the row path.
 *
 * x is first packed (pack_rows): a block of QUANT_XT_ROWS rows, four values (a quad) of
 * each row side by side; quad k of the block is QUANT_XT_ROWS x 4 bytes. One multiply then
 * adds to a register of rows the products of their quad k with the same four values of
 * one row of w, broadcast from memory: four products per lane. The multiply instructions
 * take one unsigned and one signed operand:
 *   - with VNNI (vpdpbusd) x is packed + 128 (in [1, 255]: every q is in [-127, 127]),
 *     which adds 128 times the sum of those four w to each lane, so each pair's lanes
 *     start the group from -128 times the sum of the group's w (xt_starts); one
 *     instruction per register and quad;
 *   - without, x is packed as it is and dot32_add's sign trick serves (|x| times w with
 *     x's sign; maddubs, then madd into int32), four instructions, starting from 0.
 * Padding rows are x = 0: their lanes end each group at 0 and are never stored.
 *   XtI, XtF          a register of int32 lanes, of float lanes (QUANT_XT_LANES rows)
 *   xt_dot(acc, x, ax, w)   acc + the products of quad registers x (|x|: ax) and w
 *   tile              QUANT_XT_V registers of rows (QUANT_XT_ROWS) x QUANT_XT_COLS columns */
#define QUANT_XT_COLS 4           /* rows of w (output columns) per tile */
#define QUANT_XT_MAX_COLS 4096    /* the most values of a row packed at once (a span) */
#define QUANT_XT_MAX_GROUPS 256   /* the most groups in a span */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX512BW__)
#define QUANT_XT_LANES 16
#define QUANT_XT_V 2              /* (32 registers: 2 x 8 pairs' int lanes (QUANT_XT_CHAINS),
                                   * 8 float sums, x, w) */
#define QUANT_XT_OFFSET 1         /* x + 128 */
typedef __m512i XtI;
typedef __m512 XtF;
#define xti_set1 _mm512_set1_epi32
#define xti_zero _mm512_setzero_si512
#define xti_add _mm512_add_epi32
#define xti_load(p) _mm512_loadu_si512(p)
#define xti_abs(x) (x)            /* unused with VNNI */
#define xt_dot(acc, x, ax, w) ((void)(ax), _mm512_dpbusd_epi32(acc, x, w))
#define xtf_zero _mm512_setzero_ps
#define xtf_set1 _mm512_set1_ps
#define xtf_load _mm512_loadu_ps
#define xtf_store _mm512_storeu_ps
#define xtf_add _mm512_add_ps
#define xtf_mul _mm512_mul_ps
#define xtf_cvt _mm512_cvtepi32_ps
#define xtf_unpacklo _mm512_unpacklo_ps
#define xtf_unpackhi _mm512_unpackhi_ps
#define xtf_unpacklo2(a, b) \
    _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)))
#define xtf_unpackhi2(a, b) \
    _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)))
#else
#define QUANT_XT_LANES 8
#define QUANT_XT_V 1              /* (16 registers: without VNNI 4 pairs' int lanes, 4 float
                                   * sums, x, |x|, w and the sign step's; with VNNI 2 x 4 int
                                   * lanes (QUANT_XT_CHAINS), 4 float sums, x, w) */
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
#define QUANT_XT_OFFSET 1
#define xt_dot(acc, x, ax, w) ((void)(ax), dpbusd256(acc, x, w))
static inline __m256i dpbusd256(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#endif
}
#define xti_abs(x) (x)
#else
#define QUANT_XT_OFFSET 0
#define xt_dot(acc, x, ax, w) dot32_add(acc, ax, x, w)
#define xti_abs(x) _mm256_abs_epi8(x)
#endif
typedef __m256i XtI;
typedef __m256 XtF;
#define xti_set1 _mm256_set1_epi32
#define xti_zero _mm256_setzero_si256
#define xti_add _mm256_add_epi32
#define xti_load(p) _mm256_loadu_si256((const __m256i *)(p))
#define xtf_zero _mm256_setzero_ps
#define xtf_set1 _mm256_set1_ps
#define xtf_load _mm256_loadu_ps
#define xtf_store _mm256_storeu_ps
#define xtf_add _mm256_add_ps
#define xtf_mul _mm256_mul_ps
#define xtf_cvt _mm256_cvtepi32_ps
#define xtf_unpacklo _mm256_unpacklo_ps
#define xtf_unpackhi _mm256_unpackhi_ps
#define xtf_unpacklo2(a, b) \
    _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)))
#define xtf_unpackhi2(a, b) \
    _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)))
#endif
#define QUANT_XT_ROWS (QUANT_XT_V * QUANT_XT_LANES)   /* rows of x per tile */
/* Sets of int32 sums a group's quads take in turn (xt_tile), added at the group's end
 * (exact: the same integers). With VNNI each quad is one vpdpbusd into each sum, which
 * waits for the sum's previous one (latency 5 on Intel's cores); two sets keep twice as
 * many in flight, most of all for AVX-VNNI's four sums a tile (llvm-mca's Alder Lake: 5.1
 * -> 2.6 cycles a quad). Without VNNI a quad is four instructions of which only the last
 * adds to the sum: one set. */
#define QUANT_XT_CHAINS (QUANT_XT_OFFSET ? 2 : 1)
#define QUANT_XT_MASK (QUANT_XT_OFFSET ? 0x80808080u : 0u)   /* x + 128 = x ^ 0x80 */
_Static_assert(QUANT_XT_COLS == SIMD_Q8_GEMM_COLS && QUANT_XT_LANES == SIMD_Q8_GEMM_ROWS,
               "simd.h announces this tile");

#if QUANT_XT_LANES == 16
/* The transpose of a 16 x 16 block of int32s: v[i] = row i in, column i out (four
 * 4 x 4 transposes inside 128-bit quarters, then the quarters moved across registers). */
static inline void transpose16_i32(__m512i v[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int j = 0; j < 16; j += 4) {   /* u[j + m], quarter q: column 4q + m, rows j .. j+3 */
        u[j] = _mm512_unpacklo_epi64(t[j], t[j + 2]);
        u[j + 1] = _mm512_unpackhi_epi64(t[j], t[j + 2]);
        u[j + 2] = _mm512_unpacklo_epi64(t[j + 1], t[j + 3]);
        u[j + 3] = _mm512_unpackhi_epi64(t[j + 1], t[j + 3]);
    }
    for (int m = 0; m < 4; m++) {   /* column 4q + m gathers quarter q of u[m], u[4 + m], ... */
        __m512i p0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x44);
        __m512i p1 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xEE);
        __m512i p2 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x44);
        __m512i p3 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xEE);
        v[m] = _mm512_shuffle_i32x4(p0, p2, 0x88);
        v[4 + m] = _mm512_shuffle_i32x4(p0, p2, 0xDD);
        v[8 + m] = _mm512_shuffle_i32x4(p1, p3, 0x88);
        v[12 + m] = _mm512_shuffle_i32x4(p1, p3, 0xDD);
    }
}
#endif

/* A part of the rows of x and w that the tile takes at once: groups g0 .. g1-1, values
 * c0 .. c1-1 (a row wider than QUANT_XT_MAX_COLS goes in several). */
typedef struct {
    int g0, g1, c0, c1;
} XtSpan;

/* xp (quads, QUANT_XT_ROWS, 4) = values sp.c0 .. sp.c1-1 of rows 0 .. rows-1 of xq (N,
 * cols) quad by quad (+ 128 with VNNI), and xsp (sp.g1 - sp.g0, QUANT_XT_ROWS) = their
 * scales from xs (N, groups); rows past them x = 0 and scale 0. With AVX-512, sixteen
 * quads of sixteen rows at a time by transposes; otherwise, and for the quads left over,
 * a quad at a time. */
static void pack_rows(uint8_t *xp, float *xsp, const int8_t *xq, const float *xs, int rows,
                      int cols, int groups, XtSpan sp) {
    int quads = (sp.c1 - sp.c0) / 4, k0 = 0;
    xq += sp.c0;
    xs += sp.g0;
#if QUANT_XT_LANES == 16
    for (; k0 + 16 <= quads; k0 += 16)
        for (int h = 0; h < QUANT_XT_ROWS; h += 16) {
            __m512i v[16];
            for (int i = 0; i < 16; i++)
                v[i] = h + i < rows ? _mm512_loadu_si512(xq + (size_t)(h + i) * (size_t)cols +
                                                         4 * (size_t)k0)
                                    : _mm512_setzero_si512();
            transpose16_i32(v);
            for (int i = 0; i < 16; i++)
                _mm512_storeu_si512(xp + ((size_t)(k0 + i) * QUANT_XT_ROWS + (size_t)h) * 4,
                                    _mm512_xor_si512(v[i], _mm512_set1_epi32((int)QUANT_XT_MASK)));
        }
#endif
    for (int r = 0; r < QUANT_XT_ROWS; r++) {
        for (int k = k0; k < quads; k++) {
            uint32_t v = 0;
            if (r < rows) memcpy(&v, xq + (size_t)r * (size_t)cols + 4 * (size_t)k, 4);
            v ^= QUANT_XT_MASK;
            memcpy(xp + ((size_t)k * QUANT_XT_ROWS + (size_t)r) * 4, &v, 4);
        }
        for (int g = 0; g < sp.g1 - sp.g0; g++)
            xsp[(size_t)g * QUANT_XT_ROWS + (size_t)r] =
                r < rows ? xs[(size_t)r * (size_t)groups + (size_t)g] : 0.0f;
    }
}

#if QUANT_XT_LANES == 16
/* The sums of the eight int32 lanes of each half of a, b, c and d, exact: *lo (4,) of
 * their first halves, *hi (4,) of their second. */
static inline void sum_halves4_i32(__m512i a, __m512i b, __m512i c, __m512i d, __m128i *lo,
                                   __m128i *hi) {
    __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
    /* quarter q of h: the sums of a, b, c and d over quarter q's four lanes */
    __m512i h = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
    h = _mm512_add_epi32(h, _mm512_shuffle_i32x4(h, h, _MM_SHUFFLE(2, 3, 0, 1)));
    *lo = _mm512_castsi512_si128(h);
    *hi = _mm512_extracti32x4_epi32(h, 2);
}

/* starts -= the four 128 x sums of 32 w of *sums, into the group of chunk k */
static inline void sub_chunk(int32_t (*starts)[QUANT_XT_COLS], int k, int per_group,
                             __m128i sums) {
    int32_t *s = starts[k / per_group];
    _mm_storeu_si128((__m128i *)s, _mm_sub_epi32(_mm_loadu_si128((const __m128i *)s), sums));
}
#endif

/* starts[g - sp.g0] (QUANT_XT_COLS,) = where a pair of group g of the span and rows o ..
 * o+3 of w starts: with VNNI -128 x the sum of the group's w (vpdpbusd of 128 and w gives
 * 128 x the sum of each four w, the four rows' lanes are summed at once, and the values
 * past a group's last whole chunk of 32 in scalar code), else 0. With AVX-512 and groups
 * of whole chunks, two chunks of the four rows at a time. */
static void xt_starts(int32_t (*starts)[QUANT_XT_COLS], const QuantMatrix *w, int o,
                      XtSpan sp) {
    int cols = w->cols, group = w->group;
    _Static_assert(QUANT_XT_COLS == 4, "sum_lanes4_i32 sums four rows' lanes");
    if (!QUANT_XT_OFFSET) {
        memset(starts, 0, (size_t)(sp.g1 - sp.g0) * sizeof starts[0]);
        return;
    }
    const int8_t *w_c[QUANT_XT_COLS];
    for (int c = 0; c < QUANT_XT_COLS; c++) w_c[c] = w->q + (size_t)(o + c) * (size_t)cols;
#if QUANT_XT_LANES == 16
    if (group % QUANT_CHUNK == 0) {
        const __m512i u128 = _mm512_set1_epi8(-128), zero = _mm512_setzero_si512();
        int per_group = group / QUANT_CHUNK, k0 = sp.c0 / QUANT_CHUNK, k1 = sp.c1 / QUANT_CHUNK;
        int k = k0;
        memset(starts, 0, (size_t)(sp.g1 - sp.g0) * sizeof starts[0]);
        starts -= sp.g0;   /* indexed by group from here */
        for (; k + 2 <= k1; k += 2) {
            size_t at = (size_t)k * QUANT_CHUNK;
            __m128i lo, hi;
            sum_halves4_i32(_mm512_dpbusd_epi32(zero, u128, _mm512_loadu_si512(w_c[0] + at)),
                            _mm512_dpbusd_epi32(zero, u128, _mm512_loadu_si512(w_c[1] + at)),
                            _mm512_dpbusd_epi32(zero, u128, _mm512_loadu_si512(w_c[2] + at)),
                            _mm512_dpbusd_epi32(zero, u128, _mm512_loadu_si512(w_c[3] + at)),
                            &lo, &hi);
            sub_chunk(starts, k, per_group, lo);
            sub_chunk(starts, k + 1, per_group, hi);
        }
        if (k < k1) {   /* an odd last chunk */
            size_t at = (size_t)k * QUANT_CHUNK;
            const __m256i u = _mm256_set1_epi8(-128), z = _mm256_setzero_si256();
            sub_chunk(starts, k, per_group,
                      sum_lanes4_i32(_mm256_dpbusd_epi32(z, u, load_chunk(w_c[0] + at)),
                                     _mm256_dpbusd_epi32(z, u, load_chunk(w_c[1] + at)),
                                     _mm256_dpbusd_epi32(z, u, load_chunk(w_c[2] + at)),
                                     _mm256_dpbusd_epi32(z, u, load_chunk(w_c[3] + at))));
        }
        for (int at = k1 * QUANT_CHUNK; at < sp.c1; at++)   /* the last group's last values */
            for (int c = 0; c < QUANT_XT_COLS; c++) starts[sp.g1 - 1][c] -= 128 * w_c[c][at];
        return;
    }
#endif
    for (int g = sp.g0; g < sp.g1; g++) {
        int at = g * group, end = at + group < cols ? at + group : cols;
        __m256i lanes[QUANT_XT_COLS];   /* 128 x sums of four w */
        for (int c = 0; c < QUANT_XT_COLS; c++) lanes[c] = _mm256_setzero_si256();
        for (; at + QUANT_CHUNK <= end; at += QUANT_CHUNK)
            for (int c = 0; c < QUANT_XT_COLS; c++)   /* x = 0: |x| + 128 = 128, as packed */
                lanes[c] = dot32_add(lanes[c], _mm256_set1_epi8(-128), _mm256_set1_epi8(1),
                                     load_chunk(w_c[c] + at));
        _mm_storeu_si128((__m128i *)starts[g - sp.g0],
                         _mm_sub_epi32(_mm_setzero_si128(),
                                       sum_lanes4_i32(lanes[0], lanes[1], lanes[2], lanes[3])));
        for (; at < end; at++)
            for (int c = 0; c < QUANT_XT_COLS; c++) starts[g - sp.g0][c] -= 128 * w_c[c][at];
    }
}

/* The four bytes of w at p as one int32, for a broadcast. */
static inline int32_t load_quad(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The 4 x 4 transposes inside each 128-bit quarter of v[0..3]: element 4q + i of v[c]
 * becomes element 4q + c of v[i] (its own inverse). */
static inline void transpose4_quarters(XtF v[4]) {
    XtF t0 = xtf_unpacklo(v[0], v[1]), t1 = xtf_unpackhi(v[0], v[1]);
    XtF t2 = xtf_unpacklo(v[2], v[3]), t3 = xtf_unpackhi(v[2], v[3]);
    v[0] = xtf_unpacklo2(t0, t2);
    v[1] = xtf_unpackhi2(t0, t2);
    v[2] = xtf_unpacklo2(t1, t3);
    v[3] = xtf_unpackhi2(t1, t3);
}

/* dot[h][c] += the products of quad k of the packed block xp (its V registers of rows)
 * with quad k of row c of w (w0: the tile's first row, rows cols apart). */
static inline __attribute__((always_inline)) void
xt_quad(XtI dot[QUANT_XT_V][QUANT_XT_COLS], const uint8_t *xp, const int8_t *w0, int cols,
        int k, XtSpan sp, int V) {
    const uint8_t *xk = xp + (size_t)(k - sp.c0 / 4) * QUANT_XT_ROWS * 4;
    XtI x[QUANT_XT_V], ax[QUANT_XT_V];
    for (int h = 0; h < V; h++) {
        x[h] = xti_load(xk + (size_t)h * QUANT_XT_LANES * 4);
        ax[h] = xti_abs(x[h]);
    }
    for (int c = 0; c < QUANT_XT_COLS; c++) {
        XtI w_k = xti_set1(load_quad(w0 + (size_t)c * (size_t)cols + 4 * (size_t)k));
        for (int h = 0; h < V; h++) dot[h][c] = xt_dot(dot[h][c], x[h], ax[h], w_k);
    }
    for (int c = 0; c < QUANT_XT_COLS; c++)
        for (int h = 0; h < V; h++) IN_REGISTER(dot[h][c]);
}

/* out (rows, OC) rows 0 .. rows-1 (rows <= V x QUANT_XT_LANES), columns o .. o+3 = those
 * rows of x (packed: xp, xsp, the span sp) times rows o .. o+3 of w (their starts), the
 * groups of sp added to the sums that out holds from the spans before it (none when sp.g0
 * = 0), + bias after the last group; V registers of rows (1 .. QUANT_XT_V: a block of at
 * most a register's rows takes one). Between spans a pair's sum waits in out, unrounded:
 * its float steps are the same, in the same order. out's rows are OC = w->rows floats
 * apart (gemm_staged hands in a copy of w whose rows give its stage's width). G: 0 for
 * any groups, or QUANT_XT_G32 where every group is 32 values (xt_g32), which fixes a
 * group's loop at 8 quads (in QUANT_XT_CHAINS sets of sums, xt_quad), unrolled: the loop's
 * bookkeeping no longer shares the front end with the multiplies. */
static inline __attribute__((always_inline)) void
xt_tile(float *out, const uint8_t *xp, const float *xsp, const QuantMatrix *w,
        int32_t (*starts)[QUANT_XT_COLS], const float *bias, int rows, int o, XtSpan sp,
        int first, int last, int V, int G) {
    enum { C = QUANT_XT_COLS, L = QUANT_XT_LANES };
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group), OC = w->rows;
    const int8_t *w0 = w->q + (size_t)o * (size_t)cols;
    const float *ws0 = w->scale + (size_t)o * (size_t)groups;
    float quarters[C][L];   /* a register of rows' four columns, a row's four side by side */
    XtF acc[QUANT_XT_V][C];
    for (int h = 0; h < V; h++) {
        if (first) {
            for (int c = 0; c < C; c++) acc[h][c] = xtf_zero();
            continue;
        }
        for (int q = 0; q < L / 4; q++)
            for (int i = 0; i < 4; i++) {
                int r = h * L + 4 * q + i;
                if (r < rows)
                    memcpy(quarters[i] + 4 * q, out + (size_t)r * (size_t)OC + (size_t)o,
                           4 * sizeof(float));
                else
                    memset(quarters[i] + 4 * q, 0, 4 * sizeof(float));
            }
        for (int c = 0; c < C; c++) acc[h][c] = xtf_load(quarters[c]);
        transpose4_quarters(acc[h]);
    }
    for (int g = sp.g0, k = sp.c0 / 4; g < sp.g1; g++) {
        int k_end = G ? k + G : (g + 1) * group < cols ? (g + 1) * group / 4 : cols / 4;
        XtI dot[QUANT_XT_CHAINS][QUANT_XT_V][C];
        for (int c = 0; c < C; c++)
            for (int h = 0; h < V; h++) {
                dot[0][h][c] = xti_set1(starts[g - sp.g0][c]);
                for (int s = 1; s < QUANT_XT_CHAINS; s++) dot[s][h][c] = xti_zero();
            }
#if defined(__GNUC__) && !defined(__clang__) && QUANT_XT_CHAINS == 2
#pragma GCC unroll 4
#elif defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 8
#endif
        for (; k + QUANT_XT_CHAINS <= k_end; k += QUANT_XT_CHAINS)
            for (int s = 0; s < QUANT_XT_CHAINS; s++)
                xt_quad(dot[s], xp, w0, cols, k + s, sp, V);
        for (; k < k_end; k++) xt_quad(dot[0], xp, w0, cols, k, sp, V);   /* an odd last */
        for (int s = 1; s < QUANT_XT_CHAINS; s++)   /* exact: int32 sums */
            for (int c = 0; c < C; c++)
                for (int h = 0; h < V; h++) dot[0][h][c] = xti_add(dot[0][h][c], dot[s][h][c]);
        for (int h = 0; h < V; h++) {
            XtF xs_g = xtf_load(xsp + (size_t)(g - sp.g0) * QUANT_XT_ROWS + (size_t)h * L);
            for (int c = 0; c < C; c++) {
                float ws = ws0[(size_t)c * (size_t)groups + (size_t)g];
                XtF scale = xtf_mul(xs_g, xtf_set1(ws));
                acc[h][c] = xtf_add(acc[h][c], xtf_mul(xtf_cvt(dot[0][h][c]), scale));
            }
        }
    }
    /* after the last group + bias (or + 0, as the reference adds it: -0 becomes +0); then
     * rows of four columns: row 4q + i is quarter q of quarters[i] */
    for (int h = 0; h < V; h++) {
        XtF v[C];
        for (int c = 0; c < C; c++)
            v[c] = !last ? acc[h][c]
                         : xtf_add(acc[h][c], xtf_set1(bias ? bias[o + c] : 0.0f));
        transpose4_quarters(v);
        for (int i = 0; i < C; i++) xtf_store(quarters[i], v[i]);
        for (int q = 0; q < L / 4; q++)
            for (int i = 0; i < 4; i++) {
                int r = h * L + 4 * q + i;
                if (r < rows)
                    memcpy(out + (size_t)r * (size_t)OC + (size_t)o, quarters[i] + 4 * q,
                           4 * sizeof(float));
            }
    }
}

/* Quads in a group of 32 values (Q8_0's, and quantize's by default). */
#define QUANT_XT_G32 8

/* 1 if every group of w is 32 values (a row of whole groups), for xt_tile's G. */
static int xt_g32(const QuantMatrix *w) { return w->group == 32 && w->cols % 32 == 0; }

/* Asks for the span of rows o .. o+3 of w in L2, so that they arrive while the tiles of the
 * rows before them run: in a prompt every matrix comes from memory at each job, and the
 * first reader of a tile's rows (xt_starts) otherwise waits for them. */
static void prefetch_span(const QuantMatrix *w, int o, XtSpan sp) {
    for (int c = 0; c < QUANT_XT_COLS; c++) {
        const char *row = (const char *)(w->q + (size_t)(o + c) * (size_t)w->cols);
        for (int at = sp.c0; at < sp.c1; at += 64) _mm_prefetch(row + at, _MM_HINT_T1);
    }
}

/* Columns of a window of the staged order (simd_q8_gemm_tiles): its tiles' rows of w (16 x
 * a span) and its stage (QUANT_XT_ROWS x 64 floats, 8 KiB with AVX-512) stay close. */
#define QUANT_STAGE_COLS 64
/* A pass's packed rows up to this many bytes stay in L1 (Zen 4's 32 KiB) in either order. */
#define QUANT_L1_BYTES (32 << 10)
/* Output rows whose stride is a multiple of this many bytes all fall in the same sets of
 * L1 (4 KiB: 64 sets of 64-byte lines, Zen 4's 32 KiB and Intel's 48 KiB alike). */
#define QUANT_ALIAS_BYTES 4096
/* Blocks of the widest span (QUANT_XT_MAX_COLS values) the packing buffers hold: a pass's
 * rows. With AVX-512, 4 (512 KiB, in the 1 MiB L2 of Zen 4 and Zen 5, 2 MiB of Sapphire
 * Rapids): a 256-token prompt in one pass up to 2,048 values a row, which reads w from
 * memory and forms its starts once, where each pass does both again. With AVX2 1 (32 KiB,
 * Zen 3's L2 is 512 KiB): its slower tile gains nothing from longer passes. */
#if QUANT_XT_LANES == 16
#define QUANT_PASS_SPANS 4
#else
#define QUANT_PASS_SPANS 1
#endif

/* simd_q8_gemm_tiles's columns o0 .. o1-1 of the pass of `pass` rows from row n (blocks
 * packed in xp, xsp; the whole row in the span sp), in the staged order: for a window of
 * QUANT_STAGE_COLS columns, each block's tiles write a stage (QUANT_XT_ROWS, QUANT_STAGE_COLS)
 * whose rows lie in distinct sets, then the stage's rows are copied to out whole.
 *   - A block's packed rows serve the window's 16 tiles from L1, where a tile's blocks in
 *     turn (the order of the spans of a long row) read the pass's blocks, up to 512 KiB,
 *     from L2 again for every tile.
 *   - Where out's rows alias in L1 (OC floats apart, a multiple of QUANT_ALIAS_BYTES),
 *     the 32 rows a tile writes would evict each other's lines before the next tile's
 *     four columns of the same lines come: every store would miss L1.
 * Each output's steps are the tile's: the same bits. */
static __attribute__((noinline)) void
gemm_staged(float *out, const uint8_t *xp, const float *xsp, size_t block_bytes,
            size_t block_floats, const QuantMatrix *w, const float *bias, int N, int n, int pass,
            int o0, int o1, XtSpan sp) {
    enum { WC = QUANT_STAGE_COLS, WT = QUANT_STAGE_COLS / QUANT_XT_COLS };
    int g32 = xt_g32(w);
    _Alignas(64) float stage[QUANT_XT_ROWS * WC];
    int32_t starts[WT][QUANT_XT_MAX_GROUPS][QUANT_XT_COLS];   /* each tile's, as below */
    for (int ow = o0; ow < o1; ow += WC) {
        int ow1 = o1 - ow < WC ? o1 : ow + WC, tiles = (ow1 - ow) / QUANT_XT_COLS;
        /* the window's rows of w as a matrix of WC rows from row ow: xt_tile takes out's row
         * stride from w->rows, so its tile t writes the stage's columns 4t .. 4t+3 */
        QuantMatrix w_stage = *w;
        w_stage.q += (size_t)ow * (size_t)w->cols;
        w_stage.scale += (size_t)ow * (size_t)quant_groups(w->cols, w->group);
        w_stage.rows = WC;
        const float *bias_w = bias ? bias + ow : NULL;
        for (int t = 0; t < tiles; t++) {
            int o = ow + t * QUANT_XT_COLS;
            if (o + WC < o1) prefetch_span(w, o + WC, sp);   /* the next window's */
            xt_starts(starts[t], w, o, sp);
        }
        for (int b = 0; b * QUANT_XT_ROWS < pass; b++) {
            int n_b = n + b * QUANT_XT_ROWS;
            int rows = N - n_b < QUANT_XT_ROWS ? N - n_b : QUANT_XT_ROWS;
            const uint8_t *xp_b = xp + (size_t)b * block_bytes;
            const float *xsp_b = xsp + (size_t)b * block_floats;
            for (int t = 0; t < tiles; t++) {   /* V constant in each call, as xt_tile needs */
                int c = t * QUANT_XT_COLS;   /* the tile's first column in the window */
                if (QUANT_XT_V > 1 && rows <= QUANT_XT_LANES)
                    xt_tile(stage, xp_b, xsp_b, &w_stage, starts[t], bias_w, rows, c, sp, 1, 1, 1,
                            0);
                else if (g32)
                    xt_tile(stage, xp_b, xsp_b, &w_stage, starts[t], bias_w, rows, c, sp, 1, 1,
                            QUANT_XT_V, QUANT_XT_G32);
                else
                    xt_tile(stage, xp_b, xsp_b, &w_stage, starts[t], bias_w, rows, c, sp, 1, 1,
                            QUANT_XT_V, 0);
            }
            float *out_b = out + (size_t)n_b * (size_t)w->rows + (size_t)ow;
            if (ow1 - ow == WC)   /* a whole window: copies of a constant size, inlined */
                for (int r = 0; r < rows; r++)
                    memcpy(out_b + (size_t)r * (size_t)w->rows, stage + (size_t)r * WC,
                           WC * sizeof(float));
            else   /* the last window of a row, narrower */
                for (int r = 0; r < rows; r++)
                    memcpy(out_b + (size_t)r * (size_t)w->rows, stage + (size_t)r * WC,
                           (size_t)(ow1 - ow) * sizeof(float));
        }
    }
}

/* out (N, OC) rows 0 .. N-1 (any N), columns o0 .. o1-1 (o1 - o0 a multiple of
 * QUANT_XT_COLS) = x (xq (N, cols), xs (N, groups)) times w, + bias: in passes over as many
 * blocks of QUANT_XT_ROWS rows as the packing buffers hold (at least one), each row in
 * spans of at most QUANT_XT_MAX_COLS values (whole groups); each block's span packed
 * once, and each column tile's starts formed once a span and pass. Whole rows, more
 * columns than a window, and packed rows beyond L1 or output rows that alias: a window's
 * tiles for a block in turn, then the next block's (gemm_staged); else a tile's blocks in
 * turn, then the next tile's. */
void simd_q8_gemm_tiles(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1) {
    /* a block's scales: a span's groups (QUANT_XT_MAX_GROUPS at most) by its rows */
    enum { XP_BYTES = QUANT_PASS_SPANS * QUANT_XT_MAX_COLS * QUANT_XT_ROWS,
           XSP_FLOATS = QUANT_PASS_SPANS * QUANT_XT_MAX_GROUPS * QUANT_XT_ROWS };
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group), OC = w->rows;
    uint8_t xp[XP_BYTES];                                  /* 512 KiB (AVX2: 32) */
    float xsp[XSP_FLOATS];                                 /* 128 KiB (AVX2: 8) */
    int32_t starts[QUANT_XT_MAX_GROUPS][QUANT_XT_COLS];    /* 4 KiB */
    int span_groups = QUANT_XT_MAX_COLS / group, g32 = xt_g32(w);
    if (span_groups > QUANT_XT_MAX_GROUPS) span_groups = QUANT_XT_MAX_GROUPS;
    if (span_groups > groups) span_groups = groups;
    int span_cols = span_groups * group < cols ? span_groups * group : cols;
    size_t block_bytes = (size_t)span_cols * QUANT_XT_ROWS;
    size_t block_floats = (size_t)span_groups * QUANT_XT_ROWS;
    int blocks = (int)(XP_BYTES / block_bytes);
    if (blocks > (int)(XSP_FLOATS / block_floats)) blocks = (int)(XSP_FLOATS / block_floats);
    for (int n = 0; n < N; n += blocks * QUANT_XT_ROWS) {
        int pass = N - n < blocks * QUANT_XT_ROWS ? N - n : blocks * QUANT_XT_ROWS;
        for (int g0 = 0; g0 < groups; g0 += span_groups) {
            XtSpan sp = {g0, g0 + span_groups < groups ? g0 + span_groups : groups, g0 * group, 0};
            sp.c1 = sp.g1 * group < cols ? sp.g1 * group : cols;
            for (int b = 0; b * QUANT_XT_ROWS < pass; b++) {
                int n_b = n + b * QUANT_XT_ROWS;
                int rows = N - n_b < QUANT_XT_ROWS ? N - n_b : QUANT_XT_ROWS;
                pack_rows(xp + (size_t)b * block_bytes, xsp + (size_t)b * block_floats,
                          xq + (size_t)n_b * (size_t)cols, xs + (size_t)n_b * (size_t)groups,
                          rows, cols, groups, sp);
            }
            int beyond_l1 = (size_t)pass * (size_t)(sp.c1 - sp.c0) > QUANT_L1_BYTES;
            int alias = (size_t)OC * sizeof(float) % QUANT_ALIAS_BYTES == 0;
            if (sp.g0 == 0 && sp.g1 == groups && o1 - o0 > QUANT_STAGE_COLS &&
                (beyond_l1 || alias)) {
                gemm_staged(out, xp, xsp, block_bytes, block_floats, w, bias, N, n, pass, o0,
                            o1, sp);
                continue;
            }
            for (int o = o0; o < o1; o += QUANT_XT_COLS) {
                if (o + QUANT_XT_COLS < o1) prefetch_span(w, o + QUANT_XT_COLS, sp);
                xt_starts(starts, w, o, sp);
                for (int b = 0; b * QUANT_XT_ROWS < pass; b++) {
                    int n_b = n + b * QUANT_XT_ROWS;
                    int rows = N - n_b < QUANT_XT_ROWS ? N - n_b : QUANT_XT_ROWS;
                    float *out_b = out + (size_t)n_b * (size_t)OC;
                    const uint8_t *xp_b = xp + (size_t)b * block_bytes;
                    const float *xsp_b = xsp + (size_t)b * block_floats;
                    if (sp.g0 == 0 && sp.g1 == groups && QUANT_XT_V > 1 && rows <= QUANT_XT_LANES)
                        xt_tile(out_b, xp_b, xsp_b, w, starts, bias, rows, o, sp, 1, 1, 1, 0);
                    else if (sp.g0 == 0 && sp.g1 == groups && g32)   /* the whole row: */
                        xt_tile(out_b, xp_b, xsp_b, w, starts, bias, rows, o, sp, 1, 1,
                                QUANT_XT_V, QUANT_XT_G32);           /* the common case */
                    else if (sp.g0 == 0 && sp.g1 == groups)
                        xt_tile(out_b, xp_b, xsp_b, w, starts, bias, rows, o, sp, 1, 1,
                                QUANT_XT_V, 0);
                    else
                        xt_tile(out_b, xp_b, xsp_b, w, starts, bias, rows, o, sp, sp.g0 == 0,
                                sp.g1 == groups, QUANT_XT_V, 0);
                }
            }
        }
    }
}

/* Whether the tile takes w: a width and groups that are whole quads, groups of at most
 * QUANT_XT_MAX_COLS values (wider rows go in spans of whole groups). */
int simd_q8_gemm_takes(const QuantMatrix *w) {
    return w->cols > 0 && w->cols % 4 == 0 && w->group % 4 == 0 &&
           w->group <= QUANT_XT_MAX_COLS;
}


#if defined(SIMD_Q8_PACKED)
/* -- Packed rows (quant.h's layout): 16 rows of w in a register's lanes --
 *
 * Quad k of a block of w is one 64-byte register: 16 rows' four values, each + 128, the
 * unsigned operand of vpdpbusd; quad k of a row of x, broadcast, is the signed one. So one
 * multiply adds to each of 16 lanes the four products of its row of w with x, and after a
 * group's quads each lane holds its output's exact group dot product plus 128 times
 * the sum of the group's x, which its start (-128 times that sum, the same for every lane)
 * takes away. The reference's float steps follow, 16 outputs at a time: acc + (float)dot *
 * (x's scale * w's scale). No sums across lanes.
 *   tile    R rows of x (1 .. PACKED_ROWS) by NB blocks of w (1 .. PACKED_BLOCKS), the NB
 *           blocks step blocks apart: adjacent (prefill), or a quarter of a range apart
 *           (decode: four sequential runs through w, which the prefetchers stream best).
 *   xp      a tile's rows of x as the tile reads them, one stream (pack_x): for each group,
 *           the R rows' starts (int32), their scales (float), then the group's quads, each
 *           the R rows' four values side by side: one pointer for the tile's x, where R
 *           rows of xq, xs and starts take ~18, more than x86-64 has registers. */
#define PACKED_ROWS 6          /* rows of x per tile: 6 x 2 int32 sums, 6 x 2 float sums */
#define PACKED_BLOCKS 2        /* blocks of w per tile of several rows of x */
#define PACKED_RUNS 4          /* decode: blocks per tile, each from its own run of w */
#define PACKED_X_BYTES (512 << 10)   /* packed rows of x on the stack (a row: at most
                                      * 3 x QUANT_GROUP_MAX bytes, with groups of 4) */

/* Bytes of a row of x packed: its values, and a start and a scale a group. */
static size_t packed_row_bytes(int cols, int groups) {
    return (size_t)cols + 8 * (size_t)groups;
}

/* pack_x for a whole tile of groups of 32, in registers: per group the six rows' 32 bytes
 * in three registers of two rows (v), their sums of x + 128 (vpsadbw: four 8-byte sums a
 * row, added in two steps) giving the starts, and quad k of row r (int32 lane k of its
 * row) permuted to lane 6k + r of the three registers of quads. The bytes pack_x writes:
 * it took ~5 % of a prompt's packed products one quad at a time. */
static void pack_x6_g32(uint8_t *xp, const int8_t *xq, const float *xs, int cols) {
    enum { R = PACKED_ROWS };
    _Static_assert(PACKED_ROWS == 6, "three registers of two rows");
    int groups = cols / 32;
    __m512i from_ab[3], from_c[3];   /* output lane e = 6k + r of register j = e / 16 */
    __mmask16 in_c[3] = {0, 0, 0};
    for (int j = 0; j < 3; j++) {
        int32_t ab[16], c[16];
        for (int i = 0; i < 16; i++) {
            int e = 16 * j + i, k = e / R, r = e % R, lane = (r % 2) * 8 + k;   /* in v[r / 2] */
            ab[i] = r < 4 ? (r / 2) * 16 + lane : 0;   /* v[0]'s lanes, then v[1]'s + 16 */
            c[i] = r < 4 ? 0 : lane;
            if (r >= 4) in_c[j] |= (__mmask16)(1u << i);
        }
        from_ab[j] = _mm512_loadu_si512(ab);
        from_c[j] = _mm512_loadu_si512(c);
    }
    /* each register's two row sums (lanes 0 and 4) to lanes 0 .. 5 */
    const __m512i sums_ab = _mm512_setr_epi64(0, 4, 8, 12, 0, 0, 0, 0);
    const __m512i sums_c = _mm512_setr_epi64(0, 0, 0, 0, 0, 4, 0, 0);
    const __m512i flip = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    for (int g = 0; g < groups; g++, xp += R * (8 + 32)) {
        const int8_t *x_g = xq + (size_t)g * 32;
        __m512i v[3], sum[3];
        for (int h = 0; h < 3; h++) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(x_g + (size_t)(2 * h) * (size_t)cols));
            __m256i b = _mm256_loadu_si256((const __m256i *)(x_g + (size_t)(2 * h + 1) * (size_t)cols));
            v[h] = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
            __m512i t = _mm512_sad_epu8(_mm512_xor_si512(v[h], flip), zero);
            t = _mm512_add_epi64(t, _mm512_shuffle_epi32(t, _MM_PERM_BADC));
            sum[h] = _mm512_add_epi64(t, _mm512_permutex_epi64(t, 0x4E));
        }
        __m512i sums = _mm512_mask_permutexvar_epi64(
            _mm512_permutex2var_epi64(sum[0], sums_ab, sum[1]), 0x30, sums_c, sum[2]);
        /* start = -128 x (the sum of x + 128 - 32 x 128) */
        __m512i starts = _mm512_sub_epi64(
            zero, _mm512_slli_epi64(_mm512_sub_epi64(sums, _mm512_set1_epi64(32 * 128)), 7));
        _mm256_mask_storeu_epi32(xp, 0x3F, _mm512_cvtepi64_epi32(starts));
        for (int r = 0; r < R; r++)
            memcpy(xp + 4 * (R + r), xs + (size_t)r * (size_t)groups + (size_t)g, 4);
        for (int j = 0; j < 3; j++)
            _mm512_storeu_si512(xp + 8 * R + 64 * j,
                                _mm512_mask_permutexvar_epi32(
                                    _mm512_permutex2var_epi32(v[0], from_ab[j], v[1]), in_c[j],
                                    from_c[j], v[2]));
    }
}

/* xp = R rows of x (xq (R, cols), xs (R, groups)) in the tile's order (above). */
static void pack_x(uint8_t *xp, const int8_t *xq, const float *xs, int R, int cols, int group) {
    if (R == PACKED_ROWS && group == 32) {
        pack_x6_g32(xp, xq, xs, cols);
        return;
    }
    int groups = cols / group;
    for (int g = 0; g < groups; g++) {
        for (int r = 0; r < R; r++) {
            const int8_t *x = xq + (size_t)r * (size_t)cols + (size_t)g * (size_t)group;
            int32_t sum = 0;
            for (int i = 0; i < group; i++) sum += x[i];
            int32_t start = -128 * sum;
            memcpy(xp + 4 * r, &start, 4);
            memcpy(xp + 4 * (R + r), xs + (size_t)r * (size_t)groups + (size_t)g, 4);
        }
        xp += 8 * (size_t)R;
        const int8_t *x_g = xq + (size_t)g * (size_t)group;
        if (R == 1) {   /* decode: the group as it is */
            memcpy(xp, x_g, (size_t)group);
            xp += group;
            continue;
        }
        for (int k = 0; k < group / 4; k++, xp += 4 * (size_t)R)
            for (int r = 0; r < R; r++) memcpy(xp + 4 * r, x_g + (size_t)r * (size_t)cols + 4 * k, 4);
    }
}

/* dot[r][b][c] += the products of quad k of R rows of x (x: a group's quads in xp) and of
 * NB blocks of w (w, w_step bytes apart); prefetch 1: each block's line QUANT_PREFETCH_BYTES
 * ahead asked for (a quad of a block is a line). */
static inline __attribute__((always_inline)) void
packed_quad(__m512i dot[PACKED_ROWS][PACKED_RUNS][2], const uint8_t *w, size_t w_step,
            const uint8_t *x, int k, int c, int R, int NB, int prefetch) {
    __m512i w_k[PACKED_RUNS];
    for (int b = 0; b < NB; b++) {
        const uint8_t *w_bk = w + (size_t)b * w_step + (size_t)k * 64;
        if (prefetch) _mm_prefetch((const char *)w_bk + QUANT_PREFETCH_BYTES, _MM_HINT_T0);
        w_k[b] = _mm512_loadu_si512(w_bk);
    }
    for (int r = 0; r < R; r++) {
        int32_t quad;
        memcpy(&quad, x + 4 * ((size_t)k * (size_t)R + (size_t)r), 4);
        __m512i x_k = _mm512_set1_epi32(quad);
        for (int b = 0; b < NB; b++) dot[r][b][c] = _mm512_dpbusd_epi32(dot[r][b][c], w_k[b], x_k);
    }
}

/* The tile: out[r][16b + i] for its R rows of x (ldo floats apart) and lanes i of its NB
 * blocks of w (w, ws: the first block's q and scales; step: the blocks' distance in
 * blocks; o_step: in outputs), where mask[b] has lane i: the rows packed in xp; + bias
 * (the first block's 16 values, o_step apart), or + 0 as the reference adds. One chain of
 * sums per (row, block), two when R is 1 (a decode's eight multiples of a group would
 * wait on each other). prefetch 1 (a cold w, as the row path's): each block's lines and
 * its scales' line asked for ahead as the tile reads them. */
static inline __attribute__((always_inline)) void
packed_tile(float *out, size_t ldo, const uint8_t *w, const float *ws, size_t step,
            size_t o_step, int cols, int group, const uint8_t *xp, const float *bias,
            const __mmask16 *mask, int R, int NB, int prefetch) {
    enum { CH = 2 };   /* chains when R == 1 */
    int groups = cols / group, quads = group / 4, chains = R == 1 ? CH : 1;
    _Static_assert(CH == 2, "packed_quad's sums");
    size_t w_step = step * QUANT_PACK_ROWS * (size_t)cols;     /* bytes between blocks */
    size_t s_step = step * QUANT_PACK_ROWS * (size_t)groups;   /* scales between blocks */
    __m512 acc[PACKED_ROWS][PACKED_RUNS];
    for (int r = 0; r < R; r++)
        for (int b = 0; b < NB; b++) acc[r][b] = _mm512_setzero_ps();
    for (int g = 0; g < groups; g++, xp += (size_t)R * (8 + (size_t)group)) {
        __m512i dot[PACKED_ROWS][PACKED_RUNS][CH];
        for (int r = 0; r < R; r++) {
            int32_t start;
            memcpy(&start, xp + 4 * r, 4);
            for (int b = 0; b < NB; b++) {
                dot[r][b][0] = _mm512_set1_epi32(start);
                for (int c = 1; c < chains; c++) dot[r][b][c] = _mm512_setzero_si512();
            }
        }
        const uint8_t *w_g = w + (size_t)g * (size_t)group * QUANT_PACK_ROWS;
        const uint8_t *x_g = xp + 8 * (size_t)R;   /* the group's quads */
        /* the quads eight at a time (a group of 32 in one pass), unrolled: which chain a
         * quad adds to is then known when compiling, so the sums stay in registers (gcc 12
         * unasked kept the loop for -march=sapphirerapids, copying the sums every quad) */
        int k = 0;
        for (; k + 8 <= quads; k += 8)
#if defined(__GNUC__) && !defined(__clang__)   /* (clang unrolls it whole unasked) */
#pragma GCC unroll 8
#endif
            for (int j = 0; j < 8; j++)
                packed_quad(dot, w_g, w_step, x_g, k + j, j % chains, R, NB, prefetch);
        for (; k < quads; k++) packed_quad(dot, w_g, w_step, x_g, k, 0, R, NB, prefetch);
        for (int b = 0; b < NB; b++) {
            const float *ws_b = ws + (size_t)b * s_step + (size_t)g * QUANT_PACK_ROWS;
            if (prefetch)   /* a group's 16 scales: a line */
                _mm_prefetch((const char *)ws_b + QUANT_PREFETCH_BYTES / 8, _MM_HINT_T0);
            __m512 ws_g = _mm512_loadu_ps(ws_b);
            for (int r = 0; r < R; r++) {
                __m512i d = dot[r][b][0];   /* + the other chain's: exact */
                for (int c = 1; c < chains; c++) d = _mm512_add_epi32(d, dot[r][b][c]);
                float xs_g;
                memcpy(&xs_g, xp + 4 * (R + r), 4);
                __m512 scale = _mm512_mul_ps(_mm512_set1_ps(xs_g), ws_g);
                acc[r][b] = _mm512_add_ps(acc[r][b], _mm512_mul_ps(_mm512_cvtepi32_ps(d), scale));
            }
        }
    }
    for (int b = 0; b < NB; b++) {   /* after the last group + bias, or + 0 */
        __m512 add = bias ? _mm512_loadu_ps(bias + (size_t)b * o_step) : _mm512_setzero_ps();
        for (int r = 0; r < R; r++)
            _mm512_mask_storeu_ps(out + (size_t)r * ldo + (size_t)b * o_step, mask[b],
                                  _mm512_add_ps(acc[r][b], add));
    }
}

/* packed_tile's lanes of block `block` that lie in o0 .. o1-1. */
static __mmask16 packed_mask(int block, int o0, int o1) {
    int lo = o0 - block * QUANT_PACK_ROWS, hi = o1 - block * QUANT_PACK_ROWS;
    if (lo < 0) lo = 0;
    if (hi > QUANT_PACK_ROWS) hi = QUANT_PACK_ROWS;
    return (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

/* Decode: columns o0 .. o1-1 for one row of x (packed in xp): the whole blocks in
 * PACKED_RUNS runs a quarter of their range apart, the rest a block at a time. */
static void packed_row(float *out, const uint8_t *xp, const QuantMatrix *w, const float *bias,
                       int o0, int o1, int prefetch) {
    int cols = w->cols, group = w->group, groups = cols / group, b0 = o0 / QUANT_PACK_ROWS;
    int b1 = (o1 + QUANT_PACK_ROWS - 1) / QUANT_PACK_ROWS;   /* blocks b0 .. b1-1 */
    int whole0 = (o0 + QUANT_PACK_ROWS - 1) / QUANT_PACK_ROWS, whole1 = o1 / QUANT_PACK_ROWS;
    const uint8_t *q = (const uint8_t *)w->q;
    const __mmask16 all[PACKED_RUNS] = {0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF};
    int quarter = whole1 > whole0 ? (whole1 - whole0) / PACKED_RUNS : 0;
    for (int i = 0; i < quarter; i++) {   /* groups of 32: the group a constant, as above */
        int b = whole0 + i, o = b * QUANT_PACK_ROWS;
        const uint8_t *q_o = q + (size_t)o * (size_t)cols;
        const float *ws = w->scale + (size_t)o * (size_t)groups, *bias_o = bias ? bias + o : NULL;
        size_t o_step = (size_t)quarter * QUANT_PACK_ROWS;
        if (group == 32 && prefetch)
            packed_tile(out + o, 0, q_o, ws, (size_t)quarter, o_step, cols, 32, xp, bias_o,
                        all, 1, PACKED_RUNS, 1);
        else if (group == 32)
            packed_tile(out + o, 0, q_o, ws, (size_t)quarter, o_step, cols, 32, xp, bias_o,
                        all, 1, PACKED_RUNS, 0);
        else
            packed_tile(out + o, 0, q_o, ws, (size_t)quarter, o_step, cols, group, xp, bias_o,
                        all, 1, PACKED_RUNS, prefetch);
    }
    for (int b = b0; b < b1; b++) {
        if (b >= whole0 && b < whole0 + PACKED_RUNS * quarter) continue;   /* done above */
        int o = b * QUANT_PACK_ROWS;
        __mmask16 mask = packed_mask(b, o0, o1);
        packed_tile(out + o, 0, q + (size_t)o * (size_t)cols,
                    w->scale + (size_t)o * (size_t)groups, 1, QUANT_PACK_ROWS, cols, group, xp,
                    bias ? bias + o : NULL, &mask, 1, 1, 0);
    }
}

/* The tile of R rows (a constant in each call, as packed_tile needs; packed in xp) by
 * blocks b .. b+NB-1; a whole tile of groups of 32 with the group a constant too (its
 * quads' loop unrolled). */
static inline __attribute__((always_inline)) void
packed_rows_tile(float *out, size_t ldo, const uint8_t *xp, const QuantMatrix *w,
                 const float *bias, int b, int NB, const __mmask16 *mask, int R) {
    int cols = w->cols, groups = cols / w->group, o = b * QUANT_PACK_ROWS;
    const uint8_t *q = (const uint8_t *)w->q + (size_t)o * (size_t)cols;
    const float *ws = w->scale + (size_t)o * (size_t)groups;
    if (R == PACKED_ROWS && NB == PACKED_BLOCKS && w->group == 32)
        packed_tile(out + o, ldo, q, ws, 1, QUANT_PACK_ROWS, cols, 32, xp,
                    bias ? bias + o : NULL, mask, R, NB, 0);
    else
        packed_tile(out + o, ldo, q, ws, 1, QUANT_PACK_ROWS, cols, w->group, xp,
                    bias ? bias + o : NULL, mask, R, NB, 0);
}

/* Several rows of x (N, packed a tile of PACKED_ROWS rows after another in xp, rows
 * row_bytes apart): for each pair of blocks of w, tiles of PACKED_ROWS rows, each over all
 * the groups (the pair's rows of w come from L2; out is written once), then the rows left
 * over as one smaller tile. Each tile asks for its rows' lines of out for the next pair:
 * in a prompt out comes from L3, and a store that misses it waits for the line. */
static void packed_rows(float *out, const uint8_t *xp, size_t row_bytes, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1) {
    int OC = w->rows;
    int b0 = o0 / QUANT_PACK_ROWS, b1 = (o1 + QUANT_PACK_ROWS - 1) / QUANT_PACK_ROWS;
    for (int b = b0; b < b1; b += PACKED_BLOCKS) {
        int NB = b1 - b < PACKED_BLOCKS ? b1 - b : PACKED_BLOCKS;
        __mmask16 mask[PACKED_BLOCKS];
        for (int i = 0; i < NB; i++) mask[i] = packed_mask(b + i, o0, o1);
        for (int n = 0; n < N; n += PACKED_ROWS) {
            int R = N - n < PACKED_ROWS ? N - n : PACKED_ROWS;
            float *out_n = out + (size_t)n * (size_t)OC;
            const uint8_t *xp_n = xp + (size_t)n * row_bytes;
            for (int r = 0; r < R; r++)
                for (int i = b + PACKED_BLOCKS; i < b + 2 * PACKED_BLOCKS && i < b1; i++)
                    _mm_prefetch((const char *)(out_n + (size_t)r * (size_t)OC +
                                                (size_t)i * QUANT_PACK_ROWS), _MM_HINT_T0);
#define PACKED_CASE(RR)                                                                       \
    case RR:                                                                                  \
        if (NB == PACKED_BLOCKS)                                                              \
            packed_rows_tile(out_n, (size_t)OC, xp_n, w, bias, b, PACKED_BLOCKS, mask, RR);   \
        else                                                                                  \
            packed_rows_tile(out_n, (size_t)OC, xp_n, w, bias, b, 1, mask, RR);               \
        break;
            switch (R) {
                PACKED_CASE(1)
                PACKED_CASE(2)
                PACKED_CASE(3)
                PACKED_CASE(4)
                PACKED_CASE(5)
                PACKED_CASE(6)
            }
#undef PACKED_CASE
        }
    }
}

void simd_q8_matmul_packed(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                           const float *bias, int N, int o0, int o1) {
    _Static_assert(PACKED_ROWS == 6, "packed_rows' cases");
    _Static_assert(PACKED_X_BYTES >= 3 * QUANT_GROUP_MAX, "a row of x fits (groups of 4)");
    _Alignas(64) uint8_t xp[PACKED_X_BYTES];
    int cols = w->cols, group = w->group, groups = cols / group, OC = w->rows;
    size_t row_bytes = packed_row_bytes(cols, groups);
    int chunk = (int)(PACKED_X_BYTES / row_bytes);   /* rows of x at a time: whole tiles */
    if (chunk >= PACKED_ROWS) chunk = chunk / PACKED_ROWS * PACKED_ROWS;
    for (int n = 0; n < N; n += chunk) {
        int rows = N - n < chunk ? N - n : chunk;
        for (int t = 0; t < rows; t += PACKED_ROWS)
            pack_x(xp + (size_t)t * row_bytes, xq + (size_t)(n + t) * (size_t)cols,
                   xs + (size_t)(n + t) * (size_t)groups,
                   rows - t < PACKED_ROWS ? rows - t : PACKED_ROWS, cols, group);
        float *out_n = out + (size_t)n * (size_t)OC;
        if (rows == 1)
            packed_row(out_n, xp, w, bias, o0, o1, w->cold && simd_prefetch_packed());
        else
            packed_rows(out_n, xp, row_bytes, w, bias, rows, o0, o1);
    }
}
#endif /* SIMD_Q8_PACKED */

/* ---- the offsets (GGUF's minimums) ---- */

_Static_assert(QUANT_OFFSET_LANES == 8, "simd_q8_subtract_offsets: a lane a float of a ymm");

/* t (8,) of 8 registers in place: t[k] lane r = t[r] lane k before. */
static inline void transpose8(__m256 t[8]) {
    __m256 a[8], b[8];
    for (int i = 0; i < 8; i += 2) {   /* pairs of rows, lane by lane */
        a[i] = _mm256_unpacklo_ps(t[i], t[i + 1]);
        a[i + 1] = _mm256_unpackhi_ps(t[i], t[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {   /* quads of rows */
        b[i] = _mm256_shuffle_ps(a[i], a[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        b[i + 1] = _mm256_shuffle_ps(a[i], a[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        b[i + 2] = _mm256_shuffle_ps(a[i + 1], a[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        b[i + 3] = _mm256_shuffle_ps(a[i + 1], a[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {   /* 128-bit halves: lanes 0-3 from rows 0-3 and 4-7 */
        t[i] = _mm256_permute2f128_ps(b[i], b[i + 4], 0x20);
        t[i + 4] = _mm256_permute2f128_ps(b[i], b[i + 4], 0x31);
    }
}

/* simd.h: eight outputs at a time, a register of lanes g % 8 each (the reference's
 * offset_sum); the last groups % 8 groups masked to 0 * 0, which adds +0 to a lane that
 * is never -0 (it starts at +0), so no bit changes; then the lanes of the eight turned
 * into registers of eight outputs and added in the reference's order. */
int simd_q8_subtract_offsets(float *out, const float *v, const QuantMatrix *w, int o0, int o1) {
    int groups = quant_groups(w->cols, w->group), tail = groups % 8, full = groups - tail;
    __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail),
                                      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 v_tail = tail ? _mm256_maskload_ps(v + full, mask) : _mm256_setzero_ps();
    int o = o0;
    for (; o + 8 <= o1; o += 8) {
        const float *off = w->offset + (size_t)o * (size_t)groups;
        __m256 lane[8];   /* lane[r]: output o + r's 8 partial sums */
        for (int r = 0; r < 8; r++) lane[r] = _mm256_setzero_ps();
        for (int g = 0; g < full; g += 8) {
            __m256 vg = _mm256_loadu_ps(v + g);
            for (int r = 0; r < 8; r++)
                lane[r] = _mm256_add_ps(lane[r], _mm256_mul_ps(
                    _mm256_loadu_ps(off + (size_t)r * (size_t)groups + g), vg));
        }
        if (tail)
            for (int r = 0; r < 8; r++)
                lane[r] = _mm256_add_ps(lane[r], _mm256_mul_ps(_mm256_maskload_ps(
                    off + (size_t)r * (size_t)groups + full, mask), v_tail));
        transpose8(lane);   /* lane[k]: partial sum k of the eight outputs */
        __m256 total = _mm256_add_ps(_mm256_setzero_ps(), lane[0]);
        for (int k = 1; k < 8; k++) total = _mm256_add_ps(total, lane[k]);
        _mm256_storeu_ps(out + o, _mm256_sub_ps(_mm256_loadu_ps(out + o), total));
    }
    return o;
}

#else
/* ISO C wants a declaration in every translation unit: a build without AVX2 has nothing
 * else here. */
typedef int simd_quant_x86_none;
#endif /* SIMD_Q8_X86 */

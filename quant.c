/* quant.c: per-group int8 quantization and the int8 matmul kernels declared in quant.h.
 *
 * Sections: the reference kernels (portable C: what each computes, and what a build
 * without vector instructions runs), then one section per instruction set with its
 * versions of the two hot kernels, quantizing activations and the matmul for groups that
 * are a multiple of 32 (AVX2, where AVX-512 VNNI or AVX-VNNI replaces two of its
 * instructions by one), then the public functions, which pick one at compile time. The
 * vector quantizer gives the reference's bits; the vector matmul differs from it only in
 * the order of its float additions. Nothing here allocates or threads: the caller splits
 * output columns among threads.
 */
#include "quant.h"

#include <math.h>     /* fabsf, roundf, isfinite, isnan, NAN */
#include <stddef.h>   /* size_t */
#include <stdint.h>   /* int8_t, int32_t */
#include <string.h>   /* memset */
#ifdef __AVX2__
#include <immintrin.h>  /* AVX2 (and VNNI) intrinsics */
#endif

#define QUANT_CHUNK 32      /* int8s per AVX2 register: the SIMD matmul needs group % 32 == 0 */
#define QUANT_LANES 8       /* floats (or int32s) per AVX2 register */
#define QUANT_ROW_TILE 4    /* rows of w per pass of the SIMD matmul: each x load feeds four rows */

int quant_groups(int cols, int group) {
    return (cols + group - 1) / group;
}

/* Length of group g of a row of cols values: group, except for a shorter last one. */
static int group_length(int g, int cols, int group) {
    int left = cols - g * group;
    return left < group ? left : group;
}

/* ------------------------------------------------------------------------- */
/* Reference kernels: portable C                                               */

/* The scale of a group whose largest magnitude is amax: amax / 127, or NaN when that is
 * not finite (amax NaN or inf), so that a non-finite input poisons every output that
 * uses its group instead of reaching a float-to-int conversion (undefined for NaN). */
static float scale_for(float amax) {
    float scale = amax / (float)QUANT_Q_MAX;
    return isfinite(scale) ? scale : NAN;
}

/* max |x| over x (n,), or NaN if x holds a NaN. */
static float absmax_reference(const float *x, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (isnan(a)) return NAN;
        if (a > amax) amax = a;
    }
    return amax;
}

/* q (n,) = round(x / scale) clamped to [-127, 127], with x (n,) finite and scale > 0, so
 * |x / scale| is at most about 127 (more only if scale is subnormal) and the conversion
 * to int8 is always defined. roundf rounds halves away from zero, as llama2.c's round(). */
static void round_reference(int8_t *q, const float *x, int n, float scale) {
    for (int i = 0; i < n; i++) {
        float v = roundf(x[i] / scale);
        if (v > (float)QUANT_Q_MAX) v = (float)QUANT_Q_MAX;
        if (v < (float)-QUANT_Q_MAX) v = (float)-QUANT_Q_MAX;
        q[i] = (int8_t)v;
    }
}

/* The exact dot product of a (n,) and b (n,), int8 values, n <= QUANT_GROUP_MAX. */
static int32_t dot_i8(const int8_t *a, const int8_t *b, int n) {
    int32_t sum = 0;
    for (int i = 0; i < n; i++) sum += (int32_t)a[i] * (int32_t)b[i];
    return sum;
}

/* x · w for one row x of the activations and one row w of the weights, both quantized
 * (q (cols,), scales (groups,)): per group the exact int32 dot product, times both
 * scales, summed in float. The portable path, one group after another. */
static float dot_row_reference(const int8_t *xq, const float *xs, const int8_t *wq,
                              const float *ws, int cols, int group) {
    float acc = 0.0f;
    for (int g = 0, c = 0; c < cols; g++, c += group) {
        int32_t dot = dot_i8(xq + c, wq + c, group_length(g, cols, group));
        acc += (float)dot * (xs[g] * ws[g]);
    }
    return acc;
}

/* ==== AVX2 (and VNNI: AVX-512's or AVX's) ==== */
#ifdef __AVX2__
/* absmax_reference, eight values at a time. max is exact, so the result is the same. */
static float absmax_avx2(const float *x, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 vmax = _mm256_setzero_ps(), vnan = _mm256_setzero_ps();
    int i = 0;
    for (; i + QUANT_LANES <= n; i += QUANT_LANES) {
        __m256 v = _mm256_loadu_ps(x + i);
        vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, v));
        vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));  /* _mm256_max_ps drops NaN */
    }
    if (_mm256_movemask_ps(vnan)) return NAN;
    float lanes[QUANT_LANES];
    _mm256_storeu_ps(lanes, vmax);
    float amax = absmax_reference(x + i, n - i);
    for (int j = 0; j < QUANT_LANES; j++)
        if (lanes[j] > amax) amax = lanes[j];
    return amax;                       /* NaN if the tail held one: NaN > lanes is false */
}

/* round_reference, eight values at a time, bit for bit: the same IEEE division, then
 * round half away from zero built from truncation (v - trunc(v) is exact). */
static void round_avx2(int8_t *q, const float *x, int n, float scale) {
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
    round_reference(q + i, x + i, n - i, scale);
}

/* acc + a * b, fused when the build has FMA (-mavx2 alone does not). */
static inline __m256 mul_add(__m256 a, __m256 b, __m256 acc) {
#ifdef __FMA__
    return _mm256_fmadd_ps(a, b, acc);
#else
    return _mm256_add_ps(acc, _mm256_mul_ps(a, b));
#endif
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

/* x · w for one activation row x and one weight row w (q (cols,), scales (groups,)):
 * dot_row_reference's arithmetic for group % 32 == 0. Each group's int32 sums stay in
 * eight lanes, which are converted, scaled and accumulated in eight float lanes, added
 * up at the end. The last group may be shorter than group: its values past the last
 * whole register are summed in scalar code and added to lane 0. */
static float dot_row_avx2(const int8_t *xq, const float *xs, const int8_t *wq,
                          const float *ws, int cols, int group, int groups) {
    __m256 acc = _mm256_setzero_ps();
    int whole_groups = cols / group, c = 0;   /* c runs over the row, group after group */
    for (int g = 0; g < groups; g++) {
        int end = g < whole_groups ? c + group : cols;
        __m256i dot = _mm256_setzero_si256();
        for (; c + QUANT_CHUNK <= end; c += QUANT_CHUNK) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(xq + c));
            __m256i v = _mm256_loadu_si256((const __m256i *)(wq + c));
            dot = dot32_add(dot, _mm256_abs_epi8(x), x, v);
        }
        if (c < end) {   /* only in a short last group */
            dot = add_lane0(dot, dot_i8(xq + c, wq + c, end - c));
            c = end;
        }
        acc = mul_add(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(xs[g] * ws[g]), acc);
    }
    return sum_lanes(acc);
}

/* sums (4,) = x · w_r for QUANT_ROW_TILE = 4 consecutive weight rows w_r (q rows cols
 * apart, scale rows groups apart): dot_row_avx2 four times over, each x register loaded
 * once for the four rows. Each row sees dot_row_avx2's operations in its order, so an
 * output has the same bits whichever of the two computes it. */
static void dot_rows4_avx2(float *sums, const int8_t *xq, const float *xs, const int8_t *wq,
                           const float *ws, int cols, int group, int groups) {
    const int8_t *w0 = wq, *w1 = w0 + cols, *w2 = w1 + cols, *w3 = w2 + cols;
    const float *s0 = ws, *s1 = s0 + groups, *s2 = s1 + groups, *s3 = s2 + groups;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int whole_groups = cols / group, c = 0;
    for (int g = 0; g < groups; g++) {
        int end = g < whole_groups ? c + group : cols;
        __m256i dot0 = _mm256_setzero_si256(), dot1 = dot0, dot2 = dot0, dot3 = dot0;
        for (; c + QUANT_CHUNK <= end; c += QUANT_CHUNK) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(xq + c));
            __m256i ax = _mm256_abs_epi8(x);
            dot0 = dot32_add(dot0, ax, x, _mm256_loadu_si256((const __m256i *)(w0 + c)));
            dot1 = dot32_add(dot1, ax, x, _mm256_loadu_si256((const __m256i *)(w1 + c)));
            dot2 = dot32_add(dot2, ax, x, _mm256_loadu_si256((const __m256i *)(w2 + c)));
            dot3 = dot32_add(dot3, ax, x, _mm256_loadu_si256((const __m256i *)(w3 + c)));
        }
        if (c < end) {   /* only in a short last group */
            dot0 = add_lane0(dot0, dot_i8(xq + c, w0 + c, end - c));
            dot1 = add_lane0(dot1, dot_i8(xq + c, w1 + c, end - c));
            dot2 = add_lane0(dot2, dot_i8(xq + c, w2 + c, end - c));
            dot3 = add_lane0(dot3, dot_i8(xq + c, w3 + c, end - c));
            c = end;
        }
        acc0 = mul_add(_mm256_cvtepi32_ps(dot0), _mm256_set1_ps(xs[g] * s0[g]), acc0);
        acc1 = mul_add(_mm256_cvtepi32_ps(dot1), _mm256_set1_ps(xs[g] * s1[g]), acc1);
        acc2 = mul_add(_mm256_cvtepi32_ps(dot2), _mm256_set1_ps(xs[g] * s2[g]), acc2);
        acc3 = mul_add(_mm256_cvtepi32_ps(dot3), _mm256_set1_ps(xs[g] * s3[g]), acc3);
    }
    sums[0] = sum_lanes(acc0);
    sums[1] = sum_lanes(acc1);
    sums[2] = sum_lanes(acc2);
    sums[3] = sum_lanes(acc3);
}

/* Columns o0 .. of quant_matmul_block for group % 32 == 0: tiles of QUANT_ROW_TILE rows of
 * w, then single rows; for N > 1 a tile's rows of w (4 x cols bytes) stay in L1 while the
 * N rows of x go past them. Returns o1. */
static int matmul_block_avx2(float *out, const int8_t *xq, const float *xs,
                             const QuantMatrix *w, const float *bias, int N, int o0, int o1) {
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group), OC = w->rows;
    int o = o0;
    for (; o + QUANT_ROW_TILE <= o1; o += QUANT_ROW_TILE) {
        const int8_t *wq = w->q + (size_t)o * (size_t)cols;
        const float *ws = w->scale + (size_t)o * (size_t)groups;
        for (int n = 0; n < N; n++) {
            const int8_t *xq_n = xq + (size_t)n * (size_t)cols;
            const float *xs_n = xs + (size_t)n * (size_t)groups;
            float sums[QUANT_ROW_TILE], *out_n = out + (size_t)n * (size_t)OC;
            dot_rows4_avx2(sums, xq_n, xs_n, wq, ws, cols, group, groups);
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
#endif /* AVX2 */

/* ------------------------------------------------------------------------- */
/* Quantization                                                                */

void quant_quantize(int8_t *q, float *scale, const float *x, int rows, int cols, int group) {
    int groups = quant_groups(cols, group);
    for (int r = 0; r < rows; r++) {
        for (int g = 0; g < groups; g++) {
            size_t at = (size_t)r * (size_t)cols + (size_t)g * (size_t)group;
            int n = group_length(g, cols, group);
#ifdef __AVX2__
            float s = scale_for(absmax_avx2(x + at, n));
#else
            float s = scale_for(absmax_reference(x + at, n));
#endif
            scale[(size_t)r * (size_t)groups + (size_t)g] = s;
            if (!(s > 0.0f)) {          /* zero (all-zero group, or underflow) or NaN */
                memset(q + at, 0, (size_t)n);
                continue;
            }
#ifdef __AVX2__
            round_avx2(q + at, x + at, n, s);
#else
            round_reference(q + at, x + at, n, s);
#endif
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Dequantization                                                              */

void quant_dequantize_row(float *out, const QuantMatrix *m, int row) {
    int groups = quant_groups(m->cols, m->group);
    const int8_t *q = m->q + (size_t)row * (size_t)m->cols;
    const float *scale = m->scale + (size_t)row * (size_t)groups;
    for (int g = 0; g < groups; g++) {
        int c0 = g * m->group, n = group_length(g, m->cols, m->group);
        for (int c = c0; c < c0 + n; c++) out[c] = (float)q[c] * scale[g];
    }
}

void quant_dequantize(float *out, const QuantMatrix *m) {
    for (int r = 0; r < m->rows; r++)
        quant_dequantize_row(out + (size_t)r * (size_t)m->cols, m, r);
}

/* ------------------------------------------------------------------------- */
/* Matmul                                                                      */

void quant_matmul_block(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1) {
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group), OC = w->rows;
    int o = o0;
#ifdef __AVX2__
    if (group % QUANT_CHUNK == 0) o = matmul_block_avx2(out, xq, xs, w, bias, N, o0, o1);
#endif
    for (; o < o1; o++) {   /* the reference */
        const int8_t *wq = w->q + (size_t)o * (size_t)cols;
        const float *ws = w->scale + (size_t)o * (size_t)groups;
        for (int n = 0; n < N; n++)
            out[(size_t)n * (size_t)OC + (size_t)o] =
                dot_row_reference(xq + (size_t)n * (size_t)cols, xs + (size_t)n * (size_t)groups,
                                 wq, ws, cols, group) + (bias ? bias[o] : 0.0f);
    }
}

const char *quant_kernel_name(void) {
#if defined(__AVX2__) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return "avx512-vnni";
#elif defined(__AVX2__) && defined(__AVXVNNI__)
    return "avx-vnni";
#elif defined(__AVX2__)
    return "avx2";
#else
    return "portable";
#endif
}

/* quant.c: per-group int8 quantization and the int8 matmul kernels declared in quant.h.
 *
 * Sections: the reference kernels (portable C: what each computes, and what a build
 * without vector instructions runs); one section per instruction set (AVX2 with AVX-512
 * VNNI or AVX-VNNI where the build has them, NEON with or without the dot-product
 * instructions), each defining the quantizer's two loops and a small vocabulary for the
 * matmul; the matmul's register tile, written once in that vocabulary; then the public
 * functions, which pick one at compile time. Every path gives the reference's bits: the
 * quantizer does the same IEEE operations, and the matmul's only rounding steps are the
 * reference's (each group's exact integer dot product, converted to float, times the two
 * scales, added in group order), so int8 results are the same in every build with IEEE
 * float arithmetic. Nothing here allocates or threads: the caller splits output columns
 * among threads.
 */
#include "quant.h"

#include <math.h>     /* fabsf, roundf, isfinite, isnan, NAN */
#include <stddef.h>   /* size_t */
#include <stdint.h>   /* int8_t, int32_t */
#include <string.h>   /* memset, memcpy */
#if defined(__AVX2__)
#define QUANT_SIMD 1
#include <immintrin.h>  /* AVX2 (and VNNI) intrinsics */
#elif defined(__ARM_NEON) && defined(__aarch64__)
#define QUANT_SIMD 1
#include <arm_neon.h>   /* NEON (and dot-product) intrinsics */
#else
#define QUANT_SIMD 0
#endif

#define QUANT_CHUNK 32      /* int8s per step of the vector matmul: it needs group % 32 == 0 */
#define QUANT_COLS 8        /* output columns (rows of w) per tile of the vector matmul */

/* The tile must be inlined into each caller, where its height is a constant: only then do
 * its loops unroll and its sums stay in registers. */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

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
 * scales, added in float one group after another. Every path gives these bits. */
static float dot_row_reference(const int8_t *xq, const float *xs, const int8_t *wq,
                               const float *ws, int cols, int group) {
    float acc = 0.0f;
    for (int g = 0, c = 0; c < cols; g++, c += group) {
        int32_t dot = dot_i8(xq + c, wq + c, group_length(g, cols, group));
        acc += (float)dot * (xs[g] * ws[g]);
    }
    return acc;
}

/* ------------------------------------------------------------------------- */
/* Instruction sets                                                            */
/*
 * Each section defines absmax_vector and round_vector (absmax_reference and
 * round_reference on whole vectors of x, the rest by the reference, the same bits), and
 * the matmul's vocabulary:
 *   QDots           8 int32 lanes: lane c the exact dot product of a row of x with row c of
 *                   a tile of QUANT_COLS rows of w
 *   qdots_tile      R rows of x against the 8 rows of w over n values (n % 32 == 0):
 *                   R QDots; integer sums are exact, so how the lanes are summed is the
 *                   section's choice
 *   qdots_add       a QDots plus 8 int32s from memory
 *   QF8             8 float lanes: qf8_zero, qf8_load, qf8_store, qf8_set1, qf8_gather
 *                   (p[c * stride] in lane c), qf8_from_dots (each lane rounded to float as
 *                   C converts), qf8_mul, qf8_add (never fused)
 *   QUANT_TILE_R    the rows of x per tile that the registers hold
 */

/* ==== AVX2 (with AVX-512 VNNI or AVX-VNNI where the build has them) ==== */
#if defined(__AVX2__)
#define QUANT_LANES 8       /* floats (or int32s) per AVX2 register */
/* absmax_reference, eight values at a time. max is exact, so the result is the same. */
static float absmax_vector(const float *x, int n) {
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
static void round_vector(int8_t *q, const float *x, int n, float scale) {
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

typedef __m256i QDots;
typedef __m256 QF8;
#if defined(__AVX512F__)
#define QUANT_TILE_R 2      /* 2 x 8 accumulators of AVX-512's 32 vector registers */
#else
#define QUANT_TILE_R 1      /* 8 accumulators of AVX2's 16 */
#endif

/* lane c = the sum of a[c]'s eight lanes. hadd adds neighbouring lanes within each
 * 128-bit half, so two rounds leave each half holding four rows' half sums. */
static inline QDots qdots_reduce(const __m256i a[QUANT_COLS]) {
    __m256i h01 = _mm256_hadd_epi32(a[0], a[1]), h23 = _mm256_hadd_epi32(a[2], a[3]);
    __m256i h45 = _mm256_hadd_epi32(a[4], a[5]), h67 = _mm256_hadd_epi32(a[6], a[7]);
    __m256i h0123 = _mm256_hadd_epi32(h01, h23), h4567 = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                            _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

/* acc (R, 8) = (first ? 0 : acc) + the products of the 32 values from i of R rows of x and
 * the 8 rows of w. Called with constant R and first. */
static ALWAYS_INLINE void qdots_step(__m256i acc[][QUANT_COLS], const int8_t *x,
                                     size_t x_stride, const int8_t *w, size_t w_stride, int i,
                                     int R, int first) {
    __m256i x_r[QUANT_TILE_R], ax_r[QUANT_TILE_R];
    for (int r = 0; r < R; r++) {
        x_r[r] = _mm256_loadu_si256((const __m256i *)(x + (size_t)r * x_stride + i));
        ax_r[r] = _mm256_abs_epi8(x_r[r]);
    }
    for (int c = 0; c < QUANT_COLS; c++) {
        __m256i w_c = _mm256_loadu_si256((const __m256i *)(w + (size_t)c * w_stride + i));
        for (int r = 0; r < R; r++)
            acc[r][c] = dot32_add(first ? _mm256_setzero_si256() : acc[r][c], ax_r[r], x_r[r], w_c);
    }
}

static ALWAYS_INLINE void qdots_tile(QDots *dots, const int8_t *x, size_t x_stride,
                                     const int8_t *w, size_t w_stride, int n, int R) {
    __m256i acc[QUANT_TILE_R][QUANT_COLS];
    if (n == 0) {
        for (int r = 0; r < R; r++) dots[r] = _mm256_setzero_si256();
        return;
    }
    qdots_step(acc, x, x_stride, w, w_stride, 0, R, 1);   /* the first chunk: no adds */
    for (int i = QUANT_CHUNK; i < n; i += QUANT_CHUNK)
        qdots_step(acc, x, x_stride, w, w_stride, i, R, 0);
    for (int r = 0; r < R; r++) dots[r] = qdots_reduce(acc[r]);
}

static inline QDots qdots_add(QDots d, const int32_t *t) {
    return _mm256_add_epi32(d, _mm256_loadu_si256((const __m256i *)t));
}

#define qf8_zero() _mm256_setzero_ps()
#define qf8_load(p) _mm256_loadu_ps(p)
#define qf8_store(p, v) _mm256_storeu_ps(p, v)
#define qf8_set1(x) _mm256_set1_ps(x)
#define qf8_from_dots(d) _mm256_cvtepi32_ps(d)
#define qf8_mul(a, b) _mm256_mul_ps(a, b)
#define qf8_add(a, b) _mm256_add_ps(a, b)
static inline QF8 qf8_gather(const float *p, int stride) {
    __m256i at = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                    _mm256_set1_epi32(stride));
    return _mm256_i32gather_ps(p, at, sizeof(float));
}
#endif /* AVX2 */

/* ==== NEON (AArch64; the dot-product instructions where the build has them) ==== */
#if !defined(__AVX2__) && defined(__ARM_NEON) && defined(__aarch64__)
/* absmax_reference, four values at a time. max is exact, so the result is the same. */
static float absmax_vector(const float *x, int n) {
    float32x4_t vmax = vdupq_n_f32(0.0f);
    uint32x4_t vnan = vdupq_n_u32(0);
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(x + i);
        vmax = vmaxq_f32(vmax, vabsq_f32(v));
        vnan = vorrq_u32(vnan, vmvnq_u32(vceqq_f32(v, v)));   /* NaN: not equal to itself */
    }
    if (vmaxvq_u32(vnan)) return NAN;
    float lanes = vmaxvq_f32(vmax), amax = absmax_reference(x + i, n - i);
    return lanes > amax ? lanes : amax;   /* NaN if the tail held one */
}

/* round_reference, eight values at a time, bit for bit: the same IEEE division, and
 * vrndaq rounds halves away from zero as roundf does. */
static void round_vector(int8_t *q, const float *x, int n, float scale) {
    const float32x4_t vscale = vdupq_n_f32(scale);
    const float32x4_t qmax = vdupq_n_f32((float)QUANT_Q_MAX);
    const float32x4_t qmin = vdupq_n_f32((float)-QUANT_Q_MAX);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t a = vrndaq_f32(vdivq_f32(vld1q_f32(x + i), vscale));
        float32x4_t b = vrndaq_f32(vdivq_f32(vld1q_f32(x + i + 4), vscale));
        a = vminq_f32(vmaxq_f32(a, qmin), qmax);
        b = vminq_f32(vmaxq_f32(b, qmin), qmax);
        int16x8_t h = vcombine_s16(vqmovn_s32(vcvtq_s32_f32(a)), vqmovn_s32(vcvtq_s32_f32(b)));
        vst1_s8(q + i, vqmovn_s16(h));   /* exact: integers in [-127, 127] */
    }
    round_reference(q + i, x + i, n - i, scale);
}

/* acc (4 x int32) plus the 16 products x[i] * w[i]: four per lane with the dot-product
 * instruction; else eight int16 pair sums (at most 2 * 127 * 127 = 32258, no overflow)
 * added pairwise into the lanes. */
static inline int32x4_t dot16_add(int32x4_t acc, int8x16_t x, int8x16_t w) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, x, w);
#else
    int16x8_t pairs = vmull_s8(vget_low_s8(x), vget_low_s8(w));
    pairs = vmlal_high_s8(pairs, x, w);
    return vpadalq_s16(acc, pairs);
#endif
}

typedef struct {
    int32x4_t lo, hi;   /* lanes 0-3, 4-7 */
} QDots;
typedef struct {
    float32x4_t lo, hi;
} QF8;
#define QUANT_TILE_R 2      /* 2 x 8 accumulators of NEON's 32 vector registers */

/* acc (R, 8) = (first ? 0 : acc) + the products of the 16 values from i of R rows of x and
 * the 8 rows of w. Called with constant R and first. */
static ALWAYS_INLINE void qdots_step(int32x4_t acc[][QUANT_COLS], const int8_t *x,
                                     size_t x_stride, const int8_t *w, size_t w_stride, int i,
                                     int R, int first) {
    int8x16_t x_r[QUANT_TILE_R];
    for (int r = 0; r < R; r++) x_r[r] = vld1q_s8(x + (size_t)r * x_stride + i);
    for (int c = 0; c < QUANT_COLS; c++) {
        int8x16_t w_c = vld1q_s8(w + (size_t)c * w_stride + i);
        for (int r = 0; r < R; r++)
            acc[r][c] = dot16_add(first ? vdupq_n_s32(0) : acc[r][c], x_r[r], w_c);
    }
}

static ALWAYS_INLINE void qdots_tile(QDots *dots, const int8_t *x, size_t x_stride,
                                     const int8_t *w, size_t w_stride, int n, int R) {
    int32x4_t acc[QUANT_TILE_R][QUANT_COLS];
    if (n == 0) {
        for (int r = 0; r < R; r++) dots[r].lo = dots[r].hi = vdupq_n_s32(0);
        return;
    }
    qdots_step(acc, x, x_stride, w, w_stride, 0, R, 1);   /* the first 16 values: no adds */
    for (int i = QUANT_CHUNK / 2; i < n; i += QUANT_CHUNK / 2)
        qdots_step(acc, x, x_stride, w, w_stride, i, R, 0);
    for (int r = 0; r < R; r++) {   /* pairwise adds: lane c = the sum of acc[r][c] */
        const int32x4_t *a = acc[r];
        dots[r].lo = vpaddq_s32(vpaddq_s32(a[0], a[1]), vpaddq_s32(a[2], a[3]));
        dots[r].hi = vpaddq_s32(vpaddq_s32(a[4], a[5]), vpaddq_s32(a[6], a[7]));
    }
}

static inline QDots qdots_add(QDots d, const int32_t *t) {
    QDots s = {vaddq_s32(d.lo, vld1q_s32(t)), vaddq_s32(d.hi, vld1q_s32(t + 4))};
    return s;
}

static inline QF8 qf8_zero(void) {
    QF8 v = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    return v;
}

static inline QF8 qf8_load(const float *p) {
    QF8 v = {vld1q_f32(p), vld1q_f32(p + 4)};
    return v;
}

static inline void qf8_store(float *p, QF8 v) {
    vst1q_f32(p, v.lo);
    vst1q_f32(p + 4, v.hi);
}

static inline QF8 qf8_set1(float x) {
    QF8 v = {vdupq_n_f32(x), vdupq_n_f32(x)};
    return v;
}

static inline QF8 qf8_gather(const float *p, int stride) {
    float lanes[QUANT_COLS];
    for (int c = 0; c < QUANT_COLS; c++) lanes[c] = p[(size_t)c * (size_t)stride];
    return qf8_load(lanes);
}

static inline QF8 qf8_from_dots(QDots d) {
    QF8 v = {vcvtq_f32_s32(d.lo), vcvtq_f32_s32(d.hi)};
    return v;
}

static inline QF8 qf8_mul(QF8 a, QF8 b) {
    QF8 v = {vmulq_f32(a.lo, b.lo), vmulq_f32(a.hi, b.hi)};
    return v;
}

static inline QF8 qf8_add(QF8 a, QF8 b) {
    QF8 v = {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)};
    return v;
}
#endif /* NEON */

/* ------------------------------------------------------------------------- */
/* The matmul's register tile, in the vocabulary above                         */
#if QUANT_SIMD

/* out rows n .. n+R-1, columns o .. o+7 (row stride OC) = those rows of x times rows
 * o .. o+7 of w, + bias: dot_row_reference's arithmetic with the eight columns in the
 * lanes. For each group: R x 8 exact integer dot products (the last group's values past
 * its whole chunks, if short, in scalar code), converted to float, times x's scale times
 * w's, added to the column's sum. Called with constant R. */
static ALWAYS_INLINE void matmul_tile(float *out, const int8_t *xq, const float *xs,
                                      const QuantMatrix *w, const float *bias, int n, int o,
                                      int R) {
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group), OC = w->rows;
    int whole_groups = cols / group;   /* all but a short last one */
    const int8_t *x_g = xq + (size_t)n * (size_t)cols, *w_g = w->q + (size_t)o * (size_t)cols;
    const float *xs_n = xs + (size_t)n * (size_t)groups;
    const float *ws_g = w->scale + (size_t)o * (size_t)groups;
    QF8 acc[QUANT_TILE_R];
    for (int r = 0; r < R; r++) acc[r] = qf8_zero();
    for (int g = 0; g < groups; g++, x_g += group, w_g += group, ws_g++) {
        QDots dots[QUANT_TILE_R];
        if (group == QUANT_CHUNK && g < whole_groups) {   /* the usual case: one chunk */
            qdots_tile(dots, x_g, (size_t)cols, w_g, (size_t)cols, QUANT_CHUNK, R);
        } else {
            int len = group_length(g, cols, group), whole = len / QUANT_CHUNK * QUANT_CHUNK;
            qdots_tile(dots, x_g, (size_t)cols, w_g, (size_t)cols, whole, R);
            for (int r = 0; whole < len && r < R; r++) {   /* only in a short last group */
                int32_t tail[QUANT_COLS];
                for (int c = 0; c < QUANT_COLS; c++)
                    tail[c] = dot_i8(x_g + (size_t)r * (size_t)cols + whole,
                                     w_g + (size_t)c * (size_t)cols + whole, len - whole);
                dots[r] = qdots_add(dots[r], tail);
            }
        }
        QF8 w_scale = qf8_gather(ws_g, groups);
        for (int r = 0; r < R; r++) {
            QF8 scale = qf8_mul(qf8_set1(xs_n[(size_t)r * (size_t)groups + (size_t)g]), w_scale);
            acc[r] = qf8_add(acc[r], qf8_mul(qf8_from_dots(dots[r]), scale));
        }
    }
    QF8 b = bias ? qf8_load(bias + o) : qf8_zero();   /* + 0, as the reference adds */
    for (int r = 0; r < R; r++) qf8_store(out + (size_t)(n + r) * (size_t)OC + (size_t)o,
                                          qf8_add(acc[r], b));
}

/* Columns o0 .. of out (N, OC) for every row, QUANT_COLS at a time (the eight rows of w
 * stay in L1 while the rows of x go past them, QUANT_TILE_R at a time); returns the first
 * column left for the reference (o1 minus fewer than 8). */
static int matmul_vector(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                         const float *bias, int N, int o0, int o1) {
    int o = o0;
    for (; o + QUANT_COLS <= o1; o += QUANT_COLS) {
        int n = 0;
        for (; n + QUANT_TILE_R <= N; n += QUANT_TILE_R)
            matmul_tile(out, xq, xs, w, bias, n, o, QUANT_TILE_R);
        for (; n < N; n++) matmul_tile(out, xq, xs, w, bias, n, o, 1);
    }
    return o;
}
#endif /* QUANT_SIMD */

/* ------------------------------------------------------------------------- */
/* Quantization                                                                */

void quant_quantize(int8_t *q, float *scale, const float *x, int rows, int cols, int group) {
    int groups = quant_groups(cols, group);
    for (int r = 0; r < rows; r++) {
        for (int g = 0; g < groups; g++) {
            size_t at = (size_t)r * (size_t)cols + (size_t)g * (size_t)group;
            int n = group_length(g, cols, group);
#if QUANT_SIMD
            float s = scale_for(absmax_vector(x + at, n));
#else
            float s = scale_for(absmax_reference(x + at, n));
#endif
            scale[(size_t)r * (size_t)groups + (size_t)g] = s;
            if (!(s > 0.0f)) {          /* zero (all-zero group, or underflow) or NaN */
                memset(q + at, 0, (size_t)n);
                continue;
            }
#if QUANT_SIMD
            round_vector(q + at, x + at, n, s);
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
#if QUANT_SIMD
    if (group % QUANT_CHUNK == 0) o = matmul_vector(out, xq, xs, w, bias, N, o0, o1);
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
#elif QUANT_SIMD && defined(__ARM_FEATURE_DOTPROD)
    return "neon-dotprod";
#elif QUANT_SIMD
    return "neon";
#else
    return "portable";
#endif
}

/* vec.h: the float vocabulary the vector kernels (vec_kernels.c) are written in, one
 * section per instruction set: AVX2 + FMA, AVX-512, NEON (AArch64). Included by
 * vec_kernels.c, in builds with SIMD_VECTOR (simd.h); the kernels themselves are written
 * once, in the names defined here. Like ggml's simd-mappings.h, this header holds
 * inline functions and macros: it is the instruction sets' dictionary, not an interface.
 */
#ifndef SIMD_VEC_H
#define SIMD_VEC_H

#include <stdint.h>       /* uint32_t, uint64_t */
#include <string.h>       /* memcpy (NEON's partial vectors) */
#include "hash.h"         /* hash_mix64 and the dropout rule (vec_dropout) */
#include "simd/simd.h"    /* SIMD_VECTOR, LANES, EXP_X_MIN, EXP_X_MAX */
#if SIMD_VECTOR && defined(__AVX2__)
#include <immintrin.h>    /* AVX2, FMA and AVX-512 intrinsics */
#elif SIMD_VECTOR && defined(__ARM_NEON)
#include <arm_neon.h>     /* NEON intrinsics */
#endif

/* ------------------------------------------------------------------------- */
/* Instruction sets                                                            */
/*
 * Each section below defines, for one instruction set, the vocabulary the vector kernels
 * are written in, and nothing else:
 *   Vec               VLANES floats: vec_zero, vec_set1, vec_load, vec_store, vec_broadcast
 *                     (one float to every lane), vec_add, vec_sub, vec_mul, vec_div,
 *                     vec_sqrt (each rounded as the scalar operation), vec_fma (fused)
 *   LaneMask          the first n lanes, from lane_mask(n): vec_load_mask (zeros beyond),
 *                     vec_store_mask, vec_blend_zero (zero outside the mask)
 *   vec_sum           the sum of a Vec's lanes, in an order of the section's choosing
 *   vec_exp_clamp, vec_scale_exp2, vec_nan_or   the three steps of exp_approx that are
 *                     not plain arithmetic (clamp, p 2^k rounded once as p 2^k1 2^k2 is,
 *                     NaN passed through)
 *   vec_max           x where x > m, else m, lane by lane (so a NaN x never wins)
 *   vec_dropout       hash.h's dropout rule on the lanes of x, elements first .. first +
 *                     VLANES - 1: hash_mix64 in 64-bit integer lanes
 *   V8                eight float lanes whatever the register width, for the dot products
 *                     that must give the same bits in every build: v8_zero, v8_load,
 *                     v8_store, v8_load_first (the first n < 8 floats, zeros beyond,
 *                     nothing read past them), v8_set1, v8_fma, v8_add, v8_sub,
 *                     v8_mul, v8_sum (((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 +
 *                     l7)), as dot_reference),
 *                     v8_sum_rows (eight such sums at once), v8_transpose (an 8 x 8 block
 *                     of floats transposed)
 *   V8_PAIRS          1 where a Vec holds two V8 side by side (AVX-512): v8_pair(a, b)
 *                     (a in lanes 0-7, b in 8-15), v8_pair_dup(p) (the V8 at p in both
 *                     halves), v8_pair_sum_rows (v8_sum_rows of each half of eight pairs)
 *   GEMM_NV, TILE_MR, TILE_NV   register tile shapes (vectors per tile row, rows per tile)
 * The V8 sums and the one-lane FMA chains (GEMM, the trainer's products, weighted sums) are
 * the same operations in every section, so AVX2, AVX-512 and NEON builds give the same
 * bits there; exp, GELU and AdamW give the reference kernels' bits in every build.
 */

/* ==== AVX2 + FMA (x86-64-v3; the 8-lane part of AVX-512 builds too) ==== */
#if SIMD_VECTOR && defined(__AVX2__)
typedef __m256 V8;
#define v8_zero() _mm256_setzero_ps()
#define v8_load(p) _mm256_loadu_ps(p)
#define v8_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define v8_add(a, b) _mm256_add_ps(a, b)
#define v8_sub(a, b) _mm256_sub_ps(a, b)
#define v8_set1(x) _mm256_set1_ps(x)
#define v8_mul(a, b) _mm256_mul_ps(a, b)
#define v8_store(p, v) _mm256_storeu_ps(p, v)

static inline V8 v8_load_first(const float *p, int n) {
    __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
                                      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(p, mask);
}

static inline float v8_sum(V8 a) {
    __m128 quad = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
    return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}

/* out (8,) = v8_sum of a[0 .. 7], each added exactly as v8_sum adds it: quads lo + hi,
 * then pairs (q0 + q2, q1 + q3), then pair0 + pair1; the eight rows share the shuffles
 * that v8_sum spends on one. */
static inline void v8_sum_rows(float *out, const V8 a[8]) {
    __m256 q04 = _mm256_add_ps(_mm256_permute2f128_ps(a[0], a[4], 0x20),
                               _mm256_permute2f128_ps(a[0], a[4], 0x31));
    __m256 q15 = _mm256_add_ps(_mm256_permute2f128_ps(a[1], a[5], 0x20),
                               _mm256_permute2f128_ps(a[1], a[5], 0x31));
    __m256 q26 = _mm256_add_ps(_mm256_permute2f128_ps(a[2], a[6], 0x20),
                               _mm256_permute2f128_ps(a[2], a[6], 0x31));
    __m256 q37 = _mm256_add_ps(_mm256_permute2f128_ps(a[3], a[7], 0x20),
                               _mm256_permute2f128_ps(a[3], a[7], 0x31));
    /* per 128-bit half: (quad_r[0] + quad_r[2], quad_r[1] + quad_r[3]) for two rows */
    __m256 p0145 = _mm256_add_ps(_mm256_shuffle_ps(q04, q15, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(q04, q15, _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 p2367 = _mm256_add_ps(_mm256_shuffle_ps(q26, q37, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(q26, q37, _MM_SHUFFLE(3, 2, 3, 2)));
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_shuffle_ps(p0145, p2367, _MM_SHUFFLE(2, 0, 2, 0)),
                                        _mm256_shuffle_ps(p0145, p2367, _MM_SHUFFLE(3, 1, 3, 1))));
}

/* dst[i][j] = src[j][i] for an 8 x 8 block, rows ld_src floats apart in src and ld_dst
 * in dst (the GEMM's packing of x): eight loads, 24 shuffles, eight stores. */
static inline void v8_transpose(float *dst, int ld_dst, const float *src, int ld_src) {
    __m256 r[8], t[8];
    for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(src + (size_t)j * ld_src);
    for (int j = 0; j < 8; j += 2) {   /* t[j]: rows j, j+1 interleaved, lanes 0-1 / 4-5 */
        t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
        t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
    }
    for (int j = 0; j < 8; j += 4) {   /* columns c, c+4 of rows j .. j+3 */
        r[j] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int c = 0; c < 4; c++) {      /* rows 0-3 with rows 4-7: column c, then c + 4 */
        _mm256_storeu_ps(dst + (size_t)c * ld_dst, _mm256_permute2f128_ps(r[c], r[c + 4], 0x20));
        _mm256_storeu_ps(dst + (size_t)(c + 4) * ld_dst,
                         _mm256_permute2f128_ps(r[c], r[c + 4], 0x31));
    }
}

#if !defined(__AVX512F__)   /* Vec: 8 floats (AVX-512 builds take 16, next section) */
#define VLANES 8
typedef __m256 Vec;
#define vec_zero() _mm256_setzero_ps()
#define vec_load(p) _mm256_loadu_ps(p)
#define vec_store(p, v) _mm256_storeu_ps(p, v)
#define vec_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define vec_broadcast(p) _mm256_broadcast_ss(p)
#define vec_set1(x) _mm256_set1_ps(x)
#define vec_add(a, b) _mm256_add_ps(a, b)
#define vec_sub(a, b) _mm256_sub_ps(a, b)
#define vec_mul(a, b) _mm256_mul_ps(a, b)
#define vec_div(a, b) _mm256_div_ps(a, b)
#define vec_sqrt(a) _mm256_sqrt_ps(a)
#define vec_sum(v) v8_sum(v)
typedef __m256i LaneMask;
#define vec_load_mask(p, m) _mm256_maskload_ps(p, m)
#define vec_store_mask(p, m, v) _mm256_maskstore_ps(p, m, v)
#define vec_blend_zero(m, v) _mm256_and_ps(_mm256_castsi256_ps(m), v)
static inline LaneMask lane_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define GEMM_NV 2          /* 6 x 2 accumulators of 16 registers */
#define TILE_MR 6
#define TILE_NV 2

/* x clamped to [EXP_X_MIN, EXP_X_MAX], NaN lanes 0 (max and min return their second
 * operand for a NaN lane, which is then replaced) */
static inline Vec vec_exp_clamp(Vec x) {
    __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    Vec xc = _mm256_min_ps(_mm256_max_ps(x, vec_set1(EXP_X_MIN)), vec_set1(EXP_X_MAX));
    return _mm256_blendv_ps(xc, vec_zero(), is_nan);
}

/* p 2^k for integer-valued k in [-150, 128] (exp_approx's): p 2^k1 2^k2, k1 = k / 2
 * rounded toward 0 as C divides, k2 = k - k1, two factors that are normal floats */
static inline Vec vec_scale_exp2(Vec p, Vec k) {
    __m256i ki = _mm256_cvttps_epi32(k);
    __m256i k1 = _mm256_srai_epi32(_mm256_add_epi32(ki, _mm256_srli_epi32(ki, 31)), 1);
    __m256i k2 = _mm256_sub_epi32(ki, k1), bias = _mm256_set1_epi32(127);
    Vec f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    Vec f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    return vec_mul(vec_mul(p, f1), f2);
}

/* v, with x's lanes where x is NaN */
static inline Vec vec_nan_or(Vec x, Vec v) {
    return _mm256_blendv_ps(v, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
#define vec_max(x, m) _mm256_max_ps(x, m)   /* (x > m) ? x : m, as the instruction defines */

/* a * c in each 64-bit lane, modulo 2^64, from 32 x 32-bit products (AVX2 multiplies no
 * 64-bit lanes): lo(a) lo(c) + (hi(a) lo(c) + lo(a) hi(c)) 2^32 */
static inline __m256i u64_mul(__m256i a, uint64_t c) {
    __m256i c_lo = _mm256_set1_epi64x((long long)(uint32_t)c);
    __m256i c_hi = _mm256_set1_epi64x((long long)(c >> 32));
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_lo),
                                     _mm256_mul_epu32(a, c_hi));
    return _mm256_add_epi64(_mm256_mul_epu32(a, c_lo), _mm256_slli_epi64(cross, 32));
}

/* hash_mix64 >> HASH_TOP_SHIFT (the top 24 bits) of each 64-bit lane. Its last step,
 * z ^ (z >> 31), leaves those bits as they are (z >> 31 has none above bit 32), so it is
 * left out. */
static inline __m256i u64_hash_top(__m256i z) {
    z = _mm256_add_epi64(z, _mm256_set1_epi64x((long long)0x9E3779B97F4A7C15ull));
    z = u64_mul(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), 0xBF58476D1CE4E5B9ull);
    z = u64_mul(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), 0x94D049BB133111EBull);
    return _mm256_srli_epi64(z, HASH_TOP_SHIFT);
}

static inline Vec vec_dropout(Vec x, uint64_t first, uint32_t threshold, Vec keep_scale) {
    __m256i base = _mm256_set1_epi64x((long long)first);
    __m256i top_lo = u64_hash_top(_mm256_add_epi64(base, _mm256_setr_epi64x(0, 1, 2, 3)));
    __m256i top_hi = u64_hash_top(_mm256_add_epi64(base, _mm256_setr_epi64x(4, 5, 6, 7)));
    /* the low 32 bits of each lane (the whole value, < 2^24), lanes 0-7 in order */
    __m256 packed = _mm256_shuffle_ps(_mm256_castsi256_ps(top_lo), _mm256_castsi256_ps(top_hi),
                                      _MM_SHUFFLE(2, 0, 2, 0));
    __m256i top = _mm256_permute4x64_epi64(_mm256_castps_si256(packed), _MM_SHUFFLE(3, 1, 2, 0));
    __m256i dropped = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)threshold), top);
    return _mm256_andnot_ps(_mm256_castsi256_ps(dropped), _mm256_mul_ps(x, keep_scale));
}
#endif /* !__AVX512F__ */
#endif /* AVX2 + FMA */

/* ==== AVX-512 (Vec of 16 floats; V8 is AVX2's, above) ==== */
#if SIMD_VECTOR && defined(__AVX512F__)
#define VLANES 16
typedef __m512 Vec;
#define vec_zero() _mm512_setzero_ps()
#define vec_load(p) _mm512_loadu_ps(p)
#define vec_store(p, v) _mm512_storeu_ps(p, v)
#define vec_fma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vec_broadcast(p) _mm512_set1_ps(*(p))
#define vec_set1(x) _mm512_set1_ps(x)
#define vec_add(a, b) _mm512_add_ps(a, b)
#define vec_sub(a, b) _mm512_sub_ps(a, b)
#define vec_mul(a, b) _mm512_mul_ps(a, b)
#define vec_div(a, b) _mm512_div_ps(a, b)
#define vec_sqrt(a) _mm512_sqrt_ps(a)
#define vec_sum(v) _mm512_reduce_add_ps(v)
typedef __mmask16 LaneMask;
#define vec_load_mask(p, m) _mm512_maskz_loadu_ps(m, p)
#define vec_store_mask(p, m, v) _mm512_mask_storeu_ps(p, m, v)
#define vec_blend_zero(m, v) _mm512_maskz_mov_ps(m, v)
static inline LaneMask lane_mask(int n) { return (LaneMask)((1u << n) - 1u); }
/* the most vectors of rows of x in the fp32 GEMM's tile: 4 where the build targets Intel's
 * server cores of Sapphire Rapids and later (AVX-512 FP16 marks them: two full 512-bit FMA
 * ports, fed best by 6 x 4 sums, fewer loads a FMA; vec_kernels.c takes them only for
 * rows of w of GEMM_WIDE_IC values and more), else 2 (6 x 2: Zen 4 measured 4
 * slower) */
#if defined(__AVX512FP16__)
#define GEMM_NV 4
#else
#define GEMM_NV 2
#endif
#define TILE_MR 6          /* rows of C per tile: each loaded vector of B serves 6 FMAs */
#define TILE_NV 4          /* vectors of C's columns per tile: 24 accumulators of 32 registers */

static inline Vec vec_exp_clamp(Vec x) {
    __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    Vec xc = _mm512_min_ps(_mm512_max_ps(x, vec_set1(EXP_X_MIN)), vec_set1(EXP_X_MAX));
    return _mm512_mask_blend_ps(is_nan, xc, vec_zero());
}

/* One vscalefps: p 2^k rounded once. p is exp's polynomial, in [0.70, 1.42], so p 2^k1 is
 * exact and p 2^k1 2^k2 is rounded once too, in the same way: the same bits (checked for
 * every float p in [0.5, 2) and every k in [-150, 128], subnormal and infinite results
 * included), a tenth of the instructions. */
static inline Vec vec_scale_exp2(Vec p, Vec k) { return _mm512_scalef_ps(p, k); }

static inline Vec vec_nan_or(Vec x, Vec v) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), v, x);
}
#define vec_max(x, m) _mm512_max_ps(x, m)

#define V8_PAIRS 1
static inline Vec v8_pair(V8 a, V8 b) {   /* (AVX512F's 64-bit form: the 32-bit one is DQ's) */
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(a)),
                                               _mm256_castps_pd(b), 1));
}
static inline Vec v8_pair_dup(const float *p) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(p))));
}

/* out_a (8,), out_b (8,) = v8_sum_rows of the low halves of a[0 .. 7], of the high halves:
 * each half takes v8_sum_rows's steps, in its own 256 bits (the 128-bit quarters of rows j
 * and j + 4 gathered by one two-source permute each, where v8_sum_rows permutes 128-bit
 * halves), so every sum is added exactly as v8_sum adds it. */
static inline void v8_pair_sum_rows(float *out_a, float *out_b, const Vec a[8]) {
    /* quarters 0, 2 of the first source and of the second, interleaved; then quarters 1, 3 */
    const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    const __m512i hi = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    Vec q[4];   /* q[j]: per half, (the quad sums of row j, of row j + 4) */
    for (int j = 0; j < 4; j++)
        q[j] = _mm512_add_ps(_mm512_permutex2var_ps(a[j], lo, a[j + 4]),
                             _mm512_permutex2var_ps(a[j], hi, a[j + 4]));
    Vec p0145 = _mm512_add_ps(_mm512_shuffle_ps(q[0], q[1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(q[0], q[1], _MM_SHUFFLE(3, 2, 3, 2)));
    Vec p2367 = _mm512_add_ps(_mm512_shuffle_ps(q[2], q[3], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(q[2], q[3], _MM_SHUFFLE(3, 2, 3, 2)));
    Vec sums = _mm512_add_ps(_mm512_shuffle_ps(p0145, p2367, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(p0145, p2367, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm256_storeu_ps(out_a, _mm512_castps512_ps256(sums));
    _mm256_storeu_ps(out_b, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sums), 1)));
}

/* a * c in each 64-bit lane, modulo 2^64 (without AVX512DQ: from 32 x 32-bit products, as
 * AVX2's u64_mul) */
static inline __m512i u64_mul(__m512i a, uint64_t c) {
#ifdef __AVX512DQ__
    return _mm512_mullo_epi64(a, _mm512_set1_epi64((long long)c));
#else
    __m512i c_lo = _mm512_set1_epi64((long long)(uint32_t)c);
    __m512i c_hi = _mm512_set1_epi64((long long)(c >> 32));
    __m512i cross = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(a, 32), c_lo),
                                     _mm512_mul_epu32(a, c_hi));
    return _mm512_add_epi64(_mm512_mul_epu32(a, c_lo), _mm512_slli_epi64(cross, 32));
#endif
}

/* hash_mix64 >> HASH_TOP_SHIFT of each 64-bit lane, as 32-bit lanes (the last step left
 * out, as in the AVX2 section) */
static inline __m256i u64_hash_top(__m512i z) {
    z = _mm512_add_epi64(z, _mm512_set1_epi64((long long)0x9E3779B97F4A7C15ull));
    z = u64_mul(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), 0xBF58476D1CE4E5B9ull);
    z = u64_mul(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), 0x94D049BB133111EBull);
    return _mm512_cvtepi64_epi32(_mm512_srli_epi64(z, HASH_TOP_SHIFT));
}

static inline Vec vec_dropout(Vec x, uint64_t first, uint32_t threshold, Vec keep_scale) {
    __m512i base = _mm512_set1_epi64((long long)first);
    __m512i lanes = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i top_lo = u64_hash_top(_mm512_add_epi64(base, lanes));
    __m256i top_hi = u64_hash_top(_mm512_add_epi64(_mm512_add_epi64(base, lanes),
                                                    _mm512_set1_epi64(8)));
    __m512i top = _mm512_inserti64x4(_mm512_castsi256_si512(top_lo), top_hi, 1);
    __mmask16 kept = _mm512_cmpge_epi32_mask(top, _mm512_set1_epi32((int)threshold));
    return _mm512_maskz_mul_ps(kept, x, keep_scale);
}
#endif /* AVX-512 */

/* ==== NEON (AArch64) ==== */
#if SIMD_VECTOR && defined(__ARM_NEON)
/* V8: two registers of four lanes, lanes 0-3 and 4-7, so that every sum is the one the
 * 8-lane x86 register makes */
typedef struct {
    float32x4_t lo, hi;
} V8;

static inline V8 v8_zero(void) {
    V8 v = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    return v;
}

static inline V8 v8_load(const float *p) {
    V8 v = {vld1q_f32(p), vld1q_f32(p + 4)};
    return v;
}

static inline V8 v8_fma(V8 a, V8 b, V8 c) {
    V8 v = {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)};
    return v;
}

static inline V8 v8_add(V8 a, V8 b) {
    V8 v = {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)};
    return v;
}

static inline V8 v8_mul(V8 a, V8 b) {
    V8 v = {vmulq_f32(a.lo, b.lo), vmulq_f32(a.hi, b.hi)};
    return v;
}

static inline V8 v8_sub(V8 a, V8 b) {
    V8 v = {vsubq_f32(a.lo, b.lo), vsubq_f32(a.hi, b.hi)};
    return v;
}

static inline V8 v8_set1(float x) {
    V8 v = {vdupq_n_f32(x), vdupq_n_f32(x)};
    return v;
}

static inline void v8_store(float *p, V8 v) {
    vst1q_f32(p, v.lo);
    vst1q_f32(p + 4, v.hi);
}

static inline V8 v8_load_first(const float *p, int n) {
    float lanes[8] = {0};
    memcpy(lanes, p, (size_t)n * sizeof *p);
    return v8_load(lanes);
}

static inline float v8_sum(V8 a) {
    float32x4_t quad = vaddq_f32(a.lo, a.hi);                         /* l_i + l_i+4 */
    float32x2_t pair = vadd_f32(vget_low_f32(quad), vget_high_f32(quad)); /* q0+q2, q1+q3 */
    return vget_lane_f32(pair, 0) + vget_lane_f32(pair, 1);
}

static inline void v8_sum_rows(float *out, const V8 a[8]) {
    float32x4_t pairs[4];   /* pairs[j]: the (q0 + q2, q1 + q3) of rows 2j and 2j + 1 */
    for (int j = 0; j < 4; j++) {
        float32x4_t q0 = vaddq_f32(a[2 * j].lo, a[2 * j].hi);
        float32x4_t q1 = vaddq_f32(a[2 * j + 1].lo, a[2 * j + 1].hi);
        pairs[j] = vaddq_f32(vcombine_f32(vget_low_f32(q0), vget_low_f32(q1)),
                             vcombine_f32(vget_high_f32(q0), vget_high_f32(q1)));
    }
    vst1q_f32(out, vpaddq_f32(pairs[0], pairs[1]));        /* adjacent lanes added */
    vst1q_f32(out + 4, vpaddq_f32(pairs[2], pairs[3]));
}

static inline void v8_transpose(float *dst, int ld_dst, const float *src, int ld_src) {
    for (int h = 0; h < 8; h += 4)       /* four 4 x 4 blocks, each by zips of 4 lanes */
        for (int g = 0; g < 8; g += 4) { /* dst rows h.., columns g.. = src rows g.., cols h.. */
            const float *s0 = src + (size_t)g * ld_src + h;
            float32x4_t a = vld1q_f32(s0), b = vld1q_f32(s0 + ld_src);
            float32x4_t c = vld1q_f32(s0 + 2 * (size_t)ld_src);
            float32x4_t d = vld1q_f32(s0 + 3 * (size_t)ld_src);
            float32x4_t ab0 = vzip1q_f32(a, b), ab1 = vzip2q_f32(a, b);
            float32x4_t cd0 = vzip1q_f32(c, d), cd1 = vzip2q_f32(c, d);
            float *d0 = dst + (size_t)h * ld_dst + g;
            vst1q_f32(d0, vreinterpretq_f32_f64(vzip1q_f64(vreinterpretq_f64_f32(ab0),
                                                           vreinterpretq_f64_f32(cd0))));
            vst1q_f32(d0 + ld_dst, vreinterpretq_f32_f64(vzip2q_f64(
                                       vreinterpretq_f64_f32(ab0), vreinterpretq_f64_f32(cd0))));
            vst1q_f32(d0 + 2 * (size_t)ld_dst, vreinterpretq_f32_f64(vzip1q_f64(
                                       vreinterpretq_f64_f32(ab1), vreinterpretq_f64_f32(cd1))));
            vst1q_f32(d0 + 3 * (size_t)ld_dst, vreinterpretq_f32_f64(vzip2q_f64(
                                       vreinterpretq_f64_f32(ab1), vreinterpretq_f64_f32(cd1))));
        }
}

#define VLANES 4
typedef float32x4_t Vec;
#define vec_zero() vdupq_n_f32(0.0f)
#define vec_load(p) vld1q_f32(p)
#define vec_store(p, v) vst1q_f32(p, v)
#define vec_fma(a, b, c) vfmaq_f32(c, a, b)
#define vec_broadcast(p) vld1q_dup_f32(p)
#define vec_set1(x) vdupq_n_f32(x)
#define vec_add(a, b) vaddq_f32(a, b)
#define vec_sub(a, b) vsubq_f32(a, b)
#define vec_mul(a, b) vmulq_f32(a, b)
#define vec_div(a, b) vdivq_f32(a, b)
#define vec_sqrt(a) vsqrtq_f32(a)
#define vec_sum(v) vaddvq_f32(v)
typedef int LaneMask;      /* NEON has no masked loads: the number of lanes, through memory */
static inline LaneMask lane_mask(int n) { return n; }

static inline Vec vec_load_mask(const float *p, LaneMask n) {
    if (n == VLANES) return vld1q_f32(p);
    float lanes[VLANES] = {0};
    memcpy(lanes, p, (size_t)n * sizeof *p);
    return vld1q_f32(lanes);
}

static inline void vec_store_mask(float *p, LaneMask n, Vec v) {
    if (n == VLANES) {
        vst1q_f32(p, v);
        return;
    }
    float lanes[VLANES];
    vst1q_f32(lanes, v);
    memcpy(p, lanes, (size_t)n * sizeof *p);
}

static inline Vec vec_blend_zero(LaneMask n, Vec v) {
    static const uint32_t lane_index[VLANES] = {0, 1, 2, 3};
    uint32x4_t keep = vcltq_u32(vld1q_u32(lane_index), vdupq_n_u32((uint32_t)n));
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), keep));
}
#define GEMM_NV 4          /* 6 x 4 accumulators of 32 registers: 16 rows of x, as AVX2 */
#define TILE_MR 6
#define TILE_NV 4

static inline Vec vec_exp_clamp(Vec x) {
    uint32x4_t is_nan = vmvnq_u32(vceqq_f32(x, x));
    Vec xc = vminq_f32(vmaxq_f32(x, vec_set1(EXP_X_MIN)), vec_set1(EXP_X_MAX));
    return vbslq_f32(is_nan, vec_zero(), xc);
}

static inline Vec vec_scale_exp2(Vec p, Vec k) {
    int32x4_t ki = vcvtq_s32_f32(k);   /* toward zero */
    int32x4_t k1 = vshrq_n_s32(vaddq_s32(ki, vreinterpretq_s32_u32(
                                                 vshrq_n_u32(vreinterpretq_u32_s32(ki), 31))), 1);
    int32x4_t k2 = vsubq_s32(ki, k1), bias = vdupq_n_s32(127);
    Vec f1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k1, bias), 23));
    Vec f2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k2, bias), 23));
    return vec_mul(vec_mul(p, f1), f2);
}

static inline Vec vec_nan_or(Vec x, Vec v) { return vbslq_f32(vceqq_f32(x, x), v, x); }
static inline Vec vec_max(Vec x, Vec m) { return vbslq_f32(vcgtq_f32(x, m), x, m); }

/* NEON multiplies no 64-bit lanes: the scalar hash for each of the four */
static inline Vec vec_dropout(Vec x, uint64_t first, uint32_t threshold, Vec keep_scale) {
    float lanes[VLANES];
    vst1q_f32(lanes, vmulq_f32(x, keep_scale));
    for (int i = 0; i < VLANES; i++)
        if (hash_drops(hash_mix64(first + (uint64_t)i), threshold)) lanes[i] = 0.0f;
    return vld1q_f32(lanes);
}
#endif /* NEON */

#if SIMD_VECTOR
_Static_assert(TILE_MR == SIMD_TILE_MR && TILE_NV * VLANES == SIMD_TILE_COLS,
               "simd.h's tile shape (the trainer's job plan) is this section's");
#endif

#endif /* SIMD_VEC_H */

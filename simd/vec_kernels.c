/* vec_kernels.c: the float kernels of simd.h, written once in the vocabulary of vec.h, for
 * every instruction set that defines it (AVX2 + FMA, AVX-512, NEON).
 *
 * Each kernel here is the vector form of a reference kernel in kernels.c (the engine's)
 * or trainer/train_kernels.c (the trainer's), named in its comment: the same outputs,
 * with the bits the header of kernels.h promises (a fused multiply-add where the
 * reference multiplies and adds; the same operations, hence the same bits, for exp, GELU,
 * SwiGLU, AdamW and dropout). Sections: exp; the decode tile; the GEMM tile; norms and
 * activations; attention's loops; then the trainer's kernels. A build without vector
 * instructions compiles nothing here (simd.h names the reference kernels instead).
 *
 * Legend: N rows of x, IC input width, OC output width (rows of w), n row, o output
 * column, i input index, C width.
 */
#include "simd/simd.h"

#if SIMD_VECTOR
#include <math.h>         /* sqrtf */
#include <stddef.h>       /* size_t */
#include <stdint.h>       /* int32_t, uint16_t, uint32_t, uint64_t */
#include <string.h>       /* memcpy */

#include "kernels.h"      /* KERNELS_NORM_EPS, KernelsAdamW */
#include "simd/vec.h"     /* Vec, V8 and their operations */

/* The tiles must be inlined into each caller, where their sizes are constants: only then
 * do their loops unroll and their sums stay in registers. */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* A tile's loops over its rows and vectors must unroll completely, or its accumulators stay
 * an array in memory, stored and reloaded at every step (gcc 12 did so in gemm_tile with
 * AVX2: twelve stores beside its twelve FMAs). Each compiler is asked in its own words:
 * clang 14 unrolls by gcc's "unroll 8" too late to keep the sums in registers; other
 * compilers may just not unroll. */
#if defined(__clang__)
#define TILE_UNROLL _Pragma("clang loop unroll(full)")
#elif defined(__GNUC__)
#define TILE_UNROLL _Pragma("GCC unroll 8")
#else
#define TILE_UNROLL
#endif

/* Hints that the line at p will be read soon (never a fault, whatever p), into L2 or into
 * L1 and the levels below it (not the non-temporal hint: that would drop the lines a model
 * small enough keeps in L3 from one token to the next). */
#if defined(__GNUC__)
#define PREFETCH_L2(p) __builtin_prefetch(p, 0, 2)
#define PREFETCH_L1(p) __builtin_prefetch(p, 0, 3)
#else
#define PREFETCH_L2(p) ((void)(p))
#define PREFETCH_L1(p) ((void)(p))
#endif

/* exp_approx on every lane, in its three stages: the same operations in the same order,
 * none fused, so every lane has exp_approx's bits (tests/test_kernels.c checks). */
static inline void vec_exp_reduce(Vec x, Vec *k, Vec *r) {   /* x = k ln 2 + r */
    Vec xc = vec_exp_clamp(x);
    *k = vec_sub(vec_add(vec_mul(xc, vec_set1(EXP_LOG2E)), vec_set1(EXP_ROUND)),
                 vec_set1(EXP_ROUND));
    *r = vec_sub(vec_sub(xc, vec_mul(*k, vec_set1(EXP_LN2_HI))),
                 vec_mul(*k, vec_set1(EXP_LN2_LO)));
}

static inline Vec vec_exp_poly(Vec r) {   /* exp(r), |r| <= ln 2 / 2 */
    Vec p = vec_set1(1.0f / 5040.0f);
    p = vec_add(vec_mul(p, r), vec_set1(1.0f / 720.0f));
    p = vec_add(vec_mul(p, r), vec_set1(1.0f / 120.0f));
    p = vec_add(vec_mul(p, r), vec_set1(1.0f / 24.0f));
    p = vec_add(vec_mul(p, r), vec_set1(1.0f / 6.0f));
    p = vec_add(vec_mul(p, r), vec_set1(0.5f));
    p = vec_add(vec_mul(p, r), vec_set1(1.0f));
    return vec_add(vec_mul(p, r), vec_set1(1.0f));
}

static inline Vec vec_exp_scale(Vec x, Vec k, Vec p) {   /* p 2^k, or x where x is NaN */
    return vec_nan_or(x, vec_scale_exp2(p, k));
}

/* y (n,) = exp_approx of every lane of x, n <= EXP_BLOCK a multiple of VLANES, y may be x:
 * one stage at a time over all n. A loop of whole exps is latency-bound: each is a chain
 * of ~40 dependent steps, and the out-of-order window, full of their waiting steps, holds
 * only two or three chains. A stage's chain is short, so the window holds many vectors'.
 * Same operations: the same bits. */
#define EXP_BLOCK 256
static void exp_block(float *y, const float *x, int n) {
    _Alignas(64) float k_n[EXP_BLOCK], r_n[EXP_BLOCK];
    for (int i = 0; i < n; i += VLANES) {
        Vec k, r;
        vec_exp_reduce(vec_load(x + i), &k, &r);
        vec_store(k_n + i, k);
        vec_store(r_n + i, r);
    }
    for (int i = 0; i < n; i += VLANES) vec_store(r_n + i, vec_exp_poly(vec_load(r_n + i)));
    for (int i = 0; i < n; i += VLANES)
        vec_store(y + i, vec_exp_scale(vec_load(x + i), vec_load(k_n + i), vec_load(r_n + i)));
}

/* The length of the next block for exp_block when rest values are left: whole vectors,
 * at most EXP_BLOCK (0 when under one vector is left). */
static inline int exp_block_len(size_t rest) {
    return rest >= EXP_BLOCK ? EXP_BLOCK : (int)(rest / VLANES * VLANES);
}

/* ---- half precision ---- */

/* kernels.c's to_half_reference, a vector at a time: the conversion instructions round to
 * nearest even and keep a NaN's top payload bits as the reference does (x86: F16C, in
 * every x86-64-v3 build; AArch64: its conversions, under the default FPCR). Returns how
 * many values it did (simd_from_half, below, with the loads of halves). */
size_t simd_to_half(uint16_t *out, const float *x, size_t n) {
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(out + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__aarch64__)
    for (; i + 4 <= n; i += 4)
        vst1_u16(out + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
#else
    (void)out, (void)x, (void)n;   /* AVX2 built without F16C: the reference does them all */
#endif
    return i;
}

/* Loads of halves, for attention over a KV cache kept in halves: VLANES or eight halves (the
 * first m of them: zeros beyond, nothing read past them) as floats, exactly. */
#if defined(__F16C__)
static ALWAYS_INLINE V8 v8_load_half(const uint16_t *h) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}
#elif defined(__AVX2__)
/* AVX2 built without F16C (a build, not a CPU: every AVX2 core has F16C): the format's
 * definition in integer steps. A finite half's exponent and fraction bits, shifted into a
 * float's (<< 13), read 2^-112 times its magnitude (subnormals too), which 2^112 rescales
 * exactly; infinities and NaNs (exponent 31) take the float's exponent 255 instead, a NaN
 * made quiet as kernels_from_half makes it; then the sign. */
static ALWAYS_INLINE V8 v8_load_half(const uint16_t *h) {
    __m256i bits = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)h));
    __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fff));
    __m256i shifted = _mm256_slli_epi32(magnitude, 13);
    __m256 finite = _mm256_mul_ps(_mm256_castsi256_ps(shifted), _mm256_set1_ps(0x1p112f));
    __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7c00));
    __m256i special = _mm256_or_si256(_mm256_or_si256(shifted, _mm256_set1_epi32(0x7f800000)),
                                      _mm256_and_si256(nan, _mm256_set1_epi32(0x400000)));
    __m256i is_special = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7bff));
    __m256 value = _mm256_blendv_ps(finite, _mm256_castsi256_ps(special),
                                    _mm256_castsi256_ps(is_special));
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x8000)), 16);
    return _mm256_or_ps(value, _mm256_castsi256_ps(sign));
}
#else   /* AArch64 */
static ALWAYS_INLINE V8 v8_load_half(const uint16_t *h) {
    V8 v = {vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h))),
            vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + 4)))};
    return v;
}
#endif
#if VLANES == 16
static ALWAYS_INLINE Vec vec_load_half(const uint16_t *h) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
}
#elif VLANES == 8
#define vec_load_half v8_load_half
#else   /* AArch64 */
static ALWAYS_INLINE Vec vec_load_half(const uint16_t *h) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}
#endif

static ALWAYS_INLINE V8 v8_load_half_first(const uint16_t *h, int m) {
    uint16_t first[8] = {0};
    memcpy(first, h, (size_t)m * sizeof *h);
    return v8_load_half(first);
}

static ALWAYS_INLINE Vec vec_load_half_first(const uint16_t *h, int m) {
    uint16_t first[VLANES] = {0};
    memcpy(first, h, (size_t)m * sizeof *h);
    return vec_load_half(first);
}

/* kernels.c's from_half_reference, a vector at a time by the loads above (exact, as the
 * reference is); returns how many values it did. */
size_t simd_from_half(float *out, const uint16_t *h, size_t n) {
    size_t i = 0;
    for (; i + VLANES <= n; i += VLANES) vec_store(out + i, vec_load_half(h + i));
    return i;
}

/* Element i of a row of floats (half 0) or of halves (half 1) on: the kernels below read
 * either with the same arithmetic, so a row of halves gives the bits of its floats. */
static ALWAYS_INLINE V8 v8_load_row(const void *row, long i, int half) {
    return half ? v8_load_half((const uint16_t *)row + i) : v8_load((const float *)row + i);
}

static ALWAYS_INLINE V8 v8_load_row_first(const void *row, long i, int m, int half) {
    return half ? v8_load_half_first((const uint16_t *)row + i, m)
                : v8_load_first((const float *)row + i, m);
}

static ALWAYS_INLINE Vec vec_load_row(const void *row, long i, int half) {
    return half ? vec_load_half((const uint16_t *)row + i) : vec_load((const float *)row + i);
}

/* Element i from base, of floats or of halves. */
static ALWAYS_INLINE const void *element_at(const void *base, long i, int half) {
    return (const char *)base + i * (long)(half ? sizeof(uint16_t) : sizeof(float));
}

/* ---- the dot-product tile (decode) ---- */

/* out (R, C) (rows ldo floats apart, columns ldc) = x (R, IC) . w (C, IC)^T, rows of x IC
 * floats apart and rows of w ldw:
 * matmul_block_reference's products with the eight partial sums as the eight lanes of a V8,
 * one FMA per lane and input chunk: R x C accumulators, so each loaded chunk of a row of
 * w serves R rows of x and each chunk of x serves C rows of w. The last chunk of a row,
 * if short, is read as zeros beyond. Called with constant R and C, so the loops unroll
 * and the sums live in registers. The tile stays 8 lanes wide with AVX-512: a single
 * row's product is bound by memory traffic, which 16 lanes do not reduce, and each final
 * sum of 16 lanes costs more. */
static ALWAYS_INLINE void dot_tile_vector(float *out, int ldo, size_t ldc, const float *x,
                                          const float *w, size_t ldw, int IC, int R, int C) {
    V8 acc[3][8];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = v8_zero();
    int i = 0;
    for (; i + LANES <= IC; i += LANES) {
        for (int c = 0; c < C; c++) {
            V8 w_c = v8_load(w + c * ldw + i);
            for (int r = 0; r < R; r++)
                acc[r][c] = v8_fma(v8_load(x + (size_t)r * IC + i), w_c, acc[r][c]);
        }
    }
    if (i < IC) {   /* the tail: lanes i .. IC-1 loaded, the rest read as zero */
        for (int c = 0; c < C; c++) {
            V8 w_c = v8_load_first(w + c * ldw + i, IC - i);
            for (int r = 0; r < R; r++)
                acc[r][c] = v8_fma(v8_load_first(x + (size_t)r * IC + i, IC - i), w_c,
                                   acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) out[(size_t)r * ldo + c * ldc] = v8_sum(acc[r][c]);
}

/* Bytes ahead of its reads at which dot_rows_tile asks for each row's next lines. */
#define DECODE_PREFETCH_BYTES 1024

/* out[c * ldo] = x (IC,) . row c of w, for c < S rows of w ldw floats apart: dot_tile_vector
 * with R = 1, C = S (each output's sum is that tile's, bit for bit), but for rows that need
 * not be adjacent. With prefetch (simd_prefetch_rows()), each row's line
 * DECODE_PREFETCH_BYTES ahead is asked for as the row reaches a line: the rows come from
 * memory, a line each per 16 floats, faster than the hardware's prefetcher asks for them on
 * some cores. */
static ALWAYS_INLINE void dot_rows_tile(float *out, size_t ldo, const float *x, const void *w,
                                        size_t ldw, int IC, int S, int half, int prefetch) {
    V8 acc[8];
    TILE_UNROLL for (int c = 0; c < S; c++) acc[c] = v8_zero();
    int i = 0;
    for (; i + LANES <= IC; i += LANES) {
        V8 x_i = v8_load(x + i);
        if (prefetch && i % (half ? 32 : 16) == 0)   /* a line's values */
            TILE_UNROLL for (int c = 0; c < S; c++)
                PREFETCH_L1((const char *)element_at(w, (long)(c * ldw) + i, half) +
                            DECODE_PREFETCH_BYTES);
        TILE_UNROLL for (int c = 0; c < S; c++)
            acc[c] = v8_fma(x_i, v8_load_row(w, (long)(c * ldw) + i, half), acc[c]);
    }
    if (i < IC) {
        V8 x_i = v8_load_first(x + i, IC - i);
        TILE_UNROLL for (int c = 0; c < S; c++)
            acc[c] = v8_fma(x_i, v8_load_row_first(w, (long)(c * ldw) + i, IC - i, half),
                            acc[c]);
    }
    TILE_UNROLL for (int c = 0; c < S; c++) out[c * ldo] = v8_sum(acc[c]);
}

/* out[c] = x (IC,) . row c of w (C, IC), for c < C, each output's sum the one the eight-row
 * tile makes (bit for bit), for a matrix read from memory: the rows are cut into four
 * quarters, each read in order as one sequential run, and row c of each quarter goes with
 * row c of the others in one tile: four independent sums hide the FMA latency that a
 * single row's one chain of IC / 8 FMAs waits on, while the memory sees four sequential
 * streams. Adjacent rows side by side (two, four or eight: the eight-row tile) read slower
 * from memory, and four runs faster than one or two (docs/performance.md, Where the speed
 * comes from). */
static ALWAYS_INLINE void dot_rows_vector(float *out, const float *x, const void *w, int IC,
                                          int C, int half) {
    int quarter = C / 4, prefetch = simd_prefetch_rows();
    for (int c = 0; c < quarter; c++)
        dot_rows_tile(out + c, (size_t)quarter, x, element_at(w, (long)c * IC, half),
                      (size_t)quarter * IC, IC, 4, half, prefetch);
    for (int c = 4 * quarter; c < C; c++)   /* the rows left over */
        dot_rows_tile(out + c, 1, x, element_at(w, (long)c * IC, half), 0, IC, 1, half,
                      prefetch);
}

/* ---- the dot-product tile's blocks (decode, and products of few rows) ---- */

/* A single row's product streams a matrix of at least this many bytes as four sequential
 * runs (dot_rows_vector) instead of eight rows at a time. A model this large is read from
 * memory at every token, and one sequential run streams faster than eight interleaved
 * ones; the eight-row tile's independent sums win where the weights stay in the caches (the
 * shipped model, whose largest matrix is 256 KiB). The value lies between that and
 * s15m's smallest matrix (324 KiB): a measured choice, not a derived one. */
#define DECODE_STREAM_BYTES (288 << 10)

/* out[n0 .. n1, o0 .. o1) of out (N, OC) = x . w^T + b: one job. A single row (decode)
 * goes against eight rows of w at a time, or as four runs of rows for a large w. Several rows
 * (a prompt shorter than the GEMM's): for each four rows of w, every three rows of x in turn
 * (12 sums in registers), so each row of w comes from memory once and is reused from L1 for
 * all rows of x; for a large w the four rows are a quarter of the columns apart, read as
 * four runs like a single row's. Leftovers use smaller tiles, which compute the same sums. */
void simd_matmul_block(float *out, const float *x, const float *w, const float *b, int n0,
                       int n1, int o0, int o1, int IC, int OC) {
    int o = o0;
    if (n1 - n0 == 1) {
        float *out_n = out + (size_t)n0 * OC;
        const float *x_n = x + (size_t)n0 * IC;
        if ((size_t)IC * (size_t)OC * sizeof(float) >= DECODE_STREAM_BYTES) {
            dot_rows_vector(out_n + o, x_n, w + (size_t)o * IC, IC, o1 - o, 0);
            o = o1;
        }
        for (; o + 8 <= o1; o += 8)
            dot_tile_vector(out_n + o, OC, 1, x_n, w + (size_t)o * IC, (size_t)IC, IC, 1, 8);
        for (; o < o1; o++)
            dot_tile_vector(out_n + o, OC, 1, x_n, w + (size_t)o * IC, (size_t)IC, IC, 1, 1);
    } else {
        /* a tile of four rows of w for every three rows of x; for a large w its four rows a
         * quarter of the columns apart, so that w is read as four sequential runs, as a
         * single row reads it */
        size_t step = 1;   /* rows of w between a tile's rows */
        int tiles = (o1 - o) / 4;
        if ((size_t)IC * (size_t)OC * sizeof(float) >= DECODE_STREAM_BYTES) step = (size_t)tiles;
        for (int t = 0; t < tiles; t++) {
            int o_t = step == 1 ? o + 4 * t : o + t;   /* the tile's first row of w */
            const float *w_t = w + (size_t)o_t * IC;
            int n = n0;
            for (; n + 3 <= n1; n += 3)
                dot_tile_vector(out + (size_t)n * OC + o_t, OC, step, x + (size_t)n * IC, w_t,
                                step * IC, IC, 3, 4);
            for (; n < n1; n++)
                dot_tile_vector(out + (size_t)n * OC + o_t, OC, step, x + (size_t)n * IC, w_t,
                                step * IC, IC, 1, 4);
        }
        for (o += 4 * tiles; o < o1; o++)
            for (int n = n0; n < n1; n++)
                dot_tile_vector(out + (size_t)n * OC + o, OC, 1, x + (size_t)n * IC,
                                w + (size_t)o * IC, (size_t)IC, IC, 1, 1);
    }
    if (b)
        for (int n = n0; n < n1; n++)
            for (o = o0; o < o1; o++) out[(size_t)n * OC + o] += b[o];
}

/* ---- the broadcast-form tile for blocks of rows (prefill) ---- */
/*
 * With many rows of x, the dot-product tile's horizontal sums cost as much as the
 * multiplies when IC is small. The GEMM form keeps whole outputs in the lanes instead:
 * a block of NB rows of x is transposed once into xt (KC, NB), and then for MR rows of w
 * at a time, acc[r][v] (the outputs of w row o+r for NB rows of x) grows by
 * w[o+r][i] * xt[i][:] for i in order, one FMA per step. Every output is therefore one
 * lane's sum over i in increasing order, whatever the tile, the block sizes or the vector
 * width: the result of a row does not depend on how many rows come with it (N >=
 * GEMM_MIN_ROWS). It differs from the dot-product tile's order, so decode (N = 1) and
 * prefill agree to rounding.
 */
/* rows of w per tile of nv vectors of rows of x: with one or two, 8 where the build targets
 * Intel's server cores of Sapphire Rapids and later (AVX-512 FP16 marks them: two full
 * 512-bit FMA ports, 16 sums and fewer loads a FMA, 1.02-1.04x there), else 6 (Zen 4
 * measured 12 slower; AVX2 has 16 registers); with three or four (GEMM_NV 4), 6 */
#if defined(__AVX512F__) && defined(__AVX512FP16__)
#define GEMM_MR_MAX 8
#else
#define GEMM_MR_MAX 6
#endif
#define GEMM_MR(nv) ((nv) > 2 ? 6 : GEMM_MR_MAX)
#define GEMM_COL_STEP (GEMM_MR_MAX == 8 ? 24 : 6)   /* a multiple of every tile height */
#define GEMM_NB (GEMM_NV * VLANES)     /* rows of x per block at most: 64 with AVX-512 and
                                        * GEMM_NV 4, 32 with AVX-512, else 16 */
/* With AVX-512 and GEMM_NV 4, products whose rows of w are shorter than GEMM_WIDE_IC take
 * blocks of 32 rows of x (GEMM_NARROW_NB): their xt (IC x 128 bytes) then fits a 48 KiB
 * L1, where 64 rows' would not (Sapphire Rapids: 64 rows 0.93-0.97x at IC 128-288, 1.01x
 * at 384-512, 1.03-1.10x from 640 on). Elsewhere every product takes GEMM_NB rows. */
#if VLANES == 16 && GEMM_NV == 4
#define GEMM_WIDE_IC 512
#define GEMM_NARROW_NB (GEMM_NB / 2)
#else
#define GEMM_WIDE_IC 0
#define GEMM_NARROW_NB GEMM_NB
#endif
#define GEMM_KC 1024                   /* input columns per transposed block of x */
#define GEMM_OB 48                     /* rows of w whose sums are gathered before they go
                                        * into out (a multiple of GEMM_COL_STEP) */
#define GEMM_MIN_ROWS (GEMM_NARROW_NB / 2)   /* fewer rows of x: the dot-product tile is
                                              * faster */
#define GEMM_STEP 8                    /* values of i a pass of gemm_tile's loop (divides 16) */
#if defined(__clang__)
#define STEP_UNROLL _Pragma("clang loop unroll(full)")
#elif defined(__GNUC__)
#define STEP_UNROLL _Pragma("GCC unroll 16")
#else
#define STEP_UNROLL
#endif

/* sums (R, NB) = w rows 0 .. R-1 (IC floats apart) against the first nv vectors of
 * columns of xt (kc, ld): row r holds the sums over i = 0 .. kc-1 of w[r][i] * xt[i][:].
 * A block of fewer rows of x than NB takes fewer vectors (nv), not padding lanes. Asks
 * for rows 0 .. R-1 of `next` (the next tile's w, or w itself) in L2 as it goes: w comes
 * from memory once a job, and a tile's new rows would otherwise wait for it together. */
static ALWAYS_INLINE void gemm_tile(float *sums, const float *xt, int ld, const float *w,
                                    const float *next, int kc, int IC, int R, int nv) {
    Vec acc[GEMM_MR_MAX][GEMM_NV];
    TILE_UNROLL for (int r = 0; r < R; r++)
        TILE_UNROLL for (int v = 0; v < nv; v++) acc[r][v] = vec_zero();
    /* acc += column i's products: w's R values by the nv vectors of xt's row i */
#define GEMM_I(i)                                                                          \
    do {                                                                                   \
        Vec x_v[GEMM_NV];                                                                  \
        TILE_UNROLL for (int v = 0; v < nv; v++)                                           \
            x_v[v] = vec_load(xt + (size_t)(i) * ld + v * VLANES);                         \
        TILE_UNROLL for (int r = 0; r < R; r++) {                                          \
            Vec w_ri = vec_broadcast(w + (size_t)r * IC + (i));                            \
            TILE_UNROLL for (int v = 0; v < nv; v++)                                       \
                acc[r][v] = vec_fma(w_ri, x_v[v], acc[r][v]);                              \
        }                                                                                  \
        TILE_UNROLL for (int r = 0; r < R; r++)                                            \
            TILE_UNROLL for (int v = 0; v < nv; v++) IN_REGISTER(acc[r][v]);               \
    } while (0)
    /* a line of each of the next tile's rows every 16 values of i, as this one's start */
#define GEMM_AHEAD(i)                                                                      \
    if ((i) % 16 == 0) TILE_UNROLL for (int r = 0; r < R; r++) PREFETCH_L2(next + (size_t)r * IC + (i))
    /* i GEMM_STEP at a time, unrolled: the loop's own count and branches would otherwise take
     * ports that the FMAs need (two 512-bit FMA ports: a step's 2 R FMAs are R cycles) */
    int i = 0;
    for (; i + GEMM_STEP <= kc; i += GEMM_STEP) {
        GEMM_AHEAD(i);
        STEP_UNROLL for (int j = 0; j < GEMM_STEP; j++) GEMM_I(i + j);
    }
    for (; i < kc; i++) {
        GEMM_AHEAD(i);
        GEMM_I(i);
    }
#undef GEMM_AHEAD
#undef GEMM_I
    TILE_UNROLL for (int r = 0; r < R; r++)
        TILE_UNROLL for (int v = 0; v < nv; v++)
            vec_store(sums + (size_t)r * GEMM_NB + v * VLANES, acc[r][v]);
}

/* xt (kc, ld) = the first kc columns of x's rows 0 .. rows-1 (row stride IC), transposed:
 * xt[i][j] = x[j][i], zero for the padding rows rows <= j < ld (ld a multiple of 8 and at
 * least rows); 8 x 8 blocks where whole. */
_Static_assert(GEMM_NB % 8 == 0, "gemm_pack transposes 8 x 8 blocks");
_Static_assert(GEMM_OB % GEMM_COL_STEP == 0 && GEMM_COL_STEP % GEMM_MR(1) == 0 &&
               GEMM_COL_STEP % GEMM_MR(GEMM_NV) == 0,
               "only the last group of rows of w has a short tile");
static void gemm_pack(float *xt, int ld, const float *x, int IC, int kc, int rows) {
    for (int j0 = 0; j0 < ld; j0 += 8) {
        int i = 0;
        if (j0 + 8 <= rows)
            for (; i + 8 <= kc; i += 8)
                v8_transpose(xt + (size_t)i * ld + j0, ld, x + (size_t)j0 * IC + i, IC);
        for (int j = j0; j < j0 + 8; j++)
            for (int ii = i; ii < kc; ii++)
                xt[(size_t)ii * ld + j] = j < rows ? x[(size_t)j * IC + ii] : 0.0f;
    }
}

/* out (rows, cols; row stride OC) = sums transposed, or += with accumulate: out[n][o] is
 * sums[o][n] (sums (cols, NB), rows <= NB, cols <= GEMM_OB). 8 x 8 blocks where whole
 * (v8_transpose), the edges one value at a time; the same copies and adds either way. */
static void gemm_store(float *out, int OC, const float *sums, int rows, int cols,
                       int accumulate) {
    int rows8 = rows / 8 * 8, cols8 = cols / 8 * 8;
    for (int n = 0; n < rows8; n += 8)
        for (int o = 0; o < cols8; o += 8) {
            float *dst = out + (size_t)n * OC + o;
            const float *src = sums + (size_t)o * GEMM_NB + n;
            if (!accumulate) {
                v8_transpose(dst, OC, src, GEMM_NB);
                continue;
            }
            _Alignas(32) float t[64];
            v8_transpose(t, 8, src, GEMM_NB);
            for (int j = 0; j < 8; j++)
                v8_store(dst + (size_t)j * OC,
                         v8_add(v8_load(dst + (size_t)j * OC), v8_load(t + 8 * j)));
        }
    for (int n = 0; n < rows; n++)   /* the edges: columns past cols8, rows past rows8 */
        for (int o = n < rows8 ? cols8 : 0; o < cols; o++) {
            float v = sums[(size_t)o * GEMM_NB + n];
            out[(size_t)n * OC + o] = accumulate ? out[(size_t)n * OC + o] + v : v;
        }
}

/* out[nb .. nb1, g .. g1) (+)= x . w^T for one group of at most GEMM_OB rows of w (w_g: row g,
 * rows ldw floats apart, from the block's first column) against one block of rows of x
 * packed in xt (kc, ld), in nv vectors: the group's tiles leave their sums in `sums`, which
 * gemm_store then puts into out, rows of GEMM_OB adjacent floats (written straight from
 * the tile, each row of w's NB sums would land in NB rows of out, OC floats apart: NB cache
 * lines a tile, and with OC a multiple of 1024 all in the same L1 set). Each tile asks for
 * the next one's rows (up to row o1 of w) as it goes, when prefetch is set. */
static ALWAYS_INLINE void gemm_group(float *out, const float *xt, int ld, const float *w_g,
                                     int ldw, float *sums, int g, int g1, int o1, int nb,
                                     int nb1, int kc, int OC, int accumulate, int prefetch,
                                     int nv) {
    int o = g, MR = GEMM_MR(nv);
    const float *w_k = w_g;
    for (; o + MR <= g1; o += MR, w_k += (size_t)MR * ldw) {
        const float *next = prefetch && o + 2 * MR <= o1 ? w_k + (size_t)MR * ldw : w_k;
        gemm_tile(sums + (size_t)(o - g) * GEMM_NB, xt, ld, w_k, next, kc, ldw, MR, nv);
    }
    float *s_o = sums + (size_t)(o - g) * GEMM_NB;
    switch (g1 - o) {   /* the rows of w left over (fewer than MR), with constant heights */
#if GEMM_MR_MAX == 8
    case 7: if (MR == 8) gemm_tile(s_o, xt, ld, w_k, w_k, kc, ldw, 7, nv); break;
    case 6: if (MR == 8) gemm_tile(s_o, xt, ld, w_k, w_k, kc, ldw, 6, nv); break;
#endif
    case 5: gemm_tile(s_o, xt, ld, w_k, w_k, kc, ldw, 5, nv); break;
    case 4: gemm_tile(s_o, xt, ld, w_k, w_k, kc, ldw, 4, nv); break;
    case 3: gemm_tile(s_o, xt, ld, w_k, w_k, kc, ldw, 3, nv); break;
    case 2: gemm_tile(s_o, xt, ld, w_k, w_k, kc, ldw, 2, nv); break;
    case 1: gemm_tile(s_o, xt, ld, w_k, w_k, kc, ldw, 1, nv); break;
    default: break;
    }
    gemm_store(out + (size_t)nb * OC + g, OC, sums, nb1 - nb, g1 - g, accumulate);
}

/* xt's row stride for a block of rows of x in nv vectors: whole 8 x 8 blocks. */
static int gemm_ld(int nv) { return (nv * VLANES + 7) / 8 * 8; }

/* out[nb .. nb1, o0 .. o1) = x . w^T for one block of rows of x (at most NB) in nv vectors:
 * xt (KC, NB) and sums (OB, NB) the caller's scratch, xt's rows as wide as the nv vectors,
 * so that a short block packs and reads no more than it uses; then the groups of rows of
 * w, each straight from w. */
static ALWAYS_INLINE void gemm_rows(float *out, const float *x, const float *w, int nb,
                                    int nb1, int o0, int o1, int IC, int OC, float *xt,
                                    float *sums, int nv) {
    int ld = gemm_ld(nv);
    for (int k0 = 0; k0 < IC; k0 += GEMM_KC) {
        int kc = IC - k0 < GEMM_KC ? IC - k0 : GEMM_KC;
        gemm_pack(xt, ld, x + (size_t)nb * IC + k0, IC, kc, nb1 - nb);
        for (int g = o0; g < o1; g += GEMM_OB) {
            int g1 = g + GEMM_OB < o1 ? g + GEMM_OB : o1;
            gemm_group(out, xt, ld, w + (size_t)g * IC + k0, IC, sums, g, g1, o1, nb, nb1, kc,
                       OC, k0 > 0, 1, nv);
        }
    }
}

/* Vectors that hold a block of rows nb .. nb1-1 of x (at most NB). */
static int gemm_nv(int nb, int nb1) { return (nb1 - nb + VLANES - 1) / VLANES; }

/* Rows of x per block for rows of w of IC values (GEMM_WIDE_IC). */
static int gemm_block_rows(int IC) { return IC >= GEMM_WIDE_IC ? GEMM_NB : GEMM_NARROW_NB; }

/* out[n0 .. n1, o0 .. o1) = x . w^T + b by the broadcast tile, gemm_block_rows rows of x
 * at a time, a last, shorter block in as few vectors as hold it (gemm_rows: a 46-token
 * prompt in blocks of 32 rows with AVX-512 is 32 rows and 14 in one vector, not 32 and
 * 32). */
void simd_gemm_block(float *out, const float *x, const float *w, const float *b, int n0,
                     int n1, int o0, int o1, int IC, int OC) {
    float xt[GEMM_KC * GEMM_NB];   /* (KC, NB) on the stack: 256 KiB with AVX-512 and
                                    * GEMM_NV 4, 128 with AVX-512, else 64 */
    _Alignas(64) float sums[GEMM_OB * GEMM_NB];   /* (OB, NB) */
    int block = gemm_block_rows(IC);
    for (int nb = n0; nb < n1; nb += block) {
        int nb1 = nb + block < n1 ? nb + block : n1;
        switch (gemm_nv(nb, nb1)) {
#if GEMM_NV == 4
        case 4: gemm_rows(out, x, w, nb, nb1, o0, o1, IC, OC, xt, sums, 4); break;
        case 3: gemm_rows(out, x, w, nb, nb1, o0, o1, IC, OC, xt, sums, 3); break;
#endif
        case 2: gemm_rows(out, x, w, nb, nb1, o0, o1, IC, OC, xt, sums, 2); break;
        default: gemm_rows(out, x, w, nb, nb1, o0, o1, IC, OC, xt, sums, 1); break;
        }
    }
    if (b)
        for (int n = n0; n < n1; n++)
            for (int o = o0; o < o1; o++) out[(size_t)n * OC + o] += b[o];
}

/* wbuf (rows, kc) = rows 0 .. rows-1 of halves h (row stride IC), their first kc values,
 * as floats (exact). */
static void gemm_widen(float *wbuf, const uint16_t *h, int rows, int kc, int IC) {
    for (int r = 0; r < rows; r++) {
        float *dst = wbuf + (size_t)r * kc;
        const uint16_t *src = h + (size_t)r * IC;
        int i = 0;
        for (; i + VLANES <= kc; i += VLANES) vec_store(dst + i, vec_load_half(src + i));
        if (i < kc) {
            float last[VLANES];
            vec_store(last, vec_load_half_first(src + i, kc - i));
            memcpy(dst + i, last, (size_t)(kc - i) * sizeof(float));
        }
    }
}

_Static_assert(SIMD_JOB_ROWS % GEMM_NB == 0, "a job's rows are whole blocks of rows of x");

/* simd_gemm_block over w's values as halves: a job's rows of x (SIMD_JOB_ROWS, in blocks
 * of gemm_block_rows) packed at once, so that each group of rows of w is converted into
 * wbuf (OB, KC) once for all of them, then gemm_group's tiles over it: the same sums, bit
 * for bit. */
void simd_gemm_block_half(float *out, const float *x, const uint16_t *w, const float *b,
                          int n0, int n1, int o0, int o1, int IC, int OC) {
    float xt[SIMD_JOB_ROWS * GEMM_KC];   /* block j (KC, block) at j block KC: 256 KiB */
    float wbuf[GEMM_OB * GEMM_KC];       /* 192 KiB */
    _Alignas(64) float sums[GEMM_OB * GEMM_NB];
    int block = gemm_block_rows(IC);
    for (int nc = n0; nc < n1; nc += SIMD_JOB_ROWS) {
        int nc1 = nc + SIMD_JOB_ROWS < n1 ? nc + SIMD_JOB_ROWS : n1;
        for (int k0 = 0; k0 < IC; k0 += GEMM_KC) {
            int kc = IC - k0 < GEMM_KC ? IC - k0 : GEMM_KC;
            for (int nb = nc, j = 0; nb < nc1; nb += block, j++) {
                int nb1 = nb + block < nc1 ? nb + block : nc1;
                gemm_pack(xt + (size_t)j * block * GEMM_KC, gemm_ld(gemm_nv(nb, nb1)),
                          x + (size_t)nb * IC + k0, IC, kc, nb1 - nb);
            }
            for (int g = o0; g < o1; g += GEMM_OB) {
                int g1 = g + GEMM_OB < o1 ? g + GEMM_OB : o1;
                gemm_widen(wbuf, w + (size_t)g * IC + k0, g1 - g, kc, IC);
                for (int nb = nc, j = 0; nb < nc1; nb += block, j++) {
                    int nb1 = nb + block < nc1 ? nb + block : nc1, nv = gemm_nv(nb, nb1);
                    const float *xt_j = xt + (size_t)j * block * GEMM_KC;
                    switch (nv) {
#if GEMM_NV == 4
                    case 4: gemm_group(out, xt_j, gemm_ld(4), wbuf, kc, sums, g, g1, o1, nb,
                                       nb1, kc, OC, k0 > 0, 0, 4); break;
                    case 3: gemm_group(out, xt_j, gemm_ld(3), wbuf, kc, sums, g, g1, o1, nb,
                                       nb1, kc, OC, k0 > 0, 0, 3); break;
#endif
                    case 2: gemm_group(out, xt_j, gemm_ld(2), wbuf, kc, sums, g, g1, o1, nb,
                                       nb1, kc, OC, k0 > 0, 0, 2); break;
                    default: gemm_group(out, xt_j, gemm_ld(1), wbuf, kc, sums, g, g1, o1, nb,
                                        nb1, kc, OC, k0 > 0, 0, 1); break;
                    }
                }
            }
        }
    }
    if (b)
        for (int n = n0; n < n1; n++)
            for (int o = o0; o < o1; o++) out[(size_t)n * OC + o] += b[o];
}

int simd_gemm_min_rows(void) { return GEMM_MIN_ROWS; }

/* about `blocks` column blocks, each a multiple of every tile height, for N >= GEMM_MIN_ROWS */
int simd_gemm_cols(int N, int OC, int blocks) {
    if (N < GEMM_MIN_ROWS) return 0;
    int cols = (OC + blocks - 1) / blocks;
    return (cols + GEMM_COL_STEP - 1) / GEMM_COL_STEP * GEMM_COL_STEP;
}

/* ---- norms and activations ---- */

/* norm_stats_reference with each sum as dot_reference's eight partial sums in a V8's
 * lanes (FMA for the variance), so that every build (AVX2, AVX-512, NEON) gives the same
 * bits: a Vec's sum would add in an order that depends on its width. The variance's last
 * short chunk goes through a buffer, zero beyond the row (0 * 0 + acc adds nothing). */
void simd_norm_stats(const float *x_n, int C, float *mean, float *rstd) {
    int i = 0;
    V8 acc = v8_zero();
    for (; i + LANES <= C; i += LANES) acc = v8_add(acc, v8_load(x_n + i));
    if (i < C) acc = v8_add(acc, v8_load_first(x_n + i, C - i));
    float m = v8_sum(acc) / (float)C;
    V8 m_v = v8_set1(m);
    acc = v8_zero();
    for (i = 0; i + LANES <= C; i += LANES) {
        V8 d = v8_sub(v8_load(x_n + i), m_v);
        acc = v8_fma(d, d, acc);
    }
    if (i < C) {
        float tail[LANES] = {0};
        for (int j = 0; i + j < C; j++) tail[j] = x_n[i + j] - m;
        V8 d = v8_load(tail);
        acc = v8_fma(d, d, acc);
    }
    float var = v8_sum(acc) / (float)C;
    *mean = m;
    *rstd = 1.0f / sqrtf(var + KERNELS_NORM_EPS);
}

/* sum_squares_reference of eight rows side by side, one in each lane of a V8: each lane
 * multiplies and adds its row's values in order, the reference's operations (the same
 * bits), while the eight sums wait on the add's latency together rather than in turn.
 * 8 x 8 blocks transposed; the values past the last whole block in scalar code. */
void simd_sum_squares(float *ss, const float *x, int C) {
    _Static_assert(SIMD_SUM_SQUARES_ROWS == LANES, "a V8 holds the rows");
    _Alignas(32) float block[LANES * LANES];   /* block[i][r] = x[r][i0 + i] */
    V8 acc = v8_zero();
    int i0 = 0;
    for (; i0 + LANES <= C; i0 += LANES) {
        v8_transpose(block, LANES, x + i0, C);
        for (int i = 0; i < LANES; i++) {
            V8 v = v8_load(block + i * LANES);
            acc = v8_add(acc, v8_mul(v, v));
        }
    }
    v8_store(ss, acc);
    for (int r = 0; r < LANES; r++)
        for (int i = i0; i < C; i++) ss[r] += x[(size_t)r * C + i] * x[(size_t)r * C + i];
}

/* e (m,) = exp(-2u) of x (m,), u = sqrt(2/pi)(v + c v^3): the exponential both GELU and
 * its backward take, in gelu_reference's operations; m as exp_block takes it. */
static void gelu_exp_block(float *e, const float *x, int m) {
    Vec a = vec_set1(GELU_SQRT_2_OVER_PI), c = vec_set1(GELU_CUBIC), minus_two = vec_set1(-2.0f);
    for (int j = 0; j < m; j += VLANES) {
        Vec v = vec_load(x + j);
        Vec u = vec_mul(a, vec_add(v, vec_mul(vec_mul(vec_mul(c, v), v), v)));
        vec_store(e + j, vec_mul(minus_two, u));
    }
    exp_block(e, e, m);
}

/* gelu_reference, lane by lane, on the whole vectors of x (n,); returns how many values it
 * did (the reference does the rest). */
size_t simd_gelu(float *out, const float *x, size_t n) {
    Vec one = vec_set1(1.0f);
    _Alignas(64) float e[EXP_BLOCK];   /* exp(-2u) */
    size_t i = 0;
    for (int m; (m = exp_block_len(n - i)) > 0; i += (size_t)m) {
        gelu_exp_block(e, x + i, m);
        for (int j = 0; j < m; j += VLANES)
            vec_store(out + i + j, vec_div(vec_load(x + i + j), vec_add(one, vec_load(e + j))));
    }
    return i;
}

/* swiglu_reference, lane by lane, as simd_gelu (-v as v * -1: exact). */
size_t simd_swiglu(float *out, const float *hidden, const float *gate, size_t n) {
    Vec minus_one = vec_set1(-1.0f), one = vec_set1(1.0f);
    _Alignas(64) float e[EXP_BLOCK];   /* -v, then exp(-v) */
    size_t i = 0;
    for (int m; (m = exp_block_len(n - i)) > 0; i += (size_t)m) {
        for (int j = 0; j < m; j += VLANES)
            vec_store(e + j, vec_mul(vec_load(hidden + i + j), minus_one));
        exp_block(e, e, m);
        for (int j = 0; j < m; j += VLANES) {
            Vec silu = vec_div(vec_load(hidden + i + j), vec_add(one, vec_load(e + j)));
            vec_store(out + i + j, vec_mul(silu, vec_load(gate + i + j)));
        }
    }
    return i;
}

/* ---- attention's loops ---- */

/* dot_reference's eight partial sums as a V8's lanes, one FMA each (b floats or halves). */
static ALWAYS_INLINE float dot_vector(const float *a, const void *b, int n, int half) {
    V8 acc = v8_zero();
    int i = 0;
    for (; i + LANES <= n; i += LANES) acc = v8_fma(v8_load(a + i), v8_load_row(b, i, half), acc);
    if (i < n)
        acc = v8_fma(v8_load_first(a + i, n - i), v8_load_row_first(b, i, n - i, half), acc);
    return v8_sum(acc);
}

/* Vectors of q that dots8_order's spans hold in registers: NEON's V8 takes two of its 32. */
#define DOTS_SPAN (VLANES >= 8 ? 8 : 4)

/* acc[j] (+)= the products of q's and row j's C vectors from value i0 on (C <= 8, a
 * constant), for j = 0..7 in turn: q's vectors loaded once, each row's span read whole. */
static ALWAYS_INLINE void dots8_span(V8 acc[8], const float *q, const void *const k_r[8],
                                     int i0, int C, int half) {
    V8 q_c[8];
    TILE_UNROLL for (int c = 0; c < C; c++) q_c[c] = v8_load(q + i0 + c * LANES);
    TILE_UNROLL for (int j = 0; j < 8; j++)
        TILE_UNROLL for (int c = 0; c < C; c++)
            acc[j] = v8_fma(q_c[c], v8_load_row(k_r[j], i0 + c * LANES, half), acc[j]);
}

/* out (8,) = dot_vector(q, k_r[j]) for eight rows k_r[j] (n,): eight independent FMA
 * chains, one shared reduction; every row's bits are dot_vector's (rows of floats or,
 * half 1, of halves). With spans (rows of two vectors or more), the rows are read one after
 * another, DOTS_SPAN vectors of each at a time (a head of 64 floats: whole rows), q's
 * vectors in registers; else a vector of each of the eight rows in turn. */
static ALWAYS_INLINE void dots8_order(float *out, const float *q, const void *const k_r[8],
                                      int n, int half, int spans) {
    V8 acc[8];
    for (int j = 0; j < 8; j++) acc[j] = v8_zero();
    int i = 0;
    if (spans) {
        for (; i + DOTS_SPAN * LANES <= n; i += DOTS_SPAN * LANES)
            dots8_span(acc, q, k_r, i, DOTS_SPAN, half);
        switch ((n - i) / LANES) {   /* the whole vectors left, as one constant span */
        case 7: dots8_span(acc, q, k_r, i, 7, half); break;
        case 6: dots8_span(acc, q, k_r, i, 6, half); break;
        case 5: dots8_span(acc, q, k_r, i, 5, half); break;
        case 4: dots8_span(acc, q, k_r, i, 4, half); break;
        case 3: dots8_span(acc, q, k_r, i, 3, half); break;
        case 2: dots8_span(acc, q, k_r, i, 2, half); break;
        case 1: dots8_span(acc, q, k_r, i, 1, half); break;
        }
        i = n / LANES * LANES;
    }
    for (; i + LANES <= n; i += LANES) {
        V8 q_i = v8_load(q + i);
        for (int j = 0; j < 8; j++) acc[j] = v8_fma(q_i, v8_load_row(k_r[j], i, half), acc[j]);
    }
    if (i < n) {
        V8 q_i = v8_load_first(q + i, n - i);
        for (int j = 0; j < 8; j++)
            acc[j] = v8_fma(q_i, v8_load_row_first(k_r[j], i, n - i, half), acc[j]);
    }
    v8_sum_rows(out, acc);
}

/* dots8_order a vector of each row in turn: rows in the caches, or listed. */
static ALWAYS_INLINE void dots8(float *out, const float *q, const void *const k_r[8], int n,
                                int half) {
    dots8_order(out, q, k_r, n, half, 0);
}

/* dots over rows 0 .. n_rows-1 of k (stride apart) of two vectors or more, for rows that
 * come from memory (a KV cache's keys): eight rows at a time, read one after another
 * (dots8_order's spans), they stream 1.2-1.6x faster than with their lines interleaved
 * (Zen 5, heads of 48 to 128). Not inlined: in its callers' loops, their own rows'
 * pointers would spill to the stack (a head of 8 decoded 10-20 % slower). */
static __attribute__((noinline)) void dots_in_order(float *out, const float *q, const void *k,
                                                    int stride, int n_rows, int n, int half) {
    int r = 0;
    for (; r + 8 <= n_rows; r += 8) {
        const void *k_r[8];
        for (int j = 0; j < 8; j++) k_r[j] = element_at(k, (long)(r + j) * stride, half);
        dots8_order(out + r, q, k_r, n, half, 1);
    }
    for (; r < n_rows; r++)
        out[r] = dot_vector(q, element_at(k, (long)r * stride, half), n, half);
}

/* out[r] = dot_vector(q, row r), eight rows at a time (dots8, or dots_in_order for
 * consecutive rows of two vectors or more), the rest one by one. */
static ALWAYS_INLINE void dots(float *out, const float *q, const void *k, int stride,
                               const int32_t *rows, int n_rows, int n, int half) {
    if (!rows && n >= 2 * LANES) {
        dots_in_order(out, q, k, stride, n_rows, n, half);
        return;
    }
    int r = 0;
    for (; r + 8 <= n_rows; r += 8) {
        const void *k_r[8];
        for (int j = 0; j < 8; j++)
            k_r[j] = element_at(k, (long)(rows ? rows[r + j] : r + j) * stride, half);
        dots8(out + r, q, k_r, n, half);
    }
    for (; r < n_rows; r++)
        out[r] = dot_vector(q, element_at(k, (long)(rows ? rows[r] : r) * stride, half), n, half);
}

void simd_dots(float *out, const float *q, const float *k, int stride, const int32_t *rows,
               int n_rows, int n) {
    dots(out, q, k, stride, rows, n_rows, n, 0);
}

void simd_dots_half(float *out, const float *q, const uint16_t *k, int n_rows, int n) {
    dots(out, q, k, n, NULL, n_rows, n, 1);
}

/* simd_matmul_block's one row of x over w's values as halves (rows o0 .. o1-1 of w (OC,
 * IC)): four sequential runs where the matrix would stream (as many bytes of halves as
 * DECODE_STREAM_BYTES), else eight rows at a time; the same sums as over the floats. */
void simd_matmul_row_half(float *out, const float *x, const uint16_t *w, const float *b,
                          int o0, int o1, int IC, int OC) {
    const uint16_t *w_o = w + (size_t)o0 * IC;
    if ((size_t)IC * (size_t)OC * sizeof *w >= DECODE_STREAM_BYTES)
        dot_rows_vector(out + o0, x, w_o, IC, o1 - o0, 1);
    else
        dots(out + o0, x, w_o, IC, NULL, o1 - o0, IC, 1);
    if (b)
        for (int o = o0; o < o1; o++) out[o] += b[o];
}

/* dots8 of DOTS_QUERIES queries at once: query t's dots into out + t ld, eight FMA chains
 * each, each row of k loaded once into a register for all of them (folded into every FMA,
 * the loads bound the loop); the same bits as dots8. Where a Vec holds two V8 (V8_PAIRS),
 * two queries share each register of sums, the row's V8 in both halves: half the FMAs and
 * reductions, four queries a tile (AVX2's 16 registers spill a few of the two queries'
 * sums, and still gain). */
#if defined(V8_PAIRS)
#define DOTS_QUERIES 4
static ALWAYS_INLINE void dots8_queries(float *out, int ld, const float *q, int q_stride,
                                        const void *const k_r[8], int n) {
    enum { P = DOTS_QUERIES / 2 };
    Vec acc[P][8];   /* acc[p][j]: row j's sums for queries 2p (low half) and 2p + 1 */
    TILE_UNROLL for (int p = 0; p < P; p++)
        TILE_UNROLL for (int j = 0; j < 8; j++) acc[p][j] = vec_zero();
    const float *q_t[DOTS_QUERIES];
    for (int t = 0; t < DOTS_QUERIES; t++) q_t[t] = q + (long)t * q_stride;
    int i = 0;
    for (; i + LANES <= n; i += LANES) {
        Vec q_p[P];
        TILE_UNROLL for (int p = 0; p < P; p++)
            q_p[p] = v8_pair(v8_load(q_t[2 * p] + i), v8_load(q_t[2 * p + 1] + i));
        TILE_UNROLL for (int j = 0; j < 8; j++) {
            Vec k_j = v8_pair_dup((const float *)k_r[j] + i);
            TILE_UNROLL for (int p = 0; p < P; p++) acc[p][j] = vec_fma(q_p[p], k_j, acc[p][j]);
        }
    }
    if (i < n) {
        Vec q_p[P];
        TILE_UNROLL for (int p = 0; p < P; p++)
            q_p[p] = v8_pair(v8_load_first(q_t[2 * p] + i, n - i),
                             v8_load_first(q_t[2 * p + 1] + i, n - i));
        TILE_UNROLL for (int j = 0; j < 8; j++) {
            V8 k_j = v8_load_first((const float *)k_r[j] + i, n - i);
            TILE_UNROLL for (int p = 0; p < P; p++)
                acc[p][j] = vec_fma(q_p[p], v8_pair(k_j, k_j), acc[p][j]);
        }
    }
    TILE_UNROLL for (int p = 0; p < P; p++)
        v8_pair_sum_rows(out + (long)(2 * p) * ld, out + (long)(2 * p + 1) * ld, acc[p]);
}
#else
#define DOTS_QUERIES (VLANES >= 8 ? 2 : 1)   /* NEON's 32 registers of 4 hold one's 8 V8 */
static ALWAYS_INLINE void dots8_queries(float *out, int ld, const float *q, int q_stride,
                                        const void *const k_r[8], int n) {
    enum { Q = DOTS_QUERIES };
    V8 acc[Q][8];
    TILE_UNROLL for (int t = 0; t < Q; t++)
        TILE_UNROLL for (int j = 0; j < 8; j++) acc[t][j] = v8_zero();
    int i = 0;
    for (; i + LANES <= n; i += LANES) {
        V8 q_i[Q];
        TILE_UNROLL for (int t = 0; t < Q; t++) q_i[t] = v8_load(q + (long)t * q_stride + i);
        TILE_UNROLL for (int j = 0; j < 8; j++) {
            V8 k_j = v8_load((const float *)k_r[j] + i);
            IN_REGISTER(k_j);
            TILE_UNROLL for (int t = 0; t < Q; t++) acc[t][j] = v8_fma(q_i[t], k_j, acc[t][j]);
        }
    }
    if (i < n) {
        V8 q_i[Q];
        TILE_UNROLL for (int t = 0; t < Q; t++)
            q_i[t] = v8_load_first(q + (long)t * q_stride + i, n - i);
        TILE_UNROLL for (int j = 0; j < 8; j++) {
            V8 k_j = v8_load_first((const float *)k_r[j] + i, n - i);
            TILE_UNROLL for (int t = 0; t < Q; t++) acc[t][j] = v8_fma(q_i[t], k_j, acc[t][j]);
        }
    }
    TILE_UNROLL for (int t = 0; t < Q; t++) v8_sum_rows(out + (long)t * ld, acc[t]);
}
#endif

/* kernels_dots_causal: each group of eight shared rows is read from memory once and then
 * serves every query from L1 (dots8_queries, DOTS_QUERIES queries at a time), the
 * rows left of each query by simd_dots: so every dot has dot_vector's bits, as one query's
 * simd_dots gives them. */
void simd_dots_causal(float *out, int ld, const float *q, int q_stride, int n_q,
                      const float *k, int stride, int n_first, int n) {
    if (n_q == 1) {   /* decode: nothing shared; the rows in order (dots) */
        simd_dots(out, q, k, stride, NULL, n_first, n);
        return;
    }
    int shared = n_first / 8 * 8;
    for (int r = 0; r < shared; r += 8) {
        const void *k_r[8];
        for (int j = 0; j < 8; j++) k_r[j] = k + (long)(r + j) * stride;
        int t = 0;
        for (; t + DOTS_QUERIES <= n_q; t += DOTS_QUERIES)
            dots8_queries(out + (long)t * ld + r, ld, q + (long)t * q_stride, q_stride, k_r, n);
        for (; t < n_q; t++)
            dots8(out + (long)t * ld + r, q + (long)t * q_stride, k_r, n, 0);
    }
    for (int t = 0; t < n_q; t++)
        simd_dots(out + (long)t * ld + shared, q + (long)t * q_stride, k + (long)shared * stride,
                  stride, NULL, n_first + t - shared, n);
}

float simd_dot(const float *a, const float *b, int n) { return dot_vector(a, b, n, 0); }

/* The largest of init and x (n,) by x > max comparisons: kernels.c's max_reference, for the
 * lanes and the values after the last whole vector. */
static float max_scalar(const float *x, int n, float init) {
    float max = init;
    for (int i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    return max;
}

/* max_reference's value (a maximum is the same in any order; x > m never lets a NaN win):
 * four vectors of VLANES running maxima (four chains of comparisons side by side: one
 * chain waits on each comparison's latency), the values after the last whole vector as the
 * last VLANES values again (a value taken twice changes no maximum), then the lanes in a
 * tree, not in a chain: a softmax row of a prompt is short (128 values on average in a
 * 256-token prompt), and a chain of 16 dependent comparisons and one for each of the last
 * values cost it more than its vectors. */
float simd_max(const float *x, int n, float init) {
    if (n < VLANES) return max_scalar(x, n, init);
    Vec acc = vec_set1(init), acc_1 = acc, acc_2 = acc, acc_3 = acc;   /* four chains */
    int i = 0;
    for (; i + 4 * VLANES <= n; i += 4 * VLANES) {
        acc = vec_max(vec_load(x + i), acc);
        acc_1 = vec_max(vec_load(x + i + VLANES), acc_1);
        acc_2 = vec_max(vec_load(x + i + 2 * VLANES), acc_2);
        acc_3 = vec_max(vec_load(x + i + 3 * VLANES), acc_3);
    }
    for (; i + VLANES <= n; i += VLANES) acc = vec_max(vec_load(x + i), acc);
    if (i < n) acc = vec_max(vec_load(x + n - VLANES), acc);
    acc = vec_max(vec_max(acc_1, acc), vec_max(acc_3, acc_2));
    float lanes[VLANES];
    vec_store(lanes, acc);
    TILE_UNROLL for (int w = VLANES / 2; w >= 1; w /= 2)   /* unrolled: no loops' steps */
        TILE_UNROLL for (int j = 0; j < w; j++)
            lanes[j] = lanes[j + w] > lanes[j] ? lanes[j + w] : lanes[j];
    return lanes[0];
}

/* x (n,) = exp(x - shift) as exp_sum_reference, in exp_block's three stages a block of at
 * most EXP_BLOCK values at a time, the last values of a row in a masked vector that goes
 * through the stages with the rest (they give exp_approx's bits in every lane, so a tail
 * needs no scalar loop); then the block's values added to acc (sum_reference's eight
 * partial sums as a V8's lanes) while the block is in L1. A softmax row of a prompt is
 * short (128 values on average in a 256-token prompt): as a pass of its own, then
 * exp_block, then the tail's whole exp, then a pass for the sum, each row's loops and the
 * tail's chain of ~40 dependent steps cost more than its exps. Same operations: the same
 * bits. */
static V8 exp_sum_block(float *x, int m, Vec shift, V8 acc) {
    _Alignas(64) float k_n[EXP_BLOCK], r_n[EXP_BLOCK];
    int whole = m / VLANES * VLANES, end = whole;
    LaneMask tail = lane_mask(m - whole);
    for (int i = 0; i < whole; i += VLANES) {
        Vec k, r, v = vec_sub(vec_load(x + i), shift);
        vec_store(x + i, v);
        vec_exp_reduce(v, &k, &r);
        vec_store(k_n + i, k);
        vec_store(r_n + i, r);
    }
    if (whole < m) {
        Vec k, r, v = vec_sub(vec_load_mask(x + whole, tail), shift);
        vec_store_mask(x + whole, tail, v);
        vec_exp_reduce(v, &k, &r);
        vec_store(k_n + whole, k);
        vec_store(r_n + whole, r);
        end += VLANES;
    }
    for (int i = 0; i < end; i += VLANES) vec_store(r_n + i, vec_exp_poly(vec_load(r_n + i)));
    for (int i = 0; i < whole; i += VLANES)
        vec_store(x + i, vec_exp_scale(vec_load(x + i), vec_load(k_n + i), vec_load(r_n + i)));
    if (whole < m)
        vec_store_mask(x + whole, tail,
                       vec_exp_scale(vec_load_mask(x + whole, tail), vec_load(k_n + whole),
                                     vec_load(r_n + whole)));
    int i = 0;
    for (; i + LANES <= m; i += LANES) acc = v8_add(acc, v8_load(x + i));
    if (i < m) acc = v8_add(acc, v8_load_first(x + i, m - i));
    return acc;
}

/* nv vectors of weighted_sum_reference's out (v's columns from v, rows of floats or, half
 * 1, of halves), each out[i] one FMA chain over the rows in order; the nv sums stay in
 * registers across the rows. With ahead (not NULL: rows 0 .. n_rows-1 in order), the same
 * columns of ahead's row r are asked for from memory as v's row r is read. */
static ALWAYS_INLINE void weighted_sum_block(float *out, const float *weights, float scale,
                                             const void *v, int stride, const int32_t *rows,
                                             int n_rows, int nv, int half, const float *ahead) {
    Vec acc[4];
    TILE_UNROLL for (int j = 0; j < nv; j++) acc[j] = vec_zero();
    for (int r = 0; r < n_rows; r++) {
        const void *v_r = element_at(v, (long)(rows ? rows[r] : r) * stride, half);
        if (ahead)   /* a line (16 floats) at a time */
            for (int i = 0; i < nv * VLANES; i += 16) PREFETCH_L1(ahead + (long)r * stride + i);
        Vec a = vec_set1(weights[r] * scale);
        TILE_UNROLL for (int j = 0; j < nv; j++)
            acc[j] = vec_fma(a, vec_load_row(v_r, j * VLANES, half), acc[j]);
    }
    TILE_UNROLL for (int j = 0; j < nv; j++) vec_store(out + j * VLANES, acc[j]);
}

/* weighted_sum_reference: blocks of 4 vectors of columns, then the whole vectors left in
 * one block (a head of 48 is 3 AVX-512 vectors: three chains side by side, not one after
 * another), then the last columns in one partial vector (a head of 8 with AVX-512); each
 * block asks for its columns of ahead's rows (weighted_sum_block; NULL: none). */
static ALWAYS_INLINE void weighted_sum(float *out, const float *weights, float scale,
                                       const void *v, int stride, const int32_t *rows,
                                       int n_rows, int n, int half, const float *ahead) {
    int i0 = 0;
    for (; i0 + 4 * VLANES <= n; i0 += 4 * VLANES)
        weighted_sum_block(out + i0, weights, scale, element_at(v, i0, half), stride, rows,
                           n_rows, 4, half, ahead ? ahead + i0 : NULL);
    int left = (n - i0) / VLANES;
    const void *v_left = element_at(v, i0, half);
    const float *ahead_left = ahead ? ahead + i0 : NULL;
    if (left == 3)
        weighted_sum_block(out + i0, weights, scale, v_left, stride, rows, n_rows, 3, half,
                           ahead_left);
    if (left == 2)
        weighted_sum_block(out + i0, weights, scale, v_left, stride, rows, n_rows, 2, half,
                           ahead_left);
    if (left == 1)
        weighted_sum_block(out + i0, weights, scale, v_left, stride, rows, n_rows, 1, half,
                           ahead_left);
    i0 += left * VLANES;
    if (i0 < n) {
        LaneMask tail = lane_mask(n - i0);
        Vec acc = vec_zero();
        for (int r = 0; r < n_rows; r++) {
            long at = (long)(rows ? rows[r] : r) * stride + i0;
            Vec v_r = half ? vec_load_half_first((const uint16_t *)v + at, n - i0)
                           : vec_load_mask((const float *)v + at, tail);
            acc = vec_fma(vec_set1(weights[r] * scale), v_r, acc);
        }
        vec_store_mask(out + i0, tail, acc);
    }
}

void simd_weighted_sum(float *out, const float *weights, float scale, const float *v,
                       int stride, const int32_t *rows, int n_rows, int n) {
    weighted_sum(out, weights, scale, v, stride, rows, n_rows, n, 0, NULL);
}

void simd_weighted_sum_half(float *out, const float *weights, float scale, const uint16_t *v,
                            int n_rows, int n) {
    weighted_sum(out, weights, scale, v, n, NULL, n_rows, n, 1, NULL);
}

/* kernels_weighted_sums_causal: SUMS_QUERIES queries at a time, their weights first scaled
 * in place (weights * scale, the product simd_weighted_sum forms), then a block of at most
 * SUMS_VECTORS vectors of columns at a time, their sums in registers: each row of v loaded
 * once serves them all; then each query's own last rows, in order. Every out[i] of a query
 * is simd_weighted_sum's FMA chain, with the same products in the same order: the same
 * bits. Columns past the last whole vector (with scale 1: w * 1 = w) take
 * simd_weighted_sum's loops (weighted_sum), as do queries left over by the last block.
 * With AVX-512 eight queries share each row: v's rows come from L2 (a head's keys and
 * values, 96 KiB for 256 positions of 48, do not fit in L1), and four queries' 12 FMAs a
 * row of three vectors wait on that; the last queries short of eight go four at a time. */
#define SUMS_QUERIES (VLANES == 16 ? 8 : 4)
#define SUMS_VECTORS (VLANES == 16 ? 3 : 2)   /* 24 sums in 32 AVX-512 registers, 8 in 16 */

/* One block of nv vectors of columns (out's and v's from out and v) for the nq queries
 * whose scaled weights are w_t; n_shared rows every one of them reads. */
static ALWAYS_INLINE void weighted_sums_block(float *out, int out_stride, float *const *w_t,
                                              const float *v, int stride, int n_shared,
                                              int nq, int nv) {
    Vec acc[SUMS_QUERIES][SUMS_VECTORS];
    TILE_UNROLL for (int t = 0; t < nq; t++)
        TILE_UNROLL for (int j = 0; j < nv; j++) acc[t][j] = vec_zero();
    for (int r = 0; r < n_shared; r++) {   /* the rows every query here reads */
        const float *v_r = v + (long)r * stride;
        Vec v_j[SUMS_VECTORS];
        TILE_UNROLL for (int j = 0; j < nv; j++) {
            v_j[j] = vec_load(v_r + j * VLANES);
            IN_REGISTER(v_j[j]);
        }
        TILE_UNROLL for (int t = 0; t < nq; t++) {
            Vec a = vec_broadcast(w_t[t] + r);
            TILE_UNROLL for (int j = 0; j < nv; j++) acc[t][j] = vec_fma(a, v_j[j], acc[t][j]);
        }
    }
    TILE_UNROLL for (int t = 0; t < nq; t++) {
        for (int r = n_shared; r < n_shared + t; r++) {   /* its own last */
            const float *v_r = v + (long)r * stride;
            Vec a = vec_broadcast(w_t[t] + r);
            TILE_UNROLL for (int j = 0; j < nv; j++)
                acc[t][j] = vec_fma(a, vec_load(v_r + j * VLANES), acc[t][j]);
        }
        TILE_UNROLL for (int j = 0; j < nv; j++)
            vec_store(out + (long)t * out_stride + j * VLANES, acc[t][j]);
    }
}

/* nq queries (a constant where it is inlined) from query t0 of simd_weighted_sums_causal:
 * the weights scaled, then the whole vectors of columns SUMS_VECTORS at a time (AVX-512:
 * four as two and two, not three and one), then the columns left. */
static ALWAYS_INLINE void weighted_sums_queries(float *out, int out_stride, float *weights,
                                                int ld, const float *scales, int t0, int nq,
                                                const float *v, int stride, int n_first,
                                                int n) {
    float *w_t[SUMS_QUERIES];   /* each query's weights, scaled in place: w_t[t][r] * scale */
    for (int t = 0; t < nq; t++) {
        w_t[t] = weights + (long)(t0 + t) * ld;
        int rows_t = n_first + t0 + t, r = 0;
        Vec scale = vec_set1(scales[t0 + t]);
        for (; r + VLANES <= rows_t; r += VLANES)
            vec_store(w_t[t] + r, vec_mul(vec_load(w_t[t] + r), scale));
        for (; r < rows_t; r++) w_t[t][r] *= scales[t0 + t];
    }
    float *out_t = out + (long)t0 * out_stride;
    int shared = n_first + t0, i_end = n / VLANES * VLANES;
    for (int i0 = 0; i0 < i_end;) {
        int left = (i_end - i0) / VLANES;
        int nv = left > SUMS_VECTORS ? (left == 4 ? 2 : SUMS_VECTORS) : left;
#if SUMS_VECTORS == 3
        if (nv == 3)
            weighted_sums_block(out_t + i0, out_stride, w_t, v + i0, stride, shared, nq, 3);
#endif
        if (nv == 2)
            weighted_sums_block(out_t + i0, out_stride, w_t, v + i0, stride, shared, nq, 2);
        if (nv == 1)
            weighted_sums_block(out_t + i0, out_stride, w_t, v + i0, stride, shared, nq, 1);
        i0 += nv * VLANES;
    }
    if (i_end < n)
        for (int t = 0; t < nq; t++)
            simd_weighted_sum(out_t + (long)t * out_stride + i_end, w_t[t], 1.0f, v + i_end,
                              stride, NULL, shared + t, n - i_end);
}

void simd_weighted_sums_causal(float *out, int out_stride, float *weights, int ld,
                               const float *scales, int n_q, const float *v, int stride,
                               int n_first, int n, const float *ahead) {
    int t0 = 0;
    for (; t0 + SUMS_QUERIES <= n_q; t0 += SUMS_QUERIES)
        weighted_sums_queries(out, out_stride, weights, ld, scales, t0, SUMS_QUERIES, v,
                              stride, n_first, n);
#if SUMS_QUERIES == 8
    for (; t0 + 4 <= n_q; t0 += 4)
        weighted_sums_queries(out, out_stride, weights, ld, scales, t0, 4, v, stride, n_first,
                              n);
#endif
    for (; t0 < n_q; t0++)   /* one query (decode): ahead's rows asked for as v's are read */
        weighted_sum(out + (long)t0 * out_stride, weights + (long)t0 * ld, scales[t0], v,
                     stride, NULL, n_first + t0, n, 0, n_q == 1 ? ahead : NULL);
}

/* exp_sum_reference: x = exp(x - shift) lane by lane, then the sum in dot_vector's lanes. */
float simd_exp_sum(float *x, int n, float shift) {
    Vec shift_v = vec_set1(shift);
    V8 acc = v8_zero();
    for (int j = 0; j < n; j += EXP_BLOCK)
        acc = exp_sum_block(x + j, n - j < EXP_BLOCK ? n - j : EXP_BLOCK, shift_v, acc);
    return v8_sum(acc);
}

/* ------------------------------------------------------------------------- */
/* The trainer's kernels (references in trainer/train_kernels.c)               */

/* ---- the products' register tile ---- */

#define TILE_COLS (TILE_NV * VLANES)   /* columns of C per tile */
#define TILE_KB SIMD_TILE_KB           /* values of k per cache block (train_kernels.c's) */

/* C rows 0 .. R-1, columns 0 .. TILE_COLS-1 (those of mask's lanes if masked) (+)= the
 * chain over k = 0 .. K-1, then + bias (the tile's columns of it) if not NULL. Called with
 * constant R and masked, so acc lives in registers. */
static ALWAYS_INLINE void product_tile(float *c, int ldc, const float *a, long a_k, long a_m,
                                       const float *b, int ldb, int K, int zero,
                                       const float *bias, const LaneMask *mask, int R,
                                       int masked) {
    Vec acc[TILE_MR][TILE_NV];
    TILE_UNROLL for (int r = 0; r < R; r++)
        for (int v = 0; v < TILE_NV; v++) {
            const float *c_rv = c + (size_t)r * ldc + v * VLANES;
            acc[r][v] = zero ? vec_zero() : masked ? vec_load_mask(c_rv, mask[v]) : vec_load(c_rv);
        }
    for (int k = 0; k < K; k++) {
        const float *b_k = b + (size_t)k * ldb, *a_k0 = a + k * a_k;
        Vec b_v[TILE_NV];
        TILE_UNROLL for (int v = 0; v < TILE_NV; v++)
            b_v[v] = masked ? vec_load_mask(b_k + v * VLANES, mask[v]) : vec_load(b_k + v * VLANES);
        TILE_UNROLL for (int r = 0; r < R; r++) {
            Vec a_r = vec_broadcast(a_k0 + r * a_m);
            TILE_UNROLL for (int v = 0; v < TILE_NV; v++)
                acc[r][v] = vec_fma(a_r, b_v[v], acc[r][v]);
        }
    }
    if (bias) {
        Vec bias_v[TILE_NV];
        for (int v = 0; v < TILE_NV; v++)
            bias_v[v] = masked ? vec_load_mask(bias + v * VLANES, mask[v])
                               : vec_load(bias + v * VLANES);
        TILE_UNROLL for (int r = 0; r < R; r++)
            for (int v = 0; v < TILE_NV; v++) acc[r][v] = vec_add(acc[r][v], bias_v[v]);
    }
    TILE_UNROLL for (int r = 0; r < R; r++)
        for (int v = 0; v < TILE_NV; v++) {
            float *c_rv = c + (size_t)r * ldc + v * VLANES;
            if (masked) vec_store_mask(c_rv, mask[v], acc[r][v]);
            else vec_store(c_rv, acc[r][v]);
        }
}

/* One tile of R (1 .. TILE_MR) rows and width (1 .. TILE_COLS) columns: a constant tile
 * height for each R, and lane masks only for a strip narrower than TILE_COLS. */
static void product_tiles(float *c, int ldc, const float *a, long a_k, long a_m,
                          const float *b, int ldb, int K, int zero, const float *bias, int R,
                          int width) {
#define PRODUCT_CASE(rows, masked) \
    case rows: \
        product_tile(c, ldc, a, a_k, a_m, b, ldb, K, zero, bias, mask, rows, masked); \
        break;
    LaneMask mask[TILE_NV];
    if (width == TILE_COLS) {
        switch (R) {
        PRODUCT_CASE(1, 0) PRODUCT_CASE(2, 0) PRODUCT_CASE(3, 0) PRODUCT_CASE(4, 0)
#if TILE_MR > 4
        PRODUCT_CASE(5, 0) PRODUCT_CASE(6, 0)
#endif
        default: break;
        }
        return;
    }
    for (int v = 0; v < TILE_NV; v++) {
        int lanes = width - v * VLANES;
        mask[v] = lane_mask(lanes < 0 ? 0 : lanes > VLANES ? VLANES : lanes);
    }
    switch (R) {
    PRODUCT_CASE(1, 1) PRODUCT_CASE(2, 1) PRODUCT_CASE(3, 1) PRODUCT_CASE(4, 1)
#if TILE_MR > 4
    PRODUCT_CASE(5, 1) PRODUCT_CASE(6, 1)
#endif
    default: break;
    }
#undef PRODUCT_CASE
}

/* train_kernels.c's product_chains_reference's chains, each one lane's FMA chain, TILE_MR rows by
 * TILE_COLS columns of C at a time. Each strip of B (kb rows, TILE_COLS columns) is first
 * copied into a contiguous panel: in place, its rows lie ldb floats apart, and when that is
 * a multiple of a few cache lines (128, 384, 512 or 1024 columns) they all fall into a few
 * sets of L1 and evict each other before the next tile of rows reads them again. Copying
 * changes no value, so the bits are the same. */
void simd_product_chains(float *c, int ldc, const float *a, long a_k, long a_m,
                         const float *b, int ldb, int kb, int zero, const float *bias, int m0,
                         int m1, int j0, int j1) {
    _Alignas(64) float panel[TILE_KB * TILE_COLS];   /* 8 KiB (AVX2), 32 KiB (AVX-512) */
    for (int j = j0; j < j1; j += TILE_COLS) {
        int width = j1 - j < TILE_COLS ? j1 - j : TILE_COLS;
        for (int k = 0; k < kb; k++) {
            const float *b_k = b + (size_t)k * ldb + j;
            float *panel_k = panel + (size_t)k * TILE_COLS;
            if (width == TILE_COLS)
                for (int v = 0; v < TILE_NV; v++)
                    vec_store(panel_k + v * VLANES, vec_load(b_k + v * VLANES));
            else
                memcpy(panel_k, b_k, (size_t)width * sizeof(float));
        }
        for (int m = m0; m < m1; m += TILE_MR)
            product_tiles(c + (size_t)m * ldc + j, ldc, a + m * a_m, a_k,
                          a_m, panel, TILE_COLS, kb, zero, bias ? bias + j : NULL,
                          m1 - m < TILE_MR ? m1 - m : TILE_MR, width);
    }
}

/* column_sums_reference with each column's chain in a lane, four vectors of columns at a
 * time kept in registers over all N rows (db is read and written once). */
void simd_column_sums(float *db, const float *dout, int N, int OC, int o0, int o1) {
    enum { SUM_VECTORS = 4 };
    for (int o = o0; o < o1; o += SUM_VECTORS * VLANES) {
        LaneMask mask[SUM_VECTORS];
        Vec acc[SUM_VECTORS];
        for (int v = 0; v < SUM_VECTORS; v++) {
            int lanes = o1 - o - v * VLANES;
            mask[v] = lane_mask(lanes < 0 ? 0 : lanes > VLANES ? VLANES : lanes);
            acc[v] = vec_load_mask(db + o + v * VLANES, mask[v]);
        }
        for (int n = 0; n < N; n++) {
            const float *dout_n = dout + (size_t)n * OC + o;
            for (int v = 0; v < SUM_VECTORS; v++)
                acc[v] = vec_add(acc[v], vec_load_mask(dout_n + v * VLANES, mask[v]));
        }
        for (int v = 0; v < SUM_VECTORS; v++) vec_store_mask(db + o + v * VLANES, mask[v], acc[v]);
    }
}

/* ---- LayerNorm, GELU, AdamW, dropout ---- */

/* layernorm_dx_row_reference with the sums in vector lanes. */
void simd_layernorm_dx_row(float *dx_n, const float *x_n, const float *dout_n,
                           const float *w, int C, float m, float r) {
    Vec m_v = vec_set1(m), r_v = vec_set1(r), g_acc = vec_zero(), gx_acc = vec_zero();
    for (int i = 0; i < C; i += VLANES) {   /* masked lanes give g = 0 */
        LaneMask lanes = lane_mask(C - i < VLANES ? C - i : VLANES);
        Vec g = vec_mul(vec_load_mask(w + i, lanes), vec_load_mask(dout_n + i, lanes));
        Vec xhat = vec_mul(vec_sub(vec_load_mask(x_n + i, lanes), m_v), r_v);
        g_acc = vec_add(g_acc, g);
        gx_acc = vec_fma(g, xhat, gx_acc);
    }
    float g_mean = vec_sum(g_acc) / (float)C;
    float gx_mean = vec_sum(gx_acc) / (float)C;
    Vec gm_v = vec_set1(g_mean), gxm_v = vec_set1(gx_mean);
    for (int i = 0; i < C; i += VLANES) {
        LaneMask lanes = lane_mask(C - i < VLANES ? C - i : VLANES);
        Vec g = vec_mul(vec_load_mask(w + i, lanes), vec_load_mask(dout_n + i, lanes));
        Vec xhat = vec_mul(vec_sub(vec_load_mask(x_n + i, lanes), m_v), r_v);
        Vec d = vec_mul(r_v, vec_sub(vec_sub(g, gm_v), vec_mul(xhat, gxm_v)));
        vec_store_mask(dx_n + i, lanes, vec_add(vec_load_mask(dx_n + i, lanes), d));
    }
}

/* gelu_backward_reference, lane by lane, as simd_gelu. */
size_t simd_gelu_backward(float *dx, const float *x, const float *dout, size_t n) {
    Vec a = vec_set1(GELU_SQRT_2_OVER_PI), c3 = vec_set1(3.0f * GELU_CUBIC);
    Vec one = vec_set1(1.0f), two = vec_set1(2.0f);
    _Alignas(64) float e[EXP_BLOCK];   /* exp(-2u) */
    size_t i = 0;
    for (int m; (m = exp_block_len(n - i)) > 0; i += (size_t)m) {
        gelu_exp_block(e, x + i, m);
        for (int j = 0; j < m; j += VLANES) {
            Vec v = vec_load(x + i + j);
            Vec du = vec_mul(a, vec_add(one, vec_mul(vec_mul(c3, v), v)));
            Vec s = vec_div(one, vec_add(one, vec_load(e + j)));
            Vec slope = vec_mul(vec_mul(vec_mul(vec_mul(two, v), du), s), vec_sub(one, s));
            vec_store(dx + i + j, vec_mul(vec_add(s, slope), vec_load(dout + i + j)));
        }
    }
    return i;
}

/* adamw_reference, lane by lane, as simd_gelu (a loop of sqrtf does not vectorise by
 * itself: sqrtf may set errno). */
size_t simd_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                  const KernelsAdamW *h) {
    Vec beta1_v = vec_set1(h->beta1), beta2_v = vec_set1(h->beta2);
    Vec rest1_v = vec_set1(1.0f - h->beta1), rest2_v = vec_set1(1.0f - h->beta2);
    Vec lr_v = vec_set1(h->lr), eps_v = vec_set1(h->eps), decay_v = vec_set1(h->weight_decay);
    Vec scale_v = vec_set1(h->grad_scale), c1_v = vec_set1(h->correction1);
    Vec c2_v = vec_set1(h->correction2);
    size_t i = 0;
    for (; i + VLANES <= n; i += VLANES) {
        Vec g = vec_mul(vec_load(grad + i), scale_v), p = vec_load(param + i);
        Vec m_i = vec_add(vec_mul(beta1_v, vec_load(m + i)), vec_mul(rest1_v, g));
        Vec v_i = vec_add(vec_mul(beta2_v, vec_load(v + i)), vec_mul(vec_mul(rest2_v, g), g));
        Vec denominator = vec_add(vec_sqrt(vec_div(v_i, c2_v)), eps_v);
        Vec step = vec_add(vec_div(vec_div(m_i, c1_v), denominator), vec_mul(decay_v, p));
        vec_store(m + i, m_i);
        vec_store(v + i, v_i);
        vec_store(param + i, vec_sub(p, vec_mul(lr_v, step)));
    }
    return i;
}

/* dropout_reference on x (n,), VLANES elements at a time, the last in a masked vector. */
void simd_dropout(float *out, const float *x, size_t n, uint64_t key, uint32_t threshold,
                  float keep_scale) {
    Vec scale = vec_set1(keep_scale);
    size_t i = 0;
    for (; i + VLANES <= n; i += VLANES)
        vec_store(out + i, vec_dropout(vec_load(x + i), key + i, threshold, scale));
    if (i < n) {
        LaneMask tail = lane_mask((int)(n - i));
        vec_store_mask(out + i, tail,
                       vec_dropout(vec_load_mask(x + i, tail), key + i, threshold, scale));
    }
}

/* ---- transposes ---- */

int simd_transpose32(float *dst, int ld_dst, const float *src, int ld_src) {
    for (int r = 0; r < 32; r += 8)   /* 8 x 8 blocks in registers */
        for (int c = 0; c < 32; c += 8)
            v8_transpose(dst + (size_t)c * ld_dst + r, ld_dst, src + (size_t)r * ld_src + c,
                         ld_src);
    return 1;
}

#else
/* ISO C wants a declaration in every translation unit: a build without vector
 * instructions has nothing else here. */
typedef int simd_vec_kernels_none;
#endif /* SIMD_VECTOR */

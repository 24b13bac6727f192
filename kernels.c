/* kernels.c: matrix products, norms and activations: the reference kernels.
 *
 * The forward pass spends almost all its time in the matrix products (kernels_matmuls,
 * which block.c calls): out = x w^T, one dot product per output. Each kernel is written
 * here once, in plain C: what it computes, and the code a build without vector
 * instructions runs. Threads take blocks of the output (rows x columns) as jobs, cut by
 * the shapes alone, so any thread count computes the same bits; nothing here reduces
 * across threads.
 *
 * The faster versions for each instruction set (AVX2, AVX-512, NEON) live in simd/, behind
 * one header, simd/simd.h: a call such as simd_matmul_block is this build's vector kernel
 * or, in a build without one, the reference here (matmul_block_reference: simd.h maps the
 * name). How a product is cut into jobs (parallel/products.c) and the thread pool that
 * runs them (parallel/pool.c) live in parallel/; the trainer's kernels (backward passes,
 * AdamW) in trainer/train_kernels.c. This file does not know about models: read model.c
 * and block.c for how the kernels are used.
 *
 * Legend: N rows of x, IC input width, OC output width (rows of w), n a row of x (in the
 * products; elsewhere, as in kernels.h, n is a vector's length), o output column, i input
 * index, C width.
 */
#include "kernels.h"

#include <float.h>        /* FLT_MAX */
#include <math.h>         /* sqrtf, fabsf */
#include <stddef.h>       /* size_t */
#include <stdint.h>       /* int8_t, int32_t, uint16_t, uint32_t */
#include <string.h>       /* memcpy */

#include "parallel/pool.h"  /* pool_*: the threads behind kernels_run and the parallel loops */
#include "parallel/products.h"  /* products_run: the products' jobs behind kernels_matmuls */
#include "simd/simd.h"    /* simd_*: this build's vector kernels, or the references below;
                           * the constants both share (EXP_*, GELU_*, LANES) */

/* A reference kernel that a vector build replaces entirely is still compiled (so it never
 * rots), but not called there. */
#if defined(__GNUC__)
#define MAYBE_UNUSED __attribute__((unused))
#else
#define MAYBE_UNUSED
#endif

/* ------------------------------------------------------------------------- */
/* Reference kernels                                                           */
/*
 * What each kernel computes, in plain loops. A build without vector instructions runs
 * exactly these. A vector build runs its simd_* kernels instead, and these for the last
 * few values that do not fill a vector; the tests hold the two to each other: bit for bit
 * where the arithmetic is the same (exp, GELU, SwiGLU), within bounds checked against
 * float64 where a fused multiply-add rounds once where these round twice (the products,
 * the dot products).
 */

/* exp(x) = 2^k exp(r) with k = round(x / ln 2) and |r| <= ln(2) / 2; exp(r) from its
 * Taylor series to r^7 (truncation below 6e-9 relative); 2^k applied as two factors
 * 2^(k/2) 2^(k - k/2) so that k = -150 .. 128 never leaves float's exponent range.
 * Selects, not branches: clang vectorises a loop over it, gcc 12 only for AVX-512. */
static inline float exp_approx(float x) {
    int is_nan = x != x;
    float xc = is_nan ? 0.0f : x < EXP_X_MIN ? EXP_X_MIN : x > EXP_X_MAX ? EXP_X_MAX : x;
    /* adding 1.5 * 2^23 rounds to an integer only if the sum is rounded to float: the cast
     * does that where floats are evaluated wider (FLT_EVAL_METHOD not 0: x87, s390x), which
     * otherwise keep the fraction (errors of millions of ulp); elsewhere it costs nothing */
    float k = (float)(xc * EXP_LOG2E + EXP_ROUND) - EXP_ROUND;
    float r = (xc - k * EXP_LN2_HI) - k * EXP_LN2_LO;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int ki = (int)k, k1 = ki / 2, k2 = ki - k1;
    int bits1 = (k1 + 127) << 23, bits2 = (k2 + 127) << 23;   /* 2^k1, 2^k2 as floats */
    float f1, f2;
    memcpy(&f1, &bits1, sizeof f1);
    memcpy(&f2, &bits2, sizeof f2);
    float result = p * f1 * f2;
    return is_nan ? x : result;
}

/* ---- the matrix product ---- */

/* out[n0 .. n1, o0 .. o1) of out (N, OC) = x (N, IC) . w (OC, IC)^T + b (b may be NULL):
 * one job's block. Each output: eight partial sums (lane i % 8), one multiply and one add
 * per input, then ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). Not static: the jobs
 * (parallel/products.c) call it as simd_matmul_block in a build without vector kernels. */
void matmul_block_reference(float *out, const float *x, const float *w, const float *b,
                            int n0, int n1, int o0, int o1, int IC, int OC) {
    for (int n = n0; n < n1; n++) {
        for (int o = o0; o < o1; o++) {
            const float *x_n = x + (size_t)n * IC, *w_o = w + (size_t)o * IC;
            float acc[LANES] = {0};
            for (int i = 0; i < IC; i++) acc[i % LANES] += x_n[i] * w_o[i];
            out[(size_t)n * OC + o] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                                      ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        }
    }
    if (b)
        for (int n = n0; n < n1; n++)
            for (int o = o0; o < o1; o++) out[(size_t)n * OC + o] += b[o];
}

/* ---- norms and activations ---- */

/* ss (rows,) = the sum of squares of each row of x (rows, C), in order, as llama2.c's
 * rmsnorm. */
static void sum_squares_reference(float *ss, const float *x, int rows, int C) {
    for (int r = 0; r < rows; r++) {
        ss[r] = 0.0f;
        for (int i = 0; i < C; i++) ss[r] += x[(size_t)r * C + i] * x[(size_t)r * C + i];
    }
}

/* mean and rstd = 1 / sqrt(var + eps) of row x_n (C,). */
static MAYBE_UNUSED void norm_stats_reference(const float *x_n, int C, float *mean,
                                              float *rstd) {
    float m = 0.0f, var = 0.0f;
    for (int i = 0; i < C; i++) m += x_n[i];
    m /= (float)C;
    for (int i = 0; i < C; i++) var += (x_n[i] - m) * (x_n[i] - m);
    var /= (float)C;
    *mean = m;
    *rstd = 1.0f / sqrtf(var + KERNELS_NORM_EPS);
}

/* out (n,) = GELU(x): 0.5 v (1 + tanh u) = v sigmoid(2u) = v / (1 + exp(-2u)),
 * u = sqrt(2/pi)(v + c v^3). */
static void gelu_reference(float *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v);
        out[i] = v / (1.0f + exp_approx(-2.0f * u));
    }
}

/* out (n,) = SiLU(hidden) * gate, SiLU(v) = v / (1 + exp(-v)). */
static void swiglu_reference(float *out, const float *hidden, const float *gate, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = hidden[i];
        out[i] = v / (1.0f + exp_approx(-v)) * gate[i];
    }
}

/* ---- half precision ---- */

/* x as binary16 bits, rounded to nearest even, in integer steps (no dependence on the
 * rounding mode). A half keeps a float's top 10 fraction bits; its exponent bias is 15
 * against float's 127, so a normal value's bits are the float's, rebiased by 112 << 23
 * and shifted right by 13 once rounded at bit 13. */
static uint16_t to_half_reference(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    uint32_t sign = bits >> 16 & 0x8000u, a = bits & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | (a >> 13 & 0x1ffu));   /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);   /* >= 65520 (or inf): inf */
    if (a >= 0x38800000u) {                                    /* >= 2^-14: a normal half */
        a += 0x0fffu + (a >> 13 & 1u);                         /* round at bit 13, ties even */
        return (uint16_t)(sign | (a - (112u << 23)) >> 13);
    }
    if (a <= 0x33000000u) return (uint16_t)sign;               /* <= 2^-25: zero */
    /* a subnormal half: x / 2^-24 rounded to an integer, ties even; x = m 2^(e - 150) */
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;   /* 14..24 */
    uint32_t q = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (q & 1u))) q++;   /* 1024 carries into 2^-14 */
    return (uint16_t)(sign | q);
}

/* The float whose value binary16 h holds (exact: every half is a float). */
static float from_half_reference(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h >> 10 & 0x1fu, m = h & 0x3ffu, bits;
    if (e == 31) {                 /* inf, or NaN made quiet */
        bits = sign | 0x7f800000u | m << 13 | (m ? 0x400000u : 0u);
    } else if (e > 0) {            /* normal: rebias the exponent */
        bits = sign | (e + 112u) << 23 | m << 13;
    } else if (m == 0) {           /* zero */
        bits = sign;
    } else {                       /* subnormal, m 2^-24: normalised to 1.f 2^(k - 24) */
        uint32_t k = 10;
        while (!(m & 0x400u)) { m <<= 1; k--; }
        bits = sign | (k + 103u) << 23 | (m & 0x3ffu) << 13;
    }
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* ---- attention's loops ---- */

/* The sum of eight partial sums: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), the
 * order in which a vector's lanes sum by halves. The products' sums take another order
 * (matmul_block_reference), that of their kernels' sums across registers; each reference
 * has its kernel's bits. */
static MAYBE_UNUSED float lanes_sum(const float acc[LANES]) {
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* a (n,) . b (n,): eight partial sums (lane i % 8), one multiply and one add per input,
 * then lanes_sum. */
static MAYBE_UNUSED float dot_reference(const float *a, const float *b, int n) {
    float acc[LANES] = {0};
    for (int i = 0; i < n; i++) acc[i % LANES] += a[i] * b[i];
    return lanes_sum(acc);
}

/* out (n_rows,) = q (n,) . row r of k, for the rows listed in rows (NULL: 0 .. n_rows-1),
 * each row n floats at k + row * stride: dot_reference, row by row. */
static MAYBE_UNUSED void dots_reference(float *out, const float *q, const float *k, int stride,
                                        const int32_t *rows, int n_rows, int n) {
    for (int r = 0; r < n_rows; r++)
        out[r] = dot_reference(q, k + (long)(rows ? rows[r] : r) * stride, n);
}

/* dots_reference over rows 0 .. n_rows-1 of halves k (n_rows, n), each value converted
 * exactly: the bits of dots_reference over the converted rows. */
static MAYBE_UNUSED void dots_half_reference(float *out, const float *q, const uint16_t *k,
                                             int n_rows, int n) {
    for (int r = 0; r < n_rows; r++) {
        float acc[LANES] = {0};
        const uint16_t *k_r = k + (long)r * n;
        for (int i = 0; i < n; i++) acc[i % LANES] += q[i] * from_half_reference(k_r[i]);
        out[r] = lanes_sum(acc);
    }
}

/* The sum of x (n,), in dot_reference's lanes and order. */
static MAYBE_UNUSED float sum_reference(const float *x, int n) {
    float acc[LANES] = {0};
    for (int i = 0; i < n; i++) acc[i % LANES] += x[i];
    return lanes_sum(acc);
}

/* The largest of init and x (n,) by x > max comparisons: a NaN value never wins. */
static MAYBE_UNUSED float max_reference(const float *x, int n, float init) {
    float max = init;
    for (int i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    return max;
}

/* x (n,) = exp(x - shift), in place; returns the sum of the new x (sum_reference). */
static MAYBE_UNUSED float exp_sum_reference(float *x, int n, float shift) {
    for (int j = 0; j < n; j++) x[j] = exp_approx(x[j] - shift);
    return sum_reference(x, n);
}

/* out (n,) = sum over r of (weights[r] * scale) * row r of v (rows as in kernels_dots):
 * one multiply and one add per row, rows in order, from 0. */
static MAYBE_UNUSED void weighted_sum_reference(float *out, const float *weights, float scale,
                                                const float *v, int stride,
                                                const int32_t *rows, int n_rows, int n) {
    for (int i = 0; i < n; i++) out[i] = 0.0f;
    for (int r = 0; r < n_rows; r++) {
        const float *v_r = v + (long)(rows ? rows[r] : r) * stride;
        float a = weights[r] * scale;
        for (int i = 0; i < n; i++) out[i] += a * v_r[i];
    }
}

/* weighted_sum_reference over rows 0 .. n_rows-1 of halves v (n_rows, n), each value
 * converted exactly: the bits of weighted_sum_reference over the converted rows. */
static MAYBE_UNUSED void weighted_sum_half_reference(float *out, const float *weights,
                                                     float scale, const uint16_t *v,
                                                     int n_rows, int n) {
    for (int i = 0; i < n; i++) out[i] = 0.0f;
    for (int r = 0; r < n_rows; r++) {
        float a = weights[r] * scale;
        for (int i = 0; i < n; i++) out[i] += a * from_half_reference(v[(long)r * n + i]);
    }
}

/* kernels_dots_causal query by query: simd_dots (or its reference) for each. */
static MAYBE_UNUSED void dots_causal_each(float *out, int ld, const float *q, int q_stride,
                                          int n_q, const float *k, int stride, int n_first,
                                          int n) {
    for (int t = 0; t < n_q; t++)
        simd_dots(out + (long)t * ld, q + (long)t * q_stride, k, stride, NULL, n_first + t, n);
}

/* kernels_weighted_sums_causal query by query: simd_weighted_sum (or its reference); no
 * rows asked for ahead. */
static MAYBE_UNUSED void weighted_sums_causal_each(float *out, int out_stride,
                                                   float *weights, int ld,
                                                   const float *scales, int n_q, const float *v,
                                                   int stride, int n_first, int n,
                                                   const float *ahead) {
    (void)ahead;
    for (int t = 0; t < n_q; t++)
        simd_weighted_sum(out + (long)t * out_stride, weights + (long)t * ld, scales[t], v,
                          stride, NULL, n_first + t, n);
}

/* ------------------------------------------------------------------------- */
/* Threads (parallel/pool.c)                                                   */

int kernels_set_threads(int n) { return pool_set_threads(n); }
int kernels_cap_threads(void) { return pool_cap_threads(); }
int kernels_threads(void) { return pool_threads(); }
void kernels_run(void (*body)(void *ctx), void *ctx) { pool_run(body, ctx); }

void kernels_parallel_for(void (*job)(void *ctx, int j), void *ctx, int n_jobs, double work) {
    pool_parallel_for(job, ctx, n_jobs, work);
}

int kernels_jobs(size_t n, size_t per_job) { return (int)((n + per_job - 1) / per_job); }

void kernels_job_range(size_t *start, size_t *end, int j, size_t n, size_t per_job) {
    *start = (size_t)j * per_job;
    *end = *start + per_job < n ? *start + per_job : n;
}

/* ------------------------------------------------------------------------- */
/* Matrix products (parallel/products.c)                                       */

void kernels_matmuls(const KernelsProduct *p, int n, const float *x, int N, int IC,
                     int8_t *xq, float *xs) {
    products_run(p, n, x, N, IC, xq, xs);
}

void kernels_matmul(float *out, const float *x, const float *w, const float *b,
                    int N, int IC, int OC) {
    KernelsProduct p = {out, &(Matrix){.f32 = w}, b, OC};
    kernels_matmuls(&p, 1, x, N, IC, NULL, NULL);
}

void kernels_matmul_q8(float *out, const float *x, const QuantMatrix *w, const float *b,
                       int N, int8_t *xq, float *xs) {
    KernelsProduct p = {out, &(Matrix){.q8 = *w}, b, w->rows};
    kernels_matmuls(&p, 1, x, N, w->cols, xq, xs);
}

int kernels_gemm_min_rows(void) { return simd_gemm_min_rows(); }

const char *kernels_isa(void) { return SIMD_ISA; }

/* ------------------------------------------------------------------------- */
/* Norms and activations                                                       */

void kernels_norm_stats(const float *x_n, int C, float *mean, float *rstd) {
    simd_norm_stats(x_n, C, mean, rstd);
}

void kernels_layernorm(float *out, const float *x, const float *w, const float *b, int N,
                       int C) {
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C;
        float *out_n = out + (size_t)n * C;
        float mean, rstd;   /* kernels_norm_stats's: the backward's, bit for bit */
        simd_norm_stats(x_n, C, &mean, &rstd);
        for (int i = 0; i < C; i++) out_n[i] = (x_n[i] - mean) * rstd * w[i] + b[i];
    }
}

void kernels_rmsnorm(float *out, const float *x, const float *w, int N, int C, float eps) {
    for (int n0 = 0; n0 < N; n0 += SIMD_SUM_SQUARES_ROWS) {
        int rows = N - n0 < SIMD_SUM_SQUARES_ROWS ? N - n0 : SIMD_SUM_SQUARES_ROWS;
        float ss[SIMD_SUM_SQUARES_ROWS];   /* each row's sum of x[i]^2, i in order */
        if (rows == SIMD_SUM_SQUARES_ROWS) simd_sum_squares(ss, x + (size_t)n0 * C, C);
        else sum_squares_reference(ss, x + (size_t)n0 * C, rows, C);
        for (int r = 0; r < rows; r++) {
            const float *x_n = x + (size_t)(n0 + r) * C;
            float *out_n = out + (size_t)(n0 + r) * C;
            float rms_inv = 1.0f / sqrtf(ss[r] / (float)C + eps);
            for (int i = 0; i < C; i++) out_n[i] = w[i] * (rms_inv * x_n[i]);
        }
    }
}

float kernels_expf(float x) { return exp_approx(x); }

void kernels_gelu(float *out, const float *x, size_t n) {
    size_t i = simd_gelu(out, x, n);   /* the whole vectors, if any */
    gelu_reference(out + i, x + i, n - i);
}

void kernels_swiglu(float *out, const float *hidden, const float *gate, size_t n) {
    size_t i = simd_swiglu(out, hidden, gate, n);   /* the whole vectors, if any */
    swiglu_reference(out + i, hidden + i, gate + i, n - i);
}

/* ------------------------------------------------------------------------- */
/* Attention's loops                                                           */

float kernels_dot(const float *a, const float *b, int n) { return simd_dot(a, b, n); }

void kernels_dots(float *out, const float *q, const float *k, int stride, const int32_t *rows,
                  int n_rows, int n) {
    simd_dots(out, q, k, stride, rows, n_rows, n);
}

void kernels_dots_causal(float *out, int ld, const float *q, int q_stride, int n_q,
                         const float *k, int stride, int n_first, int n) {
    simd_dots_causal(out, ld, q, q_stride, n_q, k, stride, n_first, n);
}

void kernels_weighted_sums_causal(float *out, int out_stride, float *weights, int ld,
                                  const float *scales, int n_q, const float *v, int stride,
                                  int n_first, int n, const float *ahead) {
    simd_weighted_sums_causal(out, out_stride, weights, ld, scales, n_q, v, stride, n_first, n,
                              ahead);
}

float kernels_max(const float *x, int n, float init) { return simd_max(x, n, init); }

/* The scan's last x[best] is the largest value (kernels_max, which compares as it does),
 * and best its first place: blocks of 64 values compared whole (no exit inside a block,
 * so the compiler's vectors take it), then the block that holds it value by value. */
int kernels_argmax(const float *x, int n) {
    if (n < 2) return 0;
    float max = kernels_max(x + 1, n - 1, x[0]);
    for (int i0 = 0; i0 < n; i0 += 64) {
        int i1 = i0 + 64 < n ? i0 + 64 : n, found = 0;
        for (int i = i0; i < i1; i++) found |= x[i] == max;
        if (found)
            for (int i = i0; i < i1; i++)
                if (x[i] == max) return i;
    }
    return 0;   /* x[0] is NaN: nothing compares above it, and NaN equals nothing */
}

float kernels_exp_sum(float *x, int n, float shift) { return simd_exp_sum(x, n, shift); }

void kernels_weighted_sum(float *out, const float *weights, float scale, const float *v,
                          int stride, const int32_t *rows, int n_rows, int n) {
    simd_weighted_sum(out, weights, scale, v, stride, rows, n_rows, n);
}

void kernels_dots_half(float *out, const float *q, const uint16_t *k, int n_rows, int n) {
    simd_dots_half(out, q, k, n_rows, n);
}

void kernels_weighted_sum_half(float *out, const float *weights, float scale,
                               const uint16_t *v, int n_rows, int n) {
    simd_weighted_sum_half(out, weights, scale, v, n_rows, n);
}

void kernels_to_half(uint16_t *out, const float *x, size_t n) {
    size_t i = simd_to_half(out, x, n);   /* the whole vectors, if any */
    for (; i < n; i++) out[i] = to_half_reference(x[i]);
}

void kernels_from_half(float *out, const uint16_t *h, size_t n) {
    size_t i = simd_from_half(out, h, n);   /* the whole vectors, if any */
    for (; i < n; i++) out[i] = from_half_reference(h[i]);
}

int kernels_all_finite(const float *x, size_t n) {
    int finite = 1;   /* no exit in the loop, so the compiler's vectors take it */
    for (size_t i = 0; i < n; i++) finite &= fabsf(x[i]) <= FLT_MAX;   /* NaN, inf: 0 */
    return finite;
}

/* test_kernels.c: every kernel of kernels.h (kernels.c, trainer/train_kernels.c and, in a
 * vector build, their simd/ versions) against a naive float64 reference.
 *
 * 1. kernels_matmul at awkward sizes (1, odd, primes, not a multiple of the 8-lane chunk
 *    or of any tile), outputs prefilled with NaN; 1 and 2 threads bit for bit; a row
 *    gives the same bits in blocks of N and N-1 rows on one path; a single row (decode)
 *    matches the same row of a block (prefill) within the tolerance, and gives a large
 *    matrix's bits by its slices.
 * 2. kernels_matmul_q8 against float64 sums of the dequantized operands.
 * 3. kernels_matmul_backward and the trainer's kernels_matmul_wt against float64 sums,
 *    1 and 2 threads bit for bit; kernels_matmul_wt equals kernels_matmul's prompt path.
 * 4. LayerNorm, RMSNorm, GELU, SwiGLU, kernels_expf, and the trainer's LayerNorm and GELU
 *    backward, against libm in float64; attention's dots and weighted sums bit for bit
 *    against their one-row definitions; half precision against its definition.
 * 5. The thread pool (kernels_run): a loop's jobs run on two threads at once, and a loop
 *    started inside a job stays on that job's thread. "1 and 2 threads" above means the
 *    2-thread result both outside kernels_run (an OpenMP loop per call; one thread without
 *    OpenMP) and inside it, on the pool (OpenMP's threads, or POSIX threads without).
 */
#include "kernels.h"

#include <math.h>          /* NAN, INFINITY, exp, tanh, sqrt, sqrtf, fmaf, isnan, isinf */
#include <sched.h>         /* sched_yield (POSIX): a job waiting for the pool's other thread */
#include <stdatomic.h>     /* the pool test's counters */
#include <stdint.h>        /* uint64_t, int8_t */
#include <stdio.h>         /* printf */
#include <stdlib.h>        /* malloc, free */
#include <string.h>        /* memcmp, memcpy */
#include <time.h>          /* time: a bound against hanging, never a measurement */

#include "hash.h"          /* hash_mix64 and the dropout rule: kernels_dropout's reference */
#include "quant.h"         /* quant_groups, quant_quantize, quant_dequantize */
#include "simd/simd.h"     /* simd_set_prefetch: both ways of decode's rows */
#include "tests/check.h"   /* check_* */

/* fp32 matmul vs float64: each output is a sum of IC products of values in [-1, 1); FMA
 * with eight partial sums keeps the rounding error near IC * 2^-24 * |terms|, below 1e-5
 * relative for IC <= 1000 (measured: under 3e-6). */
#define MATMUL_ATOL 1e-5
#define MATMUL_RTOL 1e-5
/* int8: both sides use the same dequantized values, so only float summation differs */
#define Q8_ATOL 1e-4
#define Q8_RTOL 1e-5
/* elementwise functions: a few float ulps (kernels_expf is within 2 ulp) */
#define ELEMENT_RTOL 1e-6
#define ELEMENT_ATOL 1e-7
#define NORM_ATOL 1e-5   /* normalised outputs are O(1); float sums of C terms */
#ifndef POOL_WAIT_SECONDS
#define POOL_WAIT_SECONDS 60   /* a job gives up waiting for the pool's second thread */
#endif

static uint64_t seed = 42;

static float *random_floats(size_t n, float amplitude) {
    float *x = malloc(n * sizeof(float));
    check_fill_random(&seed, x, (long)n, amplitude);
    return x;
}

static void set_threads(int n) { kernels_set_threads(n); }

/* Runs body(ctx) inside kernels_run on (at most) `threads` threads, as run and train run
 * their passes: the kernels' loops then go to the pool. */
static void on_pool(int threads, void (*body)(void *ctx), void *ctx) {
    set_threads(threads);
    kernels_run(body, ctx);
}

/* One product, as a kernels_run body: kernels_matmul, or kernels_matmul_wt when w holds
 * the transposed weights. */
typedef struct {
    float *out;
    const float *x, *w, *b;
    int N, IC, OC, transposed;
} MatmulCall;

static void matmul_call(void *ctx) {
    const MatmulCall *c = ctx;
    if (c->transposed) kernels_matmul_wt(c->out, c->x, c->w, c->b, c->N, c->IC, c->OC);
    else kernels_matmul(c->out, c->x, c->w, c->b, c->N, c->IC, c->OC);
}

/* ------------------------------------------------------------------------- */
/* 1. fp32 matmul                                                              */

static void test_matmul(int N, int IC, int OC, int bias) {
    float *x = random_floats((size_t)N * IC, 1.0f), *w = random_floats((size_t)OC * IC, 1.0f);
    float *b = random_floats((size_t)OC, 1.0f);
    float *out1 = malloc(sizeof(float) * N * OC), *out2 = malloc(sizeof(float) * N * OC);
    float *row = malloc(sizeof(float) * OC), *pooled = malloc(sizeof(float) * N * OC);
    double *want = malloc(sizeof(double) * N * OC);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double sum = bias ? (double)b[o] : 0.0;
            for (int i = 0; i < IC; i++)
                sum += (double)x[(size_t)n * IC + i] * (double)w[(size_t)o * IC + i];
            want[(size_t)n * OC + o] = sum;
        }
    for (int i = 0; i < N * OC; i++) out1[i] = out2[i] = pooled[i] = NAN;   /* unwritten show */
    set_threads(1);
    kernels_matmul(out1, x, w, bias ? b : NULL, N, IC, OC);
    set_threads(2);
    kernels_matmul(out2, x, w, bias ? b : NULL, N, IC, OC);
    MatmulCall call = {pooled, x, w, bias ? b : NULL, N, IC, OC, 0};
    on_pool(2, matmul_call, &call);
    check_close_f64("kernels_matmul vs float64", out1, want, (size_t)N * OC, MATMUL_ATOL,
                    MATMUL_RTOL);
    check_true(memcmp(out1, out2, sizeof(float) * N * OC) == 0 &&
               memcmp(out1, pooled, sizeof(float) * N * OC) == 0,
               "kernels_matmul (N %d, IC %d, OC %d%s): 1 and 2 threads give identical bits",
               N, IC, OC, bias ? ", bias" : "");
    /* a row's result does not depend on how many rows come with it, as long as both
     * blocks take the same path (dot-product tile, or broadcast tile from
     * kernels_gemm_min_rows() rows on) */
    int min_rows = kernels_gemm_min_rows();
    if (N >= 2 && (min_rows == 0 || (N - 1 >= min_rows) == (N >= min_rows))) {
        kernels_matmul(out2, x, w, bias ? b : NULL, N - 1, IC, OC);
        check_true(memcmp(out2, out1, sizeof(float) * (N - 1) * OC) == 0,
                   "kernels_matmul (IC %d, OC %d): blocks of %d and %d rows agree, bitwise",
                   IC, OC, N, N - 1);
    }
    /* decode: the last row alone, as a generated token goes through */
    kernels_matmul(row, x + (size_t)(N - 1) * IC, w, bias ? b : NULL, 1, IC, OC);
    check_close("kernels_matmul: one row alone vs that row of the block", row,
                out1 + (size_t)(N - 1) * OC, (size_t)OC, MATMUL_ATOL, MATMUL_RTOL);
    free(x); free(w); free(b); free(out1); free(out2); free(row); free(want);
    free(pooled);
}

/* ------------------------------------------------------------------------- */
/* 2. int8 matmul                                                              */

/* kernels_matmul_q8's arguments, as a kernels_run body. */
typedef struct {
    float *out;
    const float *x;
    const QuantMatrix *w;
    const float *b;
    int N;
    int8_t *xq;
    float *xs;
} MatmulQ8Call;

static void matmul_q8_call(void *ctx) {
    const MatmulQ8Call *c = ctx;
    kernels_matmul_q8(c->out, c->x, c->w, c->b, c->N, c->xq, c->xs);
}

static void test_matmul_q8(int N, int IC, int OC, int group) {
    float *x = random_floats((size_t)N * IC, 2.0f), *wf = random_floats((size_t)OC * IC, 0.5f);
    float *b = random_floats((size_t)OC, 1.0f);
    int groups = quant_groups(IC, group);
    int8_t *wq = malloc((size_t)OC * IC), *xq = malloc((size_t)N * IC);
    float *ws = malloc(sizeof(float) * OC * groups), *xs = malloc(sizeof(float) * N * groups);
    quant_quantize(wq, ws, wf, OC, IC, group);
    QuantMatrix w = {wq, ws, OC, IC, group, 0, 0, NULL};
    float *out = malloc(sizeof(float) * N * OC), *out2 = malloc(sizeof(float) * N * OC);
    float *pooled = malloc(sizeof(float) * N * OC);
    for (int i = 0; i < N * OC; i++) out[i] = out2[i] = pooled[i] = NAN;
    set_threads(1);
    kernels_matmul_q8(out, x, &w, b, N, xq, xs);
    set_threads(2);
    int8_t *xq2 = malloc((size_t)N * IC);
    float *xs2 = malloc(sizeof(float) * N * groups);
    kernels_matmul_q8(out2, x, &w, b, N, xq2, xs2);
    MatmulQ8Call call = {pooled, x, &w, b, N, xq2, xs2};
    on_pool(2, matmul_q8_call, &call);
    /* the reference: the same quantized activations and weights, dequantized, in float64 */
    double *want = malloc(sizeof(double) * N * OC);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double sum = (double)b[o];
            for (int i = 0; i < IC; i++)
                sum += (double)xq[(size_t)n * IC + i] * (double)xs[(size_t)n * groups + i / group] *
                       (double)wq[(size_t)o * IC + i] * (double)ws[(size_t)o * groups + i / group];
            want[(size_t)n * OC + o] = sum;
        }
    check_close_f64("kernels_matmul_q8 vs float64 of the dequantized operands", out, want,
                    (size_t)N * OC, Q8_ATOL, Q8_RTOL);
    check_true(memcmp(out, out2, sizeof(float) * N * OC) == 0 &&
               memcmp(out, pooled, sizeof(float) * N * OC) == 0,
               "kernels_matmul_q8 (N %d, IC %d, OC %d, group %d): 1 and 2 threads identical",
               N, IC, OC, group);
    free(x); free(wf); free(b); free(wq); free(xq); free(ws); free(xs); free(out); free(out2);
    free(xq2); free(xs2); free(want); free(pooled);
}

/* kernels_matmuls's arguments, as a kernels_run body. */
typedef struct {
    const KernelsProduct *p;
    int n;
    const float *x;
    int N, IC;
    int8_t *xq;
    float *xs;
} MatmulsCall;

static void matmuls_call(void *ctx) {
    const MatmulsCall *c = ctx;
    kernels_matmuls(c->p, c->n, c->x, c->N, c->IC, c->xq, c->xs);
}

/* kernels_matmuls over eleven products of one x (N, IC): five fp32 (a run longer than one
 * loop takes), two int8 in groups of 32, one in groups of 16 (x quantized again), one fp32
 * again, two in halves; on the pool with 2 threads, each output bit for bit what the
 * product's own kernels_matmul or kernels_matmul_q8 gives on one thread (for halves:
 * kernels_matmul over the halves' values as floats). With two threads a decode job ends
 * inside a product of each run (fp32 48 rows of 40 + 24, int8 24 of 20 + 17, halves 160
 * of 20 + 300), and a prompt's job of halves takes more than one group of 48 rows. */
static void test_matmuls(int N, int IC) {
    enum { P = 11, HALF = -1 };
    static const int OC[P] = {40, 24, 24, 8, 16, 20, 17, 9, 5, 20, 300};
    static const int group[P] = {0, 0, 0, 0, 0, 32, 32, 16, 0, HALF, HALF};   /* 0: fp32 */
    static const int bias[P] = {1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 0};
    float *x = random_floats((size_t)N * IC, 2.0f), *xs = malloc(sizeof(float) * N * IC);
    int8_t *xq = malloc((size_t)N * IC);
    float *wf[P], *b[P], *got[P], *want[P], *scales[P];
    int8_t *wq[P];
    uint16_t *wh[P];
    Matrix w[P];
    KernelsProduct p[P];
    for (int i = 0; i < P; i++) {
        size_t outs = (size_t)N * OC[i], weights = (size_t)OC[i] * IC;
        wf[i] = random_floats(weights, 0.5f);
        b[i] = bias[i] ? random_floats((size_t)OC[i], 1.0f) : NULL;
        got[i] = malloc(sizeof(float) * outs);
        want[i] = malloc(sizeof(float) * outs);
        for (size_t o = 0; o < outs; o++) got[i][o] = want[i][o] = NAN;
        wq[i] = NULL;
        scales[i] = NULL;
        wh[i] = NULL;
        if (group[i] > 0) {
            wq[i] = malloc(weights);
            scales[i] = malloc(sizeof(float) * OC[i] * quant_groups(IC, group[i]));
            quant_quantize(wq[i], scales[i], wf[i], OC[i], IC, group[i]);
            w[i] = (Matrix){.q8 = {wq[i], scales[i], OC[i], IC, group[i], 0, 0, NULL}};
        } else if (group[i] == HALF) {   /* wf: the halves' values, for the reference */
            wh[i] = malloc(weights * sizeof(uint16_t));
            kernels_to_half(wh[i], wf[i], weights);
            kernels_from_half(wf[i], wh[i], weights);
            w[i] = (Matrix){.f16 = wh[i]};
        } else {
            w[i] = (Matrix){.f32 = wf[i]};
        }
        p[i] = (KernelsProduct){got[i], &w[i], b[i], OC[i]};
    }
    set_threads(1);
    for (int i = 0; i < P; i++) {
        if (group[i] > 0) kernels_matmul_q8(want[i], x, &w[i].q8, b[i], N, xq, xs);
        else kernels_matmul(want[i], x, wf[i], b[i], N, IC, OC[i]);
    }
    MatmulsCall call = {p, P, x, N, IC, xq, xs};
    on_pool(2, matmuls_call, &call);
    for (int i = 0; i < P; i++) {
        check_true(memcmp(got[i], want[i], sizeof(float) * N * OC[i]) == 0,
                   "kernels_matmuls (N %d, IC %d): product %d (%s, OC %d) as alone, bitwise",
                   N, IC, i, group[i] > 0 ? "int8" : group[i] == HALF ? "halves" : "fp32",
                   OC[i]);
        free(wf[i]); free(b[i]); free(got[i]); free(want[i]); free(wq[i]); free(scales[i]);
        free(wh[i]);
    }
    free(x); free(xq); free(xs);
}

/* ------------------------------------------------------------------------- */
/* 3. matmul backward                                                          */

/* kernels_matmul_backward's or kernels_layernorm_backward's arguments (IC is then C), as
 * a kernels_run body. */
typedef struct {
    float *dx, *dw, *db;
    const float *dout, *x, *w;
    float *mean, *rstd;   /* LayerNorm's statistics; NULL for the product */
    int N, IC, OC;
} BackwardCall;

static void backward_call(void *ctx) {
    const BackwardCall *c = ctx;
    if (c->mean)
        kernels_layernorm_backward(c->dx, c->dw, c->db, c->dout, c->x, c->w, c->mean, c->rstd,
                                   c->N, c->IC);
    else
        kernels_matmul_backward(c->dx, c->dw, c->db, c->dout, c->x, c->w, c->N, c->IC, c->OC,
                                KERNELS_ACCUMULATE);
}

static void test_matmul_backward(int N, int IC, int OC) {
    float *dout = random_floats((size_t)N * OC, 1.0f), *x = random_floats((size_t)N * IC, 1.0f);
    float *w = random_floats((size_t)OC * IC, 1.0f);
    float *dx = random_floats((size_t)N * IC, 1.0f), *dw = random_floats((size_t)OC * IC, 1.0f);
    float *db = random_floats((size_t)OC, 1.0f);
    double *want_dx = malloc(sizeof(double) * N * IC), *want_dw = malloc(sizeof(double) * OC * IC);
    double *want_db = malloc(sizeof(double) * OC);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < IC; i++) {
            double sum = (double)dx[(size_t)n * IC + i];
            for (int o = 0; o < OC; o++)
                sum += (double)dout[(size_t)n * OC + o] * (double)w[(size_t)o * IC + i];
            want_dx[(size_t)n * IC + i] = sum;
        }
    float *db_chain = malloc(sizeof(float) * OC);   /* kernels.h: rows in increasing order */
    for (int o = 0; o < OC; o++) {
        double sum_b = (double)db[o];
        db_chain[o] = db[o];
        for (int n = 0; n < N; n++) {
            sum_b += (double)dout[(size_t)n * OC + o];
            db_chain[o] += dout[(size_t)n * OC + o];
        }
        want_db[o] = sum_b;
        for (int i = 0; i < IC; i++) {
            double sum = (double)dw[(size_t)o * IC + i];
            for (int n = 0; n < N; n++)
                sum += (double)dout[(size_t)n * OC + o] * (double)x[(size_t)n * IC + i];
            want_dw[(size_t)o * IC + i] = sum;
        }
    }
    /* copies of the starting gradients, for the 2-thread runs and the dx-less run */
    float *dx2 = malloc(sizeof(float) * N * IC), *dw2 = malloc(sizeof(float) * OC * IC);
    float *db2 = malloc(sizeof(float) * OC), *dw3 = malloc(sizeof(float) * OC * IC);
    float *dx_pool = malloc(sizeof(float) * N * IC), *dw_pool = malloc(sizeof(float) * OC * IC);
    float *db_pool = malloc(sizeof(float) * OC);
    memcpy(dx2, dx, sizeof(float) * N * IC);
    memcpy(dw2, dw, sizeof(float) * OC * IC);
    memcpy(dw3, dw, sizeof(float) * OC * IC);
    memcpy(db2, db, sizeof(float) * OC);
    memcpy(dx_pool, dx, sizeof(float) * N * IC);
    memcpy(dw_pool, dw, sizeof(float) * OC * IC);
    memcpy(db_pool, db, sizeof(float) * OC);
    set_threads(1);
    kernels_matmul_backward(dx, dw, db, dout, x, w, N, IC, OC, KERNELS_ACCUMULATE);
    set_threads(2);
    kernels_matmul_backward(dx2, dw2, db2, dout, x, w, N, IC, OC, KERNELS_ACCUMULATE);
    kernels_matmul_backward(NULL, dw3, NULL, dout, x, w, N, IC, OC, KERNELS_ACCUMULATE);
    BackwardCall call = {dx_pool, dw_pool, db_pool, dout, x, w, NULL, NULL, N, IC, OC};
    on_pool(2, backward_call, &call);
    check_true(memcmp(dx, dx2, sizeof(float) * N * IC) == 0 &&
               memcmp(dw, dw2, sizeof(float) * OC * IC) == 0 &&
               memcmp(db, db2, sizeof(float) * OC) == 0 &&
               memcmp(dw, dw3, sizeof(float) * OC * IC) == 0 &&
               memcmp(dx, dx_pool, sizeof(float) * N * IC) == 0 &&
               memcmp(dw, dw_pool, sizeof(float) * OC * IC) == 0 &&
               memcmp(db, db_pool, sizeof(float) * OC) == 0,
               "kernels_matmul_backward (N %d, IC %d, OC %d): 1 and 2 threads, and without dx "
               "and db, give identical bits", N, IC, OC);
    /* overwriting dx (here full of NaN) gives the bits of accumulating into zeros */
    float *dx_zero = calloc((size_t)N * IC, sizeof(float));
    float *dx_nan = malloc(sizeof(float) * N * IC);
    for (int i = 0; i < N * IC; i++) dx_nan[i] = NAN;
    kernels_matmul_backward(dx_zero, dw3, NULL, dout, x, w, N, IC, OC, KERNELS_ACCUMULATE);
    kernels_matmul_backward(dx_nan, dw3, NULL, dout, x, w, N, IC, OC,
                            KERNELS_OVERWRITE);   /* dw3 only accumulates further */
    check_true(memcmp(dx_zero, dx_nan, sizeof(float) * N * IC) == 0,
               "kernels_matmul_backward (N %d, IC %d, OC %d): overwriting dx (NaN before) equals "
               "accumulating into zeros, bitwise", N, IC, OC);
    free(dx_zero); free(dx_nan);
    check_close_f64("kernels_matmul_backward dx vs float64", dx, want_dx, (size_t)N * IC,
                    MATMUL_ATOL, MATMUL_RTOL);
    check_close_f64("kernels_matmul_backward dw vs float64", dw, want_dw, (size_t)OC * IC,
                    MATMUL_ATOL, MATMUL_RTOL);
    check_close_f64("kernels_matmul_backward db vs float64", db, want_db, (size_t)OC,
                    MATMUL_ATOL, MATMUL_RTOL);
    check_true(memcmp(db, db_chain, sizeof(float) * OC) == 0, "kernels_matmul_backward (N %d, "
               "OC %d): db is each column's float chain over the rows in order, bitwise", N, OC);
    free(db_chain);
    free(dout); free(x); free(w); free(dx); free(dw); free(db); free(want_dx); free(want_dw);
    free(want_db); free(dx2); free(dw2); free(db2); free(dw3); free(dx_pool); free(dw_pool);
    free(db_pool);
}

/* The trainer's forward: x . wt with wt = w^T made by kernels_transpose. */
static void test_matmul_wt(int N, int IC, int OC, int bias) {
    float *x = random_floats((size_t)N * IC, 1.0f), *w = random_floats((size_t)OC * IC, 1.0f);
    float *b = random_floats((size_t)OC, 1.0f), *wt = malloc(sizeof(float) * IC * OC);
    float *out1 = malloc(sizeof(float) * N * OC), *out2 = malloc(sizeof(float) * N * OC);
    float *ref = malloc(sizeof(float) * N * OC), *pooled = malloc(sizeof(float) * N * OC);
    double *want = malloc(sizeof(double) * N * OC), *bound = malloc(sizeof(double) * N * OC);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double sum = bias ? (double)b[o] : 0.0, size = fabs(sum);
            for (int i = 0; i < IC; i++) {
                double term = (double)x[(size_t)n * IC + i] * (double)w[(size_t)o * IC + i];
                sum += term;
                size += fabs(term);
            }
            want[(size_t)n * OC + o] = sum;
            /* a chain of IC + 1 float roundings at most, each of at most the terms' size */
            bound[(size_t)n * OC + o] = ldexp(size * (IC + 2), -24);
        }
    for (int i = 0; i < IC * OC; i++) wt[i] = NAN;
    kernels_transpose(wt, w, OC, IC);
    int transposed = 1;
    for (int o = 0; o < OC; o++)
        for (int i = 0; i < IC; i++)
            transposed &= !memcmp(&wt[(size_t)i * OC + o], &w[(size_t)o * IC + i], sizeof(float));
    check_true(transposed, "kernels_transpose (%d x %d): every entry in place", OC, IC);
    for (int i = 0; i < N * OC; i++) out1[i] = out2[i] = pooled[i] = NAN;   /* unwritten show */
    set_threads(1);
    kernels_matmul_wt(out1, x, wt, bias ? b : NULL, N, IC, OC);
    set_threads(2);
    kernels_matmul_wt(out2, x, wt, bias ? b : NULL, N, IC, OC);
    MatmulCall call = {pooled, x, wt, bias ? b : NULL, N, IC, OC, 1};
    on_pool(2, matmul_call, &call);
    int near = 1;
    for (int i = 0; i < N * OC; i++) near &= fabs((double)out1[i] - want[i]) <= bound[i];
    check_true(near, "kernels_matmul_wt (N %d, IC %d, OC %d): within float rounding of the "
               "float64 sums", N, IC, OC);
    check_true(memcmp(out1, out2, sizeof(float) * N * OC) == 0 &&
               memcmp(out1, pooled, sizeof(float) * N * OC) == 0,
               "kernels_matmul_wt (N %d, IC %d, OC %d%s): 1 and 2 threads give identical bits",
               N, IC, OC, bias ? ", bias" : "");
    /* the same chains as the prompt path of kernels_matmul, where that path runs */
    int min_rows = kernels_gemm_min_rows();
    if (min_rows > 0 && N >= min_rows && IC >= 1 && IC <= 1024) {
        kernels_matmul(ref, x, w, bias ? b : NULL, N, IC, OC);
        check_true(memcmp(out1, ref, sizeof(float) * N * OC) == 0,
                   "kernels_matmul_wt (N %d, IC %d, OC %d) equals kernels_matmul bit for bit",
                   N, IC, OC);
    }
    free(x); free(w); free(b); free(wt); free(out1); free(out2); free(ref); free(want); free(bound);
    free(pooled);
}

/* kernels_product (attention's backward): C (M, NC) (+)= A . B with A read through both
 * stride orders, rows of B and C padded, against float64; the padding untouched; with A
 * row-major and nothing padded, kernels_matmul_wt's bits. */
static void test_product(int M, int NC, int K) {
    int ldb = NC + 5, ldc = NC + 3;
    float *a = random_floats((size_t)M * K + 1, 1.0f);
    float *b = random_floats((size_t)K * ldb + 1, 1.0f);
    float *c0 = random_floats((size_t)M * ldc, 1.0f), *c = malloc(sizeof(float) * M * ldc);
    double *want = malloc(sizeof(double) * M * NC);
    for (int layout = 0; layout < 2; layout++)   /* A(k, m) = a[m][k], then a[k][m] */
        for (int acc = 0; acc < 2; acc++) {
            long a_k = layout ? M : 1, a_m = layout ? 1 : K;
            for (int m = 0; m < M; m++)
                for (int j = 0; j < NC; j++) {
                    double sum = acc ? (double)c0[(size_t)m * ldc + j] : 0.0;
                    for (int k = 0; k < K; k++)
                        sum += (double)a[k * a_k + m * a_m] * (double)b[(size_t)k * ldb + j];
                    want[(size_t)m * NC + j] = sum;
                }
            memcpy(c, c0, sizeof(float) * M * ldc);
            kernels_product(c, ldc, a, a_k, a_m, b, ldb, M, NC, K,
                            acc ? KERNELS_ACCUMULATE : KERNELS_OVERWRITE);
            float *got = malloc(sizeof(float) * M * NC);
            int padding_kept = 1;
            for (int m = 0; m < M; m++) {
                memcpy(got + (size_t)m * NC, c + (size_t)m * ldc, sizeof(float) * NC);
                padding_kept &= !memcmp(c + (size_t)m * ldc + NC, c0 + (size_t)m * ldc + NC,
                                        sizeof(float) * (ldc - NC));
            }
            char label[96];
            snprintf(label, sizeof label, "kernels_product (M %d, NC %d, K %d, A %s, %s) vs "
                     "float64", M, NC, K, layout ? "k-major" : "m-major",
                     acc ? "accumulate" : "overwrite");
            check_close_f64(label, got, want, (size_t)M * NC, MATMUL_ATOL, MATMUL_RTOL);
            check_true(padding_kept, "kernels_product (M %d, NC %d, K %d): the padding of C's "
                       "rows untouched", M, NC, K);
            free(got);
        }
    /* unpadded and row-major: the trainer's forward product, bit for bit */
    float *wt = random_floats((size_t)K * NC + 1, 1.0f), *out = malloc(sizeof(float) * M * NC);
    kernels_product(c, NC, a, 1, K, wt, NC, M, NC, K, KERNELS_OVERWRITE);
    kernels_matmul_wt(out, a, wt, NULL, M, K, NC);
    check_true(!memcmp(c, out, sizeof(float) * M * NC), "kernels_product (M %d, NC %d, K %d) "
               "equals kernels_matmul_wt bit for bit", M, NC, K);
    free(a); free(b); free(c0); free(c); free(want); free(wt); free(out);
}

/* ------------------------------------------------------------------------- */
/* Attention's vector helpers                                                  */

/* kernels_dots gives each row kernels_dot's bits (several rows share one reduction);
 * kernels_weighted_sum gives each output one FMA chain over the rows in order (a
 * multiply and an add per row in the portable build). Rows listed or consecutive. */
static void test_vector_helpers(int n_rows, int n) {
    int stride = n + 3;
    float *q = random_floats((size_t)n, 1.0f);
    float *k = random_floats((size_t)(n_rows + 2) * stride, 1.0f);
    float *weights = random_floats((size_t)n_rows, 1.0f);
    float *out = malloc(sizeof(float) * (n_rows > n ? n_rows : n));
    float *want = malloc(sizeof(float) * (n_rows > n ? n_rows : n));
    int32_t *rows = malloc(sizeof(int32_t) * n_rows);
    for (int r = 0; r < n_rows; r++) rows[r] = (int32_t)((r * 7 + 1) % (n_rows + 2));
    int portable = !strcmp(kernels_isa(), "portable");
    for (int listed = 0; listed < 2; listed++) {
        const int32_t *list = listed ? rows : NULL;
        for (int r = 0; r < n_rows; r++) {
            out[r] = NAN;
            want[r] = kernels_dot(q, k + (size_t)(list ? list[r] : r) * stride, n);
        }
        kernels_dots(out, q, k, stride, list, n_rows, n);
        check_true(memcmp(out, want, sizeof(float) * n_rows) == 0,
                   "kernels_dots (%d rows%s, n %d): each row's bits are kernels_dot's", n_rows,
                   listed ? " listed" : "", n);
        const float scale = 0.7f;
        for (int i = 0; i < n; i++) {
            float sum = 0.0f;
            for (int r = 0; r < n_rows; r++) {
                /* a rounded to float first, as the kernel stores it (this matters where
                 * floats are evaluated wider, FLT_EVAL_METHOD not 0: x87) */
                float v = k[(size_t)(list ? list[r] : r) * stride + i], a = weights[r] * scale;
                sum = portable ? sum + a * v : fmaf(a, v, sum);
            }
            want[i] = sum;
            out[i] = NAN;
        }
        kernels_weighted_sum(out, weights, scale, k, stride, list, n_rows, n);
        check_true(memcmp(out, want, sizeof(float) * n) == 0,
                   "kernels_weighted_sum (%d rows%s, n %d): one %s chain per output, in row "
                   "order", n_rows, listed ? " listed" : "", n, portable ? "multiply-add" : "FMA");
    }
    free(q); free(k); free(weights); free(out); free(want); free(rows);
}

/* The value of binary16 h by its definition, in float64: (-1)^s 2^(e - 15) (1 + m / 1024),
 * or 2^-14 m / 1024 for e = 0; NaN for e = 31 and m != 0. */
static double half_value(uint16_t h) {
    int s = h >> 15, e = h >> 10 & 31, m = h & 1023;
    double v = e == 31 ? (m ? (double)NAN : (double)INFINITY)
                       : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

/* kernels_dots_half and kernels_weighted_sum_half read rows of halves (n_rows, n) in
 * place: the bits of kernels_dots and kernels_weighted_sum over the same rows converted
 * by kernels_from_half, and within float rounding of float64 sums over the halves'
 * values. Rows of random halves with every fifth value an edge: a subnormal (2^-24,
 * 1023 x 2^-24), -0, 65504, the half under 1. Exactly n_rows x n halves allocated, so a
 * read past the last (a partial last vector) is an error under ASan and valgrind. */
static void test_half_helpers(int n_rows, int n) {
    static const uint16_t edges[] = {0x0001, 0x03ff, 0x8000, 0x7bff, 0x3bff};
    size_t count = (size_t)n_rows * (size_t)n;
    float *q = random_floats((size_t)n, 1.0f), *weights = random_floats((size_t)n_rows, 1.0f);
    float *f = random_floats(count, 2.0f);
    uint16_t *h = malloc(count * sizeof *h);
    kernels_to_half(h, f, count);
    for (size_t i = 0; i < count; i += 5) h[i] = edges[i / 5 % 5];
    kernels_from_half(f, h, count);
    int wide = n_rows > n ? n_rows : n;
    float *got = malloc(sizeof(float) * wide), *want = malloc(sizeof(float) * wide);
    double *exact = malloc(sizeof(double) * wide);
    for (int r = 0; r < n_rows; r++) {
        got[r] = NAN;
        double sum = 0.0, size = 0.0;   /* the dot, and the sum of its terms' sizes */
        for (int i = 0; i < n; i++) {
            double term = (double)q[i] * half_value(h[(size_t)r * n + i]);
            sum += term;
            size += fabs(term);
        }
        exact[r] = sum;
        want[r] = (float)ldexp(size * (n + 8), -24);   /* n + 8 float roundings at most */
    }
    kernels_dots_half(got, q, h, n_rows, n);
    int near = 1;
    for (int r = 0; r < n_rows; r++) near &= fabs((double)got[r] - exact[r]) <= (double)want[r];
    check_true(near, "kernels_dots_half (%d rows, n %d): within float rounding of float64 "
               "dots over the halves' values", n_rows, n);
    kernels_dots(want, q, f, n, NULL, n_rows, n);
    check_true(!memcmp(got, want, sizeof(float) * n_rows), "kernels_dots_half (%d rows, n %d): "
               "the bits of kernels_dots over the converted rows", n_rows, n);
    const float scale = 0.3f;
    for (int i = 0; i < n; i++) {
        double sum = 0.0, size = 0.0;
        for (int r = 0; r < n_rows; r++) {
            double term = (double)(weights[r] * scale) * half_value(h[(size_t)r * n + i]);
            sum += term;
            size += fabs(term);
        }
        exact[i] = sum;
        want[i] = (float)ldexp(size * (n_rows + 8), -24);   /* as the dots' */
        got[i] = NAN;
    }
    kernels_weighted_sum_half(got, weights, scale, h, n_rows, n);
    near = 1;
    for (int i = 0; i < n; i++) near &= fabs((double)got[i] - exact[i]) <= (double)want[i];
    check_true(near, "kernels_weighted_sum_half (%d rows, n %d): within float rounding of "
               "float64 sums over the halves' values", n_rows, n);
    kernels_weighted_sum(want, weights, scale, f, n, NULL, n_rows, n);
    check_true(!memcmp(got, want, sizeof(float) * n), "kernels_weighted_sum_half (%d rows, n "
               "%d): the bits of kernels_weighted_sum over the converted rows", n_rows, n);
    free(q); free(weights); free(f); free(h); free(got); free(want); free(exact);
}

/* The causal block forms: query t of n_q reads rows 0 .. n_first + t - 1; every dot has
 * kernels_dot's bits and every output of the sums is the chain above, row by row, with
 * a = weights * scale rounded to float. Strides wider than a row, so that a kernel reading
 * the wrong row or a row of another query fails. */
static void test_causal_helpers(int n_q, int n_first, int n) {
    int stride = n + 5, q_stride = n + 2, rows = n_first + n_q - 1, ld = rows + 3;
    float *q = random_floats((size_t)n_q * q_stride, 1.0f);
    float *k = random_floats((size_t)rows * stride, 1.0f);
    float *v = random_floats((size_t)rows * stride, 1.0f);
    float *weights = random_floats((size_t)n_q * ld, 1.0f), scales[16];
    size_t wide = (size_t)n_q * (size_t)(ld > n ? ld : n);   /* the scores, or the outputs */
    float *out = malloc(sizeof(float) * wide), *want = malloc(sizeof(float) * wide);
    int portable = !strcmp(kernels_isa(), "portable"), dots_ok = 1, sums_ok = 1;
    for (int i = 0; i < n_q * ld; i++) out[i] = want[i] = NAN;   /* past a row: untouched */
    for (int t = 0; t < n_q; t++)
        for (int r = 0; r < n_first + t; r++)
            want[t * ld + r] = kernels_dot(q + (size_t)t * q_stride, k + (size_t)r * stride, n);
    kernels_dots_causal(out, ld, q, q_stride, n_q, k, stride, n_first, n);
    for (int i = 0; i < n_q * ld; i++)
        dots_ok &= memcmp(&out[i], &want[i], sizeof(float)) == 0;
    check_true(dots_ok, "kernels_dots_causal (%d queries, %d first keys, n %d): each dot's bits "
               "are kernels_dot's, nothing written past a query's keys", n_q, n_first, n);
    for (int t = 0; t < n_q; t++) {
        scales[t] = 0.5f + 0.1f * (float)t;
        for (int i = 0; i < n; i++) {
            float sum = 0.0f;
            for (int r = 0; r < n_first + t; r++) {
                float a = weights[t * ld + r] * scales[t], x = v[(size_t)r * stride + i];
                sum = portable ? sum + a * x : fmaf(a, x, sum);
            }
            want[t * n + i] = sum;
        }
    }
    for (int i = 0; i < n_q * n; i++) out[i] = NAN;
    /* k as the rows asked for ahead: a query alone (decode) reads them as it goes */
    kernels_weighted_sums_causal(out, n, weights, ld, scales, n_q, v, stride, n_first, n, k);
    sums_ok = memcmp(out, want, sizeof(float) * (size_t)n_q * n) == 0;
    check_true(sums_ok, "kernels_weighted_sums_causal (%d queries, %d first keys, n %d): one %s "
               "chain per output, in row order", n_q, n_first, n,
               portable ? "multiply-add" : "FMA");
    free(q); free(k); free(v); free(weights); free(out); free(want);
}

/* ------------------------------------------------------------------------- */
/* 4. Norms and activations                                                    */

static void test_norms(int N, int C) {
    float *x = random_floats((size_t)N * C, 3.0f), *w = random_floats((size_t)C, 1.0f);
    float *b = random_floats((size_t)C, 1.0f), *out = malloc(sizeof(float) * N * C);
    double *want = malloc(sizeof(double) * N * C);
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C;
        double mean = 0, var = 0;
        for (int i = 0; i < C; i++) mean += (double)x_n[i];
        mean /= C;
        for (int i = 0; i < C; i++) var += ((double)x_n[i] - mean) * ((double)x_n[i] - mean);
        double rstd = 1.0 / sqrt(var / C + (double)KERNELS_NORM_EPS);
        for (int i = 0; i < C; i++)
            want[(size_t)n * C + i] = ((double)x_n[i] - mean) * rstd * (double)w[i] + (double)b[i];
    }
    kernels_layernorm(out, x, w, b, N, C);
    check_close_f64("kernels_layernorm vs float64", out, want, (size_t)N * C, NORM_ATOL, 1e-5);
    /* its statistics, written out (vector builds): eight partial sums, value i in lane
     * i % 8, added ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), the variance's
     * squares fused: the same bits in every vector build (AVX2, AVX-512, NEON) */
    if (strcmp(kernels_isa(), "portable") != 0) {
        int stats_ok = 1;
        for (int n = 0; n < N; n++) {
            const float *x_n = x + (size_t)n * C;
            float lane[8] = {0}, got_m, got_rstd;
            for (int i = 0; i < C; i++) lane[i % 8] += x_n[i];
            float m = ((lane[0] + lane[4]) + (lane[2] + lane[6])) +
                      ((lane[1] + lane[5]) + (lane[3] + lane[7]));
            m /= (float)C;
            memset(lane, 0, sizeof lane);
            for (int i = 0; i < C; i++) lane[i % 8] = fmaf(x_n[i] - m, x_n[i] - m, lane[i % 8]);
            float var = ((lane[0] + lane[4]) + (lane[2] + lane[6])) +
                        ((lane[1] + lane[5]) + (lane[3] + lane[7]));
            var /= (float)C;
            float rstd = 1.0f / sqrtf(var + KERNELS_NORM_EPS);
            kernels_norm_stats(x_n, C, &got_m, &got_rstd);
            stats_ok &= memcmp(&got_m, &m, sizeof m) == 0 &&
                        memcmp(&got_rstd, &rstd, sizeof rstd) == 0;
        }
        check_true(stats_ok, "kernels_norm_stats (N %d, C %d): the mean and 1/std of eight "
                   "partial sums, bit for bit", N, C);
    }
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C;
        double ss = 0;
        for (int i = 0; i < C; i++) ss += (double)x_n[i] * (double)x_n[i];
        double inv = 1.0 / sqrt(ss / C + (double)KERNELS_NORM_EPS);
        for (int i = 0; i < C; i++) want[(size_t)n * C + i] = (double)w[i] * ((double)x_n[i] * inv);
    }
    kernels_rmsnorm(out, x, w, N, C, KERNELS_NORM_EPS);
    check_close_f64("kernels_rmsnorm vs float64", out, want, (size_t)N * C, NORM_ATOL, 1e-5);
    /* and llama2.c's rmsnorm in float, its sum of squares in order: the same bits */
    float *want32 = malloc(sizeof(float) * N * C);
    for (int n = 0; n < N && want32; n++) {
        const float *x_n = x + (size_t)n * C;
        float ss = 0.0f;
        for (int i = 0; i < C; i++) ss += x_n[i] * x_n[i];
        float inv = 1.0f / sqrtf(ss / (float)C + KERNELS_NORM_EPS);
        for (int i = 0; i < C; i++) want32[(size_t)n * C + i] = w[i] * (inv * x_n[i]);
    }
    check_true(want32 && !memcmp(out, want32, sizeof(float) * N * C),
               "kernels_rmsnorm (N %d, C %d): llama2.c's rmsnorm in float, bit for bit", N, C);
    /* another epsilon (Qwen2's 1e-6) where it counts: rows of mean square about 3e-6 */
    for (size_t i = 0; i < (size_t)N * C; i++) x[i] *= 1e-3f;
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C;
        double ss = 0;
        for (int i = 0; i < C; i++) ss += (double)x_n[i] * (double)x_n[i];
        double inv = 1.0 / sqrt(ss / C + 1e-6);
        for (int i = 0; i < C; i++) want[(size_t)n * C + i] = (double)w[i] * ((double)x_n[i] * inv);
    }
    kernels_rmsnorm(out, x, w, N, C, 1e-6f);
    check_close_f64("kernels_rmsnorm, epsilon 1e-6, vs float64", out, want, (size_t)N * C,
                    NORM_ATOL, 1e-5);
    free(x); free(w); free(b); free(out); free(want); free(want32);
}

/* LayerNorm backward against the float64 formula (llm.c doc/layernorm), 1 and 2 threads
 * bit for bit. Gradients are sums of C terms of O(1): NORM_ATOL. */
static void test_layernorm_backward(int N, int C) {
    float *x = random_floats((size_t)N * C, 3.0f), *w = random_floats((size_t)C, 1.0f);
    float *dout = random_floats((size_t)N * C, 1.0f);
    float *dx = random_floats((size_t)N * C, 1.0f), *dw = random_floats((size_t)C, 1.0f);
    float *db = random_floats((size_t)C, 1.0f);
    float *dx2 = malloc(sizeof(float) * N * C), *dw2 = malloc(sizeof(float) * C);
    float *db2 = malloc(sizeof(float) * C), *mean = malloc(sizeof(float) * N);
    float *rstd = malloc(sizeof(float) * N), *dx_pool = malloc(sizeof(float) * N * C);
    float *dw_pool = malloc(sizeof(float) * C), *db_pool = malloc(sizeof(float) * C);
    double *want_dx = malloc(sizeof(double) * N * C), *want_dw = malloc(sizeof(double) * C);
    double *want_db = malloc(sizeof(double) * C);
    memcpy(dx2, dx, sizeof(float) * N * C);
    memcpy(dw2, dw, sizeof(float) * C);
    memcpy(db2, db, sizeof(float) * C);
    memcpy(dx_pool, dx, sizeof(float) * N * C);
    memcpy(dw_pool, dw, sizeof(float) * C);
    memcpy(db_pool, db, sizeof(float) * C);
    for (int i = 0; i < C; i++) {
        want_dw[i] = (double)dw[i];
        want_db[i] = (double)db[i];
    }
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C, *d_n = dout + (size_t)n * C;
        double m = 0, var = 0, g_mean = 0, gx_mean = 0;
        for (int i = 0; i < C; i++) m += (double)x_n[i];
        m /= C;
        for (int i = 0; i < C; i++) var += ((double)x_n[i] - m) * ((double)x_n[i] - m);
        double r = 1.0 / sqrt(var / C + (double)KERNELS_NORM_EPS);
        for (int i = 0; i < C; i++) {
            double g = (double)w[i] * (double)d_n[i], xhat = ((double)x_n[i] - m) * r;
            g_mean += g / C;
            gx_mean += g * xhat / C;
            want_dw[i] += (double)d_n[i] * xhat;
            want_db[i] += (double)d_n[i];
        }
        for (int i = 0; i < C; i++) {
            double xhat = ((double)x_n[i] - m) * r;
            want_dx[(size_t)n * C + i] = (double)dx[(size_t)n * C + i] +
                r * ((double)w[i] * (double)d_n[i] - g_mean - xhat * gx_mean);
        }
    }
    set_threads(1);
    kernels_layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, N, C);
    set_threads(2);
    kernels_layernorm_backward(dx2, dw2, db2, dout, x, w, mean, rstd, N, C);
    BackwardCall call = {dx_pool, dw_pool, db_pool, dout, x, w, mean, rstd, N, C, C};
    on_pool(2, backward_call, &call);
    check_close_f64("kernels_layernorm_backward dx vs float64", dx, want_dx, (size_t)N * C,
                    NORM_ATOL, 1e-5);
    check_close_f64("kernels_layernorm_backward dw vs float64", dw, want_dw, (size_t)C,
                    NORM_ATOL, 1e-5);
    check_close_f64("kernels_layernorm_backward db vs float64", db, want_db, (size_t)C,
                    NORM_ATOL, 1e-5);
    check_true(!memcmp(dx, dx2, sizeof(float) * N * C) && !memcmp(dw, dw2, sizeof(float) * C) &&
               !memcmp(db, db2, sizeof(float) * C) &&
               !memcmp(dx, dx_pool, sizeof(float) * N * C) &&
               !memcmp(dw, dw_pool, sizeof(float) * C) && !memcmp(db, db_pool, sizeof(float) * C),
               "kernels_layernorm_backward (N %d, C %d): 1 and 2 threads give identical bits",
               N, C);
    /* the forward normalises with the statistics the backward reports, bit for bit (so the
     * gradient is that of the function the forward computed) */
    float *out = malloc(sizeof(float) * N * C), *want_out = malloc(sizeof(float) * N * C);
    kernels_layernorm(out, x, w, db, N, C);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < C; i++) {
            size_t at = (size_t)n * C + (size_t)i;
            want_out[at] = (x[at] - mean[n]) * rstd[n] * w[i] + db[i];
        }
    check_true(!memcmp(out, want_out, sizeof(float) * N * C),
               "kernels_layernorm (N %d, C %d): normalises with the mean and rstd that "
               "kernels_layernorm_backward reports, bit for bit", N, C);
    free(out); free(want_out);
    free(x); free(w); free(dout); free(dx); free(dw); free(db); free(dx2); free(dw2); free(db2);
    free(mean); free(rstd); free(want_dx); free(want_dw); free(want_db); free(dx_pool);
    free(dw_pool); free(db_pool);
}

/* kernels_to_half of x alone (a call of one value: the reference's path) */
static uint16_t half_of(float x) {
    uint16_t h;
    kernels_to_half(&h, &x, 1);
    return h;
}

/* kernels_to_half and kernels_from_half: hand-worked values (the edges of the range,
 * subnormals and ties), every half against its definition and back, random floats
 * rounded to the nearest half (ties to the even one), and a call over many values
 * (the vector path, where the build has one) bit for bit against one value at a time. */
static void test_half(void) {
    static const struct { float x; uint16_t h; } known[] = {
        {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {-2.0f, 0xc000}, {0.1f, 0x2e66},
        {1.0f / 3.0f, 0x3555}, {65504.0f, 0x7bff}, {65519.99f, 0x7bff}, {65520.0f, 0x7c00},
        {-1e6f, 0xfc00}, {INFINITY, 0x7c00}, {-INFINITY, 0xfc00}, {NAN, 0x7e00},
        {0x1p-14f, 0x0400}, {0x1p-24f, 0x0001}, {0x1p-25f, 0x0000}, {0x1.8p-25f, 0x0001},
        {0x1.8p-24f, 0x0002}, {-0x1p-26f, 0x8000}, {0x1p-149f, 0x0000},
        {0x1.ffcp-15f, 0x0400},                        /* 1023.5 steps: a tie, to 1024 */
        {1.0f + 0x1p-11f, 0x3c00}, {1.0f + 0x1.8p-10f, 0x3c02},   /* ties to even */
        {1.0f + 0x1.001p-11f, 0x3c01}};                /* just past a tie */
    int known_ok = 1;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        uint16_t h = half_of(known[i].x);
        if (h != known[i].h) {
            known_ok = 0;
            printf("#   to_half(%a) = 0x%04x, expected 0x%04x\n", (double)known[i].x, h,
                   known[i].h);
        }
    }
    check_true(known_ok, "kernels_to_half: %zu hand-worked values", sizeof known / sizeof known[0]);

    enum { ALL = 65536 };
    uint16_t *h = malloc(ALL * sizeof *h), *back = malloc(ALL * sizeof *back);
    float *f = malloc(ALL * sizeof *f), *one = malloc(ALL * sizeof *one);
    for (int i = 0; i < ALL; i++) h[i] = (uint16_t)i;
    kernels_from_half(f, h, ALL);
    int exact = 1, same = 1, round_trip = 1;
    for (int i = 0; i < ALL; i++) {
        double want = half_value(h[i]);
        if (isnan(want) ? !isnan(f[i]) || !signbit(f[i]) != !(h[i] >> 15)
                        : (double)f[i] != want || !signbit(f[i]) != !signbit(want))
            exact = 0;
        kernels_from_half(one + i, h + i, 1);
        if (memcmp(one + i, f + i, sizeof(float)) != 0 && same) {
            uint32_t a, b;
            memcpy(&a, one + i, 4), memcpy(&b, f + i, 4);
            printf("#   0x%04x: one at a time 0x%08x, at once 0x%08x\n", h[i], a, b);
            same = 0;
        }
    }
    kernels_to_half(back, f, ALL);
    for (int i = 0; i < ALL; i++)
        if (!isnan(half_value(h[i]))) round_trip &= back[i] == h[i];
    check_true(exact && same, "kernels_from_half: all 65536 halves, their exact values (one at a "
               "time and all at once: the same bits)");
    check_true(round_trip, "kernels_to_half(kernels_from_half(h)) == h for every half not NaN");
    /* the attention kernels' own loads of halves (F16C, AVX-512, AArch64, or AVX2's integer
     * steps): all 65536 as one row of a weighted sum (out = 1 x h: each value itself) and
     * the finite ones as rows of 64 keys, the bits of the float kernels over f */
    float w1 = 1.0f, *sum = malloc(ALL * sizeof *sum), *q = random_floats(64, 1.0f);
    kernels_weighted_sum_half(sum, &w1, 1.0f, h, 1, ALL);
    kernels_weighted_sum(one, &w1, 1.0f, f, ALL, NULL, 1, ALL);
    check_true(!memcmp(sum, one, ALL * sizeof *sum), "kernels_weighted_sum_half reads all 65536 "
               "halves as kernels_from_half gives them (one row of weight 1)");
    enum { FINITE_ROWS = 0x7c00 / 64 };   /* halves 0 .. 0x7bff: +0 up to 65504 */
    kernels_dots_half(sum, q, h, FINITE_ROWS, 64);
    kernels_dots(one, q, f, 64, NULL, FINITE_ROWS, 64);
    check_true(!memcmp(sum, one, FINITE_ROWS * sizeof *sum), "kernels_dots_half reads every "
               "finite positive half as kernels_from_half gives it (%d rows of 64)", FINITE_ROWS);
    free(sum); free(q);

    /* random floats over the half's range and past it (exponents 2^-30 .. 2^17), then
     * rounded one at a time and all at once */
    enum { RANDOM = 200003 };   /* not a multiple of any vector: a tail */
    float *x = malloc(RANDOM * sizeof *x);
    uint16_t *all = malloc(RANDOM * sizeof *all);
    for (int i = 0; i < RANDOM; i++) {
        uint64_t r = hash_mix64(7u + (uint64_t)i);
        uint32_t bits = (uint32_t)(r >> 32);
        uint32_t exponent = 97u + (uint32_t)(r % 48u);   /* 2^-30 .. 2^17 */
        bits = (bits & 0x807fffffu) | exponent << 23;
        if (i % 7 == 0) bits &= ~0x1fffu;    /* exactly a half's fraction: ties and exact */
        if (i % 11 == 0) bits = (bits & ~0x1fffu) | 0x1000u;   /* a tie at bit 13 */
        if (i % 13 == 0) bits |= 0x7f800001u;   /* NaN, quiet or signalling: their payloads */
        memcpy(&x[i], &bits, sizeof bits);
    }
    kernels_to_half(all, x, RANDOM);
    int nearest = 1, bulk = 1;
    for (int i = 0; i < RANDOM; i++) {
        uint16_t r = half_of(x[i]);
        bulk &= r == all[i];
        if (isnan(x[i])) {   /* a NaN: quiet, the top of its payload */
            uint32_t bits;
            memcpy(&bits, &x[i], sizeof bits);
            nearest &= r == (uint16_t)((bits >> 16 & 0x8000u) | 0x7e00u | (bits >> 13 & 0x1ffu));
            continue;
        }
        double v = half_value(r), d = fabs((double)x[i] - v);
        for (int step = -1; step <= 1; step += 2) {   /* the neighbours of the same sign */
            int m = (r & 0x7fff) + step;
            if (m < 0 || m > 0x7c00) continue;
            double dn = fabs((double)x[i] - half_value((uint16_t)((r & 0x8000) | m)));
            if (isinf(v) && fabs((double)x[i]) >= 65520.0) continue;   /* past the largest */
            if (dn < d || (dn == d && (r & 1))) nearest = 0;
        }
    }
    check_true(nearest, "kernels_to_half: %d random floats (a NaN in 13) to the nearest half, "
               "ties to even", RANDOM);
    check_true(bulk, "kernels_to_half: %d values at once == one at a time, bit for bit", RANDOM);
    free(h), free(back), free(f), free(one), free(x), free(all);
}

/* The vector paths of GELU, its backward, SwiGLU and kernels_exp_sum give the bits of the scalar
 * formulas on kernels_expf (a vector exp that repeats exp_approx's operations), over a
 * sweep, float's edges and NaN, in an array whose length leaves a tail. */
static void test_exp_bits(void) {
    enum { N = 1003 };
    float *x = malloc(sizeof(float) * N), *out = malloc(sizeof(float) * N);
    float *want = malloc(sizeof(float) * N), *dout = random_floats(N, 1.0f);
    const float edges[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e30f, -1e30f, 88.7f, 89.5f,
                           -87.3f, -103.9f, -104.5f, -150.0f, 1e-30f, -1e-30f, 0.5f, -0.5f};
    int n_edges = (int)(sizeof edges / sizeof edges[0]);
    for (int i = 0; i < N; i++)
        x[i] = i < n_edges ? edges[i]
                           : -110.0f + 220.0f * (float)(i - n_edges) / (float)(N - n_edges);
    /* GELU's constants as simd/simd.h writes them: literals, not float variables, since where
     * floats are evaluated wider (FLT_EVAL_METHOD not 0: x87) a literal keeps its digits */
#define GELU_A 0.7978845608028654f
#define GELU_C 0.044715f
    kernels_gelu(out, x, N);   /* out of place; test_activations runs it in place */
    for (int i = 0; i < N; i++) {
        float v = x[i], u = GELU_A * (v + GELU_C * v * v * v);
        want[i] = v / (1.0f + kernels_expf(-2.0f * u));
    }
    check_true(!memcmp(out, want, sizeof(float) * N), "kernels_gelu: every element has the "
               "scalar formula's bits (sweep of [-110, 110], edges, NaN)");
    kernels_gelu_backward(out, x, dout, N);
    for (int i = 0; i < N; i++) {
        float v = x[i], u = GELU_A * (v + GELU_C * v * v * v);
        float du = GELU_A * (1.0f + 3.0f * GELU_C * v * v);
        float sg = 1.0f / (1.0f + kernels_expf(-2.0f * u));
        want[i] = (sg + 2.0f * v * du * sg * (1.0f - sg)) * dout[i];
    }
    check_true(!memcmp(out, want, sizeof(float) * N), "kernels_gelu_backward: every element "
               "has the scalar formula's bits");
#undef GELU_A
#undef GELU_C
    kernels_swiglu(out, x, dout, N);
    for (int i = 0; i < N; i++) want[i] = x[i] / (1.0f + kernels_expf(-x[i])) * dout[i];
    check_true(!memcmp(out, want, sizeof(float) * N), "kernels_swiglu: every element has "
               "the scalar formula's bits");
    /* lengths with and without a last vector short of the lanes, within one block of the
     * exp's stages and past it; the float after the row keeps its value */
    const int lengths[] = {N - 1, 1, 7, 16, 256, 263};
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        int n = lengths[l];
        memcpy(out, x, sizeof(float) * N);
        kernels_exp_sum(out, n, 1.5f);
        for (int i = 0; i < n; i++) want[i] = kernels_expf(x[i] - 1.5f);
        check_true(!memcmp(out, want, sizeof(float) * (size_t)n) &&
                       !memcmp(&out[n], &x[n], sizeof(float)),
                   "kernels_exp_sum (n %d): every element is kernels_expf's bits, none past n "
                   "written", n);
    }
    /* the sum it returns, over finite scores of a softmax's range */
    float *scores = random_floats(N, 8.0f);
    double sum64 = 0.0;
    for (int i = 0; scores && i < N; i++) sum64 += exp((double)scores[i] - 1.5);
    float sum = scores ? kernels_exp_sum(scores, N, 1.5f) : 0.0f;
    check_true(scores && fabs((double)sum - sum64) <= 1e-5 * sum64, "kernels_exp_sum: the sum "
               "it returns is the float64 sum of exp(x - 1.5) within 1e-5 (%.9g vs %.9g)",
               (double)sum, sum64);
    free(scores);
    free(x); free(out); free(want); free(dout);
}

/* kernels_dropout: hash.h's rule element by element, bit for bit (0, or x / (1 - p) as
 * x * (1 / (1 - p))), at lengths with vector tails, rates 0 to 0.9, keys whose indices wrap
 * past 2^64, out = x (in place), and nothing written past n; hash_mix64 itself against
 * splitmix64's published first output (seed 0), and the share dropped against p, so a rule
 * and kernel that were both wrong in the same way would still fail. */
static void test_dropout(void) {
    check_true(hash_mix64(0) == 0xE220A8397B1DCDAFull,
               "hash_mix64(0) is splitmix64's first output from seed 0, 0xe220a8397b1dcdaf");
    enum { N = 1003 };
    static const int sizes[] = {1, 5, 7, 8, 9, 15, 16, 17, 31, 33, 1002};
    static const float rates[] = {0.0f, 0.1f, 0.5f, 0.9f};
    static const uint64_t keys[] = {0, 12345, UINT64_MAX - 6};
    float *x = random_floats(N, 2.0f), *out = malloc(sizeof(float) * N);
    float *want = malloc(sizeof(float) * N);
    int cases = 0, failed = 0, dropped = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t r = 0; r < sizeof rates / sizeof *rates; r++)
            for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
                int n = sizes[s];
                float p = rates[r], keep = 1.0f / (1.0f - p);
                for (int i = 0; i < n; i++) {
                    int drop = hash_drops(hash_mix64(keys[k] + (uint64_t)i), hash_threshold(p));
                    want[i] = drop ? 0.0f : x[i] * keep;
                    dropped += drop;
                }
                want[n] = out[n] = -7.0f;   /* past the end: untouched */
                kernels_dropout(out, x, (size_t)n, p, keys[k]);
                int bad = memcmp(out, want, sizeof(float) * (size_t)(n + 1)) != 0;
                memcpy(out, x, sizeof(float) * (size_t)n);
                kernels_dropout(out, out, (size_t)n, p, keys[k]);
                bad |= memcmp(out, want, sizeof(float) * (size_t)n) != 0;
                failed += bad;
                cases++;
            }
    check_true(failed == 0, "kernels_dropout: hash.h's rule bit for bit, in place too, nothing "
               "past n (%d of %d cases differ)", failed, cases);
    check_true(dropped > 0, "kernels_dropout: the cases drop elements (%d)", dropped);
    /* a hash at the threshold itself is kept ("below it are dropped"): p = t / 2^24 exactly,
     * t element i's top 24 bits, for an element in a whole vector (3) and in a tail (16) */
    int ties_kept = 1;
    for (int i = 3; i <= 16; i += 13) {
        uint64_t t = hash_mix64(12345u + (uint64_t)i) >> HASH_TOP_SHIFT;
        float p = (float)t / HASH_ONE;
        float keep = 1.0f / (1.0f - p), kept = x[i] * keep;   /* rounded as floats */
        kernels_dropout(out, x, 17, p, 12345u);
        ties_kept &= hash_threshold(p) == t && out[i] == kept;
    }
    check_true(ties_kept, "kernels_dropout: an element whose hash equals the threshold is kept");
    free(x); free(out); free(want);
    /* the share dropped is p: counted in the kernel's own output over 2^17 elements,
     * within 5 standard errors (binomial), so a wrong threshold in hash.h fails too */
    enum { LONG = 1 << 17 };
    float *ones = malloc(sizeof(float) * LONG), *kept = malloc(sizeof(float) * LONG);
    if (!check_true(ones && kept, "dropout share: memory")) { free(ones); free(kept); return; }
    for (int i = 0; i < LONG; i++) ones[i] = 1.0f;
    for (size_t r = 0; r < sizeof rates / sizeof *rates; r++) {
        double p = (double)rates[r];
        kernels_dropout(kept, ones, LONG, rates[r], 777);
        int zeros = 0;
        for (int i = 0; i < LONG; i++) zeros += kept[i] == 0.0f;
        double share = (double)zeros / LONG, se = sqrt(p * (1.0 - p) / LONG);
        check_true(fabs(share - p) <= 5.0 * se + 1e-12, "kernels_dropout p %.1f: %.5f of %d "
                   "elements dropped (within 5 standard errors, %.5f)", p, share, LONG, 5 * se);
    }
    free(ones); free(kept);
}

/* kernels_max against the x > max rule written here, at lengths with vector tails, the
 * largest value at the start, the end and in between, NaN values among the others (never
 * the largest) and a NaN init (then NaN). */
static void test_max(void) {
    enum { N = 1003 };
    static const int sizes[] = {0, 1, 7, 8, 9, 16, 17, 33, 1003};
    float *x = random_floats(N, 3.0f);
    for (int i = 5; i < N; i += 37) x[i] = NAN;
    int bad = 0, cases = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int where = 0; where < 3; where++) {
            int n = sizes[s];
            float *y = malloc(sizeof(float) * (size_t)(n + 1));
            memcpy(y, x, sizeof(float) * (size_t)n);
            if (n > 0) y[where == 0 ? 0 : where == 1 ? n - 1 : n / 2] = 5.0f;
            const float inits[] = {-INFINITY, 0.5f, NAN};
            for (int k = 0; k < 3; k++) {
                float want = inits[k];
                for (int i = 0; i < n; i++) want = y[i] > want ? y[i] : want;
                float got = kernels_max(y, n, inits[k]);
                bad += !(got == want || (isnan(got) && isnan(want)));
                cases++;
            }
            free(y);
        }
    check_true(bad == 0, "kernels_max: the x > max rule's value at 9 lengths, the largest "
               "first, last or between, NaN values skipped, a NaN init kept (%d of %d differ)",
               bad, cases);
    free(x);
}

/* kernels_argmax against the scan written here (best = 0, then best = i wherever x[i] >
 * x[best]), at lengths around its blocks of 64 and a vocabulary's 32,000: the largest
 * value once (first, last, between), tied at two places and everywhere, NaN values among
 * the others and at 0 (then 0), zeros of both signs, infinities. */
static void test_argmax(void) {
    static const int sizes[] = {0, 1, 2, 15, 16, 17, 63, 64, 65, 129, 1000, 32000};
    enum { CASES = 9 };
    int bad = 0, cases = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int n = sizes[s];
        for (int c = 0; c < CASES; c++) {
            float *y = random_floats((size_t)n + 1, 3.0f);
            if (n > 0) {
                int a = (c * 7919) % n, b = (c * 104729 + n / 2) % n;   /* two places */
                switch (c) {
                case 0: y[0] = 9.0f; break;                   /* the largest first */
                case 1: y[n - 1] = 9.0f; break;               /* last */
                case 2: y[a] = 9.0f; y[b] = 9.0f; break;      /* tied at two places */
                case 3: for (int i = 0; i < n; i++) y[i] = 2.5f; break;   /* tied everywhere */
                case 4: for (int i = 0; i < n; i += 3) y[i] = NAN; break; /* NaN at 0 too */
                case 5: for (int i = 1; i < n; i += 5) y[i] = NAN; y[a] = 9.0f; break;
                case 6:                                       /* zeros of both signs */
                    for (int i = 0; i < n; i++) y[i] = i % 2 ? 0.0f : -0.0f;
                    y[0] = -1.0f;
                    break;
                case 7: y[a] = INFINITY; y[b] = INFINITY; break;
                case 8: for (int i = 0; i < n; i++) y[i] = -INFINITY; break;
                }
            }
            int want = 0;
            for (int i = 1; i < n; i++)
                if (y[i] > y[want]) want = i;
            bad += kernels_argmax(y, n) != want;
            cases++;
            free(y);
        }
    }
    check_true(bad == 0, "kernels_argmax: the scan's index at 12 lengths (0 .. 32,000), the "
               "largest first, last, tied, NaN among the others and at 0, signed zeros, "
               "infinities (%d of %d differ)", bad, cases);
}

/* kernels_all_finite: 1 for finite values (the largest float among them), 0 for one NaN or
 * infinity anywhere (first, last, between), 1 for no values. */
static void test_all_finite(void) {
    enum { N = 1001 };
    float *x = random_floats(N, 3.0f);
    x[17] = FLT_MAX;
    x[18] = -FLT_MAX;
    int ok = kernels_all_finite(x, N) == 1 && kernels_all_finite(x, 0) == 1;
    const float bad_values[] = {NAN, INFINITY, -INFINITY};
    const int places[] = {0, 500, N - 1};
    for (int v = 0; v < 3; v++)
        for (int p = 0; p < 3; p++) {
            float keep = x[places[p]];
            x[places[p]] = bad_values[v];
            ok &= kernels_all_finite(x, N) == 0;
            ok &= kernels_all_finite(x, (size_t)places[p]) == 1;   /* the values before it */
            x[places[p]] = keep;
        }
    check_true(ok, "kernels_all_finite: 1 for finite values (with +-FLT_MAX) and none, 0 for a "
               "NaN or an infinity first, last or between");
    free(x);
}

/* AdamW: every path gives the scalar formula's bits (no fused operations; vector division
 * and square root are IEEE like the scalar ones). */
static void test_adamw(int n) {
    float *param = random_floats((size_t)n, 1.0f), *grad = random_floats((size_t)n, 3.0f);
    float *m = random_floats((size_t)n, 0.1f), *v = random_floats((size_t)n, 0.1f);
    for (int i = 0; i < n; i++) v[i] = v[i] * v[i];   /* a second moment is >= 0 */
    float *p2 = malloc(sizeof(float) * n), *m2 = malloc(sizeof(float) * n);
    float *v2 = malloc(sizeof(float) * n);
    memcpy(p2, param, sizeof(float) * n);
    memcpy(m2, m, sizeof(float) * n);
    memcpy(v2, v, sizeof(float) * n);
    KernelsAdamW h = {2e-3f, 0.9f, 0.99f, 1e-8f, 0.1f, 0.5f, 1.0f - 0.9f * 0.9f,
                      1.0f - 0.99f * 0.99f};
    kernels_adamw(param, grad, m, v, (size_t)n, &h);
    for (int i = 0; i < n; i++) {
        float g = grad[i] * h.grad_scale;
        m2[i] = h.beta1 * m2[i] + (1.0f - h.beta1) * g;
        v2[i] = h.beta2 * v2[i] + (1.0f - h.beta2) * g * g;
        float m_hat = m2[i] / h.correction1, v_hat = v2[i] / h.correction2;
        p2[i] -= h.lr * (m_hat / (sqrtf(v_hat) + h.eps) + h.weight_decay * p2[i]);
    }
    check_true(!memcmp(param, p2, sizeof(float) * n) && !memcmp(m, m2, sizeof(float) * n) &&
               !memcmp(v, v2, sizeof(float) * n),
               "kernels_adamw (n %d): parameters and moments equal the scalar formula's, bitwise",
               n);
    free(param); free(grad); free(m); free(v); free(p2); free(m2); free(v2);
}

static void test_activations(void) {
    enum { N = 4001 };
    float *x = malloc(sizeof(float) * N), *gate = random_floats(N, 2.0f);
    float *out = malloc(sizeof(float) * N);
    double *want = malloc(sizeof(double) * N);
    for (int i = 0; i < N; i++) x[i] = -20.0f + 40.0f * (float)i / (float)(N - 1);
    /* GELU, tanh form */
    memcpy(out, x, sizeof(float) * N);
    kernels_gelu(out, out, N);   /* in place */
    for (int i = 0; i < N; i++) {
        double v = (double)x[i];
        want[i] = 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    }
    check_close_f64("kernels_gelu on [-20, 20] vs float64 tanh form", out, want, N,
                    ELEMENT_ATOL, ELEMENT_RTOL);
    /* GELU's derivative (times dout), in place over dout; the float64 derivative of the
     * tanh form; near 0 and far out it is 0.5, 0 and 1 */
    float *dout = random_floats(N, 1.0f), *dx = malloc(sizeof(float) * N);
    memcpy(dx, dout, sizeof(float) * N);
    kernels_gelu_backward(dx, x, dx, N);
    for (int i = 0; i < N; i++) {
        double v = (double)x[i], a = 0.7978845608028654, c = 0.044715;
        double th = tanh(a * (v + c * v * v * v));
        want[i] = (0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * a * (1.0 + 3.0 * c * v * v)) *
                  (double)dout[i];
    }
    check_close_f64("kernels_gelu_backward on [-20, 20] vs float64 tanh form", dx, want, N,
                    ELEMENT_ATOL, 1e-5);
    free(dout); free(dx);
    /* SwiGLU */
    memcpy(out, x, sizeof(float) * N);
    kernels_swiglu(out, out, gate, N);   /* in place */
    for (int i = 0; i < N; i++)
        want[i] = (double)x[i] / (1.0 + exp(-(double)x[i])) * (double)gate[i];
    check_close_f64("kernels_swiglu on [-20, 20] vs float64", out, want, N, ELEMENT_ATOL,
                    ELEMENT_RTOL);
    /* every length 1-33 from x = -1 (x[1900]): the whole vectors, then the tail in the
     * reference's loop, where the grid above ends at 20 (GELU(20) = 20 in any form) */
    int tails_bad = 0;
    for (int n = 1; n <= 33; n++) {
        const float *x0 = x + 1900, *g0 = gate + 1900;
        kernels_gelu(out, x0, (size_t)n);
        for (int i = 0; i < n; i++) {
            double v = (double)x0[i];
            double w = 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
            tails_bad += fabs((double)out[i] - w) > ELEMENT_ATOL + ELEMENT_RTOL * fabs(w);
        }
        kernels_swiglu(out, x0, g0, (size_t)n);
        for (int i = 0; i < n; i++) {
            double w = (double)x0[i] / (1.0 + exp(-(double)x0[i])) * (double)g0[i];
            tails_bad += fabs((double)out[i] - w) > ELEMENT_ATOL + ELEMENT_RTOL * fabs(w);
        }
    }
    check_true(tails_bad == 0, "kernels_gelu and kernels_swiglu of 1-33 values from x = -1 vs "
               "float64 (%d values off)", tails_bad);
    /* exp over float's whole useful range, relative error in ulps */
    double worst = 0.0;
    for (int i = 0; i < 200001; i++) {
        float v = -87.0f + 174.0f * (float)i / 200000.0f;
        double e = exp((double)v), got = (double)kernels_expf(v);
        double ulp = ldexp(1.0, ilogb(e) - 23), err = fabs(got - e) / ulp;
        if (err > worst) worst = err;
    }
    check_true(worst <= 2.0, "kernels_expf within 2 ulp of exp on [-87, 87] (worst %.2f ulp)",
               worst);
    check_true(kernels_expf(-200.0f) == 0.0f && isinf(kernels_expf(100.0f)) &&
               kernels_expf(0.0f) == 1.0f && isnan(kernels_expf(NAN)),
               "kernels_expf: exp(-200) = 0, exp(100) = inf, exp(0) = 1, exp(NaN) = NaN");
    /* compared with a float variable: a literal such as 1e30f keeps digits beyond float's
     * where floats are evaluated wider (FLT_EVAL_METHOD not 0: x87) */
    const float big = 1e30f;
    float edge[3] = {NAN, big, -big};
    kernels_gelu(edge, edge, 3);
    check_true(isnan(edge[0]) && edge[1] == big && edge[2] == 0.0f,
               "kernels_gelu: NaN stays NaN, +1e30 -> 1e30, -1e30 -> 0");
    free(x); free(gate); free(out); free(want);
}

/* ------------------------------------------------------------------------- */
/* 5. The thread pool                                                          */

enum { PROBE_JOBS = 2, PROBE_NESTED = 4 };

/* What the probe's jobs saw: each job's thread (the address of a thread-local, distinct
 * per thread), and the threads of the loop job 0 starts inside itself. */
typedef struct {
    _Atomic int arrived;                 /* jobs that have started */
    _Atomic int gave_up;                 /* a job stopped waiting for the other thread */
    const void *thread[PROBE_JOBS];
    const void *nested[PROBE_NESTED];
} PoolProbe;

static _Thread_local char thread_marker;

static void probe_nested_job(void *ctx, int j) {
    PoolProbe *p = ctx;
    p->nested[j] = &thread_marker;
}

/* Notes its thread, then waits until the other job has started too: with one job each,
 * the loop can only finish with two threads in it at once (a thread never runs two jobs
 * at a time). Job 0 then starts a loop of its own, which must stay on its thread. */
static void probe_job(void *ctx, int j) {
    PoolProbe *p = ctx;
    p->thread[j] = &thread_marker;
    atomic_fetch_add(&p->arrived, 1);
    time_t deadline = time(NULL) + POOL_WAIT_SECONDS;
    while (atomic_load(&p->arrived) < PROBE_JOBS && !atomic_load(&p->gave_up)) {
        if (time(NULL) > deadline) atomic_store(&p->gave_up, 1);
        sched_yield();
    }
    if (j == 0) kernels_parallel_for(probe_nested_job, ctx, PROBE_NESTED, 1e9);
}

static void probe_body(void *ctx) { kernels_parallel_for(probe_job, ctx, PROBE_JOBS, 1e9); }

/* kernels_run on two threads really shares a loop between two threads (OpenMP's, or POSIX
 * threads without OpenMP), so the 1 vs 2 threads checks above compare what they say. */
static void test_pool(void) {
    int threads = kernels_set_threads(2);
    if (threads < 2) {
        check_skip("the pool on 2 threads: this machine has one core");
        return;
    }
    check_true(kernels_threads() == 2, "kernels_set_threads(2): kernels_threads() is 2 (got %d)",
               kernels_threads());
    PoolProbe p = {0};
    kernels_run(probe_body, &p);
    check_true(!atomic_load(&p.gave_up) && p.thread[0] && p.thread[1] &&
               p.thread[0] != p.thread[1],
               "kernels_run on 2 threads: the loop's 2 jobs ran on 2 threads at once");
    int same = 1;
    for (int j = 0; j < PROBE_NESTED; j++) same &= p.nested[j] == p.thread[0];
    check_true(same, "kernels_run: a loop started inside a job runs on that job's thread");
    /* one thread: kernels_run just calls the body, and the loop runs on the caller */
    PoolProbe alone = {0};
    kernels_set_threads(1);
    atomic_store(&alone.arrived, PROBE_JOBS - 1);   /* the lone thread must not wait */
    kernels_run(probe_body, &alone);
    check_true(alone.thread[0] == &thread_marker && alone.thread[1] == &thread_marker,
               "kernels_run on 1 thread: every job on the calling thread");
}

/* A single row against a matrix of 288 KiB or more (read as four runs of rows, four rows a
 * tile, with and without asking for its lines ahead) gives the bits of its slices of
 * `slice` rows (small: the eight-row tile and the one-row tile), at awkward sizes: IC
 * under one chunk, primes, odd rows per job. */
static void test_decode_paths(int IC, int OC, int slice) {
    float *x = random_floats(IC, 1.0f), *w = random_floats((size_t)IC * OC, 1.0f);
    float *whole = malloc(sizeof(float) * OC), *sliced = malloc(sizeof(float) * OC);
    for (int o = 0; o < OC; o += slice) {
        int rows = OC - o < slice ? OC - o : slice;
        kernels_matmul(sliced + o, x, w + (size_t)o * IC, NULL, 1, IC, rows);
    }
    for (int prefetch = 0; prefetch < 2; prefetch++) {
        simd_set_prefetch(prefetch);
        kernels_matmul(whole, x, w, NULL, 1, IC, OC);
        check_true(memcmp(whole, sliced, sizeof(float) * OC) == 0, "decode: a %.0f KB matrix "
                   "(IC %d, OC %d) read as four runs of rows (lines asked for ahead: %d) "
                   "gives the bits of its %d-row slices read by the small tiles",
                   (double)IC * OC * 4 / 1000, IC, OC, prefetch, slice);
    }
    simd_set_prefetch(-1);
    free(x);
    free(w);
    free(whole);
    free(sliced);
}

int main(void) {
    /* what this build runs (information, not a check) */
    printf("# kernels built for %s; int8 kernel %s; broadcast tile from %d rows\n",
           kernels_isa(), quant_kernel_name(), kernels_gemm_min_rows());
    const int sizes[][3] = {{1, 1, 1}, {1, 7, 5}, {3, 8, 3}, {4, 16, 3}, {5, 17, 7},
                            {2, 31, 9}, {7, 64, 13}, {67, 33, 50}, {130, 64, 97},
                            {1, 128, 1000}, {1, 172, 64}, {64, 288, 41}, {1, 769, 37}, {8, 40, 20},
                            {9, 40, 20}, {16, 130, 23}, {17, 130, 23}, {33, 1100, 13},
                            {1, 301, 1003},    /* 1.2 MB: a single row streams row by row */
                            {5, 301, 1003}, {7, 301, 999},   /* and a few rows, in runs */
                            {12, 5, 7}, {23, 13, 29}, {41, 131, 11},   /* GEMM packing */
                            {40, 1100, 70}};   /* two blocks of columns of x, 8 x 8 stores */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        test_matmul(sizes[i][0], sizes[i][1], sizes[i][2], (int)(i % 2));
    const int decode[][3] = {{301, 1003, 40}, {7, 10531, 40}, {97, 761, 24}, {1031, 73, 8},
                             {2053, 37, 5}};
    for (size_t i = 0; i < sizeof decode / sizeof decode[0]; i++)
        test_decode_paths(decode[i][0], decode[i][1], decode[i][2]);
    const int q8[][4] = {{1, 32, 5, 32}, {1, 172, 64, 32}, {3, 64, 17, 64}, {2, 100, 9, 20},
                         {7, 288, 33, 32}, {1, 33, 3, 16}, {5, 1, 2, 32},
                         {257, 96, 40, 32}, {130, 64, 24, 64}};   /* blocks of 128 rows + rest */
    for (size_t i = 0; i < sizeof q8 / sizeof q8[0]; i++)
        test_matmul_q8(q8[i][0], q8[i][1], q8[i][2], q8[i][3]);
    const int matmuls[][2] = {{1, 64}, {3, 96}, {40, 64}, {130, 96},
                              {1, 1100},     /* decode: halves of 660 KB in four runs */
                              {3, 5000},     /* halves, few rows: 8 rows converted a pass */
                              {20, 3008},    /* the GEMM: three blocks of columns of x */
                              {33, 1100}};   /* the GEMM: a second block of 76 columns */
    for (size_t i = 0; i < sizeof matmuls / sizeof matmuls[0]; i++)
        test_matmuls(matmuls[i][0], matmuls[i][1]);
    /* awkward sizes: single rows and columns, odd widths (masked lanes), a tile of rows
     * plus leftovers, chains longer than a cache block (K > 128), the trainer's shapes */
    const int backward[][3] = {{1, 1, 1}, {5, 17, 7}, {67, 40, 33}, {3, 65, 130},
                               {70, 129, 5}, {64, 64, 64}, {130, 300, 257}, {301, 19, 70},
                               {256, 128, 384}, {90, 48, 20}, {54, 33, 13}};
    for (size_t i = 0; i < sizeof backward / sizeof backward[0]; i++) {
        test_matmul_backward(backward[i][0], backward[i][1], backward[i][2]);
        test_matmul_wt(backward[i][0], backward[i][1], backward[i][2], (int)(i % 2));
    }
    test_matmul_wt(40, 1100, 9, 1);
    /* rows of w of 512 values and more: blocks of 64 rows of x where the build has them
     * (GEMM_NV 4 with AVX-512), four and three vectors wide, tiles of 6 rows and leftovers */
    test_matmul_wt(70, 600, 29, 0);
    test_matmul_wt(40, 700, 13, 1);
    test_matmul_wt(50, 640, 45, 1);
    test_matmul_wt(33, 0, 5, 1);
    static const int product[][3] = {{1, 1, 1}, {5, 3, 7}, {7, 33, 19}, {13, 40, 130},
                                     {6, 16, 0}, {32, 32, 128}};
    for (size_t i = 0; i < sizeof product / sizeof product[0]; i++)
        test_product(product[i][0], product[i][1], product[i][2]);
    /* n: whole vectors short of a block of four (32, 48: two and three of AVX-512's 16),
     * with a masked rest (31, 33, 57), past a block (70, 88) */
    const int helpers[][2] = {{1, 1}, {7, 5}, {8, 8}, {9, 31}, {17, 32}, {24, 33}, {3, 64},
                              {40, 70}, {129, 32}, {5, 48}, {11, 57}, {6, 88},
                              {390, 381}};   /* over 288 KiB of halves: four runs, 2 rows left */
    for (size_t i = 0; i < sizeof helpers / sizeof helpers[0]; i++) {
        test_vector_helpers(helpers[i][0], helpers[i][1]);
        test_half_helpers(helpers[i][0], helpers[i][1]);
    }
    /* queries, first keys, n: one query, a pair and its odd one, blocks of four and eight
     * and what they leave (four at a time with AVX-512, then one by one), two blocks of
     * eight, shared rows short of, at and past a group of eight, heads of 3 to 128
     * (AVX-512's blocks of columns: 48 three vectors, 64 two and two, 80 three and two, 88
     * three, two and a masked rest, 112 three, two and two, 128 three, three and two) */
    const int causal[][3] = {{1, 1, 64}, {1, 9, 8}, {2, 8, 64}, {3, 7, 16}, {5, 9, 3},
                             {8, 1, 64}, {8, 16, 67}, {8, 40, 64}, {7, 33, 32}, {4, 17, 128},
                             {8, 9, 48}, {5, 3, 88}, {6, 5, 112}, {8, 3, 80}, {8, 12, 128},
                             {16, 6, 48}, {11, 13, 20}};
    for (size_t i = 0; i < sizeof causal / sizeof causal[0]; i++)
        test_causal_helpers(causal[i][0], causal[i][1], causal[i][2]);
    test_norms(3, 1);
    test_norms(5, 131);
    test_norms(8, 64);     /* one block of eight rows side by side, whole 8 x 8 blocks */
    test_norms(19, 100);   /* two blocks and three rows, a partial last block of values */
    const int norms[][2] = {{1, 1}, {3, 7}, {5, 131}, {33, 16}, {70, 128}, {2, 200}};
    for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++)
        test_layernorm_backward(norms[i][0], norms[i][1]);
    test_activations();
    test_exp_bits();
    test_half();
    test_dropout();
    test_max();
    test_argmax();
    test_all_finite();
    test_adamw(1);
    test_adamw(37);
    test_adamw(1000);
    test_pool();
    return check_summary("test_kernels");
}

/* test_kernels.c: every fast kernel of kernels.c against a naive float64 reference.
 *
 * 1. kernels_matmul at awkward sizes (1, odd, primes, not a multiple of the 8-lane chunk
 *    or of any tile), outputs prefilled with NaN; 1 and 2 threads bit for bit; a row
 *    gives the same bits in blocks of N and N-1 rows on one path; a single row (decode)
 *    matches the same row of a block (prefill) within the tolerance.
 * 2. kernels_matmul_q8 against float64 sums of the dequantized operands.
 * 3. kernels_matmul_backward against float64 sums.
 * 4. LayerNorm, RMSNorm, GELU, SwiGLU and kernels_expf against libm in float64.
 */
#include "kernels.h"

#include <math.h>          /* NAN, exp, tanh, sqrt, isnan, isinf */
#include <stdint.h>        /* uint64_t, int8_t */
#include <stdlib.h>        /* malloc, free */
#include <string.h>        /* memcmp, memcpy */

#include "quant.h"         /* quant_groups, quant_quantize, quant_dequantize */
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

static uint64_t seed = 42;

static float *random_floats(size_t n, float amplitude) {
    float *x = malloc(n * sizeof(float));
    check_fill_random(&seed, x, (long)n, amplitude);
    return x;
}

static void set_threads(int n) { kernels_set_threads(n); }

/* ------------------------------------------------------------------------- */
/* 1. fp32 matmul                                                              */

static void test_matmul(int N, int IC, int OC, int bias) {
    float *x = random_floats((size_t)N * IC, 1.0f), *w = random_floats((size_t)OC * IC, 1.0f);
    float *b = random_floats((size_t)OC, 1.0f);
    float *out1 = malloc(sizeof(float) * N * OC), *out2 = malloc(sizeof(float) * N * OC);
    float *row = malloc(sizeof(float) * OC);
    double *want = malloc(sizeof(double) * N * OC);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double sum = bias ? (double)b[o] : 0.0;
            for (int i = 0; i < IC; i++)
                sum += (double)x[(size_t)n * IC + i] * (double)w[(size_t)o * IC + i];
            want[(size_t)n * OC + o] = sum;
        }
    for (int i = 0; i < N * OC; i++) out1[i] = out2[i] = NAN;   /* unwritten entries show */
    set_threads(1);
    kernels_matmul(out1, x, w, bias ? b : NULL, N, IC, OC);
    set_threads(2);
    kernels_matmul(out2, x, w, bias ? b : NULL, N, IC, OC);
    check_close_f64("kernels_matmul vs float64", out1, want, (size_t)N * OC, MATMUL_ATOL,
                    MATMUL_RTOL);
    check_true(memcmp(out1, out2, sizeof(float) * N * OC) == 0,
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
    float *ref = malloc(sizeof(float) * N * OC);
    kernels_matmul_reference(ref, x, w, bias ? b : NULL, N, IC, OC);
    check_close_f64("kernels_matmul_reference vs float64", ref, want, (size_t)N * OC, 0.0,
                    1e-7);
    free(x); free(w); free(b); free(out1); free(out2); free(row); free(want); free(ref);
}

/* ------------------------------------------------------------------------- */
/* 2. int8 matmul                                                              */

static void test_matmul_q8(int N, int IC, int OC, int group) {
    float *x = random_floats((size_t)N * IC, 2.0f), *wf = random_floats((size_t)OC * IC, 0.5f);
    float *b = random_floats((size_t)OC, 1.0f);
    int groups = quant_groups(IC, group);
    int8_t *wq = malloc((size_t)OC * IC), *xq = malloc((size_t)N * IC);
    float *ws = malloc(sizeof(float) * OC * groups), *xs = malloc(sizeof(float) * N * groups);
    quant_quantize(wq, ws, wf, OC, IC, group);
    QuantMatrix w = {wq, ws, OC, IC, group};
    float *out = malloc(sizeof(float) * N * OC), *out2 = malloc(sizeof(float) * N * OC);
    for (int i = 0; i < N * OC; i++) out[i] = out2[i] = NAN;
    set_threads(1);
    kernels_matmul_q8(out, x, &w, b, N, xq, xs);
    set_threads(2);
    int8_t *xq2 = malloc((size_t)N * IC);
    float *xs2 = malloc(sizeof(float) * N * groups);
    kernels_matmul_q8(out2, x, &w, b, N, xq2, xs2);
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
    check_true(memcmp(out, out2, sizeof(float) * N * OC) == 0,
               "kernels_matmul_q8 (N %d, IC %d, OC %d, group %d): 1 and 2 threads identical",
               N, IC, OC, group);
    free(x); free(wf); free(b); free(wq); free(xq); free(ws); free(xs); free(out); free(out2);
    free(xq2); free(xs2); free(want);
}

/* ------------------------------------------------------------------------- */
/* 3. matmul backward                                                          */

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
    for (int o = 0; o < OC; o++) {
        double sum_b = (double)db[o];
        for (int n = 0; n < N; n++) sum_b += (double)dout[(size_t)n * OC + o];
        want_db[o] = sum_b;
        for (int i = 0; i < IC; i++) {
            double sum = (double)dw[(size_t)o * IC + i];
            for (int n = 0; n < N; n++)
                sum += (double)dout[(size_t)n * OC + o] * (double)x[(size_t)n * IC + i];
            want_dw[(size_t)o * IC + i] = sum;
        }
    }
    kernels_matmul_backward(dx, dw, db, dout, x, w, N, IC, OC);
    check_close_f64("kernels_matmul_backward dx vs float64", dx, want_dx, (size_t)N * IC,
                    MATMUL_ATOL, MATMUL_RTOL);
    check_close_f64("kernels_matmul_backward dw vs float64", dw, want_dw, (size_t)OC * IC,
                    MATMUL_ATOL, MATMUL_RTOL);
    check_close_f64("kernels_matmul_backward db vs float64", db, want_db, (size_t)OC,
                    MATMUL_ATOL, MATMUL_RTOL);
    free(dout); free(x); free(w); free(dx); free(dw); free(db); free(want_dx); free(want_dw);
    free(want_db);
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
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C;
        double ss = 0;
        for (int i = 0; i < C; i++) ss += (double)x_n[i] * (double)x_n[i];
        double inv = 1.0 / sqrt(ss / C + (double)KERNELS_NORM_EPS);
        for (int i = 0; i < C; i++) want[(size_t)n * C + i] = (double)w[i] * ((double)x_n[i] * inv);
    }
    kernels_rmsnorm(out, x, w, N, C);
    check_close_f64("kernels_rmsnorm vs float64", out, want, (size_t)N * C, NORM_ATOL, 1e-5);
    free(x); free(w); free(b); free(out); free(want);
}

static void test_activations(void) {
    enum { N = 4001 };
    float *x = malloc(sizeof(float) * N), *gate = random_floats(N, 2.0f);
    float *out = malloc(sizeof(float) * N);
    double *want = malloc(sizeof(double) * N);
    for (int i = 0; i < N; i++) x[i] = -20.0f + 40.0f * (float)i / (float)(N - 1);
    /* GELU, tanh form */
    memcpy(out, x, sizeof(float) * N);
    kernels_gelu(out, N);
    for (int i = 0; i < N; i++) {
        double v = (double)x[i];
        want[i] = 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    }
    check_close_f64("kernels_gelu on [-20, 20] vs float64 tanh form", out, want, N,
                    ELEMENT_ATOL, ELEMENT_RTOL);
    /* SwiGLU */
    memcpy(out, x, sizeof(float) * N);
    kernels_swiglu(out, gate, N);
    for (int i = 0; i < N; i++)
        want[i] = (double)x[i] / (1.0 + exp(-(double)x[i])) * (double)gate[i];
    check_close_f64("kernels_swiglu on [-20, 20] vs float64", out, want, N, ELEMENT_ATOL,
                    ELEMENT_RTOL);
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
    float edge[3] = {NAN, 1e30f, -1e30f};
    kernels_gelu(edge, 3);
    check_true(isnan(edge[0]) && edge[1] == 1e30f && edge[2] == 0.0f,
               "kernels_gelu: NaN stays NaN, +1e30 -> 1e30, -1e30 -> 0");
    free(x); free(gate); free(out); free(want);
}

int main(void) {
    check_true(1, "kernels built for %s; int8 kernel %s; broadcast tile from %d rows",
               kernels_isa(), quant_kernel_name(), kernels_gemm_min_rows());
    const int sizes[][3] = {{1, 1, 1}, {1, 7, 5}, {3, 8, 3}, {4, 16, 3}, {5, 17, 7},
                            {2, 31, 9}, {7, 64, 13}, {67, 33, 50}, {130, 64, 97},
                            {1, 128, 1000}, {1, 172, 64}, {64, 288, 41}, {1, 769, 37}, {8, 40, 20},
                            {9, 40, 20}, {16, 130, 23}, {17, 130, 23}, {33, 1100, 13}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        test_matmul(sizes[i][0], sizes[i][1], sizes[i][2], (int)(i % 2));
    const int q8[][4] = {{1, 32, 5, 32}, {1, 172, 64, 32}, {3, 64, 17, 64}, {2, 100, 9, 20},
                         {7, 288, 33, 32}, {1, 33, 3, 16}, {5, 1, 2, 32}};
    for (size_t i = 0; i < sizeof q8 / sizeof q8[0]; i++)
        test_matmul_q8(q8[i][0], q8[i][1], q8[i][2], q8[i][3]);
    test_matmul_backward(5, 17, 7);
    test_matmul_backward(67, 40, 33);
    test_norms(3, 1);
    test_norms(5, 131);
    test_activations();
    return check_summary("test_kernels");
}

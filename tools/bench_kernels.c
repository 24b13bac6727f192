/* bench_kernels.c: the matrix-product kernels alone, on one thread (run by `make bench`).
 *
 * Prints GFLOP/s of kernels_matmul for prompt-sized blocks (the register-tiled GEMMs, fp32's
 * and int8's, the figure to hold against the FMA peak that tools/probe.c measures) and GB/s
 * of weights streamed for single rows (decode, against the read bandwidth), fp32 and int8,
 * at the shapes of the benchmark's models (an int8 matrix of more than
 * CHECKPOINT_CACHED_BYTES marked cold, as the loader marks a model of that size). Best of
 * several repetitions; asserts nothing.
 * With --train: the trainer's products instead (kernels_matmul_wt forward, the whole
 * kernels_matmul_backward), at the shapes of its reference model (C 128, 16 x 128 tokens).
 */
#include <stdint.h>    /* int8_t */
#include <stdio.h>     /* printf, fprintf */
#include <stdlib.h>    /* malloc, calloc, free */
#include <string.h>    /* strcmp */
#include <time.h>      /* clock_gettime */

#include "checkpoint.h"   /* CHECKPOINT_CACHED_BYTES */
#include "kernels.h"   /* kernels_matmul, kernels_matmul_q8, kernels_set_threads, kernels_isa */
#include "quant.h"     /* quant_quantize, quant_groups, quant_kernel_name, quant_gemm_tile */

#define REPEATS 5            /* best of this many timed batches */
#define TARGET_SECONDS 0.05  /* each batch runs about this long */
#define GROUP 32             /* int8 group size, as quantize writes */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds per call of out (N, OC) = x (N, IC) . w^T, fp32 (q8 == NULL) or int8. */
static double time_matmul(float *out, const float *x, const float *w, const QuantMatrix *q8,
                          int8_t *xq, float *xs, int N, int IC, int OC) {
    long calls = 1;
    double best = 1e30;
    for (int r = 0; r < REPEATS; r++) {
        double start = now_seconds();
        for (long c = 0; c < calls; c++) {
            if (q8) kernels_matmul_q8(out, x, q8, NULL, N, xq, xs);
            else kernels_matmul(out, x, w, NULL, N, IC, OC);
        }
        double per_call = (now_seconds() - start) / (double)calls;
        if (per_call < best) best = per_call;
        if (r == 0 && per_call * (double)calls < TARGET_SECONDS)   /* size the batches */
            calls = (long)(TARGET_SECONDS / (per_call > 1e-9 ? per_call : 1e-9)) + 1;
    }
    return best;
}

/* Seconds per call of the trainer's products at (N, IC, OC): forward (x . wt) when
 * backward is 0, else the whole backward (dx, dw, db). */
static double time_train(const float *x, const float *w, const float *wt, float *out,
                         const float *dout, float *dx, float *dw, float *db, int N, int IC,
                         int OC, int backward) {
    long calls = 1;
    double best = 1e30;
    for (int r = 0; r < REPEATS; r++) {
        double start = now_seconds();
        for (long c = 0; c < calls; c++) {
            if (backward)
                kernels_matmul_backward(dx, dw, db, dout, x, w, N, IC, OC, KERNELS_OVERWRITE);
            else kernels_matmul_wt(out, x, wt, NULL, N, IC, OC);
        }
        double per_call = (now_seconds() - start) / (double)calls;
        if (per_call < best) best = per_call;
        if (r == 0 && per_call * (double)calls < TARGET_SECONDS)
            calls = (long)(TARGET_SECONDS / (per_call > 1e-9 ? per_call : 1e-9)) + 1;
    }
    return best;
}

/* The trainer's products at the shapes of its reference model (C 128, batch 16 x 128). */
static int bench_train(void) {
    const int shapes[][3] = {{2048, 128, 128}, {2048, 128, 512}, {2048, 512, 128},
                             {2048, 128, 1024}};
    printf("%5s %6s %6s %12s %12s\n", "N", "IC", "OC", "fwd GF/s", "bwd GF/s");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], IC = shapes[s][1], OC = shapes[s][2];
        size_t nx = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
        float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float));
        float *wt = malloc(nw * sizeof(float)), *out = malloc(no * sizeof(float));
        float *dout = malloc(no * sizeof(float)), *dx = calloc(nx, sizeof(float));
        float *dw = calloc(nw, sizeof(float)), *db = calloc((size_t)OC, sizeof(float));
        if (!x || !w || !wt || !out || !dout || !dx || !dw || !db) {
            fprintf(stderr, "bench_kernels: out of memory for %d x %d x %d\n", N, IC, OC);
            return 1;
        }
        for (size_t i = 0; i < nx; i++) x[i] = (float)(i % 17) * 0.05f - 0.4f;
        for (size_t i = 0; i < nw; i++) w[i] = (float)(i % 13) * 0.01f - 0.06f;
        for (size_t i = 0; i < no; i++) dout[i] = (float)(i % 11) * 1e-4f - 5e-4f;
        kernels_transpose(wt, w, OC, IC);
        double flops = 2.0 * N * IC * OC;
        double tf = time_train(x, w, wt, out, dout, dx, dw, db, N, IC, OC, 0);
        double tb = time_train(x, w, wt, out, dout, dx, dw, db, N, IC, OC, 1);
        printf("%5d %6d %6d %12.1f %12.1f\n", N, IC, OC, flops / tf * 1e-9,
               2.0 * flops / tb * 1e-9);
        free(x); free(w); free(wt); free(out); free(dout); free(dx); free(dw); free(db);
    }
    return 0;
}

int main(int argc, char **argv) {
    /* (N, IC, OC): prompt blocks of 64 rows and single rows at the models' shapes */
    const int shapes[][3] = {{64, 128, 512}, {64, 288, 768}, {64, 768, 2048}, {64, 3072, 768},
                             {1, 288, 768}, {1, 768, 2048}, {1, 768, 32000}, {1, 4096, 16384}};
    int tile_rows, tile_cols;
    quant_gemm_tile(&tile_rows, &tile_cols);
    kernels_set_threads(1);
    printf("kernels: %s, int8 %s (prefill tile %d x %d), one thread\n", kernels_isa(),
           quant_kernel_name(), tile_rows, tile_cols);
    if (argc > 1 && !strcmp(argv[1], "--train")) return bench_train();
    printf("%5s %6s %6s %10s %10s %10s %10s\n", "N", "IC", "OC", "fp32 GF/s", "fp32 GB/s",
           "int8 GF/s", "int8 GB/s");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], IC = shapes[s][1], OC = shapes[s][2];
        size_t nw = (size_t)OC * IC, groups = (size_t)quant_groups(IC, GROUP);
        float *x = malloc((size_t)N * IC * sizeof(float)), *w = malloc(nw * sizeof(float));
        float *out = malloc((size_t)N * OC * sizeof(float));
        float *scale = malloc((size_t)OC * groups * sizeof(float));
        float *xs = malloc((size_t)N * groups * sizeof(float));
        int8_t *q = malloc(nw), *xq = malloc((size_t)N * IC);
        if (!x || !w || !out || !scale || !xs || !q || !xq) {
            fprintf(stderr, "bench_kernels: out of memory for %d x %d x %d\n", N, IC, OC);
            return 1;
        }
        for (size_t i = 0; i < (size_t)N * IC; i++) x[i] = (float)(i % 17) * 0.05f - 0.4f;
        for (size_t i = 0; i < nw; i++) w[i] = (float)(i % 13) * 0.01f - 0.06f;
        quant_quantize(q, scale, w, OC, IC, GROUP);
        double bytes8 = (double)nw + (double)OC * (double)groups * sizeof(float);
        /* cold as the loader marks a model of this one matrix (checkpoint_mark_cold) */
        QuantMatrix q8 = {q, scale, OC, IC, GROUP, bytes8 > (double)CHECKPOINT_CACHED_BYTES, 0,
                          NULL};
        if (quant_pack(&q8) != 0) {   /* as the loader packs a model's (checkpoint_pack) */
            fprintf(stderr, "bench_kernels: out of memory to pack %d x %d\n", OC, IC);
            return 1;
        }
        double flops = 2.0 * N * IC * OC;
        double t32 = time_matmul(out, x, w, NULL, xq, xs, N, IC, OC);
        double t8 = time_matmul(out, x, NULL, &q8, xq, xs, N, IC, OC);
        double bytes32 = (double)nw * sizeof(float);
        printf("%5d %6d %6d %10.1f %10.1f %10.1f %10.1f\n", N, IC, OC, flops / t32 * 1e-9,
               bytes32 / t32 * 1e-9, flops / t8 * 1e-9, bytes8 / t8 * 1e-9);
        free(x); free(w); free(out); free(scale); free(xs); free(q); free(xq);
    }
    return 0;
}

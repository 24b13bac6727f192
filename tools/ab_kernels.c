/* ab_kernels.c: two builds of a prefill GEMM kernel in one program, called in turn
 * (tools/ab_kernels.sh builds it). On a shared or virtual machine the speed drifts by
 * 10-60 % between minutes, more than most changes to a kernel are worth; two builds timed
 * call by call, A then B, drift together, and the median of the pairs' ratios measures B
 * against A. Two copies of the same code read 0.99-1.01 this way on the Zen 5 VM of
 * docs/performance.md. Asserts nothing; prints one line per shape.
 *
 *   ab_kernels q8|q8p|fp32 IC OC [ROUNDS [COPIES [OUTS]]]
 *     out (256, OC) = x (256, IC) . w^T, int8 (groups of 32: A's and B's
 *     simd_q8_gemm_tiles, all columns at once; q8p: w in quant.h's packed layout and A's
 *     and B's simd_q8_matmul_packed, what a prompt runs in a build that packs, which
 *     both checkouts and this build must have) or fp32 (simd_gemm_block, in
 *     kernels_matmul's jobs of 64 rows by a quarter of the columns, on this thread);
 *     ROUNDS pairs (300); COPIES of w, used in turn (1: w stays in the caches; enough to
 *     outgrow the last level: w from memory, as in a prompt); OUTS buffers for out, used
 *     in turn (1: out stays in L1/L2; 8: out comes from L3, as in a prompt, where each
 *     layer's activations outgrow L2; this costs the packed kernel up to 30 % on Zen 4).
 * Prints each build's best and median rate (G operations/s: two a multiply-add), the
 * median of the pairs' B/A speed ratios, and whether the two outputs have the same bits.
 */
#include <stdint.h>    /* int8_t */
#include <stdio.h>     /* printf, fprintf */
#include <stdlib.h>    /* malloc, qsort, strtol */
#include <string.h>    /* strcmp, memcmp, memset */
#include <time.h>      /* clock_gettime */

#include "quant.h"     /* QuantMatrix, quant_quantize, quant_groups */

#define ROWS 256       /* rows of x: a prompt's */
#define GROUP 32       /* int8 group size, as quantize writes */
#define JOB_ROWS 64    /* parallel/products.c's BLOCK_ROWS */
#define JOB_COLS 1     /* column blocks, as products.c's gemm_col_blocks at one thread */
#define TILE_MR 6      /* the fp32 tile's rows of w: column blocks are multiples of it */

/* the two builds' kernels, renamed by tools/ab_kernels.sh */
void ab_a_q8(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
             const float *bias, int N, int o0, int o1);
void ab_b_q8(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
             const float *bias, int N, int o0, int o1);
/* weak: a checkout or a build without the packed kernel links, and q8p says so */
void ab_a_q8p(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
              const float *bias, int N, int o0, int o1) __attribute__((weak));
void ab_b_q8p(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
              const float *bias, int N, int o0, int o1) __attribute__((weak));
void ab_a_fp32(float *out, const float *x, const float *w, const float *b, int n0, int n1,
               int o0, int o1, int IC, int OC);
void ab_b_fp32(float *out, const float *x, const float *w, const float *b, int n0, int n1,
               int o0, int o1, int IC, int OC);

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The matrices: x (ROWS, IC) and COPIES copies of w (OC, IC), fp32 and int8. */
typedef struct {
    int IC, OC, copies;
    float *x, **w;
    int8_t *xq, **wq;
    float *xs, **ws;
} Operands;

/* One timed call of build b (0: A, 1: B) on copy c of w into out; q8: 1 rows, 2 packed. */
static double run(const Operands *o, int q8, int b, int c, float *out) {
    double start = now();
    if (q8 == 2) {
        QuantMatrix w = {o->wq[c], o->ws[c], o->OC, o->IC, GROUP, 0, o->OC, NULL};
        (b ? ab_b_q8p : ab_a_q8p)(out, o->xq, o->xs, &w, NULL, ROWS, 0, o->OC);
    } else if (q8) {
        QuantMatrix w = {o->wq[c], o->ws[c], o->OC, o->IC, GROUP, 0, 0, NULL};
        (b ? ab_b_q8 : ab_a_q8)(out, o->xq, o->xs, &w, NULL, ROWS, 0, o->OC);
    } else {
        int cols = (o->OC + JOB_COLS - 1) / JOB_COLS;
        cols = (cols + TILE_MR - 1) / TILE_MR * TILE_MR;
        for (int n0 = 0; n0 < ROWS; n0 += JOB_ROWS)
            for (int o0 = 0; o0 < o->OC; o0 += cols)
                (b ? ab_b_fp32 : ab_a_fp32)(out, o->x, o->w[c], NULL, n0,
                                            n0 + JOB_ROWS < ROWS ? n0 + JOB_ROWS : ROWS, o0,
                                            o0 + cols < o->OC ? o0 + cols : o->OC, o->IC,
                                            o->OC);
    }
    return now() - start;
}

int main(int argc, char **argv) {
    if (argc < 4 || (strcmp(argv[1], "q8") && strcmp(argv[1], "q8p") && strcmp(argv[1], "fp32"))) {
        fprintf(stderr, "usage: ab_kernels q8|q8p|fp32 IC OC [ROUNDS [COPIES [OUTS]]]\n");
        return 2;
    }
    int q8 = !strcmp(argv[1], "q8p") ? 2 : !strcmp(argv[1], "q8");
    if (q8 == 2 && (!ab_a_q8p || !ab_b_q8p)) {
        fprintf(stderr, "ab_kernels: q8p: A, B or this build has no packed kernel "
                "(simd_q8_matmul_packed: AVX-512 VNNI builds, checkouts from 2f91e85)\n");
        return 2;
    }
    Operands o = {(int)strtol(argv[2], NULL, 10), (int)strtol(argv[3], NULL, 10),
                  argc > 5 ? (int)strtol(argv[5], NULL, 10) : 1, NULL, NULL, NULL, NULL,
                  NULL, NULL};
    int rounds = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 300;
    int outs = argc > 6 ? (int)strtol(argv[6], NULL, 10) : 1;
    if (o.IC < 4 || o.IC % 4 || o.OC < 4 || o.OC % 4 || rounds < 1 || o.copies < 1 ||
        outs < 1 || outs > 1024) {
        fprintf(stderr, "ab_kernels: IC and OC must be multiples of 4 (at least 4), ROUNDS "
                "and COPIES at least 1, OUTS 1 to 1024 (got %s %s %d %d %d)\n", argv[2],
                argv[3], rounds, o.copies, outs);
        return 2;
    }
    size_t nx = (size_t)ROWS * o.IC, nw = (size_t)o.OC * o.IC;
    size_t groups = (size_t)quant_groups(o.IC, GROUP);
    o.x = malloc(nx * sizeof(float));
    o.xq = malloc(nx);
    o.xs = malloc(ROWS * groups * sizeof(float));
    o.w = calloc((size_t)o.copies, sizeof(float *));
    o.wq = calloc((size_t)o.copies, sizeof(int8_t *));
    o.ws = calloc((size_t)o.copies, sizeof(float *));
    size_t nout = (size_t)ROWS * o.OC;
    float *outbuf = malloc(2 * (size_t)outs * nout * sizeof(float));
    if (outbuf) memset(outbuf, 0, 2 * (size_t)outs * nout * sizeof(float));   /* pages in */
    double *t[2] = {malloc(rounds * sizeof(double)), malloc(rounds * sizeof(double))};
    double *ratio = malloc(rounds * sizeof(double));
    int ok = o.x && o.xq && o.xs && o.w && o.wq && o.ws && outbuf && t[0] && t[1] && ratio;
    uint64_t state = 88172645463325252u;   /* xorshift64: values in [-0.5, 0.5) */
    for (size_t i = 0; ok && i < nx; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        o.x[i] = (float)(state >> 40) / 16777216.0f - 0.5f;
    }
    if (ok) quant_quantize(o.xq, o.xs, o.x, ROWS, o.IC, GROUP);
    for (int c = 0; ok && c < o.copies; c++) {   /* fp32 or int8 copies, as the kernel takes */
        ok = (o.w[c] = malloc(nw * sizeof(float))) != NULL;
        for (size_t i = 0; ok && i < nw; i++) {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            o.w[c][i] = (float)(state >> 40) / 16777216.0f - 0.5f;
        }
        if (ok && q8) {
            ok = (o.wq[c] = malloc(nw)) && (o.ws[c] = malloc((size_t)o.OC * groups * sizeof(float)));
            if (ok) quant_quantize(o.wq[c], o.ws[c], o.w[c], o.OC, o.IC, GROUP);
            QuantMatrix m = {o.wq[c], o.ws[c], o.OC, o.IC, GROUP, 0, 0, NULL};
            if (ok && q8 == 2 && (quant_pack(&m) != 0 || m.packed != o.OC)) {
                fprintf(stderr, "ab_kernels: q8p: %d x %d not packed (out of memory, or this "
                        "build does not pack: OC a multiple of 16, AVX-512 VNNI)\n", o.OC, o.IC);
                return 2;
            }
            free(o.w[c]);
            o.w[c] = NULL;
        }
    }
    if (!ok) {
        fprintf(stderr, "ab_kernels: out of memory for %d x %d x %d, %d copies, %d outs\n",
                ROWS, o.IC, o.OC, o.copies, outs);
        return 1;
    }
    int same = 1;
    for (int r = 0; r < rounds; r++) {   /* A then B, each on its own copy of w */
        int c = (2 * r) % o.copies;
        float *out[2] = {outbuf + (size_t)(r % outs) * nout,      /* A's, then B's */
                         outbuf + (size_t)(outs + r % outs) * nout};
        t[0][r] = run(&o, q8, 0, c, out[0]);
        t[1][r] = run(&o, q8, 1, (c + 1) % o.copies, out[1]);
        ratio[r] = t[0][r] / t[1][r];
        if (o.copies == 1) same &= !memcmp(out[0], out[1], nout * sizeof(float));
    }
    float *out[2] = {outbuf, outbuf + (size_t)outs * nout};
    if (o.copies > 1) {   /* the same copy through both, for the bits */
        run(&o, q8, 0, 0, out[0]);
        run(&o, q8, 1, 0, out[1]);
        same = !memcmp(out[0], out[1], nout * sizeof(float));
    }
    qsort(t[0], rounds, sizeof(double), by_value);
    qsort(t[1], rounds, sizeof(double), by_value);
    qsort(ratio, rounds, sizeof(double), by_value);
    double ops = 2.0 * ROWS * o.IC * o.OC * 1e-9;
    printf("| %s | %d x %d | %.1f / %.1f | %.1f / %.1f | %.3f | %s |\n", argv[1], o.IC, o.OC,
           ops / t[0][0], ops / t[0][rounds / 2], ops / t[1][0], ops / t[1][rounds / 2],
           ratio[rounds / 2], same ? "yes" : "NO");
    return 0;
}

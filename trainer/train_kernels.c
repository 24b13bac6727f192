/* train_kernels.c: the kernels only training needs, declared in kernels.h: the backward
 * of the matrix product and of LayerNorm and GELU, the trainer's forward product on
 * transposed weights, AdamW and dropout.
 *
 * The same layout as kernels.c: the reference kernels first, in plain C; then the public
 * functions, which cut the work into jobs (kernels_parallel_for) and run the reference or,
 * through simd/simd.h, this build's vector kernel (simd/vec_kernels.c). The engine's
 * backward passes (block.c, attention.c) call these through kernels.h; inference never
 * does. Read kernels.c first.
 *
 * Legend: N rows of x, IC input width, OC output width (rows of w), n row, o output
 * column, i input index, C width; C (M, NC) and k in the products (below).
 */
#include "kernels.h"

#include <math.h>         /* sqrtf */
#include <stddef.h>       /* size_t */
#include <stdint.h>       /* uint32_t, uint64_t */

#include "hash.h"         /* hash_mix64 and the dropout rule (kernels_dropout) */
#include "simd/simd.h"    /* simd_*: this build's vector kernels, or the references below */

#define NORM_ROWS_PER_JOB 32   /* LayerNorm backward: rows of dx per job */
#define NORM_COLS_PER_JOB 64   /* LayerNorm backward: entries of dw and db per job */

/* A reference kernel that a vector build replaces entirely is still compiled (so it never
 * rots), but not called there. */
#if defined(__GNUC__)
#define MAYBE_UNUSED __attribute__((unused))
#else
#define MAYBE_UNUSED
#endif

/* ------------------------------------------------------------------------- */
/* Reference kernels: the products                                             */
/*
 * The trainer's products all have one shape, C (M, NC) (+)= sum over k of A(k, m) B[k][:],
 * with A read through two strides, A(k, m) = a[k * a_k + m * a_m]:
 *   forward  out (N, OC)  = x (N, IC) . wt (IC, OC)     m = n, k = i: A(k, m) = x[m][k]
 *   dx       dx (N, IC)  += dout (N, OC) . w (OC, IC)   m = n, k = o: A(k, m) = dout[m][k]
 *   dw       dw (OC, IC) += dout^T . x (N, IC)          m = o, k = n: A(k, m) = dout[k][m]
 * The vector tile (simd/vec_kernels.c) keeps TILE_MR rows of C by TILE_COLS of its columns
 * in registers. For each k, in increasing order, it loads row k of B once and broadcasts
 * TILE_MR values of A, one FMA per entry of the tile. Every C[m][j] is
 * therefore one lane's FMA chain over k in increasing order, starting from C's old value
 * (accumulate) or from 0 (store), whatever the tile, the cache block (the chain goes on
 * through memory) or the job: the bits depend only on the shapes and the build. A job
 * is a block of C; within it, TILE_KB values of k at a time, a strip of TILE_COLS columns
 * of B stays in L1 while every tile of rows passes over it. The reference below makes the
 * same chains with a multiply and an add per step.
 */
#define TILE_MR SIMD_TILE_MR           /* rows of C per tile (simd.h: this build's tile) */
#define TILE_COLS SIMD_TILE_COLS       /* columns of C per tile */
#define TILE_KB SIMD_TILE_KB           /* values of k per cache block */
#define PRODUCT_JOB_ROWS 64            /* at most this many rows of C per job ... */
#define PRODUCT_TARGET_JOBS 8          /* ... and fewer if that gives under 8 row blocks */
#define PRODUCT_JOB_COLS 256           /* columns of C per job (a multiple of TILE_COLS) */
#define PRODUCT_CHAIN_ROWS 256         /* dw: at most this many rows per job (its strip of
                                        * C, 256 x TILE_COLS floats: 64 KiB with AVX-512,
                                        * 16 KiB with AVX2, stays in L2 between blocks of k) */

/* One product's operands and its split into jobs (blocks of rows x blocks of columns). */
typedef struct {
    float *c;              /* C (M, NC), row stride ldc */
    const float *a;        /* A(k, m) = a[k * a_k + m * a_m] */
    const float *b;        /* B (K, NC), row stride ldb */
    const float *bias;     /* (NC,) added after the sums (store only), or NULL */
    long a_k, a_m;
    int ldc, ldb, M, NC, K;
    int store;             /* 1: C = A B (+ bias); 0: C += A B */
    int rows, cols, col_jobs;
} Product;

/* C[m0 .. m1, j0 .. j1) (rows ldc floats apart) (+)= its chains over the kb values of k
 * from a and b on (a block of k; A(k, m) = a[k * a_k + m * a_m], rows of B ldb apart),
 * starting from 0 if zero, then + bias[j] if bias (the last block): one multiply and one
 * add per step, vectorisable over j. */
static MAYBE_UNUSED void product_chains_reference(float *c, int ldc, const float *a, long a_k,
                                                  long a_m, const float *b, int ldb, int kb,
                                                  int zero, const float *bias, int m0, int m1,
                                                  int j0, int j1) {
    for (int m = m0; m < m1; m++) {
        float *c_m = c + (size_t)m * ldc;
        if (zero)
            for (int j = j0; j < j1; j++) c_m[j] = 0.0f;
        for (int k = 0; k < kb; k++) {
            float a_km = a[k * a_k + m * a_m];
            const float *b_k = b + (size_t)k * ldb;
            for (int j = j0; j < j1; j++) c_m[j] += a_km * b_k[j];
        }
        if (bias)
            for (int j = j0; j < j1; j++) c_m[j] += bias[j];
    }
}

/* db[o0 .. o1) += the column sums of dout (N, OC), rows in increasing order: one add per
 * row, a chain per column (the bias gradient). */
static MAYBE_UNUSED void column_sums_reference(float *db, const float *dout, int N, int OC,
                                               int o0, int o1) {
    for (int n = 0; n < N; n++)
        for (int o = o0; o < o1; o++) db[o] += dout[(size_t)n * OC + o];
}

/* ------------------------------------------------------------------------- */
/* Reference kernels: LayerNorm, GELU, AdamW, dropout                          */

/* One row of LayerNorm's dx: with xhat = (x - mean) rstd and g = w * dout,
 * dx_n (C,) += rstd (g - mean(g) - xhat mean(g xhat)) (llm.c doc/layernorm). */
static MAYBE_UNUSED void layernorm_dx_row_reference(float *dx_n, const float *x_n,
                                                    const float *dout_n, const float *w,
                                                    int C, float m, float r) {
    float g_mean = 0.0f, gx_mean = 0.0f;
    for (int i = 0; i < C; i++) {
        float g = w[i] * dout_n[i];
        g_mean += g;
        gx_mean += g * (x_n[i] - m) * r;
    }
    g_mean /= (float)C;
    gx_mean /= (float)C;
    for (int i = 0; i < C; i++) {
        float xhat = (x_n[i] - m) * r;
        dx_n[i] += r * (w[i] * dout_n[i] - g_mean - xhat * gx_mean);
    }
}


/* dx (n,) = GELU'(x) dout. GELU(v) = v s with s = sigmoid(2u) = 0.5 (1 + tanh u), so
 * GELU'(v) = s + v s' = s + 2 v u' s (1 - s) (as 1 - tanh^2 u = 4 s (1 - s)). Far out, s
 * is exactly 0 or 1: GELU' is 0 or 1, never NaN. */
static void gelu_backward_reference(float *dx, const float *x, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v);
        float du = GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_CUBIC * v * v);
        float s = 1.0f / (1.0f + kernels_expf(-2.0f * u));
        dx[i] = (s + 2.0f * v * du * s * (1.0f - s)) * dout[i];
    }
}

/* AdamW over n parameters, in kernels_adamw's order (kernels.h). */
static void adamw_reference(float *param, const float *grad, float *m, float *v, size_t n,
                            const KernelsAdamW *h) {
    float beta1 = h->beta1, beta2 = h->beta2, rest1 = 1.0f - beta1, rest2 = 1.0f - beta2;
    float lr = h->lr, eps = h->eps, decay = h->weight_decay, scale = h->grad_scale;
    float c1 = h->correction1, c2 = h->correction2;
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * scale;
        m[i] = beta1 * m[i] + rest1 * g;
        v[i] = beta2 * v[i] + rest2 * g * g;
        float m_hat = m[i] / c1, v_hat = v[i] / c2;
        param[i] -= lr * (m_hat / (sqrtf(v_hat) + eps) + decay * param[i]);
    }
}

/* Dropout (hash.h's rule): out[i] = 0 where element key + i is dropped, else x[i] scaled. */
static MAYBE_UNUSED void dropout_reference(float *out, const float *x, size_t n, uint64_t key,
                                           uint32_t threshold, float keep_scale) {
    for (size_t i = 0; i < n; i++)
        out[i] = hash_drops(hash_mix64(key + i), threshold) ? 0.0f : x[i] * keep_scale;
}

/* ------------------------------------------------------------------------- */
/* The products                                                                */

/* C[m0 .. m1, j0 .. j1) of one product: k in blocks of TILE_KB (the first one starts the
 * chains from 0 when storing; the last one adds the bias before its stores). */
static void product_block(const Product *p, int m0, int m1, int j0, int j1) {
    int k0 = 0;
    do {   /* at least once: K = 0 stores zeros (plus the bias) */
        int kb = p->K - k0 < TILE_KB ? p->K - k0 : TILE_KB, zero = p->store && k0 == 0;
        const float *a = p->a + k0 * p->a_k, *b = p->b + (size_t)k0 * p->ldb;
        const float *bias = k0 + kb >= p->K ? p->bias : NULL;
        simd_product_chains(p->c, p->ldc, a, p->a_k, p->a_m, b, p->ldb, kb, zero, bias, m0,
                            m1, j0, j1);
        k0 += kb;
    } while (k0 < p->K);
}

/* Job j of a product: row block j / col_jobs, column block j % col_jobs. */
static void product_job(void *ctx, int j) {
    const Product *p = ctx;
    int m0 = j / p->col_jobs * p->rows, j0 = j % p->col_jobs * p->cols;
    int m1 = m0 + p->rows < p->M ? m0 + p->rows : p->M;
    int j1 = j0 + p->cols < p->NC ? j0 + p->cols : p->NC;
    product_block(p, m0, m1, j0, j1);
}

/* Cut p into jobs, by its shape alone; returns the number of jobs. Long rows of C (the
 * forward and dx: M = N rows, short chains): rows per job a multiple of TILE_MR, about
 * PRODUCT_TARGET_JOBS row blocks for small M, at most PRODUCT_JOB_ROWS; columns in blocks
 * of PRODUCT_JOB_COLS. Long chains (dw: k runs over all N rows of x): one strip of
 * TILE_COLS columns of C per job and up to PRODUCT_CHAIN_ROWS rows, so each block of x
 * read from memory serves many tiles of rows (with small row blocks, each job would
 * stream all of x for a few rows). */
static int product_plan(Product *p, int long_chains) {
    if (long_chains) {
        p->rows = p->M > PRODUCT_CHAIN_ROWS ? PRODUCT_CHAIN_ROWS / TILE_MR * TILE_MR :
                  p->M > 0 ? p->M : 1;
        p->cols = TILE_COLS;
    } else {
        int rows = (p->M + PRODUCT_TARGET_JOBS - 1) / PRODUCT_TARGET_JOBS;
        rows = (rows + TILE_MR - 1) / TILE_MR * TILE_MR;
        p->rows = rows > PRODUCT_JOB_ROWS ? PRODUCT_JOB_ROWS / TILE_MR * TILE_MR : rows;
        p->cols = PRODUCT_JOB_COLS;
    }
    p->col_jobs = (p->NC + p->cols - 1) / p->cols;
    return (p->M + p->rows - 1) / p->rows * p->col_jobs;
}

void kernels_matmul_wt(float *out, const float *x, const float *wt, const float *b,
                       int N, int IC, int OC) {
    Product p = {.c = out, .a = x, .b = wt, .bias = b, .a_k = 1, .a_m = IC, .ldc = OC,
                 .ldb = OC, .M = N, .NC = OC, .K = IC, .store = 1};
    kernels_parallel_for(product_job, &p, product_plan(&p, 0), (double)N * IC * OC);
}

void kernels_product(float *c, int ldc, const float *a, long a_k, long a_m, const float *b,
                     int ldb, int M, int NC, int K, KernelsWrite write) {
    Product p = {.c = c, .a = a, .b = b, .a_k = a_k, .a_m = a_m, .ldc = ldc, .ldb = ldb,
                 .M = M, .NC = NC, .K = K, .store = write == KERNELS_OVERWRITE};
    if (M > 0 && NC > 0) product_block(&p, 0, M, 0, NC);
}

void kernels_transpose(float *dst, const float *src, int rows, int cols) {
    enum { BLOCK = 32 };   /* a 32 x 32 block of each side stays in L1 (simd_transpose32) */
    for (int r0 = 0; r0 < rows; r0 += BLOCK)
        for (int c0 = 0; c0 < cols; c0 += BLOCK) {
            int r1 = r0 + BLOCK < rows ? r0 + BLOCK : rows;
            int c1 = c0 + BLOCK < cols ? c0 + BLOCK : cols;
            if (r1 - r0 == BLOCK && c1 - c0 == BLOCK &&   /* whole: in registers, where the
                                                           * build has vectors */
                simd_transpose32(dst + (size_t)c0 * rows + r0, rows, src + (size_t)r0 * cols + c0,
                                 cols))
                continue;
            for (int c = c0; c < c1; c++)
                for (int r = r0; r < r1; r++) dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
        }
}

/* ------------------------------------------------------------------------- */
/* Matrix product backward                                                     */

/* The three parts of a matmul's backward as one list of jobs: dw's first (the longest:
 * each sums over all N rows), then dx's, then db's (blocks of PRODUCT_JOB_COLS entries),
 * so that threads taking jobs in turn finish together; each writes only its own outputs. */
typedef struct {
    Product dx, dw;
    float *db;
    const float *dout;
    int N, OC, dx_jobs, dw_jobs;
} MatmulBackwardJob;

static void matmul_backward_job(void *ctx, int j) {
    const MatmulBackwardJob *g = ctx;
    if (j < g->dw_jobs) {
        product_job((void *)&g->dw, j);
    } else if (j < g->dw_jobs + g->dx_jobs) {
        product_job((void *)&g->dx, j - g->dw_jobs);
    } else {   /* db[o0 .. o1) += column sums of dout */
        int o0 = (j - g->dx_jobs - g->dw_jobs) * PRODUCT_JOB_COLS;
        int o1 = o0 + PRODUCT_JOB_COLS < g->OC ? o0 + PRODUCT_JOB_COLS : g->OC;
        simd_column_sums(g->db, g->dout, g->N, g->OC, o0, o1);
    }
}

void kernels_matmul_backward(float *dx, float *dw, float *db, const float *dout,
                             const float *x, const float *w, int N, int IC, int OC,
                             KernelsWrite dx_write) {
    MatmulBackwardJob g = {
        /* dx (N, IC) (+)= dout (N, OC) . w (OC, IC): A(k = o, m = n) = dout[n][o] */
        .dx = {.c = dx, .a = dout, .b = w, .a_k = 1, .a_m = OC, .ldc = IC, .ldb = IC,
               .M = N, .NC = IC, .K = OC, .store = dx_write == KERNELS_OVERWRITE},
        /* dw (OC, IC) += dout^T . x (N, IC): A(k = n, m = o) = dout[n][o] */
        .dw = {.c = dw, .a = dout, .b = x, .a_k = OC, .a_m = 1, .ldc = IC, .ldb = IC,
               .M = OC, .NC = IC, .K = N},
        .db = db, .dout = dout, .N = N, .OC = OC};
    g.dx_jobs = dx ? product_plan(&g.dx, 0) : 0;
    g.dw_jobs = product_plan(&g.dw, 1);
    int db_jobs = db ? (OC + PRODUCT_JOB_COLS - 1) / PRODUCT_JOB_COLS : 0;
    kernels_parallel_for(matmul_backward_job, &g, g.dx_jobs + g.dw_jobs + db_jobs,
                 (double)N * IC * OC * (dx ? 2 : 1));
}

/* ------------------------------------------------------------------------- */
/* LayerNorm backward                                                          */

/* Arguments of kernels_layernorm_backward, for its jobs. */
typedef struct {
    float *dx, *dw, *db, *mean, *rstd;
    const float *dout, *x, *w;
    int N, C, row_jobs;
} LayerNormBackwardJob;

/* Rows of dx, and each row's mean and rstd for the columns. */
static void layernorm_backward_rows(void *ctx, int j) {
    const LayerNormBackwardJob *f = ctx;
    int C = f->C, n1 = (j + 1) * NORM_ROWS_PER_JOB;
    if (n1 > f->N) n1 = f->N;
    for (int n = j * NORM_ROWS_PER_JOB; n < n1; n++) {
        const float *x_n = f->x + (size_t)n * C, *dout_n = f->dout + (size_t)n * C;
        float *dx_n = f->dx + (size_t)n * C;
        float m, r;
        kernels_norm_stats(x_n, C, &m, &r);   /* kernels_layernorm's, bit for bit */
        simd_layernorm_dx_row(dx_n, x_n, dout_n, f->w, C, m, r);
        f->mean[n] = m;
        f->rstd[n] = r;
    }
}

/* Columns i0 .. of dw and db: sums over rows n in increasing order, vectorisable over i. */
static void layernorm_backward_columns(void *ctx, int j) {
    const LayerNormBackwardJob *f = ctx;
    int C = f->C, i0 = j * NORM_COLS_PER_JOB;
    int i1 = i0 + NORM_COLS_PER_JOB < C ? i0 + NORM_COLS_PER_JOB : C;
    float sum_w[NORM_COLS_PER_JOB], sum_b[NORM_COLS_PER_JOB];
    for (int i = i0; i < i1; i++) {
        sum_w[i - i0] = f->dw[i];
        sum_b[i - i0] = f->db[i];
    }
    for (int n = 0; n < f->N; n++) {
        const float *x_n = f->x + (size_t)n * C, *dout_n = f->dout + (size_t)n * C;
        float m = f->mean[n], r = f->rstd[n];
        for (int i = i0; i < i1; i++) {
            sum_w[i - i0] += dout_n[i] * ((x_n[i] - m) * r);
            sum_b[i - i0] += dout_n[i];
        }
    }
    for (int i = i0; i < i1; i++) {
        f->dw[i] = sum_w[i - i0];
        f->db[i] = sum_b[i - i0];
    }
}

void kernels_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                                const float *x, const float *w, float *mean, float *rstd,
                                int N, int C) {
    LayerNormBackwardJob f = {dx, dw, db, mean, rstd, dout, x, w, N, C,
                      (N + NORM_ROWS_PER_JOB - 1) / NORM_ROWS_PER_JOB};
    /* first every row (dx, and the statistics the columns need), then the columns */
    kernels_parallel_for(layernorm_backward_rows, &f, f.row_jobs, (double)N * C * 4);
    kernels_parallel_for(layernorm_backward_columns, &f,
                 (C + NORM_COLS_PER_JOB - 1) / NORM_COLS_PER_JOB, (double)N * C * 2);
}

/* ------------------------------------------------------------------------- */
/* GELU backward, AdamW, dropout                                               */

void kernels_gelu_backward(float *dx, const float *x, const float *dout, size_t n) {
    size_t i = simd_gelu_backward(dx, x, dout, n);   /* the whole vectors, if any */
    gelu_backward_reference(dx + i, x + i, dout + i, n - i);
}

void kernels_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                   const KernelsAdamW *h) {
    size_t i = simd_adamw(param, grad, m, v, n, h);   /* the whole vectors, if any */
    adamw_reference(param + i, grad + i, m + i, v + i, n - i, h);
}

void kernels_dropout(float *out, const float *x, size_t n, float p, uint64_t key) {
    uint32_t threshold = (uint32_t)hash_threshold(p);
    float keep_scale = 1.0f / (1.0f - p);
    simd_dropout(out, x, n, key, threshold, keep_scale);
}

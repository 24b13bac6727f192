/* products.c: how a run of matrix products splits into jobs for the threads.
 *
 * kernels_matmuls (kernels.h, whose contract this keeps) forwards here. A product of many
 * rows of x (prefill) is cut into blocks of rows by blocks of output columns; one row
 * (decode) into blocks of the output columns of its matrices stacked, one a thread. The
 * cut depends on the shapes and the thread count alone, and each output is written by one
 * job, so which thread runs a job never changes a bit. Each job calls this build's tile
 * (simd/simd.h) or quant.c's int8 product over its block.
 *
 * Legend: N rows of x, IC input width, OC output width (rows of w), n row, o output
 * column.
 */
#include "parallel/products.h"

#include <stddef.h>       /* size_t */
#include <stdint.h>       /* int8_t, uint16_t */

#include "parallel/pool.h"  /* pool_parallel_for, pool_threads */
#include "quant.h"        /* quant_quantize, quant_matmul_block, quant_groups */
#include "simd/simd.h"    /* simd_*: this build's tiles; LANES, SIMD_JOB_ROWS */

#define BLOCK_ROWS SIMD_JOB_ROWS   /* rows of x per job of a product of many rows */
#define Q8_JOB_ROWS_MIN 32  /* fewest rows of x per int8 job of many rows: a block of the
                             * x86 tile (32 rows with AVX-512) */
#define Q8_JOB_ROWS_STEP 16 /* rows of x per int8 job: a multiple of this (a tile register's) */
#define MIN_BLOCK_COLS 16  /* fewest output columns per job */
#define QUANTIZE_ROWS_PER_JOB 16   /* int8 prefill: rows of x quantized per job */
#define JOBS_PER_THREAD 4  /* column blocks per matmul and thread: few claims of the shared
                            * ticket, yet enough blocks for threads to balance dynamically */
#define GEMM_JOBS_PER_THREAD 2   /* fp32 GEMM jobs per product and thread, at least */

/* Output columns per job: about `blocks` blocks, a multiple of 8, at least MIN_BLOCK_COLS. */
static int block_cols(int OC, int blocks) {
    int cols = (OC + blocks - 1) / blocks;
    cols = (cols + LANES - 1) / LANES * LANES;
    return cols < MIN_BLOCK_COLS ? MIN_BLOCK_COLS : cols;
}

/* Column blocks per block of rows of an fp32 GEMM product of N rows: one with one thread,
 * else as few as give each thread GEMM_JOBS_PER_THREAD jobs. Each job transposes its rows
 * of x for the tile (simd/vec_kernels.c), so each block more transposes them again. */
static int gemm_col_blocks(int N) {
    int threads = kernels_threads(), row_blocks = (N + BLOCK_ROWS - 1) / BLOCK_ROWS;
    if (threads == 1) return 1;
    return (GEMM_JOBS_PER_THREAD * threads + row_blocks - 1) / row_blocks;
}

/* Output columns per job of a product of one row of x (decode): one block a thread, no
 * more. Each job reads its rows of w as four sequential runs (simd/vec_kernels.c,
 * simd/quant_x86.c), so more blocks make the runs shorter and each product's start (the
 * streams' ramp) a larger share (docs/performance.md, End to end). */
static int decode_cols(int OC) { return block_cols(OC, kernels_threads()); }

/* One product's plan, for its jobs: out (N, OC) = x . w^T + b, w fp32 (w), halves (w16) or
 * int8 (q8, of the x that xq, xs hold), in jobs of `rows` rows of x by `cols` output
 * columns. */
typedef struct {
    float *out;
    const float *x, *w, *b;
    const uint16_t *w16;  /* halves, in w's place */
    const QuantMatrix *q8;
    const int8_t *xq;
    const float *xs;
    int N, IC, OC, rows, cols, col_blocks;
    int gemm;             /* fp32: 1 for the broadcast (GEMM) tile, for products of many rows */
} MatmulJob;

static void matmul_range(const MatmulJob *m, int n0, int n1, int o0, int o1);

/* matmul_range of a matrix of halves where the GEMM (simd_gemm_block_half) does not take
 * it: one row of x in a vector build, the dots over the halves as they load
 * (simd_matmul_row_half); else the fp32 path over KERNELS_HALF_MAX_IC floats of rows at a
 * time, converted on the stack (exact: every half is a float). Either way the bits of the
 * product over the widened matrix. */
static void matmul_range_half(const MatmulJob *m, int n0, int n1, int o0, int o1) {
    size_t IC = (size_t)m->IC, OC = (size_t)m->OC;
    if (SIMD_VECTOR && n1 - n0 == 1) {
        simd_matmul_row_half(m->out + (size_t)n0 * OC, m->x + (size_t)n0 * IC, m->w16, m->b,
                             o0, o1, m->IC, m->OC);
        return;
    }
    float w_rows[KERNELS_HALF_MAX_IC];   /* 256 KiB */
    int step = KERNELS_HALF_MAX_IC / m->IC;   /* rows of w a pass (>= 1: IC <= the most):
                                               * whole tiles of 8 where there is room */
    if (step >= 8) step = step / 8 * 8;
    for (int o = o0; o < o1; o += step) {
        int end = o + step < o1 ? o + step : o1;
        kernels_from_half(w_rows, m->w16 + (size_t)o * IC, (size_t)(end - o) * IC);
        /* the same product of the converted rows: output columns o .. end-1 */
        MatmulJob part = *m;
        part.out = m->out + o;
        part.w = w_rows;
        part.w16 = NULL;
        part.b = m->b ? m->b + o : NULL;
        matmul_range(&part, n0, n1, 0, end - o);
    }
}

/* Rows n0 .. n1-1 of x times output columns o0 .. o1-1 of m's product. */
static void matmul_range(const MatmulJob *m, int n0, int n1, int o0, int o1) {
    if (m->w16 && m->gemm) {
        simd_gemm_block_half(m->out, m->x, m->w16, m->b, n0, n1, o0, o1, m->IC, m->OC);
    } else if (m->w16) {
        matmul_range_half(m, n0, n1, o0, o1);
    } else if (m->q8) {
        size_t groups = (size_t)quant_groups(m->IC, m->q8->group);
        quant_matmul_block(m->out + (size_t)n0 * (size_t)m->OC,
                           m->xq + (size_t)n0 * (size_t)m->IC, m->xs + (size_t)n0 * groups,
                           m->q8, m->b, n1 - n0, o0, o1);
    } else if (m->gemm) {
        simd_gemm_block(m->out, m->x, m->w, m->b, n0, n1, o0, o1, m->IC, m->OC);
    } else {
        simd_matmul_block(m->out, m->x, m->w, m->b, n0, n1, o0, o1, m->IC, m->OC);
    }
}

/* Job j of a product: a block of rows of x times a block of output columns. */
static void matmul_job(const MatmulJob *m, int j) {
    int n0 = j / m->col_blocks * m->rows, o0 = j % m->col_blocks * m->cols;
    int n1 = n0 + m->rows < m->N ? n0 + m->rows : m->N;
    int o1 = o0 + m->cols < m->OC ? o0 + m->cols : m->OC;
    matmul_range(m, n0, n1, o0, o1);
}

/* The jobs of an int8 product of N rows of x: *rows rows (the last job fewer) by *cols
 * output columns. Each job packs its rows of x for the row tile, and forms each column
 * tile's weights' sums (or, for packed rows, its rows' sums of x), once, so the jobs are
 * as few as give every thread an equal share: R
 * blocks of rows by threads / R blocks of columns, R the most that divides the threads
 * and leaves each block whole tiles of rows (a multiple of 16, at least 32) with the last
 * block short by at most a quarter; else all the rows in one block (more jobs would pack
 * each row again). */
static void q8_jobs(int N, int OC, int *rows, int *cols) {
    int threads = kernels_threads(), row_blocks = 1;
    *rows = N;
    for (int R = threads; R > 1; R--) {
        int per = (N + R - 1) / R;
        per = (per + Q8_JOB_ROWS_STEP - 1) / Q8_JOB_ROWS_STEP * Q8_JOB_ROWS_STEP;
        if (threads % R == 0 && per >= Q8_JOB_ROWS_MIN && 4 * (R * per - N) <= per) {
            row_blocks = R;
            *rows = per;
            break;
        }
    }
    *cols = block_cols(OC, threads / row_blocks);
}

/* Plans product p of x (N, IC) in m (int8: of the x that xq, xs hold in its groups), for
 * N > 1: jobs of m->rows rows (a function of N and the threads alone, so the same for every
 * product of a run) by m->cols columns. Each output is written by one job, so threads
 * never share an output, and which job writes it never changes its bits. Jobs in blocks of
 * rows, so that loops over the same rows one after the other (the quantization, this
 * product, the norms and residuals after it) give each thread mostly the rows it wrote
 * (pool_claim). */
static void matmul_plan(MatmulJob *m, const KernelsProduct *p, const float *x, int N, int IC,
                        const int8_t *xq, const float *xs) {
    *m = (MatmulJob){.out = p->out, .x = x, .w = p->w->f32, .w16 = p->w->f16, .b = p->b,
                     .N = N, .IC = IC, .OC = p->OC, .rows = BLOCK_ROWS};
    if (p->w->q8.q) {
        m->q8 = &p->w->q8;
        m->xq = xq;
        m->xs = xs;
        q8_jobs(N, p->OC, &m->rows, &m->cols);
    } else {
        int gemm_cols = simd_gemm_cols(N, p->OC, gemm_col_blocks(N));   /* many rows; else 0 */
        m->gemm = gemm_cols > 0;
        m->cols = m->gemm ? gemm_cols : block_cols(p->OC, JOBS_PER_THREAD * kernels_threads());
    }
    m->col_blocks = (p->OC + m->cols - 1) / m->cols;
}

/* One quantization of x, for its jobs of QUANTIZE_ROWS_PER_JOB rows. */
typedef struct {
    int8_t *xq;
    float *xs;
    const float *x;
    int N, IC, group;
} QuantizeJob;

static void quantize_job(void *ctx, int j) {
    const QuantizeJob *q = ctx;
    size_t n0, n1, groups = (size_t)quant_groups(q->IC, q->group);
    kernels_job_range(&n0, &n1, j, (size_t)q->N, QUANTIZE_ROWS_PER_JOB);
    quant_quantize(q->xq + n0 * (size_t)q->IC, q->xs + n0 * groups, q->x + n0 * (size_t)q->IC,
                   (int)(n1 - n0), q->IC, q->group);
}

/* A matrix's format: products of one format (and int8 groups) share a parallel loop. */
enum { FORMAT_F32, FORMAT_F16, FORMAT_Q8 };
static int matrix_format(const Matrix *w) {
    return w->f16 ? FORMAT_F16 : w->q8.q ? FORMAT_Q8 : FORMAT_F32;
}

/* A run of products of one x in one format, as one parallel loop. Many rows: the jobs
 * matmul_plan cuts, by blocks of rows, and within a block of rows product by product
 * (product i's blocks of columns are first_block[i] .. first_block[i + 1] - 1 of a block
 * of rows), so that the threads keep taking the rows they took for the products before
 * (pool_claim). One row (decode): the matrices as one of all their rows stacked, cut into
 * decode_cols's blocks of stack_cut rows, one a thread, so that each thread reads one run
 * of rows. */
typedef struct {
    MatmulJob m[KERNELS_MAX_PRODUCTS];
    int first_block[KERNELS_MAX_PRODUCTS + 1];
    int n;           /* products */
    int stack_cut;   /* decode: rows of the stack per job; else 0 */
} MatmulsJob;

static void matmuls_job(void *ctx, int j) {
    const MatmulsJob *g = ctx;
    if (g->stack_cut) {   /* decode: rows o0 .. o1-1 of the stack */
        int o0 = j * g->stack_cut, o1 = o0 + g->stack_cut, first_row = 0;
        for (int i = 0; i < g->n; first_row += g->m[i].OC, i++) {   /* product i's rows */
            int lo = o0 > first_row ? o0 - first_row : 0;
            int hi = o1 - first_row < g->m[i].OC ? o1 - first_row : g->m[i].OC;
            if (lo < hi) matmul_range(&g->m[i], 0, 1, lo, hi);
        }
        return;
    }
    int blocks = g->first_block[g->n], row_block = j / blocks, col_block = j % blocks, i = 0;
    while (col_block >= g->first_block[i + 1]) i++;
    matmul_job(&g->m[i], row_block * g->m[i].col_blocks + col_block - g->first_block[i]);
}

void products_run(const KernelsProduct *p, int n, const float *x, int N, int IC, int8_t *xq,
                  float *xs) {
    for (int i = 0; i < n;) {
        /* the run from p[i]: the products after it in its format (int8: in its groups,
         * x quantized once for them all) */
        const Matrix *w0 = p[i].w;
        int format = matrix_format(w0);
        if (format == FORMAT_Q8) {   /* x in the groups: xq (N, IC), xs (N, groups) */
            QuantizeJob q = {xq, xs, x, N, IC, w0->q8.group};
            pool_parallel_for(quantize_job, &q, kernels_jobs((size_t)N, QUANTIZE_ROWS_PER_JOB),
                              (double)N * IC * 4);
        }
        MatmulsJob g = {.first_block = {0}};
        double work = 0;   /* multiply-adds, by the bytes of w: a half's a half, an int8's a
                            * quarter */
        int stack_rows = 0;
        for (; i < n && g.n < KERNELS_MAX_PRODUCTS; i++, g.n++) {
            const Matrix *w = p[i].w;
            if (matrix_format(w) != format || (format == FORMAT_Q8 && w->q8.group != w0->q8.group))
                break;   /* another format: the next run */
            matmul_plan(&g.m[g.n], &p[i], x, N, IC, xq, xs);
            g.first_block[g.n + 1] = g.first_block[g.n] + g.m[g.n].col_blocks;
            work += (double)N * IC * p[i].OC / (format == FORMAT_F32   ? 1
                                                : format == FORMAT_F16 ? 2
                                                                       : 4);
            stack_rows += p[i].OC;
        }
        int jobs = (N + g.m[0].rows - 1) / g.m[0].rows * g.first_block[g.n];
        if (N == 1) {
            g.stack_cut = decode_cols(stack_rows);
            jobs = (stack_rows + g.stack_cut - 1) / g.stack_cut;
        }
        pool_parallel_for(matmuls_job, &g, jobs, work);
    }
}

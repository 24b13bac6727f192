/* kernels.c: matrix products, norms and activations, fast and reference.
 *
 * The forward pass spends almost all its time in kernels_matmul: out = x w^T, one dot
 * product per output. Decoding one token (N = 1) streams every weight once, so it runs at
 * memory speed if each weight is loaded once and enough independent sums are in flight;
 * prefill (N > 1) reuses each loaded weight row for several rows of x (a register tile),
 * so it runs at arithmetic speed. Both are the same function: a dot product kept as eight
 * lanes of fused multiply-adds, reduced in one fixed order, so every tile shape gives the
 * same bits. Threads split the output columns; nothing here reduces across threads.
 * This file does not know about models: read model.c for how the kernels are used.
 *
 * Legend: N rows of x, IC input width, OC output width (rows of w), n row, o output
 * column, i input index, C width.
 */
#include "kernels.h"

#include <math.h>         /* sqrtf, fmaf, isfinite */
#include <sched.h>        /* sched_yield */
#include <semaphore.h>    /* sem_t: idle workers sleep on one */
#include <stdatomic.h>    /* the pool's ticket and counters */
#include <string.h>       /* memcpy */
#if KERNELS_SIMD
#include <immintrin.h>    /* AVX2 and FMA intrinsics */
#endif
#ifdef _OPENMP
#include <omp.h>          /* omp_set_num_threads, omp_get_max_threads */
#endif

#include "quant.h"        /* quant_quantize, quant_matmul_block, quant_groups */

#define LANES 8            /* floats per AVX2 register; the portable path keeps 8 sums too */
#define BLOCK_ROWS 64      /* rows of x per job: 64 x IC floats stay in L2 */
#define MIN_BLOCK_COLS 16  /* fewest output columns per job */
#define TARGET_JOBS 8      /* column blocks per matmul: measured best of 8, 16, 32 (fewer claims of
                            * the shared ticket; enough for dynamic balance) */
#define DX_ROWS_PER_JOB 64     /* backward dx: rows of dout per job */
#define DW_COLS_PER_JOB 16     /* backward dw: rows of dw per job */
#define DW_ROWS_PER_BLOCK 64   /* backward dw: rows of x (and dout) kept in L1 at once */
#define GELU_SQRT_2_OVER_PI 0.7978845608028654f  /* sqrt(2 / pi) in GELU's tanh form */
#define GELU_CUBIC 0.044715f                      /* coefficient of x^3 in GELU's tanh form */
#define EXP_LOG2E 1.44269504088896341f   /* 1 / ln 2 */
#define EXP_LN2_HI 0.693359375f          /* ln 2 split in two: the high part has few bits, */
#define EXP_LN2_LO -2.12194440e-4f       /* so k * hi is exact for |k| < 2^9 (Cody-Waite) */
#define EXP_ROUND 12582912.0f            /* 1.5 * 2^23: adding it rounds to an integer */
#define EXP_X_MIN -104.0f                /* exp(-104) rounds to 0 in float */
#define EXP_X_MAX 89.0f                  /* exp(89) overflows to +inf in float */

/* ------------------------------------------------------------------------- */
/* Threads: a pool that never waits for a thread that is not working             */
/*
 * A parallel loop is a number of jobs, each writing its own outputs. Inside kernels_run
 * the loops go to a pool: the calling (main) thread publishes the loop in one atomic
 * ticket, then main and the workers claim jobs from it one at a time, and main returns
 * once every claimed job is finished. Main never waits for a worker that has claimed
 * nothing: if another process holds a worker's core, main simply does the jobs itself
 * (a barrier, by contrast, waits for every thread to arrive). Workers spin between
 * loops, and sleep on a semaphore after a while without work. Which thread does a job
 * never changes its result. Outside kernels_run (the trainer, tests) each loop is an
 * ordinary OpenMP parallel for. The pool is the
 * one piece of mutable global state in the project: like OpenMP's own runtime, there is
 * one per process.
 */

#define POOL_NEXT_BITS 16                 /* ticket: generation | job count | next job */
#define POOL_MAX_JOBS ((1 << POOL_NEXT_BITS) - 1)
#define POOL_SPINS_BEFORE_YIELD 1000      /* polls (~30 us) before a waiting thread starts
                                           * yielding its core at every poll */

typedef void (*PoolJob)(void *ctx, int job);

typedef struct {
    _Atomic uint64_t ticket;   /* generation (32 bits) | jobs (16) | next job to claim (16) */
    _Atomic int done;          /* jobs of the current generation finished */
    _Atomic int stop;          /* set by main when kernels_run's body returns */
    _Atomic int sleeping;      /* workers asleep on `wake`, or about to be */
    sem_t wake;                /* main posts it to wake sleeping workers */
    PoolJob job;               /* the current loop (written before its ticket) */
    void *ctx;
    int active;                /* 1 while kernels_run's body runs (main reads it only) */
} Pool;

#ifdef _OPENMP
static Pool pool;

static void cpu_relax(void) {
#if KERNELS_SIMD
    _mm_pause();
#endif
}

/* Claims and runs jobs of the ticket's loop until none is left; returns jobs run. */
static int pool_claim(void) {
    int ran = 0;
    for (;;) {
        uint64_t t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
        unsigned jobs = (unsigned)(t >> POOL_NEXT_BITS) & POOL_MAX_JOBS;
        unsigned next = (unsigned)t & POOL_MAX_JOBS;
        if (next >= jobs) return ran;
        if (!atomic_compare_exchange_weak_explicit(&pool.ticket, &t, t + 1,
                                                   memory_order_acq_rel, memory_order_relaxed))
            continue;
        /* job `next` is ours; main is waiting for it, so job and ctx are this loop's */
        pool.job(pool.ctx, (int)next);
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
        ran++;
    }
}

/* A worker: claim jobs whenever a loop is published, until main says stop. After a
 * while with nothing to do it sleeps until main publishes again. A sleeping thread is
 * not runnable, so on a machine where another process keeps a core busy it does not
 * push main off its core; and when woken, the scheduler runs it at once, taking the
 * time from the other process rather than from main. */
static void pool_worker(void) {
    long idle = 0;
    while (!atomic_load_explicit(&pool.stop, memory_order_acquire)) {
        if (pool_claim() > 0) {
            idle = 0;
        } else if (++idle > POOL_SPINS_BEFORE_YIELD) {
            atomic_fetch_add_explicit(&pool.sleeping, 1, memory_order_acq_rel);
            while (sem_wait(&pool.wake) != 0) {}   /* EINTR: wait again */
            idle = 0;
        } else {
            cpu_relax();
        }
    }
}

/* Wakes every worker that sleeps (or is about to). */
static void pool_wake(void) {
    for (int n = atomic_exchange_explicit(&pool.sleeping, 0, memory_order_acq_rel); n > 0; n--)
        sem_post(&pool.wake);
}

#endif /* _OPENMP */

/* Runs job(ctx, j) for j = 0 .. n_jobs-1, each writing only its own outputs; `work`
 * (multiply-adds, or the like) decides whether sharing pays: on the pool from
 * KERNELS_POOL_MIN_WORK, in an OpenMP region from KERNELS_PARALLEL_MIN_MACS, else here. */
static void parallel_for(PoolJob job, void *ctx, int n_jobs, long work) {
    int parallel = work >= KERNELS_PARALLEL_MIN_MACS;
#ifdef _OPENMP
    if (pool.active && work >= KERNELS_POOL_MIN_WORK && n_jobs > 1 && n_jobs <= POOL_MAX_JOBS) {
        static uint64_t generation = 0;   /* main thread only */
        pool.job = job;
        pool.ctx = ctx;
        atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
        generation++;
        uint64_t ticket = (generation << (2 * POOL_NEXT_BITS)) |
                          ((uint64_t)n_jobs << POOL_NEXT_BITS);
        atomic_store_explicit(&pool.ticket, ticket, memory_order_release);
        pool_wake();
        pool_claim();
        /* wait for the jobs a worker still holds; if that takes a while, the worker may
         * be waiting for this very core (three threads on two cores): yield it */
        for (long spins = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < n_jobs;
             spins++) {
            if (spins > POOL_SPINS_BEFORE_YIELD) sched_yield();
            else cpu_relax();
        }
        return;
    }
    if (pool.active) parallel = 0;   /* inside the body but too small: stay on main */
#endif
    if (!parallel || n_jobs == 1) {   /* no threads started for this */
        for (int j = 0; j < n_jobs; j++) job(ctx, j);
        return;
    }
    #pragma omp parallel for schedule(dynamic, 1)
    for (int j = 0; j < n_jobs; j++) job(ctx, j);
}

void kernels_parallel_for(void (*job)(void *ctx, int j), void *ctx, int n_jobs, long work) {
    parallel_for(job, ctx, n_jobs, work);
}

int kernels_set_threads(int n) {
#ifdef _OPENMP
    int max = omp_get_num_procs();
    if (n < 1) n = 1;
    if (n > max) n = max;
    omp_set_num_threads(n);
    return n;
#else
    (void)n;
    return 1;
#endif
}

int kernels_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

void kernels_run(void (*body)(void *ctx), void *ctx) {
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    if (threads > 1 && !pool.active && sem_init(&pool.wake, 0, 0) == 0) {
        atomic_store(&pool.stop, 0);
        atomic_store(&pool.ticket, 0);
        atomic_store(&pool.sleeping, 0);
        /* thread 0 runs the body with the pool active; the others are its workers */
        #pragma omp parallel num_threads(threads)
        {
            if (omp_get_thread_num() == 0) {
                pool.active = 1;
                body(ctx);
                pool.active = 0;
                atomic_store_explicit(&pool.stop, 1, memory_order_release);
                /* a worker may go to sleep after seeing no stop: one post each covers it */
                for (int n = 1; n < threads; n++) sem_post(&pool.wake);
            } else {
                pool_worker();
            }
        }
        sem_destroy(&pool.wake);
        return;
    }
#endif
    body(ctx);
}

/* ------------------------------------------------------------------------- */
/* Matrix product: the dot-product tile                                        */

/* The tile below must be inlined into each caller, where R and C are constants: only then
 * do its loops unroll and its sums stay in registers. */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* The GEMM tile's vector: 16 floats with AVX-512, 8 with AVX2. */
#if KERNELS_SIMD && defined(__AVX512F__)
#define VLANES 16
typedef __m512 Vec;
#define vec_zero() _mm512_setzero_ps()
#define vec_load(p) _mm512_loadu_ps(p)
#define vec_store(p, v) _mm512_storeu_ps(p, v)
#define vec_fma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vec_broadcast(p) _mm512_set1_ps(*(p))
#elif KERNELS_SIMD
#define VLANES 8
typedef __m256 Vec;
#define vec_zero() _mm256_setzero_ps()
#define vec_load(p) _mm256_loadu_ps(p)
#define vec_store(p, v) _mm256_storeu_ps(p, v)
#define vec_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define vec_broadcast(p) _mm256_broadcast_ss(p)
#endif

#if KERNELS_SIMD
/* The decode tile stays 8 lanes wide even with AVX-512: measured, 16-lane sums made
 * single-row products slower (more work in each final sum, same memory traffic). */

/* The first n (< 8) floats at p, the other lanes zero; nothing beyond is read. */
static inline __m256 load_first(const float *p, int n) {
    __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
                                      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(p, mask);
}

/* The sum of the eight lanes of a, as ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). */
static inline float sum8(__m256 a) {
    __m128 quad = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
    return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}

/* out (R, C) (row stride ldo) = x (R, IC) . w (C, IC)^T, each row of x and w IC floats
 * apart: R x C accumulators of eight lanes, one FMA per lane and input chunk, so each
 * loaded chunk of a row of w serves R rows of x and each chunk of x serves C rows of w.
 * The last chunk of a row, if short, is read through a mask (zeros beyond). Called with
 * constant R and C, so the loops unroll and the sums live in registers. */
static ALWAYS_INLINE void dot_tile(float *out, int ldo, const float *x, const float *w,
                                   int IC, int R, int C) {
    __m256 acc[3][8];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    int i = 0;
    for (; i + LANES <= IC; i += LANES) {
        for (int c = 0; c < C; c++) {
            __m256 w_c = _mm256_loadu_ps(w + (size_t)c * IC + i);
            for (int r = 0; r < R; r++)
                acc[r][c] = _mm256_fmadd_ps(_mm256_loadu_ps(x + (size_t)r * IC + i), w_c,
                                            acc[r][c]);
        }
    }
    if (i < IC) {   /* the tail: lanes i .. IC-1 loaded, the rest read as zero */
        for (int c = 0; c < C; c++) {
            __m256 w_c = load_first(w + (size_t)c * IC + i, IC - i);
            for (int r = 0; r < R; r++)
                acc[r][c] = _mm256_fmadd_ps(load_first(x + (size_t)r * IC + i, IC - i), w_c,
                                            acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) out[(size_t)r * ldo + c] = sum8(acc[r][c]);
}
#else
/* The portable tile: eight partial sums per output, one multiply and one add. */
static void dot_tile(float *out, int ldo, const float *x, const float *w, int IC, int R,
                     int C) {
    for (int r = 0; r < R; r++) {
        for (int c = 0; c < C; c++) {
            const float *x_r = x + (size_t)r * IC, *w_c = w + (size_t)c * IC;
            float acc[LANES] = {0};
            for (int i = 0; i < IC; i++) acc[i % LANES] += x_r[i] * w_c[i];
            out[(size_t)r * ldo + c] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                                       ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        }
    }
}
#endif

/* out[n0 .. n1, o0 .. o1) of out (N, OC) = x . w^T + b: one job. A single row (decode)
 * goes against eight rows of w at a time. Several rows: for each four rows of w, every
 * three rows of x in turn (12 sums in registers), so each row of w comes from memory
 * once and is reused from L1 for all rows of x. Leftovers use smaller tiles, which
 * compute the same sums. */
static void matmul_block(float *out, const float *x, const float *w, const float *b,
                         int n0, int n1, int o0, int o1, int IC, int OC) {
    int o = o0;
    if (n1 - n0 == 1) {
        float *out_n = out + (size_t)n0 * OC;
        const float *x_n = x + (size_t)n0 * IC;
        for (; o + 8 <= o1; o += 8) dot_tile(out_n + o, OC, x_n, w + (size_t)o * IC, IC, 1, 8);
        for (; o < o1; o++) dot_tile(out_n + o, OC, x_n, w + (size_t)o * IC, IC, 1, 1);
    } else {
        for (; o + 4 <= o1; o += 4) {
            int n = n0;
            for (; n + 3 <= n1; n += 3)
                dot_tile(out + (size_t)n * OC + o, OC, x + (size_t)n * IC, w + (size_t)o * IC,
                         IC, 3, 4);
            for (; n < n1; n++)
                dot_tile(out + (size_t)n * OC + o, OC, x + (size_t)n * IC, w + (size_t)o * IC,
                         IC, 1, 4);
        }
        for (; o < o1; o++)
            for (int n = n0; n < n1; n++)
                dot_tile(out + (size_t)n * OC + o, OC, x + (size_t)n * IC, w + (size_t)o * IC,
                         IC, 1, 1);
    }
    if (b)
        for (int n = n0; n < n1; n++)
            for (o = o0; o < o1; o++) out[(size_t)n * OC + o] += b[o];
}

/* ------------------------------------------------------------------------- */
/* Matrix product: the broadcast-form tile for blocks of rows (prefill)        */
/*
 * With many rows of x, the dot-product tile's horizontal sums cost as much as the
 * multiplies when IC is small. The GEMM form keeps whole outputs in the lanes instead:
 * a block of NB rows of x is transposed once into xt (KC, NB), and then for MR rows of w
 * at a time, acc[r][v] (the outputs of w row o+r for NB rows of x) grows by
 * w[o+r][i] * xt[i][:] for i in order, one FMA per step. Every output is therefore one
 * lane's sum over i in increasing order, whatever the tile or block sizes: the result of
 * a row does not depend on how many rows come with it (N >= GEMM_MIN_ROWS). It differs
 * from the dot-product tile's order, so decode (N = 1) and prefill agree to rounding.
 */
#if KERNELS_SIMD
#define GEMM_LANES VLANES
#endif

#ifdef GEMM_LANES
#define GEMM_MR 6                      /* rows of w per tile */
#define GEMM_NB (2 * GEMM_LANES)       /* rows of x per tile: two vectors */
#define GEMM_KC 1024                   /* input columns per transposed block of x */
#define GEMM_MIN_ROWS (GEMM_NB / 2)    /* fewer rows of x: the dot-product tile is faster */
#define GEMM_COL_BLOCKS 4              /* column blocks per block of rows: few, since each
                                        * job transposes its rows of x once */

/* acc (R, 2 vectors) for w rows o .. o+R-1 against the NB columns of xt (kc, NB): the
 * sums over i = 0 .. kc-1, added to out (rows n0.., columns o..) unless first, where
 * they are stored; rows >= n1 of the block are padding and are not written. */
static ALWAYS_INLINE void gemm_tile(float *out, const float *xt, const float *w, int kc,
                                    int IC, int OC, int o, int n0, int n1, int first, int R) {
    Vec acc[GEMM_MR][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = vec_zero();
    const float *w_o = w + (size_t)o * IC;
    for (int i = 0; i < kc; i++) {
        Vec x0 = vec_load(xt + (size_t)i * GEMM_NB);
        Vec x1 = vec_load(xt + (size_t)i * GEMM_NB + GEMM_LANES);
        for (int r = 0; r < R; r++) {
            Vec w_ri = vec_broadcast(w_o + (size_t)r * IC + i);
            acc[r][0] = vec_fma(w_ri, x0, acc[r][0]);
            acc[r][1] = vec_fma(w_ri, x1, acc[r][1]);
        }
    }
    float lanes[GEMM_NB];
    for (int r = 0; r < R; r++) {
        vec_store(lanes, acc[r][0]);
        vec_store(lanes + GEMM_LANES, acc[r][1]);
        for (int n = n0; n < n1; n++) {
            float *out_no = out + (size_t)n * OC + o + r;
            *out_no = first ? lanes[n - n0] : *out_no + lanes[n - n0];
        }
    }
}

/* out[n0 .. n1, o0 .. o1) = x . w^T + b by the broadcast tile, NB rows of x at a time. */
static void gemm_block(float *out, const float *x, const float *w, const float *b, int n0,
                       int n1, int o0, int o1, int IC, int OC) {
    float xt[GEMM_KC * GEMM_NB];   /* (KC, NB): 64 KB (AVX-512) on the stack */
    for (int nb = n0; nb < n1; nb += GEMM_NB) {
        int nb1 = nb + GEMM_NB < n1 ? nb + GEMM_NB : n1;
        for (int k0 = 0; k0 < IC; k0 += GEMM_KC) {
            int kc = IC - k0 < GEMM_KC ? IC - k0 : GEMM_KC;
            /* xt[i][j] = x[nb + j][k0 + i], zero for padding rows */
            for (int j = 0; j < GEMM_NB; j++) {
                const float *x_j = x + (size_t)(nb + j) * IC + k0;
                for (int i = 0; i < kc; i++)
                    xt[(size_t)i * GEMM_NB + j] = nb + j < nb1 ? x_j[i] : 0.0f;
            }
            int o = o0, first = k0 == 0;
            const float *w_k = w + k0;   /* every row of w from column k0 on */
            for (; o + GEMM_MR <= o1; o += GEMM_MR)
                gemm_tile(out, xt, w_k, kc, IC, OC, o, nb, nb1, first, GEMM_MR);
            switch (o1 - o) {   /* the rows of w left over, with constant tile heights */
            case 5: gemm_tile(out, xt, w_k, kc, IC, OC, o, nb, nb1, first, 5); break;
            case 4: gemm_tile(out, xt, w_k, kc, IC, OC, o, nb, nb1, first, 4); break;
            case 3: gemm_tile(out, xt, w_k, kc, IC, OC, o, nb, nb1, first, 3); break;
            case 2: gemm_tile(out, xt, w_k, kc, IC, OC, o, nb, nb1, first, 2); break;
            case 1: gemm_tile(out, xt, w_k, kc, IC, OC, o, nb, nb1, first, 1); break;
            default: break;
            }
        }
    }
    if (b)
        for (int n = n0; n < n1; n++)
            for (int o = o0; o < o1; o++) out[(size_t)n * OC + o] += b[o];
}
#endif

/* Output columns per job: about TARGET_JOBS blocks, a multiple of 8, at least
 * MIN_BLOCK_COLS. It depends only on OC, so the work split never depends on threads. */
static int block_cols(int OC) {
    int cols = (OC + TARGET_JOBS - 1) / TARGET_JOBS;
    cols = (cols + LANES - 1) / LANES * LANES;
    return cols < MIN_BLOCK_COLS ? MIN_BLOCK_COLS : cols;
}

/* One matmul's arguments, for its jobs. */
typedef struct {
    float *out;
    const float *x, *w, *b;
    const QuantMatrix *q8;
    const int8_t *xq;
    const float *xs;
    int N, IC, OC, cols, col_blocks;
} MatmulJob;

/* Job j of an fp32 matmul: a block of rows of x times a block of output columns. */
static void matmul_job(void *ctx, int j) {
    const MatmulJob *m = ctx;
    int n0 = j / m->col_blocks * BLOCK_ROWS, o0 = j % m->col_blocks * m->cols;
    int n1 = n0 + BLOCK_ROWS < m->N ? n0 + BLOCK_ROWS : m->N;
    int o1 = o0 + m->cols < m->OC ? o0 + m->cols : m->OC;
#ifdef GEMM_LANES
    if (m->N >= GEMM_MIN_ROWS) {
        gemm_block(m->out, m->x, m->w, m->b, n0, n1, o0, o1, m->IC, m->OC);
        return;
    }
#endif
    matmul_block(m->out, m->x, m->w, m->b, n0, n1, o0, o1, m->IC, m->OC);
}

/* Job j of an int8 matmul: a block of output columns for all rows. */
static void matmul_q8_job(void *ctx, int j) {
    const MatmulJob *m = ctx;
    int o0 = j * m->cols, o1 = o0 + m->cols < m->OC ? o0 + m->cols : m->OC;
    quant_matmul_block(m->out, m->xq, m->xs, m->q8, m->b, m->N, o0, o1);
}

void kernels_matmul(float *out, const float *x, const float *w, const float *b,
                    int N, int IC, int OC) {
    /* Jobs are (block of rows of x, block of output columns). Each output element is
     * written by one job, so threads never share an output, and the blocks depend only
     * on the shapes. Small products stay on one thread: handing out the jobs would
     * cost more than the second thread saves. */
    int cols = block_cols(OC);
#ifdef GEMM_LANES
    if (N >= GEMM_MIN_ROWS) {   /* wide column blocks, a multiple of the tile height */
        cols = (OC + GEMM_COL_BLOCKS - 1) / GEMM_COL_BLOCKS;
        cols = (cols + GEMM_MR - 1) / GEMM_MR * GEMM_MR;
    }
#endif
    MatmulJob m = {.out = out, .x = x, .w = w, .b = b, .N = N, .IC = IC, .OC = OC,
                   .cols = cols, .col_blocks = (OC + cols - 1) / cols};
    int row_blocks = (N + BLOCK_ROWS - 1) / BLOCK_ROWS;
    parallel_for(matmul_job, &m, row_blocks * m.col_blocks, (long)N * IC * OC);
}

void kernels_matmul_q8(float *out, const float *x, const QuantMatrix *w, const float *b,
                       int N, int8_t *xq, float *xs) {
    int IC = w->cols, OC = w->rows, cols = block_cols(OC);
    /* the activations in the matrix's groups: xq (N, IC), xs (N, groups) */
    quant_quantize(xq, xs, x, N, IC, w->group);
    MatmulJob m = {.out = out, .b = b, .q8 = w, .xq = xq, .xs = xs, .N = N, .IC = IC,
                   .OC = OC, .cols = cols, .col_blocks = (OC + cols - 1) / cols};
    /* an int8 weight is a quarter of an fp32 one to stream: count the work accordingly */
    parallel_for(matmul_q8_job, &m, m.col_blocks, (long)N * IC * OC / 4);
}

int kernels_gemm_min_rows(void) {
#ifdef GEMM_LANES
    return GEMM_MIN_ROWS;
#else
    return 0;
#endif
}

const char *kernels_isa(void) {
#if defined(__AVX512F__) && KERNELS_SIMD
    return "avx512";
#elif KERNELS_SIMD
    return "avx2+fma";
#else
    return "portable";
#endif
}

void kernels_matmul_reference(float *out, const float *x, const float *w, const float *b,
                              int N, int IC, int OC) {
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OC; o++) {
            double sum = b ? (double)b[o] : 0.0;
            for (int i = 0; i < IC; i++)
                sum += (double)x[(size_t)n * IC + i] * (double)w[(size_t)o * IC + i];
            out[(size_t)n * OC + o] = (float)sum;
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Matrix product backward (the trainer)                                       */

/* dx rows n0 .. n1-1: dx_n (IC,) += sum_o dout[n, o] w_o, over o in order. */
static void backward_dx_rows(float *dx, const float *dout, const float *w, int n0, int n1,
                             int IC, int OC) {
    int i0 = 0;
#if KERNELS_SIMD
    /* 4 rows x 16 columns of dx in 8 registers; the 16-column strip of w stays in L1 */
    for (; i0 + 2 * LANES <= IC; i0 += 2 * LANES) {
        int n = n0;
        for (; n + 4 <= n1; n += 4) {
            __m256 acc[4][2];
            for (int r = 0; r < 4; r++)
                for (int h = 0; h < 2; h++)
                    acc[r][h] = _mm256_loadu_ps(dx + (size_t)(n + r) * IC + i0 + h * LANES);
            for (int o = 0; o < OC; o++) {
                const float *w_o = w + (size_t)o * IC + i0;
                __m256 w0 = _mm256_loadu_ps(w_o), w1 = _mm256_loadu_ps(w_o + LANES);
                for (int r = 0; r < 4; r++) {
                    __m256 d = _mm256_broadcast_ss(dout + (size_t)(n + r) * OC + o);
                    acc[r][0] = _mm256_fmadd_ps(d, w0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(d, w1, acc[r][1]);
                }
            }
            for (int r = 0; r < 4; r++)
                for (int h = 0; h < 2; h++)
                    _mm256_storeu_ps(dx + (size_t)(n + r) * IC + i0 + h * LANES, acc[r][h]);
        }
        for (; n < n1; n++) {   /* leftover rows, one at a time, same order */
            float *dx_n = dx + (size_t)n * IC + i0;
            __m256 a0 = _mm256_loadu_ps(dx_n), a1 = _mm256_loadu_ps(dx_n + LANES);
            for (int o = 0; o < OC; o++) {
                const float *w_o = w + (size_t)o * IC + i0;
                __m256 d = _mm256_broadcast_ss(dout + (size_t)n * OC + o);
                a0 = _mm256_fmadd_ps(d, _mm256_loadu_ps(w_o), a0);
                a1 = _mm256_fmadd_ps(d, _mm256_loadu_ps(w_o + LANES), a1);
            }
            _mm256_storeu_ps(dx_n, a0);
            _mm256_storeu_ps(dx_n + LANES, a1);
        }
    }
#endif
    /* portable path, and the columns left over from the 16-wide strips */
    for (int n = n0; n < n1; n++) {
        float *dx_n = dx + (size_t)n * IC;
        const float *dout_n = dout + (size_t)n * OC;
        for (int o = 0; o < OC; o++) {
            const float *w_o = w + (size_t)o * IC;
            float d = dout_n[o];
            for (int i = i0; i < IC; i++) dx_n[i] += d * w_o[i];
        }
    }
}

/* dw rows o0 .. o1-1 for input rows n0 .. n1-1: dw_o (IC,) += sum_n d[n, o] x_n, where
 * d holds dout[n0 .. n1, o0 .. o1) as rows of ld floats (a copy that stays in L1). */
static void backward_dw_block(float *dw, const float *d, int ld, const float *x, int n0,
                              int n1, int o0, int o1, int IC) {
    int i0 = 0;
#if KERNELS_SIMD
    /* 4 rows x 16 columns of dw in 8 registers; the strip of x rows stays in L1 */
    for (; i0 + 2 * LANES <= IC; i0 += 2 * LANES) {
        int o = o0;
        for (; o + 4 <= o1; o += 4) {
            __m256 acc[4][2];
            for (int r = 0; r < 4; r++)
                for (int h = 0; h < 2; h++)
                    acc[r][h] = _mm256_loadu_ps(dw + (size_t)(o + r) * IC + i0 + h * LANES);
            for (int n = n0; n < n1; n++) {
                const float *x_n = x + (size_t)n * IC + i0, *d_n = d + (n - n0) * ld + (o - o0);
                __m256 x0 = _mm256_loadu_ps(x_n), x1 = _mm256_loadu_ps(x_n + LANES);
                for (int r = 0; r < 4; r++) {
                    __m256 s = _mm256_broadcast_ss(d_n + r);
                    acc[r][0] = _mm256_fmadd_ps(s, x0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(s, x1, acc[r][1]);
                }
            }
            for (int r = 0; r < 4; r++)
                for (int h = 0; h < 2; h++)
                    _mm256_storeu_ps(dw + (size_t)(o + r) * IC + i0 + h * LANES, acc[r][h]);
        }
        for (; o < o1; o++) {   /* leftover rows of dw, one at a time, same order */
            float *dw_o = dw + (size_t)o * IC + i0;
            __m256 a0 = _mm256_loadu_ps(dw_o), a1 = _mm256_loadu_ps(dw_o + LANES);
            for (int n = n0; n < n1; n++) {
                const float *x_n = x + (size_t)n * IC + i0;
                __m256 s = _mm256_broadcast_ss(d + (n - n0) * ld + (o - o0));
                a0 = _mm256_fmadd_ps(s, _mm256_loadu_ps(x_n), a0);
                a1 = _mm256_fmadd_ps(s, _mm256_loadu_ps(x_n + LANES), a1);
            }
            _mm256_storeu_ps(dw_o, a0);
            _mm256_storeu_ps(dw_o + LANES, a1);
        }
    }
#endif
    /* portable path, and the columns left over from the 16-wide strips */
    for (int o = o0; o < o1; o++) {
        float *dw_o = dw + (size_t)o * IC;
        for (int n = n0; n < n1; n++) {
            const float *x_n = x + (size_t)n * IC;
            float d_no = d[(n - n0) * ld + (o - o0)];
            for (int i = i0; i < IC; i++) dw_o[i] += d_no * x_n[i];
        }
    }
}

void kernels_matmul_backward(float *dx, float *dw, float *db, const float *dout,
                             const float *x, const float *w, int N, int IC, int OC) {
    int parallel = (long)N * IC * OC >= KERNELS_PARALLEL_MIN_MACS;
    (void)parallel;   /* read only by the pragmas */
    /* dx: each job owns a block of rows of dx and sums over o in a fixed order */
    #pragma omp parallel for schedule(static) if (parallel)
    for (int n0 = 0; n0 < N; n0 += DX_ROWS_PER_JOB) {
        int n1 = n0 + DX_ROWS_PER_JOB < N ? n0 + DX_ROWS_PER_JOB : N;
        backward_dx_rows(dx, dout, w, n0, n1, IC, OC);
    }
    /* dw, db: each job owns a block of rows of dw (and entries of db) and sums over
     * n in increasing order, a block of rows at a time: the block's columns of dout
     * are first copied into d, contiguous, where the kernel reads them from L1 */
    #pragma omp parallel for schedule(static) if (parallel)
    for (int o0 = 0; o0 < OC; o0 += DW_COLS_PER_JOB) {
        int o1 = o0 + DW_COLS_PER_JOB < OC ? o0 + DW_COLS_PER_JOB : OC;
        float d[DW_ROWS_PER_BLOCK * DW_COLS_PER_JOB];
        for (int n0 = 0; n0 < N; n0 += DW_ROWS_PER_BLOCK) {
            int n1 = n0 + DW_ROWS_PER_BLOCK < N ? n0 + DW_ROWS_PER_BLOCK : N;
            for (int n = n0; n < n1; n++)
                for (int o = o0; o < o1; o++)
                    d[(n - n0) * DW_COLS_PER_JOB + (o - o0)] = dout[(size_t)n * OC + o];
            backward_dw_block(dw, d, DW_COLS_PER_JOB, x, n0, n1, o0, o1, IC);
            if (db) {
                for (int o = o0; o < o1; o++) {
                    float sum = db[o];
                    for (int n = n0; n < n1; n++) sum += d[(n - n0) * DW_COLS_PER_JOB + (o - o0)];
                    db[o] = sum;
                }
            }
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Norms and activations                                                       */

void kernels_layernorm(float *out, const float *x, const float *w, const float *b, int N,
                       int C) {
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C;
        float *out_n = out + (size_t)n * C;
        float mean = 0.0f;
        for (int i = 0; i < C; i++) mean += x_n[i];
        mean /= (float)C;
        float var = 0.0f;   /* biased variance over C, as GPT-2 */
        for (int i = 0; i < C; i++) var += (x_n[i] - mean) * (x_n[i] - mean);
        var /= (float)C;
        float rstd = 1.0f / sqrtf(var + KERNELS_NORM_EPS);
        for (int i = 0; i < C; i++) out_n[i] = (x_n[i] - mean) * rstd * w[i] + b[i];
    }
}

void kernels_rmsnorm(float *out, const float *x, const float *w, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C;
        float *out_n = out + (size_t)n * C;
        float ss = 0.0f;
        for (int i = 0; i < C; i++) ss += x_n[i] * x_n[i];
        float rms_inv = 1.0f / sqrtf(ss / (float)C + KERNELS_NORM_EPS);
        for (int i = 0; i < C; i++) out_n[i] = w[i] * (rms_inv * x_n[i]);
    }
}

static inline float exp_approx(float x) {
    /* exp(x) = 2^k exp(r) with k = round(x / ln 2) and |r| <= ln(2) / 2; exp(r) from its
     * Taylor series to r^7 (truncation below 6e-9 relative); 2^k applied as two factors
     * 2^(k/2) 2^(k - k/2) so that k = -150 .. 128 never leaves float's exponent range.
     * Selects instead of branches, so the compiler vectorises a loop over it. */
    int is_nan = x != x;
    float xc = is_nan ? 0.0f : x < EXP_X_MIN ? EXP_X_MIN : x > EXP_X_MAX ? EXP_X_MAX : x;
    float k = (xc * EXP_LOG2E + EXP_ROUND) - EXP_ROUND;
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

float kernels_expf(float x) { return exp_approx(x); }

void kernels_gelu(float *x, size_t n) {
    /* 0.5 v (1 + tanh u) = v sigmoid(2u) = v / (1 + exp(-2u)), u = sqrt(2/pi)(v + c v^3) */
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v);
        x[i] = v / (1.0f + exp_approx(-2.0f * u));
    }
}

void kernels_swiglu(float *hidden, const float *gate, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = hidden[i];
        hidden[i] = v / (1.0f + exp_approx(-v)) * gate[i];
    }
}

/* ------------------------------------------------------------------------- */
/* Vector helpers for attention                                                */

static ALWAYS_INLINE float dot_inline(const float *a, const float *b, int n) {
#if KERNELS_SIMD
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    if (i < n) acc = _mm256_fmadd_ps(load_first(a + i, n - i), load_first(b + i, n - i), acc);
    return sum8(acc);
#else
    float acc[LANES] = {0};
    for (int i = 0; i < n; i++) acc[i % LANES] += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
#endif
}

float kernels_dot(const float *a, const float *b, int n) { return dot_inline(a, b, n); }

void kernels_dots(float *out, const float *q, const float *k, int stride, const int32_t *rows,
                  int n_rows, int n) {
    for (int r = 0; r < n_rows; r++)
        out[r] = dot_inline(q, k + (long)(rows ? rows[r] : r) * stride, n);
}

float kernels_exp_sum(float *x, int n, float shift) {
    for (int i = 0; i < n; i++) x[i] = exp_approx(x[i] - shift);   /* vectorises */
#if KERNELS_SIMD
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + LANES <= n; i += LANES) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + i));
    if (i < n) acc = _mm256_add_ps(acc, load_first(x + i, n - i));
    return sum8(acc);
#else
    float acc[LANES] = {0};
    for (int i = 0; i < n; i++) acc[i % LANES] += x[i];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
#endif
}

void kernels_weighted_sum(float *out, const float *weights, float scale, const float *v,
                          int stride, const int32_t *rows, int n_rows, int n) {
    for (int i = 0; i < n; i++) out[i] = 0.0f;
    for (int r = 0; r < n_rows; r++) {
        const float *v_r = v + (long)(rows ? rows[r] : r) * stride;
        float a = weights[r] * scale;
#if KERNELS_SIMD
        __m256 a8 = _mm256_set1_ps(a);
        int i = 0;
        for (; i + LANES <= n; i += LANES)
            _mm256_storeu_ps(out + i, _mm256_fmadd_ps(a8, _mm256_loadu_ps(v_r + i),
                                                      _mm256_loadu_ps(out + i)));
        for (; i < n; i++) out[i] = fmaf(a, v_r[i], out[i]);
#else
        for (int i = 0; i < n; i++) out[i] += a * v_r[i];
#endif
    }
}

int kernels_all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* kernels.c: matrix products, norms and activations, fast and reference.
 *
 * The forward pass spends almost all its time in kernels_matmul: out = x w^T, one dot
 * product per output. Decoding one token (N = 1) streams every weight once, so it runs at
 * memory speed if each weight is loaded once and enough independent sums are in flight;
 * prefill (N > 1) reuses each loaded weight row for several rows of x (a register tile),
 * so it runs at arithmetic speed. Threads take blocks of the output (rows x columns);
 * nothing here reduces across threads.
 *
 * Sections, in reading order: the thread pool; the reference kernels (portable C, what
 * each kernel computes, and the code a build without vector instructions runs); one
 * section per instruction set (AVX2 + FMA, AVX-512, NEON), each defining only a small
 * vocabulary of vector operations; the vector kernels, written once in that vocabulary;
 * then the public functions, which pick the vector or the reference kernel at compile
 * time. Intrinsics appear only inside the instruction-set sections: another instruction
 * set is one more such section. This file does not know about models: read model.c and
 * train_model.c for how the kernels are used.
 *
 * Legend: N rows of x, IC input width, OC output width (rows of w), n row, o output
 * column, i input index, C width.
 */
#include "kernels.h"

#include <ctype.h>        /* isdigit, isspace, isprint: reading OMP_NUM_THREADS */
#include <errno.h>        /* errno, ERANGE */
#include <limits.h>       /* INT_MAX */
#include <math.h>         /* sqrtf, fmaf, isfinite */
#include <pthread.h>      /* the pool's workers without OpenMP; its lock and condition */
#include <sched.h>        /* sched_yield */
#include <stdatomic.h>    /* the pool's ticket and counters */
#include <stdio.h>        /* fprintf: an invalid OMP_NUM_THREADS */
#include <stdlib.h>       /* getenv, strtol */
#include <string.h>       /* memcpy */
#include <unistd.h>       /* sysconf: the cores, without OpenMP */
#if KERNELS_SIMD && defined(__AVX2__)
#include <immintrin.h>    /* AVX2, FMA and AVX-512 intrinsics */
#elif KERNELS_SIMD && defined(__ARM_NEON)
#include <arm_neon.h>     /* NEON intrinsics */
#endif
#ifdef _OPENMP
#include <omp.h>          /* omp_set_num_threads, omp_get_max_threads */
#endif

#include "hash.h"         /* hash_mix64 and the dropout rule (kernels_dropout) */
#include "quant.h"        /* quant_quantize, quant_matmul_block, quant_groups */

#define LANES 8            /* lanes of the dot-product sums, in every build */
#define BLOCK_ROWS 64      /* rows of x per job: 64 x IC floats stay in L2 */
#define MIN_BLOCK_COLS 16  /* fewest output columns per job */
#define QUANTIZE_ROWS_PER_JOB 16   /* int8 prefill: rows of x quantized per job */
#define TARGET_JOBS 8      /* column blocks per matmul: few claims of the shared ticket, yet
                            * enough blocks for threads to balance dynamically */
#define NORM_ROWS_PER_JOB 32   /* LayerNorm backward: rows of dx per job */
#define NORM_COLS_PER_JOB 64   /* LayerNorm backward: entries of dw and db per job */
#define GELU_SQRT_2_OVER_PI 0.7978845608028654f  /* sqrt(2 / pi) in GELU's tanh form */
#define GELU_CUBIC 0.044715f                      /* coefficient of x^3 in GELU's tanh form */
#define EXP_LOG2E 1.44269504088896341f   /* 1 / ln 2 */
#define EXP_LN2_HI 0.693359375f          /* ln 2 split in two: the high part has few bits, */
#define EXP_LN2_LO -2.12194440e-4f       /* so k * hi is exact for |k| < 2^9 (Cody-Waite) */
#define EXP_ROUND 12582912.0f            /* 1.5 * 2^23: adding it rounds to an integer */
#define EXP_X_MIN -104.0f                /* exp(-104) rounds to 0 in float */
#define EXP_X_MAX 89.0f                  /* exp(89) overflows to +inf in float */

/* The tiles must be inlined into each caller, where their sizes are constants: only then
 * do their loops unroll and their sums stay in registers. */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif
/* A reference kernel that a vector build replaces entirely is still compiled (so it never
 * rots), but not called there. */
#if defined(__GNUC__)
#define MAYBE_UNUSED __attribute__((unused))
#else
#define MAYBE_UNUSED
#endif

/* ------------------------------------------------------------------------- */
/* Threads: a pool that never waits for a thread that is not working             */
/*
 * A parallel loop is a number of jobs, each writing its own outputs. Inside kernels_run
 * the loops go to a pool: the calling (main) thread publishes the loop in one atomic
 * ticket, then main and the workers claim jobs from it one at a time, and main returns
 * once every claimed job is finished. Main never waits for a worker that has claimed
 * nothing: if another process holds a worker's core, main simply does the jobs itself
 * (a barrier, by contrast, waits for every thread to arrive). Workers spin between
 * loops, and sleep on a condition variable after a while without work. Which thread does
 * a job never changes its result. The workers are OpenMP's team of one parallel region
 * in an OpenMP build, POSIX threads that kernels_run starts and joins without OpenMP;
 * everything else (ticket, claims, sleep) is the same code in both. The forward pass of
 * run and each pass of the trainer run inside kernels_run; outside it (tests, tools) each
 * loop is an ordinary OpenMP parallel for, or a plain loop without OpenMP. A loop started
 * from inside a job runs on that job's thread. The pool (and each thread's in_job flag)
 * is the one piece of mutable global state in the project: like OpenMP's own runtime,
 * there is one per process.
 */

#define POOL_FIELD_BITS 16                /* ticket: generation | front | back */
#define POOL_MAX_JOBS ((1 << POOL_FIELD_BITS) - 1)
#define POOL_SPINS_BEFORE_YIELD 1000      /* polls (~30 us) before a waiting thread starts
                                           * yielding its core at every poll */
#define POOL_MAX_THREADS 1024             /* most threads kernels_run starts without
                                           * OpenMP: run's -T and train's --threads bound */
#define POOL_STACK_BYTES ((size_t)8 << 20)  /* each such thread's stack, what Linux and
                                             * macOS give a program's main thread (macOS
                                             * gives other threads 512 KiB; a GEMM job
                                             * keeps a 128 KiB tile on the stack) */

typedef void (*PoolJob)(void *ctx, int job);

typedef struct {
    _Alignas(8) _Atomic uint64_t ticket;   /* generation (32 bits) | front (16) | back (16):
                                            * the jobs front .. back-1 are still to claim
                                            * (aligned as gcc 11 and later do on 32-bit
                                            * x86, which they otherwise note at each build) */
    _Atomic int done;          /* jobs of the current generation finished */
    _Atomic int stop;          /* set by main when kernels_run's body returns */
    _Atomic int sleeping;      /* workers asleep on `wake`, or about to be */
    pthread_mutex_t lock;      /* guards wakes */
    pthread_cond_t wake;       /* sleeping workers wait on it for wakes to change */
    unsigned wakes;            /* main's wake-ups so far */
    PoolJob job;               /* the current loop (written before its ticket) */
    void *ctx;
    int active;                /* 1 while kernels_run's body runs (main reads it only) */
    int threads;               /* without OpenMP: kernels_run's threads, 0 until asked */
} Pool;

static Pool pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};
/* 1 while this thread runs a job of a parallel loop: a loop that the job itself starts
 * (attention inside a per-sequence job) runs on this thread alone, never re-entering the
 * pool or nesting OpenMP regions. */
static _Thread_local int in_job;


/* A hint to the core that this thread is spinning: each instruction set's section below
 * defines it (a pause instruction), the portable build as nothing. */
static inline void cpu_relax(void);


/* Claims and runs jobs of the ticket's loop until none is left; returns jobs run. Main
 * takes jobs from the front, workers from the back: consecutive loops over the same rows
 * then give main the first rows and a worker the last ones each time, so the rows a
 * thread wrote are mostly still in its own cache when it reads them. Results never
 * depend on who runs what. */
static int pool_claim(int from_back) {
    int ran = 0;
    for (;;) {
        uint64_t t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
        unsigned front = (unsigned)(t >> POOL_FIELD_BITS) & POOL_MAX_JOBS;
        unsigned back = (unsigned)t & POOL_MAX_JOBS;
        if (front >= back) return ran;
        uint64_t claimed = from_back ? t - 1 : t + ((uint64_t)1 << POOL_FIELD_BITS);
        if (!atomic_compare_exchange_weak_explicit(&pool.ticket, &t, claimed,
                                                   memory_order_acq_rel, memory_order_relaxed))
            continue;
        /* the job is ours; main is waiting for it, so job and ctx are this loop's */
        unsigned job = from_back ? back - 1 : front;
        in_job = 1;
        pool.job(pool.ctx, (int)job);
        in_job = 0;
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
        ran++;
    }
}

/* 1 if the ticket holds jobs nobody has claimed yet. */
static int pool_has_jobs(void) {
    uint64_t t = atomic_load(&pool.ticket);   /* sequentially consistent: see pool_sleep */
    return (unsigned)(t >> POOL_FIELD_BITS & POOL_MAX_JOBS) < (unsigned)(t & POOL_MAX_JOBS);
}

/* A worker with nothing to do: sleeps until main's next wake-up, a loop to claim, or stop.
 * The worker counts itself asleep before it reads the ticket, and main publishes a ticket
 * before it reads the count (all four sequentially consistent): so either main sees this
 * sleeper and wakes it, under the lock it holds until it waits, or the worker sees the
 * new jobs and does not sleep. */
static void pool_sleep(void) {
    pthread_mutex_lock(&pool.lock);
    atomic_fetch_add(&pool.sleeping, 1);
    unsigned seen = pool.wakes;
    while (pool.wakes == seen && !atomic_load(&pool.stop) && !pool_has_jobs())
        pthread_cond_wait(&pool.wake, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
}

/* Wakes every worker that sleeps (or is about to); costs one atomic when none does. */
static void pool_wake(void) {
    if (atomic_exchange(&pool.sleeping, 0) == 0) return;
    pthread_mutex_lock(&pool.lock);
    pool.wakes++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
}

/* A worker: claim jobs whenever a loop is published, until main says stop. After a
 * while with nothing to do it sleeps until main publishes again. A sleeping thread is
 * not runnable, so on a machine where another process keeps a core busy it does not
 * push main off its core; and when woken, the scheduler runs it at once, taking the
 * time from the other process rather than from main. */
static void pool_worker(void) {
    long idle = 0;
    while (!atomic_load_explicit(&pool.stop, memory_order_acquire)) {
        if (pool_claim(1) > 0) {
            idle = 0;
        } else if (++idle > POOL_SPINS_BEFORE_YIELD) {
            pool_sleep();
            idle = 0;
        } else {
            cpu_relax();
        }
    }
}

/* Main's part of kernels_run: body with the pool active, then every worker told to stop
 * (one about to sleep sees `stop` under the lock; one asleep is woken). */
static void pool_main(void (*body)(void *ctx), void *ctx) {
    pool.active = 1;
    body(ctx);
    pool.active = 0;
    atomic_store(&pool.stop, 1);
    pthread_mutex_lock(&pool.lock);
    pool.wakes++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
}

#ifndef _OPENMP
/* A worker thread of kernels_run (without OpenMP). */
static void *pool_thread(void *unused) {
    (void)unused;
    pool_worker();
    return NULL;
}

/* The cores the system has online. */
static int pool_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > POOL_MAX_THREADS ? POOL_MAX_THREADS : (int)n;
}

/* OMP_NUM_THREADS as OpenMP reads it: a positive integer, or a comma-separated list of
 * them (one per level of nested parallelism; the pool is the first level), spaces
 * allowed around each. Returns the first, or -1 if text is not such a list. */
static int parse_num_threads(const char *text) {
    const char *s = text;
    int first = 0;
    for (;;) {
        while (isspace((unsigned char)*s)) s++;
        if (!isdigit((unsigned char)*s)) return -1;   /* no sign, no empty entry */
        char *end;
        errno = 0;
        long n = strtol(s, &end, 10);
        if (errno == ERANGE || n < 1 || n > INT_MAX) return -1;
        if (!first) first = (int)n;
        for (s = end; isspace((unsigned char)*s); s++) {}
        if (*s == '\0') return first;
        if (*s++ != ',') return -1;
    }
}

/* The threads kernels_run uses without OpenMP: kernels_set_threads's number, else, as
 * OpenMP would start, OMP_NUM_THREADS's (read once), else every core. An invalid
 * OMP_NUM_THREADS is reported and ignored, as OpenMP's runtime does. */
static int pool_threads(void) {
    if (pool.threads > 0) return pool.threads;
    const char *env = getenv("OMP_NUM_THREADS");
    int asked = env ? parse_num_threads(env) : 0;
    if (asked < 0) {
        char shown[33];   /* the value, at most 32 bytes, control bytes as '?' */
        size_t n = 0;
        for (; n < sizeof shown - 1 && env[n]; n++)
            shown[n] = isprint((unsigned char)env[n]) ? env[n] : '?';
        shown[n] = '\0';
        fprintf(stderr, "OMP_NUM_THREADS: invalid value (got '%s', expected a positive "
                "integer or a list of them); using the %d cores\n", shown, pool_cores());
        asked = 0;
    }
    pool.threads = asked > 0 ? asked : pool_cores();
    return pool.threads;
}
#endif /* !_OPENMP */

/* Runs job(ctx, j) for j = 0 .. n_jobs-1, each writing only its own outputs; `work`
 * (multiply-adds, or the like) decides whether sharing pays: on the pool from
 * KERNELS_POOL_MIN_WORK, in an OpenMP region from KERNELS_PARALLEL_MIN_MACS (without
 * OpenMP the pragma is ignored and the loop runs here), else here. */
static void parallel_for(PoolJob job, void *ctx, int n_jobs, double work) {
    int parallel = work >= KERNELS_PARALLEL_MIN_MACS;
    if (in_job) parallel = 0;   /* a loop inside a job: this thread does it all */
    else if (pool.active && work >= KERNELS_POOL_MIN_WORK && n_jobs > 1 &&
             n_jobs <= POOL_MAX_JOBS) {
        static uint64_t generation = 0;   /* main thread only */
        pool.job = job;
        pool.ctx = ctx;
        atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
        generation++;
        uint64_t ticket = (generation << (2 * POOL_FIELD_BITS)) | (uint64_t)n_jobs;
        atomic_store(&pool.ticket, ticket);   /* sequentially consistent: see pool_sleep */
        pool_wake();
        pool_claim(0);
        /* wait for the jobs a worker still holds; if that takes a while, the worker may
         * be waiting for this very core (three threads on two cores): yield it */
        for (long spins = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < n_jobs;
             spins++) {
            if (spins > POOL_SPINS_BEFORE_YIELD) sched_yield();
            else cpu_relax();
        }
        return;
    }
    else if (pool.active) parallel = 0;   /* inside the body but too small: stay on main */
    if (!parallel || n_jobs == 1) {   /* no threads started for this */
        for (int j = 0; j < n_jobs; j++) job(ctx, j);
        return;
    }
    #pragma omp parallel for schedule(dynamic, 1)
    for (int j = 0; j < n_jobs; j++) {
        in_job = 1;
        job(ctx, j);
        in_job = 0;
    }
}

void kernels_parallel_for(void (*job)(void *ctx, int j), void *ctx, int n_jobs, double work) {
    parallel_for(job, ctx, n_jobs, work);
}

int kernels_jobs(size_t n, size_t per_job) { return (int)((n + per_job - 1) / per_job); }

void kernels_job_range(size_t *start, size_t *end, int j, size_t n, size_t per_job) {
    *start = (size_t)j * per_job;
    *end = *start + per_job < n ? *start + per_job : n;
}

int kernels_set_threads(int n) {
#ifdef _OPENMP
    int max = omp_get_num_procs();
#else
    int max = pool_cores();
#endif
    if (n < 1) n = 1;
    if (n > max) n = max;
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    pool.threads = n;
#endif
    return n;
}

int kernels_cap_threads(void) {
#ifdef _OPENMP
    int asked = omp_get_max_threads(), cores = omp_get_num_procs();
    if (asked <= cores) return 0;
    omp_set_num_threads(cores);
#else
    int asked = pool_threads(), cores = pool_cores();
    if (asked <= cores) return 0;
    pool.threads = cores;
#endif
    return asked;
}

int kernels_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return pool_threads();
#endif
}

void kernels_run(void (*body)(void *ctx), void *ctx) {
    int threads = kernels_threads();
    if (threads < 2 || in_job || pool.active) {   /* one thread, or already on the pool */
        body(ctx);
        return;
    }
    atomic_store(&pool.stop, 0);
    atomic_store(&pool.ticket, 0);
    atomic_store(&pool.sleeping, 0);
#ifdef _OPENMP
    /* thread 0 runs the body with the pool active; the others are its workers */
    #pragma omp parallel num_threads(threads)
    {
        if (omp_get_thread_num() == 0) pool_main(body, ctx);
        else pool_worker();
    }
#else
    /* threads - 1 workers for the body's duration (a thread that cannot be started is
     * one worker fewer: main does its jobs) */
    pthread_t workers[POOL_MAX_THREADS - 1];
    pthread_attr_t attr;
    int has_attr = pthread_attr_init(&attr) == 0;
    if (has_attr) pthread_attr_setstacksize(&attr, POOL_STACK_BYTES);  /* else the default */
    int started = 0;
    while (started < threads - 1 && started < POOL_MAX_THREADS - 1 &&
           pthread_create(&workers[started], has_attr ? &attr : NULL, pool_thread, NULL) == 0)
        started++;
    if (has_attr) pthread_attr_destroy(&attr);
    pool_main(body, ctx);
    for (int t = 0; t < started; t++) pthread_join(workers[t], NULL);
#endif
}

/* ------------------------------------------------------------------------- */
/* Reference kernels: portable C                                               */
/*
 * What each kernel computes, in plain loops. A build without vector instructions runs
 * exactly these. A vector build runs the vector kernels further down instead, and these
 * for the last few values that do not fill a vector; the tests hold the two to each
 * other: bit for bit where the arithmetic is the same (exp, GELU, AdamW), within bounds
 * checked against float64 where a fused multiply-add rounds once where these round twice
 * (the products, the dot products).
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

/* ---- the dot-product tile (decode) ---- */

/* out (R, C) (row stride ldo) = x (R, IC) . w (C, IC)^T, each row of x and w IC floats
 * apart: eight partial sums per output (lane i % 8), one multiply and one add per input,
 * then ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). */
static MAYBE_UNUSED void dot_tile_reference(float *out, int ldo, const float *x,
                                            const float *w, int IC, int R, int C) {
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

/* ---- the trainer's register-tiled products ---- */
/*
 * The trainer's products all have one shape, C (M, NC) (+)= sum over k of A(k, m) B[k][:],
 * with A read through two strides, A(k, m) = a[k * a_k + m * a_m]:
 *   forward  out (N, OC)  = x (N, IC) . wt (IC, OC)     m = n, k = i: A(k, m) = x[m][k]
 *   dx       dx (N, IC)  += dout (N, OC) . w (OC, IC)   m = n, k = o: A(k, m) = dout[m][k]
 *   dw       dw (OC, IC) += dout^T . x (N, IC)          m = o, k = n: A(k, m) = dout[k][m]
 * A tile keeps TILE_MR rows of C by TILE_NV vectors of its columns in registers. For each k,
 * in increasing order, it loads row k of B once (TILE_NV vectors) and broadcasts TILE_MR
 * values of A: TILE_MR x TILE_NV FMAs for TILE_NV + TILE_MR loads. Every C[m][j] is
 * therefore one lane's FMA chain over k in increasing order, starting from C's old value
 * (accumulate) or from 0 (store), whatever the tile, the cache block (the chain goes on
 * through memory) or the job: the bits depend only on the shapes and the build. A job
 * is a block of C; within it, TILE_KB values of k at a time, a strip of TILE_COLS columns
 * of B stays in L1 while every tile of rows passes over it.
 */
#define TILE_COLS (TILE_NV * VLANES)   /* columns of C per tile */
#define TILE_KB 128                    /* values of k per cache block */
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

/* C[m0 .. m1, j0 .. j1) of product p (+)= its chains over the kb values of k from a and b
 * on (a block of k), starting from 0 if zero, then + bias[j] if bias (the last block): one
 * multiply and one add per step, vectorisable over j. */
static MAYBE_UNUSED void product_chains_reference(const Product *p, const float *a,
                                                  const float *b, int kb, int zero,
                                                  const float *bias, int m0, int m1, int j0,
                                                  int j1) {
    for (int m = m0; m < m1; m++) {
        float *c_m = p->c + (size_t)m * p->ldc;
        if (zero)
            for (int j = j0; j < j1; j++) c_m[j] = 0.0f;
        for (int k = 0; k < kb; k++) {
            float a_km = a[k * p->a_k + m * p->a_m];
            const float *b_k = b + (size_t)k * p->ldb;
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
/* Reference kernels: norms and activations                                    */

/* mean and rstd of row x_n (C,). */
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

/* One row of LayerNorm's dx: with xhat = (x - mean) rstd and g = w * dout,
 * dx_n (C,) += rstd (g - mean(g) - xhat mean(g xhat)) (llm.c doc/layernorm). */
static MAYBE_UNUSED void norm_dx_row_reference(float *dx_n, const float *x_n,
                                               const float *dout_n, const float *w, int C,
                                               float m, float r) {
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

/* dx (n,) = GELU'(x) dout. GELU(v) = v s with s = sigmoid(2u) = 0.5 (1 + tanh u), so
 * GELU'(v) = s + v s' = s + 2 v u' s (1 - s) (as 1 - tanh^2 u = 4 s (1 - s)). Far out, s
 * is exactly 0 or 1: GELU' is 0 or 1, never NaN. */
static void gelu_backward_reference(float *dx, const float *x, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v);
        float du = GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_CUBIC * v * v);
        float s = 1.0f / (1.0f + exp_approx(-2.0f * u));
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
/* Reference kernels: attention's loops                                        */

/* a (n,) . b (n,): eight partial sums (lane i % 8), one multiply and one add per input,
 * then ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). */
static MAYBE_UNUSED float dot_reference(const float *a, const float *b, int n) {
    float acc[LANES] = {0};
    for (int i = 0; i < n; i++) acc[i % LANES] += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* The sum of x (n,), in dot_reference's lanes and order. */
static MAYBE_UNUSED float sum_reference(const float *x, int n) {
    float acc[LANES] = {0};
    for (int i = 0; i < n; i++) acc[i % LANES] += x[i];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* The largest of init and x (n,) by x > max comparisons: a NaN value never wins. */
static MAYBE_UNUSED float max_reference(const float *x, int n, float init) {
    float max = init;
    for (int i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    return max;
}

/* x (n,) = exp(x - shift), in place. */
static MAYBE_UNUSED void exp_shift_reference(float *x, int n, float shift) {
    for (int j = 0; j < n; j++) x[j] = exp_approx(x[j] - shift);
}

/* out (n,) = sum over r of (weights[r] * scale) * row r of v (rows as in kernels_dots):
 * one multiply and one add per row, rows in order. */
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
 *   vec_exp_clamp, vec_exp2_halves, vec_nan_or   the three steps of exp_approx that are
 *                     not plain arithmetic (clamp, 2^k as two factors, NaN passed through)
 *   vec_max           x where x > m, else m, lane by lane (so a NaN x never wins)
 *   vec_dropout       hash.h's dropout rule on the lanes of x, elements first .. first +
 *                     VLANES - 1: hash_mix64 in 64-bit integer lanes
 *   V8                eight float lanes whatever the register width, for the dot products
 *                     that must give the same bits in every build: v8_zero, v8_load,
 *                     v8_load_first (the first n < 8 floats, zeros beyond, nothing read
 *                     past them), v8_fma, v8_add, v8_sum (((l0 + l4) + (l2 + l6)) +
 *                     ((l1 + l5) + (l3 + l7)), as dot_reference), v8_sum_rows (eight such
 *                     sums at once), v8_transpose (an 8 x 8 block of floats transposed)
 *   GEMM_NV, TILE_MR, TILE_NV   register tile shapes (vectors per tile row, rows per tile)
 *   cpu_relax         the spin-wait hint of the thread pool
 * The V8 sums and the one-lane FMA chains (GEMM, the trainer's products, weighted sums) are
 * the same operations in every section, so AVX2, AVX-512 and NEON builds give the same
 * bits there; exp, GELU and AdamW give the reference kernels' bits in every build.
 */

/* ==== AVX2 + FMA (x86-64-v3; the 8-lane part of AVX-512 builds too) ==== */
#if KERNELS_SIMD && defined(__AVX2__)
typedef __m256 V8;
#define v8_zero() _mm256_setzero_ps()
#define v8_load(p) _mm256_loadu_ps(p)
#define v8_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define v8_add(a, b) _mm256_add_ps(a, b)

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

static inline void cpu_relax(void) { _mm_pause(); }

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

/* 2^k1 and 2^k2 for integer-valued k, k1 = k / 2 rounded toward 0 as C divides,
 * k2 = k - k1 */
static inline void vec_exp2_halves(Vec k, Vec *f1, Vec *f2) {
    __m256i ki = _mm256_cvttps_epi32(k);
    __m256i k1 = _mm256_srai_epi32(_mm256_add_epi32(ki, _mm256_srli_epi32(ki, 31)), 1);
    __m256i k2 = _mm256_sub_epi32(ki, k1), bias = _mm256_set1_epi32(127);
    *f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    *f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
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

/* ==== AVX-512 (Vec of 16 floats; V8 and cpu_relax are AVX2's, above) ==== */
#if KERNELS_SIMD && defined(__AVX512F__)
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
#define GEMM_NV 2          /* 6 x 2 accumulators of 32 registers */
#define TILE_MR 6          /* rows of C per tile: each loaded vector of B serves 6 FMAs */
#define TILE_NV 4          /* vectors of C's columns per tile: 24 accumulators of 32 registers */

static inline Vec vec_exp_clamp(Vec x) {
    __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    Vec xc = _mm512_min_ps(_mm512_max_ps(x, vec_set1(EXP_X_MIN)), vec_set1(EXP_X_MAX));
    return _mm512_mask_blend_ps(is_nan, xc, vec_zero());
}

static inline void vec_exp2_halves(Vec k, Vec *f1, Vec *f2) {
    __m512i ki = _mm512_cvttps_epi32(k);
    __m512i k1 = _mm512_srai_epi32(_mm512_add_epi32(ki, _mm512_srli_epi32(ki, 31)), 1);
    __m512i k2 = _mm512_sub_epi32(ki, k1), bias = _mm512_set1_epi32(127);
    *f1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23));
    *f2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23));
}

static inline Vec vec_nan_or(Vec x, Vec v) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), v, x);
}
#define vec_max(x, m) _mm512_max_ps(x, m)

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
#if KERNELS_SIMD && defined(__ARM_NEON)
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

static inline void cpu_relax(void) { __asm__ __volatile__("yield"); }

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

static inline void vec_exp2_halves(Vec k, Vec *f1, Vec *f2) {
    int32x4_t ki = vcvtq_s32_f32(k);   /* toward zero */
    int32x4_t k1 = vshrq_n_s32(vaddq_s32(ki, vreinterpretq_s32_u32(
                                                 vshrq_n_u32(vreinterpretq_u32_s32(ki), 31))), 1);
    int32x4_t k2 = vsubq_s32(ki, k1), bias = vdupq_n_s32(127);
    *f1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k1, bias), 23));
    *f2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k2, bias), 23));
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

/* ==== Portable C: no vector instructions ==== */
#if !KERNELS_SIMD
static inline void cpu_relax(void) {}
#define VLANES 8           /* only the trainer's job shapes use these */
#define TILE_MR 4
#define TILE_NV 8
#endif

/* ------------------------------------------------------------------------- */
/* Vector kernels, in the vocabulary above                                     */
#if KERNELS_SIMD

/* A tile's loops over its rows and vectors must unroll completely, or its accumulators stay
 * an array in memory, stored and reloaded at every step (gcc 12 did so in gemm_tile with
 * AVX2: twelve stores beside its twelve FMAs). gcc and clang take this pragma; other
 * compilers may just not unroll. */
#if defined(__GNUC__)
#define TILE_UNROLL _Pragma("GCC unroll 8")
#else
#define TILE_UNROLL
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
    Vec f1, f2;
    vec_exp2_halves(k, &f1, &f2);
    return vec_nan_or(x, vec_mul(vec_mul(p, f1), f2));
}

static inline Vec vec_exp(Vec x) {
    Vec k, r;
    vec_exp_reduce(x, &k, &r);
    return vec_exp_scale(x, k, vec_exp_poly(r));
}

/* y (n,) = vec_exp(x), n <= EXP_BLOCK a multiple of VLANES, y may be x: one stage at a time
 * over all n. A loop of whole exps is latency-bound: each is a chain of ~40 dependent
 * steps, and the out-of-order window, full of their waiting steps, holds only two or three
 * chains. A stage's chain is short, so the window holds many vectors' (2.1x faster for
 * GELU on Zen 4 with AVX2 code). Same operations: the same bits. */
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

/* ---- the dot-product tile (decode) ---- */

/* dot_tile_reference's product with the eight partial sums as the eight lanes of a V8,
 * one FMA per lane and input chunk: R x C accumulators, so each loaded chunk of a row of
 * w serves R rows of x and each chunk of x serves C rows of w. The last chunk of a row,
 * if short, is read as zeros beyond. Called with constant R and C, so the loops unroll
 * and the sums live in registers. The tile stays 8 lanes wide with AVX-512: a single
 * row's product is bound by memory traffic, which 16 lanes do not reduce, and each final
 * sum of 16 lanes costs more. */
static ALWAYS_INLINE void dot_tile_vector(float *out, int ldo, const float *x, const float *w,
                                          int IC, int R, int C) {
    V8 acc[3][8];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = v8_zero();
    int i = 0;
    for (; i + LANES <= IC; i += LANES) {
        for (int c = 0; c < C; c++) {
            V8 w_c = v8_load(w + (size_t)c * IC + i);
            for (int r = 0; r < R; r++)
                acc[r][c] = v8_fma(v8_load(x + (size_t)r * IC + i), w_c, acc[r][c]);
        }
    }
    if (i < IC) {   /* the tail: lanes i .. IC-1 loaded, the rest read as zero */
        for (int c = 0; c < C; c++) {
            V8 w_c = v8_load_first(w + (size_t)c * IC + i, IC - i);
            for (int r = 0; r < R; r++)
                acc[r][c] = v8_fma(v8_load_first(x + (size_t)r * IC + i, IC - i), w_c,
                                   acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) out[(size_t)r * ldo + c] = v8_sum(acc[r][c]);
}

/* out[c * ldo] = x (IC,) . row c of w, for c < S rows of w ldw floats apart: dot_tile_vector
 * with R = 1, C = S (each output's sum is that tile's, bit for bit), but for rows that need
 * not be adjacent. */
static ALWAYS_INLINE void dot_rows_tile(float *out, size_t ldo, const float *x, const float *w,
                                        size_t ldw, int IC, int S) {
    V8 acc[8];
    TILE_UNROLL for (int c = 0; c < S; c++) acc[c] = v8_zero();
    int i = 0;
    for (; i + LANES <= IC; i += LANES) {
        V8 x_i = v8_load(x + i);
        TILE_UNROLL for (int c = 0; c < S; c++)
            acc[c] = v8_fma(x_i, v8_load(w + c * ldw + i), acc[c]);
    }
    if (i < IC) {
        V8 x_i = v8_load_first(x + i, IC - i);
        TILE_UNROLL for (int c = 0; c < S; c++)
            acc[c] = v8_fma(x_i, v8_load_first(w + c * ldw + i, IC - i), acc[c]);
    }
    TILE_UNROLL for (int c = 0; c < S; c++) out[c * ldo] = v8_sum(acc[c]);
}

/* out[c] = x (IC,) . row c of w (C, IC), for c < C, each output's sum the one the eight-row
 * tile makes (bit for bit), for a matrix read from memory: the rows are cut into four
 * quarters, each read in order as one sequential run, and row c of each quarter goes with
 * row c of the others in one tile: four independent sums hide the FMA latency that a
 * single row's one chain of IC / 8 FMAs waits on, while the memory sees four sequential
 * streams. Adjacent rows side by side (two, four or eight: the eight-row tile) read slower
 * from memory here (Zen 4, AVX2 code, loaded machine, s15m greedy, one thread: 115-133
 * tokens/s against 224 row after row); two runs gave 218 against 197 row after row
 * (medians of 9), and four runs against two, on a random s110m (idle, 3 alternated
 * rounds): 52-61 against 50-57 tokens/s at one thread, 73-79 against 69-74 at two. */
static void dot_rows_vector(float *out, const float *x, const float *w, int IC, int C) {
    int quarter = C / 4;
    for (int c = 0; c < quarter; c++)
        dot_rows_tile(out + c, (size_t)quarter, x, w + (size_t)c * IC, (size_t)quarter * IC,
                      IC, 4);
    for (int c = 4 * quarter; c < C; c++)   /* the rows left over */
        dot_rows_tile(out + c, 1, x, w + (size_t)c * IC, 0, IC, 1);
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
#define GEMM_MR 6                      /* rows of w per tile */
#define GEMM_NB (GEMM_NV * VLANES)     /* rows of x per tile: 32 with AVX-512, else 16 */
#define GEMM_KC 1024                   /* input columns per transposed block of x */
#define GEMM_MIN_ROWS (GEMM_NB / 2)    /* fewer rows of x: the dot-product tile is faster */
#define GEMM_COL_BLOCKS 4              /* column blocks per block of rows: few, since each
                                        * job transposes its rows of x once */

/* acc (R, GEMM_NV vectors) for w rows o .. o+R-1 against the NB columns of xt (kc, NB):
 * the sums over i = 0 .. kc-1, added to out (rows n0.., columns o..) unless first, where
 * they are stored; rows >= n1 of the block are padding and are not written. */
static ALWAYS_INLINE void gemm_tile(float *out, const float *xt, const float *w, int kc,
                                    int IC, int OC, int o, int n0, int n1, int first, int R) {
    Vec acc[GEMM_MR][GEMM_NV];
    TILE_UNROLL for (int r = 0; r < R; r++)
        TILE_UNROLL for (int v = 0; v < GEMM_NV; v++) acc[r][v] = vec_zero();
    const float *w_o = w + (size_t)o * IC;
    for (int i = 0; i < kc; i++) {
        Vec x_v[GEMM_NV];
        TILE_UNROLL for (int v = 0; v < GEMM_NV; v++)
            x_v[v] = vec_load(xt + (size_t)i * GEMM_NB + v * VLANES);
        TILE_UNROLL for (int r = 0; r < R; r++) {
            Vec w_ri = vec_broadcast(w_o + (size_t)r * IC + i);
            TILE_UNROLL for (int v = 0; v < GEMM_NV; v++)
                acc[r][v] = vec_fma(w_ri, x_v[v], acc[r][v]);
        }
    }
    float lanes[GEMM_NB];
    TILE_UNROLL for (int r = 0; r < R; r++) {
        TILE_UNROLL for (int v = 0; v < GEMM_NV; v++) vec_store(lanes + v * VLANES, acc[r][v]);
        for (int n = n0; n < n1; n++) {
            float *out_no = out + (size_t)n * OC + o + r;
            *out_no = first ? lanes[n - n0] : *out_no + lanes[n - n0];
        }
    }
}

/* xt (kc, NB) = the first kc columns of x's rows 0 .. rows-1 (row stride IC), transposed:
 * xt[i][j] = x[j][i], zero for the padding rows j >= rows; 8 x 8 blocks where whole. */
_Static_assert(GEMM_NB % 8 == 0, "gemm_pack transposes 8 x 8 blocks");
static void gemm_pack(float *xt, const float *x, int IC, int kc, int rows) {
    for (int j0 = 0; j0 < GEMM_NB; j0 += 8) {
        int i = 0;
        if (j0 + 8 <= rows)
            for (; i + 8 <= kc; i += 8)
                v8_transpose(xt + (size_t)i * GEMM_NB + j0, GEMM_NB, x + (size_t)j0 * IC + i, IC);
        for (int j = j0; j < j0 + 8; j++)
            for (int ii = i; ii < kc; ii++)
                xt[(size_t)ii * GEMM_NB + j] = j < rows ? x[(size_t)j * IC + ii] : 0.0f;
    }
}

/* out[n0 .. n1, o0 .. o1) = x . w^T + b by the broadcast tile, NB rows of x at a time. */
static void gemm_block(float *out, const float *x, const float *w, const float *b, int n0,
                       int n1, int o0, int o1, int IC, int OC) {
    float xt[GEMM_KC * GEMM_NB];   /* (KC, NB) on the stack: 128 KiB (AVX-512), else 64 KiB */
    for (int nb = n0; nb < n1; nb += GEMM_NB) {
        int nb1 = nb + GEMM_NB < n1 ? nb + GEMM_NB : n1;
        for (int k0 = 0; k0 < IC; k0 += GEMM_KC) {
            int kc = IC - k0 < GEMM_KC ? IC - k0 : GEMM_KC;
            gemm_pack(xt, x + (size_t)nb * IC + k0, IC, kc, nb1 - nb);
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

/* ---- the trainer's register tile (its products: "Reference kernels" above) ---- */

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

/* product_chains_reference's chains, each one lane's FMA chain, TILE_MR rows by
 * TILE_COLS columns of C at a time. Each strip of B (kb rows, TILE_COLS columns) is first
 * copied into a contiguous panel: in place, its rows lie ldb floats apart, and when that is
 * a multiple of a few cache lines (128, 384, 512 or 1024 columns) they all fall into a few
 * sets of L1 and evict each other before the next tile of rows reads them again. Copying
 * changes no value, so the bits are the same. */
static void product_chains_vector(const Product *p, const float *a, const float *b, int kb,
                                  int zero, const float *bias, int m0, int m1, int j0,
                                  int j1) {
    _Alignas(64) float panel[TILE_KB * TILE_COLS];   /* 8 KiB (AVX2), 32 KiB (AVX-512) */
    for (int j = j0; j < j1; j += TILE_COLS) {
        int width = j1 - j < TILE_COLS ? j1 - j : TILE_COLS;
        for (int k = 0; k < kb; k++) {
            const float *b_k = b + (size_t)k * p->ldb + j;
            float *panel_k = panel + (size_t)k * TILE_COLS;
            if (width == TILE_COLS)
                for (int v = 0; v < TILE_NV; v++)
                    vec_store(panel_k + v * VLANES, vec_load(b_k + v * VLANES));
            else
                memcpy(panel_k, b_k, (size_t)width * sizeof(float));
        }
        for (int m = m0; m < m1; m += TILE_MR)
            product_tiles(p->c + (size_t)m * p->ldc + j, p->ldc, a + m * p->a_m, p->a_k,
                          p->a_m, panel, TILE_COLS, kb, zero, bias ? bias + j : NULL,
                          m1 - m < TILE_MR ? m1 - m : TILE_MR, width);
    }
}

/* column_sums_reference with each column's chain in a lane, four vectors of columns at a
 * time kept in registers over all N rows (db is read and written once). */
static void column_sums_vector(float *db, const float *dout, int N, int OC, int o0, int o1) {
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

/* ---- norms and activations ---- */

/* norm_stats_reference with the sums in vector lanes (FMA for the variance). */
static void norm_stats_vector(const float *x_n, int C, float *mean, float *rstd) {
    int i = 0;
    Vec acc = vec_zero();
    for (; i + VLANES <= C; i += VLANES) acc = vec_add(acc, vec_load(x_n + i));
    if (i < C) acc = vec_add(acc, vec_load_mask(x_n + i, lane_mask(C - i)));
    float m = vec_sum(acc) / (float)C;
    Vec m_v = vec_set1(m);
    acc = vec_zero();
    for (i = 0; i + VLANES <= C; i += VLANES) {
        Vec d = vec_sub(vec_load(x_n + i), m_v);
        acc = vec_fma(d, d, acc);
    }
    if (i < C) {   /* masked lanes load 0; 0 - m would count, so mask the difference */
        LaneMask tail = lane_mask(C - i);
        Vec d = vec_sub(vec_load_mask(x_n + i, tail), m_v);
        d = vec_blend_zero(tail, d);
        acc = vec_fma(d, d, acc);
    }
    float var = vec_sum(acc) / (float)C;
    *mean = m;
    *rstd = 1.0f / sqrtf(var + KERNELS_NORM_EPS);
}

/* norm_dx_row_reference with the sums in vector lanes. */
static void norm_dx_row_vector(float *dx_n, const float *x_n, const float *dout_n,
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
static size_t gelu_vector(float *out, const float *x, size_t n) {
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

/* swiglu_reference, lane by lane, as gelu_vector (-v as v * -1: exact). */
static size_t swiglu_vector(float *out, const float *hidden, const float *gate, size_t n) {
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

/* gelu_backward_reference, lane by lane, as gelu_vector. */
static size_t gelu_backward_vector(float *dx, const float *x, const float *dout, size_t n) {
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

/* adamw_reference, lane by lane, as gelu_vector (a loop of sqrtf does not vectorise by
 * itself: sqrtf may set errno). */
static size_t adamw_vector(float *param, const float *grad, float *m, float *v, size_t n,
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

/* ---- attention's loops ---- */

/* dot_reference's eight partial sums as a V8's lanes, one FMA each. */
static ALWAYS_INLINE float dot_vector(const float *a, const float *b, int n) {
    V8 acc = v8_zero();
    int i = 0;
    for (; i + LANES <= n; i += LANES) acc = v8_fma(v8_load(a + i), v8_load(b + i), acc);
    if (i < n) acc = v8_fma(v8_load_first(a + i, n - i), v8_load_first(b + i, n - i), acc);
    return v8_sum(acc);
}

/* out[r] = dot_vector(q, row r), eight rows at a time: eight independent FMA chains, one
 * shared reduction; every row's bits are dot_vector's. */
static void dots_vector(float *out, const float *q, const float *k, int stride,
                        const int32_t *rows, int n_rows, int n) {
    int r = 0;
    for (; r + 8 <= n_rows; r += 8) {
        const float *k_r[8];
        V8 acc[8];
        for (int j = 0; j < 8; j++) {
            k_r[j] = k + (long)(rows ? rows[r + j] : r + j) * stride;
            acc[j] = v8_zero();
        }
        int i = 0;
        for (; i + LANES <= n; i += LANES) {
            V8 q_i = v8_load(q + i);
            for (int j = 0; j < 8; j++) acc[j] = v8_fma(q_i, v8_load(k_r[j] + i), acc[j]);
        }
        if (i < n) {
            V8 q_i = v8_load_first(q + i, n - i);
            for (int j = 0; j < 8; j++)
                acc[j] = v8_fma(q_i, v8_load_first(k_r[j] + i, n - i), acc[j]);
        }
        v8_sum_rows(out + r, acc);
    }
    for (; r < n_rows; r++) out[r] = dot_vector(q, k + (long)(rows ? rows[r] : r) * stride, n);
}

/* sum_reference's eight partial sums as a V8's lanes. */
static float sum_vector(const float *x, int n) {
    V8 acc = v8_zero();
    int i = 0;
    for (; i + LANES <= n; i += LANES) acc = v8_add(acc, v8_load(x + i));
    if (i < n) acc = v8_add(acc, v8_load_first(x + i, n - i));
    return v8_sum(acc);
}

/* max_reference with VLANES running maxima, then the lanes and the last values in turn. */
static float max_vector(const float *x, int n, float init) {
    Vec acc = vec_set1(init);
    int i = 0;
    for (; i + VLANES <= n; i += VLANES) acc = vec_max(vec_load(x + i), acc);
    float lanes[VLANES];
    vec_store(lanes, acc);
    return max_reference(x + i, n - i, max_reference(lanes, VLANES, init));
}

/* exp_shift_reference on x (n,), the last values in a masked vector (vec_exp has
 * exp_approx's bits in every lane, so a tail needs no scalar loop). */
static void exp_shift_vector(float *x, int n, float shift) {
    Vec shift_v = vec_set1(shift);
    int j = 0;
    for (int m; (m = exp_block_len((size_t)(n - j))) > 0; j += m) {
        for (int i = 0; i < m; i += VLANES)
            vec_store(x + j + i, vec_sub(vec_load(x + j + i), shift_v));
        exp_block(x + j, x + j, m);
    }
    if (j < n) {
        LaneMask tail = lane_mask(n - j);
        vec_store_mask(x + j, tail, vec_exp(vec_sub(vec_load_mask(x + j, tail), shift_v)));
    }
}

/* dropout_reference on x (n,), VLANES elements at a time, the last in a masked vector. */
static void dropout_vector(float *out, const float *x, size_t n, uint64_t key,
                           uint32_t threshold, float keep_scale) {
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

/* weighted_sum_reference with each out[i] one FMA chain over the rows in order, from 0;
 * a block of columns at a time keeps its sums in registers across the rows. */
static void weighted_sum_vector(float *out, const float *weights, float scale, const float *v,
                                int stride, const int32_t *rows, int n_rows, int n) {
    enum { SUM_VECTORS = 4 };   /* columns per block: 4 vectors */
    int i0 = 0;
    for (; i0 + SUM_VECTORS * VLANES <= n; i0 += SUM_VECTORS * VLANES) {
        Vec acc[SUM_VECTORS];
        for (int j = 0; j < SUM_VECTORS; j++) acc[j] = vec_zero();
        for (int r = 0; r < n_rows; r++) {
            const float *v_r = v + (long)(rows ? rows[r] : r) * stride + i0;
            Vec a = vec_set1(weights[r] * scale);
            for (int j = 0; j < SUM_VECTORS; j++)
                acc[j] = vec_fma(a, vec_load(v_r + j * VLANES), acc[j]);
        }
        for (int j = 0; j < SUM_VECTORS; j++) vec_store(out + i0 + j * VLANES, acc[j]);
    }
    for (; i0 + VLANES <= n; i0 += VLANES) {
        Vec acc = vec_zero();
        for (int r = 0; r < n_rows; r++)
            acc = vec_fma(vec_set1(weights[r] * scale),
                          vec_load(v + (long)(rows ? rows[r] : r) * stride + i0), acc);
        vec_store(out + i0, acc);
    }
    if (i0 < n) {   /* the last columns in one masked vector (a head of 8 with AVX-512) */
        LaneMask tail = lane_mask(n - i0);
        Vec acc = vec_zero();
        for (int r = 0; r < n_rows; r++)
            acc = vec_fma(vec_set1(weights[r] * scale),
                          vec_load_mask(v + (long)(rows ? rows[r] : r) * stride + i0, tail), acc);
        vec_store_mask(out + i0, tail, acc);
    }
}
#endif /* KERNELS_SIMD */

/* ------------------------------------------------------------------------- */
/* Matrix products                                                             */

/* The dot-product tile of this build: vector, or reference. */
static ALWAYS_INLINE void dot_tile(float *out, int ldo, const float *x, const float *w, int IC,
                                   int R, int C) {
#if KERNELS_SIMD
    dot_tile_vector(out, ldo, x, w, IC, R, C);
#else
    dot_tile_reference(out, ldo, x, w, IC, R, C);
#endif
}

/* A single row's product streams a matrix of at least this many bytes as four sequential
 * runs (dot_rows_vector) instead of eight rows at a time. A model this large is read from
 * memory at every token, and one sequential run streams faster than eight interleaved
 * ones (Zen 4, AVX2 code, one thread: s15m 204 -> 355 tokens/s, a random s110m 46 -> 61);
 * the eight-row tile's independent sums win where the weights stay in the caches (the
 * shipped model, whose largest matrix is 256 KiB). The value lies between that and
 * s15m's smallest matrix (324 KiB): a measured choice, not a derived one. */
#define DECODE_STREAM_BYTES (288 << 10)

/* out[n0 .. n1, o0 .. o1) of out (N, OC) = x . w^T + b: one job. A single row (decode)
 * goes against eight rows of w at a time, or as four runs of rows for a large w. Several rows:
 * for each four rows of w, every three rows of x in turn (12 sums in registers), so each
 * row of w comes from memory once and is reused from L1 for all rows of x. Leftovers use
 * smaller tiles, which compute the same sums. */
static void matmul_block(float *out, const float *x, const float *w, const float *b,
                         int n0, int n1, int o0, int o1, int IC, int OC) {
    int o = o0;
    if (n1 - n0 == 1) {
        float *out_n = out + (size_t)n0 * OC;
        const float *x_n = x + (size_t)n0 * IC;
#if KERNELS_SIMD
        if ((size_t)IC * (size_t)OC * sizeof(float) >= DECODE_STREAM_BYTES) {
            dot_rows_vector(out_n + o, x_n, w + (size_t)o * IC, IC, o1 - o);
            o = o1;
        }
#endif
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
#if KERNELS_SIMD
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
#if KERNELS_SIMD
    if (N >= GEMM_MIN_ROWS) {   /* wide column blocks, a multiple of the tile height */
        cols = (OC + GEMM_COL_BLOCKS - 1) / GEMM_COL_BLOCKS;
        cols = (cols + GEMM_MR - 1) / GEMM_MR * GEMM_MR;
    }
#endif
    MatmulJob m = {.out = out, .x = x, .w = w, .b = b, .N = N, .IC = IC, .OC = OC,
                   .cols = cols, .col_blocks = (OC + cols - 1) / cols};
    int row_blocks = (N + BLOCK_ROWS - 1) / BLOCK_ROWS;
    parallel_for(matmul_job, &m, row_blocks * m.col_blocks, (double)N * IC * OC);
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

void kernels_matmul_q8(float *out, const float *x, const QuantMatrix *w, const float *b,
                       int N, int8_t *xq, float *xs) {
    int IC = w->cols, OC = w->rows, cols = block_cols(OC);
    /* the activations in the matrix's groups: xq (N, IC), xs (N, groups), rows apart (each
     * row's groups alone decide its values, so the bits do not depend on the split) */
    QuantizeJob q = {xq, xs, x, N, IC, w->group};
    parallel_for(quantize_job, &q, kernels_jobs((size_t)N, QUANTIZE_ROWS_PER_JOB),
                 (double)N * IC * 4);
    MatmulJob m = {.out = out, .b = b, .q8 = w, .xq = xq, .xs = xs, .N = N, .IC = IC,
                   .OC = OC, .cols = cols, .col_blocks = (OC + cols - 1) / cols};
    /* an int8 weight is a quarter of an fp32 one to stream: count the work accordingly */
    parallel_for(matmul_q8_job, &m, m.col_blocks, (double)N * IC * OC / 4);
}

int kernels_gemm_min_rows(void) {
#if KERNELS_SIMD
    return GEMM_MIN_ROWS;
#else
    return 0;
#endif
}

const char *kernels_isa(void) {
#if KERNELS_SIMD && defined(__AVX512F__)
    return "avx512";
#elif KERNELS_SIMD && defined(__AVX2__)
    return "avx2+fma";
#elif KERNELS_SIMD && defined(__ARM_NEON)
    return "neon";
#else
    return "portable";
#endif
}

/* ---- the trainer's products ---- */

/* C[m0 .. m1, j0 .. j1) of one product: k in blocks of TILE_KB (the first one starts the
 * chains from 0 when storing; the last one adds the bias before its stores). */
static void product_block(const Product *p, int m0, int m1, int j0, int j1) {
    int k0 = 0;
    do {   /* at least once: K = 0 stores zeros (plus the bias) */
        int kb = p->K - k0 < TILE_KB ? p->K - k0 : TILE_KB, zero = p->store && k0 == 0;
        const float *a = p->a + k0 * p->a_k, *b = p->b + (size_t)k0 * p->ldb;
        const float *bias = k0 + kb >= p->K ? p->bias : NULL;
#if KERNELS_SIMD
        product_chains_vector(p, a, b, kb, zero, bias, m0, m1, j0, j1);
#else
        product_chains_reference(p, a, b, kb, zero, bias, m0, m1, j0, j1);
#endif
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
    parallel_for(product_job, &p, product_plan(&p, 0), (double)N * IC * OC);
}

void kernels_product(float *c, int ldc, const float *a, long a_k, long a_m, const float *b,
                     int ldb, int M, int NC, int K, KernelsWrite write) {
    Product p = {.c = c, .a = a, .b = b, .a_k = a_k, .a_m = a_m, .ldc = ldc, .ldb = ldb,
                 .M = M, .NC = NC, .K = K, .store = write == KERNELS_OVERWRITE};
    if (M > 0 && NC > 0) product_block(&p, 0, M, 0, NC);
}

void kernels_transpose(float *dst, const float *src, int rows, int cols) {
    enum { BLOCK = 32 };   /* a 32 x 32 block of each side stays in L1 */
    for (int r0 = 0; r0 < rows; r0 += BLOCK)
        for (int c0 = 0; c0 < cols; c0 += BLOCK) {
            int r1 = r0 + BLOCK < rows ? r0 + BLOCK : rows;
            int c1 = c0 + BLOCK < cols ? c0 + BLOCK : cols;
#if KERNELS_SIMD
            if (r1 - r0 == BLOCK && c1 - c0 == BLOCK) {   /* whole: 8 x 8 in registers */
                for (int r = r0; r < r1; r += 8)
                    for (int c = c0; c < c1; c += 8)
                        v8_transpose(dst + (size_t)c * rows + r, rows,
                                     src + (size_t)r * cols + c, cols);
                continue;
            }
#endif
            for (int c = c0; c < c1; c++)
                for (int r = r0; r < r1; r++) dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
        }
}

/* ------------------------------------------------------------------------- */
/* Matrix product backward (the trainer)                                       */

/* The three parts of a matmul's backward as one list of jobs: dw's first (the longest:
 * each sums over all N rows), then dx's, then db's (blocks of PRODUCT_JOB_COLS entries),
 * so that threads taking jobs in turn finish together; each writes only its own outputs. */
typedef struct {
    Product dx, dw;
    float *db;
    const float *dout;
    int N, OC, dx_jobs, dw_jobs;
} BackwardJob;

static void backward_job(void *ctx, int j) {
    const BackwardJob *g = ctx;
    if (j < g->dw_jobs) {
        product_job((void *)&g->dw, j);
    } else if (j < g->dw_jobs + g->dx_jobs) {
        product_job((void *)&g->dx, j - g->dw_jobs);
    } else {   /* db[o0 .. o1) += column sums of dout */
        int o0 = (j - g->dx_jobs - g->dw_jobs) * PRODUCT_JOB_COLS;
        int o1 = o0 + PRODUCT_JOB_COLS < g->OC ? o0 + PRODUCT_JOB_COLS : g->OC;
#if KERNELS_SIMD
        column_sums_vector(g->db, g->dout, g->N, g->OC, o0, o1);
#else
        column_sums_reference(g->db, g->dout, g->N, g->OC, o0, o1);
#endif
    }
}

void kernels_matmul_backward(float *dx, float *dw, float *db, const float *dout,
                             const float *x, const float *w, int N, int IC, int OC,
                             KernelsWrite dx_write) {
    BackwardJob g = {
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
    parallel_for(backward_job, &g, g.dx_jobs + g.dw_jobs + db_jobs,
                 (double)N * IC * OC * (dx ? 2 : 1));
}

/* ------------------------------------------------------------------------- */
/* Norms and activations                                                       */

void kernels_layernorm(float *out, const float *x, const float *w, const float *b, int N,
                       int C) {
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C;
        float *out_n = out + (size_t)n * C;
        float mean, rstd;   /* the backward's statistics, bit for bit */
#if KERNELS_SIMD
        norm_stats_vector(x_n, C, &mean, &rstd);
#else
        norm_stats_reference(x_n, C, &mean, &rstd);
#endif
        for (int i = 0; i < C; i++) out_n[i] = (x_n[i] - mean) * rstd * w[i] + b[i];
    }
}

/* ---- LayerNorm backward (the trainer) ---- */

/* Arguments of kernels_layernorm_backward, for its jobs. */
typedef struct {
    float *dx, *dw, *db, *mean, *rstd;
    const float *dout, *x, *w;
    int N, C, row_jobs;
} NormBackward;

/* Rows of dx, and each row's mean and rstd for the columns. */
static void norm_backward_rows(void *ctx, int j) {
    const NormBackward *f = ctx;
    int C = f->C, n1 = (j + 1) * NORM_ROWS_PER_JOB;
    if (n1 > f->N) n1 = f->N;
    for (int n = j * NORM_ROWS_PER_JOB; n < n1; n++) {
        const float *x_n = f->x + (size_t)n * C, *dout_n = f->dout + (size_t)n * C;
        float *dx_n = f->dx + (size_t)n * C;
        float m, r;
#if KERNELS_SIMD
        norm_stats_vector(x_n, C, &m, &r);
        norm_dx_row_vector(dx_n, x_n, dout_n, f->w, C, m, r);
#else
        norm_stats_reference(x_n, C, &m, &r);
        norm_dx_row_reference(dx_n, x_n, dout_n, f->w, C, m, r);
#endif
        f->mean[n] = m;
        f->rstd[n] = r;
    }
}


/* Columns i0 .. of dw and db: sums over rows n in increasing order, vectorisable over i. */
static void norm_backward_columns(void *ctx, int j) {
    const NormBackward *f = ctx;
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
    NormBackward f = {dx, dw, db, mean, rstd, dout, x, w, N, C,
                      (N + NORM_ROWS_PER_JOB - 1) / NORM_ROWS_PER_JOB};
    /* first every row (dx, and the statistics the columns need), then the columns */
    parallel_for(norm_backward_rows, &f, f.row_jobs, (double)N * C * 4);
    parallel_for(norm_backward_columns, &f,
                 (C + NORM_COLS_PER_JOB - 1) / NORM_COLS_PER_JOB, (double)N * C * 2);
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

float kernels_expf(float x) { return exp_approx(x); }

void kernels_gelu(float *out, const float *x, size_t n) {
    size_t i = 0;
#if KERNELS_SIMD
    i = gelu_vector(out, x, n);
#endif
    gelu_reference(out + i, x + i, n - i);
}

void kernels_gelu_backward(float *dx, const float *x, const float *dout, size_t n) {
    size_t i = 0;
#if KERNELS_SIMD
    i = gelu_backward_vector(dx, x, dout, n);
#endif
    gelu_backward_reference(dx + i, x + i, dout + i, n - i);
}

void kernels_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                   const KernelsAdamW *h) {
    size_t i = 0;
#if KERNELS_SIMD
    i = adamw_vector(param, grad, m, v, n, h);
#endif
    adamw_reference(param + i, grad + i, m + i, v + i, n - i, h);
}

void kernels_swiglu(float *out, const float *hidden, const float *gate, size_t n) {
    size_t i = 0;
#if KERNELS_SIMD
    i = swiglu_vector(out, hidden, gate, n);
#endif
    swiglu_reference(out + i, hidden + i, gate + i, n - i);
}

/* ------------------------------------------------------------------------- */
/* Attention's loops                                                           */

float kernels_dot(const float *a, const float *b, int n) {
#if KERNELS_SIMD
    return dot_vector(a, b, n);
#else
    return dot_reference(a, b, n);
#endif
}

void kernels_dots(float *out, const float *q, const float *k, int stride, const int32_t *rows,
                  int n_rows, int n) {
#if KERNELS_SIMD
    dots_vector(out, q, k, stride, rows, n_rows, n);
#else
    for (int r = 0; r < n_rows; r++)
        out[r] = dot_reference(q, k + (long)(rows ? rows[r] : r) * stride, n);
#endif
}

float kernels_max(const float *x, int n, float init) {
#if KERNELS_SIMD
    return max_vector(x, n, init);
#else
    return max_reference(x, n, init);
#endif
}

float kernels_exp_sum(float *x, int n, float shift) {
#if KERNELS_SIMD
    exp_shift_vector(x, n, shift);
    return sum_vector(x, n);
#else
    exp_shift_reference(x, n, shift);
    return sum_reference(x, n);
#endif
}

void kernels_weighted_sum(float *out, const float *weights, float scale, const float *v,
                          int stride, const int32_t *rows, int n_rows, int n) {
#if KERNELS_SIMD
    weighted_sum_vector(out, weights, scale, v, stride, rows, n_rows, n);
#else
    weighted_sum_reference(out, weights, scale, v, stride, rows, n_rows, n);
#endif
}

void kernels_dropout(float *out, const float *x, size_t n, float p, uint64_t key) {
    uint32_t threshold = (uint32_t)hash_threshold(p);
    float keep_scale = 1.0f / (1.0f - p);
#if KERNELS_SIMD
    dropout_vector(out, x, n, key, threshold, keep_scale);
#else
    dropout_reference(out, x, n, key, threshold, keep_scale);
#endif
}

int kernels_all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* pool.c: the thread pool behind kernels_run and kernels_parallel_for (pool.h).
 *
 * Nothing here computes: it decides which thread runs which job of a loop, and the jobs
 * decide everything else, so results never depend on it. Read kernels.c first; come here
 * only to see how the jobs reach the threads.
 */
#include "pool.h"

#include <ctype.h>        /* isdigit, isspace: reading OMP_NUM_THREADS */
#include <errno.h>        /* errno, ERANGE */
#include <limits.h>       /* INT_MAX */
#include <pthread.h>      /* the pool's workers without OpenMP; its lock and condition */
#include <sched.h>        /* sched_yield */
#include <stdatomic.h>    /* the pool's ticket and counters */
#include <stddef.h>       /* size_t */
#include <stdint.h>       /* uint64_t */
#include <stdio.h>        /* snprintf: a count put back into OMP_NUM_THREADS */
#include <stdlib.h>       /* getenv, setenv, strtol, strtoull */
#include <string.h>       /* strdup */
#ifdef _OPENMP
#include <omp.h>          /* omp_set_num_threads, omp_get_max_threads */
#endif

#include "os.h"           /* os_usable_cpus: the cores */
#include "simd/simd.h"    /* simd_pause: the spin-wait hint of this build's instruction set */

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
                                             * gives other threads 512 KiB; the int8
                                             * GEMM keeps 644 KiB of packed rows on the
                                             * stack, 716 KiB with its staged order) */

#define POOL_STACK_TOUCH ((size_t)768 << 10)  /* stack each thread of kernels_run writes
                                               * first (pool_touch_stack): the kernels'
                                               * stack buffers (up to 716 KiB) and the
                                               * frames above them (the int8 GEMM's
                                               * lowest array ends 719 KiB below
                                               * pool_main's frame);
                                               * no more, so that a thread whose stack
                                               * holds the kernels holds this too */

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

/* Writes a byte in each page of the POOL_STACK_TOUCH bytes of stack below the caller, so
 * that the system maps them now: otherwise the first prompt's first products and attention
 * take a page fault for each 4 KiB of their stack buffers (the fp32 GEMM's 64-256 KiB of
 * packed rows, the int8 GEMM's up to 716 KiB) on every thread, one at a time, which made
 * the first product two to six times as slow as the next layers'. Never inlined: the
 * array's frame must be gone before the kernels' frames take its place. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void pool_touch_stack(void) {
    volatile unsigned char stack[POOL_STACK_TOUCH];
    for (size_t i = 0; i < sizeof stack; i += 4096) stack[i] = 0;   /* 4 KiB: the smallest page */
}

/* A worker: claim jobs whenever a loop is published, until main says stop. After a
 * while with nothing to do it sleeps until main publishes again. A sleeping thread is
 * not runnable, so on a machine where another process keeps a core busy it does not
 * push main off its core; and when woken, the scheduler runs it at once, taking the
 * time from the other process rather than from main. */
static void pool_worker(void) {
    long idle = 0;
    pool_touch_stack();
    while (!atomic_load_explicit(&pool.stop, memory_order_acquire)) {
        if (pool_claim(1) > 0) {
            idle = 0;
        } else if (++idle > POOL_SPINS_BEFORE_YIELD) {
            pool_sleep();
            idle = 0;
        } else {
            simd_pause();
        }
    }
}

/* Main's part of kernels_run: body with the pool active, then every worker told to stop
 * (one about to sleep sees `stop` under the lock; one asleep is woken). */
static void pool_main(void (*body)(void *ctx), void *ctx) {
    pool.active = 1;
    pool_touch_stack();
    body(ctx);
    pool.active = 0;
    atomic_store(&pool.stop, 1);
    pthread_mutex_lock(&pool.lock);
    pool.wakes++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
}

/* The cores this process may use (os_usable_cpus: taskset and cpusets count, as for
 * OpenMP's omp_get_num_procs), at most POOL_MAX_THREADS: what a count asked for is
 * capped at. */
static int pool_cores(void) {
    int n = os_usable_cpus();
    return n > POOL_MAX_THREADS ? POOL_MAX_THREADS : n;
}

/* The threads when nobody asks for a count: pool_cores, at most a cgroup's CPU quota
 * (os_quota_cpus, which OpenMP's own default does not count). */
static int pool_default_threads(void) {
    int n = os_quota_cpus();
    return n > POOL_MAX_THREADS ? POOL_MAX_THREADS : n;
}

#ifndef _OPENMP
/* A worker thread of kernels_run (without OpenMP). */
static void *pool_thread(void *unused) {
    (void)unused;
    pool_worker();
    return NULL;
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
        if (errno == ERANGE || n > INT_MAX) n = INT_MAX;   /* as many as can be: capped */
        if (n < 1) return -1;
        if (!first) first = (int)n;
        for (s = end; isspace((unsigned char)*s); s++) {}
        if (*s == '\0') return first;
        if (*s++ != ',') return -1;
    }
}

/* The threads kernels_run uses without OpenMP: kernels_set_threads's number, else, as
 * OpenMP would start, OMP_NUM_THREADS's (read once), else every core. An invalid
 * OMP_NUM_THREADS is ignored, as OpenMP's runtime does (pool_cap_threads tells the
 * program, which says so). */
static int env_threads(void) {
    if (pool.threads > 0) return pool.threads;
    const char *env = getenv("OMP_NUM_THREADS");
    int asked = env ? parse_num_threads(env) : 0;
    pool.threads = asked > 0 ? asked : pool_default_threads();
    return pool.threads;
}
#endif /* !_OPENMP */

/* Runs job(ctx, j) for j = 0 .. n_jobs-1, each writing only its own outputs; `work`
 * (multiply-adds, or the like) decides whether sharing pays: on the pool from
 * POOL_MIN_WORK, in an OpenMP region from POOL_PARALLEL_MIN_MACS (without
 * OpenMP the pragma is ignored and the loop runs here), else here. */
void pool_parallel_for(PoolJob job, void *ctx, int n_jobs, double work) {
    int parallel = work >= POOL_PARALLEL_MIN_MACS;
    if (in_job) parallel = 0;   /* a loop inside a job: this thread does it all */
    else if (pool.active && work >= POOL_MIN_WORK && n_jobs > 1 &&
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
            else simd_pause();
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

int pool_set_threads(int n) {
    int max = pool_cores();
    if (n < 1) n = 1;
    if (n > max) n = max;
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    pool.threads = n;
#endif
    return n;
}

#ifdef _OPENMP
/* The first count of OMP_NUM_THREADS (env) if it is a number above limit (one past INT_MAX
 * as INT_MAX), else 0. */
static int count_above(const char *env, int limit) {
    while (isspace((unsigned char)*env)) env++;
    if (!isdigit((unsigned char)*env)) return 0;
    errno = 0;
    unsigned long long n = strtoull(env, NULL, 10);
    if (errno == ERANGE || n > INT_MAX) return INT_MAX;
    return n > (unsigned long long)limit ? (int)n : 0;
}
#endif

int pool_cap_threads(void) {
#ifdef _OPENMP
    /* clang's OpenMP runtime (libomp) reads OMP_NUM_THREADS at its first call and aborts on
     * a count it cannot start (99999999999); gcc's read it at load. A count above the cores
     * is lowered to them for that first call, then put back as given (the note names it) */
    const char *env = getenv("OMP_NUM_THREADS");
    int cores = pool_cores(), above = env ? count_above(env, cores) : 0;
    char *given = above ? strdup(env) : NULL, count[16];
    if (given) {
        snprintf(count, sizeof count, "%d", cores);
        setenv("OMP_NUM_THREADS", count, 1);
    }
    int asked = omp_get_max_threads();
    if (given) setenv("OMP_NUM_THREADS", given, 1);
    free(given);
    if (!env || !count_above(env, 0)) {   /* no count (or one OpenMP rejects): its default,
                                           * every core, lowered to a cgroup's quota */
        int quota = pool_default_threads();
        if (asked > quota) omp_set_num_threads(quota);
        return 0;
    }
    if (asked <= cores) return above;
    omp_set_num_threads(cores);
#else
    const char *env = getenv("OMP_NUM_THREADS");
    int asked = env_threads(), cores = pool_cores();
    if (env && parse_num_threads(env) < 0) return POOL_THREADS_INVALID;
    if (asked <= cores) return 0;
    pool.threads = cores;
#endif
    return asked;
}

int pool_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return env_threads();
#endif
}

void pool_run(void (*body)(void *ctx), void *ctx) {
    int threads = pool_threads();
    if (threads < 2 || in_job || pool.active) {   /* one thread, or already on the pool */
        if (!in_job && !pool.active) pool_touch_stack();
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

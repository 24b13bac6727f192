/* pool.h: how the kernels run a loop of independent jobs on several threads.
 *
 * The engine reaches this file only through kernels.h (kernels_run, kernels_parallel_for,
 * kernels_set_threads ...), which forwards each call here: a reader of the engine can take
 * a parallel loop as "run job(ctx, j) for every j, each writing its own outputs" and never
 * open this folder. Without OpenMP the same loops run on POSIX threads. Replacing pool.c
 * by a plain `#pragma omp parallel for` over the jobs keeps every result: which thread runs
 * a job never changes what it computes.
 */
#ifndef POOL_H
#define POOL_H

#ifndef POOL_PARALLEL_MIN_MACS
#define POOL_PARALLEL_MIN_MACS (1L << 17)  /* outside pool_run (OpenMP builds), smaller loops
                                            * run on one thread: starting a parallel region
                                            * costs more than a second thread saves */
#endif
#ifndef POOL_MIN_WORK
#define POOL_MIN_WORK (1L << 14)           /* inside pool_run, the pool hands out jobs for
                                            * loops from this size: a job costs an atomic,
                                            * not a thread start */
#endif

/* kernels_set_threads, kernels_cap_threads, kernels_threads, kernels_run and
 * kernels_parallel_for (kernels.h), whose contracts these are. */
int pool_set_threads(int n);
int pool_cap_threads(void);
#define POOL_THREADS_INVALID (-1)   /* pool_cap_threads: OMP_NUM_THREADS is no count */
int pool_threads(void);
void pool_run(void (*body)(void *ctx), void *ctx);
void pool_parallel_for(void (*job)(void *ctx, int j), void *ctx, int n_jobs, double work);

#endif /* POOL_H */

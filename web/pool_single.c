/* pool_single.c: parallel/pool.h on one thread, for the web build (web/), whose target
 * (wasm32-wasi) has no threads: the same API as parallel/pool.c, every loop a plain loop
 * on the calling thread. Which thread runs a job never changes what it computes (pool.h),
 * so the page computes what ./run computes.
 */
#include "pool.h"

int pool_set_threads(int n) {
    (void)n;
    return 1;
}

int pool_cap_threads(void) { return 0; }

int pool_threads(void) { return 1; }

void pool_run(void (*body)(void *ctx), void *ctx) { body(ctx); }

void pool_parallel_for(void (*job)(void *ctx, int j), void *ctx, int n_jobs, double work) {
    (void)work;
    for (int j = 0; j < n_jobs; j++) job(ctx, j);
}

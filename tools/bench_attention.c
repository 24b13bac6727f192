/* bench_attention.c: attention-only cost of one generated token at context T, for
 * every variant, on synthetic q/k/v with GPT-2 small's head layout (12 heads of 64).
 *
 * For each T the state is filled with T positions by append-only steps (no
 * attention computed, so T = 16384 is cheap to reach, beyond any model's context),
 * then REPEATS x DECODE_STEPS single-token steps are timed; the fastest repetition
 * counts. Exact attention's cost per token
 * grows with T; window, dilated and the recurrent variants stay flat (docs/attention.md
 * §3, §5). Then exact attention over whole prompts of T = 256 .. 4096 tokens at once (the
 * prefill's attention), and one token over a model's KV caches in floats and in halves.
 * Prints markdown tables; asserts nothing. Usage: bench_attention
 * [max_T]. Run with OMP_NUM_THREADS=1 on a busy machine.
 */
#include <stdio.h>     /* printf */
#include <stdint.h>    /* uint16_t */
#include <stdlib.h>    /* malloc, strtol */
#include <time.h>      /* clock_gettime */

#include "attention.h"        /* attention_step and the configs */
#include "kernels.h"          /* kernels_to_half */
#include "os.h"               /* os_alloc_zeroed: the engine's huge pages */
#include "attention_spec.h"   /* attention_spec_parse */

#define BENCH_HEADS 12        /* GPT-2 small: 12 heads of 64 */
#define BENCH_HEAD_DIM 64
#define DECODE_STEPS 32       /* timed tokens per repetition */
#define REPEATS 3             /* repetitions; the fastest is reported (least disturbed) */
#define FILL_CHUNK 256        /* positions per append-only step */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned long long state = 88172645463325252ULL;
static float uniform(void) {   /* xorshift64 -> [-1, 1) */
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (float)(state >> 40) / 8388608.0f - 1.0f;
}

/* Exact attention over a whole prompt of T tokens at once (a prefill: query t reads keys
 * 0 .. t), as the engine runs it (attention_forward_cache over a KV cache of (12, T, 64)),
 * all 12 heads of one layer: milliseconds and GFLOP/s (two multiply-adds per head, query,
 * visible key and dimension), the fastest of REPEATS. */
static int bench_prompts(const AttentionShape *shape, int max_t) {
    static const int lengths[] = {256, 1024, 4096};
    int width = shape->n_heads * shape->head_dim;
    printf("\n| exact, a prompt at once | ms | GFLOP/s |\n|---|---|---|\n");
    for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++) {
        int T = lengths[t];
        if (T > max_t) continue;
        size_t n = (size_t)T * (size_t)width;
        float *qkv = malloc(3 * n * sizeof(float)), *out = malloc(n * sizeof(float));
        float *scratch = malloc(attention_scratch_floats(shape, T) * sizeof(float));
        if (!qkv || !out || !scratch) return 1;
        for (size_t i = 0; i < 3 * n; i++) qkv[i] = uniform();
        double best = 1e300;
        for (int r = 0; r < REPEATS; r++) {
            double start = now();
            attention_forward_cache(shape, out, qkv, qkv + n, qkv + 2 * n, T, 0, T, scratch);
            double took = now() - start;
            if (took < best) best = took;
        }
        double flops = 4.0 * width * ((double)T * (T + 1) / 2);
        printf("| T=%d | %.2f | %.1f |\n", T, best * 1e3, flops / best * 1e-9);
        fflush(stdout);
        free(qkv); free(out); free(scratch);
    }
    return 0;
}

/* Exact attention of one generated token over the KV caches of CACHE_LAYERS layers, as the
 * engine keeps them ((NKV, n_alloc, HS) per layer, on huge pages where the system has them;
 * together larger than the last-level cache from T = 512 on, as a model's), in floats and
 * in halves (--cache-type f16): milliseconds per token, the fastest of REPEATS runs of
 * DECODE_STEPS tokens, f32 and f16 runs alternated; then the speed-up. */
#define CACHE_LAYERS 12
static int bench_cache_types(const AttentionShape *shape, int max_t) {
    static const int lengths[] = {128, 512, 1024, 4096};
    int width = shape->n_heads * shape->head_dim;
    printf("\n| exact, one token over %d layers' KV caches | f32 ms | f16 ms | f16 speed-up |\n"
           "|---|---|---|---|\n", CACHE_LAYERS);
    for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++) {
        int T = lengths[t];
        if (T > max_t) continue;
        size_t layer = (size_t)T * (size_t)width, all = CACHE_LAYERS * layer;
        float *k = os_alloc_zeroed(all, sizeof(float)), *v = os_alloc_zeroed(all, sizeof(float));
        uint16_t *k_half = os_alloc_zeroed(all, sizeof(uint16_t));
        uint16_t *v_half = os_alloc_zeroed(all, sizeof(uint16_t));
        float *q = malloc((size_t)width * sizeof(float));
        float *out = malloc((size_t)width * sizeof(float));
        float *scratch = malloc(attention_half_scratch_floats(shape, T) * sizeof(float));
        if (!k || !v || !k_half || !v_half || !q || !out || !scratch) return 1;
        for (size_t i = 0; i < all; i++) { k[i] = uniform(); v[i] = uniform(); }
        for (int i = 0; i < width; i++) q[i] = uniform();
        kernels_to_half(k_half, k, all);
        kernels_to_half(v_half, v, all);
        double best[2] = {1e300, 1e300};
        for (int r = 0; r < REPEATS; r++)
            for (int half = 0; half < 2; half++) {
                double start = now();
                for (int i = 0; i < DECODE_STEPS; i++)
                    for (int l = 0; l < CACHE_LAYERS; l++) {
                        size_t at = (size_t)l * layer;
                        if (half)
                            attention_forward_cache_half(shape, out, q, k_half + at, v_half + at,
                                                         T, T - 1, 1, scratch);
                        else
                            attention_forward_cache(shape, out, q, k + at, v + at, T, T - 1, 1,
                                                    scratch);
                    }
                double took = (now() - start) / DECODE_STEPS;
                if (took < best[half]) best[half] = took;
            }
        printf("| T=%d | %.3f | %.3f | %.2fx |\n", T, best[0] * 1e3, best[1] * 1e3,
               best[0] / best[1]);
        fflush(stdout);
        os_free_zeroed(k); os_free_zeroed(v); os_free_zeroed(k_half); os_free_zeroed(v_half);
        free(q); free(out); free(scratch);
    }
    return 0;
}

int main(int argc, char **argv) {
    static const char *const specs[] = {
        "exact", "gauss", "softmax1", "window:w=256,sinks=4", "dilated:w=128,k=2",
        "strided:l=32", "fixed:l=128,c=32", "lsh:buckets=16,rounds=4",
        "lsh:buckets=64,rounds=2", "linear", "efficient", "performer:m=256"};
    static const int lengths[] = {128, 512, 1024, 4096, 16384};
    int max_t = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 16384;
    AttentionShape shape = {BENCH_HEADS, BENCH_HEADS, BENCH_HEAD_DIM, 0.125f};
    int width = BENCH_HEADS * BENCH_HEAD_DIM;
    float *k = malloc((size_t)FILL_CHUNK * width * sizeof(float));
    float *v = malloc((size_t)FILL_CHUNK * width * sizeof(float));
    float *q = malloc((size_t)width * sizeof(float)), *out = malloc((size_t)width * sizeof(float));
    if (!k || !v || !q || !out) return 1;
    for (int i = 0; i < FILL_CHUNK * width; i++) { k[i] = uniform(); v[i] = uniform(); }
    for (int i = 0; i < width; i++) q[i] = uniform();
    printf("| variant | state at T=16384 (MB, 1 layer) |");
    for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++)
        if (lengths[t] <= max_t) printf(" T=%d |", lengths[t]);
    printf("\n|---|---|");
    for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++)
        if (lengths[t] <= max_t) printf("---|");
    printf("\n");
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        AttentionConfig cfg;
        char err[256];
        if (attention_spec_parse(specs[s], &cfg, err, sizeof err) != 0) {
            fprintf(stderr, "bench_attention: %s\n", err);
            return 1;
        }
        size_t big = attention_state_bytes(&cfg, &shape, 16384);
        printf("| `%s` | %.1f |", specs[s], (double)big / 1e6);
        for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++) {
            int T = lengths[t], n_alloc = T + REPEATS * DECODE_STEPS;
            if (T > max_t) continue;
            void *st = malloc(attention_state_bytes(&cfg, &shape, n_alloc));
            float *scratch = malloc(attention_step_scratch_floats(&cfg, &shape, n_alloc) *
                                    sizeof(float));
            if (!st || !scratch || attention_state_init(&cfg, &shape, n_alloc, 0, st) != 0)
                return 1;
            for (int pos = 0; pos < T; pos += FILL_CHUNK) {   /* fill: append only */
                int n = T - pos < FILL_CHUNK ? T - pos : FILL_CHUNK;
                attention_step(&cfg, &shape, st, n_alloc, NULL, NULL, k, v, pos, n, scratch);
            }
            double us = 1e300;
            for (int r = 0; r < REPEATS; r++) {
                double start = now();
                for (int i = 0; i < DECODE_STEPS; i++)
                    attention_step(&cfg, &shape, st, n_alloc, out, q, k + (size_t)i * width,
                                   v + (size_t)i * width, T + r * DECODE_STEPS + i, 1, scratch);
                double took = (now() - start) / DECODE_STEPS * 1e6;
                if (took < us) us = took;
            }
            printf(" %.0f |", us);
            fflush(stdout);
            free(st);
            free(scratch);
        }
        printf("\n");
    }
    printf("\nmicroseconds per generated token (attention only, all 12 heads of one layer)\n");
    free(k); free(v); free(q); free(out);
    return bench_prompts(&shape, max_t) || bench_cache_types(&shape, max_t);
}

/* fuzz_attn_spec.c: fuzz target for attention_spec_parse (--attn NAME[:key=value,...])
 * on the input as a NUL-terminated string.
 *
 * A spec that parses must format (attention_spec_format) into one that fits run.c's
 * 160-byte buffer, parses back to the same config (tau to %g's 6 digits) and formats to
 * the same text. Then, on a small head layout picked by the input's length, the variant's
 * state is sized, initialised and stepped: a prefill in chunks must give the same bits
 * as one token at a time, and a position past the context must be refused. A rejected
 * spec must say why, even into a tiny message buffer. No model is involved.
 */
#include <math.h>        /* isfinite, fabsf */
#include <stdlib.h>      /* malloc, free */
#include <string.h>      /* memcpy, memcmp, strlen, strcmp */

#include "tests/fuzz/fuzz.h"   /* the entry points, FUZZ_CHECK */
#include "attention.h"   /* AttentionConfig, attention_state_bytes, attention_step */
#include "attention_spec.h"   /* attention_spec_parse, attention_spec_format */

#define ERR_CAP 512            /* message buffer of the main parse */
#define ERR_SMALL_CAPS 8       /* a second parse writes into 1..8 bytes */
#define FORMAT_CAP 512         /* big enough for any canonical spec */
#define RUN_SPEC_CAP 160       /* run.c's evaluate() formats the spec into char[160] */
#define TAU_RTOL 1e-5f         /* %g keeps 6 significant digits: relative error <= 5e-6 */
#define STEP_MAX_STATE_BYTES (1 << 20)   /* larger states are sized but not stepped */
#define MAX_CHUNK 4            /* prefill chunks of 1..4 tokens, by input length */
#define INPUT_AMPLITUDE 2.0f   /* q, k, v entries lie in [-2, 2) */
#define KNUTH_MULT 2654435761u /* 2^32 / golden ratio (Knuth, TAOCP 6.4) */
#define PATTERN_BITS 16        /* the pattern's resolution */
#define PATTERN_SHIFT 16       /* 32 - PATTERN_BITS: keep the hash's top bits */

/* Head layouts: NH, NKV, HS, and n_alloc, the positions the state holds. */
static const struct { int n_heads, n_kv_heads, head_dim, n_alloc; } SHAPES[] = {
    {2, 1, 4, 16}, {1, 1, 2, 5}, {4, 2, 8, 33},
};
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0] };

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

/* 1 if a and b are the same config (tau within TAU_RTOL). */
static int same_config(const AttentionConfig *a, const AttentionConfig *b) {
    return a->kind == b->kind && a->softmax1 == b->softmax1 && a->unscaled == b->unscaled &&
           fabsf(a->tau - b->tau) <= TAU_RTOL * a->tau && a->window == b->window &&
           a->sinks == b->sinks && a->dilation == b->dilation && a->stride == b->stride &&
           a->summary == b->summary && a->buckets == b->buckets && a->rounds == b->rounds &&
           a->local == b->local && a->features == b->features &&
           a->orthogonal == b->orthogonal && a->prescale == b->prescale && a->seed == b->seed;
}

/* x (n,) = a fixed pattern in [-INPUT_AMPLITUDE, INPUT_AMPLITUDE) that differs per i and
 * per salt: the top bits of a multiplicative (Knuth) hash. */
static void fill(float *x, size_t n, unsigned salt) {
    for (size_t i = 0; i < n; i++) {
        uint32_t h = (uint32_t)(i + 1) * KNUTH_MULT ^ salt * KNUTH_MULT;
        float unit = (float)(h >> PATTERN_SHIFT) / (float)(1u << PATTERN_BITS);   /* [0, 1) */
        x[i] = INPUT_AMPLITUDE * (2.0f * unit - 1.0f);
    }
}

/* Sizes, initialises and steps cfg's state on shape s: chunked prefill vs single steps. */
static void check_steps(const AttentionConfig *cfg, int s, int chunk) {
    AttentionShape shape = {SHAPES[s].n_heads, SHAPES[s].n_kv_heads, SHAPES[s].head_dim, 0.0f};
    int n_alloc = SHAPES[s].n_alloc;
    shape.scale = 1.0f / sqrtf((float)shape.head_dim);
    size_t bytes = attention_state_bytes(cfg, &shape, n_alloc);
    size_t scratch_floats = attention_step_scratch_floats(cfg, &shape, n_alloc);
    FUZZ_CHECK((bytes == 0) == (scratch_floats == 0));
    if (bytes == 0 || bytes > STEP_MAX_STATE_BYTES) return;
    size_t D = (size_t)shape.n_heads * (size_t)shape.head_dim;
    size_t KVD = (size_t)shape.n_kv_heads * (size_t)shape.head_dim, T = (size_t)n_alloc;
    void *state_a = malloc(bytes), *state_b = malloc(bytes);
    float *scratch = malloc(scratch_floats * sizeof(float));
    float *q = malloc(T * D * sizeof(float)), *k = malloc(T * KVD * sizeof(float));
    float *v = malloc(T * KVD * sizeof(float));
    float *out_a = malloc(T * D * sizeof(float)), *out_b = malloc(T * D * sizeof(float));
    if (!state_a || !state_b || !scratch || !q || !k || !v || !out_a || !out_b)
        fuzz_fail("out of memory for a %zu-byte attention state", bytes);
    fill(q, T * D, 1u);
    fill(k, T * KVD, 2u);
    fill(v, T * KVD, 3u);
    FUZZ_CHECK(attention_state_init(cfg, &shape, n_alloc, 0, state_a) == 0);
    FUZZ_CHECK(attention_state_init(cfg, &shape, n_alloc, 0, state_b) == 0);
    for (int pos = 0; pos < n_alloc; pos += chunk) {   /* a: prefill in chunks */
        int n = n_alloc - pos < chunk ? n_alloc - pos : chunk;
        FUZZ_CHECK(attention_step(cfg, &shape, state_a, n_alloc, out_a + (size_t)pos * D,
                                  q + (size_t)pos * D, k + (size_t)pos * KVD,
                                  v + (size_t)pos * KVD, pos, n, scratch) == 0);
    }
    for (int pos = 0; pos < n_alloc; pos++) {          /* b: one token at a time */
        FUZZ_CHECK(attention_step(cfg, &shape, state_b, n_alloc, out_b + (size_t)pos * D,
                                  q + (size_t)pos * D, k + (size_t)pos * KVD,
                                  v + (size_t)pos * KVD, pos, 1, scratch) == 0);
    }
    for (size_t i = 0; i < T * D; i++) FUZZ_CHECK(isfinite(out_a[i]));
    if (memcmp(out_a, out_b, T * D * sizeof(float)) != 0)
        fuzz_fail("prefill in chunks of %d differs from single steps", chunk);
    /* the context is full: one more position is refused and writes nothing */
    FUZZ_CHECK(attention_step(cfg, &shape, state_a, n_alloc, out_a, q, k, v, n_alloc, 1,
                              scratch) == -1);
    free(state_a);
    free(state_b);
    free(scratch);
    free(q);
    free(k);
    free(v);
    free(out_a);
    free(out_b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *spec = malloc(size + 1), err[ERR_CAP];
    if (!spec) fuzz_fail("out of memory for %zu bytes", size);
    if (size) memcpy(spec, data, size);
    spec[size] = '\0';
    AttentionConfig cfg, again;
    int status = attention_spec_parse(spec, &cfg, err, sizeof err);
    /* the same parse into an exactly-sized small buffer: a sanitizer sees any overrun */
    size_t small_cap = 1 + size % ERR_SMALL_CAPS;
    char *small = malloc(small_cap);
    if (!small) fuzz_fail("out of memory");
    FUZZ_CHECK(attention_spec_parse(spec, &again, small, small_cap) == status);
    FUZZ_CHECK(status == 0 || strlen(small) < small_cap);
    free(small);
    if (status != 0) {
        FUZZ_CHECK(status == -1 && strlen(err) > 0);
        free(spec);
        return 0;
    }
    char *text = malloc(FORMAT_CAP), *text_again = malloc(FORMAT_CAP);
    if (!text || !text_again) fuzz_fail("out of memory");
    attention_spec_format(&cfg, text, FORMAT_CAP);
    if (strlen(text) >= RUN_SPEC_CAP)
        fuzz_fail("canonical spec of %zu bytes does not fit run.c's %d: %s", strlen(text),
                  RUN_SPEC_CAP, text);
    if (attention_spec_parse(text, &again, err, sizeof err) != 0)
        fuzz_fail("canonical spec '%s' (of '%s') does not parse: %s", text, spec, err);
    if (!same_config(&cfg, &again))
        fuzz_fail("canonical spec '%s' (of '%s') parses to another config", text, spec);
    attention_spec_format(&again, text_again, FORMAT_CAP);
    if (strcmp(text, text_again) != 0)
        fuzz_fail("format is not a fixed point: '%s' then '%s'", text, text_again);
    check_steps(&cfg, (int)(size % N_SHAPES), 1 + (int)(size % MAX_CHUNK));
    free(text);
    free(text_again);
    free(spec);
    return 0;
}

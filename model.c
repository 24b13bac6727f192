/* model.c: load a GPT-2 checkpoint, keep its KV cache, run its forward pass.
 *
 * Loading validates the header and the exact file size before any weight is
 * read, then carves every tensor out of one block (the file map for fp32, one
 * converted array for bf16). The forward pass is the GPT-2 block written out
 * with shapes: embeddings, L x (LayerNorm, attention, residual, LayerNorm, MLP,
 * residual), final LayerNorm, logits against the tied embedding. Attention is
 * reached only through attention.h. Read attention.c for the attention itself.
 *
 * Legend: N tokens in the chunk, C width, Hd MLP width, KVD kv width, V vocab,
 * S context, n token index within the chunk, l layer.
 */
#include "model.h"

#include <errno.h>      /* errno */
#include <fcntl.h>      /* open */
#include <math.h>       /* sqrtf, tanhf */
#include <stdint.h>     /* int32_t, uint16_t, uint32_t */
#include <stdio.h>      /* fprintf(stderr) */
#include <stdlib.h>     /* calloc, free */
#include <string.h>     /* memcpy, memset, strerror */
#include <sys/mman.h>   /* mmap, munmap */
#include <sys/stat.h>   /* fstat */
#include <unistd.h>     /* read, close */

#include "attention.h"  /* attention_forward, attention_scratch_floats */

#define GELU_SQRT_2_OVER_PI 0.7978845608028654f  /* sqrt(2 / pi) in GELU's tanh form */
#define GELU_CUBIC 0.044715f                      /* coefficient of x^3 in GELU's tanh form */

/* ------------------------------------------------------------------------- */
/* Overflow-safe size arithmetic                                               */

/* *out = a * b; returns -1 if that overflows size_t. */
static int size_mul(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return -1;
    *out = a * b;
    return 0;
}

/* *acc += a * b * c; returns -1 on overflow. */
static int size_add_product(size_t *acc, size_t a, size_t b, size_t c) {
    size_t ab, abc;
    if (size_mul(a, b, &ab) || size_mul(ab, c, &abc) || abc > SIZE_MAX - *acc) return -1;
    *acc += abc;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Header validation                                                           */

/* Header field indices of llm.c's GPT-2 checkpoint. */
enum { HEADER_MAGIC, HEADER_VERSION, HEADER_MAX_T, HEADER_V, HEADER_L, HEADER_NH, HEADER_C,
       HEADER_VP };

/* Checks that header[index] is in [1, max]; prints the problem and returns -1 if not. */
static int check_field(const char *path, const int32_t *header, int index, const char *name,
                       int max) {
    if (header[index] < 1 || header[index] > max) {
        fprintf(stderr, "model: %s: header field %s out of range (got %d, expected 1..%d)\n",
                path, name, (int)header[index], max);
        return -1;
    }
    return 0;
}

/* Fills c from a GPT-2 header after validating every field. Returns 0 or -1. */
static int config_from_gpt2_header(Config *c, const char *path, const int32_t *header) {
    if (header[HEADER_MAGIC] != MODEL_GPT2_MAGIC) {
        fprintf(stderr, "model: %s: bad magic number (got %d, expected %d: an llm.c GPT-2 "
                "checkpoint)\n", path, (int)header[HEADER_MAGIC], MODEL_GPT2_MAGIC);
        return -1;
    }
    int version = header[HEADER_VERSION];
    if (version != MODEL_GPT2_FP32 && version != MODEL_GPT2_BF16) {
        fprintf(stderr, "model: %s: unknown checkpoint version (got %d, expected %d for fp32 "
                "or %d for bf16)\n", path, version, MODEL_GPT2_FP32, MODEL_GPT2_BF16);
        return -1;
    }
    if (check_field(path, header, HEADER_MAX_T, "maxT", MODEL_MAX_SEQ_LEN) ||
        check_field(path, header, HEADER_V, "V", MODEL_MAX_VOCAB) ||
        check_field(path, header, HEADER_VP, "Vp", MODEL_MAX_VOCAB) ||
        check_field(path, header, HEADER_L, "L", MODEL_MAX_LAYERS) ||
        check_field(path, header, HEADER_C, "C", MODEL_MAX_DIM / 4) ||
        check_field(path, header, HEADER_NH, "NH", header[HEADER_C])) return -1;
    if (header[HEADER_C] % header[HEADER_NH] != 0) {
        fprintf(stderr, "model: %s: width C not divisible by heads NH (got C %d, NH %d)\n",
                path, (int)header[HEADER_C], (int)header[HEADER_NH]);
        return -1;
    }
    if (header[HEADER_V] > header[HEADER_VP]) {
        fprintf(stderr, "model: %s: vocab V larger than padded vocab Vp (got V %d, Vp %d, "
                "expected V <= Vp)\n", path, (int)header[HEADER_V], (int)header[HEADER_VP]);
        return -1;
    }
    c->seq_len = header[HEADER_MAX_T];
    c->vocab_size = header[HEADER_V];
    c->padded_vocab_size = header[HEADER_VP];
    c->n_layers = header[HEADER_L];
    c->n_heads = header[HEADER_NH];
    c->n_kv_heads = c->n_heads;
    c->dim = header[HEADER_C];
    c->hidden_dim = 4 * c->dim;
    c->head_dim = c->dim / c->n_heads;
    c->kv_dim = c->n_kv_heads * c->head_dim;
    return 0;
}

/* Number of parameters a GPT-2 checkpoint with config c holds, in llm.c's 16 tensors.
 * Returns -1 on size_t overflow. */
static int gpt2_param_count(const Config *c, size_t *count) {
    size_t Vp = (size_t)c->padded_vocab_size, S = (size_t)c->seq_len, L = (size_t)c->n_layers;
    size_t C = (size_t)c->dim, Hd = (size_t)c->hidden_dim;
    *count = 0;
    if (size_add_product(count, Vp, C, 1) ||            /* wte */
        size_add_product(count, S, C, 1) ||             /* wpe */
        size_add_product(count, L, 2 * C, 1) ||         /* ln1w, ln1b */
        size_add_product(count, L, 3 * C, C + 1) ||     /* qkvw, qkvb */
        size_add_product(count, L, C, C + 1) ||         /* attprojw, attprojb */
        size_add_product(count, L, 2 * C, 1) ||         /* ln2w, ln2b */
        size_add_product(count, L, Hd, C + 1) ||        /* fcw, fcb */
        size_add_product(count, L, C, Hd + 1) ||        /* fcprojw, fcprojb */
        size_add_product(count, 2, C, 1)) return -1;    /* lnfw, lnfb */
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Carving tensors out of the parameter block                                  */

/* Returns the next n floats of the block and advances the cursor. */
static const float *take(const float **cursor, size_t n) {
    const float *tensor = *cursor;
    *cursor += n;
    return tensor;
}

/* Points w at llm.c's 16 tensors, in file order, inside params. The per-layer
 * tensors are stacked over L, so layer l's slice starts at l times its size. */
static int gpt2_point_weights(Weights *w, const Config *c, const float *params) {
    size_t L = (size_t)c->n_layers, C = (size_t)c->dim, Hd = (size_t)c->hidden_dim;
    w->layers = calloc(L, sizeof *w->layers);
    if (!w->layers) return -1;
    const float *cursor = params;
    w->token_embedding = take(&cursor, (size_t)c->padded_vocab_size * C);
    w->pos_embedding = take(&cursor, (size_t)c->seq_len * C);
    const float *ln1w = take(&cursor, L * C), *ln1b = take(&cursor, L * C);
    const float *qkvw = take(&cursor, L * 3 * C * C), *qkvb = take(&cursor, L * 3 * C);
    const float *projw = take(&cursor, L * C * C), *projb = take(&cursor, L * C);
    const float *ln2w = take(&cursor, L * C), *ln2b = take(&cursor, L * C);
    const float *fcw = take(&cursor, L * Hd * C), *fcb = take(&cursor, L * Hd);
    const float *fcprojw = take(&cursor, L * C * Hd), *fcprojb = take(&cursor, L * C);
    w->norm_final_w = take(&cursor, C);
    w->norm_final_b = take(&cursor, C);
    for (size_t l = 0; l < L; l++) {
        LayerWeights *lw = &w->layers[l];
        lw->norm1_w = ln1w + l * C;
        lw->norm1_b = ln1b + l * C;
        /* qkvw[l] is (3C, C): the Q rows, then the K rows, then the V rows */
        lw->wq = qkvw + l * 3 * C * C;
        lw->wk = lw->wq + C * C;
        lw->wv = lw->wk + C * C;
        lw->bq = qkvb + l * 3 * C;
        lw->bk = lw->bq + C;
        lw->bv = lw->bk + C;
        lw->wo = projw + l * C * C;
        lw->bo = projb + l * C;
        lw->norm2_w = ln2w + l * C;
        lw->norm2_b = ln2b + l * C;
        lw->w_up = fcw + l * Hd * C;
        lw->b_up = fcb + l * Hd;
        lw->w_down = fcprojw + l * C * Hd;
        lw->b_down = fcprojb + l * C;
    }
    return 0;
}

/* bf16 is the top half of an fp32: widen each value by appending 16 zero bits. */
static void bf16_to_float(float *out, const uint16_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)in[i] << 16;
        memcpy(&out[i], &bits, sizeof bits);
    }
}

/* ------------------------------------------------------------------------- */
/* Load and free                                                               */

/* Allocates the KV cache and the activations for chunks of m->max_chunk tokens. */
static int alloc_state(Model *m) {
    const Config *c = &m->config;
    size_t N = (size_t)m->max_chunk, cache_floats;
    if (size_mul((size_t)c->n_layers * (size_t)c->seq_len, (size_t)c->kv_dim, &cache_floats))
        return -1;
    RunState *s = &m->state;
    m->cache.key = calloc(cache_floats, sizeof(float));
    m->cache.value = calloc(cache_floats, sizeof(float));
    s->x = calloc(N * (size_t)c->dim, sizeof(float));
    s->xn = calloc(N * (size_t)c->dim, sizeof(float));
    s->q = calloc(N * (size_t)c->dim, sizeof(float));
    s->att = calloc(N * (size_t)c->dim, sizeof(float));
    s->hidden = calloc(N * (size_t)c->hidden_dim, sizeof(float));
    s->logits = calloc(N * (size_t)c->vocab_size, sizeof(float));
    s->scratch = calloc((size_t)attention_scratch_floats(&m->attention, c->seq_len),
                        sizeof(float));
    if (!m->cache.key || !m->cache.value || !s->x || !s->xn || !s->q || !s->att ||
        !s->hidden || !s->logits || !s->scratch) return -1;
    return 0;
}

/* Reads exactly n bytes at the start of fd into buf; returns 0 or -1. */
static int read_exact(int fd, void *buf, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t got = read(fd, (char *)buf + done, n - done);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        done += (size_t)got;
    }
    return 0;
}

int model_load(Model *m, const char *path, int max_chunk) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "model: %s: cannot open (%s)\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "model: %s: not a regular file\n", path);
        goto fail;
    }
    size_t file_size = (size_t)st.st_size, header_bytes = MODEL_HEADER_INTS * sizeof(int32_t);
    int32_t header[MODEL_HEADER_INTS];
    if (file_size < header_bytes || read_exact(fd, header, header_bytes) != 0) {
        fprintf(stderr, "model: %s: file too short for the header (got %zu bytes, expected at "
                "least %zu)\n", path, file_size, header_bytes);
        goto fail;
    }
    if (config_from_gpt2_header(&m->config, path, header) != 0) goto fail;
    const Config *c = &m->config;
    size_t n_params, param_bytes, expected;
    size_t bytes_per_param = header[HEADER_VERSION] == MODEL_GPT2_BF16 ? 2 : 4;
    if (gpt2_param_count(c, &n_params) || size_mul(n_params, bytes_per_param, &param_bytes) ||
        param_bytes > SIZE_MAX - header_bytes) {
        fprintf(stderr, "model: %s: header dimensions overflow the address space\n", path);
        goto fail;
    }
    expected = header_bytes + param_bytes;
    if (file_size != expected) {
        fprintf(stderr, "model: %s: file size does not match its header (got %zu bytes, "
                "expected %zu: %s)\n", path, file_size, expected,
                file_size < expected ? "truncated" : "trailing bytes");
        goto fail;
    }
    if (max_chunk < 1) {
        fprintf(stderr, "model: %s: chunk size out of range (got %d, expected >= 1)\n",
                path, max_chunk);
        goto fail;
    }
    m->map = mmap(NULL, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m->map == MAP_FAILED) {
        m->map = NULL;
        fprintf(stderr, "model: %s: mmap failed (%s)\n", path, strerror(errno));
        goto fail;
    }
    m->map_size = file_size;
    const float *params = (const float *)((const char *)m->map + header_bytes);
    if (bytes_per_param == 2) {
        /* bf16: convert once into an owned fp32 block, then drop the map */
        m->params = malloc(n_params * sizeof(float));
        if (!m->params) goto out_of_memory;
        bf16_to_float(m->params, (const uint16_t *)params, n_params);
        munmap(m->map, m->map_size);
        m->map = NULL;
        m->map_size = 0;
        params = m->params;
    }
    m->max_chunk = max_chunk < c->seq_len ? max_chunk : c->seq_len;
    m->attention.n_heads = c->n_heads;
    m->attention.n_kv_heads = c->n_kv_heads;
    m->attention.head_dim = c->head_dim;
    m->attention.scale = 1.0f / sqrtf((float)c->head_dim);
    if (gpt2_point_weights(&m->weights, c, params) != 0 || alloc_state(m) != 0)
        goto out_of_memory;
    close(fd);
    return 0;
out_of_memory:
    fprintf(stderr, "model: %s: out of memory\n", path);
fail:
    close(fd);
    model_free(m);
    return -1;
}

void model_free(Model *m) {
    if (m->map) munmap(m->map, m->map_size);
    free(m->params);
    free(m->weights.layers);
    free(m->cache.key);
    free(m->cache.value);
    RunState *s = &m->state;
    free(s->x); free(s->xn); free(s->q); free(s->att); free(s->hidden); free(s->logits);
    free(s->scratch);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------------- */
/* Layer functions                                                             */

void model_layernorm(float *out, const float *x, const float *w, const float *b, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C;
        float *out_n = out + (size_t)n * C;
        float mean = 0.0f;
        for (int i = 0; i < C; i++) mean += x_n[i];
        mean /= (float)C;
        float var = 0.0f;   /* biased variance over C, as GPT-2 */
        for (int i = 0; i < C; i++) var += (x_n[i] - mean) * (x_n[i] - mean);
        var /= (float)C;
        float rstd = 1.0f / sqrtf(var + MODEL_NORM_EPS);
        for (int i = 0; i < C; i++) out_n[i] = (x_n[i] - mean) * rstd * w[i] + b[i];
    }
}

/* a . b over n floats, in eight interleaved partial sums so the compiler can keep
 * them in one vector register; the order is fixed, so the result is deterministic. */
static float dot(const float *a, const float *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) sum += a[i] * b[i];
    return sum;
}

void model_matmul(float *out, const float *x, const float *w, const float *b,
                  int N, int IC, int OC) {
    /* Each o owns column o of out; rows of w are independent, so threads never
     * share an output and the sums do not depend on the thread count. */
    #pragma omp parallel for schedule(static)
    for (int o = 0; o < OC; o++) {
        const float *w_o = w + (size_t)o * IC;
        float bias = b ? b[o] : 0.0f;
        for (int n = 0; n < N; n++)
            out[(size_t)n * OC + o] = dot(x + (size_t)n * IC, w_o, IC) + bias;
    }
}

void model_gelu(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(GELU_SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v)));
    }
}

/* x (N, C) += y (N, C) */
static void residual_add(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

/* ------------------------------------------------------------------------- */
/* Forward pass                                                                */

float *model_forward(Model *m, const int *tokens, int n, int pos, int all_logits) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    RunState *s = &m->state;
    if (n < 1 || n > m->max_chunk || pos < 0 || pos > c->seq_len - n) {
        fprintf(stderr, "model: forward of %d tokens at position %d out of range (expected "
                "1..%d tokens ending at or before the context length %d)\n",
                n, pos, m->max_chunk, c->seq_len);
        return NULL;
    }
    for (int t = 0; t < n; t++) {
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size) {
            fprintf(stderr, "model: token id out of range (got %d, expected 0..%d)\n",
                    tokens[t], c->vocab_size - 1);
            return NULL;
        }
    }
    int C = c->dim, Hd = c->hidden_dim, KVD = c->kv_dim, S = c->seq_len;

    /* x[n] = wte[token n] + wpe[pos + n] */
    for (int t = 0; t < n; t++) {
        const float *wte_t = w->token_embedding + (size_t)tokens[t] * C;
        const float *wpe_t = w->pos_embedding + (size_t)(pos + t) * C;
        float *x_t = s->x + (size_t)t * C;
        for (int i = 0; i < C; i++) x_t[i] = wte_t[i] + wpe_t[i];
    }

    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *lw = &w->layers[l];
        /* seek to this layer's cache, rows pos .. pos+n-1 receive the new keys/values */
        float *key_l = m->cache.key + (size_t)l * S * KVD;     /* (S, KVD) */
        float *value_l = m->cache.value + (size_t)l * S * KVD; /* (S, KVD) */

        /* attention sublayer: x += W_O . attention(LN1(x) W_Q, W_K, W_V) */
        model_layernorm(s->xn, s->x, lw->norm1_w, lw->norm1_b, n, C);
        model_matmul(s->q, s->xn, lw->wq, lw->bq, n, C, C);
        model_matmul(key_l + (size_t)pos * KVD, s->xn, lw->wk, lw->bk, n, C, KVD);
        model_matmul(value_l + (size_t)pos * KVD, s->xn, lw->wv, lw->bv, n, C, KVD);
        attention_forward(&m->attention, s->att, s->q, key_l, value_l, pos, n, s->scratch);
        model_matmul(s->xn, s->att, lw->wo, lw->bo, n, C, C);
        residual_add(s->x, s->xn, (size_t)n * C);

        /* MLP sublayer: x += W_down . GELU(W_up . LN2(x)) */
        model_layernorm(s->xn, s->x, lw->norm2_w, lw->norm2_b, n, C);
        model_matmul(s->hidden, s->xn, lw->w_up, lw->b_up, n, C, Hd);
        model_gelu(s->hidden, (size_t)n * Hd);
        model_matmul(s->xn, s->hidden, lw->w_down, lw->b_down, n, Hd, C);
        residual_add(s->x, s->xn, (size_t)n * C);
    }

    /* final LayerNorm, then logits (rows, V) = xn (rows, C) . wte[:V]^T */
    int first = all_logits ? 0 : n - 1, rows = n - first;
    model_layernorm(s->xn, s->x + (size_t)first * C, w->norm_final_w, w->norm_final_b, rows, C);
    model_matmul(s->logits, s->xn, w->token_embedding, NULL, rows, C, c->vocab_size);
    return s->logits;
}

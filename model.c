/* model.c: load a GPT-2 or Llama checkpoint, keep its attention state, run its forward pass.
 *
 * Loading recognises the format, validates the header and the exact file size
 * before any weight is read, then carves every tensor out of one block (the file
 * map for fp32, one converted array for bf16 and int8). The forward pass is one
 * pre-norm block written out with shapes: embeddings, L x (norm, attention,
 * residual, norm, MLP, residual), final norm, logits. The two families differ in
 * four places, each a branch on config.family: LayerNorm vs RMSNorm, learned vs
 * rotary positions, GELU vs SwiGLU, tied vs separate classifier. Attention is
 * reached only through attention.h. Read attention.c for the attention itself.
 *
 * Legend: N tokens in the chunk, C width, Hd MLP width, KVD kv width, V vocab,
 * S context, n token index within the chunk, l layer.
 */
#include "model.h"

#include <errno.h>      /* errno */
#include <fcntl.h>      /* open */
#include <math.h>       /* sqrtf, tanhf, expf, powf, cosf, sinf */
#include <stdint.h>     /* int32_t, uint16_t, uint32_t */
#include <stdio.h>      /* fprintf(stderr) */
#include <stdlib.h>     /* calloc, free */
#include <string.h>     /* memcpy, memset, strerror */
#include <sys/mman.h>   /* mmap, munmap */
#include <sys/stat.h>   /* fstat */
#include <unistd.h>     /* read, close */

#include "attention.h"  /* AttentionConfig, attention_state_*, attention_step */
#ifdef __AVX2__
#include <immintrin.h>  /* AVX2 intrinsics for the matmul tile */
#endif

#define GELU_SQRT_2_OVER_PI 0.7978845608028654f  /* sqrt(2 / pi) in GELU's tanh form */
#define GELU_CUBIC 0.044715f                      /* coefficient of x^3 in GELU's tanh form */
#define MATMUL_ROWS 64   /* rows of x per matmul job: 64 x IC floats stay in L1/L2 */
#define MATMUL_COLS 48   /* rows of w per matmul job, a multiple of the 4-wide tile */

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
/* Recognising the file and validating its header                              */

/* How the parameters are stored in the file. */
typedef enum {
    STORE_GPT2_F32, STORE_GPT2_BF16,      /* llm.c: header 1024 bytes, 16 tensors */
    STORE_LLAMA_LEGACY,                   /* llama2.c legacy: 7 int32, fp32, RoPE tables */
    STORE_LLAMA_F32, STORE_LLAMA_Q8       /* llama2.c "ak42" versions 1 and 2 */
} Storage;

/* What the header says about the file beyond the Config. */
typedef struct {
    Storage storage;
    size_t data_offset;      /* bytes before the first parameter */
    int shared_classifier;   /* Llama: 1 if the classifier is the token embedding */
    int group_size;          /* Q8: weights per scale */
} Layout;

/* Header field indices of llm.c's GPT-2 checkpoint (int32 each). */
enum { GPT2_MAGIC, GPT2_VERSION, GPT2_MAX_T, GPT2_V, GPT2_L, GPT2_NH, GPT2_C, GPT2_VP };
/* llama2.c's 7 config fields, in file order (after magic and version when versioned). */
enum { LLAMA_DIM, LLAMA_HIDDEN, LLAMA_LAYERS, LLAMA_HEADS, LLAMA_KV_HEADS, LLAMA_VOCAB,
       LLAMA_SEQ };

/* Checks that value is in [1, max]; prints the problem and returns -1 if not. The
 * prefix (possibly "") says how the header was read when that was a guess. */
static int check_range(const char *path, const char *prefix, const char *name, long value,
                       long max) {
    if (value < 1 || value > max) {
        fprintf(stderr, "model: %s: %sheader field %s out of range (got %ld, expected "
                "1..%ld)\n", path, prefix, name, value, max);
        return -1;
    }
    return 0;
}

/* Checks the fields both families share and derives head_dim and kv_dim. */
static int check_config(Config *c, const char *path, const char *prefix) {
    if (check_range(path, prefix, "seq_len", c->seq_len, MODEL_MAX_SEQ_LEN) ||
        check_range(path, prefix, "vocab_size", c->vocab_size, MODEL_MAX_VOCAB) ||
        check_range(path, prefix, "padded_vocab_size", c->padded_vocab_size, MODEL_MAX_VOCAB) ||
        check_range(path, prefix, "n_layers", c->n_layers, MODEL_MAX_LAYERS) ||
        check_range(path, prefix, "dim", c->dim, MODEL_MAX_DIM / 4) ||
        check_range(path, prefix, "hidden_dim", c->hidden_dim, MODEL_MAX_DIM) ||
        check_range(path, prefix, "n_heads", c->n_heads, c->dim) ||
        check_range(path, prefix, "n_kv_heads", c->n_kv_heads, c->n_heads)) return -1;
    const char *problem = NULL;
    if (c->dim % c->n_heads != 0) problem = "width dim not divisible by n_heads";
    else if (c->n_heads % c->n_kv_heads != 0) problem = "n_heads not divisible by n_kv_heads";
    else if (c->vocab_size > c->padded_vocab_size)
        problem = "vocab V larger than padded vocab Vp";
    else if (c->family == MODEL_LLAMA && (c->dim / c->n_heads) % 2 != 0)
        problem = "rotary embedding needs an even head size";
    if (problem) {
        fprintf(stderr, "model: %s: %s%s (got dim %d, n_heads %d, n_kv_heads %d, V %d, Vp %d)\n",
                path, prefix, problem, c->dim, c->n_heads, c->n_kv_heads, c->vocab_size,
                c->padded_vocab_size);
        return -1;
    }
    c->head_dim = c->dim / c->n_heads;
    c->kv_dim = c->n_kv_heads * c->head_dim;
    return 0;
}

/* llm.c GPT-2: header[256] int32. */
static int parse_gpt2_header(Config *c, Layout *layout, const char *path, const int32_t *h) {
    int version = h[GPT2_VERSION];
    if (version != MODEL_GPT2_FP32 && version != MODEL_GPT2_BF16) {
        fprintf(stderr, "model: %s: unknown checkpoint version (got %d, expected %d for fp32 "
                "or %d for bf16)\n", path, version, MODEL_GPT2_FP32, MODEL_GPT2_BF16);
        return -1;
    }
    if (check_range(path, "", "C", h[GPT2_C], MODEL_MAX_DIM / 4)) return -1;
    c->family = MODEL_GPT2;
    c->seq_len = h[GPT2_MAX_T];
    c->vocab_size = h[GPT2_V];
    c->padded_vocab_size = h[GPT2_VP];
    c->n_layers = h[GPT2_L];
    c->n_heads = h[GPT2_NH];
    c->n_kv_heads = c->n_heads;
    c->dim = h[GPT2_C];
    c->hidden_dim = 4 * c->dim;
    layout->storage = version == MODEL_GPT2_BF16 ? STORE_GPT2_BF16 : STORE_GPT2_F32;
    layout->data_offset = MODEL_HEADER_INTS * sizeof(int32_t);
    return 0;
}

/* llama2.c: the 7 config fields. A negative vocab_size in a legacy file means the
 * classifier is stored separately (llama2.c's flag); versioned files have a flag byte. */
static void llama_config(Config *c, Layout *layout, const int32_t *f) {
    c->family = MODEL_LLAMA;
    c->dim = f[LLAMA_DIM];
    c->hidden_dim = f[LLAMA_HIDDEN];
    c->n_layers = f[LLAMA_LAYERS];
    c->n_heads = f[LLAMA_HEADS];
    c->n_kv_heads = f[LLAMA_KV_HEADS];
    c->vocab_size = f[LLAMA_VOCAB] < 0 && f[LLAMA_VOCAB] != INT32_MIN ? -f[LLAMA_VOCAB]
                                                                     : f[LLAMA_VOCAB];
    c->padded_vocab_size = c->vocab_size;
    c->seq_len = f[LLAMA_SEQ];
    layout->shared_classifier = f[LLAMA_VOCAB] > 0;
}

/* llama2.c "ak42" header: magic, version, 7 fields, uint8 shared flag, [int32 group size]. */
static int parse_llama_header(Config *c, Layout *layout, const char *path,
                              const unsigned char *bytes) {
    int32_t fields[2 + MODEL_LLAMA_LEGACY_INTS], group_size;
    memcpy(fields, bytes, sizeof fields);
    unsigned char shared = bytes[sizeof fields];
    memcpy(&group_size, bytes + sizeof fields + 1, sizeof group_size);
    int version = fields[1];
    if (version != MODEL_LLAMA_FP32 && version != MODEL_LLAMA_Q8) {
        fprintf(stderr, "model: %s: unknown llama2.c version (got %d, expected %d for fp32 or "
                "%d for int8)\n", path, version, MODEL_LLAMA_FP32, MODEL_LLAMA_Q8);
        return -1;
    }
    if (shared > 1 || fields[2 + LLAMA_VOCAB] < 1) {
        fprintf(stderr, "model: %s: bad classifier flag or vocab (got flag %d, vocab %d, "
                "expected 0 or 1 and a positive vocab)\n", path, shared, fields[2 + LLAMA_VOCAB]);
        return -1;
    }
    llama_config(c, layout, fields + 2);
    layout->shared_classifier = shared;
    layout->storage = version == MODEL_LLAMA_Q8 ? STORE_LLAMA_Q8 : STORE_LLAMA_F32;
    layout->data_offset = MODEL_LLAMA_HEADER_BYTES;
    if (version == MODEL_LLAMA_Q8) {
        if (check_range(path, "", "group_size", group_size, MODEL_MAX_DIM)) return -1;
        if (c->dim % group_size != 0 || c->hidden_dim % group_size != 0) {
            fprintf(stderr, "model: %s: group size must divide dim and hidden_dim (got group "
                    "%d, dim %d, hidden_dim %d)\n", path, group_size, c->dim, c->hidden_dim);
            return -1;
        }
        layout->group_size = group_size;
    }
    return 0;
}

/* Recognises the format from the first bytes and fills c and layout. llm.c and the
 * versioned llama2.c files carry a magic number; llama2.c's legacy files do not, so
 * anything else is read as a legacy header and must then pass every check and match
 * the file size exactly. header holds n bytes (at most 1024). */
static int parse_header(Config *c, Layout *layout, const char *path,
                        const unsigned char *header, size_t n) {
    int32_t magic = 0;
    if (n >= sizeof magic) memcpy(&magic, header, sizeof magic);
    int is_gpt2 = magic == MODEL_GPT2_MAGIC, is_llama = (uint32_t)magic == MODEL_LLAMA_MAGIC;
    size_t need = is_gpt2 ? MODEL_HEADER_INTS * sizeof(int32_t)
                : is_llama ? MODEL_LLAMA_HEADER_BYTES : MODEL_LLAMA_LEGACY_INTS * sizeof(int32_t);
    if (n < need) {
        fprintf(stderr, "model: %s: file too short for the header (got %zu bytes, expected at "
                "least %zu)\n", path, n, need);
        return -1;
    }
    if (is_gpt2) {
        int32_t h[MODEL_HEADER_INTS];
        memcpy(h, header, sizeof h);
        if (parse_gpt2_header(c, layout, path, h) != 0) return -1;
    } else if (is_llama) {
        if (parse_llama_header(c, layout, path, header) != 0) return -1;
    } else {
        int32_t fields[MODEL_LLAMA_LEGACY_INTS];
        memcpy(fields, header, sizeof fields);
        llama_config(c, layout, fields);
        layout->storage = STORE_LLAMA_LEGACY;
        layout->data_offset = sizeof fields;
        char prefix[160];
        snprintf(prefix, sizeof prefix, "bad magic number (got %d, expected %d for llm.c GPT-2 "
                 "or \"ak42\" for llama2.c), and as a headerless llama2.c file: ", magic,
                 MODEL_GPT2_MAGIC);
        return check_config(c, path, prefix);
    }
    return check_config(c, path, "");
}

/* ------------------------------------------------------------------------- */
/* Sizes of the parameter block                                                */

/* Number of parameters of a GPT-2 checkpoint, in llm.c's 16 tensors. -1 on overflow. */
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

/* The Llama matrices in llama2.c's file order: token embedding, wq, wk, wv, wo, w1, w2,
 * w3, then the classifier when not shared. Each is (layers, rows, cols). */
enum { LLAMA_MATRICES = 9 };
static void llama_matrices(const Config *c, int shared, size_t layers[LLAMA_MATRICES],
                           size_t numel[LLAMA_MATRICES]) {
    size_t L = (size_t)c->n_layers, C = (size_t)c->dim, Hd = (size_t)c->hidden_dim;
    size_t V = (size_t)c->vocab_size, KVD = (size_t)c->kv_dim;
    const size_t l[LLAMA_MATRICES] = {1, L, L, L, L, L, L, L, shared ? 0 : 1};
    const size_t n[LLAMA_MATRICES] = {V * C, C * C, KVD * C, KVD * C, C * C, Hd * C, C * Hd,
                                      Hd * C, V * C};
    memcpy(layers, l, sizeof l);
    memcpy(numel, n, sizeof n);
}

/* Number of fp32 parameters of a Llama model (norms and matrices, as version 1 stores
 * them). Only called after expected_file_size succeeded, so nothing overflows. */
static void llama_param_count(const Config *c, const Layout *layout, size_t *count) {
    size_t layers[LLAMA_MATRICES], numel[LLAMA_MATRICES];
    llama_matrices(c, layout->shared_classifier, layers, numel);
    *count = 2 * (size_t)c->n_layers * (size_t)c->dim + (size_t)c->dim;
    for (int i = 0; i < LLAMA_MATRICES; i++) *count += layers[i] * numel[i];
}

/* Bytes of a file with this config and layout. Dimensions are bounded (MODEL_MAX_*),
 * but products are still checked. Returns -1 on overflow. */
static int expected_file_size(const Config *c, const Layout *layout, size_t *bytes) {
    size_t count = 0, L = (size_t)c->n_layers, C = (size_t)c->dim;
    if (layout->storage == STORE_GPT2_F32 || layout->storage == STORE_GPT2_BF16) {
        size_t width = layout->storage == STORE_GPT2_BF16 ? 2 : 4;
        if (gpt2_param_count(c, &count) || size_mul(count, width, bytes)) return -1;
    } else {
        size_t layers[LLAMA_MATRICES], numel[LLAMA_MATRICES], norms = 2 * L * C + C;
        llama_matrices(c, layout->shared_classifier, layers, numel);
        size_t per_weight = 4, per_group = 0;   /* fp32; Q8: 1 byte + 4 per group */
        if (layout->storage == STORE_LLAMA_Q8) { per_weight = 1; per_group = 4; }
        *bytes = 0;
        if (size_add_product(bytes, norms, 4, 1)) return -1;
        for (int i = 0; i < LLAMA_MATRICES; i++) {
            size_t groups = per_group ? numel[i] / (size_t)layout->group_size : 0;
            if (size_add_product(bytes, layers[i], numel[i], per_weight) ||
                size_add_product(bytes, layers[i], groups, per_group)) return -1;
        }
        if (layout->storage == STORE_LLAMA_LEGACY &&   /* the old RoPE tables, unused */
            size_add_product(bytes, (size_t)c->seq_len, (size_t)c->head_dim, 4)) return -1;
    }
    if (*bytes > SIZE_MAX - layout->data_offset) return -1;
    *bytes += layout->data_offset;
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
static void gpt2_point_weights(Weights *w, const Config *c, const float *params) {
    size_t L = (size_t)c->n_layers, C = (size_t)c->dim, Hd = (size_t)c->hidden_dim;
    const float *cursor = params;
    w->token_embedding = take(&cursor, (size_t)c->padded_vocab_size * C);
    w->classifier = w->token_embedding;   /* GPT-2 ties the classifier to wte */
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
}

/* Points w at a Llama parameter block. Legacy files (llama2.c's run.c order) put the
 * token embedding first and the norms among the matrices; versioned files (and the
 * fp32 block made from an int8 file) put all norms first. No biases. */
static void llama_point_weights(Weights *w, const Config *c, const float *params,
                                const Layout *layout) {
    size_t L = (size_t)c->n_layers, C = (size_t)c->dim, Hd = (size_t)c->hidden_dim;
    size_t V = (size_t)c->vocab_size, KVD = (size_t)c->kv_dim;
    const float *cursor = params, *rms_att, *rms_ffn, *wq, *wk, *wv, *wo, *w1, *w2, *w3;
    if (layout->storage == STORE_LLAMA_LEGACY) {
        w->token_embedding = take(&cursor, V * C);
        rms_att = take(&cursor, L * C);
        wq = take(&cursor, L * C * C);
        wk = take(&cursor, L * KVD * C);
        wv = take(&cursor, L * KVD * C);
        wo = take(&cursor, L * C * C);
        rms_ffn = take(&cursor, L * C);
        w1 = take(&cursor, L * Hd * C);
        w2 = take(&cursor, L * C * Hd);
        w3 = take(&cursor, L * Hd * C);
        w->norm_final_w = take(&cursor, C);
        take(&cursor, (size_t)c->seq_len * (size_t)c->head_dim);  /* old RoPE tables */
    } else {
        rms_att = take(&cursor, L * C);
        rms_ffn = take(&cursor, L * C);
        w->norm_final_w = take(&cursor, C);
        w->token_embedding = take(&cursor, V * C);
        wq = take(&cursor, L * C * C);
        wk = take(&cursor, L * KVD * C);
        wv = take(&cursor, L * KVD * C);
        wo = take(&cursor, L * C * C);
        w1 = take(&cursor, L * Hd * C);
        w2 = take(&cursor, L * C * Hd);
        w3 = take(&cursor, L * Hd * C);
    }
    w->classifier = layout->shared_classifier ? w->token_embedding : take(&cursor, V * C);
    for (size_t l = 0; l < L; l++) {
        LayerWeights *lw = &w->layers[l];
        lw->norm1_w = rms_att + l * C;
        lw->wq = wq + l * C * C;
        lw->wk = wk + l * KVD * C;
        lw->wv = wv + l * KVD * C;
        lw->wo = wo + l * C * C;
        lw->norm2_w = rms_ffn + l * C;
        lw->w_up = w1 + l * Hd * C;
        lw->w_gate = w3 + l * Hd * C;
        lw->w_down = w2 + l * C * Hd;
    }
}

/* bf16 is the top half of an fp32: widen each value by appending 16 zero bits. */
static void bf16_to_float(float *out, const uint16_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)in[i] << 16;
        memcpy(&out[i], &bits, sizeof bits);
    }
}

/* Q8_0 (llama2.c version 2): fp32 norms, then each matrix per layer as int8 values q
 * followed by one fp32 scale per group of GS values; value = q * scale. Writes the fp32
 * block in version-1 order into out. */
static void q8_to_float(float *out, const unsigned char *in, const Config *c,
                        const Layout *layout) {
    size_t norms = 2 * (size_t)c->n_layers * (size_t)c->dim + (size_t)c->dim;
    size_t GS = (size_t)layout->group_size, layers[LLAMA_MATRICES], numel[LLAMA_MATRICES];
    memcpy(out, in, norms * sizeof(float));
    out += norms;
    in += norms * sizeof(float);
    llama_matrices(c, layout->shared_classifier, layers, numel);
    for (int i = 0; i < LLAMA_MATRICES; i++) {
        for (size_t l = 0; l < layers[i]; l++) {
            const signed char *q = (const signed char *)in;
            const unsigned char *scales = in + numel[i];   /* may be unaligned: memcpy */
            for (size_t g = 0; g < numel[i] / GS; g++) {
                float scale;
                memcpy(&scale, scales + g * sizeof scale, sizeof scale);
                for (size_t j = g * GS; j < (g + 1) * GS; j++) out[j] = (float)q[j] * scale;
            }
            out += numel[i];
            in += numel[i] + numel[i] / GS * sizeof(float);
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Load and free                                                               */

/* Allocates the activations for chunks of m->max_chunk tokens (the attention state
 * and its scratch come from model_set_attention). */
static int alloc_state(Model *m) {
    const Config *c = &m->config;
    size_t N = (size_t)m->max_chunk;
    RunState *s = &m->state;
    s->x = calloc(N * (size_t)c->dim, sizeof(float));
    s->xn = calloc(N * (size_t)c->dim, sizeof(float));
    s->q = calloc(N * (size_t)c->dim, sizeof(float));
    s->k = calloc(N * (size_t)c->kv_dim, sizeof(float));
    s->v = calloc(N * (size_t)c->kv_dim, sizeof(float));
    s->att = calloc(N * (size_t)c->dim, sizeof(float));
    s->hidden = calloc(N * (size_t)c->hidden_dim, sizeof(float));
    s->gate = calloc(N * (size_t)c->hidden_dim, sizeof(float));
    s->logits = calloc(N * (size_t)c->vocab_size, sizeof(float));
    if (!s->x || !s->xn || !s->q || !s->k || !s->v || !s->att || !s->hidden || !s->gate ||
        !s->logits) return -1;
    return 0;
}

int model_set_attention(Model *m, const AttentionConfig *cfg) {
    const Config *c = &m->config;
    free(m->attention_state);
    free(m->state.scratch);
    m->attention_state = NULL;
    m->state.scratch = NULL;
    m->attention_layer_bytes = 0;
    size_t layer_bytes = attention_state_bytes(cfg, &m->attention, c->seq_len);
    size_t scratch = attention_step_scratch_floats(cfg, &m->attention, c->seq_len), total;
    if (layer_bytes == 0 || scratch == 0) {
        fprintf(stderr, "model: attention %s: invalid parameters for this model (%d heads of "
                "%d, context %d)\n", attention_kind_name(cfg->kind), c->n_heads, c->head_dim,
                c->seq_len);
        return -1;
    }
    if (size_mul(layer_bytes, (size_t)c->n_layers, &total) != 0) goto out_of_memory;
    /* one block for all layers, carved into L equal cache-line-aligned parts */
    m->attention_state = calloc(total, 1);
    m->state.scratch = calloc(scratch, sizeof(float));
    if (!m->attention_state || !m->state.scratch) goto out_of_memory;
    for (int l = 0; l < c->n_layers; l++)
        attention_state_init(cfg, &m->attention, c->seq_len, l,
                             (char *)m->attention_state + (size_t)l * layer_bytes);
    m->attention_config = *cfg;
    m->attention_layer_bytes = layer_bytes;
    return 0;
out_of_memory:
    fprintf(stderr, "model: attention %s: out of memory for %d layers of %zu bytes\n",
            attention_kind_name(cfg->kind), c->n_layers, layer_bytes);
    free(m->attention_state);
    free(m->state.scratch);
    m->attention_state = NULL;
    m->state.scratch = NULL;
    return -1;
}

/* Reads up to n bytes from the start of fd into buf; returns the count, or -1. */
static long read_up_to(int fd, void *buf, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t got = read(fd, (char *)buf + done, n - done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) break;
        done += (size_t)got;
    }
    return (long)done;
}

/* What each storage is called in messages, with what had to be assumed. */
static const char *storage_name(Storage storage) {
    switch (storage) {
    case STORE_GPT2_F32: return "llm.c GPT-2 checkpoint, fp32";
    case STORE_GPT2_BF16: return "llm.c GPT-2 checkpoint, bf16 (widened to fp32 at load)";
    case STORE_LLAMA_LEGACY: return "llama2.c legacy checkpoint, fp32 (no magic number: "
                                    "recognised by its 7-int header and exact file size)";
    case STORE_LLAMA_F32: return "llama2.c checkpoint version 1, fp32";
    case STORE_LLAMA_Q8: return "llama2.c checkpoint version 2, int8 Q8_0 (dequantized to "
                                "fp32 at load)";
    }
    return "unknown";
}

int model_load(Model *m, const char *path, int max_chunk) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "model: %s: cannot open (%s)\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    unsigned char header[MODEL_HEADER_INTS * sizeof(int32_t)];
    Layout layout = {0};
    Config *c = &m->config;
    size_t expected;
    long header_bytes;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "model: %s: not a regular file\n", path);
        goto fail;
    }
    size_t file_size = (size_t)st.st_size;
    if ((header_bytes = read_up_to(fd, header, sizeof header)) < 0) {
        fprintf(stderr, "model: %s: read error (%s)\n", path, strerror(errno));
        goto fail;
    }
    if (parse_header(c, &layout, path, header, (size_t)header_bytes) != 0) goto fail;
    if (expected_file_size(c, &layout, &expected) != 0) {
        fprintf(stderr, "model: %s: header dimensions overflow the address space\n", path);
        goto fail;
    }
    if (file_size != expected) {
        fprintf(stderr, "model: %s: file size does not match its header (got %zu bytes, "
                "expected %zu for a %s: %s)\n", path, file_size, expected,
                storage_name(layout.storage), file_size < expected ? "truncated"
                                                                   : "trailing bytes");
        goto fail;
    }
    if (max_chunk < 1) {
        fprintf(stderr, "model: %s: chunk size out of range (got %d, expected >= 1)\n",
                path, max_chunk);
        goto fail;
    }
    m->format = storage_name(layout.storage);
    m->map = mmap(NULL, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m->map == MAP_FAILED) {
        m->map = NULL;
        fprintf(stderr, "model: %s: mmap failed (%s)\n", path, strerror(errno));
        goto fail;
    }
    m->map_size = file_size;
    const unsigned char *data = (const unsigned char *)m->map + layout.data_offset;
    const float *params = (const float *)data;
    if (layout.storage == STORE_GPT2_BF16 || layout.storage == STORE_LLAMA_Q8) {
        /* convert once into an owned fp32 block, then drop the map */
        size_t n_params = 0;
        if (layout.storage == STORE_GPT2_BF16) gpt2_param_count(c, &n_params);
        else llama_param_count(c, &layout, &n_params);
        m->params = malloc(n_params * sizeof(float));
        if (!m->params) goto out_of_memory;
        if (layout.storage == STORE_GPT2_BF16) bf16_to_float(m->params, (const uint16_t *)data,
                                                             n_params);
        else q8_to_float(m->params, data, c, &layout);
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
    m->weights.layers = calloc((size_t)c->n_layers, sizeof *m->weights.layers);
    if (!m->weights.layers || alloc_state(m) != 0) goto out_of_memory;
    if (c->family == MODEL_GPT2) gpt2_point_weights(&m->weights, c, params);
    else llama_point_weights(&m->weights, c, params, &layout);
    AttentionConfig exact;
    attention_config_default(&exact);
    if (model_set_attention(m, &exact) != 0) goto fail;
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
    free(m->attention_state);
    RunState *s = &m->state;
    free(s->x); free(s->xn); free(s->q); free(s->k); free(s->v); free(s->att); free(s->hidden);
    free(s->gate); free(s->logits); free(s->scratch);
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

/* The sum of a dot product from its eight interleaved partial sums acc (lane j holds
 * the products of indices i = j mod 8 below `from`), then the products from `from` to n.
 * Every matmul path ends here, so all give the same bits for the same inputs. */
static float dot_finish(const float acc[8], const float *a, const float *b, int from, int n) {
    float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (int i = from; i < n; i++) sum += a[i] * b[i];
    return sum;
}

/* a . b over n floats, in eight interleaved partial sums so the compiler can keep
 * them in one vector register; the order is fixed, so the result is deterministic. */
static float dot(const float *a, const float *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    return dot_finish(acc, a, b, i, n);
}

#ifdef __AVX2__
/* The four sums of dot products whose eight partial sums are in a, b, c, d, each
 * reduced exactly as dot_finish does: ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). */
static __m128 reduce4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 ab = _mm256_hadd_ps(a, b);      /* a01 a23 b01 b23 | a45 a67 b45 b67 */
    __m256 cd = _mm256_hadd_ps(c, d);      /* c01 c23 d01 d23 | c45 c67 d45 d67 */
    __m256 abcd = _mm256_hadd_ps(ab, cd);  /* a0123 b0123 c0123 d0123 | a4567 ... */
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* out[n .. n+2, o .. o+3] for a 3 x 4 tile: twelve dot products at once, each in one
 * 8-lane register, so each loaded row of x or w feeds three or four of them. The
 * lanes see exactly dot()'s multiplies and adds (no fused multiply-add) in the same
 * order, and reduce4 adds them up in dot_finish's order, so the tile is bitwise equal
 * to the scalar path. */
static void matmul_tile_3x4(float *out, const float *x, const float *w, const float *b,
                            int n, int o, int IC, int OC) {
    const float *x0 = x + (size_t)n * IC, *x1 = x0 + IC, *x2 = x1 + IC;
    const float *w0 = w + (size_t)o * IC, *w1 = w0 + IC, *w2 = w1 + IC, *w3 = w2 + IC;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00;
    __m256 a12 = a00, a13 = a00, a20 = a00, a21 = a00, a22 = a00, a23 = a00;
    int i = 0;
    for (; i + 8 <= IC; i += 8) {
        __m256 v0 = _mm256_loadu_ps(w0 + i), v1 = _mm256_loadu_ps(w1 + i);
        __m256 v2 = _mm256_loadu_ps(w2 + i), v3 = _mm256_loadu_ps(w3 + i);
        __m256 u = _mm256_loadu_ps(x0 + i);
        a00 = _mm256_add_ps(a00, _mm256_mul_ps(u, v0));
        a01 = _mm256_add_ps(a01, _mm256_mul_ps(u, v1));
        a02 = _mm256_add_ps(a02, _mm256_mul_ps(u, v2));
        a03 = _mm256_add_ps(a03, _mm256_mul_ps(u, v3));
        u = _mm256_loadu_ps(x1 + i);
        a10 = _mm256_add_ps(a10, _mm256_mul_ps(u, v0));
        a11 = _mm256_add_ps(a11, _mm256_mul_ps(u, v1));
        a12 = _mm256_add_ps(a12, _mm256_mul_ps(u, v2));
        a13 = _mm256_add_ps(a13, _mm256_mul_ps(u, v3));
        u = _mm256_loadu_ps(x2 + i);
        a20 = _mm256_add_ps(a20, _mm256_mul_ps(u, v0));
        a21 = _mm256_add_ps(a21, _mm256_mul_ps(u, v1));
        a22 = _mm256_add_ps(a22, _mm256_mul_ps(u, v2));
        a23 = _mm256_add_ps(a23, _mm256_mul_ps(u, v3));
    }
    __m128 sums[3] = {reduce4(a00, a01, a02, a03), reduce4(a10, a11, a12, a13),
                      reduce4(a20, a21, a22, a23)};
    const float *x_r[3] = {x0, x1, x2}, *w_c[4] = {w0, w1, w2, w3};
    for (int r = 0; r < 3; r++) {
        float *out_r = out + (size_t)(n + r) * OC + o;
        if (i == IC && b) {          /* no tail: add the biases and store four at once */
            _mm_storeu_ps(out_r, _mm_add_ps(sums[r], _mm_loadu_ps(b + o)));
            continue;
        }
        float s[4];
        _mm_storeu_ps(s, sums[r]);
        for (int c = 0; c < 4; c++) {
            for (int j = i; j < IC; j++) s[c] += x_r[r][j] * w_c[c][j];
            out_r[c] = s[c] + (b ? b[o + c] : 0.0f);
        }
    }
}
#endif

/* out[n0 .. n1, o0 .. o1) of out (N, OC) = x . w^T + b: one parallel job. */
static void matmul_block(float *out, const float *x, const float *w, const float *b,
                         int n0, int n1, int o0, int o1, int IC, int OC) {
    int o = o0;
#ifdef __AVX2__
    for (; o + 4 <= o1; o += 4) {   /* whole 3 x 4 tiles; the rows left over go below */
        int n = n0;
        for (; n + 3 <= n1; n += 3) matmul_tile_3x4(out, x, w, b, n, o, IC, OC);
        for (; n < n1; n++)
            for (int c = o; c < o + 4; c++)
                out[(size_t)n * OC + c] = dot(x + (size_t)n * IC, w + (size_t)c * IC, IC) +
                                          (b ? b[c] : 0.0f);
    }
#endif
    for (; o < o1; o++) {   /* the portable path, and columns left over from the tiles */
        const float *w_o = w + (size_t)o * IC;
        float bias = b ? b[o] : 0.0f;
        for (int n = n0; n < n1; n++)
            out[(size_t)n * OC + o] = dot(x + (size_t)n * IC, w_o, IC) + bias;
    }
}

void model_matmul(float *out, const float *x, const float *w, const float *b,
                  int N, int IC, int OC) {
    /* The output is cut into blocks of MATMUL_ROWS x MATMUL_COLS, small enough that
     * their rows of x and w stay in cache. Each block is one job and each output
     * element is one thread's dot product in a fixed order, so threads never share an
     * output and the sums do not depend on the thread count. Small products stay on
     * one thread: starting a parallel region costs more than they do. */
    int row_blocks = (N + MATMUL_ROWS - 1) / MATMUL_ROWS;
    int col_blocks = (OC + MATMUL_COLS - 1) / MATMUL_COLS;
    #pragma omp parallel for schedule(static) if ((long)N * IC * OC >= MODEL_PARALLEL_MIN_MACS)
    for (int job = 0; job < row_blocks * col_blocks; job++) {
        int n0 = job / col_blocks * MATMUL_ROWS, o0 = job % col_blocks * MATMUL_COLS;
        int n1 = n0 + MATMUL_ROWS < N ? n0 + MATMUL_ROWS : N;
        int o1 = o0 + MATMUL_COLS < OC ? o0 + MATMUL_COLS : OC;
        matmul_block(out, x, w, b, n0, n1, o0, o1, IC, OC);
    }
}

void model_gelu(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(GELU_SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v)));
    }
}

void model_rmsnorm(float *out, const float *x, const float *w, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C;
        float *out_n = out + (size_t)n * C;
        float ss = 0.0f;
        for (int i = 0; i < C; i++) ss += x_n[i] * x_n[i];
        float rms_inv = 1.0f / sqrtf(ss / (float)C + MODEL_NORM_EPS);
        for (int i = 0; i < C; i++) out_n[i] = w[i] * (rms_inv * x_n[i]);
    }
}

/* x (N, C) += y (N, C) */
static void residual_add(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

/* The norm before a sublayer: LayerNorm with bias for GPT-2, RMSNorm for Llama. */
static void norm(const Config *c, float *out, const float *x, const float *w, const float *b,
                 int N) {
    if (c->family == MODEL_GPT2) model_layernorm(out, x, w, b, N, c->dim);
    else model_rmsnorm(out, x, w, N, c->dim);
}

/* Rotary position embedding as llama2.c applies it: within each head, the pairs of
 * adjacent dimensions (i, i+1) of q (N, C) and k (N, KVD) are rotated by the angle
 * (pos + n) * base^(-(i % HS) / HS) (Su et al. 2021, arXiv:2104.09864). */
static void rope(const Config *c, float *q, float *k, int N, int pos) {
    int C = c->dim, KVD = c->kv_dim, HS = c->head_dim;
    for (int n = 0; n < N; n++) {
        float *q_n = q + (size_t)n * C, *k_n = k + (size_t)n * KVD;
        for (int i = 0; i < C; i += 2) {
            float freq = 1.0f / powf(MODEL_ROPE_BASE, (float)(i % HS) / (float)HS);
            float angle = (float)(pos + n) * freq, cos_a = cosf(angle), sin_a = sinf(angle);
            for (float *v = q_n; v; v = (v == q_n && i < KVD) ? k_n : NULL) {
                float v0 = v[i], v1 = v[i + 1];
                v[i] = v0 * cos_a - v1 * sin_a;
                v[i + 1] = v0 * sin_a + v1 * cos_a;
            }
        }
    }
}

/* SwiGLU: hidden (n,) = SiLU(hidden) * gate, SiLU(x) = x * sigmoid(x). */
static void swiglu(float *hidden, const float *gate, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = hidden[i];
        hidden[i] = v * (1.0f / (1.0f + expf(-v))) * gate[i];
    }
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
    if (!m->attention_state) {
        fprintf(stderr, "model: no attention state (model_set_attention failed)\n");
        return NULL;
    }
    int C = c->dim, Hd = c->hidden_dim, KVD = c->kv_dim, S = c->seq_len;

    /* x[n] = wte[token n] (+ wpe[pos + n] for learned positions) */
    for (int t = 0; t < n; t++) {
        const float *wte_t = w->token_embedding + (size_t)tokens[t] * C;
        float *x_t = s->x + (size_t)t * C;
        for (int i = 0; i < C; i++) x_t[i] = wte_t[i];
        if (w->pos_embedding) {
            const float *wpe_t = w->pos_embedding + (size_t)(pos + t) * C;
            for (int i = 0; i < C; i++) x_t[i] += wpe_t[i];
        }
    }

    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *lw = &w->layers[l];
        /* seek to this layer's attention state (its KV cache, ring or recurrent sums) */
        void *state_l = (char *)m->attention_state + (size_t)l * m->attention_layer_bytes;

        /* attention sublayer: x += W_O . attention(norm1(x) W_Q, W_K, W_V) */
        norm(c, s->xn, s->x, lw->norm1_w, lw->norm1_b, n);
        model_matmul(s->q, s->xn, lw->wq, lw->bq, n, C, C);
        model_matmul(s->k, s->xn, lw->wk, lw->bk, n, C, KVD);
        model_matmul(s->v, s->xn, lw->wv, lw->bv, n, C, KVD);
        if (c->family == MODEL_LLAMA) rope(c, s->q, s->k, n, pos);
        /* the state stores k, v (N, KVD) of positions pos .. pos+n-1, then attends */
        if (attention_step(&m->attention_config, &m->attention, state_l, S, s->att, s->q, s->k,
                           s->v, pos, n, s->scratch) != 0) {
            fprintf(stderr, "model: attention %s cannot continue at position %d (the "
                    "sequence so far ends at another position; start again at 0)\n",
                    attention_kind_name(m->attention_config.kind), pos);
            return NULL;
        }
        model_matmul(s->xn, s->att, lw->wo, lw->bo, n, C, C);
        residual_add(s->x, s->xn, (size_t)n * C);

        /* MLP sublayer: x += W_down . act(W_up . norm2(x)), act = GELU or SwiGLU */
        norm(c, s->xn, s->x, lw->norm2_w, lw->norm2_b, n);
        model_matmul(s->hidden, s->xn, lw->w_up, lw->b_up, n, C, Hd);
        if (c->family == MODEL_GPT2) {
            model_gelu(s->hidden, (size_t)n * Hd);
        } else {
            model_matmul(s->gate, s->xn, lw->w_gate, NULL, n, C, Hd);
            swiglu(s->hidden, s->gate, (size_t)n * Hd);
        }
        model_matmul(s->xn, s->hidden, lw->w_down, lw->b_down, n, Hd, C);
        residual_add(s->x, s->xn, (size_t)n * C);
    }

    /* final norm, then logits (rows, V) = xn (rows, C) . classifier (V, C)^T */
    int first = all_logits ? 0 : n - 1, rows = n - first;
    norm(c, s->xn, s->x + (size_t)first * C, w->norm_final_w, w->norm_final_b, rows);
    model_matmul(s->logits, s->xn, w->classifier, NULL, rows, C, c->vocab_size);
    return s->logits;
}

/* fuzz_checkpoint.c: fuzz target for checkpoint_load on arbitrary bytes, in every format
 * checkpoint.c recognises from the first bytes (llm.c GPT-2 fp32, bf16 and int8 version
 * 80; llama2.c legacy, version 1 and version 2), and for what runs on a loaded model.
 *
 * The bytes go to a per-process temp file (the loader takes a path). A file that loads
 * must have a consistent Config and Weights; small ones also run a prefill in chunks and
 * one token at a time through model_load's model, and are written in int8 by
 * checkpoint_save_q8 (the quantize program), which must load again with the same Config.
 * Inputs that start with STRUCTURED_TAG instead describe a tiny model (see build_tiny):
 * the file is made valid by construction, so the fuzzer explores shapes, formats, int8
 * groups and weight bytes rather than the exact-size check; such files must load, and
 * with untouched random weights prefill and single steps must agree to a tolerance.
 */
#include <math.h>        /* isfinite, fabsf */
#include <stdio.h>       /* remove */
#include <stdlib.h>      /* atexit, malloc, free */
#include <string.h>      /* memcmp, memcpy */

#include "tests/fuzz/fuzz.h"   /* the entry points, FUZZ_CHECK, temp files, writers */
#include "checkpoint.h"  /* checkpoint_load, checkpoint_save_q8, Config */
#include "model.h"       /* model_load, model_set_context, model_forward */

#define FORWARD_MAX_BYTES (4 << 20)  /* larger files skip the forward pass and int8 form */
#define FORWARD_CHUNK 2              /* tokens per model_forward call for raw inputs */
#define FORWARD_CTX 16               /* most positions the forward pass runs */
#define Q8_GROUPS 40                 /* int8 group sizes 1..40 are tried, by input size */
#define TOKEN_STRIDE 7               /* the pass feeds tokens 0, 7, 14, ... mod V */
#define LOGIT_ATOL 1e-4f             /* prefill vs single steps: GEMM and matrix-vector */
#define LOGIT_RTOL 1e-4f             /* kernels sum in different orders (kernels.h) */

/* ---- the structured mode: STRUCTURED_TAG, then one byte per field, then weight bytes */
static const unsigned char STRUCTURED_TAG[] = {'T', 'I', 'N', 'Y'};   /* as a legacy dim:
                                                   * 1498302804, never a valid header */
enum { TINY_FORMAT, TINY_HEADS, TINY_HEAD_DIM, TINY_KV, TINY_LAYERS, TINY_HIDDEN, TINY_VOCAB,
       TINY_PAD, TINY_CTX, TINY_GROUP, TINY_FLAGS, TINY_SEED, TINY_FIELDS };
enum { FMT_GPT2_FP32, FMT_GPT2_BF16, FMT_GPT2_Q8, FMT_LLAMA_LEGACY, FMT_LLAMA_V1,
       FMT_LLAMA_V2, FMT_COUNT };
#define TINY_MAX_HEADS 4     /* NH in 1..4 */
#define TINY_MAX_HEAD_DIM 8  /* HS in 1..8 (Llama: even, 2..8) */
#define TINY_MAX_LAYERS 3    /* L in 1..3 */
#define TINY_MAX_HIDDEN 48   /* Llama Hd in 1..48 (GPT-2: 4C) */
#define TINY_MAX_VOCAB 64    /* V in 1..64 */
#define TINY_MAX_PAD 8       /* GPT-2 Vp - V in 0..7 */
#define TINY_MAX_CTX 16      /* S in 1..16 */
#define TINY_MAX_GROUP 40    /* int8 group in 1..40 */
#define FLAG_SHARED 1        /* TINY_FLAGS bit 0: Llama classifier tied to the embedding, */
#define FLAG_ROTARY 1        /* ... GPT-2 rotary positions (header [10] = 1, no wpe) */
#define FLAG_CHUNK_SHIFT 1   /* TINY_FLAGS bits 1..: prefill chunk 1 + (b >> 1) % 16 */
#define CTX_HUGE_BIT 0x80    /* TINY_CTX: a versioned Llama file gets the longest context
                              * (no tensor grows with it; model_load caps the cache) */

static char input_path[FUZZ_PATH_MAX], q8_path[FUZZ_PATH_MAX], source_path[FUZZ_PATH_MAX];

static void remove_temp_files(void) {
    remove(input_path);
    remove(q8_path);
    remove(source_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (fuzz_temp_path(input_path, sizeof input_path, "checkpoint") != 0 ||
        fuzz_temp_path(q8_path, sizeof q8_path, "checkpoint_q8") != 0 ||
        fuzz_temp_path(source_path, sizeof source_path, "checkpoint_source") != 0)
        fuzz_fail("temp path too long");
    atexit(remove_temp_files);
    return 0;
}

/* Checks what checkpoint.h promises of a loaded checkpoint. */
static void check_loaded(const Checkpoint *ck) {
    const Config *c = &ck->config;
    FUZZ_CHECK(c->family == MODEL_GPT2 || c->family == MODEL_LLAMA);
    FUZZ_CHECK(c->seq_len >= 1 && c->seq_len <= MODEL_MAX_SEQ_LEN);
    FUZZ_CHECK(c->vocab_size >= 1 && c->vocab_size <= c->padded_vocab_size);
    FUZZ_CHECK(c->padded_vocab_size <= MODEL_MAX_VOCAB);
    FUZZ_CHECK(c->n_layers >= 1 && c->n_layers <= MODEL_MAX_LAYERS);
    FUZZ_CHECK(c->n_heads >= 1 && c->n_kv_heads >= 1 && c->n_heads % c->n_kv_heads == 0);
    FUZZ_CHECK(c->head_dim * c->n_heads == c->dim);
    FUZZ_CHECK(c->kv_dim == c->n_kv_heads * c->head_dim);
    FUZZ_CHECK(c->hidden_dim >= 1 && c->hidden_dim <= MODEL_MAX_DIM);
    FUZZ_CHECK(ck->format[0] != '\0');
    const Weights *w = &ck->weights;
    FUZZ_CHECK(w->layers != NULL && w->norm_final_w != NULL);
    FUZZ_CHECK(fuzz_one_form(&w->token_embedding) && fuzz_one_form(&w->classifier));
    FUZZ_CHECK(c->family == MODEL_GPT2 || c->positions == MODEL_POSITIONS_ROTARY);
    FUZZ_CHECK((c->positions == MODEL_POSITIONS_LEARNED) == (w->pos_embedding != NULL));
    FUZZ_CHECK(c->positions == MODEL_POSITIONS_LEARNED || c->head_dim % 2 == 0);
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *lw = &w->layers[l];
        FUZZ_CHECK(lw->norm1_w && lw->norm2_w);
        FUZZ_CHECK(fuzz_one_form(&lw->wq) && fuzz_one_form(&lw->w_down));
    }
}

/* 1 if every logit is finite and a and b (n,) agree within the tolerances. */
static int logits_agree(const float *a, const float *b, int n) {
    for (int i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return 1;   /* nothing to compare */
        if (fabsf(a[i] - b[i]) > LOGIT_ATOL + LOGIT_RTOL * fabsf(b[i])) return 0;
    }
    return 1;
}

/* Runs min(context, FORWARD_CTX) tokens through the model at path: as a prefill in chunks
 * of `chunk`, then again one token at a time; with compare, the last logits must agree.
 * A header's huge context is capped by model_load at MODEL_MAX_STATE_BYTES of KV cache
 * (the libFuzzer build lowers it: tests/fuzz/fuzz.mk). */
static void run_forward(const char *path, const Config *c, int chunk, int compare) {
    Model m;
    if (model_load(&m, path, chunk, 0) != 0) {   /* one position too big, or no memory */
        model_free(&m);
        return;
    }
    FUZZ_CHECK(m.n_alloc >= 1 && m.n_alloc <= c->seq_len && m.max_chunk <= m.n_alloc);
    int n_alloc = m.n_alloc < FORWARD_CTX ? m.n_alloc : FORWARD_CTX, V = c->vocab_size;
    FUZZ_CHECK(model_set_context(&m, n_alloc) == 0);
    int tokens[FORWARD_CTX];
    for (int t = 0; t < n_alloc; t++) tokens[t] = (int)(((long)t * TOKEN_STRIDE) % V);
    float *prefill = malloc((size_t)V * sizeof(float));
    if (!prefill) fuzz_fail("out of memory for %d logits", V);
    const float *logits = NULL;
    for (int pos = 0; pos < n_alloc; pos += m.max_chunk) {
        int n = n_alloc - pos < m.max_chunk ? n_alloc - pos : m.max_chunk;
        FUZZ_CHECK((logits = model_forward(&m, tokens + pos, n, pos, 1)) != NULL);
        memcpy(prefill, logits + (size_t)(n - 1) * (size_t)V, (size_t)V * sizeof(float));
    }
    FUZZ_CHECK(model_forward(&m, tokens, 1, n_alloc, 0) == NULL);   /* past the context */
    FUZZ_CHECK(model_set_context(&m, n_alloc) == 0);                /* start again */
    for (int pos = 0; pos < n_alloc; pos++)
        FUZZ_CHECK((logits = model_forward(&m, tokens + pos, 1, pos, 0)) != NULL);
    if (compare && !logits_agree(prefill, logits, V))
        fuzz_fail("prefill in chunks of %d and single steps disagree at position %d",
                  m.max_chunk, n_alloc - 1);
    free(prefill);
    model_free(&m);
}

/* 1 if some weight of ck (fp32, a half, or an int8 value times its scale) is not
 * finite: what checkpoint_save_q8 refuses. Read from the tensors directly, not through
 * checkpoint.c's views. */
static int has_non_finite(const Checkpoint *ck) {
    for (int t = 0; t < TENSOR_COUNT; t++) {
        const CheckpointTensor *x = &ck->tensors[t];
        if (!x->present) continue;
        size_t n = (size_t)x->rows * (size_t)x->cols, groups = 0;
        if (x->q) groups = ((size_t)x->cols + (size_t)x->group - 1) / (size_t)x->group;
        for (int l = 0; l < x->layers; l++) {
            const CheckpointPart *part = x->parts ? &x->parts[l] : NULL;
            const float *f32 = part ? part->f32 : x->f32 ? x->f32 + (size_t)l * n : NULL;
            const uint16_t *f16 = part ? part->f16 : x->f16 ? x->f16 + (size_t)l * n : NULL;
            const int8_t *q = part ? part->q : x->q ? x->q + (size_t)l * x->q_stride : NULL;
            const float *scale = part ? part->scale
                                 : x->scale ? x->scale + (size_t)l * (size_t)x->rows * groups
                                 : NULL;
            for (size_t i = 0; i < n; i++) {
                if (f32 && !isfinite(f32[i])) return 1;
                if (f16 && (f16[i] & 0x7c00u) == 0x7c00u) return 1;   /* inf or NaN */
                if (q && scale &&
                    !isfinite((float)q[i] * scale[i / (size_t)x->cols * groups +
                                                  i % (size_t)x->cols / (size_t)x->group]))
                    return 1;
            }
        }
    }
    return 0;
}

/* Writes ck in int8 and checks that the file loads with the same Config; a model with a
 * weight that is not finite must be refused instead, with no file written. */
static void check_q8_roundtrip(const Checkpoint *ck, int group) {
    Checkpoint q8;
    remove(q8_path);   /* an earlier input's */
    if (checkpoint_save_q8(ck, q8_path, group) != 0) {
        FUZZ_CHECK(has_non_finite(ck));
        FILE *f = fopen(q8_path, "rb");
        FUZZ_CHECK(f == NULL);
        return;
    }
    if (checkpoint_load(&q8, q8_path) != 0) fuzz_fail("int8 form (group %d) does not load", group);
    const Config *a = &ck->config, *b = &q8.config;
    FUZZ_CHECK(a->family == b->family && a->seq_len == b->seq_len);
    FUZZ_CHECK(a->vocab_size == b->vocab_size && a->padded_vocab_size == b->padded_vocab_size);
    FUZZ_CHECK(a->n_layers == b->n_layers && a->n_heads == b->n_heads);
    FUZZ_CHECK(a->n_kv_heads == b->n_kv_heads && a->dim == b->dim);
    FUZZ_CHECK(a->hidden_dim == b->hidden_dim);
    FUZZ_CHECK(ck->weights.shared_classifier == q8.weights.shared_classifier);
    FUZZ_CHECK(q8.weights.int8);
    checkpoint_free(&q8);
}

/* The file a structured input describes (f: TINY_FIELDS bytes), as malloc'd bytes with
 * their count in *size and the header length in *header; int8 formats go through
 * checkpoint_save_q8. Every field is reduced into a small valid range. */
static unsigned char *build_tiny(const unsigned char *f, size_t *size, size_t *header) {
    int format = f[TINY_FORMAT] % FMT_COUNT, llama = format >= FMT_LLAMA_LEGACY;
    Config c = {.family = llama ? MODEL_LLAMA : MODEL_GPT2};
    int rotary = llama || (f[TINY_FLAGS] & FLAG_ROTARY);
    c.positions = rotary ? MODEL_POSITIONS_ROTARY : MODEL_POSITIONS_LEARNED;
    c.n_heads = 1 + f[TINY_HEADS] % TINY_MAX_HEADS;
    int head_dim = rotary ? 2 * (1 + f[TINY_HEAD_DIM] % (TINY_MAX_HEAD_DIM / 2))
                          : 1 + f[TINY_HEAD_DIM] % TINY_MAX_HEAD_DIM;
    c.dim = c.n_heads * head_dim;
    c.n_kv_heads = c.n_heads;   /* Llama: the largest divisor of NH up to the byte's pick */
    if (llama)
        for (c.n_kv_heads = 1 + f[TINY_KV] % c.n_heads; c.n_heads % c.n_kv_heads; )
            c.n_kv_heads--;
    c.n_layers = 1 + f[TINY_LAYERS] % TINY_MAX_LAYERS;
    c.hidden_dim = 1 + f[TINY_HIDDEN] % TINY_MAX_HIDDEN;
    c.vocab_size = 1 + f[TINY_VOCAB] % TINY_MAX_VOCAB;
    c.padded_vocab_size = c.vocab_size + (llama ? 0 : f[TINY_PAD] % TINY_MAX_PAD);
    c.seq_len = 1 + f[TINY_CTX] % TINY_MAX_CTX;
    if ((format == FMT_LLAMA_V1 || format == FMT_LLAMA_V2) && (f[TINY_CTX] & CTX_HUGE_BIT))
        c.seq_len = MODEL_MAX_SEQ_LEN;
    int shared = f[TINY_FLAGS] & FLAG_SHARED, group = 1 + f[TINY_GROUP] % TINY_MAX_GROUP;
    unsigned char *bytes = llama ? fuzz_tiny_llama(&c, format == FMT_LLAMA_LEGACY, shared,
                                                   f[TINY_SEED], size)
                                 : fuzz_tiny_gpt2(&c, format == FMT_GPT2_BF16, f[TINY_SEED], size);
    if (!bytes) fuzz_fail("out of memory for a tiny checkpoint");
    *header = format == FMT_LLAMA_LEGACY ? CHECKPOINT_LLAMA_LEGACY_INTS * sizeof(int32_t)
            : llama ? CHECKPOINT_LLAMA_HEADER_BYTES
            : CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t);
    if (format != FMT_GPT2_Q8 && format != FMT_LLAMA_V2) return bytes;
    if (fuzz_write_file(source_path, bytes, *size) != 0 ||
        fuzz_write_q8(source_path, q8_path, group) != 0) fuzz_fail("cannot write the int8 form");
    free(bytes);
    if (!(bytes = fuzz_read_file(q8_path, size))) fuzz_fail("cannot read the int8 form");
    return bytes;
}

/* Loads the file at input_path (size bytes) and runs every check on it; must_load: a
 * failure to load is a bug. chunk: prefill chunk; compare: check prefill vs steps. */
static void check_file(size_t size, int must_load, int chunk, int compare) {
    Checkpoint ck;
    if (checkpoint_load(&ck, input_path) != 0) {
        if (must_load) fuzz_fail("a valid tiny checkpoint does not load");
        FUZZ_CHECK(ck.map == NULL && ck.owned == NULL && ck.weights.layers == NULL);
        checkpoint_free(&ck);   /* safe after a failure, and twice */
        return;
    }
    check_loaded(&ck);
    if (size <= FORWARD_MAX_BYTES) {
        run_forward(input_path, &ck.config, chunk, compare);
        check_q8_roundtrip(&ck, 1 + (int)(size % Q8_GROUPS));
    }
    checkpoint_free(&ck);
    checkpoint_free(&ck);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t tag = sizeof STRUCTURED_TAG;
    if (size < tag + TINY_FIELDS || memcmp(data, STRUCTURED_TAG, tag) != 0) {
        if (fuzz_write_file(input_path, data, size) != 0) fuzz_fail("cannot write the input");
        check_file(size, 0, FORWARD_CHUNK, 0);
        return 0;
    }
    const unsigned char *fields = data + tag, *weights = fields + TINY_FIELDS;
    size_t file_size, header, n_weights = size - tag - TINY_FIELDS;
    unsigned char *file = build_tiny(fields, &file_size, &header);
    /* the rest of the input overwrites the start of the tensors: NaN, huge values, int8
     * -128 and odd scales become reachable */
    size_t room = file_size - header, n = n_weights < room ? n_weights : room;
    if (n) memcpy(file + header, weights, n);
    if (fuzz_write_file(input_path, file, file_size) != 0) fuzz_fail("cannot write the input");
    free(file);
    int format = fields[TINY_FORMAT] % FMT_COUNT;
    int int8 = format == FMT_GPT2_Q8 || format == FMT_LLAMA_V2;
    int chunk = 1 + (fields[TINY_FLAGS] >> FLAG_CHUNK_SHIFT) % TINY_MAX_CTX;
    check_file(file_size, n == 0 || !int8, chunk, n == 0);
    return 0;
}

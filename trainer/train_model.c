/* train_model.c: the trainer's network: parameters, their GPT-2 initialisation, the
 * activations, and the batched forward pass (train_model.h).
 *
 * The forward runs block.c's block, the code run's forward runs, over B sequences at
 * once: the buffers it is given are each layer's own slices of the activations, so
 * everything the backward needs is kept; its hooks attend within each sequence and add
 * each sublayer's output to the stream through dropout. Around the blocks: the embedding
 * (with dropout), the final LayerNorm, the tied classifier and the cross-entropy. Every
 * product runs on kernels_matmul_wt's register tile, so each forward first transposes
 * every weight matrix (under 1% of a step). It does not know about gradients
 * (train_backward.c) or files (train_optim.c).
 * Every parallel loop is a kernels_parallel_for whose jobs depend only on the shapes and
 * write disjoint outputs, so results are the same bits for any thread count.
 *
 * Legend: B sequences, T positions, N = B * T rows, C width, Hd = 4 C, L layers,
 * V vocab, n row, i column.
 */
#include "train_model.h"

#include <math.h>         /* logf, sqrtf, cosf, ceilf */
#include <stdint.h>       /* uint64_t */
#include <stdio.h>        /* fprintf */
#include <stdlib.h>       /* aligned_alloc, calloc, free */
#include <string.h>       /* memcpy, memset */

#include "attention.h"    /* attention_forward and the scratch sizes */
#include "block.h"        /* block_qkv, block_finish, block_norm: the block run executes */
#include "hash.h"         /* hash_mix64, hash_threshold, hash_drops */
#include "kernels.h"      /* kernels_matmul_wt, kernels_transpose, kernels_layernorm, ... */
#include "model.h"        /* Config, AttentionShape, MODEL_MAX_* */

#define PI_F 3.14159265358979f
#define ROWS_PER_JOB 32         /* row-wise loops (LayerNorm, softmax): rows per job */
#define ELEMENTS_PER_JOB 16384  /* elementwise loops: floats per job */
#define DROPOUT_BLOCK 256       /* dropout: entries masked at a time before a sum */
#define MATRICES_PER_LAYER 6    /* transposed per layer: W_q, W_k, W_v, W_o, W_up, W_down */
#define CACHE_LINE 64           /* bytes; buffers start on a line (floats_alloc) */

/* ------------------------------------------------------------------------- */
/* Random numbers (hash.h)                                                    */

/* Uniform in [0, 1) from the top 24 bits of r. */
static float uniform_from(uint64_t r) { return (float)(r >> HASH_TOP_SHIFT) / HASH_ONE; }

/* Standard normal by Box-Muller from two draws of the stream *state. */
static float normal_next(uint64_t *state) {
    float u1 = uniform_from(hash_mix64((*state)++));
    float u2 = uniform_from(hash_mix64((*state)++));
    if (u1 < 1e-7f) u1 = 1e-7f;   /* log(0) would give -inf */
    return sqrtf(-2.0f * logf(u1)) * cosf(2.0f * PI_F * u2);
}

/* ------------------------------------------------------------------------- */
/* Parameters                                                                  */

size_t trainer_tensor_sizes(size_t size[TRAIN_N_TENSORS], const Config *c, int sink_logits,
                            size_t synth) {
    size_t V = (size_t)c->padded_vocab_size, S = (size_t)c->seq_len, L = (size_t)c->n_layers;
    size_t C = (size_t)c->dim, Hd = (size_t)c->hidden_dim, total = 0;
    size_t NH = (size_t)c->n_heads;
    size_t wpe = c->positions == MODEL_POSITIONS_LEARNED ? S * C : 0;   /* rotary: none */
    size_t sizes[TRAIN_N_TENSORS] = {
        V * C, wpe, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
        L * C, L * C, L * Hd * C, L * Hd, L * C * Hd, L * C, C, C, sink_logits ? L * NH : 0,
        synth};
    memcpy(size, sizes, sizeof sizes);
    for (int i = 0; i < TRAIN_N_TENSORS; i++) total += sizes[i];
    return total;
}

/* Point the 17 views of t into block, in file order. */
static void tensors_point(TrainTensors *t, float *block, const size_t size[TRAIN_N_TENSORS]) {
    float **views[TRAIN_N_TENSORS] = {
        &t->wte, &t->wpe, &t->ln1w, &t->ln1b, &t->qkvw, &t->qkvb, &t->attprojw, &t->attprojb,
        &t->ln2w, &t->ln2b, &t->fcw, &t->fcb, &t->fcprojw, &t->fcprojb, &t->lnfw, &t->lnfb,
        &t->sink, &t->synth};
    for (int i = 0; i < TRAIN_N_TENSORS; i++) {
        *views[i] = block;
        block += size[i];
    }
}

int trainer_tensor_decayed(int i) {
    static const int DECAYED[TRAIN_N_TENSORS] = {1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0,
                                                 0, 1};
    return i >= 0 && i < TRAIN_N_TENSORS && DECAYED[i];
}

/* GPT-2 initialisation: weights N(0, 0.02), the two projections into the residual
 * stream scaled by 1/sqrt(2 L) (GPT-2 paper, section 2.3), biases 0, norms 1. */
static void params_init(Trainer *tr) {
    uint64_t stream = hash_mix64(tr->settings.seed);
    float residual_std = TRAIN_INIT_STD / sqrtf(2.0f * (float)tr->config.n_layers);
    float *block = tr->params;
    for (int i = 0; i < TRAIN_N_TENSORS; i++) {
        float *p = block;
        block += tr->tensor_size[i];
        if (p == tr->p.ln1w || p == tr->p.ln2w || p == tr->p.lnfw) {
            for (size_t j = 0; j < tr->tensor_size[i]; j++) p[j] = 1.0f;
        } else if (trainer_tensor_decayed(i)) {
            float std = (p == tr->p.attprojw || p == tr->p.fcprojw) ? residual_std
                                                                   : TRAIN_INIT_STD;
            for (size_t j = 0; j < tr->tensor_size[i]; j++) p[j] = std * normal_next(&stream);
        } else {
            for (size_t j = 0; j < tr->tensor_size[i]; j++) p[j] = 0.0f;
        }
    }
}

/* A weight matrix of params as block.c takes it: with its transpose, which sits at the
 * same offset in params_t (made by every trainer_forward) for kernels_matmul_wt. */
static Matrix param_matrix(const Trainer *tr, const float *w) {
    return (Matrix){.f32 = w, .f32_t = tr->params_t + (w - tr->params)};
}

/* Point layers[l] (the views block.c reads) at layer l's slices of the 16 tensors. */
BlockTensors train_layer_tensors(const TrainTensors *t, const Config *c, int l) {
    size_t C = (size_t)c->dim, Hd = (size_t)c->hidden_dim, L = (size_t)l;
    float *qkv = t->qkvw + L * 3 * C * C, *qkv_b = t->qkvb + L * 3 * C;   /* W_Q; W_K; W_V */
    return (BlockTensors){
        .norm1_w = t->ln1w + L * C, .norm1_b = t->ln1b + L * C,
        .wq = qkv, .wk = qkv + C * C, .wv = qkv + 2 * C * C,
        .bq = qkv_b, .bk = qkv_b + C, .bv = qkv_b + 2 * C,
        .wo = t->attprojw + L * C * C, .bo = t->attprojb + L * C,
        .norm2_w = t->ln2w + L * C, .norm2_b = t->ln2b + L * C,
        .w_up = t->fcw + L * Hd * C, .b_up = t->fcb + L * Hd,
        .w_down = t->fcprojw + L * C * Hd, .b_down = t->fcprojb + L * C};
}

/* tr->layers: each layer's parameters as block.c reads them (fp32, and their transposes
 * for the forward's products). */
static void layers_point(Trainer *tr) {
    for (int l = 0; l < tr->config.n_layers; l++) {
        BlockTensors t = train_layer_tensors(&tr->p, &tr->config, l);
        tr->layers[l] = (LayerWeights){
            .norm1_w = t.norm1_w, .norm1_b = t.norm1_b,
            .wq = param_matrix(tr, t.wq), .wk = param_matrix(tr, t.wk),
            .wv = param_matrix(tr, t.wv), .bq = t.bq, .bk = t.bk, .bv = t.bv,
            .wo = param_matrix(tr, t.wo), .bo = t.bo,
            .norm2_w = t.norm2_w, .norm2_b = t.norm2_b,
            .w_up = param_matrix(tr, t.w_up), .b_up = t.b_up,
            .w_down = param_matrix(tr, t.w_down), .b_down = t.b_down};
    }
}

/* ------------------------------------------------------------------------- */
/* Init and free                                                               */

int trainer_check_config(const Config *c, int B, const char *subject) {
    if (c->seq_len < 1 || c->vocab_size < 1 || c->n_layers < 1 || c->n_heads < 1 ||
        c->dim < 1 || B < 1 || c->dim % c->n_heads != 0 || c->dim > MODEL_MAX_DIM / 4 ||
        c->vocab_size > MODEL_MAX_VOCAB || c->n_layers > MODEL_MAX_LAYERS ||
        c->seq_len > MODEL_MAX_SEQ_LEN || B > TRAIN_MAX_BATCH) {
        fprintf(stderr, "train: %s: model shape out of range (got V %d, L %d, NH %d, C %d, "
                "T %d, B %d; expected all >= 1, C divisible by NH, V <= %d, L <= %d, "
                "C <= %d, T <= %d, B <= %d)\n", subject, c->vocab_size, c->n_layers,
                c->n_heads, c->dim, c->seq_len, B, MODEL_MAX_VOCAB, MODEL_MAX_LAYERS,
                MODEL_MAX_DIM / 4, MODEL_MAX_SEQ_LEN, TRAIN_MAX_BATCH);
        return -1;
    }
    if ((c->positions != MODEL_POSITIONS_LEARNED && c->positions != MODEL_POSITIONS_ROTARY) ||
        (c->positions == MODEL_POSITIONS_ROTARY && (c->dim / c->n_heads) % 2 != 0)) {
        fprintf(stderr, "train: %s: position scheme out of range (got %d with head size %d; "
                "expected %d, learned, or %d, rotary, which needs an even head size)\n",
                subject, (int)c->positions, c->dim / c->n_heads, MODEL_POSITIONS_LEARNED,
                MODEL_POSITIONS_ROTARY);
        return -1;
    }
    /* every buffer's floats, in float64 (exact here) so that nothing wraps: the
     * parameters 5 times (values, transposes, gradients, two moments), then the
     * activations; refused if the bytes would not fit in size_t */
    double C = c->dim, L = c->n_layers, V = c->vocab_size, T = c->seq_len, N = (double)B * T;
    double params = V * C + T * C + L * (12.0 * C * C + 13.0 * C) + 2.0 * C;
    double floats = 5.0 * params + N * (L * 17.0 * C + 12.0 * C + 2.0 * V + 4.0) +
                    (double)B * 2.0 * c->n_heads * T;
    if (floats * sizeof(float) > (double)SIZE_MAX / 2) {
        fprintf(stderr, "train: %s: model too large for this machine (got %.3g bytes of "
                "parameters and activations, expected at most %.3g)\n", subject,
                floats * sizeof(float), (double)SIZE_MAX / 2);
        return -1;
    }
    return 0;
}

/* n zeroed floats aligned to a cache line (free() releases them), or NULL. Threads write
 * the gradients and activations in blocks that start at multiples of 16 floats of a row:
 * with the rows on cache-line boundaries no line is written by two threads at once
 * (calloc's large blocks start 16 bytes past a page, which puts every block boundary in
 * the middle of a line). */
static float *floats_alloc(size_t n) {
    size_t bytes = (n * sizeof(float) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
    float *x = aligned_alloc(CACHE_LINE, bytes > 0 ? bytes : CACHE_LINE);
    if (x) memset(x, 0, bytes);
    return x;
}

/* What trainer_init knows before allocating: the shapes, the attention geometry and the
 * parameter count of a trainer of config c and batch B. Returns 0, or -1 after a stderr
 * line (c out of range). */
static int trainer_shape(Trainer *tr, const Config *c, const TrainSettings *settings, int B) {
    memset(tr, 0, sizeof *tr);
    if (trainer_check_config(c, B, "model") != 0) return -1;
    tr->config = *c;
    tr->config.padded_vocab_size = c->vocab_size;
    tr->config.n_kv_heads = c->n_heads;
    tr->config.hidden_dim = 4 * c->dim;
    tr->config.head_dim = c->dim / c->n_heads;
    tr->config.kv_dim = c->dim;
    tr->settings = *settings;
    tr->settings.batch = B;
    tr->B = B;
    tr->T = c->seq_len;
    tr->heads.n_heads = c->n_heads;
    tr->heads.n_kv_heads = c->n_heads;
    tr->heads.head_dim = tr->config.head_dim;
    tr->heads.scale = 1.0f / sqrtf((float)tr->config.head_dim);
    /* in range (trainer_check_config), so no size below overflows a 64-bit size_t */
    size_t scratch = attention_scratch_floats(&tr->heads, tr->T);
    size_t scratch_back = attention_backward_scratch_floats(&tr->heads, tr->T);
    tr->attention_scratch = scratch > scratch_back ? scratch : scratch_back;
    int sinks = 0;
    tr->dparam_floats = (size_t)c->n_heads;
    if (settings->attention) {
        size_t random = 0, synth = 0;
        for (int l = 0; l < c->n_layers; l++) {
            AttentionConfig layer_cfg = settings->attention[l];
            const AttentionConfig *cfg = &layer_cfg;
            layer_cfg.synth_len = tr->T;   /* a Synthesizer's parameters cover the context */
            size_t layer = attention_train_scratch_floats(cfg, &tr->heads, tr->T);
            char spec_kind[32];
            snprintf(spec_kind, sizeof spec_kind, "%s", attention_kind_name(cfg->kind));
            char problem[256];
            if (attention_context_check(cfg, tr->T, problem, sizeof problem) != 0) {
                fprintf(stderr, "train: attention of layer %d: %s\n", l, problem);
                return -1;
            }
            if (layer == 0) {
                fprintf(stderr, "train: attention %s of layer %d: invalid for this model (%d "
                        "heads of %d, context %d)\n", spec_kind, l, c->n_heads,
                        tr->config.head_dim, tr->T);
                return -1;
            }
            if (layer > tr->attention_scratch) tr->attention_scratch = layer;
            tr->random_offset[l] = random;
            random += attention_random_floats(cfg, &tr->heads);
            tr->synth_offset[l] = synth;
            size_t params = attention_synth_floats(cfg, &tr->heads);
            synth += params;
            if (params > tr->dparam_floats) tr->dparam_floats = params;
            sinks |= cfg->sink_logit;
            tr->variant |= !model_attention_is_plain(cfg);
        }
        tr->random_offset[c->n_layers] = random;
        tr->synth_offset[c->n_layers] = synth;
    }
    tr->n_params = trainer_tensor_sizes(tr->tensor_size, &tr->config, sinks,
                                        tr->synth_offset[c->n_layers]);
    return 0;
}

/* Every float buffer of a trainer: where its pointer goes, and its floats. */
typedef struct {
    float **at;
    size_t floats;
} Buffer;
enum { TRAIN_MAX_BUFFERS = 40 };

/* The buffers of tr (shaped by trainer_shape) into list; returns how many. The
 * parameter-sized ones first: n_parameter_buffers of them. */
static int trainer_buffers(Trainer *tr, Buffer list[TRAIN_MAX_BUFFERS],
                           int *n_parameter_buffers) {
    TrainActivations *a = &tr->a;
    size_t N = (size_t)tr->B * (size_t)tr->T, C = (size_t)tr->config.dim;
    size_t L = (size_t)tr->config.n_layers, Hd = 4 * C, V = (size_t)tr->config.vocab_size;
    size_t P = tr->n_params;
    int n = 0;
#define BUFFER(pointer, count) (list[n++] = (Buffer){&(pointer), (count)})
    BUFFER(tr->params, P);
    BUFFER(tr->params_t, P);
    BUFFER(tr->grads, P);
    BUFFER(tr->adam_m, P);
    BUFFER(tr->adam_v, P);
    if (tr->settings.ema > 0.0f) BUFFER(tr->ema, P);
    *n_parameter_buffers = n;
    BUFFER(a->encoded, N * C);
    BUFFER(a->ln1, L * N * C);
    BUFFER(a->q, L * N * C);
    BUFFER(a->k, L * N * C);
    BUFFER(a->v, L * N * C);
    BUFFER(a->atty, L * N * C);
    BUFFER(a->residual2, L * N * C);
    BUFFER(a->ln2, L * N * C);
    BUFFER(a->fch, L * N * Hd);
    BUFFER(a->fch_gelu, L * N * Hd);
    BUFFER(a->residual3, L * N * C);
    BUFFER(a->lnf, N * C);
    BUFFER(a->logits, N * V);
    BUFFER(a->probs, N * V);
    BUFFER(a->losses, N);
    BUFFER(a->dresidual, N * C);
    BUFFER(a->dtmp, N * C);
    BUFFER(a->dln, N * C);
    BUFFER(a->datty, N * C);
    BUFFER(a->dq, N * C);
    BUFFER(a->dk, N * C);
    BUFFER(a->dv, N * C);
    BUFFER(a->dfch, N * Hd);
    BUFFER(a->scratch, (size_t)tr->B * tr->attention_scratch);
    BUFFER(a->dparam, (size_t)tr->B * tr->dparam_floats);
    if (block_rotary(&tr->config)) BUFFER(a->rope, N * (size_t)tr->config.head_dim);
    if (tr->random_offset[L] > 0) BUFFER(tr->random, tr->random_offset[L]);
    BUFFER(a->mean, N);
    BUFFER(a->rstd, N);
#undef BUFFER
    return n;
}

/* Bytes of tr's buffers (shaped by trainer_shape): all, and the parameter-sized part. */
static size_t trainer_bytes(Trainer *tr, size_t *parameter_bytes) {
    Buffer list[TRAIN_MAX_BUFFERS];
    int n_parameters, n = trainer_buffers(tr, list, &n_parameters);
    size_t floats = 0, parameter_floats = 0;
    for (int i = 0; i < n; i++) {
        floats += list[i].floats;
        if (i < n_parameters) parameter_floats += list[i].floats;
    }
    size_t N = (size_t)tr->B * (size_t)tr->T;
    *parameter_bytes = parameter_floats * sizeof(float);
    return floats * sizeof(float) + 2 * N * sizeof(int) +
           (size_t)tr->config.n_layers * (sizeof(LayerWeights) + sizeof(AttentionConfig));
}

const char *trainer_format_bytes(char *out, size_t cap, size_t bytes) {
    if (bytes < (size_t)10000000) snprintf(out, cap, "%zu byte%s", bytes, bytes == 1 ? "" : "s");
    else snprintf(out, cap, "%.2f GB", (double)bytes * 1e-9);
    return out;
}

size_t trainer_memory_bytes(const Config *c, const TrainSettings *settings, int B) {
    Trainer tr;
    size_t parameter_bytes;
    return trainer_shape(&tr, c, settings, B) == 0 ? trainer_bytes(&tr, &parameter_bytes) : 0;
}

int trainer_init(Trainer *tr, const Config *c, const TrainSettings *settings, int B) {
    if (trainer_shape(tr, c, settings, B) != 0) return -1;
    size_t parameter_bytes, bytes = trainer_bytes(tr, &parameter_bytes);
    if (settings->max_memory && bytes > settings->max_memory) {
        char all[32], parameters[32], activations[32], limit[32];
        fprintf(stderr, "train: the run needs %s of memory (parameters and optimizer %s, "
                "activations of a batch of %d x %d tokens %s), more than the limit of %s "
                "(expected less: lower -B, -T, -L or -C, or raise --max-memory)\n",
                trainer_format_bytes(all, sizeof all, bytes),
                trainer_format_bytes(parameters, sizeof parameters, parameter_bytes), B, tr->T,
                trainer_format_bytes(activations, sizeof activations, bytes - parameter_bytes),
                trainer_format_bytes(limit, sizeof limit, settings->max_memory));
        memset(tr, 0, sizeof *tr);
        return -1;
    }
    Buffer list[TRAIN_MAX_BUFFERS];
    int n_parameters, n = trainer_buffers(tr, list, &n_parameters), ok = 1;
    for (int i = 0; i < n; i++) ok = (*list[i].at = floats_alloc(list[i].floats)) && ok;
    size_t N = (size_t)B * (size_t)tr->T;
    tr->inputs = calloc(N, sizeof(int));
    tr->targets = calloc(N, sizeof(int));
    tr->layers = calloc((size_t)c->n_layers, sizeof(LayerWeights));
    tr->attn = calloc((size_t)c->n_layers, sizeof(AttentionConfig));
    if (!ok || !tr->inputs || !tr->targets || !tr->layers || !tr->attn) {
        fprintf(stderr, "train: out of memory (%zu parameters, batch %d x %d: %.2f GB)\n",
                tr->n_params, B, tr->T, (double)bytes * 1e-9);
        trainer_free(tr);
        return -1;
    }
    tensors_point(&tr->p, tr->params, tr->tensor_size);
    tensors_point(&tr->g, tr->grads, tr->tensor_size);
    layers_point(tr);
    params_init(tr);
    if (tr->a.rope)   /* every sequence's positions 0 .. T-1: the angles model.c computes */
        for (int b = 0; b < B; b++)
            block_rope_angles(&tr->config, NULL,
                              tr->a.rope + (size_t)b * tr->T * tr->config.head_dim, tr->T, 0);
    for (int l = 0; l < c->n_layers; l++) {
        if (settings->attention) tr->attn[l] = settings->attention[l];
        else attention_config_default(&tr->attn[l]);
        tr->attn[l].sink_logits = tr->attn[l].sink_logit
                                ? tr->p.sink + (size_t)l * (size_t)c->n_heads : NULL;
        tr->attn[l].synth_len = tr->T;
        tr->attn[l].synth = attention_is_synth(tr->attn[l].kind)
                          ? tr->p.synth + tr->synth_offset[l] : NULL;
        tr->random_draw[l] = -1;
    }
    tr->settings.attention = NULL;   /* the caller's array; tr->attn is the trainer's own */
    if (tr->ema) memcpy(tr->ema, tr->params, tr->n_params * sizeof(float));
    tr->dropout_on = 1;
    return 0;
}

void trainer_free(Trainer *tr) {
    TrainActivations *a = &tr->a;
    float *buffers[] = {
        tr->params, tr->params_t, tr->grads, tr->adam_m, tr->adam_v, tr->ema, a->encoded,
        a->ln1, a->q, a->k, a->v, a->atty, a->residual2, a->ln2, a->fch, a->fch_gelu,
        a->residual3, a->lnf, a->logits, a->probs, a->losses, a->dresidual, a->dtmp, a->dln,
        a->datty, a->dq, a->dk, a->dv, a->dfch, a->scratch, a->mean, a->rstd, a->dparam,
        a->rope, tr->random};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) free(buffers[i]);
    free(tr->inputs);
    free(tr->targets);
    free(tr->attn);
    free(tr->layers);
    memset(tr, 0, sizeof *tr);
}

/* ------------------------------------------------------------------------- */
/* Row-wise and elementwise loops, as jobs of kernels_parallel_for               */

/* Arguments of the loops below; each uses the fields it names. */
typedef struct {
    float *out;
    const float *x, *y, *w, *b;
    const int *tokens, *targets;
    float *losses;
    size_t n;                /* elementwise: floats */
    int N, C, T;             /* row-wise: rows, width; embedding: positions */
    float p;                 /* dropout probability */
    uint64_t key;            /* dropout key */
} TrainForwardJob;

uint64_t train_dropout_key(const Trainer *tr, int layer, int site) {
    return hash_mix64(tr->settings.seed ^ hash_mix64(((uint64_t)tr->step << 24) ^
                                                       ((uint64_t)layer << 2) ^ (uint64_t)site));
}

void trainer_batch(const Trainer *tr, const int *tokens, size_t n, int *inputs,
                   int *targets) {
    int B = tr->B, T = tr->T;
    for (int b = 0; b < B; b++) {
        uint64_t r = hash_mix64(tr->settings.seed ^
                                 hash_mix64(((uint64_t)tr->step << 20) | (uint64_t)b));
        size_t start = (size_t)(r % (uint64_t)(n - (size_t)T));
        for (int t = 0; t < T; t++) {
            inputs[b * T + t] = tokens[start + (size_t)t];
            targets[b * T + t] = tokens[start + (size_t)t + 1];
        }
    }
    if (tr->settings.token_noise <= 0.0f) return;
    /* element i is replaced by hash.h's dropout rule; a second hash of its hash picks the
     * position */
    uint64_t key = train_dropout_key(tr, tr->config.n_layers, 3);
    uint64_t threshold = hash_threshold(tr->settings.token_noise);
    for (size_t i = 0; i < (size_t)B * (size_t)T; i++) {
        uint64_t h = hash_mix64(key + i);
        if (hash_drops(h, threshold)) inputs[i] = tokens[hash_mix64(h) % n];
    }
}

/* A chunk of out = drop(x) (y NULL) or out = x + drop(y), drop(z) = z * mask / (1 - p):
 * mask_i = 0 by hash.h's dropout rule for key + i (kernels_dropout), DROPOUT_BLOCK
 * entries at a time into a small array before the sum. */
static void dropout_job(void *ctx, int j) {
    const TrainForwardJob *f = ctx;
    size_t start = (size_t)j * ELEMENTS_PER_JOB, end = start + ELEMENTS_PER_JOB;
    if (end > f->n) end = f->n;
    if (f->p <= 0.0f) {   /* no dropout (evaluation): a plain sum */
        for (size_t i = start; i < end; i++) f->out[i] = f->y ? f->x[i] + f->y[i] : f->x[i];
        return;
    }
    if (!f->y) {
        kernels_dropout(f->out + start, f->x + start, end - start, f->p, f->key + start);
        return;
    }
    float kept[DROPOUT_BLOCK];
    for (size_t i0 = start; i0 < end; i0 += DROPOUT_BLOCK) {
        size_t count = end - i0 < DROPOUT_BLOCK ? end - i0 : DROPOUT_BLOCK;
        kernels_dropout(kept, f->y + i0, count, f->p, f->key + i0);
        for (size_t i = 0; i < count; i++) f->out[i0 + i] = f->x[i0 + i] + kept[i];
    }
}

void train_dropout(float *out, const float *x, size_t n, float p, uint64_t key) {
    if (p <= 0.0f) {
        if (out != x) memcpy(out, x, n * sizeof(float));
        return;
    }
    TrainForwardJob f = {.out = out, .x = x, .n = n, .p = p, .key = key};
    kernels_parallel_for(dropout_job, &f, kernels_jobs(n, ELEMENTS_PER_JOB), (double)n);
}

/* out (n,) = x + drop(y): dropout on a sublayer's output y with the mask of (layer,
 * site) at this step (none while evaluating). */
static void residual_add(void *ctx, int layer, int site, float *out, const float *x,
                         const float *y, size_t n) {
    const Trainer *tr = ctx;
    TrainForwardJob f = {.out = out, .x = x, .y = y, .n = n,
              .p = tr->dropout_on ? tr->settings.dropout : 0.0f,
              .key = train_dropout_key(tr, layer, site)};
    kernels_parallel_for(dropout_job, &f, kernels_jobs(n, ELEMENTS_PER_JOB), (double)n);
}

/* residual_add's backward: dy (n,) = drop(dout) with the same mask. */
static void residual_dropout_grad(void *ctx, int layer, int site, float *dy, const float *dout,
                          size_t n) {
    const Trainer *tr = ctx;
    train_dropout(dy, dout, n, tr->dropout_on ? tr->settings.dropout : 0.0f,
                  train_dropout_key(tr, layer, site));
}

BlockResidual train_residual(Trainer *tr) {
    return (BlockResidual){.add = residual_add, .grad = residual_dropout_grad, .ctx = tr};
}

/* Rows of the embedding: out[n] = wte[tokens[n]] + wpe[n mod T] (y = wpe), or wte[tokens[n]]
 * alone for rotary positions (y NULL). */
static void embedding_job(void *ctx, int j) {
    const TrainForwardJob *f = ctx;
    int n1 = (j + 1) * ROWS_PER_JOB < f->N ? (j + 1) * ROWS_PER_JOB : f->N;
    for (int n = j * ROWS_PER_JOB; n < n1; n++) {
        const float *wte_n = f->x + (size_t)f->tokens[n] * f->C;
        float *x_n = f->out + (size_t)n * f->C;
        if (!f->y) {
            memcpy(x_n, wte_n, (size_t)f->C * sizeof(float));
            continue;
        }
        const float *wpe_t = f->y + (size_t)(n % f->T) * f->C;
        for (int i = 0; i < f->C; i++) x_n[i] = wte_n[i] + wpe_t[i];
    }
}

/* Softmax and cross-entropy of a block of rows (see train_crossentropy_forward). */
static void crossentropy_job(void *ctx, int j) {
    const TrainForwardJob *f = ctx;
    int V = f->C, n1 = (j + 1) * ROWS_PER_JOB < f->N ? (j + 1) * ROWS_PER_JOB : f->N;
    for (int n = j * ROWS_PER_JOB; n < n1; n++) {
        const float *logits_n = f->x + (size_t)n * V;
        float *probs_n = f->out + (size_t)n * V;
        float max = kernels_max(logits_n + 1, V - 1, logits_n[0]);
        memcpy(probs_n, logits_n, (size_t)V * sizeof(float));
        float sum = kernels_exp_sum(probs_n, V, max);   /* probs = exp(logits - max) */
        float inv_sum = 1.0f / sum;
        for (int i = 0; i < V; i++) probs_n[i] *= inv_sum;
        /* -log softmax[target] = log(sum) - (logit[target] - max), exact even when tiny */
        int target = f->targets[n];
        f->losses[n] = target < 0 ? 0.0f : logf(sum) - (logits_n[target] - max);
    }
}

void train_crossentropy_forward(float *probs, float *losses, const float *logits,
                                const int *targets, int N, int V) {
    TrainForwardJob f = {.out = probs, .x = logits, .targets = targets, .losses = losses, .N = N,
                         .C = V};
    kernels_parallel_for(crossentropy_job, &f, kernels_jobs((size_t)N, ROWS_PER_JOB),
                         (double)N * V);
}

/* ------------------------------------------------------------------------- */
/* Forward                                                                     */

/* Job j of the transposition: matrix j % 6 of layer j / 6 (W_q, W_k, W_v, W_o, W_up,
 * W_down), or the classifier wte after the layers; each into its place in params_t. */
static void transpose_job(void *ctx, int j) {
    Trainer *tr = ctx;
    size_t C = (size_t)tr->config.dim, Hd = (size_t)tr->config.hidden_dim;
    int V = tr->config.vocab_size, L = tr->config.n_layers;
    const float *base = tr->params;
    float *base_t = tr->params_t;
    if (j == MATRICES_PER_LAYER * L) {
        kernels_transpose(base_t, base, V, (int)C);   /* wte is the first tensor */
        return;
    }
    size_t l = (size_t)(j / MATRICES_PER_LAYER), at = 0;
    int rows = (int)C, cols = (int)C;
    switch (j % MATRICES_PER_LAYER) {
    case 0: case 1: case 2:   /* W_q, W_k, W_v: the (C, C) blocks of qkvw[l] */
        at = (size_t)(tr->p.qkvw - base) + (l * 3 + (size_t)(j % MATRICES_PER_LAYER)) * C * C;
        break;
    case 3: at = (size_t)(tr->p.attprojw - base) + l * C * C; break;
    case 4: at = (size_t)(tr->p.fcw - base) + l * Hd * C; rows = (int)Hd; break;
    default: at = (size_t)(tr->p.fcprojw - base) + l * C * Hd; cols = (int)Hd; break;
    }
    kernels_transpose(base_t + at, base + at, rows, cols);
}

AttentionDropout train_attention_dropout(const Trainer *tr, int layer, int b) {
    /* a call's mask covers NH T^2 indices from its key: one span per sequence b */
    uint64_t span = (uint64_t)tr->config.n_heads * (uint64_t)tr->T * (uint64_t)tr->T;
    int weighted = !tr->settings.attention ||
                   attention_has_weights(tr->settings.attention[layer].kind);
    AttentionDropout drop = {tr->dropout_on && weighted ? tr->settings.attn_dropout : 0.0f,
                             train_dropout_key(tr, layer, 2) + (uint64_t)b * span};
    return drop;
}

/* Attention of one sequence b per job, each with its own scratch. */
typedef struct {
    const Trainer *tr;
    int layer;
    float *out;
    const float *q, *k, *v;
} SequenceAttentionJob;

static void attention_job(void *ctx, int b) {
    const SequenceAttentionJob *f = ctx;
    const Trainer *tr = f->tr;
    size_t seq = (size_t)b * tr->T * tr->config.dim;   /* seek to sequence b */
    AttentionDropout drop = train_attention_dropout(tr, f->layer, b);
    float *scratch = tr->a.scratch + (size_t)b * tr->attention_scratch;
    const AttentionConfig *cfg = &tr->attn[f->layer];
    if (model_attention_is_plain(cfg))
        attention_forward_dropout(&tr->heads, &drop, f->out + seq, f->q + seq, f->k + seq,
                                  f->v + seq, tr->T, scratch);
    else   /* valid: trainer_init checked it, so it returns 0 */
        attention_train_forward(cfg, &tr->heads, train_layer_random(tr, f->layer), &drop,
                                f->out + seq, f->q + seq, f->k + seq, f->v + seq, tr->T,
                                scratch);
}

const float *train_layer_random(const Trainer *tr, int l) {
    return tr->random_offset[l + 1] > tr->random_offset[l] ? tr->random + tr->random_offset[l]
                                                           : NULL;
}

/* Draws each layer's random matrices for this step, if they change: evaluation uses draw 0
 * (the draw run's state makes), training the step's (LSH every step, Performer every
 * settings.redraw steps). */
static void draw_step_random(Trainer *tr) {
    for (int l = 0; l < tr->config.n_layers; l++) {
        if (!train_layer_random(tr, l)) continue;
        const AttentionConfig *cfg = &tr->attn[l];
        int redraw = tr->settings.redraw > 0 ? tr->settings.redraw : TRAIN_DEFAULT_REDRAW;
        long long draw = !tr->dropout_on ? 0
                       : cfg->kind == ATTENTION_LSH ? tr->step : tr->step / redraw;
        if (draw == tr->random_draw[l]) continue;
        attention_draw_random(cfg, &tr->heads, l, (unsigned long long)draw,
                              tr->random + tr->random_offset[l]);
        tr->random_draw[l] = draw;
    }
}

BlockBuffers train_block_buffers(const Trainer *tr, int l) {
    const TrainActivations *a = &tr->a;
    size_t N = (size_t)tr->B * (size_t)tr->T, C = (size_t)tr->config.dim;
    size_t Hd = (size_t)tr->config.hidden_dim;
    return (BlockBuffers){
        .x = l == 0 ? a->encoded : TRAIN_LAYER(a->residual3, l - 1, N, C),
        .xn1 = TRAIN_LAYER(a->ln1, l, N, C), .q = TRAIN_LAYER(a->q, l, N, C),
        .k = TRAIN_LAYER(a->k, l, N, C), .v = TRAIN_LAYER(a->v, l, N, C),
        .att = TRAIN_LAYER(a->atty, l, N, C), .proj = a->dtmp,
        .x_mid = TRAIN_LAYER(a->residual2, l, N, C), .xn2 = TRAIN_LAYER(a->ln2, l, N, C),
        .pre = TRAIN_LAYER(a->fch, l, N, Hd), .act = TRAIN_LAYER(a->fch_gelu, l, N, Hd),
        .out = TRAIN_LAYER(a->residual3, l, N, C),
        /* a Synthesizer reads q as the token's, unrotated */
        .rope = attention_is_synth(tr->attn[l].kind) ? NULL : a->rope};
}

/* out (N, C) = each of the B sequences' attention over its own T positions. */
static void attend_batch(const Trainer *tr, int layer, float *out, const float *q,
                         const float *k, const float *v) {
    SequenceAttentionJob att = {tr, layer, out, q, k, v};
    kernels_parallel_for(attention_job, &att, tr->B,   /* scores and sums: ~2 T^2 C each */
                         2.0 * tr->B * tr->T * tr->T * tr->config.dim);
}

/* trainer_forward's arguments and result, for kernels_run. */
typedef struct {
    Trainer *tr;
    const int *inputs, *targets;
    float loss;
} ForwardCall;

static void forward_body(void *ctx) {
    ForwardCall *call = ctx;
    Trainer *tr = call->tr;
    const int *inputs = call->inputs, *targets = call->targets;
    const Config *c = &tr->config;
    const TrainTensors *p = &tr->p;
    TrainActivations *a = &tr->a;
    int B = tr->B, T = tr->T, C = c->dim, V = c->vocab_size;
    int L = c->n_layers;
    size_t N = (size_t)B * T;
    float drop = tr->dropout_on ? tr->settings.dropout : 0.0f;
    memcpy(tr->inputs, inputs, N * sizeof(int));
    /* every weight matrix transposed, for kernels_matmul_wt */
    kernels_parallel_for(transpose_job, tr, MATRICES_PER_LAYER * L + 1, (double)tr->n_params);
    draw_step_random(tr);

    /* encoded (N, C) = wte[token] + wpe[t] (wte[token] with rotary positions, which
     * block_qkv applies to q and k), then embedding dropout */
    TrainForwardJob embed = {.out = a->encoded, .x = p->wte,
                  .y = c->positions == MODEL_POSITIONS_LEARNED ? p->wpe : NULL,
                  .tokens = inputs, .N = (int)N,
                  .C = C, .T = T};
    kernels_parallel_for(embedding_job, &embed, kernels_jobs(N, ROWS_PER_JOB), (double)N * C);
    train_dropout(a->encoded, a->encoded, N * C, drop, train_dropout_key(tr, L, 0));

    /* the blocks, each layer's activations kept for the backward pass */
    BlockResidual residual = train_residual(tr);
    for (int l = 0; l < L; l++) {
        BlockBuffers b = train_block_buffers(tr, l);
        block_qkv(c, &tr->layers[l], (int)N, &b);
        attend_batch(tr, l, b.att, b.q, b.k, b.v);
        block_finish(c, &tr->layers[l], l, (int)N, &b, &residual);
    }

    /* final LayerNorm, logits (N, V) = lnf . wte^T (the tied classifier) */
    block_norm(c, a->lnf, TRAIN_LAYER(a->residual3, L - 1, N, C), p->lnfw, p->lnfb, (int)N);
    Matrix classifier = param_matrix(tr, p->wte);
    block_matmul(a->logits, a->lnf, &classifier, NULL, (int)N, C, V, NULL, NULL);
    call->loss = 0.0f;
    if (!targets) return;

    memcpy(tr->targets, targets, N * sizeof(int));
    train_crossentropy_forward(a->probs, a->losses, a->logits, targets, (int)N, V);
    double sum = 0.0;
    tr->n_targets = 0;
    for (size_t n = 0; n < N; n++) {
        if (targets[n] < 0) continue;
        sum += (double)a->losses[n];
        tr->n_targets++;
    }
    call->loss = tr->n_targets ? (float)(sum / tr->n_targets) : 0.0f;
}

float trainer_forward(Trainer *tr, const int *inputs, const int *targets) {
    /* the whole pass on kernels_run's pool: its loops hand jobs to threads that wait,
     * with no thread start or barrier per loop */
    ForwardCall call = {tr, inputs, targets, 0.0f};
    kernels_run(forward_body, &call);
    return call.loss;
}

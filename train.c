/* train.c: train a GPT-2 model from scratch on a text file (the second program).
 *
 * Library part (what train.h declares): parameters in llm.c's 16-tensor layout, a
 * batched forward pass built from model.c's layer functions, a backward pass for
 * every layer (attention's lives in attention.c), AdamW with warmup and cosine
 * decay, gradient clipping, and checkpoints in the format run loads, each with an
 * optimizer state tied to it by a checksum, both written crash-safe (temporary file,
 * fsync, rename). Program part (main, below the last rule): flags, the BPE tokenizer
 * (bpe.c), data checks, the loop.
 * Every parallel loop writes disjoint outputs and no sum depends on the thread
 * count, so a run is bit-for-bit reproducible for a seed. Read train.h first.
 *
 * Legend: B sequences, T positions, N = B * T rows, C width, Hd = 4 C, L layers,
 * V vocab, IC/OC a matmul's input/output width, n row, o output column, i input column.
 */
#include "train.h"

#include <errno.h>        /* errno */
#include <limits.h>       /* INT_MAX (flag parsing) */
#include <math.h>         /* expf, logf, sqrtf, tanhf, fabsf, cosf, powf, isfinite */
#include <stdint.h>       /* int32_t, uint32_t, uint64_t */
#include <stdio.h>        /* FILE, fopen, fread, fwrite, fprintf, printf, rename, remove */
#include <stdlib.h>       /* calloc, malloc, free */
#include <string.h>       /* memcpy, memset, strcmp, strerror */
#include <time.h>         /* clock_gettime (progress line) */
#include <fcntl.h>        /* open, O_RDONLY (POSIX: syncing a folder) */
#include <unistd.h>       /* fsync, close, access (POSIX) */

#ifdef _OPENMP
#include <omp.h>          /* omp_get_max_threads (progress line) */
#endif

#include "attention.h"    /* attention_forward, attention_backward and their scratch sizes */
#include "bpe.h"          /* bpe_train, bpe_save: the tokenizer trainer (program only) */
#include "cli.h"          /* cli_parse_int, cli_parse_float, cli_printable (flag parsing) */
#include "kernels.h"      /* kernels_matmul(_backward), kernels_layernorm, kernels_gelu */
#include "model.h"        /* Config */
#include "tokenizer.h"    /* tokenizer_load, tokenizer_encode (program only) */

#define GELU_SQRT_2_OVER_PI 0.7978845608028654f  /* sqrt(2 / pi), as model.c's GELU */
#define GELU_CUBIC 0.044715f                      /* x^3 coefficient, as model.c's GELU */
#define PI_F 3.14159265358979f
#define GELU_RECOVER_MIN 1e-2f  /* |x| above which GELU's backward reads tanh from its output */
#define ROWS_PER_JOB 32        /* rows per parallel job in row-wise kernels */
#define ELEMENTS_PER_JOB 16384 /* elementwise kernels: floats per parallel job */
#define PARALLEL_MIN_WORK 65536 /* smaller loops run on one thread: a parallel region costs more */

/* ------------------------------------------------------------------------- */
/* Random numbers: splitmix64 (https://prng.di.unimi.it/splitmix64.c)          */

/* A 64-bit mixing function: distinct inputs give well-spread outputs. */
static uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) from the top 24 bits of a 64-bit value. */
static float uniform_from(uint64_t r) { return (float)(r >> 40) * (1.0f / 16777216.0f); }

/* Standard normal by Box-Muller from two draws of the stream *state. */
static float normal_next(uint64_t *state) {
    float u1 = uniform_from(mix64((*state)++)), u2 = uniform_from(mix64((*state)++));
    if (u1 < 1e-7f) u1 = 1e-7f;   /* log(0) would give -inf */
    return sqrtf(-2.0f * logf(u1)) * cosf(2.0f * PI_F * u2);
}

/* ------------------------------------------------------------------------- */
/* Parameters                                                                  */

/* Floats of each of the 16 tensors for config c, in file order. */
static void tensor_sizes(size_t size[TRAIN_N_TENSORS], const Config *c) {
    size_t V = (size_t)c->padded_vocab_size, S = (size_t)c->seq_len, L = (size_t)c->n_layers;
    size_t C = (size_t)c->dim, Hd = (size_t)c->hidden_dim;
    size_t sizes[TRAIN_N_TENSORS] = {
        V * C, S * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
        L * C, L * C, L * Hd * C, L * Hd, L * C * Hd, L * C, C, C};
    memcpy(size, sizes, sizeof sizes);
}

/* Point the 16 views of t into block, in file order. */
static void tensors_point(TrainTensors *t, float *block, const size_t size[TRAIN_N_TENSORS]) {
    float **views[TRAIN_N_TENSORS] = {
        &t->wte, &t->wpe, &t->ln1w, &t->ln1b, &t->qkvw, &t->qkvb, &t->attprojw, &t->attprojb,
        &t->ln2w, &t->ln2b, &t->fcw, &t->fcb, &t->fcprojw, &t->fcprojb, &t->lnfw, &t->lnfb};
    for (int i = 0; i < TRAIN_N_TENSORS; i++) {
        *views[i] = block;
        block += size[i];
    }
}

/* Which tensors AdamW decays: the weight matrices and embeddings, not biases or norms. */
static const int TENSOR_DECAYED[TRAIN_N_TENSORS] = {1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0};

/* GPT-2 initialisation: weights N(0, 0.02), the two projections into the residual
 * stream scaled by 1/sqrt(2 L) (GPT-2 paper, section 2.3), biases 0, norms 1. */
static void params_init(Trainer *tr) {
    uint64_t stream = mix64(tr->settings.seed);
    float residual_std = TRAIN_INIT_STD / sqrtf(2.0f * (float)tr->config.n_layers);
    float *block = tr->params;
    for (int i = 0; i < TRAIN_N_TENSORS; i++) {
        float *p = block;
        block += tr->tensor_size[i];
        if (p == tr->p.ln1w || p == tr->p.ln2w || p == tr->p.lnfw) {
            for (size_t j = 0; j < tr->tensor_size[i]; j++) p[j] = 1.0f;
        } else if (TENSOR_DECAYED[i]) {
            float std = (p == tr->p.attprojw || p == tr->p.fcprojw) ? residual_std
                                                                   : TRAIN_INIT_STD;
            for (size_t j = 0; j < tr->tensor_size[i]; j++) p[j] = std * normal_next(&stream);
        } else {
            for (size_t j = 0; j < tr->tensor_size[i]; j++) p[j] = 0.0f;
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Init and free                                                               */

/* 0 if the shape of c and batch B are in range, else -1 after a stderr line about subject. */
static int config_check(const Config *c, int B, const char *subject) {
    if (c->seq_len < 1 || c->vocab_size < 1 || c->n_layers < 1 || c->n_heads < 1 ||
        c->dim < 1 || B < 1 || c->dim % c->n_heads != 0 || c->dim > MODEL_MAX_DIM / 4 ||
        c->vocab_size > MODEL_MAX_VOCAB || c->n_layers > MODEL_MAX_LAYERS ||
        c->seq_len > MODEL_MAX_SEQ_LEN) {
        fprintf(stderr, "train: %s: model shape out of range (got V %d, L %d, NH %d, C %d, "
                "T %d, B %d; expected all >= 1, C divisible by NH, V <= %d, L <= %d, "
                "C <= %d, T <= %d)\n", subject, c->vocab_size, c->n_layers, c->n_heads,
                c->dim, c->seq_len, B, MODEL_MAX_VOCAB, MODEL_MAX_LAYERS, MODEL_MAX_DIM / 4,
                MODEL_MAX_SEQ_LEN);
        return -1;
    }
    return 0;
}

int trainer_init(Trainer *tr, const Config *c, const TrainSettings *settings, int B) {
    memset(tr, 0, sizeof *tr);
    if (config_check(c, B, "model") != 0) return -1;
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
    tr->attention.n_heads = c->n_heads;
    tr->attention.n_kv_heads = c->n_heads;
    tr->attention.head_dim = tr->config.head_dim;
    tr->attention.scale = 1.0f / sqrtf((float)tr->config.head_dim);
    tensor_sizes(tr->tensor_size, &tr->config);
    for (int i = 0; i < TRAIN_N_TENSORS; i++) tr->n_params += tr->tensor_size[i];

    size_t N = (size_t)B * (size_t)tr->T, C = (size_t)c->dim, L = (size_t)c->n_layers;
    size_t Hd = 4 * C, V = (size_t)c->vocab_size;
    int scratch = attention_scratch_floats(&tr->attention, tr->T);
    int scratch_back = attention_backward_scratch_floats(&tr->attention, tr->T);
    if (scratch_back > scratch) scratch = scratch_back;
    TrainActivations *a = &tr->a;
    tr->params = calloc(tr->n_params, sizeof(float));
    tr->grads = calloc(tr->n_params, sizeof(float));
    tr->adam_m = calloc(tr->n_params, sizeof(float));
    tr->adam_v = calloc(tr->n_params, sizeof(float));
    tr->inputs = calloc(N, sizeof(int));
    tr->targets = calloc(N, sizeof(int));
    a->encoded = calloc(N * C, sizeof(float));
    a->ln1 = calloc(L * N * C, sizeof(float));
    a->q = calloc(L * N * C, sizeof(float));
    a->k = calloc(L * N * C, sizeof(float));
    a->v = calloc(L * N * C, sizeof(float));
    a->atty = calloc(L * N * C, sizeof(float));
    a->residual2 = calloc(L * N * C, sizeof(float));
    a->ln2 = calloc(L * N * C, sizeof(float));
    a->fch = calloc(L * N * Hd, sizeof(float));
    a->fch_gelu = calloc(L * N * Hd, sizeof(float));
    a->residual3 = calloc(L * N * C, sizeof(float));
    a->lnf = calloc(N * C, sizeof(float));
    a->logits = calloc(N * V, sizeof(float));
    a->probs = calloc(N * V, sizeof(float));
    a->losses = calloc(N, sizeof(float));
    a->dresidual = calloc(N * C, sizeof(float));
    a->dtmp = calloc(N * C, sizeof(float));
    a->dln = calloc(N * C, sizeof(float));
    a->datty = calloc(N * C, sizeof(float));
    a->dq = calloc(N * C, sizeof(float));
    a->dk = calloc(N * C, sizeof(float));
    a->dv = calloc(N * C, sizeof(float));
    a->dfch = calloc(N * Hd, sizeof(float));
    a->dfch_gelu = calloc(N * Hd, sizeof(float));
    a->scratch = calloc((size_t)scratch, sizeof(float));
    a->mean = calloc(N, sizeof(float));
    a->rstd = calloc(N, sizeof(float));
    if (!tr->params || !tr->grads || !tr->adam_m || !tr->adam_v || !tr->inputs ||
        !tr->targets || !a->encoded || !a->ln1 || !a->q || !a->k || !a->v || !a->atty ||
        !a->residual2 || !a->ln2 || !a->fch || !a->fch_gelu || !a->residual3 || !a->lnf ||
        !a->logits || !a->probs || !a->losses || !a->dresidual || !a->dtmp || !a->dln ||
        !a->datty || !a->dq || !a->dk || !a->dv || !a->dfch || !a->dfch_gelu ||
        !a->scratch || !a->mean || !a->rstd) {
        fprintf(stderr, "train: out of memory (%zu parameters, batch %d x %d)\n",
                tr->n_params, B, tr->T);
        trainer_free(tr);
        return -1;
    }
    tensors_point(&tr->p, tr->params, tr->tensor_size);
    tensors_point(&tr->g, tr->grads, tr->tensor_size);
    params_init(tr);
    tr->dropout_on = 1;
    return 0;
}

void trainer_free(Trainer *tr) {
    TrainActivations *a = &tr->a;
    float *buffers[] = {
        tr->params, tr->grads, tr->adam_m, tr->adam_v, a->encoded, a->ln1, a->q, a->k, a->v,
        a->atty, a->residual2, a->ln2, a->fch, a->fch_gelu, a->residual3, a->lnf, a->logits,
        a->probs, a->losses, a->dresidual, a->dtmp, a->dln, a->datty, a->dq, a->dk, a->dv,
        a->dfch, a->dfch_gelu, a->scratch, a->mean, a->rstd};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) free(buffers[i]);
    free(tr->inputs);
    free(tr->targets);
    memset(tr, 0, sizeof *tr);
}

/* ------------------------------------------------------------------------- */
/* Row-parallel wrappers of model.c's layer functions, and dropout             */

/* kernels_layernorm over N rows, in parallel blocks of rows (rows are independent). */
static void layernorm_rows(float *out, const float *x, const float *w, const float *b,
                           int N, int C) {
    /* each job normalises its own rows; kernels_layernorm has no pragma of its own */
    #pragma omp parallel for schedule(static) if ((long)N * C >= PARALLEL_MIN_WORK)
    for (int n0 = 0; n0 < N; n0 += ROWS_PER_JOB) {
        int rows = N - n0 < ROWS_PER_JOB ? N - n0 : ROWS_PER_JOB;
        kernels_layernorm(out + (size_t)n0 * C, x + (size_t)n0 * C, w, b, rows, C);
    }
}

/* out (n,) = GELU(x) through kernels_gelu, in parallel chunks. */
static void gelu_copy(float *out, const float *x, size_t n) {
    long jobs = (long)((n + ELEMENTS_PER_JOB - 1) / ELEMENTS_PER_JOB);
    /* each job owns its chunk of out */
    #pragma omp parallel for schedule(static) if ((long)n >= PARALLEL_MIN_WORK)
    for (long j = 0; j < jobs; j++) {
        size_t start = (size_t)j * ELEMENTS_PER_JOB;
        size_t count = n - start < ELEMENTS_PER_JOB ? n - start : ELEMENTS_PER_JOB;
        memcpy(out + start, x + start, count * sizeof(float));
        kernels_gelu(out + start, count);
    }
}

/* The dropout mask of one site: layer l (L for the embeddings), site 0 attention, 1 MLP. */
static uint64_t dropout_key(const Trainer *tr, int layer, int site) {
    return mix64(tr->settings.seed ^ mix64(((uint64_t)tr->step << 24) ^
                                           ((uint64_t)layer << 2) ^ (uint64_t)site));
}

/* x (n,) *= mask / (1 - p), with mask_i = 0 with probability p, drawn from a hash of
 * (key, i): the backward applies the same mask to the gradient by calling it again. */
static void dropout_apply(float *x, size_t n, float p, uint64_t key) {
    if (p <= 0.0f) return;
    float keep_scale = 1.0f / (1.0f - p);
    long jobs = (long)((n + ELEMENTS_PER_JOB - 1) / ELEMENTS_PER_JOB);
    /* each job owns its chunk of x; the mask depends only on the index */
    #pragma omp parallel for schedule(static) if ((long)n >= PARALLEL_MIN_WORK)
    for (long j = 0; j < jobs; j++) {
        size_t end = (size_t)(j + 1) * ELEMENTS_PER_JOB;
        if (end > n) end = n;
        for (size_t i = (size_t)j * ELEMENTS_PER_JOB; i < end; i++)
            x[i] = uniform_from(mix64(key + i)) < p ? 0.0f : x[i] * keep_scale;
    }
}

/* x (n,) += y (n,) */
static void add_into(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

/* ------------------------------------------------------------------------- */
/* Forward                                                                     */

/* Cursor of layer l's slice of a per-layer activation of `width` floats per row. */
#define LAYER(buffer, l, width) ((buffer) + (size_t)(l) * N * (width))

float trainer_forward(Trainer *tr, const int *inputs, const int *targets) {
    const Config *c = &tr->config;
    const TrainTensors *p = &tr->p;
    TrainActivations *a = &tr->a;
    int B = tr->B, T = tr->T, C = c->dim, Hd = c->hidden_dim, V = c->vocab_size;
    size_t N = (size_t)B * T;
    float drop = tr->dropout_on ? tr->settings.dropout : 0.0f;
    memcpy(tr->inputs, inputs, N * sizeof(int));

    /* encoded (N, C) = wte[token] + wpe[t], then embedding dropout */
    for (size_t n = 0; n < N; n++) {
        const float *wte_n = p->wte + (size_t)inputs[n] * C;
        const float *wpe_t = p->wpe + (n % (size_t)T) * C;
        float *x_n = a->encoded + n * C;
        for (int i = 0; i < C; i++) x_n[i] = wte_n[i] + wpe_t[i];
    }
    dropout_apply(a->encoded, N * C, drop, dropout_key(tr, c->n_layers, 0));

    for (int l = 0; l < c->n_layers; l++) {
        const float *residual = l == 0 ? a->encoded : LAYER(a->residual3, l - 1, C);
        float *ln1 = LAYER(a->ln1, l, C), *q = LAYER(a->q, l, C), *k = LAYER(a->k, l, C);
        float *v = LAYER(a->v, l, C), *atty = LAYER(a->atty, l, C);
        float *residual2 = LAYER(a->residual2, l, C), *ln2 = LAYER(a->ln2, l, C);
        float *fch = LAYER(a->fch, l, Hd), *fch_gelu = LAYER(a->fch_gelu, l, Hd);
        float *residual3 = LAYER(a->residual3, l, C);
        /* seek to layer l's weights; qkvw[l] is (3C, C): Q rows, K rows, V rows */
        const float *wq = p->qkvw + (size_t)l * 3 * C * C, *bq = p->qkvb + (size_t)l * 3 * C;
        const float *wk = wq + (size_t)C * C, *wv = wk + (size_t)C * C;
        const float *bk = bq + C, *bv = bk + C;

        /* attention sublayer: residual2 = residual + drop(W_O . attention(LN1(residual))) */
        layernorm_rows(ln1, residual, p->ln1w + (size_t)l * C, p->ln1b + (size_t)l * C,
                       (int)N, C);
        kernels_matmul(q, ln1, wq, bq, (int)N, C, C);
        kernels_matmul(k, ln1, wk, bk, (int)N, C, C);
        kernels_matmul(v, ln1, wv, bv, (int)N, C, C);
        for (int b = 0; b < B; b++) {
            size_t seq = (size_t)b * T * C;   /* seek to sequence b */
            attention_forward(&tr->attention, atty + seq, q + seq, k + seq, v + seq, 0, T,
                              a->scratch);
        }
        kernels_matmul(a->dtmp, atty, p->attprojw + (size_t)l * C * C,
                     p->attprojb + (size_t)l * C, (int)N, C, C);
        dropout_apply(a->dtmp, N * C, drop, dropout_key(tr, l, 0));
        memcpy(residual2, residual, N * C * sizeof(float));
        add_into(residual2, a->dtmp, N * C);

        /* MLP sublayer: residual3 = residual2 + drop(W_down . GELU(W_up . LN2(residual2))) */
        layernorm_rows(ln2, residual2, p->ln2w + (size_t)l * C, p->ln2b + (size_t)l * C,
                       (int)N, C);
        kernels_matmul(fch, ln2, p->fcw + (size_t)l * Hd * C, p->fcb + (size_t)l * Hd,
                     (int)N, C, Hd);
        gelu_copy(fch_gelu, fch, N * Hd);
        kernels_matmul(a->dtmp, fch_gelu, p->fcprojw + (size_t)l * C * Hd,
                     p->fcprojb + (size_t)l * C, (int)N, Hd, C);
        dropout_apply(a->dtmp, N * C, drop, dropout_key(tr, l, 1));
        memcpy(residual3, residual2, N * C * sizeof(float));
        add_into(residual3, a->dtmp, N * C);
    }

    /* final LayerNorm, logits (N, V) = lnf . wte^T */
    layernorm_rows(a->lnf, LAYER(a->residual3, c->n_layers - 1, C), p->lnfw, p->lnfb,
                   (int)N, C);
    kernels_matmul(a->logits, a->lnf, p->wte, NULL, (int)N, C, V);
    if (!targets) return 0.0f;

    memcpy(tr->targets, targets, N * sizeof(int));
    train_crossentropy_forward(a->probs, a->losses, a->logits, targets, (int)N, V);
    double sum = 0.0;
    tr->n_targets = 0;
    for (size_t n = 0; n < N; n++) {
        if (targets[n] < 0) continue;
        sum += (double)a->losses[n];
        tr->n_targets++;
    }
    return tr->n_targets ? (float)(sum / tr->n_targets) : 0.0f;
}

/* ------------------------------------------------------------------------- */
/* Backward kernels                                                            */

void train_crossentropy_forward(float *probs, float *losses, const float *logits,
                                const int *targets, int N, int V) {
    /* rows are independent; each job writes its own rows of probs and losses */
    #pragma omp parallel for schedule(static) if ((long)N * V >= PARALLEL_MIN_WORK)
    for (int n = 0; n < N; n++) {
        const float *logits_n = logits + (size_t)n * V;
        float *probs_n = probs + (size_t)n * V;
        float max = logits_n[0];
        for (int i = 1; i < V; i++) if (logits_n[i] > max) max = logits_n[i];
        float sum = 0.0f;
        for (int i = 0; i < V; i++) {
            probs_n[i] = expf(logits_n[i] - max);
            sum += probs_n[i];
        }
        float inv_sum = 1.0f / sum;
        for (int i = 0; i < V; i++) probs_n[i] *= inv_sum;
        /* -log softmax[target] = log(sum) - (logit[target] - max), exact even when tiny */
        losses[n] = targets[n] < 0 ? 0.0f : logf(sum) - (logits_n[targets[n]] - max);
    }
}

void train_crossentropy_backward(float *probs, const int *targets, int N, int V, float scale) {
    /* each row is owned by one iteration */
    #pragma omp parallel for schedule(static) if ((long)N * V >= PARALLEL_MIN_WORK)
    for (int n = 0; n < N; n++) {
        float *d_n = probs + (size_t)n * V;
        if (targets[n] < 0) {
            for (int i = 0; i < V; i++) d_n[i] = 0.0f;
            continue;
        }
        for (int i = 0; i < V; i++) d_n[i] *= scale;
        d_n[targets[n]] -= scale;
    }
}

void train_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                              const float *x, const float *w, float *mean, float *rstd,
                              int N, int C) {
    /* dx: rows are independent. With xhat = (x - mean) rstd and g = w * dout:
     * dx = rstd (g - mean(g) - xhat mean(g xhat)) (llm.c doc/layernorm) */
    #pragma omp parallel for schedule(static) if ((long)N * C >= PARALLEL_MIN_WORK)
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C, *dout_n = dout + (size_t)n * C;
        float *dx_n = dx + (size_t)n * C;
        /* the statistics exactly as model_layernorm computes them */
        float m = 0.0f;
        for (int i = 0; i < C; i++) m += x_n[i];
        m /= (float)C;
        float var = 0.0f;
        for (int i = 0; i < C; i++) var += (x_n[i] - m) * (x_n[i] - m);
        var /= (float)C;
        float r = 1.0f / sqrtf(var + KERNELS_NORM_EPS);
        mean[n] = m;
        rstd[n] = r;
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
    /* dw, db: each column i is one iteration summing rows in increasing order */
    #pragma omp parallel for schedule(static) if ((long)N * C >= PARALLEL_MIN_WORK)
    for (int i = 0; i < C; i++) {
        float sum_w = dw[i], sum_b = db[i];
        for (int n = 0; n < N; n++) {
            float d = dout[(size_t)n * C + i];
            sum_w += d * (x[(size_t)n * C + i] - mean[n]) * rstd[n];
            sum_b += d;
        }
        dw[i] = sum_w;
        db[i] = sum_b;
    }
}

void train_gelu_backward(float *dx, const float *x, const float *out, const float *dout,
                         size_t n) {
    long jobs = (long)((n + ELEMENTS_PER_JOB - 1) / ELEMENTS_PER_JOB);
    /* elementwise: each job owns a chunk of dx */
    #pragma omp parallel for schedule(static) if ((long)n >= PARALLEL_MIN_WORK)
    for (long j = 0; j < jobs; j++) {
        size_t end = (size_t)(j + 1) * ELEMENTS_PER_JOB;
        if (end > n) end = n;
        for (size_t i = (size_t)j * ELEMENTS_PER_JOB; i < end; i++) {
            /* d/dx 0.5 x (1 + tanh u), u = a (x + b x^3): 0.5 (1 + tanh u) + 0.5 x sech^2(u) u'.
             * tanh u is read back from the forward's output, out = 0.5 x (1 + tanh u),
             * which saves a tanhf per element; near x = 0 that division loses precision,
             * so there tanhf is called again. */
            float v = x[i];
            float th = fabsf(v) > GELU_RECOVER_MIN ?
                       2.0f * out[i] / v - 1.0f :
                       tanhf(GELU_SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v));
            float du = GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_CUBIC * v * v);
            dx[i] += (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du) * dout[i];
        }
    }
}

void train_embedding_backward(float *dwte, float *dwpe, const float *dx, const int *tokens,
                              int B, int T, int C) {
    /* dwpe: each position t is one iteration, summing sequences b in order */
    #pragma omp parallel for schedule(static) if ((long)T * B * C >= PARALLEL_MIN_WORK)
    for (int t = 0; t < T; t++) {
        float *dwpe_t = dwpe + (size_t)t * C;
        for (int b = 0; b < B; b++) add_into(dwpe_t, dx + ((size_t)b * T + t) * C, (size_t)C);
    }
    /* dwte: several positions may share a token, so one thread, rows in order */
    for (size_t n = 0; n < (size_t)B * T; n++)
        add_into(dwte + (size_t)tokens[n] * C, dx + n * C, (size_t)C);
}

/* ------------------------------------------------------------------------- */
/* Backward pass                                                               */

void trainer_backward(Trainer *tr) {
    const Config *c = &tr->config;
    const TrainTensors *p = &tr->p;
    TrainTensors *g = &tr->g;
    TrainActivations *a = &tr->a;
    int B = tr->B, T = tr->T, C = c->dim, Hd = c->hidden_dim, V = c->vocab_size;
    size_t N = (size_t)B * T;
    float drop = tr->dropout_on ? tr->settings.dropout : 0.0f;
    memset(tr->grads, 0, tr->n_params * sizeof(float));

    /* loss = mean over targets: dlogits = (probs - onehot) / n_targets */
    float *dlogits = a->probs;
    train_crossentropy_backward(dlogits, tr->targets, (int)N, V,
                                tr->n_targets ? 1.0f / (float)tr->n_targets : 0.0f);
    memset(a->dln, 0, N * C * sizeof(float));
    kernels_matmul_backward(a->dln, g->wte, NULL, dlogits, a->lnf, p->wte, (int)N, C, V);
    memset(a->dresidual, 0, N * C * sizeof(float));
    train_layernorm_backward(a->dresidual, g->lnfw, g->lnfb, a->dln,
                             LAYER(a->residual3, c->n_layers - 1, C), p->lnfw, a->mean,
                             a->rstd, (int)N, C);

    for (int l = c->n_layers - 1; l >= 0; l--) {
        const float *residual = l == 0 ? a->encoded : LAYER(a->residual3, l - 1, C);
        const float *ln1 = LAYER(a->ln1, l, C), *q = LAYER(a->q, l, C);
        const float *k = LAYER(a->k, l, C), *v = LAYER(a->v, l, C);
        const float *atty = LAYER(a->atty, l, C), *residual2 = LAYER(a->residual2, l, C);
        const float *ln2 = LAYER(a->ln2, l, C), *fch = LAYER(a->fch, l, Hd);
        const float *fch_gelu = LAYER(a->fch_gelu, l, Hd);
        size_t qkv = (size_t)l * 3 * C * C, qkv_b = (size_t)l * 3 * C, CC = (size_t)C * C;

        /* dresidual is d loss / d residual3; the MLP branch gets drop(dresidual) */
        memcpy(a->dtmp, a->dresidual, N * C * sizeof(float));
        dropout_apply(a->dtmp, N * C, drop, dropout_key(tr, l, 1));
        memset(a->dfch_gelu, 0, N * Hd * sizeof(float));
        kernels_matmul_backward(a->dfch_gelu, g->fcprojw + (size_t)l * C * Hd,
                              g->fcprojb + (size_t)l * C, a->dtmp, fch_gelu,
                              p->fcprojw + (size_t)l * C * Hd, (int)N, Hd, C);
        memset(a->dfch, 0, N * Hd * sizeof(float));
        train_gelu_backward(a->dfch, fch, fch_gelu, a->dfch_gelu, N * Hd);
        memset(a->dln, 0, N * C * sizeof(float));
        kernels_matmul_backward(a->dln, g->fcw + (size_t)l * Hd * C, g->fcb + (size_t)l * Hd,
                              a->dfch, ln2, p->fcw + (size_t)l * Hd * C, (int)N, C, Hd);
        train_layernorm_backward(a->dresidual, g->ln2w + (size_t)l * C, g->ln2b + (size_t)l * C,
                                 a->dln, residual2, p->ln2w + (size_t)l * C, a->mean, a->rstd,
                                 (int)N, C);

        /* dresidual is now d loss / d residual2; the attention branch gets drop(dresidual) */
        memcpy(a->dtmp, a->dresidual, N * C * sizeof(float));
        dropout_apply(a->dtmp, N * C, drop, dropout_key(tr, l, 0));
        memset(a->datty, 0, N * C * sizeof(float));
        kernels_matmul_backward(a->datty, g->attprojw + (size_t)l * CC, g->attprojb + (size_t)l * C,
                              a->dtmp, atty, p->attprojw + (size_t)l * CC, (int)N, C, C);
        memset(a->dq, 0, N * C * sizeof(float));
        memset(a->dk, 0, N * C * sizeof(float));
        memset(a->dv, 0, N * C * sizeof(float));
        for (int b = 0; b < B; b++) {
            size_t seq = (size_t)b * T * C;   /* seek to sequence b */
            attention_backward(&tr->attention, a->dq + seq, a->dk + seq, a->dv + seq,
                               a->datty + seq, q + seq, k + seq, v + seq, T, a->scratch);
        }
        memset(a->dln, 0, N * C * sizeof(float));
        kernels_matmul_backward(a->dln, g->qkvw + qkv, g->qkvb + qkv_b, a->dq, ln1,
                              p->qkvw + qkv, (int)N, C, C);
        kernels_matmul_backward(a->dln, g->qkvw + qkv + CC, g->qkvb + qkv_b + C, a->dk, ln1,
                              p->qkvw + qkv + CC, (int)N, C, C);
        kernels_matmul_backward(a->dln, g->qkvw + qkv + 2 * CC, g->qkvb + qkv_b + 2 * C, a->dv,
                              ln1, p->qkvw + qkv + 2 * CC, (int)N, C, C);
        train_layernorm_backward(a->dresidual, g->ln1w + (size_t)l * C, g->ln1b + (size_t)l * C,
                                 a->dln, residual, p->ln1w + (size_t)l * C, a->mean, a->rstd,
                                 (int)N, C);
    }
    /* dresidual is d loss / d encoded; undo the embedding dropout, then scatter */
    dropout_apply(a->dresidual, N * C, drop, dropout_key(tr, c->n_layers, 0));
    train_embedding_backward(g->wte, g->wpe, a->dresidual, tr->inputs, B, T, C);
}

/* ------------------------------------------------------------------------- */
/* AdamW                                                                       */

float trainer_learning_rate(const TrainSettings *s, int step) {
    if (step < s->warmup) return s->lr * (float)(step + 1) / (float)s->warmup;
    float lr_min = s->lr * s->lr_min_ratio;
    float progress = s->steps > s->warmup ?
                     (float)(step - s->warmup) / (float)(s->steps - s->warmup) : 1.0f;
    if (progress > 1.0f) progress = 1.0f;
    return lr_min + 0.5f * (s->lr - lr_min) * (1.0f + cosf(PI_F * progress));
}

float trainer_update(Trainer *tr) {
    const TrainSettings *s = &tr->settings;
    /* global gradient norm, summed in one fixed order */
    double sum_sq = 0.0;
    for (size_t j = 0; j < tr->n_params; j++) sum_sq += (double)tr->grads[j] * (double)tr->grads[j];
    float norm = (float)sqrt(sum_sq);
    float clip_scale = s->clip > 0.0f && norm > s->clip ? s->clip / norm : 1.0f;
    float lr = trainer_learning_rate(s, tr->step);
    int t = tr->step + 1;
    float correction1 = 1.0f - powf(s->beta1, (float)t);
    float correction2 = 1.0f - powf(s->beta2, (float)t);
    size_t start = 0;
    for (int i = 0; i < TRAIN_N_TENSORS; i++) {
        float decay = TENSOR_DECAYED[i] ? s->weight_decay : 0.0f;
        long n = (long)tr->tensor_size[i];
        float *param = tr->params + start, *grad = tr->grads + start;
        float *m = tr->adam_m + start, *v = tr->adam_v + start;
        /* elementwise (Loshchilov & Hutter, AdamW, Algorithm 2): each j owns its entries */
        #pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN_WORK)
        for (long j = 0; j < n; j++) {
            float gj = grad[j] * clip_scale;
            m[j] = s->beta1 * m[j] + (1.0f - s->beta1) * gj;
            v[j] = s->beta2 * v[j] + (1.0f - s->beta2) * gj * gj;
            float m_hat = m[j] / correction1, v_hat = v[j] / correction2;
            param[j] -= lr * (m_hat / (sqrtf(v_hat) + s->eps) + decay * param[j]);
        }
        start += tr->tensor_size[i];
    }
    tr->step++;
    return norm;
}

/* ------------------------------------------------------------------------- */
/* Checkpoints                                                                 */

/* Header field indices of llm.c's GPT-2 checkpoint (as model.c reads it). */
enum { HEADER_MAGIC, HEADER_VERSION, HEADER_MAX_T, HEADER_V, HEADER_L, HEADER_NH, HEADER_C,
       HEADER_VP };

/* Fields of the optimizer state file's header (TRAIN_STATE_HEADER_INTS int32 slots; the
 * float ones hold float32 bits, 64-bit ones low half first; from STATE_UNUSED on, 0).
 * Then adam_m and adam_v, n_params floats each. STATE_MODEL_SUM is the FNV-1a 64 of the
 * checkpoint file the state belongs to (header and parameters); STATE_SUM that of this
 * file with the STATE_SUM slots 0. weights/README.md documents the format. */
enum { STATE_MAGIC, STATE_VERSION, STATE_STEP, STATE_N_PARAMS_LO, STATE_N_PARAMS_HI,
       STATE_BATCH, STATE_STEPS, STATE_WARMUP, STATE_LR, STATE_LR_MIN_RATIO,
       STATE_WEIGHT_DECAY, STATE_BETA1, STATE_BETA2, STATE_EPS, STATE_CLIP, STATE_DROPOUT,
       STATE_SEED_LO, STATE_SEED_HI, STATE_MODEL_SUM_LO, STATE_MODEL_SUM_HI, STATE_T, STATE_V,
       STATE_L, STATE_NH, STATE_C, STATE_SUM_LO, STATE_SUM_HI, STATE_UNUSED };

#define FNV64_OFFSET 0xCBF29CE484222325ull  /* FNV-1a 64-bit offset basis (isthe.com/chongo) */
#define FNV64_PRIME 0x100000001B3ull         /* FNV-1a 64-bit prime */
#define PATH_CAP 4096                        /* longest path the trainer builds, NUL included */
#define HASH_CHUNK 65536                     /* bytes per read when hashing a file */

static int32_t float_bits(float f) { int32_t i; memcpy(&i, &f, sizeof i); return i; }
static float bits_float(int32_t i) { float f; memcpy(&f, &i, sizeof f); return f; }

/* A 64-bit value in two int32 slots, low half first. */
static void put_u64(int32_t *slots, int low, uint64_t x) {
    slots[low] = (int32_t)(uint32_t)(x & 0xFFFFFFFFu);
    slots[low + 1] = (int32_t)(uint32_t)(x >> 32);
}
static uint64_t get_u64(const int32_t *slots, int low) {
    return (uint64_t)(uint32_t)slots[low] | (uint64_t)(uint32_t)slots[low + 1] << 32;
}

/* FNV-1a 64 of data (n bytes), continuing from hash (FNV64_OFFSET to start). */
static uint64_t fnv1a64(uint64_t hash, const void *data, size_t n) {
    const unsigned char *bytes = data;
    for (size_t i = 0; i < n; i++) hash = (hash ^ bytes[i]) * FNV64_PRIME;
    return hash;
}

/* Read exactly n bytes, or print what was missing and return -1. */
static int read_all(FILE *file, void *data, size_t n, const char *path, const char *what) {
    size_t got = fread(data, 1, n, file);
    if (got != n) {
        fprintf(stderr, "train: %s: truncated %s (got %zu bytes, expected %zu)\n",
                path, what, got, n);
        return -1;
    }
    return 0;
}

/* Size in bytes of an open file into *size, leaving the position at the start.
 * Returns 0, or -1 after a stderr line. */
static int file_size(FILE *file, const char *path, size_t *size) {
    long end = -1;
    if (fseek(file, 0, SEEK_END) == 0) end = ftell(file);
    if (end < 0 || fseek(file, 0, SEEK_SET) != 0) {
        fprintf(stderr, "train: %s: cannot find the file size (got \"%s\", expected a "
                "seekable file)\n", path, strerror(errno));
        return -1;
    }
    *size = (size_t)end;
    return 0;
}

/* ---- crash-safe files: write PATH.tmp, fsync it, rename it over PATH, fsync the folder */

/* path + TRAIN_TEMP_SUFFIX into temp (PATH_CAP bytes). Returns 0, or -1 after a stderr line. */
static int temp_path(char temp[PATH_CAP], const char *path) {
    int n = snprintf(temp, PATH_CAP, "%s%s", path, TRAIN_TEMP_SUFFIX);
    if (n < 0 || n >= PATH_CAP) {
        fprintf(stderr, "train: %s: path too long (got %zu bytes, expected at most %zu)\n",
                path, strlen(path), (size_t)PATH_CAP - sizeof TRAIN_TEMP_SUFFIX);
        return -1;
    }
    return 0;
}

/* Write the n_parts buffers, in order, to path; flush them to the disk (fsync); close.
 * Returns 0, or -1 after a stderr line, with path removed. */
static int write_synced(const char *path, const void *const parts[], const size_t sizes[],
                        int n_parts) {
    FILE *file = fopen(path, "wb");
    if (!file) {
        fprintf(stderr, "train: %s: cannot open for writing (got \"%s\", expected a writable "
                "path)\n", path, strerror(errno));
        return -1;
    }
    int ok = 1;
    for (int i = 0; ok && i < n_parts; i++) ok = fwrite(parts[i], 1, sizes[i], file) == sizes[i];
    if (ok) ok = fflush(file) == 0 && fsync(fileno(file)) == 0;
    int error = errno;
    if (fclose(file) != 0 && ok) {
        ok = 0;
        error = errno;
    }
    if (!ok) {
        fprintf(stderr, "train: %s: write failed (got \"%s\", expected the whole file on the "
                "disk)\n", path, strerror(error));
        remove(path);
        return -1;
    }
    return 0;
}

/* fsync the folder holding path, so a rename into it survives a power cut. A file system
 * that cannot sync folders (EINVAL) counts as done. Returns 0, or -1 after a stderr line. */
static int sync_folder(const char *path) {
    char folder[PATH_CAP];
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (n >= sizeof folder) {
        fprintf(stderr, "train: %s: path too long (got %zu bytes, expected at most %d)\n",
                path, strlen(path), PATH_CAP - 1);
        return -1;
    }
    if (!slash) strcpy(folder, ".");
    else if (n == 0) strcpy(folder, "/");
    else {
        memcpy(folder, path, n);
        folder[n] = '\0';
    }
    int fd = open(folder, O_RDONLY);
    int rc = fd < 0 ? -1 : fsync(fd);
    int error = errno;
    if (fd >= 0) close(fd);
    if (rc != 0 && !(fd >= 0 && error == EINVAL)) {
        fprintf(stderr, "train: %s: cannot sync the folder (got \"%s\", expected a readable "
                "folder)\n", folder, strerror(error));
        return -1;
    }
    return 0;
}

/* rename(from, to), or -1 after a stderr line. */
static int rename_file(const char *from, const char *to) {
    if (rename(from, to) == 0) return 0;
    fprintf(stderr, "train: %s: cannot rename to %s (got \"%s\", expected a writable path)\n",
            from, to, strerror(errno));
    return -1;
}

/* ---- the checkpoint and its optimizer state */

/* FNV-1a 64 of a checkpoint file's bytes: header, then parameters. */
static uint64_t checkpoint_sum(const int32_t header[CHECKPOINT_GPT2_HEADER_INTS],
                               const float *params, size_t n_params) {
    uint64_t sum = fnv1a64(FNV64_OFFSET, header, CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t));
    return fnv1a64(sum, params, n_params * sizeof(float));
}

/* FNV-1a 64 of a state file's bytes, with its own checksum slots taken as 0. */
static uint64_t state_sum(const int32_t state[TRAIN_STATE_HEADER_INTS], const float *adam_m,
                          const float *adam_v, size_t n_params) {
    int32_t header[TRAIN_STATE_HEADER_INTS];
    memcpy(header, state, sizeof header);
    put_u64(header, STATE_SUM_LO, 0);
    uint64_t sum = fnv1a64(FNV64_OFFSET, header, sizeof header);
    sum = fnv1a64(sum, adam_m, n_params * sizeof(float));
    return fnv1a64(sum, adam_v, n_params * sizeof(float));
}

/* The state header of tr, belonging to the checkpoint whose bytes hash to model_sum. */
static void state_header(int32_t state[TRAIN_STATE_HEADER_INTS], const Trainer *tr,
                         uint64_t model_sum) {
    const TrainSettings *s = &tr->settings;
    const Config *c = &tr->config;
    memset(state, 0, TRAIN_STATE_HEADER_INTS * sizeof(int32_t));
    state[STATE_MAGIC] = TRAIN_STATE_MAGIC;
    state[STATE_VERSION] = TRAIN_STATE_VERSION;
    state[STATE_STEP] = tr->step;
    put_u64(state, STATE_N_PARAMS_LO, (uint64_t)tr->n_params);
    state[STATE_BATCH] = s->batch;
    state[STATE_STEPS] = s->steps;
    state[STATE_WARMUP] = s->warmup;
    state[STATE_LR] = float_bits(s->lr);
    state[STATE_LR_MIN_RATIO] = float_bits(s->lr_min_ratio);
    state[STATE_WEIGHT_DECAY] = float_bits(s->weight_decay);
    state[STATE_BETA1] = float_bits(s->beta1);
    state[STATE_BETA2] = float_bits(s->beta2);
    state[STATE_EPS] = float_bits(s->eps);
    state[STATE_CLIP] = float_bits(s->clip);
    state[STATE_DROPOUT] = float_bits(s->dropout);
    put_u64(state, STATE_SEED_LO, s->seed);
    put_u64(state, STATE_MODEL_SUM_LO, model_sum);
    state[STATE_T] = c->seq_len;
    state[STATE_V] = c->vocab_size;
    state[STATE_L] = c->n_layers;
    state[STATE_NH] = c->n_heads;
    state[STATE_C] = c->dim;
    put_u64(state, STATE_SUM_LO, state_sum(state, tr->adam_m, tr->adam_v, tr->n_params));
}

int trainer_save(const Trainer *tr, const char *path, const char *state_path) {
    size_t param_bytes = tr->n_params * sizeof(float);
    int32_t header[CHECKPOINT_GPT2_HEADER_INTS], state[TRAIN_STATE_HEADER_INTS];
    char path_temp[PATH_CAP], state_temp[PATH_CAP];
    checkpoint_gpt2_header(header, &tr->config, CHECKPOINT_GPT2_FP32, 0);
    if (temp_path(path_temp, path) != 0 || (state_path && temp_path(state_temp, state_path)))
        return -1;
    /* both files go to their temporaries first, each synced to the disk */
    if (state_path) {
        state_header(state, tr, checkpoint_sum(header, tr->params, tr->n_params));
        const void *parts[] = {state, tr->adam_m, tr->adam_v};
        const size_t sizes[] = {sizeof state, param_bytes, param_bytes};
        if (write_synced(state_temp, parts, sizes, (int)(sizeof parts / sizeof parts[0])) != 0)
            return -1;
    }
    const void *parts[] = {header, tr->params};
    const size_t sizes[] = {sizeof header, param_bytes};
    if (write_synced(path_temp, parts, sizes, (int)(sizeof parts / sizeof parts[0])) != 0) {
        if (state_path) remove(state_temp);
        return -1;
    }
    /* then the state, then the checkpoint, are renamed into place; a crash between the
     * two leaves the new state, the old checkpoint and the new one in path.tmp, which
     * trainer_finish_save renames (so path.tmp is kept if the second step fails) */
    if (state_path) {
        if (rename_file(state_temp, state_path) != 0) {
            remove(state_temp);
            remove(path_temp);
            return -1;
        }
        if (sync_folder(state_path) != 0) return -1;
    }
    if (rename_file(path_temp, path) != 0) {
        if (!state_path) remove(path_temp);
        return -1;
    }
    return sync_folder(path);
}

/* FNV-1a 64 of the whole file at path into *sum. Returns 0, or -1 (no message) if it
 * cannot be read. */
static int file_sum(const char *path, uint64_t *sum) {
    FILE *file = fopen(path, "rb");
    if (!file) return -1;
    unsigned char *buffer = malloc(HASH_CHUNK);
    uint64_t hash = FNV64_OFFSET;
    size_t got = 0;
    while (buffer && (got = fread(buffer, 1, HASH_CHUNK, file)) > 0)
        hash = fnv1a64(hash, buffer, got);
    int ok = buffer && !ferror(file);
    free(buffer);
    fclose(file);
    *sum = hash;
    return ok ? 0 : -1;
}

int trainer_finish_save(const char *path, const char *state_path) {
    int32_t state[TRAIN_STATE_HEADER_INTS];
    char path_temp[PATH_CAP];
    uint64_t sum;
    FILE *file = fopen(state_path, "rb");
    if (!file) return 0;
    int complete = fread(state, sizeof state, 1, file) == 1;
    fclose(file);
    if (!complete || state[STATE_MAGIC] != TRAIN_STATE_MAGIC ||
        state[STATE_VERSION] != TRAIN_STATE_VERSION) return 0;
    uint64_t want = get_u64(state, STATE_MODEL_SUM_LO);
    if (file_sum(path, &sum) == 0 && sum == want) return 0;       /* the pair matches */
    if (temp_path(path_temp, path) != 0) return -1;
    if (file_sum(path_temp, &sum) != 0 || sum != want) return 0;  /* nothing to finish */
    if (rename_file(path_temp, path) != 0 || sync_folder(path) != 0) return -1;
    return 1;
}

/* 1 if x is in [lo, hi] (an open end excluded), else 0 after a stderr line naming the
 * state file and the field. */
static int state_int_ok(const char *state_path, const char *name, long x, long lo, long hi) {
    if (x >= lo && x <= hi) return 1;
    fprintf(stderr, "train: %s: bad %s in the optimizer state (got %ld, expected %ld..%ld)\n",
            state_path, name, x, lo, hi);
    return 0;
}

static int state_float_ok(const char *state_path, const char *name, float x, float lo,
                          float hi, int open_lo, int open_hi) {
    if (isfinite(x) && (open_lo ? x > lo : x >= lo) && (open_hi ? x < hi : x <= hi)) return 1;
    fprintf(stderr, "train: %s: bad %s in the optimizer state (got %g, expected a number in "
            "%c%g, %g%c)\n", state_path, name, (double)x, open_lo ? '(' : '[', (double)lo,
            (double)hi, open_hi ? ')' : ']');
    return 0;
}

/* Settings from a state header into *s, each checked against the flags' ranges.
 * Returns 0, or -1 after a stderr line. */
static int state_settings(TrainSettings *s, const int32_t state[TRAIN_STATE_HEADER_INTS],
                          const char *state_path) {
    memset(s, 0, sizeof *s);
    s->batch = state[STATE_BATCH];
    s->steps = state[STATE_STEPS];
    s->warmup = state[STATE_WARMUP];
    s->lr = bits_float(state[STATE_LR]);
    s->lr_min_ratio = bits_float(state[STATE_LR_MIN_RATIO]);
    s->weight_decay = bits_float(state[STATE_WEIGHT_DECAY]);
    s->beta1 = bits_float(state[STATE_BETA1]);
    s->beta2 = bits_float(state[STATE_BETA2]);
    s->eps = bits_float(state[STATE_EPS]);
    s->clip = bits_float(state[STATE_CLIP]);
    s->dropout = bits_float(state[STATE_DROPOUT]);
    s->seed = get_u64(state, STATE_SEED_LO);   /* any 64-bit value is a seed */
    const char *p = state_path;
    if (!state_int_ok(p, "batch", s->batch, 1, TRAIN_MAX_BATCH) ||
        !state_int_ok(p, "total steps", s->steps, 0, TRAIN_MAX_STEPS) ||
        !state_int_ok(p, "warmup", s->warmup, 1, s->steps > 0 ? s->steps : TRAIN_MAX_STEPS) ||
        !state_int_ok(p, "step", state[STATE_STEP], 0, s->steps) ||
        !state_float_ok(p, "learning rate", s->lr, 0.0f, TRAIN_MAX_LR, 1, 0) ||
        !state_float_ok(p, "final learning-rate ratio", s->lr_min_ratio, 0.0f, 1.0f, 0, 0) ||
        !state_float_ok(p, "weight decay", s->weight_decay, 0.0f, TRAIN_MAX_WEIGHT_DECAY, 0, 0) ||
        !state_float_ok(p, "beta1", s->beta1, 0.0f, 1.0f, 0, 1) ||
        !state_float_ok(p, "beta2", s->beta2, 0.0f, 1.0f, 0, 1) ||
        !state_float_ok(p, "eps", s->eps, 0.0f, 1.0f, 1, 0) ||
        !state_float_ok(p, "clip", s->clip, 0.0f, TRAIN_MAX_CLIP, 0, 0) ||
        !state_float_ok(p, "dropout", s->dropout, 0.0f, TRAIN_MAX_DROPOUT, 0, 0)) return -1;
    for (int i = STATE_UNUSED; i < TRAIN_STATE_HEADER_INTS; i++) {
        if (state[i] != 0) {
            fprintf(stderr, "train: %s: bad optimizer state header (got %d in unused slot %d, "
                    "expected 0)\n", state_path, (int)state[i], i);
            return -1;
        }
    }
    return 0;
}

/* Index of the first non-finite value of x (n,), or n if there is none. */
static size_t first_non_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) if (!isfinite(x[i])) return i;
    return n;
}

int trainer_load(Trainer *tr, const char *path, const char *state_path) {
    memset(tr, 0, sizeof *tr);
    int32_t header[CHECKPOINT_GPT2_HEADER_INTS], state[TRAIN_STATE_HEADER_INTS];
    size_t model_bytes = 0, state_bytes = 0;
    FILE *model_file = fopen(path, "rb"), *state_file = NULL;
    if (!model_file) {
        fprintf(stderr, "train: %s: cannot open (got \"%s\", expected a readable checkpoint)\n",
                path, strerror(errno));
        return -1;
    }
    /* the checkpoint's header and size */
    if (file_size(model_file, path, &model_bytes) != 0 ||
        read_all(model_file, header, sizeof header, path, "header") != 0) goto fail;
    if (header[HEADER_MAGIC] != CHECKPOINT_GPT2_MAGIC ||
        header[HEADER_VERSION] != CHECKPOINT_GPT2_FP32 || header[HEADER_V] != header[HEADER_VP]) {
        fprintf(stderr, "train: %s: not a checkpoint this trainer wrote (got magic %d version "
                "%d, V %d, Vp %d; expected %d version %d with V == Vp)\n", path,
                (int)header[HEADER_MAGIC], (int)header[HEADER_VERSION], (int)header[HEADER_V],
                (int)header[HEADER_VP], CHECKPOINT_GPT2_MAGIC, CHECKPOINT_GPT2_FP32);
        goto fail;
    }
    Config c = {0};
    c.seq_len = header[HEADER_MAX_T];
    c.vocab_size = c.padded_vocab_size = header[HEADER_V];
    c.n_layers = header[HEADER_L];
    c.n_heads = header[HEADER_NH];
    c.dim = header[HEADER_C];
    if (config_check(&c, 1, path) != 0) goto fail;
    c.hidden_dim = 4 * c.dim;   /* in range now: C <= MODEL_MAX_DIM / 4 */
    size_t sizes[TRAIN_N_TENSORS], n_params = 0;
    tensor_sizes(sizes, &c);
    for (int i = 0; i < TRAIN_N_TENSORS; i++) n_params += sizes[i];
    size_t want_model = sizeof header + n_params * sizeof(float);
    if (model_bytes != want_model) {
        fprintf(stderr, "train: %s: %s (got %zu bytes, expected %zu for %zu parameters)\n",
                path, model_bytes < want_model ? "truncated" : "trailing bytes", model_bytes,
                want_model, n_params);
        goto fail;
    }

    /* the state's header and size, every field checked before allocating */
    state_file = fopen(state_path, "rb");
    if (!state_file) {
        fprintf(stderr, "train: %s: cannot open (got \"%s\", expected the optimizer state of "
                "%s)\n", state_path, strerror(errno), path);
        goto fail;
    }
    if (file_size(state_file, state_path, &state_bytes) != 0 ||
        read_all(state_file, state, sizeof state, state_path, "header") != 0) goto fail;
    if (state[STATE_MAGIC] != TRAIN_STATE_MAGIC || state[STATE_VERSION] != TRAIN_STATE_VERSION) {
        fprintf(stderr, "train: %s: not an optimizer state of this trainer (got magic %d "
                "version %d, expected %d version %d)\n", state_path, (int)state[STATE_MAGIC],
                (int)state[STATE_VERSION], TRAIN_STATE_MAGIC, TRAIN_STATE_VERSION);
        goto fail;
    }
    if (state[STATE_T] != c.seq_len || state[STATE_V] != c.vocab_size ||
        state[STATE_L] != c.n_layers || state[STATE_NH] != c.n_heads || state[STATE_C] != c.dim ||
        get_u64(state, STATE_N_PARAMS_LO) != (uint64_t)n_params) {
        fprintf(stderr, "train: %s: state of another model shape (got T %d, V %d, L %d, NH %d, "
                "C %d, %llu parameters; expected %s's T %d, V %d, L %d, NH %d, C %d, %zu)\n",
                state_path, (int)state[STATE_T], (int)state[STATE_V], (int)state[STATE_L],
                (int)state[STATE_NH], (int)state[STATE_C],
                (unsigned long long)get_u64(state, STATE_N_PARAMS_LO), path, c.seq_len,
                c.vocab_size, c.n_layers, c.n_heads, c.dim, n_params);
        goto fail;
    }
    size_t want_state = sizeof state + 2 * n_params * sizeof(float);
    if (state_bytes != want_state) {
        fprintf(stderr, "train: %s: %s (got %zu bytes, expected %zu: the header and 2 x %zu "
                "moments)\n", state_path, state_bytes < want_state ? "truncated" : "trailing bytes",
                state_bytes, want_state, n_params);
        goto fail;
    }
    TrainSettings s;
    if (state_settings(&s, state, state_path) != 0) goto fail;

    /* the data, then the checksums that tie the two files together */
    if (trainer_init(tr, &c, &s, s.batch) != 0) goto fail;
    if (read_all(model_file, tr->params, n_params * sizeof(float), path, "parameters") ||
        read_all(state_file, tr->adam_m, n_params * sizeof(float), state_path, "moments") ||
        read_all(state_file, tr->adam_v, n_params * sizeof(float), state_path, "moments"))
        goto fail;
    size_t bad_p = first_non_finite(tr->params, n_params);
    size_t bad_m = first_non_finite(tr->adam_m, n_params);
    size_t bad_v = first_non_finite(tr->adam_v, n_params);
    if (bad_p < n_params) {
        fprintf(stderr, "train: %s: parameter %zu is not finite (got %g, expected a finite "
                "number)\n", path, bad_p, (double)tr->params[bad_p]);
        goto fail;
    }
    if (bad_m < n_params || bad_v < n_params) {
        int in_m = bad_m < n_params;
        size_t at = in_m ? bad_m : bad_v;
        fprintf(stderr, "train: %s: adam_%c[%zu] is not finite (got %g, expected a finite "
                "number)\n", state_path, in_m ? 'm' : 'v', at,
                (double)(in_m ? tr->adam_m : tr->adam_v)[at]);
        goto fail;
    }
    for (size_t j = 0; j < n_params; j++) {
        if (tr->adam_v[j] < 0.0f) {
            fprintf(stderr, "train: %s: adam_v[%zu] is negative (got %g, expected a mean of "
                    "squares, >= 0)\n", state_path, j, (double)tr->adam_v[j]);
            goto fail;
        }
    }
    uint64_t sum = state_sum(state, tr->adam_m, tr->adam_v, n_params);
    if (sum != get_u64(state, STATE_SUM_LO)) {
        fprintf(stderr, "train: %s: corrupt optimizer state (got checksum %016llx, expected the "
                "%016llx stored in it)\n", state_path, (unsigned long long)sum,
                (unsigned long long)get_u64(state, STATE_SUM_LO));
        goto fail;
    }
    sum = checkpoint_sum(header, tr->params, n_params);
    if (sum != get_u64(state, STATE_MODEL_SUM_LO)) {
        fprintf(stderr, "train: %s: state of another checkpoint (got %s with checksum %016llx, "
                "expected the %016llx the state was saved with)\n", state_path, path,
                (unsigned long long)sum, (unsigned long long)get_u64(state, STATE_MODEL_SUM_LO));
        goto fail;
    }
    tr->step = state[STATE_STEP];
    fclose(model_file);
    fclose(state_file);
    return 0;
fail:
    fclose(model_file);
    if (state_file) fclose(state_file);
    trainer_free(tr);
    return -1;
}

/* ------------------------------------------------------------------------- */
/* The trainer program                                                         */
#ifndef TRAIN_LIBRARY

#define EXIT_BAD_DATA 1                 /* unreadable or unusable data, runtime failure */
#define EXIT_USAGE 2                    /* unknown flag, malformed or out-of-range value */
#define TRAIN_SPLIT_NUM 9               /* the first 9/10 of the bytes train ... */
#define TRAIN_SPLIT_DEN 10              /* ... and the rest validates */
#define LN2 0.6931471805599453          /* ln 2: nats per bit */
#define LOG_EVERY 10                    /* steps between progress lines */
#define MAX_DATA_BYTES (1L << 30)       /* refuse text files above 1 GiB */
#define DEFAULT_WARMUP 100              /* warmup steps, unless the run is short: then ... */
#define WARMUP_SHARE 10                 /* ... 1/10 of the steps (at least 1) */
#define DEFAULT_SEED 1337
#define TRAIN_EXTRA_TOKENS 2            /* training needs T + 2 tokens: two distinct windows */
#define MIN_VAL_TOKENS 2                /* validation needs one token and its successor */
#define ASCII_DEL 0x7F                  /* the one control character above the C0 range */
#define FLAG_MAX_VOCAB 65536            /* the flags' ranges of the model's shape */
#define FLAG_MAX_LAYERS 64
#define FLAG_MIN_DIM 8
#define FLAG_MAX_DIM 2048
#define FLAG_MIN_CONTEXT 2
#define FLAG_MAX_CONTEXT 4096
#define FLAG_NAME_CAP 64                /* longest flag name quoted in a message */
#define STATE_SUFFIX ".state"           /* the optimizer state is PATH.state */
#define TOKENIZER_NAME "tokenizer.bin"  /* default tokenizer, beside the checkpoint */
#define HINT "Try './train --help'.\n"  /* the second line of every usage error */

static const char USAGE[] =
"Usage: train [options]\n"
"Train a byte-level BPE tokenizer and a GPT-2 model from scratch on a text file. The\n"
"first 90% of its bytes train, the last 10% validate.\n"
"\n"
"Options (a long one takes its value as --name VALUE or --name=VALUE):\n"
"  -d, --data PATH        training text (default ../shared/data/tinyshakespeare.txt)\n"
"  -o, --out PATH         checkpoint to write (default weights/model.bin); the optimizer\n"
"                         state goes to PATH.state\n"
"  -z, --tokenizer PATH   tokenizer to write, or read with -r (default: tokenizer.bin\n"
"                         beside the checkpoint)\n"
"  -r, --resume           continue the run saved in the checkpoint and its state file\n"
"      --force            overwrite an existing checkpoint, state and tokenizer (without\n"
"                         it a new run refuses to, so no trained model is lost)\n"
"  -v, --vocab N          BPE vocabulary size incl. 256 bytes and end-of-text, 257..65536\n"
"                         (default 1024)\n"
"  -L, --layers N         transformer blocks, 1..64 (default 6)\n"
"  -C, --dim N            model width, 8..2048 (default 128)\n"
"  -H, --heads N          attention heads, dividing the width (default 4)\n"
"  -T, --context N        context length in tokens, 2..4096 (default 128)\n"
"  -B, --batch N          sequences per step, 1..4096 (default 16)\n"
"  -n, --steps N          optimizer steps, 0..10000000 (default 3500)\n"
"  -l, --lr X             peak learning rate, (0, 1] (default 0.002)\n"
"  -w, --warmup N         warmup steps, 1..steps (default 100, or steps / 10 if that is\n"
"                         smaller, at least 1)\n"
"  -W, --weight-decay X   AdamW weight decay on weight matrices, 0..10 (default 0.1)\n"
"  -p, --dropout X        residual and embedding dropout, [0, 0.9] (default 0.1)\n"
"  -g, --clip X           gradient-norm clip, 0 = off, 0..1000 (default 1.0)\n"
"  -e, --eval-every N     steps between validation and checkpoints, 1.. (default 250)\n"
"  -s, --seed N           random seed, 0..2147483647 (default 1337)\n"
"  -h, --help             print this help and exit\n"
"\n"
"With -r only -d, -o, -z, -e, -n and --force may be given: the rest comes from the state\n"
"file; -n then sets a new total, and the cosine decay continues toward the new end.\n"
"A checkpoint and its state are written to temporary files and renamed into place, so a\n"
"run stopped at any moment (even by a crash) resumes with -r from its last checkpoint.\n"
"Exit status: 0 ok, 1 bad data or runtime failure (or an output file exists without\n"
"--force), 2 usage error.\n";

/* ---- flags ---- */

typedef enum {
    OPT_HELP, OPT_RESUME, OPT_FORCE, OPT_DATA, OPT_OUT, OPT_TOKENIZER, OPT_EVAL_EVERY,
    OPT_STEPS, OPT_VOCAB, OPT_LAYERS, OPT_DIM, OPT_HEADS, OPT_CONTEXT, OPT_BATCH, OPT_LR,
    OPT_WARMUP, OPT_WEIGHT_DECAY, OPT_DROPOUT, OPT_CLIP, OPT_SEED
} OptionId;

typedef enum { VALUE_NONE, VALUE_PATH, VALUE_INT, VALUE_FLOAT } ValueKind;

/* One flag: its names, what its value must be, and whether it combines with -r. */
typedef struct {
    OptionId id;
    const char *short_name;   /* "-d", or NULL for a long-only flag */
    const char *long_name;    /* "--data" */
    ValueKind kind;
    double min, max;          /* VALUE_INT, VALUE_FLOAT: the range */
    int open_min;             /* VALUE_FLOAT: min itself excluded */
    int with_resume;          /* 1: may be given with -r (the rest is in the state file) */
} OptionSpec;

static const OptionSpec OPTIONS[] = {
    {OPT_HELP, "-h", "--help", VALUE_NONE, 0, 0, 0, 1},
    {OPT_RESUME, "-r", "--resume", VALUE_NONE, 0, 0, 0, 1},
    {OPT_FORCE, NULL, "--force", VALUE_NONE, 0, 0, 0, 1},
    {OPT_DATA, "-d", "--data", VALUE_PATH, 0, 0, 0, 1},
    {OPT_OUT, "-o", "--out", VALUE_PATH, 0, 0, 0, 1},
    {OPT_TOKENIZER, "-z", "--tokenizer", VALUE_PATH, 0, 0, 0, 1},
    {OPT_EVAL_EVERY, "-e", "--eval-every", VALUE_INT, 1, INT_MAX, 0, 1},
    {OPT_STEPS, "-n", "--steps", VALUE_INT, 0, TRAIN_MAX_STEPS, 0, 1},
    {OPT_VOCAB, "-v", "--vocab", VALUE_INT, BPE_BYTE_TOKENS + 1, FLAG_MAX_VOCAB, 0, 0},
    {OPT_LAYERS, "-L", "--layers", VALUE_INT, 1, FLAG_MAX_LAYERS, 0, 0},
    {OPT_DIM, "-C", "--dim", VALUE_INT, FLAG_MIN_DIM, FLAG_MAX_DIM, 0, 0},
    {OPT_HEADS, "-H", "--heads", VALUE_INT, 1, FLAG_MAX_DIM, 0, 0},
    {OPT_CONTEXT, "-T", "--context", VALUE_INT, FLAG_MIN_CONTEXT, FLAG_MAX_CONTEXT, 0, 0},
    {OPT_BATCH, "-B", "--batch", VALUE_INT, 1, TRAIN_MAX_BATCH, 0, 0},
    {OPT_LR, "-l", "--lr", VALUE_FLOAT, 0, (double)TRAIN_MAX_LR, 1, 0},
    {OPT_WARMUP, "-w", "--warmup", VALUE_INT, 1, TRAIN_MAX_STEPS, 0, 0},
    {OPT_WEIGHT_DECAY, "-W", "--weight-decay", VALUE_FLOAT, 0, (double)TRAIN_MAX_WEIGHT_DECAY,
     0, 0},
    {OPT_DROPOUT, "-p", "--dropout", VALUE_FLOAT, 0, (double)TRAIN_MAX_DROPOUT, 0, 0},
    {OPT_CLIP, "-g", "--clip", VALUE_FLOAT, 0, (double)TRAIN_MAX_CLIP, 0, 0},
    {OPT_SEED, "-s", "--seed", VALUE_INT, 0, INT_MAX, 0, 0},
};
#define N_OPTIONS ((int)(sizeof OPTIONS / sizeof OPTIONS[0]))

typedef struct {
    const char *data_path, *out_path, *tokenizer_path;
    int resume, force, vocab, layers, dim, heads, context, eval_every;
    int steps_given;              /* -n was given (with -r: a new total) */
    TrainSettings settings;
    char state_path[PATH_CAP];    /* out_path + STATE_SUFFIX */
    char tokenizer_default[PATH_CAP];
} Options;

/* Print "train: SUBJECT: PROBLEM (got GOT, expected EXPECTED)" and the hint; EXIT_USAGE. */
static int usage_error(const char *subject, const char *problem, const char *got,
                       const char *expected) {
    fprintf(stderr, "train: %s: %s (got %s, expected %s)\n", subject, problem, got, expected);
    fputs(HINT, stderr);
    return EXIT_USAGE;
}

/* The flag spelled name[0 .. len), or NULL. */
static const OptionSpec *find_option(const char *name, size_t len) {
    for (int k = 0; k < N_OPTIONS; k++) {
        const OptionSpec *o = &OPTIONS[k];
        if ((o->short_name && strlen(o->short_name) == len &&
             !strncmp(o->short_name, name, len)) ||
            (strlen(o->long_name) == len && !strncmp(o->long_name, name, len))) return o;
    }
    return NULL;
}

/* What a value of flag o must be ("an integer in 1..64"), in buf. */
static const char *expected_value(const OptionSpec *o, char *buf, size_t cap) {
    if (o->kind == VALUE_PATH) snprintf(buf, cap, "a path");
    else if (o->kind == VALUE_INT) snprintf(buf, cap, "an integer in %.0f..%.0f", o->min, o->max);
    else if (o->open_min) snprintf(buf, cap, "a number in (%g, %g]", o->min, o->max);
    else snprintf(buf, cap, "a number in %g..%g", o->min, o->max);
    return buf;
}

/* Warmup when -w is not given: DEFAULT_WARMUP, or a tenth of a shorter run, at least 1. */
static int default_warmup(int steps) {
    int share = steps / WARMUP_SHARE;
    int warmup = share < DEFAULT_WARMUP ? share : DEFAULT_WARMUP;
    return warmup > 1 ? warmup : 1;
}

/* Fill o from argv. Returns 0, -1 after printing the help (exit 0), or EXIT_USAGE after
 * a one-line message and the hint. */
static int parse_options(Options *o, int argc, char **argv) {
    TrainSettings *s = &o->settings;
    int seed = DEFAULT_SEED, warmup_given = 0;
    const OptionSpec *first_shape = NULL;   /* the first flag -r does not allow */
    char flag[FLAG_NAME_CAP], shown[PATH_CAP], got[PATH_CAP + 2], expected[PATH_CAP];
    memset(o, 0, sizeof *o);
    o->data_path = "../shared/data/tinyshakespeare.txt";
    o->out_path = "weights/model.bin";
    o->vocab = 1024;
    o->layers = 6;
    o->dim = 128;
    o->heads = 4;
    o->context = 128;
    o->eval_every = 250;
    s->batch = 16;
    s->steps = 3500;
    s->lr = 0.002f;
    s->lr_min_ratio = 0.1f;
    s->weight_decay = 0.1f;
    s->beta1 = 0.9f;
    s->beta2 = 0.99f;
    s->eps = 1e-8f;
    s->clip = 1.0f;
    s->dropout = 0.1f;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = NULL;
        size_t name_len = strlen(arg);
        const char *equals = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        if (equals) {   /* --name=value */
            name_len = (size_t)(equals - arg);
            value = equals + 1;
        }
        snprintf(shown, sizeof shown, "%.*s", (int)name_len, arg);
        cli_printable(shown, flag, sizeof flag);   /* control bytes as \xHH */
        snprintf(got, sizeof got, "'%s'", cli_printable(arg, shown, sizeof shown));
        if (arg[0] != '-')
            return usage_error(flag, "unexpected argument", got, "options only, each "
                               "starting with '-'");
        const OptionSpec *spec = find_option(arg, name_len);
        if (!spec) return usage_error(flag, "unknown option", got, "an option --help lists");
        if (!spec->with_resume && !first_shape) first_shape = spec;
        if (spec->kind == VALUE_NONE) {
            if (value) {
                snprintf(expected, sizeof expected, "%s alone", flag);
                return usage_error(flag, "takes no value", got, expected);
            }
            if (spec->id == OPT_HELP) {
                fputs(USAGE, stdout);
                return -1;
            }
            if (spec->id == OPT_RESUME) o->resume = 1;
            if (spec->id == OPT_FORCE) o->force = 1;
            continue;
        }
        expected_value(spec, expected, sizeof expected);
        if (!value) {
            if (i + 1 >= argc) return usage_error(flag, "missing value", "nothing after it",
                                                  expected);
            value = argv[++i];
        }
        snprintf(got, sizeof got, "'%s'", cli_printable(value, shown, sizeof shown));
        int number = 0;
        float real = 0.0f;
        int bad = spec->kind == VALUE_INT ?
                  cli_parse_int(value, (long)spec->min, (long)spec->max, &number) != 0 :
                  spec->kind == VALUE_FLOAT ?
                  cli_parse_float(value, (float)spec->min, (float)spec->max, spec->open_min,
                                  &real) != 0 :
                  value[0] == '\0';
        if (bad) return usage_error(flag, "invalid value", got, expected);
        switch (spec->id) {
        case OPT_DATA: o->data_path = value; break;
        case OPT_OUT: o->out_path = value; break;
        case OPT_TOKENIZER: o->tokenizer_path = value; break;
        case OPT_EVAL_EVERY: o->eval_every = number; break;
        case OPT_STEPS: s->steps = number; o->steps_given = 1; break;
        case OPT_VOCAB: o->vocab = number; break;
        case OPT_LAYERS: o->layers = number; break;
        case OPT_DIM: o->dim = number; break;
        case OPT_HEADS: o->heads = number; break;
        case OPT_CONTEXT: o->context = number; break;
        case OPT_BATCH: s->batch = number; break;
        case OPT_LR: s->lr = real; break;
        case OPT_WARMUP: s->warmup = number; warmup_given = 1; break;
        case OPT_WEIGHT_DECAY: s->weight_decay = real; break;
        case OPT_DROPOUT: s->dropout = real; break;
        case OPT_CLIP: s->clip = real; break;
        case OPT_SEED: seed = number; break;
        default: break;   /* the flags without a value were handled above */
        }
    }
    s->seed = (uint64_t)seed;

    /* combinations */
    if (o->resume && first_shape) {
        const char *name = first_shape->short_name ? first_shape->short_name
                                                   : first_shape->long_name;
        snprintf(got, sizeof got, "%s with -r", name);
        return usage_error(name, "not allowed with -r", got, "only -d, -o, -z, -e, -n and "
                           "--force with -r: the rest comes from the state file");
    }
    if (o->dim % o->heads != 0) {
        snprintf(got, sizeof got, "%d heads for width %d", o->heads, o->dim);
        snprintf(expected, sizeof expected, "a number of heads dividing -C %d", o->dim);
        return usage_error("-H", "heads must divide the width", got, expected);
    }
    if (!warmup_given) {
        s->warmup = default_warmup(s->steps);
    } else if (s->steps > 0 && s->warmup > s->steps) {
        snprintf(got, sizeof got, "-w %d with -n %d", s->warmup, s->steps);
        snprintf(expected, sizeof expected, "at most the %d steps", s->steps);
        return usage_error("-w", "warmup exceeds the steps", got, expected);
    }

    /* the derived paths, each with room for TRAIN_TEMP_SUFFIX */
    size_t room = PATH_CAP - sizeof TRAIN_TEMP_SUFFIX - sizeof STATE_SUFFIX;
    if (strlen(o->out_path) > room) {
        snprintf(got, sizeof got, "%zu bytes", strlen(o->out_path));
        snprintf(expected, sizeof expected, "at most %zu", room);
        return usage_error("-o", "path too long", got, expected);
    }
    snprintf(o->state_path, sizeof o->state_path, "%s%s", o->out_path, STATE_SUFFIX);
    if (!o->tokenizer_path) {
        const char *slash = strrchr(o->out_path, '/');
        int folder = slash ? (int)(slash - o->out_path + 1) : 0;
        snprintf(o->tokenizer_default, sizeof o->tokenizer_default, "%.*s%s", folder,
                 o->out_path, TOKENIZER_NAME);
        o->tokenizer_path = o->tokenizer_default;
    }
    if (strlen(o->tokenizer_path) > room) {
        snprintf(got, sizeof got, "%zu bytes", strlen(o->tokenizer_path));
        snprintf(expected, sizeof expected, "at most %zu", room);
        return usage_error("-z", "path too long", got, expected);
    }
    if (!strcmp(o->tokenizer_path, o->out_path) || !strcmp(o->tokenizer_path, o->state_path)) {
        snprintf(got, sizeof got, "'%s'", cli_printable(o->tokenizer_path, shown, sizeof shown));
        return usage_error("-z", "same file as the checkpoint or its state", got,
                           "a path of its own");
    }
    return 0;
}

/* ---- data ---- */

/* 0 if nothing exists at path; else -1 after a stderr line saying how to proceed. */
static int check_new_file(const char *path, const char *what, const char *alternative) {
    if (access(path, F_OK) != 0) return 0;
    fprintf(stderr, "train: %s: %s exists already (got an existing file, expected a new path; "
            "pass --force to overwrite it, or %s)\n", path, what, alternative);
    return -1;
}

/* Read a whole file into a malloc'd buffer; prints and returns NULL on failure. */
static char *read_text(const char *path, size_t *size) {
    FILE *file = fopen(path, "rb");
    if (!file) {
        fprintf(stderr, "train: %s: cannot open (got \"%s\", expected a readable file)\n",
                path, strerror(errno));
        return NULL;
    }
    char *text = NULL;
    size_t length = 0;
    if (file_size(file, path, &length) != 0) {
        /* file_size printed why */
    } else if (length > (size_t)MAX_DATA_BYTES) {
        fprintf(stderr, "train: %s: file too large (got %zu bytes, expected at most %ld)\n",
                path, length, MAX_DATA_BYTES);
    } else if (!(text = malloc(length + 1))) {
        fprintf(stderr, "train: %s: out of memory (%zu bytes)\n", path, length);
    } else if (read_all(file, text, length, path, "text") != 0) {
        free(text);
        text = NULL;
    } else {
        *size = length;
    }
    fclose(file);
    return text;
}

/* Bytes of text[0 .. n) that are control characters other than whitespace (C0 but for
 * \t \n \v \f \r, and DEL): plain text has none, binary data many. */
static size_t count_control_bytes(const char *text, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        count += (c < ' ' && !(c >= '\t' && c <= '\r')) || c == ASCII_DEL;
    }
    return count;
}

/* 0 if the splits hold enough tokens for a context of T, else -1 after a stderr line. */
static int check_token_counts(const char *data_path, size_t n_train, size_t n_val, int T) {
    size_t need = (size_t)T + TRAIN_EXTRA_TOKENS;
    if (n_train >= need && n_val >= MIN_VAL_TOKENS) return 0;
    fprintf(stderr, "train: %s: too little text for a context of %d tokens (got %zu training "
            "and %zu validation tokens, expected at least %zu and %d)\n", data_path, T,
            n_train, n_val, need, MIN_VAL_TOKENS);
    return -1;
}

/* Encode text[0 .. len) into a malloc'd array (no end-of-text); NULL on failure. */
static int *encode_all(const Tokenizer *t, const char *text, size_t len, size_t *n) {
    int *ids = malloc((len + 1) * sizeof(int));   /* a token covers at least one byte */
    if (!ids) {
        fprintf(stderr, "train: out of memory encoding %zu bytes\n", len);
        return NULL;
    }
    if (tokenizer_encode(t, text, len, ids, len + 1, n) != 0) {
        free(ids);
        return NULL;
    }
    return ids;
}

/* Fill inputs, targets (B, T) with B windows of tokens starting at random offsets drawn
 * from a hash of (seed, step, b): the batch depends only on the step, so resuming
 * replays the same batches. */
static void train_batch(const Trainer *tr, const int *tokens, size_t n, int *inputs,
                        int *targets) {
    int B = tr->B, T = tr->T;
    for (int b = 0; b < B; b++) {
        uint64_t r = mix64(tr->settings.seed ^ mix64(((uint64_t)tr->step << 20) | (uint64_t)b));
        size_t start = (size_t)(r % (uint64_t)(n - (size_t)T));
        for (int t = 0; t < T; t++) {
            inputs[b * T + t] = tokens[start + (size_t)t];
            targets[b * T + t] = tokens[start + (size_t)t + 1];
        }
    }
}

/* Mean loss (nats per token) over every next-token prediction in tokens[0 .. n): windows
 * of T tokens from offsets 0, T, 2T, ..., each starting with an empty context, B at
 * a time; the first token is never a target. Dropout is off. Sets *sum_nats. */
static double evaluate(Trainer *tr, const int *tokens, size_t n, int *inputs, int *targets,
                       double *sum_nats) {
    int B = tr->B, T = tr->T;
    size_t windows = (n - 1 + (size_t)T - 1) / (size_t)T, count = 0;
    double sum = 0.0;
    tr->dropout_on = 0;
    for (size_t w0 = 0; w0 < windows; w0 += (size_t)B) {
        for (int b = 0; b < B; b++) {
            size_t start = (w0 + (size_t)b) * (size_t)T;
            for (int t = 0; t < T; t++) {
                size_t at = start + (size_t)t;
                int has_target = at + 1 < n;
                inputs[b * T + t] = at < n ? tokens[at] : 0;
                targets[b * T + t] = has_target ? tokens[at + 1] : -1;
                count += (size_t)has_target;
            }
        }
        trainer_forward(tr, inputs, targets);
        for (int i = 0; i < B * T; i++) sum += (double)tr->a.losses[i];
    }
    tr->dropout_on = 1;
    *sum_nats = sum;
    return count ? sum / (double)count : 0.0;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "1h02m03s" style duration into buf. */
static const char *format_duration(char *buf, size_t cap, double seconds) {
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, cap, "%ldh%02ldm%02lds", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, cap, "%ldm%02lds", s / 60, s % 60);
    return buf;
}

/* Matmul floating-point operations per trained token (forward + backward = 3 x forward):
 * 6 per weight of the blocks and the classifier, plus causal attention's
 * 2 (scores) + 2 (weighted sum) multiply-adds over T/2 keys on average, times 3. */
static double flops_per_token(const Config *c) {
    double C = c->dim, L = c->n_layers, V = c->vocab_size, T = c->seq_len;
    return 6.0 * (12.0 * L * C * C + V * C) + 6.0 * L * T * C;
}

int main(int argc, char **argv) {
    Options o;
    int rc = parse_options(&o, argc, argv);
    if (rc != 0) return rc < 0 ? 0 : rc;
    /* a new run never replaces a trained model or tokenizer unless asked to */
    if (!o.resume && !o.force &&
        (check_new_file(o.out_path, "the checkpoint", "-r to resume its run") != 0 ||
         check_new_file(o.state_path, "the optimizer state", "-o for another checkpoint") != 0 ||
         check_new_file(o.tokenizer_path, "the tokenizer", "-z for another path") != 0))
        return EXIT_BAD_DATA;
    if (o.resume) {
        int finished = trainer_finish_save(o.out_path, o.state_path);
        if (finished < 0) return EXIT_BAD_DATA;
        if (finished)
            printf("resume: %s%s belongs to %s: finished the interrupted save of %s\n",
                   o.out_path, TRAIN_TEMP_SUFFIX, o.state_path, o.out_path);
    }

    int status = EXIT_BAD_DATA, tokenizer_pending = 0;
    Tokenizer tok = {0};
    Trainer tr = {0};
    int *train_tokens = NULL, *val_tokens = NULL, *inputs = NULL, *targets = NULL;
    size_t size = 0, n_train = 0, n_val = 0;
    char tokenizer_temp[PATH_CAP];
    char *text = read_text(o.data_path, &size);
    if (!text) return EXIT_BAD_DATA;
    if (size == 0) {
        fprintf(stderr, "train: %s: empty file (got 0 bytes, expected text to train on)\n",
                o.data_path);
        free(text);
        return EXIT_BAD_DATA;
    }
    size_t split = size / TRAIN_SPLIT_DEN * TRAIN_SPLIT_NUM +   /* floor(0.9 size) */
                   size % TRAIN_SPLIT_DEN * TRAIN_SPLIT_NUM / TRAIN_SPLIT_DEN;
    printf("data: %s: %zu bytes; train bytes [0, %zu), validation bytes [%zu, %zu)\n",
           o.data_path, size, split, split, size);
    size_t control = count_control_bytes(text, size);
    if (control > 0)
        printf("data: %s: not plain text (%zu of %zu bytes are control characters); the "
               "tokenizer learns its merges over the raw bytes all the same\n", o.data_path,
               control, size);

    /* the tokenizer: learned on the training split only, unless resuming; it goes to a
     * temporary and takes its place only once the data is known to suffice */
    int n_merges = 0;
    double bpe_seconds = 0.0;
    if (!o.resume) {
        double start = now_seconds();
        Bpe bpe;
        if (temp_path(tokenizer_temp, o.tokenizer_path) != 0 ||
            bpe_train(&bpe, text, split, o.vocab) != 0) goto done;
        int saved = bpe_save(&bpe, tokenizer_temp);
        n_merges = bpe.n_merges;
        bpe_seconds = now_seconds() - start;
        bpe_free(&bpe);
        if (saved != 0) goto done;
        tokenizer_pending = 1;
    }
    if (tokenizer_load(&tok, o.resume ? o.tokenizer_path : tokenizer_temp) != 0) goto done;
    train_tokens = encode_all(&tok, text, split, &n_train);
    val_tokens = encode_all(&tok, text + split, size - split, &n_val);
    if (!train_tokens || !val_tokens) goto done;

    if (o.resume) {
        if (trainer_load(&tr, o.out_path, o.state_path) != 0) goto done;
        if (tr.config.vocab_size != tok.vocab_size) {
            fprintf(stderr, "train: %s: vocab size differs from %s (got %d, expected %d)\n",
                    o.out_path, o.tokenizer_path, tr.config.vocab_size, tok.vocab_size);
            goto done;
        }
        if (o.steps_given) {
            if (o.settings.steps < tr.step || o.settings.steps < tr.settings.warmup) {
                char got[64], expected[128];
                snprintf(got, sizeof got, "%d", o.settings.steps);
                snprintf(expected, sizeof expected, "at least the step reached, %d, and the "
                         "warmup, %d", tr.step, tr.settings.warmup);
                status = usage_error("-n", "new total out of range", got, expected);
                goto done;
            }
            tr.settings.steps = o.settings.steps;
        }
    }
    if (check_token_counts(o.data_path, n_train, n_val, o.resume ? tr.T : o.context) != 0)
        goto done;
    printf("tokens: train %zu (%.3f bytes/token), validation %zu (%.3f bytes/token)\n",
           n_train, (double)split / (double)n_train, n_val, (double)(size - split) / (double)n_val);
    if (o.resume) {
        printf("resuming at step %d of %d\n", tr.step, tr.settings.steps);
    } else {
        /* committed to a new run: with --force the old checkpoint and state go first, so
         * the new tokenizer is never paired with the old model */
        if (o.force && ((remove(o.state_path) != 0 && errno != ENOENT) ||
                        (remove(o.out_path) != 0 && errno != ENOENT))) {
            fprintf(stderr, "train: %s: cannot remove the previous run (got \"%s\", expected "
                    "--force to replace it)\n", o.out_path, strerror(errno));
            goto done;
        }
        if (rename_file(tokenizer_temp, o.tokenizer_path) != 0 ||
            sync_folder(o.tokenizer_path) != 0) goto done;
        tokenizer_pending = 0;
        printf("tokenizer: %d merges learned in %.1f s, vocab %d, written to %s\n", n_merges,
               bpe_seconds, tok.vocab_size, o.tokenizer_path);
        Config c = {0};
        c.seq_len = o.context;
        c.vocab_size = tok.vocab_size;
        c.n_layers = o.layers;
        c.n_heads = o.heads;
        c.dim = o.dim;
        if (trainer_init(&tr, &c, &o.settings, o.settings.batch) != 0) goto done;
    }
    int B = tr.B, T = tr.T;
    inputs = malloc((size_t)B * T * sizeof(int));
    targets = malloc((size_t)B * T * sizeof(int));
    if (!inputs || !targets) {
        fprintf(stderr, "train: out of memory for the batch\n");
        goto done;
    }
    const TrainSettings *s = &tr.settings;
    const Config *c = &tr.config;
    double flops = flops_per_token(c);
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    printf("model: L %d, C %d, NH %d, T %d, V %d: %zu parameters; batch %d x %d; "
           "%.2f MFLOP per token; %d thread%s\n", c->n_layers, c->dim, c->n_heads, T,
           c->vocab_size, tr.n_params, B, T, flops * 1e-6, threads, threads == 1 ? "" : "s");
    printf("schedule: %d steps, warmup %d, lr %g -> %g, weight decay %g, dropout %g, clip %g, "
           "seed %llu\n", s->steps, s->warmup, (double)s->lr, (double)(s->lr * s->lr_min_ratio),
           (double)s->weight_decay, (double)s->dropout, (double)s->clip,
           (unsigned long long)s->seed);
    fflush(stdout);

    double start = now_seconds(), train_seconds = 0.0, loss_sum = 0.0;
    double val_loss = -1.0, val_nats = 0.0;
    int first_step = tr.step, loss_count = 0;
    char elapsed[32], left[32];
    while (tr.step < s->steps) {
        double step_start = now_seconds();
        train_batch(&tr, train_tokens, n_train, inputs, targets);
        float loss = trainer_forward(&tr, inputs, targets);
        trainer_backward(&tr);
        float norm = trainer_update(&tr);
        train_seconds += now_seconds() - step_start;
        loss_sum += (double)loss;
        loss_count++;
        if (!(loss == loss) || !(norm == norm)) {   /* NaN: training diverged */
            fprintf(stderr, "train: loss became NaN at step %d (lower the learning rate)\n",
                    tr.step);
            goto done;
        }
        int evaluate_now = tr.step % o.eval_every == 0 || tr.step == s->steps;
        if (evaluate_now) {
            val_loss = evaluate(&tr, val_tokens, n_val, inputs, targets, &val_nats);
            if (trainer_save(&tr, o.out_path, o.state_path) != 0) goto done;
        }
        if (evaluate_now || tr.step % LOG_EVERY == 0) {
            double steps_done = (double)(tr.step - first_step);
            double tokens_per_s = steps_done * B * T / train_seconds;
            double wall = now_seconds() - start;
            printf("step %6d/%d | loss %.4f | val %s", tr.step, s->steps,
                   loss_sum / loss_count, val_loss < 0 ? "-" : "");
            if (val_loss >= 0)
                printf("%.4f (%.4f bpc)", val_loss, val_nats / (LN2 * (double)(size - split)));
            printf(" | lr %.2e | norm %.2f | %.0f tok/s | %.1f GFLOP/s | elapsed %s | left %s\n",
                   (double)trainer_learning_rate(s, tr.step - 1), (double)norm, tokens_per_s,
                   tokens_per_s * flops * 1e-9, format_duration(elapsed, sizeof elapsed, wall),
                   format_duration(left, sizeof left,
                                   wall / steps_done * (double)(s->steps - tr.step)));
            fflush(stdout);
            loss_sum = 0.0;
            loss_count = 0;
        }
    }
    if (tr.step == first_step && trainer_save(&tr, o.out_path, o.state_path) != 0) goto done;

    /* final figures over whole splits, dropout off */
    double train_nats = 0.0;
    double train_loss = evaluate(&tr, train_tokens, n_train, inputs, targets, &train_nats);
    val_loss = evaluate(&tr, val_tokens, n_val, inputs, targets, &val_nats);
    printf("final: train %.4f nats/token (%.4f bits/char over %zu bytes), validation %.4f "
           "nats/token (%.4f bits/char over %zu bytes); training time %s\n",
           train_loss, train_nats / (LN2 * (double)split), split, val_loss,
           val_nats / (LN2 * (double)(size - split)), size - split,
           format_duration(elapsed, sizeof elapsed, train_seconds));
    printf("wrote %s, %s and %s\n", o.out_path, o.state_path, o.tokenizer_path);
    status = 0;
done:
    if (tokenizer_pending) remove(tokenizer_temp);
    free(text);
    free(train_tokens);
    free(val_tokens);
    free(inputs);
    free(targets);
    tokenizer_free(&tok);
    trainer_free(&tr);
    return status;
}
#endif /* TRAIN_LIBRARY */

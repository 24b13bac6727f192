/* train_backward.c: the gradient of the mean cross-entropy with respect to every
 * parameter, by walking trainer_forward in reverse (train_backward.h).
 *
 * Each layer's backward is a kernel of its own: the products' in kernels_matmul_backward
 * (dx and dw on a register tile), LayerNorm's and GELU's in kernels.c, attention's in
 * attention.c (one job per sequence), and here the softmax + cross-entropy and the
 * embedding's. Dropout masks are redrawn from their keys (train_dropout), not stored.
 * What this file does not do: the update (train_optim.c).
 * Every parallel loop is a kernels_parallel_for whose jobs depend only on the shapes and
 * write disjoint outputs, each summing in a fixed order: the same bits for any thread
 * count.
 *
 * Legend: B sequences, T positions, N = B * T rows, C width, Hd = 4 C, L layers, V vocab.
 */
#include "train_backward.h"

#include <stdint.h>       /* uint64_t */
#include <string.h>       /* memset */

#include "attention.h"    /* attention_backward */
#include "kernels.h"      /* kernels_matmul_backward, kernels_layernorm_backward, ... */
#include "train_model.h"  /* Trainer, TRAIN_LAYER, train_dropout, train_dropout_key */

#define ROWS_PER_JOB 32         /* row-wise loops: rows per job */
#define ELEMENTS_PER_JOB 16384  /* elementwise loops: floats per job */
#define EMBEDDING_JOBS 16       /* blocks of token rows of dwte (the same for every run) */

/* Arguments of the loops below; each uses the fields it names. */
typedef struct {
    float *out, *out2;
    const float *x, *y;
    const int *tokens;
    size_t n;
    int N, C, T, V;
    float scale;
} Loop;

static int jobs_for(size_t n, size_t per_job) { return (int)((n + per_job - 1) / per_job); }

/* ------------------------------------------------------------------------- */
/* Softmax + cross-entropy, embedding                                          */

/* Rows of dlogits = scale * (probs - onehot(target)), in place. */
static void crossentropy_job(void *ctx, int j) {
    const Loop *f = ctx;
    int V = f->V, n1 = (j + 1) * ROWS_PER_JOB < f->N ? (j + 1) * ROWS_PER_JOB : f->N;
    for (int n = j * ROWS_PER_JOB; n < n1; n++) {
        float *d_n = f->out + (size_t)n * V;
        int target = f->tokens[n];
        if (target < 0) {
            memset(d_n, 0, (size_t)V * sizeof(float));
            continue;
        }
        for (int i = 0; i < V; i++) d_n[i] *= f->scale;
        d_n[target] -= f->scale;
    }
}

void train_crossentropy_backward(float *probs, const int *targets, int N, int V, float scale) {
    Loop f = {.out = probs, .tokens = targets, .N = N, .V = V, .scale = scale};
    kernels_parallel_for(crossentropy_job, &f, jobs_for((size_t)N, ROWS_PER_JOB), (double)N * V);
}

/* Job j < T: row t = j of dwpe, summing sequences b in order. Job T + k: the rows of dwte
 * of the k-th block of tokens, summing positions n in order (positions may share a
 * token, so a token's row belongs to one job, which scans every position). */
static void embedding_job(void *ctx, int j) {
    const Loop *f = ctx;
    int C = f->C, T = f->T;
    if (j < T) {
        float *dwpe_t = f->out2 + (size_t)j * C;
        for (int b = 0; b < f->N / T; b++) {
            const float *dx_n = f->x + ((size_t)b * T + (size_t)j) * C;
            for (int i = 0; i < C; i++) dwpe_t[i] += dx_n[i];
        }
        return;
    }
    int per_job = (f->V + EMBEDDING_JOBS - 1) / EMBEDDING_JOBS;
    int v0 = (j - T) * per_job, v1 = v0 + per_job < f->V ? v0 + per_job : f->V;
    for (int n = 0; n < f->N; n++) {
        int token = f->tokens[n];
        if (token < v0 || token >= v1) continue;
        float *dwte_v = f->out + (size_t)token * C;
        const float *dx_n = f->x + (size_t)n * C;
        for (int i = 0; i < C; i++) dwte_v[i] += dx_n[i];
    }
}

void train_embedding_backward(float *dwte, float *dwpe, const float *dx, const int *tokens,
                              int B, int T, int C, int V) {
    Loop f = {.out = dwte, .out2 = dwpe, .x = dx, .tokens = tokens, .N = B * T, .C = C,
              .T = T, .V = V};
    kernels_parallel_for(embedding_job, &f, T + EMBEDDING_JOBS, 2.0 * B * T * C);
}

/* ------------------------------------------------------------------------- */
/* Backward pass                                                               */

/* A chunk of d (n,) = GELU'(x) * d, in place (kernels_gelu_backward). */
static void gelu_job(void *ctx, int j) {
    const Loop *f = ctx;
    size_t start = (size_t)j * ELEMENTS_PER_JOB;
    size_t count = f->n - start < ELEMENTS_PER_JOB ? f->n - start : ELEMENTS_PER_JOB;
    kernels_gelu_backward(f->out + start, f->x + start, f->out + start, count);
}

/* Attention backward of one sequence b per job (dq, dk, dv of its rows from 0), each with
 * its own scratch. */
typedef struct {
    Trainer *tr;
    int layer;
    const float *q, *k, *v;
} AttentionJob;

static void attention_job(void *ctx, int b) {
    const AttentionJob *f = ctx;
    Trainer *tr = f->tr;
    TrainActivations *a = &tr->a;
    size_t seq = (size_t)b * tr->T * tr->config.dim;   /* seek to sequence b */
    size_t bytes = (size_t)tr->T * tr->config.dim * sizeof(float);
    memset(a->dq + seq, 0, bytes);   /* attention_backward accumulates */
    memset(a->dk + seq, 0, bytes);
    memset(a->dv + seq, 0, bytes);
    AttentionDropout drop = train_attention_dropout(tr, f->layer, b);
    attention_backward(&tr->attention, a->dq + seq, a->dk + seq, a->dv + seq, a->datty + seq,
                       f->q + seq, f->k + seq, f->v + seq, tr->T, &drop,
                       a->scratch + (size_t)b * tr->attention_scratch);
}

static void backward_body(void *ctx) {
    Trainer *tr = ctx;
    const Config *c = &tr->config;
    const TrainTensors *p = &tr->p;
    TrainTensors *g = &tr->g;
    TrainActivations *a = &tr->a;
    int B = tr->B, T = tr->T, C = c->dim, Hd = c->hidden_dim, V = c->vocab_size;
    int L = c->n_layers;
    size_t N = (size_t)B * T;
    float drop = tr->dropout_on ? tr->settings.dropout : 0.0f;
    memset(tr->grads, 0, tr->n_params * sizeof(float));

    /* loss = mean over targets: dlogits = (probs - onehot) / n_targets */
    float *dlogits = a->probs;
    train_crossentropy_backward(dlogits, tr->targets, (int)N, V,
                                tr->n_targets ? 1.0f / (float)tr->n_targets : 0.0f);
    kernels_matmul_backward(a->dln, g->wte, NULL, dlogits, a->lnf, p->wte, (int)N, C, V,
                            KERNELS_OVERWRITE);
    memset(a->dresidual, 0, N * C * sizeof(float));
    kernels_layernorm_backward(a->dresidual, g->lnfw, g->lnfb, a->dln,
                               TRAIN_LAYER(a->residual3, L - 1, N, C), p->lnfw, a->mean,
                               a->rstd, (int)N, C);

    for (int l = L - 1; l >= 0; l--) {
        const float *residual = l == 0 ? a->encoded : TRAIN_LAYER(a->residual3, l - 1, N, C);
        const float *ln1 = TRAIN_LAYER(a->ln1, l, N, C), *q = TRAIN_LAYER(a->q, l, N, C);
        const float *k = TRAIN_LAYER(a->k, l, N, C), *v = TRAIN_LAYER(a->v, l, N, C);
        const float *atty = TRAIN_LAYER(a->atty, l, N, C);
        const float *residual2 = TRAIN_LAYER(a->residual2, l, N, C);
        const float *ln2 = TRAIN_LAYER(a->ln2, l, N, C), *fch = TRAIN_LAYER(a->fch, l, N, Hd);
        const float *fch_gelu = TRAIN_LAYER(a->fch_gelu, l, N, Hd);
        size_t qkv = (size_t)l * 3 * C * C, qkv_b = (size_t)l * 3 * C, CC = (size_t)C * C;

        /* dresidual is d loss / d residual3; the MLP branch gets drop(dresidual) */
        train_dropout(a->dtmp, a->dresidual, N * C, drop, train_dropout_key(tr, l, 1));
        kernels_matmul_backward(a->dfch, g->fcprojw + (size_t)l * C * Hd,
                                g->fcprojb + (size_t)l * C, a->dtmp, fch_gelu,
                                p->fcprojw + (size_t)l * C * Hd, (int)N, Hd, C,
                                KERNELS_OVERWRITE);
        /* dfch: from d loss / d fch_gelu to d loss / d fch, in place */
        Loop gelu = {.out = a->dfch, .x = fch, .n = N * Hd};
        kernels_parallel_for(gelu_job, &gelu, jobs_for(N * Hd, ELEMENTS_PER_JOB), (double)N * Hd);
        kernels_matmul_backward(a->dln, g->fcw + (size_t)l * Hd * C, g->fcb + (size_t)l * Hd,
                                a->dfch, ln2, p->fcw + (size_t)l * Hd * C, (int)N, C, Hd,
                                KERNELS_OVERWRITE);
        kernels_layernorm_backward(a->dresidual, g->ln2w + (size_t)l * C,
                                   g->ln2b + (size_t)l * C, a->dln, residual2,
                                   p->ln2w + (size_t)l * C, a->mean, a->rstd, (int)N, C);

        /* dresidual is now d loss / d residual2; the attention branch gets drop(dresidual) */
        train_dropout(a->dtmp, a->dresidual, N * C, drop, train_dropout_key(tr, l, 0));
        kernels_matmul_backward(a->datty, g->attprojw + (size_t)l * CC,
                                g->attprojb + (size_t)l * C, a->dtmp, atty,
                                p->attprojw + (size_t)l * CC, (int)N, C, C, KERNELS_OVERWRITE);
        AttentionJob att = {tr, l, q, k, v};
        kernels_parallel_for(attention_job, &att, B, 4.0 * B * T * T * C);
        /* dln = dq W_q + dk W_k + dv W_v */
        kernels_matmul_backward(a->dln, g->qkvw + qkv, g->qkvb + qkv_b, a->dq, ln1,
                                p->qkvw + qkv, (int)N, C, C, KERNELS_OVERWRITE);
        kernels_matmul_backward(a->dln, g->qkvw + qkv + CC, g->qkvb + qkv_b + C, a->dk, ln1,
                                p->qkvw + qkv + CC, (int)N, C, C, KERNELS_ACCUMULATE);
        kernels_matmul_backward(a->dln, g->qkvw + qkv + 2 * CC, g->qkvb + qkv_b + 2 * C,
                                a->dv, ln1, p->qkvw + qkv + 2 * CC, (int)N, C, C,
                                KERNELS_ACCUMULATE);
        kernels_layernorm_backward(a->dresidual, g->ln1w + (size_t)l * C,
                                   g->ln1b + (size_t)l * C, a->dln, residual,
                                   p->ln1w + (size_t)l * C, a->mean, a->rstd, (int)N, C);
    }
    /* dresidual is d loss / d encoded; undo the embedding dropout, then scatter */
    train_dropout(a->dresidual, a->dresidual, N * C, drop, train_dropout_key(tr, L, 0));
    train_embedding_backward(g->wte, g->wpe, a->dresidual, tr->inputs, B, T, C, V);
}

void trainer_backward(Trainer *tr) {
    kernels_run(backward_body, tr);   /* on the pool, as trainer_forward */
}

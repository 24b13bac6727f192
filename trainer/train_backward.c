/* train_backward.c: the gradient of the mean cross-entropy with respect to every
 * parameter, by walking trainer_forward in reverse (train_backward.h).
 *
 * Each layer's backward is a kernel of its own: the products' in kernels_matmul_backward
 * (dx and dw on a register tile), LayerNorm's and GELU's in train_kernels.c, attention's in
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
#include "block.h"        /* block_finish_backward, block_qkv_backward */
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
} TrainBackwardJob;

/* ------------------------------------------------------------------------- */
/* Softmax + cross-entropy, embedding                                          */

/* Rows of dlogits = scale * (probs - onehot(target)), in place. */
static void crossentropy_backward_job(void *ctx, int j) {
    const TrainBackwardJob *f = ctx;
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
    TrainBackwardJob f = {.out = probs, .tokens = targets, .N = N, .V = V, .scale = scale};
    kernels_parallel_for(crossentropy_backward_job, &f, kernels_jobs((size_t)N, ROWS_PER_JOB),
                         (double)N * V);
}

/* Job j < P (P = T, or 0 without dwpe): row t = j of dwpe, summing sequences b in order.
 * Job P + k: the rows of dwte of the k-th block of tokens, summing positions n in order
 * (positions may share a token, so a token's row belongs to one job, which scans every
 * position). */
static void embedding_backward_job(void *ctx, int j) {
    const TrainBackwardJob *f = ctx;
    int C = f->C, T = f->T, P = f->out2 ? T : 0;
    if (j < P) {
        float *dwpe_t = f->out2 + (size_t)j * C;
        for (int b = 0; b < f->N / T; b++) {
            const float *dx_n = f->x + ((size_t)b * T + (size_t)j) * C;
            for (int i = 0; i < C; i++) dwpe_t[i] += dx_n[i];
        }
        return;
    }
    int per_job = (f->V + EMBEDDING_JOBS - 1) / EMBEDDING_JOBS;
    int v0 = (j - P) * per_job, v1 = v0 + per_job < f->V ? v0 + per_job : f->V;
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
    TrainBackwardJob f = {.out = dwte, .out2 = dwpe, .x = dx, .tokens = tokens, .N = B * T, .C = C,
              .T = T, .V = V};
    kernels_parallel_for(embedding_backward_job, &f, (dwpe ? T : 0) + EMBEDDING_JOBS,
                         2.0 * B * T * C);
}

/* ------------------------------------------------------------------------- */
/* Backward pass                                                               */

/* Attention backward of one sequence b per job (dq, dk, dv of its rows from 0), each with
 * its own scratch. */
typedef struct {
    Trainer *tr;
    int layer;
    const float *q, *k, *v;
} SequenceBackwardJob;

static void attention_backward_job(void *ctx, int b) {
    const SequenceBackwardJob *f = ctx;
    Trainer *tr = f->tr;
    TrainActivations *a = &tr->a;
    size_t seq = (size_t)b * tr->T * tr->config.dim;   /* seek to sequence b */
    size_t bytes = (size_t)tr->T * tr->config.dim * sizeof(float);
    memset(a->dq + seq, 0, bytes);   /* attention_backward accumulates */
    memset(a->dk + seq, 0, bytes);
    memset(a->dv + seq, 0, bytes);
    AttentionDropout drop = train_attention_dropout(tr, f->layer, b);
    float *scratch = a->scratch + (size_t)b * tr->attention_scratch;
    const AttentionConfig *cfg = &tr->attn[f->layer];
    if (model_attention_is_plain(cfg)) {
        attention_backward(&tr->heads, a->dq + seq, a->dk + seq, a->dv + seq,
                           a->datty + seq, f->q + seq, f->k + seq, f->v + seq, tr->T, &drop,
                           scratch);
        return;
    }
    /* a variant: its parameters' gradient (sink logits, a Synthesizer's) goes to this
     * sequence's own row of dparam, summed over the sequences in order afterwards */
    float *dparam = a->dparam + (size_t)b * tr->dparam_floats;
    memset(dparam, 0, tr->dparam_floats * sizeof(float));
    attention_train_backward(cfg, &tr->heads, train_layer_random(tr, f->layer), &drop,
                             a->dq + seq, a->dk + seq, a->dv + seq, dparam, a->datty + seq,
                             f->q + seq, f->k + seq, f->v + seq, tr->T, scratch);
}

static void backward_body(void *ctx) {
    Trainer *tr = ctx;
    const Config *c = &tr->config;
    const TrainTensors *p = &tr->p;
    TrainTensors *g = &tr->g;
    TrainActivations *a = &tr->a;
    int B = tr->B, T = tr->T, C = c->dim, V = c->vocab_size;
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

    /* each block in reverse: its second half, its attention, its first half; dresidual
     * carries d loss / d (the stream) down through the layers */
    BlockResidual residual = train_residual(tr);
    BlockGradBuffers d = {.dx = a->dresidual, .dproj = a->dtmp, .dact = a->dfch,
                          .dxn = a->dln, .datt = a->datty, .dq = a->dq, .dk = a->dk,
                          .dv = a->dv, .mean = a->mean, .rstd = a->rstd};
    for (int l = L - 1; l >= 0; l--) {
        BlockBuffers b = train_block_buffers(tr, l);
        BlockTensors grads = train_layer_tensors(g, c, l);
        block_finish_backward(c, &tr->layers[l], &grads, l, (int)N, &b, &d, &residual);
        SequenceBackwardJob att = {tr, l, b.q, b.k, b.v};
        kernels_parallel_for(attention_backward_job, &att, B, 4.0 * B * T * T * C);
        if (tr->attn[l].sink_logit) {   /* the sequences' sink gradients, in order */
            int NH = c->n_heads;
            for (int s = 0; s < B; s++)
                for (int h = 0; h < NH; h++)
                    g->sink[(size_t)l * NH + h] += a->dparam[(size_t)s * tr->dparam_floats + h];
        }
        size_t n_synth = tr->synth_offset[l + 1] - tr->synth_offset[l];
        if (attention_is_synth(tr->attn[l].kind)) {   /* a Synthesizer's, in order */
            float *dP = g->synth + tr->synth_offset[l];
            for (int s = 0; s < B; s++) {
                const float *row = a->dparam + (size_t)s * tr->dparam_floats;
                for (size_t i = 0; i < n_synth; i++) dP[i] += row[i];
            }
        }
        block_qkv_backward(c, &tr->layers[l], &grads, (int)N, &b, &d);
    }
    /* dresidual is d loss / d encoded; undo the embedding dropout, then scatter */
    train_dropout(a->dresidual, a->dresidual, N * C, drop, train_dropout_key(tr, L, 0));
    train_embedding_backward(g->wte, c->positions == MODEL_POSITIONS_LEARNED ? g->wpe : NULL,
                             a->dresidual, tr->inputs, B, T, C, V);
}

void trainer_backward(Trainer *tr) {
    kernels_run(backward_body, tr);   /* on the pool, as trainer_forward */
}

/* train_model.h: the network as the trainer holds it: settings, parameters, activations,
 * and the batched forward pass that keeps what the backward pass needs.
 *
 * Parameters are llm.c's 16 GPT-2 tensors in one block (the checkpoint's order, so a save
 * is one write). The forward runs B sequences of T tokens at once on train_kernels.c's products
 * (the weights transposed once per forward for its register tile) and attention.c's
 * attention_forward, with dropout masks drawn from a hash so that the backward can redraw
 * them. train_backward.h differentiates it; train_optim.h updates and saves it.
 *
 * Legend: B sequences, T positions, N = B * T rows, C width, Hd = 4 C, L layers,
 * NH heads, V vocab (= padded vocab here), S context of the checkpoint (= T).
 */
#ifndef TRAIN_MODEL_H
#define TRAIN_MODEL_H

#include <stddef.h>     /* size_t */
#include <stdint.h>     /* uint64_t */
#include "block.h"      /* BlockTensors, BlockResidual */
#include "model.h"      /* Config, AttentionShape */

#define TRAIN_N_FILE_TENSORS 16              /* llm.c's GPT-2 parameter tensors */
#define TRAIN_N_TENSORS 18                   /* and the learned sink logits (0 floats unless
                                              * a layer's attention has sinklogit=1), and the
                                              * Synthesizer layers' parameters (0 floats
                                              * unless a layer is one) */
#define TRAIN_DEFAULT_REDRAW 100             /* Performer: steps between feature draws */
#define TRAIN_INIT_STD 0.02f                 /* GPT-2 init: N(0, 0.02) for weights */

/* Limits of a run's settings: the trainer's flags accept these ranges, and a state file
 * whose settings fall outside them is refused. */
#define TRAIN_MAX_BATCH 4096
#define TRAIN_MAX_STEPS 10000000
#define TRAIN_MAX_LR 1.0f                    /* lr in (0, TRAIN_MAX_LR] */
#define TRAIN_MAX_WEIGHT_DECAY 10.0f
#define TRAIN_MAX_CLIP 1000.0f
/* doubles as written: a flag's range holds for the number typed, and 0.9f < 0.9 */
#define TRAIN_MAX_DROPOUT 0.9
#define TRAIN_MAX_EMA 0.99999                /* weight-average decay in [0, TRAIN_MAX_EMA] */

/* Seek to layer l's slice of a per-layer activation (L, N, width). */
#define TRAIN_LAYER(buffer, l, N, width) ((buffer) + (size_t)(l) * (N) * (width))

/* Settings of a run; saved in the state file so a resumed run continues identically. */
typedef struct {
    int batch;              /* B: sequences per step */
    int steps;              /* total optimizer steps */
    int warmup;             /* steps of linear learning-rate warmup */
    float lr;               /* peak learning rate, after warmup */
    float lr_min_ratio;     /* cosine decay ends at lr * lr_min_ratio */
    float weight_decay;     /* AdamW decoupled decay, on weight matrices only */
    float beta1, beta2;     /* AdamW moment decays */
    float eps;              /* AdamW epsilon */
    float clip;             /* global gradient-norm clip; 0 = off */
    float dropout;          /* residual and embedding dropout probability, [0, 1) */
    float attn_dropout;     /* dropout on the attention weights, [0, 1) */
    float token_noise;      /* share of input tokens replaced by a random draw, [0, 1) */
    float ema;              /* decay of the weights' moving average; 0 = none */
    uint64_t seed;          /* initialisation, batches and dropout masks */
    int redraw;             /* Performer: steps between draws of its random features (LSH
                             * rotations are drawn afresh every step); evaluation uses
                             * draw 0, the one run uses */
    const AttentionConfig *attention;   /* (L,) each layer's attention, or NULL for exact
                             * attention in every layer; the checkpoint records it (its
                             * attention extension), so it is not in the state file */
    size_t max_memory;      /* bytes trainer_init may allocate, 0 = no limit; the run's
                             * own, not saved in the state file */
} TrainSettings;

/* Views of the 16 tensors, in file order, into one block. */
typedef struct {
    float *wte;        /* (V, C) token embedding, also the classifier */
    float *wpe;        /* (S, C); 0 floats with rotary positions */
    float *ln1w;       /* (L, C) */
    float *ln1b;       /* (L, C) */
    float *qkvw;       /* (L, 3C, C) */
    float *qkvb;       /* (L, 3C) */
    float *attprojw;   /* (L, C, C) */
    float *attprojb;   /* (L, C) */
    float *ln2w;       /* (L, C) */
    float *ln2b;       /* (L, C) */
    float *fcw;        /* (L, Hd, C) */
    float *fcb;        /* (L, Hd) */
    float *fcprojw;    /* (L, C, Hd) */
    float *fcprojb;    /* (L, C) */
    float *lnfw;       /* (C,) */
    float *lnfb;       /* (C,) */
    float *sink;       /* (L, NH) learned sink logits (none unless a layer has them) */
    float *synth;      /* every Synthesizer layer's parameters, layer l's at synth_offset[l]
                        * (attention.h's layout; none unless a layer is one) */
} TrainTensors;

/* Activations of one forward pass over (B, T) tokens; all owned by the Trainer. */
typedef struct {
    float *encoded;    /* (N, C) embeddings (after dropout) */
    float *ln1;        /* (L, N, C) */
    float *q, *k, *v;  /* (L, N, C) each */
    float *atty;       /* (L, N, C) attention output before the projection */
    float *residual2;  /* (L, N, C) stream after the attention sublayer */
    float *ln2;        /* (L, N, C) */
    float *fch;        /* (L, N, Hd) MLP pre-activation */
    float *fch_gelu;   /* (L, N, Hd) */
    float *residual3;  /* (L, N, C) stream after the MLP sublayer */
    float *lnf;        /* (N, C) */
    float *logits;     /* (N, V) */
    float *probs;      /* (N, V) softmax, then the logits' gradient in the backward */
    float *losses;     /* (N,) per-position cross-entropy; 0 where the target is < 0 */
    /* backward work buffers, reused by every layer */
    float *dresidual;  /* (N, C) */
    float *dtmp;       /* (N, C) */
    float *dln;        /* (N, C) */
    float *datty;      /* (N, C) */
    float *dq, *dk, *dv;          /* (N, C) each */
    float *dfch;       /* (N, Hd) gradient of fch_gelu, then (in place) of fch */
    float *scratch;    /* (B, attention scratch): one attention scratch per sequence */
    float *dparam;     /* (B, dparam_floats) each sequence's gradient of one layer's
                        * attention parameters: its sink logits (NH,), or a Synthesizer's */
    float *rope;       /* (N, HS) cos and sin of each row's rotary angles (positions 0 .. T-1
                        * of every sequence), made once by trainer_init; NULL with learned
                        * positions */
    float *mean, *rstd;           /* (N,) LayerNorm statistics (backward) */
} TrainActivations;

typedef struct {
    Config config;                 /* model shape (S = T, Vp = V) */
    AttentionShape heads;          /* head layout and 1/sqrt(HS) scale */
    TrainSettings settings;
    int B, T;                      /* batch shape the activations hold */
    size_t tensor_size[TRAIN_N_TENSORS];  /* floats of each tensor, in file order */
    size_t n_params;
    size_t attention_scratch;      /* floats of one sequence's attention scratch */
    AttentionConfig *attn;         /* (L,) owned: each layer's attention (sink_logits point
                                    * into params) */
    int variant;                   /* 1 if some layer's attention is not plain exact: the
                                    * checkpoint then carries the attention extension */
    float *random;                 /* owned: every layer's random matrices (Performer
                                    * features, LSH rotations), layer l's at
                                    * random_offset[l]; NULL if none has them */
    size_t random_offset[MODEL_MAX_LAYERS + 1];
    size_t synth_offset[MODEL_MAX_LAYERS + 1];   /* floats into p.synth of layer l's */
    size_t dparam_floats;          /* one sequence's row of a.dparam: the most any layer has */
    long long random_draw[MODEL_MAX_LAYERS];   /* the draw layer l's matrices hold, -1: none */
    float *params;                 /* (n_params,) owned */
    float *params_t;               /* (n_params,) owned: each weight matrix of params
                                    * transposed, at its own offset (qkvw as three (C, C)
                                    * blocks per layer), remade by every trainer_forward */
    float *grads;                  /* (n_params,) owned */
    float *adam_m, *adam_v;        /* (n_params,) owned AdamW moments */
    float *ema;                    /* (n_params,) owned moving average of params, the
                                    * weights a checkpoint holds; NULL when settings.ema
                                    * is 0 */
    TrainTensors p, g;             /* views into params and grads */
    LayerWeights *layers;          /* (L,) owned: each layer's views of params (and of
                                    * params_t), as block.c's halves read them */
    TrainActivations a;
    int *inputs, *targets;         /* (N,) owned copies of the last forward's batch */
    int n_targets;                 /* targets >= 0 in the last forward */
    int step;                      /* optimizer steps taken */
    int dropout_on;                /* 1 while training; 0 for evaluation */
    uint64_t tokenizer_sum;        /* FNV-1a 64 of the run's tokenizer file, kept in the
                                    * state; 0 = not known (a state before version 4) */
} Trainer;

/* 0 if the shape of c (V, L, NH, C, T), its position scheme (learned, or rotary with an
 * even head size) and batch B are in range, else -1 after one stderr line naming
 * subject. */
int trainer_check_config(const Config *c, int B, const char *subject);

/* Floats of each of the 17 tensors for c (V = padded V, S = T, Hd set) into size, in file
 * order (wpe 0 floats with rotary positions), the sink logits (L, NH) last and only if
 * sink_logits (else 0 floats); returns their sum, the parameter count. c must have passed
 * trainer_check_config. */
size_t trainer_tensor_sizes(size_t size[TRAIN_N_TENSORS], const Config *c, int sink_logits,
                            size_t synth);

/* 1 if AdamW decays tensor i (0 .. 16): the weight matrices and embeddings, not biases,
 * norms or sink logits. */
int trainer_tensor_decayed(int i);

/* Layer l's tensors inside t (the parameters or the gradients), as block.c takes them:
 * the one place that knows where a layer's W_Q, W_K, W_V sit in qkvw and so on. */
BlockTensors train_layer_tensors(const TrainTensors *t, const Config *c, int l);

/* Layer l's slices of the kept activations (and the shared scratch a->dtmp as proj), as
 * block.c's forward writes them and its backward reads them. */
BlockBuffers train_block_buffers(const Trainer *tr, int l);

/* The residual sums of every block, with dropout on each sublayer's output (the mask of
 * (layer, site) at this step; none while evaluating), forward and backward. */
BlockResidual train_residual(Trainer *tr);

/* Build a trainer for config c (seq_len = T, vocab_size = padded_vocab_size = V,
 * n_kv_heads = n_heads, hidden_dim = 4 dim; positions learned, a table wpe, or rotary, no
 * table and q, k rotated in every layer as run's Llama models) and batch B, with
 * parameters initialised as GPT-2 from settings.seed (sink logits 0), each layer's
 * attention settings.attention's (refused with a message if invalid for the shape, or if
 * attention-weight dropout meets a kind without softmax weights). Computes its memory
 * first (trainer_memory_bytes) and allocates nothing if that exceeds settings.max_memory.
 * Returns 0, or -1 after one stderr line. *tr is zeroed first; trainer_free is safe either way. */
int trainer_init(Trainer *tr, const Config *c, const TrainSettings *settings, int B);

/* Bytes trainer_init allocates for config c, settings (the average adds a copy of the
 * parameters) and batch B: the parameters, gradients, AdamW moments, the activations kept
 * for the backward of B x T tokens and the attention scratch; 0 if c is out of range. */
size_t trainer_memory_bytes(const Config *c, const TrainSettings *settings, int B);

/* bytes for the memory messages into out (cap bytes): "N bytes" below 0.01 GB, where
 * two decimals of GB would read 0.00, else "X.XX GB". Returns out. */
const char *trainer_format_bytes(char *out, size_t cap, size_t bytes);

/* Release everything trainer_init made. Safe on a zeroed or freed Trainer. */
void trainer_free(Trainer *tr);

/* Forward over inputs (B, T) token ids (each < V). With targets (B, T) (id < V, or -1
 * for none) computes probs and losses and returns the mean loss over the targets
 * that are >= 0; with targets NULL only the logits, returning 0. Results live in tr->a.
 * Reads tr->params afresh at every call (tests perturb them in place). */
float trainer_forward(Trainer *tr, const int *inputs, const int *targets);

/* Fill inputs, targets (B, T) with B windows of tokens[0 .. n) (n > T) at random
 * offsets drawn from a hash of (seed, step, b): the batch depends only on the step, so
 * resuming replays the same batches. With token noise q, each input token is then
 * replaced, with probability q, by the token at a random position of tokens, a draw from
 * the tokens' own frequencies; targets are never changed. */
void trainer_batch(const Trainer *tr, const int *tokens, size_t n, int *inputs,
                   int *targets);

/* Softmax and cross-entropy of logits (N, V) against targets (N,) (-1 = none):
 * probs (N, V) = softmax (kernels_exp_sum's exp), losses (N,) = -log probs[target]
 * (0 if none). */
void train_crossentropy_forward(float *probs, float *losses, const float *logits,
                                const int *targets, int N, int V);

/* ---- shared with the backward pass and the program ---- */

/* The key of one dropout site at tr's current step: layer l (L for the embeddings),
 * site 0 attention output, 1 MLP output, 2 attention weights, 3 (layer L) input tokens. */
uint64_t train_dropout_key(const Trainer *tr, int layer, int site);

/* The attention-weight dropout of sequence b in layer l at tr's current step (p = 0 while
 * evaluating): key train_dropout_key(tr, l, 2) plus b times one call's NH T^2 indices. */
AttentionDropout train_attention_dropout(const Trainer *tr, int layer, int b);

/* Layer l's random matrices for the current forward (attention_draw_random's), or NULL if
 * its attention has none. */
const float *train_layer_random(const Trainer *tr, int l);

/* out (n,) = x (n,) * mask / (1 - p), mask_i = 0 with probability p (hash.h's dropout
 * rule for key + i), so the backward applies the same mask by calling it again; out may
 * be x.
 * With p = 0 a copy (or nothing, in place). */
void train_dropout(float *out, const float *x, size_t n, float p, uint64_t key);

#endif /* TRAIN_MODEL_H */

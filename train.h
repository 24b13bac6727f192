/* train.h: training a GPT-2 model from scratch: parameters, batched forward and
 * backward passes, AdamW, and checkpoints run can load.
 *
 * The forward pass reuses model.c's layer functions (model_layernorm, model_matmul,
 * model_gelu) and attention.c's attention_forward, over B sequences of T tokens at
 * once, and keeps the activations the backward pass needs. Every backward kernel
 * here is exposed so tests/test_train.c can check it against finite differences.
 * train.c also holds the trainer program's main (left out when TRAIN_LIBRARY is
 * defined, which is how the tests link it). Read model.h first.
 *
 * Legend: B sequences, T positions, N = B * T rows, C width, Hd = 4 C, L layers,
 * NH heads, V vocab (= padded vocab here), S context of the checkpoint (= T).
 */
#ifndef TRAIN_H
#define TRAIN_H

#include <stddef.h>     /* size_t */
#include <stdint.h>     /* uint64_t */
#include "model.h"      /* Config, AttentionShape */

#define TRAIN_N_TENSORS 16                   /* llm.c's GPT-2 parameter tensors */
#define TRAIN_STATE_MAGIC 0x31534F41         /* optimizer state file: "AOS1" little-endian */
#define TRAIN_STATE_VERSION 2                /* 2: tied to its checkpoint by a checksum */
#define TRAIN_STATE_HEADER_INTS 64           /* state header: 64 int32/float32 fields */
#define TRAIN_TEMP_SUFFIX ".tmp"             /* a file is written as PATH.tmp, then renamed */
#define TRAIN_INIT_STD 0.02f                 /* GPT-2 init: N(0, 0.02) for weights */

/* Limits of a run's settings: the trainer's flags accept these ranges, and a state file
 * whose settings fall outside them is refused. */
#define TRAIN_MAX_BATCH 4096
#define TRAIN_MAX_STEPS 10000000
#define TRAIN_MAX_LR 1.0f                    /* lr in (0, TRAIN_MAX_LR] */
#define TRAIN_MAX_WEIGHT_DECAY 10.0f
#define TRAIN_MAX_DROPOUT 0.9f
#define TRAIN_MAX_CLIP 1000.0f

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
    uint64_t seed;          /* initialisation, batches and dropout masks */
} TrainSettings;

/* Views of the 16 tensors, in file order, into one block. */
typedef struct {
    float *wte;        /* (V, C) token embedding, also the classifier */
    float *wpe;        /* (S, C) */
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
    float *dfch;       /* (N, Hd) */
    float *dfch_gelu;  /* (N, Hd) */
    float *scratch;    /* attention scratch, forward and backward */
    float *mean, *rstd;           /* (N,) LayerNorm statistics (backward) */
} TrainActivations;

typedef struct {
    Config config;                 /* model shape (S = T, Vp = V) */
    AttentionShape attention;
    TrainSettings settings;
    int B, T;                      /* batch shape the activations hold */
    size_t tensor_size[TRAIN_N_TENSORS];  /* floats of each tensor, in file order */
    size_t n_params;
    float *params;                 /* (n_params,) owned */
    float *grads;                  /* (n_params,) owned */
    float *adam_m, *adam_v;        /* (n_params,) owned AdamW moments */
    TrainTensors p, g;             /* views into params and grads */
    TrainActivations a;
    int *inputs, *targets;         /* (N,) owned copies of the last forward's batch */
    int n_targets;                 /* targets >= 0 in the last forward */
    int step;                      /* optimizer steps taken */
    int dropout_on;                /* 1 while training; 0 for evaluation */
} Trainer;

/* Build a trainer for config c (seq_len = T, vocab_size = padded_vocab_size = V,
 * n_kv_heads = n_heads, hidden_dim = 4 dim) and batch B, with parameters initialised
 * as GPT-2 from settings.seed. Returns 0, or -1 after one stderr line. *tr is zeroed
 * first; trainer_free is safe either way. */
int trainer_init(Trainer *tr, const Config *c, const TrainSettings *settings, int B);

/* Release everything trainer_init made. Safe on a zeroed or freed Trainer. */
void trainer_free(Trainer *tr);

/* Forward over inputs (B, T) token ids (each < V). With targets (B, T) (id < V, or -1
 * for none) computes probs and losses and returns the mean loss over the targets
 * that are >= 0; with targets NULL only the logits, returning 0. Results live in tr->a. */
float trainer_forward(Trainer *tr, const int *inputs, const int *targets);

/* Backward of the last trainer_forward (which must have had targets): fills tr->grads
 * with the gradient of the mean loss. */
void trainer_backward(Trainer *tr);

/* Clip, then one AdamW step at the scheduled learning rate; increments tr->step.
 * Returns the gradient norm before clipping. */
float trainer_update(Trainer *tr);

/* Learning rate at step: linear warmup to lr, then cosine decay to lr * lr_min_ratio. */
float trainer_learning_rate(const TrainSettings *s, int step);

/* Write the parameters as an llm.c fp32 GPT-2 checkpoint (what run loads) to path, and,
 * if state_path is not NULL, the step, settings, AdamW moments and a checksum of that
 * checkpoint to state_path (format: weights/README.md). Crash-safe: each file is written
 * to its PATH.tmp and flushed to the disk (fsync), then the state is renamed into place,
 * then the checkpoint, and the folder is synced after each rename; so path always holds
 * a whole checkpoint, and state_path always belongs to it unless a crash fell between
 * the two renames, which trainer_finish_save repairs. Returns 0, or -1 after one stderr
 * line: temporaries are removed, except a checkpoint's whose state is already in place. */
int trainer_save(const Trainer *tr, const char *path, const char *state_path);

/* Finish a trainer_save interrupted between its two renames: if state_path's checksum
 * does not match path but matches path.tmp, rename path.tmp to path. Returns 1 if it did,
 * 0 if there was nothing to finish (unreadable or mismatched files are left for
 * trainer_load to report), -1 after one stderr line if the rename failed. */
int trainer_finish_save(const char *path, const char *state_path);

/* Resume: build a trainer from a checkpoint and its state file (batch and settings
 * come from the state). Every field is checked before anything is allocated (shape and
 * settings in range, exact file sizes, the state's own checksum, the checksum of the
 * checkpoint it belongs to, finite parameters and moments); call trainer_finish_save
 * first. Returns 0 or -1 after one stderr line naming the file at fault; trainer_free
 * is safe either way. */
int trainer_load(Trainer *tr, const char *path, const char *state_path);

/* ---- Backward kernels (each accumulates into its outputs: +=) ---- */

/* out = model_layernorm(x, w, b): dx (N, C) += ..., dw, db (C,) += ...;
 * mean, rstd (N,) are scratch (recomputed from x). */
void train_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                              const float *x, const float *w, float *mean, float *rstd,
                              int N, int C);

/* out (n,) = GELU(x) (tanh form, model_gelu's output): dx (n,) += GELU'(x) * dout. */
void train_gelu_backward(float *dx, const float *x, const float *out, const float *dout,
                         size_t n);

/* x (N, C) = wte[tokens] + wpe[t]: dwte (V, C), dwpe (T, C) += the rows of dx (B, T, C). */
void train_embedding_backward(float *dwte, float *dwpe, const float *dx, const int *tokens,
                              int B, int T, int C);

/* Softmax and cross-entropy of logits (N, V) against targets (N,) (-1 = none):
 * probs (N, V) = softmax, losses (N,) = -log probs[target] (0 if none). */
void train_crossentropy_forward(float *probs, float *losses, const float *logits,
                                const int *targets, int N, int V);

/* Gradient of scale * sum(losses) with respect to the logits, in place over probs:
 * dlogits = scale * (probs - onehot(target)); rows with no target become 0. */
void train_crossentropy_backward(float *probs, const int *targets, int N, int V, float scale);

#endif /* TRAIN_H */

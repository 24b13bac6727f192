/* gpt2_f64.h: a GPT-2's forward pass in float64, written from the model's definition: the
 * reference the tests hold the engine's forward (test_model.c), --eval's loss (test_eval.c)
 * and the trainer's gradients (test_train_grad.c) to.
 *
 * The model is llm.c's GPT-2: learned positions (or, with no position table, rotary ones:
 * each head's pairs (2i, 2i+1) of q and k turned by pos * 10000^(-2i/HS), as llama2.c turns
 * them), LayerNorm with eps 1e-5, causal softmax attention scaled by 1/sqrt(HS) (or a
 * kernel's weights the caller gives: Gpt2F64.log_weight), GELU's tanh form, the classifier
 * tied to the token table.
 *
 * Legend: L layers, C width, NH heads, HS = C / NH, Hd MLP width, V vocab, S rows of the
 * position table, T tokens.
 */
#ifndef GPT2_F64_H
#define GPT2_F64_H

#include <stddef.h>   /* size_t */

#include "model.h"    /* Model: gpt2_f64_model reads a loaded model's weights */

/* A GPT-2's 16 tensors, in llm.c's order and shapes. */
typedef struct {
    int L, C, NH, Hd, V;
    double *wte;        /* (V, C) token table, also the classifier */
    double *wpe;        /* (S, C) position table, or NULL: rotary positions */
    double *ln1w, *ln1b;   /* (L, C) */
    double *qkvw;       /* (L, 3C, C) the rows of W_Q, then W_K, then W_V */
    double *qkvb;       /* (L, 3C) */
    double *attprojw;   /* (L, C, C) W_O */
    double *attprojb;   /* (L, C) */
    double *ln2w, *ln2b;   /* (L, C) */
    double *fcw;        /* (L, Hd, C) */
    double *fcb;        /* (L, Hd) */
    double *fcprojw;    /* (L, C, Hd) */
    double *fcprojb;    /* (L, C) */
    double *lnfw, *lnfb;   /* (C,) */
    /* attention's scores: NULL for softmax(q . k / sqrt(HS)); else a kernel's, the log of
     * key k's weight for query q (HS,) in head `head` of layer `layer` (the weights are
     * normalised over the keys 0 .. t as softmax's are) */
    double (*log_weight)(const void *ctx, int layer, int head, const double *q,
                         const double *k, int HS);
    const void *log_weight_ctx;
} Gpt2F64;

/* Points g's tensors (its L, C, Hd and V set) into block, one after another in llm.c's
 * order, the position table S rows (S 0: none, rotary positions). Returns the doubles
 * they take; block may be NULL to count them. */
size_t gpt2_f64_views(Gpt2F64 *g, double *block, int S);

/* The forward over the T tokens ids (each in 0 .. V-1; T <= S with a position table):
 * logits (T, V) if not NULL, and layer `layer`'s attention weights into weights (NH, T, T)
 * if not NULL: row t of head h over keys 0 .. t, NaN past t. Returns 0, or -1 when memory
 * runs out. */
int gpt2_f64_forward(const Gpt2F64 *g, const int *ids, int T, double *logits, int layer,
                     double *weights);

/* g's tensors as float64 copies of the weights of m, a GPT-2 with fp32 matrices and its
 * classifier tied to the token table, with S rows of its position table (S <= its
 * context). Returns the block the copies are in (the caller frees it), or NULL for another
 * model or when memory runs out. */
double *gpt2_f64_model(Gpt2F64 *g, const Model *m, int S);

#endif /* GPT2_F64_H */

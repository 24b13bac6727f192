/* gpt2_f64.h: a GPT-2's forward pass in float64, written from the model's definition: the
 * reference the tests hold the engine's forward (test_model.c) and the trainer's gradients
 * (test_train_grad.c) to.
 *
 * The model is llm.c's GPT-2: learned positions (or, with no position table, rotary ones:
 * each head's pairs (2i, 2i+1) of q and k turned by pos * 10000^(-2i/HS), as llama2.c turns
 * them), LayerNorm with eps 1e-5, causal softmax attention scaled by 1/sqrt(HS), GELU's
 * tanh form, the classifier tied to the token table.
 *
 * Legend: L layers, C width, NH heads, HS = C / NH, Hd MLP width, V vocab, S rows of the
 * position table, T tokens.
 */
#ifndef GPT2_F64_H
#define GPT2_F64_H

#include <stddef.h>   /* size_t */

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

#endif /* GPT2_F64_H */

/* train_backward.h: the backward pass of the trainer's network (train_model.h).
 *
 * trainer_backward walks trainer_forward in reverse, layer by layer, on train_kernels.c's
 * backward kernels (matmul, LayerNorm, GELU) and attention.c's attention_backward; the
 * two kernels that only the trainer needs (the softmax + cross-entropy and the embedding)
 * live here. tests/test_train_grad.c checks each against finite differences.
 *
 * Legend: B sequences, T positions, N = B * T rows, C width, V vocab.
 */
#ifndef TRAIN_BACKWARD_H
#define TRAIN_BACKWARD_H

#include "train_model.h"   /* Trainer */

/* Backward of the last trainer_forward (which must have had targets): fills tr->grads
 * with the gradient of the mean loss. Overwrites probs and the backward work buffers of
 * tr->a. */
void trainer_backward(Trainer *tr);

/* Gradient of scale * sum(losses) with respect to the logits, in place over probs (N, V)
 * (train_crossentropy_forward's): dlogits = scale * (probs - onehot(target)); rows with no
 * target (-1) become 0. */
void train_crossentropy_backward(float *probs, const int *targets, int N, int V, float scale);

/* x (N, C) = wte[tokens] + wpe[t] for N = B * T rows: dwte (V, C), dwpe (T, C) += the rows
 * of dx (B, T, C); dwpe NULL for rotary positions (x = wte[tokens]). Each row of dwte and
 * dwpe sums its rows of dx in increasing order. */
void train_embedding_backward(float *dwte, float *dwpe, const float *dx, const int *tokens,
                              int B, int T, int C, int V);

#endif /* TRAIN_BACKWARD_H */

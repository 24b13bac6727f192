/* attention_kernels.h: three attention kernels that no program runs, kept beside the tests
 * that check them against the worked examples of docs/attention.md §12.
 *
 * Additive scoring (§2) and attention pooling (§9) need weights that a pretrained GPT does
 * not have, and Nystrom attention (§7) is not causal, so none of them can replace attention
 * in the model: attention.c holds what the programs run, and these live here, linked into
 * tests/test_attention_variants.c. One head each, plain arrays, no allocation.
 * Section numbers (§) are those of docs/attention.md.
 */
#ifndef ATTENTION_KERNELS_H
#define ATTENTION_KERNELS_H

#include <stddef.h>   /* size_t */

/* Additive (Bahdanau) attention, one head (§2): s_ij = wv . tanh(Wq q_i + Wk k_j), weights
 * softmax_j(s_ij), out_i = sum_j weight_ij v_j.
 *   out (T, DV); q (T, DQ); k (T, DK); v (T, DV); Wq (H, DQ); Wk (H, DK); wv (H,)
 *   causal: 1 = key j visible iff j <= i, 0 = every key; scratch (T * H + H + T,) floats. */
void attention_additive(float *out, const float *q, const float *k, const float *v, int T,
                        int DQ, int DK, int DV, int H, const float *Wq, const float *Wk,
                        const float *wv, int causal, float *scratch);

/* Attention pooling with a learned query (§9): beta = softmax_p(c . relu(W x_p + b)),
 * out (C,) = sum_p beta_p x_p.  x (P, C); W (A, C); b (A,); c (A,); scratch (P + A,). */
void attention_pool(float *out, const float *x, int P, int C, int A, const float *W,
                    const float *b, const float *c, float *scratch);

/* Floats of scratch attention_nystrom needs. */
size_t attention_nystrom_scratch_floats(int T, int D, int m);

/* Nystrom attention, one head, NOT causal (§7): every query sees every key. Scores are
 * (q . k) * scale (q and k each scaled by sqrt(scale)); the m landmarks are the means of
 * T/m contiguous rows (T % m == 0); the pseudo-inverse takes `iters` Newton-Schulz steps.
 *   out (T, D); q, k, v (T, D); scratch (attention_nystrom_scratch_floats(T, D, m),) */
void attention_nystrom(float *out, const float *q, const float *k, const float *v, int T, int D,
                       int m, int iters, float scale, float *scratch);

#endif /* ATTENTION_KERNELS_H */

/* block.h: one transformer block, the code that both the inference forward (model.c)
 * and the trainer's forward (train_model.c) run, so the network is written once.
 *
 *   x_mid = x     + W_O . attention(W_Q xn1 + bq, W_K xn1 + bk, W_V xn1 + bv),  xn1 = norm1(x)
 *   x_out = x_mid + W_down . act(W_up xn2 + b_up [, W_gate xn2]) + b_down,      xn2 = norm2(x_mid)
 *
 * GPT-2: LayerNorm, biases, GELU. Llama: RMSNorm, no biases, rotary q and k, SwiGLU.
 * The caller decides where every intermediate goes (BlockBuffers: inference reuses one
 * set for every layer and adds in place; the trainer keeps each layer's for the backward
 * pass), how queries attend (BlockHooks.attend: over the KV cache, a variant's state, or
 * each sequence of a training batch) and how a sublayer's output joins the stream
 * (BlockHooks.residual: a plain sum, or the trainer's dropout).
 *
 * Legend: N rows (tokens), C width, KVD key/value width, Hd MLP width, HS head size.
 */
#ifndef BLOCK_H
#define BLOCK_H

#include <stddef.h>        /* size_t */
#include <stdint.h>        /* int8_t */
#include "checkpoint.h"    /* Config, LayerWeights */

/* Where one block reads and writes. The "may be" aliases are what inference uses. */
typedef struct {
    float *x;          /* (N, C) in: the residual stream entering the block */
    float *xn1;        /* (N, C) norm1(x) */
    float *q;          /* (N, C) queries */
    float *k, *v;      /* (N, KVD) keys and values (exact inference: the KV cache rows) */
    float *att;        /* (N, C) attention output, before W_O */
    float *proj;       /* (N, C) a sublayer's output before the residual sum; may be xn1 */
    float *x_mid;      /* (N, C) the stream after the attention sublayer; may be x */
    float *xn2;        /* (N, C) norm2(x_mid); may be xn1 */
    float *pre;        /* (N, Hd) W_up xn2 + b_up, the MLP's pre-activation */
    float *act;        /* (N, Hd) GELU(pre), or SiLU(pre) * gate; may be pre */
    float *gate;       /* (N, Hd) W_gate xn2 (Llama only) */
    float *out;        /* (N, C) the stream after the block; may be x_mid */
    const float *rope; /* (N, HS) cos and sin of each rotary angle (Llama only) */
    int8_t *xq;        /* (N, max(C, Hd)) int8 activations (int8 weights only) */
    float *xs;         /* their group scales (int8 weights only) */
} BlockBuffers;

/* What the caller supplies. ctx is passed back to both. */
typedef struct {
    /* out (N, C) = attention of q (N, C) over the keys and values this block just wrote
     * to k, v (N, KVD) and whatever came before them. Returns 0, or -1 after a stderr
     * line (block_forward then returns -1). */
    int (*attend)(void *ctx, int layer, float *out, const float *q, const float *k,
                  const float *v);
    /* out (n,) = x + (what is kept of) y at sublayer site 0 (attention) or 1 (MLP);
     * NULL: the plain sum. out may be x. */
    void (*residual)(void *ctx, int layer, int site, float *out, const float *x,
                     const float *y, size_t n);
    void *ctx;
} BlockHooks;

/* Run block `layer` (weights w) over N rows as above. Returns 0, or -1 if attend did. */
int block_forward(const Config *c, const LayerWeights *w, int layer, int N,
                  const BlockBuffers *b, const BlockHooks *h);

/* out (N, C) = norm(x) with weight w and bias b (b NULL for Llama's RMSNorm): the norm
 * before each sublayer and the final one. Rows in parallel (same bits for any count). */
void block_norm(const Config *c, float *out, const float *x, const float *w, const float *b,
                int N);

/* out (N, OC) = x (N, IC) . W^T + b for a weight matrix held any way kernels.h's Matrix
 * allows (fp32, fp32 with its transpose, int8; xq, xs: int8 scratch as above). */
void block_matmul(float *out, const float *x, const Matrix *w, const float *b, int N,
                  int IC, int OC, int8_t *xq, float *xs);

#endif /* BLOCK_H */

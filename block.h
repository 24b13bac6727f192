/* block.h: one transformer block, the code that both the inference forward (model.c)
 * and the trainer (train_model.c, train_backward.c) run, so the network is written once,
 * forward and backward.
 *
 *   xn1 = norm1(x);  q, k, v = xn1 W_Q^T + bq, xn1 W_K^T + bk, xn1 W_V^T + bv  block_qkv
 *   att = attention(q, k, v)                                             the caller's
 *   x_mid = x + att W_O^T + bo;   xn2 = norm2(x_mid)                     block_finish
 *   out = x_mid + act(xn2 W_up^T + b_up [, xn2 W_gate^T]) W_down^T + b_down
 *   (each W stored (out, in), as the checkpoints hold it: x W^T is kernels_matmuls)
 *
 * GPT-2: LayerNorm, biases, GELU. Llama: RMSNorm, no biases, rotary q and k, SwiGLU
 * (Qwen2: biases of q, k and v, and RoPE's other pairing, Config.rope_halves). A GPT-2
 * with rotary positions (train --pos rope) rotates q and k as Llama does.
 * Attention sits between the two halves, called by each caller directly: model.c's exact
 * attention over the KV cache (attend_cache), a lab variant's step, or the trainer's per-sequence
 * attention with its dropout. The caller decides where every intermediate goes
 * (BlockBuffers: inference reuses one set for every layer; the trainer keeps each
 * layer's for the backward pass) and how a sublayer's output joins the stream
 * (BlockResidual: a plain sum, or the trainer's dropout). The backward (GPT-2 only: what
 * the trainer trains) mirrors the forward half by half: block_finish_backward, the
 * caller's attention backward, block_qkv_backward.
 *
 * Legend: N rows (tokens), C width, KVD key/value width, Hd MLP width, HS head size.
 */
#ifndef BLOCK_H
#define BLOCK_H

#include <stddef.h>        /* size_t */
#include <stdint.h>        /* int8_t */
#include "checkpoint.h"    /* Config, LayerWeights */

/* Where one block reads and writes: a buffer for each name. */
typedef struct {
    float *x;          /* (N, C) in: the residual stream entering the block */
    float *xn1;        /* (N, C) norm1(x) */
    float *q;          /* (N, C) queries */
    float *k, *v;      /* (N, KVD) keys and values (exact inference then copies them into
                        * the KV cache) */
    float *att;        /* (N, C) attention output, before W_O */
    float *proj;       /* (N, C) a sublayer's output before the residual sum */
    float *x_mid;      /* (N, C) the stream after the attention sublayer */
    float *xn2;        /* (N, C) norm2(x_mid) */
    float *pre;        /* (N, Hd) xn2 W_up^T + b_up, the MLP's pre-activation */
    float *act;        /* (N, Hd) GELU(pre), or SiLU(pre) * gate */
    float *gate;       /* (N, Hd) xn2 W_gate^T (Llama only) */
    float *out;        /* (N, C) the stream after the block */
    const float *rope; /* (N, HS) cos and sin of each row's rotary angles
                        * (block_rope_angles; rotary models only); NULL: q and k are not
                        * rotated (a Synthesizer's layer, whose q is no position's query) */
    int8_t *xq;        /* (N, max(C, Hd)) int8 activations (int8 weights only) */
    float *xs;         /* (N, groups of max(C, Hd)) their scales (int8 weights only) */
} BlockBuffers;

/* How a sublayer's output joins the stream; NULL where a plain sum will do. ctx is passed
 * back to both. */
typedef struct {
    /* out (n,) = x + (what is kept of) y at sublayer site 0 (attention) or 1 (MLP); out may
     * be x */
    void (*add)(void *ctx, int layer, int site, float *out, const float *x, const float *y,
                size_t n);
    /* its backward: dy (n,) = the gradient that reaches y from dout (n,), the same mask */
    void (*grad)(void *ctx, int layer, int site, float *dy, const float *dout, size_t n);
    void *ctx;
} BlockResidual;

/* 1 if the block rotates q and k (rotary positions): every Llama, and a GPT-2 whose
 * config says so. */
int block_rotary(const Config *c);

/* The cosines and sines of the rotary angles (pos + n) * base^(-i / HS) (base
 * c->rope_base, or MODEL_ROPE_BASE), each divided by rope_freqs[i / 2] where rope_freqs
 * (HS/2,) is not NULL, for rows n = 0 .. N-1 and each even i < HS, into cs (N, HS) as
 * (cos, sin) pairs: they depend only on the position and i, so model.c computes them once
 * per forward call and the trainer once per run, and every layer's rotation reads them. */
void block_rope_angles(const Config *c, const float *rope_freqs, float *cs, int N, int pos);

/* The attention sublayer's inputs: b->xn1 = norm1(b->x); b->q, b->k, b->v from it; a
 * rotary model (block_rotary) rotates q and k by b->rope. */
void block_qkv(const Config *c, const LayerWeights *w, int N, const BlockBuffers *b);

/* The rest of block `layer` once the caller's attention has written b->att (N, C):
 * x_mid = x + att W_O^T + bo, then the MLP sublayer into b->out. r may be NULL. */
void block_finish(const Config *c, const LayerWeights *w, int layer, int N,
                  const BlockBuffers *b, const BlockResidual *r);

/* One GPT-2 block's fp32 tensors, shaped as LayerWeights': views of the trainer's
 * parameters or of their gradients (the backward adds into the latter). */
typedef struct {
    float *norm1_w, *norm1_b;   /* (C,) */
    float *wq, *wk, *wv;        /* (C, C) each */
    float *bq, *bk, *bv;        /* (C,) each */
    float *wo, *bo;             /* (C, C), (C,) */
    float *norm2_w, *norm2_b;   /* (C,) */
    float *w_up, *b_up;         /* (Hd, C), (Hd,) */
    float *w_down, *b_down;     /* (C, Hd), (C,) */
} BlockTensors;

/* Where the backward reads and writes, beside the forward's BlockBuffers. */
typedef struct {
    float *dx;          /* (N, C) in: d loss / d out; out: d loss / d x (summed in place) */
    float *dproj;       /* (N, C) scratch: the gradient of a sublayer's output */
    float *dact;        /* (N, Hd) scratch: the MLP's hidden gradient */
    float *dxn;         /* (N, C) scratch: the gradient of a norm's output */
    float *datt;        /* (N, C) out of block_finish_backward: d loss / d att */
    float *dq, *dk, *dv;   /* (N, C) in to block_qkv_backward: the attention's backward */
    float *mean, *rstd; /* (N,) scratch of the norms' backward */
} BlockGradBuffers;

/* Backward of block_finish (GPT-2): from d->dx = d loss / d out, adds the weights'
 * gradients to g, writes d->datt and leaves d loss / d x_mid in d->dx. b holds the
 * forward's intermediates (x_mid, xn2, pre, act, att); r as in the forward. */
void block_finish_backward(const Config *c, const LayerWeights *w, const BlockTensors *g,
                           int layer, int N, const BlockBuffers *b, const BlockGradBuffers *d,
                           const BlockResidual *r);

/* Backward of block_qkv (GPT-2): from d->dq, dk, dv (the gradients of the rotated q and
 * k of a rotary model, turned in place into those of the unrotated ones), adds the
 * gradients of W_Q, W_K, W_V, their biases and norm1 to g, and norm1's path to d->dx,
 * which holds d loss / d x_mid on entry (the residual path) and d loss / d x on return. */
void block_qkv_backward(const Config *c, const LayerWeights *w, const BlockTensors *g, int N,
                        const BlockBuffers *b, const BlockGradBuffers *d);

/* out (N, C) = norm(x) with weight w and bias b (b NULL for Llama's RMSNorm): the norm
 * before each sublayer and the final one. Rows in parallel (same bits for any count). */
void block_norm(const Config *c, float *out, const float *x, const float *w, const float *b,
                int N);

/* out (N, OC) = x (N, IC) . W^T + b for a weight matrix held any way kernels.h's Matrix
 * allows (fp32, fp32 with its transpose, halves, int8; xq, xs: int8 scratch as above). */
void block_matmul(float *out, const float *x, const Matrix *w, const float *b, int N,
                  int IC, int OC, int8_t *xq, float *xs);

#endif /* BLOCK_H */

/* block.c: one transformer block (block.h), shared by inference and training.
 *
 * The row-wise and elementwise steps (norms, activation, residual sums) are cut into
 * jobs of kernels_parallel_for that depend only on the shapes, so the bits are the same
 * for any thread count; small ones (one decoded token) run on the calling thread.
 *
 * Legend: N rows, C width, KVD key/value width, Hd MLP width, HS head size.
 */
#include "block.h"

#include <math.h>         /* powf, cosf, sinf */
#include <string.h>       /* memcpy */

#include "kernels.h"      /* products, norms, activations, kernels_parallel_for */

#define ROWS_PER_JOB 32         /* norms: rows per job */
#define ELEMENTS_PER_JOB 16384  /* activations and sums: floats per job */

/* Arguments of the jobs below; each uses the fields it names. */
typedef struct {
    const Config *c;
    float *out, *out2;
    const float *x, *y, *w, *b;
    size_t n;                   /* elementwise: floats */
    int N;                      /* row-wise: rows */
    float sign;                 /* rotation: 1 forward, -1 its inverse (the backward) */
} BlockJob;

/* ------------------------------------------------------------------------- */
/* Norms and products                                                          */

static void norm_job(void *ctx, int j) {
    const BlockJob *f = ctx;
    size_t n0, n1, C = (size_t)f->c->dim;
    kernels_job_range(&n0, &n1, j, (size_t)f->N, ROWS_PER_JOB);
    if (f->c->family == MODEL_GPT2)
        kernels_layernorm(f->out + n0 * C, f->x + n0 * C, f->w, f->b, (int)(n1 - n0), (int)C);
    else
        kernels_rmsnorm(f->out + n0 * C, f->x + n0 * C, f->w, (int)(n1 - n0), (int)C,
                        f->c->norm_eps > 0.0f ? f->c->norm_eps : KERNELS_NORM_EPS);
}

void block_norm(const Config *c, float *out, const float *x, const float *w, const float *b,
                int N) {
    BlockJob f = {.c = c, .out = out, .x = x, .w = w, .b = b, .N = N};
    kernels_parallel_for(norm_job, &f, kernels_jobs((size_t)N, ROWS_PER_JOB), (double)N * c->dim);
}

/* The n products p of one x (N, IC), each weight matrix held any way Matrix allows:
 * kernels_matmuls (consecutive products in one format: one parallel loop), or the
 * trainer's transposed weights one by one (kernels_matmul_wt). */
static void matmuls(const KernelsProduct *p, int n, const float *x, int N, int IC,
                    int8_t *xq, float *xs) {
    int transposed = 0;
    for (int i = 0; i < n; i++) transposed |= p[i].w->f32_t != NULL;
    if (!transposed) {
        kernels_matmuls(p, n, x, N, IC, xq, xs);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (p[i].w->f32_t) kernels_matmul_wt(p[i].out, x, p[i].w->f32_t, p[i].b, N, IC, p[i].OC);
        else kernels_matmuls(&p[i], 1, x, N, IC, xq, xs);
    }
}

void block_matmul(float *out, const float *x, const Matrix *w, const float *b, int N,
                  int IC, int OC, int8_t *xq, float *xs) {
    KernelsProduct p = {out, w, b, OC};
    matmuls(&p, 1, x, N, IC, xq, xs);
}

/* ------------------------------------------------------------------------- */
/* Rotary embedding, activation, residual sum                                  */

int block_rotary(const Config *c) {
    return c->family == MODEL_LLAMA || c->positions == MODEL_POSITIONS_ROTARY;
}

void block_rope_angles(const Config *c, const float *rope_freqs, float *cs, int N, int pos) {
    int HS = c->head_dim;
    float base = c->rope_base > 0.0f ? c->rope_base : MODEL_ROPE_BASE;
    for (int i = 0; i < HS; i += 2) {   /* pair by pair: one powf for all N positions */
        float freq = 1.0f / powf(base, (float)i / (float)HS);
        for (int n = 0; n < N; n++) {
            float angle = (float)(pos + n) * freq;
            if (rope_freqs) angle /= rope_freqs[i / 2];   /* Llama 3.1's long-context factors */
            cs[(size_t)n * HS + i] = cosf(angle);
            cs[(size_t)n * HS + i + 1] = sinf(angle);
        }
    }
}

/* (v[a], v[b]) rotated by the angle whose cosine and sine are cos_a, sin_a. */
static void rotate_pair(float *v, int a, int b, float cos_a, float sin_a) {
    float v0 = v[a], v1 = v[b];
    v[a] = v0 * cos_a - v1 * sin_a;
    v[b] = v0 * sin_a + v1 * cos_a;
}

/* Rotary position embedding as llama2.c applies it, on a block of rows: within each head,
 * the pairs of adjacent dimensions (i, i+1) of q (N, C) (out) and k (N, KVD) (out2) are
 * rotated by sign times the angle whose cosine and sine cs (N, HS) (x) holds for the row
 * and i % HS (Su et al. 2021, arXiv:2104.09864); with c->rope_halves (GPT-NeoX's pairing,
 * Qwen2's) pair i/2 is dimensions i/2 and i/2 + HS/2 instead, at the same angle. The
 * inverse rotation (sign -1) is its backward: a rotation's transpose is the rotation by
 * the opposite angle. */
static void rope_job(void *ctx, int j) {
    const BlockJob *f = ctx;
    int C = f->c->dim, KVD = f->c->kv_dim, HS = f->c->head_dim;
    size_t n0, n1;
    kernels_job_range(&n0, &n1, j, (size_t)f->N, ROWS_PER_JOB);
    for (size_t n = n0; n < n1; n++) {
        float *q_n = f->out + n * (size_t)C, *k_n = f->out2 + n * (size_t)KVD;
        const float *cs_n = f->x + n * (size_t)HS;
        for (int h = 0; h < C; h += HS)   /* head by head: k has KVD <= C columns */
            for (int i = 0; i < HS; i += 2) {   /* pair i / 2: dimensions a and b */
                int a = f->c->rope_halves ? i / 2 : i;
                int b = f->c->rope_halves ? a + HS / 2 : i + 1;
                float cos_a = cs_n[i], sin_a = f->sign * cs_n[i + 1];
                rotate_pair(q_n, h + a, h + b, cos_a, sin_a);
                if (h < KVD) rotate_pair(k_n, h + a, h + b, cos_a, sin_a);
            }
    }
}

/* q (N, C) and k (N, KVD) rotated in place by sign times the angles of cs (N, HS). */
static void rope(const Config *c, const float *cs, float *q, float *k, int N, float sign) {
    BlockJob f = {.c = c, .out = q, .out2 = k, .x = cs, .N = N, .sign = sign};
    kernels_parallel_for(rope_job, &f, kernels_jobs((size_t)N, ROWS_PER_JOB),
                         (double)N * (c->dim + c->kv_dim));
}

/* out = GELU(x) (GPT-2) or SiLU(x) * y (Llama, y the gate), a chunk of the n floats. */
static void activation_job(void *ctx, int j) {
    const BlockJob *f = ctx;
    size_t i0, i1;
    kernels_job_range(&i0, &i1, j, f->n, ELEMENTS_PER_JOB);
    if (f->c->family == MODEL_GPT2) kernels_gelu(f->out + i0, f->x + i0, i1 - i0);
    else kernels_swiglu(f->out + i0, f->x + i0, f->y + i0, i1 - i0);
}

/* out = x + y, a chunk of the n floats. */
static void sum_job(void *ctx, int j) {
    const BlockJob *f = ctx;
    size_t i0, i1;
    kernels_job_range(&i0, &i1, j, f->n, ELEMENTS_PER_JOB);
    for (size_t i = i0; i < i1; i++) f->out[i] = f->x[i] + f->y[i];
}

/* out (n,) = x + y through the caller's residual, or the plain sum. */
static void residual(const BlockResidual *r, int layer, int site, float *out, const float *x,
                     const float *y, size_t n) {
    if (r && r->add) {
        r->add(r->ctx, layer, site, out, x, y, n);
        return;
    }
    BlockJob f = {.out = out, .x = x, .y = y, .n = n};
    kernels_parallel_for(sum_job, &f, kernels_jobs(n, ELEMENTS_PER_JOB), (double)n);
}

/* ------------------------------------------------------------------------- */
/* The block, forward                                                          */

void block_qkv(const Config *c, const LayerWeights *w, int N, const BlockBuffers *b) {
    int C = c->dim, KVD = c->kv_dim;
    block_norm(c, b->xn1, b->x, w->norm1_w, w->norm1_b, N);
    KernelsProduct qkv[3] = {{b->q, &w->wq, w->bq, C}, {b->k, &w->wk, w->bk, KVD},
                             {b->v, &w->wv, w->bv, KVD}};
    matmuls(qkv, 3, b->xn1, N, C, b->xq, b->xs);   /* q, k, v = xn1 W^T + bias */
    if (block_rotary(c) && b->rope) rope(c, b->rope, b->q, b->k, N, 1.0f);
}

void block_finish(const Config *c, const LayerWeights *w, int layer, int N,
                  const BlockBuffers *b, const BlockResidual *r) {
    int C = c->dim, Hd = c->hidden_dim;
    size_t NC = (size_t)N * C, NHd = (size_t)N * Hd;

    /* the attention sublayer's output: x_mid = x + att W_O^T + bo */
    block_matmul(b->proj, b->att, &w->wo, w->bo, N, C, C, b->xq, b->xs);
    residual(r, layer, 0, b->x_mid, b->x, b->proj, NC);

    /* MLP sublayer: out = x_mid + act(xn2 W_up^T + b_up [, xn2 W_gate^T]) W_down^T + b_down,
     * xn2 = norm2(x_mid), act GELU or SwiGLU */
    block_norm(c, b->xn2, b->x_mid, w->norm2_w, w->norm2_b, N);
    KernelsProduct up[2] = {{b->pre, &w->w_up, w->b_up, Hd}, {b->gate, &w->w_gate, NULL, Hd}};
    matmuls(up, c->family == MODEL_LLAMA ? 2 : 1, b->xn2, N, C, b->xq, b->xs);   /* + gate */
    BlockJob act = {.c = c, .out = b->act, .x = b->pre, .y = b->gate, .n = NHd};
    kernels_parallel_for(activation_job, &act, kernels_jobs(NHd, ELEMENTS_PER_JOB), (double)NHd);
    block_matmul(b->proj, b->act, &w->w_down, w->b_down, N, Hd, C, b->xq, b->xs);
    residual(r, layer, 1, b->out, b->x_mid, b->proj, NC);
}

/* ------------------------------------------------------------------------- */
/* The block, backward (GPT-2), block_finish and block_qkv in reverse           */

/* dy (n,) = the gradient reaching a sublayer's output y from dout (n,): through the
 * caller's residual, or unchanged (a plain sum passes it on). */
static void residual_grad(const BlockResidual *r, int layer, int site, float *dy,
                          const float *dout, size_t n) {
    if (r && r->grad) r->grad(r->ctx, layer, site, dy, dout, n);
    else memcpy(dy, dout, n * sizeof(float));
}

/* A chunk of d (n,) = GELU'(x) * d, in place (kernels_gelu_backward). */
static void gelu_backward_job(void *ctx, int j) {
    const BlockJob *f = ctx;
    size_t i0, i1;
    kernels_job_range(&i0, &i1, j, f->n, ELEMENTS_PER_JOB);
    kernels_gelu_backward(f->out + i0, f->x + i0, f->out + i0, i1 - i0);
}

void block_finish_backward(const Config *c, const LayerWeights *w, const BlockTensors *g,
                           int layer, int N, const BlockBuffers *b, const BlockGradBuffers *d,
                           const BlockResidual *r) {
    int C = c->dim, Hd = c->hidden_dim;
    size_t NC = (size_t)N * C, NHd = (size_t)N * Hd;

    /* MLP sublayer: dx is d loss / d out; the MLP's output gets its share */
    residual_grad(r, layer, 1, d->dproj, d->dx, NC);
    kernels_matmul_backward(d->dact, g->w_down, g->b_down, d->dproj, b->act, w->w_down.f32,
                            N, Hd, C, KERNELS_OVERWRITE);
    BlockJob gelu = {.out = d->dact, .x = b->pre, .n = NHd};   /* d act -> d pre, in place */
    kernels_parallel_for(gelu_backward_job, &gelu, kernels_jobs(NHd, ELEMENTS_PER_JOB),
                         (double)NHd);
    kernels_matmul_backward(d->dxn, g->w_up, g->b_up, d->dact, b->xn2, w->w_up.f32, N, C, Hd,
                            KERNELS_OVERWRITE);
    kernels_layernorm_backward(d->dx, g->norm2_w, g->norm2_b, d->dxn, b->x_mid, w->norm2_w,
                               d->mean, d->rstd, N, C);

    /* attention sublayer's output: dx is now d loss / d x_mid */
    residual_grad(r, layer, 0, d->dproj, d->dx, NC);
    kernels_matmul_backward(d->datt, g->wo, g->bo, d->dproj, b->att, w->wo.f32, N, C, C,
                            KERNELS_OVERWRITE);
}

void block_qkv_backward(const Config *c, const LayerWeights *w, const BlockTensors *g, int N,
                        const BlockBuffers *b, const BlockGradBuffers *d) {
    int C = c->dim;
    /* rotary positions: dq and dk reach the unrotated q and k through the inverse rotation */
    if (block_rotary(c) && b->rope) rope(c, b->rope, d->dq, d->dk, N, -1.0f);
    /* dxn1 = dq W_Q + dk W_K + dv W_V */
    kernels_matmul_backward(d->dxn, g->wq, g->bq, d->dq, b->xn1, w->wq.f32, N, C, C,
                            KERNELS_OVERWRITE);
    kernels_matmul_backward(d->dxn, g->wk, g->bk, d->dk, b->xn1, w->wk.f32, N, C, C,
                            KERNELS_ACCUMULATE);
    kernels_matmul_backward(d->dxn, g->wv, g->bv, d->dv, b->xn1, w->wv.f32, N, C, C,
                            KERNELS_ACCUMULATE);
    kernels_layernorm_backward(d->dx, g->norm1_w, g->norm1_b, d->dxn, b->x, w->norm1_w,
                               d->mean, d->rstd, N, C);
}

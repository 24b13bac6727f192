/* gpt2_f64.c: a GPT-2's forward pass in float64 (gpt2_f64.h), token by token, as plainly
 * as it can be written: no code of the engine's is called (gpt2_f64_model only reads a
 * loaded Model's weights).
 */
#include "tests/gpt2_f64.h"

#include <math.h>     /* sqrt, exp, tanh, cos, sin, pow, acos, NAN, HUGE_VAL */
#include <stdlib.h>   /* malloc, free */

size_t gpt2_f64_views(Gpt2F64 *g, double *block, int S) {
    size_t L = (size_t)g->L, C = (size_t)g->C, Hd = (size_t)g->Hd, at = 0;
    double **tensor[16] = {&g->wte, &g->wpe, &g->ln1w, &g->ln1b, &g->qkvw, &g->qkvb,
                           &g->attprojw, &g->attprojb, &g->ln2w, &g->ln2b, &g->fcw, &g->fcb,
                           &g->fcprojw, &g->fcprojb, &g->lnfw, &g->lnfb};
    size_t size[16] = {(size_t)g->V * C, (size_t)S * C, L * C, L * C, L * 3 * C * C, L * 3 * C,
                       L * C * C, L * C, L * C, L * C, L * Hd * C, L * Hd, L * C * Hd, L * C,
                       C, C};
    for (int i = 0; i < 16; i++) {
        *tensor[i] = block && size[i] ? block + at : NULL;
        at += size[i];
    }
    return at;
}

/* LayerNorm of x (C,) into out (C,) with weight w and bias b (C,), eps 1e-5. */
static void layernorm(double *out, const double *x, const double *w, const double *b, int C) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < C; i++) mean += x[i] / C;
    for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean) / C;
    for (int i = 0; i < C; i++) out[i] = (x[i] - mean) / sqrt(var + 1e-5) * w[i] + b[i];
}

/* out (rows,) = W x + b, W (rows, cols). */
static void matvec(double *out, const double *W, const double *b, const double *x, int rows,
                   int cols) {
    for (int o = 0; o < rows; o++) {
        double sum = b[o];
        for (int i = 0; i < cols; i++) sum += W[(size_t)o * cols + i] * x[i];
        out[o] = sum;
    }
}

/* Each head's pairs (2i, 2i+1) of v (C,) turned by pos * 10000^(-2i/HS). */
static void rotate(double *v, int C, int HS, int pos) {
    for (int h = 0; h < C; h += HS)
        for (int i = 0; i < HS; i += 2) {
            double angle = pos * pow(10000.0, -(double)i / HS);
            double v0 = v[h + i], v1 = v[h + i + 1];
            v[h + i] = v0 * cos(angle) - v1 * sin(angle);
            v[h + i + 1] = v0 * sin(angle) + v1 * cos(angle);
        }
}

int gpt2_f64_forward(const Gpt2F64 *g, const int *ids, int T, double *logits, int layer,
                     double *weights) {
    int C = g->C, NH = g->NH, HS = C / NH, Hd = g->Hd, V = g->V;
    double *x = malloc((size_t)T * C * sizeof(double));      /* (T, C) the residual stream */
    double *q = malloc((size_t)T * C * sizeof(double));      /* (T, C) */
    double *k = malloc((size_t)T * C * sizeof(double));      /* (T, C) */
    double *v = malloc((size_t)T * C * sizeof(double));      /* (T, C) */
    double *a = malloc((size_t)T * C * sizeof(double));      /* (T, C) attention's output */
    double *xn = malloc((size_t)C * sizeof(double));         /* (C,) a normed row */
    double *qkv = malloc((size_t)3 * C * sizeof(double));    /* (3C,) a row's q, k, v */
    double *h = malloc((size_t)Hd * sizeof(double));         /* (Hd,) the MLP's hidden row */
    double *o = malloc((size_t)C * sizeof(double));          /* (C,) a sublayer's output */
    double *s = malloc((size_t)T * sizeof(double));          /* (T,) one row's scores */
    int ok = x && q && k && v && a && xn && qkv && h && o && s;
    for (int t = 0; ok && t < T; t++)   /* the embeddings */
        for (int i = 0; i < C; i++)
            x[(size_t)t * C + i] = g->wte[(size_t)ids[t] * C + i] +
                                   (g->wpe ? g->wpe[(size_t)t * C + i] : 0.0);
    for (int l = 0; ok && l < g->L; l++) {
        size_t lC = (size_t)l * C;
        for (int t = 0; t < T; t++) {   /* q, k, v of every position */
            layernorm(xn, x + (size_t)t * C, g->ln1w + lC, g->ln1b + lC, C);
            matvec(qkv, g->qkvw + lC * 3 * C, g->qkvb + lC * 3, xn, 3 * C, C);
            if (!g->wpe) {
                rotate(qkv, C, HS, t);
                rotate(qkv + C, C, HS, t);
            }
            for (int i = 0; i < C; i++) {
                q[(size_t)t * C + i] = qkv[i];
                k[(size_t)t * C + i] = qkv[C + i];
                v[(size_t)t * C + i] = qkv[2 * C + i];
            }
        }
        for (int t = 0; t < T; t++)   /* each head's causal softmax over keys 0 .. t */
            for (int hd = 0; hd < NH; hd++) {
                double max = -HUGE_VAL, sum = 0.0;
                const double *q_t = q + (size_t)t * C + (size_t)hd * HS;
                for (int j = 0; j <= t; j++) {
                    const double *k_j = k + (size_t)j * C + (size_t)hd * HS;
                    double dot = 0.0;
                    for (int i = 0; i < HS; i++) dot += q_t[i] * k_j[i];
                    s[j] = g->log_weight ? g->log_weight(g->log_weight_ctx, l, hd, q_t, k_j, HS)
                                         : dot / sqrt((double)HS);
                    if (s[j] > max) max = s[j];
                }
                for (int j = 0; j <= t; j++) sum += exp(s[j] - max);
                for (int i = hd * HS; i < (hd + 1) * HS; i++) {
                    a[(size_t)t * C + i] = 0.0;
                    for (int j = 0; j <= t; j++)
                        a[(size_t)t * C + i] += exp(s[j] - max) / sum * v[(size_t)j * C + i];
                }
                double *row = weights && l == layer ? weights + ((size_t)hd * T + t) * T : NULL;
                for (int j = 0; row && j < T; j++)
                    row[j] = j <= t ? exp(s[j] - max) / sum : (double)NAN;
            }
        for (int t = 0; t < T; t++) {   /* W_O into the residual, then the MLP */
            double *xt = x + (size_t)t * C;
            matvec(o, g->attprojw + lC * C, g->attprojb + lC, a + (size_t)t * C, C, C);
            for (int i = 0; i < C; i++) xt[i] += o[i];
            layernorm(xn, xt, g->ln2w + lC, g->ln2b + lC, C);
            matvec(h, g->fcw + (size_t)l * Hd * C, g->fcb + (size_t)l * Hd, xn, Hd, C);
            for (int i = 0; i < Hd; i++)
                h[i] = 0.5 * h[i] * (1.0 + tanh(sqrt(2.0 / acos(-1.0)) *
                                                (h[i] + 0.044715 * h[i] * h[i] * h[i])));
            matvec(o, g->fcprojw + lC * Hd, g->fcprojb + lC, h, C, Hd);
            for (int i = 0; i < C; i++) xt[i] += o[i];
        }
    }
    for (int t = 0; ok && logits && t < T; t++) {   /* final norm, then the tied classifier */
        layernorm(xn, x + (size_t)t * C, g->lnfw, g->lnfb, C);
        for (int w = 0; w < V; w++) {
            double sum = 0.0;
            for (int i = 0; i < C; i++) sum += g->wte[(size_t)w * C + i] * xn[i];
            logits[(size_t)t * V + w] = sum;
        }
    }
    free(x); free(q); free(k); free(v); free(a); free(xn); free(qkv); free(h); free(o); free(s);
    return ok ? 0 : -1;
}

/* n floats of x as doubles into out (n,), or zeros where x is NULL (a missing bias). */
static void widen(double *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = x ? (double)x[i] : 0.0;
}

double *gpt2_f64_model(Gpt2F64 *g, const Model *m, int S) {
    const Config *c = &m->config;
    const Weights *W = &m->checkpoint.weights;
    size_t C = (size_t)c->dim, Hd = (size_t)c->hidden_dim;
    *g = (Gpt2F64){.L = c->n_layers, .C = c->dim, .NH = c->n_heads, .Hd = c->hidden_dim,
                   .V = c->vocab_size};
    int ok = c->family == MODEL_GPT2 && S <= m->checkpoint.config.seq_len &&
             W->pos_embedding && W->token_embedding.f32 &&
             W->classifier.f32 == W->token_embedding.f32 && c->n_kv_heads == c->n_heads;
    for (int l = 0; ok && l < c->n_layers; l++) {
        const LayerWeights *lw = &W->layers[l];
        ok = lw->wq.f32 && lw->wk.f32 && lw->wv.f32 && lw->wo.f32 && lw->w_up.f32 &&
             lw->w_down.f32;
    }
    double *block = ok ? malloc(gpt2_f64_views(g, NULL, S) * sizeof(double)) : NULL;
    if (!block) return NULL;
    gpt2_f64_views(g, block, S);
    widen(g->wte, W->token_embedding.f32, (size_t)g->V * C);
    widen(g->wpe, W->pos_embedding, (size_t)S * C);
    for (size_t l = 0; l < (size_t)g->L; l++) {
        const LayerWeights *lw = &W->layers[l];
        widen(g->ln1w + l * C, lw->norm1_w, C);
        widen(g->ln1b + l * C, lw->norm1_b, C);
        widen(g->qkvw + l * 3 * C * C, lw->wq.f32, C * C);
        widen(g->qkvw + (l * 3 + 1) * C * C, lw->wk.f32, C * C);
        widen(g->qkvw + (l * 3 + 2) * C * C, lw->wv.f32, C * C);
        widen(g->qkvb + l * 3 * C, lw->bq, C);
        widen(g->qkvb + (l * 3 + 1) * C, lw->bk, C);
        widen(g->qkvb + (l * 3 + 2) * C, lw->bv, C);
        widen(g->attprojw + l * C * C, lw->wo.f32, C * C);
        widen(g->attprojb + l * C, lw->bo, C);
        widen(g->ln2w + l * C, lw->norm2_w, C);
        widen(g->ln2b + l * C, lw->norm2_b, C);
        widen(g->fcw + l * Hd * C, lw->w_up.f32, Hd * C);
        widen(g->fcb + l * Hd, lw->b_up, Hd);
        widen(g->fcprojw + l * C * Hd, lw->w_down.f32, C * Hd);
        widen(g->fcprojb + l * C, lw->b_down, C);
    }
    widen(g->lnfw, W->norm_final_w, C);
    widen(g->lnfb, W->norm_final_b, C);
    return block;
}

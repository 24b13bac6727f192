/* test_train.c: the trainer's backward passes, fast matmul, training runs, checkpoints.
 *
 * 1. Every layer's backward (matmul, LayerNorm, GELU, attention, softmax + cross-entropy,
 *    embedding) against central finite differences of a float64 reference forward written
 *    here; the whole model's (the residual sums, the tied embedding, dropout) against
 *    central differences of the trainer's own float forward, whose logits 4. checks
 *    against run's.
 * 2. (The fast matmul kernels are tested in test_kernels.c.)
 * 3. A short training run: the loss falls, a seed reproduces it bit for bit, and 1 and
 *    2 threads agree bit for bit; resuming from a checkpoint continues identically.
 * 4. Save -> model_load -> model_forward gives the trainer's own logits.
 * Then the BPE trainer (hand-made texts, a 200,000-byte run of one character, the old
 * merges), and the train program: usage errors and exit codes, defaults that fit the
 * run, empty / short / binary data, no overwriting, corrupt or mismatched state files,
 * interrupted saves, and kill -9 at random moments of a run that saves every step.
 * 5. The shipped weights/ model's greedy continuation (a regression pin).
 */
#include "train.h"

#include <fcntl.h>     /* open, fcntl, struct flock (POSIX: holding a lock) */
#include <math.h>      /* fabs, sqrt, exp, log, tanh, NAN */
#include <stdarg.h>    /* va_list (format_into) */
#include <stdint.h>    /* uint64_t */
#include <stdio.h>     /* printf, snprintf, remove */
#include <stdlib.h>    /* malloc, calloc, free, mkdtemp, setenv */
#include <string.h>    /* memcpy, memcmp, strstr */
#include <signal.h>    /* kill, SIGKILL (POSIX: the kill -9 test) */
#include <sys/stat.h>  /* mkdir, mkfifo */
#include <sys/wait.h>  /* waitpid */
#include <time.h>      /* clock, clock_gettime, nanosleep */
#include <unistd.h>    /* access, fork, execl, getcwd, rmdir, close, getpid */

#include "attention.h"    /* attention_backward */
#include "attention_spec.h"   /* attention_spec_parse_layers: the variants' runs */
#include "hash.h"         /* hash_fnv1a64: the merges' checksum */
#include "kernels.h"      /* kernels_gelu, KERNELS_NORM_EPS, kernels_set_threads */
#include "model.h"        /* model_load, model_forward */
#include "tokenizer.h"    /* tokenizer_load, _encode, _decode, _next_piece, _merge */
#include "tests/check.h"  /* check_* */

/* Gradient checks: the float backward against float64 central differences (step
 * GRAD_H). Float rounding in sums of a few dozen O(1) terms stays near 1e-6, so an
 * element passes within GRAD_ATOL + GRAD_RTOL * |numeric|. */
#define GRAD_H 1e-5
#define GRAD_ATOL 1e-4
#define GRAD_RTOL 1e-3
#define ATTENTION_SCRATCH 2048   /* floats of scratch for the attention backward tests (T 5) */
/* The fast matmul against float64: float sums of up to ~100 products of values in
 * [-1, 1] carry about 1e-6 error; STYLE.md's kernel tolerance. */

/* ------------------------------------------------------------------------- */
/* Helpers                                                                     */

static uint64_t rng_state = 12345;

/* Uniform in [-1, 1) from a 64-bit LCG (Knuth MMIX constants). */
static float rand_sym(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(rng_state >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
}

static void fill_random(float *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = rand_sym(); }

static double *to_f64(const float *x, size_t n) {
    double *y = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) y[i] = (double)x[i];
    return y;
}

/* A float64 loss of the double inputs in ctx; the gradient checker perturbs one input. */
typedef double (*LossFn)(void *ctx);

/* numeric (n,) = d loss / d x by central differences, perturbing x in place. */
static void numeric_grad(double *numeric, double *x, size_t n, LossFn loss, void *ctx) {
    for (size_t i = 0; i < n; i++) {
        double saved = x[i];
        x[i] = saved + GRAD_H;
        double up = loss(ctx);
        x[i] = saved - GRAD_H;
        double down = loss(ctx);
        x[i] = saved;
        numeric[i] = (up - down) / (2.0 * GRAD_H);
    }
}

/* Check a float gradient against the numeric one of input x (n,). */
static void check_grad(const char *what, const float *analytic, double *x, size_t n,
                       LossFn loss, void *ctx) {
    double *numeric = malloc(n * sizeof(double));
    numeric_grad(numeric, x, n, loss, ctx);
    check_close_f64(what, analytic, numeric, n, GRAD_ATOL, GRAD_RTOL);
    free(numeric);
}

/* ------------------------------------------------------------------------- */
/* 1. Gradient checks of each layer                                            */

/* matmul: loss = sum g . (x w^T + b) */
typedef struct { double *x, *w, *b, *g; int N, IC, OC; } MatmulCase;

static double matmul_loss(void *ctx) {
    MatmulCase *c = ctx;
    double loss = 0.0;
    for (int n = 0; n < c->N; n++)
        for (int o = 0; o < c->OC; o++) {
            double sum = c->b[o];
            for (int i = 0; i < c->IC; i++) sum += c->x[n * c->IC + i] * c->w[o * c->IC + i];
            loss += c->g[n * c->OC + o] * sum;
        }
    return loss;
}

static void test_matmul_grad(int N, int IC, int OC) {
    float *x = malloc(sizeof(float) * N * IC), *w = malloc(sizeof(float) * OC * IC);
    float *b = malloc(sizeof(float) * OC), *g = malloc(sizeof(float) * N * OC);
    float *dx = calloc((size_t)N * IC, sizeof(float)), *dw = calloc((size_t)OC * IC, sizeof(float));
    float *db = calloc((size_t)OC, sizeof(float));
    fill_random(x, (size_t)N * IC); fill_random(w, (size_t)OC * IC);
    fill_random(b, (size_t)OC); fill_random(g, (size_t)N * OC);
    kernels_matmul_backward(dx, dw, db, g, x, w, N, IC, OC, KERNELS_ACCUMULATE);
    MatmulCase c = {to_f64(x, (size_t)N * IC), to_f64(w, (size_t)OC * IC), to_f64(b, (size_t)OC),
                    to_f64(g, (size_t)N * OC), N, IC, OC};
    char what[64];
    snprintf(what, sizeof what, "matmul backward dx (N %d, IC %d, OC %d)", N, IC, OC);
    check_grad(what, dx, c.x, (size_t)N * IC, matmul_loss, &c);
    snprintf(what, sizeof what, "matmul backward dw (N %d, IC %d, OC %d)", N, IC, OC);
    check_grad(what, dw, c.w, (size_t)OC * IC, matmul_loss, &c);
    snprintf(what, sizeof what, "matmul backward db (N %d, IC %d, OC %d)", N, IC, OC);
    check_grad(what, db, c.b, (size_t)OC, matmul_loss, &c);
    free(c.x); free(c.w); free(c.b); free(c.g);
    free(x); free(w); free(b); free(g); free(dx); free(dw); free(db);
}

/* LayerNorm: loss = sum g . LN(x; w, b), eps as KERNELS_NORM_EPS */
typedef struct { double *x, *w, *b, *g; int N, C; } NormCase;

static double layernorm_loss(void *ctx) {
    NormCase *c = ctx;
    double loss = 0.0;
    for (int n = 0; n < c->N; n++) {
        const double *x = c->x + n * c->C;
        double mean = 0.0, var = 0.0;
        for (int i = 0; i < c->C; i++) mean += x[i];
        mean /= c->C;
        for (int i = 0; i < c->C; i++) var += (x[i] - mean) * (x[i] - mean);
        var /= c->C;
        double rstd = 1.0 / sqrt(var + (double)KERNELS_NORM_EPS);
        for (int i = 0; i < c->C; i++)
            loss += c->g[n * c->C + i] * ((x[i] - mean) * rstd * c->w[i] + c->b[i]);
    }
    return loss;
}

static void test_layernorm_grad(void) {
    enum { N = 3, C = 7 };
    float x[N * C], w[C], b[C], g[N * C], dx[N * C] = {0}, dw[C] = {0}, db[C] = {0};
    float mean[N], rstd[N];
    fill_random(x, N * C); fill_random(w, C); fill_random(b, C); fill_random(g, N * C);
    kernels_layernorm_backward(dx, dw, db, g, x, w, mean, rstd, N, C);
    NormCase c = {to_f64(x, N * C), to_f64(w, C), to_f64(b, C), to_f64(g, N * C), N, C};
    check_grad("layernorm backward dx (N 3, C 7)", dx, c.x, N * C, layernorm_loss, &c);
    check_grad("layernorm backward dw", dw, c.w, C, layernorm_loss, &c);
    check_grad("layernorm backward db", db, c.b, C, layernorm_loss, &c);
    free(c.x); free(c.w); free(c.b); free(c.g);
}

/* GELU: loss = sum g . GELU(x), the tanh form */
typedef struct { double *x, *g; int n; } GeluCase;

static double gelu_loss(void *ctx) {
    GeluCase *c = ctx;
    double loss = 0.0;
    for (int i = 0; i < c->n; i++) {
        double v = c->x[i];
        loss += c->g[i] * 0.5 * v * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) *
                                                (v + 0.044715 * v * v * v)));
    }
    return loss;
}

static void test_gelu_grad(void) {
    enum { N = 15 };
    float x[N], g[N], dx[N] = {0};
    fill_random(x, N); fill_random(g, N);
    for (int i = 0; i < N; i++) x[i] *= 4.0f;   /* cover both tails and the middle */
    x[0] = 0.0f; x[1] = 0.005f; x[2] = -0.02f;  /* at and near 0 */
    kernels_gelu_backward(dx, x, g, N);
    GeluCase c = {to_f64(x, N), to_f64(g, N), N};
    check_grad("gelu backward dx (15 values in [-4, 4), 0 and near it)", dx, c.x, N, gelu_loss, &c);
    free(c.x); free(c.g);
}

/* causal attention: loss = sum g . attention(q, k, v), heads of HS, scale 1/sqrt(HS); with
 * a dropout mask (NH, T, T) of factors 0 or 1 / (1 - p) (NULL: none) multiplying each weight */
typedef struct { double *q, *k, *v, *g; const double *mask; int T, NH, HS; } AttentionCase;

static double attention_loss(void *ctx) {
    AttentionCase *c = ctx;
    int C = c->NH * c->HS;
    double loss = 0.0, scale = 1.0 / sqrt((double)c->HS);
    for (int h = 0; h < c->NH; h++) {
        for (int t = 0; t < c->T; t++) {
            double s[64], max = -1e300, z = 0.0;
            for (int t2 = 0; t2 <= t; t2++) {
                double dot = 0.0;
                for (int i = 0; i < c->HS; i++)
                    dot += c->q[t * C + h * c->HS + i] * c->k[t2 * C + h * c->HS + i];
                s[t2] = dot * scale;
                if (s[t2] > max) max = s[t2];
            }
            for (int t2 = 0; t2 <= t; t2++) z += (s[t2] = exp(s[t2] - max));
            for (int i = 0; i < c->HS; i++) {
                double out = 0.0;
                for (int t2 = 0; t2 <= t; t2++)
                    out += s[t2] / z * (c->mask ? c->mask[(h * c->T + t) * c->T + t2] : 1.0) *
                           c->v[t2 * C + h * c->HS + i];
                loss += c->g[t * C + h * c->HS + i] * out;
            }
        }
    }
    return loss;
}

static void test_attention_grad(void) {
    enum { T = 5, NH = 2, HS = 3, C = NH * HS };
    float q[T * C], k[T * C], v[T * C], g[T * C];
    float dq[T * C] = {0}, dk[T * C] = {0}, dv[T * C] = {0}, scratch[ATTENTION_SCRATCH];
    fill_random(q, T * C); fill_random(k, T * C); fill_random(v, T * C); fill_random(g, T * C);
    for (int i = 0; i < T * C; i++) q[i] *= 2.0f;   /* peakier softmax rows */
    AttentionShape shape = {NH, NH, HS, 1.0f / sqrtf((float)HS)};
    check_true(attention_backward_scratch_floats(&shape, T) <= ATTENTION_SCRATCH,
               "attention backward scratch (%zu floats) fits the test's %d",
               attention_backward_scratch_floats(&shape, T), ATTENTION_SCRATCH);
    attention_backward(&shape, dq, dk, dv, g, q, k, v, T, NULL, scratch);
    AttentionCase c = {to_f64(q, T * C), to_f64(k, T * C), to_f64(v, T * C), to_f64(g, T * C),
                       NULL, T, NH, HS};
    check_grad("attention backward dq (T 5, NH 2, HS 3)", dq, c.q, T * C, attention_loss, &c);
    check_grad("attention backward dk", dk, c.k, T * C, attention_loss, &c);
    check_grad("attention backward dv", dv, c.v, T * C, attention_loss, &c);
    free(c.q); free(c.k); free(c.v); free(c.g);
}

/* The dropout mask drop gives (NH heads, T queries), read through the forward alone: with
 * q = k = 0 every visible weight is 1 / (t + 1), and with HS = T and v_j the j-th unit
 * vector, output t of head h is that row of weights times the mask. mask (NH, T, T) gets
 * each factor, snapped to exactly 0 or 1 / (1 - p); returns how many weights were dropped,
 * or -1 if a factor is neither (within 1e-6). */
static int read_dropout_mask(double *mask, int NH, int T, const AttentionDropout *drop) {
    int C = NH * T, dropped = 0;
    float *q = calloc((size_t)T * C, sizeof(float)), *v = calloc((size_t)T * C, sizeof(float));
    float *out = malloc((size_t)T * C * sizeof(float));
    float *scratch = malloc((size_t)C * sizeof(float));
    for (int j = 0; j < T; j++)
        for (int h = 0; h < NH; h++) v[j * C + h * T + j] = 1.0f;
    AttentionShape shape = {NH, NH, T, 1.0f};
    attention_forward_dropout(&shape, drop, out, q, q, v, T, scratch);
    double keep = 1.0 / (1.0 - (double)drop->p);
    for (int h = 0; h < NH && dropped >= 0; h++)
        for (int t = 0; t < T && dropped >= 0; t++)
            for (int j = 0; j < T; j++) {
                double m = (double)out[t * C + h * T + j] * (t + 1);
                double *slot = &mask[(h * T + t) * T + j];
                if (j > t && m == 0.0) *slot = 0.0;   /* a future key: no weight */
                else if (j <= t && fabs(m) < 1e-6) { *slot = 0.0; dropped++; }
                else if (j <= t && fabs(m - keep) < 1e-6 * keep) *slot = keep;
                else { dropped = -1; break; }
            }
    free(q); free(v); free(out); free(scratch);
    return dropped;
}

/* Attention-weight dropout (the trainer's --attn-dropout): the mask's factors, the share it
 * drops, that it follows the key, p = 0 as no dropout, and the backward with a mask against
 * finite differences of a float64 forward that applies the mask read from the forward. */
static void test_attention_dropout(void) {
    enum { BIG_T = 64, BIG_NH = 2, T = 5, NH = 2, HS = 3, C = NH * HS };
    static double mask[BIG_NH * BIG_T * BIG_T], other[BIG_NH * BIG_T * BIG_T];
    AttentionDropout drop = {0.2f, 0x5eedULL}, next_key = {0.2f, 0x5eeeULL};
    int dropped = read_dropout_mask(mask, BIG_NH, BIG_T, &drop);
    int visible = BIG_NH * BIG_T * (BIG_T + 1) / 2;   /* 4,160 weights */
    /* a binomial share of 4,160 draws at p 0.2 has sd 0.0062: 0.17..0.23 is +-4.8 sd */
    check_true(dropped > 0.17 * visible && dropped < 0.23 * visible,
               "attention dropout: every weight is kept x 1/(1 - p) or dropped, %d of %d "
               "dropped at p 0.2", dropped, visible);
    int changed = read_dropout_mask(other, BIG_NH, BIG_T, &next_key) >= 0 &&
                  memcmp(mask, other, sizeof mask) != 0;
    int same = read_dropout_mask(other, BIG_NH, BIG_T, &drop) >= 0 &&
               memcmp(mask, other, sizeof mask) == 0;
    check_true(changed && same, "attention dropout: the mask follows the key, and the same key "
               "gives the same mask");

    float q[T * C], k[T * C], v[T * C], g[T * C], out[T * C], plain[T * C];
    float scratch[ATTENTION_SCRATCH];   /* checked against the backward's need above */
    float dq[T * C] = {0}, dk[T * C] = {0}, dv[T * C] = {0};
    fill_random(q, T * C); fill_random(k, T * C); fill_random(v, T * C); fill_random(g, T * C);
    AttentionShape shape = {NH, NH, HS, 1.0f / sqrtf((float)HS)};
    AttentionDropout none = {0.0f, 1};
    attention_forward(&shape, plain, q, k, v, 0, T, scratch);
    attention_forward_dropout(&shape, &none, out, q, k, v, T, scratch);
    check_true(memcmp(out, plain, sizeof out) == 0,
               "attention dropout: p 0 gives attention_forward's bits");

    AttentionDropout half = {0.4f, 77};
    double small[NH * T * T];
    int small_dropped = read_dropout_mask(small, NH, T, &half);
    check_true(small_dropped > 0 && small_dropped < NH * T * (T + 1) / 2,
               "attention dropout: the small case drops some weights and keeps others (%d of %d)",
               small_dropped, NH * T * (T + 1) / 2);
    attention_forward_dropout(&shape, &half, out, q, k, v, T, scratch);
    AttentionCase c = {to_f64(q, T * C), to_f64(k, T * C), to_f64(v, T * C), to_f64(g, T * C),
                       small, T, NH, HS};
    double loss = 0.0;
    for (int i = 0; i < T * C; i++) loss += (double)g[i] * (double)out[i];
    check_true(fabs(loss - attention_loss(&c)) < 1e-5, "attention dropout forward: sum g . out "
               "%.7f equals the float64 forward with the mask, %.7f", loss, attention_loss(&c));
    attention_backward(&shape, dq, dk, dv, g, q, k, v, T, &half, scratch);
    check_grad("attention backward with dropout p 0.4: dq", dq, c.q, T * C, attention_loss, &c);
    check_grad("attention backward with dropout: dk", dk, c.k, T * C, attention_loss, &c);
    check_grad("attention backward with dropout: dv", dv, c.v, T * C, attention_loss, &c);
    free(c.q); free(c.k); free(c.v); free(c.g);
}

/* softmax + cross-entropy: loss = mean over rows with a target of -log softmax[target] */
typedef struct { double *logits; const int *targets; int N, V; } XentCase;

static double xent_loss(void *ctx) {
    XentCase *c = ctx;
    double loss = 0.0;
    int count = 0;
    for (int n = 0; n < c->N; n++) {
        if (c->targets[n] < 0) continue;
        const double *l = c->logits + n * c->V;
        double max = l[0], z = 0.0;
        for (int i = 1; i < c->V; i++) if (l[i] > max) max = l[i];
        for (int i = 0; i < c->V; i++) z += exp(l[i] - max);
        loss += log(z) - (l[c->targets[n]] - max);
        count++;
    }
    return loss / count;
}

static void test_crossentropy_grad(void) {
    enum { N = 4, V = 7 };
    const int targets[N] = {3, 0, -1, 6};   /* the third row has no target */
    float logits[N * V], probs[N * V], losses[N];
    fill_random(logits, N * V);
    for (int i = 0; i < N * V; i++) logits[i] *= 3.0f;
    train_crossentropy_forward(probs, losses, logits, targets, N, V);
    XentCase c = {to_f64(logits, N * V), targets, N, V};
    double mean = (double)(losses[0] + losses[1] + losses[3]) / 3.0;
    check_true(fabs(mean - xent_loss(&c)) < 1e-5 && losses[2] == 0.0f,
               "cross-entropy forward: mean loss %.6f matches float64 %.6f; no-target row is 0",
               mean, xent_loss(&c));
    train_crossentropy_backward(probs, targets, N, V, 1.0f / 3.0f);
    check_grad("softmax + cross-entropy backward dlogits (N 4, V 7, one row masked)", probs,
               c.logits, N * V, xent_loss, &c);
    free(c.logits);
}

/* embedding: loss = sum g . (wte[token] + wpe[t]) */
typedef struct { double *wte, *wpe, *g; const int *tokens; int B, T, C; } EmbedCase;

static double embed_loss(void *ctx) {
    EmbedCase *c = ctx;
    double loss = 0.0;
    for (int n = 0; n < c->B * c->T; n++)
        for (int i = 0; i < c->C; i++)
            loss += c->g[n * c->C + i] * (c->wte[c->tokens[n] * c->C + i] +
                                          c->wpe[(n % c->T) * c->C + i]);
    return loss;
}

static void test_embedding_grad(void) {
    enum { B = 2, T = 3, C = 4, V = 5 };
    const int tokens[B * T] = {1, 4, 1, 0, 1, 2};   /* token 1 three times, 3 never */
    float g[B * T * C], dwte[V * C] = {0}, dwpe[T * C] = {0}, wte[V * C], wpe[T * C];
    fill_random(g, B * T * C); fill_random(wte, V * C); fill_random(wpe, T * C);
    train_embedding_backward(dwte, dwpe, g, tokens, B, T, C, V);
    EmbedCase c = {to_f64(wte, V * C), to_f64(wpe, T * C), to_f64(g, B * T * C), tokens, B, T, C};
    check_grad("embedding backward dwte (repeated and unused tokens)", dwte, c.wte, V * C,
               embed_loss, &c);
    check_grad("embedding backward dwpe", dwpe, c.wpe, T * C, embed_loss, &c);
    free(c.wte); free(c.wpe); free(c.g);
}

/* Whole model: every parameter's gradient against central differences of the float
 * loss (no float64 forward of the whole model exists). This checks how the layers are
 * chained: the residual sums, the shared embedding/classifier, dropout masks. Float
 * losses carry ~3e-7 rounding, so with a step of 1e-3 the numeric gradient is good to
 * ~1.5e-4; the h^2 term of the Taylor series adds ~5e-6 (measured: 5e-4 at h = 3e-3,
 * 5e-3 at 1e-2): tolerance 5e-4 + 2e-2 relative. */
#define MODEL_GRAD_H 1e-3f
#define MODEL_GRAD_ATOL 5e-4
#define MODEL_GRAD_RTOL 2e-2

static void tiny_config(Config *c, int V, int L, int C, int NH, int T) {
    memset(c, 0, sizeof *c);
    c->vocab_size = V; c->n_layers = L; c->dim = C; c->n_heads = NH; c->seq_len = T;
}

static TrainSettings tiny_settings(float dropout, float lr) {
    TrainSettings s = {0};
    s.batch = 2; s.steps = 60; s.warmup = 5; s.lr = lr; s.lr_min_ratio = 0.1f;
    s.weight_decay = 0.1f; s.beta1 = 0.9f; s.beta2 = 0.99f; s.eps = 1e-8f; s.clip = 1.0f;
    s.dropout = dropout; s.seed = 7;
    return s;
}

/* spec: the attention of the two layers (attention_spec_parse_layers), NULL for exact;
 * positions: a learned table, or rotary (RoPE on q and k, no table). */
static void test_model_grad(float dropout, const char *spec, ModelPositions positions) {
    Config c;
    tiny_config(&c, 11, 2, 8, 2, 4);
    c.positions = positions;
    TrainSettings s = tiny_settings(dropout, 1e-3f);
    s.attn_dropout = spec && strstr(spec, "linear") ? 0.0f : dropout;
    AttentionConfig cfgs[2];
    char err[256] = "";
    if (spec && !check_true(attention_spec_parse_layers(spec, 2, cfgs, err, sizeof err) == 0,
                            "whole-model attention %s parses%s%s", spec, *err ? ": " : "", err))
        return;
    s.attention = spec ? cfgs : NULL;
    Trainer tr;
    if (!check_true(trainer_init(&tr, &c, &s, 2) == 0, "whole-model trainer init")) return;
    /* larger weights than GPT-2's init, so every path carries a visible gradient */
    for (size_t j = 0; j < tr.n_params; j++) tr.params[j] += 0.3f * rand_sym();
    const int inputs[8] = {1, 5, 9, 2, 10, 0, 3, 3}, targets[8] = {5, 9, 2, 7, 0, 3, 3, 4};
    trainer_forward(&tr, inputs, targets);
    trainer_backward(&tr);
    float *numeric = malloc(tr.n_params * sizeof(float));
    for (size_t j = 0; j < tr.n_params; j++) {
        float saved = tr.params[j];
        tr.params[j] = saved + MODEL_GRAD_H;
        float up = trainer_forward(&tr, inputs, targets);
        tr.params[j] = saved - MODEL_GRAD_H;
        float down = trainer_forward(&tr, inputs, targets);
        tr.params[j] = saved;
        numeric[j] = (up - down) / (2.0f * MODEL_GRAD_H);
    }
    char what[256];
    snprintf(what, sizeof what, "whole model gradient, %zu parameters (L 2, C 8, residual sums, "
             "tied embedding, %s, dropout %.1f on the residuals and the attention weights%s%s)",
             tr.n_params, positions == MODEL_POSITIONS_ROTARY ? "rotary positions (no wpe)"
             : "learned positions", (double)dropout, spec ? ", attention " : "",
             spec ? spec : "");
    check_close(what, tr.grads, numeric, tr.n_params, MODEL_GRAD_ATOL, MODEL_GRAD_RTOL);
    free(numeric);
    trainer_free(&tr);
}

/* ------------------------------------------------------------------------- */
/* 3. Short training runs                                                      */

#define RUN_STEPS 60          /* steps of the short run */
#define RUN_MARGIN 1.0f       /* the loss must fall by at least this many nats */
#define RUN_V 16              /* vocabulary of the made-up token stream */
#define RUN_TOKENS 4096

/* A made-up token stream with structure to learn: mostly t+1 = (5 t + 3) mod 16, and
 * every seventh token random. */
static void make_stream(int *tokens, int n) {
    uint64_t s = 99;
    tokens[0] = 0;
    for (int i = 1; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        tokens[i] = i % 7 == 0 ? (int)((s >> 33) % RUN_V) : (5 * tokens[i - 1] + 3) % RUN_V;
    }
}

/* Windows for step `step` at fixed, step-dependent offsets. */
static void stream_batch(const int *tokens, int step, int B, int T, int *inputs, int *targets) {
    for (int b = 0; b < B; b++) {
        int start = (step * 131 + b * 517) % (RUN_TOKENS - T - 1);
        memcpy(inputs + b * T, tokens + start, sizeof(int) * T);
        memcpy(targets + b * T, tokens + start + 1, sizeof(int) * T);
    }
}

/* Train from step tr->step to `until`; losses[step] receives each step's loss. */
static void run_steps(Trainer *tr, const int *tokens, int until, float *losses) {
    int inputs[8 * 16], targets[8 * 16];
    while (tr->step < until) {
        stream_batch(tokens, tr->step, tr->B, tr->T, inputs, targets);
        losses[tr->step] = trainer_forward(tr, inputs, targets);
        trainer_backward(tr);
        trainer_update(tr);
    }
}

static int run_init_ema(Trainer *tr, float ema) {
    Config c;
    tiny_config(&c, RUN_V, 2, 32, 2, 16);
    TrainSettings s = tiny_settings(0.1f, 1e-2f);
    s.attn_dropout = 0.1f;
    s.steps = RUN_STEPS;
    s.ema = ema;
    return trainer_init(tr, &c, &s, 8);
}

static int run_init(Trainer *tr) { return run_init_ema(tr, 0.0f); }

static void test_training_run(void) {
    int *tokens = malloc(sizeof(int) * RUN_TOKENS);
    float losses[3][RUN_STEPS];
    make_stream(tokens, RUN_TOKENS);
    Trainer a, b;
    if (!check_true(run_init(&a) == 0 && run_init(&b) == 0, "short run: init")) return;
    /* every pass of the trainer runs inside kernels_run, so the second run's loops go to
     * its pool of 2 threads (OpenMP's, or POSIX threads without OpenMP) */
    kernels_set_threads(1);
    run_steps(&a, tokens, RUN_STEPS, losses[0]);
    int threads = kernels_set_threads(2);   /* at most the cores */
    run_steps(&b, tokens, RUN_STEPS, losses[1]);
    float last = 0.0f;
    for (int i = RUN_STEPS - 10; i < RUN_STEPS; i++) last += losses[0][i] / 10.0f;
    check_true(last < losses[0][0] - RUN_MARGIN,
               "short run: loss falls by more than %.1f nats (step 1 %.3f, mean of last 10 %.3f)",
               (double)RUN_MARGIN, (double)losses[0][0], (double)last);
    check_true(memcmp(losses[0], losses[1], sizeof losses[0]) == 0 &&
               memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
               "short run: 1 and %d threads give identical losses and parameters, bit for bit",
               threads);
    trainer_free(&b);

    /* the same seed again, interrupted: save at step 30, resume, continue to the end */
    const char *path = "build/test_train_ckpt.bin", *state = "build/test_train_ckpt.bin.state";
    if (!check_true(run_init(&b) == 0, "short run: init again")) goto done;
    run_steps(&b, tokens, RUN_STEPS / 2, losses[2]);
    int saved = trainer_save(&b, path, state, NULL);
    trainer_free(&b);
    if (!check_true(saved == 0 && trainer_load(&b, path, state, 0) == 0, "short run: save, load"))
        goto done;
    run_steps(&b, tokens, RUN_STEPS, losses[2]);
    check_true(memcmp(losses[0], losses[2], sizeof losses[0]) == 0 &&
               memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
               "short run: same seed, and resumed at step %d, gives the same losses and "
               "parameters bit for bit", RUN_STEPS / 2);
    trainer_free(&b);

    /* 4. the checkpoint loads in run's model.c and gives the trainer's own logits */
    if (trainer_save(&a, path, NULL, NULL) != 0) goto done;
    Model m;
    if (check_true(model_load(&m, path, a.T) == 0, "checkpoint loads with model_load")) {
        int inputs[8 * 16], targets[8 * 16];
        stream_batch(tokens, 0, a.B, a.T, inputs, targets);
        a.dropout_on = 0;
        trainer_forward(&a, inputs, NULL);
        const float *logits = model_forward(&m, inputs + a.T, a.T, 0, 1);  /* sequence 1 */
        check_true(logits != NULL, "model_forward on a trained checkpoint");
        /* the same layer functions in the same order: equal to float rounding, and bit
         * for bit where the model's products take the GEMM tile (see variant_run) */
        if (logits)
            check_close("run's logits vs the trainer's (sequence 1 of the batch)", logits,
                        a.a.logits + (size_t)a.T * RUN_V, (size_t)a.T * RUN_V, 1e-5, 1e-5);
        if (logits && kernels_gemm_min_rows() > 0 && a.T >= kernels_gemm_min_rows())
            check_true(memcmp(logits, a.a.logits + (size_t)a.T * RUN_V,
                              (size_t)a.T * RUN_V * sizeof(float)) == 0,
                       "run's logits = the trainer's bit for bit (the GEMM tile's order)");
        else
            check_skip("run's logits = the trainer's bit for bit: this build's products of "
                       "the sequence are dot products, not the GEMM tile");
        model_free(&m);
    }
done:
    remove(path);
    remove(state);
    trainer_free(&a);
    free(tokens);
}

/* ------------------------------------------------------------------------- */
/* 3b. Short training runs of attention variants                               */

/* A run of RUN_STEPS with each layer's attention from spec (2 layers), on the same stream
 * as test_training_run: the loss falls; for the ones marked `full`, also 1 vs 2 threads bit
 * for bit, a resume from a save at half way bit for bit (sink logits, redrawn Performer
 * features and per-step LSH rotations included), and run's model_forward on the saved
 * checkpoint (which records the attention and the positions) gives the trainer's logits,
 * bit for bit with exact attention. positions: learned, or rotary (no wpe). */
static void variant_run(const char *spec, int full, ModelPositions positions) {
    Config c;
    tiny_config(&c, RUN_V, 2, 32, 2, 16);
    c.positions = positions;
    int rotary = positions == MODEL_POSITIONS_ROTARY;
    char label[96];   /* the spec, and the positions when rotary */
    snprintf(label, sizeof label, "%s%s", spec, rotary ? " --pos rope" : "");
    TrainSettings s = tiny_settings(0.1f, 1e-2f);
    s.steps = RUN_STEPS;
    s.redraw = 7;   /* Performer: several draws within the run and across the resume */
    AttentionConfig cfgs[2];
    char err[256] = "";
    if (!check_true(attention_spec_parse_layers(spec, 2, cfgs, err, sizeof err) == 0,
                    "variant run %s: spec parses%s%s", label, *err ? ": " : "", err)) return;
    int kernelised = 0;
    for (int l = 0; l < 2; l++)
        kernelised |= cfgs[l].kind == ATTENTION_LINEAR || cfgs[l].kind == ATTENTION_EFFICIENT ||
                      cfgs[l].kind == ATTENTION_PERFORMER;
    s.attn_dropout = kernelised ? 0.0f : 0.1f;
    s.attention = cfgs;
    int *tokens = malloc(sizeof(int) * RUN_TOKENS);
    float losses[3][RUN_STEPS];
    make_stream(tokens, RUN_TOKENS);
    Trainer a, b;
    memset(&b, 0, sizeof b);
    const char *path = "build/test_train_variant.bin";
    const char *state = "build/test_train_variant.bin.state";
    if (!check_true(trainer_init(&a, &c, &s, 8) == 0, "variant run %s: init", label)) goto done;
    if (rotary)
        check_true(a.tensor_size[1] == 0 && a.a.rope != NULL, "variant run %s: no wpe table "
                   "(0 of %zu parameters), the rotary angles made", label, a.n_params);
    kernels_set_threads(1);
    run_steps(&a, tokens, RUN_STEPS, losses[0]);
    float last = 0.0f;
    for (int i = RUN_STEPS - 10; i < RUN_STEPS; i++) last += losses[0][i] / 10.0f;
    check_true(last < losses[0][0] - RUN_MARGIN && isfinite(last),
               "variant run %s: loss falls by more than %.1f nats (step 1 %.3f, mean of last "
               "10 %.3f)", label, (double)RUN_MARGIN, (double)losses[0][0], (double)last);
    if (!full) goto done;
    int threads = kernels_set_threads(2);
    if (!check_true(trainer_init(&b, &c, &s, 8) == 0, "variant run %s: init", label)) goto done;
    run_steps(&b, tokens, RUN_STEPS, losses[1]);
    check_true(memcmp(losses[0], losses[1], sizeof losses[0]) == 0 &&
               memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
               "variant run %s: 1 and %d threads give identical losses and parameters", label,
               threads);
    trainer_free(&b);
    if (!check_true(trainer_init(&b, &c, &s, 8) == 0, "variant run %s: init", label)) goto done;
    run_steps(&b, tokens, RUN_STEPS / 2, losses[2]);
    int saved = trainer_save(&b, path, state, NULL);
    trainer_free(&b);
    if (!check_true(saved == 0 && trainer_load(&b, path, state, 0) == 0,
                    "variant run %s: save, load", label)) goto done;
    run_steps(&b, tokens, RUN_STEPS, losses[2]);
    check_true(memcmp(losses[0], losses[2], sizeof losses[0]) == 0 &&
               memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
               "variant run %s: resumed at step %d, the same losses and parameters bit for "
               "bit", label, RUN_STEPS / 2);
    /* the checkpoint records the attention: run's model uses it and gives the trainer's
     * logits (evaluation: dropout off, the random matrices of draw 0 in both) */
    if (trainer_save(&a, path, NULL, NULL) != 0) goto done;
    Model m;
    if (check_true(model_load(&m, path, a.T) == 0, "variant run %s: checkpoint loads", label)) {
        int inputs[8 * 16], targets[8 * 16];
        stream_batch(tokens, 0, a.B, a.T, inputs, targets);
        a.dropout_on = 0;
        trainer_forward(&a, inputs, NULL);
        const float *logits = model_forward(&m, inputs + a.T, a.T, 0, 1);  /* sequence 1 */
        char what[192];
        snprintf(what, sizeof what, "variant run %s: run's logits vs the trainer's", label);
        if (check_true(logits != NULL && m.lab == a.variant &&
                       m.config.positions == positions, "%s: the model runs the recorded "
                       "attention and positions", what))
            check_close(what, logits, a.a.logits + (size_t)a.T * RUN_V, (size_t)a.T * RUN_V,
                        1e-4, 1e-4);
        /* exact attention: the same functions in the same order (the rotary angles of
         * block_rope_angles in both), so the same bits where the model's products of T
         * rows take the GEMM tile, whose sums run in the trainer's order (kernels.h); the
         * portable build's products are dot products in another order, 2e-6 apart */
        float max_diff = 0.0f;
        for (size_t i = 0; logits && !a.variant && i < (size_t)a.T * RUN_V; i++) {
            float diff = fabsf(logits[i] - a.a.logits[(size_t)a.T * RUN_V + i]);
            max_diff = diff > max_diff ? diff : max_diff;
        }
        int gemm = kernels_gemm_min_rows() > 0 && a.T >= kernels_gemm_min_rows();
        if (logits && !a.variant && gemm)
            check_true(max_diff == 0.0f, "%s: max |diff| %g (expected 0: bit for bit)", what,
                       (double)max_diff);
        else if (logits && !a.variant)
            check_skip("run's logits bit for bit with the trainer's: this build's products of "
                       "the sequence are not the GEMM tile (the tolerance check above holds)");
        model_free(&m);
    }
done:
    remove(path);
    remove(state);
    trainer_free(&a);
    trainer_free(&b);
    free(tokens);
}

/* The header's slot [10] of a checkpoint written by a run of these positions (-1 if the
 * run or the file failed); *bytes gets the file's size. */
static int saved_positions(ModelPositions positions, const char *path, long *bytes) {
    Config c;
    tiny_config(&c, RUN_V, 2, 32, 2, 16);
    c.positions = positions;
    TrainSettings s = tiny_settings(0.1f, 1e-2f);
    Trainer tr;
    int32_t header[CHECKPOINT_GPT2_HEADER_INTS] = {0};
    FILE *f = NULL;
    if (trainer_init(&tr, &c, &s, 2) == 0 && trainer_save(&tr, path, NULL, NULL) == 0)
        f = fopen(path, "rb");
    int got = f && fread(header, sizeof header, 1, f) == 1;
    if (f && fseek(f, 0, SEEK_END) == 0) *bytes = ftell(f);
    if (f) fclose(f);
    trainer_free(&tr);
    return got ? (int)header[CHECKPOINT_GPT2_POS_SLOT] : -1;
}

/* Rotary positions in the files: the header's slot [10] (0 for learned, as llm.c's own),
 * no wpe in the file, model_load's view of it (no table, the angles within the context
 * only), the int8 form, and the trainer's refusals: a learned run's state beside a rotary
 * checkpoint, --init across position schemes. */
static void test_rotary_files(void) {
    const char *learned = "build/test_train_learned.bin", *rotary = "build/test_train_rope.bin";
    const char *q8 = "build/test_train_rope_q8.bin", *state = "build/test_train_rope.bin.state";
    const char *learned_state = "build/test_train_learned.bin.state";
    long learned_bytes = 0, rotary_bytes = 0;
    int slot_learned = saved_positions(MODEL_POSITIONS_LEARNED, learned, &learned_bytes);
    int slot_rotary = saved_positions(MODEL_POSITIONS_ROTARY, rotary, &rotary_bytes);
    check_true(slot_learned == 0 && slot_rotary == 1 &&
               learned_bytes - rotary_bytes == 16L * 32 * (long)sizeof(float),
               "rotary checkpoint: header [%d] = 1 (learned: 0, as llm.c's), and no wpe: "
               "%ld bytes, the learned file's %ld less T x C floats", CHECKPOINT_GPT2_POS_SLOT,
               rotary_bytes, learned_bytes);
    Model m;
    if (check_true(model_load(&m, rotary, 16) == 0, "rotary checkpoint: model_load")) {
        int tokens[17] = {0};
        const float *logits = model_forward(&m, tokens, 16, 0, 0);
        check_true(m.config.positions == MODEL_POSITIONS_ROTARY &&
                   m.checkpoint.weights.pos_embedding == NULL && logits != NULL &&
                   strstr(m.format, "rotary positions") != NULL,
                   "rotary checkpoint: loads as rotary, no position table, runs 16 tokens "
                   "(\"%s\")", m.format);
        check_true(model_forward(&m, tokens, 1, 16, 0) == NULL,
                   "rotary checkpoint: position 16 refused (the context is still 16)");
        int saved = checkpoint_save_q8(&m.checkpoint, q8, CHECKPOINT_Q8_GROUP);
        model_free(&m);
        if (check_true(saved == 0 && model_load(&m, q8, 16) == 0,
                       "rotary checkpoint: its int8 form (checkpoint_save_q8) loads")) {
            check_true(m.config.positions == MODEL_POSITIONS_ROTARY &&
                       model_forward(&m, tokens, 16, 0, 0) != NULL,
                       "rotary checkpoint: the int8 form keeps the rotary positions and runs");
            model_free(&m);
        }
    }
    /* --init across position schemes is refused, each way */
    Config c;
    tiny_config(&c, RUN_V, 2, 32, 2, 16);
    TrainSettings s = tiny_settings(0.1f, 1e-2f);
    Trainer tr;
    for (int r = 0; r < 2; r++) {
        c.positions = r ? MODEL_POSITIONS_ROTARY : MODEL_POSITIONS_LEARNED;
        if (trainer_init(&tr, &c, &s, 2) == 0) {
            check_true(trainer_start_from(&tr, r ? learned : rotary) != 0 &&
                       trainer_start_from(&tr, r ? rotary : learned) == 0,
                       "--init: a %s run refuses a %s checkpoint, takes its own kind",
                       r ? "rotary" : "learned", r ? "learned" : "rotary");
            trainer_free(&tr);
        }
    }
    /* a learned run's state beside a rotary checkpoint of the same shape: refused */
    c.positions = MODEL_POSITIONS_LEARNED;
    if (trainer_init(&tr, &c, &s, 2) == 0) {
        int saved = trainer_save(&tr, learned, learned_state, NULL);
        trainer_free(&tr);
        c.positions = MODEL_POSITIONS_ROTARY;
        Trainer rope;
        if (saved == 0 && trainer_init(&rope, &c, &s, 2) == 0) {
            saved = trainer_save(&rope, rotary, state, NULL);
            trainer_free(&rope);
        }
        check_true(saved == 0 && trainer_load(&tr, rotary, state, 0) == 0,
                   "rotary checkpoint: resumes with its own state");
        trainer_free(&tr);
        check_true(trainer_load(&tr, rotary, learned_state, 0) != 0 &&
                   trainer_load(&tr, learned, state, 0) != 0,
                   "rotary checkpoint: a learned run's state beside it is refused, and its "
                   "state beside a learned checkpoint");
    }
    remove(learned_state);
    remove(state);
    remove(learned);
    remove(rotary);
    remove(q8);
}

static void test_variant_runs(void) {
    static const struct { const char *spec; int full; } RUNS[] = {
        {"window:w=4,sinklogit=1;exact", 1},   /* a hybrid with a learned sink */
        {"window:w=4,sinks=2", 0},
        {"dilated:w=3,k=2,sinks=1", 0},
        {"strided:l=4", 0},
        {"fixed:l=8,c=2", 0},
        {"softmax1", 0},
        {"linear", 0},
        {"linear:norm=1", 1},
        {"efficient", 0},
        {"performer:m=16", 1},
        {"lsh:buckets=4,rounds=2,local=2,sinks=1", 1},
    };
    for (size_t i = 0; i < sizeof RUNS / sizeof RUNS[0]; i++)
        variant_run(RUNS[i].spec, RUNS[i].full, MODEL_POSITIONS_LEARNED);
    /* rotary positions: with exact attention (run's logits bit for bit), and every variant,
     * since RoPE changes only q and k before attention */
    variant_run("exact", 1, MODEL_POSITIONS_ROTARY);
    for (size_t i = 0; i < sizeof RUNS / sizeof RUNS[0]; i++)
        variant_run(RUNS[i].spec, RUNS[i].full, MODEL_POSITIONS_ROTARY);
    test_rotary_files();
    /* an exact run's checkpoint is llm.c's own format: no attention extension */
    Trainer tr;
    if (run_init(&tr) == 0) {
        const char *path = "build/test_train_exact.bin";
        int32_t header[CHECKPOINT_GPT2_HEADER_INTS] = {0};
        FILE *f = trainer_save(&tr, path, NULL, NULL) == 0 ? fopen(path, "rb") : NULL;
        int got = f && fread(header, sizeof header, 1, f) == 1;
        if (f) fclose(f);
        check_true(got && header[CHECKPOINT_GPT2_ATTN_SLOT] == 0,
                   "an exact run's checkpoint has no attention extension (header [%d] = %d)",
                   CHECKPOINT_GPT2_ATTN_SLOT, got ? (int)header[CHECKPOINT_GPT2_ATTN_SLOT] : -1);
        /* --init: a window run with learned sink logits starts from the exact run's
         * weights (sink logits 0); a model of another shape is refused */
        Config c;
        tiny_config(&c, RUN_V, 2, 32, 2, 16);
        TrainSettings s = tiny_settings(0.1f, 1e-2f);
        AttentionConfig cfgs[2];
        char err[256] = "";
        attention_spec_parse_layers("window:w=4,sinklogit=1", 2, cfgs, err, sizeof err);
        s.attention = cfgs;
        Trainer w;
        if (check_true(trainer_init(&w, &c, &s, 8) == 0, "--init: a window run")) {
            size_t n_file = w.n_params - w.tensor_size[TRAIN_N_TENSORS - 1];
            int started = trainer_start_from(&w, path) == 0;
            check_true(started && n_file == tr.n_params &&
                       memcmp(w.params, tr.params, n_file * sizeof(float)) == 0 &&
                       w.p.sink[0] == 0.0f && w.p.sink[3] == 0.0f,
                       "--init: the window run starts from the exact run's %zu parameters, "
                       "its sink logits 0", n_file);
            trainer_free(&w);
        }
        tiny_config(&c, RUN_V, 2, 32, 4, 16);   /* 4 heads */
        s.attention = NULL;
        if (check_true(trainer_init(&w, &c, &s, 8) == 0, "--init: a 4-head run")) {
            check_true(trainer_start_from(&w, path) != 0,
                       "--init: a checkpoint of another shape is refused");
            trainer_free(&w);
        }
        remove(path);
        trainer_free(&tr);
    }
}

/* The training batch (trainer_batch) with and without token noise, on a stream whose
 * token at position i is i, so a window shows where it starts and a replacement shows
 * where it was drawn from. Without noise: B windows of consecutive tokens, targets one
 * ahead. With noise q: the same targets, the same inputs except a share q of them (at
 * ±5 sd), each replaced by a token of the stream, from positions spread evenly (their
 * mean within 5 sd of n/2); another step gives other windows. */
#define BATCH_B 64
#define BATCH_T 64
#define BATCH_N 20000
#define BATCH_NOISE 0.25f

static void test_batch(void) {
    static int tokens[BATCH_N], in[2][BATCH_B * BATCH_T], tg[2][BATCH_B * BATCH_T];
    for (int i = 0; i < BATCH_N; i++) tokens[i] = i;
    Config c;
    tiny_config(&c, RUN_V, 1, 8, 2, BATCH_T);
    TrainSettings s = tiny_settings(0.0f, 1e-3f);
    Trainer tr;
    if (!check_true(trainer_init(&tr, &c, &s, BATCH_B) == 0, "batch: init")) return;
    tr.step = 3;
    trainer_batch(&tr, tokens, BATCH_N, in[0], tg[0]);
    int windows_ok = 1;
    for (int b = 0; b < BATCH_B; b++) {
        int start = in[0][b * BATCH_T];
        windows_ok &= start >= 0 && start < BATCH_N - BATCH_T;
        for (int t = 0; t < BATCH_T; t++)
            windows_ok &= in[0][b * BATCH_T + t] == start + t &&
                          tg[0][b * BATCH_T + t] == start + t + 1;
    }
    check_true(windows_ok, "batch: without noise, %d windows of %d consecutive tokens, targets "
               "one ahead", BATCH_B, BATCH_T);

    tr.settings.token_noise = BATCH_NOISE;
    trainer_batch(&tr, tokens, BATCH_N, in[1], tg[1]);
    int n = BATCH_B * BATCH_T, replaced = 0, in_stream = 1;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        if (in[1][i] == in[0][i]) continue;
        replaced++;
        in_stream &= in[1][i] >= 0 && in[1][i] < BATCH_N;
        sum += in[1][i];
    }
    double expect = (double)BATCH_NOISE * n, sd = sqrt(expect * (1.0 - (double)BATCH_NOISE));
    check_true(memcmp(tg[0], tg[1], sizeof tg[0]) == 0, "batch: token noise leaves the targets");
    check_true(fabs(replaced - expect) < 5.0 * sd && in_stream,
               "batch: token noise %.2f replaces %d of %d inputs (expected %.0f +- %.0f), each by "
               "a token of the stream", (double)BATCH_NOISE, replaced, n, expect, 5.0 * sd);
    /* positions uniform on [0, N): mean N/2, sd of the mean N / sqrt(12 replaced) */
    double mean = replaced ? sum / replaced : 0.0, mean_sd = BATCH_N / sqrt(12.0 * replaced);
    check_true(fabs(mean - BATCH_N / 2.0) < 5.0 * mean_sd,
               "batch: replacements come from across the stream (mean position %.0f, expected "
               "%d +- %.0f)", mean, BATCH_N / 2, 5.0 * mean_sd);
    trainer_batch(&tr, tokens, BATCH_N, in[0], tg[0]);
    int same = memcmp(in[0], in[1], sizeof in[0]) == 0;
    tr.step = 4;
    trainer_batch(&tr, tokens, BATCH_N, in[0], tg[0]);
    check_true(same && memcmp(tg[0], tg[1], sizeof tg[0]) != 0,
               "batch: the same step gives the same batch, another step other windows");
    trainer_free(&tr);
}

/* The weights' moving average (--ema): after each update, against a float64 recurrence
 * kept here from the weights the trainer reaches, with the decay written out again
 * (min(ema, (1 + t) / (10 + t)) after t updates); float rounding of 60 updates stays far
 * under 1e-6. Then the checkpoint holds the average, a resumed run ends with the same bits
 * (weights and average), and the weights themselves are the run without an average. */
#define EMA_DECAY 0.9f
#define EMA_TOL 1e-6

static void test_ema_run(void) {
    int *tokens = malloc(sizeof(int) * RUN_TOKENS), inputs[8 * 16], targets[8 * 16];
    float losses[2][RUN_STEPS];
    const char *path = "build/test_train_ema.bin", *state = "build/test_train_ema.bin.state";
    make_stream(tokens, RUN_TOKENS);
    Trainer a, b, plain;
    memset(&b, 0, sizeof b);
    memset(&plain, 0, sizeof plain);
    if (!check_true(run_init_ema(&a, EMA_DECAY) == 0 && a.ema != NULL, "ema: init")) goto done;
    double *expect = to_f64(a.params, a.n_params), worst = 0.0;
    for (int step = 0; step < RUN_STEPS; step++) {
        stream_batch(tokens, a.step, a.B, a.T, inputs, targets);
        trainer_forward(&a, inputs, targets);
        trainer_backward(&a);
        trainer_update(&a);
        double t = a.step, decay = (1.0 + t) / (10.0 + t);
        if (decay > (double)EMA_DECAY) decay = (double)EMA_DECAY;
        for (size_t j = 0; j < a.n_params; j++) {
            expect[j] = decay * expect[j] + (1.0 - decay) * (double)a.params[j];
            double err = fabs(expect[j] - (double)a.ema[j]);
            if (err > worst) worst = err;
        }
    }
    check_true(worst < EMA_TOL, "ema: the average after each of %d updates equals a float64 "
               "recurrence over the weights (worst error %.2e, tolerance %.0e)", RUN_STEPS,
               worst, EMA_TOL);
    free(expect);

    /* without an average the weights are the same bits: the average only watches */
    if (!check_true(run_init(&plain) == 0, "ema: init without")) goto done;
    run_steps(&plain, tokens, RUN_STEPS, losses[0]);
    check_true(memcmp(plain.params, a.params, a.n_params * sizeof(float)) == 0,
               "ema: the weights equal a run without an average, bit for bit");

    /* the checkpoint holds the average; save at the middle, resume, same bits at the end */
    if (!check_true(run_init_ema(&b, EMA_DECAY) == 0, "ema: init again")) goto done;
    run_steps(&b, tokens, RUN_STEPS / 2, losses[1]);
    int saved = trainer_save(&b, path, state, NULL);
    Model m;
    if (check_true(saved == 0 && model_load(&m, path, b.T) == 0, "ema: checkpoint loads")) {
        const float *wte = m.checkpoint.tensors[TENSOR_WTE].f32;
        size_t bytes = b.tensor_size[0] * sizeof(float);
        check_true(memcmp(wte, b.ema, bytes) == 0 && memcmp(wte, b.params, bytes) != 0,
                   "ema: the checkpoint holds the average, not the weights");
        model_free(&m);
    }
    trainer_free(&b);
    if (!check_true(trainer_load(&b, path, state, 0) == 0 && b.ema != NULL, "ema: load")) goto done;
    run_steps(&b, tokens, RUN_STEPS, losses[1]);
    check_true(memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0 &&
               memcmp(a.ema, b.ema, a.n_params * sizeof(float)) == 0,
               "ema: resumed at step %d, the weights and the average end with the same bits",
               RUN_STEPS / 2);
    /* evaluation swaps the average in and out, exactly */
    float *copy = malloc(a.n_params * sizeof(float));
    memcpy(copy, a.params, a.n_params * sizeof(float));
    trainer_swap_ema(&a);
    int swapped = memcmp(a.params, b.ema, a.n_params * sizeof(float)) == 0;
    trainer_swap_ema(&a);
    check_true(swapped && memcmp(a.params, copy, a.n_params * sizeof(float)) == 0,
               "ema: trainer_swap_ema puts the average in place and back, bit for bit");
    free(copy);
done:
    remove(path);
    remove(state);
    trainer_free(&a);
    trainer_free(&b);
    trainer_free(&plain);
    free(tokens);
}

/* Learning-rate schedule: warmup is linear, then a cosine ends at lr * ratio. */
static void test_schedule(void) {
    TrainSettings s = tiny_settings(0.0f, 1e-3f);
    s.steps = 100; s.warmup = 10;
    float w0 = trainer_learning_rate(&s, 0), w9 = trainer_learning_rate(&s, 9);
    float mid = trainer_learning_rate(&s, 55), end = trainer_learning_rate(&s, 100);
    check_true(fabsf(w0 - 1e-4f) < 1e-9f && fabsf(w9 - 1e-3f) < 1e-9f &&
               fabsf(mid - 5.5e-4f) < 1e-7f && fabsf(end - 1e-4f) < 1e-9f,
               "schedule: warmup 1e-4 .. 1e-3, cosine midpoint 5.5e-4, end 1e-4 (got %g %g %g %g)",
               (double)w0, (double)w9, (double)mid, (double)end);
}

/* ------------------------------------------------------------------------- */
/* BPE trainer                                                                 */

#include "bpe.h"   /* bpe_train, bpe_train_logged, bpe_save: the tokenizer trainer, tested here */

/* Encode text with the tokenizer file b was saved to; ids (cap,) and the count. */
static size_t encode_with(const Tokenizer *t, const char *text, int *ids, size_t cap) {
    size_t n = 0;
    if (tokenizer_encode(t, text, strlen(text), ids, cap, &n) != 0) return 0;
    return n;
}

static void test_bpe(void) {
    const char *path = "build/test_train_bpe.bin";
    /* pieces "ab", " ab", " ab", " abc", " abc": (a,b) occurs 5 times -> 256 "ab"; then
     * (" ", ab) 4 times -> 257 " ab"; then (" ab", c) twice -> 258 " abc"; then every
     * piece is one token and training stops, short of the 300 asked for */
    const char *text = "ab ab ab abc abc";
    Bpe b;
    if (!check_true(bpe_train(&b, text, strlen(text), 300) == 0, "bpe: train on \"%s\"", text))
        return;
    check_true(b.n_merges == 3 && b.vocab_size == 260 &&
               b.merges[0][0] == 'a' && b.merges[0][1] == 'b' && b.merge_count[0] == 5 &&
               b.merges[1][0] == ' ' && b.merges[1][1] == 256 && b.merge_count[1] == 4 &&
               b.merges[2][0] == 257 && b.merges[2][1] == 'c' && b.merge_count[2] == 2,
               "bpe: merges (a,b)x5 -> 256, (' ',256)x4 -> 257, (257,c)x2 -> 258, then stop "
               "(got %d merges)", b.n_merges);
    int saved = bpe_save(&b, path);
    bpe_free(&b);
    Tokenizer t;
    if (!check_true(saved == 0 && tokenizer_load(&t, path) == 0,
                    "bpe: the written file loads with tokenizer_load")) return;
    int ids[64];
    size_t n = encode_with(&t, "ab abc ab", ids, 64);
    check_true(t.vocab_size == 260 && t.eot_id == 259 && n == 3 && ids[0] == 256 &&
               ids[1] == 258 && ids[2] == 257,
               "bpe: tokenizer_encode(\"ab abc ab\") = [256, 258, 257], eot id 259");
    size_t len;
    const unsigned char *eot = tokenizer_decode(&t, -1, 259, &len);
    check_true(eot && len == strlen(BPE_EOT_TEXT) && memcmp(eot, BPE_EOT_TEXT, len) == 0,
               "bpe: the last id is the end-of-text token");
    tokenizer_free(&t);

    /* ties: "xy", " xy", " zw" x2 give (x,y), (' ',z), (z,w) 2 each: the lowest left id
     * wins, so ' z' first; then (x,y) beats (' z',w) on left id; then (' z',w) */
    text = "xy xy zw zw";
    if (check_true(bpe_train(&b, text, strlen(text), 1000) == 0, "bpe: the tie text trains")) {
        check_true(b.n_merges == 3 && b.merges[0][0] == ' ' && b.merges[0][1] == 'z' &&
                   b.merges[1][0] == 'x' && b.merges[1][1] == 'y' &&
                   b.merges[2][0] == 256 && b.merges[2][1] == 'w',
                   "bpe: ties go to the lower left id: (' ',z), (x,y), (256,w)");
        bpe_free(&b);
    }
    check_true(bpe_train(&b, text, strlen(text), 256) != 0, "bpe: vocab 256 is refused");
    bpe_free(&b);
    remove(path);
}

/* 1 if the byte string a (la,) occurs in c (lc,). */
static int contains(const unsigned char *c, size_t lc, const unsigned char *a, size_t la) {
    for (size_t i = 0; i + la <= lc; i++) if (memcmp(c + i, a, la) == 0) return 1;
    return 0;
}

/* A trained tokenizer reproduces its training segmentation, and round-trips text. */
static void test_bpe_roundtrip(void) {
    const char *path = "build/test_train_bpe2.bin";
    const char *text =
        "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
        "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. "
        "resolved.\n\nFirst Citizen:\nFirst, you know Caius Marcius is chief enemy to the "
        "people.\n\nAll:\nWe know't, we know't.\n";
    Bpe b;
    if (!check_true(bpe_train(&b, text, strlen(text), 400) == 0 && bpe_save(&b, path) == 0,
                    "bpe: train and save on a small play text")) return;
    int n_merges = b.n_merges;
    bpe_free(&b);
    Tokenizer t;
    if (!check_true(tokenizer_load(&t, path) == 0, "bpe: reload")) return;
    const char *samples[] = {text, "Speak, speak, First Citizen!", "h\xc3\xa9llo w\xc3\xb6rld 123",
                             "  \n\t x\xff\xfe y", ""};
    int ok_text = 1, ok_ids = 1;
    for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++) {
        static int ids[4096], ids2[4096];
        static char decoded[8192];
        size_t n = encode_with(&t, samples[k], ids, 4096), pos = 0, len;
        for (size_t i = 0; i < n; i++) {
            const unsigned char *bytes = tokenizer_decode(&t, -1, ids[i], &len);
            memcpy(decoded + pos, bytes, len);
            pos += len;
        }
        decoded[pos] = '\0';
        ok_text &= pos == strlen(samples[k]) && memcmp(decoded, samples[k], pos) == 0;
        size_t n2 = encode_with(&t, decoded, ids2, 4096);
        ok_ids &= n2 == n && memcmp(ids, ids2, n * sizeof(int)) == 0;
    }
    check_true(ok_text, "bpe: decode(encode(text)) == text (ASCII, UTF-8, invalid bytes, empty)");
    check_true(ok_ids, "bpe: encode(decode(ids)) == ids for the encoder's ids");
    /* the training text is compressed: every learned merge is used at least once */
    static int ids[4096];
    size_t n = encode_with(&t, text, ids, 4096);
    int used[400] = {0}, unused = 0;
    for (size_t i = 0; i < n; i++) used[ids[i]] = 1;
    for (int id = 256; id < 256 + n_merges; id++) {
        int covered = used[id];
        /* a token may appear only inside longer ones; count it as used if some used token
         * contains its bytes) */
        for (int later = id + 1; !covered && later < 256 + n_merges; later++) {
            size_t la, lb;
            const unsigned char *a = tokenizer_decode(&t, -1, id, &la),
                                *c = tokenizer_decode(&t, -1, later, &lb);
            covered = used[later] && contains(c, lb, a, la);
        }
        unused += !covered;
    }
    check_true(n_merges > 30 && unused == 0, "bpe: %d merges learned, each one used when the "
               "training text is encoded (%d unused)", n_merges, unused);
    tokenizer_free(&t);
    remove(path);
}

/* ------------------------------------------------------------------------- */
/* The BPE trainer on a long run of one character, and against the old merges */

#define LONG_RUN_BYTES 200000      /* one pre-tokenized piece of 200,000 '=' */
/* train + save + load + encode must take less CPU time than this (measured 0.3 s at -O3;
 * the old quadratic loop needed ~1.3 s for 8,000 bytes, so ~800 s for these); the
 * sanitizer builds run ~4x slower */
#if defined(__SANITIZE_ADDRESS__)            /* gcc's -fsanitize=address */
#define LONG_RUN_SECONDS 5.0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)         /* clang's */
#define LONG_RUN_SECONDS 5.0
#endif
#endif
#ifndef LONG_RUN_SECONDS
#define LONG_RUN_SECONDS 1.0
#endif
#define LONG_RUN_MERGES 7          /* "==", "====", ... up to 128 '=' (256 would be too long) */
#define LONG_RUN_TOP 128           /* bytes of the longest token learned */
/* The merges bpe_train learned on test_bpe_roundtrip's play text before its merge loop
 * became tokenizer.c's heap merge (recorded from that code): their count, and FNV-1a 64
 * of the (left, right) ids as little-endian int32, in order. */
#define PLAY_MERGES 46
#define PLAY_MERGES_FNV 0x29E4702D93B639FFull
#define SHIPPED_VOCAB 1024         /* weights/tokenizer.bin's vocabulary */

/* snprintf whose truncation fails a check (the buffers here are ample; this keeps it so). */
static void format_into(char *buf, size_t cap, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int n = vsnprintf(buf, cap, format, args);
    va_end(args);
    if (n < 0 || (size_t)n >= cap) check_true(0, "test path or command too long: %s", buf);
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* FNV-1a 64 of the merges' ids, each as 4 bytes little-endian (whatever the host). */
static uint64_t merges_fnv(const Bpe *b) {
    uint64_t hash = HASH_FNV64_OFFSET;
    for (int i = 0; i < b->n_merges; i++) {
        for (int k = 0; k < 2; k++) {
            unsigned char id[4];
            for (int byte = 0; byte < 4; byte++)
                id[byte] = (unsigned char)((uint32_t)b->merges[i][k] >> (8 * byte));
            hash = hash_fnv1a64(hash, id, sizeof id);
        }
    }
    return hash;
}

static void test_bpe_long_run(void) {
    const char *path = "build/test_train_bpe_run.bin";
    char *text = malloc(LONG_RUN_BYTES);
    int *ids = malloc(sizeof(int) * (LONG_RUN_BYTES + 1));
    if (!check_true(text && ids, "bpe long run: buffers")) goto done;
    memset(text, '=', LONG_RUN_BYTES);
    clock_t start = clock();   /* CPU time: other processes on the machine do not count */
    Bpe b;
    int trained = bpe_train(&b, text, LONG_RUN_BYTES, 1000) == 0;
    int saved = trained && bpe_save(&b, path) == 0;
    int doubling = trained && b.n_merges == LONG_RUN_MERGES && b.merges[0][0] == '=' &&
                   b.merges[0][1] == '=';
    for (int i = 1; doubling && i < b.n_merges; i++)
        doubling = b.merges[i][0] == 255 + i && b.merges[i][1] == 255 + i;
    if (trained) bpe_free(&b);
    Tokenizer t;
    size_t n = 0;
    int loaded = saved && tokenizer_load(&t, path) == 0;
    int encoded = loaded && tokenizer_encode(&t, text, LONG_RUN_BYTES, ids, LONG_RUN_BYTES + 1,
                                             &n) == 0;
    double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
    check_true(encoded && seconds < LONG_RUN_SECONDS,
               "bpe: a run of %d '=' (one piece) trains, saves, loads and encodes in %.3f s "
               "of CPU (expected < %.1f)", LONG_RUN_BYTES, seconds, LONG_RUN_SECONDS);
    check_true(doubling, "bpe long run: %d merges, each doubling the run ('=','='), "
               "(256,256), ... (261,261)", LONG_RUN_MERGES);
    /* 200,000 = 1562 x 128 + 64: the encoder takes the longest tokens, then the rest */
    size_t whole = LONG_RUN_BYTES / LONG_RUN_TOP;
    int top_id = 256 + LONG_RUN_MERGES - 1;
    int ok = encoded && n == whole + 1 && ids[whole] == top_id - 1;
    for (size_t i = 0; ok && i < whole; i++) ok = ids[i] == top_id;
    check_true(ok, "bpe long run: encodes to %zu tokens of 128 '=' and one of 64 (got %zu)",
               whole, n);
    if (loaded) tokenizer_free(&t);

    /* the same merges as the old per-piece loop on the hand-made play text */
    const char *play =
        "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
        "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. "
        "resolved.\n\nFirst Citizen:\nFirst, you know Caius Marcius is chief enemy to the "
        "people.\n\nAll:\nWe know't, we know't.\n";
    if (check_true(bpe_train(&b, play, strlen(play), 400) == 0, "bpe: the play text trains")) {
        check_true(b.n_merges == PLAY_MERGES && merges_fnv(&b) == PLAY_MERGES_FNV,
                   "bpe: the play text gives the merges recorded from the old merge loop "
                   "(%d merges, FNV %016llx)", b.n_merges, (unsigned long long)merges_fnv(&b));
        bpe_free(&b);
    }
    /* and the shipped tokenizer, which the old code learned from Tiny Shakespeare */
    const char *shared = check_shared_dir();
    char corpus[512];
    size_t size = 0;
    char *data = NULL;
    if (shared) {
        format_into(corpus, sizeof corpus, "%s/data/tinyshakespeare.txt", shared);
        data = check_read_file(corpus, &size);
    }
    if (!data) {
        check_skip("../shared/data/tinyshakespeare.txt not found (shipped tokenizer rebuild)");
    } else {
        size_t split = size / 10 * 9 + size % 10 * 9 / 10;   /* train.c's floor(0.9 size) */
        size_t n_new = 0, n_old = 0;
        char *fresh = NULL, *shipped = NULL;
        if (bpe_train(&b, data, split, SHIPPED_VOCAB) == 0) {
            if (bpe_save(&b, path) == 0) fresh = check_read_file(path, &n_new);
            bpe_free(&b);
        }
        shipped = check_read_file("weights/tokenizer.bin", &n_old);
        check_true(fresh && shipped && n_new == n_old && memcmp(fresh, shipped, n_old) == 0,
                   "bpe: Tiny Shakespeare's training split rebuilds weights/tokenizer.bin byte "
                   "for byte");
        free(fresh);
        free(shipped);
        free(data);
    }
done:
    remove(path);
    free(text);
    free(ids);
}

/* ------------------------------------------------------------------------- */
/* The BPE trainer against a brute-force one, and its cost on text without spaces */

#define REF_MAX_VOCAB 512          /* the brute-force trainer's largest vocabulary */
#define REF_TEXT_BYTES 1500        /* each text the two trainers learn from */
#define REF_VOCAB 400              /* 143 merges at most */
#define DNA_BYTES 200000           /* random ACGT: one piece; the second text is twice this */
/* bpe_train's work (Bpe.work) per byte of distinct pieces is at most 9: 1 for the first
 * count of every pair, 5 count changes for each merge of two tokens into one (at most one
 * per byte), 3 sightings looked at (each pair made: one per byte at the start, two per
 * merge). Recounting every pair at every merge, as a loop without incremental counts does,
 * is 767 per byte here. */
#define WORK_PER_BYTE 9
/* The merges the code before incremental counts (recount every pair, re-encode every
 * changed piece at every merge) learned from random_text's first DNA_BYTES of ACGT (seed
 * 42) at vocab SHIPPED_VOCAB: FNV-1a 64 as merges_fnv computes it. */
#define DNA_MERGES_FNV 0x1826D29E933CF75Cull

/* n bytes drawn uniformly from alphabet (n_letters bytes, NUL allowed), by rand_sym's LCG
 * from *state. */
static void random_text(char *text, size_t n, const char *alphabet, size_t n_letters,
                        uint64_t *state) {
    for (size_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        text[i] = alphabet[(*state >> 33) % n_letters];
    }
}

/* The brute-force trainer's vocabulary: each token's bytes, by id. */
typedef struct {
    int n;                                                /* tokens */
    size_t len[REF_MAX_VOCAB];
    unsigned char bytes[REF_MAX_VOCAB][BPE_MAX_TOKEN_BYTES];
} RefVocab;

/* tokenizer_merge's lookup, by a scan of every token. */
static int ref_find(const void *vocab, const unsigned char *bytes, size_t len) {
    const RefVocab *v = vocab;
    for (int id = 0; id < v->n; id++)
        if (v->len[id] == len && memcmp(v->bytes[id], bytes, len) == 0) return id;
    return -1;
}

/* bpe_train's contract done the slow way: before each merge, every piece of the text, one
 * occurrence at a time, is encoded afresh from its bytes as tokenizer_encode does (whole if
 * it is a token, else tokenizer_merge: lowest id first, leftmost on ties) and every pair is
 * counted again; the most frequent pair wins, ties to the lower left id, then the lower
 * right id; a token over BPE_MAX_TOKEN_BYTES is never made; stop when no pair occurs twice.
 * Writes merges (n, 2) and their counts (n,); returns n, or -1 (out of memory). */
static int ref_train(const char *text, size_t len, int vocab_size, int (*merges)[2],
                     long *counts) {
    size_t V = (size_t)vocab_size;
    RefVocab *v = malloc(sizeof *v);
    long *pair = malloc(V * V * sizeof *pair);   /* (V, V) count of (left, right) */
    int *ids = malloc((len + 1) * sizeof *ids);
    int32_t *starts = malloc((len + 1) * sizeof *starts);
    int n_merges = -1;
    if (!v || !pair || !ids || !starts || vocab_size > REF_MAX_VOCAB) goto done;
    TokenizerMergeRules rules = {ref_find, v, NULL, 0, 0};
    for (v->n = 0; v->n < BPE_BYTE_TOKENS; v->n++) {
        v->len[v->n] = 1;
        v->bytes[v->n][0] = (unsigned char)v->n;
    }
    for (n_merges = 0; n_merges < vocab_size - BPE_BYTE_TOKENS - 1; n_merges++) {
        memset(pair, 0, V * V * sizeof *pair);
        for (size_t at = 0, end; at < len; at = end) {
            end = tokenizer_next_piece(text, len, at);
            const unsigned char *piece = (const unsigned char *)text + at;
            long n = 1;
            ids[0] = ref_find(v, piece, end - at);
            if (ids[0] < 0) n = tokenizer_merge(&rules, piece, end - at, ids, starts);
            if (n < 0) { n_merges = -1; goto done; }
            for (long i = 0; i + 1 < n; i++) pair[(size_t)ids[i] * V + (size_t)ids[i + 1]]++;
        }
        int left = -1, right = -1;
        for (int l = 0; l < v->n; l++)   /* in (left, right) order: the first maximum wins */
            for (int r = 0; r < v->n; r++)
                if (v->len[l] + v->len[r] <= BPE_MAX_TOKEN_BYTES &&
                    (left < 0 || pair[(size_t)l * V + (size_t)r] >
                                 pair[(size_t)left * V + (size_t)right])) {
                    left = l;
                    right = r;
                }
        if (left < 0 || pair[(size_t)left * V + (size_t)right] < 2) break;
        memcpy(v->bytes[v->n], v->bytes[left], v->len[left]);
        memcpy(v->bytes[v->n] + v->len[left], v->bytes[right], v->len[right]);
        v->len[v->n] = v->len[left] + v->len[right];
        v->n++;
        merges[n_merges][0] = left;
        merges[n_merges][1] = right;
        counts[n_merges] = pair[(size_t)left * V + (size_t)right];
    }
done:
    free(v);
    free(pair);
    free(ids);
    free(starts);
    return n_merges;
}

/* bpe_train learns the brute-force trainer's merges, counts and ties included, on random
 * texts: one piece with no word boundaries, words and runs of spaces, punctuation and
 * newlines, binary bytes, a two-letter alphabet of overlapping pairs, and a long run whose
 * doubled token would exceed BPE_MAX_TOKEN_BYTES. */
static void test_bpe_reference(void) {
    static const struct { const char *name, *alphabet; size_t letters, run; } texts[] = {
        {"ACGT, one piece", "ACGT", 4, 0},
        {"words and spaces", "abc  ", 5, 0},
        {"punctuation and newlines", "ab \n.,'", 7, 0},
        {"binary bytes", "\x00\xff\x80\xc3\xa9 a", 7, 0},
        {"aab, overlapping pairs", "aab", 3, 0},
        {"700 'x' then ab", "ab", 2, 700},
    };
    uint64_t state = 2026;
    char *text = malloc(REF_TEXT_BYTES);
    int (*merges)[2] = malloc(REF_VOCAB * sizeof *merges);
    long *counts = malloc(REF_VOCAB * sizeof *counts);
    if (!check_true(text && merges && counts, "bpe reference: buffers")) goto done;
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        memset(text, 'x', texts[k].run);
        random_text(text + texts[k].run, REF_TEXT_BYTES - texts[k].run, texts[k].alphabet,
                    texts[k].letters, &state);
        int n = ref_train(text, REF_TEXT_BYTES, REF_VOCAB, merges, counts);
        Bpe b;
        int trained = bpe_train(&b, text, REF_TEXT_BYTES, REF_VOCAB) == 0;
        if (!check_true(n >= 0 && trained, "bpe reference: %s: both trainers run",
                        texts[k].name)) {
            bpe_free(&b);   /* safe: bpe_train zeroed it */
            continue;
        }
        int first = 0;   /* the first merge that differs */
        while (first < n && first < b.n_merges && b.merges[first][0] == merges[first][0] &&
               b.merges[first][1] == merges[first][1] && b.merge_count[first] == counts[first])
            first++;
        check_true(b.n_merges == n && first == n && n > 10, "bpe: %s: bpe_train learns the "
                   "brute-force trainer's %d merges, counts included (got %d; the first %d "
                   "agree)", texts[k].name, n, b.n_merges, first);
        bpe_free(&b);
    }
done:
    free(text);
    free(merges);
    free(counts);
}

/* Text without word boundaries (random ACGT, one piece) at the shipped vocabulary: the
 * work grows linearly with the text, and the merges are the earlier code's. */
static void test_bpe_linear(void) {
    uint64_t state = 42;
    char *text = malloc(2 * DNA_BYTES);
    if (!check_true(text != NULL, "bpe linear: buffer")) return;
    random_text(text, 2 * DNA_BYTES, "ACGT", 4, &state);
    Bpe small, large;
    int trained = bpe_train(&small, text, DNA_BYTES, SHIPPED_VOCAB) == 0;
    if (trained && bpe_train(&large, text, 2 * DNA_BYTES, SHIPPED_VOCAB) != 0) {
        bpe_free(&small);
        trained = 0;
    }
    if (!check_true(trained, "bpe linear: train on %d and %d bytes of ACGT", DNA_BYTES,
                    2 * DNA_BYTES)) goto done;
    int all = SHIPPED_VOCAB - BPE_BYTE_TOKENS - 1;
    check_true(small.n_merges == all && large.n_merges == all,
               "bpe linear: %d merges from each (got %d and %d)", all, small.n_merges,
               large.n_merges);
    check_true(small.work <= (size_t)WORK_PER_BYTE * DNA_BYTES &&
               large.work <= (size_t)WORK_PER_BYTE * 2 * DNA_BYTES,
               "bpe: work on one piece of %d and %d bytes at most %d per byte (got %.2f and "
               "%.2f)", DNA_BYTES, 2 * DNA_BYTES, WORK_PER_BYTE,
               (double)small.work / DNA_BYTES, (double)large.work / (2 * DNA_BYTES));
    check_true(large.work <= small.work * 21 / 10, "bpe: twice the text, at most 2.1 times "
               "the work (got %.3f)", (double)large.work / (double)small.work);
    check_true(merges_fnv(&small) == DNA_MERGES_FNV, "bpe: %d bytes of ACGT give the merges "
               "recorded from the earlier code (FNV %016llx)", DNA_BYTES,
               (unsigned long long)merges_fnv(&small));
    bpe_free(&small);
    bpe_free(&large);
done:
    free(text);
}

/* bpe_train_logged: a line at the start and after each merge when every = 0, with the
 * same merges as bpe_train; none when the interval is never reached. */
static void test_bpe_progress(void) {
    const char *text = "ab ab ab abc abc";   /* 3 merges (test_bpe) */
    FILE *log = tmpfile(), *quiet = tmpfile();
    Bpe b;
    if (!check_true(log && quiet && bpe_train_logged(&b, text, strlen(text), 300, log, 0.0) == 0,
                    "bpe progress: train with a log")) goto done;
    int same = b.n_merges == 3 && b.merges[2][0] == 257 && b.merges[2][1] == 'c';
    bpe_free(&b);
    char line[128], expected[64];
    int lines = 0, ok = 1;
    rewind(log);
    while (fgets(line, sizeof line, log)) {
        snprintf(expected, sizeof expected, "bpe: %d/43 merges learned, ", lines);
        ok &= strncmp(line, expected, strlen(expected)) == 0;
        lines++;
    }
    check_true(same && ok && lines == 4, "bpe: every = 0 logs \"bpe: 0/43 merges learned, "
               "S s\" .. 3/43, one line each (got %d lines)", lines);
    int quiet_ok = bpe_train_logged(&b, text, strlen(text), 300, quiet, 1e9) == 0;
    bpe_free(&b);
    check_true(quiet_ok && ftell(quiet) == 0, "bpe: no line before the interval has passed");
done:
    if (log) fclose(log);
    if (quiet) fclose(quiet);
}

/* ------------------------------------------------------------------------- */
/* The train program: flags, exit codes, data, files, and crashes            */

#define TRAIN_ENV "OMP_NUM_THREADS=1"   /* tiny models: one thread is quickest; same bits */
#define TINY "-v 300 -L 1 -C 16 -H 2 -T 8 -B 4"   /* a model that trains in milliseconds */
#define CAP 4096                        /* paths and commands built here */

static char train_bin[CAP] = "./train";   /* absolute once main has run */
static const char *run_bin = "./run";

/* A new empty folder under /tmp, its path in dir (CAP bytes). Returns 0 or -1. */
static int make_temp_dir(char *dir) {
    format_into(dir, CAP, "/tmp/test_train_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static void remove_dir(const char *dir) {
    char command[CAP];
    format_into(command, sizeof command, "rm -rf '%s'", dir);
    check_run(command, NULL, NULL);
}

/* dir/name into path (CAP bytes); returns path. */
static char *join(char *path, const char *dir, const char *name) {
    format_into(path, CAP, "%s/%s", dir, name);
    return path;
}

static int write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* A small training text: 40 times two lines of Hamlet (3.6 KB). */
static int write_play(const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    for (int i = 0; i < 40; i++)
        fprintf(f, "To be, or not to be, that is the question %d.\nWhether 'tis nobler in the "
                "mind to suffer.\n", i);
    return fclose(f);
}

/* 1 if the files at a and b hold the same bytes. */
static int same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *da = check_read_file(a, &na), *db = check_read_file(b, &nb);
    int same = da && db && na == nb && memcmp(da, db, na) == 0;
    free(da);
    free(db);
    return same;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* Runs "TRAIN_ENV $TRAIN args"; returns the exit code; out and err as check_run. */
static int train(const char *args, char **out, char **err) {
    char command[3 * CAP];
    format_into(command, sizeof command, "%s %s %s", TRAIN_ENV, train_bin, args);
    return check_run(command, out, err);
}

/* Runs train with args, checks the exit code and that stderr (or stdout) has `message`. */
static void expect_train(const char *what, const char *args, int want_code, const char *message) {
    char *out = NULL, *err = NULL;
    int code = train(args, &out, &err);
    int has = (err && strstr(err, message)) || (out && strstr(out, message));
    check_true(code == want_code && has, "train %s: exit %d (want %d), output has \"%s\"%s%s",
               what, code, want_code, message, has ? "" : "; stderr: ", has || !err ? "" : err);
    free(out);
    free(err);
}

/* A usage error: exit 2 and exactly two stderr lines, "train: FLAG: PROBLEM (got X,
 * expected Y)" containing message, then the hint; no help text. */
static void expect_usage(const char *what, const char *args, const char *message) {
    char *out = NULL, *err = NULL;
    int code = train(args, &out, &err);
    const char *hint = "Try 'train --help' for the options.\n";
    const char *second = err ? strchr(err, '\n') : NULL;
    int one_line = err && second && !strcmp(second + 1, hint) && !strncmp(err, "train: ", 7) &&
                   strstr(err, "(got ") && strstr(err, ", expected ");
    int has = err && strstr(err, message) && (!second || strstr(err, message) < second);
    int ok = code == 2 && one_line && has && !(out && strstr(out, "Usage"));
    check_true(ok, "train %s: exit %d (want 2), one line with \"%s\" then the hint%s%s", what,
               code, message, ok || !err ? "" : "; stderr: ", ok || !err ? "" : err);
    free(out);
    free(err);
}

/* Flags: one-line usage errors, --name=value, and one test per exit-code row. */
static void test_cli(void) {
    char dir[CAP], text[CAP], model[CAP], tok[CAP], args[3 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "cli: temp folder")) return;
    if (!check_true(write_play(join(text, dir, "text.txt")) == 0, "cli: write a small text"))
        goto done;
    join(model, dir, "model.bin");
    join(tok, dir, "tok.bin");
    /* exit 2: usage errors, each one line naming the flag, then the hint */
    expect_usage("unknown flag", "--bogus 1", "--bogus: unknown option (got '--bogus'");
    expect_usage("unknown flag without a value", "--bogus", "--bogus: unknown option");
    expect_usage("unknown long flag with =", "--bogus=1", "--bogus: unknown option");
    expect_usage("malformed number", "-n 12x", "-n: invalid value (got '12x', expected an "
                 "integer in 0..10000000)");
    expect_usage("malformed number after =", "--steps=12x", "--steps: invalid value (got '12x'");
    expect_usage("out of range", "-p 0.95", "-p: invalid value (got '0.95', expected a number "
                 "in 0..0.9)");
    expect_usage("missing value", "-L", "-L: missing value (got nothing after it, expected an "
                 "integer in 1..64)");
    expect_usage("value given to a switch", "--resume=1", "--resume: takes no value");
    expect_usage("stray word", "model.bin", "model.bin: unexpected argument");
    expect_usage("control byte in an argument, shown as \\xHH", "\"$(printf 'x\\001y')\"",
                 "x\\x01y: unexpected argument (got 'x\\x01y'");
    expect_usage("heads not dividing width", "-C 64 -H 5", "-H: heads must divide the width "
                 "(got 5 heads for width 64");
    expect_usage("shape flags with -r", "-r -L 2", "-L: not allowed with -r (got -L with -r, "
                 "expected only -d, -o, -z, -e, -n, --sample, --threads, --max-memory and --force");
    expect_usage("warmup beyond the steps", "-n 10 -w 20", "-w: warmup exceeds the steps (got "
                 "-w 20 with -n 10");
    expect_usage("tokenizer onto the checkpoint", "-o a.bin -z a.bin", "-z: same file as the "
                 "checkpoint");
    expect_usage("an unknown position scheme", "--pos alibi", "--pos: unknown position scheme "
                 "(got 'alibi', expected learned (a table) or rope (rotary))");
    expect_usage("rope with an odd head size", "--pos rope -C 24 -H 8", "--pos: rope rotates "
                 "pairs of a head's dimensions (got head size 3 (-C 24 / -H 8), expected an "
                 "even head size)");
    expect_usage("--pos with -r (the checkpoint records it)", "-r --pos rope", "--pos: not "
                 "allowed with -r (got --pos with -r");
    /* exit 1: bad data */
    format_into(args, sizeof args, "-d %s/no_such_file.txt -o %s", dir, model);
    expect_train("missing data", args, 1, "no_such_file.txt: cannot open");
    /* exit 0: help, and a run (--steps=5 as --steps 5) */
    expect_train("--help", "--help", 0, "Usage: train [options]");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " --steps=5 --eval-every=5",
             text, model, tok);
    expect_train("--steps=5 (long option with =)", args, 0, "schedule: 5 steps");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 4 -e 2 --sample 7 --force",
                text, model, tok);
    expect_train("--sample 7: a greedy sample of 7 tokens after each checkpoint", args, 0,
                 "sample (7 tokens from a newline, greedy):");
    /* a run, then run generates from it, and -r with a new total */
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 20 -w 2 -e 10 --force", text,
             model, tok);
    expect_train("tiny end-to-end run", args, 0, "final: train");
    format_into(args, sizeof args, "%s %s -z %s -n 5 -t 0 -i To", run_bin, model, tok);
    char *out = NULL;
    int code = check_run(args, &out, NULL);
    check_true(code == 0 && out && strncmp(out, "To", 2) == 0,
               "run generates from the trained checkpoint (exit %d)", code);
    free(out);
    format_into(args, sizeof args, "-r -d %s -o %s -z %s", text, model, tok);
    expect_train("resume a finished run", args, 0, "resuming at step 20 of 20");
    format_into(args, sizeof args, "-r -d %s -o %s -z %s -n 10", text, model, tok);
    expect_train("-r with a total below the step reached", args, 2, "-n: new total out of "
                 "range (got 10, expected at least the step reached, 20");
    /* rotary positions: a run, run generates from its file, -r continues it */
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " --pos rope -n 10 -w 2 -e 5 "
                "--force", text, model, tok);
    expect_train("--pos rope: a tiny run", args, 0, "V 300, rotary positions: ");
    format_into(args, sizeof args, "%s %s -z %s -n 5 -t 0 -i To", run_bin, model, tok);
    char *err = NULL;
    code = check_run(args, &out, &err);
    check_true(code == 0 && out && strncmp(out, "To", 2) == 0 && err &&
               strstr(err, "fp32, rotary positions;"), "run generates from the rotary "
               "checkpoint and names its positions (exit %d)", code);
    free(out);
    free(err);
    format_into(args, sizeof args, "-r -d %s -o %s -z %s -n 12", text, model, tok);
    expect_train("--pos rope: -r continues the run", args, 0, "resuming at step 10 of 12");
done:
    remove_dir(dir);
}

/* Task: defaults fit the run (the warmup of 100 used to exceed -n 20). */
static void test_default_warmup(void) {
    char dir[CAP], text[CAP], args[3 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "warmup: temp folder")) return;
    if (write_play(join(text, dir, "text.txt")) == 0) {
        format_into(args, sizeof args, "-d %s -o %s/a.bin " TINY " -n 20", text, dir);
        expect_train("-n 20 without -w: warmup min(100, 20 / 10)", args, 0,
                     "schedule: 20 steps, warmup 2,");
        format_into(args, sizeof args, "-d %s -o %s/b.bin -z %s/b.tok " TINY " -n 5", text, dir,
                 dir);
        expect_train("-n 5 without -w: warmup at least 1", args, 0,
                     "schedule: 5 steps, warmup 1,");
        format_into(args, sizeof args, "-d %s -o %s/c.bin -z %s/c.tok " TINY " -n 20 -w 20",
                 text, dir, dir);
        expect_train("-w equal to -n", args, 0, "schedule: 20 steps, warmup 20,");
    }
    remove_dir(dir);
}

#define BINARY_RANDOM 16000       /* the binary file: random bytes, ... */
#define BINARY_ZEROS 50000        /* ... a run of NULs (one piece), random bytes again */
#define BINARY_SECONDS 20.0       /* a generous bound: it takes ~0.2 s */

/* Task: too little text, none, and binary data, each with a clear outcome. */
static void test_bad_data(void) {
    char dir[CAP], path[CAP], args[3 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "data: temp folder")) return;
    if (write_bytes(join(path, dir, "empty.txt"), "", 0) == 0) {
        format_into(args, sizeof args, "-d %s -o %s/e.bin", path, dir);
        expect_train("empty data", args, 1, "empty.txt: empty file (got 0 bytes, expected "
                     "text to train on)");
    }
    const char *line = "Short text, far less than a context.";
    if (write_bytes(join(path, dir, "short.txt"), line, strlen(line)) == 0) {
        format_into(args, sizeof args, "-d %s -o %s/s.bin", path, dir);
        expect_train("text shorter than one context window", args, 1, "short.txt: too little "
                     "text for a context of 256 tokens (got ");
        expect_train("... says how many tokens it needs", args, 1, "expected at least 258 and 2)");
        char tok[CAP];
        check_true(!exists(join(tok, dir, "s.bin")) && !exists(join(tok, dir, "tokenizer.bin")) &&
                   !exists(join(tok, dir, "tokenizer.bin.tmp")),
                   "data: a refused run leaves no checkpoint, tokenizer or temporary behind");
    }
    /* not regular files: a folder or a FIFO as the text (opening a FIFO would block), a
     * folder as an output, which --force must not remove */
    char other[CAP];
    if (mkdir(join(path, dir, "folder"), 0700) == 0 &&
        mkfifo(join(other, dir, "fifo"), 0600) == 0) {
        format_into(args, sizeof args, "-d %s -o %s/f.bin", path, dir);
        expect_train("a folder as the text", args, 1, "folder: not a regular file (got a "
                     "folder, expected a readable text file)");
        format_into(args, sizeof args, "-d %s -o %s/f.bin", other, dir);
        expect_train("a FIFO as the text", args, 1, "fifo: not a regular file (got a FIFO, "
                     "expected a readable text file)");
        format_into(args, sizeof args, "--force -d %s -o %s", other, path);
        expect_train("--force with a folder as the checkpoint", args, 1, "folder: not a regular "
                     "file (got a folder, expected a path for the checkpoint)");
        check_true(access(path, F_OK) == 0, "data: --force left the folder in place");
        format_into(args, sizeof args, "-r -d %s -o %s/none.bin", other, dir);
        expect_train("-r without a checkpoint names the checkpoint", args, 1,
                     "none.bin: nothing to resume");
    }
    unsigned char *bytes = malloc(2 * BINARY_RANDOM + BINARY_ZEROS);
    if (bytes) {
        uint64_t s = 2024;
        for (int i = 0; i < 2 * BINARY_RANDOM + BINARY_ZEROS; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            bytes[i] = i >= BINARY_RANDOM && i < BINARY_RANDOM + BINARY_ZEROS ? 0 :
                       (unsigned char)(s >> 56);
        }
        if (write_bytes(join(path, dir, "data.bin"), bytes, 2 * BINARY_RANDOM + BINARY_ZEROS)
            == 0) {
            format_into(args, sizeof args, "-d %s -o %s/b.bin " TINY " -n 3", path, dir);
            double start = seconds_now();
            char *out = NULL;
            int code = train(args, &out, NULL);
            double seconds = seconds_now() - start;
            check_true(code == 0 && out && strstr(out, "data.bin: not plain text (") &&
                       strstr(out, "final: train") && seconds < BINARY_SECONDS,
                       "binary data (random bytes, %d NULs): says it is not plain text, "
                       "trains byte-level BPE on it and finishes (exit %d, %.2f s)",
                       BINARY_ZEROS, code, seconds);
            free(out);
        }
        free(bytes);
    }
    remove_dir(dir);
}

/* Task: a new run never overwrites a model or tokenizer without --force. */
static void test_no_overwrite(void) {
    char dir[CAP], text[CAP], model[CAP], state[CAP], tok[CAP], keep[CAP], args[3 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "overwrite: temp folder")) return;
    if (write_play(join(text, dir, "text.txt")) != 0) goto done;
    join(model, dir, "model.bin");
    join(state, dir, "model.bin.state");
    join(tok, dir, "tokenizer.bin");
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 4", text, model);
    expect_train("first run into an empty folder", args, 0, "final: train");
    char *before = NULL;
    size_t n_before = 0;
    before = check_read_file(model, &n_before);
    join(keep, dir, "keep.tok");
    char command[3 * CAP];
    format_into(command, sizeof command, "cp %s %s", tok, keep);
    check_run(command, NULL, NULL);
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 6 -s 9", text, model);
    expect_train("same -o again", args, 1, "model.bin: the checkpoint exists already (got an "
                 "existing file, expected a new path; pass --force to overwrite it, or -r");
    size_t n_after = 0;
    char *after = check_read_file(model, &n_after);
    check_true(before && after && n_before == n_after && !memcmp(before, after, n_after) &&
               same_file(tok, keep), "overwrite: the refused run left model and tokenizer as "
               "they were");
    free(after);
    /* a tokenizer alone is protected too: another text's run is refused after learning
     * its merges, before writing anything; the same text's tokenizer (the same bytes)
     * stays for a second model */
    remove(model);
    remove(state);
    char other[CAP];
    FILE *f = fopen(join(other, dir, "other.txt"), "wb");
    if (f) {
        for (int i = 0; i < 40; i++)
            fprintf(f, "Now is the winter of our discontent %d,\nmade glorious summer.\n", i);
        fclose(f);
    }
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 6 -s 9", other, model);
    expect_train("existing tokenizer, another text", args, 1, "tokenizer.bin: the tokenizer "
                 "exists already and this text trains another one (got a file of other merges");
    char tok_temp[CAP];
    check_true(!exists(model) && same_file(tok, keep) &&
               !exists(join(tok_temp, dir, "tokenizer.bin.tmp")), "overwrite: nothing written "
               "(and no temporary left) when the tokenizer of another text exists");
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 6 -s 9", text, model);
    expect_train("existing tokenizer, the same text", args, 0, "tokenizer.bin already: kept");
    check_true(exists(model) && same_file(tok, keep), "overwrite: the same text's tokenizer "
               "stays, byte for byte, beside a second model");
    remove(model);
    remove(state);
    /* --force, but too little text: refused before anything is replaced */
    char tiny_text[CAP];
    if (write_bytes(join(tiny_text, dir, "tiny.txt"), "a few words", 11) == 0) {
        format_into(args, sizeof args, "-d %s -o %s --force", tiny_text, model);
        expect_train("--force with too little text", args, 1, "too little text");
        check_true(same_file(tok, keep), "overwrite: a refused --force run keeps the tokenizer");
    }
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 6 -s 9 --force", text, model);
    expect_train("--force", args, 0, "final: train");
    format_into(args, sizeof args, "-r -d %s -o %s -n 8", text, model);
    expect_train("-r resumes that very file", args, 0, "resuming at step 6 of 8");
    /* the defaults (weights/model.bin beside the current folder) are protected as well */
    char weights[CAP], precious[CAP];
    format_into(weights, sizeof weights, "%s/weights", dir);
    if (mkdir(weights, 0700) == 0 &&
        write_bytes(join(precious, weights, "model.bin"), "trained", 7) == 0) {
        format_into(command, sizeof command, "cd %s && %s %s -d text.txt " TINY " -n 2", dir,
                 TRAIN_ENV, train_bin);
        char *err = NULL;
        int code = check_run(command, NULL, &err);
        size_t n = 0;
        char *kept = check_read_file(precious, &n);
        check_true(code == 1 && err && strstr(err, "weights/model.bin: the checkpoint exists") &&
                   kept && n == 7 && !memcmp(kept, "trained", 7),
                   "overwrite: ./train with no -o leaves an existing weights/model.bin alone "
                   "(exit %d)", code);
        free(kept);
        free(err);
    }
    free(before);
done:
    remove_dir(dir);
}

/* Slots of the optimizer state header (weights/README.md), and where the moments start. */
enum { SLOT_VERSION = 1, SLOT_STEP = 2, SLOT_N_PARAMS_LO = 3, SLOT_BETA2 = 12, SLOT_EMA = 27,
       SLOT_ATTN_DROPOUT = 28, SLOT_TOKEN_NOISE = 29, SLOT_UNUSED = 40 };
#define STATE_HEADER_BYTES (64 * 4)

/* Write state (n bytes) to path after fix(state) changed it; then expect -r to fail. */
static void expect_bad_state(const char *what, const char *args, const char *state_path,
                             const unsigned char *pristine, size_t n, size_t new_n,
                             void (*fix)(unsigned char *, size_t), const char *message) {
    unsigned char *copy = malloc(n + 1);
    if (!copy) return;
    memcpy(copy, pristine, n);
    copy[n] = 0x5A;   /* the byte a "trailing bytes" case appends */
    if (fix) fix(copy, n);
    char full[CAP];
    format_into(full, sizeof full, "%s: %s", state_path, message);
    if (write_bytes(state_path, copy, new_n) == 0) expect_train(what, args, 1, full);
    free(copy);
}

static void put_slot(unsigned char *state, int slot, uint32_t value) {
    for (int byte = 0; byte < 4; byte++)
        state[4 * slot + byte] = (unsigned char)(value >> (8 * byte));
}
static uint32_t get_slot(const unsigned char *state, int slot) {
    uint32_t v = 0;
    for (int byte = 0; byte < 4; byte++) v |= (uint32_t)state[4 * slot + byte] << (8 * byte);
    return v;
}
/* The corruptions: each changes a copy of a state file of n bytes. */
static void flip_step(unsigned char *s, size_t n) {
    (void)n;
    put_slot(s, SLOT_STEP, get_slot(s, SLOT_STEP) ^ (1u << 30));
}
static void step_minus_one(unsigned char *s, size_t n) {
    (void)n;
    put_slot(s, SLOT_STEP, get_slot(s, SLOT_STEP) - 1);
}
static void version_one(unsigned char *s, size_t n) { (void)n; put_slot(s, SLOT_VERSION, 1); }
static void put_float_slot(unsigned char *s, int slot, float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    put_slot(s, slot, bits);
}
static void beta2_above_one(unsigned char *s, size_t n) {
    (void)n;
    put_float_slot(s, SLOT_BETA2, 1.5f);
}
static void ema_above_one(unsigned char *s, size_t n) {
    (void)n;
    put_float_slot(s, SLOT_EMA, 1.5f);
}
static void attn_dropout_one(unsigned char *s, size_t n) {
    (void)n;
    put_float_slot(s, SLOT_ATTN_DROPOUT, 1.0f);
}
static void token_noise_high(unsigned char *s, size_t n) {
    (void)n;
    put_float_slot(s, SLOT_TOKEN_NOISE, 0.95f);
}
static void unused_slot(unsigned char *s, size_t n) { (void)n; put_slot(s, SLOT_UNUSED, 7); }
static void huge_n_params(unsigned char *s, size_t n) {   /* 2^64 - 1: a size that would wrap */
    (void)n;
    put_slot(s, SLOT_N_PARAMS_LO, 0xFFFFFFFFu);
    put_slot(s, SLOT_N_PARAMS_LO + 1, 0xFFFFFFFFu);
}
static void nan_moment(unsigned char *s, size_t n) {   /* adam_m[7] */
    float f = NAN;
    (void)n;
    memcpy(s + STATE_HEADER_BYTES + 7 * sizeof(float), &f, sizeof f);
}
/* Float i of array `array` (0 adam_m, 1 adam_v, 2 the weights) set to f; the parameter
 * count is the state's own (slot 3; these files are far below 2^32 parameters). */
static void put_state_float(unsigned char *s, int array, size_t i, float f) {
    size_t n_params = get_slot(s, SLOT_N_PARAMS_LO);
    memcpy(s + STATE_HEADER_BYTES + ((size_t)array * n_params + i) * sizeof f, &f, sizeof f);
}
static void negative_v(unsigned char *s, size_t n) { (void)n; put_state_float(s, 1, 0, -1.0f); }
static void nan_weight(unsigned char *s, size_t n) { (void)n; put_state_float(s, 2, 5, NAN); }

/* State: the runs whose files the checks use, in dir on text: A at model (a.bin), B of
 * the same shape with another seed (b.bin), C of another shape (c.bin). */
static void state_runs(const char *dir, const char *text, const char *model) {
    char args[3 * CAP];
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 6 -e 3", text, model);
    expect_train("state: run A", args, 0, "final: train");
    format_into(args, sizeof args, "-d %s -o %s/b.bin -z %s/b.tok " TINY " -n 6 -e 3 -s 2", text,
             dir, dir);
    expect_train("state: run B, same shape, another seed", args, 0, "final: train");
    format_into(args, sizeof args, "-d %s -o %s/c.bin -z %s/c.tok -v 300 -L 1 -C 32 -H 2 -T 8 -B 4 "
             "-n 6 -e 3", text, dir, dir);
    expect_train("state: run C, another shape", args, 0, "final: train");
}

/* State: A's state (pristine, n bytes) written to state cut, lengthened or with one field
 * broken, each refused by resume (-r) with its message. */
static void state_corruptions(const char *resume, const char *state,
                              const unsigned char *pristine, size_t n) {
    expect_bad_state("-r, state truncated by 4 bytes", resume, state, pristine, n, n - 4, NULL,
                     "truncated (got ");
    expect_bad_state("-r, state with a trailing byte", resume, state, pristine, n, n + 1, NULL,
                     "trailing bytes (got ");
    expect_bad_state("-r, state's step with a bit flipped", resume, state, pristine, n, n,
                     flip_step, "bad step in the optimizer state (got 1073741830, expected 0..6)");
    expect_bad_state("-r, state's step off by one", resume, state, pristine, n, n,
                     step_minus_one, "corrupt optimizer state (got checksum ");
    expect_bad_state("-r, state with a NaN moment", resume, state, pristine, n, n, nan_moment,
                     "adam_m[7] is not finite (got nan");
    expect_bad_state("-r, state with a negative second moment", resume, state, pristine, n, n,
                     negative_v, "adam_v[0] is negative");
    expect_bad_state("-r, state with beta2 1.5", resume, state, pristine, n, n, beta2_above_one,
                     "bad beta2 in the optimizer state (got 1.5, expected a number in [0, 1))");
    expect_bad_state("-r, state with attention dropout 1", resume, state, pristine, n, n,
                     attn_dropout_one, "bad attention dropout in the optimizer state (got 1, "
                     "expected a number in [0, 0.9])");
    expect_bad_state("-r, state with token noise 0.95", resume, state, pristine, n, n,
                     token_noise_high, "bad token noise in the optimizer state (got 0.95, "
                     "expected a number in [0, 0.9])");
    expect_bad_state("-r, state with a NaN training weight (beside the average)", resume, state,
                     pristine, n, n, nan_weight, "weight 5 is not finite (got nan");
    expect_bad_state("-r, state with moving-average decay 1.5", resume, state, pristine, n, n,
                     ema_above_one, "bad moving-average decay in the optimizer state (got 1.5, "
                     "expected a number in [0, 0.99999])");
    expect_bad_state("-r, state of format version 1", resume, state, pristine, n, n,
                     version_one, "not an optimizer state of this trainer (got magic");
    expect_bad_state("-r, state with an unused slot set", resume, state, pristine, n, n,
                     unused_slot, "bad optimizer state header (got 7 in unused slot 40");
    expect_bad_state("-r, state with 2^64 - 1 parameters", resume, state, pristine, n, n,
                     huge_n_params, "state of another model shape (got T 8, V 300, L 1, NH 2, "
                     "C 16, 18446744073709551615 parameters");
}

/* State: the whole state of run B (same shape) or C (another shape) in place of A's. */
static void state_of_other_runs(const char *dir, const char *resume, const char *state) {
    char other[CAP];
    size_t n_other = 0;
    unsigned char *b_state = check_read_file(join(other, dir, "b.bin.state"), &n_other);
    if (b_state) {
        expect_bad_state("-r, the state of another model of the same shape", resume, state,
                         b_state, n_other, n_other, NULL, "state of another checkpoint (got ");
        free(b_state);
    }
    unsigned char *c_state = check_read_file(join(other, dir, "c.bin.state"), &n_other);
    if (c_state) {
        expect_bad_state("-r, the state of a model of another shape", resume, state, c_state,
                         n_other, n_other, NULL, "state of another model shape (got T 8, V 300, "
                         "L 1, NH 2, C 32");
        free(c_state);
    }
}

/* State: the state of an earlier checkpoint of the same run: run D stops at step 3, its
 * state is kept, the run is resumed to step 6; that old state beside the new checkpoint
 * is refused, naming the step it belongs to. */
static void state_of_earlier_step(const char *dir, const char *text) {
    char args[3 * CAP], d_model[CAP], d_state[CAP], d_tok[CAP];
    join(d_model, dir, "d.bin");
    join(d_state, dir, "d.bin.state");
    join(d_tok, dir, "d.tok");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 3 -e 3", text, d_model, d_tok);
    expect_train("state: run D to step 3", args, 0, "final: train");
    size_t n_d3 = 0;
    unsigned char *d3_state = check_read_file(d_state, &n_d3);
    format_into(args, sizeof args, "-r -d %s -o %s -z %s -n 6", text, d_model, d_tok);
    expect_train("state: run D resumed to step 6", args, 0, "resuming at step 3 of 6");
    if (check_true(d3_state != NULL, "state: read D's state of step 3")) {
        char message[CAP];
        format_into(message, sizeof message, "%s: state of another checkpoint (got %s with "
                    "checksum ", d_state, d_model);
        if (write_bytes(d_state, d3_state, n_d3) == 0)
            expect_train("-r, the state of step 3 beside the checkpoint of step 6 of the same "
                         "run", args, 1, message);
        expect_train("-r, ... and the message names the step of the state", args, 1,
                     "of the step-3 checkpoint the state was saved with)");
        free(d3_state);
    }
}

/* State: a truncated checkpoint (model) beside its intact state (pristine, n bytes) is
 * named as such; with both files as they were, resume goes on from step 6. */
static void state_checkpoint_truncated(const char *resume, const char *model,
                                       const char *state, const unsigned char *pristine,
                                       size_t n) {
    size_t n_model = 0;
    unsigned char *model_bytes = check_read_file(model, &n_model);
    if (model_bytes && write_bytes(state, pristine, n) == 0 &&
        write_bytes(model, model_bytes, n_model - 4) == 0) {
        char message[CAP];
        format_into(message, sizeof message, "%s: truncated (got %zu bytes", model, n_model - 4);
        expect_train("-r, checkpoint truncated", resume, 1, message);
    }
    if (model_bytes && write_bytes(model, model_bytes, n_model) == 0 &&
        write_bytes(state, pristine, n) == 0)
        expect_train("-r with the intact state", resume, 0, "resuming at step 6 of 8");
    free(model_bytes);
}

/* Task: a corrupt or mismatched state file is refused, naming the state file. */
static void test_state_file(void) {
    char dir[CAP], text[CAP], model[CAP], state[CAP], resume[3 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "state: temp folder")) return;
    if (write_play(join(text, dir, "text.txt")) != 0) goto done;
    join(model, dir, "a.bin");
    join(state, dir, "a.bin.state");
    state_runs(dir, text, model);
    size_t n = 0;
    unsigned char *pristine = check_read_file(state, &n);
    if (!check_true(pristine && n > STATE_HEADER_BYTES, "state: read A's state")) goto done;
    format_into(resume, sizeof resume, "-r -d %s -o %s -n 8", text, model);
    state_corruptions(resume, state, pristine, n);
    state_of_other_runs(dir, resume, state);
    state_of_earlier_step(dir, text);
    state_checkpoint_truncated(resume, model, state, pristine, n);
    free(pristine);
done:
    remove_dir(dir);
}

/* Task: a save interrupted between its two renames is finished by trainer_finish_save;
 * a successful save leaves no temporaries; a failed one removes them. */
static void test_interrupted_save(void) {
    char dir[CAP], path[CAP], state[CAP], next[CAP], next_state[CAP], temp[CAP];
    int *tokens = malloc(sizeof(int) * RUN_TOKENS);
    float losses[RUN_STEPS];
    Trainer a, b;
    if (!check_true(tokens && make_temp_dir(dir) == 0, "interrupted save: temp folder")) {
        free(tokens);
        return;
    }
    make_stream(tokens, RUN_TOKENS);
    join(path, dir, "m.bin");
    join(state, dir, "m.bin.state");
    join(next, dir, "n.bin");
    join(next_state, dir, "n.bin.state");
    join(temp, dir, "m.bin.tmp");
    if (!check_true(run_init(&a) == 0, "interrupted save: init")) goto done;
    run_steps(&a, tokens, 3, losses);
    int saved = trainer_save(&a, path, state, NULL) == 0;
    char state_temp[CAP];
    format_into(state_temp, sizeof state_temp, "%s.tmp", state);
    check_true(saved && !exists(temp) && !exists(state_temp) &&
               trainer_finish_save(path, state, NULL) == 0,
               "save: no temporaries left; a matching pair needs no finishing");
    run_steps(&a, tokens, 4, losses);
    saved = saved && trainer_save(&a, next, next_state, NULL) == 0;
    /* the crash: the step-4 state is in place, the step-4 checkpoint still in m.bin.tmp */
    if (!check_true(saved && rename(next_state, state) == 0 && rename(next, temp) == 0,
                    "interrupted save: staged")) goto free_a;
    int refused = trainer_load(&b, path, state, 0) != 0;
    int finished = trainer_finish_save(path, state, NULL);
    int loaded = trainer_load(&b, path, state, 0) == 0;
    check_true(refused && finished == 1 && loaded && b.step == 4 && !exists(temp) &&
               memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0 &&
               memcmp(a.adam_v, b.adam_v, a.n_params * sizeof(float)) == 0,
               "interrupted save: the new state with the old checkpoint is refused; "
               "trainer_finish_save renames m.bin.tmp (got %d) and step 4 loads exactly",
               finished);
    trainer_free(&b);
    /* failed saves leave no temporaries: a missing folder; a state path that is a folder
     * (its rename fails); a checkpoint temporary that cannot be written */
    char missing[CAP], bad[CAP], bad_state[CAP], bad_temp[CAP], bad_state_temp[CAP];
    format_into(missing, sizeof missing, "%s/no/such/folder/m.bin", dir);
    check_true(trainer_save(&a, missing, NULL, NULL) != 0, "save into a missing folder fails");
    join(bad, dir, "s.bin");
    format_into(bad_state, sizeof bad_state, "%s.state", bad);
    format_into(bad_temp, sizeof bad_temp, "%s.tmp", bad);
    format_into(bad_state_temp, sizeof bad_state_temp, "%s.tmp", bad_state);
    int failed = mkdir(bad_state, 0700) == 0 && trainer_save(&a, bad, bad_state, NULL) != 0;
    check_true(failed && !exists(bad) && !exists(bad_temp) && !exists(bad_state_temp),
               "save whose state rename fails: refused, no checkpoint, no temporaries left");
    rmdir(bad_state);
    failed = mkdir(bad_temp, 0700) == 0 && trainer_save(&a, bad, bad_state, NULL) != 0;
    check_true(failed && !exists(bad) && !exists(bad_state) && !exists(bad_state_temp),
               "save whose checkpoint temporary cannot be written: refused, the state's "
               "temporary removed");
    rmdir(bad_temp);
free_a:
    trainer_free(&a);
done:
    remove_dir(dir);
    free(tokens);
}

#define KILLS 20                  /* kill -9 this many runs during their saves */
#define KILL_ATTEMPTS 60          /* at most this many starts (a run may finish first) */
#define KILL_STEPS 40             /* each run: 40 steps, a checkpoint after every one */
#define KILL_TIMEOUT 60.0         /* seconds to wait for a run's first checkpoint */
#define POLL_NS 200000L           /* 0.2 ms between looks at the folder */

/* Start "exec $TRAIN args" with stdout and stderr to /dev/null, one thread. */
static pid_t spawn_train(const char *args) {
    char command[3 * CAP];
    format_into(command, sizeof command, "exec %s %s >/dev/null 2>&1", train_bin, args);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("OMP_NUM_THREADS", "1", 1);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void sleep_seconds(double seconds) {
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Wait until path exists while pid runs: 1 (it exists, pid still running), 0 (pid exited,
 * *status set), -1 (timeout). */
static int wait_for_file(pid_t pid, const char *path, int *status) {
    double start = seconds_now();
    while (seconds_now() - start < KILL_TIMEOUT) {
        if (exists(path)) return 1;
        if (waitpid(pid, status, WNOHANG) == pid) return 0;
        sleep_seconds(POLL_NS * 1e-9);
    }
    return -1;
}

/* Task: training never loses work. A real ./train checkpointing every step is killed
 * with SIGKILL at random moments; each time the last checkpoint must load in run's
 * model_load, and -r must resume from it and end with exactly the bits of the
 * uninterrupted run. */
static void test_kill_during_save(void) {
    char dir[CAP], text[CAP], model[CAP], state[CAP], tok[CAP], ref[CAP], args[3 * CAP];
    char resume[3 * CAP], model_temp[CAP], state_temp[CAP], tok_temp[CAP];
    if (!check_true(make_temp_dir(dir) == 0, "kill: temp folder")) return;
    if (write_play(join(text, dir, "text.txt")) != 0) goto done;
    join(model, dir, "m.bin");
    join(state, dir, "m.bin.state");
    join(tok, dir, "tok.bin");
    join(ref, dir, "ref.bin");
    join(model_temp, dir, "m.bin.tmp");
    join(state_temp, dir, "m.bin.state.tmp");
    join(tok_temp, dir, "tok.bin.tmp");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n %d -w 2 -e 1", text, model, tok,
             KILL_STEPS);
    format_into(resume, sizeof resume, "-r -d %s -o %s -z %s -e 1000000", text, model, tok);

    /* the uninterrupted run: its final checkpoint, and how long its saving phase lasts */
    int status = 0;
    pid_t pid = spawn_train(args);
    int seen = pid > 0 ? wait_for_file(pid, model, &status) : -1;
    double first = seconds_now();
    if (seen == 1) waitpid(pid, &status, 0);
    double window = seconds_now() - first;
    if (!check_true(seen >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                    rename(model, ref) == 0, "kill: the uninterrupted reference run")) goto done;

    uint64_t rng = 4242;
    int kills = 0, attempts = 0, in_save = 0, loaded = 0, resumed = 0, finished = 0;
    int identical = 0, clean = 0, late = 0;
    while (kills < KILLS && attempts < KILL_ATTEMPTS) {
        attempts++;
        const char *files[] = {model, state, tok, model_temp, state_temp, tok_temp};
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) remove(files[i]);
        pid = spawn_train(args);
        if (pid <= 0 || wait_for_file(pid, model, &status) != 1) {
            if (pid > 0) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
            }
            continue;
        }
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        sleep_seconds(window * (double)(rng >> 11) / 9007199254740992.0);   /* [0, window) */
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        if (!WIFSIGNALED(status)) {   /* it finished before the kill */
            late++;
            window *= 0.8;   /* the reference run was slow (a busy machine): aim earlier */
            continue;
        }
        kills++;
        in_save += exists(model_temp) || exists(state_temp);
        Model m;
        if (model_load(&m, model, KILL_STEPS) == 0) loaded++;
        model_free(&m);
        char *out = NULL;
        int code = train(resume, &out, NULL);
        resumed += code == 0 && out && strstr(out, "resuming at step ") != NULL;
        finished += out && strstr(out, "finished the interrupted save") != NULL;
        free(out);
        identical += same_file(model, ref);
        clean += !exists(model_temp) && !exists(state_temp);
    }
    check_true(kills == KILLS && loaded == kills && resumed == kills && identical == kills &&
               clean == kills,
               "kill -9 during training (%d attempts, %d finished first, window %.0f ms): %d "
               "kills, %d with a save in progress, %d loaded by model_load, %d resumed by -r "
               "(%d finishing an interrupted save), %d bit-identical to the uninterrupted run, "
               "%d without temporaries left", attempts, late, window * 1e3, kills, in_save,
               loaded, resumed, finished, identical, clean);
done:
    remove_dir(dir);
}

/* The rename system calls: rename() is rename on x86-64, renameat or renameat2 elsewhere
 * (aarch64); strace's '?' takes the names this machine has. */
#define RENAMES "?rename,?renameat,?renameat2"

/* 1 if strace can run a program here (it is how the kill points are injected). */
static int strace_works(void) {
    return check_run("strace -qq -o /dev/null true 2>/dev/null", NULL, NULL) == 0;
}

/* Task: a run killed at any moment of its first save, or just before or after it,
 * recovers: -r finishes the save (or, killed before any checkpoint, the same command
 * starts the run again: nothing of it is in place), and the run ends bit-identical to
 * an uninterrupted one. strace kills it (SIGKILL) at the K-th rename or fsync: the first
 * save's three renames (state, checkpoint, tokenizer), the next save's first, and fsyncs
 * before and during the first save. A run killed between the first save's renames could
 * not be resumed ("nothing to resume"), nor started again (its state existed). */
static void test_first_save_kills(void) {
    if (!strace_works()) {
        check_skip("strace is missing or cannot trace here: the first-save kill points");
        return;
    }
    char dir[CAP], text[CAP], model[CAP], tok[CAP], ref[CAP], ref_tok[CAP], args[3 * CAP];
    char resume[3 * CAP], command[4 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "first-save kills: temp folder")) return;
    if (write_play(join(text, dir, "text.txt")) != 0) goto done;
    join(model, dir, "m.bin");
    join(tok, dir, "tok.bin");
    join(ref, dir, "ref.bin");
    join(ref_tok, dir, "ref_tok.bin");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 3 -w 1 -e 1", text, model,
                tok);
    format_into(resume, sizeof resume, "-r -d %s -o %s -z %s", text, model, tok);
    if (!check_true(train(args, NULL, NULL) == 0 && rename(model, ref) == 0 &&
                    rename(tok, ref_tok) == 0, "first-save kills: the reference run")) goto done;
    /* the syscall and its count: rename 1-3 the first save, 4 the second; fsync 1 the
     * tokenizer's temporary, 2 the first state's, 3 the first checkpoint's */
    const struct { const char *call; int when; const char *point; } kills[] = {
        {"fsync", 1, "before the first save (the tokenizer's temporary synced)"},
        {"fsync", 2, "during the first save, before its renames"},
        {RENAMES, 1, "at the first save's state rename"},
        {RENAMES, 2, "between the first save's state and checkpoint renames"},
        {RENAMES, 3, "between the first save's checkpoint and tokenizer renames"},
        {RENAMES, 4, "after the first save, at the second's"},
    };
    for (size_t i = 0; i < sizeof kills / sizeof kills[0]; i++) {
        format_into(command, sizeof command, "cd %s && rm -f m.bin* tok.bin*", dir);
        check_run(command, NULL, NULL);
        format_into(command, sizeof command, "%s strace -f -qq -o /dev/null -e trace=%s -e "
                    "inject=%s:signal=KILL:when=%d %s %s >/dev/null 2>&1", TRAIN_ENV,
                    kills[i].call, kills[i].call, kills[i].when, train_bin, args);
        int killed = check_run(command, NULL, NULL) != 0;
        char *out = NULL, *err = NULL;
        int code = train(resume, &out, &err);
        const char *how = "-r";
        if (code != 0 && err && strstr(err, "nothing to resume")) {
            free(out);
            free(err);
            out = err = NULL;
            code = train(args, &out, &err);   /* the same command again, without --force */
            how = "the same command again";
        }
        int identical = code == 0 && same_file(model, ref) && same_file(tok, ref_tok);
        format_into(command, sizeof command, "ls -a %s | grep -q -e '\\.tmp' -e '\\.lock'",
                    dir);
        int clean = check_run(command, NULL, NULL) != 0;
        check_true(killed && identical && clean, "kill %s (%s %d): recovered by %s (exit %d), "
                   "bit-identical to the uninterrupted run, no temporary or lock left%s%s",
                   kills[i].point, strcmp(kills[i].call, RENAMES) ? kills[i].call : "rename",
                   kills[i].when, how, code,
                   err && code ? "; stderr: " : "", err && code ? err : "");
        free(out);
        free(err);
    }
done:
    remove_dir(dir);
}

/* Task: one trainer per output. Two trainers on one -o both passed the "exists already"
 * checks (nothing existed yet) and wrote the same temporaries, leaving a mix of two
 * runs. Now the second is refused by name while the first holds the lock: first with
 * this process holding m.bin.lock, then with two trainers started together. */
static void test_one_writer(void) {
    char dir[CAP], text[CAP], model[CAP], tok[CAP], lock_path[CAP], args[3 * CAP];
    char want[128];
    if (!check_true(make_temp_dir(dir) == 0, "one writer: temp folder")) return;
    if (write_play(join(text, dir, "text.txt")) != 0) goto done;
    join(model, dir, "m.bin");
    join(tok, dir, "tok.bin");
    format_into(lock_path, sizeof lock_path, "%s.lock", model);
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 300 -w 1 -e 1000", text,
                model, tok);
    int fd = open(lock_path, O_RDWR | O_CREAT, 0666);
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (check_true(fd >= 0 && fcntl(fd, F_SETLK, &lock) == 0, "one writer: hold m.bin.lock")) {
        format_into(want, sizeof want, "m.bin: another process (pid %ld) is writing it",
                    (long)getpid());
        expect_train("while another process writes its checkpoint", args, 1, want);
        check_true(!exists(model) && !exists(tok), "one writer: the refused trainer wrote "
                   "nothing");
    }
    if (fd >= 0) close(fd);
    remove(lock_path);
    /* two at once: exactly one trains; the other is refused, by the lock or, if it came
     * late, by the first one's files */
    pid_t a = spawn_train(args), b = spawn_train(args);
    int status_a = 0, status_b = 0;
    if (a > 0) waitpid(a, &status_a, 0);
    if (b > 0) waitpid(b, &status_b, 0);
    int ok_a = WIFEXITED(status_a) && WEXITSTATUS(status_a) == 0;
    int ok_b = WIFEXITED(status_b) && WEXITSTATUS(status_b) == 0;
    int refused = WIFEXITED(status_a) && WIFEXITED(status_b) &&
                  WEXITSTATUS(status_a) + WEXITSTATUS(status_b) == 1;
    check_true(a > 0 && b > 0 && ok_a != ok_b && refused && !exists(lock_path),
               "two trainers started together on one -o: one trains, the other is refused "
               "(exits %d and %d)", WIFEXITED(status_a) ? WEXITSTATUS(status_a) : -1,
               WIFEXITED(status_b) ? WEXITSTATUS(status_b) : -1);
done:
    remove_dir(dir);
}

/* Contracts: the training text as an output (-z or -o naming it), refused even with
 * --force, and the text left untouched. */
static void contracts_text_as_output(const char *text, const char *model) {
    char args[3 * CAP];
    size_t n_text = 0;
    char *text_before = check_read_file(text, &n_text);
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2", text, model, text);
    expect_train("--force -z naming the training text", args, 1, "text.txt: is the input");
    format_into(args, sizeof args, "--force -d %s -o %s " TINY " -n 2", text, text);
    expect_train("--force -o naming the training text", args, 1, "text.txt: is the input");
    size_t n_after = 0;
    char *text_after = check_read_file(text, &n_after);
    check_true(text_before && text_after && n_text == n_after &&
               !memcmp(text_before, text_after, n_text), "contracts: the text is untouched");
    free(text_before);
    free(text_after);
}

/* Contracts: outputs that cannot be written (an empty -o, a folder that does not exist),
 * refused before any training. */
static void contracts_unwritable_outputs(const char *dir, const char *text) {
    char args[3 * CAP];
    char *out = NULL, *err = NULL;
    format_into(args, sizeof args, "-d %s -o '' " TINY " -n 2", text);
    int code = train(args, &out, &err);
    check_true(code == 1 && err && strstr(err, "empty path for the checkpoint") &&
               !(out && strstr(out, "step")), "-o '': refused before training (exit %d)", code);
    free(out);
    free(err);
    out = err = NULL;
    format_into(args, sizeof args, "-d %s -o %s/no/such/m.bin " TINY " -n 2", text, dir);
    code = train(args, &out, &err);
    check_true(code == 1 && err && strstr(err, "cannot write the checkpoint there") &&
               !(out && strstr(out, "step")), "-o in a missing folder: refused before training "
               "(exit %d)", code);
    free(out);
    free(err);
}

/* Contracts: the memory a run needs, against --max-memory: refused just below (writing
 * nothing), run just above (leaving model and tok for the next checks); the hostile
 * round's 80 GB shape refused under a 64 GB limit. */
static void contracts_memory(const char *dir, const char *text, const char *model,
                             const char *tok) {
    char args[3 * CAP], command[4 * CAP];
    Config c = {0};
    c.seq_len = 8;
    c.vocab_size = 300;
    c.n_layers = 1;
    c.n_heads = 2;
    c.dim = 16;
    TrainSettings settings = {0};
    settings.ema = 0.999f;   /* train's default: the average is a sixth parameter copy */
    size_t need = trainer_memory_bytes(&c, &settings, 4);
    /* at least the five parameter copies and the per-layer activations (8 of N x C and 2 of
     * N x 4C floats, N = 4 x 8), counted here from the shapes */
    size_t P = trainer_tensor_sizes((size_t[TRAIN_N_TENSORS]){0}, &(Config){.seq_len = 8,
                                    .vocab_size = 300, .padded_vocab_size = 300,
                                    .n_layers = 1, .n_heads = 2, .dim = 16,
                                    .hidden_dim = 64}, 0);
    size_t floor_bytes = (6 * P + 1 * 32 * (8 * 16 + 2 * 64)) * sizeof(float);
    check_true(need >= floor_bytes && need < 4 * floor_bytes, "trainer_memory_bytes: %zu bytes "
               "for the tiny model, at least the %zu its parameters and activations take",
               need, floor_bytes);
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2 --max-memory %.9f",
                text, model, tok, (double)need * 0.99e-9);
    expect_train("--max-memory just below the need", args, 1, "more than the limit of");
    check_true(!exists(model) && !exists(tok), "--max-memory: the refused run wrote nothing");
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2 --max-memory %.9f",
                text, model, tok, (double)need * 1.01e-9);
    expect_train("--max-memory just above the need", args, 0, "final: train");
    /* the hostile round's shape (-B 64 -T 4096 -C 512 -L 8: about 80 GB), on a text long
     * enough for its context, against a limit of 64 GB */
    char long_text[CAP], want[128];
    format_into(command, sizeof command, "for i in 1 2 3 4 5 6 7 8 9 10; do cat %s; done > %s",
                text, join(long_text, dir, "long.txt"));
    check_run(command, NULL, NULL);
    Config big = {.seq_len = 4096, .vocab_size = 300, .n_layers = 8, .n_heads = 8, .dim = 512};
    format_into(args, sizeof args, "--force -d %s -o %s -z %s -v 300 -L 8 -C 512 -H 8 -T 4096 "
                "-B 64 -n 1 --max-memory 64", long_text, model, tok);
    if (SIZE_MAX <= 0xFFFFFFFFu) {   /* 32-bit: the shape cannot even be addressed */
        expect_train("the 80 GB shape on a 32-bit build", args, 1,
                     "model too large for this machine");
        return;
    }
    double need_big = (double)trainer_memory_bytes(&big, &settings, 64);
    format_into(want, sizeof want, "the run needs %.2f GB of memory", need_big * 1e-9);
    expect_train("the 80 GB shape against a 64 GB limit", args, 1, want);
    check_true(need_big > 75e9, "the 80 GB shape needs more than 75 GB (%.2f)",
               need_big * 1e-9);
}

/* Contracts: -r on the run at model with a tokenizer that is not the run's: another run's
 * of the same size, or a llama2.c file. */
static void contracts_foreign_tokenizer(const char *dir, const char *text, const char *model) {
    char args[3 * CAP], command[4 * CAP];
    char other[CAP], other_text[CAP], other_model[CAP];
    join(other_text, dir, "other.txt");
    join(other_model, dir, "o.bin");
    join(other, dir, "other_tok.bin");
    format_into(command, sizeof command, "tr 'a-z' 'b-za' < %s > %s", text, other_text);
    check_run(command, NULL, NULL);
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 2", other_text, other_model,
                other);
    expect_train("a second run (another tokenizer of 300 tokens)", args, 0, "final: train");
    format_into(args, sizeof args, "-r -d %s -o %s -z %s -n 3", text, model, other);
    expect_train("-r with another run's tokenizer of the same size", args, 1,
                 "other_tok.bin: not the tokenizer this run trained with");
    /* a llama2.c tokenizer file for -r: the other family, whatever its size */
    char llama_tok[CAP];
    format_into(command, sizeof command, "cp tests/data/llama2c/tok512.bin %s",
                join(llama_tok, dir, "llama_tok.bin"));
    if (check_true(check_run(command, NULL, NULL) == 0, "contracts: a llama2.c tokenizer")) {
        format_into(args, sizeof args, "-r -d %s -o %s -z %s -n 3", text, model, llama_tok);
        expect_train("-r with a llama2.c tokenizer", args, 1, "llama_tok.bin: tokenizer of the "
                     "other family (got llama2.c's tokenizer file");
    }
}

/* Contracts: OMP_NUM_THREADS beyond the cores capped with a note, read as OpenMP reads it
 * (also without OpenMP, where kernels.c reads it); --threads in range. */
static void contracts_threads(const char *text, const char *model, const char *tok) {
    char args[3 * CAP], command[4 * CAP];
    format_into(command, sizeof command, "env OMP_NUM_THREADS=100000 %s --force -d %s -o %s "
                "-z %s " TINY " -n 2", train_bin, text, model, tok);
    char *out = NULL, *err = NULL;
    int code = check_run(command, &out, &err);
    check_true(code == 0 && err && strstr(err, "OMP_NUM_THREADS asks for 100000 threads; "
               "using the"), "OMP_NUM_THREADS=100000: capped at the cores with a note (exit %d)",
               code);
    free(out);
    free(err);
    /* a list (one number per nesting level: the first counts), spaces around each */
    format_into(command, sizeof command, "env 'OMP_NUM_THREADS= 1 ,2' %s --force -d %s -o %s "
                "-z %s " TINY " -n 2", train_bin, text, model, tok);
    code = check_run(command, &out, &err);
    check_true(code == 0 && out && strstr(out, "; 1 thread,") && err && !strstr(err, "OMP_"),
               "OMP_NUM_THREADS=' 1 ,2': 1 thread, no note (exit %d)", code);
    free(out);
    free(err);
#ifndef _OPENMP
    /* what OpenMP's runtime would do, with the project's message: say so, use the cores
     * (an OpenMP build leaves this to the runtime, whose message is its own) */
    format_into(command, sizeof command, "env OMP_NUM_THREADS=2x %s --force -d %s -o %s "
                "-z %s " TINY " -n 2", train_bin, text, model, tok);
    code = check_run(command, &out, &err);
    check_true(code == 0 && err && strstr(err, "OMP_NUM_THREADS: invalid value (got '2x', "
               "expected a positive integer or a list of them); using the "),
               "OMP_NUM_THREADS=2x without OpenMP: reported, the cores used (exit %d)", code);
    free(out);
    free(err);
#endif
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2 --threads 1", text,
                model, tok);
    expect_train("--threads 1", args, 0, "1 thread,");
    expect_usage("--threads 0", "--threads 0", "--threads: invalid value (got '0', expected an "
                 "integer in 1..1024)");
}

/* Contracts: standard output closed after the first line (exit 1 with a message, not
 * SIGPIPE's silent 141), or full. */
static void contracts_stdout(const char *dir, const char *text, const char *model,
                             const char *tok) {
    char args[3 * CAP], command[4 * CAP];
    /* the reader is gone before the first write (true exits at once; train starts a second
     * later), so the write fails whatever the pipe's buffer holds */
    format_into(command, sizeof command, "{ sleep 1; %s %s --force -d %s -o %s -z %s " TINY
                " -n 300 2>%s/pipe_err; echo $? > %s/pipe_code; } | true", TRAIN_ENV,
                train_bin, text, model, tok, dir, dir);
    check_run(command, NULL, NULL);
    char path[CAP];
    size_t size;
    char *code_text = check_read_file(join(path, dir, "pipe_code"), &size);
    char *pipe_err = check_read_file(join(path, dir, "pipe_err"), &size);
    check_true(code_text && atoi(code_text) == 1 && pipe_err &&
               strstr(pipe_err, "standard output: write error (Broken pipe)"),
               "train into a closed pipe: exit 1, one line naming the broken pipe (exit %d)",
               code_text ? atoi(code_text) : -1);
    free(code_text);
    free(pipe_err);
    expect_train("--help into a full disk", "--help >/dev/full", 1,
                 "train: standard output: write error (No space left on device)");
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2 >/dev/full", text,
                model, tok);
    expect_train("a run into a full disk", args, 1,
                 "standard output: write error (No space left on device)");
}

/* Task: the hostile round's contract breaks, each refused with one line before any work
 * (or reported): outputs that are the training text; an empty -o; a folder that does not
 * exist (it failed only at the first checkpoint, after training); a run needing more
 * memory than the limit (it went to the OOM killer); a tokenizer of the same size that is
 * not the run's, on -r; OMP_NUM_THREADS beyond the cores (it crashed); standard output
 * closed (SIGPIPE, exit 141, no message) or full. In this order: -r needs the run the
 * memory checks leave. */
static void test_contracts(void) {
    char dir[CAP], text[CAP], model[CAP], tok[CAP];
    if (!check_true(make_temp_dir(dir) == 0, "contracts: temp folder")) return;
    if (write_play(join(text, dir, "text.txt")) == 0) {
        join(model, dir, "m.bin");
        join(tok, dir, "tok.bin");
        contracts_text_as_output(text, model);
        contracts_unwritable_outputs(dir, text);
        contracts_memory(dir, text, model, tok);
        contracts_foreign_tokenizer(dir, text, model);
        contracts_threads(text, model, tok);
        contracts_stdout(dir, text, model, tok);
    }
    remove_dir(dir);
}

/* ------------------------------------------------------------------------- */
/* 5. The shipped model (a regression pin)                                      */

/* Greedy continuation of PIN_PROMPT by weights/model.bin with weights/tokenizer.bin.
 * This is a regression pin, recorded once from the trained model (the ids this test
 * printed on its first run; the same text as
 *   ./run weights/model.bin -z weights/tokenizer.bin -i "ROMEO:" -n 24 -t 0
 * which prints "\nI'll tell thee, I'll not.\n\nROMEO:\nI'll tell thee, I'll not.").
 * Any change to the forward pass that alters the shipped model's output fails it;
 * if such a change is intended, re-record the ids. */
#define PIN_PROMPT "ROMEO:"
#define PIN_STEPS 24
static const int PIN_IDS[PIN_STEPS] = {10, 73, 457, 731, 418, 44, 291, 457, 321, 46, 10, 10,
                                         813, 58, 10, 73, 457, 731, 418, 44, 291, 457, 321, 46};

static void test_shipped_model(void) {
    Model m;
    Tokenizer t;
    if (!check_true(model_load(&m, "weights/model.bin", 64) == 0, "shipped model loads")) return;
    if (!check_true(tokenizer_load(&t, "weights/tokenizer.bin") == 0 &&
                    t.vocab_size == m.config.vocab_size,
                    "shipped tokenizer loads, with the model's vocab size")) {
        model_free(&m);
        return;
    }
    int ids[64 + PIN_STEPS];
    size_t n = 0;
    tokenizer_encode(&t, PIN_PROMPT, strlen(PIN_PROMPT), ids, 64, &n);
    const float *logits = model_forward(&m, ids, (int)n, 0, 0);
    int got[PIN_STEPS], pos = (int)n;
    for (int i = 0; i < PIN_STEPS && logits; i++) {
        int best = 0;
        for (int v = 1; v < m.config.vocab_size; v++) if (logits[v] > logits[best]) best = v;
        got[i] = best;
        logits = model_forward(&m, &got[i], 1, pos++, 0);
    }
    int same = logits != NULL && memcmp(got, PIN_IDS, sizeof got) == 0;
    check_true(same, "shipped model: greedy continuation of \"%s\" matches the pinned ids",
               PIN_PROMPT);
    if (!same) {
        printf("  got:");
        for (int i = 0; i < PIN_STEPS; i++) printf(" %d,", got[i]);
        printf("\n");
    }
    tokenizer_free(&t);
    model_free(&m);
}

int main(void) {
    const char *env = getenv("TRAIN"), *bin = env ? env : "./train";
    char cwd[CAP / 2];
    if (bin[0] != '/' && getcwd(cwd, sizeof cwd)) format_into(train_bin, CAP, "%s/%s", cwd, bin);
    else format_into(train_bin, CAP, "%s", bin);
    env = getenv("RUN");
    if (env) run_bin = env;
    test_matmul_grad(5, 21, 6);     /* 4 + 1 rows, a 16-wide strip + 5, 4 + 2 outputs */
    test_matmul_grad(1, 3, 1);
    test_matmul_grad(9, 32, 13);
    test_layernorm_grad();
    test_gelu_grad();
    test_attention_grad();
    test_attention_dropout();
    test_crossentropy_grad();
    test_embedding_grad();
    test_model_grad(0.0f, NULL, MODEL_POSITIONS_LEARNED);
    test_model_grad(0.3f, NULL, MODEL_POSITIONS_LEARNED);
    test_model_grad(0.3f, "window:w=2,sinklogit=1;exact", MODEL_POSITIONS_LEARNED);
    test_model_grad(0.0f, "linear:norm=1;performer:m=8", MODEL_POSITIONS_LEARNED);
    test_model_grad(0.0f, NULL, MODEL_POSITIONS_ROTARY);
    test_model_grad(0.3f, NULL, MODEL_POSITIONS_ROTARY);
    test_model_grad(0.3f, "window:w=2,sinklogit=1;exact", MODEL_POSITIONS_ROTARY);
    test_model_grad(0.0f, "linear:norm=1;performer:m=8", MODEL_POSITIONS_ROTARY);
    test_model_grad(0.0f, "efficient;strided:l=2", MODEL_POSITIONS_ROTARY);
    test_schedule();
    test_training_run();
    test_variant_runs();
    test_ema_run();
    test_batch();
    test_bpe();
    test_bpe_roundtrip();
    test_bpe_long_run();
    test_bpe_reference();
    test_bpe_linear();
    test_bpe_progress();
    test_cli();
    test_default_warmup();
    test_bad_data();
    test_no_overwrite();
    test_state_file();
    test_interrupted_save();
    test_kill_during_save();
    test_first_save_kills();
    test_one_writer();
    test_contracts();
    test_shipped_model();
    return check_summary("test_train");
}

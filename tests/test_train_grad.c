/* test_train_grad.c: the trainer's backward passes against finite differences.
 *
 * Every layer's backward (matmul, LayerNorm, GELU, attention with and without its
 * dropout, softmax + cross-entropy, embedding) against central finite differences of a
 * float64 reference forward written here; the whole model's against central differences
 * of a float64 GPT-2 (tests/gpt2_f64.c: learned and rotary positions, exact attention), and,
 * with dropout and the attention variants, of the trainer's own float forward, whose logits
 * test_train_runs.c checks against run's.
 * (The fast matmul kernels are tested in test_kernels.c.)
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
#include "tests/gpt2_f64.h"   /* gpt2_f64_forward: the whole model in float64 */
#include "tests/train_fixtures.h"   /* tiny_config, run_init, run_steps, format_into, ... */

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

/* Check a float gradient against the numeric one of input x (n,), each element within
 * atol + rtol * |numeric|. */
static void check_grad_tol(const char *what, const float *analytic, double *x, size_t n,
                           LossFn loss, void *ctx, double atol, double rtol) {
    double *numeric = malloc(n * sizeof(double));
    if (!numeric) {
        check_true(0, "%s: memory for the differences", what);
        return;
    }
    numeric_grad(numeric, x, n, loss, ctx);
    check_close_f64(what, analytic, numeric, n, atol, rtol);
    free(numeric);
}

/* check_grad_tol within GRAD_ATOL + GRAD_RTOL * |numeric|. */
static void check_grad(const char *what, const float *analytic, double *x, size_t n,
                       LossFn loss, void *ctx) {
    check_grad_tol(what, analytic, x, n, loss, ctx, GRAD_ATOL, GRAD_RTOL);
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
    AttentionShape shape = {NH, NH, T, 1.0f};
    float *scratch = malloc(attention_scratch_floats(&shape, T) * sizeof(float));
    for (int j = 0; j < T; j++)
        for (int h = 0; h < NH; h++) v[j * C + h * T + j] = 1.0f;
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
 * loss, for what the float64 forward below does not do (dropout masks, the attention
 * variants): the backward's chaining of the layers (the residual sums, the shared
 * embedding/classifier) against the forward it differentiates. Float
 * losses carry ~3e-7 rounding, so with a step of 1e-3 the numeric gradient is good to
 * ~1.5e-4; the h^2 term of the Taylor series adds ~5e-6 (measured: 5e-4 at h = 3e-3,
 * 5e-3 at 1e-2): tolerance 5e-4 + 2e-2 relative. */
#define MODEL_GRAD_H 1e-3f
#define MODEL_GRAD_ATOL 5e-4
#define MODEL_GRAD_RTOL 2e-2
/* Under AddressSanitizer (make debug: a model's 3,700 forward passes took 15 s there, 0.4 s
 * here) every 8th parameter, which still runs every layer's code; elsewhere every one. */
#if defined(__SANITIZE_ADDRESS__)   /* gcc's */
#define MODEL_GRAD_STRIDE 8
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)   /* clang's */
#define MODEL_GRAD_STRIDE 8
#endif
#endif
#ifndef MODEL_GRAD_STRIDE
#define MODEL_GRAD_STRIDE 1
#endif


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
    float *numeric = malloc(tr.n_params * sizeof(float));   /* the checked parameters' */
    float *analytic = malloc(tr.n_params * sizeof(float));
    size_t n = 0;
    for (size_t j = 0; numeric && analytic && j < tr.n_params; j += MODEL_GRAD_STRIDE, n++) {
        float saved = tr.params[j];
        tr.params[j] = saved + MODEL_GRAD_H;
        float up = trainer_forward(&tr, inputs, targets);
        tr.params[j] = saved - MODEL_GRAD_H;
        float down = trainer_forward(&tr, inputs, targets);
        tr.params[j] = saved;
        numeric[n] = (up - down) / (2.0f * MODEL_GRAD_H);
        analytic[n] = tr.grads[j];
    }
    char what[256];
    snprintf(what, sizeof what, "whole model gradient, %zu of %zu parameters (L 2, C 8, "
             "residual sums, tied embedding, %s, dropout %.1f on the residuals and the "
             "attention weights%s%s)", n, tr.n_params, positions == MODEL_POSITIONS_ROTARY ?
             "rotary positions (no wpe)" : "learned positions", (double)dropout,
             spec ? ", attention " : "", spec ? spec : "");
    if (numeric && analytic)
        check_close(what, analytic, numeric, n, MODEL_GRAD_ATOL, MODEL_GRAD_RTOL);
    else
        check_true(0, "%s: memory for the differences", what);
    free(numeric);
    free(analytic);
    trainer_free(&tr);
}

/* Whole model in float64: the same parameters' gradients (exact attention, no dropout)
 * against central differences of gpt2_f64.h's forward, a GPT-2 written from its
 * definition, so that a slip both the trainer's forward and its backward make (a residual
 * left out, a norm's eps, the wrong rows of qkvw) shows too. Float64 losses leave the
 * step's h^2 term (~1e-10 at h 1e-5) and the float backward's own rounding (its sums of
 * a few dozen terms: ~1e-6; measured 1.0e-7 and 3.1e-7 at worst): tolerance
 * 1e-5 + 1e-4 relative, 50 times tighter than the float loss allows. */
#define MODEL_F64_ATOL 1e-5
#define MODEL_F64_RTOL 1e-4

typedef struct { Gpt2F64 g; const int *inputs, *targets; int B, T; } ModelCase;

/* The mean over the batch's targets of -log softmax(logits)[target], in float64. */
static double model_loss(void *ctx) {
    ModelCase *c = ctx;
    double *logits = malloc((size_t)c->T * c->g.V * sizeof(double)), sum = 0.0;
    int count = 0;
    for (int b = 0; logits && b < c->B; b++) {
        if (gpt2_f64_forward(&c->g, c->inputs + b * c->T, c->T, logits, -1, NULL) != 0) break;
        XentCase x = {logits, c->targets + b * c->T, c->T, c->g.V};
        int row = 0;   /* the sequence's targets: xent_loss is their mean */
        for (int t = 0; t < c->T; t++) row += x.targets[t] >= 0;
        sum += xent_loss(&x) * row;
        count += row;
    }
    int want = 0;   /* the batch's targets: fewer counted means a forward did not run */
    for (int n = 0; n < c->B * c->T; n++) want += c->targets[n] >= 0;
    free(logits);
    return count == want && count > 0 ? sum / count : (double)NAN;   /* NaN: out of memory */
}

static void test_model_grad_f64(ModelPositions positions) {
    Config c;
    tiny_config(&c, 11, 2, 8, 2, 4);
    c.positions = positions;
    TrainSettings s = tiny_settings(0.0f, 1e-3f);
    Trainer tr;
    if (!check_true(trainer_init(&tr, &c, &s, 2) == 0, "float64 whole-model trainer init"))
        return;
    for (size_t j = 0; j < tr.n_params; j++) tr.params[j] += 0.3f * rand_sym();
    const int inputs[8] = {1, 5, 9, 2, 10, 0, 3, 3}, targets[8] = {5, 9, -1, 7, 0, 3, 3, 4};
    trainer_forward(&tr, inputs, targets);
    trainer_backward(&tr);
    ModelCase mc = {{.L = 2, .C = 8, .NH = 2, .Hd = 32, .V = 11}, inputs, targets, 2, 4};
    int S = positions == MODEL_POSITIONS_ROTARY ? 0 : 4;
    size_t n = gpt2_f64_views(&mc.g, NULL, S), file = 0;
    for (int i = 0; i < TRAIN_N_FILE_TENSORS; i++) file += tr.tensor_size[i];
    double *params = n == file ? to_f64(tr.params, n) : NULL;
    char what[200];
    snprintf(what, sizeof what, "whole model gradient, all %zu parameters, against a float64 "
             "GPT-2 forward (L 2, C 8, %s, a position without a target)", n,
             S ? "learned positions" : "rotary positions");
    if (check_true(params != NULL, "%s: the trainer's %zu floats are llm.c's %zu", what, file,
                   n)) {
        gpt2_f64_views(&mc.g, params, S);
        check_grad_tol(what, tr.grads, params, n, model_loss, &mc, MODEL_F64_ATOL,
                       MODEL_F64_RTOL);
    }
    free(params);
    trainer_free(&tr);
}

int main(void) {
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
    test_model_grad_f64(MODEL_POSITIONS_LEARNED);
    test_model_grad_f64(MODEL_POSITIONS_ROTARY);
    return check_summary("test_train_grad");
}

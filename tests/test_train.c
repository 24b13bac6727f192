/* test_train.c: the trainer's backward passes, fast matmul, training runs, checkpoints.
 *
 * 1. Every layer's backward (matmul, LayerNorm, GELU, attention, softmax + cross-entropy,
 *    embedding, and the residual sum through a whole model) against central finite
 *    differences of a float64 reference forward written here.
 * 2. (The fast matmul kernels are tested in test_kernels.c.)
 * 3. A short training run: the loss falls, a seed reproduces it bit for bit, and 1 and
 *    2 threads agree bit for bit; resuming from a checkpoint continues identically.
 * 4. Save -> model_load -> model_forward gives the trainer's own logits.
 * 5. The shipped weights/ model's greedy continuation (a regression pin).
 */
#include "train.h"

#include <math.h>      /* fabs, sqrt, exp, log, tanh */
#include <stdint.h>    /* uint64_t */
#include <stdio.h>     /* printf, snprintf, remove */
#include <stdlib.h>    /* malloc, calloc, free */
#include <string.h>    /* memcpy, memcmp */
#ifdef _OPENMP
#include <omp.h>       /* omp_set_num_threads */
#endif

#include "attention.h"    /* attention_backward */
#include "kernels.h"      /* kernels_gelu, KERNELS_NORM_EPS */
#include "model.h"        /* model_load, model_forward */
#include "tokenizer.h"    /* tokenizer_load, tokenizer_encode, tokenizer_decode */
#include "tests/check.h"  /* check_* */

/* Gradient checks: the float backward against float64 central differences (step
 * GRAD_H). Float rounding in sums of a few dozen O(1) terms stays near 1e-6, so an
 * element passes within GRAD_ATOL + GRAD_RTOL * |numeric|. */
#define GRAD_H 1e-5
#define GRAD_ATOL 1e-4
#define GRAD_RTOL 1e-3
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
    kernels_matmul_backward(dx, dw, db, g, x, w, N, IC, OC);
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
    train_layernorm_backward(dx, dw, db, g, x, w, mean, rstd, N, C);
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
    x[0] = 0.0f; x[1] = 0.005f; x[2] = -0.02f;  /* either side of GELU_RECOVER_MIN */
    float out[N];
    memcpy(out, x, sizeof out);
    kernels_gelu(out, N);
    train_gelu_backward(dx, x, out, g, N);
    GeluCase c = {to_f64(x, N), to_f64(g, N), N};
    check_grad("gelu backward dx (15 values in [-4, 4), 0 and near it)", dx, c.x, N, gelu_loss, &c);
    free(c.x); free(c.g);
}

/* causal attention: loss = sum g . attention(q, k, v), heads of HS, scale 1/sqrt(HS) */
typedef struct { double *q, *k, *v, *g; int T, NH, HS; } AttentionCase;

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
                for (int t2 = 0; t2 <= t; t2++) out += s[t2] / z * c->v[t2 * C + h * c->HS + i];
                loss += c->g[t * C + h * c->HS + i] * out;
            }
        }
    }
    return loss;
}

static void test_attention_grad(void) {
    enum { T = 5, NH = 2, HS = 3, C = NH * HS };
    float q[T * C], k[T * C], v[T * C], g[T * C];
    float dq[T * C] = {0}, dk[T * C] = {0}, dv[T * C] = {0}, scratch[2 * NH * T];
    fill_random(q, T * C); fill_random(k, T * C); fill_random(v, T * C); fill_random(g, T * C);
    for (int i = 0; i < T * C; i++) q[i] *= 2.0f;   /* peakier softmax rows */
    AttentionShape shape = {NH, NH, HS, 1.0f / sqrtf((float)HS)};
    check_true(attention_backward_scratch_floats(&shape, T) <= 2 * NH * T,
               "attention backward scratch fits 2 rows per head");
    attention_backward(&shape, dq, dk, dv, g, q, k, v, T, scratch);
    AttentionCase c = {to_f64(q, T * C), to_f64(k, T * C), to_f64(v, T * C), to_f64(g, T * C),
                       T, NH, HS};
    check_grad("attention backward dq (T 5, NH 2, HS 3)", dq, c.q, T * C, attention_loss, &c);
    check_grad("attention backward dk", dk, c.k, T * C, attention_loss, &c);
    check_grad("attention backward dv", dv, c.v, T * C, attention_loss, &c);
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
    train_embedding_backward(dwte, dwpe, g, tokens, B, T, C);
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

static void test_model_grad(float dropout) {
    Config c;
    tiny_config(&c, 11, 2, 8, 2, 4);
    TrainSettings s = tiny_settings(dropout, 1e-3f);
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
    char what[128];
    snprintf(what, sizeof what, "whole model gradient, %zu parameters (L 2, C 8, residual sums, "
             "tied embedding, dropout %.1f)", tr.n_params, (double)dropout);
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

static int run_init(Trainer *tr) {
    Config c;
    tiny_config(&c, RUN_V, 2, 32, 2, 16);
    TrainSettings s = tiny_settings(0.1f, 1e-2f);
    s.steps = RUN_STEPS;
    return trainer_init(tr, &c, &s, 8);
}

static void test_training_run(void) {
    int *tokens = malloc(sizeof(int) * RUN_TOKENS);
    float losses[3][RUN_STEPS];
    make_stream(tokens, RUN_TOKENS);
    Trainer a, b;
    if (!check_true(run_init(&a) == 0 && run_init(&b) == 0, "short run: init")) return;
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    run_steps(&a, tokens, RUN_STEPS, losses[0]);
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
    run_steps(&b, tokens, RUN_STEPS, losses[1]);
    float last = 0.0f;
    for (int i = RUN_STEPS - 10; i < RUN_STEPS; i++) last += losses[0][i] / 10.0f;
    check_true(last < losses[0][0] - RUN_MARGIN,
               "short run: loss falls by more than %.1f nats (step 1 %.3f, mean of last 10 %.3f)",
               (double)RUN_MARGIN, (double)losses[0][0], (double)last);
    check_true(memcmp(losses[0], losses[1], sizeof losses[0]) == 0 &&
               memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
               "short run: 1 and 2 threads give identical losses and parameters, bit for bit");
    trainer_free(&b);

    /* the same seed again, interrupted: save at step 30, resume, continue to the end */
    const char *path = "build/test_train_ckpt.bin", *state = "build/test_train_ckpt.bin.state";
    if (!check_true(run_init(&b) == 0, "short run: init again")) goto done;
    run_steps(&b, tokens, RUN_STEPS / 2, losses[2]);
    int saved = trainer_save(&b, path, state);
    trainer_free(&b);
    if (!check_true(saved == 0 && trainer_load(&b, path, state) == 0, "short run: save, load"))
        goto done;
    run_steps(&b, tokens, RUN_STEPS, losses[2]);
    check_true(memcmp(losses[0], losses[2], sizeof losses[0]) == 0 &&
               memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
               "short run: same seed, and resumed at step %d, gives the same losses and "
               "parameters bit for bit", RUN_STEPS / 2);
    trainer_free(&b);

    /* 4. the checkpoint loads in run's model.c and gives the trainer's own logits */
    if (trainer_save(&a, path, NULL) != 0) goto done;
    Model m;
    if (check_true(model_load(&m, path, a.T) == 0, "checkpoint loads with model_load")) {
        int inputs[8 * 16], targets[8 * 16];
        stream_batch(tokens, 0, a.B, a.T, inputs, targets);
        a.dropout_on = 0;
        trainer_forward(&a, inputs, NULL);
        const float *logits = model_forward(&m, inputs + a.T, a.T, 0, 1);  /* sequence 1 */
        check_true(logits != NULL, "model_forward on a trained checkpoint");
        /* the same layer functions in the same order: equal to float rounding, in fact bits */
        if (logits)
            check_close("run's logits vs the trainer's (sequence 1 of the batch)", logits,
                        a.a.logits + (size_t)a.T * RUN_V, (size_t)a.T * RUN_V, 1e-5, 1e-5);
        model_free(&m);
    }
done:
    remove(path);
    remove(state);
    trainer_free(&a);
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

#include "bpe.h"   /* bpe_train, bpe_save (the tokenizer trainer, tested here too) */

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
    if (bpe_train(&b, text, strlen(text), 1000) == 0) {
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
/* The train program's command line                                            */

static const char *train_bin = "./train";
static const char *run_bin = "./run";

/* Runs "$TRAIN ARGS", checks the exit code and that stderr (or stdout) has `message`. */
static void expect_train(const char *what, const char *args, int want_code, const char *message) {
    char command[2048];
    snprintf(command, sizeof command, "%s %s", train_bin, args);
    char *out = NULL, *err = NULL;
    int code = check_run(command, &out, &err);
    int has = (err && strstr(err, message)) || (out && strstr(out, message));
    check_true(code == want_code && has, "train %s: exit %d (want %d), output has \"%s\"%s%s",
               what, code, want_code, message, has ? "" : "; stderr: ", has || !err ? "" : err);
    free(out);
    free(err);
}

static void test_cli(void) {
    const char *text_path = "build/test_train_text.txt";
    FILE *f = fopen(text_path, "wb");
    if (!check_true(f != NULL, "write a small training text")) return;
    for (int i = 0; i < 40; i++)
        fprintf(f, "To be, or not to be, that is the question %d.\nWhether 'tis nobler in the "
                "mind to suffer.\n", i);
    fclose(f);
    expect_train("unknown flag", "--bogus 1", 2, "--bogus: unknown option");
    expect_train("malformed number", "-n 12x", 2, "-n: invalid value '12x'");
    expect_train("out of range", "-p 0.95", 2, "expected a number in 0..0.9");
    expect_train("missing value", "-L", 2, "-L: missing value");
    expect_train("heads not dividing width", "-C 64 -H 5", 2, "must divide the width");
    expect_train("shape flags with -r", "-r -L 2", 2, "only -d, -o, -z, -e and -n");
    expect_train("missing data", "-d build/no_such_file.txt", 1, "cannot open");
    char args[1024];
    const char *model = "build/test_train_cli_model.bin";
    snprintf(args, sizeof args, "-d %s -o %s -z build/test_train_cli_tok.bin -v 300 -L 1 -C 16 "
             "-H 2 -T 8 -B 4 -n 20 -w 2 -e 10", text_path, model);
    expect_train("tiny end-to-end run", args, 0, "final: train");
    snprintf(args, sizeof args, "%s %s -z build/test_train_cli_tok.bin -n 5 -t 0 -i To",
             run_bin, model);
    char *out = NULL;
    int code = check_run(args, &out, NULL);
    check_true(code == 0 && out && strncmp(out, "To", 2) == 0,
               "run generates from the trained checkpoint (exit %d)", code);
    free(out);
    snprintf(args, sizeof args, "-r -d %s -o %s -z build/test_train_cli_tok.bin", text_path,
             model);
    expect_train("resume a finished run", args, 0, "resuming at step 20 of 20");
    snprintf(args, sizeof args, "-d %s -o %s -z build/test_train_cli_tok.bin -T 4096",
             text_path, model);
    expect_train("too little text", args, 1, "too little text");
    remove(text_path);
    remove(model);
    remove("build/test_train_cli_model.bin.state");
    remove("build/test_train_cli_tok.bin");
}

/* ------------------------------------------------------------------------- */
/* 5. The shipped model (a regression pin)                                      */

/* Greedy continuation of PIN_PROMPT by weights/model.bin with weights/tokenizer.bin.
 * This is a regression pin, recorded once from the trained model (the ids this test
 * printed on its first run; the same text as
 *   ./run weights/model.bin -z weights/tokenizer.bin -i "ROMEO:" -n 24 -t 0
 * which prints "\nI'll not, my lord, I'll not be a little.\n\nROMEO:\nI'll not").
 * Any change to the forward pass that alters the shipped model's output fails it;
 * if such a change is intended, re-record the ids. */
#define PIN_PROMPT "ROMEO:"
#define PIN_STEPS 24
static const int PIN_IDS[PIN_STEPS] = {10, 73, 457, 321, 44, 307, 436, 44, 291, 457, 321, 304,
                                       258, 279, 1005, 46, 10, 10, 813, 58, 10, 73, 457, 321};

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
    const char *env = getenv("TRAIN");
    if (env) train_bin = env;
    env = getenv("RUN");
    if (env) run_bin = env;
    test_matmul_grad(5, 21, 6);     /* 4 + 1 rows, a 16-wide strip + 5, 4 + 2 outputs */
    test_matmul_grad(1, 3, 1);
    test_matmul_grad(9, 32, 13);
    test_layernorm_grad();
    test_gelu_grad();
    test_attention_grad();
    test_crossentropy_grad();
    test_embedding_grad();
    test_model_grad(0.0f);
    test_model_grad(0.3f);
    test_schedule();
    test_training_run();
    test_bpe();
    test_bpe_roundtrip();
    test_cli();
    test_shipped_model();
    return check_summary("test_train");
}

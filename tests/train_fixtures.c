/* train_fixtures.c: what the trainer's test programs share (train_fixtures.h). */
#include "tests/train_fixtures.h"

#include <stdarg.h>    /* va_list (format_into) */
#include <stdint.h>    /* uint64_t */
#include <stdio.h>     /* vsnprintf */
#include <stdlib.h>    /* malloc */
#include <string.h>    /* memcpy, memset */
#include <time.h>      /* clock_gettime */

#include "tests/check.h"  /* check_true */

void tiny_config(Config *c, int V, int L, int C, int NH, int T) {
    memset(c, 0, sizeof *c);
    c->vocab_size = V; c->n_layers = L; c->dim = C; c->n_heads = NH; c->seq_len = T;
}

TrainSettings tiny_settings(float dropout, float lr) {
    TrainSettings s = {0};
    s.batch = 2; s.steps = 60; s.warmup = 5; s.lr = lr; s.lr_min_ratio = 0.1f;
    s.weight_decay = 0.1f; s.beta1 = 0.9f; s.beta2 = 0.99f; s.eps = 1e-8f; s.clip = 1.0f;
    s.dropout = dropout; s.seed = 7;
    return s;
}


/* A made-up token stream with structure to learn: mostly t+1 = (5 t + 3) mod 16, and
 * every seventh token random. */
void make_stream(int *tokens, int n) {
    uint64_t s = 99;
    tokens[0] = 0;
    for (int i = 1; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        tokens[i] = i % 7 == 0 ? (int)((s >> 33) % RUN_V) : (5 * tokens[i - 1] + 3) % RUN_V;
    }
}

/* Windows for step `step` at fixed, step-dependent offsets. */
void stream_batch(const int *tokens, int step, int B, int T, int *inputs, int *targets) {
    for (int b = 0; b < B; b++) {
        int start = (step * 131 + b * 517) % (RUN_TOKENS - T - 1);
        memcpy(inputs + b * T, tokens + start, sizeof(int) * T);
        memcpy(targets + b * T, tokens + start + 1, sizeof(int) * T);
    }
}

/* Train from step tr->step to `until`; losses[step] receives each step's loss. */
void run_steps(Trainer *tr, const int *tokens, int until, float *losses) {
    int inputs[8 * 16], targets[8 * 16];
    while (tr->step < until) {
        stream_batch(tokens, tr->step, tr->B, tr->T, inputs, targets);
        losses[tr->step] = trainer_forward(tr, inputs, targets);
        trainer_backward(tr);
        trainer_update(tr);
    }
}

int run_init_ema(Trainer *tr, float ema) {
    Config c;
    tiny_config(&c, RUN_V, 2, 32, 2, 16);
    TrainSettings s = tiny_settings(0.1f, 1e-2f);
    s.attn_dropout = 0.1f;
    s.steps = RUN_STEPS;
    s.ema = ema;
    return trainer_init(tr, &c, &s, 8);
}

int run_init(Trainer *tr) { return run_init_ema(tr, 0.0f); }

void format_into(char *buf, size_t cap, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int n = vsnprintf(buf, cap, format, args);
    va_end(args);
    if (n < 0 || (size_t)n >= cap) check_true(0, "test path or command too long: %s", buf);
}

double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double *to_f64(const float *x, size_t n) {
    double *y = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) y[i] = (double)x[i];
    return y;
}

/* train_fixtures.h: what the trainer's test programs share (test_train_grad.c,
 * test_train_runs.c, test_bpe.c, test_train_cli.c): tiny models, a made-up token stream
 * with structure to learn and a short run over it, and checked string formatting.
 *
 * Legend: V vocab, L layers, C width, NH heads, T context, B sequences per batch.
 */
#ifndef TRAIN_FIXTURES_H
#define TRAIN_FIXTURES_H

#include <stddef.h>      /* size_t */
#include "train.h"       /* Config, Trainer, TrainSettings */

#define RUN_STEPS 60          /* steps of the short run */
#define RUN_V 16              /* vocabulary of the made-up token stream */
#define RUN_TOKENS 4096       /* tokens of that stream */

/* *c = a GPT-2 config of vocab V, L layers, width C, NH heads, context T; all else 0. */
void tiny_config(Config *c, int V, int L, int C, int NH, int T);

/* Settings of a short test run: batch 2, 60 steps, warmup 5, peak learning rate lr,
 * residual dropout `dropout`, seed 7 (the rest: train's defaults of the same kind). */
TrainSettings tiny_settings(float dropout, float lr);

/* tokens (n,) = a made-up stream: mostly t+1 = (5 t + 3) mod RUN_V, every seventh token
 * random (a fixed generator: the same stream every call). n <= RUN_TOKENS for
 * stream_batch. */
void make_stream(int *tokens, int n);

/* inputs, targets (B, T) = windows of tokens (RUN_TOKENS,) for step `step`, at fixed
 * step-dependent offsets; targets one token ahead. */
void stream_batch(const int *tokens, int step, int B, int T, int *inputs, int *targets);

/* Train tr from step tr->step to `until` over tokens (RUN_TOKENS,); losses[step] receives
 * each step's loss. */
void run_steps(Trainer *tr, const int *tokens, int until, float *losses);

/* trainer_init of the short run (2 layers of 32, 2 heads, T 16, batch 8, RUN_STEPS steps,
 * attention dropout 0.1) with weight averaging at decay ema (0: none). Returns
 * trainer_init's status. */
int run_init_ema(Trainer *tr, float ema);

/* run_init_ema(tr, 0). */
int run_init(Trainer *tr);

/* snprintf into buf (cap bytes); a truncation fails a check. */
void format_into(char *buf, size_t cap, const char *format, ...);

/* A malloc'd float64 copy of x (n,) (caller frees), or NULL when memory runs out. */
double *to_f64(const float *x, size_t n);

/* Seconds on the monotonic clock. */
double seconds_now(void);

#endif /* TRAIN_FIXTURES_H */

/* eval.h: the loss of a model over a token sequence, and how far a variant's
 * next-token distributions are from exact attention's.
 *
 * The sequence is cut into non-overlapping windows of ctx tokens (the last window
 * may be shorter; one of a single token predicts nothing). Each window starts a new
 * sequence at position 0, and every position but the window's last predicts the
 * next token. Read run_lab.c for the command (--eval) that prints these numbers.
 */
#ifndef EVAL_H
#define EVAL_H

#include "model.h"       /* Model, model_forward */
#include "tokenizer.h"   /* Tokenizer, tokenizer_decode */

typedef struct {
    double nll;          /* sum over predicted tokens of -ln p(token), nats */
    double kl;           /* sum over predicted positions of KL(exact || variant), nats */
    long tokens;         /* predicted tokens */
    long agree;          /* positions where the variant's and exact's top-1 token agree */
    long bytes;          /* bytes of the predicted tokens' text */
    int windows;         /* windows evaluated */
    int last_window;     /* tokens in the last window evaluated (ctx unless the ids ran out) */
    int unscored;        /* trailing tokens of no window: one left over predicts nothing */
    double seconds;      /* time spent in the variant's model_forward calls */
} EvalResult;

/* Evaluates `variant` on ids (n_ids,) in windows of ctx (2 <= ctx <= S); if `exact`
 * is not NULL it runs the same windows, and kl/agree compare the two (else kl = 0
 * and agree = tokens). progress != 0 prints a progress line on stderr after each
 * window. Returns 0, or -1 after a stderr line (a forward failed). */
int eval_windows(Model *variant, Model *exact, const Tokenizer *tok, const int *ids,
                 long n_ids, int ctx, int progress, EvalResult *result);

#endif /* EVAL_H */

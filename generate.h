/* generate.h: the sequence a generation holds in the model's context, and the loop that
 * extends it: the prompt, sampled tokens, lines typed in interactive mode.
 *
 * When the next token would not fit, the context shifts (as llama.cpp does): the first
 * `keep` tokens and the most recent half of the rest stay, and are run again from
 * position 0. Re-running them, rather than moving cached keys, keeps a model with learned
 * positions (GPT-2) inside its position table and works with every attention variant;
 * it gives exactly the state a fresh run of those tokens would have. With prefill in
 * chunks it costs one prompt-sized forward per shift.
 *
 * Read model.h for what it calls, and run.c for how the options are chosen.
 */
#ifndef GENERATE_H
#define GENERATE_H

#include <stdio.h>       /* FILE */
#include "model.h"       /* Model */
#include "sampler.h"     /* Sampler */
#include "tokenizer.h"   /* Tokenizer */

#define GENERATE_FULL 1  /* generation_append: the context is full and shifting is off */

/* What a run did, for the speed line. */
typedef struct {
    long input_tokens;       /* prompt and interactive-input tokens (each run once) */
    long generated;          /* tokens sampled and printed */
    long shifts;             /* context shifts */
    long rerun_tokens;       /* tokens run again after shifts */
    long grows;              /* times the attention state grew (from generation_init's
                              * n_alloc toward n_ctx) */
    long grow_tokens;        /* tokens run again at growths */
    double input_seconds;    /* time running input tokens */
    double generate_seconds; /* time sampling and running generated tokens (not shifts
                              * or growths) */
    double shift_seconds;    /* time re-running the kept tokens after shifts */
    double grow_seconds;     /* time re-running the tokens at growths */
} GenerationStats;

/* The tokens in the context, and how many of them the model has run. */
typedef struct {
    Model *model;            /* not owned */
    int *tokens;             /* (n_ctx,) the token at each position 0 .. n_tokens-1; owned */
    int n_tokens;            /* tokens in the context */
    int n_prompt;            /* tokens 0 .. n_prompt-1 are input no generated token precedes
                                (the prompt; with -n 0, lines typed too): those a shift kept */
    int n_run;               /* tokens 0 .. n_run-1 are in the model's attention state */
    int n_ctx;               /* context size: positions the sequence may hold */
    int n_alloc;             /* positions the model's attention state has now (<= n_ctx) */
    int keep;                /* tokens kept at the front on a shift (< n_ctx) */
    int shift;               /* 1: shift when full; 0: generation_append reports GENERATE_FULL */
    float *logits;           /* (V,) next-token logits after token n_run-1 (sampler_sample
                              * turns them into probabilities in place); owned by the model */
    GenerationStats stats;
} Generation;

/* Makes an empty sequence of context n_ctx, and sizes the model's attention state
 * (model_set_context) for n_alloc positions, 1..n_ctx: n_ctx when the run's length is
 * known; fewer for an interactive run, whose state then doubles, up to n_ctx, when the
 * sequence outgrows it, its tokens run again from position 0 (as after a shift).
 * 0 <= keep < n_ctx. Returns 0, or -1 after a stderr line. */
int generation_init(Generation *g, Model *m, int n_ctx, int n_alloc, int keep, int shift);

/* Appends n tokens (input: 1 counts them as input, 0 as generated; input that follows only
 * input extends n_prompt), first growing the attention state if they outgrow it (where
 * that memory cannot be had, after a stderr line, n_ctx is lowered to the size it has),
 * shifting the context whenever it is full (n_prompt then counts
 * the prompt's tokens that stayed), then runs every token the model has not run, in
 * chunks, leaving the next-token logits in g->logits. Returns 0; GENERATE_FULL (nothing
 * appended) if the tokens do not fit and shifting is off; -1 after a stderr line (a model
 * error, or non-finite logits). */
int generation_append(Generation *g, const int *ids, int n, int input);

/* Releases the token array. Safe on a zeroed or freed Generation. */
void generation_free(Generation *g);

/* How the loop behaves (run.c fills it from the flags). */
typedef struct {
    int steps;                   /* tokens to generate per turn (-n) */
    int interactive;             /* 1: after each turn, read a line from `input`, continue */
    const char *const *reverse_prompts;  /* (n_reverse,) non-empty: end a turn when the */
    int n_reverse;                       /* output ends with any of them (-r; without -I: or
                                          * with one and 2 bytes more); 0: none */
    /* a watcher of the generated tokens, or NULL: called with each sampled token `next`
     * before it is printed, once the model has read position g->n_tokens - 1 (the lab's
     * --attn-top); returns 0, or -1 after a stderr line (generation stops, failed) */
    int (*watch)(void *ctx, const Generation *g, int next);
    void *watch_ctx;             /* passed back to watch */
    int quiet;                   /* 1: print none of the text: neither prompt, tokens, input
                                    lines nor the final newline (the watcher prints its own) */
    FILE *input;                 /* where interactive lines come from (stdin) */
    FILE *prompt_to;             /* input is a terminal: "> " goes here when a line is
                                    awaited (stdout, or stderr when stdout is a file); NULL:
                                    none (a pipe) */
    int line_shown;              /* 1: the terminal echoes a typed line where the text goes
                                    (stdin and stdout both terminals); 0: each line is
                                    written to stdout, so the text holds what the model read */
} GenerateOptions;

/* Runs the prompt ids (n_prompt >= 1, fits the context), echoing it, then turns of
 * sampling until -n tokens, an end token (tokenizer_ends), or a reverse prompt (a
 * prompt that ends with an end token or a reverse prompt has ended the first turn); in
 * interactive mode each turn is followed by a newline and a line of input, both appended
 * to the sequence (earlier tokens are run again only by a shift or a growth), until end of
 * input.
 * Streams the text to stdout, a line of input included when it does not come from a
 * terminal (which echoes it), so that stdout shows what the model reads. Returns 0, 1
 * after a stderr line (a model or data failure). */
int generate(Generation *g, const Tokenizer *tok, Sampler *sampler, const GenerateOptions *o,
             const int *prompt, int n_prompt);

#endif /* GENERATE_H */

/* tutorial.h: what the tutorial program's two files share: lab/tutorial.c prints the
 * numbers of docs/tutorial.md, lab/tutorial_figures.c draws its pictures from the same
 * examples and the same calls.
 */
#ifndef TUTORIAL_H
#define TUTORIAL_H

#include "tokenizer.h"   /* Tokenizer */

#define TUTORIAL_PEOPLE 4       /* rows of the waist table (step 1) */
#define TUTORIAL_TOY_V 5        /* words of the sampling step's toy vocabulary */
#define TUTORIAL_MAX_WORD 32    /* longest word `merges` takes, in bytes */
#define TUTORIAL_MAX_TOKENS 256 /* longest text a step encodes */
#define TUTORIAL_ROPE_N 8       /* positions of the rope step's head of 4 */
#define TUTORIAL_LENS_TEXT "ROMEO:\nBut soft, what light through yonder"   /* block's text */
#define TUTORIAL_LOSS_TEXT "ROMEO:\nBut soft, what light"   /* loss's text */
#define TUTORIAL_ADAMW_LR 0.1f      /* the adamw step's settings */
#define TUTORIAL_ADAMW_BETA1 0.9f
#define TUTORIAL_ADAMW_BETA2 0.99f
#define TUTORIAL_ADAMW_EPS 1e-8f

extern const float TUTORIAL_WAIST[TUTORIAL_PEOPLE];   /* keys: waists in cm */
extern const float TUTORIAL_KG[TUTORIAL_PEOPLE];      /* values: weights in kg */
extern const float TUTORIAL_X[12];     /* (3, 4) the example's three tokens */
extern const float TUTORIAL_WQ[12];    /* (3, 4) W_Q stored (out, in), as the engine does */
extern const float TUTORIAL_WK[12];    /* (3, 4) W_K */
extern const float TUTORIAL_WV[12];    /* (3, 4) W_V */
extern const float TUTORIAL_Q[9];      /* (3, 3) x W_Q */
extern const float TUTORIAL_K[9];      /* (3, 3) x W_K */
extern const float TUTORIAL_V[9];      /* (3, 3) x W_V */
extern const char *const TUTORIAL_WORDS[TUTORIAL_TOY_V];   /* the toy vocabulary */
extern const float TUTORIAL_LOGITS[TUTORIAL_TOY_V];        /* its logits */
extern const float TUTORIAL_ADAMW_GRADS[3];   /* the adamw step's gradients, steps 1 .. 3 */

/* Prints v with `decimals` decimals on standard output, never as "-0.0000". */
void tutorial_print_number(float v, int decimals);

/* probs (n,) = softmax(logits (n,)), through kernels_exp_sum. */
void tutorial_softmax(float *probs, const float *logits, int n);

/* Kernel regression of the waist table by the engine's Gaussian attention: the weights
 * w (TUTORIAL_PEOPLE,) of query's guess with width sigma, and the guess *out. Returns 0,
 * or 1 if memory ran out. */
int tutorial_kernel(float sigma, float query, float *w, float *out);

/* Exact attention of one query (3,) over the example's keys and values with the given
 * score scale: its weights w (3,) and output o (3,). */
void tutorial_attend_one(const float *query, float scale, float *w, float *o);

/* The shipped tokenizer (weights/), loaded; returns 0 or -1 (tokenizer_load said why). */
int tutorial_load_tokenizer(Tokenizer *t);

/* One row of the merges of a word: the word's tokens after the merge `id` (-1: the bytes
 * before any merge). */
typedef struct {
    int id;                          /* the merge just applied, or -1 */
    int count;                       /* tokens of the word now */
    int ids[TUTORIAL_MAX_WORD];      /* (count,) their ids */
} TutorialMergeRow;

/* BPE's merges of word (1 to TUTORIAL_MAX_WORD bytes) in the order the trainer learned
 * them: rows (max_rows,) from the bytes to the final tokens, by tokenizer_merge with t's
 * vocabulary cut at each id in turn. Returns the row count, or -1 (with a stderr line). */
int tutorial_merges(const Tokenizer *t, const char *word, TutorialMergeRow *rows, int max_rows);

/* q (TUTORIAL_ROPE_N, 4) = [1, 1, 1, 1] at positions 0 .. TUTORIAL_ROPE_N - 1, rotated by
 * block_qkv in a Llama head of 4 (identity W_Q, W_K: k is the same); pair (0, 1) turns 1
 * rad per position, pair (2, 3) 0.01 rad. */
void tutorial_rope(float *q, float *k);

/* The model's guess if it stopped early: the next-token distribution after the
 * embeddings and after each block, by the engine's functions (block.c, attention.c). */
typedef struct {
    Tokenizer tokenizer;   /* the shipped tokenizer, for the tokens' bytes */
    int n_tokens;          /* tokens of the text */
    int n_stages;          /* 1 + layers: stage 0 the embeddings, stage s after block s - 1 */
    int vocab_size;
    float *probs;          /* (n_stages, vocab_size) owned */
    int same;              /* 1 if model_forward's logits equal the last stage's within 1e-5 */
} TutorialLens;

/* Fills lens for text (the shipped model); returns 0, or -1 (a stderr line, nothing to
 * free). tutorial_lens_free releases it. */
int tutorial_lens(TutorialLens *lens, const char *text);
void tutorial_lens_free(TutorialLens *lens);

/* The shipped model's cross-entropy on each next token of a text. */
typedef struct {
    Tokenizer tokenizer;                 /* the shipped tokenizer, for the tokens' bytes */
    int n_tokens;                        /* tokens of the text; n_tokens - 1 predicted */
    int ids[TUTORIAL_MAX_TOKENS];        /* (n_tokens,) */
    float p[TUTORIAL_MAX_TOKENS];        /* p[i]: probability of ids[i] given the ones before */
    float loss[TUTORIAL_MAX_TOKENS];     /* -ln p[i], by train_crossentropy_forward; [0] unused */
} TutorialLosses;

/* Fills losses for text; returns 0, or -1 (a stderr line, nothing to free).
 * tutorial_losses_free releases it. */
int tutorial_losses(TutorialLosses *losses, const char *text);
void tutorial_losses_free(TutorialLosses *losses);

/* One AdamW step (kernels_adamw) of the adamw step's parameter: lr 0.1, beta1 0.9, beta2
 * 0.99, eps 1e-8, the given weight decay, at step (1, 2, ...) with gradient grad. */
void tutorial_adamw(float *param, float *m, float *v, float grad, int step, float decay);

/* Writes the picture NAME (an SVG document) to standard output. Returns 0, 1 if a
 * computation failed, or 2 (with a stderr line) if there is no such picture. */
int tutorial_figure(const char *name);

/* The pictures' names, separated by ", ". */
const char *tutorial_figure_names(void);

#endif /* TUTORIAL_H */

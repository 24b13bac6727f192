/* tutorial.h: what the tutorial program's two files share: lab/tutorial.c prints the
 * numbers of docs/tutorial.md, lab/tutorial_figures.c draws its pictures from the same
 * examples and the same calls.
 */
#ifndef TUTORIAL_H
#define TUTORIAL_H

#define TUTORIAL_PEOPLE 4   /* rows of the waist table (step 1) */
#define TUTORIAL_TOY_V 5    /* words of the sampling step's toy vocabulary */

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

/* Writes the picture NAME (an SVG document) to standard output. Returns 0, 1 if a
 * computation failed, or 2 (with a stderr line) if there is no such picture. */
int tutorial_figure(const char *name);

/* The pictures' names, separated by ", ". */
const char *tutorial_figure_names(void);

#endif /* TUTORIAL_H */

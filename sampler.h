/* sampler.h: turn a row of logits into the next token id.
 *
 * Greedy at temperature 0; otherwise softmax(logits / temperature), optionally cut
 * to the top_k most likely tokens and then to the smallest set whose probability
 * exceeds top_p (nucleus), and sampled with the sampler's own xorshift generator,
 * so that a seed gives the same draws from the same logits on every machine (the logits
 * of two builds may differ in their last bits, kernels.h, and a nearly flat distribution
 * then draws other tokens). A token of probability 0 is never drawn. With top_k = 0 the
 * arithmetic is llama2.c's (same generator, same coin, same nucleus cut). The most
 * likely token always survives the cuts, and a temperature so small that logit / T
 * overflows scales the differences from the largest logit instead.
 */
#ifndef SAMPLER_H
#define SAMPLER_H

#include <stdint.h>   /* uint64_t */

typedef struct {
    int index;        /* token id */
    float prob;       /* its probability */
} SamplerCandidate;

typedef struct {
    int vocab_size;                /* V: length of each logits row */
    float temperature;             /* 0 = greedy */
    float top_p;                   /* nucleus mass in (0, 1]; 1 disables the cut */
    int top_k;                     /* keep the k most likely; 0 disables */
    uint64_t rng_state;            /* xorshift state, never 0 */
    SamplerCandidate *candidates;  /* (2V,) owned scratch: the candidates, then the sort's */
} Sampler;

/* Prepare a sampler for rows of vocab_size logits. seed must be nonzero. Returns 0,
 * or -1 with a stderr line if an argument is out of range or memory runs out. */
int sampler_init(Sampler *s, int vocab_size, float temperature, float top_p, int top_k,
                 uint64_t seed);

/* Release the scratch. Safe on a zeroed or already freed Sampler. */
void sampler_free(Sampler *s);

/* Pick the next token from logits (V,), which may be overwritten (scaled in place).
 * Always returns an id in 0..V-1; the caller checks that the logits are finite. */
int sampler_sample(Sampler *s, float *logits);

/* The generator, exposed for tests: next 32 random bits, and a float in [0, 1). */
uint32_t sampler_random_u32(uint64_t *state);
float sampler_random_f32(uint64_t *state);

#endif /* SAMPLER_H */

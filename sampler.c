/* sampler.c: greedy, temperature, top-k and top-p sampling with a seeded generator.
 *
 * The generator is xorshift64* (Marsaglia 2003, "Xorshift RNGs"; Vigna 2016), the
 * same one llama2.c uses, so with top_k = 0 a seed picks the same tokens as
 * llama2.c's sampler does. No allocation after sampler_init.
 */
#include "sampler.h"

#include <math.h>     /* expf, isfinite */
#include <stdio.h>    /* fprintf(stderr) */
#include <stdlib.h>   /* malloc, free */
#include <string.h>   /* memcpy, memset */

#include "kernels.h"  /* kernels_argmax */

#define XORSHIFT_MULTIPLIER 0x2545F4914F6CDD1DULL  /* xorshift64* output multiplier */
#define FLOAT_MANTISSA_SCALE 16777216.0f           /* 2^24: 24 random bits -> [0, 1) */

uint32_t sampler_random_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * XORSHIFT_MULTIPLIER) >> 32);
}

float sampler_random_f32(uint64_t *state) {
    return (float)(sampler_random_u32(state) >> 8) / FLOAT_MANTISSA_SCALE;
}

int sampler_init(Sampler *s, int vocab_size, float temperature, float top_p, int top_k,
                 uint64_t seed) {
    memset(s, 0, sizeof *s);
    if (vocab_size < 1 || !(temperature >= 0.0f) || !(top_p > 0.0f && top_p <= 1.0f) ||
        top_k < 0 || seed == 0) {
        fprintf(stderr, "sampler: invalid settings (got vocab %d, temperature %g, top_p %g, "
                "top_k %d, seed %llu; expected vocab >= 1, temperature >= 0, top_p in (0, 1], "
                "top_k >= 0, seed >= 1)\n", vocab_size, (double)temperature, (double)top_p,
                top_k, (unsigned long long)seed);
        return -1;
    }
    s->candidates = malloc(2 * (size_t)vocab_size * sizeof *s->candidates);
    if (!s->candidates) {
        fprintf(stderr, "sampler: out of memory for %d candidates\n", vocab_size);
        return -1;
    }
    s->vocab_size = vocab_size;
    s->temperature = temperature;
    s->top_p = top_p;
    s->top_k = top_k;
    s->rng_state = seed;
    return 0;
}

void sampler_free(Sampler *s) {
    free(s->candidates);
    memset(s, 0, sizeof *s);
}

/* x (n,) = softmax(x), max-subtracted. */
static void softmax(float *x, int n) {
    float max = x[kernels_argmax(x, n)], sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

/* A probability's sort key: the larger the probability, the smaller the key (a float
 * >= 0 orders as its bits; -0 is taken as +0, as a comparison takes it). */
static uint32_t prob_key(float prob) {
    uint32_t bits;
    prob += 0.0f;   /* -0 + 0 = +0 */
    memcpy(&bits, &prob, sizeof bits);
    return ~bits;
}

/* c (n,) sorted by probability, largest first, equal ones by token id (so the order never
 * depends on the sort algorithm); tmp (n,) scratch. A stable radix sort, one byte of the
 * key a pass from the lowest, keeps equal keys in id order, as the candidates are built; a
 * byte that all the keys share leaves the order as it is, and its pass is skipped (a flat
 * distribution's probabilities share their top bytes). Linear in n: a flat distribution
 * keeps most of the vocabulary, whose comparison sort would cost more than a small model's
 * forward pass. */
static void sort_by_prob(SamplerCandidate *c, SamplerCandidate *tmp, int n) {
    SamplerCandidate *out = c;
    int count[4][256] = {{0}};   /* count[b][d]: the keys whose byte b is d */
    for (int i = 0; i < n; i++) {
        uint32_t key = prob_key(c[i].prob);
        for (int b = 0; b < 4; b++) count[b][(key >> 8 * b) & 0xFF]++;
    }
    for (int b = 0; b < 4; b++) {
        if (count[b][(prob_key(c[0].prob) >> 8 * b) & 0xFF] == n) continue;   /* one value */
        int next[256];   /* where the next key of byte value d goes */
        for (int d = 0, at = 0; d < 256; at += count[b][d], d++) next[d] = at;
        for (int i = 0; i < n; i++) tmp[next[(prob_key(c[i].prob) >> 8 * b) & 0xFF]++] = c[i];
        SamplerCandidate *sorted = tmp;
        tmp = c;
        c = sorted;
    }
    if (c != out) memcpy(out, c, (size_t)n * sizeof *c);
}

/* Inverse-CDF draw over all n probabilities: the first i whose cumulative sum exceeds
 * coin. Where rounding left the float total just under coin, the last token of a
 * probability above 0 (llama2.c takes n - 1, which may have none: the same token
 * wherever that one has some). */
static int sample_all(const float *probs, int n, float coin) {
    float cdf = 0.0f;
    int last = 0;
    for (int i = 0; i < n; i++) {
        cdf += probs[i];
        if (coin < cdf) return i;
        if (probs[i] > 0.0f) last = i;
    }
    return last;
}

/* Draw from the most likely candidates: keep the top k (if k > 0), then the shortest
 * prefix whose mass exceeds top_p of the top k's mass (k > 0) or of the whole
 * distribution (k = 0), and draw within it. */
static int sample_truncated(Sampler *s, const float *probs, float coin) {
    int n = 0, V = s->vocab_size, k = s->top_k;
    /* Without top-k, a token below (1 - p) / (V - 1) can never be inside the nucleus
     * (llama2.c's observation), so it is dropped before sorting. */
    float cutoff = k == 0 && V > 1 ? (1.0f - s->top_p) / (float)(V - 1) : 0.0f;
    for (int i = 0; i < V; i++) {
        if (probs[i] >= cutoff) {
            s->candidates[n].index = i;
            s->candidates[n].prob = probs[i];
            n++;
        }
    }
    if (n == 0) {   /* nothing reached the cut-off (p below 1/V on a flat row): keep the best */
        int best = kernels_argmax(probs, V);
        s->candidates[0].index = best;
        s->candidates[0].prob = probs[best];
        n = 1;
    }
    sort_by_prob(s->candidates, s->candidates + V, n);
    if (k > 0 && k < n) n = k;
    /* With top-k the nucleus is taken of the renormalised top k (as llama.cpp does);
     * without it, of the whole distribution (as llama2.c does). */
    float target = s->top_p;
    if (k > 0) {
        float kept = 0.0f;
        for (int i = 0; i < n; i++) kept += s->candidates[i].prob;
        target *= kept;
    }
    float cumulative = 0.0f;
    int last = n - 1;
    for (int i = 0; i < n; i++) {
        cumulative += s->candidates[i].prob;
        if (cumulative > target) { last = i; break; }
    }
    float r = coin * cumulative, cdf = 0.0f;
    for (int i = 0; i <= last; i++) {
        cdf += s->candidates[i].prob;
        if (r < cdf) return s->candidates[i].index;
    }
    return s->candidates[last].index;
}

int sampler_sample(Sampler *s, float *logits) {
    int V = s->vocab_size;
    if (s->temperature == 0.0f) return kernels_argmax(logits, V);
    float max = logits[kernels_argmax(logits, V)];
    if (isfinite(max / s->temperature)) {   /* llama2.c's arithmetic: scale, then softmax */
        for (int i = 0; i < V; i++) logits[i] /= s->temperature;
    } else {   /* a tiny temperature overflows logit / T: scale the differences instead */
        for (int i = 0; i < V; i++) logits[i] = (logits[i] - max) / s->temperature;
    }
    softmax(logits, V);
    float coin = sampler_random_f32(&s->rng_state);
    if (s->top_k == 0 && s->top_p >= 1.0f) return sample_all(logits, V, coin);
    return sample_truncated(s, logits, coin);
}

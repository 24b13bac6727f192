/* test_sampler.c: the sampler's generator, greedy choice, and the distributions that
 * temperature, top-k and top-p sampling must produce.
 *
 * The generator's expected outputs come from an independent Python transcription of
 * xorshift64* (the command is next to the numbers). Distribution checks draw many
 * samples with a fixed seed and compare frequencies with the exact probabilities,
 * with bounds of several standard errors, so they are deterministic and meaningful.
 */
#include "sampler.h"

#include <math.h>      /* expf, fabs, sqrt, NAN */
#include <stdio.h>     /* printf */
#include <stdlib.h>    /* qsort */
#include <string.h>    /* memcpy */

#include "tests/check.h"   /* check_* */

#define DRAWS 200000

/* python3 -c "M=2**64-1; s=42
 * for i in range(5): s^=s>>12; s=(s^(s<<25))&M; s^=s>>27; print(((s*0x2545F4914F6CDD1D)&M)>>32)" */
static void test_generator(void) {
    const uint32_t want[5] = {1456360119u, 3359763283u, 3393612768u, 4054632243u, 3283045847u};
    uint64_t state = 42;
    int ok = 1;
    for (int i = 0; i < 5; i++) ok &= sampler_random_u32(&state) == want[i];
    check_true(ok, "xorshift64* from seed 42 matches the Python transcription");
    state = 7;
    float lo = 1.0f, hi = 0.0f;
    for (int i = 0; i < DRAWS; i++) {
        float r = sampler_random_f32(&state);
        if (r < lo) lo = r;
        if (r > hi) hi = r;
    }
    check_true(lo >= 0.0f && hi < 1.0f && lo < 0.001f && hi > 0.999f,
               "random floats cover [0, 1) (min %g, max %g)", (double)lo, (double)hi);
}

/* Draws DRAWS samples from logits (V <= 8) and returns the frequencies in freq. */
static void frequencies(Sampler *s, const float *logits, int V, double *freq) {
    float row[8];
    for (int i = 0; i < V; i++) freq[i] = 0;
    for (int n = 0; n < DRAWS; n++) {
        memcpy(row, logits, (size_t)V * sizeof(float));
        freq[sampler_sample(s, row)] += 1.0 / DRAWS;
    }
}

/* Every frequency within 5 standard errors of the expected probability. */
static int matches(const double *freq, const double *prob, int V) {
    int ok = 1;
    for (int i = 0; i < V; i++) {
        double se = sqrt(prob[i] * (1 - prob[i]) / DRAWS) + 1e-12;
        ok &= fabs(freq[i] - prob[i]) <= 5 * se;
    }
    return ok;
}

static void test_distributions(void) {
    enum { V = 5 };
    const float logits[V] = {2.0f, 1.0f, 0.5f, -1.0f, 0.0f};
    double p[V], freq[V], z = 0;
    Sampler s;

    /* greedy picks the argmax; ties go to the first */
    float row[V];
    memcpy(row, logits, sizeof row);
    sampler_init(&s, V, 0.0f, 1.0f, 0, 1);
    check_true(sampler_sample(&s, row) == 0, "temperature 0 is greedy");
    float tie[3] = {1.0f, 3.0f, 3.0f};
    sampler_free(&s);
    sampler_init(&s, 3, 0.0f, 1.0f, 0, 1);
    check_true(sampler_sample(&s, tie) == 1, "greedy breaks ties to the lowest id");
    sampler_free(&s);

    /* temperature 2: p ~ exp(logit / 2) */
    for (int i = 0; i < V; i++) z += (p[i] = exp((double)logits[i] / 2.0));
    for (int i = 0; i < V; i++) p[i] /= z;
    sampler_init(&s, V, 2.0f, 1.0f, 0, 12345);
    frequencies(&s, logits, V, freq);
    check_true(matches(freq, p, V), "temperature 2 samples softmax(logits / 2) "
               "(freq %.3f %.3f %.3f %.3f %.3f)", freq[0], freq[1], freq[2], freq[3], freq[4]);
    sampler_free(&s);

    /* top-k 2 at temperature 1: only the two largest, renormalised */
    double e0 = exp(2.0), e1 = exp(1.0), pk[V] = {e0 / (e0 + e1), e1 / (e0 + e1), 0, 0, 0};
    sampler_init(&s, V, 1.0f, 1.0f, 2, 99);
    frequencies(&s, logits, V, freq);
    check_true(matches(freq, pk, V), "top-k 2 samples the two most likely, renormalised");
    sampler_free(&s);

    /* top-p: probabilities at T=1 are .563 .207 .126 .028 .076 (sorted: 0, 1, 2, 4, 3);
     * p = 0.8 keeps the shortest prefix with mass > 0.8: tokens 0, 1, 2 (.896) */
    z = 0;
    for (int i = 0; i < V; i++) z += (p[i] = exp((double)logits[i]));
    for (int i = 0; i < V; i++) p[i] /= z;
    double kept = p[0] + p[1] + p[2], pp[V] = {p[0] / kept, p[1] / kept, p[2] / kept, 0, 0};
    sampler_init(&s, V, 1.0f, 0.8f, 0, 2024);
    frequencies(&s, logits, V, freq);
    check_true(matches(freq, pp, V), "top-p 0.8 samples the nucleus {0, 1, 2}, renormalised");
    sampler_free(&s);

    /* top-k 3 then top-p 0.8 of the top 3's mass (.896): renormalised .628 .231 .141, whose
     * shortest prefix above 0.8 is {0, 1} (.859); 0.8 of the whole mass would keep {0, 1, 2} */
    double pkp[V] = {p[0] / (p[0] + p[1]), p[1] / (p[0] + p[1]), 0, 0, 0};
    sampler_init(&s, V, 1.0f, 0.8f, 3, 31);
    frequencies(&s, logits, V, freq);
    check_true(matches(freq, pkp, V), "top-k 3 with top-p 0.8 samples {0, 1}: the nucleus of "
               "the renormalised top 3 (freq %.3f %.3f %.3f)", freq[0], freq[1], freq[2]);
    sampler_free(&s);

    /* top-p 0.5 over two equal tokens: the nucleus is the shortest prefix whose mass
     * exceeds 0.5 (llama2.c: cumulative_prob > topp), so both tokens, not the first alone */
    const float two[2] = {0.0f, 0.0f};
    double half[2] = {0.5, 0.5};
    sampler_init(&s, 2, 1.0f, 0.5f, 0, 55);
    frequencies(&s, two, 2, freq);
    check_true(matches(freq, half, 2), "top-p 0.5 over two equal tokens samples both (freq "
               "%.3f %.3f)", freq[0], freq[1]);
    sampler_free(&s);

    /* logits far from 0 (the ones above plus 1000; exp(1000) overflows a float): the same
     * probabilities, as softmax subtracts the maximum first */
    float shifted[V];
    for (int i = 0; i < V; i++) shifted[i] = logits[i] + 1000.0f;
    sampler_init(&s, V, 1.0f, 1.0f, 0, 4242);
    frequencies(&s, shifted, V, freq);
    check_true(matches(freq, p, V), "logits near 1000 sample softmax(logits) (freq %.3f %.3f "
               "%.3f %.3f %.3f)", freq[0], freq[1], freq[2], freq[3], freq[4]);
    sampler_free(&s);

    /* the same seed gives the same sequence */
    Sampler a, b;
    sampler_init(&a, V, 1.0f, 0.9f, 0, 77);
    sampler_init(&b, V, 1.0f, 0.9f, 0, 77);
    int same = 1;
    for (int n = 0; n < 1000; n++) {
        float ra[V], rb[V];
        memcpy(ra, logits, sizeof ra);
        memcpy(rb, logits, sizeof rb);
        same &= sampler_sample(&a, ra) == sampler_sample(&b, rb);
    }
    check_true(same, "same seed, same samples");
    sampler_free(&a);
    sampler_free(&b);

    check_true(sampler_init(&s, V, 1.0f, 0.0f, 0, 1) == -1, "top-p 0 rejected");
    check_true(sampler_init(&s, V, -1.0f, 0.5f, 0, 1) == -1, "negative temperature rejected");
    check_true(sampler_init(&s, V, 1.0f, 0.5f, 0, 0) == -1, "seed 0 rejected");
    check_true(sampler_init(&s, V, 1.0f, 0.5f, -1, 1) == -1, "top-k -1 rejected");
    sampler_free(&s);
}

/* Edge cases that must not read before the candidate list: no token reaches the top-p
 * cut-off (flat logits, p below 1/V), NaN logits, and a temperature so small that
 * logit / T overflows. Each must give a token id in 0..V-1 (the most likely one where
 * there is one). */
static void test_edges(void) {
    enum { V = 1000 };
    float logits[V];
    Sampler s;
    int ok = sampler_init(&s, V, 1.0f, 1e-6f, 0, 7) == 0, good = 1;
    for (int trial = 0; ok && trial < 100; trial++) {
        for (int i = 0; i < V; i++) logits[i] = 0.5f;
        int id = sampler_sample(&s, logits);
        good &= id >= 0 && id < V;
    }
    check_true(ok && good, "flat logits with top-p 1e-6 (below 1/V): always a valid id");
    for (int i = 0; i < V; i++) logits[i] = NAN;
    int id = ok ? sampler_sample(&s, logits) : -1;
    check_true(id >= 0 && id < V, "NaN logits: a valid id (got %d), no read out of bounds", id);
    sampler_free(&s);
    ok = sampler_init(&s, V, 2e-38f, 0.9f, 0, 7) == 0;
    for (int i = 0; i < V; i++) logits[i] = (float)(i % 17) - 3.0f;
    logits[421] = 30.0f;
    id = ok ? sampler_sample(&s, logits) : -1;
    check_true(id == 421, "temperature 2e-38 (logit / T overflows): the most likely token "
               "(got %d, want 421)", id);
    sampler_free(&s);
}

/* A token whose probability underflows to 0 is never drawn: 31,999 equal logits and a
 * last one of -1e30 (exp gives 0), at temperature 1 with no cut, and a seed whose coin
 * (the sampler's first, found by trying seeds) falls past the float sum of the
 * probabilities, 0.99978 (by hand, in float32), where llama2.c's draw takes the last id. */
static void test_zero_probability(void) {
    enum { V = 32000 };
    static float logits[V];
    uint64_t seed = 0, state;
    float coin = 0.0f;
    while (coin < 0.9998f && seed < 1000000) {
        state = ++seed;
        coin = sampler_random_f32(&state);
    }
    Sampler s;
    if (!check_true(coin >= 0.9998f && sampler_init(&s, V, 1.0f, 1.0f, 0, seed) == 0,
                    "zero probability: seed %llu, first coin %.7f", (unsigned long long)seed,
                    (double)coin)) return;
    for (int i = 0; i < V; i++) logits[i] = i == V - 1 ? -1e30f : 0.0f;
    int id = sampler_sample(&s, logits);   /* logits now hold the probabilities */
    float cdf = 0.0f;
    for (int i = 0; i < V; i++) cdf += logits[i];
    /* (x87's wider sums may reach past the coin: then any id but the last is right too) */
    check_true(logits[V - 1] == 0.0f && id != V - 1, "zero probability: a coin of %.7f, the "
               "sum %.7f, draws id %d, not the last, of probability 0", (double)coin,
               (double)cdf, id);
    sampler_free(&s);
}

/* A coin of exactly 0 draws the first token whose cumulative probability exceeds it, not
 * a first token of probability 0 (exp(-200) underflows): the seed 41130263, found by
 * search, gives the coin 0 first (xorshift64*'s output 168, below 2^8; the Python
 * transcription above, s = 41130263, prints 168). */
static void test_zero_coin(void) {
    uint64_t state = 41130263;
    float coin = sampler_random_f32(&state);
    Sampler s;
    if (!check_true(coin == 0.0f && sampler_init(&s, 3, 1.0f, 1.0f, 0, 41130263) == 0,
                    "zero coin: seed 41130263 gives the coin 0 (got %g)", (double)coin)) return;
    float logits[3] = {-200.0f, 0.0f, 0.0f};
    int id = sampler_sample(&s, logits);
    check_true(logits[0] == 0.0f && id == 1, "a coin of 0 draws id 1 (got %d), not id 0 of "
               "probability 0", id);
    sampler_free(&s);
}

/* The order sampler.h promises, for qsort: probability, largest first; equal ones by id. */
static int by_prob_then_id(const void *a, const void *b) {
    const SamplerCandidate *x = a, *y = b;
    if (x->prob != y->prob) return x->prob > y->prob ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* llama2.c's arithmetic, transcribed from its run.c (sample(): logits[q] /= temperature,
 * then softmax(): the largest subtracted, expf, a float sum in order, each divided by it):
 * at temperature 0.7 over 32,000 logits the probabilities the sampler leaves in the row
 * must be these bits (a multiply by 1 / 0.7 in place of the divide changes some). */
static void test_llama2c_probabilities(void) {
    enum { V = 32000 };
    static float logits[V], want[V];
    uint64_t seed = 9;
    for (int i = 0; i < V; i++) logits[i] = 16.0f * sampler_random_f32(&seed) - 8.0f;
    float temperature = 0.7f, max = -INFINITY, sum = 0.0f;
    for (int i = 0; i < V; i++) {
        want[i] = logits[i] / temperature;
        if (want[i] > max) max = want[i];
    }
    for (int i = 0; i < V; i++) {
        want[i] = expf(want[i] - max);
        sum += want[i];
    }
    for (int i = 0; i < V; i++) want[i] /= sum;
    Sampler s;
    if (!check_true(sampler_init(&s, V, temperature, 0.9f, 0, 3) == 0, "a sampler at 0.7"))
        return;
    int id = sampler_sample(&s, logits), differ = 0;
    for (int i = 0; i < V; i++) differ += memcmp(&logits[i], &want[i], sizeof want[i]) != 0;
    check_true(differ == 0 && id >= 0 && id < V, "temperature 0.7: the probabilities are "
               "llama2.c's bits (%d of %d differ)", differ, V);
    sampler_free(&s);
}

/* The oracle: sampler.h's top-k and top-p draw written plainly, every candidate sorted by
 * qsort, over probs (V,); c (V,) scratch. */
static int reference_truncated(const float *probs, int V, float top_p, int top_k, float coin,
                               SamplerCandidate *c) {
    float cutoff = top_k == 0 && V > 1 ? (1.0f - top_p) / (float)(V - 1) : 0.0f;
    int n = 0, best = 0;
    for (int i = 0; i < V; i++) {
        if (probs[i] > probs[best]) best = i;
        if (probs[i] >= cutoff) c[n++] = (SamplerCandidate){i, probs[i]};
    }
    if (n == 0) c[n++] = (SamplerCandidate){best, probs[best]};
    qsort(c, (size_t)n, sizeof *c, by_prob_then_id);
    if (top_k > 0 && top_k < n) n = top_k;
    float target = top_p;
    if (top_k > 0) {
        float kept = 0.0f;
        for (int i = 0; i < n; i++) kept += c[i].prob;
        target *= kept;
    }
    float cumulative = 0.0f;
    int last = n - 1;
    for (int i = 0; i < n; i++) {
        cumulative += c[i].prob;
        if (cumulative > target) { last = i; break; }
    }
    float r = coin * cumulative, cdf = 0.0f;
    for (int i = 0; i <= last; i++) {
        cdf += c[i].prob;
        if (r < cdf) return c[i].index;
    }
    return c[last].index;
}

/* draws draws from logits (V,) with the sampler's settings, each against the oracle on
 * the probabilities the sampler leaves in the row; row, c (V,) scratch. Returns how many
 * drew the oracle's token. */
static int draws_as_reference(const float *logits, int V, float top_p, int top_k,
                              uint64_t seed, int draws, float *row, SamplerCandidate *c) {
    Sampler s;
    if (sampler_init(&s, V, 1.0f, top_p, top_k, seed) != 0) return 0;
    int same = 0;
    for (int d = 0; d < draws; d++) {
        memcpy(row, logits, (size_t)V * sizeof *row);
        uint64_t state = s.rng_state;
        int id = sampler_sample(&s, row);   /* row now holds the probabilities */
        float coin = sampler_random_f32(&state);
        same += id == reference_truncated(row, V, top_p, top_k, coin, c);
    }
    sampler_free(&s);
    return same;
}

/* The sampler's draws must be the oracle's, on rows with many equal values (ties in id
 * order), flat ones (most tokens in the nucleus), peaked ones (a few in it) and one
 * dominant token, at settings from a small nucleus to top-k alone. */
static void test_against_reference(void) {
    enum { V = 4096, DRAWS_EACH = 24 };
    static float logits[V], row[V];
    static SamplerCandidate c[V];
    const char *what[5] = {"three values, many ties", "flat", "peaked", "steep", "dominant"};
    const float top_p[6] = {0.5f, 0.9f, 0.95f, 0.99f, 0.999f, 1.0f};
    const int top_k[4] = {0, 1, 3, 40};
    uint64_t seed = 5;
    for (int kind = 0; kind < 5; kind++) {
        for (int i = 0; i < V; i++) {
            float u = sampler_random_f32(&seed);
            logits[i] = kind == 0 ? (float)(int)(3.0f * u) : kind == 1 ? 0.01f * u
                      : kind == 2 ? 8.0f * u * u : kind == 3 ? 24.0f * u * u * u * u
                      : i == 77 ? 6.0f : u;
        }
        int bad = 0;
        for (int p = 0; p < 6; p++)
            for (int k = 0; k < 4; k++) {
                if (top_p[p] == 1.0f && top_k[k] == 0) continue;   /* no cut: sample_all */
                bad += DRAWS_EACH - draws_as_reference(logits, V, top_p[p], top_k[k],
                                                       (uint64_t)(100 * p + k + 1), DRAWS_EACH,
                                                       row, c);
            }
        check_true(bad == 0, "top-k and top-p draws over %d tokens (%s) are the oracle's "
                   "(a plain qsort of every candidate): %d of %d differ", V, what[kind], bad,
                   23 * DRAWS_EACH);
    }
}

/* With top-k every token is a candidate and the sampler sorts them all in its scratch:
 * after a draw, its candidates must be qsort's order of (id, probability) over the
 * probabilities it leaves in the row, on rows with many equal values (ties in id order),
 * a flat one (every token above a top-p cut) and a peaked one. */
static void test_candidate_order(void) {
    enum { V = 32000 };
    static float row[V];
    static SamplerCandidate want[V];
    uint64_t seed = 5;
    const char *what[3] = {"three values, many ties", "flat", "peaked"};
    for (int kind = 0; kind < 3; kind++) {
        for (int i = 0; i < V; i++) {
            float u = sampler_random_f32(&seed);
            row[i] = kind == 0 ? (float)(int)(3.0f * u) : kind == 1 ? 0.01f * u : 8.0f * u * u;
        }
        Sampler s;
        if (sampler_init(&s, V, 1.0f, 0.9f, 40, 11) != 0) {
            check_true(0, "a sampler of %d tokens", V);
            return;
        }
        int id = sampler_sample(&s, row);   /* row now holds the probabilities */
        for (int i = 0; i < V; i++) want[i] = (SamplerCandidate){i, row[i]};
        qsort(want, V, sizeof *want, by_prob_then_id);
        int same = 1;
        for (int i = 0; i < V; i++)
            same &= s.candidates[i].index == want[i].index && s.candidates[i].prob == want[i].prob;
        check_true(same && id >= 0 && id < V, "top-k's candidates over %d tokens (%s) in the "
                   "order of qsort by probability, then id", V, what[kind]);
        sampler_free(&s);
    }
}

int main(void) {
    test_generator();
    test_zero_probability();
    test_zero_coin();
    test_distributions();
    test_edges();
    test_llama2c_probabilities();
    test_against_reference();
    test_candidate_order();
    return check_summary("test_sampler");
}

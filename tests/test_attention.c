/* test_attention.c: exact causal attention against the worked examples (a), (b), (c)
 * of docs/attention.md §12 and the properties G1, G2, G3, G7, G8, G10 listed in
 * docs/attention.md §12, plus a float64 naive reference on random data at awkward sizes,
 * and G10 for the trainer's backward (its gradients are checked in test_train).
 *
 * The expected numbers below were computed by numpy in float64 for docs/attention.md,
 * not by this code. Section numbers (§) are those of docs/attention.md. Tolerances:
 * float32 kernels match them to ~1e-6 relative, so 1e-5 absolute (plus 1e-6 relative
 * for values in the hundreds) has margin.
 */
#include "attention.h"

#include <math.h>      /* sqrt, exp, isfinite */
#include <stdint.h>    /* uint64_t */
#include <stdio.h>     /* printf */
#include <stdlib.h>    /* malloc */
#include <string.h>    /* memcmp, memcpy */

#include "kernels.h"       /* kernels_run, kernels_parallel_for, kernels_set_threads: the pool */
#include "tests/check.h"   /* check_* */

#define ATOL 1e-5
#define RTOL 1e-6
#define MAX_T 64           /* scratch sizing for the small cases here */

static float scratch[16 * 8 * MAX_T];   /* 16 heads, a block of 8 queries' score rows each */

/* One head, HS = d, n keys: attention of query q at the last position over all n keys
 * (the "non-causal" row: every key is visible). out (d,). */
static void attend_all(float *out, const float *q, const float *k, const float *v, int n,
                       int d, float scale) {
    AttentionShape shape = {1, 1, d, scale};
    attention_forward(&shape, out, q, k, v, n - 1, 1, scratch);
}

/* §12 (a): Nadaraya–Watson with a Gaussian kernel, through dot-product attention:
 * -(q - k)^2 / 2 = q k - k^2 / 2 - q^2 / 2, and the q^2 term cancels in the softmax,
 * so q' = [q, 1], k' = [k, -k^2 / 2] with scale 1 gives the same weights (§2). */
static void test_nadaraya_watson(void) {
    const float keys[3] = {68, 60, 64}, values[3] = {126, 110, 115};
    const float queries[3] = {62, 63, 65};
    const double want[3] = {112.500000760, 114.910135863, 115.197816948};
    float k[3 * 2], v[3 * 2], out[2];
    for (int j = 0; j < 3; j++) {
        k[2 * j] = keys[j];
        k[2 * j + 1] = -keys[j] * keys[j] / 2.0f;
        v[2 * j] = values[j];
        v[2 * j + 1] = 0.0f;
    }
    for (int i = 0; i < 3; i++) {
        float q[2] = {queries[i], 1.0f};
        attend_all(out, q, k, v, 3, 2, 1.0f);
        char what[64];
        snprintf(what, sizeof what, "§12 (a) Nadaraya-Watson q=%g", (double)queries[i]);
        check_close_f64(what, out, &want[i], 1, ATOL, RTOL);
    }
}

/* §12 (b): the three-input example. */
static const float EX_Q[9] = {1, 0, 2, 2, 2, 2, 2, 1, 3};
static const float EX_K[9] = {0, 1, 1, 4, 4, 0, 2, 3, 1};
static const float EX_V[9] = {1, 2, 3, 2, 8, 0, 2, 6, 3};

static void test_worked_example_b(void) {
    const double unscaled_all[9] = {1.93662106, 6.68310531, 1.59506841, 1.99999397, 7.96399160,
                                    0.0539764053, 1.99970461, 7.75989225, 0.358389295};
    const double scaled_all[9] = {1.86387420, 6.31937101, 1.70418870, 1.99910955, 7.81412350,
                                  0.273472058, 1.99255511, 7.47963559, 0.735877258};
    const double unscaled_causal[9] = {1, 2, 3, 1.99999386, 7.99996314, 1.84325238e-05,
                                       1.99970461, 7.75989225, 0.358389295};
    const double scaled_causal[9] = {1, 2, 3, 1.99902120, 7.99412720, 2.93640210e-03,
                                     1.99255511, 7.47963559, 0.735877258};
    float out[9];
    float scale = 1.0f / sqrtf(3.0f);
    /* non-causal: each query sees all three keys */
    for (int i = 0; i < 3; i++) attend_all(out + 3 * i, EX_Q + 3 * i, EX_K, EX_V, 3, 3, 1.0f);
    check_close_f64("§12 (b) unscaled, all keys", out, unscaled_all, 9, ATOL, RTOL);
    for (int i = 0; i < 3; i++) attend_all(out + 3 * i, EX_Q + 3 * i, EX_K, EX_V, 3, 3, scale);
    check_close_f64("§12 (b) scaled 1/sqrt(3), all keys", out, scaled_all, 9, ATOL, RTOL);
    /* causal: the three queries as one block at positions 0, 1, 2 */
    AttentionShape unscaled = {1, 1, 3, 1.0f}, scaled = {1, 1, 3, scale};
    attention_forward(&unscaled, out, EX_Q, EX_K, EX_V, 0, 3, scratch);
    check_close_f64("§12 (b) unscaled, causal", out, unscaled_causal, 9, ATOL, RTOL);
    attention_forward(&scaled, out, EX_Q, EX_K, EX_V, 0, 3, scratch);
    check_close_f64("§12 (b) scaled, causal", out, scaled_causal, 9, ATOL, RTOL);

    /* G7: two heads side by side must each equal the single-head result, in
     * concatenation order h0 | h1. Head 0 is the example; head 1 swaps K and V. */
    float q2[18], k2[18], v2[18], out2[18], want2[18], head1[9];
    attention_forward(&scaled, head1, EX_Q, EX_V, EX_K, 0, 3, scratch);
    for (int t = 0; t < 3; t++) {
        for (int h = 0; h < 2; h++) memcpy(q2 + 6 * t + 3 * h, EX_Q + 3 * t, 3 * sizeof(float));
        memcpy(k2 + 6 * t, EX_K + 3 * t, 3 * sizeof(float));
        memcpy(k2 + 6 * t + 3, EX_V + 3 * t, 3 * sizeof(float));
        memcpy(v2 + 6 * t, EX_V + 3 * t, 3 * sizeof(float));
        memcpy(v2 + 6 * t + 3, EX_K + 3 * t, 3 * sizeof(float));
        memcpy(want2 + 6 * t, out + 3 * t, 3 * sizeof(float));
        memcpy(want2 + 6 * t + 3, head1 + 3 * t, 3 * sizeof(float));
    }
    AttentionShape two_heads = {2, 2, 3, scale};
    attention_forward(&two_heads, out2, q2, k2, v2, 0, 3, scratch);
    check_true(memcmp(out2, want2, sizeof out2) == 0,
               "G7: two heads concatenate as the single-head results, bitwise");
    /* grouped-query: two query heads reading one kv head both give the example */
    AttentionShape grouped = {2, 1, 3, scale};
    attention_forward(&grouped, out2, q2, EX_K, EX_V, 0, 3, scratch);
    int same = 1;
    for (int t = 0; t < 3; t++)
        for (int h = 0; h < 2; h++)
            same &= memcmp(out2 + 6 * t + 3 * h, out + 3 * t, 3 * sizeof(float)) == 0;
    check_true(same, "G7: grouped-query heads share their kv head, bitwise");
}

/* §12 (c): scores in the thousands must not overflow (G8). */
static void test_large_scores(void) {
    const float q[4] = {64, 85, 61, 80};
    const float k[6] = {68, 91, 60, 87, 64, 88};
    const float v[6] = {126, 180, 110, 172, 115, 170};
    const double want_cross[4] = {126, 180, 126, 180};
    float out[4];
    for (float scale = 1.0f; scale > 0.5f; scale = 1.0f / sqrtf(2.0f)) {
        for (int i = 0; i < 2; i++) attend_all(out + 2 * i, q + 2 * i, k, v, 3, 2, scale);
        check_close_f64(scale == 1.0f ? "§12 (c) cross-attention, unscaled"
                                      : "§12 (c) cross-attention, scaled",
                        out, want_cross, 4, 0, 0);
        if (scale != 1.0f) break;
    }
    const float x[6] = {67, 91, 60, 87, 64, 84};
    const double want_self[6] = {67, 91, 67, 91, 67, 91};
    float self[6];
    AttentionShape shape = {1, 1, 2, 1.0f / sqrtf(2.0f)};
    attention_forward(&shape, self, x, x, x, 0, 3, scratch);
    check_close_f64("§12 (c) self-attention, causal: every row is X[0]", self, want_self, 6, 0, 0);
    /* scores of -1e4 against one of 0: the far key gets weight exactly 0, no NaN */
    const float qn[1] = {100}, kn[2] = {-100, 0}, vn[2] = {5, 7};
    float on[1];
    attend_all(on, qn, kn, vn, 2, 1, 1.0f);
    check_true(isfinite(on[0]) && on[0] == 7.0f, "G8: score -1e4 gets weight 0 (got %g)",
               (double)on[0]);
}

/* ---- random data: a float64 naive reference, and properties ---- */

static uint64_t rng = 0x9E3779B97F4A7C15ULL;   /* the random data's seed */

/* x (n,) uniform in [-amplitude, amplitude) */
static void fill_random(float *x, long n, float amplitude) {
    check_fill_random(&rng, x, n, amplitude);
}

/* Naive float64 causal attention, straight from the definition. */
static void naive_attention(double *out, const float *q, const float *k, const float *v,
                            int NH, int NKV, int HS, int pos, int T, double scale) {
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < NH; h++) {
            int g = h / (NH / NKV), n = pos + t + 1;
            double s[MAX_T], max = -1e300, z = 0;
            for (int j = 0; j < n; j++) {
                double dot = 0;
                for (int i = 0; i < HS; i++)
                    dot += (double)q[(t * NH + h) * HS + i] * (double)k[(j * NKV + g) * HS + i];
                s[j] = dot * scale;
                if (s[j] > max) max = s[j];
            }
            for (int j = 0; j < n; j++) z += (s[j] = exp(s[j] - max));
            for (int i = 0; i < HS; i++) {
                double acc = 0;
                for (int j = 0; j < n; j++) acc += s[j] / z * (double)v[(j * NKV + g) * HS + i];
                out[(t * NH + h) * HS + i] = acc;
            }
        }
    }
}

/* Random grouped-query attention of T queries after pos cached positions against the
 * float64 definition; G3: the block (prefill) equals the queries one at a time (decode),
 * bitwise; G2: keys and values after a query do not change its output. */
static void random_against_naive(int NH, int NKV, int HS, int pos, int T) {
    int N = pos + T, QD = NH * HS, KD = NKV * HS;
    size_t q_bytes = sizeof(float) * (size_t)(T * QD), kv_bytes = sizeof(float) * (size_t)(N * KD);
    float *q = malloc(q_bytes), *out = malloc(q_bytes), *out2 = malloc(q_bytes);
    float *k = malloc(kv_bytes), *v = malloc(kv_bytes), *k2 = malloc(kv_bytes);
    float *v2 = malloc(kv_bytes), *one = malloc(sizeof(float) * (size_t)QD);
    double *want = malloc(sizeof(double) * (size_t)(T * QD));
    fill_random(q, T * QD, 3.0f);
    fill_random(k, N * KD, 3.0f);
    fill_random(v, N * KD, 1.0f);
    float scale = 1.0f / sqrtf((float)HS);
    for (int i = 0; i < T * QD; i++) out[i] = NAN;   /* every output must be written */
    AttentionShape shape = {NH, NKV, HS, scale};
    attention_forward(&shape, out, q, k, v, pos, T, scratch);
    naive_attention(want, q, k, v, NH, NKV, HS, pos, T, (double)scale);
    char what[96];
    snprintf(what, sizeof what, "random GQA (NH %d, NKV %d, HS %d, pos %d, T %d) vs float64 "
             "naive", NH, NKV, HS, pos, T);
    check_close_f64(what, out, want, (size_t)(T * QD), ATOL, RTOL);

    int same = 1;
    for (int t = 0; t < T; t++) {
        attention_forward(&shape, one, q + t * QD, k, v, pos + t, 1, scratch);
        same &= memcmp(one, out + t * QD, sizeof(float) * (size_t)QD) == 0;
    }
    check_true(same, "G3: block prefill equals token-by-token decode, bitwise (%d queries)", T);

    memcpy(k2, k, kv_bytes);
    memcpy(v2, v, kv_bytes);
    int i = 2;   /* query index; position pos + i */
    for (int j = pos + i + 1; j < N; j++)
        for (int c = 0; c < KD; c++) {
            k2[j * KD + c] += 5.0f;
            v2[j * KD + c] = -9.0f;
        }
    attention_forward(&shape, out2, q, k2, v2, pos, T, scratch);
    check_true(memcmp(out2, out, sizeof(float) * (size_t)((i + 1) * QD)) == 0,
               "G2: future keys and values do not change earlier outputs (T %d)", T);
    free(q); free(out); free(k); free(v); free(k2); free(v2); free(out2); free(one); free(want);
}

static void test_random_against_naive(void) {
    random_against_naive(6, 2, 5, 4, 7);
    /* 16 queries and more: the keys and values packed (attention.c's pack_keys) */
    random_against_naive(3, 1, 13, 5, 20);
    /* heads of 64 (whole registers), blocks of eight queries and a short last block */
    random_against_naive(4, 2, 64, 3, 37);
}

/* G1: with one-hot values the output row is the weight row: nonnegative, summing to 1,
 * zero on future keys; G10: 1 and 2 threads agree bitwise. */
static void test_weights_and_threads(void) {
    enum { T = 8 };
    float q[T * T], k[T * T], v[T * T], w[T * T];
    fill_random(q, T * T, 4.0f);
    fill_random(k, T * T, 4.0f);
    for (int j = 0; j < T; j++)
        for (int c = 0; c < T; c++) v[j * T + c] = j == c ? 1.0f : 0.0f;
    AttentionShape shape = {1, 1, T, 1.0f};
    attention_forward(&shape, w, q, k, v, 0, T, scratch);
    int ok = 1;
    for (int i = 0; i < T; i++) {
        double sum = 0;
        for (int j = 0; j < T; j++) {
            ok &= w[i * T + j] >= 0.0f && (j <= i || w[i * T + j] == 0.0f);
            sum += (double)w[i * T + j];
        }
        ok &= fabs(sum - 1.0) < 1e-6;
    }
    check_true(ok, "G1: weights >= 0, rows sum to 1, future keys weigh 0");
    enum { NH = 8, HS = 16, N = 48 };
    static float qa[N * NH * HS], ka[N * NH * HS], va[N * NH * HS], o1[N * NH * HS],
                 o2[N * NH * HS];
    fill_random(qa, N * NH * HS, 2.0f);
    fill_random(ka, N * NH * HS, 2.0f);
    fill_random(va, N * NH * HS, 1.0f);
    AttentionShape big = {NH, NH, HS, 0.25f};
    if (attention_scratch_floats(&big, N) > sizeof scratch / sizeof scratch[0]) {
        check_true(0, "G10: attention_forward needs %zu floats of scratch, the test has %zu",
                   attention_scratch_floats(&big, N), sizeof scratch / sizeof scratch[0]);
        return;
    }
    kernels_set_threads(1);
    attention_forward(&big, o1, qa, ka, va, 0, N, scratch);
    kernels_set_threads(2);
    attention_forward(&big, o2, qa, ka, va, 0, N, scratch);
    check_true(memcmp(o1, o2, sizeof o1) == 0, "G10: 1 vs 2 threads bitwise identical");
}

/* ---- G10 for attention_backward ---- */

/* Two sequences of one backward shape (grouped-query, with dropout), large enough that
 * the kv heads are shared out among threads. */
enum { BW_NH = 8, BW_NKV = 4, BW_HS = 16, BW_T = 48, BW_C = BW_NH * BW_HS,
       BW_KVD = BW_NKV * BW_HS, BW_SCRATCH = 32768 };
typedef struct {
    AttentionShape shape;
    AttentionDropout drop;
    float q[2][BW_T * BW_C], dout[2][BW_T * BW_C], k[2][BW_T * BW_KVD], v[2][BW_T * BW_KVD];
    float dq[2][BW_T * BW_C], dk[2][BW_T * BW_KVD], dv[2][BW_T * BW_KVD];
    float scratch[2][BW_SCRATCH];   /* checked against attention_backward_scratch_floats */
} BackwardCase;

/* The backward of sequence s, into zeroed gradients. */
static void backward_sequence(void *ctx, int s) {
    BackwardCase *c = ctx;
    memset(c->dq[s], 0, sizeof c->dq[s]);
    memset(c->dk[s], 0, sizeof c->dk[s]);
    memset(c->dv[s], 0, sizeof c->dv[s]);
    attention_backward(&c->shape, c->dq[s], c->dk[s], c->dv[s], c->dout[s], c->q[s], c->k[s],
                       c->v[s], BW_T, &c->drop, c->scratch[s]);
}

/* Both sequences one after the other: each call's kv heads are its parallel loop. */
static void backward_both(void *ctx) {
    backward_sequence(ctx, 0);
    backward_sequence(ctx, 1);
}

/* One job per sequence, as the trainer calls it: each call runs inside a job. */
static void backward_in_jobs(void *ctx) {
    kernels_parallel_for(backward_sequence, ctx, 2, 1e9);
}

/* 1 if the gradients equal want's, bit for bit. */
static int same_gradients(const BackwardCase *c, const BackwardCase *want) {
    return memcmp(c->dq, want->dq, sizeof c->dq) == 0 &&
           memcmp(c->dk, want->dk, sizeof c->dk) == 0 &&
           memcmp(c->dv, want->dv, sizeof c->dv) == 0;
}

/* G10: attention_backward gives the same bits on 1 and 2 threads, as a parallel loop of
 * its own (outside kernels_run), on the pool (inside it), and inside a pool job. */
static void test_backward_threads(void) {
    static BackwardCase c, one;
    c.shape = (AttentionShape){BW_NH, BW_NKV, BW_HS, 0.25f};
    c.drop = (AttentionDropout){0.1f, 12345};
    size_t need = attention_backward_scratch_floats(&c.shape, BW_T);
    if (need > BW_SCRATCH) {
        check_true(0, "G10: attention_backward needs %zu floats of scratch, the test has %d",
                   need, (int)BW_SCRATCH);
        return;
    }
    for (int s = 0; s < 2; s++) {
        fill_random(c.q[s], BW_T * BW_C, 2.0f);
        fill_random(c.dout[s], BW_T * BW_C, 1.0f);
        fill_random(c.k[s], BW_T * BW_KVD, 2.0f);
        fill_random(c.v[s], BW_T * BW_KVD, 1.0f);
    }
    kernels_set_threads(1);
    backward_both(&c);
    one = c;
    kernels_set_threads(2);
    backward_both(&c);
    int outside = same_gradients(&c, &one);
    kernels_run(backward_both, &c);
    int pool = same_gradients(&c, &one);
    kernels_run(backward_in_jobs, &c);
    int in_job = same_gradients(&c, &one);
    check_true(outside && pool && in_job, "G10: attention_backward 1 vs 2 threads bitwise "
               "identical (outside kernels_run %d, on the pool %d, inside a job %d)", outside,
               pool, in_job);
}

/* attention_forward_cache reads the same keys and values laid out by kv head (NKV, n_alloc,
 * HS): its outputs have attention_forward's bits, for a prompt at once (20 queries, past a
 * block of 8 and the keys' packing threshold of 16) and for one query after them, with
 * grouped heads (4 heads over 2 kv heads). */
static void test_forward_cache(void) {
    enum { NH = 4, NKV = 2, HS = 16, N_CTX = 40, T = 20, POS = 7, KVD = NKV * HS };
    static float q[(POS + T) * NH * HS], k[(POS + T) * KVD], v[(POS + T) * KVD];
    static float k_cache[NKV * N_CTX * HS], v_cache[NKV * N_CTX * HS];
    static float want[T * NH * HS], got[T * NH * HS];
    fill_random(q, (POS + T) * NH * HS, 2.0f);
    fill_random(k, (POS + T) * KVD, 2.0f);
    fill_random(v, (POS + T) * KVD, 1.0f);
    for (int j = 0; j < POS + T; j++)
        for (int g = 0; g < NKV; g++)
            for (int i = 0; i < HS; i++) {
                k_cache[(g * N_CTX + j) * HS + i] = k[j * KVD + g * HS + i];
                v_cache[(g * N_CTX + j) * HS + i] = v[j * KVD + g * HS + i];
            }
    AttentionShape shape = {NH, NKV, HS, 0.25f};
    attention_forward(&shape, want, q + POS * NH * HS, k, v, POS, T, scratch);
    attention_forward_cache(&shape, got, q + POS * NH * HS, k_cache, v_cache, N_CTX, POS, T,
                            scratch);
    int prompt = memcmp(want, got, sizeof want) == 0;
    attention_forward(&shape, want, q, k, v, POS + T - 1, 1, scratch);
    attention_forward_cache(&shape, got, q, k_cache, v_cache, N_CTX, POS + T - 1, 1, scratch);
    int one = memcmp(want, got, (size_t)NH * HS * sizeof(float)) == 0;
    check_true(prompt && one, "attention_forward_cache (kv heads' rows apart) == "
               "attention_forward, bitwise: %d queries after %d positions %s, one query %s", T,
               POS, prompt ? "equal" : "DIFFER", one ? "equal" : "DIFFERS");
}

/* attention_forward_cache_half has the bits of attention_forward_cache over a float cache
 * holding the halves' values, on 1 and 2 threads: for 20 queries (each head's keys and
 * values as floats on its stack) and for 300 queries of 64-float heads (19,200 floats a
 * head, past the stack's 16,384: each head's own part of scratch, which two threads fill
 * at once), with 4 heads over 2 kv heads. */
static void test_forward_cache_half(void) {
    enum { NH = 4, NKV = 2, HS = 64, N_CTX = 320, T_MAX = 300, CACHE = NKV * N_CTX * HS };
    AttentionShape shape = {NH, NKV, HS, 0.125f};
    float *q = malloc(sizeof(float) * T_MAX * NH * HS), *k = malloc(sizeof(float) * CACHE);
    float *v = malloc(sizeof(float) * CACHE), *want = malloc(sizeof(float) * T_MAX * NH * HS);
    float *got = malloc(sizeof(float) * T_MAX * NH * HS);
    float *work = malloc(sizeof(float) * attention_half_scratch_floats(&shape, N_CTX));
    uint16_t *k_half = malloc(sizeof(uint16_t) * CACHE), *v_half = malloc(sizeof(uint16_t) * CACHE);
    if (!check_true(q && k && v && want && got && work && k_half && v_half, "half cache: memory"))
        goto done;
    fill_random(q, (long)T_MAX * NH * HS, 2.0f);
    fill_random(k, CACHE, 2.0f);
    fill_random(v, CACHE, 1.0f);
    kernels_to_half(k_half, k, CACHE);
    kernels_to_half(v_half, v, CACHE);
    kernels_from_half(k, k_half, CACHE);   /* the float cache holds the halves' values */
    kernels_from_half(v, v_half, CACHE);
    const int Ts[2] = {20, T_MAX};
    for (int c = 0; c < 2; c++) {
        int T = Ts[c], same = 1;
        size_t n = (size_t)T * NH * HS;
        attention_forward_cache(&shape, want, q, k, v, N_CTX, 0, T, work);
        for (int threads = 1; threads <= 2; threads++)
            for (int again = 0; again < 3; again++) {
                kernels_set_threads(threads);
                memset(got, 0, n * sizeof(float));
                attention_forward_cache_half(&shape, got, q, k_half, v_half, N_CTX, 0, T, work);
                same &= memcmp(want, got, n * sizeof(float)) == 0;
            }
        kernels_set_threads(1);
        check_true(same, "attention_forward_cache_half, %d queries (%d floats a head's keys): "
                   "the float cache's bits, 1 and 2 threads, three runs each", T, T * HS);
    }
done:
    free(q), free(k), free(v), free(want), free(got), free(work), free(k_half), free(v_half);
}

/* Scratch sizes are size_t products: 4097 heads x 2^20 positions is past INT_MAX, where
 * an int product wrapped to 2^20 floats and attention_forward wrote past them. */
static void test_scratch_sizes(void) {
    AttentionShape shape = {4097, 1, 2, 0.5f};
    int n_positions = 1 << 20;
    AttentionShape kv = {4097, 4097, 2, 0.5f};   /* as many kv heads */
    size_t one_kv = attention_backward_scratch_floats(&shape, n_positions);
    /* a block of 8 queries' score rows per head */
    check_true(attention_scratch_floats(&shape, n_positions) == (size_t)8 * 4097 << 20 &&
               one_kv >= (size_t)2 << 20 &&
               attention_backward_scratch_floats(&kv, n_positions) == 4097 * one_kv,
               "scratch sizes of 4097 heads x 2^20 positions: 8 x 4097 x 2^20 floats forward, "
               "4097 times one kv head's (%zu) backward, not wrapped", one_kv);
}

int main(void) {
    test_scratch_sizes();
    test_forward_cache();
    test_forward_cache_half();
    test_nadaraya_watson();
    test_worked_example_b();
    test_large_scores();
    test_random_against_naive();
    test_weights_and_threads();
    test_backward_threads();
    return check_summary("test_attention");
}

/* test_attention_variants.c: the attention lab (attention_step, attention_weights)
 * against docs/attention.md.
 *
 * The worked vectors of docs/attention.md §12 (softmax1, window, sinks, LSH, elu+1,
 * Efficient Attention, fixed-feature Performer, Gaussian kernel, additive, pooling,
 * Nystrom) and its visible-set table, and the properties listed in docs/attention.md
 * §12 for every variant: G1 weights, G2 causality, G3 prefill == token-by-token, G4
 * limits equal to exact, G9 seeds, G10 1 vs 2 threads; Performer's unbiasedness and
 * 1/sqrt(m) error law; attention_weights against attention_step for every variant.
 * The expected numbers were computed by numpy in float64 for docs/attention.md, not by
 * this code. Tolerance: float32 kernels match them to ~1e-6 relative; 1e-5 absolute.
 * Other section numbers (§) are those of docs/attention.md too.
 */
#include "attention.h"

#include <math.h>      /* sqrt, exp, fabs */
#include <stdint.h>    /* uint64_t */
#include <stdio.h>     /* snprintf */
#include <stdlib.h>    /* malloc, free */
#include <string.h>    /* memcmp, memcpy, memset */

#include "kernels.h"       /* kernels_run, kernels_set_threads: the pool run uses */
#include "tests/attention_kernels.h"   /* attention_additive, attention_pool, attention_nystrom */
#include "tests/check.h"   /* check_* */

#define ATOL 1e-5
#define RTOL 1e-6

/* ---- running one sequence through a variant ---- */

typedef struct {
    AttentionConfig cfg;
    AttentionShape shape;
    int n_alloc;
    void *state;
    float *scratch;
} Lab;

static int lab_init(Lab *lab, const AttentionConfig *cfg, int NH, int NKV, int HS, float scale,
                    int n_alloc) {
    lab->cfg = *cfg;
    lab->shape = (AttentionShape){NH, NKV, HS, scale};
    lab->n_alloc = n_alloc;
    size_t bytes = attention_state_bytes(cfg, &lab->shape, n_alloc);
    size_t floats = attention_step_scratch_floats(cfg, &lab->shape, n_alloc);
    lab->state = bytes ? malloc(bytes) : NULL;
    lab->scratch = floats ? malloc(floats * sizeof(float)) : NULL;
    if (!lab->state || !lab->scratch) return -1;
    return attention_state_init(cfg, &lab->shape, n_alloc, 0, lab->state);
}

static void lab_free(Lab *lab) {
    free(lab->state);
    free(lab->scratch);
}

/* Runs T positions from 0 in chunks of `chunk`: q (T, NH*HS), k, v (T, NKV*HS). */
static int lab_run(Lab *lab, float *out, const float *q, const float *k, const float *v, int T,
                   int chunk) {
    int NH = lab->shape.n_heads, NKV = lab->shape.n_kv_heads, HS = lab->shape.head_dim;
    for (int i = 0; i < T * NH * HS; i++) out[i] = NAN;
    for (int pos = 0; pos < T; pos += chunk) {
        int n = T - pos < chunk ? T - pos : chunk;
        if (attention_step(&lab->cfg, &lab->shape, lab->state, lab->n_alloc,
                           out + (long)pos * NH * HS, q + (long)pos * NH * HS,
                           k + (long)pos * NKV * HS, v + (long)pos * NKV * HS, pos, n,
                           lab->scratch) != 0) return -1;
    }
    return 0;
}

/* One-shot: config on one sequence, whole block at once. */
static int run_once(const AttentionConfig *cfg, int NH, int NKV, int HS, float scale, float *out,
                    const float *q, const float *k, const float *v, int T, int chunk) {
    Lab lab;
    int status = lab_init(&lab, cfg, NH, NKV, HS, scale, T) == 0 ?
                 lab_run(&lab, out, q, k, v, T, chunk) : -1;
    lab_free(&lab);
    return status;
}

static AttentionConfig config(AttentionKind kind) {
    AttentionConfig cfg;
    attention_config_default(&cfg);
    cfg.kind = kind;
    return cfg;
}

/* The larger of a running maximum and x, a NaN x ignored as fmax ignores it. A comparison
 * rather than fmax: gcc 12 for aarch64 crashes (an internal compiler error in the
 * vectoriser, vect_transform_reduction) on a loop that reduces with fmax. */
static double max_of(double worst, double x) { return x > worst ? x : worst; }

/* ---- §12: derived vectors on (b)'s Q, K, V ---- */

static const float EX_Q[9] = {1, 0, 2, 2, 2, 2, 2, 1, 3};
static const float EX_K[9] = {0, 1, 1, 4, 4, 0, 2, 3, 1};
static const float EX_V[9] = {1, 2, 3, 2, 8, 0, 2, 6, 3};
#define EX_SCALE 0.57735026918962576f   /* 1/sqrt(3) */

/* Row i of the "non-causal" output: a sequence whose last query is Q[i] sees all keys. */
static void all_keys_rows(const AttentionConfig *cfg, float scale, float *out) {
    for (int i = 0; i < 3; i++) {
        float q[9], o[9];
        memcpy(q, EX_Q, sizeof q);
        memcpy(q + 6, EX_Q + 3 * i, 3 * sizeof(float));
        run_once(cfg, 1, 1, 3, scale, o, q, EX_K, EX_V, 3, 3);
        memcpy(out + 3 * i, o + 6, 3 * sizeof(float));
    }
}

/* §12's worked vectors for the sliding window and its sinks. */
static void test_vectors_window(void) {
    float out[9], exact[9];
    AttentionConfig cfg = config(ATTENTION_WINDOW);
    cfg.window = 2;
    run_once(&cfg, 1, 1, 3, EX_SCALE, out, EX_Q, EX_K, EX_V, 3, 3);
    const double window2[9] = {1, 2, 3, 1.99902120, 7.99412720, 2.93640210e-03, 2,
                               7.52073688, 0.718894674};
    check_close_f64("§12 window(2), scaled, causal", out, window2, 9, ATOL, RTOL);
    cfg.window = 1;
    run_once(&cfg, 1, 1, 3, EX_SCALE, out, EX_Q, EX_K, EX_V, 3, 1);
    check_true(memcmp(out, EX_V, sizeof out) == 0, "§12 window(1): outputs are V");
    AttentionConfig ex = config(ATTENTION_EXACT);
    run_once(&ex, 1, 1, 3, EX_SCALE, exact, EX_Q, EX_K, EX_V, 3, 3);
    cfg.window = 3;
    run_once(&cfg, 1, 1, 3, EX_SCALE, out, EX_Q, EX_K, EX_V, 3, 3);
    check_true(memcmp(out, exact, sizeof out) == 0, "§12 window(3) == exact causal, bitwise");

    cfg.window = 1;
    cfg.sinks = 1;
    run_once(&cfg, 1, 1, 3, EX_SCALE, out, EX_Q, EX_K, EX_V, 3, 1);
    const double sink11[9] = {1, 2, 3, 1.99902120, 7.99412720, 2.93640210e-03, 1.96964891,
                              5.87859564, 3};
    check_close_f64("§12 sink(1,1), scaled: row 2 sees {0, 2}", out, sink11, 9, ATOL, RTOL);
}

/* §12's worked vectors for LSH with a fixed rotation. */
static void test_vectors_lsh(void) {
    float out[9];
    /* LSH, nb = 2, one round, r = [1, -0.5, 0.3], no sinks, self only */
    AttentionConfig lsh = config(ATTENTION_LSH);
    lsh.buckets = 2;
    lsh.rounds = 1;
    lsh.local = 0;
    lsh.sinks = 0;
    Lab lab;
    int rows = 0;
    if (check_true(lab_init(&lab, &lsh, 1, 1, 3, EX_SCALE, 3) == 0, "LSH state init")) {
        float *R = attention_state_random(&lsh, &lab.shape, 3, lab.state, 0, 0, &rows);
        check_true(R && rows == 1, "LSH rotation is (nb/2, HS) = (1, 3)");
        if (R) { R[0] = 1.0f; R[1] = -0.5f; R[2] = 0.3f; }
        lab_run(&lab, out, EX_Q, EX_K, EX_V, 3, 1);
        const double want[9] = {1, 2, 3, 2, 8, 0, 2, 7.52073688, 0.718894674};
        check_close_f64("§12 LSH nb=2, one round: visible {0}, {1}, {1, 2}", out, want, 9, ATOL,
                        RTOL);
    }
    lab_free(&lab);
}

/* §12's worked vectors for the recurrent variants: linear, Efficient, Performer. */
static void test_vectors_recurrent(void) {
    float out[9];
    Lab lab;
    int rows = 0;
    AttentionConfig lin = config(ATTENTION_LINEAR);
    run_once(&lin, 1, 1, 3, EX_SCALE, out, EX_Q, EX_K, EX_V, 3, 3);
    const double linear[9] = {1, 2, 3, 1.6875, 6.125, 0.9375, 1.78260870, 5.97101449, 1.73913043};
    check_close_f64("§12 linear elu+1, causal", out, linear, 9, ATOL, RTOL);
    lin.prescale = 1;
    run_once(&lin, 1, 1, 3, EX_SCALE, out, EX_Q, EX_K, EX_V, 3, 1);
    const double linear_pre[9] = {1, 2, 3, 1.66763107, 6.00578640, 0.997106802, 1.77153240,
                                  5.91131519, 1.76222160};
    check_close_f64("§12 linear elu+1 with d^-1/4 pre-scale", out, linear_pre, 9, ATOL, RTOL);

    AttentionConfig eff = config(ATTENTION_EFFICIENT);
    run_once(&eff, 1, 1, 3, EX_SCALE, out, EX_Q, EX_K, EX_V, 3, 3);
    const double efficient[9] = {1, 2, 3, 1.73450978, 6.40705868, 0.796470662, 1.71200909,
                                 5.60602335, 1.86301948};
    check_close_f64("§12 Efficient Attention, causal", out, efficient, 9, ATOL, RTOL);

    /* Performer with the fixed feature matrix of §12 */
    AttentionConfig perf = config(ATTENTION_PERFORMER);
    perf.features = 4;
    if (check_true(lab_init(&lab, &perf, 1, 1, 3, EX_SCALE, 3) == 0, "Performer state init")) {
        float *W = attention_state_random(&perf, &lab.shape, 3, lab.state, 0, 0, &rows);
        const float fixed[12] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0.5f, -0.5f, 0.5f};
        if (check_true(W && rows == 4, "Performer features are (m, HS) = (4, 3)"))
            memcpy(W, fixed, sizeof fixed);
        lab_run(&lab, out, EX_Q, EX_K, EX_V, 3, 1);
        const double want[9] = {1, 2, 3, 1.00130360, 2.00782158, 2.99608921, 1.05802678,
                                2.23356513, 2.99781297};
        check_close_f64("§12 Performer, fixed m=4 features, running-max form", out, want, 9,
                        ATOL, RTOL);
    }
    lab_free(&lab);
}

/* §12's worked vectors for the other scores: the Gaussian kernel and softmax1. */
static void test_vectors_scores(void) {
    float out[9];
    /* Gaussian kernel, score -|q-k|^2/2: unscaled gauss */
    AttentionConfig gauss = config(ATTENTION_GAUSS);
    gauss.unscaled = 1;
    all_keys_rows(&gauss, EX_SCALE, out);
    const double gauss_all[9] = {1.01798839, 2.07195800, 2.99999334, 1.88150035, 5.53780088,
                                 2.98230075, 1.50022787, 4.00182293, 2.99863280};
    check_close_f64("§12 Gaussian kernel, all keys", out, gauss_all, 9, ATOL, RTOL);
    run_once(&gauss, 1, 1, 3, EX_SCALE, out, EX_Q, EX_K, EX_V, 3, 3);
    const double gauss_row1[3] = {1.04742587, 2.28455524, 2.85772238};
    check_close_f64("§12 Gaussian kernel, causal row 1", out + 3, gauss_row1, 3, ATOL, RTOL);

    /* §12 softmax1 */
    AttentionConfig s1 = config(ATTENTION_EXACT);
    s1.softmax1 = 1;
    run_once(&s1, 1, 1, 3, EX_SCALE, out, EX_Q, EX_K, EX_V, 3, 3);
    const double s1_causal[9] = {0.760368442, 1.52073688, 2.28110533, 1.99882688, 7.99335012,
                                 2.93611667e-03, 1.99108284, 7.47410900, 0.735333529};
    check_close_f64("§12 softmax1, scaled, causal", out, s1_causal, 9, ATOL, RTOL);
    s1.unscaled = 1;
    all_keys_rows(&s1, EX_SCALE, out);
    const double s1_unscaled[9] = {1.92015114, 6.62626910, 1.58150321, 1.99999375, 7.96399072,
                                   0.0539763993, 1.99969379, 7.75985027, 0.358387356};
    check_close_f64("§12 softmax1, unscaled, all keys", out, s1_unscaled, 9, ATOL, RTOL);
    /* all scores very negative: the output is almost nothing */
    const float qn[1] = {1}, kn[3] = {-50, -60, -70}, vn[3] = {1, 1, 1};
    float on[3];
    AttentionConfig s1u = config(ATTENTION_EXACT);
    s1u.softmax1 = 1;
    s1u.unscaled = 1;
    float qq[3] = {qn[0], qn[0], qn[0]};
    run_once(&s1u, 1, 1, 1, 1.0f, on, qq, kn, vn, 3, 3);
    check_true(on[2] >= 0.0f && on[2] < 3e-22f, "§12 softmax1: scores -50..-70 give output "
               "%g (weights sum 1.93e-22)", (double)on[2]);
}

/* The §12 worked example of docs/attention.md, variant by variant. */
static void test_vectors(void) {
    test_vectors_window();
    test_vectors_lsh();
    test_vectors_recurrent();
    test_vectors_scores();
}

/* §12 additive, pooling, Nystrom: the kernels of tests/attention_kernels.c. */
static void test_kernels(void) {
    const float Wq[6] = {1, 0, -1, 0, 1, 0}, Wk[6] = {0, 0.5f, 0, 0.5f, 0, 0.5f}, wv[2] = {1, -1};
    float out[9], scratch[64];
    attention_additive(out, EX_Q, EX_K, EX_V, 3, 3, 3, 3, 2, Wq, Wk, wv, 0, scratch);
    const double additive[9] = {1.78614916, 6.02486502, 1.67959741, 1.76022166, 5.82304523,
                                1.82676213, 1.84448494, 6.34445258, 1.55023079};
    check_close_f64("§12 additive scoring, all keys", out, additive, 9, ATOL, RTOL);
    attention_additive(out, EX_Q, EX_K, EX_V, 3, 3, 3, 3, 2, Wq, Wk, wv, 1, scratch);
    const double additive_row1[3] = {1.61991688, 5.71950126, 1.14024937};
    check_close_f64("§12 additive scoring, causal row 1", out + 3, additive_row1, 3, ATOL, RTOL);
    const float zero[2] = {0, 0};
    attention_additive(out, EX_Q, EX_K, EX_V, 3, 3, 3, 3, 2, Wq, Wk, zero, 0, scratch);
    const double mean[3] = {5.0 / 3, 16.0 / 3, 2};
    check_close_f64("additive: w_v = 0 gives uniform weights", out, mean, 3, ATOL, RTOL);

    const float x[12] = {1, 0, 1, 0, 0, 2, 0, 2, 1, 1, 1, 1};
    const float W[8] = {1, 0, 0, 1, 0, 1, -1, 0}, b[2] = {0, 0.5f}, c[2] = {1, 2};
    float pooled[4];
    attention_pool(pooled, x, 3, 4, 2, W, b, c, scratch);
    const double want_pool[4] = {0.0203707927, 1.97720095, 0.0203707927, 1.97720095};
    check_close_f64("§12 attention pooling, learned query", pooled, want_pool, 4, ATOL, RTOL);
    attention_pool(pooled, x, 3, 4, 2, W, b, zero, scratch);
    const double want_mean[4] = {2.0 / 3, 1, 2.0 / 3, 1};
    check_close_f64("pooling: c = 0 gives the plain mean", pooled, want_mean, 4, ATOL, RTOL);

    float nys_scratch[256];
    check_true(attention_nystrom_scratch_floats(3, 3, 3) <= 256, "Nystrom scratch fits");
    attention_nystrom(out, EX_Q, EX_K, EX_V, 3, 3, 3, 6, EX_SCALE, nys_scratch);
    const double nys6[9] = {1.86180077, 6.31747628, 1.69459021, 1.99553261, 7.81085484,
                            0.256913420, 1.99803108, 7.48463962, 0.761227030};
    check_close_f64("§12 Nystrom m=3, 6 pinv iterations", out, nys6, 9, 1e-4, 1e-5);
    attention_nystrom(out, EX_Q, EX_K, EX_V, 3, 3, 3, 20, EX_SCALE, nys_scratch);
    const double exact_all[9] = {1.86387420, 6.31937101, 1.70418870, 1.99910955, 7.81412350,
                                 0.273472058, 1.99255511, 7.47963559, 0.735877258};
    /* 20 Newton-Schulz steps in float32 converge to ~1e-5 of the pseudo-inverse */
    check_close_f64("§12 Nystrom m=T, 20 iterations == exact non-causal", out, exact_all, 9,
                    1e-4, 1e-5);
    attention_nystrom(out, EX_Q, EX_K, EX_V, 3, 3, 1, 6, EX_SCALE, nys_scratch);
    const double nys1[9] = {1.98909808, 7.46055023, 0.743763110, 1.98909808, 7.46055023,
                            0.743763110, 1.98909808, 7.46055023, 0.743763110};
    check_close_f64("§12 Nystrom m=1: every row softmax(mean q K^T) V", out, nys1, 9, ATOL, RTOL);
    /* G2 expected failure: changing the last value row changes row 0 */
    float v2[9];
    memcpy(v2, EX_V, sizeof v2);
    v2[8] += 10.0f;
    float out2[9];
    attention_nystrom(out2, EX_Q, EX_K, v2, 3, 3, 3, 6, EX_SCALE, nys_scratch);
    check_true(memcmp(out, out2, 3 * sizeof(float)) != 0,
               "Nystrom is not causal: a future value changes row 0 (G2 fails, as documented)");
}

/* ---- §12 visible sets: q = 0 gives uniform weights on the visible set ---- */

/* The keys j of one row (T,) that count as visible, as "{j,k,...}": with weights, the cells
 * of attention_weights that are not NaN; else the outputs > 0 of one-hot values. */
static void key_set(char *got, size_t cap, const float *row, int T, int weights) {
    snprintf(got, cap, "{");
    for (int j = 0; j < T; j++)
        if (weights ? !isnan(row[j]) : row[j] > 0.0f)
            snprintf(got + strlen(got), cap - strlen(got), "%s%d", got[1] ? "," : "", j);
    snprintf(got + strlen(got), cap - strlen(got), "}");
}

/* The table's rows against attention_step (one-hot values: weights > 0) and against
 * attention_weights (cells that are not NaN). */
static void check_visible(const char *name, const AttentionConfig *cfg, const char *want[4]) {
    enum { T = 10 };
    float q[T * T] = {0}, k[T * T], v[T * T], out[T * T], w[T * T];
    for (int i = 0; i < T * T; i++) k[i] = (float)(i % 7) - 3.0f;
    for (int j = 0; j < T; j++)
        for (int c = 0; c < T; c++) v[j * T + c] = j == c ? 1.0f : 0.0f;
    Lab lab;
    float scratch[T * T];
    int ran = lab_init(&lab, cfg, 1, 1, T, 1.0f, T) == 0 &&
              lab_run(&lab, out, q, k, v, T, 1) == 0 &&
              attention_weights_scratch_floats(cfg, &lab.shape, T) <= T * T &&
              attention_weights(cfg, &lab.shape, lab.state, T, w, q, k, 0, T, scratch) == 0;
    lab_free(&lab);
    const int show[4] = {0, 3, 6, 9};
    int ok = ran, ok_w = ran;
    for (int r = 0; ran && r < 4; r++) {
        char got[64], got_w[64];
        key_set(got, sizeof got, out + show[r] * T, T, 0);
        key_set(got_w, sizeof got_w, w + show[r] * T, T, 1);
        if (strcmp(got, want[r]) != 0) {
            ok = 0;
            printf("  %s row %d: got %s, want %s\n", name, show[r], got, want[r]);
        }
        if (strcmp(got_w, want[r]) != 0) {
            ok_w = 0;
            printf("  %s weights row %d: got %s, want %s\n", name, show[r], got_w, want[r]);
        }
    }
    check_true(ok, "§12 visible sets of %s at i = 0, 3, 6, 9", name);
    check_true(ok_w, "§12 visible sets of %s: attention_weights is NaN exactly elsewhere", name);
}

static void test_visible_sets(void) {
    AttentionConfig cfg = config(ATTENTION_WINDOW);
    cfg.window = 3;
    check_visible("window(3)", &cfg, (const char *[]){"{0}", "{1,2,3}", "{4,5,6}", "{7,8,9}"});
    cfg = config(ATTENTION_DILATED);
    cfg.window = 3;
    cfg.dilation = 2;
    check_visible("dilated(3,2)", &cfg, (const char *[]){"{0}", "{1,3}", "{2,4,6}", "{5,7,9}"});
    cfg = config(ATTENTION_STRIDED);
    cfg.stride = 3;
    check_visible("strided(3)", &cfg,
                  (const char *[]){"{0}", "{0,1,2,3}", "{0,3,4,5,6}", "{0,3,6,7,8,9}"});
    cfg = config(ATTENTION_FIXED);
    cfg.stride = 4;
    cfg.summary = 1;
    check_visible("fixed(4,1)", &cfg, (const char *[]){"{0}", "{0,1,2,3}", "{3,4,5,6}",
                                                         "{3,7,8,9}"});
    cfg = config(ATTENTION_WINDOW);
    cfg.sinks = 1;
    cfg.window = 2;
    check_visible("sink(1,2)", &cfg, (const char *[]){"{0}", "{0,2,3}", "{0,5,6}", "{0,8,9}"});
}

/* ---- properties on random data ---- */

static uint64_t rng = 0x2545F4914F6CDD1DULL;   /* the random data's seed */

/* x (n,) uniform in [-amplitude, amplitude) */
static void fill_random(float *x, long n, float amplitude) {
    check_fill_random(&rng, x, n, amplitude);
}

/* Every variant with small parameters, so that rings wrap and patterns cut. */
static int all_variants(AttentionConfig *list) {
    int n = 0;
    list[n++] = config(ATTENTION_EXACT);
    list[n] = config(ATTENTION_EXACT); list[n++].softmax1 = 1;
    list[n] = config(ATTENTION_EXACT); list[n++].tau = 1.7f;
    list[n++] = config(ATTENTION_GAUSS);
    list[n] = config(ATTENTION_WINDOW); list[n].window = 5; list[n++].sinks = 2;
    list[n] = config(ATTENTION_WINDOW); list[n].window = 4; list[n].softmax1 = 1; n++;
    list[n] = config(ATTENTION_DILATED); list[n].window = 3; list[n].dilation = 3;
    list[n++].sinks = 1;
    list[n] = config(ATTENTION_STRIDED); list[n++].stride = 4;
    list[n] = config(ATTENTION_FIXED); list[n].stride = 6; list[n++].summary = 2;
    list[n] = config(ATTENTION_LSH); list[n].buckets = 4; list[n].rounds = 2;
    list[n].local = 3; list[n++].sinks = 1;
    list[n++] = config(ATTENTION_LINEAR);
    list[n++] = config(ATTENTION_EFFICIENT);
    list[n] = config(ATTENTION_PERFORMER); list[n++].features = 16;
    list[n] = config(ATTENTION_PERFORMER); list[n].features = 12; list[n++].orthogonal = 0;
    return n;
}

static void describe(const AttentionConfig *cfg, char *out, size_t cap) {
    snprintf(out, cap, "%s%s%s", attention_kind_name(cfg->kind), cfg->softmax1 ? "+softmax1" : "",
             cfg->tau != 1.0f ? " tau" : "");
}

/* G3 (prefill == token by token == uneven chunks, bitwise), G2 (future inputs do not
 * change earlier outputs), G1 via one-hot values, for every variant, on GQA heads. */
static void test_properties(void) {
    enum { NH = 4, NKV = 2, HS = 24, T = 24, QW = T * NH * HS, KW = T * NKV * HS };
    static float q[QW], k[KW], v[KW], block[QW], single[QW], chunks[QW], changed[QW];
    static float q2[QW], k2[KW], v2[KW];
    AttentionConfig list[32];
    int n = all_variants(list);
    fill_random(q, QW, 1.5f);
    fill_random(k, KW, 1.5f);
    fill_random(v, KW, 1.0f);
    float scale = 1.0f / sqrtf((float)HS);
    for (int c = 0; c < n; c++) {
        char name[64];
        describe(&list[c], name, sizeof name);
        int ok = run_once(&list[c], NH, NKV, HS, scale, block, q, k, v, T, T) == 0 &&
                 run_once(&list[c], NH, NKV, HS, scale, single, q, k, v, T, 1) == 0 &&
                 run_once(&list[c], NH, NKV, HS, scale, chunks, q, k, v, T, 7) == 0;
        check_true(ok && memcmp(block, single, sizeof block) == 0 &&
                   memcmp(block, chunks, sizeof block) == 0,
                   "G3 %s: prefill == token by token == chunks of 7, bitwise", name);
        /* append-only steps (out == NULL) advance the state exactly as real ones */
        Lab lab;
        int appended = lab_init(&lab, &list[c], NH, NKV, HS, scale, T) == 0 &&
            attention_step(&list[c], &lab.shape, lab.state, T, NULL, NULL, k, v, 0, 9,
                           lab.scratch) == 0 &&
            attention_step(&list[c], &lab.shape, lab.state, T, changed + 9 * NH * HS,
                           q + 9 * NH * HS, k + 9 * NKV * HS, v + 9 * NKV * HS, 9, T - 9,
                           lab.scratch) == 0;
        lab_free(&lab);
        check_true(appended && memcmp(changed + 9 * NH * HS, block + 9 * NH * HS,
                                      (size_t)(T - 9) * NH * HS * sizeof(float)) == 0,
                   "%s: 9 append-only steps, then attention, == prefill, bitwise", name);
        /* a step that would end past the state's T positions is refused (where it was let
         * through, a full cache's K/V store took a row past its end) */
        Lab past;
        int refused = lab_init(&past, &list[c], NH, NKV, HS, scale, T) == 0 &&
            attention_step(&list[c], &past.shape, past.state, T, NULL, NULL, k, v, 0, T - 1,
                           past.scratch) == 0 &&
            attention_step(&list[c], &past.shape, past.state, T, single, q, k, v, T - 1, 2,
                           past.scratch) == -1 &&
            attention_step(&list[c], &past.shape, past.state, T, single, q, k, v, T, 1,
                           past.scratch) == -1;
        lab_free(&past);
        check_true(refused, "%s: a step of 2 at position %d, or of 1 at %d, is refused (a "
                   "state of %d positions)", name, T - 1, T, T);
        int i = 10;   /* change every input after position i */
        memcpy(q2, q, sizeof q); memcpy(k2, k, sizeof k); memcpy(v2, v, sizeof v);
        for (int t = i + 1; t < T; t++) {
            for (int e = 0; e < NH * HS; e++) q2[t * NH * HS + e] = -q2[t * NH * HS + e] + 0.5f;
            for (int e = 0; e < NKV * HS; e++) {
                k2[t * NKV * HS + e] *= 3.0f;
                v2[t * NKV * HS + e] = 7.0f;
            }
        }
        run_once(&list[c], NH, NKV, HS, scale, changed, q2, k2, v2, T, 5);
        check_true(memcmp(changed, block, (size_t)(i + 1) * NH * HS * sizeof(float)) == 0,
                   "G2 %s: later inputs leave outputs 0..%d unchanged, bitwise", name, i);
        /* G1: one-hot values make the output the weight row */
        static float onehot[T * NKV * T], w[T * NH * T];
        for (int t = 0; t < T; t++)
            for (int g = 0; g < NKV; g++)
                for (int e = 0; e < T; e++) onehot[(t * NKV + g) * T + e] = t == e ? 1.0f : 0.0f;
        static float qs[T * NH * T], ks[T * NKV * T];
        fill_random(qs, T * NH * T, 1.0f);
        fill_random(ks, T * NKV * T, 1.0f);
        run_once(&list[c], NH, NKV, T, 1.0f / sqrtf((float)T), w, qs, ks, onehot, T, T);
        int g1 = 1;
        double worst = 0;
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                double sum = 0;
                for (int j = 0; j < T; j++) {
                    float a = w[(t * NH + h) * T + j];
                    g1 &= a >= 0.0f && (j <= t || a == 0.0f);
                    sum += (double)a;
                }
                if (!list[c].softmax1) worst = max_of(worst, fabs(sum - 1.0));
                else g1 &= sum < 1.0 && sum > 0.0;
            }
        }
        check_true(g1 && worst < 1e-5, "G1 %s: weights >= 0, 0 on the future, rows sum to %s "
                   "(worst |sum - 1| %.2g)", name, list[c].softmax1 ? "Z/(1+Z) < 1" : "1", worst);
    }
}

/* G8: scores of order 1e4 (q and k of norm ~100) give finite outputs in every variant,
 * and no row of zeros: an output is a weighted mean of random values, never exactly 0
 * (Performer once gave 0 when its query's and its keys' strongest features differed);
 * softmax1 is the exception by design: with every score far below 0 its virtual key of
 * value 0 takes all the weight. */
static void test_extreme(void) {
    enum { NH = 2, HS = 8, T = 12, W = T * NH * HS };
    float q[W], k[W], v[W], out[W];
    fill_random(q, W, 100.0f);
    fill_random(k, W, 100.0f);
    fill_random(v, W, 1.0f);
    AttentionConfig list[32];
    int n = all_variants(list);
    for (int c = 0; c < n; c++) {
        char name[64];
        describe(&list[c], name, sizeof name);
        run_once(&list[c], NH, NH, HS, 1.0f, out, q, k, v, T, 5);
        int finite = 1, zero_rows = 0;
        for (int i = 0; i < W; i++) finite &= isfinite(out[i]) && fabsf(out[i]) <= 1.0f + 1e-5f;
        for (int r = 0; r < T * NH; r++) {
            int zero = 1;
            for (int e = 0; e < HS; e++) zero &= out[r * HS + e] == 0.0f;
            zero_rows += zero;
        }
        check_true(finite && (zero_rows == 0 || list[c].softmax1), "G8 %s: unscaled scores "
                   "~1e4, outputs finite, within [-1, 1], no row of zeros (%d)%s", name,
                   zero_rows, list[c].softmax1 ? " but for softmax1's" : "");
    }
}

/* Float64 reference: softmax restricted to the visible set of §3's definitions. */
static int visible(const AttentionConfig *cfg, int i, int j) {
    if (j > i) return 0;
    switch (cfg->kind) {
    case ATTENTION_WINDOW: return j < cfg->sinks || i - j < cfg->window;
    case ATTENTION_DILATED:
        return j < cfg->sinks || ((i - j) % cfg->dilation == 0 &&
                                  (i - j) / cfg->dilation < cfg->window);
    case ATTENTION_STRIDED: return i - j < cfg->stride || (i - j) % cfg->stride == 0;
    case ATTENTION_FIXED:
        return j / cfg->stride == i / cfg->stride || j % cfg->stride >= cfg->stride - cfg->summary;
    default: return 1;
    }
}

static void masked_reference(double *out, const AttentionConfig *cfg, const float *q,
                             const float *k, const float *v, int NH, int NKV, int HS, int T,
                             double scale) {
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < NH; h++) {
            int g = h / (NH / NKV);
            double s[256], max = -1e300, z = 0;
            for (int j = 0; j <= t; j++) {
                double dot = 0;
                for (int e = 0; e < HS; e++)
                    dot += (double)q[(t * NH + h) * HS + e] * (double)k[(j * NKV + g) * HS + e];
                s[j] = visible(cfg, t, j) ? dot * scale : -(double)INFINITY;
                if (s[j] > max) max = s[j];
            }
            for (int j = 0; j <= t; j++) z += (s[j] = exp(s[j] - max));
            for (int e = 0; e < HS; e++) {
                double acc = 0;
                for (int j = 0; j <= t; j++) acc += s[j] / z * (double)v[(j * NKV + g) * HS + e];
                out[(t * NH + h) * HS + e] = acc;
            }
        }
    }
}

enum { LIMIT_NH = 4, LIMIT_NKV = 2, LIMIT_HS = 8, LIMIT_T = 25 };   /* test_limits' shape */

/* The sparse patterns against the float64 masked reference on test_limits' q, k, v;
 * W = 8, T = 25 = 3W + 1 wraps. */
static void limits_patterns(const float *q, const float *k, const float *v, float scale) {
    enum { NH = LIMIT_NH, NKV = LIMIT_NKV, HS = LIMIT_HS, T = LIMIT_T, QW = T * NH * HS };
    static float out[QW];
    static double want[QW];
    AttentionConfig patterns[6];
    patterns[0] = config(ATTENTION_WINDOW); patterns[0].window = 8;
    patterns[1] = config(ATTENTION_WINDOW); patterns[1].window = 5; patterns[1].sinks = 3;
    patterns[2] = config(ATTENTION_DILATED); patterns[2].window = 4; patterns[2].dilation = 3;
    patterns[3] = config(ATTENTION_DILATED); patterns[3].window = 3; patterns[3].dilation = 2;
    patterns[3].sinks = 2;
    patterns[4] = config(ATTENTION_STRIDED); patterns[4].stride = 5;
    patterns[5] = config(ATTENTION_FIXED); patterns[5].stride = 6; patterns[5].summary = 2;
    for (int c = 0; c < 6; c++) {
        char what[96];
        snprintf(what, sizeof what, "%s(w %d, S %d, k %d, l %d, c %d) vs float64 masked reference",
                 attention_kind_name(patterns[c].kind), patterns[c].window, patterns[c].sinks,
                 patterns[c].dilation, patterns[c].stride, patterns[c].summary);
        run_once(&patterns[c], NH, NKV, HS, scale, out, q, k, v, T, 4);
        masked_reference(want, &patterns[c], q, k, v, NH, NKV, HS, T, (double)scale);
        check_close_f64(what, out, want, QW, ATOL, RTOL);
    }
}

/* G4: each variant at its limit is exact attention, bit for bit; the patterns against a
 * float64 reference; a window's state is O(S + W). */
static void test_limits(void) {
    enum { NH = LIMIT_NH, NKV = LIMIT_NKV, HS = LIMIT_HS, T = LIMIT_T, QW = T * NH * HS,
           KW = T * NKV * HS };
    static float q[QW], k[KW], v[KW], exact[QW], out[QW];
    fill_random(q, QW, 2.0f);
    fill_random(k, KW, 2.0f);
    fill_random(v, KW, 1.0f);
    float scale = 1.0f / sqrtf((float)HS);
    AttentionConfig ex = config(ATTENTION_EXACT);
    run_once(&ex, NH, NKV, HS, scale, exact, q, k, v, T, 4);
    /* the exact variant equals the trainer's attention_forward bit for bit */
    static float fwd[QW];
    AttentionShape shape = {NH, NKV, HS, scale};
    float *scratch_fwd = malloc(attention_scratch_floats(&shape, T) * sizeof(float));
    if (!scratch_fwd) {
        fprintf(stderr, "test_attention_variants: out of memory\n");
        exit(1);
    }
    attention_forward(&shape, fwd, q, k, v, 0, T, scratch_fwd);
    free(scratch_fwd);
    check_true(memcmp(fwd, exact, sizeof fwd) == 0, "G4 exact step == attention_forward, bitwise");
    struct {
        AttentionKind kind;
        int window, sinks, stride, buckets;
        const char *what;
    } limits[] = {
        {ATTENTION_WINDOW, T, 0, 0, 0, "window(W = T)"},
        {ATTENTION_WINDOW, 100, 0, 0, 0, "window(W > T)"},
        {ATTENTION_WINDOW, 15, 10, 0, 0, "sinks 10 + window 15 = T"},
        {ATTENTION_STRIDED, 0, 0, T, 0, "strided(l = T)"},
        {ATTENTION_STRIDED, 0, 0, 1, 0, "strided(1)"},
        {ATTENTION_FIXED, 0, 0, T, 0, "fixed(l = T)"},
        {ATTENTION_LSH, 0, 0, 0, 1, "LSH with one bucket"},
        {ATTENTION_DILATED, T, 0, 0, 0, "dilated(w = T, k = 1)"},
    };
    for (size_t c = 0; c < sizeof limits / sizeof limits[0]; c++) {
        AttentionConfig cfg = config(limits[c].kind);
        if (limits[c].window) cfg.window = limits[c].window;
        cfg.sinks = limits[c].sinks;
        if (limits[c].stride) cfg.stride = limits[c].stride;
        if (limits[c].buckets) cfg.buckets = limits[c].buckets;
        cfg.dilation = 1;
        cfg.summary = 0;
        run_once(&cfg, NH, NKV, HS, scale, out, q, k, v, T, 3);
        check_true(memcmp(out, exact, sizeof out) == 0, "G4 %s == exact, bitwise", limits[c].what);
    }
    AttentionConfig tau = config(ATTENTION_EXACT);
    tau.tau = 1.0f;
    run_once(&tau, NH, NKV, HS, scale, out, q, k, v, T, T);
    check_true(memcmp(out, exact, sizeof out) == 0, "G4 tau = 1 == exact, bitwise");
    AttentionConfig window = config(ATTENTION_WINDOW), dil = config(ATTENTION_DILATED);
    window.window = dil.window = 6;
    dil.dilation = 1;
    static float out2[QW];
    run_once(&window, NH, NKV, HS, scale, out, q, k, v, T, 2);
    run_once(&dil, NH, NKV, HS, scale, out2, q, k, v, T, 5);
    check_true(memcmp(out, out2, sizeof out) == 0, "dilated(w, 1) == window(w), bitwise");

    limits_patterns(q, k, v, scale);

    /* window state really is O(S + W): far smaller than the full cache */
    AttentionShape big = {12, 12, 64, 0.125f};
    AttentionConfig w64 = config(ATTENTION_WINDOW);
    w64.window = 64;
    w64.sinks = 4;
    size_t ring = attention_state_bytes(&w64, &big, 1024);
    size_t full = attention_state_bytes(&ex, &big, 1024);
    check_true(ring < 80 * 2 * 12 * 64 * 4 && full > 1024 * 2 * 12 * 64 * 4,
               "window(64)+4 sinks keeps %zu bytes per layer vs %zu for the full cache", ring,
               full);
}

/* LSH: more rounds find more keys; with nb = 2 (one hyperplane per round) every key
 * collides with probability 1 - angle/pi per round, so 64 rounds find nearly all. */
static void test_lsh(void) {
    enum { HS = 16, T = 40, W = T * HS };
    static float q[W], k[W], v[W], exact[W], out[W];
    fill_random(q, W, 1.0f);
    fill_random(k, W, 1.0f);
    fill_random(v, W, 1.0f);
    AttentionConfig ex = config(ATTENTION_EXACT);
    run_once(&ex, 1, 1, HS, 0.25f, exact, q, k, v, T, T);
    AttentionConfig lsh = config(ATTENTION_LSH);
    lsh.buckets = 2;
    lsh.local = 1;
    lsh.sinks = 0;
    double err[2];
    const int rounds[2] = {1, 64};
    for (int r = 0; r < 2; r++) {
        lsh.rounds = rounds[r];
        run_once(&lsh, 1, 1, HS, 0.25f, out, q, k, v, T, T);
        err[r] = 0;
        for (int i = 0; i < W; i++)
            err[r] = max_of(err[r], fabs((double)out[i] - (double)exact[i]));
    }
    check_true(err[1] < err[0] / 10 && err[1] < 1e-3, "LSH nb=2: max error vs exact %.2g with 1 "
               "round, %.2g with 64 rounds", err[0], err[1]);
}

/* LSH rounds come from one stream per (seed, layer, head, round), so more rounds give a
 * superset of candidates (one-hot values make each candidate set visible as weights > 0). */
static void test_lsh_nested(void) {
    enum { T = 16 };
    float q[T * T], k[T * T], v[T * T], w[4][T * T];
    fill_random(q, T * T, 1.0f);
    fill_random(k, T * T, 1.0f);
    for (int j = 0; j < T; j++)
        for (int c = 0; c < T; c++) v[j * T + c] = j == c ? 1.0f : 0.0f;
    AttentionConfig lsh = config(ATTENTION_LSH);
    lsh.buckets = 8;
    lsh.local = 1;
    lsh.sinks = 0;
    int nested = 1, grew = 0;
    for (int r = 0; r < 4; r++) {
        lsh.rounds = 1 << r;
        run_once(&lsh, 1, 1, T, 0.25f, w[r], q, k, v, T, T);
        for (int i = 0; r > 0 && i < T * T; i++) {
            nested &= !(w[r - 1][i] > 0.0f) || w[r][i] > 0.0f;
            grew += !(w[r - 1][i] > 0.0f) && w[r][i] > 0.0f;
        }
    }
    check_true(nested && grew > 0, "LSH: candidates with 1, 2, 4, 8 rounds are nested (%d keys "
               "added)", grew);
}

/* run_once's arguments, or attention_weights's (with lab), for running them inside
 * kernels_run (run's thread pool; G10 only). */
typedef struct {
    const AttentionConfig *cfg;
    int NH, NKV, HS, T;
    float *out;
    const float *q, *k, *v;
    Lab *lab;              /* attention_weights's state, or NULL for run_once */
    float *scratch;
    int ok;                /* attention_weights's result was 0 */
} PoolRun;

static void pool_run_body(void *ctx) {
    PoolRun *r = ctx;
    if (r->lab)
        r->ok = attention_weights(r->cfg, &r->lab->shape, r->lab->state, r->T, r->out, r->q,
                                  r->k, 0, r->T, r->scratch) == 0;
    else
        run_once(r->cfg, r->NH, r->NKV, r->HS, 0.2f, r->out, r->q, r->k, r->v, r->T, r->T);
}

/* G9 seeds and G10 threads, for every variant. */
static void test_seeds_and_threads(void) {
    enum { NH = 8, HS = 32, T = 64, W = T * NH * HS };
    static float q[W], k[W], v[W], a[W], b[W];
    fill_random(q, W, 1.0f);
    fill_random(k, W, 1.0f);
    fill_random(v, W, 1.0f);
    AttentionConfig perf = config(ATTENTION_PERFORMER), lsh = config(ATTENTION_LSH);
    perf.features = 32;
    lsh.rounds = 2;
    lsh.local = 4;
    lsh.sinks = 0;
    AttentionConfig *seeded[2] = {&perf, &lsh};
    for (int c = 0; c < 2; c++) {
        AttentionConfig other = *seeded[c];
        other.seed = 2;
        run_once(seeded[c], NH, NH, HS, 0.2f, a, q, k, v, T, T);
        run_once(seeded[c], NH, NH, HS, 0.2f, b, q, k, v, T, T);
        int same = memcmp(a, b, sizeof a) == 0;
        run_once(&other, NH, NH, HS, 0.2f, b, q, k, v, T, T);
        check_true(same && memcmp(a, b, sizeof a) != 0, "G9 %s: same seed bitwise identical, "
                   "seed 2 differs", attention_kind_name(seeded[c]->kind));
    }
    /* 1 vs 2 threads outside kernels_run (an OpenMP loop per call; one thread without
     * OpenMP), and on run's pool inside it (OpenMP's threads, or POSIX threads) */
    AttentionConfig list[32];
    int n = all_variants(list);
    static float w1[NH * T * T], w2[NH * T * T], w_pool[NH * T * T];
    for (int c = 0; c < n; c++) {
        char name[64];
        describe(&list[c], name, sizeof name);
        kernels_set_threads(1);
        run_once(&list[c], NH, NH / 2, HS, 0.2f, a, q, k, v, T, T);
        int threads = kernels_set_threads(2);   /* at most the cores */
        run_once(&list[c], NH, NH / 2, HS, 0.2f, b, q, k, v, T, T);
        check_true(memcmp(a, b, sizeof a) == 0, "G10 %s: 1 vs 2 threads bitwise identical", name);
        /* inside kernels_run, as run calls it: the heads go to the pool's threads (an
         * OpenMP loop there would be nested, and run on one thread) */
        PoolRun pool = {&list[c], NH, NH / 2, HS, T, b, q, k, v, NULL, NULL, 0};
        memset(b, 0, sizeof b);
        if (threads < 2) {
            char reason[128];
            snprintf(reason, sizeof reason, "G10 %s on run's pool: one core, nothing to compare",
                     name);
            check_skip(reason);
        } else {
            kernels_run(pool_run_body, &pool);
            check_true(memcmp(a, b, sizeof a) == 0, "G10 %s: on run's pool of %d threads, "
                       "bitwise identical to 1 thread", name, threads);
        }
        /* attention_weights: large enough (NH T^2 HS = 2^20) to run its heads in parallel */
        Lab lab;
        int ok = lab_init(&lab, &list[c], NH, NH / 2, HS, 0.2f, T) == 0;
        float *scratch = malloc(attention_weights_scratch_floats(&list[c], &lab.shape, T) *
                                sizeof(float));
        kernels_set_threads(1);
        ok = ok && scratch && attention_weights(&list[c], &lab.shape, lab.state, T, w1, q, k, 0,
                                                T, scratch) == 0;
        kernels_set_threads(2);
        ok = ok && attention_weights(&list[c], &lab.shape, lab.state, T, w2, q, k, 0, T,
                                     scratch) == 0;
        PoolRun weights = {&list[c], NH, NH / 2, HS, T, w_pool, q, k, v, &lab, scratch, 0};
        if (ok) kernels_run(pool_run_body, &weights);
        free(scratch);
        lab_free(&lab);
        check_true(ok && weights.ok && memcmp(w1, w2, sizeof w1) == 0 &&
                   memcmp(w1, w_pool, sizeof w1) == 0, "G10 weights %s: 1 vs 2 threads bitwise "
                   "identical (outside kernels_run and on its pool)", name);
    }
}

/* Performer's features: an unbiased estimator of exp(x . y) (i.i.d. and orthogonal rows),
 * and orthogonal rows within a block. */
static void performer_features(void) {
    enum { D = 16, SEEDS = 400, M = 16 };
    /* x, y with |x| = |y| = 0.5 after the d^-1/4 scaling: q = x d^1/4 */
    double x[D], y[D], xy = 0, nx = 0, ny = 0;
    float u[2 * D];
    fill_random(u, 2 * D, 1.0f);
    for (int i = 0; i < D; i++) {
        x[i] = (double)u[2 * i];
        y[i] = x[i] + 0.5 * (double)u[2 * i + 1];
    }
    for (int i = 0; i < D; i++) { nx += x[i] * x[i]; ny += y[i] * y[i]; }
    for (int i = 0; i < D; i++) {
        x[i] *= 0.5 / sqrt(nx);
        y[i] *= 0.5 / sqrt(ny);
        xy += x[i] * y[i];
    }
    nx = ny = 0.25;
    AttentionShape shape = {1, 1, D, 1.0f / sqrtf((float)D)};
    for (int orf = 0; orf <= 1; orf++) {
        double sum = 0, sum2 = 0;
        int orthogonal = 1;
        for (int s = 0; s < SEEDS; s++) {
            AttentionConfig cfg = config(ATTENTION_PERFORMER);
            cfg.features = M;
            cfg.orthogonal = orf;
            cfg.seed = (unsigned long long)s + 1;
            Lab lab;
            int rows;
            lab_init(&lab, &cfg, 1, 1, D, shape.scale, 1);
            const float *Wf = attention_state_random(&cfg, &lab.shape, 1, lab.state, 0, 0, &rows);
            double est = 0;
            for (int f = 0; f < M; f++) {
                double wx = 0, wy = 0;
                for (int i = 0; i < D; i++) {
                    wx += (double)Wf[f * D + i] * x[i];
                    wy += (double)Wf[f * D + i] * y[i];
                }
                est += exp(wx - nx / 2) * exp(wy - ny / 2) / M;
                for (int g = 0; orf && g < f; g++) {
                    double dot = 0, na = 0, nb = 0;
                    for (int i = 0; i < D; i++) {
                        dot += (double)Wf[f * D + i] * (double)Wf[g * D + i];
                        na += (double)Wf[f * D + i] * (double)Wf[f * D + i];
                        nb += (double)Wf[g * D + i] * (double)Wf[g * D + i];
                    }
                    orthogonal &= fabs(dot) / sqrt(na * nb) < 1e-5;
                }
            }
            sum += est;
            sum2 += est * est;
            lab_free(&lab);
        }
        double mean = sum / SEEDS, sd = sqrt((sum2 / SEEDS - mean * mean) / (SEEDS - 1));
        check_true(fabs(mean - exp(xy)) < 3 * sd, "Performer %s features unbiased: mean of %d "
                   "seeds %.5f vs exp(x.y) %.5f (3 s.e. %.5f)", orf ? "orthogonal" : "i.i.d.",
                   SEEDS, mean, exp(xy), 3 * sd);
        if (orf) check_true(orthogonal, "Performer: orthogonal rows within a block (|cos| < 1e-5)");
    }
}

/* Performer's attention error falls roughly as 1/sqrt(m). */
static void performer_error(void) {
    /* attention error vs m: total variation of the weights, one-hot values, T = 64 keys,
     * |x| = |y| = 0.5 (scaled), averaged over 8 seeds */
    enum { T = 64, HS = 64 };
    static float q[T * HS], k[T * HS], v[T * HS], exact[T * HS], out[T * HS];
    float sc = 1.0f / sqrtf((float)HS), norm = 0.5f * sqrtf(sqrtf((float)HS));
    for (int t = 0; t < T; t++) {
        float *rowq = q + t * HS, *rowk = k + t * HS;
        fill_random(rowq, HS, 1.0f);
        fill_random(rowk, HS, 1.0f);
        double a = 0, b = 0;
        for (int i = 0; i < HS; i++) {
            a += (double)rowq[i] * (double)rowq[i];
            b += (double)rowk[i] * (double)rowk[i];
        }
        for (int i = 0; i < HS; i++) {
            rowq[i] *= norm / (float)sqrt(a);
            rowk[i] *= norm / (float)sqrt(b);
        }
        for (int i = 0; i < HS; i++) v[t * HS + i] = t == i ? 1.0f : 0.0f;
    }
    AttentionConfig ex = config(ATTENTION_EXACT);
    run_once(&ex, 1, 1, HS, sc, exact, q, k, v, T, T);
    double tv[3];
    const int ms[3] = {16, 64, 256};
    for (int c = 0; c < 3; c++) {
        double total = 0;
        for (int s = 1; s <= 8; s++) {
            AttentionConfig cfg = config(ATTENTION_PERFORMER);
            cfg.features = ms[c];
            cfg.seed = (unsigned long long)s;
            run_once(&cfg, 1, 1, HS, sc, out, q, k, v, T, T);
            for (int t = 1; t < T; t++) {
                double d = 0;
                for (int j = 0; j < HS; j++)
                    d += fabs((double)out[t * HS + j] - (double)exact[t * HS + j]);
                total += d / 2;
            }
        }
        tv[c] = total / (8.0 * (T - 1));
    }
    double r1 = tv[0] / tv[1], r2 = tv[1] / tv[2];
    check_true(r1 > 1.6 && r1 < 2.5 && r2 > 1.6 && r2 < 2.5, "Performer error ~ 1/sqrt(m): mean "
               "TV %.4f, %.4f, %.4f at m = 16, 64, 256; ratios %.2f, %.2f (want 1.6..2.5)",
               tv[0], tv[1], tv[2], r1, r2);
}

/* Performer: the features make an unbiased estimator of exp(x . y), orthogonal rows
 * are orthogonal, and the attention error falls roughly as 1/sqrt(m). */
static void test_performer(void) {
    performer_features();
    performer_error();
}

/* softmax1 == exact attention with a key of score 0 and value 0 in front (§8), to rounding;
 * Efficient Attention is invariant to adding a constant to q (§5). */
static void test_identities(void) {
    enum { HS = 6, T = 9 };
    float q[T * HS], k[(T + 1) * HS], v[(T + 1) * HS], q1[(T + 1) * HS];
    float a[T * HS], b[(T + 1) * HS];
    fill_random(q, T * HS, 2.0f);
    memset(k, 0, HS * sizeof(float));
    memset(v, 0, HS * sizeof(float));
    fill_random(k + HS, T * HS, 2.0f);
    fill_random(v + HS, T * HS, 1.0f);
    memcpy(q1 + HS, q, sizeof q);
    memset(q1, 0, HS * sizeof(float));
    AttentionConfig s1 = config(ATTENTION_EXACT), ex = config(ATTENTION_EXACT);
    s1.softmax1 = 1;
    run_once(&s1, 1, 1, HS, 0.4f, a, q, k + HS, v + HS, T, T);
    run_once(&ex, 1, 1, HS, 0.4f, b, q1, k, v, T + 1, T + 1);
    /* the same terms, but the extra key shifts which lane of the 8-lane sums each key's
     * weight lands in, so the sums round differently: a few float ulps */
    check_close("softmax1 vs exact with a (score 0, value 0) key in front", a, b + HS,
                (size_t)(T * HS), 1e-6, 1e-6);
    float shifted[T * HS];
    for (int i = 0; i < T * HS; i++) shifted[i] = q[i] + 3.0f;
    AttentionConfig eff = config(ATTENTION_EFFICIENT);
    run_once(&eff, 1, 1, HS, 0.4f, a, q, k + HS, v + HS, T, T);
    run_once(&eff, 1, 1, HS, 0.4f, b, shifted, k + HS, v + HS, T, T);
    check_close("Efficient Attention: q + 3 gives the same outputs", b, a, T * HS, 1e-6, 1e-6);
}

/* Bad configurations are refused, never run. */
static void test_invalid(void) {
    AttentionShape shape = {2, 2, 4, 0.5f};
    AttentionConfig cfg = config(ATTENTION_LSH);
    cfg.buckets = 3;
    int bad = attention_state_bytes(&cfg, &shape, 8) == 0;
    cfg = config(ATTENTION_PERFORMER);
    cfg.softmax1 = 1;
    bad &= attention_state_bytes(&cfg, &shape, 8) == 0;
    cfg = config(ATTENTION_WINDOW);
    cfg.window = 0;
    bad &= attention_state_bytes(&cfg, &shape, 8) == 0;
    cfg = config(ATTENTION_FIXED);
    cfg.summary = cfg.stride + 1;
    bad &= attention_state_bytes(&cfg, &shape, 8) == 0;
    cfg = config(ATTENTION_EXACT);   /* tau 1.2e-38 would make q.k = 30 an infinite score */
    cfg.tau = 1.2e-38f;
    bad &= attention_state_bytes(&cfg, &shape, 8) == 0;
    cfg.tau = nextafterf(ATTENTION_MIN_TAU, 0.0f);
    bad &= attention_state_bytes(&cfg, &shape, 8) == 0;
    cfg.tau = nextafterf(ATTENTION_MAX_TAU, 1e9f);
    bad &= attention_state_bytes(&cfg, &shape, 8) == 0;
    cfg.tau = ATTENTION_MIN_TAU;
    int edges = attention_state_bytes(&cfg, &shape, 8) > 0;
    cfg.tau = ATTENTION_MAX_TAU;
    edges &= attention_state_bytes(&cfg, &shape, 8) > 0;
    check_true(bad && edges, "invalid configs (odd buckets, softmax1 on Performer, window 0, "
               "c > l, tau just outside [0.01, 100]) have no state size; tau 0.01 and 100 do");
    /* the largest dilation the CLI accepts: (w-1) k + 1 = 2^40 slots is capped at n_alloc */
    cfg = config(ATTENTION_DILATED);
    cfg.window = 1 << 20;
    cfg.dilation = 1 << 20;
    float qd[8] = {1, 2, 3, 4, 5, 6, 7, 8}, od[8];
    check_true(attention_state_bytes(&cfg, &shape, 2) > 0 &&
               run_once(&cfg, 1, 1, 4, 0.5f, od, qd, qd, qd, 2, 1) == 0 &&
               memcmp(od, qd, sizeof od) == 0, "dilated(2^20, 2^20): a 2-slot ring, each "
               "position sees only itself");
    /* a ring cannot rewind: a step that does not continue the sequence is refused */
    cfg = config(ATTENTION_WINDOW);
    cfg.window = 2;
    Lab lab;
    float q[8] = {0}, out[8];
    lab_init(&lab, &cfg, 2, 2, 4, 0.5f, 8);
    int first = attention_step(&cfg, &lab.shape, lab.state, 8, out, q, q, q, 0, 1, lab.scratch);
    int skip = attention_step(&cfg, &lab.shape, lab.state, 8, out, q, q, q, 3, 1, lab.scratch);
    int end = attention_step(&cfg, &lab.shape, lab.state, 8, out, q, q, q, 8, 1, lab.scratch);
    check_true(first == 0 && skip == -1 && end == -1, "a window state refuses a skipped position "
               "and a position past n_alloc");
    lab_free(&lab);
}

/* ---- attention_weights: the weights of every variant, against attention_step ---- */

/* Tolerances. sum_j w_ij v_j (float64) against attention_step's float output: values in
 * [-1, 1] and weights summing to 1, so either side rounds at most 37 terms of size <= 1
 * (a few 1e-7); the kernelised kinds also round their running sums S and z where the
 * weights round each key's share. Measured worst: 1.9e-7 (Performer). Row sums: at most 37
 * float weights, each rounded once, summed in float64; linear attention's eps in the
 * denominator takes ~1e-7 more. Measured worst: 7.7e-7. Both leave a 10x margin. */
#define WEIGHTS_ATOL 1e-5
#define WEIGHTS_RTOL 1e-5
#define WEIGHTS_SUM_TOL 1e-5
#define WEIGHTS_UNSET -1.0f   /* fills w first: no weight is this, so every cell is written
                               * (exact in float: comparisons hold where floats are evaluated
                               * wider, FLT_EVAL_METHOD not 0: x87) */

enum { WT_T = 37, WT_NH = 4, WT_HS = 9, WT_CTX = 40 };   /* the largest case; n_alloc > T */

/* The variants of the weights tests: every kind, softmax1 where it applies, tau != 1,
 * unscaled, small parameters so that windows, patterns and buckets cut. */
static int weights_variants(AttentionConfig *list) {
    int n = 0;
    list[n++] = config(ATTENTION_EXACT);
    list[n] = config(ATTENTION_EXACT); list[n++].softmax1 = 1;
    list[n] = config(ATTENTION_EXACT); list[n++].tau = 1.6f;
    list[n] = config(ATTENTION_EXACT); list[n++].unscaled = 1;
    list[n++] = config(ATTENTION_GAUSS);
    list[n] = config(ATTENTION_GAUSS); list[n].softmax1 = 1; list[n++].tau = 0.8f;
    list[n] = config(ATTENTION_WINDOW); list[n++].window = 5;
    list[n] = config(ATTENTION_WINDOW); list[n].window = 4; list[n++].sinks = 2;
    list[n] = config(ATTENTION_WINDOW); list[n].window = 4; list[n].sinks = 2;
    list[n++].softmax1 = 1;
    list[n] = config(ATTENTION_DILATED); list[n].window = 3; list[n].dilation = 3;
    list[n++].sinks = 1;
    list[n] = config(ATTENTION_DILATED); list[n].window = 4; list[n].dilation = 2;
    list[n].sinks = 0; list[n++].softmax1 = 1;
    list[n] = config(ATTENTION_STRIDED); list[n++].stride = 4;
    list[n] = config(ATTENTION_STRIDED); list[n].stride = 3; list[n].softmax1 = 1;
    list[n++].unscaled = 1;
    list[n] = config(ATTENTION_FIXED); list[n].stride = 6; list[n++].summary = 2;
    list[n] = config(ATTENTION_FIXED); list[n].stride = 5; list[n].summary = 0;
    list[n++].softmax1 = 1;
    list[n] = config(ATTENTION_LSH); list[n].buckets = 4; list[n].rounds = 2;
    list[n].local = 3; list[n++].sinks = 1;
    list[n] = config(ATTENTION_LSH); list[n].buckets = 8; list[n].rounds = 1;
    list[n].local = 0; list[n].sinks = 0; list[n++].softmax1 = 1;
    list[n] = config(ATTENTION_LSH); list[n].buckets = 6; list[n].rounds = 3;
    list[n].local = 2; list[n].sinks = 0; list[n++].tau = 1.3f;
    list[n] = config(ATTENTION_LSH); list[n].buckets = 1; list[n].rounds = 1;
    list[n].local = 0; list[n++].sinks = 0;
    list[n++] = config(ATTENTION_LINEAR);
    list[n] = config(ATTENTION_LINEAR); list[n++].prescale = 1;
    list[n] = config(ATTENTION_LINEAR); list[n].prescale = 1; list[n++].tau = 0.7f;
    list[n++] = config(ATTENTION_EFFICIENT);
    list[n] = config(ATTENTION_PERFORMER); list[n++].features = 16;
    list[n] = config(ATTENTION_PERFORMER); list[n].features = 12; list[n].orthogonal = 0;
    list[n++].tau = 1.3f;
    list[n] = config(ATTENTION_PERFORMER); list[n].features = 7; list[n++].unscaled = 1;
    return n;
}

/* The variant with the parameters its kind reads, e.g. "window(w 4, S 2)+softmax1". */
static void describe_params(const AttentionConfig *cfg, char *out, size_t cap) {
    char p[64] = "";
    switch (cfg->kind) {
    case ATTENTION_WINDOW: snprintf(p, sizeof p, "(w %d, S %d)", cfg->window, cfg->sinks); break;
    case ATTENTION_DILATED:
        snprintf(p, sizeof p, "(w %d, k %d, S %d)", cfg->window, cfg->dilation, cfg->sinks);
        break;
    case ATTENTION_STRIDED: snprintf(p, sizeof p, "(l %d)", cfg->stride); break;
    case ATTENTION_FIXED: snprintf(p, sizeof p, "(l %d, c %d)", cfg->stride, cfg->summary); break;
    case ATTENTION_LSH:
        snprintf(p, sizeof p, "(nb %d, rounds %d, L %d, S %d)", cfg->buckets, cfg->rounds,
                 cfg->local, cfg->sinks);
        break;
    case ATTENTION_LINEAR: snprintf(p, sizeof p, "%s", cfg->prescale ? "(prescale)" : ""); break;
    case ATTENTION_PERFORMER:
        snprintf(p, sizeof p, "(m %d%s)", cfg->features, cfg->orthogonal ? "" : ", iid");
        break;
    default: break;
    }
    snprintf(out, cap, "%s%s%s%s", attention_kind_name(cfg->kind), p,
             cfg->softmax1 ? "+softmax1" : "", cfg->unscaled ? " unscaled" : "");
    if (cfg->tau != 1.0f)
        snprintf(out + strlen(out), cap - strlen(out), " tau %g", (double)cfg->tau);
}

/* The bucket of x (HS,) under the rotation R (half, HS), in float64 from the definition:
 * the argmax over the nb = 2 half entries of [x R^T, -x R^T]. */
static int lsh_bucket_f64(const float *x, const float *R, int half, int HS) {
    double best = -(double)INFINITY;
    int bucket = 0;
    for (int b = 0; b < 2 * half; b++) {
        double d = 0;
        for (int e = 0; e < HS; e++) d += (double)R[(b % half) * HS + e] * (double)x[e];
        if (b >= half) d = -d;
        if (d > best) { best = d; bucket = b; }
    }
    return bucket;
}

/* 1 if the variant's definition lets query i of head h see key j: causal, then the
 * pattern's set (visible() above), or LSH's sinks, local window (self included) and shared
 * buckets in any round (hashed here in float64 with the state's rotations). */
static int defined_visible(const AttentionConfig *cfg, Lab *lab, const float *q, const float *k,
                           int h, int i, int j) {
    if (j > i) return 0;
    if (cfg->kind != ATTENTION_LSH) return visible(cfg, i, j);
    if (j < cfg->sinks || i - j < (cfg->local > 1 ? cfg->local : 1)) return 1;
    int NH = lab->shape.n_heads, NKV = lab->shape.n_kv_heads, HS = lab->shape.head_dim;
    const float *q_i = q + ((long)i * NH + h) * HS;
    const float *k_j = k + ((long)j * NKV + h / (NH / NKV)) * HS;
    for (int r = 0; r < cfg->rounds; r++) {
        int rows = 0;
        const float *R = attention_state_random(&lab->cfg, &lab->shape, lab->n_alloc, lab->state, h,
                                                r, &rows);
        if (!R || lsh_bucket_f64(q_i, R, rows, HS) == lsh_bucket_f64(k_j, R, rows, HS))
            return 1;   /* (no rotation: one bucket, shared by all) */
    }
    return 0;
}

/* One property over all cases of a variant: ok stays 1 while every case passes, and
 * first describes the first failure for the message (empty while none). */
typedef struct {
    int ok;
    char first[192];
} Property;

/* What the weights of one variant did over all cases. */
typedef struct {
    Property repro, mask, sums, prefix;
    double worst_diff, worst_sum;   /* |out - sum_j w_ij v_j|, |sum_j w_ij - 1| */
} WeightsResult;

static void weights_fail(Property *property, const char *what, int NH, int HS, int T, int h,
                         int i, int j) {
    if (property->ok)
        snprintf(property->first, sizeof property->first,
                 " [first: %s at NH %d HS %d T %d, h %d i %d j %d]", what, NH, HS, T, h, i, j);
    property->ok = 0;
}

/* One variant on one shape and length: attention_step over T positions (chunks of 5), then
 * attention_weights with q0 = 0 checked against it, then q0 = 1, T/2, T-1 against q0 = 0. */
static void weights_case(const AttentionConfig *cfg, int NH, int NKV, int HS, int T,
                         WeightsResult *res) {
    static float q[WT_T * WT_NH * WT_HS], k[WT_T * WT_NH * WT_HS], v[WT_T * WT_NH * WT_HS];
    static float out[WT_T * WT_NH * WT_HS], w[WT_NH * WT_T * WT_T], w2[WT_NH * WT_T * WT_T];
    fill_random(q, (long)T * NH * HS, 1.5f);
    fill_random(k, (long)T * NKV * HS, 1.5f);
    fill_random(v, (long)T * NKV * HS, 1.0f);
    Lab lab;
    float *scratch = NULL;
    int rows = 0;
    if (lab_init(&lab, cfg, NH, NKV, HS, 1.0f / sqrtf((float)HS), WT_CTX) != 0 ||
        lab_run(&lab, out, q, k, v, T, 5) != 0) goto fail;
    scratch = malloc(attention_weights_scratch_floats(cfg, &lab.shape, T) * sizeof(float));
    /* kinds without random matrices get no state at all */
    const void *state = attention_state_random(cfg, &lab.shape, WT_CTX, lab.state, 0, 0, &rows)
                        ? lab.state : NULL;
    for (int c = 0; c < NH * T * T; c++) w[c] = WEIGHTS_UNSET;
    if (!scratch || attention_weights(cfg, &lab.shape, state, WT_CTX, w, q, k, 0, T, scratch) != 0)
        goto fail;
    for (int h = 0; h < NH; h++) {
        int g = h / (NH / NKV);
        for (int i = 0; i < T; i++) {
            const float *w_i = w + ((long)h * T + i) * T;
            double sum = 0, acc[WT_HS] = {0};
            for (int j = 0; j < T; j++) {
                if (isnan(w_i[j]) == defined_visible(cfg, &lab, q, k, h, i, j))
                    weights_fail(&res->mask, "NaN pattern", NH, HS, T, h, i, j);
                if (isnan(w_i[j])) continue;
                /* (a row of one key: its weight is a sum of shares, 1 to rounding) */
                if (!(w_i[j] >= 0.0f && (double)w_i[j] <= 1.0 + WEIGHTS_SUM_TOL))
                    weights_fail(&res->mask, "weight outside [0, 1]", NH, HS, T, h, i, j);
                sum += (double)w_i[j];
                for (int e = 0; e < HS; e++)
                    acc[e] += (double)w_i[j] * (double)v[((long)j * NKV + g) * HS + e];
            }
            double dev = fabs(sum - 1.0);
            res->worst_sum = max_of(res->worst_sum, dev);
            if (cfg->softmax1 ? !(sum > 0.0 && sum < 1.0) : !(dev <= WEIGHTS_SUM_TOL))
                weights_fail(&res->sums, "row sum", NH, HS, T, h, i, -1);
            for (int e = 0; e < HS; e++) {
                double got = (double)out[((long)i * NH + h) * HS + e];
                double diff = fabs(got - acc[e]);
                res->worst_diff = max_of(res->worst_diff, diff);
                if (!(diff <= WEIGHTS_ATOL + WEIGHTS_RTOL * fabs(acc[e])))
                    weights_fail(&res->repro, "output", NH, HS, T, h, i, e);
            }
        }
    }
    const int q0s[3] = {1, T / 2, T - 1};
    for (int c = 0; c < 3 && T > 1; c++) {
        int q0 = q0s[c], n = T - q0;
        for (int e = 0; e < NH * T * T; e++) w2[e] = WEIGHTS_UNSET;
        int ok = attention_weights(cfg, &lab.shape, state, WT_CTX, w2, q, k, q0, T, scratch) == 0;
        for (int h = 0; h < NH; h++)
            ok &= memcmp(w2 + (long)h * n * T, w + ((long)h * T + q0) * T,
                         (size_t)n * T * sizeof(float)) == 0;
        ok &= w2[NH * n * T] == WEIGHTS_UNSET || n == T;   /* nothing past (NH, T - q0, T) */
        if (!ok) weights_fail(&res->prefix, "q0 rows", NH, HS, T, -1, q0, -1);
    }
    free(scratch);
    lab_free(&lab);
    return;
fail:
    free(scratch);
    lab_free(&lab);
    Property *all[4] = {&res->repro, &res->mask, &res->sums, &res->prefix};
    for (int c = 0; c < 4; c++) weights_fail(all[c], "did not run", NH, HS, T, -1, -1, -1);
}

/* Softmax kinds: with one-hot values (HS = T) the step's output row is its weight row, so
 * attention_weights must give it bit for bit, with NaN where the step has 0. */
static int weights_onehot(const AttentionConfig *cfg, int T) {
    enum { NH = 4, NKV = 2 };
    static float q[WT_T * NH * WT_T], k[WT_T * NKV * WT_T], v[WT_T * NKV * WT_T];
    static float out[WT_T * NH * WT_T], w[NH * WT_T * WT_T];
    fill_random(q, (long)T * NH * T, 1.5f);
    fill_random(k, (long)T * NKV * T, 1.5f);
    for (int j = 0; j < T; j++)
        for (int g = 0; g < NKV; g++)
            for (int e = 0; e < T; e++) v[((long)j * NKV + g) * T + e] = j == e ? 1.0f : 0.0f;
    Lab lab;
    int ok = lab_init(&lab, cfg, NH, NKV, T, 1.0f / sqrtf((float)T), T) == 0 &&
             lab_run(&lab, out, q, k, v, T, 3) == 0;
    float *scratch = malloc(attention_weights_scratch_floats(cfg, &lab.shape, T) * sizeof(float));
    ok = ok && scratch &&
         attention_weights(cfg, &lab.shape, lab.state, T, w, q, k, 0, T, scratch) == 0;
    for (int h = 0; ok && h < NH; h++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                float a = w[((long)h * T + i) * T + j], b = out[((long)i * NH + h) * T + j];
                ok &= isnan(a) ? b == 0.0f : memcmp(&a, &b, sizeof a) == 0;
            }
    free(scratch);
    lab_free(&lab);
    return ok;
}

static void test_weights(void) {
    AttentionConfig list[32];
    int n = weights_variants(list);
    const int shapes[3][3] = {{4, 2, 5}, {2, 2, 9}, {3, 1, 3}};   /* NH, NKV, HS */
    const int lengths[3] = {1, 7, WT_T};
    for (int c = 0; c < n; c++) {
        char name[96];
        describe_params(&list[c], name, sizeof name);
        WeightsResult res = {{1, ""}, {1, ""}, {1, ""}, {1, ""}, 0, 0};
        for (int s = 0; s < 3; s++)
            for (int t = 0; t < 3; t++)
                weights_case(&list[c], shapes[s][0], shapes[s][1], shapes[s][2], lengths[t], &res);
        const char *cases = "T 1, 7, 37; (NH, NKV, HS) (4, 2, 5), (2, 2, 9), (3, 1, 3)";
        check_true(res.repro.ok, "weights %s: sum_j w_ij v_j == attention_step's output "
                   "(worst diff %.2g; %s)%s", name, res.worst_diff, cases, res.repro.first);
        check_true(res.mask.ok, "weights %s: NaN exactly where the definition hides the key "
                   "(float64 predicate), else in [0, 1]%s", name, res.mask.first);
        if (list[c].softmax1)
            check_true(res.sums.ok, "weights %s: rows sum to less than 1 (the virtual key takes "
                       "the rest)%s", name, res.sums.first);
        else
            check_true(res.sums.ok, "weights %s: rows sum to 1 (worst |sum - 1| %.2g)%s", name,
                       res.worst_sum, res.sums.first);
        check_true(res.prefix.ok, "weights %s: q0 = 1, T/2, T-1 give q0 = 0's rows, bitwise%s",
                   name, res.prefix.first);
        if (list[c].kind != ATTENTION_LINEAR && list[c].kind != ATTENTION_EFFICIENT &&
            list[c].kind != ATTENTION_PERFORMER)
            check_true(weights_onehot(&list[c], 7) && weights_onehot(&list[c], WT_T),
                       "weights %s: equal attention_step's own softmax weights (one-hot values, "
                       "T 7, 37), bitwise", name);
    }
}

/* Bad arguments are refused with -1 and nothing written. */
static void test_weights_invalid(void) {
    enum { NH = 2, HS = 4, T = 6, N_CTX = 8 };
    float q[T * NH * HS], k[T * NH * HS], v[T * NH * HS], out[T * NH * HS];
    float w[NH * (N_CTX + 1) * (N_CTX + 1)], scratch[4096];
    fill_random(q, T * NH * HS, 1.0f);
    fill_random(k, T * NH * HS, 1.0f);
    fill_random(v, T * NH * HS, 1.0f);
    AttentionConfig kinds[3] = {config(ATTENTION_WINDOW), config(ATTENTION_LSH),
                                config(ATTENTION_PERFORMER)};
    kinds[1].buckets = 4;
    kinds[2].features = 8;
    for (int c = 0; c < 3; c++) {
        const AttentionConfig *cfg = &kinds[c];
        Lab lab;
        int ok = lab_init(&lab, cfg, NH, NH, HS, 0.5f, N_CTX) == 0 &&
                 lab_run(&lab, out, q, k, v, T, T) == 0 &&
                 attention_weights_scratch_floats(cfg, &lab.shape, N_CTX + 1) <= 4096;
        for (int e = 0; e < NH * (N_CTX + 1) * (N_CTX + 1); e++) w[e] = WEIGHTS_UNSET;
        const AttentionShape *sh = &lab.shape;
        void *st = lab.state;
        ok &= attention_weights(cfg, sh, st, N_CTX, w, q, k, -1, T, scratch) == -1;
        ok &= attention_weights(cfg, sh, st, N_CTX, w, q, k, T, T, scratch) == -1;
        ok &= attention_weights(cfg, sh, st, N_CTX, w, q, k, 0, 0, scratch) == -1;
        ok &= attention_weights(cfg, sh, st, N_CTX, w, q, k, 0, N_CTX + 1, scratch) == -1;
        ok &= attention_weights(cfg, sh, st, 0, w, q, k, 0, T, scratch) == -1;
        ok &= attention_weights(cfg, sh, st, N_CTX, NULL, q, k, 0, T, scratch) == -1;
        ok &= attention_weights(cfg, sh, st, N_CTX, w, NULL, k, 0, T, scratch) == -1;
        ok &= attention_weights(cfg, sh, st, N_CTX, w, q, NULL, 0, T, scratch) == -1;
        ok &= attention_weights(cfg, sh, st, N_CTX, w, q, k, 0, T, NULL) == -1;
        AttentionShape odd_groups = {3, 2, HS, 0.5f};
        ok &= attention_weights(cfg, &odd_groups, st, N_CTX, w, q, k, 0, T, scratch) == -1;
        AttentionConfig bad = *cfg;
        bad.tau = 0.0f;
        ok &= attention_weights(&bad, sh, st, N_CTX, w, q, k, 0, T, scratch) == -1;
        ok &= attention_weights_scratch_floats(&bad, sh, T) == 0 &&
              attention_weights_scratch_floats(cfg, sh, 0) == 0;
        int untouched = 1;   /* by every call above */
        for (int e = 0; e < NH * (N_CTX + 1) * (N_CTX + 1); e++)
            untouched &= w[e] == WEIGHTS_UNSET;
        /* random matrices are needed for LSH and Performer, not for the window (which then
         * writes its weights) */
        int null_state = attention_weights(cfg, sh, NULL, N_CTX, w, q, k, 0, T, scratch);
        ok &= cfg->kind == ATTENTION_WINDOW ? null_state == 0 : null_state == -1;
        for (int e = 0; cfg->kind != ATTENTION_WINDOW && e < NH * (N_CTX + 1) * (N_CTX + 1); e++)
            untouched &= w[e] == WEIGHTS_UNSET;
        lab_free(&lab);
        check_true(ok && untouched, "weights %s: q0 < 0, q0 >= T, T < 1, T > n_alloc, n_alloc < 1, "
                   "NULL w/q/k/scratch, NH %% NKV != 0, tau 0%s return -1, nothing written",
                   attention_kind_name(cfg->kind),
                   cfg->kind == ATTENTION_WINDOW ? "" : ", NULL state");
    }
}

/* The state's size never wraps around size_t: LSH with 16 heads of 64, 64 rounds of 64
 * buckets at 2^20 positions needs (by hand, in double) 4 bytes for each of 16 x 2^20 keys
 * and values of 64 floats, 16 x 2^20 list entries, 16 x 64 x 32 x 64 random rows, 16 x 64
 * x 64 bucket heads, 16 x 64 x 2^20 next links and 16 x 2^20 stamps: over 4 GiB, so
 * attention_state_bytes gives at least that, or 0 (refused) where size_t has 32 bits. */
static void test_state_size_wrap(void) {
    AttentionShape shape = {16, 16, 64, 0.125f};
    AttentionConfig lsh = config(ATTENTION_LSH);
    lsh.buckets = 64;
    lsh.rounds = 64;
    double n = 1048576.0, want = 4.0 * (16 * n * 64 * 2 + 16 * n + 16.0 * 64 * 32 * 64 +
                                       16.0 * 64 * 64 + 16 * 64 * n + 16 * n);
    size_t got = attention_state_bytes(&lsh, &shape, 1 << 20);
    check_true(got == 0 || (double)got >= want, "state size: LSH at 2^20 positions, 64 "
               "rounds: %zu bytes (want 0, refused, or at least %.0f)", got, want);
}

/* ---- a state used again, a rewind, and edge values (cases a mutation of attention.c
 * showed untested) ---- */

/* A second sequence from pos 0 on a used state gives the bits of a fresh state: nothing
 * of the first (the recurrent sums and maxima, LSH's bucket lists) survives the reset.
 * The first's queries and keys are all one vector (LSH lists every key in one bucket),
 * the second's random. */
static void test_state_reused(void) {
    enum { NH = 2, NKV = 1, HS = 4, T = 12 };
    AttentionConfig list[16];
    int n = all_variants(list), bad = 0;
    float qa[T * NH * HS], ka[T * NKV * HS], va[T * NKV * HS];
    float qb[T * NH * HS], kb[T * NKV * HS], vb[T * NKV * HS];
    float used[T * NH * HS], fresh[T * NH * HS];
    for (int i = 0; i < T * NH * HS; i++) qa[i] = 1.0f;
    for (int i = 0; i < T * NKV * HS; i++) ka[i] = 1.0f;
    fill_random(va, T * NKV * HS, 1.0f); fill_random(qb, T * NH * HS, 2.0f);
    fill_random(kb, T * NKV * HS, 2.0f); fill_random(vb, T * NKV * HS, 1.0f);
    for (int c = 0; c < n; c++) {
        Lab lab;
        int ok = lab_init(&lab, &list[c], NH, NKV, HS, 0.5f, T) == 0 &&
                 lab_run(&lab, used, qa, ka, va, T, 5) == 0 &&
                 lab_run(&lab, used, qb, kb, vb, T, 5) == 0;
        lab_free(&lab);
        ok = ok && run_once(&list[c], NH, NKV, HS, 0.5f, fresh, qb, kb, vb, T, 5) == 0;
        if (!ok || memcmp(used, fresh, sizeof used) != 0) {
            char name[64];
            describe(&list[c], name, sizeof name);
            printf("  %s: a used state differs from a fresh one\n", name);
            bad++;
        }
    }
    check_true(bad == 0, "a second sequence on a used state: the bits of a fresh state, "
               "%d variants (%d differ)", n, bad);
}

/* The kinds that keep every key may rewind as a KV cache does (attention.h): three
 * positions of §12's vectors, then position 1 again with row 2's q, k and v; its output
 * is softmax over keys 0 and the new 1 (float64, by hand), for exact and strided (l = 2:
 * both keys in its window). */
static void test_rewind(void) {
    AttentionKind kinds[2] = {ATTENTION_EXACT, ATTENTION_STRIDED};
    const float *q = EX_Q + 6, *k1 = EX_K + 6, *v1 = EX_V + 6;
    double s0 = 0, s1 = 0;
    for (int e = 0; e < 3; e++) {
        s0 += (double)q[e] * (double)EX_K[e] * (double)EX_SCALE;
        s1 += (double)q[e] * (double)k1[e] * (double)EX_SCALE;
    }
    double w0 = 1.0 / (1.0 + exp(s1 - s0)), w1 = 1.0 - w0;
    for (int c = 0; c < 2; c++) {
        AttentionConfig cfg = config(kinds[c]);
        cfg.stride = 2;
        Lab lab;
        float out[9], again[3];
        int ok = lab_init(&lab, &cfg, 1, 1, 3, EX_SCALE, 3) == 0 &&
                 lab_run(&lab, out, EX_Q, EX_K, EX_V, 3, 3) == 0 &&
                 attention_step(&lab.cfg, &lab.shape, lab.state, 3, again, q, k1, v1, 1, 1,
                                lab.scratch) == 0;
        double worst = 0;
        for (int e = 0; ok && e < 3; e++) {
            double want = w0 * (double)EX_V[e] + w1 * (double)v1[e];
            worst = max_of(worst, fabs((double)again[e] - want));
        }
        check_true(ok && worst < 1e-6, "%s: a step back to position 1 attends over key 0 and "
                   "the new key 1 (max |diff| %.2g)", attention_kind_name(kinds[c]), worst);
        lab_free(&lab);
    }
}

/* Values where the guards of the recurrent forms decide (float64 by hand, HS = 4, one
 * position): linear's eps, 1e-6, beside phi(q).z = 4 e^-20 (q = -20, k = 0, v = 1) gives
 * 4e^-20 / (4e^-20 + 1e-6); linear:norm=1 over v = 0 gives 0, not 0/0; efficient with one
 * key of -110 (exp underflows without its running maximum) gives v itself. */
static void test_recurrent_guards(void) {
    const float q20[4] = {-20, -20, -20, -20}, zero[4] = {0}, one[4] = {1, 1, 1, 1};
    const float k110[4] = {-110, -110, -110, -110}, v4[4] = {1, 2, 3, 4};
    float out[4];
    AttentionConfig lin = config(ATTENTION_LINEAR);
    double e = 4.0 * exp(-20.0), want = e / (e + 1e-6), worst = 0;
    int ok = run_once(&lin, 1, 1, 4, 0.5f, out, q20, zero, one, 1, 1) == 0;
    for (int i = 0; ok && i < 4; i++) worst = max_of(worst, fabs((double)out[i] - want) / want);
    check_true(ok && worst < 1e-5, "linear: phi(q).z = 4e^-20 beside eps 1e-6 gives %.7f "
               "(relative diff %.2g)", want, worst);
    lin.norm = 1;
    ok = run_once(&lin, 1, 1, 4, 0.5f, out, one, one, zero, 1, 1) == 0;
    check_true(ok && out[0] == 0.0f && out[3] == 0.0f, "linear:norm=1 over v = 0 gives 0 "
               "(got %g)", (double)out[0]);
    /* its weights (attention_weights): phi.z / (phi.z + eps) = the value above, with norm 1
     * (no eps) exactly 1 */
    AttentionShape one_head = {1, 1, 4, 0.5f};
    for (int norm = 0; norm <= 1; norm++) {
        lin.norm = norm;
        float w[1], scratch[64];
        size_t need = attention_weights_scratch_floats(&lin, &one_head, 1);
        ok = need <= 64 && attention_weights(&lin, &one_head, NULL, 1, w, q20, zero, 0, 1,
                                             scratch) == 0;
        double w_want = norm ? 1.0 : want;
        check_true(ok && fabs((double)w[0] - w_want) <= 1e-5 * w_want, "linear%s: one key's "
                   "weight %.7f (got %.7f)", norm ? ":norm=1" : "", w_want, (double)w[0]);
    }
    /* Performer with a query of 1e20: |q|^2 overflows, every feature's logit is -inf and
     * the denominator not a number: the output is 0 by the rule of read_out, not NaN */
    AttentionConfig perf = config(ATTENTION_PERFORMER);
    perf.features = 8;
    const float huge[4] = {1e20f, 0, 0, 0};
    ok = run_once(&perf, 1, 1, 4, 0.5f, out, huge, one, v4, 1, 1) == 0;
    check_true(ok && out[0] == 0.0f && out[3] == 0.0f, "performer: a query of 1e20 gives 0, "
               "not NaN (got %g)", (double)out[0]);
    AttentionConfig eff = config(ATTENTION_EFFICIENT);
    ok = run_once(&eff, 1, 1, 4, 0.5f, out, zero, k110, v4, 1, 1) == 0;
    check_true(ok && out[0] == 1.0f && out[1] == 2.0f && out[2] == 3.0f && out[3] == 4.0f,
               "efficient: one key of -110 gives its value (got %g %g %g %g)", (double)out[0],
               (double)out[1], (double)out[2], (double)out[3]);
}

/* The largest values a parameter's documented range allows are taken: fixed's c = l,
 * synth-frandom's rank = the context. */
static void test_range_edges(void) {
    char problem[160];
    AttentionConfig fixed = config(ATTENTION_FIXED);
    fixed.stride = 4;
    fixed.summary = 4;
    int ok = attention_config_check(&fixed, problem, sizeof problem) == 0;
    check_true(ok, "fixed with c = l = 4 accepted (%s)", ok ? "" : problem);
    AttentionConfig fr = config(ATTENTION_SYNTH_FRANDOM);
    fr.factor = 8;
    ok = attention_context_check(&fr, 8, problem, sizeof problem) == 0;
    check_true(ok, "synth-frandom of rank 8 in a context of 8 accepted (%s)", ok ? "" : problem);
}

/* LSH's rotations pinned to the draws of tests/rng_reference.py, a transcription of
 * splitmix64 seeding xoshiro256** and Box-Muller: buckets 4 and head size 4 (2 rows of 4),
 * seed 1; the state's (layer 0, head 0, round 0), `python3 tests/rng_reference.py 1 0 0 0
 * 0 8`, and attention_draw_random's draw 3 of layer 2, `... 1 3 2 0 0 8`. A checkpoint that
 * records a seed gets these matrices back on every machine. */
static void test_random_pinned(void) {
    static const float want_state[8] = {0.418437064f, 0.552308798f, -0.755960703f,
                                        -0.0363874435f, 0.883054495f, -0.34724015f,
                                        -0.204466268f, 0.73505801f};
    static const float want_draw[8] = {-1.07401943f, -0.215352505f, 1.48861182f,
                                       -0.132661194f, 0.906618655f, 1.21118665f, 1.58708477f,
                                       0.231445074f};
    AttentionConfig cfg = config(ATTENTION_LSH);
    cfg.buckets = 4;
    cfg.rounds = 1;
    cfg.seed = 1;
    Lab lab;
    int rows = 0, ok = lab_init(&lab, &cfg, 1, 1, 4, 0.5f, 8) == 0;
    const float *R = ok ? attention_state_random(&cfg, &lab.shape, 8, lab.state, 0, 0, &rows)
                        : NULL;
    float drawn[8];
    int drew = ok && attention_draw_random(&cfg, &lab.shape, 2, 3, drawn) == 0;
    double worst = 0, worst_draw = 0;
    for (int i = 0; R && rows == 2 && i < 8; i++)
        worst = max_of(worst, fabs((double)R[i] - (double)want_state[i]));
    for (int i = 0; drew && i < 8; i++)
        worst_draw = max_of(worst_draw, fabs((double)drawn[i] - (double)want_draw[i]));
    check_true(R && rows == 2 && worst < 1e-6, "LSH's rotation of seed 1 (layer 0, head 0) is "
               "tests/rng_reference.py's (max |diff| %.2g)", worst);
    check_true(drew && worst_draw < 1e-6, "attention_draw_random's draw 3 of layer 2 is "
               "tests/rng_reference.py's (max |diff| %.2g)", worst_draw);
    lab_free(&lab);
}

/* Performer's query side (performer_query) with one key k = -q: for feature c, with a_c =
 * w_c . q s, the query's logit is a_c - |q s|^2 / 2 and the key's -a_c - |q s|^2 / 2, so a
 * query's strongest feature is the key's weakest, and every log phi_c z_c is the same.
 * With max_c a_c - min_c a_c at 150 (q along (1, -2, 0.5, 3), scaled for it), the key sums
 * z_c of the query's strongest features underflow below FLT_MIN and those features are
 * left out (kept, phi_c = 1 / z_c would reach e^150: infinite, and the output NaN); the
 * others each give phi_c z_c = 1, and the output is the one key's value. */
static void test_performer_shift(void) {
    enum { HS = 4, M = 8 };
    AttentionConfig perf = config(ATTENTION_PERFORMER);
    perf.features = M;
    const float dir[HS] = {1.0f, -2.0f, 0.5f, 3.0f}, v4[HS] = {1, 2, 3, 4};
    float q[HS], k[HS], out[HS];
    Lab lab;
    int rows = 0, ok = lab_init(&lab, &perf, 1, 1, HS, 0.5f, 1) == 0;
    const float *W = ok ? attention_state_random(&perf, &lab.shape, 1, lab.state, 0, 0, &rows)
                        : NULL;
    double hi = -HUGE_VAL, lo = HUGE_VAL;
    for (int f = 0; W && f < rows; f++) {
        double a = 0;
        for (int i = 0; i < HS; i++) a += (double)W[f * HS + i] * (double)dir[i];
        hi = a > hi ? a : hi;
        lo = a < lo ? a : lo;
    }
    double lambda = 150.0 / (sqrt(0.5) * (hi - lo));   /* s = sqrt(scale) */
    for (int i = 0; i < HS; i++) {
        q[i] = (float)(lambda * (double)dir[i]);
        k[i] = -q[i];
    }
    if (ok) lab_free(&lab);
    ok = W && rows == M && run_once(&perf, 1, 1, HS, 0.5f, out, q, k, v4, 1, 1) == 0;
    double worst = 0;
    for (int i = 0; ok && i < HS; i++)
        worst = max_of(worst, fabs((double)out[i] - (double)v4[i]) / (double)v4[i]);
    check_true(ok && worst < 1e-5, "performer: a query whose strongest features are the one "
               "key's weakest (a spread of 150, key sums below FLT_MIN) gives its value (got %g "
               "%g %g %g, relative diff %.2g)", (double)out[0], (double)out[1], (double)out[2],
               (double)out[3], worst);
}

int main(void) {
    test_vectors();
    test_kernels();
    test_visible_sets();
    test_properties();
    test_extreme();
    test_limits();
    test_lsh();
    test_lsh_nested();
    test_state_size_wrap();
    test_seeds_and_threads();
    test_performer();
    test_identities();
    test_invalid();
    test_weights();
    test_weights_invalid();
    test_state_reused();
    test_rewind();
    test_recurrent_guards();
    test_performer_shift();
    test_range_edges();
    test_random_pinned();
    return check_summary("test_attention_variants");
}

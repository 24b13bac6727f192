/* test_attention_train.c: every attention variant's training forward and backward
 * (attention_train_forward, attention_train_backward, attention_draw_random), and the decode
 * path's learned sink logit and RMS-normalised linear attention (attention_step,
 * attention_weights), against a float64 reference written here from docs/attention.md's
 * formulas, not from attention.c.
 *
 * For every kind and option combination, at small odd shapes (T = 1, 5, 13; NH 2 or 3, NKV
 * dividing NH, HS 3..8): (a) the training forward equals attention_step over the same T
 * positions with the state's own random matrices (draw 0); (b) it equals the float64
 * reference, and the backward (dq, dk, dv, dsink) equals central finite differences of that
 * reference; with dropout the reference applies the mask hash.h's rule gives; (c) 1 and 2
 * threads give the same bits; (e) invalid configurations return -1.
 * Tolerances: the float forward matches float64 to ~1e-7 (sums of at most 13 terms of size
 * ~1; measured worst 2e-7), so 1e-5; the float gradients likewise (measured worst 1e-6), and
 * the central differences (step 1e-4 in float64: error ~1e-8 times the third derivative)
 * are better still, so 1e-5 absolute plus 1e-4 relative. Section numbers (§) are those of
 * docs/attention.md.
 */
#include "attention.h"

#include <math.h>      /* exp, sqrt, fabs, NAN */
#include <stdint.h>    /* uint64_t */
#include <stdio.h>     /* snprintf */
#include <stdlib.h>    /* malloc, free */
#include <string.h>    /* memcmp, memcpy, memset */

#include "hash.h"          /* hash_mix64, hash_threshold, hash_drops: the dropout rule */
#include "kernels.h"       /* kernels_run, kernels_parallel_for, kernels_set_threads */
#include "tests/check.h"   /* check_* */

#define FWD_ATOL 1e-5      /* float forward against float64 */
#define FWD_RTOL 1e-5
#define GRAD_ATOL 1e-5     /* float gradients against float64 central differences */
#define GRAD_RTOL 1e-4
#define FD_STEP 1e-4       /* central differences' step, in float64 */
#define FD_MAX_POINTS 400  /* differences taken per tensor at most (a stride through it) */
#define SYNTH_LEN 16       /* positions a Synthesizer's parameters cover (T, if longer) */

/* ---- one case: a variant, a shape, and its inputs ---- */

typedef struct {
    int NH, NKV, HS, T;
} Dims;

typedef struct {
    const char *name;
    AttentionConfig cfg;
    float drop_p;   /* attention dropout, softmax kinds only */
} Variant;

typedef struct {
    AttentionConfig config;              /* the variant's, with sink_logits = sink */
    const AttentionConfig *cfg;          /* &config */
    Dims d;
    AttentionShape shape;
    int C, KVD;                          /* NH * HS, NKV * HS */
    float *q, *k, *v, *dout, *sink;      /* the float inputs */
    float *synth;                        /* a Synthesizer's parameters (n_synth,), or NULL */
    size_t n_synth, n_param;             /* and the floats of the parameters' gradient: the
                                          * sink logits' NH, or n_synth */
    float *random;                       /* attention_draw_random's draw 0, or NULL */
    int rounds, rand_rows;
    AttentionDropout drop;
    /* float64 copies for the reference */
    double *qd, *kd, *vd, *doutd, *sinkd, *Rd, *synthd;
    unsigned char *visible;              /* (NH, T, T): key j visible to query i in head h */
    double *mask;                        /* (NH, T, T) dropout factors, or NULL */
    double *out_ref;                     /* (T, C) scratch of the reference */
} Case;

static uint64_t seed_state = 0x5EED5EED12345ULL;

static float *alloc_floats(size_t n) {
    float *x = calloc(n ? n : 1, sizeof(float));
    if (!x) { fprintf(stderr, "test_attention_train: out of memory\n"); exit(1); }
    return x;
}

static double *alloc_doubles(size_t n) {
    double *x = calloc(n ? n : 1, sizeof(double));
    if (!x) { fprintf(stderr, "test_attention_train: out of memory\n"); exit(1); }
    return x;
}

static double *to_doubles(const float *x, size_t n) {
    double *y = alloc_doubles(n);
    for (size_t i = 0; i < n; i++) y[i] = (double)x[i];
    return y;
}

/* The larger of a and b, by a comparison: gcc 12 for aarch64 crashes on a loop that reduces
 * with fmax (see tests/test_attention_variants.c). */
static double max_of(double a, double b) { return b > a ? b : a; }

static int is_softmax_kind(AttentionKind kind) {
    return kind != ATTENTION_LINEAR && kind != ATTENTION_EFFICIENT &&
           kind != ATTENTION_PERFORMER;
}

/* The bucket of x (HS,) under rotation R (half, HS): argmax of [x R^T, -x R^T] (§4), in
 * float, the first of equal values winning. */
static int test_bucket(const float *x, const float *R, int half, int HS) {
    float best = -INFINITY;
    int bucket = 0;
    for (int c = 0; c < half; c++) {
        float d = 0.0f;
        for (int i = 0; i < HS; i++) d += R[c * HS + i] * x[i];
        if (d > best) { best = d; bucket = c; }
        if (-d > best) { best = -d; bucket = half + c; }
    }
    return bucket;
}

/* The visible sets of docs/attention.md §3 and §4, written out. */
static void make_visible(Case *c) {
    const AttentionConfig *cfg = c->cfg;
    int T = c->d.T, NH = c->d.NH, HS = c->d.HS, group = c->d.NH / c->d.NKV;
    for (int h = 0; h < NH; h++) {
        int g = h / group;
        for (int i = 0; i < T; i++) {
            for (int j = 0; j < T; j++) {
                int d = i - j, seen = j <= i;
                switch (cfg->kind) {
                case ATTENTION_WINDOW:
                    seen = seen && (j < cfg->sinks || d < cfg->window);
                    break;
                case ATTENTION_DILATED:
                    seen = seen && (j < cfg->sinks ||
                                    (d % cfg->dilation == 0 && d / cfg->dilation < cfg->window));
                    break;
                case ATTENTION_STRIDED:
                    seen = seen && (d < cfg->stride || d % cfg->stride == 0);
                    break;
                case ATTENTION_FIXED:
                    seen = seen && (j / cfg->stride == i / cfg->stride ||
                                    j % cfg->stride >= cfg->stride - cfg->summary);
                    break;
                case ATTENTION_LSH: {
                    int local = cfg->local > 1 ? cfg->local : 1, shared = 0;
                    for (int r = 0; r < cfg->rounds; r++) {
                        const float *R = c->random
                            ? c->random + ((long)h * c->rounds + r) * c->rand_rows * HS : NULL;
                        int bq = R ? test_bucket(c->q + ((long)i * NH + h) * HS, R,
                                                 c->rand_rows, HS) : 0;
                        int bk = R ? test_bucket(c->k + ((long)j * c->d.NKV + g) * HS, R,
                                                 c->rand_rows, HS) : 0;
                        shared |= bq == bk;
                    }
                    seen = seen && (j < cfg->sinks || d < local || shared);
                    break;
                }
                default:
                    break;
                }
                c->visible[((long)h * T + i) * T + j] = (unsigned char)seen;
            }
        }
    }
}

/* The dropout factors of hash.h's rule for index (h T + i) T + j: 0 or 1 / (1 - p). */
static void make_mask(Case *c) {
    int T = c->d.T;
    uint64_t threshold = hash_threshold(c->drop.p);
    for (long n = 0; n < (long)c->d.NH * T * T; n++)
        c->mask[n] = hash_drops(hash_mix64(c->drop.key + (uint64_t)n), threshold)
                     ? 0.0 : 1.0 / (1.0 - (double)c->drop.p);
}

static void case_init(Case *c, const Variant *var, Dims d) {
    memset(c, 0, sizeof *c);
    c->config = var->cfg;
    c->cfg = &c->config;
    c->d = d;
    c->shape = (AttentionShape){d.NH, d.NKV, d.HS, (float)(1.0 / sqrt((double)d.HS))};
    c->C = d.NH * d.HS;
    c->KVD = d.NKV * d.HS;
    c->q = alloc_floats((size_t)d.T * c->C);
    c->dout = alloc_floats((size_t)d.T * c->C);
    c->k = alloc_floats((size_t)d.T * c->KVD);
    c->v = alloc_floats((size_t)d.T * c->KVD);
    c->sink = alloc_floats((size_t)d.NH);
    check_fill_random(&seed_state, c->q, (long)d.T * c->C, 1.5f);
    check_fill_random(&seed_state, c->k, (long)d.T * c->KVD, 1.5f);
    check_fill_random(&seed_state, c->v, (long)d.T * c->KVD, 1.0f);
    check_fill_random(&seed_state, c->dout, (long)d.T * c->C, 1.0f);
    check_fill_random(&seed_state, c->sink, d.NH, 1.0f);
    if (c->config.sink_logit) c->config.sink_logits = c->sink;
    if (attention_is_synth(c->config.kind)) {   /* parameters for up to 16 positions, or T */
        c->config.synth_len = d.T < SYNTH_LEN ? SYNTH_LEN : d.T;
        c->n_synth = attention_synth_floats(c->cfg, &c->shape);
        c->synth = alloc_floats(c->n_synth);
        check_fill_random(&seed_state, c->synth, (long)c->n_synth, 1.0f);
        c->config.synth = c->synth;
        c->synthd = to_doubles(c->synth, c->n_synth);
    }
    c->n_param = c->n_synth > (size_t)d.NH ? c->n_synth : (size_t)d.NH;
    size_t n_random = attention_random_floats(c->cfg, &c->shape);
    if (n_random) {
        c->random = alloc_floats(n_random);
        attention_draw_random(c->cfg, &c->shape, 0, 0, c->random);
        c->rounds = c->cfg->kind == ATTENTION_LSH ? c->cfg->rounds : 1;
        c->rand_rows = (int)(n_random / ((size_t)d.NH * c->rounds * d.HS));
        c->Rd = to_doubles(c->random, n_random);
    }
    c->drop = (AttentionDropout){var->drop_p, 0xD20Bull + (uint64_t)d.T};
    c->qd = to_doubles(c->q, (size_t)d.T * c->C);
    c->doutd = to_doubles(c->dout, (size_t)d.T * c->C);
    c->kd = to_doubles(c->k, (size_t)d.T * c->KVD);
    c->vd = to_doubles(c->v, (size_t)d.T * c->KVD);
    c->sinkd = to_doubles(c->sink, (size_t)d.NH);
    c->visible = calloc((size_t)d.NH * d.T * d.T, 1);
    if (!c->visible) exit(1);
    make_visible(c);
    if (var->drop_p > 0.0f) {
        c->mask = alloc_doubles((size_t)d.NH * d.T * d.T);
        make_mask(c);
    }
    c->out_ref = alloc_doubles((size_t)d.T * c->C);
}

static void case_free(Case *c) {
    float *f[] = {c->q, c->k, c->v, c->dout, c->sink, c->random, c->synth};
    double *g[] = {c->qd, c->kd, c->vd, c->doutd, c->sinkd, c->Rd, c->mask, c->out_ref,
                   c->synthd};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) free(g[i]);
    free(c->visible);
}

/* ---- the float64 reference ---- */

static double ref_scale(const Case *c) {
    return c->cfg->unscaled ? 1.0 : (double)c->shape.scale / (double)c->cfg->tau;
}

static double elu1(double x) { return x > 0.0 ? x + 1.0 : exp(x); }

static double dot(const double *a, const double *b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* w . relu(x) over n */
static double relu_dot(const double *w, const double *x, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += w[i] * (x[i] > 0.0 ? x[i] : 0.0);
    return s;
}

/* A Synthesizer's logit of head h, query i (q_i its query), key j (§16): Random R[i][j];
 * factorized Random R1[i] . R2[j]; Dense W[j] . relu(q_i) + b[j]; factorized Dense
 * (WA[j mod a] . relu(q_i) + bA[j mod a]) (WB[j div a] . relu(q_i) + bB[j div a]). */
static double ref_synth_logit(const Case *c, int h, int i, int j, const double *q_i) {
    const AttentionConfig *cfg = c->cfg;
    int L = cfg->synth_len, F = cfg->factor, HS = c->d.HS;
    const double *P = c->synthd + (size_t)h * (c->n_synth / (size_t)c->d.NH);
    switch (cfg->kind) {
    case ATTENTION_SYNTH_RANDOM:
        return P[(long)i * L + j];
    case ATTENTION_SYNTH_FRANDOM:
        return dot(P + (long)i * F, P + (long)L * F + (long)j * F, F);
    case ATTENTION_SYNTH_DENSE:
        return relu_dot(P + (long)j * HS, q_i, HS) + P[(long)L * HS + j];
    default: {   /* fdense: WA (a, HS), bA (a,), WB (L / a, HS), bB (L / a,) */
        const double *WA = P, *bA = WA + (long)F * HS, *WB = bA + F, *bB = WB + (long)(L / F) * HS;
        int ja = j % F, jb = j / F;
        return (relu_dot(WA + (long)ja * HS, q_i, HS) + bA[ja]) *
               (relu_dot(WB + (long)jb * HS, q_i, HS) + bB[jb]);
    }
    }
}

/* out (T, C): the variant over the sequence, straight from its formula. */
static void ref_forward(const Case *c, double *out) {
    const AttentionConfig *cfg = c->cfg;
    int T = c->d.T, NH = c->d.NH, HS = c->d.HS, group = NH / c->d.NKV;
    double scale = ref_scale(c);
    double w[64], phi_q[64], phi_k[64], num[64];
    memset(out, 0, sizeof(double) * (size_t)T * c->C);
    for (int h = 0; h < NH; h++) {
        int g = h / group;
        for (int i = 0; i < T; i++) {
            const double *q_i = c->qd + ((long)i * NH + h) * HS;
            double *o = out + ((long)i * NH + h) * HS;
            if (is_softmax_kind(cfg->kind)) {
                /* softmax over the visible keys plus the sink's virtual key (score b, value 0) */
                int has_sink = cfg->softmax1 || cfg->sink_logit;
                double b = cfg->sink_logit ? c->sinkd[h] : 0.0;
                double mx = has_sink ? b : -(double)INFINITY;
                for (int j = 0; j <= i; j++) {
                    const double *k_j = c->kd + ((long)j * c->d.NKV + g) * HS;
                    w[j] = attention_is_synth(cfg->kind) ? ref_synth_logit(c, h, i, j, q_i)
                                                         : scale * dot(q_i, k_j, HS);
                    if (cfg->kind == ATTENTION_GAUSS) w[j] -= 0.5 * scale * dot(k_j, k_j, HS);
                    if (c->visible[((long)h * T + i) * T + j] && w[j] > mx) mx = w[j];
                }
                double Z = has_sink ? exp(b - mx) : 0.0;
                for (int j = 0; j <= i; j++)
                    Z += c->visible[((long)h * T + i) * T + j] ? exp(w[j] - mx) : 0.0;
                for (int j = 0; j <= i; j++) {
                    if (!c->visible[((long)h * T + i) * T + j]) continue;
                    double p = exp(w[j] - mx) / Z;
                    if (c->mask) p *= c->mask[((long)h * T + i) * T + j];
                    const double *v_j = c->vd + ((long)j * c->d.NKV + g) * HS;
                    for (int e = 0; e < HS; e++) o[e] += p * v_j[e];
                }
            } else if (cfg->kind == ATTENTION_LINEAR) {
                double pre = cfg->prescale ? sqrt(scale) : 1.0, den = 0.0;
                for (int e = 0; e < HS; e++) phi_q[e] = elu1(q_i[e] * pre);
                for (int e = 0; e < HS; e++) num[e] = 0.0;
                for (int j = 0; j <= i; j++) {
                    const double *k_j = c->kd + ((long)j * c->d.NKV + g) * HS;
                    const double *v_j = c->vd + ((long)j * c->d.NKV + g) * HS;
                    for (int e = 0; e < HS; e++) phi_k[e] = elu1(k_j[e] * pre);
                    double a = dot(phi_q, phi_k, HS);
                    den += a;
                    for (int e = 0; e < HS; e++) num[e] += a * v_j[e];
                }
                if (cfg->norm) {   /* num / sqrt(mean(num^2) + eps) */
                    double r = sqrt(dot(num, num, HS) / HS + (double)ATTENTION_NORM_EPS);
                    for (int e = 0; e < HS; e++) o[e] = num[e] / r;
                } else {
                    for (int e = 0; e < HS; e++)
                        o[e] = num[e] / (den + (double)ATTENTION_LINEAR_EPS);
                }
            } else if (cfg->kind == ATTENTION_EFFICIENT) {
                /* sum_c softmax(q)_c sum_j softmax_j(k_jc over j <= i) v_j */
                double qmax = -HUGE_VAL, qsum = 0.0;
                for (int e = 0; e < HS; e++) if (q_i[e] > qmax) qmax = q_i[e];
                for (int e = 0; e < HS; e++) qsum += exp(q_i[e] - qmax);
                for (int f = 0; f < HS; f++) {
                    double pf = exp(q_i[f] - qmax) / qsum, kmax = -HUGE_VAL, Z = 0.0;
                    for (int j = 0; j <= i; j++) {
                        double kj = c->kd[((long)j * c->d.NKV + g) * HS + f];
                        if (kj > kmax) kmax = kj;
                    }
                    for (int j = 0; j <= i; j++)
                        Z += exp(c->kd[((long)j * c->d.NKV + g) * HS + f] - kmax);
                    for (int j = 0; j <= i; j++) {
                        double a = exp(c->kd[((long)j * c->d.NKV + g) * HS + f] - kmax) / Z;
                        const double *v_j = c->vd + ((long)j * c->d.NKV + g) * HS;
                        for (int e = 0; e < HS; e++) o[e] += pf * a * v_j[e];
                    }
                }
            } else {   /* performer: phi_f(x) = exp(s w_f . x - s^2 |x|^2 / 2) (§6) */
                int m = cfg->features;
                double s = sqrt(scale), den = 0.0;
                const double *W = c->Rd + (long)h * m * HS;
                double fq[64];
                for (int f = 0; f < m; f++)
                    fq[f] = exp(s * dot(W + (long)f * HS, q_i, HS) -
                                0.5 * s * s * dot(q_i, q_i, HS));
                for (int e = 0; e < HS; e++) num[e] = 0.0;
                for (int j = 0; j <= i; j++) {
                    const double *k_j = c->kd + ((long)j * c->d.NKV + g) * HS;
                    const double *v_j = c->vd + ((long)j * c->d.NKV + g) * HS;
                    double a = 0.0;
                    for (int f = 0; f < m; f++)
                        a += fq[f] * exp(s * dot(W + (long)f * HS, k_j, HS) -
                                         0.5 * s * s * dot(k_j, k_j, HS));
                    den += a;
                    for (int e = 0; e < HS; e++) num[e] += a * v_j[e];
                }
                for (int e = 0; e < HS; e++) o[e] = num[e] / den;
            }
        }
    }
}

/* sum over (t, c) of dout . out */
static double ref_loss(Case *c) {
    ref_forward(c, c->out_ref);
    return dot(c->out_ref, c->doutd, c->d.T * c->C);
}

/* ---- running the code under test ---- */

static float *g_scratch;
static size_t g_scratch_floats;

static float *scratch_for(size_t n) {
    if (n > g_scratch_floats) {
        free(g_scratch);
        g_scratch = alloc_floats(n);
        g_scratch_floats = n;
    }
    for (size_t i = 0; i < n; i++) g_scratch[i] = NAN;
    return g_scratch;
}

static int train_forward(const Case *c, float *out) {
    float *scratch = scratch_for(attention_train_scratch_floats(c->cfg, &c->shape, c->d.T));
    for (long i = 0; i < (long)c->d.T * c->C; i++) out[i] = NAN;
    return attention_train_forward(c->cfg, &c->shape, c->random, &c->drop, out, c->q, c->k,
                                   c->v, c->d.T, scratch);
}

static int train_backward(const Case *c, float *dq, float *dk, float *dv, float *dsink) {
    float *scratch = scratch_for(attention_train_scratch_floats(c->cfg, &c->shape, c->d.T));
    memset(dq, 0, sizeof(float) * (size_t)c->d.T * c->C);
    memset(dk, 0, sizeof(float) * (size_t)c->d.T * c->KVD);
    memset(dv, 0, sizeof(float) * (size_t)c->d.T * c->KVD);
    memset(dsink, 0, sizeof(float) * c->n_param);
    return attention_train_backward(c->cfg, &c->shape, c->random, &c->drop, dq, dk, dv, dsink,
                                    c->dout, c->q, c->k, c->v, c->d.T, scratch);
}

/* attention_step over the T positions from a fresh state of layer 0 (its random matrices
 * are draw 0), in one call or (one_by_one) a position a call. Returns 0, or -1. */
static int step_forward(const Case *c, float *out, int one_by_one) {
    size_t bytes = attention_state_bytes(c->cfg, &c->shape, c->d.T);
    size_t floats = attention_step_scratch_floats(c->cfg, &c->shape, c->d.T);
    void *state = bytes ? malloc(bytes) : NULL;
    float *scratch = floats ? alloc_floats(floats) : NULL;
    int status = -1;
    if (state && scratch && attention_state_init(c->cfg, &c->shape, c->d.T, 0, state) == 0)
        status = attention_step(c->cfg, &c->shape, state, c->d.T, out, c->q, c->k, c->v, 0,
                                one_by_one ? 1 : c->d.T, scratch);
    for (int t = 1; one_by_one && status == 0 && t < c->d.T; t++)   /* decoding, a token a step */
        status = attention_step(c->cfg, &c->shape, state, c->d.T, out + (size_t)t * c->C,
                                c->q + (size_t)t * c->C, c->k + (size_t)t * c->KVD,
                                c->v + (size_t)t * c->KVD, t, 1, scratch);
    free(state);
    free(scratch);
    return status;
}

/* Central differences of ref_loss in each of (at most FD_MAX_POINTS, evenly strided) of the
 * n entries of x, against the analytic gradient got (n,). */
static int check_fd(Case *c, const char *what, double *x, size_t n, const float *got) {
    size_t stride = n > FD_MAX_POINTS ? (n + FD_MAX_POINTS - 1) / FD_MAX_POINTS : 1;
    size_t count = 0;
    static float got_s[FD_MAX_POINTS];
    static double want[FD_MAX_POINTS];
    for (size_t i = 0; i < n; i += stride) {
        double x0 = x[i];
        x[i] = x0 + FD_STEP;
        double up = ref_loss(c);
        x[i] = x0 - FD_STEP;
        double down = ref_loss(c);
        x[i] = x0;
        want[count] = (up - down) / (2.0 * FD_STEP);
        got_s[count++] = got[i];
    }
    return check_close_f64(what, got_s, want, count, GRAD_ATOL, GRAD_RTOL);
}

/* (a), (b) and (d) for one variant at one shape. */
static void test_case(const Variant *var, Dims d) {
    Case c;
    case_init(&c, var, d);
    char what[160];
    size_t n_out = (size_t)d.T * c.C, n_kv = (size_t)d.T * c.KVD;
    float *out = alloc_floats(n_out), *step = alloc_floats(n_out);
    float *dq = alloc_floats(n_out), *dk = alloc_floats(n_kv), *dv = alloc_floats(n_kv);
    float *dsink = alloc_floats(c.n_param);
    double *want = alloc_doubles(n_out);
    snprintf(what, sizeof what, "%s T=%d NH=%d NKV=%d HS=%d", var->name, d.T, d.NH, d.NKV,
             d.HS);
    char label[200];
    if (d.T == 13) {   /* the case tests what it says: a pattern hides keys, dropout drops */
        long hidden = 0, dropped = 0;
        for (long n = 0; n < (long)d.NH * d.T * d.T; n++) {
            int i = (int)(n / d.T % d.T), j = (int)(n % d.T);
            hidden += j <= i && !c.visible[n];
            dropped += j <= i && c.mask && c.mask[n] == 0.0;
        }
        int masked = var->cfg.kind != ATTENTION_EXACT && var->cfg.kind != ATTENTION_GAUSS &&
                     is_softmax_kind(var->cfg.kind) && !attention_is_synth(var->cfg.kind) &&
                     !(var->cfg.kind == ATTENTION_LSH && var->cfg.buckets == 1);
        check_true((hidden > 0) == masked && (dropped > 0) == (var->drop_p > 0.0f),
                   "train %s: %ld of the causal keys hidden, %ld weights dropped", what, hidden,
                   dropped);
    }
    int fwd = train_forward(&c, out);
    int bwd = train_backward(&c, dq, dk, dv, dsink);
    if (!check_true(fwd == 0 && bwd == 0, "train %s: forward and backward return 0", what))
        goto done;
    /* (a) the decode path over the same positions (no dropout there) */
    if (var->drop_p == 0.0f) {
        snprintf(label, sizeof label, "train %s: forward == attention_step", what);
        if (check_true(step_forward(&c, step, 0) == 0, "train %s: attention_step runs", what))
            check_close(label, out, step, n_out, 1e-6, 1e-6);
        float *single = alloc_floats(n_out);
        check_true(step_forward(&c, single, 1) == 0 &&
                   memcmp(single, step, n_out * sizeof(float)) == 0,
                   "train %s: attention_step a position at a time == all at once, bit for bit",
                   what);
        free(single);
    }
    /* (b) the float64 reference, and its differences */
    ref_forward(&c, want);
    snprintf(label, sizeof label, "train %s: forward == float64 reference", what);
    check_close_f64(label, out, want, n_out, FWD_ATOL, FWD_RTOL);
    snprintf(label, sizeof label, "train %s: dq == differences", what);
    check_fd(&c, label, c.qd, n_out, dq);
    snprintf(label, sizeof label, "train %s: dk == differences", what);
    check_fd(&c, label, c.kd, n_kv, dk);
    snprintf(label, sizeof label, "train %s: dv == differences", what);
    check_fd(&c, label, c.vd, n_kv, dv);
    if (var->cfg.sink_logit) {
        snprintf(label, sizeof label, "train %s: dsink == differences", what);
        check_fd(&c, label, c.sinkd, (size_t)d.NH, dsink);
    }
    if (c.synth) {
        snprintf(label, sizeof label, "train %s: dsynth == differences", what);
        check_fd(&c, label, c.synthd, c.n_synth, dsink);
    }
done:
    free(out); free(step); free(dq); free(dk); free(dv); free(dsink); free(want);
    case_free(&c);
}

/* ---- the variants ---- */

static AttentionConfig config(AttentionKind kind) {
    AttentionConfig cfg;
    attention_config_default(&cfg);
    cfg.kind = kind;
    return cfg;
}

enum { MAX_VARIANTS = 48 };
static Variant variants[MAX_VARIANTS];
static int n_variants;

static AttentionConfig *add(const char *name, AttentionKind kind, float drop_p) {
    Variant *v = &variants[n_variants++];
    v->name = name;
    v->cfg = config(kind);
    v->drop_p = drop_p;
    return &v->cfg;
}

static void make_variants(void) {
    AttentionConfig *c;
    add("exact", ATTENTION_EXACT, 0.0f);
    add("exact dropout", ATTENTION_EXACT, 0.3f);
    c = add("exact tau", ATTENTION_EXACT, 0.0f); c->tau = 0.7f;
    c = add("exact unscaled", ATTENTION_EXACT, 0.0f); c->unscaled = 1;
    c = add("exact softmax1", ATTENTION_EXACT, 0.0f); c->softmax1 = 1;
    c = add("exact sinklogit", ATTENTION_EXACT, 0.0f); c->sink_logit = 1;
    c = add("exact sinklogit dropout", ATTENTION_EXACT, 0.3f); c->sink_logit = 1;
    c = add("exact softmax1 tau dropout", ATTENTION_EXACT, 0.25f); c->softmax1 = 1; c->tau = 1.3f;
    add("gauss", ATTENTION_GAUSS, 0.0f);
    c = add("gauss sinklogit dropout", ATTENTION_GAUSS, 0.2f); c->sink_logit = 1;
    c = add("window w=3", ATTENTION_WINDOW, 0.0f); c->window = 3;
    c = add("window w=3 sinks=2", ATTENTION_WINDOW, 0.0f); c->window = 3; c->sinks = 2;
    c = add("window w=4 sinklogit", ATTENTION_WINDOW, 0.0f); c->window = 4; c->sink_logit = 1;
    c = add("window w=2 sinks=1 sinklogit dropout", ATTENTION_WINDOW, 0.3f);
    c->window = 2; c->sinks = 1; c->sink_logit = 1;
    c = add("window w=2 sinks=1 softmax1", ATTENTION_WINDOW, 0.0f);
    c->window = 2; c->sinks = 1; c->softmax1 = 1;
    c = add("dilated w=3 k=2 sinks=1", ATTENTION_DILATED, 0.0f);
    c->window = 3; c->dilation = 2; c->sinks = 1;
    c = add("dilated w=2 k=3 sinklogit dropout", ATTENTION_DILATED, 0.2f);
    c->window = 2; c->dilation = 3; c->sink_logit = 1;
    c = add("strided l=4", ATTENTION_STRIDED, 0.0f); c->stride = 4;
    c = add("strided l=3 sinklogit dropout", ATTENTION_STRIDED, 0.3f);
    c->stride = 3; c->sink_logit = 1;
    c = add("fixed l=4 c=1", ATTENTION_FIXED, 0.0f); c->stride = 4; c->summary = 1;
    c = add("fixed l=5 c=2 softmax1", ATTENTION_FIXED, 0.0f);
    c->stride = 5; c->summary = 2; c->softmax1 = 1;
    c = add("lsh nb=1", ATTENTION_LSH, 0.0f); c->buckets = 1; c->rounds = 1; c->local = 1;
    c->sinks = 0;
    c = add("lsh nb=2 r=1 local=1", ATTENTION_LSH, 0.0f); c->buckets = 2; c->rounds = 1;
    c->local = 1; c->sinks = 0;
    c = add("lsh nb=4 r=2 local=2 sinks=1", ATTENTION_LSH, 0.0f); c->buckets = 4; c->rounds = 2;
    c->local = 2; c->sinks = 1;
    c = add("lsh nb=4 r=1 local=0 sinklogit dropout", ATTENTION_LSH, 0.3f); c->buckets = 4;
    c->rounds = 1; c->local = 0; c->sinks = 0; c->sink_logit = 1;
    c = add("lsh nb=2 r=2 softmax1", ATTENTION_LSH, 0.0f); c->buckets = 2; c->rounds = 2;
    c->local = 1; c->sinks = 0; c->softmax1 = 1;
    add("linear", ATTENTION_LINEAR, 0.0f);
    c = add("linear prescale", ATTENTION_LINEAR, 0.0f); c->prescale = 1;
    c = add("linear norm", ATTENTION_LINEAR, 0.0f); c->norm = 1;
    c = add("linear norm prescale tau", ATTENTION_LINEAR, 0.0f); c->norm = 1; c->prescale = 1;
    c->tau = 0.8f;
    add("efficient", ATTENTION_EFFICIENT, 0.0f);
    c = add("performer m=4", ATTENTION_PERFORMER, 0.0f); c->features = 4;
    c = add("performer m=7 iid tau", ATTENTION_PERFORMER, 0.0f); c->features = 7;
    c->orthogonal = 0; c->tau = 1.5f;
    add("synth-random", ATTENTION_SYNTH_RANDOM, 0.0f);
    add("synth-random dropout", ATTENTION_SYNTH_RANDOM, 0.3f);
    add("synth-dense", ATTENTION_SYNTH_DENSE, 0.0f);
    add("synth-dense dropout", ATTENTION_SYNTH_DENSE, 0.2f);
    c = add("synth-frandom rank=3", ATTENTION_SYNTH_FRANDOM, 0.0f); c->factor = 3;
    c = add("synth-fdense a=4", ATTENTION_SYNTH_FDENSE, 0.0f); c->factor = 4;
    c = add("synth-fdense a=2 dropout", ATTENTION_SYNTH_FDENSE, 0.3f); c->factor = 2;
}

static void test_every_variant(void) {
    static const Dims shapes[] = {{3, 1, 3, 1}, {2, 2, 8, 5}, {3, 1, 5, 13}, {2, 2, 4, 13}};
    for (int i = 0; i < n_variants; i++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            test_case(&variants[i], shapes[s]);
}

/* ---- (c) the same bits for any thread count ---- */

/* Two sequences of one case, forward and backward each, for running inside jobs. */
typedef struct {
    Case c[2];
    float *out[2], *dq[2], *dk[2], *dv[2], *dsink[2], *scratch[2];
    int status;
} ThreadCase;

static void thread_sequence(void *ctx, int s) {
    ThreadCase *tc = ctx;
    const Case *c = &tc->c[s];
    size_t n_out = (size_t)c->d.T * c->C, n_kv = (size_t)c->d.T * c->KVD;
    memset(tc->dq[s], 0, n_out * sizeof(float));
    memset(tc->dk[s], 0, n_kv * sizeof(float));
    memset(tc->dv[s], 0, n_kv * sizeof(float));
    memset(tc->dsink[s], 0, c->n_param * sizeof(float));
    if (attention_train_forward(c->cfg, &c->shape, c->random, &c->drop, tc->out[s], c->q, c->k,
                                c->v, c->d.T, tc->scratch[s]) != 0 ||
        attention_train_backward(c->cfg, &c->shape, c->random, &c->drop, tc->dq[s], tc->dk[s],
                                 tc->dv[s], tc->dsink[s], c->dout, c->q, c->k, c->v, c->d.T,
                                 tc->scratch[s]) != 0) tc->status = -1;
}

static void thread_both(void *ctx) {
    thread_sequence(ctx, 0);
    thread_sequence(ctx, 1);
}

static void thread_in_jobs(void *ctx) { kernels_parallel_for(thread_sequence, ctx, 2, 1e9); }

/* Every output of both sequences, concatenated into sum (for comparing runs). */
static size_t thread_results(const ThreadCase *tc, float *all) {
    size_t n = 0;
    for (int s = 0; s < 2; s++) {
        const Case *c = &tc->c[s];
        size_t n_out = (size_t)c->d.T * c->C, n_kv = (size_t)c->d.T * c->KVD;
        const float *parts[] = {tc->out[s], tc->dq[s], tc->dk[s], tc->dv[s], tc->dsink[s]};
        size_t sizes[] = {n_out, n_out, n_kv, n_kv, c->n_param};
        for (int p = 0; p < 5; p++) {
            if (all) memcpy(all + n, parts[p], sizes[p] * sizeof(float));
            n += sizes[p];
        }
    }
    return n;
}

/* (c): a larger case (enough work for kernels_parallel_for to share out the kv heads) on
 * 1 thread, then on 2 outside kernels_run, on its pool, and inside a pool job. */
static void test_threads(const Variant *var) {
    static ThreadCase tc;
    Dims d = {4, 2, 16, 64};
    memset(&tc, 0, sizeof tc);
    for (int s = 0; s < 2; s++) {
        case_init(&tc.c[s], var, d);
        size_t n_out = (size_t)d.T * tc.c[s].C, n_kv = (size_t)d.T * tc.c[s].KVD;
        tc.out[s] = alloc_floats(n_out);
        tc.dq[s] = alloc_floats(n_out);
        tc.dk[s] = alloc_floats(n_kv);
        tc.dv[s] = alloc_floats(n_kv);
        tc.dsink[s] = alloc_floats(tc.c[s].n_param);
        tc.scratch[s] = alloc_floats(attention_train_scratch_floats(tc.c[s].cfg,
                                                                    &tc.c[s].shape, d.T));
    }
    size_t n = thread_results(&tc, NULL);
    float *one = alloc_floats(n), *other = alloc_floats(n);
    kernels_set_threads(1);
    thread_both(&tc);
    thread_results(&tc, one);
    kernels_set_threads(2);
    thread_both(&tc);
    thread_results(&tc, other);
    int outside = memcmp(one, other, n * sizeof(float)) == 0;
    kernels_run(thread_both, &tc);
    thread_results(&tc, other);
    int pool = memcmp(one, other, n * sizeof(float)) == 0;
    kernels_run(thread_in_jobs, &tc);
    thread_results(&tc, other);
    int in_job = memcmp(one, other, n * sizeof(float)) == 0;
    kernels_set_threads(1);
    check_true(tc.status == 0 && outside && pool && in_job,
               "train %s: 1 vs 2 threads bitwise identical (outside kernels_run %d, on the pool "
               "%d, inside a job %d)", var->name, outside, pool, in_job);
    free(one);
    free(other);
    for (int s = 0; s < 2; s++) {
        free(tc.out[s]); free(tc.dq[s]); free(tc.dk[s]); free(tc.dv[s]); free(tc.dsink[s]);
        free(tc.scratch[s]);
        case_free(&tc.c[s]);
    }
}

/* ---- (e) what is refused ---- */

static void test_invalid(void) {
    enum { NH = 2, HS = 4, T = 5 };
    AttentionShape shape = {NH, 1, HS, 0.5f};
    float q[T * NH * HS], k[T * HS], v[T * HS], out[T * NH * HS], scratch[4096];
    float dq[T * NH * HS], dk[T * HS], dv[T * HS], dsink[NH], random[4096];
    uint64_t seed = 99;
    check_fill_random(&seed, q, T * NH * HS, 1.0f);
    check_fill_random(&seed, k, T * HS, 1.0f);
    check_fill_random(&seed, v, T * HS, 1.0f);
    AttentionDropout none = {0.0f, 1}, half = {0.5f, 1}, one = {1.0f, 1}, negative = {-0.1f, 1};
    struct {
        const char *what;
        AttentionConfig cfg;
        const AttentionDropout *drop;
        int T, no_random;
    } bad[14];
    int n = 0;
    bad[n].what = "T = 0"; bad[n].cfg = config(ATTENTION_EXACT); bad[n].drop = NULL;
    bad[n].T = 0; bad[n++].no_random = 0;
    bad[n].what = "window w=0"; bad[n].cfg = config(ATTENTION_WINDOW); bad[n].cfg.window = 0;
    bad[n].drop = NULL; bad[n].T = T; bad[n++].no_random = 0;
    bad[n].what = "linear with dropout 0.5"; bad[n].cfg = config(ATTENTION_LINEAR);
    bad[n].drop = &half; bad[n].T = T; bad[n++].no_random = 0;
    bad[n].what = "performer with dropout 0.5"; bad[n].cfg = config(ATTENTION_PERFORMER);
    bad[n].cfg.features = 4; bad[n].drop = &half; bad[n].T = T; bad[n++].no_random = 0;
    bad[n].what = "performer without its random matrix"; bad[n].cfg = config(ATTENTION_PERFORMER);
    bad[n].cfg.features = 4; bad[n].drop = &none; bad[n].T = T; bad[n++].no_random = 1;
    bad[n].what = "lsh nb=2 without its random matrix"; bad[n].cfg = config(ATTENTION_LSH);
    bad[n].cfg.buckets = 2; bad[n].drop = NULL; bad[n].T = T; bad[n++].no_random = 1;
    bad[n].what = "exact with dropout 1"; bad[n].cfg = config(ATTENTION_EXACT);
    bad[n].drop = &one; bad[n].T = T; bad[n++].no_random = 0;
    bad[n].what = "exact with dropout -0.1"; bad[n].cfg = config(ATTENTION_EXACT);
    bad[n].drop = &negative; bad[n].T = T; bad[n++].no_random = 0;
    bad[n].what = "sinklogit with softmax1"; bad[n].cfg = config(ATTENTION_WINDOW);
    bad[n].cfg.sink_logit = 1; bad[n].cfg.softmax1 = 1; bad[n].drop = NULL; bad[n].T = T;
    bad[n++].no_random = 0;
    bad[n].what = "sinklogit with linear"; bad[n].cfg = config(ATTENTION_LINEAR);
    bad[n].cfg.sink_logit = 1; bad[n].drop = NULL; bad[n].T = T; bad[n++].no_random = 0;
    /* a Synthesizer without its parameters, with too few positions, a factor not dividing
     * them, a sink logit */
    bad[n].what = "synth-dense without its parameters"; bad[n].cfg = config(ATTENTION_SYNTH_DENSE);
    bad[n].cfg.synth_len = T; bad[n].drop = NULL; bad[n].T = T; bad[n++].no_random = 0;
    bad[n].what = "synth-random over more positions than its parameters";
    bad[n].cfg = config(ATTENTION_SYNTH_RANDOM); bad[n].cfg.synth_len = T - 1;
    bad[n].cfg.synth = random; bad[n].drop = NULL; bad[n].T = T; bad[n++].no_random = 0;
    bad[n].what = "synth-fdense a=2 over 5 positions"; bad[n].cfg = config(ATTENTION_SYNTH_FDENSE);
    bad[n].cfg.factor = 2; bad[n].cfg.synth_len = T; bad[n].cfg.synth = random;
    bad[n].drop = NULL; bad[n].T = T; bad[n++].no_random = 0;
    bad[n].what = "synth-random with a sink logit"; bad[n].cfg = config(ATTENTION_SYNTH_RANDOM);
    bad[n].cfg.synth_len = T; bad[n].cfg.synth = random; bad[n].cfg.sink_logit = 1;
    bad[n].drop = NULL; bad[n].T = T; bad[n++].no_random = 0;
    for (int i = 0; i < n; i++) {
        const AttentionConfig *cfg = &bad[i].cfg;
        size_t n_random = attention_random_floats(cfg, &shape);
        const float *R = NULL;
        if (n_random > 0 && n_random <= 4096 && !bad[i].no_random &&
            attention_draw_random(cfg, &shape, 0, 0, random) == 0) R = random;
        for (int j = 0; j < T * NH * HS; j++) out[j] = NAN;
        int forward = attention_train_forward(cfg, &shape, R, bad[i].drop, out, q, k, v,
                                              bad[i].T, scratch);
        int untouched = 1;
        for (int j = 0; j < T * NH * HS; j++) untouched &= isnan(out[j]) != 0;
        for (int j = 0; j < T * NH * HS; j++) dq[j] = NAN;
        for (int j = 0; j < T * HS; j++) dk[j] = dv[j] = NAN;
        for (int j = 0; j < NH; j++) dsink[j] = NAN;
        int backward = attention_train_backward(cfg, &shape, R, bad[i].drop, dq, dk, dv, dsink,
                                                out, q, k, v, bad[i].T, scratch);
        for (int j = 0; j < T * NH * HS; j++) untouched &= isnan(dq[j]) != 0;
        for (int j = 0; j < T * HS; j++) untouched &= isnan(dk[j]) && isnan(dv[j]);
        for (int j = 0; j < NH; j++) untouched &= isnan(dsink[j]) != 0;
        check_true(forward == -1 && backward == -1 && untouched,
                   "train refuses %s: -1 from the forward and the backward, nothing written",
                   bad[i].what);
    }
    /* a Synthesizer's backward without dparam, where its gradient goes: refused */
    AttentionConfig synth = config(ATTENTION_SYNTH_RANDOM);
    synth.synth_len = T;
    synth.synth = random;
    for (int j = 0; j < T * NH * HS; j++) dq[j] = NAN;
    int refused = attention_train_backward(&synth, &shape, NULL, NULL, dq, dk, dv, NULL, out, q,
                                           k, v, T, scratch) == -1;
    int dq_untouched = 1;
    for (int j = 0; j < T * NH * HS; j++) dq_untouched &= isnan(dq[j]) != 0;
    check_true(refused && dq_untouched, "train refuses synth-random's backward without dparam: "
               "-1, nothing written");
    /* options the decode path refuses too, and the sizes of what has no size */
    AttentionConfig cfg = config(ATTENTION_EXACT);
    cfg.norm = 1;
    int norm_refused = attention_state_bytes(&cfg, &shape, T) == 0 &&
                       attention_train_scratch_floats(&cfg, &shape, T) == 0;
    cfg = config(ATTENTION_EXACT);
    cfg.sink_logit = 1;
    cfg.softmax1 = 1;
    int both_refused = attention_state_bytes(&cfg, &shape, T) == 0;
    cfg = config(ATTENTION_PERFORMER);
    cfg.sink_logit = 1;
    int kernel_refused = attention_state_bytes(&cfg, &shape, T) == 0;
    cfg = config(ATTENTION_EXACT);
    int no_random = attention_random_floats(&cfg, &shape) == 0 &&
                    attention_draw_random(&cfg, &shape, 0, 0, random) == -1 &&
                    attention_train_scratch_floats(&cfg, &shape, 0) == 0;
    check_true(norm_refused && both_refused && kernel_refused && no_random,
               "refused: norm on exact (%d), sinklogit with softmax1 (%d), sinklogit on "
               "performer (%d); exact has no random matrices (%d)", norm_refused, both_refused,
               kernel_refused, no_random);
    /* a Synthesizer decodes only with its parameters, over at most the positions they
     * cover; softmax1 and a sink logit are refused by the spec's check too */
    cfg = config(ATTENTION_SYNTH_DENSE);
    cfg.synth_len = T;
    size_t bytes = attention_state_bytes(&cfg, &shape, T);
    static unsigned char state[1 << 16];
    int step_refused = bytes > 0 && bytes <= sizeof state &&
                       attention_state_init(&cfg, &shape, T, 0, state) == 0 &&
                       attention_step(&cfg, &shape, state, T, out, q, k, v, 0, 1, scratch) == -1;
    int longer_refused = attention_state_bytes(&cfg, &shape, T + 1) == 0;
    char problem[128] = "";
    cfg.softmax1 = 1;
    int checked = attention_config_check(&cfg, problem, sizeof problem) == -1 &&
                  strstr(problem, "softmax1") != NULL;
    check_true(step_refused && longer_refused && checked,
               "refused: synth-dense steps without its parameters (%d), over more positions "
               "than they cover (%d), with softmax1 (%d: '%s')", step_refused, longer_refused,
               checked, problem);
    /* tau and unscaled only where lab/attention_spec.c's names take them: a checkpoint's
     * attention meets attention_config_check alone (linear took tau=2 into its prescale) */
    static const struct { AttentionKind kind; int unscaled; float tau; int ok; } rules[] = {
        {ATTENTION_EXACT, 0, 2.0f, 1}, {ATTENTION_WINDOW, 0, 2.0f, 1},
        {ATTENTION_PERFORMER, 0, 2.0f, 1}, {ATTENTION_EXACT, 1, 1.0f, 1},
        {ATTENTION_LINEAR, 0, 2.0f, 0}, {ATTENTION_EFFICIENT, 0, 2.0f, 0},
        {ATTENTION_SYNTH_RANDOM, 0, 2.0f, 0}, {ATTENTION_EXACT, 1, 2.0f, 0},
        {ATTENTION_LINEAR, 1, 1.0f, 0}, {ATTENTION_GAUSS, 1, 1.0f, 0}};
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        cfg = config(rules[i].kind);
        cfg.unscaled = rules[i].unscaled;
        cfg.tau = rules[i].tau;
        problem[0] = '\0';
        int status = attention_config_check(&cfg, problem, sizeof problem);
        check_true(status == (rules[i].ok ? 0 : -1), "%s with unscaled=%d tau=%g: %s (got "
                   "'%s')", attention_kind_name(rules[i].kind), rules[i].unscaled,
                   (double)rules[i].tau, rules[i].ok ? "accepted" : "refused", problem);
    }
}

/* ---- attention_draw_random ---- */

/* Draw 0 of layer 1 is what attention_state_init puts in layer 1's state; other draws
 * differ; the same draw twice is the same. */
static void test_draws(void) {
    AttentionShape shape = {3, 1, 5, 0.5f};
    AttentionConfig lsh = config(ATTENTION_LSH), performer = config(ATTENTION_PERFORMER);
    lsh.buckets = 6;
    lsh.rounds = 2;
    performer.features = 7;
    const AttentionConfig *cfgs[2] = {&lsh, &performer};
    for (int i = 0; i < 2; i++) {
        const AttentionConfig *cfg = cfgs[i];
        size_t n = attention_random_floats(cfg, &shape);
        size_t bytes = attention_state_bytes(cfg, &shape, 8);
        float *d0 = alloc_floats(n), *d0b = alloc_floats(n), *d1 = alloc_floats(n);
        void *state = malloc(bytes);
        int ok = state && attention_state_init(cfg, &shape, 8, 1, state) == 0 &&
                 attention_draw_random(cfg, &shape, 1, 0, d0) == 0 &&
                 attention_draw_random(cfg, &shape, 1, 0, d0b) == 0 &&
                 attention_draw_random(cfg, &shape, 1, 1, d1) == 0;
        int same_as_state = ok, rounds = cfg->kind == ATTENTION_LSH ? cfg->rounds : 1;
        size_t at = 0;
        for (int h = 0; ok && h < shape.n_heads; h++) {
            for (int r = 0; r < rounds; r++) {
                int rows = 0;
                float *m = attention_state_random(cfg, &shape, 8, state, h, r, &rows);
                size_t floats = (size_t)rows * shape.head_dim;
                same_as_state &= m && memcmp(m, d0 + at, floats * sizeof(float)) == 0;
                at += floats;
            }
        }
        check_true(ok && same_as_state && at == n && memcmp(d0, d0b, n * sizeof(float)) == 0 &&
                   memcmp(d0, d1, n * sizeof(float)) != 0,
                   "attention_draw_random %s: draw 0 is the state's matrices, bitwise; draw 1 "
                   "differs; a draw repeats", attention_kind_name(cfg->kind));
        free(d0); free(d0b); free(d1); free(state);
    }
}

/* Performer's backward where a query has no output: a query of 1e20 overflows |q s|^2, its
 * features' logits are -inf and its denominator not a number, so its output is 0
 * (read_out's rule); it gets no gradient and gives the keys none. dq, dk and dv are finite
 * and equal to those of the same sequence with an ordinary query there and a dout of 0 at
 * its position (whose terms in the sums are then zeros). */
static void test_performer_no_output(void) {
    enum { T = 3, HS = 4, AT = 1 };
    AttentionShape shape = {1, 1, HS, 0.5f};
    AttentionConfig cfg = config(ATTENTION_PERFORMER);
    cfg.features = 8;
    size_t n_random = attention_random_floats(&cfg, &shape);
    size_t n_scratch = attention_train_scratch_floats(&cfg, &shape, T);
    float *random = alloc_floats(n_random), *scratch = alloc_floats(n_scratch);
    float q[T * HS], k[T * HS], v[T * HS], dout[T * HS], g[2][3][T * HS];
    check_fill_random(&seed_state, q, T * HS, 1.0f);
    check_fill_random(&seed_state, k, T * HS, 1.0f);
    check_fill_random(&seed_state, v, T * HS, 1.0f);
    check_fill_random(&seed_state, dout, T * HS, 1.0f);
    int ok = attention_draw_random(&cfg, &shape, 0, 0, random) == 0;
    for (int run = 0; run < 2; run++) {
        if (run == 0) {   /* the query of 1e20 */
            for (int i = 0; i < HS; i++) q[AT * HS + i] = i == 0 ? 1e20f : 0.0f;
        } else {          /* an ordinary query there, its dout 0 */
            for (int i = 0; i < HS; i++) q[AT * HS + i] = 0.25f;
            for (int i = 0; i < HS; i++) dout[AT * HS + i] = 0.0f;
        }
        memset(g[run], 0, sizeof g[run]);
        ok &= attention_train_backward(&cfg, &shape, random, NULL, g[run][0], g[run][1],
                                       g[run][2], NULL, dout, q, k, v, T, scratch) == 0;
    }
    int finite = 1, same = 1;
    for (int w = 0; w < 3; w++)
        for (int i = 0; i < T * HS; i++) {
            finite &= isfinite(g[0][w][i]) != 0;
            same &= g[0][w][i] == g[1][w][i];
        }
    check_true(ok && finite && same && g[0][0][AT * HS] == 0.0f, "performer backward: a query "
               "of 1e20 (no output) gets no gradient and gives none: dq, dk, dv finite (%d) and "
               "those of a dout of 0 there (%d)", finite, same);
    free(random);
    free(scratch);
}

/* ---- the decode path's new options ---- */

/* softmax weights of the reference for head h, query i: w (T,) (0 where hidden) and the
 * sink's share. */
static double ref_weights(const Case *c, int h, int i, double *w) {
    const AttentionConfig *cfg = c->cfg;
    int T = c->d.T, HS = c->d.HS, g = h / (c->d.NH / c->d.NKV);
    double scale = ref_scale(c), b = cfg->sink_logit ? c->sinkd[h] : 0.0, Z = exp(b);
    const double *q_i = c->qd + ((long)i * c->d.NH + h) * HS;
    for (int j = 0; j < T; j++) {
        w[j] = 0.0;
        if (j > i || !c->visible[((long)h * T + i) * T + j]) continue;
        w[j] = exp(scale * dot(q_i, c->kd + ((long)j * c->d.NKV + g) * HS, HS));
        Z += w[j];
    }
    for (int j = 0; j < T; j++) w[j] /= Z;
    return exp(b) / Z;
}

/* attention_step and attention_weights with a learned sink logit, and softmax1 as the sink
 * logit 0; linear norm=1's weights. */
static void test_decode_options(void) {
    Dims d = {3, 1, 5, 13};
    Variant exact = {"exact sinklogit", config(ATTENTION_EXACT), 0.0f};
    Variant window = {"window w=3 sinks=1 sinklogit", config(ATTENTION_WINDOW), 0.0f};
    exact.cfg.sink_logit = window.cfg.sink_logit = 1;
    window.cfg.window = 3;
    window.cfg.sinks = 1;
    const Variant *vars[2] = {&exact, &window};
    size_t n_out = (size_t)d.T * d.NH * d.HS;
    float *out = alloc_floats(n_out), *w = alloc_floats((size_t)d.NH * d.T * d.T);
    double *want = alloc_doubles(n_out), row[13];
    for (int n = 0; n < 2; n++) {
        Case c;
        case_init(&c, vars[n], d);
        char label[160];
        ref_forward(&c, want);
        snprintf(label, sizeof label, "decode %s: attention_step == float64 reference",
                 vars[n]->name);
        if (check_true(step_forward(&c, out, 0) == 0, "decode %s: attention_step runs",
                       vars[n]->name))
            check_close_f64(label, out, want, n_out, FWD_ATOL, FWD_RTOL);
        /* the weights: the reference's, NaN where hidden, rows summing to 1 - sink share */
        size_t bytes = attention_state_bytes(c.cfg, &c.shape, d.T);
        float *scratch = alloc_floats(attention_weights_scratch_floats(c.cfg, &c.shape, d.T));
        void *state = malloc(bytes);
        int ok = state && attention_state_init(c.cfg, &c.shape, d.T, 0, state) == 0 &&
                 attention_weights(c.cfg, &c.shape, state, d.T, w, c.q, c.k, 0, d.T,
                                   scratch) == 0;
        double worst = 0.0, worst_sum = 0.0, least_share = 1.0;
        for (int h = 0; ok && h < d.NH; h++) {
            for (int i = 0; i < d.T; i++) {
                double share = ref_weights(&c, h, i, row), sum = 0.0;
                const float *w_i = w + ((long)h * d.T + i) * d.T;
                for (int j = 0; j < d.T; j++) {
                    int seen = j <= i && c.visible[((long)h * d.T + i) * d.T + j];
                    if (seen != !isnan(w_i[j])) ok = 0;
                    if (!seen) continue;
                    sum += (double)w_i[j];
                    worst = max_of(worst, fabs((double)w_i[j] - row[j]));
                }
                worst_sum = max_of(worst_sum, fabs(sum - (1.0 - share)));
                if (share < least_share) least_share = share;
            }
        }
        check_true(ok && worst < 1e-6 && worst_sum < 1e-6 && least_share > 1e-3,
                   "decode %s: attention_weights == the reference's (worst %.2g), NaN where "
                   "hidden, rows sum to 1 - the sink's share (worst %.2g; shares >= %.2g)",
                   vars[n]->name, worst, worst_sum, least_share);
        free(scratch);
        free(state);
        case_free(&c);
    }
    /* softmax1 is the sink logit fixed at 0: sink_logits NULL gives softmax1's bits */
    Variant zero = {"exact sinklogit 0", config(ATTENTION_EXACT), 0.0f};
    Variant one = {"softmax1", config(ATTENTION_EXACT), 0.0f};
    zero.cfg.sink_logit = 1;
    one.cfg.softmax1 = 1;
    Case cz, c1;
    case_init(&cz, &zero, d);
    case_init(&c1, &one, d);
    cz.config.sink_logits = NULL;
    memcpy(c1.q, cz.q, n_out * sizeof(float));
    memcpy(c1.k, cz.k, (size_t)d.T * c1.KVD * sizeof(float));
    memcpy(c1.v, cz.v, (size_t)d.T * c1.KVD * sizeof(float));
    float *out1 = alloc_floats(n_out);
    check_true(step_forward(&cz, out, 0) == 0 && step_forward(&c1, out1, 0) == 0 &&
               memcmp(out, out1, n_out * sizeof(float)) == 0,
               "decode: the sink logit 0 (sink_logits NULL) gives softmax1's bits");
    free(out1);
    case_free(&cz);
    case_free(&c1);
    /* linear norm=1: attention_step against the reference; weights are each key's share */
    Variant norm = {"linear norm", config(ATTENTION_LINEAR), 0.0f};
    norm.cfg.norm = 1;
    Case c;
    case_init(&c, &norm, d);
    ref_forward(&c, want);
    if (check_true(step_forward(&c, out, 0) == 0, "decode linear norm: attention_step runs"))
        check_close_f64("decode linear norm: attention_step == float64 reference", out, want,
                        n_out, FWD_ATOL, FWD_RTOL);
    float *scratch = alloc_floats(attention_weights_scratch_floats(c.cfg, &c.shape, d.T));
    int ok = attention_weights(c.cfg, &c.shape, NULL, d.T, w, c.q, c.k, 0, d.T, scratch) == 0;
    double worst = 0.0;
    for (int h = 0; ok && h < d.NH; h++) {
        for (int i = 0; i < d.T; i++) {
            const double *q_i = c.qd + ((long)i * d.NH + h) * d.HS;
            double a[13], sum = 0.0;
            for (int j = 0; j <= i; j++) {
                const double *k_j = c.kd + (long)j * c.KVD;
                a[j] = 0.0;
                for (int e = 0; e < d.HS; e++) a[j] += elu1(q_i[e]) * elu1(k_j[e]);
                sum += a[j];
            }
            for (int j = 0; j < d.T; j++) {
                float w_ij = w[((long)h * d.T + i) * d.T + j];
                if ((j > i) != (isnan(w_ij) != 0)) ok = 0;
                if (j <= i) worst = max_of(worst, fabs((double)w_ij - a[j] / sum));
            }
        }
    }
    check_true(ok && worst < 1e-6, "decode linear norm: attention_weights are each key's share "
               "phi(q).phi(k_j) / phi(q).z, NaN for future keys (worst %.2g)", worst);
    free(scratch);
    case_free(&c);
    free(out);
    free(w);
    free(want);
}

int main(void) {
    make_variants();
    test_every_variant();
    for (int i = 0; i < n_variants; i++) test_threads(&variants[i]);
    test_invalid();
    test_draws();
    test_performer_no_output();
    test_decode_options();
    free(g_scratch);
    return check_summary("test_attention_train");
}

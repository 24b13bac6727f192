/* attention.c: every attention mechanism that run and train execute, and nothing else.
 *
 * Exact causal scaled dot-product attention comes first: attention_forward (and
 * attention_forward_cache, the model's, over a KV cache of floats or, _half, of halves;
 * attention_forward_dropout, the trainer's), computed as docs/attention.md §1 recommends:
 * write the visible scores into a scratch row, subtract their maximum, exponentiate,
 * normalise, take the weighted sum of values (a prompt's queries eight at a time, each key
 * and value read once for the eight). Then the attention lab: every variant of §2-§6 and §8
 * behind attention_step, each keeping its own per-layer state (§10) so that it can replace
 * exact attention in a pretrained model, and attention_weights, which recomputes the
 * weights a variant gives each key. Last, the backward of exact attention for the trainer,
 * and every variant's forward and backward over one training sequence (§14). Nothing here
 * knows about layers or weights: callers pass plain arrays and own every state and scratch
 * block. No malloc, no I/O (snprintf only words a bad config's problem). The kernels no
 * program runs (additive scoring, pooling, Nystrom) are in tests/attention_kernels.c.
 *
 * Contents, in reading order (each a section below under the same title):
 *   Exact attention                          attention_forward, attention_forward_cache
 *   The lab: configuration and names         attention_config_default, attention_kind_name
 *   The lab: the state block's layout        plan, attention_state_bytes
 *   The lab: the random generator            splitmix64 seeding xoshiro256**
 *   The lab: initialising a state            attention_state_init, attention_draw_random
 *   The lab: sparse patterns (§3)            pattern_rows, store_row
 *   The lab: LSH (§4)                        lsh_insert, lsh_rows
 *   The lab: recurrent variants (§5, §6)     linear_step, efficient_step, performer_step
 *   The lab: the Synthesizer (§16)           synth_logits, synth_logits_backward
 *   The lab: the step                        attention_step
 *   The lab: attention weights               attention_weights
 *   Backward of exact attention              attend_rows_backward, attention_backward
 *   Training: every variant over one sequence
 *                                            attention_train_forward, attention_train_backward
 *
 * Legend: T new queries, NH query heads, NKV kv heads, HS head size, t query index,
 * h head, g kv head, i query position, t2/j key position, m Performer features.
 * Section numbers (§) are those of docs/attention.md.
 */
#include "attention.h"

#include <float.h>    /* FLT_MIN */
#include <math.h>     /* expf, logf, sqrtf, isnan, INFINITY, NAN; log, sqrt, cos (the generator) */
#include <stdint.h>   /* uint64_t, int32_t */
#include <stdio.h>    /* snprintf (attention_config_check's problem) */
#include <string.h>   /* memset, memcpy */

#include "hash.h"     /* hash_mix64 and the dropout rule */
#include "kernels.h"  /* kernels_dots, kernels_exp_sum, kernels_weighted_sum, ... */

/* ------------------------------------------------------------------------- */
/* Exact attention                                                           */

/* Exact attention takes a prompt's queries QUERY_BLOCK at a time (attend_causal): each key
 * and value is then read once for the block, where query by query a long context reads it
 * again from L2 or memory for every query. */
#define QUERY_BLOCK 8

size_t attention_scratch_floats(const AttentionShape *shape, int n_positions) {
    /* a block's score rows of n_positions floats per head, so heads can run in parallel */
    return (size_t)shape->n_heads * QUERY_BLOCK * (size_t)n_positions;
}

/* How a softmax-family variant scores key k for query q. */
typedef struct {
    float scale;        /* score = (q . k) * scale */
    int gauss;          /* 1: minus |k|^2 * scale / 2 (Gaussian kernel, §2) */
    int sink;           /* 1: a virtual key of score sink_logit and value 0 joins the
                         * softmax (softmax1, §8: score 0; a learned sink logit b_h, §14) */
    float sink_logit;   /* that virtual key's score */
} Scoring;

/* scores (n_keys,), a query's dots with those keys, to score_rows' scores (below), in place. */
static void scale_scores(float *scores, const float *k, int kv_stride, const int32_t *rows,
                         int n_keys, int HS, Scoring sc) {
    for (int j = 0; j < n_keys; j++) {
        scores[j] *= sc.scale;
        if (sc.gauss) {   /* -|q-k|^2 scale/2 = (q.k - |k|^2/2) scale - |q|^2 scale/2 */
            const float *k_t2 = k + (long)(rows ? rows[j] : j) * kv_stride;
            scores[j] -= 0.5f * sc.scale * kernels_dot(k_t2, k_t2, HS);
        }
    }
}

/* scores (n_keys,) = the scores of query q_t (HS,) for the keys stored at the rows listed in
 * rows (NULL: rows 0 .. n_keys-1) of k (rows, kv_stride), read at this kv head's column
 * offset: (q . k_t2) * scale, minus |k_t2|^2 * scale / 2 for the Gaussian kernel. */
static void score_rows(float *scores, const float *q_t, const float *k, int kv_stride,
                       const int32_t *rows, int n_keys, int HS, Scoring sc) {
    kernels_dots(scores, q_t, k, kv_stride, rows, n_keys, HS);
    scale_scores(scores, k, kv_stride, rows, n_keys, HS, sc);
}

/* The stable softmax of scores (n_keys,), left unnormalised: scores become exp(s - max),
 * and the return value is 1 / Z, so weight n is scores[n] * (1 / Z). The maximum is over the
 * scores (with a sink: and the virtual key's score b, softmax1's 0), so every exponent is
 * <= 0; Z sums the exponentials (with a sink: plus the virtual key's exp(b - max), which
 * *sink_exp gets when not NULL, so that the sink's weight is *sink_exp / Z); an empty row
 * gives 0. */
static float softmax_unnormalised(float *scores, int n_keys, Scoring sc, float *sink_exp) {
    float max_score = kernels_max(scores, n_keys, sc.sink ? sc.sink_logit : -INFINITY);
    float sum = kernels_exp_sum(scores, n_keys, max_score);
    float sink = sc.sink ? kernels_expf(sc.sink_logit - max_score) : 0.0f;
    if (sc.sink) sum += sink;
    if (sink_exp) *sink_exp = sink;
    return sum > 0.0f ? 1.0f / sum : 0.0f;   /* an empty row gives zeros, not NaN */
}

/* Dropout on the weights of one query (training, attention_forward_dropout): w (n,) becomes
 * w_j * 0 or w_j / (1 - p), the mask of (head h, query t) of a call over T queries being that
 * of indices first + j for the key positions j listed in rows (NULL: 0 .. n-1), with
 * first = (h T + t) T; w may hold ones, which gives the factors themselves
 * (attend_rows_backward). See AttentionDropout. */
static void dropout_weights(float *w, int n, const AttentionDropout *drop, uint64_t first,
                            const int32_t *rows) {
    if (!rows) {   /* consecutive positions: the vector kernel */
        kernels_dropout(w, w, (size_t)n, drop->p, drop->key + first);
        return;
    }
    uint64_t threshold = hash_threshold(drop->p);
    float keep_scale = 1.0f / (1.0f - drop->p);
    for (int j = 0; j < n; j++) {
        uint64_t hash = hash_mix64(drop->key + first + (uint64_t)rows[j]);
        w[j] = hash_drops(hash, threshold) ? 0.0f : w[j] * keep_scale;
    }
}

/* attend_rows once the scores (n_keys,) are written (below). */
static void attend_scored(float *out_t, const float *v, int kv_stride, const int32_t *rows,
                          int n_keys, int HS, Scoring sc, float *scores,
                          const AttentionDropout *drop, uint64_t first);

/* One head, one query (the lab's variants and training; exact attention's forward takes
 * eight queries at a time, attend_causal, with the same steps): out_t (HS,) =
 * softmax(scores) . v over n_keys keys, stored at
 * the rows listed in rows (NULL: rows 0 .. n_keys-1, in order), which are also the keys'
 * positions for the dropout mask (drop NULL: none; first as dropout_weights takes it).
 *   q_t (HS,); k, v (rows, kv_stride) read at this kv head's column offset;
 *   scores (n_keys,) scratch. With gauss = sink = 0 this is exactly the exact
 *   kernel: the same operations in the same order, so the same bits. */
static void attend_rows(float *out_t, const float *q_t, const float *k, const float *v,
                        int kv_stride, const int32_t *rows, int n_keys, int HS, Scoring sc,
                        float *scores, const AttentionDropout *drop, uint64_t first) {
    score_rows(scores, q_t, k, kv_stride, rows, n_keys, HS, sc);
    attend_scored(out_t, v, kv_stride, rows, n_keys, HS, sc, scores, drop, first);
}

/* attend_rows for one query (exact scoring, no dropout) over keys and values kept in
 * halves, rows 0 .. n_keys-1 of k and v (n_keys, HS): the kernels read the halves as
 * floats, so the bits of attend_rows over the converted rows. */
static void attend_half_rows(float *out_t, const float *q_t, const uint16_t *k,
                             const uint16_t *v, int n_keys, int HS, Scoring sc, float *scores) {
    kernels_dots_half(scores, q_t, k, n_keys, HS);
    scale_scores(scores, NULL, HS, NULL, n_keys, HS, sc);   /* not Gaussian: no keys read */
    float inv_sum = softmax_unnormalised(scores, n_keys, sc, NULL);
    kernels_weighted_sum_half(out_t, scores, inv_sum, v, n_keys, HS);
}

/* attend_rows once the scores (n_keys,) are written (overwritten here): the softmax, the
 * dropout, the weighted sum of the values. The Synthesizers' logits come this way. */
static void attend_scored(float *out_t, const float *v, int kv_stride, const int32_t *rows,
                          int n_keys, int HS, Scoring sc, float *scores,
                          const AttentionDropout *drop, uint64_t first) {
    float inv_sum = softmax_unnormalised(scores, n_keys, sc, NULL);
    /* training: the dropout mask between the softmax and the sum */
    if (drop) dropout_weights(scores, n_keys, drop, first, rows);
    /* out = sum_t2 (w_t2 / Z) v_t2 */
    kernels_weighted_sum(out_t, scores, inv_sum, v, kv_stride, rows, n_keys, HS);
}

/* One head, n_q <= QUERY_BLOCK queries in a row, the first at position n_first - 1: query
 * t (HS,) at q + t q_stride attends over rows 0 .. n_first + t - 1 of k and v (rows,
 * kv_stride) into out + t out_stride (HS,), with query t's dropout mask at first + t step
 * (drop NULL: none): attend_rows for each, the same steps, so the same bits.
 * scores (n_q, n_first + n_q - 1) scratch. next_k: NULL, or the keys the caller reads next
 * (laid out as k), asked for from memory while v is read (kernels_weighted_sums_causal). */
static void attend_causal(float *out, int out_stride, const float *q, int q_stride, int n_q,
                          const float *k, const float *v, int kv_stride, int n_first, int HS,
                          Scoring sc, float *scores, const AttentionDropout *drop,
                          uint64_t first, uint64_t step, const float *next_k) {
    int ld = n_first + n_q - 1;   /* the last query's keys */
    float inv_sum[QUERY_BLOCK];
    kernels_dots_causal(scores, ld, q, q_stride, n_q, k, kv_stride, n_first, HS);
    for (int t = 0; t < n_q; t++) {
        float *scores_t = scores + (long)t * ld;
        scale_scores(scores_t, k, kv_stride, NULL, n_first + t, HS, sc);
        inv_sum[t] = softmax_unnormalised(scores_t, n_first + t, sc, NULL);
        if (drop) dropout_weights(scores_t, n_first + t, drop, first + t * step, NULL);
    }
    kernels_weighted_sums_causal(out, out_stride, scores, ld, inv_sum, n_q, v, kv_stride,
                                 n_first, HS, next_k);
}

/* One call's arguments, for its per-head jobs. */
typedef struct {
    const AttentionShape *shape;
    const AttentionDropout *drop;   /* NULL: no dropout */
    float *out;
    const float *q, *k, *v;
    const uint16_t *k_half, *v_half;   /* a cache in half precision (k, v NULL), or NULL */
    long kv_head_stride;  /* values from one kv head's key of a position to the next head's */
    int kv_stride;     /* values from a kv head's key of a position to the next position's */
    int pos, T;
    float *scratch;
    float *kv_floats;  /* a half cache: each head's keys, then values, as floats, in
                        * blocks of kv_head_stride floats each */
} ForwardJob;

/* A call with at least PACK_MIN_QUERIES queries whose heads lie side by side in each row
 * (attention_forward, the trainer's attention_forward_dropout; the KV cache keeps each kv
 * head's rows together already) packs a head's keys and values when they fit in
 * PACK_FLOATS floats each (on the stack of forward_head: 128 KiB in all). */
#define PACK_MIN_QUERIES 16
#define PACK_FLOATS 16384

/* k_p, v_p (n, HS) = the n rows of k, v (n, kv_stride), read at one head's columns. Every
 * query reads all of them again; in place their rows lie kv_stride floats apart, and with
 * strides of 128 floats and more they fall into a few sets of L1 and evict each other from
 * one query to the next.
 * Copying changes no value, so the results have the same bits. */
static void pack_keys(float *k_p, float *v_p, const float *k, const float *v, int kv_stride,
                      int n, int HS) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < HS; i++) {   /* rows of a few dozen floats: no memcpy calls */
            k_p[(long)j * HS + i] = k[(long)j * kv_stride + i];
            v_p[(long)j * HS + i] = v[(long)j * kv_stride + i];
        }
}

/* Where one head reads its keys and values: n_keys rows of each, stride floats apart. */
typedef struct {
    const float *k, *v;
    int stride;
    const float *next_k;   /* NULL, or the next head's keys (decode, where they are not these):
                            * asked for from memory while this head's values are summed,
                            * so that they come from the caches */
} HeadRows;

/* Head h's rows, its kv head's at kv_offset in f's arrays. A half cache's (a prompt: a
 * half cache's single query reads the halves in place) as floats, in k_p and v_p where
 * they fit, else in the head's part of f->kv_floats; rows that lie far apart (pack_keys)
 * copied together into k_p and v_p. k_p, v_p: PACK_FLOATS floats each. */
static HeadRows head_rows(const ForwardJob *f, int h, long kv_offset, float *k_p, float *v_p) {
    int NH = f->shape->n_heads, HS = f->shape->head_dim, n_keys = f->pos + f->T;
    int group = NH / f->shape->n_kv_heads;
    HeadRows r = {NULL, NULL, f->kv_stride, NULL};
    if (f->k_half) {   /* (f->k and f->v are NULL) */
        int fit = (long)n_keys * HS <= PACK_FLOATS;
        float *k_f = fit ? k_p : f->kv_floats + 2 * h * f->kv_head_stride;
        float *v_f = fit ? v_p : k_f + f->kv_head_stride;
        kernels_from_half(k_f, f->k_half + kv_offset, (size_t)n_keys * HS);
        kernels_from_half(v_f, f->v_half + kv_offset, (size_t)n_keys * HS);
        r.k = k_f;
        r.v = v_f;
    } else {
        r.k = f->k + kv_offset;
        r.v = f->v + kv_offset;
        if (f->T == 1 && (h + 1) % group == 0 && h + 1 < NH) r.next_k = r.k + f->kv_head_stride;
    }
    if (f->T >= PACK_MIN_QUERIES && r.stride > HS && (long)n_keys * HS <= PACK_FLOATS) {
        pack_keys(k_p, v_p, r.k, r.v, r.stride, n_keys, HS);
        r.k = k_p;
        r.v = v_p;
        r.stride = HS;
    }
    return r;
}

/* Head h of attention_forward: its HS columns of out, its own scratch rows. */
static void forward_head(void *ctx, int h) {
    const ForwardJob *f = ctx;
    int NH = f->shape->n_heads, HS = f->shape->head_dim, n_keys = f->pos + f->T;
    int group = NH / f->shape->n_kv_heads;        /* query heads per kv head */
    long kv_offset = (h / group) * f->kv_head_stride;    /* seek to this head's keys and values */
    int block = f->T < QUERY_BLOCK ? f->T : QUERY_BLOCK;   /* queries at once */
    float *scores = f->scratch + (long)h * block * n_keys;
    Scoring exact = {f->shape->scale, 0, 0, 0.0f};
    if (f->k_half && f->T == 1) {   /* a half cache, one query: the halves read in place */
        attend_half_rows(f->out + (long)h * HS, f->q + (long)h * HS, f->k_half + kv_offset,
                         f->v_half + kv_offset, n_keys, HS, exact, scores);
        return;
    }
    float k_p[PACK_FLOATS], v_p[PACK_FLOATS];   /* the head's rows, where copied */
    HeadRows r = head_rows(f, h, kv_offset, k_p, v_p);
    for (int t = 0; t < f->T; t += block) {   /* queries t .. t + n_q - 1 */
        int n_q = f->T - t < block ? f->T - t : block;
        /* the mask: query t sees keys 0 .. pos + t, each later query of the block one more */
        int n_first = f->pos + t + 1;
        /* seek to q[t, h, :] and out[t, h, :] of (T, NH, HS) */
        const float *q_t = f->q + ((long)t * NH + h) * HS;
        float *out_t = f->out + ((long)t * NH + h) * HS;
        attend_causal(out_t, NH * HS, q_t, NH * HS, n_q, r.k, r.v, r.stride, n_first, HS, exact,
                      scores, f->drop, ((uint64_t)h * f->T + (uint64_t)t) * f->T,
                      (uint64_t)f->T, r.next_k);
    }
}

/* Runs f's heads as jobs. Heads are independent and each writes its own HS columns of out,
 * and its own scratch rows, so running them on different threads changes no result. A
 * short context stays on one thread: sharing the work would cost more than it saves. */
static void forward_heads(const ForwardJob *f) {
    /* scores and weighted sums: two multiply-adds per head, query, key and dimension */
    const AttentionShape *shape = f->shape;
    double work = 2.0 * shape->n_heads * f->T * (f->pos + f->T) * shape->head_dim;
    kernels_parallel_for(forward_head, (void *)f, shape->n_heads, work);
}

void attention_forward(const AttentionShape *shape, float *out, const float *q,
                       const float *k, const float *v, int pos, int T, float *scratch) {
    int HS = shape->head_dim;   /* rows of (pos + T, NKV HS): the heads side by side */
    ForwardJob f = {.shape = shape, .out = out, .q = q, .k = k, .v = v, .kv_head_stride = HS,
                    .kv_stride = shape->n_kv_heads * HS, .pos = pos, .T = T, .scratch = scratch};
    forward_heads(&f);
}

void attention_forward_cache(const AttentionShape *shape, float *out, const float *q,
                             const float *k, const float *v, int n_alloc, int pos, int T,
                             float *scratch) {
    int HS = shape->head_dim;   /* (NKV, n_alloc, HS): a head's positions in a row */
    ForwardJob f = {.shape = shape, .out = out, .q = q, .k = k, .v = v,
                    .kv_head_stride = (long)n_alloc * HS, .kv_stride = HS, .pos = pos, .T = T,
                    .scratch = scratch};
    forward_heads(&f);
}

size_t attention_half_scratch_floats(const AttentionShape *shape, int n_alloc) {
    return attention_scratch_floats(shape, n_alloc) +
           (size_t)shape->n_heads * 2 * (size_t)n_alloc * (size_t)shape->head_dim;
}

void attention_forward_cache_half(const AttentionShape *shape, float *out, const float *q,
                                  const uint16_t *k, const uint16_t *v, int n_alloc, int pos,
                                  int T, float *scratch) {
    int HS = shape->head_dim;   /* as attention_forward_cache's, in halves */
    ForwardJob f = {.shape = shape, .out = out, .q = q, .k_half = k, .v_half = v,
                    .kv_head_stride = (long)n_alloc * HS, .kv_stride = HS, .pos = pos, .T = T,
                    .scratch = scratch,
                    .kv_floats = scratch + attention_scratch_floats(shape, n_alloc)};
    forward_heads(&f);
}

void attention_forward_dropout(const AttentionShape *shape, const AttentionDropout *drop,
                               float *out, const float *q, const float *k, const float *v,
                               int T, float *scratch) {
    int HS = shape->head_dim;
    ForwardJob f = {.shape = shape, .drop = drop && drop->p > 0.0f ? drop : NULL, .out = out,
                    .q = q, .k = k, .v = v, .kv_head_stride = HS,
                    .kv_stride = shape->n_kv_heads * HS, .pos = 0, .T = T, .scratch = scratch};
    forward_heads(&f);
}

/* ------------------------------------------------------------------------- */
/* The lab: configuration and names                                          */

void attention_config_default(AttentionConfig *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = ATTENTION_EXACT;
    cfg->tau = 1.0f;
    cfg->window = ATTENTION_DEFAULT_WINDOW;
    cfg->dilation = ATTENTION_DEFAULT_DILATION;
    cfg->stride = ATTENTION_DEFAULT_STRIDE;
    cfg->summary = ATTENTION_DEFAULT_SUMMARY;
    cfg->buckets = ATTENTION_DEFAULT_BUCKETS;
    cfg->rounds = ATTENTION_DEFAULT_ROUNDS;
    cfg->local = ATTENTION_DEFAULT_LSH_LOCAL;
    cfg->features = ATTENTION_DEFAULT_FEATURES;
    cfg->orthogonal = 1;
    cfg->factor = ATTENTION_DEFAULT_FACTOR;
    cfg->seed = 1;
}

const char *attention_kind_name(AttentionKind kind) {
    static const char *const names[ATTENTION_KINDS] = {
        "exact", "gauss", "window", "dilated", "strided", "fixed", "lsh", "linear",
        "efficient", "performer", "synth-random", "synth-dense", "synth-frandom",
        "synth-fdense"};
    return kind >= 0 && kind < ATTENTION_KINDS ? names[kind] : "unknown";
}

int attention_context_check(const AttentionConfig *cfg, int context, char *problem, size_t cap) {
    if (cfg->kind == ATTENTION_LSH && cfg->buckets > context) {
        snprintf(problem, cap, "lsh: buckets above the context (got %d buckets, context %d; "
                 "expected at most %d: more buckets than positions leave some empty)",
                 cfg->buckets, context, context);
        return -1;
    }
    if (cfg->kind == ATTENTION_SYNTH_FDENSE && context % cfg->factor != 0) {
        snprintf(problem, cap, "synth-fdense: a must divide the context (got a %d, context %d)",
                 cfg->factor, context);
        return -1;
    }
    if (cfg->kind == ATTENTION_SYNTH_FRANDOM && cfg->factor > context) {
        snprintf(problem, cap, "synth-frandom: rank above the context (got rank %d, expected "
                 "1..%d: R1 R2^T is a (context, context) table)", cfg->factor, context);
        return -1;
    }
    return 0;
}

int attention_has_weights(AttentionKind kind) {
    return kind != ATTENTION_LINEAR && kind != ATTENTION_EFFICIENT && kind != ATTENTION_PERFORMER;
}

int attention_is_synth(AttentionKind kind) {
    return kind == ATTENTION_SYNTH_RANDOM || kind == ATTENTION_SYNTH_DENSE ||
           kind == ATTENTION_SYNTH_FRANDOM || kind == ATTENTION_SYNTH_FDENSE;
}

/* ------------------------------------------------------------------------- */
/* The lab: the state block's layout                                         */

/* The first bytes of every state block. */
typedef struct {
    int next_pos;   /* the position the next step must start at (0 after init) */
} StateHeader;

#define STATE_ALIGN 64   /* every region starts on a cache line */

/* The layout of one layer's state for (cfg, shape, n_alloc): sizes and byte offsets.
 * All of it follows from the config, so the block itself needs no pointers. */
typedef struct {
    int kv_rows;      /* rows of the K and V stores: n_alloc (A, D), sinks + ring (B), 0 (C); each
                       * store is (n_kv_heads, kv_rows, HS): a kv head's rows in a row, so
                       * that they stream, and a long context's rows of one head do not
                       * fall into a few cache sets as rows n_kv_heads HS floats apart do */
    int sinks, ring;  /* (B): the sink slots, then the ring slots */
    int list_cap;     /* ints per head of the visible-row list (0: rows 0..i in order) */
    int score_cap;    /* floats of scratch per head */
    int rec_floats;   /* floats of recurrent state per head (C) */
    int rand_rows;    /* rows of HS floats in each random matrix */
    int rounds;       /* random matrices per head (LSH rounds; 1 for Performer) */
    size_t key, value, list, rec, rand, first, next, stamp, total;   /* byte offsets */
} Plan;

static size_t align_up(size_t n) { return (n + STATE_ALIGN - 1) / STATE_ALIGN * STATE_ALIGN; }

/* The score scale of a variant: 1 unscaled, else the shape's (1/sqrt(HS)) over tau. */
static float config_scale(const AttentionConfig *cfg, const AttentionShape *shape) {
    return cfg->unscaled ? 1.0f : shape->scale / cfg->tau;
}

/* 0 if lo <= value <= hi, else -1 with the problem of field (of kind) in problem. */
static int check_range(const char *kind, const char *field, int value, int lo, int hi,
                       char *problem, size_t cap) {
    if (value >= lo && value <= hi) return 0;
    snprintf(problem, cap, "%s: %s out of range (got %d, expected %d..%d)", kind, field, value,
             lo, hi);
    return -1;
}

int attention_config_check(const AttentionConfig *cfg, char *problem, size_t cap) {
    const char *kind = attention_kind_name(cfg->kind);
    const int MAX = ATTENTION_MAX_INT;
    if (cfg->kind < 0 || cfg->kind >= ATTENTION_KINDS) {
        snprintf(problem, cap, "unknown kind (got %d, expected 0..%d)", (int)cfg->kind,
                 ATTENTION_KINDS - 1);
        return -1;
    }
    if (!(cfg->tau >= ATTENTION_MIN_TAU && cfg->tau <= ATTENTION_MAX_TAU)) {
        snprintf(problem, cap, "%s: tau out of range (got %g, expected [0.01, 100])", kind,
                 (double)cfg->tau);
        return -1;
    }
    int compared = attention_has_weights(cfg->kind) && !attention_is_synth(cfg->kind);
    const char *alone = cfg->softmax1 && !compared ? "softmax1"
                      : cfg->sink_logit && !compared ? "sinklogit"
                      : cfg->norm && cfg->kind != ATTENTION_LINEAR ? "norm" : NULL;
    if (alone) {
        snprintf(problem, cap, "%s: %s does not apply (got %s=1, expected 0 on this kind)",
                 kind, alone, alone);
        return -1;
    }
    /* tau and unscaled where the spec takes them (lab/attention_spec.c): a checkpoint's
     * attention is checked here alone */
    if (cfg->unscaled && cfg->kind != ATTENTION_EXACT) {
        snprintf(problem, cap, "%s: unscaled does not apply (got unscaled=1, expected it with "
                 "exact attention only)", kind);
        return -1;
    }
    if (cfg->tau != 1.0f && (cfg->unscaled || !(compared || cfg->kind == ATTENTION_PERFORMER))) {
        snprintf(problem, cap, "%s: tau does not apply (got tau=%g, expected 1 on this kind)",
                 kind, (double)cfg->tau);
        return -1;
    }
    if (cfg->softmax1 && cfg->sink_logit) {
        snprintf(problem, cap, "%s: softmax1 and sinklogit exclude each other (softmax1 is a "
                 "sink logit fixed at 0)", kind);
        return -1;
    }
    switch (cfg->kind) {
    case ATTENTION_WINDOW: case ATTENTION_DILATED:
        return check_range(kind, "w", cfg->window, 1, MAX, problem, cap) ||
               check_range(kind, "sinks", cfg->sinks, 0, MAX, problem, cap) ||
               (cfg->kind == ATTENTION_DILATED &&
                check_range(kind, "k", cfg->dilation, 1, MAX, problem, cap)) ? -1 : 0;
    case ATTENTION_STRIDED: case ATTENTION_FIXED:
        if (check_range(kind, "l", cfg->stride, 1, MAX, problem, cap) ||
            (cfg->kind == ATTENTION_FIXED &&
             check_range(kind, "c", cfg->summary, 0, MAX, problem, cap)))
            return -1;
        if (cfg->kind == ATTENTION_FIXED && cfg->summary > cfg->stride) {
            snprintf(problem, cap, "fixed: c must not exceed l (got c %d, l %d)", cfg->summary,
                     cfg->stride);
            return -1;
        }
        return 0;
    case ATTENTION_LSH:
        if (check_range(kind, "buckets", cfg->buckets, 1, ATTENTION_MAX_BUCKETS, problem, cap) ||
            check_range(kind, "rounds", cfg->rounds, 1, ATTENTION_MAX_ROUNDS, problem, cap) ||
            check_range(kind, "local", cfg->local, 0, MAX, problem, cap) ||
            check_range(kind, "sinks", cfg->sinks, 0, MAX, problem, cap))
            return -1;
        if (cfg->buckets > 1 && cfg->buckets % 2 != 0) {
            snprintf(problem, cap, "lsh: buckets must be 1 or even (got %d)", cfg->buckets);
            return -1;
        }
        return 0;
    case ATTENTION_PERFORMER:
        return check_range(kind, "m", cfg->features, 1, ATTENTION_MAX_FEATURES, problem, cap);
    case ATTENTION_SYNTH_FRANDOM: case ATTENTION_SYNTH_FDENSE:
        return check_range(kind, cfg->kind == ATTENTION_SYNTH_FRANDOM ? "rank" : "a", cfg->factor,
                           1, MAX, problem, cap);
    default:
        return 0;
    }
}

/* How head h of a softmax-family variant scores: its scale, the Gaussian term, and the
 * virtual key of softmax1 (score 0) or of the learned sink logit (cfg->sink_logits[h];
 * NULL: 0). */
static Scoring config_scoring(const AttentionConfig *cfg, const AttentionShape *shape, int h) {
    Scoring sc = {config_scale(cfg, shape), cfg->kind == ATTENTION_GAUSS, cfg->softmax1 != 0,
                  0.0f};
    if (cfg->sink_logit) {
        sc.sink = 1;
        sc.sink_logit = cfg->sink_logits ? cfg->sink_logits[h] : 0.0f;
    }
    return sc;
}

static size_t synth_work_floats(const AttentionConfig *cfg, int HS);   /* the Synthesizer's */

/* Fills p; returns -1 if a parameter is out of range (see lab/attention_spec.c for the
 * ranges users are told) or the state's bytes would pass SIZE_MAX / 2 (a 32-bit size_t:
 * LSH's lists at 2^20 positions). */
static int plan(Plan *p, const AttentionConfig *cfg, const AttentionShape *shape, int n_alloc) {
    memset(p, 0, sizeof *p);
    int NH = shape->n_heads, NKV = shape->n_kv_heads, HS = shape->head_dim;
    if (n_alloc < 1 || NH < 1 || NKV < 1 || NH % NKV != 0 || HS < 1) return -1;
    if (!(cfg->tau >= ATTENTION_MIN_TAU && cfg->tau <= ATTENTION_MAX_TAU)) return -1;
    int compared = attention_has_weights(cfg->kind) && !attention_is_synth(cfg->kind);
    if (cfg->softmax1 && !compared) return -1;
    /* a sink logit is a softmax's extra key, and softmax1 is its fixed b = 0 form */
    if (cfg->sink_logit && (!compared || cfg->softmax1)) return -1;
    if (cfg->norm && cfg->kind != ATTENTION_LINEAR) return -1;
    long rows = 0, ring = 0, list = 0;
    switch (cfg->kind) {
    case ATTENTION_EXACT: case ATTENTION_GAUSS:
        rows = n_alloc;
        break;
    case ATTENTION_WINDOW: case ATTENTION_DILATED:
        if (cfg->window < 1 || cfg->sinks < 0) return -1;
        if (cfg->kind == ATTENTION_DILATED && cfg->dilation < 1) return -1;
        /* in 64 bits: (w-1) k + 1 can exceed an int, and a 32-bit long */
        int64_t span = cfg->kind == ATTENTION_WINDOW
                       ? cfg->window : (int64_t)(cfg->window - 1) * cfg->dilation + 1;
        ring = span < n_alloc ? (long)span : n_alloc;
        p->sinks = cfg->sinks < n_alloc ? cfg->sinks : n_alloc;
        rows = p->sinks + ring < n_alloc ? p->sinks + ring : n_alloc;
        p->ring = (int)ring;
        list = rows;
        break;
    case ATTENTION_STRIDED: case ATTENTION_FIXED:
        if (cfg->stride < 1) return -1;
        if (cfg->kind == ATTENTION_FIXED && (cfg->summary < 0 || cfg->summary > cfg->stride))
            return -1;
        rows = list = n_alloc;
        break;
    case ATTENTION_LSH:
        if (cfg->buckets < 1 || (cfg->buckets > 1 && cfg->buckets % 2 != 0) ||
            cfg->rounds < 1 || cfg->local < 0 || cfg->sinks < 0) return -1;
        rows = list = n_alloc;
        p->rounds = cfg->rounds;
        p->rand_rows = cfg->buckets / 2;
        break;
    case ATTENTION_LINEAR:
        p->rec_floats = HS * HS + HS;             /* S (HS, HS), z (HS,) */
        break;
    case ATTENTION_EFFICIENT:
        p->rec_floats = HS * HS + 2 * HS;         /* S (HS, HS), z (HS,), max (HS,) */
        break;
    case ATTENTION_PERFORMER:
        if (cfg->features < 1) return -1;
        p->rec_floats = cfg->features * HS + cfg->features + 1;   /* S (m, HS), z (m,), M */
        p->rounds = 1;
        p->rand_rows = cfg->features;
        break;
    case ATTENTION_SYNTH_RANDOM: case ATTENTION_SYNTH_DENSE:
    case ATTENTION_SYNTH_FRANDOM: case ATTENTION_SYNTH_FDENSE:
        /* the parameters cover positions 0 .. L-1 */
        if (attention_synth_floats(cfg, shape) == 0 || n_alloc > cfg->synth_len) return -1;
        rows = n_alloc;
        break;
    default:
        return -1;
    }
    size_t synth_work = synth_work_floats(cfg, HS);
    p->kv_rows = (int)rows;
    p->list_cap = (int)list;
    p->score_cap = (int)rows;
    if (cfg->kind == ATTENTION_EXACT || cfg->kind == ATTENTION_GAUSS)
        p->score_cap = QUERY_BLOCK * (int)rows;   /* attend_causal's block of scores */
    if (cfg->kind == ATTENTION_PERFORMER && p->score_cap < cfg->features)
        p->score_cap = cfg->features;
    if (p->score_cap < 2 * HS) p->score_cap = 2 * HS;
    if (synth_work) p->score_cap = (int)rows + (int)synth_work;   /* the logits, then work */
    /* every part's bytes in double first: none of the size_t products below wraps */
    double bytes = 4.0 * ((double)p->kv_rows * NKV * HS * 2 + (double)NH * p->list_cap +
                          (double)NH * p->rec_floats + (double)NH * p->rounds * p->rand_rows * HS);
    if (cfg->kind == ATTENTION_LSH)
        bytes += 4.0 * NH * ((double)p->rounds * cfg->buckets +
                             (double)p->rounds * n_alloc + n_alloc);
    if (bytes > (double)(SIZE_MAX / 2)) return -1;
    size_t kv = (size_t)p->kv_rows * NKV * HS * sizeof(float);
    p->key = align_up(sizeof(StateHeader));
    /* a Synthesizer never reads a key: it keeps the values alone, half exact's cache */
    p->value = align_up(p->key + (attention_is_synth(cfg->kind) ? 0 : kv));
    p->list = align_up(p->value + kv);
    p->rec = align_up(p->list + (size_t)NH * p->list_cap * sizeof(int32_t));
    p->rand = align_up(p->rec + (size_t)NH * p->rec_floats * sizeof(float));
    p->first = align_up(p->rand + (size_t)NH * p->rounds * p->rand_rows * HS * sizeof(float));
    size_t lsh_first = 0, lsh_next = 0, lsh_stamp = 0;
    if (cfg->kind == ATTENTION_LSH) {
        lsh_first = (size_t)NH * p->rounds * cfg->buckets * sizeof(int32_t);
        lsh_next = (size_t)NH * p->rounds * n_alloc * sizeof(int32_t);
        lsh_stamp = (size_t)NH * n_alloc * sizeof(int32_t);
    }
    p->next = align_up(p->first + lsh_first);
    p->stamp = align_up(p->next + lsh_next);
    p->total = align_up(p->stamp + lsh_stamp);
    return 0;
}

size_t attention_state_bytes(const AttentionConfig *cfg, const AttentionShape *shape, int n_alloc) {
    Plan p;
    return plan(&p, cfg, shape, n_alloc) == 0 ? p.total : 0;
}

size_t attention_step_scratch_floats(const AttentionConfig *cfg, const AttentionShape *shape,
                                     int n_alloc) {
    Plan p;
    if (plan(&p, cfg, shape, n_alloc) != 0) return 0;
    return (size_t)shape->n_heads * p.score_cap;
}

/* ------------------------------------------------------------------------- */
/* The lab: the random generator                                             */
/* splitmix64 seeding xoshiro256** (Vigna, https://prng.di.unimi.it/); Box-Muller normals
 * in double precision. */

typedef struct { uint64_t s[4]; } Rng;

/* splitmix64's step: the output for state *x, then the next state. */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = hash_mix64(*x);
    *x += 0x9E3779B97F4A7C15ULL;
    return z;
}

/* One independent stream per (seed, draw, layer, head, round): each key is mixed in turn.
 * Draw 0 mixes in no fourth key: its streams are the ones attention_state_init draws. */
static void rng_init(Rng *r, uint64_t seed, uint64_t draw, int layer, int head, int round) {
    uint64_t x = seed;
    const uint64_t keys[4] = {(uint64_t)layer, (uint64_t)head, (uint64_t)round, draw};
    for (int i = 0; i < (draw != 0 ? 4 : 3); i++) {
        uint64_t mixed = splitmix64(&x);
        x = mixed ^ (keys[i] * 0xD1B54A32D192ED03ULL + 1);
    }
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(Rng *r) {
    uint64_t *s = r->s, result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

#define RNG_TWO_PI 6.283185307179586   /* 2 pi for Box-Muller */

/* A standard normal: Box-Muller's cosine branch, u1 in (0, 1] so log is finite. */
static double rng_normal(Rng *r) {
    double u1 = (double)((rng_next(r) >> 11) + 1) * 0x1.0p-53;
    double u2 = (double)(rng_next(r) >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(RNG_TWO_PI * u2);
}

/* rows (n, HS) with i.i.d. N(0, 1) entries. */
static void draw_gaussian(float *rows, int n, int HS, Rng *r) {
    for (long i = 0; i < (long)n * HS; i++) rows[i] = (float)rng_normal(r);
}

/* Orthogonal random features (§6): rows in blocks of HS, orthonormal within a block
 * (Gram-Schmidt on Gaussian rows), each then scaled by the norm of an independent
 * N(0, I) vector so it is marginally N(0, I) and the estimator stays unbiased. */
static void draw_orthogonal(float *rows, int n, int HS, Rng *r) {
    for (int f = 0; f < n; f++) {
        float *w = rows + (long)f * HS;
        int block = f / HS * HS;
        for (;;) {
            for (int i = 0; i < HS; i++) w[i] = (float)rng_normal(r);
            /* remove the earlier rows' directions; twice, since one float pass leaves
             * residues of ~1e-6 ("twice is enough", Giraud et al. 2005) */
            for (int pass = 0; pass < 2; pass++) {
                for (int p = block; p < f; p++) {
                    const float *u = rows + (long)p * HS;
                    double d = 0.0;
                    for (int i = 0; i < HS; i++) d += (double)w[i] * (double)u[i];
                    for (int i = 0; i < HS; i++) w[i] -= (float)(d * (double)u[i]);
                }
            }
            double norm = 0.0;
            for (int i = 0; i < HS; i++) norm += (double)w[i] * (double)w[i];
            if (norm > 1e-12) {
                for (int i = 0; i < HS; i++) w[i] = (float)((double)w[i] / sqrt(norm));
                break;
            }
        }
    }
    for (int f = 0; f < n; f++) {
        double chi = 0.0;
        for (int i = 0; i < HS; i++) {
            double z = rng_normal(r);
            chi += z * z;
        }
        chi = sqrt(chi);
        float *w = rows + (long)f * HS;
        for (int i = 0; i < HS; i++) w[i] = (float)((double)w[i] * chi);
    }
}

/* ------------------------------------------------------------------------- */
/* The lab: initialising a state                                             */

static void *at(void *state, size_t offset) { return (char *)state + offset; }

/* Where the random matrix of (head h, round r) starts, in floats from the start of the
 * random region: (NH, rounds, rand_rows, HS), rows contiguous. */
static long random_offset(const Plan *p, int h, int r, int HS) {
    return ((long)h * p->rounds + r) * p->rand_rows * HS;
}

float *attention_state_random(const AttentionConfig *cfg, const AttentionShape *shape,
                              int n_alloc, void *state, int head, int round, int *rows) {
    Plan p;
    if (plan(&p, cfg, shape, n_alloc) != 0 || p.rand_rows == 0 || head < 0 ||
        head >= shape->n_heads || round < 0 || round >= p.rounds) return NULL;
    *rows = p.rand_rows;
    return (float *)at(state, p.rand) + random_offset(&p, head, round, shape->head_dim);
}

/* Empties the per-sequence parts: recurrent sums, running maxima, LSH lists. */
static void reset_sequence(const Plan *p, const AttentionConfig *cfg,
                           const AttentionShape *shape, int n_alloc, void *state) {
    int NH = shape->n_heads, HS = shape->head_dim;
    float *rec = at(state, p->rec);
    memset(rec, 0, (size_t)NH * p->rec_floats * sizeof(float));
    for (int h = 0; h < NH; h++) {
        float *rec_h = rec + (long)h * p->rec_floats;
        if (cfg->kind == ATTENTION_EFFICIENT)
            for (int c = 0; c < HS; c++) rec_h[HS * HS + HS + c] = -INFINITY;   /* max */
        if (cfg->kind == ATTENTION_PERFORMER) rec_h[p->rec_floats - 1] = -INFINITY;  /* M */
    }
    if (cfg->kind == ATTENTION_LSH) {
        int32_t *first = at(state, p->first), *stamp = at(state, p->stamp);
        for (long i = 0; i < (long)NH * p->rounds * cfg->buckets; i++) first[i] = -1;
        memset(stamp, 0, (size_t)NH * n_alloc * sizeof(int32_t));
    }
}

/* Draws one layer's random matrices (NH, rounds, rand_rows, HS) into random, each from its
 * own stream (seed, draw, layer, head, round): LSH rotations i.i.d. N(0, 1), Performer
 * features orthogonal or i.i.d. */
static void draw_random(const Plan *p, const AttentionConfig *cfg, const AttentionShape *shape,
                        int layer, uint64_t draw, float *random) {
    int HS = shape->head_dim;
    for (int h = 0; h < shape->n_heads; h++) {
        for (int r = 0; r < p->rounds; r++) {
            Rng rng;
            rng_init(&rng, cfg->seed, draw, layer, h, r);
            float *rows = random + random_offset(p, h, r, HS);
            if (cfg->kind == ATTENTION_PERFORMER && cfg->orthogonal)
                draw_orthogonal(rows, p->rand_rows, HS, &rng);
            else
                draw_gaussian(rows, p->rand_rows, HS, &rng);
        }
    }
}

size_t attention_random_floats(const AttentionConfig *cfg, const AttentionShape *shape) {
    Plan p;   /* the random matrices do not depend on the context length */
    if (plan(&p, cfg, shape, 1) != 0) return 0;
    return (size_t)shape->n_heads * p.rounds * p.rand_rows * shape->head_dim;
}

int attention_draw_random(const AttentionConfig *cfg, const AttentionShape *shape, int layer,
                          unsigned long long draw, float *random) {
    Plan p;
    if (plan(&p, cfg, shape, 1) != 0 || p.rand_rows == 0 || !random) return -1;
    draw_random(&p, cfg, shape, layer, draw, random);
    return 0;
}

int attention_state_init(const AttentionConfig *cfg, const AttentionShape *shape, int n_alloc,
                         int layer, void *state) {
    Plan p;
    if (plan(&p, cfg, shape, n_alloc) != 0) return -1;
    memset(state, 0, p.total);
    draw_random(&p, cfg, shape, layer, 0, (float *)at(state, p.rand));
    reset_sequence(&p, cfg, shape, n_alloc, state);
    ((StateHeader *)state)->next_pos = 0;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The lab: sparse patterns (§3)                                             */
/* Which keys each pattern lets a query see, as lists of rows of the K/V store. */

/* Row of the K/V store that holds position j. (B): the sinks keep rows 0 .. sinks-1,
 * later positions cycle through the ring's rows; before the ring wraps, row == position. */
static int store_row(const Plan *p, int j) {
    if (p->ring == 0 || j < p->sinks) return j;
    return p->sinks + (j - p->sinks) % p->ring;
}

/* 1 if the query at position i sees the key at position j <= i under the window (dilation
 * k = 1) or dilated pattern: a sink (j < sinks), or one of the w keys i, i - k, ..,
 * i - (w-1) k. */
static int window_visible(int sinks, int w, int k, int i, int j) {
    return j < sinks || ((i - j) % k == 0 && (i - j) / k < w);
}

/* Sparse Transformer strided, both heads merged: the last l keys, and every l-th before. */
static int strided_visible(int l, int i, int j) { return i - j < l || (i - j) % l == 0; }

/* Sparse Transformer fixed, merged: the query's own block of l, and the last c positions of
 * every block (the summaries). */
static int fixed_visible(int l, int c, int i, int j) { return j / l == i / l || j % l >= l - c; }

/* 1 if the pattern of cfg lets the query at position i see the key at position j <= i
 * (exact and Gaussian: always). */
static int pattern_visible(const AttentionConfig *cfg, int i, int j) {
    switch (cfg->kind) {
    case ATTENTION_WINDOW: return window_visible(cfg->sinks, cfg->window, 1, i, j);
    case ATTENTION_DILATED: return window_visible(cfg->sinks, cfg->window, cfg->dilation, i, j);
    case ATTENTION_STRIDED: return strided_visible(cfg->stride, i, j);
    case ATTENTION_FIXED: return fixed_visible(cfg->stride, cfg->summary, i, j);
    default: return 1;
    }
}

/* Rows visible to the query at position i, in increasing position order (so that
 * with nothing excluded the sum runs in the exact kernel's order). Returns the count.
 * Each pattern lists its keys directly, in time proportional to their number rather than
 * to i: window_visible's, strided_visible's and fixed_visible's sets. */
static int pattern_rows(const Plan *p, const AttentionConfig *cfg, int i, int32_t *rows) {
    int n = 0;
    switch (cfg->kind) {
    case ATTENTION_WINDOW: case ATTENTION_DILATED: {
        int k = cfg->kind == ATTENTION_WINDOW ? 1 : cfg->dilation;
        int sinks = p->sinks < i + 1 ? p->sinks : i + 1;
        for (int j = 0; j < sinks; j++) rows[n++] = j;
        /* the oldest key of the window, in 64 bits: (w-1) k can exceed a 32-bit long */
        int64_t first = i - (int64_t)(cfg->window - 1) * k;
        if (first < p->sinks) first += ((p->sinks - first) + k - 1) / k * k;
        for (int64_t j = first; j <= i; j += k) rows[n++] = store_row(p, (int)j);
        break;
    }
    case ATTENTION_STRIDED: {
        int l = cfg->stride;   /* a local: rows[n] could alias cfg for the compiler */
        /* every l-th key back from i - l (i - j a multiple of l, at least l), then the
         * last l keys */
        for (int j = i % l; j <= i - l; j += l) rows[n++] = j;
        for (int j = i - l + 1 > 0 ? i - l + 1 : 0; j <= i; j++) rows[n++] = j;
        break;
    }
    case ATTENTION_FIXED: {
        int l = cfg->stride, c = cfg->summary, block = i / l * l;
        /* the last c positions of every earlier block, then the query's own block */
        for (int b = 0; b < block; b += l)
            for (int j = b + l - c; j < b + l; j++) rows[n++] = j;
        for (int j = block; j <= i; j++) rows[n++] = j;
        break;
    }
    default:
        break;
    }
    return n;
}

/* ------------------------------------------------------------------------- */
/* The lab: LSH (§4)                                                         */
/* Angular hashing, per-round bucket lists, exact softmax over the union of buckets. */

static float dot_f(const float *a, const float *b, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += a[i] * b[i];
    return sum;
}

/* Bucket of x: argmax over the nb entries of [x R^T ; -x R^T], R (nb/2, HS). */
static int lsh_bucket(const float *x, const float *R, int half, int HS) {
    float best = -INFINITY;
    int bucket = 0;
    for (int c = 0; c < half; c++) {
        float d = dot_f(R + (long)c * HS, x, HS);
        if (d > best) { best = d; bucket = c; }
        if (-d > best) { best = -d; bucket = half + c; }
    }
    return bucket;
}

/* Bucket of x in round r of the rotations R (rounds, half, HS); one bucket (half = 0): 0. */
static int lsh_round_bucket(const float *x, const float *R, int r, int half, int HS) {
    return half > 0 ? lsh_bucket(x, R + (long)r * half * HS, half, HS) : 0;
}

/* Views of one head's LSH lists: first[r][b] the newest key in bucket b of round r,
 * next[r][j] the previous key in j's bucket (-1: none). */
typedef struct {
    const float *R;     /* (rounds, nb/2, HS) rotations */
    int32_t *first;     /* (rounds, nb) */
    int32_t *next;      /* (rounds, n_alloc) */
    int32_t *stamp;     /* (n_alloc,) stamp[j] == i + 1: j already listed for query i */
} LshHead;

static LshHead lsh_head(const Plan *p, const AttentionConfig *cfg, const AttentionShape *shape,
                        int n_alloc, void *state, int h) {
    int HS = shape->head_dim;
    LshHead v;
    v.R = (const float *)at(state, p->rand) + random_offset(p, h, 0, HS);
    v.first = (int32_t *)at(state, p->first) + (long)h * p->rounds * cfg->buckets;
    v.next = (int32_t *)at(state, p->next) + (long)h * p->rounds * n_alloc;
    v.stamp = (int32_t *)at(state, p->stamp) + (long)h * n_alloc;
    return v;
}

/* Adds key k (HS,) at position i to its bucket in every round. */
static void lsh_insert(const LshHead *v, const Plan *p, const AttentionConfig *cfg, int n_alloc,
                       int HS, const float *k, int i) {
    for (int r = 0; r < p->rounds; r++) {
        int b = lsh_round_bucket(k, v->R, r, p->rand_rows, HS);
        v->next[(long)r * n_alloc + i] = v->first[(long)r * cfg->buckets + b];
        v->first[(long)r * cfg->buckets + b] = i;
    }
}

/* The first position of the query at position i's local window (self included, so at
 * least one key even with local = 0). */
static int lsh_local_first(const AttentionConfig *cfg, int i) {
    int local = cfg->local > 1 ? cfg->local : 1;
    return i - local + 1 > 0 ? i - local + 1 : 0;
}

/* Candidates of query q at position i: the sinks, the local window (self included),
 * and every key sharing q's bucket in some round, each once, in position order. */
static int lsh_rows(const LshHead *v, const Plan *p, const AttentionConfig *cfg, int n_alloc,
                    int HS, const float *q, int i, int32_t *rows) {
    int32_t mark = i + 1;
    for (int j = 0; j < cfg->sinks && j <= i; j++) v->stamp[j] = mark;
    for (int j = lsh_local_first(cfg, i); j <= i; j++) v->stamp[j] = mark;
    for (int r = 0; r < p->rounds; r++) {
        int b = lsh_round_bucket(q, v->R, r, p->rand_rows, HS);
        for (int j = v->first[(long)r * cfg->buckets + b]; j >= 0;
             j = v->next[(long)r * n_alloc + j])
            v->stamp[j] = mark;
    }
    int n = 0;
    for (int j = 0; j <= i; j++)
        if (v->stamp[j] == mark) rows[n++] = j;
    return n;
}

/* ------------------------------------------------------------------------- */
/* The lab: recurrent variants (§5, §6)                                      */
/* Linear attention, Efficient Attention and Performer: O(1) state per head. */

/* elu(x) + 1: x + 1 for x > 0, exp(x) otherwise; always > 0. */
static float elu1(float x) { return x > 0.0f ? x + 1.0f : expf(x); }

/* out (HS,) = sum_c a_c S_c / den over rows S_c (HS,) of S (n, HS); zeros if den <= 0.
 * Divides rather than multiplying by 1/den: den may be subnormal (Performer features
 * of huge vectors), where 1/den overflows but each |sum_e| <= den max|v| stays finite. */
static void read_out(float *out, const float *a, const float *S, int n, int HS, float den) {
    for (int e = 0; e < HS; e++) out[e] = 0.0f;
    for (int c = 0; c < n; c++) {
        const float *S_c = S + (long)c * HS;
        for (int e = 0; e < HS; e++) out[e] += a[c] * S_c[e];
    }
    for (int e = 0; e < HS; e++) out[e] = den > 0.0f ? out[e] / den : 0.0f;
}

/* phi (HS,) = elu(x pre) + 1, linear attention's feature map of x (HS,); pre is 1, or
 * sqrt(scale) with prescale. */
static void linear_features(float *phi, const float *x, int HS, float pre) {
    for (int c = 0; c < HS; c++) phi[c] = elu1(x[c] * pre);
}

/* Linear attention's query side: phi (HS,) = phi(q); returns the denominator
 * phi(q) . z + eps, z (HS,) the sum of the key features so far. */
static float linear_query(float *phi, const float *q, const float *z, int HS, float pre) {
    float den = ATTENTION_LINEAR_EPS;
    linear_features(phi, q, HS, pre);
    for (int c = 0; c < HS; c++) den += phi[c] * z[c];
    return den;
}

/* x (n,) /= sqrt(mean(x^2) + ATTENTION_NORM_EPS), the RMS normalisation of linear
 * attention's norm=1 output; returns that root mean square r. */
static float rms_normalise(float *x, int n) {
    float sum2 = 0.0f;
    for (int i = 0; i < n; i++) sum2 += x[i] * x[i];
    float r = sqrtf(sum2 / (float)n + ATTENTION_NORM_EPS);
    for (int i = 0; i < n; i++) x[i] /= r;
    return r;
}

/* Linear attention's key side: phi_k (HS,) = phi(k); S += phi(k) v^T, z += phi(k).
 * rec (HS*HS + HS,): S (HS, HS), z (HS,). */
static void linear_fold(float *rec, int HS, float pre, const float *k, const float *v,
                        float *phi_k) {
    float *S = rec, *z = rec + HS * HS;
    linear_features(phi_k, k, HS, pre);
    for (int c = 0; c < HS; c++) {
        float f = phi_k[c];   /* a local: S could alias phi_k for the compiler */
        z[c] += f;
        for (int e = 0; e < HS; e++) S[c * HS + e] += f * v[e];
    }
}

/* Linear attention's query side: phi (HS,) = phi(q), and out (HS,) = phi^T S / (phi . z +
 * eps), returning that denominator; with norm, out = a / r for a = phi^T S and r its root
 * mean square (rms_normalise), returning r. */
static float linear_read(float *out, const float *rec, int HS, float pre, int norm,
                         const float *q, float *phi) {
    const float *S = rec, *z = rec + HS * HS;
    if (!norm) {
        float den = linear_query(phi, q, z, HS, pre);
        read_out(out, phi, S, HS, HS, den);
        return den;
    }
    linear_features(phi, q, HS, pre);
    read_out(out, phi, S, HS, HS, 1.0f);
    return rms_normalise(out, HS);
}

/* Linear attention: S += phi(k) v^T, z += phi(k); out = phi(q)^T S / (phi(q) . z + eps), or
 * with norm phi(q)^T S over its root mean square. rec (HS*HS + HS,); phi (2 HS,) scratch;
 * pre multiplies q and k before phi. */
static void linear_step(float *rec, int HS, float pre, int norm, const float *k,
                        const float *v, const float *q, float *out, float *phi) {
    linear_fold(rec, HS, pre, k, v, phi + HS);
    if (!out) return;   /* append only */
    linear_read(out, rec, HS, pre, norm, q, phi);
}

/* Folds one key into sums kept relative to a running maximum M (Efficient Attention: one
 * per feature; Performer: one over all features). If the key's largest logit l_max exceeds
 * M, the sums z (n,) are rescaled by f = exp(M - l_max) (0 while M = -inf), which is exact,
 * and M becomes l_max. Then w (n,) = exp(l - M) <= 1 (w may be l) and z += w. Returns f,
 * or 1 if M stayed: the caller rescales its value sums by it (skipping a multiplication by
 * 1 changes no bit). */
static float fold_key(float *M, float *z, float *w, const float *l, int n, float l_max) {
    float f = 1.0f;
    if (l_max > *M) {   /* a new maximum: rescale what was summed under the old one */
        f = expf(*M - l_max);
        for (int c = 0; c < n; c++) z[c] *= f;
        *M = l_max;
    }
    for (int c = 0; c < n; c++) {
        w[c] = expf(l[c] - *M);
        z[c] += w[c];
    }
    return f;
}

/* p (HS,) = softmax(q), Efficient Attention's query normalisation over the features. */
static void efficient_softmax(float *p, const float *q, int HS) {
    float qmax = -INFINITY, sum = 0.0f;
    for (int c = 0; c < HS; c++) if (q[c] > qmax) qmax = q[c];
    for (int c = 0; c < HS; c++) sum += (p[c] = expf(q[c] - qmax));
    for (int c = 0; c < HS; c++) p[c] = p[c] / sum;
}

/* Efficient Attention's query side: p (HS,) = softmax(q)_c / z_c, the factor by which
 * feature c's value sums enter the output. */
static void efficient_query(float *p, const float *q, const float *z, int HS) {
    efficient_softmax(p, q, HS);
    for (int c = 0; c < HS; c++) p[c] = p[c] / z[c];
}

/* Efficient Attention's key side: per feature c, fold k_c into the running max m_c and the
 * sums z_c = sum exp(k_jc - m_c), S_c = sum exp(k_jc - m_c) v_j. rec (HS*HS + 2 HS,):
 * S (HS, HS), z (HS,), m (HS,). */
static void efficient_fold(float *rec, int HS, const float *k, const float *v) {
    float *S = rec, *z = rec + HS * HS, *mx = z + HS;
    for (int c = 0; c < HS; c++) {
        float *S_c = S + (long)c * HS, w;
        float f = fold_key(&mx[c], &z[c], &w, &k[c], 1, k[c]);
        if (f != 1.0f)
            for (int e = 0; e < HS; e++) S_c[e] *= f;
        for (int e = 0; e < HS; e++) S_c[e] += w * v[e];
    }
}

/* Efficient Attention, causal: per feature c a softmax over the prefix of key column c,
 * kept as running max m_c, z_c = sum exp(k_jc - m_c), S_c = sum exp(k_jc - m_c) v_j;
 * out = sum_c softmax(q)_c S_c / z_c. rec (HS*HS + 2 HS,); p (HS,) scratch. */
static void efficient_step(float *rec, int HS, const float *k, const float *v, const float *q,
                           float *out, float *p) {
    efficient_fold(rec, HS, k, v);
    if (!out) return;   /* append only */
    efficient_query(p, q, rec + HS * HS, HS);
    read_out(out, p, rec, HS, HS, 1.0f);
}

/* Performer feature logits l_f = w_f . (x s) - |x s|^2 / 2 into l (m,); returns max. */
static float favor_logits(float *l, const float *W, int m, int HS, const float *x, float s) {
    float norm2 = 0.0f, max = -INFINITY;
    for (int i = 0; i < HS; i++) norm2 += (x[i] * s) * (x[i] * s);
    for (int f = 0; f < m; f++) {
        l[f] = dot_f(W + (long)f * HS, x, HS) * s - 0.5f * norm2;
        if (l[f] > max) max = l[f];
    }
    return max;
}

/* Performer's query side: phi (m,) = exp(l(q) - shift); returns the denominator phi . z,
 * which is >= 1. Any shift cancels in the ratio; this one is the largest term's,
 * max_c l_c(q) + log z_c, so that term is exactly 1. (Why not the query's own maximum:
 * where the query's strongest features are the keys' weakest, every phi_c z_c would
 * underflow to 0, and the output with it.) A feature whose key sum z_c is below FLT_MIN
 * (less than 1e-38 of the strongest key's weight) is left out, so that phi_c <= 1 / z_c
 * stays finite; the feature that holds the running maximum always has z_c >= 1. */
static float performer_query(float *phi, const float *W, int m, int HS, float s, const float *q,
                             const float *z) {
    float shift = -INFINITY, den = 0.0f;
    favor_logits(phi, W, m, HS, q, s);
    for (int c = 0; c < m; c++) {
        float term = z[c] >= FLT_MIN ? phi[c] + logf(z[c]) : -INFINITY;   /* log phi_c z_c */
        if (term > shift) shift = term;
    }
    for (int c = 0; c < m; c++) {
        phi[c] = z[c] >= FLT_MIN ? expf(phi[c] - shift) : 0.0f;
        den += phi[c] * z[c];
    }
    return den;
}

/* Performer's key side: E (m,) = the key's features exp(l(k) - M) under the running maximum
 * M of every key logit so far, which the key may raise (fold_key: S and z are rescaled by
 * exp(M - M'), exact); S += E v^T, z += E. rec (m*HS + m + 1,): S (m, HS), z (m,), M. */
static void performer_fold(float *rec, const float *W, int m, int HS, float s, const float *k,
                           const float *v, float *E) {
    float *S = rec, *z = rec + (long)m * HS, *M = z + m;
    float key_max = favor_logits(E, W, m, HS, k, s);
    float f = fold_key(M, z, E, E, m, key_max);   /* E becomes the key's features */
    if (f != 1.0f)
        for (long i = 0; i < (long)m * HS; i++) S[i] *= f;
    for (int c = 0; c < m; c++) {
        float *S_c = S + (long)c * HS;
        for (int e = 0; e < HS; e++) S_c[e] += E[c] * v[e];
    }
}

/* FAVOR+ with positive features phi(x)_f = exp(l_f(x)) (1/sqrt(m) cancels in the ratio).
 * Keys: a running max M over all key logits so far; when a key raises it, S and z are
 * rescaled by exp(M - M'), which is exact (fold_key). Queries: performer_query's shift,
 * which cancels. rec (m*HS + m + 1,); phi (m,) scratch. */
static void performer_step(float *rec, const float *W, int m, int HS, float s, const float *k,
                           const float *v, const float *q, float *out, float *phi) {
    performer_fold(rec, W, m, HS, s, k, v, phi);
    if (!out) return;   /* append only */
    float *S = rec, *z = rec + (long)m * HS;
    read_out(out, phi, S, m, HS, performer_query(phi, W, m, HS, s, q, z));
}

/* ------------------------------------------------------------------------- */
/* The lab: the Synthesizer (§16)                                            */
/* Weights without comparing queries with keys: head h's logits over positions 0 .. i come
 * from learned parameters alone (Random, factorized Random) or from the query's own token
 * through a two-layer map (Dense, factorized Dense) whose first layer is W_Q with a ReLU
 * (relu(q_i), q_i = xn_i W_Q^T + b_Q, not rotated) and whose second is the head's W (L, HS)
 * and b (L,). The softmax over keys 0 .. i and the sum of values are every softmax kind's
 * (attend_scored). */

/* Floats of one head's parameters (attention.h's layout), 0 if cfg cannot have them; at most
 * 2^28 per head, so that no size here overflows a 32-bit size_t times NH. */
static size_t synth_head_floats(const AttentionConfig *cfg, int HS) {
    uint64_t L = (uint64_t)cfg->synth_len, F = (uint64_t)cfg->factor, n = 0;
    if (cfg->synth_len < 1 || cfg->synth_len > ATTENTION_MAX_INT || HS < 1) return 0;
    switch (cfg->kind) {
    case ATTENTION_SYNTH_RANDOM: n = L * L; break;                  /* R (L, L) */
    case ATTENTION_SYNTH_DENSE: n = L * ((uint64_t)HS + 1); break;  /* W (L, HS), b (L,) */
    case ATTENTION_SYNTH_FRANDOM:                      /* R1, R2 (L, k), k <= L: rank <= L */
        if (cfg->factor >= 1 && cfg->factor <= cfg->synth_len) n = 2 * L * F;
        break;
    case ATTENTION_SYNTH_FDENSE:          /* WA (a, HS), bA (a,), WB (L/a, HS), bB (L/a,) */
        if (cfg->factor >= 1 && cfg->synth_len % cfg->factor == 0)
            n = (F + L / F) * ((uint64_t)HS + 1);
        break;
    default: break;
    }
    return n <= ((uint64_t)1 << 28) ? (size_t)n : 0;
}

size_t attention_synth_floats(const AttentionConfig *cfg, const AttentionShape *shape) {
    size_t head = synth_head_floats(cfg, shape->head_dim);
    if (shape->n_heads < 1 || head > SIZE_MAX / sizeof(float) / (size_t)shape->n_heads) return 0;
    return (size_t)shape->n_heads * head;
}

/* Head h's parameters in cfg->synth. */
static const float *synth_head(const AttentionConfig *cfg, int HS, int h) {
    return cfg->synth + (size_t)h * synth_head_floats(cfg, HS);
}

/* Floats of work synth_logits and synth_logits_backward need, for the Dense forms: u =
 * relu(q) and its gradient du (HS,) each; for the factorized one also du's share from B
 * (HS,), then A (a,), B (L/a,), dA (a,), dB (L/a,). */
static size_t synth_work_floats(const AttentionConfig *cfg, int HS) {
    if (cfg->kind == ATTENTION_SYNTH_DENSE) return 2 * (size_t)HS;
    if (cfg->kind != ATTENTION_SYNTH_FDENSE || cfg->factor < 1) return 0;
    return 3 * (size_t)HS + 2 * ((size_t)cfg->factor + (size_t)(cfg->synth_len / cfg->factor));
}

/* u (n,) = relu(x), the first layer's output of the Dense forms. */
static void relu(float *u, const float *x, int n) {
    for (int c = 0; c < n; c++) u[c] = x[c] > 0.0f ? x[c] : 0.0f;
}

/* s (i + 1,) = a head's logits for the query at position i over keys 0 .. i; P its
 * parameters, q_i (HS,) its query (read by the Dense forms only); work
 * (synth_work_floats,) scratch. */
static void synth_logits(const AttentionConfig *cfg, const float *P, int HS, const float *q_i,
                         int i, float *s, float *work) {
    long L = cfg->synth_len, F = cfg->factor;
    float *u = work;
    switch (cfg->kind) {
    case ATTENTION_SYNTH_RANDOM:   /* row i of R */
        memcpy(s, P + i * L, (size_t)(i + 1) * sizeof(float));
        break;
    case ATTENTION_SYNTH_FRANDOM:   /* R1[i] . R2[j] */
        kernels_dots(s, P + i * F, P + L * F, (int)F, NULL, i + 1, (int)F);
        break;
    case ATTENTION_SYNTH_DENSE: {   /* W[j] . relu(q_i) + b[j] */
        const float *b = P + L * HS;
        relu(u, q_i, HS);
        kernels_dots(s, u, P, HS, NULL, i + 1, HS);
        for (int j = 0; j <= i; j++) s[j] += b[j];
        break;
    }
    case ATTENTION_SYNTH_FDENSE: {   /* A[j % a] B[j / a]: A tiled, B repeated */
        const float *WA = P, *bA = WA + F * HS, *WB = bA + F, *bB = WB + (L / F) * HS;
        float *A = work + 3 * HS, *B = A + F;
        int nA = i + 1 < F ? i + 1 : (int)F, nB = (int)(i / F) + 1;   /* the ones keys 0..i use */
        relu(u, q_i, HS);
        kernels_dots(A, u, WA, HS, NULL, nA, HS);
        kernels_dots(B, u, WB, HS, NULL, nB, HS);
        for (int r = 0; r < nA; r++) A[r] += bA[r];
        for (int r = 0; r < nB; r++) B[r] += bB[r];
        for (int j = 0; j <= i; j++) s[j] = A[j % F] * B[j / F];
        break;
    }
    default:
        break;
    }
}

/* The backward of synth_logits (called after it, with the same work): from ds (i + 1,) =
 * d loss / d s, adds into dP (the head's parameters' gradient, P's layout) and, for the
 * Dense forms, into dq_i (HS,) through the ReLU (whose derivative at 0 is taken as 0). */
static void synth_logits_backward(const AttentionConfig *cfg, const float *P, float *dP, int HS,
                                  const float *q_i, float *dq_i, int i, const float *ds,
                                  float *work) {
    long L = cfg->synth_len, F = cfg->factor;
    float *u = work, *du = work + HS;
    switch (cfg->kind) {
    case ATTENTION_SYNTH_RANDOM:
        for (int j = 0; j <= i; j++) dP[i * L + j] += ds[j];
        return;
    case ATTENTION_SYNTH_FRANDOM: {
        const float *R1 = P + i * F, *R2 = P + L * F;
        float *dR1 = dP + i * F, *dR2 = dP + L * F;
        for (int j = 0; j <= i; j++)
            for (long c = 0; c < F; c++) {
                dR1[c] += ds[j] * R2[j * F + c];
                dR2[j * F + c] += ds[j] * R1[c];
            }
        return;
    }
    case ATTENTION_SYNTH_DENSE: {   /* dW[j] += ds_j u, db[j] += ds_j, du = sum_j ds_j W[j] */
        float *db = dP + L * HS;
        for (int j = 0; j <= i; j++) {
            float *dW_j = dP + (long)j * HS;
            for (int c = 0; c < HS; c++) dW_j[c] += ds[j] * u[c];
            db[j] += ds[j];
        }
        kernels_weighted_sum(du, ds, 1.0f, P, HS, NULL, i + 1, HS);
        break;
    }
    case ATTENTION_SYNTH_FDENSE: {
        const float *WA = P, *WB = WA + F * HS + F;
        float *dWA = dP, *dbA = dWA + F * HS, *dWB = dbA + F, *dbB = dWB + (L / F) * HS;
        float *du_b = work + 2 * HS, *A = work + 3 * HS, *B = A + F, *dA = B + L / F;
        float *dB = dA + F;
        int nA = i + 1 < F ? i + 1 : (int)F, nB = (int)(i / F) + 1;
        memset(dA, 0, (size_t)nA * sizeof(float));
        memset(dB, 0, (size_t)nB * sizeof(float));
        for (int j = 0; j <= i; j++) {
            dA[j % F] += ds[j] * B[j / F];
            dB[j / F] += ds[j] * A[j % F];
        }
        for (int r = 0; r < nA; r++) {
            for (int c = 0; c < HS; c++) dWA[r * HS + c] += dA[r] * u[c];
            dbA[r] += dA[r];
        }
        for (int r = 0; r < nB; r++) {
            for (int c = 0; c < HS; c++) dWB[r * HS + c] += dB[r] * u[c];
            dbB[r] += dB[r];
        }
        /* du = sum_r dA_r WA[r] + sum_r dB_r WB[r] */
        kernels_weighted_sum(du, dA, 1.0f, WA, HS, NULL, nA, HS);
        kernels_weighted_sum(du_b, dB, 1.0f, WB, HS, NULL, nB, HS);
        for (int c = 0; c < HS; c++) du[c] += du_b[c];
        break;
    }
    default:
        return;
    }
    for (int c = 0; c < HS; c++)   /* through the ReLU */
        if (q_i[c] > 0.0f) dq_i[c] += du[c];
}

/* ------------------------------------------------------------------------- */
/* The lab: the step                                                         */

/* One call of attention_step, for its per-kv-head jobs. */
typedef struct {
    const AttentionConfig *cfg;
    const AttentionShape *shape;
    Plan p;
    void *state;
    int n_alloc, pos, T;
    float *out, *scratch;
    const float *q, *k_new, *v_new;
} StepJob;

/* kv head g of attention_step: its rows of the K/V store, the state and scratch of its
 * query heads and their columns of out, in the order t, h (exact and
 * Gaussian attention: a block of queries, then h). */
static void step_kv_head(void *ctx, int g) {
    const StepJob *s = ctx;
    const AttentionConfig *cfg = s->cfg;
    const AttentionShape *shape = s->shape;
    const Plan p = s->p;
    void *state = s->state;
    int n_alloc = s->n_alloc, pos = s->pos, T = s->T;
    float *out = s->out, *scratch = s->scratch;
    const float *q = s->q, *k_new = s->k_new, *v_new = s->v_new;
    int NH = shape->n_heads, NKV = shape->n_kv_heads, HS = shape->head_dim;
    int group = NH / NKV, kv_stride = HS;   /* floats between a kv head's rows of the store */
    float scale = config_scale(cfg, shape);
    float *key = at(state, p.key), *value = at(state, p.value);
    float *rec = at(state, p.rec);
    int32_t *lists = at(state, p.list);
    const float *random = at(state, p.rand);
    /* exact and Gaussian attention: a block of queries at once, the rest one by one */
    int block = out && (cfg->kind == ATTENTION_EXACT || cfg->kind == ATTENTION_GAUSS)
                ? QUERY_BLOCK : 1;
    for (int t0 = 0; t0 < T; t0 += block) {
        int n_q = T - t0 < block ? T - t0 : block, t = t0, i = pos + t;
        /* append k, v of positions pos+t0 .. pos+t0+n_q-1, kv head g (a ring overwrites
         * its oldest slot) */
        for (int a = t0; a < t0 + n_q && p.kv_rows > 0; a++) {
            long row = ((long)g * p.kv_rows + store_row(&p, pos + a)) * HS;
            const float *k_a = k_new + ((long)a * NKV + g) * HS;
            const float *v_a = v_new + ((long)a * NKV + g) * HS;
            if (p.value > p.key) memcpy(key + row, k_a, (size_t)HS * sizeof(float));
            memcpy(value + row, v_a, (size_t)HS * sizeof(float));
        }
        const float *k_t = k_new + ((long)t * NKV + g) * HS;   /* (block 1: t = t0) */
        const float *v_t = v_new + ((long)t * NKV + g) * HS;
        for (int h = g * group; h < (g + 1) * group; h++) {
            const float *q_t = q ? q + ((long)t * NH + h) * HS : NULL;
            float *out_t = out ? out + ((long)t * NH + h) * HS : NULL;
            float *work_h = scratch + (long)h * p.score_cap;
            float *rec_h = rec + (long)h * p.rec_floats;
            int32_t *rows = lists + (long)h * p.list_cap;
            const float *k_g = key + (long)g * p.kv_rows * HS;   /* this kv head's rows */
            const float *v_g = value + (long)g * p.kv_rows * HS;
            Scoring sc = config_scoring(cfg, shape, h);
            int n;
            if (!out && cfg->kind != ATTENTION_LSH && p.rec_floats == 0) continue;
            switch (cfg->kind) {
            case ATTENTION_EXACT: case ATTENTION_GAUSS:
                attend_causal(out_t, NH * HS, q_t, NH * HS, n_q, k_g, v_g, kv_stride, i + 1,
                              HS, sc, work_h, NULL, 0, 0, NULL);
                break;
            case ATTENTION_WINDOW: case ATTENTION_DILATED:
            case ATTENTION_STRIDED: case ATTENTION_FIXED:
                n = pattern_rows(&p, cfg, i, rows);
                attend_rows(out_t, q_t, k_g, v_g, kv_stride, rows, n, HS, sc, work_h, NULL,
                            0);
                break;
            case ATTENTION_LSH: {
                LshHead lsh = lsh_head(&p, cfg, shape, n_alloc, state, h);
                lsh_insert(&lsh, &p, cfg, n_alloc, HS, k_t, i);
                if (!out) break;
                n = lsh_rows(&lsh, &p, cfg, n_alloc, HS, q_t, i, rows);
                attend_rows(out_t, q_t, k_g, v_g, kv_stride, rows, n, HS, sc, work_h, NULL,
                            0);
                break;
            }
            case ATTENTION_LINEAR:
                linear_step(rec_h, HS, cfg->prescale ? sqrtf(scale) : 1.0f, cfg->norm, k_t,
                            v_t, q_t, out_t, work_h);
                break;
            case ATTENTION_EFFICIENT:
                efficient_step(rec_h, HS, k_t, v_t, q_t, out_t, work_h);
                break;
            case ATTENTION_PERFORMER:
                performer_step(rec_h, random + random_offset(&p, h, 0, HS), cfg->features,
                               HS, sqrtf(scale), k_t, v_t, q_t, out_t, work_h);
                break;
            case ATTENTION_SYNTH_RANDOM: case ATTENTION_SYNTH_DENSE:
            case ATTENTION_SYNTH_FRANDOM: case ATTENTION_SYNTH_FDENSE:
                synth_logits(cfg, synth_head(cfg, HS, h), HS, q_t, i, work_h,
                             work_h + p.kv_rows);
                attend_scored(out_t, v_g, kv_stride, NULL, i + 1, HS, sc, work_h, NULL, 0);
                break;
            default:
                break;
            }
        }
    }
}

int attention_step(const AttentionConfig *cfg, const AttentionShape *shape, void *state,
                   int n_alloc, float *out, const float *q, const float *k_new,
                   const float *v_new, int pos, int T, float *scratch) {
    Plan p;
    if (plan(&p, cfg, shape, n_alloc) != 0 || T < 1 || pos < 0 || pos > n_alloc - T ||
        (attention_is_synth(cfg->kind) && !cfg->synth)) return -1;
    StateHeader *header = state;
    int full_cache = cfg->kind == ATTENTION_EXACT || cfg->kind == ATTENTION_GAUSS ||
                     cfg->kind == ATTENTION_STRIDED || cfg->kind == ATTENTION_FIXED ||
                     attention_is_synth(cfg->kind);
    if (pos != 0 && pos != header->next_pos && !full_cache) return -1;
    if (pos == 0) reset_sequence(&p, cfg, shape, n_alloc, state);
    /* Each kv head g is one job: it alone writes its rows of the K/V store, the state
     * and scratch of its query heads, and their columns of out. So the bits do not depend
     * on the thread count. Work is about NH T HS times the keys (or recurrent rows) each
     * query reads; small steps stay on the calling thread. */
    StepJob job = {cfg, shape, p, state, n_alloc, pos, T, out, scratch, q, k_new, v_new};
    long rows = p.kv_rows > 0 ? p.kv_rows : p.rec_floats / shape->head_dim + 1;
    kernels_parallel_for(step_kv_head, &job, shape->n_kv_heads,
                         (double)shape->n_heads * T * shape->head_dim * rows);
    header->next_pos = pos + T;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The lab: attention weights                                                */
/*
 * What a variant gives each key, recomputed from q and k, for heatmaps and explanation.
 * Each kind's weights come from the step's own pieces
 * (score_rows and softmax_unnormalised, the visible-set predicates, lsh_round_bucket,
 * linear_query, fold_key, efficient_query, favor_logits, performer_query), so that
 * sum_j w_ij v_j is what attention_step outputs for query i.
 */

/* One head's views for attention_weights. */
typedef struct {
    float *w;           /* (T - q0, T) this head's rows of w */
    const float *q;     /* q[i, h, :] at q + i * q_stride */
    const float *k;     /* k[j, g, :] at k + j * kv_stride, g this head's kv head */
    const float *R;     /* (rounds, rand_rows, HS) this head's random matrices, or NULL */
    const float *P;     /* a Synthesizer's parameters of this head, or NULL */
    int q_stride, kv_stride, HS, q0, T;
    float scale;        /* config_scale */
    float *work;        /* (weights_head_floats(),) scratch */
} WeightsHead;

/* Floats of scratch one head of attention_weights uses for T positions. */
static size_t weights_head_floats(const AttentionConfig *cfg, int HS, int T) {
    size_t t = (size_t)T;
    switch (cfg->kind) {
    case ATTENTION_LINEAR:      /* phi(k) (T, HS); z, phi(q) (HS,) */
        return t * HS + 2 * (size_t)HS;
    case ATTENTION_EFFICIENT:   /* running max, z, p (HS,) */
        return 3 * (size_t)HS;
    case ATTENTION_PERFORMER:   /* key features (T, m), running max after each key (T,); */
                                /* z, phi(q) (m,) */
        return t * cfg->features + t + 2 * (size_t)cfg->features;
    case ATTENTION_LSH:         /* scores, visible scores (T,); key buckets (rounds, T); */
                                /* the query's buckets (rounds,) */
        return 2 * t + (size_t)cfg->rounds * t + (size_t)cfg->rounds;
    default:                    /* scores, visible scores (T,); a Synthesizer's work */
        return 2 * t + synth_work_floats(cfg, HS);
    }
}

/* 1 if LSH lets the query at position i see key j <= i (the set lsh_rows lists): a sink, in
 * the local window, or sharing the query's bucket in some round. key_bucket (rounds, T),
 * query_bucket (rounds,): bucket numbers, small integers, so exact as floats. */
static int lsh_visible(const AttentionConfig *cfg, int i, int j, const float *key_bucket, int T,
                       const float *query_bucket) {
    if (j < cfg->sinks || j >= lsh_local_first(cfg, i)) return 1;
    for (int r = 0; r < cfg->rounds; r++)
        if (key_bucket[(long)r * T + j] == query_bucket[r]) return 1;
    return 0;
}

/* Softmax kinds: query i's weights over its visible keys in position order, through
 * score_rows and softmax_unnormalised as attend_rows computes them (sc: head h's), so the
 * same bits. */
static void weights_softmax(const WeightsHead *v, const AttentionConfig *cfg, Scoring sc,
                            int half) {
    int T = v->T, HS = v->HS, lsh = cfg->kind == ATTENTION_LSH;
    float *scores = v->work, *visible = scores + T;
    float *key_bucket = lsh ? visible + T : NULL;                          /* (rounds, T) */
    float *query_bucket = lsh ? key_bucket + (long)cfg->rounds * T : NULL; /* (rounds,) */
    for (int r = 0; lsh && r < cfg->rounds; r++)   /* LSH: hash every key as lsh_insert does */
        for (int j = 0; j < T; j++)
            key_bucket[(long)r * T + j] =
                (float)lsh_round_bucket(v->k + (long)j * v->kv_stride, v->R, r, half, HS);
    for (int i = v->q0; i < T; i++) {
        const float *q_i = v->q + (long)i * v->q_stride;
        float *w_i = v->w + (long)(i - v->q0) * T;
        for (int r = 0; lsh && r < cfg->rounds; r++)
            query_bucket[r] = (float)lsh_round_bucket(q_i, v->R, r, half, HS);
        /* score keys 0 .. i; keep the visible scores in position order, mark the rest NaN */
        if (v->P) synth_logits(cfg, v->P, HS, q_i, i, scores, visible + T);
        else score_rows(scores, q_i, v->k, v->kv_stride, NULL, i + 1, HS, sc);
        int n = 0;
        for (int j = 0; j < T; j++) {
            int seen = j <= i && (lsh ? lsh_visible(cfg, i, j, key_bucket, T, query_bucket)
                                      : pattern_visible(cfg, i, j));
            w_i[j] = seen ? 0.0f : NAN;
            if (seen) visible[n++] = scores[j];
        }
        float inv_sum = softmax_unnormalised(visible, n, sc, NULL);
        n = 0;
        for (int j = 0; j <= i; j++)
            if (!isnan(w_i[j])) w_i[j] = visible[n++] * inv_sum;
    }
}

/* Linear attention: w_ij = phi(q_i) . phi(k_j) / (phi(q_i) . z_i + eps), z_i the sum of
 * phi(k_0 .. k_i) in linear_step's order. The weights sum to phi.z / (phi.z + eps) < 1.
 * With norm, whose output divides phi(q_i)^T S by a root mean square that depends on the
 * values, the denominator is phi(q_i) . z_i alone: each key's share, summing to 1. */
static void weights_linear(const WeightsHead *v, float pre, int norm) {
    int T = v->T, HS = v->HS;
    float *phi_k = v->work, *z = phi_k + (long)T * HS, *phi_q = z + HS;
    for (int c = 0; c < HS; c++) z[c] = 0.0f;
    for (int i = 0; i < T; i++) {
        float *phi_i = phi_k + (long)i * HS;
        linear_features(phi_i, v->k + (long)i * v->kv_stride, HS, pre);
        for (int c = 0; c < HS; c++) z[c] += phi_i[c];
        if (i < v->q0) continue;
        float den = linear_query(phi_q, v->q + (long)i * v->q_stride, z, HS, pre);
        if (norm) den = dot_f(phi_q, z, HS);
        float *w_i = v->w + (long)(i - v->q0) * T;
        for (int j = 0; j < T; j++)
            w_i[j] = j > i ? NAN : den > 0.0f ? dot_f(phi_q, phi_k + (long)j * HS, HS) / den
                                              : 0.0f;
    }
}

/* Efficient Attention: w_ij = sum_c p_ic exp(k_jc - m_ic), with the running maxima m_ic and
 * sums z_ic of efficient_step (the same folds, so the same bits) and p_ic = softmax(q_i)_c
 * / z_ic: key j's share of the sums S_c the step reads out. */
static void weights_efficient(const WeightsHead *v) {
    int T = v->T, HS = v->HS;
    float *mx = v->work, *z = mx + HS, *p = z + HS;
    for (int c = 0; c < HS; c++) {
        mx[c] = -INFINITY;
        z[c] = 0.0f;
    }
    for (int i = 0; i < T; i++) {
        const float *k_i = v->k + (long)i * v->kv_stride;
        for (int c = 0; c < HS; c++) {
            float w;
            fold_key(&mx[c], &z[c], &w, &k_i[c], 1, k_i[c]);
        }
        if (i < v->q0) continue;
        efficient_query(p, v->q + (long)i * v->q_stride, z, HS);
        float *w_i = v->w + (long)(i - v->q0) * T;
        for (int j = 0; j < T; j++) {
            const float *k_j = v->k + (long)j * v->kv_stride;
            float sum = 0.0f;
            for (int c = 0; j <= i && c < HS; c++) sum += p[c] * expf(k_j[c] - mx[c]);
            w_i[j] = j <= i ? sum : NAN;
        }
    }
}

/* Performer: key j's features E_j = exp(l(k_j) - M_j) as fold_key left them (M_j the running
 * maximum after key j), so w_ij = exp(M_j - M_i) phi(q_i) . E_j / (phi(q_i) . z_i): key j's
 * share of the rescaled S the step reads out for query i. m features. */
static void weights_performer(const WeightsHead *v, int m) {
    int T = v->T, HS = v->HS;
    float *E = v->work, *M_after = E + (long)T * m, *z = M_after + T, *phi_q = z + m;
    float M = -INFINITY, s = sqrtf(v->scale);
    for (int c = 0; c < m; c++) z[c] = 0.0f;
    for (int i = 0; i < T; i++) {
        float *E_i = E + (long)i * m;
        float key_max = favor_logits(E_i, v->R, m, HS, v->k + (long)i * v->kv_stride, s);
        fold_key(&M, z, E_i, E_i, m, key_max);
        M_after[i] = M;
        if (i < v->q0) continue;
        float den = performer_query(phi_q, v->R, m, HS, s, v->q + (long)i * v->q_stride, z);
        float *w_i = v->w + (long)(i - v->q0) * T;
        for (int j = 0; j < T; j++) {
            /* read_out's rule: divide, and zeros if den <= 0; key j's features are
             * brought to the current maximum before the product, so that each term stays
             * below phi_c z_c <= 1 (phi_c may be large where z_c is small) */
            float share = NAN;
            if (j <= i) {
                const float *E_j = E + (long)j * m;
                float g = expf(M_after[j] - M);
                share = 0.0f;
                for (int c = 0; c < m; c++) share += phi_q[c] * (E_j[c] * g);
            }
            w_i[j] = j > i ? NAN : den > 0.0f ? share / den : 0.0f;
        }
    }
}

size_t attention_weights_scratch_floats(const AttentionConfig *cfg, const AttentionShape *shape,
                                        int T) {
    Plan p;
    if (T < 1 || plan(&p, cfg, shape, T) != 0) return 0;
    return (size_t)shape->n_heads * weights_head_floats(cfg, shape->head_dim, T);
}

/* One call of attention_weights, for its per-head jobs. */
typedef struct {
    const AttentionConfig *cfg;
    const AttentionShape *shape;
    Plan p;
    const void *state;
    float *w, *scratch;
    const float *q, *k;
    int q0, T;
} WeightsJob;

/* Head h of attention_weights: its rows of w, its part of scratch. */
static void weights_head(void *ctx, int h) {
    const WeightsJob *j = ctx;
    const AttentionConfig *cfg = j->cfg;
    int NH = j->shape->n_heads, NKV = j->shape->n_kv_heads, HS = j->shape->head_dim;
    int group = NH / NKV, q0 = j->q0, T = j->T;
    const float *random = j->p.rand_rows > 0
                          ? (const float *)((const char *)j->state + j->p.rand) : NULL;
    WeightsHead v = {
        .w = j->w + (long)h * (T - q0) * T,          /* seek to w[h, 0, 0] */
        .q = j->q + (long)h * HS,                      /* q[0, h, :] */
        .k = j->k + (long)(h / group) * HS,            /* k[0, g, :] */
        .R = random ? random + random_offset(&j->p, h, 0, HS) : NULL,
        .P = attention_is_synth(cfg->kind) ? synth_head(cfg, HS, h) : NULL,
        .q_stride = NH * HS, .kv_stride = NKV * HS, .HS = HS, .q0 = q0, .T = T,
        .scale = config_scale(cfg, j->shape),
        .work = j->scratch + (long)h * weights_head_floats(cfg, HS, T)};
    switch (cfg->kind) {
    case ATTENTION_LINEAR:
        weights_linear(&v, cfg->prescale ? sqrtf(v.scale) : 1.0f, cfg->norm);
        break;
    case ATTENTION_EFFICIENT:
        weights_efficient(&v);
        break;
    case ATTENTION_PERFORMER:
        weights_performer(&v, cfg->features);
        break;
    default:
        weights_softmax(&v, cfg, config_scoring(cfg, j->shape, h), j->p.rand_rows);
        break;
    }
}

int attention_weights(const AttentionConfig *cfg, const AttentionShape *shape, const void *state,
                      int n_alloc, float *w, const float *q, const float *k, int q0, int T,
                      float *scratch) {
    Plan p;
    if (plan(&p, cfg, shape, n_alloc) != 0 || T < 1 || T > n_alloc || q0 < 0 || q0 >= T || !w ||
        !q || !k || !scratch || (p.rand_rows > 0 && !state) ||
        (attention_is_synth(cfg->kind) && !cfg->synth)) return -1;
    /* Each head is one job: it writes only its own rows of w and its own part of scratch,
     * in a fixed order, so the bits do not depend on the thread count. Work is about
     * NH T HS times the queries plus the random features; small calls stay serial. */
    WeightsJob job = {cfg, shape, p, state, w, scratch, q, k, q0, T};
    kernels_parallel_for(weights_head, &job, shape->n_heads,
                         (double)shape->n_heads * T * shape->head_dim * (T - q0 + p.rand_rows));
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Backward of exact attention                                               */

/* Queries per block of attention_backward: its products run over blocks of this many
 * queries by all the keys they see. */
#define BACKWARD_QUERIES 32

/* Floats of one kv head's scratch in attention_backward, for T positions. */
static size_t backward_head_floats(int T, int HS) {
    /* v^T (HS, T), k packed (T, HS), a query's mask factors (T), and three
     * (BACKWARD_QUERIES, T) tables */
    return (size_t)T * (2 * (size_t)HS + 1 + 3 * BACKWARD_QUERIES);
}

size_t attention_backward_scratch_floats(const AttentionShape *shape, int T) {
    /* one block per kv head, so kv heads run in parallel */
    return (size_t)shape->n_kv_heads * backward_head_floats(T, shape->head_dim);
}

/* The softmax half of attend_rows' backward for one head and one query, with p (n_keys,)
 * holding the scores of the keys listed in rows (NULL: 0 .. n_keys-1): recompute the weights
 * as the forward does, add the gradients of the values into dv, and leave in dp (n_keys,)
 * each score's gradient ds_j = p_j (dp_j - mean_dp). With dropout the forward summed
 * p_j m_j v_j (m_j = 0 or 1 / (1 - p), the mask of this head and query, starting at index
 * `first`), so m_j scales both dv_j and dp_j. A sink (sc.sink) is a key of value 0, so its
 * dp is 0, its ds = p_sink (0 - mean_dp), and with dsink (NULL: not wanted) that is added
 * to *dsink.
 *   dout_t (HS,); v, dv (rows, kv_stride) at this kv head's columns; dv overlaps nothing
 *   else (restrict: the compiler then vectorises its loop without run-time overlap checks). */
static void softmax_backward(float *restrict dv, float *dsink, const float *restrict dout_t,
                             const float *restrict v, int kv_stride, const int32_t *rows,
                             int n_keys, int HS, Scoring sc, const AttentionDropout *drop,
                             uint64_t first, float *p, float *dp) {
    /* the weights through the forward's own step, so p has the forward's bits */
    float sink_exp;
    float inv_sum = softmax_unnormalised(p, n_keys, sc, &sink_exp);
    /* the mask's factors m_j go into dp first (ones without dropout) */
    for (int n = 0; n < n_keys; n++) dp[n] = 1.0f;
    if (drop) dropout_weights(dp, n_keys, drop, first, rows);
    /* dp_j = m_j (dout . v_j), dv_j += p_j m_j dout, and the softmax's weighted mean of dp */
    float mean_dp = 0.0f;
    for (int n = 0; n < n_keys; n++) {
        long row = rows ? rows[n] : n;
        const float *v_j = v + row * kv_stride;
        float *dv_j = dv + row * kv_stride;
        p[n] *= inv_sum;
        float kept = p[n] * dp[n];
        for (int i = 0; i < HS; i++) dv_j[i] += kept * dout_t[i];
        dp[n] *= kernels_dot(dout_t, v_j, HS);
        mean_dp += p[n] * dp[n];
    }
    if (sc.sink && dsink) *dsink -= sink_exp * inv_sum * mean_dp;
    for (int n = 0; n < n_keys; n++) dp[n] = p[n] * (dp[n] - mean_dp);
}

/* The backward of attend_rows for one head and one query: the scores again, softmax_backward,
 * then the gradients of q_t and k from each score's.
 *   dout_t, q_t, dq_t (HS,); k, v, dk, dv (rows, kv_stride) at this kv head's columns;
 *   p, dp (n_keys,) scratch. The gradients written (dq_t, dk, dv) overlap nothing else. */
static void attend_rows_backward(float *restrict dq_t, float *restrict dk, float *restrict dv,
                                 float *dsink, const float *restrict dout_t,
                                 const float *restrict q_t, const float *restrict k,
                                 const float *restrict v, int kv_stride, const int32_t *rows,
                                 int n_keys, int HS, Scoring sc, const AttentionDropout *drop,
                                 uint64_t first, float *p, float *dp) {
    score_rows(p, q_t, k, kv_stride, rows, n_keys, HS, sc);
    softmax_backward(dv, dsink, dout_t, v, kv_stride, rows, n_keys, HS, sc, drop, first, p, dp);
    /* the scores are (q . k_j) * scale (Gaussian: minus |k_j|^2 * scale / 2, whose gradient
     * in k_j is -k_j * scale) */
    for (int n = 0; n < n_keys; n++) {
        long row = rows ? rows[n] : n;
        const float *k_j = k + row * kv_stride;
        float *dk_j = dk + row * kv_stride;
        float ds = dp[n] * sc.scale;
        for (int i = 0; i < HS; i++) {
            dq_t[i] += ds * k_j[i];
            dk_j[i] += sc.gauss ? ds * (q_t[i] - k_j[i]) : ds * q_t[i];
        }
    }
}

/* One call of attention_backward, for its per-kv-head jobs. */
typedef struct {
    const AttentionShape *shape;
    const AttentionDropout *drop;   /* NULL: no dropout */
    float *dq, *dk, *dv;
    const float *dout, *q, *k, *v;
    int T;
    float *scratch;
} KvHeadBackwardJob;

/* kv head g of attention_backward: its columns of dk and dv, the dq columns of its query
 * heads; its own scratch. For each query head h, the queries go in blocks of
 * BACKWARD_QUERIES, each block t0 .. t1-1 over keys 0 .. t1-1, as products (kernels_product)
 * of (queries, keys) tables whose entries past a query's last key are 0:
 *   dP   = dout_block . v^T                   dP[t][j] = dout_t . v_j
 *   per query t (keys j <= t): p_j, m_j the forward's weights (its own two steps, so its
 *        bits) and mask; dp_j = m_j dP[t][j]; ds_j = p_j (dp_j - sum_j p_j dp_j) scale
 *   dq_block += ds . k;  dv += (p m)^T . dout_block;  dk += ds^T . q_block
 * Each entry of dq, dk and dv is one FMA chain in a fixed order (blocks, then queries or
 * keys), so the bits do not depend on the thread count. */
static void backward_kv_head(void *ctx, int g) {
    enum { BQ = BACKWARD_QUERIES };
    const KvHeadBackwardJob *b = ctx;
    int NH = b->shape->n_heads, NKV = b->shape->n_kv_heads, HS = b->shape->head_dim;
    int T = b->T, group = NH / NKV;            /* query heads per kv head */
    int q_stride = NH * HS;                    /* floats per position of q, dq, dout */
    int kv_stride = NKV * HS;                  /* floats per position of k, v, dk, dv */
    const float *k = b->k + g * HS, *v = b->v + g * HS;   /* this kv head's columns */
    float *dk = b->dk + g * HS, *dv = b->dv + g * HS;
    float *vt = b->scratch + (long)g * (long)backward_head_floats(T, HS);   /* (HS, T) */
    float *k_p = vt + (long)HS * T, *m = k_p + (long)T * HS;      /* (T, HS); (T,) */
    float *p = m + T, *kept = p + (long)BQ * T, *dp = kept + (long)BQ * T; /* (BQ, T) */
    Scoring exact = {b->shape->scale, 0, 0, 0.0f};
    for (int j = 0; j < T; j++)   /* v transposed, k packed as the forward packs it */
        for (int i = 0; i < HS; i++) {
            vt[(long)i * T + j] = v[(long)j * kv_stride + i];
            k_p[(long)j * HS + i] = k[(long)j * kv_stride + i];
        }
    for (int h = g * group; h < (g + 1) * group; h++) {
        const float *q = b->q + h * HS, *dout = b->dout + h * HS;
        float *dq = b->dq + h * HS;
        for (int t0 = 0; t0 < T; t0 += BQ) {
            int t1 = t0 + BQ < T ? t0 + BQ : T, n_q = t1 - t0;
            const float *q_blk = q + (long)t0 * q_stride, *dout_blk = dout + (long)t0 * q_stride;
            kernels_product(dp, T, dout_blk, 1, q_stride, vt, T, n_q, t1, HS,
                            KERNELS_OVERWRITE);
            for (int t = t0; t < t1; t++) {
                float *p_t = p + (long)(t - t0) * T, *kept_t = kept + (long)(t - t0) * T;
                float *dp_t = dp + (long)(t - t0) * T;
                int n_keys = t + 1;
                score_rows(p_t, q + (long)t * q_stride, k_p, HS, NULL, n_keys, HS, exact);
                float inv_sum = softmax_unnormalised(p_t, n_keys, exact, NULL);
                for (int j = 0; j < n_keys; j++) m[j] = 1.0f;
                if (b->drop)
                    dropout_weights(m, n_keys, b->drop, ((uint64_t)h * T + (uint64_t)t) * T,
                                    NULL);
                for (int j = 0; j < n_keys; j++) {
                    p_t[j] *= inv_sum;
                    dp_t[j] *= m[j];
                    kept_t[j] = p_t[j] * m[j];
                }
                float mean_dp = kernels_dot(p_t, dp_t, n_keys);   /* sum_j p_j dp_j */
                for (int j = 0; j < n_keys; j++)
                    p_t[j] *= (dp_t[j] - mean_dp) * exact.scale;   /* p becomes ds */
                for (int j = n_keys; j < t1; j++) p_t[j] = kept_t[j] = 0.0f;
            }
            kernels_product(dq + (long)t0 * q_stride, q_stride, p, 1, T, k_p, HS, n_q, HS, t1,
                            KERNELS_ACCUMULATE);
            kernels_product(dv, kv_stride, kept, T, 1, dout_blk, q_stride, t1, HS, n_q,
                            KERNELS_ACCUMULATE);
            kernels_product(dk, kv_stride, p, T, 1, q_blk, q_stride, t1, HS, n_q,
                            KERNELS_ACCUMULATE);
        }
    }
}

void attention_backward(const AttentionShape *shape, float *dq, float *dk, float *dv,
                        const float *dout, const float *q, const float *k, const float *v,
                        int T, const AttentionDropout *drop, float *scratch) {
    /* Every query head of one kv head adds into the same dk, dv columns, so the unit of
     * parallel work is the kv head: its job alone writes those columns and the dq columns
     * of its query heads, in a fixed order, so the bits do not depend on the thread count.
     * Work: five multiply-adds per head, query, visible key and dimension (the score
     * again, dout . v, dv, dq and dk); small calls stay on the calling thread. */
    KvHeadBackwardJob job = {shape, drop && drop->p > 0.0f ? drop : NULL, dq, dk, dv, dout, q, k, v,
                       T, scratch};
    double work = 2.5 * shape->n_heads * shape->head_dim * (double)T * (T + 1);
    kernels_parallel_for(backward_kv_head, &job, shape->n_kv_heads, work);
}

/* ------------------------------------------------------------------------- */
/* Training: every variant over one sequence                                 */
/*
 * attention_train_forward and attention_train_backward run a variant over T positions
 * (pos = 0) with the decode path's own pieces: the softmax kinds through attend_rows and
 * attend_rows_backward over the rows each query sees (pattern_rows, or LSH's buckets under
 * the given rotations), the recurrent kinds through their fold and read functions, and for
 * their backward a forward scan (the gradients of the queries) then a reverse scan (those of
 * the keys and values) that keep only the running sums (docs/attention.md §14).
 */

_Static_assert(sizeof(int32_t) == sizeof(float), "row lists share the float scratch");

/* The plan of a training call over T positions: the variant's, with every key kept at its
 * own position (no ring), so that pattern_rows lists positions. */
static int train_plan(Plan *p, const AttentionConfig *cfg, const AttentionShape *shape, int T) {
    if (T < 1 || plan(p, cfg, shape, T) != 0) return -1;
    p->ring = 0;
    return 0;
}

/* 1 if cfg is exact attention with nothing attention_forward_dropout lacks (no sink, the
 * shape's own scale). */
static int plain_exact(const AttentionConfig *cfg, const AttentionShape *shape) {
    return cfg->kind == ATTENTION_EXACT && !cfg->softmax1 && !cfg->sink_logit &&
           config_scale(cfg, shape) == shape->scale;
}

/* Floats of scratch one kv head's job uses for T positions (its query heads run one after
 * another in it). */
static size_t train_job_floats(const AttentionConfig *cfg, int HS, int T) {
    size_t t = (size_t)T, hs = (size_t)HS, m = (size_t)cfg->features;
    switch (cfg->kind) {
    case ATTENTION_LINEAR:     /* S or U (HS, HS), z or u, phi(q), phi(k), out (HS,); per */
                               /* position the output's gradient factors gn (T, HS), gd (T,) */
        return hs * hs + 4 * hs + t * (hs + 1);
    case ATTENTION_EFFICIENT:  /* S or B (HS, HS), z or beta, max, p (HS,); per position */
                               /* the maxima, the sums z and gamma (T, HS) each */
        return hs * hs + 3 * hs + 3 * t * hs;
    case ATTENTION_PERFORMER:  /* S or U (m, HS), z or u (m,), M; phi, dl (m,), out (HS,); */
                               /* per position phi(q) (T, m), M, den, dout . out (T,) */
        return m * hs + 3 * m + 1 + hs + t * m + 3 * t;
    case ATTENTION_LSH:        /* p, dp (T,), rows (T,) ints; key buckets (rounds, T), the */
                               /* query's (rounds,) */
        return 3 * t + (size_t)cfg->rounds * (t + 1);
    default:                   /* p, dp (T,), rows (T,) ints; a Synthesizer's work */
        return 3 * t + synth_work_floats(cfg, HS);
    }
}

size_t attention_train_scratch_floats(const AttentionConfig *cfg, const AttentionShape *shape,
                                      int T) {
    Plan p;
    if (train_plan(&p, cfg, shape, T) != 0) return 0;
    size_t jobs = (size_t)shape->n_kv_heads * train_job_floats(cfg, shape->head_dim, T);
    if (!plain_exact(cfg, shape)) return jobs;
    size_t forward = attention_scratch_floats(shape, T);
    size_t backward = attention_backward_scratch_floats(shape, T);
    return forward > backward ? forward : backward;
}

/* One training call, for its per-kv-head jobs. */
typedef struct {
    const AttentionConfig *cfg;
    const AttentionShape *shape;
    Plan p;
    const float *random;            /* (NH, rounds, rand_rows, HS), or NULL */
    const AttentionDropout *drop;   /* NULL: none */
    float *out;                     /* the forward's (T, NH * HS); NULL: the backward */
    float *dq, *dk, *dv, *dparam;   /* the backward's; dparam NULL: not wanted */
    const float *dout, *q, *k, *v;
    int T;
    float *scratch;
} TrainJob;

/* One query head's views for a training call. */
typedef struct {
    const float *q, *dout;   /* q[t, h, :] at q + t * q_stride; dout likewise */
    float *out, *dq;         /* likewise; out NULL in the backward */
    const float *k, *v;      /* k[j, g, :] at k + j * kv_stride, g this head's kv head */
    float *dk, *dv;          /* likewise */
    const float *R;          /* (rounds, rand_rows, HS) this head's random matrices, or NULL */
    const float *P;          /* a Synthesizer's parameters of this head, or NULL */
    float *dP;               /* and their gradient (the backward) */
    int q_stride, kv_stride, HS, T;
    float *work;             /* this job's train_job_floats() of scratch */
} TrainHead;

/* A softmax-family head over the sequence, query by query over the rows it sees: the
 * forward through attend_rows, or the backward through attend_rows_backward (sink logit's
 * gradient into *dsink); a Synthesizer's logits through synth_logits and its backward. LSH
 * first hashes every key with this head's rotations; the buckets are constants (no gradient
 * flows through the hash). */
static void train_softmax_head(const TrainHead *th, const TrainJob *job, int h, float *dsink) {
    const AttentionConfig *cfg = job->cfg;
    int T = th->T, HS = th->HS, half = job->p.rand_rows, lsh = cfg->kind == ATTENTION_LSH;
    int every_key = cfg->kind == ATTENTION_EXACT || cfg->kind == ATTENTION_GAUSS ||
                    attention_is_synth(cfg->kind);
    Scoring sc = config_scoring(cfg, job->shape, h);
    float *p = th->work, *dp = p + T;
    int32_t *rows = (int32_t *)(dp + T);                       /* (T,) */
    float *key_bucket = (float *)(rows + T);                   /* (rounds, T) */
    float *query_bucket = key_bucket + (long)cfg->rounds * T;  /* (rounds,) */
    for (int r = 0; lsh && r < cfg->rounds; r++)   /* as lsh_insert hashes them */
        for (int j = 0; j < T; j++)
            key_bucket[(long)r * T + j] =
                (float)lsh_round_bucket(th->k + (long)j * th->kv_stride, th->R, r, half, HS);
    for (int t = 0; t < T; t++) {
        const float *q_t = th->q + (long)t * th->q_stride;
        long row = (long)t * th->q_stride;
        const int32_t *visible = every_key ? NULL : rows;   /* NULL: keys 0 .. t */
        int n = t + 1;
        if (lsh) {
            for (int r = 0; r < cfg->rounds; r++)
                query_bucket[r] = (float)lsh_round_bucket(q_t, th->R, r, half, HS);
            n = 0;
            for (int j = 0; j <= t; j++)
                if (lsh_visible(cfg, t, j, key_bucket, T, query_bucket)) rows[n++] = j;
        } else if (!every_key) {
            n = pattern_rows(&job->p, cfg, t, rows);
        }
        uint64_t first = ((uint64_t)h * T + (uint64_t)t) * T;   /* the dropout mask's */
        if (th->P) {   /* a Synthesizer: every key 0 .. t, scored without k */
            float *work = (float *)(rows + T);
            synth_logits(cfg, th->P, HS, q_t, t, p, work);
            if (th->out) {
                attend_scored(th->out + row, th->v, th->kv_stride, NULL, n, HS, sc, p,
                              job->drop, first);
            } else {
                softmax_backward(th->dv, NULL, th->dout + row, th->v, th->kv_stride, NULL, n,
                                 HS, sc, job->drop, first, p, dp);
                synth_logits_backward(cfg, th->P, th->dP, HS, q_t, th->dq + row, t, dp, work);
            }
        } else if (th->out)
            attend_rows(th->out + row, q_t, th->k, th->v, th->kv_stride, visible, n, HS, sc, p,
                        job->drop, first);
        else
            attend_rows_backward(th->dq + row, th->dk, th->dv, dsink, th->dout + row, q_t,
                                 th->k, th->v, th->kv_stride, visible, n, HS, sc, job->drop,
                                 first, p, dp);
    }
}

/* The derivative of elu(x) + 1 at x, given phi = elu(x) + 1: 1 for x > 0, else exp(x). */
static float elu1_grad(float x, float phi) { return x > 0.0f ? 1.0f : phi; }

/* Linear attention over the sequence. Forward: linear_step at each position. Backward, with
 * a_t = phi(q_t), out_t = S_t^T a_t / den_t, den_t = a_t . z_t + eps (norm: out_t =
 * S_t^T a_t / r_t, r_t its root mean square):
 *   a forward scan rebuilds S_t and z_t and adds a_t's gradient S_t gn_t + z_t gd_t, where
 *   gn_t = dout_t / den_t and gd_t = -(dout_t . out_t) / den_t (norm: gn_t = (dout_t -
 *   out_t (dout_t . out_t) / HS) / r_t and gd_t = 0), keeping gn_t and gd_t;
 *   a reverse scan sums U = sum_{t >= j} a_t gn_t^T and u = sum_{t >= j} a_t gd_t, so that
 *   phi(k_j)'s gradient is U v_j + u and v_j's is U^T phi(k_j).
 * Either scan keeps HS^2 + HS floats of sums, never one such matrix per position. */
static void train_linear_head(const TrainHead *th, const AttentionConfig *cfg, float scale) {
    int T = th->T, HS = th->HS, norm = cfg->norm;
    float pre = cfg->prescale ? sqrtf(scale) : 1.0f;
    float *rec = th->work, *phi_q = rec + HS * HS + HS, *phi_k = phi_q + HS, *o = phi_k + HS;
    float *gn = o + HS, *gd = gn + (long)T * HS;   /* (T, HS), (T,) */
    memset(rec, 0, (size_t)(HS * HS + HS) * sizeof(float));
    for (int t = 0; t < T; t++) {
        const float *q_t = th->q + (long)t * th->q_stride;
        const float *k_t = th->k + (long)t * th->kv_stride, *v_t = th->v + (long)t * th->kv_stride;
        if (th->out) {   /* phi_q, phi_k: linear_step's 2 HS of scratch */
            linear_step(rec, HS, pre, norm, k_t, v_t, q_t, th->out + (long)t * th->q_stride,
                        phi_q);
            continue;
        }
        const float *dout_t = th->dout + (long)t * th->q_stride;
        float *dq_t = th->dq + (long)t * th->q_stride, *gn_t = gn + (long)t * HS;
        linear_fold(rec, HS, pre, k_t, v_t, phi_k);
        float den = linear_read(o, rec, HS, pre, norm, q_t, phi_q);   /* or r */
        float go = dot_f(dout_t, o, HS);
        for (int e = 0; e < HS; e++)
            gn_t[e] = norm ? (dout_t[e] - o[e] * go / (float)HS) / den : dout_t[e] / den;
        gd[t] = norm ? 0.0f : -go / den;
        const float *S = rec, *z = rec + HS * HS;
        for (int c = 0; c < HS; c++) {
            float da = dot_f(S + (long)c * HS, gn_t, HS) + z[c] * gd[t];
            dq_t[c] += da * elu1_grad(q_t[c] * pre, phi_q[c]) * pre;
        }
    }
    if (th->out) return;
    /* the reverse scan, U and u in the place of S and z */
    float *U = rec, *u = rec + HS * HS;
    memset(rec, 0, (size_t)(HS * HS + HS) * sizeof(float));
    for (int t = T - 1; t >= 0; t--) {
        const float *q_t = th->q + (long)t * th->q_stride, *gn_t = gn + (long)t * HS;
        const float *k_t = th->k + (long)t * th->kv_stride, *v_t = th->v + (long)t * th->kv_stride;
        float *dk_t = th->dk + (long)t * th->kv_stride, *dv_t = th->dv + (long)t * th->kv_stride;
        linear_features(phi_q, q_t, HS, pre);
        for (int c = 0; c < HS; c++) {
            float *U_c = U + (long)c * HS, a = phi_q[c];
            for (int e = 0; e < HS; e++) U_c[e] += a * gn_t[e];
            u[c] += a * gd[t];
        }
        linear_features(phi_k, k_t, HS, pre);
        for (int c = 0; c < HS; c++) {
            const float *U_c = U + (long)c * HS;
            float df = dot_f(U_c, v_t, HS) + u[c];
            dk_t[c] += df * elu1_grad(k_t[c] * pre, phi_k[c]) * pre;
            for (int e = 0; e < HS; e++) dv_t[e] += phi_k[c] * U_c[e];
        }
    }
}

/* Efficient Attention over the sequence. Forward: efficient_step at each position. With
 * p_t = softmax(q_t) and R_tc = S_tc / z_tc (the mean of v under key column c's softmax over
 * positions 0 .. t), out_t = sum_c p_tc R_tc. Backward:
 *   a forward scan adds q_t's gradient p_tc (gamma_tc - sum_c' p_tc' gamma_tc'), gamma_tc =
 *   dout_t . R_tc, keeping each position's running maxima m_t, sums z_t and gamma_t;
 *   a reverse scan sums B_c = sum_{t >= j} exp(m_jc - m_tc) (p_tc / z_tc) dout_t and beta_c
 *   the same of gamma_tc (multiplied by exp(m_jc - m_(j+1)c) <= 1 at each step back), so
 *   that, with e_jc = exp(k_jc - m_jc), k_jc's gradient is e_jc (B_c . v_j - beta_c) (the
 *   second term through the normaliser z) and v_j's is sum_c e_jc B_c. */
static void train_efficient_head(const TrainHead *th) {
    int T = th->T, HS = th->HS;
    float *rec = th->work, *p = rec + HS * HS + 2 * HS;
    float *m_all = p + HS, *z_all = m_all + (long)T * HS, *gamma = z_all + (long)T * HS;
    float *S = rec, *z = rec + HS * HS, *mx = z + HS;
    memset(rec, 0, (size_t)(HS * HS + HS) * sizeof(float));
    for (int c = 0; c < HS; c++) mx[c] = -INFINITY;
    for (int t = 0; t < T; t++) {
        const float *q_t = th->q + (long)t * th->q_stride;
        const float *k_t = th->k + (long)t * th->kv_stride, *v_t = th->v + (long)t * th->kv_stride;
        if (th->out) {
            efficient_step(rec, HS, k_t, v_t, q_t, th->out + (long)t * th->q_stride, p);
            continue;
        }
        const float *dout_t = th->dout + (long)t * th->q_stride;
        float *dq_t = th->dq + (long)t * th->q_stride, *gamma_t = gamma + (long)t * HS;
        efficient_fold(rec, HS, k_t, v_t);
        efficient_softmax(p, q_t, HS);
        float go = 0.0f;   /* dout_t . out_t */
        for (int c = 0; c < HS; c++) {
            gamma_t[c] = dot_f(S + (long)c * HS, dout_t, HS) / z[c];
            go += p[c] * gamma_t[c];
        }
        for (int c = 0; c < HS; c++) dq_t[c] += p[c] * (gamma_t[c] - go);
        memcpy(m_all + (long)t * HS, mx, (size_t)HS * sizeof(float));
        memcpy(z_all + (long)t * HS, z, (size_t)HS * sizeof(float));
    }
    if (th->out) return;
    /* the reverse scan, B and beta in the place of S and z */
    float *B = rec, *beta = rec + HS * HS;
    memset(rec, 0, (size_t)(HS * HS + HS) * sizeof(float));
    for (int t = T - 1; t >= 0; t--) {
        const float *q_t = th->q + (long)t * th->q_stride;
        const float *dout_t = th->dout + (long)t * th->q_stride;
        const float *k_t = th->k + (long)t * th->kv_stride, *v_t = th->v + (long)t * th->kv_stride;
        float *dk_t = th->dk + (long)t * th->kv_stride, *dv_t = th->dv + (long)t * th->kv_stride;
        const float *m_t = m_all + (long)t * HS, *z_t = z_all + (long)t * HS;
        const float *gamma_t = gamma + (long)t * HS;
        for (int c = 0; t < T - 1 && c < HS; c++) {   /* bring the sums to m_t's scale */
            float f = expf(m_t[c] - m_t[HS + c]);
            if (f == 1.0f) continue;
            for (int e = 0; e < HS; e++) B[(long)c * HS + e] *= f;
            beta[c] *= f;
        }
        efficient_softmax(p, q_t, HS);
        for (int c = 0; c < HS; c++) {
            float w = p[c] / z_t[c], *B_c = B + (long)c * HS;
            for (int e = 0; e < HS; e++) B_c[e] += w * dout_t[e];
            beta[c] += w * gamma_t[c];
        }
        for (int c = 0; c < HS; c++) {
            const float *B_c = B + (long)c * HS;
            float e_c = expf(k_t[c] - m_t[c]);
            dk_t[c] += e_c * (dot_f(B_c, v_t, HS) - beta[c]);
            for (int e = 0; e < HS; e++) dv_t[e] += e_c * B_c[e];
        }
    }
}

/* dx (HS,) += the gradient through Performer's logits l_f(x) = w_f . (x s) - |x s|^2 / 2
 * (favor_logits) of dl (m,) = d loss / d l: sum_f dl_f (s w_f - s^2 x). W (m, HS). */
static void favor_backward(float *dx, const float *W, int m, int HS, float s, const float *x,
                           const float *dl) {
    float sum = 0.0f;
    for (int f = 0; f < m; f++) sum += dl[f];
    for (int i = 0; i < HS; i++) {
        float acc = 0.0f;
        for (int f = 0; f < m; f++) acc += dl[f] * W[(long)f * HS + i];
        dx[i] += s * acc - s * s * x[i] * sum;
    }
}

/* Performer over the sequence. Forward: performer_step at each position. The output
 * out_t = S_t^T a_t / (a_t . z_t) does not change when the query's features a_t or all the
 * key features are multiplied by one constant, so the stabilisers (the keys' running maximum
 * M, performer_query's shift) are constants of the gradient. Backward, as linear attention
 * (eps = 0) through the logits (favor_backward):
 *   a forward scan adds q_t's gradient, dl_f = a_tf (S_tf . dout_t - (dout_t . out_t) z_tf)
 *   / den_t, keeping a_t (as performer_query left it), M_t, den_t and dout_t . out_t;
 *   a reverse scan sums U = sum_{t >= j} exp(M_j - M_t) a_t dout_t^T / den_t and u the same
 *   of -a_t (dout_t . out_t) / den_t (multiplied by exp(M_j - M_(j+1)) <= 1 at each step
 *   back), so that with key j's features E_j = exp(l(k_j) - M_j) (fold_key's), dl_f =
 *   E_jf (U_f . v_j + u_f) and v_j's gradient is sum_f E_jf U_f. */
static void train_performer_head(const TrainHead *th, int m, float s) {
    int T = th->T, HS = th->HS;
    float *rec = th->work, *phi = rec + (long)m * HS + m + 1, *dl = phi + m, *o = dl + m;
    float *a_all = o + HS, *M_all = a_all + (long)T * m, *den_all = M_all + T;
    float *go_all = den_all + T;
    float *S = rec, *z = rec + (long)m * HS, *M = z + m;
    memset(rec, 0, (size_t)((long)m * HS + m) * sizeof(float));
    *M = -INFINITY;
    for (int t = 0; t < T; t++) {
        const float *q_t = th->q + (long)t * th->q_stride;
        const float *k_t = th->k + (long)t * th->kv_stride, *v_t = th->v + (long)t * th->kv_stride;
        if (th->out) {
            performer_step(rec, th->R, m, HS, s, k_t, v_t, q_t,
                           th->out + (long)t * th->q_stride, phi);
            continue;
        }
        const float *dout_t = th->dout + (long)t * th->q_stride;
        float *a = a_all + (long)t * m;
        performer_fold(rec, th->R, m, HS, s, k_t, v_t, phi);
        float den = performer_query(a, th->R, m, HS, s, q_t, z);
        read_out(o, a, S, m, HS, den);
        float go = dot_f(dout_t, o, HS);
        M_all[t] = *M;
        den_all[t] = den;
        go_all[t] = go;
        if (!(den > 0.0f)) continue;   /* read_out gave zeros: no gradient */
        for (int f = 0; f < m; f++)
            dl[f] = a[f] * (dot_f(S + (long)f * HS, dout_t, HS) - go * z[f]) / den;
        favor_backward(th->dq + (long)t * th->q_stride, th->R, m, HS, s, q_t, dl);
    }
    if (th->out) return;
    /* the reverse scan, U and u in the place of S and z */
    float *U = rec, *u = rec + (long)m * HS;
    memset(rec, 0, (size_t)((long)m * HS + m) * sizeof(float));
    for (int t = T - 1; t >= 0; t--) {
        const float *dout_t = th->dout + (long)t * th->q_stride, *a = a_all + (long)t * m;
        const float *k_t = th->k + (long)t * th->kv_stride, *v_t = th->v + (long)t * th->kv_stride;
        float *dk_t = th->dk + (long)t * th->kv_stride, *dv_t = th->dv + (long)t * th->kv_stride;
        float f = t < T - 1 ? expf(M_all[t] - M_all[t + 1]) : 1.0f;
        if (f != 1.0f) {   /* bring the sums to M_t's scale */
            for (long i = 0; i < (long)m * HS; i++) U[i] *= f;
            for (int c = 0; c < m; c++) u[c] *= f;
        }
        if (den_all[t] > 0.0f) {
            for (int c = 0; c < m; c++) {
                float w = a[c] / den_all[t], *U_c = U + (long)c * HS;
                for (int e = 0; e < HS; e++) U_c[e] += w * dout_t[e];
                u[c] -= w * go_all[t];
            }
        }
        favor_logits(phi, th->R, m, HS, k_t, s);   /* E_t, as fold_key made it */
        for (int c = 0; c < m; c++) phi[c] = expf(phi[c] - M_all[t]);
        for (int c = 0; c < m; c++) {
            const float *U_c = U + (long)c * HS;
            dl[c] = phi[c] * (dot_f(U_c, v_t, HS) + u[c]);
            for (int e = 0; e < HS; e++) dv_t[e] += phi[c] * U_c[e];
        }
        favor_backward(dk_t, th->R, m, HS, s, k_t, dl);
    }
}

/* kv head g of a training call: its query heads one after another, each writing only its
 * own columns of out or dq (and dsink entry) and adding into g's columns of dk and dv, in a
 * fixed order; its own part of scratch. */
static void train_kv_head(void *ctx, int g) {
    const TrainJob *job = ctx;
    const AttentionConfig *cfg = job->cfg;
    int NH = job->shape->n_heads, NKV = job->shape->n_kv_heads, HS = job->shape->head_dim;
    int group = NH / NKV, backward = job->out == NULL, synth = attention_is_synth(cfg->kind);
    float scale = config_scale(cfg, job->shape);
    for (int h = g * group; h < (g + 1) * group; h++) {
        TrainHead th = {
            .q = job->q + (long)h * HS,                              /* q[0, h, :] */
            .dout = backward ? job->dout + (long)h * HS : NULL,
            .out = backward ? NULL : job->out + (long)h * HS,
            .dq = backward ? job->dq + (long)h * HS : NULL,
            .k = job->k + (long)g * HS, .v = job->v + (long)g * HS,  /* k[0, g, :] */
            .dk = backward ? job->dk + (long)g * HS : NULL,
            .dv = backward ? job->dv + (long)g * HS : NULL,
            .R = job->p.rand_rows > 0 ? job->random + random_offset(&job->p, h, 0, HS) : NULL,
            .P = synth ? synth_head(cfg, HS, h) : NULL,
            .dP = synth && backward ? job->dparam + (size_t)h * synth_head_floats(cfg, HS) : NULL,
            .q_stride = NH * HS, .kv_stride = NKV * HS, .HS = HS, .T = job->T,
            .work = job->scratch + (long)g * train_job_floats(cfg, HS, job->T)};
        switch (cfg->kind) {
        case ATTENTION_LINEAR:
            train_linear_head(&th, cfg, scale);
            break;
        case ATTENTION_EFFICIENT:
            train_efficient_head(&th);
            break;
        case ATTENTION_PERFORMER:
            train_performer_head(&th, cfg->features, sqrtf(scale));
            break;
        default:
            train_softmax_head(&th, job, h,
                               backward && cfg->sink_logit && job->dparam ? job->dparam + h
                                                                          : NULL);
            break;
        }
    }
}

/* Checks a training call's configuration; fills p. Returns 0, or -1. */
static int train_check(Plan *p, const AttentionConfig *cfg, const AttentionShape *shape,
                       const float *random, const AttentionDropout *drop, int T) {
    if (train_plan(p, cfg, shape, T) != 0 || (p->rand_rows > 0 && !random) ||
        (attention_is_synth(cfg->kind) && !cfg->synth)) return -1;
    if (drop && drop->p != 0.0f &&
        (!(drop->p > 0.0f && drop->p < 1.0f) || !attention_has_weights(cfg->kind))) return -1;
    return 0;
}

/* Runs train_kv_head over the kv heads. Each job writes only its own columns, in a fixed
 * order, so the bits do not depend on the thread count; called from a job (the trainer's
 * per-sequence jobs) it runs on the calling thread. Work: about NH T HS times the keys or
 * state rows each query reads. */
static void train_heads(TrainJob *job) {
    const AttentionConfig *cfg = job->cfg;
    double rows = job->T;
    if (cfg->kind == ATTENTION_WINDOW || cfg->kind == ATTENTION_DILATED)
        rows = job->p.sinks + cfg->window < job->T ? job->p.sinks + cfg->window : job->T;
    if (cfg->kind == ATTENTION_LINEAR || cfg->kind == ATTENTION_EFFICIENT)
        rows = job->shape->head_dim;
    if (cfg->kind == ATTENTION_PERFORMER) rows = cfg->features;
    kernels_parallel_for(train_kv_head, job, job->shape->n_kv_heads,
                         2.0 * job->shape->n_heads * job->T * job->shape->head_dim * rows);
}

int attention_train_forward(const AttentionConfig *cfg, const AttentionShape *shape,
                            const float *random, const AttentionDropout *drop, float *out,
                            const float *q, const float *k, const float *v, int T,
                            float *scratch) {
    Plan p;
    if (train_check(&p, cfg, shape, random, drop, T) != 0 || !out || !q || !k || !v ||
        !scratch) return -1;
    const AttentionDropout *dropout = drop && drop->p > 0.0f ? drop : NULL;
    if (plain_exact(cfg, shape)) {
        attention_forward_dropout(shape, dropout, out, q, k, v, T, scratch);
        return 0;
    }
    TrainJob job = {cfg, shape, p, random, dropout, out, NULL, NULL, NULL, NULL, NULL, q, k, v,
                    T, scratch};
    train_heads(&job);
    return 0;
}

int attention_train_backward(const AttentionConfig *cfg, const AttentionShape *shape,
                             const float *random, const AttentionDropout *drop, float *dq,
                             float *dk, float *dv, float *dparam, const float *dout,
                             const float *q, const float *k, const float *v, int T,
                             float *scratch) {
    Plan p;
    if (train_check(&p, cfg, shape, random, drop, T) != 0 || !dq || !dk || !dv || !dout ||
        !q || !k || !v || !scratch || (attention_is_synth(cfg->kind) && !dparam)) return -1;
    const AttentionDropout *dropout = drop && drop->p > 0.0f ? drop : NULL;
    if (plain_exact(cfg, shape)) {
        attention_backward(shape, dq, dk, dv, dout, q, k, v, T, dropout, scratch);
        return 0;
    }
    TrainJob job = {cfg, shape, p, random, dropout, NULL, dq, dk, dv, dparam, dout, q, k, v, T,
                    scratch};
    train_heads(&job);
    return 0;
}

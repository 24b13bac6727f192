/* attention.h: the one interface through which the model reaches attention.
 *
 * The kernels take plain arrays and sizes and know nothing of the model: queries
 * for T new positions, the cached keys and values of every position so far, and
 * the head layout. Read attention.c next for the computation itself.
 *
 * Legend: NH query heads, NKV key/value heads (NH % NKV == 0; GPT-2 has NKV = NH,
 * grouped-query models share one K/V head among NH/NKV query heads), HS head size,
 * pos the position of the first new query, T the number of new queries.
 * Section numbers (§) are those of docs/attention.md.
 */
#ifndef ATTENTION_H
#define ATTENTION_H

#include <stddef.h>   /* size_t */
#include <stdint.h>   /* uint16_t */

/* ------------------------------------------------------------------------- */
/* Exact attention                                                             */

typedef struct {
    int n_heads;      /* NH: query heads */
    int n_kv_heads;   /* NKV: key/value heads; query head h reads kv head h / (NH / NKV) */
    int head_dim;     /* HS: floats per head */
    float scale;      /* score = (q . k) * scale; 1/sqrt(HS) for scaled dot product */
} AttentionShape;

/* Floats of scratch attention_forward needs for a context of up to n_positions positions:
 * the score rows of a block of queries per head (a size_t: it exceeds an int for large head
 * counts and contexts). */
size_t attention_scratch_floats(const AttentionShape *shape, int n_positions);

/* Exact causal multi-head scaled dot-product attention (docs/attention.md §2), with a
 * max-subtracted softmax (§1). Query t (position pos + t) sees keys 0 .. pos + t.
 *   out     (T, NH * HS)            written
 *   q       (T, NH * HS)            queries of the T new positions
 *   k, v    (pos + T, NKV * HS)     keys and values of every position 0 .. pos + T - 1
 *   scratch (attention_scratch_floats(shape, pos + T),)  overwritten
 * Heads run in parallel (kernels_parallel_for); each head's HS columns of out (and its
 * score rows) are written by one job, so the result is bitwise identical for any thread
 * count. Never allocates. */
void attention_forward(const AttentionShape *shape, float *out, const float *q,
                       const float *k, const float *v, int pos, int T, float *scratch);

/* attention_forward over a KV cache whose rows are by kv head (the model's):
 *   k, v    (NKV, n_alloc, HS)   kv head g's key of position j at k + (g n_alloc + j) HS
 * (positions 0 .. pos + T - 1 written), the same bits as attention_forward. A head's keys
 * are contiguous, so they stream; in (n_alloc, NKV HS) rows a long context's keys of one
 * head lie a row apart and fall into a few cache sets. */
void attention_forward_cache(const AttentionShape *shape, float *out, const float *q,
                             const float *k, const float *v, int n_alloc, int pos, int T,
                             float *scratch);

/* Floats of scratch attention_forward_cache_half needs: attention_scratch_floats(shape,
 * n_alloc), then each head's keys and values of n_alloc positions as floats. */
size_t attention_half_scratch_floats(const AttentionShape *shape, int n_alloc);

/* attention_forward_cache over a cache kept in IEEE half precision (kernels_to_half's
 * bits, half the bytes to store and to read). One query (T = 1, decode) reads the halves
 * in place, widening each as it is loaded; more queries first convert the kv head's keys
 * and values of positions 0 .. pos + T - 1 to floats, on the head job's stack where they
 * fit, else in its own part of scratch (attention_half_scratch_floats(shape, n_alloc)), then
 * attend as attention_forward_cache does. Either way the same bits as over a float cache
 * holding the same rounded values. */
void attention_forward_cache_half(const AttentionShape *shape, float *out, const float *q,
                                  const uint16_t *k, const uint16_t *v, int n_alloc, int pos,
                                  int T, float *scratch);

/* Dropout on the attention weights, for training: in a call over T queries, the weight of
 * key j for query t in head h is dropped (set to 0) by hash.h's dropout rule for
 * key + (h T + t) T + j (probability p); the kept weights are divided by 1 - p, so each
 * output's expectation is unchanged. The mask depends only on
 * (key, h, t, j), so the backward redraws it, and it is the same for any thread count. */
typedef struct {
    float p;                  /* drop probability, [0, 1); 0 = none */
    unsigned long long key;   /* the caller's key for this call (trainer: step, layer, row) */
} AttentionDropout;

/* attention_forward with pos = 0 (T queries over their own T keys) and the weights dropped
 * out as drop says (NULL or p = 0: none, the same bits as attention_forward). Same
 * arguments otherwise. */
void attention_forward_dropout(const AttentionShape *shape, const AttentionDropout *drop,
                               float *out, const float *q, const float *k, const float *v,
                               int T, float *scratch);

/* ------------------------------------------------------------------------- */
/* The attention lab: every variant of docs/attention.md behind one stateful step */
/*
 * A variant is an AttentionConfig. Each layer keeps its own state, one block of
 * attention_state_bytes() that the caller allocates and attention_state_init()
 * fills; attention_step() appends new keys/values to it and attends. The state is
 * one of the four kinds of docs/attention.md §10:
 *   (A) full KV cache: exact, gauss, strided, fixed (synth-*: values only)  O(n_alloc)
 *   (B) sink slots + ring buffer: window, dilated         O(sinks + W)
 *   (C) fixed-size recurrent state: linear, efficient, performer   O(1) in n_alloc
 *   (D) KV cache + per-round LSH bucket lists: lsh
 * Randomness (Performer features, LSH rotations) is drawn at init from the
 * project's own generator (splitmix64 seeding xoshiro256**), keyed by (seed,
 * layer, head, round), so it never depends on the thread count.
 */

typedef enum {
    ATTENTION_EXACT,      /* softmax(q.k * scale) over all past keys (§2) */
    ATTENTION_GAUSS,      /* Gaussian kernel: q.k * scale - |k|^2 * scale / 2 (§2) */
    ATTENTION_WINDOW,     /* last `window` keys, plus the first `sinks` positions (§3) */
    ATTENTION_DILATED,    /* `window` keys spaced `dilation` apart, plus sinks (§3) */
    ATTENTION_STRIDED,    /* Sparse Transformer strided, merged: i-j < l or (i-j) % l == 0 */
    ATTENTION_FIXED,      /* Sparse Transformer fixed, merged: own block or j % l >= l - c */
    ATTENTION_LSH,        /* Reformer angular LSH, causal bucket-union form (§4) */
    ATTENTION_LINEAR,     /* Katharopoulos linear attention, phi = elu + 1 (§5) */
    ATTENTION_EFFICIENT,  /* Shen et al. Efficient Attention, causal recurrent form (§5) */
    ATTENTION_PERFORMER,  /* FAVOR+ positive random features, running-max form (§6) */
    /* The Synthesizer (Tay et al. 2021, §16): the weights come from learned parameters
     * (cfg->synth), never from comparing q with k; softmax over keys 0 .. i, then values */
    ATTENTION_SYNTH_RANDOM,   /* logit_ij = R_h[i][j], R (L, L) learned */
    ATTENTION_SYNTH_DENSE,    /* logit_ij = W_h[j] . relu(q_i) + b_h[j]: from the token alone */
    ATTENTION_SYNTH_FRANDOM,  /* logit_ij = R1_h[i] . R2_h[j], R1, R2 (L, factor) */
    ATTENTION_SYNTH_FDENSE,   /* logit_ij = A_i[j % a] B_i[j / a], A_i = WA relu(q_i) + bA (a,),
                               * B_i = WB relu(q_i) + bB (L / a,), a = factor */
    ATTENTION_KINDS       /* number of kinds */
} AttentionKind;

/* Defaults (docs/attention.md §3-§6) */
#define ATTENTION_DEFAULT_WINDOW 128      /* W, w: half the shipped model's context of 256 */
#define ATTENTION_DEFAULT_DILATION 2      /* k of dilated(w, k) = (128, 2) */
#define ATTENTION_DEFAULT_STRIDE 32       /* strided l = sqrt(1024) */
#define ATTENTION_DEFAULT_BLOCK 128       /* fixed l (paper: 128) */
#define ATTENTION_DEFAULT_SUMMARY 32      /* fixed c (paper: 32) */
#define ATTENTION_DEFAULT_BUCKETS 16      /* LSH nb = 1024 / 64 */
#define ATTENTION_DEFAULT_ROUNDS 4        /* LSH n_r: "4 is permissible" */
#define ATTENTION_DEFAULT_LSH_LOCAL 64    /* LSH always-kept local window L */
#define ATTENTION_DEFAULT_LSH_SINKS 4     /* LSH always-kept first positions */
#define ATTENTION_DEFAULT_FEATURES 256    /* Performer m (JAX reference nb_features) */
#define ATTENTION_DEFAULT_FACTOR 16       /* factorized Synthesizers: k = a = sqrt(256) */
#define ATTENTION_LINEAR_EPS 1e-6f        /* linear attention denominator eps (fast-transformers) */
#define ATTENTION_NORM_EPS 1e-5f          /* linear:norm=1, the RMS normalisation's eps */
/* The temperature's range. Below 0.01 the scale 1/(tau sqrt(HS)) can push ordinary scores
 * past FLT_MAX (tau = 1.2e-38 makes q.k = 30 infinite), and softmax of +inf is NaN; at
 * 0.01 softmax is already all but argmax. Above 100 every head is all but uniform. The
 * cast: where floats are evaluated wider (FLT_EVAL_METHOD 2: x87) a bare 0.01f keeps more
 * digits than the float 0.01 that a flag or a config holds, and would refuse it. */
#define ATTENTION_MIN_TAU ((float)0.01f)
#define ATTENTION_MAX_TAU 100.0f
/* The largest integer parameters, on the command line and in a checkpoint alike */
#define ATTENTION_MAX_INT 1048576      /* any count or length: 2^20, the longest context */
#define ATTENTION_MAX_BUCKETS 4096     /* LSH buckets: beyond this (and beyond the context,
                                        * which model.c checks) buckets are nearly empty */
#define ATTENTION_MAX_ROUNDS 64        /* LSH hash rounds */
#define ATTENTION_MAX_FEATURES 8192    /* Performer m: 8192 features already cost ~100x
                                        * exact attention's work per token at head size 64 */

typedef struct {
    AttentionKind kind;
    int softmax1;      /* 1: softmax with a virtual key of score 0, value 0 (§8) */
    int unscaled;      /* 1: scale = 1 instead of 1/sqrt(HS) */
    float tau;         /* temperature: scale = 1 / (tau sqrt(HS)); 1 by default; in
                        * [ATTENTION_MIN_TAU, ATTENTION_MAX_TAU] */
    int window;        /* W (window), w (dilated): keys in the window, self included */
    int sinks;         /* positions 0 .. sinks-1 always visible (window, dilated, lsh) */
    int dilation;      /* k (dilated): spacing of the window's keys */
    int stride;        /* l (strided); block length l (fixed) */
    int summary;       /* c (fixed): last c positions of each block are summaries */
    int buckets;       /* nb (lsh): 1 or even */
    int rounds;        /* n_r (lsh): independent hash rounds */
    int local;         /* L (lsh): always-kept local window, self included (0: self only) */
    int features;      /* m (performer): random features */
    int orthogonal;    /* performer: 1 = orthogonal random features, 0 = i.i.d. */
    int prescale;      /* linear: 1 = multiply q and k by sqrt(scale) before phi */
    int norm;          /* linear: 1 = no denominator; each head's output phi(q) S divided by
                        * its root mean square (sqrt(mean(a^2) + ATTENTION_NORM_EPS)), the
                        * TransNormer/GLA form; 0 = the paper's phi(q) S / (phi(q) z + eps) */
    int sink_logit;    /* softmax family: 1 = each head h has a learned sink logit b_h, a
                        * virtual key of score b_h and value 0 (softmax1 is b_h = 0, fixed;
                        * the two exclude each other) */
    const float *sink_logits;  /* (NH,) the b_h when sink_logit = 1: a trained model's
                        * parameters, not owned (NULL: 0 for every head) */
    int factor;        /* synth-frandom: k, the rank of R1 R2^T; synth-fdense: a, with
                        * a (L / a) = L (so a divides L) */
    int synth_len;     /* L (Synthesizers): the positions the parameters cover, the model's
                        * context; attention over n_alloc <= L positions reads their first
                        * n_alloc */
    const float *synth;  /* (attention_synth_floats,) a Synthesizer's trained parameters, not
                        * owned; head h's block of attention_synth_floats / NH floats:
                        * random R (L, L); frandom R1 (L, k) then R2 (L, k); dense W (L, HS)
                        * then b (L,); fdense WA (a, HS), bA (a,), WB (L/a, HS), bB (L/a,) */
    unsigned long long seed;   /* performer, lsh: global seed */
} AttentionConfig;

/* Fills cfg with exact attention and every variant parameter at its default, but for the
 * two fields whose default depends on the kind, which lab/attention_spec.c sets once it
 * knows the kind: sinks is 0 (window's and dilated's; LSH's is ATTENTION_DEFAULT_LSH_SINKS)
 * and stride is strided's l (fixed's is ATTENTION_DEFAULT_BLOCK). */
void attention_config_default(AttentionConfig *cfg);

/* The lower-case name of a kind ("exact", "window", ...), as the CLI spells it. */
const char *attention_kind_name(AttentionKind kind);

/* 0 if cfg's parameters are ones its kind takes, whatever the model: each field the kind
 * reads within the range --attn accepts (ATTENTION_MAX_*), c <= l, LSH buckets 1 or even,
 * softmax1 and a sink logit only on a softmax kind and not together, norm only on
 * linear. Else -1, with one problem naming the kind, the field and its value in problem
 * (cap bytes), such as "lsh: rounds out of range (got 100, expected 1..64)". */
int attention_config_check(const AttentionConfig *cfg, char *problem, size_t cap);

/* 0 if cfg can serve a model whose context is `context` positions: LSH's buckets at most
 * that many (more would leave some empty), synth-fdense's a dividing it and synth-frandom's
 * rank at most it (their parameters are tables over the context). Else -1, with the problem
 * naming the kind, as attention_config_check does: "synth-fdense: a must divide the context
 * (got a 3, context 16)". */
int attention_context_check(const AttentionConfig *cfg, int context, char *problem, size_t cap);

/* 1 if the kind computes softmax weights over keys (what --attn-dropout drops and the
 * heatmaps draw); 0 for linear, efficient and performer, which never form them. */
int attention_has_weights(AttentionKind kind);

/* 1 for the Synthesizer kinds, whose weights are trained parameters (cfg->synth). */
int attention_is_synth(AttentionKind kind);

/* Floats of one layer's Synthesizer parameters (NH heads, cfg->synth_len positions); 0 for
 * other kinds, or if cfg is invalid (synth_len < 1, fdense's factor not dividing it). */
size_t attention_synth_floats(const AttentionConfig *cfg, const AttentionShape *shape);

/* Bytes of one layer's state for contexts of up to n_alloc positions, or 0 if cfg is
 * invalid for this shape (a parameter out of range; see lab/attention_spec.c). */
size_t attention_state_bytes(const AttentionConfig *cfg, const AttentionShape *shape, int n_alloc);

/* Prepares a state block of attention_state_bytes() bytes for layer `layer`: draws
 * its random matrices, and marks it empty. Returns 0, or -1 if cfg is invalid. */
int attention_state_init(const AttentionConfig *cfg, const AttentionShape *shape, int n_alloc,
                         int layer, void *state);

/* Floats of scratch attention_step needs. */
size_t attention_step_scratch_floats(const AttentionConfig *cfg, const AttentionShape *shape,
                                     int n_alloc);

/* Appends T new keys/values to the state and attends for the queries at positions
 * pos .. pos+T-1, each seeing only its own and earlier positions.
 *   out            (T, NH * HS)    written
 *   q              (T, NH * HS)
 *   k_new, v_new   (T, NKV * HS)   keys/values of positions pos .. pos+T-1
 *   scratch        (attention_step_scratch_floats(),)  overwritten
 * pos == 0 starts a new sequence. Otherwise pos must continue the last call
 * (pos == previous pos + T), except for kind (A), which like a plain KV cache
 * attends over whatever rows 0 .. pos-1 hold (so it can rewind).
 * out == NULL (q may then be NULL too) only appends: the state advances exactly as
 * it would, but nothing attends (for filling a long context cheaply in benchmarks).
 * Prefill of T tokens gives the same bits as T single-token steps. Key/value heads run
 * in parallel (kernels_parallel_for: on the pool inside kernels_run), bitwise identical
 * for any thread count. Never allocates.
 * Returns 0, or -1 (nothing written) if pos/T are out of range or do not continue. */
int attention_step(const AttentionConfig *cfg, const AttentionShape *shape, void *state,
                   int n_alloc, float *out, const float *q, const float *k_new,
                   const float *v_new, int pos, int T, float *scratch);

/* The random matrix of (head, round) inside an initialised state, rows contiguous:
 * LSH (nb/2, HS) rotation, Performer (m, HS) features. *rows gets the row count.
 * NULL for kinds without randomness. For tests and diagnostics, which may overwrite
 * it (e.g. with a fixed matrix) before the first step. */
float *attention_state_random(const AttentionConfig *cfg, const AttentionShape *shape,
                              int n_alloc, void *state, int head, int round, int *rows);

/* Floats of scratch attention_weights needs for up to T positions, or 0 if cfg is invalid. */
size_t attention_weights_scratch_floats(const AttentionConfig *cfg, const AttentionShape *shape,
                                        int T);

/* The weights variant cfg gives, for queries q0 .. T-1, to keys 0 .. T-1 (for heatmaps and
 * explanation), recomputed from the queries and keys of positions 0 .. T-1 of one layer:
 *   w       (NH, T - q0, T)  written; w[h][i - q0][j]: the weight of key j for query i, or
 *                            NAN where key j is not visible to query i (a future key, outside
 *                            the window or pattern, in no shared LSH bucket, ...)
 *   q       (T, NH * HS)     queries of positions 0 .. T-1 (after any rotary embedding)
 *   k       (T, NKV * HS)    keys of positions 0 .. T-1 (the same ones attention_step got)
 *   state   a state block of (cfg, shape, n_alloc) after attention_state_init for this layer:
 *           only its random matrices are read (LSH rotations, Performer features); may be
 *           NULL for kinds without them. T <= n_alloc.
 *   scratch (attention_weights_scratch_floats(cfg, shape, T),)  overwritten
 * Softmax kinds: the weights of attention_step's own softmax, bit for bit; each row sums to
 * 1 (softmax1 or a sink logit: 1 minus the virtual key's share). Kernelised kinds (linear,
 * efficient, performer): the normalised share of each key that the feature map implies
 * (linear: rows sum to phi.z / (phi.z + eps), just under 1; linear norm=1: to 1). For every
 * kind sum_j w_ij v_j is what attention_step outputs for query i, to float rounding, except
 * linear norm=1, whose output is that sum times a positive factor per query (its RMS
 * normalisation depends on the values, which this function does not see). Rows do not
 * depend on q0 (q0 = T - 1 gives the last row alone, bitwise). Costs O(NH (T - q0) T HS)
 * plus one feature map or hash of each key (Performer: O(NH T m (T - q0 + HS))). Heads run
 * in parallel (kernels_parallel_for), bitwise identical for any thread count. Never
 * allocates.
 * Returns 0, or -1 (nothing written) if cfg is invalid, T < 1, T > n_alloc, q0 < 0,
 * q0 >= T, a pointer is NULL, or state is NULL for LSH (nb > 1) or Performer. */
int attention_weights(const AttentionConfig *cfg, const AttentionShape *shape, const void *state,
                      int n_alloc, float *w, const float *q, const float *k, int q0, int T,
                      float *scratch);

/* ------------------------------------------------------------------------- */
/* Backward of exact attention, for the trainer                                */

/* Floats of scratch attention_backward needs for sequences of up to T positions. */
size_t attention_backward_scratch_floats(const AttentionShape *shape, int T);

/* Backward of attention_forward with pos = 0 (training: T queries over T keys). The
 * softmax weights are recomputed from q and k, not stored. With out = softmax(s) . v
 * and s = (q . k) * scale, for each query t, head h and key t2 <= t:
 *   dv_t2 += p_t2 dout_t;  ds_t2 = p_t2 (dout_t . v_t2 - sum_j p_j dout_t . v_j);
 *   dq_t += ds_t2 scale k_t2;  dk_t2 += ds_t2 scale q_t.
 * With dropout (drop as given to attention_forward_dropout; NULL or p = 0: none) each
 * dout_t . v_t2 and each p_t2 of dv_t2 is multiplied by the mask's 0 or 1 / (1 - p).
 *   dq      (T, NH * HS)    accumulated (+=)
 *   dk, dv  (T, NKV * HS)   accumulated (+=)
 *   dout    (T, NH * HS)    gradient of the loss with respect to out
 *   q (T, NH * HS); k, v (T, NKV * HS): the forward's inputs
 *   scratch (attention_backward_scratch_floats(shape, T),)  overwritten
 * Key/value heads run in parallel (kernels_parallel_for: on the pool inside kernels_run,
 * on the calling thread alone when called from a job, as the trainer's per-sequence jobs
 * call it); each writes only its own columns of dq, dk and dv in a fixed order, so the
 * result is bitwise identical for any thread count. Never allocates. */
void attention_backward(const AttentionShape *shape, float *dq, float *dk, float *dv,
                        const float *dout, const float *q, const float *k, const float *v,
                        int T, const AttentionDropout *drop, float *scratch);

/* ------------------------------------------------------------------------- */
/* Training: every variant's forward and backward over one sequence           */
/*
 * The trainer runs a variant over T positions at once (pos = 0: T queries over their own T
 * keys) and needs its gradient. These compute exactly what attention_step computes for the
 * same cfg, q, k, v and random matrices (to float rounding: the sums may run in other
 * orders), and its exact gradient, recomputing what the forward computed rather than
 * storing it. Nothing here allocates; the kv heads are kernels_parallel_for jobs, which
 * run on the calling thread when called from a job (the trainer calls these from one job per
 * sequence), each summing in a fixed order, so results are bitwise identical for any thread
 * count. Exact attention with the shape's own scale and no sink (softmax1 or sink logit) is
 * attention_forward_dropout / attention_backward above, bit for bit.
 *
 * Random matrices (Performer features, LSH rotations) are an input: the caller draws them
 * with attention_draw_random, whose draw 0 gives the matrices attention_state_init puts in
 * a state; the trainer redraws them as it goes (Performer every K steps, LSH every step)
 * and no gradient flows through them or through LSH's bucket choice.
 */

/* Floats of one layer's random matrices (NH heads x rounds x rows x HS; 0 for kinds
 * without randomness, or if cfg is invalid for shape). */
size_t attention_random_floats(const AttentionConfig *cfg, const AttentionShape *shape);

/* Draws one layer's random matrices into random (attention_random_floats floats), keyed by
 * (cfg->seed, draw, layer, head, round) so they never depend on the thread count; draw 0
 * gives the matrices attention_state_init draws for the same layer. Returns 0, or -1 if
 * cfg is invalid or has no random matrices. */
int attention_draw_random(const AttentionConfig *cfg, const AttentionShape *shape, int layer,
                          unsigned long long draw, float *random);

/* Floats of scratch attention_train_forward and attention_train_backward need for up to T
 * positions, or 0 if cfg is invalid for shape. */
size_t attention_train_scratch_floats(const AttentionConfig *cfg, const AttentionShape *shape,
                                      int T);

/* The forward of variant cfg over one sequence of T positions:
 *   out     (T, NH * HS)   written
 *   q       (T, NH * HS);  k, v  (T, NKV * HS)
 *   random  attention_draw_random's matrices (NULL for kinds without)
 *   drop    dropout on the weights (softmax family only; NULL or p = 0: none)
 *   scratch (attention_train_scratch_floats(cfg, shape, T),)  overwritten
 * cfg->sink_logits is read when cfg->sink_logit, cfg->synth by a Synthesizer (which needs
 * T <= cfg->synth_len; its q is read before any rotation, see block.h). Masked variants
 * (window, dilated, strided, fixed, lsh) visit only the keys each query sees. Returns 0,
 * or -1 (nothing written) if cfg is invalid, T < 1, random is NULL for a kind that needs
 * it, drop->p is outside [0, 1) or above 0 for a kernelised kind, or out, q, k, v or
 * scratch is NULL. */
int attention_train_forward(const AttentionConfig *cfg, const AttentionShape *shape,
                            const float *random, const AttentionDropout *drop, float *out,
                            const float *q, const float *k, const float *v, int T,
                            float *scratch);

/* The backward of attention_train_forward with the same arguments: accumulates (+=)
 *   dq (T, NH * HS), dk and dv (T, NKV * HS), and the attention's own parameters' gradient
 *   into dparam: when cfg->sink_logit, (NH,) d loss / d b_h; for a Synthesizer,
 *   (attention_synth_floats,) in cfg->synth's layout; may be NULL when there is none
 * from dout (T, NH * HS) = d loss / d out. Linear attention's backward is a reverse scan
 * that stores no per-position HS x HS state. Returns 0, or -1 as the forward does. */
int attention_train_backward(const AttentionConfig *cfg, const AttentionShape *shape,
                             const float *random, const AttentionDropout *drop, float *dq,
                             float *dk, float *dv, float *dparam, const float *dout,
                             const float *q, const float *k, const float *v, int T,
                             float *scratch);

#endif /* ATTENTION_H */

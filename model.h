/* model.h: a decoder-only transformer: activations, attention state, forward pass.
 *
 * Two families share one forward pass: GPT-2 (LayerNorm, learned or rotary positions,
 * GELU MLP, biases, a classifier tied to the embedding but in some GGUF files) and Llama
 * (RMSNorm, rotary positions, SwiGLU MLP, no biases, grouped-query attention, tied or
 * separate classifier; Qwen2 is a Llama with biases of Q, K and V and RoPE over half-head
 * pairs). model_load reads a checkpoint (checkpoint.h: the formats, the
 * weights table) and allocates the activations and the
 * attention state: exact attention's KV cache, or another variant's (model_set_attention),
 * for as many positions as model_set_context asks. model_forward runs a chunk of new
 * tokens through the network and returns their next-token logits.
 *
 * Legend: V vocab, C model width, L layers, NH heads, NKV key/value heads, HS = C / NH,
 * KVD = NKV * HS, Hd MLP hidden width, S the model's context (positions), n_alloc the
 * positions the attention state holds (a run's context, or fewer while it grows), N tokens
 * in a chunk (model_forward's n).
 */
#ifndef MODEL_H
#define MODEL_H

#include <stddef.h>        /* size_t */
#include <stdint.h>        /* int8_t, SIZE_MAX */
#include "attention.h"     /* AttentionShape, AttentionConfig */
#include "checkpoint.h"    /* Config, Weights, Checkpoint */

#ifndef MODEL_MAX_STATE_BYTES
/* most bytes of attention state (KV cache or a variant's) a model may allocate: a header
 * cannot ask for more. 4 GiB, or half the address space where size_t has 32 bits (there
 * 4 << 30 would wrap to 0 and refuse every model) */
#if SIZE_MAX > 0xffffffffu
#define MODEL_MAX_STATE_BYTES ((size_t)4 << 30)
#else
#define MODEL_MAX_STATE_BYTES ((size_t)SIZE_MAX / 2)
#endif
#endif

/* Exact attention's memory: the keys and values of every position so far, per layer and
 * kv head (KVD = NKV HS): a head's positions in a row, which attention reads in turn. */
typedef struct {
    float *k;        /* (L, NKV, n_alloc, HS) */
    float *v;        /* (L, NKV, n_alloc, HS) */
    uint16_t *k_half, *v_half;   /* the same in IEEE half precision (Model.half_cache): one
                                  * pair or the other is allocated */
} KVCache;

/* What attention saw, kept only while tracing (model_trace) for heatmaps: each layer's
 * queries and keys, after any rotary embedding, by position. */
typedef struct {
    float *q;        /* (L, n_alloc, C) */
    float *k;        /* (L, n_alloc, KVD) */
    float *scratch;  /* attention_weights scratch for n_alloc positions */
} AttentionTrace;

/* Activations for a chunk of up to chunk_rows tokens, one buffer per name of block.h's
 * BlockBuffers (no buffer stands for two), reused by every layer. All owned. */
typedef struct {
    float *x;        /* (N, C) the residual stream: the embeddings, a block's input */
    float *xn1;      /* (N, C) norm1(x), the attention sublayer's input */
    float *q;        /* (N, C) queries */
    float *k;        /* (N, KVD) keys of the chunk (then copied into the KV cache) */
    float *v;        /* (N, KVD) values of the chunk, likewise */
    float *att;      /* (N, C) attention output, before W_O */
    float *proj;     /* (N, C) a sublayer's output (att W_O, or the MLP's), before the sum */
    float *x_mid;    /* (N, C) the stream after the attention sublayer */
    float *xn2;      /* (N, C) norm2(x_mid), the MLP's input */
    float *pre;      /* (N, Hd) the MLP's pre-activation */
    float *act;      /* (N, Hd) its activation */
    float *gate;     /* (N, Hd) xn2 W_gate^T, SwiGLU's factor (Llama) */
    float *out;      /* (N, C) the stream after a block, the next block's input: the
                      * forward pass swaps the names x and out in its BlockBuffers after
                      * each block (here they stay as allocated) */
    float *xn_final; /* (N, C) the final norm of the stream, the classifier's input */
    float *logits;   /* (N, V) */
    int8_t *xq;      /* (N, max(C, Hd)) int8 activations (int8 models) */
    float *xs;       /* (N, groups of max(C, Hd)) their scales (int8 models) */
    float *rope;     /* (N, HS) cos and sin of each rotary angle (rotary positions) */
    float *scratch;  /* attention's scratch: the score rows of a block of queries for
                      * n_alloc positions, per head, and more for a half cache or a lab
                      * variant (model.c's kv_scratch_floats and attention_step's needs) */
} RunState;

typedef struct {
    Config config;             /* copy of checkpoint.config */
    Checkpoint checkpoint;     /* the weights (mapped or owned) */
    RunState state;
    AttentionShape heads;      /* head layout and 1/sqrt(HS) scale */
    AttentionConfig *attention_configs;  /* (L,) owned: each layer's variant (at load: exact,
                               * or what a trained variant's checkpoint records) */
    int lab;                   /* 0: exact attention over the cache; 1: some layer's variant
                                * is not plain, and every layer runs attention_step over its
                                * part of attention_state (model_forward takes lab_layers,
                                * as it does to trace or for a GGUF model's roundings) */
    KVCache cache;             /* exact attention's keys and values (lab == 0) */
    int half_cache;            /* 1: the KV cache keeps them in half precision (at load: a
                                * GGUF model's, whose keys and values are rounded so anyway) */
    void *attention_state;     /* the variants' states, layer l's at attention_offset[l]
                                * (lab == 1) */
    size_t *attention_offset;  /* (L + 1,) owned: byte offset of each layer's state in
                                * attention_state (lab == 1); [L] = attention_bytes */
    size_t attention_bytes;    /* bytes of every layer's attention state, or of the KV
                                * cache's keys and values */
    int n_alloc;               /* positions the attention state holds now (<= max_ctx):
                                * generate.h's n_alloc, which may be fewer than the run's
                                * context (its n_ctx) while the state grows */
    int max_ctx;               /* the model's context S, or as many positions as
                                * MODEL_MAX_STATE_BYTES holds of its KV cache (in half_cache's
                                * precision) if S needs more */
    int tracing;               /* 1: model_forward fills trace */
    AttentionTrace trace;      /* queries and keys by position (tracing == 1) */
    const char *format;        /* what the file was read as, and what was assumed (the
                                * text of m->checkpoint: valid while m lives) */
    int max_chunk;             /* most tokens one model_forward call may take (<= n_alloc) */
    int chunk_rows;            /* tokens the activations hold (max_chunk <= chunk_rows) */
} Model;

/* Load and validate a checkpoint (checkpoint_load), then allocate the attention it records
 * (exact attention's KV cache unless it names a trained variant) for n_alloc positions (0:
 * m->max_ctx, the whole context S or as many positions as MODEL_MAX_STATE_BYTES holds if S
 * needs more; a caller that will set the context later asks for 1, and no memory is
 * taken for positions it will not run; memory is committed as it is first written, and
 * model_set_context sizes it and commits it), and activations for chunks of up to
 * min(max_chunk, max_ctx) tokens (max_chunk >= 1; m->max_chunk: at most n_alloc of them).
 * Returns 0, or -1 after one stderr line ("model: PATH: problem (got X, expected Y)", or
 * "model: attention ..." from the attention's setup). *m is zeroed first and model_free is
 * safe after either outcome. */
int model_load(Model *m, const char *path, int max_chunk, int n_alloc);

/* 1 if cfg computes exactly what the plain model computes (exact attention, scaled, no
 * softmax1 or sink logit, temperature 1): the model then keeps a KV cache and runs
 * attention_forward_cache; any other cfg runs the lab's attention_step over its own
 * state. */
int model_attention_is_plain(const AttentionConfig *cfg);

/* Replace the attention of layer l by the variant cfgs[l] (copies are kept; cfgs must
 * not be m->attention_configs), for m->n_alloc positions: frees and reallocates the
 * per-layer states and the scratch, then draws the variants' random matrices. A layer
 * whose cfg has sink_logit = 1 and no sink_logits gets the checkpoint's trained ones
 * (zeros if it has none). If every layer is plain the model keeps a KV cache, else every
 * layer runs attention_step. The next model_forward must start at position 0. Returns 0,
 * or -1 after a stderr line if a cfg is invalid or memory runs out (the model then has no
 * attention state: model_forward, model_set_context, model_set_half_cache and model_trace
 * refuse to run until a model_set_attention succeeds). */
int model_set_attention_layers(Model *m, const AttentionConfig *cfgs);

/* model_set_attention_layers with cfg for every layer. */
int model_set_attention(Model *m, const AttentionConfig *cfg);

/* Keep n_alloc positions (1 .. max_ctx) of attention state, reallocated for the current
 * variant: a run that will never reach position S needs less memory. Also sets
 * m->max_chunk to the smaller of n_alloc and the rows model_load allocated activations
 * for, then commits the memory a run writes (the attention state, the activations but the
 * logits; the logits and a variant's state, which holds its random matrices, keep their
 * values): its pages are taken now, not in the first prompt. The next
 * model_forward must start at position 0. Returns 0, or -1 after a stderr line (the
 * model then has no attention state, but keeps its variant: another model_set_context may
 * succeed). */
int model_set_context(Model *m, int n_alloc);

/* Keep exact attention's KV cache in half precision (half = 1: kernels_to_half, half the
 * memory and half the bytes attention reads at each token; what llama.cpp does by default)
 * or in floats (0). The attention state is reallocated (committed only by the next
 * model_set_context); the next model_forward must start at position 0. max_ctx follows
 * the precision (n_alloc is cut to it). A lab variant's own state is not affected.
 * Returns 0, or -1 after a stderr line. */
int model_set_half_cache(Model *m, int half);

/* Start (on = 1) or stop (0) keeping every layer's queries and keys by position, for
 * model_attention_weights; memory (L, n_alloc, C + KVD) floats, reallocated by
 * model_set_context and model_set_attention. Returns 0, or -1 after a stderr line. */
int model_trace(Model *m, int on);

/* The attention weights of layer `layer` for queries q0 .. T-1 over keys 0 .. T-1, from
 * the traced queries and keys of positions 0 .. T-1 (run before, while tracing), as the
 * current variant computes them (attention_weights):
 *   w (NH, T - q0, T)  written; NAN where a key is not visible to the query.
 * Returns 0, or -1 after a stderr line (not tracing, or layer, q0, T out of range). */
int model_attention_weights(Model *m, int layer, int q0, int T, float *w);

/* Multiply-adds of the weight matrices for one token: the work a token brings to share
 * among threads (a double: a large model's count overflows a 32-bit long). */
double model_macs_per_token(const Model *m);

/* Release everything model_load made. Safe on a zeroed or already freed Model. */
void model_free(Model *m);

/* Run n new tokens (1 <= n <= max_chunk) at positions pos .. pos+n-1, reading and
 * extending each layer's attention state (positions < pos must have been run
 * before, by the calls just before this one). Returns the
 * logits: (n, V) if all_logits, else (1, V) for the last token only (whose last layer
 * then runs attention, W_O and the MLP for that row alone); the pointer
 * is owned by the model, valid until the next call, and may be overwritten (the
 * sampler scales it in place). Returns NULL (with a stderr
 * line) if n is outside 1 .. max_chunk, pos < 0 or pos + n > n_alloc, a token id is outside
 * 0 .. V-1, there is no attention state, or a variant cannot continue at pos. */
float *model_forward(Model *m, const int *tokens, int n, int pos, int all_logits);

#endif /* MODEL_H */

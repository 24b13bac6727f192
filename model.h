/* model.h: a decoder-only transformer: configuration, weights, attention state, forward pass.
 *
 * Two families share one forward pass: GPT-2 (LayerNorm, learned positions, GELU MLP,
 * biases, tied classifier) and Llama (RMSNorm, rotary positions, SwiGLU MLP, no biases,
 * grouped-query attention, tied or separate classifier). model_load reads llm.c's GPT-2
 * checkpoints and llama2.c's checkpoints (see README "File formats"), validates every
 * header field and the exact file size before touching the data, maps fp32 weights
 * straight from the file (bf16 and int8 files are converted to fp32 once at load), and
 * allocates the activations and each layer's attention state (exact attention's KV
 * cache, or another variant's; model_set_attention). model_forward then runs a block of new
 * tokens through the network and returns their next-token logits.
 *
 * Legend: V vocab, Vp padded vocab, C model width, L layers, NH heads, HS = C / NH,
 * KVD = NKV * HS, Hd MLP hidden width, S seq_len (context), N tokens in a chunk.
 */
#ifndef MODEL_H
#define MODEL_H

#include <stddef.h>       /* size_t */
#include "attention.h"    /* AttentionShape */

#define MODEL_GPT2_MAGIC 20240326      /* llm.c checkpoint magic (a date: 2024-03-26) */
#define MODEL_GPT2_FP32 3              /* llm.c version: fp32 parameters */
#define MODEL_GPT2_BF16 5              /* llm.c version: bf16 parameters */
#define MODEL_HEADER_INTS 256          /* llm.c header: 256 little-endian int32 */
#define MODEL_NORM_EPS 1e-5f           /* LayerNorm (GPT-2) and RMSNorm (Llama) epsilon */
#define MODEL_LLAMA_MAGIC 0x616b3432   /* llama2.c's versioned files: "ak42" as LE uint32 */
#define MODEL_LLAMA_FP32 1             /* llama2.c version 1: fp32 weights */
#define MODEL_LLAMA_Q8 2               /* llama2.c version 2: int8 Q8_0 groups + fp32 scales */
#define MODEL_LLAMA_HEADER_BYTES 256   /* llama2.c versioned header, zero-padded */
#define MODEL_LLAMA_LEGACY_INTS 7      /* llama2.c legacy header: 7 int32, no magic */
#define MODEL_ROPE_BASE 10000.0f       /* rotary embedding base, as llama2.c */

typedef enum { MODEL_GPT2, MODEL_LLAMA } ModelFamily;

/* Sanity bounds on header fields; far above any model this engine is meant for. */
#ifndef MODEL_MAX_DIM
#define MODEL_MAX_DIM (1 << 16)        /* C, Hd */
#endif
#ifndef MODEL_MAX_LAYERS
#define MODEL_MAX_LAYERS 1024          /* L */
#endif
#ifndef MODEL_MAX_SEQ_LEN
#define MODEL_MAX_SEQ_LEN (1 << 20)    /* S */
#endif
#ifndef MODEL_PARALLEL_MIN_MACS
#define MODEL_PARALLEL_MIN_MACS (1L << 18)  /* smaller matmuls run on one thread */
#endif
#ifndef MODEL_MAX_VOCAB
#define MODEL_MAX_VOCAB (1 << 21)      /* V, Vp */
#endif

typedef struct {
    ModelFamily family;     /* which block: GPT-2 or Llama */
    int seq_len;            /* S: context length (positions 0 .. S-1) */
    int vocab_size;         /* V: real tokens; logits have V columns */
    int padded_vocab_size;  /* Vp: rows of the embedding table (>= V) */
    int n_layers;           /* L */
    int n_heads;            /* NH */
    int n_kv_heads;         /* NKV (== NH for GPT-2) */
    int dim;                /* C */
    int hidden_dim;         /* Hd: MLP width (4C for GPT-2, from the header for Llama) */
    int head_dim;           /* HS = C / NH */
    int kv_dim;             /* KVD = NKV * HS */
} Config;

/* Views of one layer's parameters, into the weight block. Biases are NULL for Llama. */
typedef struct {
    const float *norm1_w, *norm1_b;   /* (C,), (C,) norm before attention */
    const float *wq, *wk, *wv;        /* (C, C), (KVD, C), (KVD, C) */
    const float *bq, *bk, *bv;        /* (C,), (KVD,), (KVD,) */
    const float *wo, *bo;             /* (C, C), (C,) attention output projection */
    const float *norm2_w, *norm2_b;   /* (C,), (C,) norm before the MLP */
    const float *w_up, *b_up;         /* (Hd, C), (Hd,) GPT-2 fc; Llama w1 */
    const float *w_gate;              /* (Hd, C) Llama w3 (SwiGLU gate); NULL for GPT-2 */
    const float *w_down, *b_down;     /* (C, Hd), (C,) GPT-2 fcproj; Llama w2 */
} LayerWeights;

typedef struct {
    const float *token_embedding;     /* (Vp, C) view */
    const float *pos_embedding;       /* (S, C) view; NULL for Llama (rotary positions) */
    LayerWeights *layers;             /* (L,) owned array of views */
    const float *norm_final_w;        /* (C,) view */
    const float *norm_final_b;        /* (C,) view; NULL for Llama */
    const float *classifier;          /* (V, C) view: token_embedding when tied */
} Weights;

/* Activations for a chunk of up to max_chunk tokens. All owned. */
typedef struct {
    float *x;        /* (N, C) residual stream */
    float *xn;       /* (N, C) normalised input of the current sublayer */
    float *q;        /* (N, C) queries */
    float *k;        /* (N, KVD) keys of the chunk, staged before attention_step stores them */
    float *v;        /* (N, KVD) values of the chunk, likewise */
    float *att;      /* (N, C) attention output, before W_O */
    float *hidden;   /* (N, Hd) MLP activations */
    float *gate;     /* (N, Hd) SwiGLU gate (Llama) */
    float *logits;   /* (N, V) */
    float *scratch;  /* attention scratch, attention_step_scratch_floats(config, S) */
} RunState;

typedef struct {
    Config config;
    Weights weights;
    RunState state;
    AttentionShape attention;  /* head layout and 1/sqrt(HS) scale */
    AttentionConfig attention_config;  /* the variant attention_step runs (exact at load) */
    void *attention_state;     /* (L, attention_layer_bytes) owned: each layer's attention
                                * state (its KV cache, ring buffer or recurrent sums) */
    size_t attention_layer_bytes;      /* attention_state_bytes(config, S), cache-line sized */
    const char *format;        /* what the file was read as, and what was assumed */
    int max_chunk;             /* most tokens one model_forward call may take */
    void *map;                 /* the mmap'd file (fp32), or NULL */
    size_t map_size;           /* bytes mapped */
    float *params;             /* owned parameter block (bf16, int8 files), or NULL */
} Model;

/* Load and validate a checkpoint, and allocate activations for chunks of up to
 * min(max_chunk, S) tokens (max_chunk >= 1; the result is in m->max_chunk) and exact
 * attention's state (a KV cache per layer). Returns 0, or -1 after printing one
 * stderr line "model: PATH: problem (got X, expected Y)". *m is zeroed first and
 * model_free is safe after either outcome. */
int model_load(Model *m, const char *path, int max_chunk);

/* Replace the attention of every layer by the variant cfg (a copy is kept): frees
 * and reallocates the per-layer states and the attention scratch, then draws the
 * variant's random matrices. The next model_forward must start at position 0.
 * Returns 0, or -1 after a stderr line if cfg is invalid or memory runs out (the
 * model then has no attention state and model_forward refuses to run). */
int model_set_attention(Model *m, const AttentionConfig *cfg);

/* Release everything model_load made. Safe on a zeroed or already freed Model. */
void model_free(Model *m);

/* Run n new tokens (1 <= n <= max_chunk) at positions pos .. pos+n-1, reading and
 * extending each layer's attention state (positions < pos must have been run
 * before, by the calls just before this one). Returns the
 * logits: (n, V) if all_logits, else (1, V) for the last token only; the pointer
 * is owned by the model, valid until the next call, and may be overwritten (the
 * sampler scales it in place). Returns NULL (with a stderr
 * line) if n, pos + n > S, or a token id >= V is out of range. */
float *model_forward(Model *m, const int *tokens, int n, int pos, int all_logits);

/* ---- Layer functions, shared with the trainer (one forward implementation) ---- */

/* out (N, C) = (x - mean) / sqrt(var + eps) * w + b, over each row of x (N, C). */
void model_layernorm(float *out, const float *x, const float *w, const float *b, int N, int C);

/* out (N, OC) = x (N, IC) . w (OC, IC)^T + b (OC,); b may be NULL. Rows of w run in
 * parallel; each output element is one thread's fixed-order sum. */
void model_matmul(float *out, const float *x, const float *w, const float *b,
                  int N, int IC, int OC);

/* x (n,) = GELU(x), tanh approximation, in place. */
void model_gelu(float *x, size_t n);

/* out (N, C) = x / sqrt(mean(x^2) + eps) * w, over each row of x (N, C). */
void model_rmsnorm(float *out, const float *x, const float *w, int N, int C);

#endif /* MODEL_H */

/* model.h: a GPT-2 style transformer: its configuration, weights, KV cache and forward pass.
 *
 * model_load reads llm.c's GPT-2 checkpoint format (see README "File formats"),
 * validates every header field and the file size before touching the data, maps
 * fp32 weights straight from the file (bf16 files are converted once at load),
 * and allocates the activations and the KV cache. model_forward then runs a block
 * of new tokens through the network and returns their next-token logits.
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
#define MODEL_NORM_EPS 1e-5f           /* LayerNorm epsilon of GPT-2 */

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
#ifndef MODEL_MAX_VOCAB
#define MODEL_MAX_VOCAB (1 << 21)      /* V, Vp */
#endif

typedef struct {
    int seq_len;            /* S: context length (positions 0 .. S-1) */
    int vocab_size;         /* V: real tokens; logits have V columns */
    int padded_vocab_size;  /* Vp: rows of the embedding table (>= V) */
    int n_layers;           /* L */
    int n_heads;            /* NH */
    int n_kv_heads;         /* NKV (== NH for GPT-2) */
    int dim;                /* C */
    int hidden_dim;         /* Hd: MLP width (4C for GPT-2) */
    int head_dim;           /* HS = C / NH */
    int kv_dim;             /* KVD = NKV * HS */
} Config;

/* Views of one layer's parameters, into the weight block. */
typedef struct {
    const float *norm1_w, *norm1_b;   /* (C,), (C,) LayerNorm before attention */
    const float *wq, *wk, *wv;        /* (C, C), (KVD, C), (KVD, C) */
    const float *bq, *bk, *bv;        /* (C,), (KVD,), (KVD,) */
    const float *wo, *bo;             /* (C, C), (C,) attention output projection */
    const float *norm2_w, *norm2_b;   /* (C,), (C,) LayerNorm before the MLP */
    const float *w_up, *b_up;         /* (Hd, C), (Hd,) */
    const float *w_down, *b_down;     /* (C, Hd), (C,) */
} LayerWeights;

typedef struct {
    const float *token_embedding;     /* (Vp, C) view; also the tied classifier */
    const float *pos_embedding;       /* (S, C) view */
    LayerWeights *layers;             /* (L,) owned array of views */
    const float *norm_final_w;        /* (C,) view */
    const float *norm_final_b;        /* (C,) view */
} Weights;

typedef struct {
    float *key;     /* (L, S, KVD) owned: key of every layer and position */
    float *value;   /* (L, S, KVD) owned */
} KVCache;

/* Activations for a chunk of up to max_chunk tokens. All owned. */
typedef struct {
    float *x;        /* (N, C) residual stream */
    float *xn;       /* (N, C) normalised input of the current sublayer */
    float *q;        /* (N, C) queries */
    float *att;      /* (N, C) attention output, before W_O */
    float *hidden;   /* (N, Hd) MLP activations */
    float *logits;   /* (N, V) */
    float *scratch;  /* attention scratch, attention_scratch_floats(S) */
} RunState;

typedef struct {
    Config config;
    Weights weights;
    KVCache cache;
    RunState state;
    AttentionShape attention;  /* head layout and 1/sqrt(HS) scale */
    int max_chunk;             /* most tokens one model_forward call may take */
    void *map;                 /* the mmap'd file (fp32), or NULL */
    size_t map_size;           /* bytes mapped */
    float *params;             /* owned parameter block (bf16 files), or NULL */
} Model;

/* Load and validate a checkpoint, and allocate activations for chunks of up to
 * min(max_chunk, S) tokens (max_chunk >= 1; the result is in m->max_chunk). Returns 0, or -1 after printing one
 * stderr line "model: PATH: problem (got X, expected Y)". *m is zeroed first and
 * model_free is safe after either outcome. */
int model_load(Model *m, const char *path, int max_chunk);

/* Release everything model_load made. Safe on a zeroed or already freed Model. */
void model_free(Model *m);

/* Run n new tokens (1 <= n <= max_chunk) at positions pos .. pos+n-1, reading and
 * extending the KV cache (positions < pos must have been run before). Returns the
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

#endif /* MODEL_H */

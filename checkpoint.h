/* checkpoint.h: what a weights file holds, and reading and writing the formats.
 *
 * checkpoint_load recognises llm.c's GPT-2 checkpoints (fp32, bf16, and this project's
 * int8) and llama2.c's (legacy, version 1 fp32, version 2 int8), validates every header
 * field and the exact file size before touching any weight, and points a Weights table at
 * the tensors: fp32 and int8 tensors are used in place from the mapped file (int8 scales
 * are copied, aligned), bf16 ones are widened once. checkpoint_save_q8 writes the int8 form
 * of a loaded model (the quantize program), with the attention a trained variant's file
 * records. A GGUF file (llama.cpp's) is handed to formats/gguf.c, which fills the same
 * Checkpoint from its own tensor table. The network itself is in model.c.
 *
 * Legend: V vocab, Vp padded vocab, C width, L layers, NH heads, NKV kv heads, HS = C / NH,
 * KVD = NKV * HS, Hd MLP hidden width, S seq_len (context), GS int8 group size.
 */
#ifndef CHECKPOINT_H
#define CHECKPOINT_H

#include <stddef.h>    /* size_t */
#include <stdint.h>    /* int32_t */
#include "kernels.h"   /* Matrix; KERNELS_NORM_EPS, Config.norm_eps's default */
#include "attention.h" /* AttentionConfig: a trained variant's attention, per layer */

#define CHECKPOINT_GPT2_MAGIC 20240326     /* llm.c checkpoint magic (a date: 2024-03-26) */
#define CHECKPOINT_GPT2_FP32 3             /* llm.c version: fp32 parameters */
#define CHECKPOINT_GPT2_BF16 5             /* llm.c version: bf16 parameters */
#define CHECKPOINT_GPT2_Q8 80              /* this project's version: int8 matrices ("8.0") */
#define CHECKPOINT_GPT2_HEADER_INTS 256    /* llm.c header: 256 little-endian int32 */
#define CHECKPOINT_LLAMA_MAGIC 0x616b3432  /* llama2.c's versioned files: "ak42" as LE uint32 */
#define CHECKPOINT_LLAMA_FP32 1            /* llama2.c version 1: fp32 weights */
#define CHECKPOINT_LLAMA_Q8 2              /* llama2.c version 2: int8 groups + fp32 scales */
#define CHECKPOINT_LLAMA_HEADER_BYTES 256  /* llama2.c versioned header, zero-padded */
#define CHECKPOINT_LLAMA_LEGACY_INTS 7     /* llama2.c legacy header: 7 int32, no magic */
#define CHECKPOINT_Q8_GROUP 32             /* default int8 group size of checkpoint_save_q8 */
/* The most int8 weights a token can read from a last-level cache (32 MiB: a Zen 3, 4 or 5
 * CCD's): more come from memory (checkpoint_mark_cold). One figure for every machine (an
 * X3D part holds 96 MiB, many Intel parts less), and a GGUF file's F16 or F32 matrices
 * beside int8 ones are not counted: a wrong guess costs speed, never a result. */
#define CHECKPOINT_CACHED_BYTES ((size_t)32 << 20)
/* This project's extension of llm.c's GPT-2 file: header slot [9] = 1 says that after the
 * parameters come, per layer, CHECKPOINT_ATTN_INTS int32 describing its attention (a
 * record, docs/formats.md), then (L, NH) float32 learned sink logits, then a trained
 * Synthesizer's parameters (checkpoint_synth_bytes; none for other kinds). llm.c leaves the
 * slot 0 and reads no further than its parameters, so its files load as before and it
 * can still read the parameters of ours. */
#define CHECKPOINT_GPT2_ATTN_SLOT 9
#define CHECKPOINT_ATTN_VERSION 1
#define CHECKPOINT_ATTN_INTS 20
/* Its second extension: header slot [10] holds the position scheme (ModelPositions). 0,
 * llm.c's learned table: the file has wpe (S, C). 1, rotary (RoPE, as Llama's: base
 * MODEL_ROPE_BASE, pairs (2i, 2i+1) of each head): the file has no wpe tensor at all, so
 * llm.c cannot read it. llm.c leaves the slot 0. */
#define CHECKPOINT_GPT2_POS_SLOT 10
#define MODEL_ROPE_BASE 10000.0f           /* rotary embedding base, as llama2.c */

typedef enum { MODEL_GPT2, MODEL_LLAMA } ModelFamily;
/* How a model knows where a token is; the values are header slot [10]'s. */
typedef enum {
    MODEL_POSITIONS_LEARNED = 0,   /* a learned table wpe (S, C) added to the embedding */
    MODEL_POSITIONS_ROTARY = 1     /* q and k rotated by position (RoPE); every Llama */
} ModelPositions;

/* Sanity bounds on header fields; far above any model this engine is meant for. */
#ifndef MODEL_MAX_DIM
#define MODEL_MAX_DIM (1 << 16)        /* Hd; C is checked against MODEL_MAX_DIM / 4 */
#endif
_Static_assert(MODEL_MAX_DIM <= KERNELS_HALF_MAX_IC, "an F16 matrix's rows fit the kernels");
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
    ModelFamily family;     /* which block: GPT-2 or Llama */
    ModelPositions positions;  /* learned table (GPT-2's) or rotary (Llama's, or a GPT-2
                            * whose header slot [10] says so); block_rotary reads it */
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
    int half_kv;            /* 1: q, k and v rounded to fp16 after RoPE, as llama.cpp's
                            * default F16 KV cache does (GGUF files); 0 otherwise */
    float rope_base;        /* RoPE's base (a GGUF file's llama.rope.freq_base: SmolLM2's
                            * 100000); 0: MODEL_ROPE_BASE, as every other file */
    int rope_halves;        /* 1: RoPE turns dimension i of a head with i + HS/2 (GPT-NeoX's
                            * pairing: a GGUF file's qwen2); 0: i with i + 1, i even
                            * (llama2.c's), as every other file */
    float norm_eps;         /* RMSNorm's epsilon (a GGUF file's: Qwen2's 1e-6); 0:
                            * KERNELS_NORM_EPS, as every other file */
} Config;

/* Views of one layer's parameters. Biases are NULL for Llama (but the bq, bk and bv a GGUF
 * file has: a qwen2 file's, any of them in a llama file). */
typedef struct {
    const float *norm1_w, *norm1_b;   /* (C,), (C,) norm before attention */
    Matrix wq, wk, wv;                /* (C, C), (KVD, C), (KVD, C) */
    const float *bq, *bk, *bv;        /* (C,), (KVD,), (KVD,) */
    Matrix wo;                        /* (C, C) attention output projection */
    const float *bo;                  /* (C,) */
    const float *norm2_w, *norm2_b;   /* (C,), (C,) norm before the MLP */
    /* The MLP's two input matrices, named by role in both families: w_up feeds the
     * activation, w_gate the factor SwiGLU multiplies it by. GGUF and Hugging Face name
     * Llama's pair the other way round: w_up is their ffn_gate / gate_proj, w_gate their
     * ffn_up / up_proj. */
    Matrix w_up;                      /* (Hd, C) GPT-2 fc; Llama w1 */
    const float *b_up;                /* (Hd,) */
    Matrix w_gate;                    /* (Hd, C) Llama w3; empty for GPT-2 */
    Matrix w_down;                    /* (C, Hd) GPT-2 fcproj; Llama w2 */
    const float *b_down;              /* (C,) */
} LayerWeights;

typedef struct {
    Matrix token_embedding;           /* (Vp, C) */
    const float *pos_embedding;       /* (S, C); NULL for rotary positions (every Llama) */
    LayerWeights *layers;             /* (L,) owned array of views */
    const float *norm_final_w;        /* (C,) */
    const float *norm_final_b;        /* (C,); NULL for Llama */
    Matrix classifier;                /* (V, C): token_embedding's first V rows when tied */
    int shared_classifier;            /* 1 if classifier is the token embedding */
    const float *rope_freqs;          /* (HS/2,) RoPE's pair i turns at its frequency divided
                                       * by rope_freqs[i] (Llama 3.1's long-context factors, a
                                       * GGUF file's rope_freqs.weight); NULL: by 1 */
    int int8;                         /* 1 if the embedding is int8 (QuantMatrix): a file
                                       * written in int8 */
} Weights;

/* The tensors a checkpoint can hold, by role (names as in llm.c and llama2.c). */
typedef enum {
    TENSOR_WTE, TENSOR_WPE, TENSOR_LN1W, TENSOR_LN1B, TENSOR_QKVW, TENSOR_QKVB,
    TENSOR_ATTPROJW, TENSOR_ATTPROJB, TENSOR_LN2W, TENSOR_LN2B, TENSOR_FCW, TENSOR_FCB,
    TENSOR_FCPROJW, TENSOR_FCPROJB, TENSOR_LNFW, TENSOR_LNFB,            /* GPT-2 */
    TENSOR_RMS_ATT, TENSOR_RMS_FFN, TENSOR_RMS_FINAL, TENSOR_TOK, TENSOR_WQ, TENSOR_WK,
    TENSOR_WV, TENSOR_WO, TENSOR_W1, TENSOR_W2, TENSOR_W3, TENSOR_CLS,  /* Llama */
    TENSOR_ROPE,                                                        /* legacy, unused */
    TENSOR_ROPE_FREQS,                      /* Llama 3.1's frequency divisors (GGUF only) */
    TENSOR_BQ, TENSOR_BK, TENSOR_BV,        /* Q, K, V biases (GGUF: qwen2's, llama's) */
    TENSOR_COUNT
} TensorName;

/* One layer's data of a tensor whose layers are not stacked in one block (a GGUF file's
 * blk.N.* tensors): views, fp32 values, halves, or int8 values with their scales. */
typedef struct {
    const float *f32;      /* (rows, cols) when fp32 */
    const int8_t *q;       /* (rows, cols) when int8 */
    const float *scale;    /* (rows, ceil(cols / group)) when int8 */
    const float *offset;   /* int8 with offsets (QuantMatrix.offset): likewise, else NULL */
    const uint16_t *f16;   /* (rows, cols) when IEEE halves (a GGUF F16 matrix) */
} CheckpointPart;

/* One tensor of the file, (layers, rows, cols): fp32, halves (a GGUF file's F16
 * matrices), or int8 with per-row groups. */
typedef struct {
    int present;           /* 1 if the file has it */
    int is_matrix;         /* matrices may be int8 or halves; vectors (norms, biases, wpe)
                            * are fp32 */
    int layers, rows, cols;
    const float *f32;      /* (layers, rows, cols) when fp32, else NULL */
    const uint16_t *f16;   /* halves: layer 0's part (parts), else NULL */
    const int8_t *q;       /* int8: layer l's (rows, cols) values start at q + l * q_stride */
    size_t q_stride;       /* bytes between layers in the file (values and their scales) */
    const float *scale;    /* int8: (layers, rows, ceil(cols / group)), owned copy */
    int group;             /* int8 group size GS */
    const CheckpointPart *parts;   /* (layers,) each layer's own data (then f32, f16, q and
                           * scale are layer 0's), or NULL when the layers are stacked as
                           * above */
} CheckpointTensor;

typedef struct {
    Config config;
    Weights weights;
    CheckpointTensor tensors[TENSOR_COUNT];  /* by TensorName; Weights views into these */
    char format[160];      /* what the file was read as, and what was assumed */
    int gguf;              /* 1 if read from a GGUF file (which carries its tokenizer) */
    void *map;             /* the file in memory (os_map_file), or NULL */
    size_t map_size;       /* bytes mapped */
    int map_own;           /* 1 if map is the process's own copy of the file (os_map_file) */
    int packed;            /* 1 once checkpoint_pack has rearranged int8 rows */
    unsigned touched;      /* a checksum of one byte per page, read at load (see .c) */
    void *owned;           /* converted tensors (bf16 and F16 vectors widened, halves from
                            * odd places, int8 scales; GGUF's F32 vectors, int8 values and
                            * offsets), os_alloc_zeroed's, or NULL */
    AttentionConfig *attention;   /* (L,) owned: the attention each layer was trained with
                           * (the extension above), or NULL for a file without it; a
                           * layer's sink_logits points into sink_logits when it has them,
                           * a Synthesizer layer's synth into synth */
    float *sink_logits;    /* (L, NH) owned learned sink logits, or NULL */
    float *synth;          /* owned copy of the Synthesizer layers' parameters
                            * (checkpoint_synth_bytes), or NULL */
} Checkpoint;

/* Reads and validates the checkpoint at path into ck (zeroed first). Returns 0, or -1
 * after one stderr line "model: PATH: problem (got X, expected Y)" (a big-endian host is
 * refused by name); checkpoint_free is safe after either outcome. The weights stay valid
 * until checkpoint_free. */
int checkpoint_load(Checkpoint *ck, const char *path);

/* Checks c's fields (each in range, the divisibilities, an even head size for rotary
 * positions) and derives head_dim and kv_dim. Returns 0, or -1 after a stderr line
 * "model: PATH: PREFIXproblem". */
int checkpoint_check_config(Config *c, const char *path, const char *prefix);

/* Marks every int8 matrix a token reads (the n_layers layers' and the classifier) cold
 * (QuantMatrix.cold: read from memory at each token, so the row kernel asks for its lines
 * ahead) when together, values and scales, they are more than CHECKPOINT_CACHED_BYTES;
 * checkpoint_load calls it. */
void checkpoint_mark_cold(Weights *w, int n_layers);

/* Rearranges the int8 matrices the products read (the layers' and the classifier) into
 * the packed layout where this build's kernels read them faster (quant.h: quant_pack), in
 * memory, the file unchanged; a shared classifier's embedding learns of its packed rows.
 * Only memory that is the process's own is rearranged: GGUF's converted values, a file
 * read whole into memory (os_map_file), or a mapped file of at most
 * CHECKPOINT_PACK_MAPPED_BYTES (its pages then become the process's own); a larger mapped
 * file stays the kernel's to drop and read again, in rows. Any matrix may stay in rows
 * (out of memory for the scratch): the results are the same bits either way. The writer
 * (checkpoint_save_q8) refuses a packed checkpoint: quantize does not call this. */
#define CHECKPOINT_PACK_MAPPED_BYTES (4u << 20)
void checkpoint_pack(Checkpoint *ck);

/* Releases the map and everything owned. Safe on a zeroed or freed Checkpoint. */
void checkpoint_free(Checkpoint *ck);

/* *out = a * b, or -1 if that overflows size_t (0 otherwise): every size computed from a
 * file's header goes through it. */
int checkpoint_size_mul(size_t a, size_t b, size_t *out);

/* Reads llm.c's GPT-2 header h as checkpoint_load does (magic, version, reserved slots,
 * the width's range): c gets the shape (seq_len, vocab_size, padded_vocab_size, n_layers,
 * n_heads, dim, positions), *version the version. Returns 0, or -1 after a stderr line
 * naming path.
 * The header of llm.c's files is read here only: the trainer resumes through it. */
int checkpoint_read_gpt2_header(const int32_t h[CHECKPOINT_GPT2_HEADER_INTS], const char *path,
                                Config *c, int *version);

/* Fills llm.c's 256-int32 GPT-2 header for c: magic, version (CHECKPOINT_GPT2_FP32 or
 * CHECKPOINT_GPT2_Q8, which also records the group size), sizes, c's position scheme in
 * slot [10] (0 for learned, as llm.c's), zeros elsewhere. */
void checkpoint_gpt2_header(int32_t header[CHECKPOINT_GPT2_HEADER_INTS], const Config *c,
                            int version, int group);

/* Bytes of the attention extension of a model of L layers of NH heads. */
size_t checkpoint_attention_bytes(int n_layers, int n_heads);

/* The attention extension's bytes (checkpoint_attention_bytes of them) into ext: one record
 * per layer of cfgs (L,), then the (L, NH) sink logits (zeros if sink_logits is NULL). */
void checkpoint_encode_attention(void *ext, const AttentionConfig *cfgs,
                                 const float *sink_logits, int n_layers, int n_heads);

/* Bytes of the Synthesizer parameters after the extension's records and sink logits: those
 * of every layer of cfgs (L,) whose kind is a Synthesizer, for the model c's context. */
size_t checkpoint_synth_bytes(const AttentionConfig *cfgs, const Config *c);

/* Sets each Synthesizer layer's synth_len (c->seq_len) and synth pointer into synth
 * (checkpoint_synth_bytes of it, layer after layer); the caller keeps synth alive. */
void checkpoint_point_synth(AttentionConfig *cfgs, const Config *c, const float *synth);

/* The Synthesizer layers' parameters (each cfgs[l].synth) into out, layer after layer
 * (checkpoint_synth_bytes of them; their synth_len must be c->seq_len). */
void checkpoint_encode_synth(void *out, const AttentionConfig *cfgs, const Config *c);

/* Reads an extension's bytes into cfgs (L,) and sink_logits (L, NH), checking every field;
 * a layer with a learned sink logit gets its sink_logits pointer into sink_logits. Returns
 * 0, or -1 after one stderr line "model: PATH: ..." naming the layer and the field. */
int checkpoint_decode_attention(AttentionConfig *cfgs, float *sink_logits, const void *ext,
                                int n_layers, int n_heads, const char *path);

/* Writes ck's model with every matrix in int8, groups of `group` values per scale along
 * each row (the last group of a row may be shorter): GPT-2 as llm.c's header with
 * version CHECKPOINT_GPT2_Q8 (and ck's attention extension, when it has one), Llama
 * as llama2.c's version 2 (readable by llama2.c's runq when group divides C and Hd).
 * fp32 or int8 input. The bytes go to a new temporary beside path, renamed over it
 * when complete (os_save_open: removed on failure, and never any existing file).
 * Returns 0, or -1 after a stderr line (also for a checkpoint packed by checkpoint_pack). */
int checkpoint_save_q8(const Checkpoint *ck, const char *path, int group);

#endif /* CHECKPOINT_H */

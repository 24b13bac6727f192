/* gguf.h: reading GGUF files (llama.cpp's format): the metadata, the tensor table, and from
 * them a model and its tokenizer.
 *
 * A GGUF file (version 3, little-endian; ggml docs/gguf.md) is a header ("GGUF", version,
 * tensor count, metadata count), typed key-value metadata (the hyperparameters and the
 * tokenizer), a table of tensors (name, shape in ggml order, type, offset), padding to the
 * alignment, then the tensor data. gguf_open checks every count, length, type, offset and
 * size against the file before it allocates anything (and then only tables bounded by the
 * file's size); gguf_load_checkpoint turns a `llama` file into a Checkpoint; and
 * gguf_load_tokenizer builds its tokenizer. docs/formats.md says what is supported.
 *
 * Shapes in ggml order are written "(ggml order)": ne[0] is the length of a row, so a
 * weight of ggml shape (C, V) is V rows of C, (V, C) in this project's order.
 */
#ifndef GGUF_H
#define GGUF_H

#include <stddef.h>       /* size_t */
#include <stdint.h>       /* uint32_t, uint64_t */
#include "checkpoint.h"   /* Checkpoint */
#include "tokenizer.h"    /* Tokenizer */

#define GGUF_MAGIC "GGUF"          /* the file's first four bytes */
#define GGUF_VERSION 3             /* the version read (1 and 2 are llama.cpp's old ones) */
#define GGUF_DEFAULT_ALIGNMENT 32  /* data alignment unless general.alignment says otherwise */
#define GGUF_MAX_DIMS 4            /* ggml tensors have at most 4 dimensions */
#ifndef GGUF_MAX_ALIGNMENT
#define GGUF_MAX_ALIGNMENT 65536   /* sanity bound on general.alignment */
#endif
#ifndef GGUF_MAX_NAME
#define GGUF_MAX_NAME 256          /* longest tensor name (ggml's GGML_MAX_NAME is 64) */
#endif

/* The metadata value types (their numbers in the file). */
typedef enum {
    GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3, GGUF_UINT32 = 4,
    GGUF_INT32 = 5, GGUF_FLOAT32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9,
    GGUF_UINT64 = 10, GGUF_INT64 = 11, GGUF_FLOAT64 = 12, GGUF_TYPES = 13
} GgufValueType;

/* The tensor types this engine computes with (ggml_type numbers). Every other known
 * ggml type is recognised by name and refused. */
enum {
    GGUF_F32 = 0, GGUF_F16 = 1, GGUF_Q4_0 = 2, GGUF_Q4_1 = 3, GGUF_Q5_0 = 6, GGUF_Q5_1 = 7,
    GGUF_Q8_0 = 8, GGUF_Q2_K = 10, GGUF_Q3_K = 11, GGUF_Q4_K = 12, GGUF_Q5_K = 13,
    GGUF_Q6_K = 14, GGUF_IQ4_NL = 20, GGUF_IQ4_XS = 23, GGUF_BF16 = 30, GGUF_TQ1_0 = 34,
    GGUF_TQ2_0 = 35
};
#define GGUF_BLOCK 32              /* Q4_0, Q5_0, Q8_0 (_1: and a minimum): 32 integers share
                                    * one f16 scale */
#define GGUF_K_BLOCK 256           /* the K types: a super-block of 256 integers, an f16
                                    * scale, and small scales of it for each 32 (Q4_K, Q5_K,
                                    * with minimums) or */
#define GGUF_K_GROUP 16            /* each 16 of them (Q2_K, Q3_K, Q6_K) */

/* One metadata entry; every pointer is a view into the mapped file. */
typedef struct {
    const char *key;               /* not NUL-terminated: key_len bytes */
    size_t key_len;
    uint32_t type;                 /* GgufValueType */
    uint32_t item_type;            /* arrays: the elements' type */
    uint64_t count;                /* arrays: the number of elements; else 1 */
    const unsigned char *value;    /* the value's bytes (a string: its u64 length first;
                                    * an array: its first element) */
} GgufValue;

/* One tensor of the table; data is a view into the mapped file. */
typedef struct {
    const char *name;              /* not NUL-terminated: name_len bytes */
    size_t name_len;
    int n_dims;                    /* 1 .. GGUF_MAX_DIMS */
    uint64_t ne[GGUF_MAX_DIMS];    /* shape (ggml order), 1 past n_dims */
    uint32_t type;                 /* ggml_type */
    uint64_t offset;               /* from the start of the data section */
    size_t bytes;                  /* its size in the file */
    const unsigned char *data;     /* the mapped bytes */
} GgufTensor;

typedef struct {
    const char *path;              /* for messages; a view of the caller's string */
    unsigned char *map;            /* the file in memory (os_map_file); owned */
    size_t size;                   /* bytes mapped */
    int own;                       /* 1 if map is os_map_file's copy, 0 the file's pages */
    size_t alignment;              /* general.alignment, or GGUF_DEFAULT_ALIGNMENT */
    size_t data_offset;            /* where the data section starts */
    size_t n_values, n_tensors;
    GgufValue *values;             /* (n_values,) owned */
    GgufTensor *tensors;           /* (n_tensors,) owned */
} GgufFile;

/* 1 if the n bytes at head start a GGUF file (its magic). */
int gguf_is_gguf(const unsigned char *head, size_t n);

/* Maps the file at path (os_map_file: whole 1 for the model's tensors, 0 for the metadata
 * alone) and reads its header, metadata and tensor table, checking each against the file:
 * counts, string and array lengths, value types, the alignment, every tensor's dimensions,
 * type, offset (aligned, inside the file, no two overlapping) and size. Returns 0, or -1
 * after one stderr line "model: PATH: ..." (prefix is the program part, e.g. "model" or
 * "tokenizer"); gguf_close is safe after either. */
int gguf_open(GgufFile *g, const char *path, const char *prefix, int whole);

/* Unmaps and frees; safe on a zeroed or closed GgufFile. */
void gguf_close(GgufFile *g);

/* The entry called key, or NULL. */
const GgufValue *gguf_find(const GgufFile *g, const char *key);

/* Reads the `llama` or `gpt2` GGUF at path into ck (zeroed first): hyperparameters from
 * the metadata, tensors by name, F32 and F16 matrices mapped (or copied where misaligned),
 * F32 vectors copied, other F16 and BF16 widened to fp32, the Q, K and IQ4 types repacked
 * into the int8 layout of quant.h (groups of 32, or 16 for a type with a scale per 16;
 * their minimums as offsets); any other type is refused naming the tensor. A file with
 * F32 or F16 matrices is read whole (os_map_file) and kept (ck->map) where a matrix is
 * used from it; any other is mapped, each tensor's pages given back once converted
 * (os_drop_mapped), then released.
 * ck->weights.layers is allocated; the caller points the Weights (checkpoint.c). Returns
 * 0, or -1 after one stderr line; checkpoint_free releases everything either way. */
int gguf_load_checkpoint(Checkpoint *ck, const char *path);

/* Builds the tokenizer a GGUF file carries (tokenizer.ggml.model `llama`, or `gpt2` with
 * the pre-tokenizer `gpt-2`) into t, as llama.cpp encodes: BOS if add_bos_token, the space
 * prefix, byte fallback. Returns 0, or -1 after one stderr line naming path and the key;
 * tokenizer_free is safe either way. */
int gguf_load_tokenizer(Tokenizer *t, const char *path);

#endif /* GGUF_H */

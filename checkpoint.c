/* checkpoint.c: recognise, validate and map a weights file; write the int8 form.
 *
 * Every format is described the same way: a header that gives the Config, then a list of
 * tensors in file order (tensor_list), each fp32, bf16 or int8. The expected file size is
 * computed from that list with overflow checks and must match exactly before anything is
 * read; then the same list carves the mapped file into tensors, and point_weights turns the
 * tensors into the Weights table the forward pass reads. Writing the int8 form walks the
 * same list. GGUF files carry their own tensor table: formats/gguf.c reads them into the
 * same Checkpoint (checkpoint_load hands them over). Nothing here computes: read model.c
 * for the network.
 *
 * Legend: V vocab, Vp padded vocab, C width, L layers, Hd MLP width, KVD kv width,
 * S context, HS head size, GS group size.
 */
#include "checkpoint.h"

#include <errno.h>      /* errno */
#include <stddef.h>     /* offsetof */
#include <fcntl.h>      /* open, O_NONBLOCK */
#include <math.h>       /* isfinite */
#include <stdint.h>     /* int32_t, uint16_t, uint32_t, SIZE_MAX */
#include <stdio.h>      /* fprintf(stderr), FILE, fwrite, snprintf, rename, remove */
#include <stdlib.h>     /* malloc, free */
#include <string.h>     /* memcpy, memset, strerror, strlen */
#include <sys/stat.h>   /* fstat */
#include <unistd.h>     /* read, close */

#include "quant.h"      /* quant_groups, quant_quantize_weights, quant_dequantize_row */
#include "os.h"         /* os_map_file, os_alloc_zeroed; SaveFile: the int8 file written
                         * crash-safe */
#include "gguf.h"       /* gguf_is_gguf, gguf_load_checkpoint: llama.cpp's GGUF files */

#define PAGE_STRIDE 4096   /* touch_pages reads one byte this often */

/* How the tensors are stored in the file. */
typedef enum {
    STORE_F32,      /* every tensor fp32 */
    STORE_BF16,     /* every tensor bf16 (llm.c version 5) */
    STORE_Q8        /* matrices int8 + scales per row group, vectors fp32 */
} Storage;

/* What the header says about the file beyond the Config. */
typedef struct {
    Storage storage;
    int legacy;              /* llama2.c legacy tensor order (no magic) */
    size_t data_offset;      /* bytes before the first tensor */
    int shared_classifier;   /* Llama: 1 if the classifier is the token embedding */
    int group_size;          /* int8: values per scale along a row */
    int attention;           /* 1: the file ends with the attention extension */
    const char *name;        /* what the file is, for messages and the load line */
} Layout;

/* Header field indices of llm.c's GPT-2 checkpoint (int32 each). [8] is this project's
 * int8 group size, [9] its attention extension, [10] its position scheme (llm.c leaves
 * all three 0). */
enum { GPT2_MAGIC, GPT2_VERSION, GPT2_MAX_T, GPT2_V, GPT2_L, GPT2_NH, GPT2_C, GPT2_VP,
       GPT2_GROUP, GPT2_ATTN, GPT2_POS };
_Static_assert(GPT2_ATTN == CHECKPOINT_GPT2_ATTN_SLOT && GPT2_POS == CHECKPOINT_GPT2_POS_SLOT,
               "the header slots checkpoint.h names");
/* llama2.c's 7 config fields, in file order (after magic and version when versioned). */
enum { LLAMA_DIM, LLAMA_HIDDEN, LLAMA_LAYERS, LLAMA_HEADS, LLAMA_KV_HEADS, LLAMA_VOCAB,
       LLAMA_SEQ };

/* ------------------------------------------------------------------------- */
/* Overflow-safe size arithmetic                                               */

int checkpoint_size_mul(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return -1;
    *out = a * b;
    return 0;
}

/* *acc += a * b * c; returns -1 on overflow. */
static int size_add_product(size_t *acc, size_t a, size_t b, size_t c) {
    size_t ab, abc;
    if (checkpoint_size_mul(a, b, &ab) || checkpoint_size_mul(ab, c, &abc) ||
        abc > SIZE_MAX - *acc) return -1;
    *acc += abc;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The header                                                                  */

/* Checks that value is in [1, max]; prints the problem and returns -1 if not. The
 * prefix (possibly "") says how the header was read when that was a guess. */
static int check_range(const char *path, const char *prefix, const char *name, long value,
                       long max) {
    if (value < 1 || value > max) {
        fprintf(stderr, "model: %s: %sheader field %s out of range (got %ld, expected "
                "1..%ld)\n", path, prefix, name, value, max);
        return -1;
    }
    return 0;
}

int checkpoint_check_config(Config *c, const char *path, const char *prefix) {
    if (check_range(path, prefix, "seq_len", c->seq_len, MODEL_MAX_SEQ_LEN) ||
        check_range(path, prefix, "vocab_size", c->vocab_size, MODEL_MAX_VOCAB) ||
        check_range(path, prefix, "padded_vocab_size", c->padded_vocab_size, MODEL_MAX_VOCAB) ||
        check_range(path, prefix, "n_layers", c->n_layers, MODEL_MAX_LAYERS) ||
        check_range(path, prefix, "dim", c->dim, MODEL_MAX_DIM / 4) ||
        check_range(path, prefix, "hidden_dim", c->hidden_dim, MODEL_MAX_DIM) ||
        check_range(path, prefix, "n_heads", c->n_heads, c->dim) ||
        check_range(path, prefix, "n_kv_heads", c->n_kv_heads, c->n_heads)) return -1;
    const char *problem = NULL, *expected = NULL;
    char got[96];
    if (c->dim % c->n_heads != 0) {
        problem = "width dim not divisible by n_heads", expected = "n_heads to divide dim";
        snprintf(got, sizeof got, "dim %d, n_heads %d", c->dim, c->n_heads);
    } else if (c->n_heads % c->n_kv_heads != 0) {
        problem = "n_heads not divisible by n_kv_heads", expected = "n_kv_heads to divide n_heads";
        snprintf(got, sizeof got, "n_heads %d, n_kv_heads %d", c->n_heads, c->n_kv_heads);
    } else if (c->vocab_size > c->padded_vocab_size) {
        problem = "vocab V larger than padded vocab Vp", expected = "V <= Vp";
        snprintf(got, sizeof got, "V %d, Vp %d", c->vocab_size, c->padded_vocab_size);
    } else if (c->positions == MODEL_POSITIONS_ROTARY && (c->dim / c->n_heads) % 2 != 0) {
        problem = "rotary embedding needs an even head size", expected = "an even dim / n_heads";
        snprintf(got, sizeof got, "dim %d, n_heads %d: head size %d", c->dim, c->n_heads,
                 c->dim / c->n_heads);
    }
    if (problem) {
        fprintf(stderr, "model: %s: %s%s (got %s, expected %s)\n", path, prefix, problem, got,
                expected);
        return -1;
    }
    c->head_dim = c->dim / c->n_heads;
    c->kv_dim = c->n_kv_heads * c->head_dim;
    return 0;
}

/* llm.c GPT-2: header[256] int32. */
static int parse_gpt2_header(Config *c, Layout *layout, const char *path, const int32_t *h) {
    int version = h[GPT2_VERSION];
    if (version != CHECKPOINT_GPT2_FP32 && version != CHECKPOINT_GPT2_BF16 &&
        version != CHECKPOINT_GPT2_Q8) {
        fprintf(stderr, "model: %s: unknown checkpoint version (got %d, expected %d for fp32, "
                "%d for bf16 or %d for int8)\n", path, version, CHECKPOINT_GPT2_FP32,
                CHECKPOINT_GPT2_BF16, CHECKPOINT_GPT2_Q8);
        return -1;
    }
    if (check_range(path, "", "C", h[GPT2_C], MODEL_MAX_DIM / 4)) return -1;
    c->family = MODEL_GPT2;
    c->seq_len = h[GPT2_MAX_T];
    c->vocab_size = h[GPT2_V];
    c->padded_vocab_size = h[GPT2_VP];
    c->n_layers = h[GPT2_L];
    c->n_heads = h[GPT2_NH];
    c->n_kv_heads = c->n_heads;
    c->dim = h[GPT2_C];
    c->hidden_dim = 4 * c->dim;
    layout->shared_classifier = 1;
    layout->data_offset = CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t);
    if (h[GPT2_POS] != MODEL_POSITIONS_LEARNED && h[GPT2_POS] != MODEL_POSITIONS_ROTARY) {
        fprintf(stderr, "model: %s: unknown position scheme (got header [%d] = %d, expected "
                "%d for a learned table or %d for rotary)\n", path, GPT2_POS, (int)h[GPT2_POS],
                MODEL_POSITIONS_LEARNED, MODEL_POSITIONS_ROTARY);
        return -1;
    }
    c->positions = (ModelPositions)h[GPT2_POS];
    int rotary = c->positions == MODEL_POSITIONS_ROTARY;
    if (version == CHECKPOINT_GPT2_FP32) {
        layout->storage = STORE_F32;
        layout->name = rotary ? "llm.c GPT-2 checkpoint, fp32, rotary positions"
                              : "llm.c GPT-2 checkpoint, fp32";
    } else if (version == CHECKPOINT_GPT2_BF16) {
        layout->storage = STORE_BF16;
        layout->name = rotary ? "llm.c GPT-2 checkpoint, bf16 (widened to fp32 at load), "
                                "rotary positions"
                              : "llm.c GPT-2 checkpoint, bf16 (widened to fp32 at load)";
    } else {
        if (check_range(path, "", "group_size", h[GPT2_GROUP], QUANT_GROUP_MAX)) return -1;
        layout->storage = STORE_Q8;
        layout->group_size = h[GPT2_GROUP];
        layout->name = rotary ? "GPT-2 checkpoint, int8 (llm.c header, version 80), rotary "
                                "positions"
                              : "GPT-2 checkpoint, int8 (llm.c header, version 80)";
    }
    if (h[GPT2_ATTN] != 0 && h[GPT2_ATTN] != CHECKPOINT_ATTN_VERSION) {
        fprintf(stderr, "model: %s: unknown attention extension (got header [%d] = %d, "
                "expected 0 or %d)\n", path, GPT2_ATTN, (int)h[GPT2_ATTN],
                CHECKPOINT_ATTN_VERSION);
        return -1;
    }
    layout->attention = h[GPT2_ATTN] == CHECKPOINT_ATTN_VERSION;
    /* the rest of the header is reserved: 0 in every file llm.c and this project write */
    for (int i = version == CHECKPOINT_GPT2_Q8 ? GPT2_GROUP + 1 : GPT2_GROUP;
         i < CHECKPOINT_GPT2_HEADER_INTS; i++) {
        if (i == GPT2_ATTN || i == GPT2_POS) continue;
        if (h[i] != 0) {
            fprintf(stderr, "model: %s: reserved header field [%d] is not 0 (got %d, expected "
                    "0)\n", path, i, (int)h[i]);
            return -1;
        }
    }
    return 0;
}

int checkpoint_read_gpt2_header(const int32_t h[CHECKPOINT_GPT2_HEADER_INTS], const char *path,
                                Config *c, int *version) {
    Layout layout;
    memset(c, 0, sizeof *c);
    if (h[GPT2_MAGIC] != CHECKPOINT_GPT2_MAGIC) {
        fprintf(stderr, "model: %s: not an llm.c GPT-2 checkpoint (got magic %d, expected "
                "%d)\n", path, (int)h[GPT2_MAGIC], CHECKPOINT_GPT2_MAGIC);
        return -1;
    }
    if (parse_gpt2_header(c, &layout, path, h) != 0) return -1;
    *version = h[GPT2_VERSION];
    return 0;
}

/* llama2.c: the 7 config fields. A negative vocab_size in a legacy file means the
 * classifier is stored separately (llama2.c's flag); versioned files have a flag byte. */
static void llama_config(Config *c, Layout *layout, const int32_t *f) {
    c->family = MODEL_LLAMA;
    c->positions = MODEL_POSITIONS_ROTARY;
    c->dim = f[LLAMA_DIM];
    c->hidden_dim = f[LLAMA_HIDDEN];
    c->n_layers = f[LLAMA_LAYERS];
    c->n_heads = f[LLAMA_HEADS];
    c->n_kv_heads = f[LLAMA_KV_HEADS];
    c->vocab_size = f[LLAMA_VOCAB] < 0 && f[LLAMA_VOCAB] != INT32_MIN ? -f[LLAMA_VOCAB]
                                                                     : f[LLAMA_VOCAB];
    c->padded_vocab_size = c->vocab_size;
    c->seq_len = f[LLAMA_SEQ];
    layout->shared_classifier = f[LLAMA_VOCAB] > 0;
}

/* llama2.c "ak42" header: magic, version, 7 fields, uint8 shared flag, [int32 group size]. */
static int parse_llama_header(Config *c, Layout *layout, const char *path,
                              const unsigned char *bytes) {
    int32_t fields[2 + CHECKPOINT_LLAMA_LEGACY_INTS], group_size;
    memcpy(fields, bytes, sizeof fields);
    unsigned char shared = bytes[sizeof fields];
    memcpy(&group_size, bytes + sizeof fields + 1, sizeof group_size);
    int version = fields[1];
    if (version != CHECKPOINT_LLAMA_FP32 && version != CHECKPOINT_LLAMA_Q8) {
        fprintf(stderr, "model: %s: unknown llama2.c version (got %d, expected %d for fp32 or "
                "%d for int8)\n", path, version, CHECKPOINT_LLAMA_FP32, CHECKPOINT_LLAMA_Q8);
        return -1;
    }
    if (shared > 1 || fields[2 + LLAMA_VOCAB] < 1) {
        fprintf(stderr, "model: %s: bad classifier flag or vocab (got flag %d, vocab %d, "
                "expected 0 or 1 and a positive vocab)\n", path, shared, fields[2 + LLAMA_VOCAB]);
        return -1;
    }
    llama_config(c, layout, fields + 2);
    layout->shared_classifier = shared;
    layout->data_offset = CHECKPOINT_LLAMA_HEADER_BYTES;
    layout->storage = STORE_F32;
    layout->name = "llama2.c checkpoint version 1, fp32";
    if (version == CHECKPOINT_LLAMA_Q8) {
        if (check_range(path, "", "group_size", group_size, QUANT_GROUP_MAX)) return -1;
        layout->storage = STORE_Q8;
        layout->group_size = group_size;
        layout->name = "llama2.c checkpoint version 2, int8";
    }
    return 0;
}

/* Recognises the format from the first bytes and fills c and layout. llm.c and the
 * versioned llama2.c files carry a magic number; llama2.c's legacy files do not, so
 * anything else is read as a legacy header and must then pass every check and match
 * the file size exactly. header holds n bytes (at most 1024). */
static int parse_header(Config *c, Layout *layout, const char *path,
                        const unsigned char *header, size_t n) {
    int32_t magic = 0;
    if (n >= sizeof magic) memcpy(&magic, header, sizeof magic);
    int is_gpt2 = magic == CHECKPOINT_GPT2_MAGIC;
    int is_llama = (uint32_t)magic == CHECKPOINT_LLAMA_MAGIC;
    size_t need = is_gpt2 ? CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t)
                : is_llama ? CHECKPOINT_LLAMA_HEADER_BYTES
                : CHECKPOINT_LLAMA_LEGACY_INTS * sizeof(int32_t);
    if (n < need) {
        fprintf(stderr, "model: %s: file too short for the header (got %zu bytes, expected at "
                "least %zu)\n", path, n, need);
        return -1;
    }
    if (is_gpt2) {
        int32_t h[CHECKPOINT_GPT2_HEADER_INTS];
        memcpy(h, header, sizeof h);
        if (parse_gpt2_header(c, layout, path, h) != 0) return -1;
    } else if (is_llama) {
        if (parse_llama_header(c, layout, path, header) != 0) return -1;
    } else {
        int32_t fields[CHECKPOINT_LLAMA_LEGACY_INTS];
        memcpy(fields, header, sizeof fields);
        llama_config(c, layout, fields);
        layout->storage = STORE_F32;
        layout->legacy = 1;
        layout->data_offset = sizeof fields;
        layout->name = "llama2.c legacy checkpoint, fp32 (no magic number: recognised by "
                       "its 7-int header and exact file size)";
        char prefix[192];
        snprintf(prefix, sizeof prefix, "bad magic number (got %d, expected %d for llm.c GPT-2, "
                 "\"ak42\" for llama2.c or \"GGUF\"), and as a headerless llama2.c file: ",
                 magic, CHECKPOINT_GPT2_MAGIC);
        return checkpoint_check_config(c, path, prefix);
    }
    return checkpoint_check_config(c, path, "");
}

/* ------------------------------------------------------------------------- */
/* The tensor list of each format                                              */

enum { MAX_TENSORS = 16 };   /* the most tensors any format lists */

/* Each tensor's name in llm.c's and llama2.c's code, for messages. */
static const char *const TENSOR_TEXT[TENSOR_COUNT] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b",
    "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb", "rms_att_weight", "rms_ffn_weight",
    "rms_final_weight", "token_embedding_table", "wq", "wk", "wv", "wo", "w1", "w2", "w3",
    "wcls", "freq_cis", "rope_freqs", "bq", "bk", "bv"};

/* One entry of a format's tensor list: which tensor, whether it is a matrix, its shape. */
typedef struct {
    TensorName name;
    int is_matrix, layers, rows, cols;
} Entry;

/* Fills list with the file's tensors in file order; returns how many. */
static int tensor_list(const Config *c, const Layout *layout, Entry list[MAX_TENSORS]) {
    int L = c->n_layers, C = c->dim, Hd = c->hidden_dim, KVD = c->kv_dim;
    int n = 0;
#define ADD(name_, matrix_, layers_, rows_, cols_) \
    list[n++] = (Entry){name_, matrix_, layers_, rows_, cols_}
    if (c->family == MODEL_GPT2) {   /* llm.c's 16 tensors (15: rotary positions, no wpe) */
        ADD(TENSOR_WTE, 1, 1, c->padded_vocab_size, C);
        if (c->positions == MODEL_POSITIONS_LEARNED) ADD(TENSOR_WPE, 0, 1, c->seq_len, C);
        ADD(TENSOR_LN1W, 0, L, 1, C);
        ADD(TENSOR_LN1B, 0, L, 1, C);
        ADD(TENSOR_QKVW, 1, L, 3 * C, C);      /* the Q rows, then K, then V */
        ADD(TENSOR_QKVB, 0, L, 1, 3 * C);
        ADD(TENSOR_ATTPROJW, 1, L, C, C);
        ADD(TENSOR_ATTPROJB, 0, L, 1, C);
        ADD(TENSOR_LN2W, 0, L, 1, C);
        ADD(TENSOR_LN2B, 0, L, 1, C);
        ADD(TENSOR_FCW, 1, L, Hd, C);
        ADD(TENSOR_FCB, 0, L, 1, Hd);
        ADD(TENSOR_FCPROJW, 1, L, C, Hd);
        ADD(TENSOR_FCPROJB, 0, L, 1, C);
        ADD(TENSOR_LNFW, 0, 1, 1, C);
        ADD(TENSOR_LNFB, 0, 1, 1, C);
    } else if (layout->legacy) {     /* llama2.c run.c's order */
        ADD(TENSOR_TOK, 1, 1, c->vocab_size, C);
        ADD(TENSOR_RMS_ATT, 0, L, 1, C);
        ADD(TENSOR_WQ, 1, L, C, C);
        ADD(TENSOR_WK, 1, L, KVD, C);
        ADD(TENSOR_WV, 1, L, KVD, C);
        ADD(TENSOR_WO, 1, L, C, C);
        ADD(TENSOR_RMS_FFN, 0, L, 1, C);
        ADD(TENSOR_W1, 1, L, Hd, C);
        ADD(TENSOR_W2, 1, L, C, Hd);
        ADD(TENSOR_W3, 1, L, Hd, C);
        ADD(TENSOR_RMS_FINAL, 0, 1, 1, C);
        ADD(TENSOR_ROPE, 0, 1, c->seq_len, c->head_dim);   /* old RoPE tables, skipped */
        if (!layout->shared_classifier) ADD(TENSOR_CLS, 1, 1, c->vocab_size, C);
    } else {                         /* llama2.c export.py's versions 1 and 2 */
        ADD(TENSOR_RMS_ATT, 0, L, 1, C);
        ADD(TENSOR_RMS_FFN, 0, L, 1, C);
        ADD(TENSOR_RMS_FINAL, 0, 1, 1, C);
        ADD(TENSOR_TOK, 1, 1, c->vocab_size, C);
        ADD(TENSOR_WQ, 1, L, C, C);
        ADD(TENSOR_WK, 1, L, KVD, C);
        ADD(TENSOR_WV, 1, L, KVD, C);
        ADD(TENSOR_WO, 1, L, C, C);
        ADD(TENSOR_W1, 1, L, Hd, C);
        ADD(TENSOR_W2, 1, L, C, Hd);
        ADD(TENSOR_W3, 1, L, Hd, C);
        if (!layout->shared_classifier) ADD(TENSOR_CLS, 1, 1, c->vocab_size, C);
    }
#undef ADD
    return n;
}

/* Bytes of one layer of entry e in the file, and of its int8 scales (0 unless int8). */
static int entry_bytes(const Entry *e, const Layout *layout, size_t *layer_bytes,
                       size_t *scale_floats) {
    size_t rows = (size_t)e->rows, cols = (size_t)e->cols;
    *layer_bytes = 0;
    *scale_floats = 0;
    if (layout->storage == STORE_Q8 && e->is_matrix) {
        size_t groups = (size_t)quant_groups(e->cols, layout->group_size);
        *scale_floats = rows * groups;   /* rows <= 2^21, groups <= 2^16: no overflow */
        return size_add_product(layer_bytes, rows, cols, 1) ||
               size_add_product(layer_bytes, rows, groups, sizeof(float));
    }
    size_t width = layout->storage == STORE_BF16 ? sizeof(uint16_t) : sizeof(float);
    return size_add_product(layer_bytes, rows, cols, width);
}

/* The exact file size the header implies, and the floats the load must own (bf16
 * widened to fp32; int8 scales, and the vectors of an int8 file, which need not be
 * 4-byte aligned there). Returns -1 on overflow. */
static int expected_sizes(const Config *c, const Layout *layout, size_t *file_bytes,
                          size_t *owned_floats) {
    Entry list[MAX_TENSORS];
    int count = tensor_list(c, layout, list);
    size_t bytes = layout->data_offset, floats = 0;
    for (int t = 0; t < count; t++) {
        size_t layer_bytes, scales, numel;
        if (entry_bytes(&list[t], layout, &layer_bytes, &scales) ||
            size_add_product(&bytes, (size_t)list[t].layers, layer_bytes, 1)) return -1;
        int widened = layout->storage == STORE_BF16;
        int copied = layout->storage == STORE_Q8 && !list[t].is_matrix;
        if (widened || copied) {
            if (checkpoint_size_mul((size_t)list[t].rows, (size_t)list[t].cols, &numel) ||
                size_add_product(&floats, (size_t)list[t].layers, numel, 1)) return -1;
        } else if (size_add_product(&floats, (size_t)list[t].layers, scales, 1)) {
            return -1;
        }
    }
    if (layout->attention &&
        size_add_product(&bytes, checkpoint_attention_bytes(c->n_layers, c->n_heads), 1, 1))
        return -1;
    *file_bytes = bytes;
    *owned_floats = floats;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Carving the file into tensors                                               */

/* The index of q's (n bytes) first -128, the one int8 value the format excludes, or n if
 * none: blocks of 64 bytes tested without a branch (which compilers vectorise), the block
 * that holds one searched byte by byte. */
static size_t find_q8_min(const unsigned char *q, size_t n) {
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        unsigned char hit = 0;
        for (int j = 0; j < 64; j++) hit |= (unsigned char)(q[i + j] == 0x80);
        if (hit) break;
    }
    for (; i < n; i++)
        if (q[i] == 0x80) return i;
    return n;
}

/* Points ck->tensors at the data (bytes after the header). bf16 tensors are widened
 * into owned and int8 scales copied there (aligned). Returns -1 (with a message) if an
 * int8 value is -128, which the int8 kernels do not accept. */
static int carve_tensors(Checkpoint *ck, const Layout *layout, const unsigned char *data,
                         float *owned, const char *path) {
    Entry list[MAX_TENSORS];
    int count = tensor_list(&ck->config, layout, list);
    for (int t = 0; t < count; t++) {
        const Entry *e = &list[t];
        CheckpointTensor *ten = &ck->tensors[e->name];
        size_t layer_bytes, scales, numel = (size_t)e->rows * (size_t)e->cols;
        entry_bytes(e, layout, &layer_bytes, &scales);
        *ten = (CheckpointTensor){.present = 1, .is_matrix = e->is_matrix, .layers = e->layers,
                                  .rows = e->rows, .cols = e->cols};
        if (layout->storage == STORE_Q8 && e->is_matrix) {
            float *scale = owned;
            ten->q = (const int8_t *)data;
            ten->q_stride = layer_bytes;
            ten->scale = scale;
            ten->group = layout->group_size;
            for (int l = 0; l < e->layers; l++) {
                const unsigned char *layer = data + (size_t)l * layer_bytes;
                size_t i = find_q8_min(layer, numel);
                if (i < numel) {
                    fprintf(stderr, "model: %s: int8 weight out of range (got -128 at byte "
                            "%zu, expected -127..127)\n", path,
                            (size_t)(layer + i - data) + layout->data_offset);
                    return -1;
                }
                memcpy(scale + (size_t)l * scales, layer + numel, scales * sizeof(float));
            }
            owned += (size_t)e->layers * scales;
        } else if (layout->storage == STORE_BF16) {
            /* bf16 is the top half of an fp32: widen by appending 16 zero bits */
            size_t n = (size_t)e->layers * numel;
            for (size_t i = 0; i < n; i++) {
                uint16_t half;
                memcpy(&half, data + 2 * i, sizeof half);
                uint32_t bits = (uint32_t)half << 16;
                memcpy(&owned[i], &bits, sizeof bits);
            }
            ten->f32 = owned;
            owned += n;
        } else if (layout->storage == STORE_Q8) {   /* a vector among int8 matrices */
            size_t n = (size_t)e->layers * numel;
            memcpy(owned, data, n * sizeof(float));
            ten->f32 = owned;
            owned += n;
        } else {
            ten->f32 = (const float *)data;   /* the map is page-aligned; offsets are x4 */
        }
        data += (size_t)e->layers * layer_bytes;
    }
    return 0;
}

/* Matrix rows r0 .. r0+rows-1 of layer l of tensor t, fp32, halves or int8. */
static Matrix matrix_view(const CheckpointTensor *t, int l, int r0, int rows) {
    Matrix m = {0};
    size_t cols = (size_t)t->cols;
    if (t->parts) {   /* a GGUF file: each layer on its own */
        const CheckpointPart *p = &t->parts[l];
        if (t->f32) {
            m.f32 = p->f32 + (size_t)r0 * cols;
            return m;
        }
        if (t->f16) {
            m.f16 = p->f16 + (size_t)r0 * cols;
            return m;
        }
        size_t groups = (size_t)quant_groups(t->cols, t->group);
        m.q8 = (QuantMatrix){.q = p->q + (size_t)r0 * cols,
                             .scale = p->scale + (size_t)r0 * groups,
                             .rows = rows, .cols = t->cols, .group = t->group,
                             .offset = p->offset ? p->offset + (size_t)r0 * groups : NULL};
        return m;
    }
    if (t->f32) {
        m.f32 = t->f32 + ((size_t)l * (size_t)t->rows + (size_t)r0) * cols;
        return m;
    }
    size_t groups = (size_t)quant_groups(t->cols, t->group);
    m.q8.q = t->q + (size_t)l * t->q_stride + (size_t)r0 * cols;
    m.q8.scale = t->scale + ((size_t)l * (size_t)t->rows + (size_t)r0) * groups;
    m.q8.rows = rows;
    m.q8.cols = t->cols;
    m.q8.group = t->group;
    return m;
}

/* Layer l's slice of a stacked vector tensor, or NULL if the file has none. */
static const float *vector_view(const CheckpointTensor *t, int l) {
    if (t->present && t->parts) return t->parts[l].f32;
    return t->present ? t->f32 + (size_t)l * (size_t)t->rows * (size_t)t->cols : NULL;
}

/* The bytes of q (its values, scales and offsets), 0 if the matrix is not int8; if it is, its
 * QuantMatrix.cold becomes mark. */
static size_t q8_mark(QuantMatrix *q, int mark) {
    if (!q->q) return 0;
    q->cold = mark;
    size_t floats = (size_t)quant_groups(q->cols, q->group) * (q->offset ? 2 : 1);
    return (size_t)q->rows * ((size_t)q->cols + floats * sizeof(float));
}

#define LAYER_MATRICES 7   /* a layer's matrices: W_Q, W_K, W_V, W_O and the MLP's three */

/* Matrix i of the products: 0 the classifier, then each layer's LAYER_MATRICES. */
static Matrix *product_matrix(Weights *w, int i) {
    if (i == 0) return &w->classifier;
    LayerWeights *lw = &w->layers[(i - 1) / LAYER_MATRICES];
    Matrix *layer[LAYER_MATRICES] = {&lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w_up,
                                     &lw->w_gate, &lw->w_down};
    return layer[(i - 1) % LAYER_MATRICES];
}

/* The bytes of the int8 matrices a token reads (the layers' and the classifier), each
 * marked as q8_mark does. */
static size_t q8_token_bytes(Weights *w, int n_layers, int mark) {
    size_t bytes = 0;
    for (int i = 0; i < 1 + LAYER_MATRICES * n_layers; i++)
        bytes += q8_mark(&product_matrix(w, i)->q8, mark);
    return bytes;
}

void checkpoint_mark_cold(Weights *w, int n_layers) {
    if (q8_token_bytes(w, n_layers, 0) > CHECKPOINT_CACHED_BYTES) q8_token_bytes(w, n_layers, 1);
}

void checkpoint_pack(Checkpoint *ck) {
    Weights *w = &ck->weights;
    int n = 1 + LAYER_MATRICES * ck->config.n_layers, any = 0;
    for (int i = 0; i < n; i++) {
        const QuantMatrix *q8 = &product_matrix(w, i)->q8;
        any |= q8->q && quant_pack_rows(q8) > 0;
    }
    /* GGUF's int8 values were converted into owned memory; this format's lie in the map,
     * written in place only where that is the process's own or small (checkpoint.h) */
    int in_map = !ck->gguf;
    if (!any || (in_map && !ck->map_own && ck->map_size > CHECKPOINT_PACK_MAPPED_BYTES))
        return;
    if (in_map && os_map_writable(ck->map, ck->map_size, 1) != 0) return;   /* refused */
    for (int i = 0; i < n; i++) {
        QuantMatrix *q8 = &product_matrix(w, i)->q8;
        if (q8->q && quant_pack(q8) != 0) break;   /* out of memory: the rest stay in rows */
    }
    ck->packed = 1;
    if (w->shared_classifier) w->token_embedding.q8.packed = w->classifier.q8.packed;
    if (in_map) os_map_writable(ck->map, ck->map_size, 0);   /* if refused, left writable */
}

/* Fills ck->weights from ck->tensors. */
static void point_weights(Checkpoint *ck) {
    const Config *c = &ck->config;
    const CheckpointTensor *T = ck->tensors;
    Weights *w = &ck->weights;
    int C = c->dim, KVD = c->kv_dim, gpt2 = c->family == MODEL_GPT2;
    w->int8 = T[gpt2 ? TENSOR_WTE : TENSOR_TOK].q != NULL;
    w->token_embedding = matrix_view(&T[gpt2 ? TENSOR_WTE : TENSOR_TOK], 0, 0,
                                     c->padded_vocab_size);
    w->classifier = T[TENSOR_CLS].present ? matrix_view(&T[TENSOR_CLS], 0, 0, c->vocab_size)
                                          : matrix_view(&T[gpt2 ? TENSOR_WTE : TENSOR_TOK], 0,
                                                        0, c->vocab_size);
    w->shared_classifier = !T[TENSOR_CLS].present;
    w->pos_embedding = gpt2 ? vector_view(&T[TENSOR_WPE], 0) : NULL;   /* NULL: rotary */
    w->norm_final_w = gpt2 ? T[TENSOR_LNFW].f32 : T[TENSOR_RMS_FINAL].f32;
    w->norm_final_b = gpt2 ? T[TENSOR_LNFB].f32 : NULL;
    w->rope_freqs = T[TENSOR_ROPE_FREQS].present ? T[TENSOR_ROPE_FREQS].f32 : NULL;
    for (int l = 0; l < c->n_layers; l++) {
        LayerWeights *lw = &w->layers[l];
        if (gpt2) {
            lw->norm1_w = vector_view(&T[TENSOR_LN1W], l);
            lw->norm1_b = vector_view(&T[TENSOR_LN1B], l);
            lw->wq = matrix_view(&T[TENSOR_QKVW], l, 0, C);
            lw->wk = matrix_view(&T[TENSOR_QKVW], l, C, C);
            lw->wv = matrix_view(&T[TENSOR_QKVW], l, 2 * C, C);
            lw->bq = vector_view(&T[TENSOR_QKVB], l);
            lw->bk = lw->bq + C;
            lw->bv = lw->bk + C;
            lw->wo = matrix_view(&T[TENSOR_ATTPROJW], l, 0, C);
            lw->bo = vector_view(&T[TENSOR_ATTPROJB], l);
            lw->norm2_w = vector_view(&T[TENSOR_LN2W], l);
            lw->norm2_b = vector_view(&T[TENSOR_LN2B], l);
            lw->w_up = matrix_view(&T[TENSOR_FCW], l, 0, c->hidden_dim);
            lw->b_up = vector_view(&T[TENSOR_FCB], l);
            lw->w_down = matrix_view(&T[TENSOR_FCPROJW], l, 0, C);
            lw->b_down = vector_view(&T[TENSOR_FCPROJB], l);
        } else {
            lw->norm1_w = vector_view(&T[TENSOR_RMS_ATT], l);
            lw->bq = vector_view(&T[TENSOR_BQ], l);   /* a GGUF file's, each optional in */
            lw->bk = vector_view(&T[TENSOR_BK], l);   /* llama (as llama.cpp's), all three */
            lw->bv = vector_view(&T[TENSOR_BV], l);   /* in qwen2; NULL: none */
            lw->wq = matrix_view(&T[TENSOR_WQ], l, 0, C);
            lw->wk = matrix_view(&T[TENSOR_WK], l, 0, KVD);
            lw->wv = matrix_view(&T[TENSOR_WV], l, 0, KVD);
            lw->wo = matrix_view(&T[TENSOR_WO], l, 0, C);
            lw->norm2_w = vector_view(&T[TENSOR_RMS_FFN], l);
            lw->w_up = matrix_view(&T[TENSOR_W1], l, 0, c->hidden_dim);
            lw->w_gate = matrix_view(&T[TENSOR_W3], l, 0, c->hidden_dim);
            lw->w_down = matrix_view(&T[TENSOR_W2], l, 0, C);
        }
    }
    checkpoint_mark_cold(w, c->n_layers);
}

/* ------------------------------------------------------------------------- */
/* The attention extension: what each layer of a trained variant computes      */
/*
 * One record of CHECKPOINT_ATTN_INTS int32 per layer, in this order (docs/formats.md):
 * the AttentionKind (0 exact, 1 gauss, 2 window, 3 dilated, 4 strided, 5 fixed, 6 lsh,
 * 7 linear, 8 efficient, 9 performer, 10 synth-random, 11 synth-dense, 12 synth-frandom,
 * 13 synth-fdense), then unscaled, softmax1, tau (the float's bits), window, sinks,
 * dilation, stride, summary, buckets, rounds, local, features, orthogonal, prescale, norm,
 * sink_logit, the seed's low and high 32 bits, and the factor (0 in files written before
 * the Synthesizers). After the records and the (L, NH) sink logits come the Synthesizer
 * layers' parameters, layer after layer (attention.h's layout, L = the model's context).
 */
enum { ATTN_KIND, ATTN_UNSCALED, ATTN_SOFTMAX1, ATTN_TAU, ATTN_WINDOW, ATTN_SINKS,
       ATTN_DILATION, ATTN_STRIDE, ATTN_SUMMARY, ATTN_BUCKETS, ATTN_ROUNDS, ATTN_LOCAL,
       ATTN_FEATURES, ATTN_ORTHOGONAL, ATTN_PRESCALE, ATTN_NORM, ATTN_SINK_LOGIT,
       ATTN_SEED_LO, ATTN_SEED_HI, ATTN_FACTOR };


size_t checkpoint_attention_bytes(int n_layers, int n_heads) {
    return (size_t)n_layers * (CHECKPOINT_ATTN_INTS * sizeof(int32_t) +
                               (size_t)n_heads * sizeof(float));
}

/* The record's int fields that are AttentionConfig int fields, by slot (kind, tau and the
 * seed are converted on their own). */
static const struct { int slot; size_t offset; } INT_FIELDS[] = {
    {ATTN_UNSCALED, offsetof(AttentionConfig, unscaled)},
    {ATTN_SOFTMAX1, offsetof(AttentionConfig, softmax1)},
    {ATTN_WINDOW, offsetof(AttentionConfig, window)},
    {ATTN_SINKS, offsetof(AttentionConfig, sinks)},
    {ATTN_DILATION, offsetof(AttentionConfig, dilation)},
    {ATTN_STRIDE, offsetof(AttentionConfig, stride)},
    {ATTN_SUMMARY, offsetof(AttentionConfig, summary)},
    {ATTN_BUCKETS, offsetof(AttentionConfig, buckets)},
    {ATTN_ROUNDS, offsetof(AttentionConfig, rounds)},
    {ATTN_LOCAL, offsetof(AttentionConfig, local)},
    {ATTN_FEATURES, offsetof(AttentionConfig, features)},
    {ATTN_ORTHOGONAL, offsetof(AttentionConfig, orthogonal)},
    {ATTN_PRESCALE, offsetof(AttentionConfig, prescale)},
    {ATTN_NORM, offsetof(AttentionConfig, norm)},
    {ATTN_SINK_LOGIT, offsetof(AttentionConfig, sink_logit)},
    {ATTN_FACTOR, offsetof(AttentionConfig, factor)},
};
enum { N_INT_FIELDS = sizeof INT_FIELDS / sizeof INT_FIELDS[0] };

static void attention_record(int32_t r[CHECKPOINT_ATTN_INTS], const AttentionConfig *cfg) {
    memset(r, 0, CHECKPOINT_ATTN_INTS * sizeof(int32_t));
    r[ATTN_KIND] = (int32_t)cfg->kind;
    memcpy(&r[ATTN_TAU], &cfg->tau, sizeof(float));
    for (int i = 0; i < N_INT_FIELDS; i++)
        r[INT_FIELDS[i].slot] = *(const int *)(const void *)((const char *)cfg +
                                                           INT_FIELDS[i].offset);
    r[ATTN_SEED_LO] = (int32_t)(uint32_t)(cfg->seed & 0xffffffffu);
    r[ATTN_SEED_HI] = (int32_t)(uint32_t)(cfg->seed >> 32);
}

/* Reads layer l's record r into cfg, checking each field's range, then the limits and
 * rules --attn holds the same spec to (attention_config_check: a window of at least 1,
 * c <= l, at most 64 LSH rounds, ...). Returns 0, or -1 after a stderr line naming the
 * layer, the field and its value. */
static int attention_from_record(AttentionConfig *cfg, const int32_t *r, int l,
                                 const char *path) {
    static const char *const names[CHECKPOINT_ATTN_INTS] = {
        "kind", "unscaled", "softmax1", "tau", "window", "sinks", "dilation", "stride",
        "summary", "buckets", "rounds", "local", "features", "orthogonal", "prescale", "norm",
        "sink_logit", "seed (low)", "seed (high)", "factor"};
    int bad = -1;
    const char *expected = "";
    for (int i = 0; i < CHECKPOINT_ATTN_INTS && bad < 0; i++) {
        int flag = i == ATTN_UNSCALED || i == ATTN_SOFTMAX1 || i == ATTN_ORTHOGONAL ||
                   i == ATTN_PRESCALE || i == ATTN_NORM || i == ATTN_SINK_LOGIT;
        if (i == ATTN_KIND && (r[i] < 0 || r[i] >= ATTENTION_KINDS))
            bad = i, expected = "0..13, an attention kind";
        else if (flag && r[i] != 0 && r[i] != 1)
            bad = i, expected = "0 or 1";
        else if (((i >= ATTN_WINDOW && i <= ATTN_FEATURES) || i == ATTN_FACTOR) &&
                 (r[i] < 0 || r[i] > ATTENTION_MAX_INT))
            bad = i, expected = "0..1048576";
    }
    float tau;
    memcpy(&tau, &r[ATTN_TAU], sizeof tau);
    if (bad < 0 && !(tau >= ATTENTION_MIN_TAU && tau <= ATTENTION_MAX_TAU))
        bad = ATTN_TAU, expected = "a temperature in [0.01, 100]";
    if (bad < 0 && r[ATTN_SOFTMAX1] && r[ATTN_SINK_LOGIT])
        bad = ATTN_SINK_LOGIT, expected = "0 with softmax1";
    if (bad >= 0) {
        fprintf(stderr, "model: %s: attention of layer %d: field %s out of range (got %d, "
                "expected %s)\n", path, l, names[bad], (int)r[bad], expected);
        return -1;
    }
    memset(cfg, 0, sizeof *cfg);   /* every field is set below (sink_logits: NULL) */
    cfg->kind = (AttentionKind)r[ATTN_KIND];
    cfg->tau = tau;
    for (int i = 0; i < N_INT_FIELDS; i++)
        *(int *)(void *)((char *)cfg + INT_FIELDS[i].offset) = r[INT_FIELDS[i].slot];
    cfg->seed = (uint64_t)(uint32_t)r[ATTN_SEED_LO] | (uint64_t)(uint32_t)r[ATTN_SEED_HI] << 32;
    char problem[256];   /* the limits and rules of --attn (attention_config_check) */
    if (attention_config_check(cfg, problem, sizeof problem) != 0) {
        fprintf(stderr, "model: %s: attention of layer %d: %s\n", path, l, problem);
        return -1;
    }
    return 0;
}

int checkpoint_decode_attention(AttentionConfig *cfgs, float *sink_logits, const void *ext,
                                int n_layers, int n_heads, const char *path) {
    const unsigned char *bytes = ext;
    memcpy(sink_logits, bytes + (size_t)n_layers * CHECKPOINT_ATTN_INTS * sizeof(int32_t),
           (size_t)n_layers * (size_t)n_heads * sizeof(float));
    for (int l = 0; l < n_layers; l++) {
        int32_t r[CHECKPOINT_ATTN_INTS];
        memcpy(r, bytes + (size_t)l * sizeof r, sizeof r);
        if (attention_from_record(&cfgs[l], r, l, path) != 0) return -1;
        float *b = sink_logits + (size_t)l * n_heads;
        for (int h = 0; h < n_heads; h++) {
            if (!isfinite(b[h])) {
                fprintf(stderr, "model: %s: sink logit of layer %d, head %d is not finite "
                        "(got %g, expected a finite number)\n", path, l, h, (double)b[h]);
                return -1;
            }
        }
        if (cfgs[l].sink_logit) cfgs[l].sink_logits = b;
    }
    return 0;
}

void checkpoint_encode_attention(void *ext, const AttentionConfig *cfgs,
                                 const float *sink_logits, int n_layers, int n_heads) {
    unsigned char *bytes = ext;
    for (int l = 0; l < n_layers; l++) {
        int32_t r[CHECKPOINT_ATTN_INTS];
        attention_record(r, &cfgs[l]);
        memcpy(bytes + (size_t)l * sizeof r, r, sizeof r);
    }
    float *b = (float *)(void *)(bytes + (size_t)n_layers * CHECKPOINT_ATTN_INTS * sizeof(int32_t));
    size_t n = (size_t)n_layers * (size_t)n_heads;
    if (sink_logits) memcpy(b, sink_logits, n * sizeof(float));
    else memset(b, 0, n * sizeof(float));
}

/* The heads of a GPT-2 checkpoint's attention, from the header's fields alone (a header
 * read by the trainer has no derived head_dim). */
static AttentionShape synth_shape(const Config *c) {
    AttentionShape shape = {c->n_heads, c->n_heads, c->n_heads > 0 ? c->dim / c->n_heads : 0,
                            1.0f};
    return shape;
}

size_t checkpoint_synth_bytes(const AttentionConfig *cfgs, const Config *c) {
    AttentionShape shape = synth_shape(c);
    size_t bytes = 0;
    for (int l = 0; l < c->n_layers; l++) {
        AttentionConfig cfg = cfgs[l];
        cfg.synth_len = c->seq_len;
        bytes += attention_synth_floats(&cfg, &shape) * sizeof(float);
    }
    return bytes;
}

void checkpoint_point_synth(AttentionConfig *cfgs, const Config *c, const float *synth) {
    AttentionShape shape = synth_shape(c);
    for (int l = 0; l < c->n_layers; l++) {
        if (!attention_is_synth(cfgs[l].kind)) continue;
        cfgs[l].synth_len = c->seq_len;
        cfgs[l].synth = synth;
        synth += attention_synth_floats(&cfgs[l], &shape);
    }
}

void checkpoint_encode_synth(void *out, const AttentionConfig *cfgs, const Config *c) {
    AttentionShape shape = synth_shape(c);
    unsigned char *bytes = out;
    for (int l = 0; l < c->n_layers; l++) {
        size_t n = attention_synth_floats(&cfgs[l], &shape) * sizeof(float);
        if (n) memcpy(bytes, cfgs[l].synth, n);
        bytes += n;
    }
}

/* Reads the extension at ext (the file's last checkpoint_attention_bytes bytes) into
 * ck->attention and ck->sink_logits (copies: a bf16 file's map is dropped). Returns 0, or
 * -1 after a stderr line. */
static int read_attention(Checkpoint *ck, const char *path, const unsigned char *ext) {
    int L = ck->config.n_layers, NH = ck->config.n_heads;
    ck->attention = calloc((size_t)L, sizeof *ck->attention);
    ck->sink_logits = malloc((size_t)L * (size_t)NH * sizeof(float));
    if (!ck->attention || !ck->sink_logits) {
        fprintf(stderr, "model: %s: out of memory\n", path);
        return -1;
    }
    return checkpoint_decode_attention(ck->attention, ck->sink_logits, ext, L, NH, path);
}

/* ------------------------------------------------------------------------- */
/* Load and free                                                               */

/* Reads one byte of every page of the map, so that the pages of a mapped file (os_map_file
 * reads a large one whole) are brought in at load and not during the first forward pass,
 * whose speed would then count them. Returns the sum, so the reads are kept. */
static unsigned touch_pages(const unsigned char *map, size_t size) {
    unsigned sum = 0;
    for (size_t i = 0; i < size; i += PAGE_STRIDE) sum += map[i];
    return sum;
}

/* Reads up to n bytes from the start of fd into buf; returns the count, or -1. */
static long read_up_to(int fd, void *buf, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t got = read(fd, (char *)buf + done, n - done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) break;
        done += (size_t)got;
    }
    return (long)done;
}

/* 1 on a little-endian host. Weight files are little-endian, as their format says, and their
 * tensors are mapped as they are, so a big-endian host cannot use them: it is refused by
 * name rather than left to fail as a "bad magic number". */
static int host_is_little_endian(void) {
    const uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

int checkpoint_load(Checkpoint *ck, const char *path) {
    memset(ck, 0, sizeof *ck);
    if (!host_is_little_endian()) {
        fprintf(stderr, "model: %s: this host is big-endian (expected a little-endian host: "
                "weight files are little-endian and are mapped as they are)\n", path);
        return -1;
    }
    if (!*path) {
        fprintf(stderr, "model: empty path (got \"\", expected a model file)\n");
        return -1;
    }
    /* O_NONBLOCK: a FIFO given as the model must not block the open; the regular-file
     * check below then refuses it */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        fprintf(stderr, "model: %s: cannot open (got \"%s\", expected a model file)\n", path,
                strerror(errno));
        return -1;
    }
    struct stat st;
    unsigned char header[CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t)];
    Layout layout = {0};
    Config *c = &ck->config;
    size_t expected, owned_floats;
    long header_bytes;
    if (fstat(fd, &st) != 0) {
        fprintf(stderr, "model: %s: cannot read its size (%s)\n", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        const char *kind = S_ISDIR(st.st_mode) ? "folder" : S_ISFIFO(st.st_mode) ? "FIFO"
                                                                                 : "special file";
        fprintf(stderr, "model: %s: not a regular file (got a %s, expected a model file)\n",
                path, kind);
        goto fail;
    }
    size_t file_size = (size_t)st.st_size;
    if ((header_bytes = read_up_to(fd, header, sizeof header)) < 0) {
        fprintf(stderr, "model: %s: read error (%s)\n", path, strerror(errno));
        goto fail;
    }
    if (gguf_is_gguf(header, (size_t)header_bytes)) {   /* llama.cpp's format: gguf.c */
        close(fd);
        if (gguf_load_checkpoint(ck, path) != 0) return -1;
        point_weights(ck);
        ck->touched = touch_pages(ck->map, ck->map_size);
        return 0;
    }
    if (parse_header(c, &layout, path, header, (size_t)header_bytes) != 0) goto fail;
    if (expected_sizes(c, &layout, &expected, &owned_floats) != 0) {
        fprintf(stderr, "model: %s: header dimensions overflow the address space\n", path);
        goto fail;
    }
    /* a trained Synthesizer's parameters follow the extension: their size is checked once
     * its records are read */
    if (file_size < expected || (file_size != expected && !layout.attention)) {
        fprintf(stderr, "model: %s: file size does not match its header (got %zu bytes, "
                "expected %zu for a %s: %s)\n", path, file_size, expected, layout.name,
                file_size < expected ? "truncated" : "trailing bytes");
        goto fail;
    }
    snprintf(ck->format, sizeof ck->format, "%s", layout.name);
    ck->map = os_map_file(fd, file_size, 1, &ck->map_own);
    if (!ck->map) {
        fprintf(stderr, "model: %s: cannot read (%s)\n", path, strerror(errno));
        goto fail;
    }
    ck->map_size = file_size;
    ck->touched = touch_pages(ck->map, file_size);
    if (owned_floats > 0 && !(ck->owned = os_alloc_zeroed(owned_floats, sizeof(float)))) {
        fprintf(stderr, "model: %s: out of memory for %zu converted floats\n", path,
                owned_floats);
        goto fail;
    }
    ck->weights.layers = calloc((size_t)c->n_layers, sizeof *ck->weights.layers);
    if (!ck->weights.layers) {
        fprintf(stderr, "model: %s: out of memory\n", path);
        goto fail;
    }
    if (carve_tensors(ck, &layout, (const unsigned char *)ck->map + layout.data_offset,
                      ck->owned, path) != 0) goto fail;
    if (layout.storage == STORE_BF16 && !layout.attention) {   /* all widened: drop the map */
        os_unmap_file(ck->map, ck->map_size);
        ck->map = NULL;
        ck->map_size = 0;
    }
    point_weights(ck);
    if (layout.attention) {
        if (read_attention(ck, path, (const unsigned char *)ck->map +
                                     (expected - checkpoint_attention_bytes(c->n_layers,
                                                                            c->n_heads))) != 0)
            goto fail;
        for (int l = 0; l < c->n_layers; l++) {
            char problem[256];
            if (attention_context_check(&ck->attention[l], c->seq_len, problem,
                                        sizeof problem) != 0) {
                fprintf(stderr, "model: %s: attention of layer %d: %s\n", path, l, problem);
                goto fail;
            }
        }
        size_t synth = checkpoint_synth_bytes(ck->attention, c);
        if (synth > SIZE_MAX - expected || file_size != expected + synth) {
            fprintf(stderr, "model: %s: file size does not match its header (got %zu bytes, "
                    "expected %zu for a %s with its attention: %s)\n", path, file_size,
                    synth > SIZE_MAX - expected ? SIZE_MAX : expected + synth, layout.name,
                    synth > SIZE_MAX - expected || file_size < expected + synth
                    ? "truncated" : "trailing bytes");
            goto fail;
        }
        /* copied: after int8 or bf16 tensors they need not lie 4-byte aligned in the file */
        if (synth > 0 && !(ck->synth = malloc(synth))) {
            fprintf(stderr, "model: %s: out of memory for %zu bytes of Synthesizer "
                    "parameters\n", path, synth);
            goto fail;
        }
        if (synth > 0) memcpy(ck->synth, (const char *)ck->map + expected, synth);
        checkpoint_point_synth(ck->attention, c, ck->synth);
        AttentionShape shape = synth_shape(c);
        for (int l = 0; l < c->n_layers; l++) {   /* finite, as the sink logits must be */
            size_t n = attention_synth_floats(&ck->attention[l], &shape);
            for (size_t i = 0; i < n; i++) {
                if (isfinite(ck->attention[l].synth[i])) continue;
                fprintf(stderr, "model: %s: Synthesizer parameter %zu of layer %d is not "
                        "finite (got %g, expected a finite number)\n", path, i, l,
                        (double)ck->attention[l].synth[i]);
                goto fail;
            }
        }
    }
    close(fd);
    return 0;
fail:
    close(fd);
    checkpoint_free(ck);
    return -1;
}

void checkpoint_free(Checkpoint *ck) {
    os_unmap_file(ck->map, ck->map_size);
    os_free_zeroed(ck->owned);
    free(ck->attention);
    free(ck->sink_logits);
    free(ck->synth);
    free(ck->weights.layers);
    memset(ck, 0, sizeof *ck);
}

/* ------------------------------------------------------------------------- */
/* Writing the int8 form                                                       */

void checkpoint_gpt2_header(int32_t header[CHECKPOINT_GPT2_HEADER_INTS], const Config *c,
                            int version, int group) {
    memset(header, 0, CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t));
    header[GPT2_MAGIC] = CHECKPOINT_GPT2_MAGIC;
    header[GPT2_VERSION] = version;
    header[GPT2_MAX_T] = c->seq_len;
    header[GPT2_V] = c->vocab_size;
    header[GPT2_L] = c->n_layers;
    header[GPT2_NH] = c->n_heads;
    header[GPT2_C] = c->dim;
    header[GPT2_VP] = c->padded_vocab_size;
    header[GPT2_POS] = (int32_t)c->positions;
    if (version == CHECKPOINT_GPT2_Q8) header[GPT2_GROUP] = group;
}

/* fwrite that reports a failure once; returns -1 on error. */
static int write_all(FILE *f, const void *data, size_t size, size_t count) {
    return fwrite(data, size, count, f) == count ? 0 : -1;
}

/* Writes tensor t (fp32, half or int8 source) in the int8 file's form: vectors as fp32;
 * matrices per layer as int8 values (rows, cols) then fp32 scales (rows, groups).
 * row, q and s are scratch of cols floats, cols bytes and groups floats. Returns 0, -1 on
 * a write error, or -2 at a value that is not finite (*layer: its layer). */
static int write_tensor(FILE *f, const CheckpointTensor *t, int group, float *row,
                        int8_t *q, float *s, int *layer) {
    size_t cols = (size_t)t->cols, groups = (size_t)quant_groups(t->cols, group);
    for (int l = 0; l < t->layers; l++) {
        *layer = l;
        if (!t->is_matrix) {
            if (!kernels_all_finite(vector_view(t, l), (size_t)t->rows * cols)) return -2;
            if (write_all(f, vector_view(t, l), sizeof(float), (size_t)t->rows * cols))
                return -1;
            continue;
        }
        /* values first, then scales: quantize every row twice rather than keep them */
        for (int pass = 0; pass < 2; pass++) {
            for (int r = 0; r < t->rows; r++) {
                Matrix m = matrix_view(t, l, r, 1);
                if (m.f32) memcpy(row, m.f32, cols * sizeof(float));
                else if (m.f16) kernels_from_half(row, m.f16, cols);
                else quant_dequantize_row(row, &m.q8, 0);
                if (!kernels_all_finite(row, cols)) return -2;
                quant_quantize_weights(q, s, row, t->cols, group);
                if (pass == 0 ? write_all(f, q, 1, cols) : write_all(f, s, sizeof(float), groups))
                    return -1;
            }
        }
    }
    return 0;
}

int checkpoint_save_q8(const Checkpoint *ck, const char *path, int group) {
    const Config *c = &ck->config;
    if (ck->packed) {   /* its int8 rows rearranged in memory: written as rows, garbage */
        fprintf(stderr, "quantize: %s: the weights were rearranged for this build's kernels "
                "(expected a checkpoint as loaded, not packed)\n", path);
        return -1;
    }
    if (group < 1 || group > QUANT_GROUP_MAX) {
        fprintf(stderr, "quantize: group size out of range (got %d, expected 1..%d)\n", group,
                QUANT_GROUP_MAX);
        return -1;
    }
    Layout layout = {.storage = STORE_Q8, .group_size = group,
                     .shared_classifier = ck->weights.shared_classifier};
    unsigned char header[CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t)] = {0};
    size_t header_bytes;
    if (c->rope_base != 0.0f && c->rope_base != (float)MODEL_ROPE_BASE) {
        fprintf(stderr, "quantize: the model's RoPE base is %g (a GGUF file's), which "
                "llama2.c's format cannot hold (expected %g)\n", (double)c->rope_base,
                (double)MODEL_ROPE_BASE);
        return -1;
    }
    int biases = ck->tensors[TENSOR_BQ].present || ck->tensors[TENSOR_BK].present ||
                 ck->tensors[TENSOR_BV].present;
    if (biases || c->rope_halves || c->norm_eps != 0.0f) {   /* the first of them named */
        const char *what = biases ? "biases of Q, K or V"
                         : c->rope_halves ? "RoPE over half-head pairs"
                                          : "an RMSNorm epsilon other than 1e-5";
        fprintf(stderr, "quantize: the model has %s (a GGUF file's, as Qwen2's), which "
                "llama2.c's format cannot hold (expected none)\n", what);
        return -1;
    }
    if (ck->weights.rope_freqs) {
        fprintf(stderr, "quantize: the model has RoPE frequency factors (a GGUF file's "
                "rope_freqs.weight), which llama2.c's format cannot hold (expected none)\n");
        return -1;
    }
    if (c->family == MODEL_GPT2 && ck->tensors[TENSOR_CLS].present) {
        fprintf(stderr, "quantize: the model has an output matrix of its own (a GGUF gpt2 "
                "file's output.weight, not the embedding's copy), which llm.c's format cannot "
                "hold (expected a classifier tied to the embedding)\n");
        return -1;
    }
    if (c->family == MODEL_GPT2 && c->hidden_dim != 4 * c->dim) {
        fprintf(stderr, "quantize: the model's MLP is %d wide (a GGUF gpt2 file's "
                "feed_forward_length), which llm.c's format cannot hold (expected 4 x %d = "
                "%d)\n", c->hidden_dim, c->dim, 4 * c->dim);
        return -1;
    }
    if (c->family == MODEL_GPT2) {
        int32_t h[CHECKPOINT_GPT2_HEADER_INTS];
        checkpoint_gpt2_header(h, c, CHECKPOINT_GPT2_Q8, group);
        if (ck->attention) h[GPT2_ATTN] = CHECKPOINT_ATTN_VERSION;
        memcpy(header, h, sizeof h);
        header_bytes = sizeof h;
    } else {   /* llama2.c version 2: magic, version, 7 fields, shared flag, group size */
        int32_t f[2 + CHECKPOINT_LLAMA_LEGACY_INTS] = {
            (int32_t)CHECKPOINT_LLAMA_MAGIC, CHECKPOINT_LLAMA_Q8, c->dim, c->hidden_dim,
            c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size, c->seq_len};
        memcpy(header, f, sizeof f);
        header[sizeof f] = (unsigned char)layout.shared_classifier;
        memcpy(header + sizeof f + 1, &group, sizeof group);
        header_bytes = CHECKPOINT_LLAMA_HEADER_BYTES;
    }
    Entry list[MAX_TENSORS];
    int count = tensor_list(c, &layout, list), widest = 1;
    for (int t = 0; t < count; t++) widest = list[t].cols > widest ? list[t].cols : widest;
    float *row = malloc((size_t)widest * sizeof(float));
    float *s = malloc((size_t)widest * sizeof(float));
    int8_t *q = malloc((size_t)widest);
    /* written to a new temporary and renamed over PATH when complete (os.h): a
     * failed or interrupted write never leaves a partial file under PATH, and no existing
     * file (the mapped input among them) is ever truncated */
    SaveFile out;
    int status = -1;
    if (!row || !s || !q) fprintf(stderr, "quantize: out of memory\n");
    else if (os_save_open(&out, "quantize", path) != 0) { /* it said why */ }
    else if (write_all(out.file, header, 1, header_bytes))
        fprintf(stderr, "quantize: %s: write error (%s)\n", out.path, strerror(errno));
    else {
        status = 0;
        for (int t = 0, layer = 0; t < count && status == 0; t++) {
            int rc = write_tensor(out.file, &ck->tensors[list[t].name], group, row, q, s, &layer);
            TensorName n = list[t].name;
            int global = n == TENSOR_WTE || n == TENSOR_WPE || n == TENSOR_LNFW ||
                         n == TENSOR_LNFB || n == TENSOR_TOK || n == TENSOR_RMS_FINAL ||
                         n == TENSOR_CLS;
            char where[32] = "";
            if (!global) snprintf(where, sizeof where, " of layer %d", layer);
            if (rc == -2)
                fprintf(stderr, "quantize: the model's %s%s (llm.c's or llama2.c's name) holds a "
                        "value that is not finite (got NaN or infinity, expected finite "
                        "weights)\n", TENSOR_TEXT[n], where);
            else if (rc != 0)
                fprintf(stderr, "quantize: %s: write error (%s)\n", out.path, strerror(errno));
            status = rc == 0 ? 0 : -1;
        }
        if (status == 0 && ck->attention) {
            size_t fixed = checkpoint_attention_bytes(c->n_layers, c->n_heads);
            size_t bytes = fixed + checkpoint_synth_bytes(ck->attention, c);
            void *ext = malloc(bytes);
            if (ext) {
                checkpoint_encode_attention(ext, ck->attention, ck->sink_logits, c->n_layers,
                                            c->n_heads);
                checkpoint_encode_synth((char *)ext + fixed, ck->attention, c);
            }
            if (!ext || write_all(out.file, ext, 1, bytes)) {
                fprintf(stderr, "quantize: %s: %s\n", out.path,
                        ext ? strerror(errno) : "out of memory");
                status = -1;
            }
            free(ext);
        }
        if (status == 0) status = os_save_commit(&out, "quantize");
        else os_save_discard(&out);
    }
    free(row);
    free(s);
    free(q);
    return status;
}

/* gguf.c: read a GGUF file's metadata and tensor table, then a `llama`, `qwen2` or `gpt2`
 * model and its tokenizer from them.
 *
 * Reading is in three steps, each checked before the next: the header, metadata and tensor
 * table are walked with a cursor that never reads past the file (gguf_open); the model's
 * hyperparameters and tensors are looked up by name and checked against each other
 * (gguf_load_checkpoint); only then is memory taken for what must be converted (F32
 * vectors copied, BF16 and F16 vectors widened, the Q, K and IQ4 types' blocks repacked as
 * int8 groups; F32 and F16 matrices stay in the mapped file). The tokenizer is built from
 * the metadata's arrays by tokenizer.c (gguf_load_tokenizer). Nothing here computes:
 * read model.c for the network.
 *
 * Legend: V vocab, C width, L layers, Hd MLP width, KVD kv width, S context.
 */
#include "gguf.h"

#include <errno.h>      /* errno */
#include <fcntl.h>      /* open, O_NONBLOCK */
#include <limits.h>     /* INT_MAX */
#include <math.h>       /* isfinite */
#include <stdio.h>      /* fprintf(stderr), snprintf */
#include <stdlib.h>     /* malloc, calloc, free, qsort */
#include <string.h>     /* memcmp, memcpy, memset, strlen, strerror */
#include <sys/stat.h>   /* fstat */
#include <unistd.h>     /* close */

#include "kernels.h"    /* kernels_from_half */
#include "os.h"         /* os_map_file, os_unmap_file, os_drop_mapped, os_alloc_zeroed */
#include "quant.h"      /* QUANT_Q_MAX, QUANT_OFFSET_MAX_GROUPS: what the kernels take */

/* ------------------------------------------------------------------------- */
/* The ggml tensor types: what each is called and how it is stored             */

/* Values per block and bytes per block of each ggml_type (ggml's type traits), so that the
 * size of a tensor of any known type is checked against the file even if it is refused. */
typedef struct {
    const char *name;
    int block;             /* values per block (1 for plain types); 0: no such type */
    int bytes;             /* bytes per block */
} TypeInfo;

static const TypeInfo TYPES[] = {
    [0] = {"F32", 1, 4},       [1] = {"F16", 1, 2},       [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},    [6] = {"Q5_0", 32, 22},    [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},    [9] = {"Q8_1", 32, 36},    [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110}, [12] = {"Q4_K", 256, 144}, [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210}, [15] = {"Q8_K", 256, 292}, [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74}, [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18}, [21] = {"IQ3_S", 256, 110}, [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},     [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},      [27] = {"I64", 1, 8},      [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56}, [30] = {"BF16", 1, 2},     [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66}, [39] = {"MXFP4", 32, 17},
};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

static const TypeInfo *type_info(uint32_t type) {
    return type < N_TYPES && TYPES[type].block > 0 ? &TYPES[type] : NULL;
}

/* Bytes of one value of each metadata type (0: variable, a string or an array). */
static const size_t VALUE_BYTES[GGUF_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const VALUE_NAMES[GGUF_TYPES] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string",
    "array", "uint64", "int64", "float64"};

static const char *value_type_name(uint32_t type) {
    return type < GGUF_TYPES ? VALUE_NAMES[type] : "unknown";
}

/* ------------------------------------------------------------------------- */
/* A cursor that never reads past the file                                     */

typedef struct {
    const unsigned char *base;
    size_t pos, size;
    const char *path, *prefix;
} Cursor;

/* The n bytes at the cursor, advancing past them; NULL (after a stderr line saying what
 * was being read) if fewer remain. */
static const unsigned char *take(Cursor *c, size_t n, const char *what) {
    if (n > c->size - c->pos) {
        fprintf(stderr, "%s: %s: truncated GGUF file: %s at byte %zu needs %zu bytes (got %zu "
                "left)\n", c->prefix, c->path, what, c->pos, n, c->size - c->pos);
        return NULL;
    }
    const unsigned char *p = c->base + c->pos;
    c->pos += n;
    return p;
}

static uint32_t get_u32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);   /* the host is little-endian (checkpoint_load checks) */
    return v;
}

static uint64_t get_u64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static int read_u32(Cursor *c, uint32_t *out, const char *what) {
    const unsigned char *p = take(c, 4, what);
    if (p) *out = get_u32(p);
    return p ? 0 : -1;
}

static int read_u64(Cursor *c, uint64_t *out, const char *what) {
    const unsigned char *p = take(c, 8, what);
    if (p) *out = get_u64(p);
    return p ? 0 : -1;
}

/* A string: u64 length, then that many bytes (not NUL-terminated). */
static int read_string(Cursor *c, const char **s, size_t *len, const char *what) {
    uint64_t n;
    if (read_u64(c, &n, what) != 0) return -1;
    if (n > c->size - c->pos) {
        fprintf(stderr, "%s: %s: %s at byte %zu: string length out of range (got %llu, "
                "expected at most the %zu bytes left)\n", c->prefix, c->path, what, c->pos - 8,
                (unsigned long long)n, c->size - c->pos);
        return -1;
    }
    *s = (const char *)take(c, (size_t)n, what);
    *len = (size_t)n;
    return 0;
}

/* Skips one value of type `type` (not an array), checking a bool is 0 or 1. */
static int skip_scalar(Cursor *c, uint32_t type, const char *what) {
    if (type == GGUF_STRING) {
        const char *s;
        size_t len;
        return read_string(c, &s, &len, what);
    }
    const unsigned char *p = take(c, VALUE_BYTES[type], what);
    if (!p) return -1;
    if (type == GGUF_BOOL && *p > 1) {
        fprintf(stderr, "%s: %s: %s: bool out of range (got %d, expected 0 or 1)\n", c->prefix,
                c->path, what, *p);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Header, metadata, tensor table                                              */

static int key_is(const GgufValue *v, const char *key) {
    size_t n = strlen(key);
    return v->key_len == n && memcmp(v->key, key, n) == 0;
}

const GgufValue *gguf_find(const GgufFile *g, const char *key) {
    for (size_t i = 0; i < g->n_values; i++)
        if (key_is(&g->values[i], key)) return &g->values[i];
    return NULL;
}

int gguf_is_gguf(const unsigned char *head, size_t n) {
    return n >= 4 && memcmp(head, GGUF_MAGIC, 4) == 0;
}

/* The first max bytes of s (len bytes, not NUL-terminated: a name or a value read from
 * the file) for a message, into out (SHOWN_CAP bytes): control bytes, a NUL among them,
 * as \xHH, so that a hostile file's text prints on its one line and sends nothing to the
 * terminal. Returns out. */
#define SHOWN_CAP 256
static const char *shown(char *out, const char *s, size_t len, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < len && i < max && n + 5 < SHOWN_CAP; i++) {
        unsigned char b = (unsigned char)s[i];
        if (b < 0x20 || b == 0x7f) n += (size_t)snprintf(out + n, SHOWN_CAP - n, "\\x%02x", b);
        else out[n++] = (char)b;
    }
    out[n] = '\0';
    return out;
}

/* Reads the metadata (n entries) into g->values, checking every type and length. */
static int read_values(GgufFile *g, Cursor *c) {
    for (size_t i = 0; i < g->n_values; i++) {
        GgufValue *v = &g->values[i];
        char what[SHOWN_CAP + 32];
        snprintf(what, sizeof what, "metadata entry %zu", i);
        if (read_string(c, &v->key, &v->key_len, what) != 0 ||
            read_u32(c, &v->type, what) != 0) return -1;
        char key[SHOWN_CAP];
        snprintf(what, sizeof what, "metadata %s", shown(key, v->key, v->key_len, 60));
        if (v->type >= GGUF_TYPES) {
            fprintf(stderr, "%s: %s: %s: unknown value type (got %u, expected 0..%d)\n",
                    c->prefix, c->path, what, v->type, GGUF_TYPES - 1);
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (g->values[j].key_len == v->key_len &&
                memcmp(g->values[j].key, v->key, v->key_len) == 0) {
                fprintf(stderr, "%s: %s: %s: duplicate key (got it twice, expected once)\n",
                        c->prefix, c->path, what);
                return -1;
            }
        }
        v->count = 1;
        v->item_type = v->type;
        if (v->type == GGUF_ARRAY) {
            if (read_u32(c, &v->item_type, what) != 0 || read_u64(c, &v->count, what) != 0)
                return -1;
            if (v->item_type >= GGUF_TYPES || v->item_type == GGUF_ARRAY) {
                fprintf(stderr, "%s: %s: %s: bad array element type (got %u, expected a "
                        "scalar or string type 0..%d but 9)\n", c->prefix, c->path, what,
                        v->item_type, GGUF_TYPES - 1);
                return -1;
            }
            /* each element takes at least one byte (a string eight): bound the count by
             * the bytes left before walking it */
            size_t least = v->item_type == GGUF_STRING ? 8 : VALUE_BYTES[v->item_type];
            if (v->count > (c->size - c->pos) / least) {
                fprintf(stderr, "%s: %s: %s: array length out of range (got %llu elements of "
                        "%s, expected at most %zu in the %zu bytes left)\n", c->prefix,
                        c->path, what, (unsigned long long)v->count,
                        value_type_name(v->item_type), (c->size - c->pos) / least,
                        c->size - c->pos);
                return -1;
            }
        }
        v->value = c->base + c->pos;
        if (v->type == GGUF_ARRAY && v->item_type != GGUF_STRING && v->item_type != GGUF_BOOL) {
            if (!take(c, (size_t)v->count * VALUE_BYTES[v->item_type], what)) return -1;
        } else {
            for (uint64_t k = 0; k < v->count; k++)
                if (skip_scalar(c, v->item_type, what) != 0) return -1;
        }
    }
    return 0;
}

/* Reads the tensor table (g->n_tensors entries), checking names, shapes and types. */
static int read_tensor_infos(GgufFile *g, Cursor *c) {
    for (size_t i = 0; i < g->n_tensors; i++) {
        GgufTensor *t = &g->tensors[i];
        char what[SHOWN_CAP + 32];
        snprintf(what, sizeof what, "tensor %zu", i);
        uint32_t n_dims;
        if (read_string(c, &t->name, &t->name_len, what) != 0) return -1;
        if (t->name_len == 0 || t->name_len > GGUF_MAX_NAME) {
            fprintf(stderr, "%s: %s: %s: name length out of range (got %zu, expected 1..%d)\n",
                    c->prefix, c->path, what, t->name_len, GGUF_MAX_NAME);
            return -1;
        }
        char name[SHOWN_CAP];
        snprintf(what, sizeof what, "tensor %s", shown(name, t->name, t->name_len, 64));
        if (read_u32(c, &n_dims, what) != 0) return -1;
        if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) {
            fprintf(stderr, "%s: %s: %s: dimension count out of range (got %u, expected "
                    "1..%d)\n", c->prefix, c->path, what, n_dims, GGUF_MAX_DIMS);
            return -1;
        }
        t->n_dims = (int)n_dims;
        uint64_t numel = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) {
            t->ne[d] = 1;
            if (d < t->n_dims && read_u64(c, &t->ne[d], what) != 0) return -1;
            /* every dimension at least 1, and the count of values below 2^62 */
            if (t->ne[d] < 1 || t->ne[d] > ((uint64_t)1 << 62) / numel) {
                fprintf(stderr, "%s: %s: %s: dimension %d out of range (got %llu, expected 1.."
                        "%llu)\n", c->prefix, c->path, what, d, (unsigned long long)t->ne[d],
                        (unsigned long long)(((uint64_t)1 << 62) / numel));
                return -1;
            }
            numel *= t->ne[d];
        }
        if (read_u32(c, &t->type, what) != 0 || read_u64(c, &t->offset, what) != 0) return -1;
        const TypeInfo *info = type_info(t->type);
        if (!info) {
            fprintf(stderr, "%s: %s: %s: unknown tensor type (got %u, expected a ggml type such "
                    "as 0 F32, 1 F16, 8 Q8_0 or 30 BF16)\n", c->prefix, c->path, what, t->type);
            return -1;
        }
        if (t->ne[0] % (uint64_t)info->block != 0) {
            fprintf(stderr, "%s: %s: %s: row length not a multiple of the %s block (got %llu, "
                    "expected a multiple of %d)\n", c->prefix, c->path, what, info->name,
                    (unsigned long long)t->ne[0], info->block);
            return -1;
        }
        /* numel < 2^62 and bytes per value at most 8: no overflow in 64 bits */
        uint64_t bytes = numel / (uint64_t)info->block * (uint64_t)info->bytes;
        if (bytes > SIZE_MAX) {
            fprintf(stderr, "%s: %s: %s: too large for this host (%llu bytes)\n", c->prefix,
                    c->path, what, (unsigned long long)bytes);
            return -1;
        }
        t->bytes = (size_t)bytes;
        for (size_t j = 0; j < i; j++) {
            if (g->tensors[j].name_len == t->name_len &&
                memcmp(g->tensors[j].name, t->name, t->name_len) == 0) {
                fprintf(stderr, "%s: %s: %s: duplicate tensor name (got it twice, expected "
                        "once)\n", c->prefix, c->path, what);
                return -1;
            }
        }
    }
    return 0;
}

/* The alignment general.alignment gives (a uint32 power of two), or the default. */
static int read_alignment(GgufFile *g, const char *prefix) {
    const GgufValue *v = gguf_find(g, "general.alignment");
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (!v) return 0;
    if (v->type != GGUF_UINT32) {
        fprintf(stderr, "%s: %s: metadata general.alignment has the wrong type (got %s, "
                "expected uint32)\n", prefix, g->path, value_type_name(v->type));
        return -1;
    }
    uint32_t a = get_u32(v->value);
    if (a < 1 || a > GGUF_MAX_ALIGNMENT || (a & (a - 1)) != 0) {
        fprintf(stderr, "%s: %s: general.alignment out of range (got %u, expected a power of "
                "two 1..%d)\n", prefix, g->path, a, GGUF_MAX_ALIGNMENT);
        return -1;
    }
    g->alignment = a;
    return 0;
}

/* Orders tensors by offset (for the overlap check). */
static int by_offset(const void *a, const void *b) {
    const GgufTensor *x = *(const GgufTensor *const *)a, *y = *(const GgufTensor *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Every tensor's data: aligned, inside the file, and no two overlapping. */
static int check_tensor_data(GgufFile *g, const char *prefix) {
    size_t data_size = g->size - g->data_offset;
    for (size_t i = 0; i < g->n_tensors; i++) {
        GgufTensor *t = &g->tensors[i];
        if (t->offset % g->alignment != 0 || t->offset > data_size ||
            t->bytes > data_size - (size_t)t->offset) {
            char name[SHOWN_CAP];
            fprintf(stderr, "%s: %s: tensor %s: data %s (got offset %llu and %zu bytes, "
                    "expected an offset that is a multiple of %zu and ends by %zu, the data "
                    "section's size)\n", prefix, g->path, shown(name, t->name, t->name_len, 64),
                    t->offset % g->alignment ? "misaligned" : "past the end of the file",
                    (unsigned long long)t->offset, t->bytes, g->alignment, data_size);
            return -1;
        }
        t->data = g->map + g->data_offset + (size_t)t->offset;
    }
    if (g->n_tensors < 2) return 0;
    const GgufTensor **order = malloc(g->n_tensors * sizeof *order);
    if (!order) {
        fprintf(stderr, "%s: %s: out of memory for %zu tensors\n", prefix, g->path, g->n_tensors);
        return -1;
    }
    for (size_t i = 0; i < g->n_tensors; i++) order[i] = &g->tensors[i];
    qsort(order, g->n_tensors, sizeof *order, by_offset);
    int status = 0;
    for (size_t i = 1; i < g->n_tensors && status == 0; i++) {
        const GgufTensor *a = order[i - 1], *b = order[i];
        if (a->offset + a->bytes > b->offset) {
            char name_a[SHOWN_CAP], name_b[SHOWN_CAP];
            fprintf(stderr, "%s: %s: tensors %s and %s overlap (got offsets %llu and %llu, "
                    "the first %zu bytes long)\n", prefix, g->path,
                    shown(name_a, a->name, a->name_len, 64),
                    shown(name_b, b->name, b->name_len, 64), (unsigned long long)a->offset,
                    (unsigned long long)b->offset, a->bytes);
            status = -1;
        }
    }
    free(order);
    return status;
}

int gguf_open(GgufFile *g, const char *path, const char *prefix, int whole) {
    memset(g, 0, sizeof *g);
    g->path = path;
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        fprintf(stderr, "%s: %s: cannot open (got \"%s\", expected a GGUF file)\n", prefix,
                path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 1) {
        fprintf(stderr, "%s: %s: not a regular, non-empty file\n", prefix, path);
        close(fd);
        return -1;
    }
    void *map = os_map_file(fd, (size_t)st.st_size, whole, &g->own);
    close(fd);
    if (!map) {
        fprintf(stderr, "%s: %s: cannot read (%s)\n", prefix, path, strerror(errno));
        return -1;
    }
    g->map = map;
    g->size = (size_t)st.st_size;
    Cursor c = {g->map, 0, g->size, path, prefix};
    const unsigned char *magic = take(&c, 4, "the magic");
    uint32_t version;
    uint64_t n_tensors, n_values;
    if (!magic || read_u32(&c, &version, "the version") != 0 ||
        read_u64(&c, &n_tensors, "the tensor count") != 0 ||
        read_u64(&c, &n_values, "the metadata count") != 0) goto fail;
    if (!gguf_is_gguf(magic, 4)) {
        fprintf(stderr, "%s: %s: not a GGUF file (got magic %.4s, expected GGUF)\n", prefix,
                path, (const char *)magic);
        goto fail;
    }
    if (version != GGUF_VERSION) {
        fprintf(stderr, "%s: %s: unsupported GGUF version (got %u, expected %d: a big-endian "
                "or an old file; convert it again with a current llama.cpp)\n", prefix, path,
                version, GGUF_VERSION);
        goto fail;
    }
    /* a metadata entry takes at least 8 + 4 + 1 bytes, a tensor 8 + 1 + 4 + 8 + 4 + 8 */
    size_t left = g->size - c.pos;
    if (n_values > left / 13 || n_tensors > left / 33) {
        fprintf(stderr, "%s: %s: counts out of range for the file's size (got %llu metadata "
                "entries and %llu tensors, expected at most %zu and %zu in %zu bytes)\n",
                prefix, path, (unsigned long long)n_values, (unsigned long long)n_tensors,
                left / 13, left / 33, left);
        goto fail;
    }
    g->n_values = (size_t)n_values;
    g->n_tensors = (size_t)n_tensors;
    g->values = calloc(g->n_values ? g->n_values : 1, sizeof *g->values);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->values || !g->tensors) {
        fprintf(stderr, "%s: %s: out of memory for the tables\n", prefix, path);
        goto fail;
    }
    if (read_values(g, &c) != 0 || read_alignment(g, prefix) != 0 ||
        read_tensor_infos(g, &c) != 0) goto fail;
    size_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
    if (pad > g->size - c.pos && g->n_tensors == 0) pad = g->size - c.pos;   /* no data */
    if (pad > g->size - c.pos) {
        fprintf(stderr, "%s: %s: truncated GGUF file: no data section (the table ends at byte "
                "%zu of %zu)\n", prefix, path, c.pos, g->size);
        goto fail;
    }
    g->data_offset = c.pos + pad;
    if (check_tensor_data(g, prefix) != 0) goto fail;
    return 0;
fail:
    gguf_close(g);
    return -1;
}

void gguf_close(GgufFile *g) {
    os_unmap_file(g->map, g->size);
    free(g->values);
    free(g->tensors);
    memset(g, 0, sizeof *g);
}

/* ------------------------------------------------------------------------- */
/* Typed metadata                                                              */

/* The integer at key into *out, which must lie in [lo, hi]; any integer type is taken.
 * Missing: *out = fallback, or an error if fallback < lo (required). */
static int get_int(const GgufFile *g, const char *key, long long lo, long long hi,
                   long long fallback, long long *out) {
    const GgufValue *v = gguf_find(g, key);
    if (!v) {
        if (fallback >= lo) {
            *out = fallback;
            return 0;
        }
        fprintf(stderr, "model: %s: missing metadata %s (expected an integer)\n", g->path, key);
        return -1;
    }
    const unsigned char *p = v->value;
    long long x = 0;
    switch (v->type) {
    case GGUF_UINT8: x = p[0]; break;
    case GGUF_INT8: x = (int8_t)p[0]; break;
    case GGUF_UINT16: { uint16_t u; memcpy(&u, p, 2); x = u; } break;
    case GGUF_INT16: { int16_t u; memcpy(&u, p, 2); x = u; } break;
    case GGUF_UINT32: x = get_u32(p); break;
    case GGUF_INT32: x = (int32_t)get_u32(p); break;
    case GGUF_UINT64: {
        uint64_t u = get_u64(p);
        if (u > (uint64_t)hi) {   /* past long long's range too, perhaps: printed unsigned */
            fprintf(stderr, "model: %s: metadata %s out of range (got %llu, expected "
                    "%lld..%lld)\n", g->path, key, (unsigned long long)u, lo, hi);
            return -1;
        }
        x = (long long)u;
    } break;
    case GGUF_INT64: { int64_t u; memcpy(&u, p, 8); x = u; } break;
    default:
        fprintf(stderr, "model: %s: metadata %s has the wrong type (got %s, expected an "
                "integer)\n", g->path, key, value_type_name(v->type));
        return -1;
    }
    if (x < lo || x > hi) {
        fprintf(stderr, "model: %s: metadata %s out of range (got %lld, expected %lld..%lld)\n",
                g->path, key, x, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* The float32 at key into *out (finite, > 0); missing: fallback, or an error if fallback
 * is 0. */
static int get_float(const GgufFile *g, const char *key, float fallback, float *out) {
    const GgufValue *v = gguf_find(g, key);
    if (!v && fallback > 0.0f) {
        *out = fallback;
        return 0;
    }
    if (!v || v->type != GGUF_FLOAT32) {
        fprintf(stderr, "model: %s: metadata %s %s (got %s, expected float32)\n", g->path, key,
                v ? "has the wrong type" : "missing", v ? value_type_name(v->type) : "none");
        return -1;
    }
    memcpy(out, v->value, sizeof *out);
    if (!isfinite(*out) || *out <= 0.0f) {
        fprintf(stderr, "model: %s: metadata %s out of range (got %g, expected a positive "
                "number)\n", g->path, key, (double)*out);
        return -1;
    }
    return 0;
}

/* The string at key (a view, len bytes), or NULL (with a message if required). */
static const char *get_string(const GgufFile *g, const char *key, size_t *len, int required,
                              const char *prefix) {
    const GgufValue *v = gguf_find(g, key);
    if (v && v->type == GGUF_STRING) {
        *len = (size_t)get_u64(v->value);
        return (const char *)v->value + 8;
    }
    if (v || required)
        fprintf(stderr, "%s: %s: metadata %s %s (got %s, expected a string)\n", prefix,
                g->path, key, v ? "has the wrong type" : "missing",
                v ? value_type_name(v->type) : "none");
    return NULL;
}

static int string_is(const char *s, size_t len, const char *want) {
    return s && len == strlen(want) && memcmp(s, want, len) == 0;
}

/* ------------------------------------------------------------------------- */
/* The model: tensors by name                                                  */

/* The tensor called name, or NULL. */
static const GgufTensor *find_tensor(const GgufFile *g, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].name_len == n && memcmp(g->tensors[i].name, name, n) == 0)
            return &g->tensors[i];
    return NULL;
}

/* One tensor of an architecture: its name ("%d" for the layer), its role here, and whether
 * it is a matrix (rows, cols) or a vector (cols,) (GPT-2's position table is an (S, C)
 * "vector": fp32, never int8). */
typedef struct {
    const char *name;
    TensorName role;
    int is_matrix, layered, optional;
} Role;

static const Role LLAMA_ROLES[] = {
    {"token_embd.weight", TENSOR_TOK, 1, 0, 0},
    {"output_norm.weight", TENSOR_RMS_FINAL, 0, 0, 0},
    {"output.weight", TENSOR_CLS, 1, 0, 1},        /* absent: tied to token_embd */
    {"rope_freqs.weight", TENSOR_ROPE_FREQS, 0, 0, 1},  /* Llama 3.1's; absent: all 1 */
    {"blk.%d.attn_norm.weight", TENSOR_RMS_ATT, 0, 1, 0},
    {"blk.%d.attn_q.weight", TENSOR_WQ, 1, 1, 0},
    {"blk.%d.attn_k.weight", TENSOR_WK, 1, 1, 0},
    {"blk.%d.attn_v.weight", TENSOR_WV, 1, 1, 0},
    {"blk.%d.attn_output.weight", TENSOR_WO, 1, 1, 0},
    {"blk.%d.attn_q.bias", TENSOR_BQ, 0, 1, 1},    /* Qwen2's (llama.cpp: each optional */
    {"blk.%d.attn_k.bias", TENSOR_BK, 0, 1, 1},    /* in llama too); absent: no bias */
    {"blk.%d.attn_v.bias", TENSOR_BV, 0, 1, 1},
    {"blk.%d.ffn_norm.weight", TENSOR_RMS_FFN, 0, 1, 0},
    {"blk.%d.ffn_gate.weight", TENSOR_W1, 1, 1, 0},  /* silu(gate x) * (up x): llama2.c w1 */
    {"blk.%d.ffn_down.weight", TENSOR_W2, 1, 1, 0},  /* llama2.c w2 */
    {"blk.%d.ffn_up.weight", TENSOR_W3, 1, 1, 0},    /* llama2.c w3 */
};

/* llama.cpp's `qwen2`: llama's tensors but rope_freqs.weight (llama.cpp's qwen2 takes none:
 * a file with it is refused as a wrong number of tensors), with the biases of Q, K and V
 * required (llama.cpp refuses a qwen2 file without them) */
static const Role QWEN2_ROLES[] = {
    {"token_embd.weight", TENSOR_TOK, 1, 0, 0},
    {"output_norm.weight", TENSOR_RMS_FINAL, 0, 0, 0},
    {"output.weight", TENSOR_CLS, 1, 0, 1},        /* absent: tied to token_embd */
    {"blk.%d.attn_norm.weight", TENSOR_RMS_ATT, 0, 1, 0},
    {"blk.%d.attn_q.weight", TENSOR_WQ, 1, 1, 0},
    {"blk.%d.attn_k.weight", TENSOR_WK, 1, 1, 0},
    {"blk.%d.attn_v.weight", TENSOR_WV, 1, 1, 0},
    {"blk.%d.attn_output.weight", TENSOR_WO, 1, 1, 0},
    {"blk.%d.attn_q.bias", TENSOR_BQ, 0, 1, 0},
    {"blk.%d.attn_k.bias", TENSOR_BK, 0, 1, 0},
    {"blk.%d.attn_v.bias", TENSOR_BV, 0, 1, 0},
    {"blk.%d.ffn_norm.weight", TENSOR_RMS_FFN, 0, 1, 0},
    {"blk.%d.ffn_gate.weight", TENSOR_W1, 1, 1, 0},
    {"blk.%d.ffn_down.weight", TENSOR_W2, 1, 1, 0},
    {"blk.%d.ffn_up.weight", TENSOR_W3, 1, 1, 0},
};

/* llama.cpp's `gpt2` (convert_hf_to_gguf.py's GPT2Model): llm.c's tensors by other names;
 * attn_qkv holds the Q rows, then K, then V, as llm.c's qkvw does. */
static const Role GPT2_ROLES[] = {
    {"token_embd.weight", TENSOR_WTE, 1, 0, 0},
    {"position_embd.weight", TENSOR_WPE, 0, 0, 0},
    {"output_norm.weight", TENSOR_LNFW, 0, 0, 0},
    {"output_norm.bias", TENSOR_LNFB, 0, 0, 0},
    {"output.weight", TENSOR_CLS, 1, 0, 1},   /* absent or equal to token_embd: tied */
    {"blk.%d.attn_norm.weight", TENSOR_LN1W, 0, 1, 0},
    {"blk.%d.attn_norm.bias", TENSOR_LN1B, 0, 1, 0},
    {"blk.%d.attn_qkv.weight", TENSOR_QKVW, 1, 1, 0},
    {"blk.%d.attn_qkv.bias", TENSOR_QKVB, 0, 1, 0},
    {"blk.%d.attn_output.weight", TENSOR_ATTPROJW, 1, 1, 0},
    {"blk.%d.attn_output.bias", TENSOR_ATTPROJB, 0, 1, 0},
    {"blk.%d.ffn_norm.weight", TENSOR_LN2W, 0, 1, 0},
    {"blk.%d.ffn_norm.bias", TENSOR_LN2B, 0, 1, 0},
    {"blk.%d.ffn_up.weight", TENSOR_FCW, 1, 1, 0},
    {"blk.%d.ffn_up.bias", TENSOR_FCB, 0, 1, 0},
    {"blk.%d.ffn_down.weight", TENSOR_FCPROJW, 1, 1, 0},
    {"blk.%d.ffn_down.bias", TENSOR_FCPROJB, 0, 1, 0},
};

/* An architecture: its name (general.architecture), its tensors, and whether RoPE pairs
 * dimension i of a head with i + HS/2 (Config.rope_halves). */
typedef struct {
    const char *name;
    const Role *roles;
    int n_roles, rope_halves;
} Arch;

/* qwen2 is llama with biases on Q, K and V (optional in llama too), GPT-NeoX's RoPE pairs
 * and no RoPE frequency factors: llama.cpp's llm_build_qwen2 */
static const Arch ARCHS[] = {
    {"llama", LLAMA_ROLES, sizeof LLAMA_ROLES / sizeof LLAMA_ROLES[0], 0},
    {"qwen2", QWEN2_ROLES, sizeof QWEN2_ROLES / sizeof QWEN2_ROLES[0], 1},
    {"gpt2", GPT2_ROLES, sizeof GPT2_ROLES / sizeof GPT2_ROLES[0], 0},
};
enum { MAX_ROLES = sizeof GPT2_ROLES / sizeof GPT2_ROLES[0] };   /* the most roles */
_Static_assert(sizeof LLAMA_ROLES / sizeof LLAMA_ROLES[0] <= MAX_ROLES, "MAX_ROLES too small");
_Static_assert(sizeof QWEN2_ROLES / sizeof QWEN2_ROLES[0] <= MAX_ROLES, "MAX_ROLES too small");

/* The shape (rows, cols) role r must have: cols is ggml's ne[0]. */
static void role_shape(const Role *r, const Config *c, int *rows, int *cols) {
    int C = c->dim, KVD = c->kv_dim, Hd = c->hidden_dim, V = c->vocab_size;
    *rows = 1;
    *cols = C;
    switch (r->role) {
    case TENSOR_TOK: case TENSOR_CLS: case TENSOR_WTE: *rows = V; break;
    case TENSOR_WPE: *rows = c->seq_len; break;
    case TENSOR_QKVW: *rows = C + 2 * KVD; break;
    case TENSOR_QKVB: *cols = C + 2 * KVD; break;
    case TENSOR_ATTPROJW: *rows = C; break;
    case TENSOR_FCW: *rows = Hd; break;
    case TENSOR_FCB: *cols = Hd; break;
    case TENSOR_FCPROJW: *rows = C; *cols = Hd; break;
    case TENSOR_WQ: case TENSOR_WO: *rows = C; break;
    case TENSOR_WK: case TENSOR_WV: *rows = KVD; break;
    case TENSOR_BK: case TENSOR_BV: *cols = KVD; break;
    case TENSOR_W1: case TENSOR_W3: *rows = Hd; break;
    case TENSOR_W2: *rows = C; *cols = Hd; break;
    case TENSOR_ROPE_FREQS: *cols = c->head_dim / 2; break;
    default: break;
    }
}

/* The converted tensors each start on a 64-byte line of gguf_load_checkpoint's block
 * (a vector kernel's 64-byte load then never straddles two lines): n floats or bytes
 * take lined_floats(n) or lined_bytes(n) of it. */
#define LINE_BYTES 64
static size_t lined_bytes(size_t n) { return (n + LINE_BYTES - 1) / LINE_BYTES * LINE_BYTES; }
static size_t lined_floats(size_t n) { return lined_bytes(n * sizeof(float)) / sizeof(float); }

/* Finds layer l's tensor of role r, checks its shape and type, and adds the floats and
 * int8 bytes its conversion needs to *floats and *bytes. NULL with *missing = 1 for an
 * optional one that is absent; NULL after a message on a problem. */
static const GgufTensor *role_tensor(const GgufFile *g, const Config *c, const Arch *a,
                                     const Role *r, int l, size_t *floats, size_t *bytes,
                                     int *missing) {
    char name[64];
    snprintf(name, sizeof name, r->name, l);
    *missing = 0;
    const GgufTensor *t = find_tensor(g, name);
    if (!t) {
        if (r->optional) *missing = 1;
        else fprintf(stderr, "model: %s: missing tensor %s (expected every tensor of the %s "
                     "architecture)\n", g->path, name, a->name);
        return NULL;
    }
    int rows, cols;
    role_shape(r, c, &rows, &cols);
    /* (dimensions of 1 past the shape's change nothing: llama.cpp takes them too) */
    if (t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows || t->ne[2] != 1 ||
        t->ne[3] != 1) {
        fprintf(stderr, "model: %s: tensor %s has the wrong shape (got (%llu, %llu, %llu, %llu) "
                "(ggml order), expected (%d, %d) from the metadata)\n", g->path, name,
                (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], cols, rows);
        return NULL;
    }
    size_t numel = (size_t)rows * (size_t)cols;   /* rows <= 2^21, cols <= 2^16 */
    if (r->role == TENSOR_ROPE_FREQS && t->type != GGUF_F32) {
        fprintf(stderr, "model: %s: tensor %s has type %s (expected F32, as llama.cpp's RoPE "
                "requires)\n", g->path, name, TYPES[t->type].name);
        return NULL;
    }
    if (r->role == TENSOR_ROPE_FREQS) {   /* an angle divided by it must stay finite */
        for (size_t i = 0; i < numel; i++) {
            float x;
            memcpy(&x, t->data + 4 * i, sizeof x);
            if (!(fabsf(x) >= 1e-20f)) {   /* NaN too */
                fprintf(stderr, "model: %s: tensor %s: factor %zu is %g (expected a number of "
                        "magnitude at least 1e-20: positions are divided by it)\n", g->path,
                        name, i, (double)x);
                return NULL;
            }
        }
    }
    switch (t->type) {
    case GGUF_F32:
        /* copied: vectors (so a file whose matrices all convert is not kept), and
         * misaligned matrices */
        if (!r->is_matrix || (g->data_offset + t->offset) % sizeof(float) != 0)
            *floats += lined_floats(numel);
        break;
    case GGUF_F16:   /* matrices stay halves: in place, or copied where misaligned */
        if (!r->is_matrix) *floats += lined_floats(numel);
        else if ((g->data_offset + t->offset) % sizeof(uint16_t) != 0)
            *floats += lined_floats((numel + 1) / 2);
        break;
    case GGUF_BF16: *floats += lined_floats(numel); break;
    case GGUF_Q4_0: case GGUF_Q4_1: case GGUF_Q5_0: case GGUF_Q5_1: case GGUF_Q8_0:
    case GGUF_Q2_K: case GGUF_Q3_K: case GGUF_Q4_K: case GGUF_Q5_K: case GGUF_Q6_K:
    case GGUF_IQ4_NL: case GGUF_IQ4_XS: case GGUF_TQ1_0: case GGUF_TQ2_0:
        /* matrices repacked as int8 (gguf_load_checkpoint counts their scales and offsets,
         * once it knows their role's group), vectors widened */
        if (r->is_matrix) *bytes += lined_bytes(numel);
        else *floats += lined_floats(numel);
        break;
    default:
        fprintf(stderr, "model: %s: tensor %s has type %s, which this engine does not compute "
                "(expected F32, F16, BF16, Q8_0, Q6_K, Q5_K, Q5_1, Q5_0, Q4_K, Q4_1, Q4_0, "
                "IQ4_XS, IQ4_NL, Q3_K, Q2_K, TQ2_0 or TQ1_0: "
                "convert the file with llama-quantize --allow-requantize IN OUT Q4_K_M, or "
                "Q5_K_M, Q6_K, Q8_0, F16)\n", g->path, name, TYPES[t->type].name);
        return NULL;
    }
    return t;
}

/* fp32 from IEEE half precision (exact: every half is a float), as the KV cache's halves. */
static float half_to_float(uint16_t h) {
    float x;
    kernels_from_half(&x, &h, 1);
    return x;
}

/* Widens n values of t (F16 or BF16) into out. */
static void widen(float *out, const GgufTensor *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, t->data + 2 * i, sizeof h);
        if (t->type == GGUF_F16) {
            out[i] = half_to_float(h);
        } else {   /* bf16 is the top half of an fp32 */
            uint32_t bits = (uint32_t)h << 16;
            memcpy(&out[i], &bits, sizeof bits);
        }
    }
}

/* 1 for the types of integers and scales in blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
 * Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0); has_offsets: 1 for those whose
 * blocks also have a minimum (the _1 types, Q2_K, Q4_K, Q5_K), which become QuantMatrix
 * offsets; scales_16: 1 for those with a scale per 16 values (Q2_K, Q3_K, Q6_K), whose
 * tensors load in groups of 16. */
static int is_blocks(uint32_t type) {
    return type == GGUF_Q4_0 || type == GGUF_Q4_1 || type == GGUF_Q5_0 || type == GGUF_Q5_1 ||
           type == GGUF_Q8_0 || type == GGUF_Q2_K || type == GGUF_Q3_K || type == GGUF_Q4_K ||
           type == GGUF_Q5_K || type == GGUF_Q6_K || type == GGUF_IQ4_NL ||
           type == GGUF_IQ4_XS || type == GGUF_TQ1_0 || type == GGUF_TQ2_0;
}

static int scales_16(uint32_t type) {
    return type == GGUF_Q2_K || type == GGUF_Q3_K || type == GGUF_Q6_K;
}

/* IQ4_NL's and IQ4_XS's 16 levels (ggml-quants.c's kvalues_iq4nl): a 4-bit code n stands
 * for the integer IQ4_LEVELS[n], already in the int8 kernels' range. */
static const int8_t IQ4_LEVELS[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1, 13, 25, 38, 53, 69, 89, 113};

_Static_assert(MODEL_MAX_DIM / GGUF_K_GROUP <= QUANT_OFFSET_MAX_GROUPS,
               "a GGUF row's offsets fit quant.c's subtract_offsets");
static int has_offsets(uint32_t type) {
    return type == GGUF_Q4_1 || type == GGUF_Q5_1 || type == GGUF_Q2_K || type == GGUF_Q4_K ||
           type == GGUF_Q5_K;
}

/* Block b of t (Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0: an f16 scale d (and for _1 an f16
 * minimum m), then 32 integers' bits, each value d times its integer (plus m), as ggml
 * lays its blocks out in ggml-common.h): the integers into q (32,), d returned, m into
 * *min (0 for the types without).
 *   Q4_0: 16 bytes; value j (j < 16) is byte j's low 4 bits, value j + 16 its high 4, less 8
 *   Q5_0: a 32-bit word (little-endian) whose bit j is value j's fifth bit, then the 4 bits
 *         of each value as Q4_0 has them; the 5-bit number less 16
 *   Q4_1, Q5_1: m after d, then as Q4_0 and Q5_0 but nothing subtracted (0..15, 0..31)
 *   IQ4_NL: as Q4_0, each 4-bit code standing for IQ4_LEVELS' integer
 *   Q8_0: 32 int8 */
static float block_values(int8_t q[GGUF_BLOCK], float *min, const GgufTensor *t, size_t b) {
    const unsigned char *block = t->data + b * (size_t)TYPES[t->type].bytes;
    int with_min = t->type == GGUF_Q4_1 || t->type == GGUF_Q5_1;
    int fifth_bits = t->type == GGUF_Q5_0 || t->type == GGUF_Q5_1;
    uint16_t h, m;
    memcpy(&h, block, sizeof h);
    memcpy(&m, block + 2, sizeof m);
    *min = with_min ? half_to_float(m) : 0.0f;
    if (t->type == GGUF_Q8_0) {
        memcpy(q, block + 2, GGUF_BLOCK);
        return half_to_float(h);
    }
    const unsigned char *at = block + 2 + 2 * with_min;
    uint32_t fifth = 0;
    if (fifth_bits) {
        fifth = (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 |
                (uint32_t)at[3] << 24;
        at += 4;
    }
    int less = with_min ? 0 : fifth_bits ? 16 : 8;
    for (int j = 0; j < GGUF_BLOCK / 2; j++) {
        int lo = (at[j] & 0x0F) | (int)(fifth >> j & 1) << 4;
        int hi = (at[j] >> 4) | (int)(fifth >> (j + GGUF_BLOCK / 2) & 1) << 4;
        q[j] = t->type == GGUF_IQ4_NL ? IQ4_LEVELS[lo] : (int8_t)(lo - less);
        q[j + GGUF_BLOCK / 2] = t->type == GGUF_IQ4_NL ? IQ4_LEVELS[hi] : (int8_t)(hi - less);
    }
    return half_to_float(h);
}

/* Super-block b of t (IQ4_XS, as ggml-common.h lays it out: an f16 d, a 16-bit word
 * scales_h, 4 bytes scales_l, 128 bytes qs): sub-block j of 32 values has the 6-bit ls_j,
 * its low 4 bits the nibble j % 2 of scales_l[j / 2], its top 2 bits 2j and 2j + 1 of
 * scales_h, and the scale d (ls_j - 32) (exact in a float: 11 bits times 6); its values
 * are 16 bytes of qs as IQ4_NL has them. The integers into q (256,), each 16's scale into
 * scale (16,). */
static void iq4xs_values(int8_t q[GGUF_K_BLOCK], float scale[GGUF_K_BLOCK / GGUF_K_GROUP],
                         const GgufTensor *t, size_t b) {
    const unsigned char *block = t->data + b * (size_t)TYPES[GGUF_IQ4_XS].bytes;
    const unsigned char *low = block + 4, *qs = block + 8;
    uint16_t h, high;
    memcpy(&h, block, sizeof h);
    memcpy(&high, block + 2, sizeof high);
    float d = half_to_float(h);
    for (int j = 0; j < 8; j++) {
        int ls = (low[j / 2] >> (4 * (j % 2)) & 0x0F) | (high >> (2 * j) & 3) << 4;
        scale[2 * j] = scale[2 * j + 1] = d * (float)(ls - 32);
        for (int i = 0; i < 16; i++) {
            q[32 * j + i] = IQ4_LEVELS[qs[16 * j + i] & 0x0F];
            q[32 * j + 16 + i] = IQ4_LEVELS[qs[16 * j + i] >> 4];
        }
    }
}

/* Super-block b of t (Q4_K or Q5_K: ggml-common.h's block_q4_K, block_q5_K: f16 d and
 * dmin, 12 bytes of 6-bit scales and minimums for its 8 sub-blocks of 32, Q5_K's 32 bytes
 * qh of fifth bits, 128 bytes qs of 4 bits; value d sc_j q - dmin m_j): its 256 integers
 * (0..15, 0..31) into q, and each 16's scale d sc_j and offset dmin m_j (each exact in a
 * float: 11 bits times 6) into scale (16,) and offset (16,), as dequantize_row_q4_K:
 * sub-block j < 4 has sc_j, m_j in the low 6 bits of bytes j and j + 4; j >= 4 the low
 * and high nibbles of byte j + 4 below the top 2 bits of bytes j - 4 and j. Each 64 values
 * (pair p) read qs[32 p ..]: value 64 p + l (l < 32) the low nibble of byte l, 64 p + 32
 * + l the high one, with Q5_K's bits 2p and 2p + 1 of qh[l] as their fifth bits. */
static void k45_values(int8_t q[GGUF_K_BLOCK], float scale[GGUF_K_BLOCK / GGUF_K_GROUP],
                       float offset[GGUF_K_BLOCK / GGUF_K_GROUP], const GgufTensor *t,
                       size_t b) {
    const unsigned char *block = t->data + b * (size_t)TYPES[t->type].bytes;
    const unsigned char *sc = block + 4, *qh = block + 16;
    const unsigned char *qs = block + (t->type == GGUF_Q5_K ? 48 : 16);
    int five = t->type == GGUF_Q5_K;
    uint16_t h, hmin;
    memcpy(&h, block, sizeof h);
    memcpy(&hmin, block + 2, sizeof hmin);
    float d = half_to_float(h), dmin = half_to_float(hmin);
    for (int j = 0; j < 8; j++) {
        int s = j < 4 ? sc[j] & 63 : (sc[j + 4] & 0x0F) | (sc[j - 4] >> 6) << 4;
        int m = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | (sc[j] >> 6) << 4;
        scale[2 * j] = scale[2 * j + 1] = d * (float)s;
        offset[2 * j] = offset[2 * j + 1] = dmin * (float)m;
    }
    for (int p = 0; p < 4; p++)
        for (int l = 0; l < 32; l++) {
            int lo = qs[32 * p + l] & 0x0F, hi = qs[32 * p + l] >> 4;
            if (five) {
                lo |= (qh[l] >> (2 * p) & 1) << 4;
                hi |= (qh[l] >> (2 * p + 1) & 1) << 4;
            }
            q[64 * p + l] = (int8_t)lo;
            q[64 * p + 32 + l] = (int8_t)hi;
        }
}

/* Super-block b of t (Q6_K: ggml-common.h's block_q6_K, 128 bytes ql of low 4 bits, 64
 * bytes qh of high 2 bits, 16 int8 scales, an f16 d; each value d times its scale times
 * its integer): the 256 integers (6 bits, less 32) into q (256,), and each 16's scale,
 * d times its int8 (exact in a float: 11 bits times 8), into scale (16,). Each half of
 * 128 values has 64 bytes of ql and 32 of qh: value 32 k + l (k < 4, l < 32) is the low
 * (k < 2) or high nibble of ql[l + 32 (k % 2)] with bits 2k and 2k + 1 of qh[l] above it. */
static void k6_values(int8_t q[GGUF_K_BLOCK], float scale[GGUF_K_BLOCK / GGUF_K_GROUP],
                      const GgufTensor *t, size_t b) {
    const unsigned char *block = t->data + b * (size_t)TYPES[GGUF_Q6_K].bytes;
    int8_t sc[GGUF_K_BLOCK / GGUF_K_GROUP];
    uint16_t h;
    memcpy(sc, block + 192, sizeof sc);
    memcpy(&h, block + 208, sizeof h);
    for (int half = 0; half < 2; half++) {
        const unsigned char *ql = block + 64 * half, *qh = block + 128 + 32 * half;
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                int low = ql[l + 32 * (k % 2)] >> (4 * (k / 2)) & 0x0F;
                int high = qh[l] >> (2 * k) & 3;
                q[128 * half + 32 * k + l] = (int8_t)((low | high << 4) - 32);
            }
    }
    float d = half_to_float(h);
    for (int g = 0; g < GGUF_K_BLOCK / GGUF_K_GROUP; g++) scale[g] = d * (float)sc[g];
}

/* Super-block b of t (TQ1_0 or TQ2_0, the ternary types, as ggml-common.h lays them out:
 * each value d (t - 1) for a digit t of 0..2, the f16 d last): its 256 integers t - 1 into
 * q (256,), d returned.
 *   TQ2_0: 64 bytes qs: value 128 h + 32 k + l (h < 2, k < 4, l < 32) is bits 2k and
 *          2k + 1 of qs[32 h + l] (so 0..3: a 3, which ggml never writes, is 2 d)
 *   TQ1_0: 48 bytes qs then 4 bytes qh, five base-3 digits a byte (four in qh's), each
 *          byte stored as ceil(N 256 / 243) for the number N the digits spell, the first
 *          the most significant: digit n of a byte x is (u 3) >> 8 for the low 8 bits u of
 *          x 3^n. Values 32 n + m (n < 5) are digit n of qs[m] (m < 32), values 160 + 16 n
 *          + m of qs[32 + m] (m < 16), values 240 + 4 n + j of qh[j] (n, j < 4). */
static float tq_values(int8_t q[GGUF_K_BLOCK], const GgufTensor *t, size_t b) {
    const unsigned char *block = t->data + b * (size_t)TYPES[t->type].bytes;
    uint16_t h;
    if (t->type == GGUF_TQ2_0) {
        for (int half = 0; half < 2; half++)
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 32; l++) {
                    int digit = block[32 * half + l] >> (2 * k) & 3;
                    q[128 * half + 32 * k + l] = (int8_t)(digit - 1);
                }
        memcpy(&h, block + 64, sizeof h);
        return half_to_float(h);
    }
    static const struct { int first, bytes, digits; } RUNS[3] = {
        {0, 32, 5}, {32, 16, 5}, {48, 4, 4}};   /* qs[0..31], qs[32..47], qh */
    int at = 0;
    for (int run = 0; run < 3; run++) {
        for (int n = 0, power = 1; n < RUNS[run].digits; n++, power *= 3)
            for (int m = 0; m < RUNS[run].bytes; m++) {
                unsigned u = (unsigned)(block[RUNS[run].first + m] * power) & 0xFF;
                q[at++] = (int8_t)((int)(u * 3 >> 8) - 1);
            }
    }
    memcpy(&h, block + 52, sizeof h);
    return half_to_float(h);
}

/* Super-block b of t (Q2_K or Q3_K, as ggml-common.h lays them out): block_q2_K has 16
 * bytes of scales (sub-block j's 4-bit sc_j and m_j the low and high nibbles of byte j),
 * 64 bytes qs, f16 d and dmin, value d sc_j q - dmin m_j (q 0..3); block_q3_K has 32 bytes
 * hmask, 64 bytes qs, 12 bytes of 6-bit scales s_j (the low 4 bits in the low (j < 8) or
 * high nibble of byte j % 8, the top 2 at bit 2 (j / 4) of byte 8 + j % 4), f16 d, value
 * d (s_j - 32) q, q = the 2 bits less 4 where its hmask bit is clear (-4..3). Each 128
 * values (half h) read qs[32 h ..]: value 128 h + 32 k + l (k < 4, l < 32) is bits 2k and
 * 2k + 1 of qs[32 h + l], its hmask bit bit 4 h + k of hmask[l]. The 256 integers into q,
 * each 16's scale (and Q2_K's offset dmin m_j; exact in a float: 11 bits times 4 or 6)
 * into scale and offset (16,), as dequantize_row_q2_K and _q3_K give them. */
static void k23_values(int8_t q[GGUF_K_BLOCK], float scale[GGUF_K_BLOCK / GGUF_K_GROUP],
                       float offset[GGUF_K_BLOCK / GGUF_K_GROUP], const GgufTensor *t,
                       size_t b) {
    const unsigned char *block = t->data + b * (size_t)TYPES[t->type].bytes;
    int three = t->type == GGUF_Q3_K;
    const unsigned char *hmask = block, *qs = block + (three ? 32 : 16);
    const unsigned char *sc = block + (three ? 96 : 0);
    uint16_t h, hmin = 0;
    memcpy(&h, block + (three ? 108 : 80), sizeof h);
    if (!three) memcpy(&hmin, block + 82, sizeof hmin);
    float d = half_to_float(h), dmin = half_to_float(hmin);
    for (int j = 0; j < GGUF_K_BLOCK / GGUF_K_GROUP; j++) {
        if (three) {
            int s = (j < 8 ? sc[j] & 0x0F : sc[j - 8] >> 4) |
                    (sc[8 + j % 4] >> (2 * (j / 4)) & 3) << 4;
            scale[j] = d * (float)(s - 32);
            offset[j] = 0.0f;
        } else {
            scale[j] = d * (float)(sc[j] & 0x0F);
            offset[j] = dmin * (float)(sc[j] >> 4);
        }
    }
    for (int half = 0; half < 2; half++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                int v = qs[32 * half + l] >> (2 * k) & 3;
                if (three && !(hmask[l] >> (4 * half + k) & 1)) v -= 4;
                q[128 * half + 32 * k + l] = (int8_t)v;
            }
}

/* Block b of t (any is_blocks type): its integers into q and the scale and offset of each
 * GGUF_K_GROUP of them into scale and offset (a 32-value block's twice; offsets 0 for the
 * types without: has_offsets). Returns how many values it has (32 or 256). */
static int block_ints(int8_t q[GGUF_K_BLOCK], float scale[GGUF_K_BLOCK / GGUF_K_GROUP],
                      float offset[GGUF_K_BLOCK / GGUF_K_GROUP], const GgufTensor *t,
                      size_t b) {
    if (t->type == GGUF_Q6_K) {
        k6_values(q, scale, t, b);
        for (int g = 0; g < GGUF_K_BLOCK / GGUF_K_GROUP; g++) offset[g] = 0.0f;
        return GGUF_K_BLOCK;
    }
    if (t->type == GGUF_Q4_K || t->type == GGUF_Q5_K) {
        k45_values(q, scale, offset, t, b);
        return GGUF_K_BLOCK;
    }
    if (t->type == GGUF_Q2_K || t->type == GGUF_Q3_K) {
        k23_values(q, scale, offset, t, b);
        return GGUF_K_BLOCK;
    }
    if (t->type == GGUF_TQ1_0 || t->type == GGUF_TQ2_0) {
        float d = tq_values(q, t, b);
        for (int g = 0; g < GGUF_K_BLOCK / GGUF_K_GROUP; g++) {
            scale[g] = d;
            offset[g] = 0.0f;
        }
        return GGUF_K_BLOCK;
    }
    if (t->type == GGUF_IQ4_XS) {
        iq4xs_values(q, scale, t, b);
        for (int g = 0; g < GGUF_K_BLOCK / GGUF_K_GROUP; g++) offset[g] = 0.0f;
        return GGUF_K_BLOCK;
    }
    float min;
    scale[0] = scale[1] = block_values(q, &min, t, b);
    offset[0] = offset[1] = -min;   /* value = d q + m = d q - (-m), exactly */
    return GGUF_BLOCK;
}

/* The blocks (any is_blocks type) of a (rows, cols) tensor into q (rows, cols), scale
 * (rows, cols / group) and, for a type with offsets, offset (likewise; else NULL): the same
 * values in quant.h's layout, computed in int8 as llama.cpp computes these types (against
 * activations in 8-bit blocks). group: 32 (a group per 32 values: Q4_0, Q5_0, Q8_0 blocks,
 * the _1 types' and the K types' sub-blocks) or 16 (a group per Q2_K, Q3_K or Q6_K scale;
 * a 32-value block's scale then serves two groups). Returns -1 (with a message) on a Q8_0 -128,
 * which the int8 kernels do not accept. */
static int repack_blocks(int8_t *q, float *scale, float *offset, const GgufTensor *t,
                         size_t numel, int group, const char *path) {
    size_t at = 0;
    for (size_t b = 0; at < numel; b++) {
        float sc[GGUF_K_BLOCK / GGUF_K_GROUP], off[GGUF_K_BLOCK / GGUF_K_GROUP];
        int n = block_ints(q + at, sc, off, t, b);
        for (int g = 0; g < n / group; g++) {
            scale[at / (size_t)group + (size_t)g] = sc[g * group / GGUF_K_GROUP];
            if (offset) offset[at / (size_t)group + (size_t)g] = off[g * group / GGUF_K_GROUP];
        }
        for (int i = 0; i < n; i++) {
            if (q[at + (size_t)i] < -QUANT_Q_MAX) {
                char name[SHOWN_CAP];
                fprintf(stderr, "model: %s: tensor %s: Q8_0 value out of range (got -128 in "
                        "block %zu, expected -127..127 as llama.cpp writes)\n", path,
                        shown(name, t->name, t->name_len, 64), b);
                return -1;
            }
        }
        at += (size_t)n;
    }
    return 0;
}

/* The blocks of a vector of n values into fp32 out: each integer times its scale, less its
 * offset, as ggml's dequantize_row_* gives them. */
static void dequantize_blocks(float *out, const GgufTensor *t, size_t n) {
    size_t at = 0;
    for (size_t b = 0; at < n; b++) {
        int8_t q[GGUF_K_BLOCK];
        float scale[GGUF_K_BLOCK / GGUF_K_GROUP], offset[GGUF_K_BLOCK / GGUF_K_GROUP];
        int values = block_ints(q, scale, offset, t, b);
        for (int i = 0; i < values; i++)
            out[at + (size_t)i] =
                scale[i / GGUF_K_GROUP] * (float)q[i] - offset[i / GGUF_K_GROUP];
        at += (size_t)values;
    }
}

/* "ARCH.suffix" in buf (a metadata key of architecture a). */
static const char *arch_key(char buf[80], const Arch *a, const char *suffix) {
    snprintf(buf, 80, "%s.%s", a->name, suffix);
    return buf;
}

/* The Config from the metadata of the file's architecture (*arch), checked. */
static int read_config(const GgufFile *g, Config *c, const Arch **arch) {
    size_t len;
    const char *name = get_string(g, "general.architecture", &len, 1, "model");
    if (!name) return -1;
    const Arch *a = NULL;
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (string_is(name, len, ARCHS[i].name)) a = &ARCHS[i];
    if (!a) {
        char text[SHOWN_CAP];
        fprintf(stderr, "model: %s: architecture %s is not supported (expected llama, qwen2 "
                "or gpt2)\n", g->path, shown(text, name, len, 60));
        return -1;
    }
    *arch = a;
    int gpt2 = a->roles == GPT2_ROLES;
    char k[80];
    long long layers, dim, hidden, heads, kv_heads, ctx, rot, experts;
    if (get_int(g, arch_key(k, a, "block_count"), 1, MODEL_MAX_LAYERS, 0, &layers) ||
        get_int(g, arch_key(k, a, "embedding_length"), 1, MODEL_MAX_DIM / 4, 0, &dim) ||
        get_int(g, arch_key(k, a, "feed_forward_length"), 1, MODEL_MAX_DIM, 0, &hidden) ||
        get_int(g, arch_key(k, a, "attention.head_count"), 1, dim, 0, &heads) ||
        /* GPT-2's block has as many kv heads as heads */
        get_int(g, arch_key(k, a, "attention.head_count_kv"), gpt2 ? heads : 1, heads, heads,
                &kv_heads) ||
        get_int(g, arch_key(k, a, "context_length"), 1, MODEL_MAX_SEQ_LEN, 0, &ctx) ||
        get_int(g, arch_key(k, a, "expert_count"), 0, 0, 0, &experts)) return -1;
    const GgufTensor *embd = find_tensor(g, "token_embd.weight");
    if (!embd) {
        fprintf(stderr, "model: %s: missing tensor token_embd.weight (expected the token "
                "embedding)\n", g->path);
        return -1;
    }
    if (embd->ne[1] < 1 || embd->ne[1] > MODEL_MAX_VOCAB) {
        fprintf(stderr, "model: %s: token_embd.weight has %llu rows (expected a vocabulary of "
                "1..%d)\n", g->path, (unsigned long long)embd->ne[1], MODEL_MAX_VOCAB);
        return -1;
    }
    memset(c, 0, sizeof *c);
    c->family = gpt2 ? MODEL_GPT2 : MODEL_LLAMA;
    c->positions = gpt2 ? MODEL_POSITIONS_LEARNED : MODEL_POSITIONS_ROTARY;
    c->n_layers = (int)layers;
    c->dim = (int)dim;
    c->hidden_dim = (int)hidden;
    c->n_heads = (int)heads;
    c->n_kv_heads = (int)kv_heads;
    c->seq_len = (int)ctx;
    c->vocab_size = c->padded_vocab_size = (int)embd->ne[1];
    if (checkpoint_check_config(c, g->path, "") != 0) return -1;
    c->half_kv = 1;   /* computed as llama.cpp computes a GGUF file (docs/formats.md) */
    /* what this engine computes: LayerNorm (gpt2) with KERNELS_NORM_EPS, or RMSNorm (llama,
     * qwen2) with the file's epsilon; llama, qwen2: RoPE over whole heads, unscaled, with
     * the file's base; a file that asks for other numbers is refused */
    float eps, base = MODEL_ROPE_BASE;
    if (get_float(g, arch_key(k, a, gpt2 ? "attention.layer_norm_epsilon"
                                         : "attention.layer_norm_rms_epsilon"), 0.0f, &eps))
        return -1;
    /* the constants cast to float: with x87 arithmetic (FLT_EVAL_METHOD 2) a float constant
     * keeps long double precision inside an expression (C11 5.2.4.2.2), a value no float
     * read from a file has; the cast rounds it to float */
    if (gpt2 && eps != (float)KERNELS_NORM_EPS) {
        fprintf(stderr, "model: %s: LayerNorm epsilon %.9g is not supported yet (expected %g, "
                "the number this engine computes with)\n", g->path, (double)eps,
                (double)KERNELS_NORM_EPS);
        return -1;
    }
    if (!gpt2 && (get_float(g, arch_key(k, a, "rope.freq_base"), MODEL_ROPE_BASE, &base) ||
                  get_int(g, arch_key(k, a, "rope.dimension_count"), c->head_dim, c->head_dim,
                          c->head_dim, &rot)))
        return -1;
    /* heads of the width over the head count: a key or value length of another size (which
     * llama.cpp reads, and shapes Q, K and V by) is refused */
    long long head;
    if (get_int(g, arch_key(k, a, "attention.key_length"), c->head_dim, c->head_dim,
                c->head_dim, &head) ||
        get_int(g, arch_key(k, a, "attention.value_length"), c->head_dim, c->head_dim,
                c->head_dim, &head))
        return -1;
    /* NaN too; cast as above: an x87 build's wider 1e-12f would refuse the float 1e-12 */
    if (!gpt2 && !(eps >= (float)1e-12f && eps <= (float)1e-2f)) {
        fprintf(stderr, "model: %s: %s out of range (got %.9g, expected 1e-12 to 0.01)\n",
                g->path, arch_key(k, a, "attention.layer_norm_rms_epsilon"), (double)eps);
        return -1;
    }
    if (!gpt2 && !(base >= 1.0f && base <= 1e9f)) {   /* NaN too */
        fprintf(stderr, "model: %s: %s out of range (got %.9g, expected 1 to 1e9)\n", g->path,
                arch_key(k, a, "rope.freq_base"), (double)base);
        return -1;
    }
    c->rope_base = gpt2 ? 0.0f : base;
    c->rope_halves = a->rope_halves;
    c->norm_eps = eps == (float)KERNELS_NORM_EPS ? 0.0f : eps;   /* 0: the default */
    const char *scaling = gpt2 ? NULL : get_string(g, arch_key(k, a, "rope.scaling.type"), &len,
                                                   0, "model");
    if (scaling && !string_is(scaling, len, "none")) {
        char text[SHOWN_CAP];
        fprintf(stderr, "model: %s: RoPE scaling %s is not supported (expected none)\n",
                g->path, shown(text, scaling, len, 40));
        return -1;
    }
    const GgufValue *tokens = gguf_find(g, "tokenizer.ggml.tokens");
    if (tokens && (tokens->type != GGUF_ARRAY || tokens->count != (uint64_t)c->vocab_size)) {
        fprintf(stderr, "model: %s: the vocabulary does not match the embedding (got %llu "
                "tokens, expected %d, the rows of token_embd.weight)\n", g->path,
                tokens->type == GGUF_ARRAY ? (unsigned long long)tokens->count : 0ULL,
                c->vocab_size);
        return -1;
    }
    return 0;
}

/* 1 if a and b hold the same type, shape and bytes (output.weight a copy of token_embd). */
static int same_tensor(const GgufTensor *a, const GgufTensor *b) {
    return a->type == b->type && memcmp(a->ne, b->ne, sizeof a->ne) == 0 &&
           a->bytes == b->bytes && memcmp(a->data, b->data, a->bytes) == 0;
}

/* 1 if a matrix of architecture a is F32 or F16 in g, and so used from the file in place
 * (a role's layers have one form: layer 0's tells), else 0: every matrix converts. */
static int reads_in_place(const GgufFile *g, const Arch *a) {
    for (int r = 0; r < a->n_roles; r++) {
        char name[64];
        snprintf(name, sizeof name, a->roles[r].name, 0);
        const GgufTensor *t = find_tensor(g, name);
        if (a->roles[r].is_matrix && t && (t->type == GGUF_F32 || t->type == GGUF_F16))
            return 1;
    }
    return 0;
}

int gguf_load_checkpoint(Checkpoint *ck, const char *path) {
    memset(ck, 0, sizeof *ck);
    GgufFile g;
    Config *c = &ck->config;
    const GgufTensor *found[MAX_ROLES][MODEL_MAX_LAYERS];
    const Arch *a = NULL;
    size_t floats = 0, bytes = 0;
    int f16 = 0, bf16 = 0;            /* the types found: halves, */
    unsigned char blocks[N_TYPES] = {0};   /* and of matrices in blocks, by type */
    int group[MAX_ROLES];             /* each role's int8 group: 16 if a layer's type has
                                       * a scale per 16 (scales_16) */
    unsigned char *read = NULL;   /* (n_tensors,) 1 for each tensor a role takes */
    /* mapped: a file whose matrices all convert is read once, each tensor's pages dropped
     * once converted, so that it and its copy are not held at once; a file with matrices
     * used in place is opened again, read whole (os_map_file) */
    if (gguf_open(&g, path, "model", 0) != 0) return -1;
    if (read_config(&g, c, &a) != 0) goto fail;
    if (reads_in_place(&g, a)) {
        gguf_close(&g);
        if (gguf_open(&g, path, "model", 1) != 0 || read_config(&g, c, &a) != 0) goto fail;
    }
    read = calloc(g.n_tensors, 1);   /* read_config found token_embd: n_tensors >= 1 */
    if (!read) {
        fprintf(stderr, "model: %s: out of memory for %zu tensors\n", path, g.n_tensors);
        goto fail;
    }
    /* every tensor found and checked, and the memory its conversion needs counted */
    for (int r = 0; r < a->n_roles; r++) {
        const Role *role = &a->roles[r];
        group[r] = GGUF_BLOCK;
        for (int l = 0; l < (role->layered ? c->n_layers : 1); l++) {
            int missing;
            size_t was_floats = floats, was_bytes = bytes;
            found[r][l] = role_tensor(&g, c, a, role, l, &floats, &bytes, &missing);
            if (!found[r][l] && !missing) goto fail;
            if (found[r][l]) read[found[r][l] - g.tensors] = 1;
            if (found[r][l] && role->role == TENSOR_CLS && same_tensor(found[r][l], found[0][0])) {
                /* llama.cpp's gpt2 wants output.weight, so its converter writes a copy of
                 * the embedding: the tie is kept, and the copy neither converted nor used */
                if (!g.own) os_drop_mapped(found[r][l]->data, found[r][l]->bytes);
                found[r][l] = NULL;
                floats = was_floats;
                bytes = was_bytes;
            }
            if (found[r][l]) {   /* the load line's words: how the matrices compute */
                uint32_t type = found[r][l]->type;
                int matrix = role->is_matrix;
                f16 |= matrix && type == GGUF_F16;
                bf16 |= type == GGUF_BF16;
                blocks[type] |= matrix && is_blocks(type);
                if (matrix && scales_16(type)) group[r] = GGUF_K_GROUP;
            }
        }
        /* an optional tensor of the layers (a bias) is in every layer or in none */
        for (int l = 1; role->layered && l < c->n_layers; l++) {
            if ((found[r][l] != NULL) == (found[r][0] != NULL)) continue;
            char name[64];
            snprintf(name, sizeof name, role->name, found[r][l] ? 0 : l);
            fprintf(stderr, "model: %s: missing tensor %s (expected it in every layer or in "
                    "none)\n", path, name);
            goto fail;
        }
        /* the int8 layers' scales (and offsets), in the role's groups: 16 if a layer has
         * a scale per 16 (a 32-value block's scale then serves two), else 32 */
        int rows, cols;
        role_shape(role, c, &rows, &cols);
        for (int l = 0; l < (role->layered ? c->n_layers : 1); l++)
            if (role->is_matrix && found[r][l] && is_blocks(found[r][l]->type))
                floats += lined_floats((size_t)rows * (size_t)cols / (size_t)group[r]) *
                          (has_offsets(found[r][l]->type) ? 2 : 1);
    }
    /* a tensor no role takes would change what llama.cpp computes (a bias, RoPE's frequency
     * factors, a block past the header's count: llama.cpp refuses the last as a wrong
     * number of tensors): refused, not ignored */
    for (size_t i = 0; i < g.n_tensors; i++) {
        const GgufTensor *t = &g.tensors[i];
        size_t at = 4;
        long block = 0;
        if (read[i]) continue;
        char name[SHOWN_CAP];
        shown(name, t->name, t->name_len, 60);
        if (t->name_len > at && memcmp(t->name, "blk.", at) == 0)
            for (; at < t->name_len && t->name[at] >= '0' && t->name[at] <= '9' &&
                   block <= INT_MAX; at++)
                block = block * 10 + (t->name[at] - '0');
        if (at > 4 && block >= c->n_layers)
            fprintf(stderr, "model: %s: tensor %s of a block the header does not count (got "
                    "block %ld, expected below %s.block_count, %d)\n", path, name, block,
                    a->name, c->n_layers);
        else
            fprintf(stderr, "model: %s: tensor %s is not supported (expected only the %s "
                    "architecture's tensors this engine computes with)\n", path, name, a->name);
        goto fail;
    }
    free(read);
    read = NULL;
    /* one block: the per-layer views, then the floats, then the int8 values */
    size_t n_parts = (size_t)a->n_roles * (size_t)c->n_layers;
    size_t parts_bytes = lined_bytes(n_parts * sizeof(CheckpointPart));
    /* os_alloc_zeroed: a model's worth of pages, written once now (2 MiB pages where the
     * system gives them: 4 KiB ones cost a fault each, half the load of a 110M model) */
    ck->owned = os_alloc_zeroed(1, parts_bytes + floats * sizeof(float) + bytes);
    ck->weights.layers = calloc((size_t)c->n_layers, sizeof *ck->weights.layers);
    if (!ck->owned || !ck->weights.layers) {
        fprintf(stderr, "model: %s: out of memory for %zu converted floats and %zu bytes\n",
                path, floats, bytes);
        goto fail;
    }
    CheckpointPart *parts = ck->owned;
    float *f = (float *)(void *)((unsigned char *)ck->owned + parts_bytes);
    int8_t *q = (int8_t *)(f + floats);
    const int8_t *const q_first = q;   /* where the floats end and the int8 values start */
    int in_map = 0;                    /* 1 once a matrix is used from the file's map */
    for (int r = 0; r < a->n_roles; r++) {
        const Role *role = &a->roles[r];
        if (!found[r][0]) continue;   /* optional and absent (output.weight: tied) */
        int layers = role->layered ? c->n_layers : 1, rows, cols;
        role_shape(role, c, &rows, &cols);
        CheckpointTensor *ten = &ck->tensors[role->role];
        *ten = (CheckpointTensor){.present = 1, .is_matrix = role->is_matrix, .layers = layers,
                                  .rows = rows, .cols = cols, .parts = parts};
        size_t numel = (size_t)rows * (size_t)cols;
        for (int l = 0; l < layers; l++) {
            const GgufTensor *t = found[r][l];
            CheckpointPart *p = &parts[l];
            *p = (CheckpointPart){NULL, NULL, NULL, NULL, NULL};   /* the block is not zeroed */
            if (t->type == GGUF_F16 && role->is_matrix) {
                if ((g.data_offset + t->offset) % sizeof(uint16_t) == 0) {
                    p->f16 = (const uint16_t *)(const void *)t->data;   /* mapped, in place */
                    in_map = 1;
                } else {
                    memcpy(f, t->data, numel * sizeof(uint16_t));
                    p->f16 = (const uint16_t *)(void *)f;
                    f += lined_floats((numel + 1) / 2);
                }
            } else if (is_blocks(t->type) && role->is_matrix) {
                size_t groups = numel / (size_t)group[r];
                float *offset = has_offsets(t->type) ? f + lined_floats(groups) : NULL;
                p->q = q;
                p->scale = f;
                p->offset = offset;
                if (repack_blocks(q, f, offset, t, numel, group[r], path) != 0) goto fail;
                q += lined_bytes(numel);
                f += lined_floats(groups) * (offset ? 2 : 1);
            } else if (t->type == GGUF_F32 && role->is_matrix &&
                       (g.data_offset + t->offset) % sizeof(float) == 0) {
                p->f32 = (const float *)(const void *)t->data;   /* mapped, in place */
                in_map = 1;
            } else {
                if (t->type == GGUF_F32) memcpy(f, t->data, numel * sizeof(float));
                else if (is_blocks(t->type)) dequantize_blocks(f, t, numel);
                else widen(f, t, numel);
                p->f32 = f;
                f += lined_floats(numel);
            }
            int in_place = (const void *)p->f32 == t->data || (const void *)p->f16 == t->data;
            if (!g.own && !in_place) os_drop_mapped(t->data, t->bytes);   /* converted */
        }
        /* every layer of a role has one form (fp32, halves or int8 groups: the block
         * types may mix, as llama.cpp allows): a file that mixes forms is refused */
        for (int l = 1; l < layers; l++) {
            if ((parts[l].f32 != NULL) != (parts[0].f32 != NULL) ||
                (parts[l].f16 != NULL) != (parts[0].f16 != NULL)) {
                char name[64];
                snprintf(name, sizeof name, role->name, l);   /* blk.%d...: a found name */
                fprintf(stderr, "model: %s: tensor %s is %s where layer 0's is %s (expected "
                        "one form in every layer: fp32, halves or int8 blocks)\n", path, name,
                        TYPES[found[r][l]->type].name, TYPES[found[r][0]->type].name);
                goto fail;
            }
        }
        ten->f32 = parts[0].f32;
        ten->f16 = parts[0].f16;
        ten->q = parts[0].q;
        ten->scale = parts[0].scale;
        ten->group = group[r];
        parts += layers;
    }
    /* exactly what was counted was written: a miscount would put one role's scales over
     * another's int8 values inside the block, where no sanitizer sees it */
    if ((const int8_t *)(const void *)f != q_first || q != q_first + bytes) {
        fprintf(stderr, "model: %s: internal error: the converted tensors do not fill the "
                "%zu floats and %zu bytes counted for them\n", path, floats, bytes);
        goto fail;
    }
    /* the map stays where F32 or F16 matrices are used from it (gguf_close must not unmap
     * it); a file whose matrices all converted is released (gguf_close, below): the model
     * then holds its converted copy alone */
    if (in_map) {
        ck->map = g.map;
        ck->map_size = g.size;
        g.map = NULL;
    }
    ck->gguf = 1;
    /* what the load line says: the architecture, then the types found */
    static const uint32_t INT8_TYPES[] = {GGUF_Q4_0, GGUF_Q4_1, GGUF_Q5_0, GGUF_Q5_1, GGUF_Q8_0,
                                          GGUF_Q2_K, GGUF_Q3_K, GGUF_Q4_K, GGUF_Q5_K,
                                          GGUF_Q6_K, GGUF_IQ4_NL, GGUF_IQ4_XS, GGUF_TQ1_0,
                                          GGUF_TQ2_0};
    int n_int8 = 0, listed = 0;
    char names[128] = "";   /* "Q4_0", "Q4_0 and Q6_K", "Q4_0, Q5_0 and Q8_0", ... */
    enum { N_INT8 = sizeof INT8_TYPES / sizeof INT8_TYPES[0] };
    for (int i = 0; i < N_INT8; i++) n_int8 += blocks[INT8_TYPES[i]];
    for (int i = 0; i < N_INT8; i++) {
        if (!blocks[INT8_TYPES[i]]) continue;
        size_t at = strlen(names);
        snprintf(names + at, sizeof names - at, "%s%s",
                 listed == 0 ? "" : listed == n_int8 - 1 ? " and " : ", ",
                 TYPES[INT8_TYPES[i]].name);
        listed++;
    }
    if (n_int8 > 0) {
        snprintf(ck->format, sizeof ck->format, "GGUF %s, %s %s", a->name, names,
                 f16 || bf16 ? "(int8) with F16 or BF16" : "(computed in int8)");
    } else {
        snprintf(ck->format, sizeof ck->format, "GGUF %s, %s", a->name,
                 f16 ? "F16 (matrices kept as halves)" : bf16 ? "BF16 (widened to fp32 at load)"
                                                        : "F32");
    }
    gguf_close(&g);
    return 0;
fail:
    free(read);
    gguf_close(&g);
    checkpoint_free(ck);
    return -1;
}

/* ------------------------------------------------------------------------- */
/* The tokenizer                                                               */

#define SPM_SPACE "\xe2\x96\x81"   /* U+2581, SentencePiece's visible space */

/* The id at key (a token id below V), -1 if absent (or fallback, where it is below V), or
 * -2 on an error. */
static int token_id(const GgufFile *g, const char *key, int vocab, int fallback) {
    const GgufValue *v = gguf_find(g, key);
    if (!v) return fallback < vocab ? fallback : -1;
    long long id;
    if (v->type == GGUF_UINT32 && get_u32(v->value) == UINT32_MAX) return -1;   /* "none" */
    if (get_int(g, key, 0, vocab - 1, 0, &id) != 0) return -2;
    return (int)id;
}

/* A bool at key, or fallback if absent; -1 on the wrong type. */
static int get_bool(const GgufFile *g, const char *key, int fallback) {
    const GgufValue *v = gguf_find(g, key);
    if (!v) return fallback;
    if (v->type != GGUF_BOOL) {
        fprintf(stderr, "tokenizer: %s: metadata %s has the wrong type (got %s, expected "
                "bool)\n", g->path, key, value_type_name(v->type));
        return -1;
    }
    return v->value[0];
}

/* GPT-2's bytes_to_unicode: the code point byte b is written as in a gpt2 vocabulary. */
static unsigned gpt2_code_point(int b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (unsigned)b;
    unsigned n = 0;   /* the others get 256, 257, ... in byte order */
    for (int x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF)))
            n++;
    return 256 + n;
}

/* Converts a token's text into its bytes at out (at most len bytes): SentencePiece's
 * U+2581 becomes a space (llama), or each character maps back to its byte (gpt2). Returns
 * the byte count, or -1 if a gpt2 token has a character that is no byte's. */
static long token_bytes(unsigned char *out, const unsigned char *s, size_t len, int gpt2,
                        const int *byte_of) {
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        if (!gpt2) {
            if (len - i >= 3 && memcmp(s + i, SPM_SPACE, 3) == 0) {
                out[n++] = ' ';
                i += 3;
            } else {
                out[n++] = s[i++];
            }
            continue;
        }
        unsigned cp;
        size_t w;
        if (s[i] < 0x80) cp = s[i], w = 1;
        else if ((s[i] & 0xE0) == 0xC0 && len - i >= 2)
            cp = (s[i] & 0x1Fu) << 6 | (s[i + 1] & 0x3Fu), w = 2;
        else return -1;
        if (cp >= 512 || byte_of[cp] < 0) return -1;
        out[n++] = (unsigned char)byte_of[cp];
        i += w;
    }
    return (long)n;
}

/* The texts of the tokens llama.cpp ends a generation at whatever their type (which it
 * then takes as control): its list of end-of-turn tokens. */
static const char *const END_TEXTS[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                        "<|endoftext|>", "<|eom_id|>", "<EOT>", NULL};

/* The tokens llama.cpp finds by their text where the file's key names none (its
 * vocabulary loader's workaround for files converted without them), the lowest id where
 * several match: each one found so is taken as control; those that end a generation do
 * (found so or named by the key). */
#define FULL_BAR "\xef\xbd\x9c"   /* U+FF5C, the bar of DeepSeek's special tokens */
static const struct {
    const char *key, *old_key;   /* tokenizer.ggml.KEY_token_id, and a former name or NULL */
    const char *texts[8];        /* NULL-terminated */
    int ends;
} FOUND_BY_TEXT[] = {
    {"eot", NULL, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                   "<EOT>", "<" FULL_BAR "end" SPM_SPACE "of" SPM_SPACE "sentence" FULL_BAR ">",
                   NULL}, 1},
    {"eom", NULL, {"<|eom_id|>", NULL}, 1},
    {"fim_pre", "prefix", {"<|fim_prefix|>", "<fim-prefix>",
                           "<" FULL_BAR "fim" SPM_SPACE "begin" FULL_BAR ">", "<PRE>", NULL}, 0},
    {"fim_suf", "suffix", {"<|fim_suffix|>", "<fim-suffix>",
                           "<" FULL_BAR "fim" SPM_SPACE "hole" FULL_BAR ">", "<SUF>", NULL}, 0},
    {"fim_mid", "middle", {"<|fim_middle|>", "<fim-middle>",
                           "<" FULL_BAR "fim" SPM_SPACE "end" FULL_BAR ">", "<MID>", NULL}, 0},
    {"fim_pad", NULL, {"<|fim_pad|>", "<fim-pad>", "<PAD>", NULL}, 1},
    {"fim_rep", NULL, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", NULL}, 1},
    {"fim_sep", NULL, {"<|file_sep|>", NULL}, 1},
};
enum { N_FOUND_BY_TEXT = sizeof FOUND_BY_TEXT / sizeof FOUND_BY_TEXT[0] };

/* 1 if the text s (n bytes, as the file writes it) is one of texts (NULL-terminated). */
static int text_in(const unsigned char *s, size_t n, const char *const *texts) {
    for (; *texts; texts++)
        if (strlen(*texts) == n && memcmp(s, *texts, n) == 0) return 1;
    return 0;
}

int gguf_load_tokenizer(Tokenizer *t, const char *path) {
    memset(t, 0, sizeof *t);
    GgufFile g;
    if (gguf_open(&g, path, "tokenizer", 0) != 0) return -1;   /* its metadata alone */
    unsigned char *bytes = NULL;
    size_t *offset = NULL;
    float *scores = NULL;
    unsigned char *type = NULL;   /* (V,) each token's type as llama.cpp takes it (0: other) */
    unsigned char *silent = NULL, *ends = NULL;   /* (V,) and special: from type */
    int32_t *special = NULL;
    int n_special = 0;
    int32_t *triples = NULL;   /* (merges, 3): gpt2's merges as left, right and made ids */
    int status = -1;
    size_t len, pre_len = 0;
    const char *model = get_string(&g, "tokenizer.ggml.model", &len, 1, "tokenizer");
    const char *pre = get_string(&g, "tokenizer.ggml.pre", &pre_len, 0, "tokenizer");
    int gpt2 = string_is(model, len, "gpt2");
    if (!model) goto done;
    if (!gpt2 && !string_is(model, len, "llama")) {
        char text[SHOWN_CAP];
        fprintf(stderr, "tokenizer: %s: tokenizer.ggml.model %s is not supported (expected "
                "llama or gpt2)\n", path, shown(text, model, len, 40));
        goto done;
    }
    /* gpt2: GPT-2's regex, smollm's (every number character alone first), Qwen2's or Llama
     * 3's (each under the names llama.cpp gives it) */
    TokenizerPre pre_kind = TOKENIZER_PRE_GPT2;
    if (gpt2 && pre && string_is(pre, pre_len, "smollm")) pre_kind = TOKENIZER_PRE_SMOLLM;
    if (gpt2 && pre && (string_is(pre, pre_len, "qwen2") ||
                        string_is(pre, pre_len, "deepseek-r1-qwen") ||
                        string_is(pre, pre_len, "megrez")))
        pre_kind = TOKENIZER_PRE_QWEN2;
    if (gpt2 && pre && (string_is(pre, pre_len, "llama-bpe") || string_is(pre, pre_len, "llama3") ||
                        string_is(pre, pre_len, "llama-v3") || string_is(pre, pre_len, "falcon3")))
        pre_kind = TOKENIZER_PRE_LLAMA3;
    if (pre && pre_kind == TOKENIZER_PRE_GPT2 &&
        !(gpt2 ? string_is(pre, pre_len, "gpt-2") : string_is(pre, pre_len, "default"))) {
        char text[SHOWN_CAP];
        fprintf(stderr, "tokenizer: %s: pre-tokenizer %s is not supported (expected %s)\n",
                path, shown(text, pre, pre_len, 40),
                gpt2 ? "gpt-2, smollm, qwen2 or llama-bpe" : "default");
        goto done;
    }
    const GgufValue *tokens = gguf_find(&g, "tokenizer.ggml.tokens");
    const GgufValue *sc = gguf_find(&g, "tokenizer.ggml.scores");
    const GgufValue *merges = gguf_find(&g, "tokenizer.ggml.merges");
    const GgufValue *types = gguf_find(&g, "tokenizer.ggml.token_type");
    if (!tokens || tokens->type != GGUF_ARRAY || tokens->item_type != GGUF_STRING ||
        tokens->count < 1 || tokens->count > TOKENIZER_MAX_VOCAB) {
        fprintf(stderr, "tokenizer: %s: tokenizer.ggml.tokens %s (expected an array of 1..%d "
                "strings)\n", path, tokens ? "has the wrong type or length" : "missing",
                TOKENIZER_MAX_VOCAB);
        goto done;
    }
    size_t V = (size_t)tokens->count;
    if (!gpt2 && (!sc || sc->type != GGUF_ARRAY || sc->item_type != GGUF_FLOAT32 ||
                  sc->count != V)) {
        fprintf(stderr, "tokenizer: %s: tokenizer.ggml.scores %s (expected %zu float32, one "
                "per token)\n", path, sc ? "has the wrong type or length" : "missing", V);
        goto done;
    }
    if (types && (types->type != GGUF_ARRAY || types->item_type != GGUF_INT32 ||
                  types->count != V)) {
        fprintf(stderr, "tokenizer: %s: tokenizer.ggml.token_type has the wrong type or length "
                "(expected %zu int32, one per token)\n", path, V);
        goto done;
    }
    if (gpt2 && (!merges || merges->type != GGUF_ARRAY || merges->item_type != GGUF_STRING)) {
        fprintf(stderr, "tokenizer: %s: tokenizer.ggml.merges %s (expected an array of "
                "strings)\n", path, merges ? "has the wrong type" : "missing");
        goto done;
    }
    int byte_of[512];   /* gpt2: the byte each of the code points 0..511 stands for */
    for (int i = 0; i < 512; i++) byte_of[i] = -1;
    for (int b = 0; b < 256; b++) byte_of[gpt2_code_point(b)] = b;
    /* the token texts take at most their bytes in the file (both conversions shrink) */
    size_t total = 0;
    const unsigned char *p = tokens->value;
    for (size_t i = 0; i < V; i++) {
        size_t n = (size_t)get_u64(p);
        total += n;
        p += 8 + n;
    }
    bytes = malloc(total ? total : 1);
    offset = malloc((V + 1) * sizeof *offset);
    scores = gpt2 ? NULL : malloc(V * sizeof *scores);
    type = malloc(V);
    silent = malloc(V);
    ends = calloc(V, 1);
    special = malloc(V * sizeof *special);
    if (!bytes || !offset || (!gpt2 && !scores) || !type || !silent ||
        !ends || !special) {
        fprintf(stderr, "tokenizer: %s: out of memory for %zu tokens\n", path, V);
        goto done;
    }
    /* the tokens the keys name, or -1 (found by their text below) */
    int found[N_FOUND_BY_TEXT];
    for (int r = 0; r < N_FOUND_BY_TEXT; r++) {
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", FOUND_BY_TEXT[r].key);
        found[r] = token_id(&g, key, (int)V, -1);
        if (found[r] == -1 && FOUND_BY_TEXT[r].old_key) {
            snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", FOUND_BY_TEXT[r].old_key);
            found[r] = token_id(&g, key, (int)V, -1);
        }
        if (found[r] == -2) goto done;
    }
    p = tokens->value;
    size_t at = 0;
    for (size_t i = 0; i < V; i++) {
        size_t n = (size_t)get_u64(p);
        int32_t value = 1;   /* normal, where the file gives no types */
        if (types) memcpy(&value, types->value + 4 * i, sizeof value);
        type[i] = value >= 1 && value <= 6 ? (unsigned char)value : 0;
        /* gpt2: an unknown, control or user-defined token is its text itself, not in GPT-2's
         * byte spelling (llama.cpp matches and prints those as they are) */
        int literal = gpt2 && type[i] >= 2 && type[i] <= 4;
        long got = literal ? (long)n : token_bytes(bytes + at, p + 8, n, gpt2, byte_of);
        if (literal) memcpy(bytes + at, p + 8, n);
        if (got < 0) {
            fprintf(stderr, "tokenizer: %s: token %zu (type %d) is not in GPT-2's byte encoding "
                    "(expected unknown, control and user-defined tokens only as text)\n", path,
                    i, (int)value);
            goto done;
        }
        if (text_in(p + 8, n, END_TEXTS)) {   /* control and an end, whatever its type */
            type[i] = 3;
            ends[i] = 1;
        }
        for (int r = 0; r < N_FOUND_BY_TEXT; r++)
            if (found[r] < 0 && text_in(p + 8, n, FOUND_BY_TEXT[r].texts)) {
                found[r] = (int)i;
                type[i] = 3;
            }
        offset[i] = at;
        at += (size_t)got;
        p += 8 + n;
        if (!gpt2) {
            memcpy(&scores[i], sc->value + 4 * i, sizeof(float));
            if (!isfinite(scores[i])) {
                fprintf(stderr, "tokenizer: %s: score of token %zu is not finite (got %g)\n",
                        path, i, (double)scores[i]);
                goto done;
            }
        }
    }
    offset[V] = at;
    int bos = token_id(&g, "tokenizer.ggml.bos_token_id", (int)V, gpt2 ? -1 : TOKENIZER_LLAMA_BOS);
    int eos = token_id(&g, "tokenizer.ggml.eos_token_id", (int)V, gpt2 ? -1 : TOKENIZER_LLAMA_EOS);
    /* llama.cpp's defaults: a BOS for SentencePiece and Llama 3's vocabularies */
    int add_bos = get_bool(&g, "tokenizer.ggml.add_bos_token",
                           !gpt2 || pre_kind == TOKENIZER_PRE_LLAMA3);
    int add_space = get_bool(&g, "tokenizer.ggml.add_space_prefix", !gpt2);
    if (bos == -2 || eos == -2 || add_bos < 0 || add_space < 0) goto done;
    for (int r = 0; r < N_FOUND_BY_TEXT; r++)
        if (found[r] >= 0 && FOUND_BY_TEXT[r].ends) ends[found[r]] = 1;
    /* llama-cli prints only normal and user-defined tokens (and a SentencePiece vocabulary's
     * byte tokens), and reads unknown, control and user-defined ones written in a prompt as
     * themselves */
    for (size_t i = 0; i < V; i++) {
        silent[i] = type[i] != 1 && type[i] != 4 && (gpt2 || type[i] != 6);
        if (type[i] >= 2 && type[i] <= 4) special[n_special++] = (int32_t)i;
    }
    if (eos < 0 || (add_bos && bos < 0)) {
        fprintf(stderr, "tokenizer: %s: no %s token id (expected tokenizer.ggml.%s_token_id)\n",
                path, eos < 0 ? "end" : "beginning", eos < 0 ? "eos" : "bos");
        goto done;
    }
    TokenizerVocab v = {gpt2 ? TOKENIZER_GPT2 : TOKENIZER_LLAMA, (int)V, bytes, offset, scores,
                        bos, eos, add_bos, add_space, silent, ends, special, n_special,
                        pre_kind, NULL, 0};
    if (gpt2) {   /* the merges as id triples (the tokenizer ranks the pairs by them) */
        Tokenizer plain;
        if (tokenizer_init(&plain, &v, path) != 0) goto done;
        const unsigned char *m = merges->value;
        unsigned char *merged = malloc(total ? total : 1);   /* a merge spells one token */
        size_t n_triples = merges->count < INT32_MAX ? (size_t)merges->count : INT32_MAX;
        triples = malloc((n_triples ? n_triples : 1) * 3 * sizeof *triples);
        if (!merged || !triples) {
            fprintf(stderr, "tokenizer: %s: out of memory for the merges\n", path);
            tokenizer_free(&plain);
            goto done;
        }
        for (uint64_t k = 0; k < merges->count && k < INT32_MAX; k++) {
            size_t n = (size_t)get_u64(m), space = 1;
            const unsigned char *s = m + 8;
            m += 8 + n;
            while (space < n && s[space] != ' ') space++;   /* llama.cpp: find(' ', 1) */
            if (space >= n) {
                char text[SHOWN_CAP];
                fprintf(stderr, "tokenizer: %s: merge %llu is not two tokens and a space (got "
                        "\"%s\", expected \"A B\")\n", path, (unsigned long long)k,
                        shown(text, (const char *)s, n, 40));
                free(merged);
                tokenizer_free(&plain);
                goto done;
            }
            if (n - 1 > total) continue;   /* longer than any token's bytes: no token's */
            long a = token_bytes(merged, s, space, 1, byte_of);
            long b = a < 0 ? -1 : token_bytes(merged + a, s + space + 1, n - space - 1, 1, byte_of);
            if (b < 0) continue;
            int id = tokenizer_find_id(&plain, merged, (size_t)(a + b));
            int left = tokenizer_find_id(&plain, merged, (size_t)a);
            int right = tokenizer_find_id(&plain, merged + a, (size_t)b);
            if (id < 0 || left < 0 || right < 0) continue;   /* (llama.cpp's would make no token) */
            int32_t *triple = triples + 3 * (size_t)v.n_merges++;
            triple[0] = left;
            triple[1] = right;
            triple[2] = id;
        }
        free(merged);
        tokenizer_free(&plain);
        v.merges = triples;
    }
    status = tokenizer_init(t, &v, path);
done:
    free(bytes);
    free(offset);
    free(scores);
    free(triples);
    free(type);
    free(silent);
    free(ends);
    free(special);
    gguf_close(&g);
    if (status != 0) tokenizer_free(t);
    return status;
}

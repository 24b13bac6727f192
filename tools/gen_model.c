/* gen_model.c: writes a random-weight checkpoint of a given shape, for `make bench` (and
 * the models of tests/data/gguf_llama, through llama.cpp's converter).
 *
 * Speed depends on shapes, not on trained values, so this lets the benchmark measure
 * models we have no weights for. Three formats (README "File formats"): llama2.c version 1
 * ("ak42", fp32), its legacy layout (--legacy: what llama.cpp's convert-llama2c-to-ggml
 * reads) and llm.c's GPT-2 checkpoint (version 3, fp32). Matrices are uniform with
 * standard deviation GEN_STD from a seeded splitmix64 stream (same seed, same bytes), norm
 * weights 1, biases 0. Tensors stream through a fixed buffer, so a 440 MB file needs only
 * GEN_BUF_FLOATS of memory. Usage: gen_model PRESET OUT.bin [options]; see usage().
 */
#include <stddef.h>    /* offsetof, size_t */
#include <stdint.h>    /* uint32_t, uint64_t */
#include <stdio.h>     /* FILE, fopen, fwrite, fprintf */
#include <stdlib.h>    /* malloc, free, exit */
#include <string.h>    /* strcmp, memset */

#include "cli.h"       /* cli_parse_int, cli_parse_u64: strict flag values */

/* ---- file formats ---- */
#define GEN_LLAMA_MAGIC 0x616b3432u    /* llama2.c versioned files: "ak42" as LE uint32 */
#define GEN_LLAMA_VERSION 1            /* llama2.c version 1: fp32 weights */
#define GEN_LLAMA_HEADER_BYTES 256     /* magic, version, 7 fields, flag byte, zero padding */
#define GEN_GPT2_MAGIC 20240326        /* llm.c checkpoint magic (a date: 2024-03-26) */
#define GEN_GPT2_VERSION 3             /* llm.c version 3: fp32 parameters */
#define GEN_GPT2_HEADER_INTS 256       /* llm.c header: 256 LE int32, unused ones 0 */
#define GEN_GPT2_VOCAB_ALIGN 128       /* llm.c pads the vocab Vp to a multiple of 128 */
#define GEN_GPT2_MLP_MULT 4            /* GPT-2's MLP is 4C wide */

/* ---- generation ---- */
#define GEN_DEFAULT_SEED 42ULL         /* fixed, so the files are reproducible */
#define GEN_STD 0.02f                  /* weight std, GPT-2's initialisation */
#define GEN_SQRT3 1.7320508f           /* uniform on [-a, a] has std a / sqrt(3) */
#define GEN_FLOAT_BITS 24              /* random bits per weight: a float's mantissa */
#define SPLITMIX_GAMMA 0x9e3779b97f4a7c15ULL  /* splitmix64's increment (golden ratio) */
#define SPLITMIX_MUL1 0xbf58476d1ce4e5b9ULL   /* splitmix64's two finalizer multipliers */
#define SPLITMIX_MUL2 0x94d049bb133111ebULL
#define GEN_BUF_FLOATS (1 << 18)       /* streaming buffer: 1 MiB of floats */
#define GEN_MAX_DIM (1 << 16)          /* bound on widths (dim, hidden_dim) */
#define GEN_MAX_LAYERS 1024            /* bound on layers and heads */
#define GEN_MAX_VOCAB (1 << 21)        /* bound on the vocabulary */
#define GEN_MAX_SEQ_LEN (1 << 20)      /* bound on the context */
#define GEN_TMP_SUFFIX ".tmp"          /* written there, renamed to OUT when complete */

typedef enum { GEN_LLAMA, GEN_GPT2 } Family;

/* A model shape. For GPT-2, hidden_dim is 4 * dim and n_kv_heads = n_heads. */
typedef struct {
    const char *name;   /* preset name on the command line */
    Family family;      /* file format */
    int dim;            /* C, model width */
    int hidden_dim;     /* Hd, MLP hidden width */
    int n_layers;       /* L */
    int n_heads;        /* NH */
    int n_kv_heads;     /* NKV (Llama grouped-query attention) */
    int vocab_size;     /* V */
    int seq_len;        /* S, context */
    int shared;         /* Llama: 1 if the classifier is the token embedding */
    int legacy;         /* Llama: 1 for llama2.c's legacy layout (write_llama_legacy) */
} Shape;

/* The presets of `make bench` (llama2.c's stories models; GPT-2 small). */
static const Shape presets[] = {
    {"s260k", GEN_LLAMA, 64, 172, 5, 8, 4, 512, 512, 1, 0},
    {"s15m", GEN_LLAMA, 288, 768, 6, 6, 6, 32000, 1024, 1, 0},
    {"s110m", GEN_LLAMA, 768, 2048, 12, 12, 12, 32000, 1024, 1, 0},
    {"gpt2-124m", GEN_GPT2, 768, 3072, 12, 12, 12, 50257, 1024, 1, 0},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

/* ---- output: a FILE with its path (for messages) and a streaming buffer ---- */
typedef struct {
    FILE *f;             /* open for writing */
    char *path;          /* owned: the temporary file (OUT.bin.tmp), removed on failure */
    float *buf;          /* owned: (GEN_BUF_FLOATS,) staging buffer */
    uint64_t rng;        /* splitmix64 state */
    size_t floats;       /* floats written so far */
} Writer;

/* Prints a message, removes the partial temporary file, exits 1. Never returns. */
static void fail(Writer *w, const char *what) {
    fprintf(stderr, "gen_model: %s: %s\n", w->path, what);
    if (w->f) fclose(w->f);
    remove(w->path);
    free(w->path);
    free(w->buf);
    exit(1);
}

/* splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", 2014;
 * shifts and multipliers as published): the next 64 random bits of state *s. */
static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += SPLITMIX_GAMMA);
    z = (z ^ (z >> 30)) * SPLITMIX_MUL1;
    z = (z ^ (z >> 27)) * SPLITMIX_MUL2;
    return z ^ (z >> 31);
}

/* A uniform float on [-a, a) with a = GEN_STD * sqrt(3), i.e. standard deviation GEN_STD. */
static float uniform_weight(uint64_t *s) {
    const float a = GEN_STD * GEN_SQRT3;
    float u = (float)(splitmix64(s) >> (64 - GEN_FLOAT_BITS)) /
              (float)(1UL << GEN_FLOAT_BITS);                     /* [0, 1) */
    return a * (2.0f * u - 1.0f);
}

/* Writes n bytes or fails. */
static void write_bytes(Writer *w, const void *data, size_t n) {
    if (fwrite(data, 1, n, w->f) != n) fail(w, "write failed (disk full?)");
}

/* Stores v as 4 little-endian bytes at p. */
static void put_le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

typedef enum { FILL_RANDOM, FILL_ONES, FILL_ZEROS } Fill;

/* Streams n fp32 values of the given fill to the file through the buffer. */
static void write_tensor(Writer *w, size_t n, Fill fill) {
    while (n > 0) {
        size_t chunk = n < GEN_BUF_FLOATS ? n : GEN_BUF_FLOATS;
        for (size_t i = 0; i < chunk; i++)
            w->buf[i] = fill == FILL_RANDOM ? uniform_weight(&w->rng)
                      : fill == FILL_ONES ? 1.0f : 0.0f;
        write_bytes(w, w->buf, chunk * sizeof(float));
        w->floats += chunk;
        n -= chunk;
    }
}

/* ---- the two layouts ---- */

/* llama2.c version 1: 256-byte header, then rms_att (L, C), rms_ffn (L, C), rms_final (C,),
 * token_embedding (V, C), wq (L, C, C), wk (L, KVD, C), wv (L, KVD, C), wo (L, C, C),
 * w1 (L, Hd, C), w2 (L, C, Hd), w3 (L, Hd, C), [classifier (V, C) when not shared]. */
static void write_llama(Writer *w, const Shape *s) {
    /* magic, version, then llama2.c's 7 config fields; the uint8 flag follows them */
    const uint32_t fields[] = {GEN_LLAMA_MAGIC, GEN_LLAMA_VERSION, (uint32_t)s->dim,
                               (uint32_t)s->hidden_dim, (uint32_t)s->n_layers,
                               (uint32_t)s->n_heads, (uint32_t)s->n_kv_heads,
                               (uint32_t)s->vocab_size, (uint32_t)s->seq_len};
    const size_t n_fields = sizeof fields / sizeof fields[0];
    unsigned char header[GEN_LLAMA_HEADER_BYTES];
    memset(header, 0, sizeof header);
    for (size_t i = 0; i < n_fields; i++) put_le32(header + 4 * i, fields[i]);
    header[4 * n_fields] = (unsigned char)s->shared;
    write_bytes(w, header, sizeof header);

    size_t C = (size_t)s->dim, Hd = (size_t)s->hidden_dim, L = (size_t)s->n_layers;
    size_t V = (size_t)s->vocab_size, KVD = (size_t)s->n_kv_heads * C / (size_t)s->n_heads;
    write_tensor(w, L * C, FILL_ONES);         /* rms_att (L, C) */
    write_tensor(w, L * C, FILL_ONES);         /* rms_ffn (L, C) */
    write_tensor(w, C, FILL_ONES);             /* rms_final (C,) */
    write_tensor(w, V * C, FILL_RANDOM);       /* token_embedding (V, C) */
    write_tensor(w, L * C * C, FILL_RANDOM);   /* wq (L, C, C) */
    write_tensor(w, L * KVD * C, FILL_RANDOM); /* wk (L, KVD, C) */
    write_tensor(w, L * KVD * C, FILL_RANDOM); /* wv (L, KVD, C) */
    write_tensor(w, L * C * C, FILL_RANDOM);   /* wo (L, C, C) */
    write_tensor(w, L * Hd * C, FILL_RANDOM);  /* w1 (L, Hd, C) */
    write_tensor(w, L * C * Hd, FILL_RANDOM);  /* w2 (L, C, Hd) */
    write_tensor(w, L * Hd * C, FILL_RANDOM);  /* w3 (L, Hd, C) */
    if (!s->shared) write_tensor(w, V * C, FILL_RANDOM);   /* classifier (V, C) */
}

/* llama2.c's legacy layout (its first run.c's, which llama.cpp's convert-llama2c-to-ggml
 * reads): 7 int32 (dim, hidden, layers, heads, kv heads, vocab (negative when the
 * classifier is not shared), seq_len), then token_embedding (V, C), rms_att (L, C),
 * wq (L, C, C), wk (L, KVD, C), wv (L, KVD, C), wo (L, C, C), rms_ffn (L, C),
 * w1 (L, Hd, C), w2 (L, C, Hd), w3 (L, Hd, C), rms_final (C,), freq_cis_real and
 * freq_cis_imag (S, HS / 2) each (zeros: readers compute RoPE's angles themselves),
 * [classifier (V, C) when not shared]. The same shape as write_llama's, other weights (the
 * random stream is drawn in this order). */
static void write_llama_legacy(Writer *w, const Shape *s) {
    const int32_t fields[] = {s->dim, s->hidden_dim, s->n_layers, s->n_heads, s->n_kv_heads,
                              s->shared ? s->vocab_size : -s->vocab_size, s->seq_len};
    unsigned char header[sizeof fields];
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        put_le32(header + 4 * i, (uint32_t)fields[i]);
    write_bytes(w, header, sizeof header);

    size_t C = (size_t)s->dim, Hd = (size_t)s->hidden_dim, L = (size_t)s->n_layers;
    size_t V = (size_t)s->vocab_size, KVD = (size_t)s->n_kv_heads * C / (size_t)s->n_heads;
    size_t HS = C / (size_t)s->n_heads, S = (size_t)s->seq_len;
    write_tensor(w, V * C, FILL_RANDOM);       /* token_embedding (V, C) */
    write_tensor(w, L * C, FILL_ONES);         /* rms_att (L, C) */
    write_tensor(w, L * C * C, FILL_RANDOM);   /* wq (L, C, C) */
    write_tensor(w, L * KVD * C, FILL_RANDOM); /* wk (L, KVD, C) */
    write_tensor(w, L * KVD * C, FILL_RANDOM); /* wv (L, KVD, C) */
    write_tensor(w, L * C * C, FILL_RANDOM);   /* wo (L, C, C) */
    write_tensor(w, L * C, FILL_ONES);         /* rms_ffn (L, C) */
    write_tensor(w, L * Hd * C, FILL_RANDOM);  /* w1 (L, Hd, C) */
    write_tensor(w, L * C * Hd, FILL_RANDOM);  /* w2 (L, C, Hd) */
    write_tensor(w, L * Hd * C, FILL_RANDOM);  /* w3 (L, Hd, C) */
    write_tensor(w, C, FILL_ONES);             /* rms_final (C,) */
    write_tensor(w, 2 * S * (HS / 2), FILL_ZEROS);   /* freq_cis_real, freq_cis_imag */
    if (!s->shared) write_tensor(w, V * C, FILL_RANDOM);   /* classifier (V, C) */
}

/* llm.c GPT-2 version 3: 256 int32 header, then in llm.c's order wte (Vp, C) (rows V..Vp-1
 * zero, as llm.c pads), wpe (S, C), ln1w (L, C), ln1b (L, C), qkvw (L, 3C, C), qkvb (L, 3C),
 * attprojw (L, C, C), attprojb (L, C), ln2w (L, C), ln2b (L, C), fcw (L, 4C, C), fcb (L, 4C),
 * fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C,), lnfb (C,). */
static void write_gpt2(Writer *w, const Shape *s) {
    size_t C = (size_t)s->dim, L = (size_t)s->n_layers, V = (size_t)s->vocab_size;
    size_t S = (size_t)s->seq_len, H4 = (size_t)GEN_GPT2_MLP_MULT * C;
    size_t Vp = (V + GEN_GPT2_VOCAB_ALIGN - 1) / GEN_GPT2_VOCAB_ALIGN * GEN_GPT2_VOCAB_ALIGN;
    /* header slots [0..7]: magic, version, maxT, V, L, NH, C, Vp */
    const uint32_t fields[] = {GEN_GPT2_MAGIC, GEN_GPT2_VERSION, (uint32_t)S, (uint32_t)V,
                               (uint32_t)L, (uint32_t)s->n_heads, (uint32_t)C, (uint32_t)Vp};
    unsigned char header[GEN_GPT2_HEADER_INTS * 4];
    memset(header, 0, sizeof header);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        put_le32(header + 4 * i, fields[i]);
    write_bytes(w, header, sizeof header);

    write_tensor(w, V * C, FILL_RANDOM);        /* wte (V, C), the real rows */
    write_tensor(w, (Vp - V) * C, FILL_ZEROS);  /* wte (Vp - V, C), the padding rows */
    write_tensor(w, S * C, FILL_RANDOM);        /* wpe (S, C) */
    write_tensor(w, L * C, FILL_ONES);          /* ln1w (L, C) */
    write_tensor(w, L * C, FILL_ZEROS);         /* ln1b (L, C) */
    write_tensor(w, L * 3 * C * C, FILL_RANDOM); /* qkvw (L, 3C, C) */
    write_tensor(w, L * 3 * C, FILL_ZEROS);     /* qkvb (L, 3C) */
    write_tensor(w, L * C * C, FILL_RANDOM);    /* attprojw (L, C, C) */
    write_tensor(w, L * C, FILL_ZEROS);         /* attprojb (L, C) */
    write_tensor(w, L * C, FILL_ONES);          /* ln2w (L, C) */
    write_tensor(w, L * C, FILL_ZEROS);         /* ln2b (L, C) */
    write_tensor(w, L * H4 * C, FILL_RANDOM);   /* fcw (L, 4C, C) */
    write_tensor(w, L * H4, FILL_ZEROS);        /* fcb (L, 4C) */
    write_tensor(w, L * C * H4, FILL_RANDOM);   /* fcprojw (L, C, 4C) */
    write_tensor(w, L * C, FILL_ZEROS);         /* fcprojb (L, C) */
    write_tensor(w, C, FILL_ONES);              /* lnfw (C,) */
    write_tensor(w, C, FILL_ZEROS);             /* lnfb (C,) */
}

/* ---- command line ---- */

/* Prints the usage text to stream. */
static void usage(FILE *stream) {
    fprintf(stream,
"Usage: gen_model PRESET OUT.bin [options]\n"
"Write a random-weight checkpoint (fp32) of PRESET's shape to OUT.bin.\n"
"Presets (llama2.c version 1 \"ak42\" files, or llm.c GPT-2 version 3):\n");
    for (size_t i = 0; i < N_PRESETS; i++) {
        const Shape *s = &presets[i];
        fprintf(stream, "  %-10s %s: dim %d, hidden %d, layers %d, heads %d (%d kv), "
                "vocab %d, seq_len %d\n", s->name, s->family == GEN_GPT2 ? "GPT-2" : "Llama",
                s->dim, s->hidden_dim, s->n_layers, s->n_heads, s->n_kv_heads, s->vocab_size,
                s->seq_len);
    }
    fprintf(stream,
"Options (override the preset):\n"
"  --seed S        random seed, 0..2^64-1 (default %llu)\n"
"  --dim N         model width      --hidden N     MLP width (Llama; GPT-2 is 4 x dim)\n"
"  --layers N      layers           --heads N      attention heads\n"
"  --kv-heads N    kv heads (Llama) --vocab N      vocabulary\n"
"  --seq-len N     context          --unshared     separate classifier (Llama)\n"
"  --legacy        llama2.c's legacy layout, no magic (Llama; what llama.cpp's\n"
"                  convert-llama2c-to-ggml reads)\n"
"Exit status: 0 ok, 1 write failure, 2 usage error.\n", (unsigned long long)GEN_DEFAULT_SEED);
}

/* Reports a bad command line and exits 2. Never returns. */
static void usage_error(const char *what, const char *value) {
    fprintf(stderr, "gen_model: %s%s%s\n", what, value ? ": " : "", value ? value : "");
    usage(stderr);
    exit(2);
}

/* Parses the option at argv[*i] (with its value at argv[*i + 1]) into s or seed. */
static void parse_option(int argc, char **argv, int *i, Shape *s, uint64_t *seed) {
    static const struct { const char *flag; long max; size_t offset; int llama_only; } ints[] = {
        {"--dim", GEN_MAX_DIM, offsetof(Shape, dim), 0},
        {"--hidden", GEN_MAX_DIM, offsetof(Shape, hidden_dim), 1},
        {"--layers", GEN_MAX_LAYERS, offsetof(Shape, n_layers), 0},
        {"--heads", GEN_MAX_LAYERS, offsetof(Shape, n_heads), 0},
        {"--kv-heads", GEN_MAX_LAYERS, offsetof(Shape, n_kv_heads), 1},
        {"--vocab", GEN_MAX_VOCAB, offsetof(Shape, vocab_size), 0},
        {"--seq-len", GEN_MAX_SEQ_LEN, offsetof(Shape, seq_len), 0},
    };
    const char *flag = argv[*i];
    if (strcmp(flag, "--unshared") == 0 || strcmp(flag, "--legacy") == 0) {
        if (s->family != GEN_LLAMA) usage_error("a Llama-only option (GPT-2: llm.c's file)", flag);
        if (flag[2] == 'u') s->shared = 0;
        else s->legacy = 1;
        return;
    }
    if (*i + 1 >= argc) usage_error("missing value after", flag);
    const char *value = argv[++*i];
    if (strcmp(flag, "--seed") == 0) {
        if (cli_parse_u64(value, 0, seed) != 0) usage_error("--seed: not 0..2^64-1", value);
        return;
    }
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        if (strcmp(flag, ints[k].flag) != 0) continue;
        if (ints[k].llama_only && s->family != GEN_LLAMA)
            usage_error("a Llama-only option (GPT-2: MLP 4 x dim, kv heads = heads)", flag);
        if (cli_parse_int(value, 1, ints[k].max, (int *)((char *)s + ints[k].offset)) != 0) {
            fprintf(stderr, "gen_model: %s: expected an integer in 1..%ld\n", flag,
                    ints[k].max);
            usage_error("bad value", value);
        }
        return;
    }
    usage_error("unknown option", flag);
}

/* Completes a GPT-2 shape, then checks the loader's divisibility rules: heads divide the
 * width, kv heads divide heads, a Llama head has an even size (RoPE rotates pairs).
 * Exits 2 if not. */
static void check_shape(Shape *s) {
    if (s->family == GEN_GPT2) {   /* fixed by the architecture (options refused above) */
        s->hidden_dim = GEN_GPT2_MLP_MULT * s->dim;
        s->n_kv_heads = s->n_heads;
    }
    if (s->dim % s->n_heads != 0) usage_error("--heads must divide --dim", NULL);
    if (s->n_heads % s->n_kv_heads != 0) usage_error("--kv-heads must divide --heads", NULL);
    if (s->family == GEN_LLAMA && (s->dim / s->n_heads) % 2 != 0)
        usage_error("a Llama head size (dim / heads) must be even for RoPE", NULL);
    if (s->hidden_dim > GEN_MAX_DIM) usage_error("MLP width too large (4 x dim)", NULL);
}

int main(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc < 3) usage_error("expected PRESET and OUT.bin", NULL);
    const Shape *preset = NULL;
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcmp(argv[1], presets[i].name) == 0) preset = &presets[i];
    if (!preset) usage_error("unknown preset", argv[1]);
    Shape shape = *preset;
    uint64_t seed = GEN_DEFAULT_SEED;
    for (int i = 3; i < argc; i++) parse_option(argc, argv, &i, &shape, &seed);
    check_shape(&shape);

    /* fp32 bytes are written as the host stores them: refuse a big-endian host */
    const uint32_t probe = 1;
    if (*(const unsigned char *)&probe != 1) {
        fprintf(stderr, "gen_model: this host is big-endian; the formats are little-endian\n");
        return 1;
    }
    /* write OUT.tmp, then rename: OUT is never left half-written (make trusts its date) */
    const char *out = argv[2];
    size_t tmp_bytes = strlen(out) + sizeof GEN_TMP_SUFFIX;
    char *tmp = malloc(tmp_bytes);
    Writer w = {NULL, tmp, malloc(GEN_BUF_FLOATS * sizeof(float)), seed, 0};
    if (!tmp || !w.buf) {
        fprintf(stderr, "gen_model: out of memory for a %zu-byte buffer\n",
                GEN_BUF_FLOATS * sizeof(float));
        free(tmp);
        free(w.buf);
        return 1;
    }
    snprintf(tmp, tmp_bytes, "%s%s", out, GEN_TMP_SUFFIX);
    if (!(w.f = fopen(tmp, "wb"))) {
        fprintf(stderr, "gen_model: %s: cannot open for writing\n", tmp);
        free(tmp);
        free(w.buf);
        return 1;
    }
    if (shape.family == GEN_LLAMA && shape.legacy) write_llama_legacy(&w, &shape);
    else if (shape.family == GEN_LLAMA) write_llama(&w, &shape);
    else write_gpt2(&w, &shape);
    int closed = fclose(w.f);
    w.f = NULL;
    if (closed != 0) fail(&w, "close failed (disk full?)");
    if (rename(tmp, out) != 0) fail(&w, "cannot rename to the output path");
    fprintf(stderr, "gen_model: %s: %s, %zu fp32 values (%.1f MB), seed %llu\n", out,
            shape.name, w.floats, (double)w.floats * sizeof(float) / 1e6,
            (unsigned long long)seed);
    free(w.buf);
    free(tmp);
    return 0;
}

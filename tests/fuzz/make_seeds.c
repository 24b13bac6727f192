/* make_seeds.c: writes the seed corpus of every fuzz target into OUT_DIR/<target>/: tiny
 * valid inputs made here (checkpoints of all six formats, tokenizers of both, texts,
 * attention specs, command lines) and, for the binary formats, their truncations and
 * single-field corruptions (each header field set to 0, -1, INT32_MAX, INT32_MIN, 1 and
 * 2v + 1). Usage: make_seeds OUT_DIR (from the repository root: it also seeds the
 * tokenizer target with weights/tokenizer.bin and tests/data/llama2c/tok512.bin).
 * Deterministic: the same files every time. It runs no target; fuzz.mk calls it.
 */
#include <errno.h>       /* errno, EEXIST */
#include <math.h>        /* INFINITY, NAN */
#include <stdint.h>      /* int32_t, INT32_MAX, INT32_MIN */
#include <stdio.h>       /* fprintf, snprintf, remove */
#include <stdlib.h>      /* free */
#include <string.h>      /* memcpy, strlen, strerror, strstr */
#include <sys/stat.h>    /* mkdir */

#include "tests/fuzz/fuzz.h"   /* the tiny-file writers, fuzz_write_file, paths */
#include "attention.h"   /* AttentionConfig: a trained variant's file */
#include "checkpoint.h"  /* Config, header constants, checkpoint_encode_attention */
#include "tokenizer.h"   /* TOKENIZER_HEADER_INTS */

#define DIR_MODE 0755            /* seed folders */
#define SEED_WEIGHTS 7           /* weights of the tiny checkpoints */
#define LLAMA_HEADER_INTS 9      /* versioned llama2.c header: magic, version, 7 fields */
#define LLAMA_FLAG_BYTE 36       /* ... then the shared-classifier byte */
#define LLAMA_GROUP_BYTE 37      /* ... then the int8 group size (unaligned) */
#define GPT2_FIELDS 11           /* llm.c header ints with a meaning here (8: int8 group,
                                  * 9: attention extension, 10: positions) */
#define GPT2_TOKENIZER_FIELDS 4  /* magic, version, vocab_size, eot_id */
#define LLAMA_RECORD_HEAD 8      /* llama2.c tokenizer record: float score, int32 length */
#define Q8_GROUP 32              /* the quantize default */
#define Q8_ODD_GROUP 3           /* a group that leaves a short last group in every row */
#define Q8_LLAMA_GROUP 4         /* divides the tiny Llama's widths */
#define TINY_CTX 8               /* the tiny checkpoints: context, */
#define TINY_VOCAB 16            /* vocabulary, */
#define TINY_PADDED_VOCAB 20     /* a padded vocabulary, */
#define TINY_HEADS 2             /* heads, */
#define TINY_DIM 8               /* width, */
#define TINY_HIDDEN 16           /* Llama MLP width, */
#define TINY_ODD_HIDDEN 12       /* and one that no group of 8 divides */

static const char *out_dir;
static long written;

/* Creates OUT_DIR/target (it may exist). Exits on failure. */
static void make_dir(const char *target) {
    char path[FUZZ_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", out_dir, target);
    if (mkdir(path, DIR_MODE) != 0 && errno != EEXIST) {
        fprintf(stderr, "make_seeds: %s: cannot create (%s)\n", path, strerror(errno));
        exit(1);
    }
}

/* Writes one seed OUT_DIR/target/name. Exits on failure. */
static void put(const char *target, const char *name, const void *data, size_t size) {
    char path[FUZZ_PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
    if (n < 0 || (size_t)n >= sizeof path || fuzz_write_file(path, data, size) != 0) exit(1);
    written++;
}

/* Fails the run when a writer ran out of memory. */
static unsigned char *need(unsigned char *bytes) {
    if (!bytes) {
        fprintf(stderr, "make_seeds: out of memory\n");
        exit(1);
    }
    return bytes;
}

/* ------------------------------------------------------------------------- */
/* Corruptions of a binary file                                                */

/* Writes base, its truncations at a few offsets around the header and the end, and base
 * plus one trailing byte, as NAME, NAME.cut_N, NAME.plus1. */
static void put_truncations(const char *target, const char *name, const unsigned char *base,
                            size_t size, size_t header) {
    size_t cuts[] = {0, 1, 3, 4, 7, 8, 27, 28, header - 1, header, header + 1, size / 2,
                     size - 4, size - 1};
    char label[FUZZ_PATH_MAX];
    put(target, name, base, size);
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        if (cuts[i] >= size || (i > 0 && cuts[i] == cuts[i - 1])) continue;
        snprintf(label, sizeof label, "%s.cut_%zu", name, cuts[i]);
        put(target, label, base, cuts[i]);
    }
    unsigned char *longer = need(malloc(size + 1));
    memcpy(longer, base, size);
    longer[size] = 0;
    snprintf(label, sizeof label, "%s.plus1", name);
    put(target, label, longer, size + 1);
    free(longer);
}

/* Writes base with the int32 at byte offset set to each corrupt value in turn, as
 * NAME.fF_VALUE (F names the field). */
static void put_int_flips(const char *target, const char *name, const unsigned char *base,
                          size_t size, size_t offset, int field) {
    int32_t value;
    if (offset + sizeof value > size) return;
    memcpy(&value, base + offset, sizeof value);
    const int32_t corrupt[] = {0, -1, INT32_MAX, INT32_MIN, 1,
                               (int32_t)((uint32_t)value * 2u + 1u)};
    unsigned char *copy = need(malloc(size));
    char label[FUZZ_PATH_MAX];
    for (size_t i = 0; i < sizeof corrupt / sizeof corrupt[0]; i++) {
        memcpy(copy, base, size);
        memcpy(copy + offset, &corrupt[i], sizeof corrupt[i]);
        snprintf(label, sizeof label, "%s.f%d_%ld", name, field, (long)corrupt[i]);
        put(target, label, copy, size);
    }
    free(copy);
}

/* Writes base with the byte at offset set to each of a few values. */
static void put_byte_flips(const char *target, const char *name, const unsigned char *base,
                           size_t size, size_t offset) {
    const unsigned char corrupt[] = {0, 1, 2, 0x80, 0xFF};
    unsigned char *copy = need(malloc(size));
    char label[FUZZ_PATH_MAX];
    for (size_t i = 0; i < sizeof corrupt; i++) {
        memcpy(copy, base, size);
        copy[offset] = corrupt[i];
        snprintf(label, sizeof label, "%s.b%zu_%d", name, offset, corrupt[i]);
        put(target, label, copy, size);
    }
    free(copy);
}

/* ------------------------------------------------------------------------- */
/* fuzz_checkpoint                                                             */

/* The int8 form of base (group), through temp files and checkpoint_save_q8. */
static unsigned char *to_q8(const unsigned char *base, size_t size, int group, size_t *q8_size) {
    char in[FUZZ_PATH_MAX], out[FUZZ_PATH_MAX];
    if (fuzz_temp_path(in, sizeof in, "seed_in") != 0 ||
        fuzz_temp_path(out, sizeof out, "seed_q8") != 0 ||
        fuzz_write_file(in, base, size) != 0 || fuzz_write_q8(in, out, group) != 0) exit(1);
    unsigned char *q8 = need(fuzz_read_file(out, q8_size));
    remove(in);
    remove(out);
    return q8;
}

/* Every corruption of a GPT-2 checkpoint. */
static void put_gpt2_family(const char *name, const unsigned char *base, size_t size) {
    const char *target = "fuzz_checkpoint";
    put_truncations(target, name, base, size, CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t));
    for (int f = 0; f < GPT2_FIELDS; f++)
        put_int_flips(target, name, base, size, (size_t)f * sizeof(int32_t), f);
}

/* base (an fp32 GPT-2 file of shape c, 2 layers) as a trained variant's file: the header's
 * attention slot set, and the extension appended (window with a learned sink logit, then
 * Performer), its size in *ext_size. */
static unsigned char *with_attention(const unsigned char *base, size_t size, const Config *c,
                                     size_t *ext_size) {
    size_t ext = checkpoint_attention_bytes(c->n_layers, c->n_heads);
    unsigned char *file = need(malloc(size + ext));
    memcpy(file, base, size);
    int32_t on = CHECKPOINT_ATTN_VERSION;
    memcpy(file + CHECKPOINT_GPT2_ATTN_SLOT * sizeof(int32_t), &on, sizeof on);
    AttentionConfig cfgs[2];
    attention_config_default(&cfgs[0]);
    cfgs[0].kind = ATTENTION_WINDOW;
    cfgs[0].window = 3;
    cfgs[0].sink_logit = 1;
    attention_config_default(&cfgs[1]);
    cfgs[1].kind = ATTENTION_PERFORMER;
    cfgs[1].features = 4;
    float sinks[2 * TINY_HEADS];
    for (int i = 0; i < 2 * TINY_HEADS; i++) sinks[i] = 0.25f * (float)i - 0.5f;
    checkpoint_encode_attention(file + size, cfgs, sinks, c->n_layers, c->n_heads);
    *ext_size = size + ext;
    return file;
}

/* Every corruption of a llama2.c checkpoint (legacy: 7 ints; else the 256-byte header). */
static void put_llama_family(const char *name, const unsigned char *base, size_t size,
                             int legacy) {
    const char *target = "fuzz_checkpoint";
    int fields = legacy ? CHECKPOINT_LLAMA_LEGACY_INTS : LLAMA_HEADER_INTS;
    put_truncations(target, name, base, size,
                    legacy ? CHECKPOINT_LLAMA_LEGACY_INTS * sizeof(int32_t)
                           : CHECKPOINT_LLAMA_HEADER_BYTES);
    for (int f = 0; f < fields; f++)
        put_int_flips(target, name, base, size, (size_t)f * sizeof(int32_t), f);
    if (!legacy) {
        put_byte_flips(target, name, base, size, LLAMA_FLAG_BYTE);
        put_int_flips(target, name, base, size, LLAMA_GROUP_BYTE, fields + 1);
    }
}

/* fuzz_checkpoint's structured inputs ("TINY", 12 field bytes, weight bytes; see
 * fuzz_checkpoint.c): every format, a few shapes, and one with weight bytes given. */
static void seed_structured_checkpoints(void) {
    enum { FIELDS = 12, FORMATS = 6, SHAPES = 4, OVERLAY = 16 };
    static const unsigned char shapes[SHAPES][FIELDS] = {
        /* format, NH, HS, NKV, L, Hd, V, pad, S, group, flags, seed (format set below) */
        {0, 1, 3, 0, 0, 15, 15, 3, 7, 31, 0x0F, 1},
        {0, 3, 3, 1, 1, 11, 40, 0, 15, 4, 0x1E, 2},
        {0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0x01, 3},
        {0, 3, 7, 3, 2, 47, 63, 7, 0x80, 39, 0x20, 4},   /* a huge context for Llama v1/v2 */
    };
    unsigned char input[sizeof "TINY" - 1 + FIELDS + OVERLAY];
    char label[FUZZ_PATH_MAX];
    memcpy(input, "TINY", sizeof "TINY" - 1);
    for (int f = 0; f < FORMATS; f++) {
        for (int s = 0; s < SHAPES; s++) {
            memcpy(input + 4, shapes[s], FIELDS);
            input[4] = (unsigned char)f;
            snprintf(label, sizeof label, "tiny_format%d_shape%d", f, s);
            put("fuzz_checkpoint", label, input, 4 + FIELDS);
        }
        memset(input + 4 + FIELDS, 0xFF, OVERLAY);   /* NaN weights; int8 -1 and NaN scales */
        snprintf(label, sizeof label, "tiny_format%d_nan", f);
        put("fuzz_checkpoint", label, input, sizeof input);
    }
}

static void seed_checkpoints(void) {
    make_dir("fuzz_checkpoint");
    size_t size, q8_size;
    /* the brief's tiny shapes: 1 layer, C 8, 2 heads, V = Vp 16, context 8 */
    Config g = {.family = MODEL_GPT2, .seq_len = TINY_CTX, .vocab_size = TINY_VOCAB,
                .padded_vocab_size = TINY_VOCAB, .n_layers = 1, .n_heads = TINY_HEADS,
                .n_kv_heads = TINY_HEADS, .dim = TINY_DIM};
    unsigned char *base = need(fuzz_tiny_gpt2(&g, 0, SEED_WEIGHTS, &size));
    put_gpt2_family("gpt2_fp32", base, size);
    unsigned char *q8 = to_q8(base, size, Q8_GROUP, &q8_size);
    put_gpt2_family("gpt2_q8", q8, q8_size);
    free(q8);
    q8 = to_q8(base, size, Q8_ODD_GROUP, &q8_size);
    put_gpt2_family("gpt2_q8_g3", q8, q8_size);
    free(q8);
    free(base);
    base = need(fuzz_tiny_gpt2(&g, 1, SEED_WEIGHTS, &size));
    put_gpt2_family("gpt2_bf16", base, size);
    free(base);
    Config padded = g;
    padded.padded_vocab_size = TINY_PADDED_VOCAB;   /* Vp > V, as llm.c pads 50257 to 50304 */
    padded.n_layers = 2;
    base = need(fuzz_tiny_gpt2(&padded, 0, SEED_WEIGHTS, &size));
    put_gpt2_family("gpt2_vp20_l2", base, size);
    /* a trained variant's file: every field of its attention extension corrupted */
    size_t ext_size, records = (size_t)padded.n_layers * CHECKPOINT_ATTN_INTS;
    unsigned char *variant = with_attention(base, size, &padded, &ext_size);
    put_gpt2_family("gpt2_attn", variant, ext_size);
    for (size_t f = 0; f < records + (size_t)padded.n_layers * TINY_HEADS; f++)
        put_int_flips("fuzz_checkpoint", "gpt2_attn_ext", variant, ext_size,
                      size + f * sizeof(int32_t), (int)f);
    q8 = to_q8(variant, ext_size, Q8_GROUP, &q8_size);
    put_gpt2_family("gpt2_attn_q8", q8, q8_size);
    free(q8);
    free(variant);
    free(base);
    /* rotary positions (train --pos rope): header [10] = 1 and no wpe, in every storage and
     * with the attention extension */
    Config rotary = padded;
    rotary.positions = MODEL_POSITIONS_ROTARY;
    base = need(fuzz_tiny_gpt2(&rotary, 0, SEED_WEIGHTS, &size));
    put_gpt2_family("gpt2_rope", base, size);
    q8 = to_q8(base, size, Q8_ODD_GROUP, &q8_size);
    put_gpt2_family("gpt2_rope_q8_g3", q8, q8_size);
    free(q8);
    variant = with_attention(base, size, &rotary, &ext_size);
    put_gpt2_family("gpt2_rope_attn", variant, ext_size);
    free(variant);
    free(base);
    base = need(fuzz_tiny_gpt2(&rotary, 1, SEED_WEIGHTS, &size));
    put_gpt2_family("gpt2_rope_bf16", base, size);
    free(base);

    Config l = {.family = MODEL_LLAMA, .seq_len = TINY_CTX, .vocab_size = TINY_VOCAB,
                .padded_vocab_size = TINY_VOCAB, .n_layers = 1, .n_heads = TINY_HEADS,
                .n_kv_heads = TINY_HEADS, .dim = TINY_DIM, .hidden_dim = TINY_HIDDEN};
    for (int legacy = 0; legacy <= 1; legacy++) {
        for (int shared = 0; shared <= 1; shared++) {
            char name[FUZZ_PATH_MAX];
            snprintf(name, sizeof name, "llama_%s_%s", legacy ? "legacy" : "v1",
                     shared ? "shared" : "separate");
            base = need(fuzz_tiny_llama(&l, legacy, shared, SEED_WEIGHTS, &size));
            put_llama_family(name, base, size, legacy);
            if (!legacy) {   /* version 2 = the int8 form */
                snprintf(name, sizeof name, "llama_v2_%s", shared ? "shared" : "separate");
                q8 = to_q8(base, size, Q8_LLAMA_GROUP, &q8_size);
                put_llama_family(name, q8, q8_size, 0);
                free(q8);
            }
            free(base);
        }
    }
    Config gqa = l;
    gqa.n_kv_heads = 1;                  /* grouped-query attention */
    gqa.hidden_dim = TINY_ODD_HIDDEN;    /* not a multiple of the int8 group */
    base = need(fuzz_tiny_llama(&gqa, 0, 1, SEED_WEIGHTS, &size));
    put_llama_family("llama_v1_gqa", base, size, 0);
    q8 = to_q8(base, size, Q8_ODD_GROUP, &q8_size);
    put_llama_family("llama_v2_gqa_g3", q8, q8_size, 0);
    free(q8);
    free(base);
    seed_structured_checkpoints();
}

/* ------------------------------------------------------------------------- */
/* fuzz_tokenizer_load                                                         */

/* Copies a repository file into the seeds, if it exists. */
static void put_repo_file(const char *target, const char *name, const char *relative) {
    char path[FUZZ_PATH_MAX];
    size_t size;
    if (fuzz_repo_path(path, sizeof path, relative) != 0 || !fuzz_file_exists(path)) return;
    unsigned char *bytes = need(fuzz_read_file(path, &size));
    put(target, name, bytes, size);
    free(bytes);
}

static void seed_tokenizers(void) {
    const char *target = "fuzz_tokenizer_load";
    make_dir(target);
    size_t size, header = TOKENIZER_HEADER_INTS * sizeof(uint32_t);
    unsigned char *base = need(fuzz_tiny_gpt2_tokenizer(&size));
    put_truncations(target, "gpt2", base, size, header);
    for (int f = 0; f < GPT2_TOKENIZER_FIELDS; f++)
        put_int_flips(target, "gpt2", base, size, (size_t)f * sizeof(uint32_t), f);
    put_byte_flips(target, "gpt2", base, size, header);   /* the first token's length */
    put_byte_flips(target, "gpt2", base, size, size - 1 - strlen("<|endoftext|>"));
    free(base);

    int vocab;
    base = need(fuzz_tiny_llama_tokenizer(&size, &vocab));
    put_truncations(target, "llama", base, size, sizeof(int32_t) + LLAMA_RECORD_HEAD);
    put_int_flips(target, "llama", base, size, 0, 0);                  /* max_token_length */
    put_int_flips(target, "llama", base, size, sizeof(int32_t), 1);    /* first score */
    put_int_flips(target, "llama", base, size, 2 * sizeof(int32_t), 2);   /* first length */
    {
        const float specials[] = {INFINITY, -INFINITY, NAN};
        unsigned char *copy = need(malloc(size));
        char label[FUZZ_PATH_MAX];
        for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
            memcpy(copy, base, size);
            memcpy(copy + sizeof(int32_t), &specials[i], sizeof(float));
            snprintf(label, sizeof label, "llama.score_%zu", i);
            put(target, label, copy, size);
        }
        free(copy);
    }
    free(base);
    /* structured inputs ("TOKS", flags, count, tokens, text; see fuzz_tokenizer_load.c):
     * GPT-2 with and without the byte tokens, Llama with scores */
    /* (string pieces are split where a hex escape would swallow the next letter) */
    static const char gpt2_vocab[] = "TOKS\x02\x05" "\x01th" "\x01he" "\x02the" "\x01 t"
                                     "\x03 the" "the cat sat on the hat";
    static const char gpt2_sparse[] = "TOKS\x00\x03" "\x00" "a" "\x00" "b" "\x01" "ab" "abba";
    static const char llama_vocab[] = "TOKS\x03\x06" "\x01\x00 " "\x01\x01t" "\x01\x02h"
                                      "\x01\x03" "e" "\x02\x10th" "\x03\x20the" "the then";
    put(target, "toks_gpt2", gpt2_vocab, sizeof gpt2_vocab - 1);
    put(target, "toks_gpt2_sparse", gpt2_sparse, sizeof gpt2_sparse - 1);
    put(target, "toks_llama", llama_vocab, sizeof llama_vocab - 1);
    put_repo_file(target, "shipped_gpt2", "weights/tokenizer.bin");
    put_repo_file(target, "tok512", "tests/data/llama2c/tok512.bin");
}

/* ------------------------------------------------------------------------- */
/* Texts: fuzz_encode_gpt2, fuzz_encode_llama, fuzz_eval                       */

#define LONG_RUN 300   /* longer than TOKENIZER_SMALL_PIECE: the merge scratch is malloc'd */
static const char RUN_BYTES[] = "a 7!";   /* long runs of a letter, space, digit, symbol */
enum { N_RUNS = sizeof RUN_BYTES - 1 };

/* A text seed with its length (texts may hold NUL bytes). */
typedef struct {
    const char *name, *text;
    size_t len;   /* 0: strlen(text) */
} Text;

static const Text TEXTS[] = {
    {"empty", "", 0},
    {"ascii", "Hello, world!", 0},
    {"verse", "ROMEO:\nBut soft, what light through yonder window breaks?\n\nJULIET:\nAy me!\n", 0},
    {"contractions", "I'm here, you're there; we've, they'll, she'd, it's, don't 'S 'LL", 0},
    {"numbers", "12345 3.14159 1,000,000 2024-03-26 \xd9\xa3\xd9\xa4 \xe2\x85\xa7", 0},
    {"spaces", "  lead  and    many   spaces\t\ttabs\n\n\nlines  \n \r\n\x0b\x0c end   ", 0},
    {"utf8", "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x82 "
             "\xce\xb1\xce\xb2\xce\xb3 \xd0\xbf\xd1\x80\xd0\xb8", 0},
    {"unicode_spaces", "a\xc2\xa0" "b\xe2\x80\xa8" "c\xc2\x85" "d\xe3\x80\x80" "e", 0},
    {"invalid_utf8", "\xff\xfe\xc0\x80\xed\xa0\x80\xf4\x90\x80\x80 \x80" "abc \xe2\x82", 0},
    {"leading_continuation", "\x80\x80hello", 0},
    {"nul", "a\0b\0\0c \0", 9},
    {"special_spellings", "<|endoftext|> <0x41><s></s> <unk>", 0},
    {"punctuation", "!!!???...,,,;;;:::---___***&&&%%%$$$###@@@", 0},
};
enum { N_TEXTS = sizeof TEXTS / sizeof TEXTS[0] };

static size_t text_len(const Text *t) {
    return t->len ? t->len : strlen(t->text);
}

/* Writes the text seeds into target, each after `prefix` (eval's control byte) if given. */
static void put_texts(const char *target, const unsigned char *prefix) {
    char label[FUZZ_PATH_MAX], buffer[FUZZ_PATH_MAX];
    size_t extra = prefix ? 1 : 0;
    for (int i = 0; i < N_TEXTS; i++) {
        size_t len = text_len(&TEXTS[i]);
        if (prefix) buffer[0] = (char)*prefix;
        memcpy(buffer + extra, TEXTS[i].text, len);
        snprintf(label, sizeof label, "%s%s%d", TEXTS[i].name, prefix ? "_c" : "",
                 prefix ? *prefix : 0);
        put(target, label, buffer, len + extra);
    }
    for (int r = 0; r < N_RUNS; r++) {   /* a long run of one class, then another byte */
        if (prefix) buffer[0] = (char)*prefix;
        memset(buffer + extra, RUN_BYTES[r], LONG_RUN);
        buffer[extra + LONG_RUN] = 'x';
        snprintf(label, sizeof label, "run_%d%s%d", r, prefix ? "_c" : "", prefix ? *prefix : 0);
        put(target, label, buffer, LONG_RUN + 1 + extra);
    }
}

static void seed_texts(void) {
    make_dir("fuzz_encode_gpt2");
    make_dir("fuzz_encode_llama");
    make_dir("fuzz_eval");
    put_texts("fuzz_encode_gpt2", NULL);
    put_texts("fuzz_encode_llama", NULL);
    /* fuzz_eval's first byte: window length 2 + (b & 0x0F) % 15, the shipped model (0x40)
     * and the exact twin (0x80) */
    const unsigned char controls[] = {0, 6, 14, 0x80 | 3, 0x40 | 14, 0x40 | 0x80 | 5};
    for (size_t i = 0; i < sizeof controls; i++) put_texts("fuzz_eval", &controls[i]);
}

/* ------------------------------------------------------------------------- */
/* fuzz_attn_spec and fuzz_cli                                                 */

static const char *const SPECS[] = {
    "exact", "exact:tau=0.5", "exact:softmax1=1", "unscaled", "unscaled:softmax1=1",
    "softmax1", "softmax1:tau=2", "gauss", "gauss:tau=1.5,softmax1=1", "window",
    "window:w=4,sinks=1", "window:w=1", "dilated:w=3,k=2,sinks=1", "dilated", "strided:l=3",
    "strided", "fixed:l=4,c=1", "fixed:l=4,c=4", "fixed",
    "lsh:buckets=4,rounds=2,local=2,sinks=1,seed=7", "lsh:buckets=1", "lsh", "linear",
    "linear:prescale=1", "efficient",
    "performer:m=8,orf=0,seed=3", "performer:m=5,orf=1", "performer:tau=0.5", "performer",
    "lsh:buckets=8,rounds=3,local=0,sinks=0,seed=18446744073709551615,tau=0.25,softmax1=1",
    /* broken */
    "", ":", "exact:", "exact:tau", "exact:tau=", "exact:tau=0", "exact:tau=abc",
    "exact:tau=1e309", "exact:tau=nan", "exact:tau=101", "window:w=0", "window:w=1048577",
    "window:w=-1", "window:x=1", "window:w=4,", "window:w=4,,sinks=1", "fixed:l=2,c=3",
    "lsh:buckets=3", "nystrom", "performer:seed=-1", "performer:seed=18446744073709551616",
    "window:w=99999999999999999999", "EXACT", "exact:tau=1,tau=2", "window:w=4:sinks=1",
    "efficient:tau=1", "linear:softmax1=1", "window:w= 4", "window:w=4 ", "exact\n",
};

/* Command lines, one argument per line (run in fuzz_cli's sandbox). */
static const char *const COMMANDS[] = {
    "model.bin\n-i\nROMEO:\n-n\n8\n-s\n1",
    "model.bin\n-z\ntokenizer.bin\n-i\nHello\n-n\n4\n-t\n0",
    "q.bin\n-n\n4\n-s\n2\n-k\n5",
    "g.bin\n-i\nthe\n-n\n3\n-p\n0.5\n-s\n3",
    "l.bin\n-z\nlt.bin\n-i\nthe cat\n-n\n4\n-s\n4",
    "l8.bin\n-z\nlt.bin\n-n\n4\n-t\n0",
    "l.bin\n-i\nhello\n-n\n2\n-s\n9",
    "model.bin\n-f\np.txt\n-n\n2\n-s\n5",
    "model.bin\n--eval\ne.txt\n--ctx\n16",
    "model.bin\n--eval\ne.txt\n--attn\nwindow:w=4,sinks=1\n--ctx\n8",
    "q.bin\n--eval\ne.txt\n--ref\nmodel.bin\n--ctx\n32",
    "l.bin\n-z\nlt.bin\n--eval\ne.txt\n--ctx\n4\n--attn\nlinear",
    "model.bin\n--attn\nlsh:buckets=4,rounds=2\n-n\n4\n-s\n6",
    ("model.bin\n--attn=performer:m=8\n--n-predict=3\n--seed=7\n--temperature=0.7\n--top-p=0.9"
     "\n--top-k=4"),
    "model.bin\n-T\n2\n-n\n2\n-s\n8",
    "model.bin\n-n\n0",
    "n.bin\n-i\nHello\n-n\n4\n-s\n1", "n.bin\n--eval\ne.txt\n--ctx\n8",
    "n.bin\n-n\n2\n-t\n0", "b.bin\n-i\nthe\n-n\n5\n-s\n2\n-k\n3",
    "b.bin\n--eval\ne.txt\n--ctx\n16\n--attn\nsoftmax1",
    "--help", "-h", "", "model.bin\n-x", "model.bin\n-n", "model.bin\n-n\n-1",
    "model.bin\n-n\nabc", "model.bin\n-t\n101", "model.bin\n-p\n0", "model.bin\n-s\n0",
    "model.bin\n-T\n0", "model.bin\n--attn\nbogus", "model.bin\n--ctx\n4",
    "model.bin\n--ref\nq.bin", "model.bin\nextra", "missing.bin", "model.bin\n-z\nmissing",
    "model.bin\n-i\nA\n-f\np.txt", "model.bin\n-f\nmissing.txt", "model.bin\n--eval\nmissing",
    "p.txt", "model.bin\n-z\nl.bin", "g.bin\n-z\nlt.bin", "-",
    "model.bin\n--eval\ne.txt\n--ctx\n1000", "model.bin\n-i\n\xff\xfe\x80 x\n-n\n1",
};

static void seed_lines(const char *target, const char *const *lines, size_t n) {
    char label[FUZZ_PATH_MAX];
    make_dir(target);
    for (size_t i = 0; i < n; i++) {
        snprintf(label, sizeof label, "%03zu", i);
        put(target, label, lines[i], strlen(lines[i]));
    }
}

/* ------------------------------------------------------------------------- */
/* fuzz_gguf                                                                   */

/* A growing byte buffer for the GGUF writer. */
typedef struct {
    unsigned char *b;
    size_t n, cap;
} Bytes;

static void add(Bytes *f, const void *p, size_t n) {
    if (f->n + n > f->cap) {
        f->cap = 2 * (f->n + n);
        f->b = need(realloc(f->b, f->cap));
    }
    memcpy(f->b + f->n, p, n);
    f->n += n;
}
static void add_u32(Bytes *f, uint32_t v) { add(f, &v, 4); }
static void add_u64(Bytes *f, uint64_t v) { add(f, &v, 8); }
static void add_str(Bytes *f, const char *s) {
    add_u64(f, strlen(s));
    add(f, s, strlen(s));
}
static void add_kv_u32(Bytes *f, const char *key, uint32_t v) {
    add_str(f, key);
    add_u32(f, 4);
    add_u32(f, v);
}

#define GGUF_ALIGN 32   /* the default alignment the seeds use */

/* Bytes of numel values of ggml type `type` (add_values's types). */
static size_t type_bytes(uint32_t type, size_t numel) {
    return type == 0 ? 4 * numel : type == 8 ? numel / 32 * 34 : type == 2 ? numel / 32 * 18
         : type == 6 ? numel / 32 * 22 : type == 34 ? numel / 256 * 54
         : type == 35 ? numel / 256 * 66 : 2 * numel;
}

/* One tensor's bytes of type type (0 F32, 1 F16, 2 Q4_0, 6 Q5_0, 8 Q8_0, 30 BF16, 34 TQ1_0,
 * 35 TQ2_0; the block types' n a multiple of their block): n values, all equal to one (norms)
 * or small and varied (the ternary types: varied digit bytes, then d = 1/32). */
static void add_values(Bytes *f, uint32_t type, int n, int ones, int salt) {
    for (int i = 0; i < n; i++) {
        float x = ones ? 1.0f : (float)((i * 7 + salt * 13) % 17 - 8) / 32.0f;
        uint32_t bits;
        memcpy(&bits, &x, 4);
        if (type == 0) add(f, &x, 4);
        else if (type == 30) { uint16_t h = (uint16_t)(bits >> 16); add(f, &h, 2); }
        else if (type == 1) {   /* these values are exact in half precision */
            uint16_t h = x == 0.0f ? 0 : (uint16_t)(((bits >> 16) & 0x8000u) |
                         ((((bits >> 23) & 0xffu) - 112u) << 10) | ((bits >> 13) & 0x3ffu));
            add(f, &h, 2);
        } else if (i % 32 == 0 && (type == 2 || type == 6)) {   /* scale 1/32, then bits */
            uint16_t d = 0x2800;
            add(f, &d, 2);
            for (int k = 0; type == 6 && k < 4; k++)   /* Q5_0: the fifth bits' word */
                add(f, &(unsigned char){(unsigned char)((i + k) * 37 + salt)}, 1);
            for (int k = 0; k < 16; k++)   /* two 4-bit integers a byte */
                add(f, &(unsigned char){(unsigned char)((i + k) * 7 + salt * 13)}, 1);
        } else if (i % 256 == 0 && (type == 34 || type == 35)) {   /* digits, then d */
            for (int k = 0; k < (type == 34 ? 52 : 64); k++)
                add(f, &(unsigned char){(unsigned char)((i / 256 + k) * 29 + salt * 13)}, 1);
            uint16_t d = 0x2800;
            add(f, &d, 2);
        } else if (type == 34 || type == 35) {   /* inside a ternary block: written above */
        } else if (i % 32 == 0) {   /* Q8_0: scale 1/32 as f16 (0x2800), then 32 int8 */
            uint16_t d = 0x2800;
            add(f, &d, 2);
            for (int k = 0; k < 32; k++) {
                signed char q = (signed char)(((i + k) * 7 + salt * 13) % 17 - 8);
                add(f, &q, 1);
            }
        }
    }
}

/* A tiny llama GGUF: width c, one layer, heads 2 (1 kv head), MLP width 2c, the tokens
 * <unk> <s> </s>, then n_bytes byte tokens <0x00>.., then U+2581, letters a..z; matrices
 * of type matrix_type, the rest F32; output.weight unless tied. */
static unsigned char *tiny_gguf(int c, int n_bytes, uint32_t matrix_type, int tied,
                                size_t *size) {
    Bytes f = {0};
    int V = 3 + n_bytes + 1 + 26, hd = 2 * c;
    const struct { const char *name; int rows, cols; } T[] = {
        {"token_embd.weight", V, c}, {"output_norm.weight", 1, c}, {"output.weight", V, c},
        {"blk.0.attn_norm.weight", 1, c}, {"blk.0.attn_q.weight", c, c},
        {"blk.0.attn_k.weight", c / 2, c}, {"blk.0.attn_v.weight", c / 2, c},
        {"blk.0.attn_output.weight", c, c}, {"blk.0.ffn_norm.weight", 1, c},
        {"blk.0.ffn_gate.weight", hd, c}, {"blk.0.ffn_down.weight", c, hd},
        {"blk.0.ffn_up.weight", hd, c}};
    int n_tensors = (int)(sizeof T / sizeof T[0]);
    add(&f, "GGUF", 4);
    add_u32(&f, 3);
    add_u64(&f, (uint64_t)(n_tensors - (tied ? 1 : 0)));
    add_u64(&f, 15);
    add_str(&f, "general.architecture");
    add_u32(&f, 8);
    add_str(&f, "llama");
    add_kv_u32(&f, "llama.block_count", 1);
    add_kv_u32(&f, "llama.embedding_length", (uint32_t)c);
    add_kv_u32(&f, "llama.feed_forward_length", (uint32_t)hd);
    add_kv_u32(&f, "llama.attention.head_count", 2);
    add_kv_u32(&f, "llama.attention.head_count_kv", 1);
    add_kv_u32(&f, "llama.context_length", 8);
    add_str(&f, "llama.attention.layer_norm_rms_epsilon");
    add_u32(&f, 6);
    float eps = 1e-5f;
    add(&f, &eps, 4);
    add_str(&f, "tokenizer.ggml.model");
    add_u32(&f, 8);
    add_str(&f, "llama");
    add_str(&f, "tokenizer.ggml.tokens");
    add_u32(&f, 9);
    add_u32(&f, 8);
    add_u64(&f, (uint64_t)V);
    add_str(&f, "<unk>");
    add_str(&f, "<s>");
    add_str(&f, "</s>");
    for (int b = 0; b < n_bytes && b < 256; b++) {
        char hex[16];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        add_str(&f, hex);
    }
    add_str(&f, "\xe2\x96\x81");
    for (int k = 0; k < 26; k++) {
        char letter[2] = {(char)('a' + k), 0};
        add_str(&f, letter);
    }
    add_str(&f, "tokenizer.ggml.scores");
    add_u32(&f, 9);
    add_u32(&f, 6);
    add_u64(&f, (uint64_t)V);
    for (int i = 0; i < V; i++) {
        float score = -(float)i;
        add(&f, &score, 4);
    }
    /* types: <unk> unknown, <s> </s> control, bytes byte, "a" user-defined (a special
     * token of one letter), the rest normal */
    add_str(&f, "tokenizer.ggml.token_type");
    add_u32(&f, 9);
    add_u32(&f, 5);   /* int32 */
    add_u64(&f, (uint64_t)V);
    for (int i = 0; i < V; i++) {
        int32_t type = i == 0 ? 2 : i < 3 ? 3 : i < 3 + n_bytes ? 6 : i == 4 + n_bytes ? 4 : 1;
        add(&f, &type, 4);
    }
    add_kv_u32(&f, "tokenizer.ggml.bos_token_id", 1);
    add_kv_u32(&f, "tokenizer.ggml.eos_token_id", 2);
    add_str(&f, "tokenizer.ggml.add_bos_token");
    add_u32(&f, 7);
    add(&f, "\1", 1);
    uint64_t offset = 0;
    for (int t = 0; t < n_tensors; t++) {
        if (tied && t == 2) continue;
        uint32_t type = T[t].rows > 1 ? matrix_type : 0;
        size_t numel = (size_t)T[t].rows * (size_t)T[t].cols;
        size_t bytes = type_bytes(type, numel);
        add_str(&f, T[t].name);
        add_u32(&f, T[t].rows > 1 ? 2 : 1);
        add_u64(&f, (uint64_t)T[t].cols);
        if (T[t].rows > 1) add_u64(&f, (uint64_t)T[t].rows);
        add_u32(&f, type);
        add_u64(&f, offset);
        offset += (bytes + GGUF_ALIGN - 1) / GGUF_ALIGN * GGUF_ALIGN;
    }
    while (f.n % GGUF_ALIGN) add(&f, "", 1);
    for (int t = 0; t < n_tensors; t++) {
        if (tied && t == 2) continue;
        add_values(&f, T[t].rows > 1 ? matrix_type : 0, T[t].rows * T[t].cols, T[t].rows == 1, t);
        while (f.n % GGUF_ALIGN) add(&f, "", 1);
    }
    *size = f.n;
    return f.b;
}

/* GPT-2's bytes_to_unicode spelling of byte b (UTF-8) appended to f. */
static void add_gpt2_char(Bytes *f, unsigned char b) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    unsigned cp = b;
    if (!printable) {
        cp = 256;
        for (int x = 0; x < b; x++)
            cp += !((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE);
    }
    unsigned char utf8[2] = {(unsigned char)(0xC0 | cp >> 6), (unsigned char)(0x80 | (cp & 0x3F))};
    if (cp < 0x80) add(f, &b, 1);
    else add(f, utf8, 2);
}

/* A tiny gpt2 GGUF: width c, one layer, 2 heads, MLP width 4c, context 8; the 256 byte
 * tokens, "ab" (the merge "a b"), end-of-text; matrices of type matrix_type (position
 * table and vectors F32); output.weight unless tied; pre-tokenizer pre. */
static unsigned char *tiny_gguf_gpt2(int c, uint32_t matrix_type, int tied, const char *pre,
                                     size_t *size) {
    Bytes f = {0};
    int V = 258, hd = 4 * c;
    const struct { const char *name; int rows, cols, matrix; } T[] = {
        {"token_embd.weight", V, c, 1}, {"position_embd.weight", 8, c, 0},
        {"output_norm.weight", 1, c, 0}, {"output_norm.bias", 1, c, 0},
        {"output.weight", V, c, 1},
        {"blk.0.attn_norm.weight", 1, c, 0}, {"blk.0.attn_norm.bias", 1, c, 0},
        {"blk.0.attn_qkv.weight", 3 * c, c, 1}, {"blk.0.attn_qkv.bias", 1, 3 * c, 0},
        {"blk.0.attn_output.weight", c, c, 1}, {"blk.0.attn_output.bias", 1, c, 0},
        {"blk.0.ffn_norm.weight", 1, c, 0}, {"blk.0.ffn_norm.bias", 1, c, 0},
        {"blk.0.ffn_up.weight", hd, c, 1}, {"blk.0.ffn_up.bias", 1, hd, 0},
        {"blk.0.ffn_down.weight", c, hd, 1}, {"blk.0.ffn_down.bias", 1, c, 0}};
    int n_tensors = (int)(sizeof T / sizeof T[0]);
    add(&f, "GGUF", 4);
    add_u32(&f, 3);
    add_u64(&f, (uint64_t)(n_tensors - (tied ? 1 : 0)));
    add_u64(&f, 13);
    add_str(&f, "general.architecture");
    add_u32(&f, 8);
    add_str(&f, "gpt2");
    add_kv_u32(&f, "gpt2.block_count", 1);
    add_kv_u32(&f, "gpt2.context_length", 8);
    add_kv_u32(&f, "gpt2.embedding_length", (uint32_t)c);
    add_kv_u32(&f, "gpt2.feed_forward_length", (uint32_t)hd);
    add_kv_u32(&f, "gpt2.attention.head_count", 2);
    add_str(&f, "gpt2.attention.layer_norm_epsilon");
    add_u32(&f, 6);
    float eps = 1e-5f;
    add(&f, &eps, 4);
    add_str(&f, "tokenizer.ggml.model");
    add_u32(&f, 8);
    add_str(&f, "gpt2");
    add_str(&f, "tokenizer.ggml.pre");
    add_u32(&f, 8);
    add_str(&f, pre);
    add_str(&f, "tokenizer.ggml.tokens");
    add_u32(&f, 9);
    add_u32(&f, 8);
    add_u64(&f, (uint64_t)V);
    for (int b = 0; b < 256; b++) {
        size_t at = f.n;
        add_u64(&f, 0);
        add_gpt2_char(&f, (unsigned char)b);
        uint64_t n = f.n - at - 8;
        memcpy(f.b + at, &n, 8);
    }
    add_str(&f, "ab");
    add_str(&f, "<|endoftext|>");
    add_str(&f, "tokenizer.ggml.merges");
    add_u32(&f, 9);
    add_u32(&f, 8);
    add_u64(&f, 1);
    add_str(&f, "a b");
    add_kv_u32(&f, "tokenizer.ggml.bos_token_id", (uint32_t)V - 1);
    add_kv_u32(&f, "tokenizer.ggml.eos_token_id", (uint32_t)V - 1);
    uint64_t offset = 0;
    for (int t = 0; t < n_tensors; t++) {
        if (tied && t == 4) continue;
        uint32_t type = T[t].matrix ? matrix_type : 0;
        size_t numel = (size_t)T[t].rows * (size_t)T[t].cols;
        size_t bytes = type_bytes(type, numel);
        add_str(&f, T[t].name);
        add_u32(&f, T[t].rows > 1 ? 2 : 1);
        add_u64(&f, (uint64_t)T[t].cols);
        if (T[t].rows > 1) add_u64(&f, (uint64_t)T[t].rows);
        add_u32(&f, type);
        add_u64(&f, offset);
        offset += (bytes + GGUF_ALIGN - 1) / GGUF_ALIGN * GGUF_ALIGN;
    }
    while (f.n % GGUF_ALIGN) add(&f, "", 1);
    for (int t = 0; t < n_tensors; t++) {
        if (tied && t == 4) continue;
        int ones = strstr(T[t].name, "norm.weight") != NULL;
        add_values(&f, T[t].matrix ? matrix_type : 0, T[t].rows * T[t].cols, ones, t);
        while (f.n % GGUF_ALIGN) add(&f, "", 1);
    }
    *size = f.n;
    return f.b;
}

/* The tiny GGUF files, their truncations and single-field corruptions. */
static void seed_gguf(void) {
    make_dir("fuzz_gguf");
    const struct { const char *name; int c, n_bytes; uint32_t type; int tied, gpt2; } files[] = {
        {"f32_tied", 8, 16, 0, 1, 0}, {"f32", 8, 16, 0, 0, 0}, {"f16", 16, 32, 1, 0, 0},
        {"bf16_tied", 16, 32, 30, 1, 0}, {"q8_0", 32, 256, 8, 0, 0},
        {"q8_0_tied", 32, 64, 8, 1, 0}, {"q4_0", 32, 64, 2, 0, 0},
        {"q5_0_tied", 32, 64, 6, 1, 0}, {"gpt2_f32_tied", 8, 0, 0, 1, 1},
        {"gpt2_f16", 8, 0, 1, 0, 1}, {"gpt2_q8_0_tied", 32, 0, 8, 1, 1},
        {"gpt2_f32_llama3", 8, 0, 0, 1, 2},   /* gpt2 2: Llama 3's pre-tokenizer */
        /* rows of 256: 130 KB each, run whole by the replay; libFuzzer, whose inputs for
         * fuzz_gguf stop at 64 KiB (fuzz.sh), starts from their first 64 KiB */
        {"tq2_0", 256, 16, 35, 1, 0}, {"tq1_0", 256, 16, 34, 1, 0}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t size;
        unsigned char *file = files[i].gpt2
            ? tiny_gguf_gpt2(files[i].c, files[i].type, files[i].tied,
                             files[i].gpt2 == 2 ? "llama-bpe" : "gpt-2", &size)
            : tiny_gguf(files[i].c, files[i].n_bytes, files[i].type, files[i].tied, &size);
        put_truncations("fuzz_gguf", files[i].name, file, size, 24);
        char label[FUZZ_PATH_MAX];
        /* the header's version and counts, set to extremes */
        const uint64_t extremes[] = {0, 1, 2, UINT32_MAX, (uint64_t)1 << 40, UINT64_MAX};
        for (size_t at = 4; at < 24; at += at == 4 ? 4 : 8) {
            for (size_t e = 0; e < sizeof extremes / sizeof extremes[0]; e++) {
                unsigned char *copy = need(malloc(size));
                memcpy(copy, file, size);
                memcpy(copy + at, &extremes[e], at == 4 ? 4 : 8);
                snprintf(label, sizeof label, "%s.at%zu_%zu", files[i].name, at, e);
                put("fuzz_gguf", label, copy, size);
                free(copy);
            }
        }
        free(file);
    }
    /* a qwen2 file (biases, its own keys and pre-tokenizer): the test file, 637 KB, whose
     * first 64 KiB hold its metadata and tensor table */
    put_repo_file("fuzz_gguf", "qwen2", "tests/data/gguf_qwen2/q64-qwen2.gguf");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "Usage: make_seeds OUT_DIR\nWrites the fuzz targets' seed corpora "
                "into OUT_DIR/<target>/ (OUT_DIR must exist).\n");
        return 2;
    }
    out_dir = argv[1];
    seed_checkpoints();
    seed_gguf();
    seed_tokenizers();
    seed_texts();
    seed_lines("fuzz_attn_spec", SPECS, sizeof SPECS / sizeof SPECS[0]);
    seed_lines("fuzz_cli", COMMANDS, sizeof COMMANDS / sizeof COMMANDS[0]);
    /* the same command lines with NUL separators */
    char label[FUZZ_PATH_MAX];
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++) {
        size_t len = strlen(COMMANDS[i]);
        char *copy = (char *)need((unsigned char *)malloc(len + 1));
        for (size_t k = 0; k <= len; k++) copy[k] = COMMANDS[i][k] == '\n' ? '\0' : COMMANDS[i][k];
        snprintf(label, sizeof label, "%03zu_nul", i);
        put("fuzz_cli", label, copy, len);
        free(copy);
    }
    printf("make_seeds: %ld seeds in %s\n", written, out_dir);
    return 0;
}

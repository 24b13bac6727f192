/* fuzz_tokenizer_load.c: fuzz target for tokenizer_load on arbitrary bytes, in both
 * formats (llm.c GPT-2, recognised by its magic; llama2.c tokenizer.bin, anything else),
 * and for encoding with whatever vocabulary loads.
 *
 * The bytes go to a per-process temp file. A tokenizer that loads must have consistent
 * offsets and ids, decode every id within its bytes, and encode a few fixed texts and the
 * input's own tail under fuzz_check_encode's contract (GPT-2's exact round trip holds for
 * any vocabulary; Llama's only when its byte tokens are spelled <0xHH> and no other token
 * is). Inputs that start with STRUCTURED_TAG instead list tokens (see build_vocab): the
 * file is valid by construction and must load, so the fuzzer explores vocabularies (the
 * merge loop) rather than the file format; the rest of such an input is the text encoded.
 */
#include <limits.h>      /* CHAR_BIT */
#include <stdio.h>       /* remove, snprintf */
#include <stdlib.h>      /* atexit, malloc, free */
#include <string.h>      /* memcmp, memcpy, memset, strchr, strlen */

#include "tests/fuzz/fuzz.h"   /* the entry points, FUZZ_CHECK, fuzz_check_encode */
#include "tokenizer.h"   /* tokenizer_load, tokenizer_decode, tokenizer_free */

#define TAIL_BYTES 64    /* the input's last bytes are also encoded as text */
#define BYTE_VALUES 256  /* entries of Tokenizer.byte_token */

/* ---- the structured mode: STRUCTURED_TAG, flags, token count, tokens, then the text */
static const unsigned char STRUCTURED_TAG[] = {'T', 'O', 'K', 'S'};   /* as a Llama
                                                   * max_token_length: over the bound */
#define FLAG_LLAMA 1          /* a llama2.c file (else llm.c GPT-2) */
#define FLAG_BYTES 2          /* with the 256 single bytes (GPT-2) or <0xHH> tokens (Llama) */
#define TOKEN_LEN_MAX 32      /* a listed token has 1..32 (GPT-2) or 0..31 (Llama) bytes */
#define LLAMA_SPECIALS 3      /* <unk>, BOS, EOS come first */
#define GPT2_VERSION 2        /* llm.c tokenizer version that stores its sizes */
#define BYTE_TOKEN_LEN 6      /* "<0xHH>" */
enum { HEADER_MAGIC, HEADER_VERSION, HEADER_VOCAB, HEADER_EOT };   /* uint32 fields */

static char input_path[FUZZ_PATH_MAX];

static void remove_temp_file(void) {
    remove(input_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (fuzz_temp_path(input_path, sizeof input_path, "tokenizer") != 0)
        fuzz_fail("temp path too long");
    atexit(remove_temp_file);
    return 0;
}

/* Checks the tables tokenizer.h describes, and decodes every id. */
static void check_loaded(const Tokenizer *t) {
    FUZZ_CHECK(t->vocab_size >= 1 && t->vocab_size <= TOKENIZER_MAX_VOCAB);
    FUZZ_CHECK(t->eot_id >= 0 && t->eot_id < t->vocab_size);
    FUZZ_CHECK(t->kind == TOKENIZER_GPT2 ? t->bos_id == -1
                                         : t->bos_id >= 0 && t->bos_id < t->vocab_size);
    FUZZ_CHECK(t->offset[0] == 0);
    size_t longest = 0;
    for (int id = 0; id < t->vocab_size; id++) {
        FUZZ_CHECK(t->offset[id] <= t->offset[id + 1]);
        size_t len = t->offset[id + 1] - t->offset[id];
        if (len > longest) longest = len;
        FUZZ_CHECK(t->rank[id] >= 0 && t->rank[id] < t->vocab_size);
        size_t got;
        FUZZ_CHECK(tokenizer_decode(t, -1, id, &got) != NULL && got <= len);
        if (t->bos_id >= 0)   /* Llama: after BOS a leading space is dropped */
            FUZZ_CHECK(tokenizer_decode(t, t->bos_id, id, &got) != NULL && got <= len);
    }
    FUZZ_CHECK(longest == t->max_token_len);
    for (int b = 0; b < BYTE_VALUES; b++) {
        int id = t->byte_token[b];
        FUZZ_CHECK(id == -1 || (id >= 0 && id < t->vocab_size &&
                                t->offset[id + 1] - t->offset[id] == 1 &&
                                t->bytes[t->offset[id]] == b));
    }
    size_t got;
    FUZZ_CHECK(tokenizer_decode(t, -1, -1, &got) == NULL && got == 0);
    FUZZ_CHECK(tokenizer_decode(t, -1, t->vocab_size, &got) == NULL && got == 0);
}

/* Little-endian uint32 v at p. */
static void put_u32(unsigned char *p, uint32_t v) {
    for (size_t i = 0; i < sizeof v; i++) p[i] = (unsigned char)(v >> (CHAR_BIT * i));
}

/* 1 if bytes (len) read as a Llama byte token "<0xHH>" (upper-case hex). */
static int spelled_as_byte(const unsigned char *bytes, size_t len) {
    static const char hex[] = "0123456789ABCDEF";
    return len == BYTE_TOKEN_LEN && memcmp(bytes, "<0x", 3) == 0 && bytes[5] == '>' &&
           bytes[3] && bytes[4] && strchr(hex, bytes[3]) && strchr(hex, bytes[4]);
}

/* What a structured input describes. */
typedef struct {
    unsigned char *file;   /* the tokenizer file, malloc'd */
    size_t size;           /* its bytes */
    const unsigned char *text;   /* the rest of the input: the text to encode */
    size_t text_len;
    int llama_flags;       /* what fuzz_check_encode may demand of a Llama vocabulary */
} Vocab;

/* A tokenizer file being written: the next byte, and the longest token so far. */
typedef struct {
    unsigned char *at;
    int llama;
    size_t longest;
} Writer;

/* Appends one token: llama2.c's (score, length, bytes) or llm.c's (length byte, bytes). */
static void put_token(Writer *w, float score, const void *text, size_t len) {
    if (w->llama) {
        memcpy(w->at, &score, sizeof score);
        put_u32(w->at + sizeof score, (uint32_t)len);
        w->at += sizeof score + sizeof(uint32_t);
    } else {
        *w->at++ = (unsigned char)len;
    }
    memcpy(w->at, text, len);
    w->at += len;
    if (len > w->longest) w->longest = len;
}

/* Builds the tokenizer file of a structured input (after the tag): a flags byte, a token
 * count, then per token a length byte (and for Llama a score byte, read as a signed
 * score) and the bytes; tokens cut off by the end are dropped. GPT-2 gets end-of-text
 * last; Llama gets <unk>, BOS, EOS first. Returns 0, or -1 if the input is too short. */
static int build_vocab(const unsigned char *in, size_t n, Vocab *v) {
    static const char *const specials[LLAMA_SPECIALS] = {"<unk>", "\n<s>\n", "\n</s>\n"};
    static const char eot[] = "<|endoftext|>";
    enum { RECORD_HEAD = sizeof(float) + sizeof(uint32_t), SPECIAL_MAX = 8 };
    if (n < 2) return -1;
    int llama = in[0] & FLAG_LLAMA, bytes = (in[0] & FLAG_BYTES) != 0, count = in[1];
    int has_space = 0, byte_spelled = 0;
    size_t pos = 2, listed = 0, head = llama ? 2 : 1;   /* length, then Llama's score */
    /* a bound on the file: header, byte tokens and specials, the listed tokens */
    size_t cap = TOKENIZER_HEADER_INTS * sizeof(uint32_t) + sizeof eot +
                 BYTE_VALUES * (RECORD_HEAD + BYTE_TOKEN_LEN) +
                 LLAMA_SPECIALS * (RECORD_HEAD + SPECIAL_MAX) +
                 (size_t)count * (RECORD_HEAD + TOKEN_LEN_MAX);
    unsigned char *file = calloc(cap, 1);
    if (!file) fuzz_fail("out of memory");
    Writer w = {file + (llama ? sizeof(uint32_t) : TOKENIZER_HEADER_INTS * sizeof(uint32_t)),
                llama, 1};
    for (int s = 0; llama && s < LLAMA_SPECIALS; s++)
        put_token(&w, 0.0f, specials[s], strlen(specials[s]));
    for (int b = 0; bytes && b < BYTE_VALUES; b++) {
        char name[BYTE_TOKEN_LEN + 1];
        unsigned char byte = (unsigned char)b;
        snprintf(name, sizeof name, "<0x%02X>", b);
        if (llama) put_token(&w, 0.0f, name, BYTE_TOKEN_LEN);
        else put_token(&w, 0.0f, &byte, 1);
    }
    for (int i = 0; i < count && pos + head <= n; i++) {
        size_t len = llama ? in[pos] % TOKEN_LEN_MAX : 1 + in[pos] % TOKEN_LEN_MAX;
        float score = llama ? (float)(signed char)in[pos + 1] : 0.0f;
        if (pos + head + len > n) break;
        const unsigned char *token = in + pos + head;
        has_space |= len == 1 && token[0] == ' ';
        byte_spelled |= spelled_as_byte(token, len);
        put_token(&w, score, token, len);
        pos += head + len;
        listed++;
    }
    if (!llama) put_token(&w, 0.0f, eot, strlen(eot));
    int vocab = (llama ? LLAMA_SPECIALS : 1) + (bytes ? BYTE_VALUES : 0) + (int)listed;
    if (llama) {
        put_u32(file, (uint32_t)w.longest);
    } else {
        put_u32(file + HEADER_MAGIC * sizeof(uint32_t), TOKENIZER_MAGIC);
        put_u32(file + HEADER_VERSION * sizeof(uint32_t), GPT2_VERSION);
        put_u32(file + HEADER_VOCAB * sizeof(uint32_t), (uint32_t)vocab);
        put_u32(file + HEADER_EOT * sizeof(uint32_t), (uint32_t)vocab - 1);
    }
    v->file = file;
    v->size = (size_t)(w.at - file);
    v->text = in + pos;
    v->text_len = n - pos;
    /* with well-spelled byte tokens and a " " token, Llama encoding cannot fail; the round
     * trip holds unless a listed token reads as a byte token or the text holds BOS's
     * spelling (a space after BOS is dropped) */
    int bos_in_text = 0;
    for (size_t i = 0; i + strlen("<s>") <= v->text_len; i++)
        bos_in_text |= memcmp(v->text + i, "<s>", strlen("<s>")) == 0;
    v->llama_flags = bytes && has_space ? FUZZ_ENCODE_MUST_SUCCEED : 0;
    if (bytes && !byte_spelled && !bos_in_text) v->llama_flags |= FUZZ_ENCODE_ROUNDTRIP;
    return 0;
}

/* Loads the file at input_path; if it loads (must_load: it has to), checks it and
 * encodes the fixed texts and text (len): GPT-2 with the round trip (it holds for any
 * vocabulary), Llama under llama_flags. */
static void check_file(int must_load, const unsigned char *text, size_t len, int llama_flags) {
    static const char *const texts[] = {
        "", " ", "a", "the cat's hat", "Hello, world!\n\n  x", "caf\xc3\xa9 \xe6\x97\xa5",
        "\xff\xfe", "  \t\n",
    };
    Tokenizer t;
    if (tokenizer_load(&t, input_path) != 0) {
        if (must_load) fuzz_fail("a valid tokenizer file does not load");
        FUZZ_CHECK(t.bytes == NULL && t.offset == NULL && t.table == NULL && t.rank == NULL);
        tokenizer_free(&t);
        return;
    }
    check_loaded(&t);
    int flags = t.kind == TOKENIZER_GPT2 ? FUZZ_ENCODE_ROUNDTRIP : llama_flags;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        fuzz_check_encode(&t, (const unsigned char *)texts[i], strlen(texts[i]), flags);
    if (len > 0) fuzz_check_encode(&t, text, len, flags);
    tokenizer_free(&t);
    tokenizer_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t tag = sizeof STRUCTURED_TAG;
    Vocab v;
    if (size >= tag && memcmp(data, STRUCTURED_TAG, tag) == 0 &&
        build_vocab(data + tag, size - tag, &v) == 0) {
        if (fuzz_write_file(input_path, v.file, v.size) != 0) fuzz_fail("cannot write");
        free(v.file);
        check_file(1, v.text, v.text_len, v.llama_flags);
        return 0;
    }
    if (fuzz_write_file(input_path, data, size) != 0) fuzz_fail("cannot write the input");
    /* a raw Llama file need not spell its byte tokens: it is held to the ids only */
    size_t tail = size < TAIL_BYTES ? size : TAIL_BYTES;
    check_file(0, tail ? data + size - tail : NULL, tail, 0);
    return 0;
}

/* fuzz_util.c: the helpers of fuzz.h: fatal checks, paths, temp files, and writers of
 * tiny valid checkpoints (llm.c GPT-2 fp32/bf16, llama2.c legacy and version 1) and
 * tokenizers (llm.c GPT-2, llama2.c), used by make_seeds.c and fuzz_cli.c.
 *
 * The writers follow the layouts of checkpoint.c's tensor lists and tokenizer.h's file
 * descriptions; the int8 forms come from the project's own checkpoint_save_q8. Nothing
 * here reads a format back or validates it.
 */
#include "tests/fuzz/fuzz.h"

#include <errno.h>       /* errno */
#include <limits.h>      /* CHAR_BIT */
#include <stdarg.h>      /* va_list */
#include <stdio.h>       /* fprintf, snprintf, fopen */
#include <stdlib.h>      /* abort, getenv, malloc, free */
#include <string.h>      /* memcmp, memcpy, memset, strlen, strerror */
#include <sys/stat.h>    /* stat, S_ISREG */
#include <unistd.h>      /* getpid, access */

#include "tokenizer.h"   /* TOKENIZER_MAGIC, TOKENIZER_HEADER_INTS, TOKENIZER_LLAMA_* */

#define BF16_SHIFT 16                 /* bf16 is the top 16 bits of an fp32 */
#define GPT2_MLP_MULT 4               /* GPT-2's MLP is 4C wide */
#define GPT2_LAYER_SQUARES 12         /* C*C weights per layer: qkv 3, proj 1, fc 4, fcproj 4 */
#define GPT2_LAYER_VECTORS 13         /* C-long vectors per layer: ln 4, qkvb 3, projb 1,
                                         fcb 4, fcprojb 1 */
#define GPT2_TOKENIZER_VERSION 2      /* llm.c tokenizer version that stores its sizes */
#define BYTE_VALUES 256               /* byte values, hence single-byte tokens */
#define LLAMA_TOKEN_NAME_MAX 16       /* "<0xHH>" and the special names fit */
/* xorshift64* (Vigna 2014, https://arxiv.org/abs/1402.6246): multiplier and shifts */
#define XORSHIFT_MULT 0x2545F4914F6CDD1DULL
#define XORSHIFT_A 12
#define XORSHIFT_B 25
#define XORSHIFT_C 27
#define UNIT_FLOAT_BITS 24            /* a float in [0, 1) from the top 24 bits */
#define RANDOM_BITS 64                /* bits of each xorshift64* value */

/* ------------------------------------------------------------------------- */
/* Checks, paths and files                                                     */

_Noreturn void fuzz_fail(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "fuzz: ");
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "\n");
    va_end(args);
    fflush(stderr);
    abort();
}

/* snprintf into out that fails (-1) instead of truncating. */
static int join(char *out, size_t cap, const char *a, const char *b) {
    int n = snprintf(out, cap, "%s/%s", a, b);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static const char *repo_root(void) {
    const char *root = getenv("FUZZ_ROOT");
    return root && *root ? root : ".";
}

int fuzz_one_form(const Matrix *m) {
    return (m->f32 != NULL) + (m->f16 != NULL) + (m->q8.q != NULL) == 1;
}

int fuzz_repo_path(char *out, size_t cap, const char *relative) {
    return join(out, cap, repo_root(), relative);
}

int fuzz_shared_path(char *out, size_t cap, const char *relative) {
    const char *shared = getenv("SHARED_DIR");
    char dir[FUZZ_PATH_MAX];
    if (!shared || !*shared) {
        if (join(dir, sizeof dir, repo_root(), FUZZ_SHARED_DEFAULT) != 0) return -1;
        shared = dir;
    }
    return join(out, cap, shared, relative);
}

int fuzz_data_path(char *out, size_t cap, const char *relative) {
    char inner[FUZZ_PATH_MAX];
    if (join(inner, sizeof inner, "tests/data", relative) == 0 &&
        fuzz_repo_path(out, cap, inner) == 0 && fuzz_file_exists(out)) return 0;
    if (join(inner, sizeof inner, "testdata", relative) == 0 &&
        fuzz_shared_path(out, cap, inner) == 0 && fuzz_file_exists(out)) return 0;
    return -1;
}

int fuzz_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

int fuzz_temp_path(char *out, size_t cap, const char *tag) {
    int n = snprintf(out, cap, "%s/fuzz_%s.%ld", FUZZ_TMP_DIR, tag, (long)getpid());
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int fuzz_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "fuzz: %s: cannot create (%s)\n", path, strerror(errno));
        return -1;
    }
    int ok = (size == 0 || fwrite(data, 1, size, f) == size);
    if (fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, "fuzz: %s: write error (%s)\n", path, strerror(errno));
    return ok ? 0 : -1;
}

unsigned char *fuzz_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz: %s: cannot open (%s)\n", path, strerror(errno));
        return NULL;
    }
    unsigned char *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t grown_cap = cap ? 2 * cap : BUFSIZ;
            unsigned char *grown = realloc(data, grown_cap + 1);
            if (!grown) {
                fprintf(stderr, "fuzz: %s: out of memory\n", path);
                free(data);
                fclose(f);
                return NULL;
            }
            data = grown;
            cap = grown_cap;
        }
        size_t got = fread(data + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int error = ferror(f);
    fclose(f);
    if (error) {
        fprintf(stderr, "fuzz: %s: read error\n", path);
        free(data);
        return NULL;
    }
    data[len] = '\0';
    *size = len;
    return data;
}

/* ------------------------------------------------------------------------- */
/* Tokenizer contracts                                                         */

#define UTF8_CONTINUATION_MASK 0xC0   /* continuation bytes are 10xxxxxx */
#define UTF8_CONTINUATION 0x80

/* Checks GPT-2's pre-tokenization: pieces are non-empty and tile text[0 .. len). */
static void check_pieces(const unsigned char *text, size_t len) {
    for (size_t start = 0; start < len;) {
        size_t end = tokenizer_next_piece((const char *)text, len, start);
        FUZZ_CHECK(end > start && end <= len);
        start = end;
    }
    FUZZ_CHECK(tokenizer_next_piece((const char *)text, len, len) == len);
}

/* Checks that ids (n,) decode to want (want_len bytes), as run.c prints them. */
static void check_roundtrip(const Tokenizer *t, const int *ids, size_t n, size_t first,
                            const unsigned char *want, size_t want_len) {
    size_t at = 0;
    for (size_t i = first; i < n; i++) {
        size_t piece_len;
        const unsigned char *piece = tokenizer_decode(t, i ? ids[i - 1] : -1, ids[i],
                                                      &piece_len);
        FUZZ_CHECK(piece != NULL || piece_len == 0);
        if (piece_len > want_len - at || memcmp(piece, want + at, piece_len) != 0)
            fuzz_fail("round trip: token %zu (id %d, %zu bytes) differs from the text at byte "
                      "%zu of %zu", i, ids[i], piece_len, at, want_len);
        at += piece_len;
    }
    if (at != want_len) fuzz_fail("round trip: decoded %zu bytes of %zu", at, want_len);
}

void fuzz_check_encode(const Tokenizer *t, const unsigned char *text, size_t len, int flags) {
    int gpt2 = t->kind == TOKENIZER_GPT2;
    size_t cap = tokenizer_max_ids(t, len), n = 0, needed = 0;   /* run.c's bound */
    if (gpt2) {
        check_pieces(text, len);
        int every_byte = 1;
        for (size_t i = 0; i < len; i++) every_byte &= t->byte_token[text[i]] >= 0;
        if (every_byte) flags |= FUZZ_ENCODE_MUST_SUCCEED;
    }
    int *ids = malloc(cap * sizeof *ids);
    if (!ids) fuzz_fail("out of memory for %zu ids", cap);
    int status = tokenizer_encode(t, (const char *)text, len, ids, cap, &n);
    if (status != 0) {
        FUZZ_CHECK(!(flags & FUZZ_ENCODE_MUST_SUCCEED));
        FUZZ_CHECK(n == 0);   /* more than cap ids would break run.c's buffer bound */
        free(ids);
        return;
    }
    /* without special tokens: an id a byte at most, plus BOS and (Llama) a space; with them
     * (a GGUF vocabulary's), a space a run of text more, and the eot token may be spelled */
    FUZZ_CHECK(n <= (t->n_special ? cap : gpt2 ? len + (size_t)(t->add_bos != 0) : len + 2));
    FUZZ_CHECK(!t->add_bos || (n >= 1 && ids[0] == t->bos_id));
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < t->vocab_size);
        /* (the BOS a vocabulary adds may be the eot token: Llama 3's pre-tokenizer adds one) */
        FUZZ_CHECK(!gpt2 || t->n_special || ids[i] != t->eot_id || (i == 0 && t->add_bos));
    }
    if (n > 0) {   /* one id too few: -1, and the count needed */
        FUZZ_CHECK(tokenizer_encode(t, (const char *)text, len, ids, n - 1, &needed) == -1);
        FUZZ_CHECK(needed == n);
        FUZZ_CHECK(tokenizer_encode(t, (const char *)text, len, ids, n, &needed) == 0);
        FUZZ_CHECK(needed == n);
    }
    if (flags & FUZZ_ENCODE_ROUNDTRIP) {
        if (gpt2) {
            check_roundtrip(t, ids, n, 0, text, len);
        } else {
            /* the dummy-prefix space starts the first token after BOS, where llama2.c drops
             * a space, but for the byte token <0x20>, which prints as one. It comes only
             * where the text starts with continuation bytes: llama2.c groups them with the
             * space, and a group with no token falls back to bytes (a vocabulary may hold
             * the group, and then the space is dropped) */
            static const char space_byte[] = "<0x20>";
            size_t first_len = n > 1 ? t->offset[ids[1] + 1] - t->offset[ids[1]] : 0;
            int continued = len > 0 && (text[0] & UTF8_CONTINUATION_MASK) == UTF8_CONTINUATION;
            int space_kept = continued && first_len == strlen(space_byte) &&
                             memcmp(t->bytes + t->offset[ids[1]], space_byte, first_len) == 0;
            unsigned char *want = malloc(len + 1);
            if (!want) fuzz_fail("out of memory for %zu bytes", len + 1);
            want[0] = ' ';
            if (len) memcpy(want + 1, text, len);
            check_roundtrip(t, ids, n, 1, space_kept ? want : want + 1, len + (size_t)space_kept);
            free(want);
        }
    }
    free(ids);
    if (gpt2) return;
    /* Llama's continuation (-I's lines): no BOS, no space, at most len ids, spelling text */
    int *more = malloc((len + 1) * sizeof *more);
    if (!more) fuzz_fail("out of memory for %zu ids", len + 1);
    status = tokenizer_encode_continuation(t, (const char *)text, len, more, len, &n);
    FUZZ_CHECK(status == 0 || !(flags & FUZZ_ENCODE_MUST_SUCCEED));
    if (status == 0) {
        FUZZ_CHECK(n <= len);
        for (size_t i = 0; i < n; i++) FUZZ_CHECK(more[i] >= 0 && more[i] < t->vocab_size);
        if (flags & FUZZ_ENCODE_ROUNDTRIP) check_roundtrip(t, more, n, 0, text, len);
    }
    free(more);
}

/* ------------------------------------------------------------------------- */
/* Tiny checkpoints                                                            */

/* Next value of a xorshift64* stream; *state must not be 0. */
static uint64_t next_random(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> XORSHIFT_A;
    x ^= x << XORSHIFT_B;
    x ^= x >> XORSHIFT_C;
    *state = x;
    return x * XORSHIFT_MULT;
}

/* Appends n weights uniform in [-1, 1) at out: fp32, or bf16 when bf16. Returns the bytes
 * written. */
static size_t put_weights(unsigned char *out, size_t n, int bf16, uint64_t *state) {
    size_t width = bf16 ? sizeof(uint16_t) : sizeof(float);
    for (size_t i = 0; i < n; i++) {
        uint64_t top = next_random(state) >> (RANDOM_BITS - UNIT_FLOAT_BITS);
        float w = 2.0f * ((float)top / (float)(1UL << UNIT_FLOAT_BITS)) - 1.0f;
        if (bf16) {
            uint32_t bits;
            memcpy(&bits, &w, sizeof bits);
            uint16_t half = (uint16_t)(bits >> BF16_SHIFT);
            memcpy(out + i * width, &half, sizeof half);
        } else {
            memcpy(out + i * width, &w, sizeof w);
        }
    }
    return n * width;
}

unsigned char *fuzz_tiny_gpt2(const Config *c, int bf16, uint64_t seed, size_t *size) {
    size_t C = (size_t)c->dim, L = (size_t)c->n_layers;
    /* wte (Vp, C), wpe (S, C) unless rotary, L layers of 12 C*C matrices and 13 C vectors,
     * lnf w and b */
    size_t wpe = c->positions == MODEL_POSITIONS_ROTARY ? 0 : (size_t)c->seq_len * C;
    size_t floats = (size_t)c->padded_vocab_size * C + wpe +
                    L * (GPT2_LAYER_SQUARES * C * C + GPT2_LAYER_VECTORS * C) + 2 * C;
    size_t header_bytes = CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t);
    size_t width = bf16 ? sizeof(uint16_t) : sizeof(float);
    unsigned char *bytes = malloc(header_bytes + floats * width);
    if (!bytes) return NULL;
    Config full = *c;
    full.hidden_dim = GPT2_MLP_MULT * c->dim;
    int32_t header[CHECKPOINT_GPT2_HEADER_INTS];
    checkpoint_gpt2_header(header, &full, bf16 ? CHECKPOINT_GPT2_BF16 : CHECKPOINT_GPT2_FP32, 0);
    memcpy(bytes, header, header_bytes);
    uint64_t state = seed | 1u;
    *size = header_bytes + put_weights(bytes + header_bytes, floats, bf16, &state);
    return bytes;
}

unsigned char *fuzz_tiny_llama(const Config *c, int legacy, int shared, uint64_t seed,
                               size_t *size) {
    size_t C = (size_t)c->dim, L = (size_t)c->n_layers, Hd = (size_t)c->hidden_dim;
    size_t V = (size_t)c->vocab_size, HS = C / (size_t)c->n_heads;
    size_t KVD = (size_t)c->n_kv_heads * HS;
    /* two norms per layer, the final norm, the embedding, wq wk wv wo w1 w2 w3, and the
     * classifier unless shared; legacy files also hold RoPE tables (S, HS) */
    size_t floats = 2 * L * C + C + V * C + L * (2 * C * C + 2 * KVD * C + 3 * Hd * C) +
                    (shared ? 0 : V * C) + (legacy ? (size_t)c->seq_len * HS : 0);
    size_t header_bytes = legacy ? CHECKPOINT_LLAMA_LEGACY_INTS * sizeof(int32_t)
                                 : CHECKPOINT_LLAMA_HEADER_BYTES;
    unsigned char *bytes = calloc(header_bytes + floats * sizeof(float), 1);
    if (!bytes) return NULL;
    int32_t fields[CHECKPOINT_LLAMA_LEGACY_INTS] = {
        c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads,
        legacy && !shared ? -c->vocab_size : c->vocab_size, c->seq_len};
    if (legacy) {
        memcpy(bytes, fields, sizeof fields);
    } else {   /* magic, version, the 7 fields, the shared-classifier byte, zeros */
        int32_t head[2] = {(int32_t)CHECKPOINT_LLAMA_MAGIC, CHECKPOINT_LLAMA_FP32};
        memcpy(bytes, head, sizeof head);
        memcpy(bytes + sizeof head, fields, sizeof fields);
        bytes[sizeof head + sizeof fields] = (unsigned char)(shared ? 1 : 0);
    }
    uint64_t state = seed | 1u;
    *size = header_bytes + put_weights(bytes + header_bytes, floats, 0, &state);
    return bytes;
}

int fuzz_write_q8(const char *in, const char *out, int group) {
    Checkpoint ck;
    if (checkpoint_load(&ck, in) != 0) return -1;
    int status = checkpoint_save_q8(&ck, out, group);
    checkpoint_free(&ck);
    return status;
}

/* ------------------------------------------------------------------------- */
/* Tiny tokenizers                                                             */

/* Merges of both tiny tokenizers, in priority order. */
static const char *const MERGES[] = {
    "th", "he", "in", "er", "an", " t", " a", "the", " the", "ou", "  ", "\n\n", "'s", "ll",
};
enum { N_MERGES = sizeof MERGES / sizeof MERGES[0] };
static const char GPT2_EOT_TEXT[] = "<|endoftext|>";
/* The header fields of llm.c's tokenizer file (uint32 each), as tokenizer.h lists them. */
enum { TOK_MAGIC, TOK_VERSION, TOK_VOCAB, TOK_EOT };

/* Little-endian uint32 v at p. */
static void put_u32(unsigned char *p, uint32_t v) {
    for (size_t i = 0; i < sizeof v; i++) p[i] = (unsigned char)(v >> (CHAR_BIT * i));
}

unsigned char *fuzz_tiny_gpt2_tokenizer(size_t *size) {
    size_t header = TOKENIZER_HEADER_INTS * sizeof(uint32_t), data = 2 * BYTE_VALUES;
    for (int m = 0; m < N_MERGES; m++) data += 1 + strlen(MERGES[m]);
    data += 1 + strlen(GPT2_EOT_TEXT);
    unsigned char *bytes = calloc(header + data, 1);
    if (!bytes) return NULL;
    uint32_t vocab = BYTE_VALUES + N_MERGES + 1;
    put_u32(bytes + TOK_MAGIC * sizeof(uint32_t), TOKENIZER_MAGIC);
    put_u32(bytes + TOK_VERSION * sizeof(uint32_t), GPT2_TOKENIZER_VERSION);
    put_u32(bytes + TOK_VOCAB * sizeof(uint32_t), vocab);
    put_u32(bytes + TOK_EOT * sizeof(uint32_t), vocab - 1);   /* end-of-text is the last */
    unsigned char *p = bytes + header;
    for (int b = 0; b < BYTE_VALUES; b++) {
        *p++ = 1;
        *p++ = (unsigned char)b;
    }
    for (int m = 0; m <= N_MERGES; m++) {
        const char *text = m < N_MERGES ? MERGES[m] : GPT2_EOT_TEXT;
        size_t len = strlen(text);
        *p++ = (unsigned char)len;
        memcpy(p, text, len);
        p += len;
    }
    *size = header + data;
    return bytes;
}

/* Appends one llama2.c record (score, length, bytes) at *p. */
static void put_llama_token(unsigned char **p, float score, const char *text, size_t len) {
    uint32_t bits;
    memcpy(&bits, &score, sizeof bits);
    put_u32(*p, bits);
    put_u32(*p + sizeof bits, (uint32_t)len);
    memcpy(*p + 2 * sizeof bits, text, len);
    *p += 2 * sizeof bits + len;
}

unsigned char *fuzz_tiny_llama_tokenizer(size_t *size, int *vocab) {
    static const char *const special[] = {"<unk>", "\n<s>\n", "\n</s>\n"};
    static const char letters[] = " abcdefghijklmnopqrstuvwxyz";
    enum { N_SPECIAL = sizeof special / sizeof special[0], N_LETTERS = sizeof letters - 1,
           RECORD = sizeof(float) + sizeof(int32_t) };   /* score, length */
    size_t cap = sizeof(uint32_t) + (size_t)(N_SPECIAL + BYTE_VALUES + N_LETTERS + N_MERGES) *
                 (RECORD + LLAMA_TOKEN_NAME_MAX);
    unsigned char *bytes = malloc(cap), *p = bytes;
    if (!bytes) return NULL;
    size_t max_len = 0;
    p += sizeof(uint32_t);   /* max_token_length, filled in at the end */
    float score = 0.0f;
    for (int s = 0; s < N_SPECIAL; s++) {
        put_llama_token(&p, score, special[s], strlen(special[s]));
        if (strlen(special[s]) > max_len) max_len = strlen(special[s]);
    }
    for (int b = 0; b < BYTE_VALUES; b++) {
        char name[LLAMA_TOKEN_NAME_MAX];
        int n = snprintf(name, sizeof name, "<0x%02X>", b);
        put_llama_token(&p, score, name, (size_t)n);
        if ((size_t)n > max_len) max_len = (size_t)n;
    }
    for (int i = 0; i < N_LETTERS + N_MERGES; i++) {   /* later tokens score lower */
        const char *text = i < N_LETTERS ? &letters[i] : MERGES[i - N_LETTERS];
        size_t len = i < N_LETTERS ? 1 : strlen(text);
        score -= 1.0f;
        put_llama_token(&p, score, text, len);
        if (len > max_len) max_len = len;
    }
    put_u32(bytes, (uint32_t)max_len);
    *size = (size_t)(p - bytes);
    *vocab = N_SPECIAL + BYTE_VALUES + N_LETTERS + N_MERGES;
    return bytes;
}

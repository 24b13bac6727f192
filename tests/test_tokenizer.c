/* test_tokenizer.c: tests for tokenizer.c (GPT-2 byte-level BPE) and unicode.c.
 *
 * Reference ids: tests/data/gpt2/tokenizer_cases.jsonl (check_data_file: SHARED/testdata
 * when tests/data lacks it), 62 texts encoded by js-tiktoken@1.0.21
 * getEncoding('gpt2').encode(text, [], []) (each line names its library and call), with
 * the vocabulary tests/data/gpt2/gpt2_tokenizer.bin (its generator command is in
 * gpt2_tokenizer.json). Everything else uses small tokenizer files that this
 * test writes into a mkdtemp directory, so it runs without the shared data too.
 * Run: make build/tests/test_tokenizer && ./build/tests/test_tokenizer
 */
#include "../tokenizer.h"

#include <stdint.h>   /* uint32_t, uint64_t */
#include <stdio.h>    /* printf, snprintf, fopen, fwrite, remove */
#include <stdlib.h>   /* malloc, free, strtol, mkdtemp */
#include <string.h>   /* memchr, memcmp, memcpy, memset, strlen, strstr */
#include <time.h>     /* clock_gettime, CLOCK_MONOTONIC */
#include <unistd.h>   /* rmdir */

#include "../unicode/unicode.h"  /* unicode_utf8_next, unicode_utf8_length, unicode_is_* */
#include "check.h"       /* check_true, check_skip, check_summary, check_shared_dir */

#define REFERENCE_CASES 62   /* the lines of tokenizer_cases.jsonl */
#define MAX_PATH 4096
#define RANDOM_SEED 0x5EEDF00DULL   /* fixed: the random strings are the same every run */
#define RANDOM_STRINGS 400          /* random byte strings per tokenizer */
#define RANDOM_MAX_LEN 300          /* longest random string, in bytes */
#define LONG_PIECE 100000           /* bytes in the one-piece stress strings */
#define MAX_PIECES 16               /* pieces in the hand-written pre-tokenizer cases */

/* ---------------------------------------------------------------- helpers */

/* splitmix64 (Steele, Lea, Flood 2014; https://prng.di.unimi.it/splitmix64.c). */
static uint64_t random_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static size_t random_below(uint64_t *state, size_t n) {
    return (size_t)(random_next(state) % n);
}

static double seconds_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* Write text into out (cap >= 5) with non-printing bytes as \xNN, truncated to fit. */
static const char *escaped(const char *text, size_t len, char *out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < len && n + 5 < cap; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c >= 0x20 && c < 0x7F && c != '\\') out[n++] = (char)c;
        else n += (size_t)snprintf(out + n, cap - n, "\\x%02X", c);
    }
    out[n] = '\0';
    return out;
}

/* Encode text, then decode every id and compare the bytes with the text. Returns 1 if
 * they match and every id is a valid non-eot id; *n_ids receives the id count. */
static int round_trips(const Tokenizer *t, const char *text, size_t len, size_t *n_ids) {
    int *ids = malloc((len + 1) * sizeof *ids);   /* never more ids than bytes */
    unsigned char *back = malloc(len + 1);
    int ok = 0;
    *n_ids = 0;
    if (!ids || !back) goto done;
    if (tokenizer_encode(t, text, len, ids, len + 1, n_ids) != 0) goto done;
    size_t at = 0;
    for (size_t i = 0; i < *n_ids; i++) {
        size_t token_len;
        const unsigned char *bytes = tokenizer_decode(t, -1, ids[i], &token_len);
        if (!bytes || ids[i] == t->eot_id || token_len > len - at) goto done;
        memcpy(back + at, bytes, token_len);
        at += token_len;
    }
    ok = at == len && memcmp(back, text, len) == 0;
done:
    free(ids);
    free(back);
    return ok;
}

/* Encode text and compare with the expected ids; on a mismatch print the first one. */
static int encodes_to(const Tokenizer *t, const char *text, const int *want, size_t n_want) {
    int ids[64];
    size_t n_ids = 0;
    if (tokenizer_encode(t, text, strlen(text), ids, 64, &n_ids) != 0) return 0;
    for (size_t i = 0; i < n_ids && i < n_want; i++) {
        if (ids[i] != want[i]) {
            printf("  at %zu: got %d, want %d\n", i, ids[i], want[i]);
            return 0;
        }
    }
    if (n_ids != n_want) printf("  got %zu ids, want %zu\n", n_ids, n_want);
    return n_ids == n_want;
}

/* ---------------------------------------------------------------- tokenizer files */

static void put_u32_le(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

/* Build a tokenizer file image in buf: the header, then tokens[i] (n_bytes[i] bytes,
 * which may be 0 to make a corrupt file). Returns the size, or 0 if cap is too small. */
static size_t build_file(unsigned char *buf, size_t cap, uint32_t magic, uint32_t version,
                         uint32_t vocab_size, uint32_t eot_id, const char *const *tokens,
                         const size_t *n_bytes, size_t n_tokens) {
    size_t size = TOKENIZER_HEADER_INTS * 4;
    if (cap < size) return 0;
    memset(buf, 0, size);
    put_u32_le(buf, magic);
    put_u32_le(buf + 4, version);
    put_u32_le(buf + 8, vocab_size);
    put_u32_le(buf + 12, eot_id);
    for (size_t i = 0; i < n_tokens; i++) {
        if (size + 1 + n_bytes[i] > cap) return 0;
        buf[size++] = (unsigned char)n_bytes[i];
        memcpy(buf + size, tokens[i], n_bytes[i]);
        size += n_bytes[i];
    }
    return size;
}

static int write_file(const char *path, const unsigned char *data, size_t size) {
    FILE *file = fopen(path, "wb");
    if (!file) return -1;
    size_t wrote = fwrite(data, 1, size, file);
    return (fclose(file) == 0 && wrote == size) ? 0 : -1;
}

/* The synthetic vocabulary: ids 0..255 are the single bytes, then a few merges chosen so
 * the expected encodings are obvious, and "zz" as end-of-text (so it must never appear). */
enum { SYN_AA = 256, SYN_AAAA, SYN_BC, SYN_AB, SYN_EOT, SYN_VOCAB };

static size_t build_synthetic(unsigned char *buf, size_t cap) {
    char singles[256];
    const char *tokens[SYN_VOCAB];
    size_t n_bytes[SYN_VOCAB];
    for (int b = 0; b < 256; b++) {
        singles[b] = (char)b;
        tokens[b] = &singles[b];
        n_bytes[b] = 1;
    }
    const char *merges[] = {"aa", "aaaa", "bc", "ab", "zz"};
    for (int i = 0; i < SYN_VOCAB - 256; i++) {
        tokens[256 + i] = merges[i];
        n_bytes[256 + i] = strlen(merges[i]);
    }
    return build_file(buf, cap, TOKENIZER_MAGIC, 2, SYN_VOCAB, SYN_EOT, tokens, n_bytes,
                      SYN_VOCAB);
}

/* ---------------------------------------------------------------- unicode classes */

static void test_unicode(void) {
    static const struct { uint32_t cp; int letter, number, space; const char *what; } cases[] = {
        {'a', 1, 0, 0, "'a'"},                  {'Z', 1, 0, 0, "'Z'"},
        {0x00E9, 1, 0, 0, "U+00E9 e-acute"},    {0x4E2D, 1, 0, 0, "U+4E2D CJK"},
        {0x00AA, 1, 0, 0, "U+00AA ordinal"},    {0x0301, 0, 0, 0, "U+0301 combining"},
        {'5', 0, 1, 0, "'5'"},                  {0x0661, 0, 1, 0, "U+0661 Arabic one"},
        {0x2167, 0, 1, 0, "U+2167 Roman VIII"}, {0x00BD, 0, 1, 0, "U+00BD one half"},
        {0x00B2, 0, 1, 0, "U+00B2 superscript"}, {0x2460, 0, 1, 0, "U+2460 circled 1"},
        {' ', 0, 0, 1, "' '"},                  {'\t', 0, 0, 1, "TAB"},
        {'\n', 0, 0, 1, "LF"},                  {0x000B, 0, 0, 1, "VT"},
        {0x00A0, 0, 0, 1, "U+00A0 nbsp"},       {0x0085, 0, 0, 0, "U+0085 NEL"},
        {0x001C, 0, 0, 0, "U+001C"},            {0x200B, 0, 0, 0, "U+200B zero width"},
        {0x2028, 0, 0, 1, "U+2028"},            {0x3000, 0, 0, 1, "U+3000"},
        {0xFEFF, 0, 0, 1, "U+FEFF BOM"},        {'!', 0, 0, 0, "'!'"},
        {0x1F600, 0, 0, 0, "U+1F600 emoji"},    {0x110000, 0, 0, 0, "above U+10FFFF"},
        {0xFFFFFFFFu, 0, 0, 0, "0xFFFFFFFF"},
        /* the last letter range, CJK extension G (Lo in Python 3.11's unicodedata, Unicode
         * 14.0.0), and the unassigned code point after it (Cn) */
        {0x30000, 1, 0, 0, "U+30000 CJK ext. G"}, {0x3134A, 1, 0, 0, "U+3134A its last"},
        {0x3134B, 0, 0, 0, "U+3134B unassigned"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int letter = unicode_is_letter(cases[i].cp), number = unicode_is_number(cases[i].cp);
        int space = unicode_is_space(cases[i].cp);
        if (letter != cases[i].letter || number != cases[i].number || space != cases[i].space) {
            printf("  %s: got letter %d number %d space %d, want %d %d %d\n", cases[i].what,
                   letter, number, space, cases[i].letter, cases[i].number, cases[i].space);
            bad++;
        }
    }
    check_true(bad == 0, "unicode classes of %zu spot-check code points",
               sizeof cases / sizeof cases[0]);
}

/* UTF-8 of code point cp (a scalar value) into out; returns its length. */
static size_t utf8_encode(uint32_t cp, unsigned char out[4]) {
    if (cp < 0x80) { out[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | cp >> 6);
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | cp >> 12);
        out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | cp >> 18);
    out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* unicode_utf8_next on the edges of Unicode's Table 3-7 (each ill-formed sequence decodes
 * as one invalid byte), every scalar value round-tripped, and unicode_utf8_length on
 * every byte. */
static void test_utf8(void) {
    static const struct { const char *bytes; size_t n; uint32_t cp; size_t len; } cases[] = {
        {"A", 1, 'A', 1},                        {"\xC3\xA9", 2, 0xE9, 2},
        {"\xE0\xA0\x80", 3, 0x800, 3},           {"\xE4\xB8\xAD", 3, 0x4E2D, 3},
        {"\xEF\xBF\xBF", 3, 0xFFFF, 3},          {"\xF0\x90\x80\x80", 4, 0x10000, 4},
        {"\xF4\x8F\xBF\xBF", 4, 0x10FFFF, 4},    {"\xC3\xA9Z", 3, 0xE9, 2},
        {"\x80", 1, UNICODE_INVALID, 1},         {"\xC0\x80", 2, UNICODE_INVALID, 1},
        {"\xC1\xBF", 2, UNICODE_INVALID, 1},     {"\xE0\x80\x80", 3, UNICODE_INVALID, 1},
        {"\xE0\x9F\xBF", 3, UNICODE_INVALID, 1}, {"\xED\xA0\x80", 3, UNICODE_INVALID, 1},
        {"\xED\xBF\xBF", 3, UNICODE_INVALID, 1}, {"\xF0\x8F\xBF\xBF", 4, UNICODE_INVALID, 1},
        {"\xF4\x90\x80\x80", 4, UNICODE_INVALID, 1}, {"\xF5\x80\x80\x80", 4, UNICODE_INVALID, 1},
        {"\xFF", 1, UNICODE_INVALID, 1},         {"\xC3", 1, UNICODE_INVALID, 1},
        {"\xE4\xB8", 2, UNICODE_INVALID, 1},     {"\xC3\x41", 2, UNICODE_INVALID, 1},
        {"\xF0\x9F\x98\x41", 4, UNICODE_INVALID, 1},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t cp = 0;
        size_t len = unicode_utf8_next((const unsigned char *)cases[i].bytes, cases[i].n, &cp);
        if (cp != cases[i].cp || len != cases[i].len) {
            printf("  case %zu: got U+%04X length %zu, want U+%04X length %zu\n", i,
                   (unsigned)cp, len, (unsigned)cases[i].cp, cases[i].len);
            bad++;
        }
    }
    check_true(bad == 0, "unicode_utf8_next: %zu sequences at the edges of Table 3-7",
               sizeof cases / sizeof cases[0]);

    long wrong = 0;
    for (uint32_t cp = 0; cp <= UNICODE_MAX; cp++) {
        if (cp == UNICODE_SURROGATE_FIRST) cp = UNICODE_SURROGATE_LAST + 1;
        unsigned char bytes[4];
        uint32_t got = 0;
        size_t n = utf8_encode(cp, bytes);
        if (unicode_utf8_next(bytes, n, &got) != n || got != cp) wrong++;
    }
    check_true(wrong == 0, "unicode_utf8_next decodes every scalar value's UTF-8 (%ld wrong)",
               wrong);

    int count[5] = {0};
    for (int b = 0; b < 256; b++) count[unicode_utf8_length((unsigned char)b)]++;
    check_true(count[0] == 77 && count[1] == 128 && count[2] == 30 && count[3] == 16 &&
               count[4] == 5, "unicode_utf8_length: 128 ASCII, 30/16/5 leads of 2/3/4 bytes, "
               "77 bytes that start nothing (got %d, %d/%d/%d, %d)", count[1], count[2],
               count[3], count[4], count[0]);
}

/* ---------------------------------------------------------------- pre-tokenization */

static void test_next_piece(void) {
    /* text, then its pieces; NULL ends the list */
    static const char *const cases[][MAX_PIECES] = {
        {"Hello world", "Hello", " world", NULL},
        {"a   b", "a", "  ", " b", NULL},
        {"it's", "it", "'s", NULL},
        {"x\n\n", "x", "\n\n", NULL},
        {"I'M don't 'll've", "I", "'", "M", " don", "'t", " '", "ll", "'ve", NULL},
        {"a\n\nb", "a", "\n", "\n", "b", NULL},
        {"x \t y", "x", " \t", " y", NULL},
        {"hi  ", "hi", "  ", NULL},
        {" ", " ", NULL},
        {"abc123def 45 !!", "abc", "123", "def", " 45", " !!", NULL},
        {"ab\xFF\xFE" "cd", "ab", "\xFF\xFE", "cd", NULL},          /* invalid bytes */
        {" \xE4\xB8", " \xE4\xB8", NULL},                           /* cut-off sequence */
        {"\xED\xA0\x80z", "\xED\xA0\x80", "z", NULL},               /* a surrogate */
        {"\xC0\xAFq", "\xC0\xAF", "q", NULL},                       /* overlong '/' */
        {"e\xCC\x81", "e", "\xCC\x81", NULL},                       /* combining mark */
        {"caf\xC3\xA9 1\xC2\xBD", "caf\xC3\xA9", " 1\xC2\xBD", NULL}, /* letter, number */
        {"\xC2\xA0x", "\xC2\xA0", "x", NULL},                       /* nbsp */
        {"a\xC2\x85" "b", "a", "\xC2\x85", "b", NULL},              /* NEL is not space */
        {"a\0b", "a", "\0", "b", NULL},
    };
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *text = cases[c][0];
        /* "a\0b" is the only text with a NUL: its length comes from its pieces */
        size_t len = 0;
        for (int p = 1; cases[c][p]; p++) len += strlen(cases[c][p]) ? strlen(cases[c][p]) : 1;
        size_t start = 0;
        int p = 1;
        for (; start < len && cases[c][p]; p++) {
            size_t want_len = strlen(cases[c][p]) ? strlen(cases[c][p]) : 1;
            size_t end = tokenizer_next_piece(text, len, start);
            if (end != start + want_len || memcmp(text + start, cases[c][p], want_len) != 0) {
                char show_text[128], show_want[64];
                printf("  \"%s\": piece %d at %zu: got end %zu, want \"%s\" (end %zu)\n",
                       escaped(text, len, show_text, sizeof show_text), p, start, end,
                       escaped(cases[c][p], want_len, show_want, sizeof show_want),
                       start + want_len);
                bad++;
                break;
            }
            start = end;
        }
        if (start == len && cases[c][p]) { printf("  case %zu: too few pieces\n", c); bad++; }
    }
    check_true(bad == 0, "tokenizer_next_piece splits %zu hand-written strings as expected",
               sizeof cases / sizeof cases[0]);
}

/* Llama 3's pieces (tokenizer_next_piece_llama3): each text split as Python's regex module
 * splits it with the pattern tokenizer.h gives (llama.cpp's Llama 3 pattern):
 * python3 -c 'import regex; print(regex.findall(PATTERN, TEXT))'. */
static void test_next_piece_llama3(void) {
    static const char *const cases[][MAX_PIECES] = {
        {"'Sure", "'S", "ure", NULL},                  /* contractions in any case */
        {"x'VE'd", "x", "'VE", "'d", NULL},
        {"!\n\nA", "!\n\n", "A", NULL},                /* punctuation takes its newlines */
        {"a?!\r\n\nb", "a", "?!\r\n\n", "b", NULL},
        {" \n  b", " \n", " ", " b", NULL},            /* spaces up to the last newline */
        {"  \n\n x", "  \n\n", " x", NULL},
        {"9876543 z", "987", "654", "3", " z", NULL},  /* numbers in threes */
        {"\t\n", "\t\n", NULL},
    };
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *text = cases[c][0];
        size_t len = strlen(text), start = 0;
        for (int p = 1; cases[c][p]; p++) {
            size_t want = strlen(cases[c][p]);
            size_t end = tokenizer_next_piece_llama3(text, len, start, 3);
            if (end != start + want) {
                char show[64];
                printf("  \"%s\": piece %d at %zu: got end %zu, want %zu\n",
                       escaped(text, len, show, sizeof show), p, start, end, start + want);
                bad++;
                break;
            }
            start = end;
        }
    }
    check_true(bad == 0, "tokenizer_next_piece_llama3 splits %zu strings as Python's regex "
               "module splits them with Llama 3's pattern", sizeof cases / sizeof cases[0]);
    /* Qwen2's pattern (\p{N} for \p{N}{1,3}), by the same Python module: every digit alone,
     * the rest as Llama 3's */
    static const char *const qwen2[] = {"9", "8", "7", "6", " z", "'RE", NULL};
    const char *text = "9876 z'RE";
    size_t len = strlen(text), start = 0;
    int ok = 1;
    for (int p = 0; qwen2[p] && ok; p++) {
        size_t end = tokenizer_next_piece_llama3(text, len, start, 1);
        ok = end == start + strlen(qwen2[p]);
        start = end;
    }
    check_true(ok && start == len, "tokenizer_next_piece_llama3 with digits 1 splits \"%s\" "
               "as Qwen2's pattern does", text);
}

/* ---------------------------------------------------------------- merging */

static void test_synthetic(const char *dir) {
    char path[MAX_PATH];
    unsigned char buf[4096];
    Tokenizer t;
    snprintf(path, sizeof path, "%s/synthetic.bin", dir);
    size_t size = build_synthetic(buf, sizeof buf);
    if (!check_true(size > 0 && write_file(path, buf, size) == 0, "write %s", path)) return;
    if (!check_true(tokenizer_load(&t, path) == 0, "load the synthetic tokenizer")) return;

    static const int aaa[] = {SYN_AA, 'a'}, aaaa[] = {SYN_AAAA}, aaaaa[] = {SYN_AAAA, 'a'};
    static const int abc[] = {'a', SYN_BC}, zz[] = {'z', 'z'}, words[] = {'a', SYN_BC, ' ', 'x'};
    check_true(encodes_to(&t, "aaa", aaa, 2), "merge the leftmost of equal pairs: aaa = aa a");
    check_true(encodes_to(&t, "aaaa", aaaa, 1), "a piece that is a token is taken whole");
    check_true(encodes_to(&t, "aaaaa", aaaaa, 2), "merged tokens merge again: aaaaa = aaaa a");
    check_true(encodes_to(&t, "abc", abc, 2), "the lowest id merges first: abc = a bc");
    check_true(encodes_to(&t, "zz", zz, 2), "the eot token's bytes are never merged into eot");
    check_true(encodes_to(&t, "abc x", words, 4), "pieces merge separately: \"abc\" \" x\"");

    size_t n_ids = 0;
    int ids[4];
    int rc = tokenizer_encode(&t, "aaaaa", 5, ids, 1, &n_ids);
    check_true(rc == -1 && n_ids == 2,
               "encode with too small a cap fails and reports the count needed (%zu)", n_ids);
    check_true(tokenizer_encode(&t, "", 0, ids, 0, &n_ids) == 0 && n_ids == 0,
               "encode of empty text gives no ids");
    size_t len = 99;
    check_true(tokenizer_decode(&t, -1, SYN_VOCAB, &len) == NULL && len == 0 &&
               tokenizer_decode(&t, -1, -1, &len) == NULL, "decode rejects ids outside the vocab");
    tokenizer_free(&t);
    tokenizer_free(&t);
    remove(path);
}

/* Random byte strings, built from segments of raw bytes, ASCII words, valid multi-byte
 * UTF-8, whitespace runs and broken sequences, must encode and decode to themselves. */
static void test_random_round_trip(const Tokenizer *t, const char *what) {
    static const char *const fragments[] = {
        " ", "  ", "\t", "\n", "\r\n", "\xC2\xA0", "\xE3\x80\x80", "\xEF\xBB\xBF",   /* space */
        "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80", "\xD9\xA1", "\xE2\x85\xA7",  /* valid */
        "'s", "'ll", "'", "!!", "123", "the", " the", "Hello",
        "\x80", "\xBF", "\xC0\x80", "\xC1", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80",
        "\xF5", "\xFF", "\xE4\xB8", "\xF0\x9F\x98", "\0",                          /* invalid */
    };
    uint64_t state = RANDOM_SEED;
    char text[RANDOM_MAX_LEN + 8];
    int bad = 0;
    size_t total_bytes = 0, total_ids = 0;
    for (int s = 0; s < RANDOM_STRINGS; s++) {
        size_t target = random_below(&state, RANDOM_MAX_LEN + 1), len = 0;
        while (len < target) {
            size_t mode = random_below(&state, 3);
            if (mode == 0) {   /* any byte, 0x00 included */
                text[len++] = (char)random_below(&state, 256);
            } else if (mode == 1) {   /* an ASCII letter or digit */
                text[len++] = "abcxyzABC019 .,"[random_below(&state, 15)];
            } else {
                const char *f = fragments[random_below(&state, sizeof fragments /
                                                               sizeof fragments[0])];
                size_t n = strlen(f) ? strlen(f) : 1;   /* "" stands for one 0x00 byte */
                if (len + n > RANDOM_MAX_LEN) break;
                memcpy(text + len, f, n);
                len += n;
            }
        }
        // the pieces must tile the text
        for (size_t start = 0; start < len;) {
            size_t end = tokenizer_next_piece(text, len, start);
            if (end <= start || end > len) { bad++; printf("  bad piece end %zu\n", end); break; }
            start = end;
        }
        size_t n_ids;
        if (!round_trips(t, text, len, &n_ids)) {
            char show[256];
            printf("  string %d does not round-trip: \"%s\"\n", s,
                   escaped(text, len, show, sizeof show));
            bad++;
        }
        total_bytes += len;
        total_ids += n_ids;
    }
    check_true(bad == 0, "%s: %d random strings (%zu bytes, %zu ids) encode and decode back",
               what, RANDOM_STRINGS, total_bytes, total_ids);
}

/* One piece of LONG_PIECE bytes must merge fast (the heap keeps this O(n log n)). */
static void test_long_pieces(const Tokenizer *t, const char *what) {
    char *text = malloc(LONG_PIECE + 2);
    if (!check_true(text != NULL, "allocate the long strings")) return;
    static const char fill[] = {' ', 'a', '\xFF', '\n'};
    for (size_t f = 0; f < sizeof fill; f++) {
        memset(text, fill[f], LONG_PIECE);
        text[LONG_PIECE] = 'b';   /* a word after the run exercises the whitespace backtrack */
        size_t n_ids;
        double start = seconds_now();
        int ok = round_trips(t, text, LONG_PIECE + 1, &n_ids);
        double seconds = seconds_now() - start;
        check_true(ok, "%s: %d x 0x%02X + 'b' round-trips (%zu ids, %.3f s)", what, LONG_PIECE,
                   (unsigned char)fill[f], n_ids, seconds);
    }
    free(text);
}

/* ---------------------------------------------------------------- loader failures */

static void expect_load_failure(const char *path, const char *what) {
    Tokenizer t;
    int rc = tokenizer_load(&t, path);
    int zeroed = t.bytes == NULL && t.offset == NULL && t.table == NULL && t.vocab_size == 0;
    tokenizer_free(&t);
    tokenizer_free(&t);   /* a second free must be harmless too */
    check_true(rc == -1 && zeroed, "load fails on %s (returned %d)", what, rc);
}

static void test_load_failures(const char *dir) {
    const char *tokens[] = {"a", "b", "<eot>", ""};
    const size_t n_bytes[] = {1, 1, 5, 0};
    const size_t zero_length[] = {1, 0, 5};
    unsigned char buf[2048];
    char path[MAX_PATH];
    Tokenizer t = {0};
    snprintf(path, sizeof path, "%s/small.bin", dir);

    // a valid three-token file first, so the failures below are caused by the one change
    size_t size = build_file(buf, sizeof buf, TOKENIZER_MAGIC, 2, 3, 2, tokens, n_bytes, 3);
    int loaded = write_file(path, buf, size) == 0 && tokenizer_load(&t, path) == 0;
    check_true(loaded && t.vocab_size == 3 && t.eot_id == 2, "a valid 3-token file loads");
    if (loaded) {
        int ids[4];
        size_t n_ids = 99;
        check_true(tokenizer_encode(&t, "abc", 3, ids, 4, &n_ids) == -1 && n_ids == 0,
                   "encode fails on a byte without a single-byte token ('c')");
    }
    tokenizer_free(&t);

    char missing[MAX_PATH];
    snprintf(missing, sizeof missing, "%s/no_such_file.bin", dir);
    expect_load_failure(missing, "a missing file");

    struct { const char *what; size_t size; } cut[] = {
        {"a truncated last token", size - 1}, {"a truncated token list", size - 6},
        {"a short header", 10}, {"an empty file", 0},
    };
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        write_file(path, buf, cut[i].size);
        expect_load_failure(path, cut[i].what);
    }
    buf[size] = 'x';
    write_file(path, buf, size + 1);
    expect_load_failure(path, "one trailing byte");

    struct { const char *what; uint32_t magic, version, vocab, eot; } headers[] = {
        {"a wrong magic", TOKENIZER_MAGIC + 1, 2, 3, 2},
        {"an unknown version 3", TOKENIZER_MAGIC, 3, 3, 2},
        {"version 0", TOKENIZER_MAGIC, 0, 3, 2},
        {"vocab_size 0", TOKENIZER_MAGIC, 2, 0, 0},
        {"vocab_size above the limit", TOKENIZER_MAGIC, 2, TOKENIZER_MAX_VOCAB + 1u, 2},
        {"eot id == vocab_size", TOKENIZER_MAGIC, 2, 3, 3},
        {"version 1 (implies 50257 tokens) with 3", TOKENIZER_MAGIC, 1, 3, 2},
        {"vocab_size 2 with 3 tokens stored", TOKENIZER_MAGIC, 2, 2, 1},
    };
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        size = build_file(buf, sizeof buf, headers[i].magic, headers[i].version,
                          headers[i].vocab, headers[i].eot, tokens, n_bytes, 3);
        write_file(path, buf, size);
        expect_load_failure(path, headers[i].what);
    }
    size = build_file(buf, sizeof buf, TOKENIZER_MAGIC, 2, 3, 2, tokens, zero_length, 3);
    write_file(path, buf, size);
    expect_load_failure(path, "a zero-length token");
    remove(path);
}

/* ---------------------------------------------------------------- reference cases */

/* Parse one case line: its name (copied into name), the text from "utf8_hex" into text
 * and the "ids" array into ids; text and ids must hold cap entries. */
static int parse_case(const char *line, char *name, size_t name_cap, char *text,
                      size_t *text_len, int *ids, size_t *n_ids, size_t cap) {
    const char *p = check_json_field(line, "name");
    if (!p || *p != '"') return -1;
    size_t n = 0;
    for (p++; *p && *p != '"' && n + 1 < name_cap; p++) name[n++] = *p;
    name[n] = '\0';
    if (check_json_hex(line, "utf8_hex", text, cap, text_len) != 0) return -1;
    return check_json_ints(line, "ids", ids, cap, n_ids);
}

/* Encode and decode every reference case, comparing ids and bytes exactly. */
static void test_reference_cases(const Tokenizer *t) {
    const char *path = check_data_file("gpt2/tokenizer_cases.jsonl");
    if (!path) { check_skip("gpt2/tokenizer_cases.jsonl not found"); return; }
    size_t size;
    char *data = check_read_file(path, &size);
    if (!check_true(data != NULL, "read %s", path)) return;
    char *line = malloc(size + 1), *text = malloc(size + 1);
    int *want = malloc((size + 1) * sizeof *want), *got = malloc((size + 1) * sizeof *got);
    int total = 0, passing = 0;
    if (!check_true(line && text && want && got, "allocate the case buffers")) goto done;

    for (size_t at = 0; at < size;) {
        const char *newline = memchr(data + at, '\n', size - at);
        size_t line_len = newline ? (size_t)(newline - (data + at)) : size - at;
        memcpy(line, data + at, line_len);
        line[line_len] = '\0';
        at += line_len + 1;
        if (line_len == 0) continue;

        char name[128];
        size_t text_len, n_want, n_got = 0;
        total++;
        if (parse_case(line, name, sizeof name, text, &text_len, want, &n_want, size + 1) != 0) {
            check_true(0, "case %d: cannot parse the line", total);
            continue;
        }
        int encoded = tokenizer_encode(t, text, text_len, got, size + 1, &n_got) == 0;
        size_t first_diff = 0;
        while (first_diff < n_got && first_diff < n_want && got[first_diff] == want[first_diff]) {
            first_diff++;
        }
        int ids_match = encoded && n_got == n_want && first_diff == n_want;
        if (encoded && !ids_match) {
            printf("  %s: first difference at id %zu: got %d, want %d (%zu ids, want %zu)\n",
                   name, first_diff, first_diff < n_got ? got[first_diff] : -1,
                   first_diff < n_want ? want[first_diff] : -1, n_got, n_want);
        }
        size_t n_round;
        int round = round_trips(t, text, text_len, &n_round);
        check_true(ids_match && round, "case %s: %zu bytes -> %zu ids%s%s", name, text_len,
                   n_got, ids_match ? "" : ", IDS DIFFER", round ? "" : ", NO ROUND TRIP");
        if (ids_match && round) passing++;
    }
    check_true(total == REFERENCE_CASES && passing == total, "reference cases: %d of %d pass "
               "(the file holds %d)", passing, total, REFERENCE_CASES);
done:
    free(data);
    free(line);
    free(text);
    free(want);
    free(got);
}

/* Encode the 1.1 MB tinyshakespeare text, timing it. */
static void test_shakespeare(const Tokenizer *t) {
    const char *shared = check_shared_dir();
    if (!shared) { check_skip("../shared not found: tinyshakespeare.txt not encoded"); return; }
    char path[MAX_PATH];
    snprintf(path, sizeof path, "%s/data/tinyshakespeare.txt", shared);
    size_t size;
    char *text = check_read_file(path, &size);
    if (!text) { check_skip("tinyshakespeare.txt not found"); return; }
    int *ids = malloc((size + 1) * sizeof *ids);
    size_t n_ids = 0;
    double start = seconds_now();
    int ok = ids && tokenizer_encode(t, text, size, ids, size + 1, &n_ids) == 0;
    double seconds = seconds_now() - start;
    check_true(ok, "tinyshakespeare: %zu bytes -> %zu ids in %.3f s (%.1f MB/s)", size, n_ids,
               seconds, (double)size / 1e6 / seconds);
    size_t n_round;
    check_true(round_trips(t, text, size, &n_round) && n_round == n_ids,
               "tinyshakespeare decodes back to the same bytes");
    /* the trainer encodes a long text in chunks, each ending with a lone newline between
     * two printable ASCII bytes (a boundary of the pre-tokenization): the same ids */
    int *chunked = malloc((size + 1) * sizeof *chunked);
    size_t n_chunked = 0, done = 0, chunks = 0;
    int same = ok && chunked != NULL;
    while (same && done < size) {
        size_t end = size - done > 4096 ? done + 4096 : size, got = 0;
        while (end < size && !(text[end - 1] == '\n' && text[end - 2] > ' ' &&
                               text[end - 2] < 0x7F && text[end] > ' ' && text[end] < 0x7F))
            end++;
        same = tokenizer_encode(t, text + done, end - done, chunked + n_chunked,
                                size + 1 - n_chunked, &got) == 0;
        n_chunked += got;
        done = end;
        chunks++;
    }
    check_true(same && n_chunked == n_ids && !memcmp(chunked, ids, n_ids * sizeof *ids),
               "tinyshakespeare in %zu chunks, each ending with a newline between printable "
               "ASCII bytes: the ids of the whole text (%zu of %zu)", chunks, n_chunked, n_ids);
    free(chunked);
    free(ids);
    free(text);
}

/* The first 256 tokens of an in-memory vocabulary: every byte alone, id = the byte. */
static void single_bytes(unsigned char *bytes, size_t *offset) {
    for (int b = 0; b < 256; b++) {
        bytes[b] = (unsigned char)b;
        offset[b] = (size_t)b;
    }
}

/* A GPT-2 vocabulary held in memory (as a GGUF file gives it) whose add_bos is set
 * (tokenizer.ggml.add_bos_token) starts an encoding with its BOS, as llama.cpp does; a
 * continuation and one without add_bos do not. 258 tokens: every byte alone (id = the
 * byte), BOS "<b>" 256 and EOS "<e>" 257, so "ab" is the ids 97 98 after the BOS. */
static void test_gpt2_vocab_bos(void) {
    unsigned char bytes[256 + 6];
    size_t offset[259];
    single_bytes(bytes, offset);
    memcpy(bytes + 256, "<b><e>", 6);
    offset[256] = 256;
    offset[257] = 259;
    offset[258] = 262;
    for (int add_bos = 0; add_bos <= 1; add_bos++) {
        TokenizerVocab v = {.kind = TOKENIZER_GPT2, .vocab_size = 258, .bytes = bytes,
                            .offset = offset, .bos_id = 256, .eos_id = 257, .add_bos = add_bos};
        Tokenizer t;
        int ids[8];
        size_t n = 0, n_more = 0;
        if (!check_true(tokenizer_init(&t, &v, "in memory") == 0, "GPT-2 vocabulary in memory, "
                        "add_bos %d: built", add_bos)) continue;
        int ok = tokenizer_encode(&t, "ab", 2, ids, 8, &n) == 0 && n == 2u + (size_t)add_bos &&
                 (!add_bos || ids[0] == 256) && ids[add_bos] == 'a' && ids[add_bos + 1] == 'b';
        check_true(ok, "GPT-2 vocabulary, add_bos %d: \"ab\" encodes as %s97 98 (got %zu ids, "
                   "the first %d)", add_bos, add_bos ? "256 " : "", n, n ? ids[0] : -1);
        ok = tokenizer_encode_continuation(&t, "ab", 2, ids, 8, &n_more) == 0 && n_more == 2 &&
             ids[0] == 'a';
        check_true(ok, "GPT-2 vocabulary, add_bos %d: a continuation has no BOS (got %zu ids)",
                   add_bos, n_more);
        tokenizer_free(&t);
    }
}

/* A merge listed twice keeps its first rank, as llama.cpp's table of ranks keeps the first
 * (std::map::emplace): every byte alone (id = the byte), 256 "ab", 257 "bc", 258 "<e>";
 * merges (a, b), (b, c), (a, b) again: "abc" is 256 99 ("ab" first), not 97 257. */
static void test_repeated_merge(void) {
    unsigned char bytes[256 + 7];
    size_t offset[260];
    single_bytes(bytes, offset);
    memcpy(bytes + 256, "abbc<e>", 7);
    offset[256] = 256;
    offset[257] = 258;
    offset[258] = 260;
    offset[259] = 263;
    static const int32_t merges[3 * 3] = {'a', 'b', 256, 'b', 'c', 257, 'a', 'b', 256};
    TokenizerVocab v = {.kind = TOKENIZER_GPT2, .vocab_size = 259, .bytes = bytes,
                        .offset = offset, .bos_id = 258, .eos_id = 258, .merges = merges,
                        .n_merges = 3};
    Tokenizer t;
    if (!check_true(tokenizer_init(&t, &v, "in memory") == 0, "repeated merge: vocabulary "
                    "built")) return;
    int ids[8];
    size_t n = 0;
    int ok = tokenizer_encode(&t, "abc", 3, ids, 8, &n) == 0 && n == 2 && ids[0] == 256 &&
             ids[1] == 'c';
    check_true(ok, "a merge listed twice keeps its first rank: \"abc\" -> 256 99 (got %zu "
               "ids, the first %d)", n, n ? ids[0] : -1);
    tokenizer_free(&t);
}

/* Special tokens, worked by hand: every byte alone (id = the byte), then 256 "<b>" (BOS),
 * 257 "<e>" (EOS), 258 "ab", 259 "bc", 260 "abcd", 261 "<u>", 262 "" (empty); all but 261
 * given as special, in no order. The longest special token takes its spans first, ties by
 * id, each of the text left: "abcd" is 260, "abc" 258 99 ("ab" before "bc"), "xbcab" 120
 * 259 258, "<b>a<e>" 256 97 257, "<u>" and a continuation's "<b>" their bytes. */
static void test_special_tokens(void) {
    static const char *const extra[] = {"<b>", "<e>", "ab", "bc", "abcd", "<u>", ""};
    static const int32_t special[] = {262, 259, 256, 258, 257, 260};
    unsigned char bytes[256 + 32];
    size_t offset[264], at = 256;
    single_bytes(bytes, offset);
    for (int i = 0; i < 7; i++) {
        offset[256 + i] = at;
        memcpy(bytes + at, extra[i], strlen(extra[i]));
        at += strlen(extra[i]);
    }
    offset[263] = at;
    TokenizerVocab v = {.kind = TOKENIZER_GPT2, .vocab_size = 263, .bytes = bytes,
                        .offset = offset, .bos_id = 256, .eos_id = 257, .special = special,
                        .n_special = 6};
    Tokenizer t;
    if (!check_true(tokenizer_init(&t, &v, "in memory") == 0, "special tokens: vocabulary "
                    "built")) return;
    static const struct {
        const char *text;
        int continuation, n, ids[4];
    } cases[] = {
        {"abcd", 0, 1, {260}},
        {"abc", 0, 2, {258, 'c'}},
        {"xbcab", 0, 3, {'x', 259, 258}},
        {"<b>a<e>", 0, 3, {256, 'a', 257}},
        {"<u>", 0, 3, {'<', 'u', '>'}},
        {"<b>", 1, 3, {'<', 'b', '>'}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int ids[16];
        size_t n = 0, len = strlen(cases[c].text);
        int rc = cases[c].continuation ? tokenizer_encode_continuation(&t, cases[c].text, len,
                                                                       ids, 16, &n)
                                       : tokenizer_encode(&t, cases[c].text, len, ids, 16, &n);
        int ok = rc == 0 && n == (size_t)cases[c].n;
        for (size_t i = 0; ok && i < n; i++) ok = ids[i] == cases[c].ids[i];
        check_true(ok, "special tokens: %s\"%s\" encodes as %d ids, the first %d (got %zu, "
                   "the first %d)", cases[c].continuation ? "a continuation's " : "",
                   cases[c].text, cases[c].n, cases[c].ids[0], n, n ? ids[0] : -1);
    }
    check_true(t.n_special == 5 && t.special[0] == 260 && t.special[1] == 256 &&
               t.special[4] == 259, "special tokens: longest first, ties by id, the empty one "
               "dropped (got %d)", t.n_special);
    tokenizer_free(&t);
}

int main(void) {
    char dir[] = "/tmp/test_tokenizer_XXXXXX";
    int have_dir = mkdtemp(dir) != NULL;

    test_unicode();
    test_utf8();
    test_next_piece();
    test_next_piece_llama3();
    test_gpt2_vocab_bos();
    test_special_tokens();
    test_repeated_merge();
    if (check_true(have_dir, "create a temporary directory")) {
        test_synthetic(dir);
        test_load_failures(dir);
        char path[MAX_PATH];
        unsigned char buf[4096];
        Tokenizer t = {0};
        snprintf(path, sizeof path, "%s/synthetic.bin", dir);
        size_t size = build_synthetic(buf, sizeof buf);
        if (check_true(write_file(path, buf, size) == 0 && tokenizer_load(&t, path) == 0,
                       "synthetic tokenizer: written and loaded")) {
            test_random_round_trip(&t, "synthetic");
            test_long_pieces(&t, "synthetic");
        }
        tokenizer_free(&t);
        remove(path);
        rmdir(dir);
    }

    const char *path = check_data_file("gpt2/gpt2_tokenizer.bin");
    if (!path) {
        check_skip("gpt2/gpt2_tokenizer.bin not found: no GPT-2 reference cases");
        return check_summary("test_tokenizer");
    }
    Tokenizer gpt2;
    if (check_true(tokenizer_load(&gpt2, path) == 0, "load %s", path)) {
        check_true(gpt2.vocab_size == TOKENIZER_GPT2_VOCAB && gpt2.eot_id == TOKENIZER_GPT2_EOT,
                   "GPT-2 vocab %d, eot %d", gpt2.vocab_size, gpt2.eot_id);
        test_reference_cases(&gpt2);
        test_random_round_trip(&gpt2, "gpt2");
        test_long_pieces(&gpt2, "gpt2");
        int ids[2];
        size_t n_ids = 0;
        int rc = tokenizer_encode(&gpt2, "Hello world", 11, ids, 1, &n_ids);
        check_true(rc == -1 && n_ids == 2,
                   "gpt2: encode \"Hello world\" with cap 1 fails (needs %zu)", n_ids);
        test_shakespeare(&gpt2);
    }
    tokenizer_free(&gpt2);
    return check_summary("test_tokenizer");
}

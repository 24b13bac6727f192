/* test_tokenizer_llama.c: tokenizer.c on llama2.c's tokenizer files (SentencePiece-style
 * BPE with scores, byte fallback, BOS and a dummy-prefix space).
 *
 * Reference: SHARED/testdata/llama2c/tokenizer_cases.jsonl, made by llama2.c's own run.c
 * (encode(text, bos=1, eos=0) with tokenizer.bin, and what its decode + safe_printf print;
 * see manifest.json). Each case checks the ids exactly, the raw decoded bytes against
 * "decoded_raw_hex", and, through a transcription of llama2.c's safe_printf below,
 * the printed text against "decoded_hex".
 */
#include "tokenizer.h"

#include <ctype.h>     /* isprint, isspace */
#include <stdio.h>     /* printf, snprintf, fdopen, fwrite, remove */
#include <stdlib.h>    /* malloc, free, mkstemp */
#include <string.h>    /* memcmp, memchr, strlen */
#include <unistd.h>    /* close */

#include "tests/check.h"   /* check_*, check_json_* */

#define CAP 4096   /* bytes or ids per case: the longest case is far shorter */

/* Appends what llama2.c's safe_printf prints for a piece: nothing for an empty piece or
 * a single byte that is neither printable nor space, else the bytes up to a NUL. */
static void safe_print(char *out, size_t *n, const unsigned char *piece, size_t len) {
    if (len == 0) return;
    if (len == 1 && !(isprint(piece[0]) || isspace(piece[0]))) return;
    for (size_t i = 0; i < len && piece[i] != 0 && *n < CAP; i++) out[(*n)++] = (char)piece[i];
}

static void test_cases(const Tokenizer *t) {
    const char *path = check_data_file("llama2c/tokenizer_cases.jsonl");
    if (!path) { check_skip("llama2c/tokenizer_cases.jsonl not found"); return; }
    size_t size;
    char *data = check_read_file(path, &size);
    if (!check_true(data != NULL, "read %s", path)) return;
    static char text[CAP], raw_want[CAP], printed_want[CAP], raw[CAP], printed[CAP];
    static int want[CAP], got[CAP];
    int total = 0, passing = 0;
    for (char *line = data; line < data + size;) {
        char *newline = memchr(line, '\n', (size_t)(data + size - line));
        if (newline) *newline = '\0';
        size_t text_len, raw_len, printed_len, n_want, n_got;
        if (*line && check_json_hex(line, "text_hex", text, CAP, &text_len) == 0 &&
            check_json_hex(line, "decoded_raw_hex", raw_want, CAP, &raw_len) == 0 &&
            check_json_hex(line, "decoded_hex", printed_want, CAP, &printed_len) == 0 &&
            check_json_ints(line, "ids", want, CAP, &n_want) == 0) {
            total++;
            int encoded = tokenizer_encode(t, text, text_len, got, CAP, &n_got) == 0;
            int ids_ok = encoded && n_got == n_want && memcmp(got, want, n_want * sizeof *got) == 0;
            // decode as llama2.c's generate loop does: each id after the first (BOS),
            // with the id before it
            size_t n_raw = 0, n_printed = 0;
            for (size_t i = 1; i < n_want; i++) {
                size_t len;
                const unsigned char *piece = tokenizer_decode(t, want[i - 1], want[i], &len);
                for (size_t k = 0; piece && k < len && n_raw < CAP; k++)
                    raw[n_raw++] = (char)piece[k];
                if (piece) safe_print(printed, &n_printed, piece, len);
            }
            int raw_ok = n_raw == raw_len && memcmp(raw, raw_want, raw_len) == 0;
            int printed_ok = n_printed == printed_len && memcmp(printed, printed_want,
                                                                printed_len) == 0;
            if (ids_ok && raw_ok && printed_ok) passing++;
            else check_true(0, "case %d (%.40s): ids %s, raw decode %s, printed %s", total, line,
                            ids_ok ? "ok" : "DIFFER", raw_ok ? "ok" : "DIFFERS",
                            printed_ok ? "ok" : "DIFFERS");
        }
        line = newline ? newline + 1 : data + size;
    }
    check_true(total == 44 && passing == total,
               "llama2.c tokenizer cases: %d of %d encode to the same ids and decode to the "
               "same bytes and printed text", passing, total);
    free(data);
}

/* tok512.bin: the 512-token vocabulary made for the s260k model; the prompt ids are
 * those of generation.json (llama2.c's encode of "Once upon a time"). */
static void test_tok512(void) {
    const char *path = check_data_file("llama2c/tok512.bin");
    if (!path) { check_skip("llama2c/tok512.bin not found"); return; }
    Tokenizer t;
    if (!check_true(tokenizer_load(&t, path) == 0, "load tok512.bin")) return;
    const int want[18] = {1, 259, 82, 113, 102, 104, 259, 120, 115, 114, 113, 259, 100, 259,
                          119, 108, 112, 104};
    int got[64];
    size_t n;
    int ok = tokenizer_encode(&t, "Once upon a time", 16, got, 64, &n) == 0 && n == 18 &&
             memcmp(got, want, sizeof want) == 0;
    check_true(ok && t.vocab_size == 512, "tok512: \"Once upon a time\" -> 18 ids as llama2.c");
    /* a continuation: no BOS, no dummy-prefix space; tok512's ids are its bytes + 3 (byte
     * fallback) or its merges: "\n" 13, "h" 107, "i" 108, " " 259; "Once upon a time" and
     * "\nhi there" encoded apart are "Once upon a time\nhi there" encoded at once */
    const int want_cont[9] = {13, 107, 108, 259, 119, 107, 104, 117, 104};
    ok = tokenizer_encode_continuation(&t, "\nhi there", 9, got, 64, &n) == 0 && n == 9 &&
         memcmp(got, want_cont, sizeof want_cont) == 0;
    check_true(ok, "tok512: the continuation \"\\nhi there\" -> 9 ids, no BOS and no space "
               "before the newline");
    int whole[64];
    size_t n_whole;
    ok = tokenizer_encode(&t, "Once upon a time\nhi there", 25, whole, 64, &n_whole) == 0 &&
         n_whole == 18 + 9 && memcmp(whole, want, sizeof want) == 0 &&
         memcmp(whole + 18, want_cont, sizeof want_cont) == 0;
    check_true(ok, "tok512: a prompt and its continuation encode as the text at once");
    ok = tokenizer_encode_continuation(&t, "", 0, got, 64, &n) == 0 && n == 0;
    check_true(ok, "tok512: an empty continuation -> no ids (no BOS)");
    /* a text that starts with a continuation byte: llama2.c's encode emits the dummy
     * prefix " " (259) as a token of its own, then the byte 0x80 alone, which no token
     * spells: its fallback 0x80 + 3 = 131; then "abc" as 100 101 102 (no merge of tok512
     * spells " <0x80>" or "<0x80>a") */
    const int want_stray[6] = {1, 259, 131, 100, 101, 102};
    ok = tokenizer_encode(&t, "\x80" "abc", 4, got, 64, &n) == 0 && n == 6 &&
         memcmp(got, want_stray, sizeof want_stray) == 0;
    check_true(ok, "tok512: \"\\x80abc\" -> 1 259 131 100 101 102, the dummy prefix a token "
               "of its own (got %zu ids, the second %d)", n, n > 1 ? got[1] : -1);
    tokenizer_free(&t);
}

/* Writes a llama2.c tokenizer file of n tokens (its max_token_length, then each score,
 * length and bytes) to a new temporary file whose name goes to path (of "XXXXXX" form).
 * Returns 1, or 0 after a failed check (no file left). */
static int write_llama_file(char *path, int32_t max_len, const char *const *tokens,
                            const float *scores, int n) {
    int fd = mkstemp(path);
    FILE *file = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!check_true(file != NULL, "create a temporary tokenizer file")) {
        if (fd >= 0) { close(fd); remove(path); }
        return 0;
    }
    int wrote = fwrite(&max_len, sizeof max_len, 1, file) == 1;
    for (int i = 0; i < n; i++) {
        int32_t len = (int32_t)strlen(tokens[i]);
        wrote = wrote && fwrite(&scores[i], sizeof scores[i], 1, file) == 1 &&
                fwrite(&len, sizeof len, 1, file) == 1 &&
                fwrite(tokens[i], 1, (size_t)len, file) == (size_t)len;
    }
    if (!check_true(fclose(file) == 0 && wrote, "write a %d-token llama2.c file", n)) {
        remove(path);
        return 0;
    }
    return 1;
}

/* A continuation byte right after the dummy prefix: llama2.c encodes "\x80a" as BOS, the
 * prefix " " (3), then "\x80" (4) and "a" (5), which merge into "\x80a" (6): 1 3 6. No
 * token spells " \x80" (that glued pair has no fallback in a vocabulary of 7). */
static void test_prefix_before_continuation(void) {
    static const char *const tokens[7] = {"<unk>", "<s>", "</s>", " ", "\x80", "a",
                                          "\x80\x61"};
    static const float scores[7] = {0, 0, 0, 0, 0, 0, 1.0f};
    char path[] = "/tmp/test_tokenizer_llama_XXXXXX";
    if (!write_llama_file(path, 5, tokens, scores, 7)) return;
    Tokenizer t;
    if (check_true(tokenizer_load(&t, path) == 0, "load a 7-token llama2.c file")) {
        int got[8];
        size_t n = 0;
        int ok = tokenizer_encode(&t, "\x80" "a", 2, got, 8, &n) == 0 && n == 3 &&
                 got[0] == 1 && got[1] == 3 && got[2] == 6;
        check_true(ok, "\"\\x80a\" -> 1 3 6 as llama2.c: the dummy prefix a unit of its own "
                   "before a continuation byte that is a token (got %zu ids, the second %d)", n,
                   n > 1 ? got[1] : -1);
    }
    tokenizer_free(&t);
    remove(path);
}

/* Merges of equal score: llama2.c's encode scans the pairs left to right and takes a
 * later one only if its score is strictly higher, so of "ab" (8) and "bc" (7), both -1,
 * the leftmost merges: "abc" -> BOS, " " (3), "ab" (8), "c" (6), whatever their ids. */
static void test_equal_scores(void) {
    static const char *const tokens[9] = {"<unk>", "<s>", "</s>", " ", "a", "b", "c", "bc",
                                          "ab"};
    static const float scores[9] = {0, 0, 0, 0, 0, 0, 0, -1.0f, -1.0f};
    char path[] = "/tmp/test_tokenizer_llama_XXXXXX";
    if (!write_llama_file(path, 5, tokens, scores, 9)) return;
    Tokenizer t;
    if (check_true(tokenizer_load(&t, path) == 0, "load a 9-token llama2.c file")) {
        int got[8];
        size_t n = 0;
        int ok = tokenizer_encode(&t, "abc", 3, got, 8, &n) == 0 && n == 4 && got[0] == 1 &&
                 got[1] == 3 && got[2] == 8 && got[3] == 6;
        check_true(ok, "equal scores: \"abc\" -> 1 3 8 6, the leftmost pair merged as in "
                   "llama2.c (got %zu ids, the third %d)", n, n > 2 ? got[2] : -1);
    }
    tokenizer_free(&t);
    remove(path);
}

/* A token longer than the file's max_token_length (1, where "cd" has 2 bytes) is refused
 * at load, as llama2.c reads each token into a buffer of max_token_length + 1 bytes; the
 * same tokens load with a max_token_length of 2. */
static void test_token_longer_than_max(void) {
    static const char *const tokens[6] = {"u", "s", "e", "a", "b", "cd"};
    static const float scores[6] = {0};
    for (int32_t max_len = 1; max_len <= 2; max_len++) {
        char path[] = "/tmp/test_tokenizer_llama_XXXXXX";
        if (!write_llama_file(path, max_len, tokens, scores, 6)) return;
        Tokenizer t;
        int loaded = tokenizer_load(&t, path) == 0;
        check_true(loaded == (max_len == 2), "a token of 2 bytes in a file whose "
                   "max_token_length is %d: %s", max_len, max_len == 2 ? "loads" : "refused");
        tokenizer_free(&t);
        remove(path);
    }
}

int main(void) {
    test_prefix_before_continuation();
    test_equal_scores();
    test_token_longer_than_max();
    const char *path = check_data_file("llama2c/tokenizer.bin");
    if (!path) {
        check_skip("llama2c/tokenizer.bin not found: llama2.c tokenizer cases not checked");
        return check_summary("test_tokenizer_llama");
    }
    Tokenizer t;
    if (check_true(tokenizer_load(&t, path) == 0, "load llama2.c tokenizer.bin")) {
        check_true(t.kind == TOKENIZER_LLAMA && t.vocab_size == 32000 && t.bos_id == 1 &&
                   t.eot_id == 2, "Llama vocabulary of 32000, BOS 1, EOS 2");
        size_t len;
        const unsigned char *piece = tokenizer_decode(&t, 1, 9038, &len);
        check_true(piece && len == 4 && memcmp(piece, "Once", 4) == 0,
                   "a leading space is dropped after BOS");
        piece = tokenizer_decode(&t, 1, 13, &len);
        check_true(piece && len == 1 && piece[0] == '\n', "<0x0A> decodes to the byte 0x0A");
        test_cases(&t);
    }
    tokenizer_free(&t);
    test_tok512();
    return check_summary("test_tokenizer_llama");
}

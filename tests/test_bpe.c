/* test_bpe.c: the BPE tokenizer trainer (trainer/bpe.c).
 *
 * Hand-made texts and their merges, the round trip through tokenizer.c, a 200,000-byte
 * run of one character (and the merges of the old merge loop), a brute-force trainer
 * written here that it must equal, its cost on text without spaces, its progress lines,
 * and Tiny Shakespeare's training split rebuilding weights/tokenizer.bin byte for byte.
 */
#include "train.h"

#include <fcntl.h>     /* open, fcntl, struct flock (POSIX: holding a lock) */
#include <math.h>      /* fabs, sqrt, exp, log, tanh, NAN */
#include <stdarg.h>    /* va_list (format_into) */
#include <stdint.h>    /* uint64_t */
#include <stdio.h>     /* printf, snprintf, remove */
#include <stdlib.h>    /* malloc, calloc, free, mkdtemp, setenv */
#include <string.h>    /* memcpy, memcmp, strstr */
#include <signal.h>    /* kill, SIGKILL (POSIX: the kill -9 test) */
#include <sys/stat.h>  /* mkdir, mkfifo */
#include <sys/wait.h>  /* waitpid */
#include <time.h>      /* clock, clock_gettime, nanosleep */
#include <unistd.h>    /* access, fork, execl, getcwd, rmdir, close, getpid */

#include "attention.h"    /* attention_backward */
#include "attention_spec.h"   /* attention_spec_parse_layers: the variants' runs */
#include "hash.h"         /* hash_fnv1a64: the merges' checksum */
#include "kernels.h"      /* kernels_gelu, KERNELS_NORM_EPS, kernels_set_threads */
#include "model.h"        /* model_load, model_forward */
#include "tokenizer.h"    /* tokenizer_load, _encode, _decode, _next_piece, _merge */
#include "tests/check.h"  /* check_* */
#include "tests/train_fixtures.h"   /* tiny_config, run_init, run_steps, format_into, ... */

/* ------------------------------------------------------------------------- */
/* BPE trainer                                                                 */

#include "bpe.h"   /* bpe_train, bpe_train_logged, bpe_save: the tokenizer trainer, tested here */

/* Encode text with the tokenizer file b was saved to; ids (cap,) and the count. */
static size_t encode_with(const Tokenizer *t, const char *text, int *ids, size_t cap) {
    size_t n = 0;
    if (tokenizer_encode(t, text, strlen(text), ids, cap, &n) != 0) return 0;
    return n;
}

static void test_bpe(void) {
    const char *path = "build/test_train_bpe.bin";
    /* pieces "ab", " ab", " ab", " abc", " abc": (a,b) occurs 5 times -> 256 "ab"; then
     * (" ", ab) 4 times -> 257 " ab"; then (" ab", c) twice -> 258 " abc"; then every
     * piece is one token and training stops, short of the 300 asked for */
    const char *text = "ab ab ab abc abc";
    Bpe b;
    if (!check_true(bpe_train(&b, text, strlen(text), 300) == 0, "bpe: train on \"%s\"", text))
        return;
    check_true(b.n_merges == 3 && b.vocab_size == 260 &&
               b.merges[0][0] == 'a' && b.merges[0][1] == 'b' && b.merge_count[0] == 5 &&
               b.merges[1][0] == ' ' && b.merges[1][1] == 256 && b.merge_count[1] == 4 &&
               b.merges[2][0] == 257 && b.merges[2][1] == 'c' && b.merge_count[2] == 2,
               "bpe: merges (a,b)x5 -> 256, (' ',256)x4 -> 257, (257,c)x2 -> 258, then stop "
               "(got %d merges)", b.n_merges);
    int saved = bpe_save(&b, path);
    bpe_free(&b);
    Tokenizer t;
    if (!check_true(saved == 0 && tokenizer_load(&t, path) == 0,
                    "bpe: the written file loads with tokenizer_load")) return;
    int ids[64];
    size_t n = encode_with(&t, "ab abc ab", ids, 64);
    check_true(t.vocab_size == 260 && t.eot_id == 259 && n == 3 && ids[0] == 256 &&
               ids[1] == 258 && ids[2] == 257,
               "bpe: tokenizer_encode(\"ab abc ab\") = [256, 258, 257], eot id 259");
    size_t len;
    const unsigned char *eot = tokenizer_decode(&t, -1, 259, &len);
    check_true(eot && len == strlen(BPE_EOT_TEXT) && memcmp(eot, BPE_EOT_TEXT, len) == 0,
               "bpe: the last id is the end-of-text token");
    tokenizer_free(&t);

    /* ties: "xy", " xy", " zw" x2 give (x,y), (' ',z), (z,w) 2 each: the lowest left id
     * wins, so ' z' first; then (x,y) beats (' z',w) on left id; then (' z',w) */
    text = "xy xy zw zw";
    if (check_true(bpe_train(&b, text, strlen(text), 1000) == 0, "bpe: the tie text trains")) {
        check_true(b.n_merges == 3 && b.merges[0][0] == ' ' && b.merges[0][1] == 'z' &&
                   b.merges[1][0] == 'x' && b.merges[1][1] == 'y' &&
                   b.merges[2][0] == 256 && b.merges[2][1] == 'w',
                   "bpe: ties go to the lower left id: (' ',z), (x,y), (256,w)");
        bpe_free(&b);
    }
    check_true(bpe_train(&b, text, strlen(text), 256) != 0, "bpe: vocab 256 is refused");
    bpe_free(&b);
    remove(path);
}

/* 1 if the byte string a (la,) occurs in c (lc,). */
static int contains(const unsigned char *c, size_t lc, const unsigned char *a, size_t la) {
    for (size_t i = 0; i + la <= lc; i++) if (memcmp(c + i, a, la) == 0) return 1;
    return 0;
}

/* A trained tokenizer reproduces its training segmentation, and round-trips text. */
static void test_bpe_roundtrip(void) {
    const char *path = "build/test_train_bpe2.bin";
    const char *text =
        "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
        "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. "
        "resolved.\n\nFirst Citizen:\nFirst, you know Caius Marcius is chief enemy to the "
        "people.\n\nAll:\nWe know't, we know't.\n";
    Bpe b;
    if (!check_true(bpe_train(&b, text, strlen(text), 400) == 0 && bpe_save(&b, path) == 0,
                    "bpe: train and save on a small play text")) return;
    int n_merges = b.n_merges;
    bpe_free(&b);
    Tokenizer t;
    if (!check_true(tokenizer_load(&t, path) == 0, "bpe: reload")) return;
    const char *samples[] = {text, "Speak, speak, First Citizen!", "h\xc3\xa9llo w\xc3\xb6rld 123",
                             "  \n\t x\xff\xfe y", ""};
    int ok_text = 1, ok_ids = 1;
    for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++) {
        static int ids[4096], ids2[4096];
        static char decoded[8192];
        size_t n = encode_with(&t, samples[k], ids, 4096), pos = 0, len;
        for (size_t i = 0; i < n; i++) {
            const unsigned char *bytes = tokenizer_decode(&t, -1, ids[i], &len);
            memcpy(decoded + pos, bytes, len);
            pos += len;
        }
        decoded[pos] = '\0';
        ok_text &= pos == strlen(samples[k]) && memcmp(decoded, samples[k], pos) == 0;
        size_t n2 = encode_with(&t, decoded, ids2, 4096);
        ok_ids &= n2 == n && memcmp(ids, ids2, n * sizeof(int)) == 0;
    }
    check_true(ok_text, "bpe: decode(encode(text)) == text (ASCII, UTF-8, invalid bytes, empty)");
    check_true(ok_ids, "bpe: encode(decode(ids)) == ids for the encoder's ids");
    /* the training text is compressed: every learned merge is used at least once */
    static int ids[4096];
    size_t n = encode_with(&t, text, ids, 4096);
    int used[400] = {0}, unused = 0;
    for (size_t i = 0; i < n; i++) used[ids[i]] = 1;
    for (int id = 256; id < 256 + n_merges; id++) {
        int covered = used[id];
        /* a token may appear only inside longer ones; count it as used if some used token
         * contains its bytes) */
        for (int later = id + 1; !covered && later < 256 + n_merges; later++) {
            size_t la, lb;
            const unsigned char *a = tokenizer_decode(&t, -1, id, &la),
                                *c = tokenizer_decode(&t, -1, later, &lb);
            covered = used[later] && contains(c, lb, a, la);
        }
        unused += !covered;
    }
    check_true(n_merges > 30 && unused == 0, "bpe: %d merges learned, each one used when the "
               "training text is encoded (%d unused)", n_merges, unused);
    tokenizer_free(&t);
    remove(path);
}

/* ------------------------------------------------------------------------- */
/* The BPE trainer on a long run of one character, and against the old merges */

#define LONG_RUN_BYTES 200000      /* one pre-tokenized piece of 200,000 '=' */
/* train + save + load + encode must take less CPU time than this (measured 0.3 s at -O3;
 * the old quadratic loop needed ~1.3 s for 8,000 bytes, so ~800 s for these); the
 * sanitizer builds run ~4x slower */
#if defined(__SANITIZE_ADDRESS__)            /* gcc's -fsanitize=address */
#define LONG_RUN_SECONDS 5.0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)         /* clang's */
#define LONG_RUN_SECONDS 5.0
#endif
#endif
#ifndef LONG_RUN_SECONDS
#define LONG_RUN_SECONDS 1.0
#endif
#define LONG_RUN_MERGES 7          /* "==", "====", ... up to 128 '=' (256 would be too long) */
#define LONG_RUN_TOP 128           /* bytes of the longest token learned */
/* The merges bpe_train learned on test_bpe_roundtrip's play text before its merge loop
 * became tokenizer.c's heap merge (recorded from that code): their count, and FNV-1a 64
 * of the (left, right) ids as little-endian int32, in order. */
#define PLAY_MERGES 46
#define PLAY_MERGES_FNV 0x29E4702D93B639FFull
#define SHIPPED_VOCAB 1024         /* weights/tokenizer.bin's vocabulary */

/* FNV-1a 64 of the merges' ids, each as 4 bytes little-endian (whatever the host). */
static uint64_t merges_fnv(const Bpe *b) {
    uint64_t hash = HASH_FNV64_OFFSET;
    for (int i = 0; i < b->n_merges; i++) {
        for (int k = 0; k < 2; k++) {
            unsigned char id[4];
            for (int byte = 0; byte < 4; byte++)
                id[byte] = (unsigned char)((uint32_t)b->merges[i][k] >> (8 * byte));
            hash = hash_fnv1a64(hash, id, sizeof id);
        }
    }
    return hash;
}

static void test_bpe_long_run(void) {
    const char *path = "build/test_train_bpe_run.bin";
    char *text = malloc(LONG_RUN_BYTES);
    int *ids = malloc(sizeof(int) * (LONG_RUN_BYTES + 1));
    if (!check_true(text && ids, "bpe long run: buffers")) goto done;
    memset(text, '=', LONG_RUN_BYTES);
    clock_t start = clock();   /* CPU time: other processes on the machine do not count */
    Bpe b;
    int trained = bpe_train(&b, text, LONG_RUN_BYTES, 1000) == 0;
    int saved = trained && bpe_save(&b, path) == 0;
    int doubling = trained && b.n_merges == LONG_RUN_MERGES && b.merges[0][0] == '=' &&
                   b.merges[0][1] == '=';
    for (int i = 1; doubling && i < b.n_merges; i++)
        doubling = b.merges[i][0] == 255 + i && b.merges[i][1] == 255 + i;
    if (trained) bpe_free(&b);
    Tokenizer t;
    size_t n = 0;
    int loaded = saved && tokenizer_load(&t, path) == 0;
    int encoded = loaded && tokenizer_encode(&t, text, LONG_RUN_BYTES, ids, LONG_RUN_BYTES + 1,
                                             &n) == 0;
    double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
    check_true(encoded && seconds < LONG_RUN_SECONDS,
               "bpe: a run of %d '=' (one piece) trains, saves, loads and encodes in %.3f s "
               "of CPU (expected < %.1f)", LONG_RUN_BYTES, seconds, LONG_RUN_SECONDS);
    check_true(doubling, "bpe long run: %d merges, each doubling the run ('=','='), "
               "(256,256), ... (261,261)", LONG_RUN_MERGES);
    /* 200,000 = 1562 x 128 + 64: the encoder takes the longest tokens, then the rest */
    size_t whole = LONG_RUN_BYTES / LONG_RUN_TOP;
    int top_id = 256 + LONG_RUN_MERGES - 1;
    int ok = encoded && n == whole + 1 && ids[whole] == top_id - 1;
    for (size_t i = 0; ok && i < whole; i++) ok = ids[i] == top_id;
    check_true(ok, "bpe long run: encodes to %zu tokens of 128 '=' and one of 64 (got %zu)",
               whole, n);
    if (loaded) tokenizer_free(&t);

    /* the same merges as the old per-piece loop on the hand-made play text */
    const char *play =
        "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
        "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. "
        "resolved.\n\nFirst Citizen:\nFirst, you know Caius Marcius is chief enemy to the "
        "people.\n\nAll:\nWe know't, we know't.\n";
    if (check_true(bpe_train(&b, play, strlen(play), 400) == 0, "bpe: the play text trains")) {
        check_true(b.n_merges == PLAY_MERGES && merges_fnv(&b) == PLAY_MERGES_FNV,
                   "bpe: the play text gives the merges recorded from the old merge loop "
                   "(%d merges, FNV %016llx)", b.n_merges, (unsigned long long)merges_fnv(&b));
        bpe_free(&b);
    }
    /* and the shipped tokenizer, which the old code learned from Tiny Shakespeare */
    const char *shared = check_shared_dir();
    char corpus[512];
    size_t size = 0;
    char *data = NULL;
    if (shared) {
        format_into(corpus, sizeof corpus, "%s/data/tinyshakespeare.txt", shared);
        data = check_read_file(corpus, &size);
    }
    if (!data) {
        check_skip("../shared/data/tinyshakespeare.txt not found (shipped tokenizer rebuild)");
    } else {
        size_t split = size / 10 * 9 + size % 10 * 9 / 10;   /* train.c's floor(0.9 size) */
        size_t n_new = 0, n_old = 0;
        char *fresh = NULL, *shipped = NULL;
        if (bpe_train(&b, data, split, SHIPPED_VOCAB) == 0) {
            if (bpe_save(&b, path) == 0) fresh = check_read_file(path, &n_new);
            bpe_free(&b);
        }
        shipped = check_read_file("weights/tokenizer.bin", &n_old);
        check_true(fresh && shipped && n_new == n_old && memcmp(fresh, shipped, n_old) == 0,
                   "bpe: Tiny Shakespeare's training split rebuilds weights/tokenizer.bin byte "
                   "for byte");
        free(fresh);
        free(shipped);
        free(data);
    }
done:
    remove(path);
    free(text);
    free(ids);
}

/* ------------------------------------------------------------------------- */
/* The BPE trainer against a brute-force one, and its cost on text without spaces */

#define REF_MAX_VOCAB 512          /* the brute-force trainer's largest vocabulary */
#define REF_TEXT_BYTES 1500        /* each text the two trainers learn from */
#define REF_VOCAB 400              /* 143 merges at most */
#define DNA_BYTES 200000           /* random ACGT: one piece; the second text is twice this */
/* bpe_train's work (Bpe.work) per byte of distinct pieces is at most 9: 1 for the first
 * count of every pair, 5 count changes for each merge of two tokens into one (at most one
 * per byte), 3 sightings looked at (each pair made: one per byte at the start, two per
 * merge). Recounting every pair at every merge, as a loop without incremental counts does,
 * is 767 per byte here. */
#define WORK_PER_BYTE 9
/* The merges the code before incremental counts (recount every pair, re-encode every
 * changed piece at every merge) learned from random_text's first DNA_BYTES of ACGT (seed
 * 42) at vocab SHIPPED_VOCAB: FNV-1a 64 as merges_fnv computes it. */
#define DNA_MERGES_FNV 0x1826D29E933CF75Cull

/* n bytes drawn uniformly from alphabet (n_letters bytes, NUL allowed), by rand_sym's LCG
 * from *state. */
static void random_text(char *text, size_t n, const char *alphabet, size_t n_letters,
                        uint64_t *state) {
    for (size_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        text[i] = alphabet[(*state >> 33) % n_letters];
    }
}

/* The brute-force trainer's vocabulary: each token's bytes, by id. */
typedef struct {
    int n;                                                /* tokens */
    size_t len[REF_MAX_VOCAB];
    unsigned char bytes[REF_MAX_VOCAB][BPE_MAX_TOKEN_BYTES];
} RefVocab;

/* tokenizer_merge's lookup, by a scan of every token. */
static int ref_find(const void *vocab, const unsigned char *bytes, size_t len) {
    const RefVocab *v = vocab;
    for (int id = 0; id < v->n; id++)
        if (v->len[id] == len && memcmp(v->bytes[id], bytes, len) == 0) return id;
    return -1;
}

/* bpe_train's contract done the slow way: before each merge, every piece of the text, one
 * occurrence at a time, is encoded afresh from its bytes as tokenizer_encode does (whole if
 * it is a token, else tokenizer_merge: lowest id first, leftmost on ties) and every pair is
 * counted again; the most frequent pair wins, ties to the lower left id, then the lower
 * right id; a token over BPE_MAX_TOKEN_BYTES is never made; stop when no pair occurs twice.
 * Writes merges (n, 2) and their counts (n,); returns n, or -1 (out of memory). */
static int ref_train(const char *text, size_t len, int vocab_size, int (*merges)[2],
                     long *counts) {
    size_t V = (size_t)vocab_size;
    RefVocab *v = malloc(sizeof *v);
    long *pair = malloc(V * V * sizeof *pair);   /* (V, V) count of (left, right) */
    int *ids = malloc((len + 1) * sizeof *ids);
    int32_t *starts = malloc((len + 1) * sizeof *starts);
    int n_merges = -1;
    if (!v || !pair || !ids || !starts || vocab_size > REF_MAX_VOCAB) goto done;
    TokenizerMergeRules rules = {ref_find, v, NULL, 0, 0, NULL};
    for (v->n = 0; v->n < BPE_BYTE_TOKENS; v->n++) {
        v->len[v->n] = 1;
        v->bytes[v->n][0] = (unsigned char)v->n;
    }
    for (n_merges = 0; n_merges < vocab_size - BPE_BYTE_TOKENS - 1; n_merges++) {
        memset(pair, 0, V * V * sizeof *pair);
        for (size_t at = 0, end; at < len; at = end) {
            end = tokenizer_next_piece(text, len, at);
            const unsigned char *piece = (const unsigned char *)text + at;
            long n = 1;
            ids[0] = ref_find(v, piece, end - at);
            if (ids[0] < 0) n = tokenizer_merge(&rules, piece, end - at, ids, starts);
            if (n < 0) { n_merges = -1; goto done; }
            for (long i = 0; i + 1 < n; i++) pair[(size_t)ids[i] * V + (size_t)ids[i + 1]]++;
        }
        int left = -1, right = -1;
        for (int l = 0; l < v->n; l++)   /* in (left, right) order: the first maximum wins */
            for (int r = 0; r < v->n; r++)
                if (v->len[l] + v->len[r] <= BPE_MAX_TOKEN_BYTES &&
                    (left < 0 || pair[(size_t)l * V + (size_t)r] >
                                 pair[(size_t)left * V + (size_t)right])) {
                    left = l;
                    right = r;
                }
        if (left < 0 || pair[(size_t)left * V + (size_t)right] < 2) break;
        memcpy(v->bytes[v->n], v->bytes[left], v->len[left]);
        memcpy(v->bytes[v->n] + v->len[left], v->bytes[right], v->len[right]);
        v->len[v->n] = v->len[left] + v->len[right];
        v->n++;
        merges[n_merges][0] = left;
        merges[n_merges][1] = right;
        counts[n_merges] = pair[(size_t)left * V + (size_t)right];
    }
done:
    free(v);
    free(pair);
    free(ids);
    free(starts);
    return n_merges;
}

/* bpe_train learns the brute-force trainer's merges, counts and ties included, on random
 * texts: one piece with no word boundaries, words and runs of spaces, punctuation and
 * newlines, binary bytes, a two-letter alphabet of overlapping pairs, and a long run whose
 * doubled token would exceed BPE_MAX_TOKEN_BYTES. */
static void test_bpe_reference(void) {
    static const struct { const char *name, *alphabet; size_t letters, run; } texts[] = {
        {"ACGT, one piece", "ACGT", 4, 0},
        {"words and spaces", "abc  ", 5, 0},
        {"punctuation and newlines", "ab \n.,'", 7, 0},
        {"binary bytes", "\x00\xff\x80\xc3\xa9 a", 7, 0},
        {"aab, overlapping pairs", "aab", 3, 0},
        {"700 'x' then ab", "ab", 2, 700},
    };
    uint64_t state = 2026;
    char *text = malloc(REF_TEXT_BYTES);
    int (*merges)[2] = malloc(REF_VOCAB * sizeof *merges);
    long *counts = malloc(REF_VOCAB * sizeof *counts);
    if (!check_true(text && merges && counts, "bpe reference: buffers")) goto done;
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        memset(text, 'x', texts[k].run);
        random_text(text + texts[k].run, REF_TEXT_BYTES - texts[k].run, texts[k].alphabet,
                    texts[k].letters, &state);
        int n = ref_train(text, REF_TEXT_BYTES, REF_VOCAB, merges, counts);
        Bpe b;
        int trained = bpe_train(&b, text, REF_TEXT_BYTES, REF_VOCAB) == 0;
        if (!check_true(n >= 0 && trained, "bpe reference: %s: both trainers run",
                        texts[k].name)) {
            bpe_free(&b);   /* safe: bpe_train zeroed it */
            continue;
        }
        int first = 0;   /* the first merge that differs */
        while (first < n && first < b.n_merges && b.merges[first][0] == merges[first][0] &&
               b.merges[first][1] == merges[first][1] && b.merge_count[first] == counts[first])
            first++;
        check_true(b.n_merges == n && first == n && n > 10, "bpe: %s: bpe_train learns the "
                   "brute-force trainer's %d merges, counts included (got %d; the first %d "
                   "agree)", texts[k].name, n, b.n_merges, first);
        bpe_free(&b);
    }
    /* pieces of 255 'x' (between newlines): the merges build the whole piece, its last
     * merge a token of exactly BPE_MAX_TOKEN_BYTES (254 + 1), as the brute-force trainer */
    size_t len = 0;
    for (int k = 0; k < 5; k++, len += 256) {
        memset(text + len, 'x', 255);
        text[len + 255] = '\n';
    }
    int n = ref_train(text, len, REF_VOCAB, merges, counts);
    Bpe b;
    int trained = bpe_train(&b, text, len, REF_VOCAB) == 0, same = trained && b.n_merges == n;
    for (int i = 0; same && i < n; i++)
        same = b.merges[i][0] == merges[i][0] && b.merges[i][1] == merges[i][1];
    size_t last = trained && b.n_merges > 0 ? b.offset[255 + b.n_merges + 1] -
                                               b.offset[255 + b.n_merges] : 0;
    check_true(n > 0 && same && last == BPE_MAX_TOKEN_BYTES, "bpe: runs of 255 'x': the "
               "brute-force trainer's %d merges, the last a token of %d bytes (got %d merges, "
               "the last %zu bytes)", n, BPE_MAX_TOKEN_BYTES, trained ? b.n_merges : -1, last);
    if (trained) bpe_free(&b);
done:
    free(text);
    free(merges);
    free(counts);
}

/* Text without word boundaries (random ACGT, one piece) at the shipped vocabulary: the
 * work grows linearly with the text, and the merges are the earlier code's. */
static void test_bpe_linear(void) {
    uint64_t state = 42;
    char *text = malloc(2 * DNA_BYTES);
    if (!check_true(text != NULL, "bpe linear: buffer")) return;
    random_text(text, 2 * DNA_BYTES, "ACGT", 4, &state);
    Bpe small, large;
    int trained = bpe_train(&small, text, DNA_BYTES, SHIPPED_VOCAB) == 0;
    if (trained && bpe_train(&large, text, 2 * DNA_BYTES, SHIPPED_VOCAB) != 0) {
        bpe_free(&small);
        trained = 0;
    }
    if (!check_true(trained, "bpe linear: train on %d and %d bytes of ACGT", DNA_BYTES,
                    2 * DNA_BYTES)) goto done;
    int all = SHIPPED_VOCAB - BPE_BYTE_TOKENS - 1;
    check_true(small.n_merges == all && large.n_merges == all,
               "bpe linear: %d merges from each (got %d and %d)", all, small.n_merges,
               large.n_merges);
    check_true(small.work <= (size_t)WORK_PER_BYTE * DNA_BYTES &&
               large.work <= (size_t)WORK_PER_BYTE * 2 * DNA_BYTES,
               "bpe: work on one piece of %d and %d bytes at most %d per byte (got %.2f and "
               "%.2f)", DNA_BYTES, 2 * DNA_BYTES, WORK_PER_BYTE,
               (double)small.work / DNA_BYTES, (double)large.work / (2 * DNA_BYTES));
    check_true(large.work <= small.work * 21 / 10, "bpe: twice the text, at most 2.1 times "
               "the work (got %.3f)", (double)large.work / (double)small.work);
    check_true(merges_fnv(&small) == DNA_MERGES_FNV, "bpe: %d bytes of ACGT give the merges "
               "recorded from the earlier code (FNV %016llx)", DNA_BYTES,
               (unsigned long long)merges_fnv(&small));
    bpe_free(&small);
    bpe_free(&large);
done:
    free(text);
}

/* bpe_train_logged: a line at the start and after each merge when every = 0, with the
 * same merges as bpe_train; none when the interval is never reached. */
static void test_bpe_progress(void) {
    const char *text = "ab ab ab abc abc";   /* 3 merges (test_bpe) */
    FILE *log = tmpfile(), *quiet = tmpfile();
    Bpe b;
    if (!check_true(log && quiet && bpe_train_logged(&b, text, strlen(text), 300, log, 0.0) == 0,
                    "bpe progress: train with a log")) goto done;
    int same = b.n_merges == 3 && b.merges[2][0] == 257 && b.merges[2][1] == 'c';
    bpe_free(&b);
    char line[128], expected[64];
    int lines = 0, ok = 1;
    rewind(log);
    while (fgets(line, sizeof line, log)) {
        snprintf(expected, sizeof expected, "bpe: %d/43 merges learned, ", lines);
        ok &= strncmp(line, expected, strlen(expected)) == 0;
        lines++;
    }
    check_true(same && ok && lines == 4, "bpe: every = 0 logs \"bpe: 0/43 merges learned, "
               "S s\" .. 3/43, one line each (got %d lines)", lines);
    int quiet_ok = bpe_train_logged(&b, text, strlen(text), 300, quiet, 1e9) == 0;
    bpe_free(&b);
    check_true(quiet_ok && ftell(quiet) == 0, "bpe: no line before the interval has passed");
done:
    if (log) fclose(log);
    if (quiet) fclose(quiet);
}

int main(void) {
    test_bpe();
    test_bpe_roundtrip();
    test_bpe_long_run();
    test_bpe_reference();
    test_bpe_linear();
    test_bpe_progress();
    return check_summary("test_bpe");
}

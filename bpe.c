/* bpe.c: learn byte-level BPE merges from a text (the tokenizer trainer).
 *
 * The text is cut into pieces by tokenizer_next_piece and identical pieces are
 * counted once with a weight. Each step counts every adjacent token pair over the
 * distinct pieces, makes the most frequent pair the next token (the highest id so
 * far) and updates the pieces it touches. The update re-encodes a piece exactly as
 * tokenizer.c does, with its own merge loop, tokenizer_merge (a piece that is a token is
 * taken whole; otherwise repeatedly merge the adjacent pair whose bytes form the lowest-id
 * token, leftmost first; O(n log n) in the piece's bytes, so one long run of a repeated
 * character costs milliseconds, not hours). Why that
 * suffices: a new token has the highest id, so the encoder picks it only once no other
 * merge applies, which is when a piece's current segmentation is final; so only pieces
 * with an adjacent pair spelling the new token, or equal to it, change.
 * It does not encode corpora (tokenizer.c does) and keeps no state between calls.
 */
#include "bpe.h"

#include <errno.h>       /* errno */
#include <stdint.h>      /* int32_t, uint32_t, uint64_t */
#include <stdio.h>       /* fopen, fwrite, fflush, fileno, fprintf, remove */
#include <stdlib.h>      /* calloc, malloc, free */
#include <string.h>      /* memcmp, memcpy, memset, strerror, strlen */
#include <unistd.h>      /* fsync (POSIX) */

#include "tokenizer.h"   /* tokenizer_next_piece, tokenizer_merge, TOKENIZER_MAGIC, ... */

#define BPE_FILE_VERSION 2          /* llm.c tokenizer version that stores vocab size and eot */
#define FNV_OFFSET 2166136261u      /* FNV-1a 32-bit offset basis */
#define FNV_PRIME 16777619u         /* FNV-1a 32-bit prime */

/* ------------------------------------------------------------------------- */
/* Hash tables of byte strings (open addressing; a slot holds id + 1, 0 = empty) */

static uint32_t fnv1a(const unsigned char *bytes, size_t len) {
    uint32_t h = FNV_OFFSET;
    for (size_t i = 0; i < len; i++) h = (h ^ bytes[i]) * FNV_PRIME;
    return h;
}

/* Smallest power of two >= 2 n (so the table stays at most half full). */
static size_t table_size_for(size_t n) {
    size_t size = 16;
    while (size < 2 * n) size *= 2;
    return size;
}

/* Distinct pieces of the text, each with its count and current segmentation. */
typedef struct {
    size_t n;               /* distinct pieces */
    size_t *start;          /* (n,) offset of the first occurrence in the text */
    size_t *len;            /* (n,) bytes */
    long *count;            /* (n,) occurrences */
    int *n_tokens;          /* (n,) tokens in the current segmentation */
    size_t *token_offset;   /* (n,) where this piece's arrays start in tokens/token_start */
    int *tokens;            /* (total bytes,) token ids of each segmentation */
    int32_t *token_start;   /* (total bytes,) offset of each token inside its piece */
} Pieces;

static void pieces_free(Pieces *p) {
    free(p->start); free(p->len); free(p->count); free(p->n_tokens); free(p->token_offset);
    free(p->tokens); free(p->token_start);
    memset(p, 0, sizeof *p);
}

/* Split text into pieces and count the distinct ones. Returns 0 or -1 (out of memory). */
static int pieces_build(Pieces *p, const char *text, size_t len) {
    memset(p, 0, sizeof *p);
    size_t n_all = 0;
    for (size_t at = 0; at < len; at = tokenizer_next_piece(text, len, at)) n_all++;
    size_t table_size = table_size_for(n_all);
    size_t *slot = calloc(table_size, sizeof *slot);
    p->start = malloc((n_all + 1) * sizeof *p->start);
    p->len = malloc((n_all + 1) * sizeof *p->len);
    p->count = malloc((n_all + 1) * sizeof *p->count);
    if (!slot || !p->start || !p->len || !p->count) goto fail;
    const unsigned char *bytes = (const unsigned char *)text;
    size_t total = 0;
    for (size_t at = 0; at < len;) {
        size_t end = tokenizer_next_piece(text, len, at), n = end - at;
        size_t i = fnv1a(bytes + at, n) & (table_size - 1);
        for (;; i = (i + 1) & (table_size - 1)) {
            if (slot[i] == 0) {   /* a new distinct piece */
                p->start[p->n] = at;
                p->len[p->n] = n;
                p->count[p->n] = 1;
                slot[i] = ++p->n;
                total += n;
                break;
            }
            size_t w = slot[i] - 1;
            if (p->len[w] == n && memcmp(bytes + p->start[w], bytes + at, n) == 0) {
                p->count[w]++;
                break;
            }
        }
        at = end;
    }
    free(slot);
    slot = NULL;
    p->n_tokens = malloc((p->n + 1) * sizeof *p->n_tokens);
    p->token_offset = malloc((p->n + 1) * sizeof *p->token_offset);
    p->tokens = malloc((total + 1) * sizeof *p->tokens);
    p->token_start = malloc((total + 1) * sizeof *p->token_start);
    if (!p->n_tokens || !p->token_offset || !p->tokens || !p->token_start) goto fail;
    /* every piece starts as its bytes: token id = byte value */
    size_t offset = 0;
    for (size_t w = 0; w < p->n; w++) {
        p->token_offset[w] = offset;
        p->n_tokens[w] = (int)p->len[w];
        for (size_t i = 0; i < p->len[w]; i++) {
            p->tokens[offset + i] = bytes[p->start[w] + i];
            p->token_start[offset + i] = (int32_t)i;
        }
        offset += p->len[w];
    }
    return 0;
fail:
    free(slot);
    pieces_free(p);
    return -1;
}

/* ------------------------------------------------------------------------- */
/* The vocabulary being learned                                                */

typedef struct {
    Bpe *bpe;          /* tokens so far: bytes, offset, vocab_size */
    int *slot;         /* (table_size,) id + 1 of each string, 0 = empty; owned */
    size_t table_size; /* a power of two */
} Vocab;

static size_t token_len(const Bpe *b, int id) { return b->offset[id + 1] - b->offset[id]; }

/* The id of the token spelled by bytes[0 .. len), or -1. */
static int vocab_find(const Vocab *v, const unsigned char *bytes, size_t len) {
    for (size_t i = fnv1a(bytes, len) & (v->table_size - 1);; i = (i + 1) & (v->table_size - 1)) {
        if (v->slot[i] == 0) return -1;
        int id = v->slot[i] - 1;
        if (token_len(v->bpe, id) == len &&
            memcmp(v->bpe->bytes + v->bpe->offset[id], bytes, len) == 0) return id;
    }
}

/* Append a token with the given bytes (the caller checked it is new). */
static void vocab_add(Vocab *v, const unsigned char *bytes, size_t len) {
    Bpe *b = v->bpe;
    int id = b->vocab_size++;
    memcpy(b->bytes + b->offset[id], bytes, len);
    b->offset[id + 1] = b->offset[id] + len;
    size_t i = fnv1a(bytes, len) & (v->table_size - 1);
    while (v->slot[i] != 0) i = (i + 1) & (v->table_size - 1);
    v->slot[i] = id + 1;
}

/* tokenizer_merge's lookup: the id of the string in the Vocab, or -1. */
static int vocab_lookup(const void *vocab, const unsigned char *bytes, size_t len) {
    return vocab_find(vocab, bytes, len);
}

/* Re-encode piece w from its bytes as tokenizer_encode does: a piece that is a token is
 * taken whole, otherwise tokenizer_merge (lowest id first, O(n log n) in the piece's n
 * bytes). Returns 0, or -1 after a stderr line (out of memory). */
static int piece_encode(Pieces *p, size_t w, const unsigned char *text, const Vocab *v) {
    const unsigned char *piece = text + p->start[w];
    size_t n = p->len[w];
    int *tokens = p->tokens + p->token_offset[w];
    int32_t *start = p->token_start + p->token_offset[w];
    int whole = vocab_find(v, piece, n);
    if (whole >= 0) {   /* a piece that is itself a token is taken whole */
        tokens[0] = whole;
        start[0] = 0;
        p->n_tokens[w] = 1;
        return 0;
    }
    TokenizerMergeRules rules = {vocab_lookup, v, NULL, 0};   /* rank = id: lowest id first */
    long count = tokenizer_merge(&rules, piece, n, tokens, start);
    if (count < 0) return -1;
    p->n_tokens[w] = (int)count;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Training                                                                    */

/* Pair counts for one step: key = left * vocab + right, open addressing. */
typedef struct {
    uint64_t *key;     /* (size,) pair key + 1, 0 = empty */
    long *count;       /* (size,) */
    size_t size;       /* a power of two */
} PairTable;

static void pair_add(PairTable *t, uint64_t key, long count) {
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (t->size - 1);
    while (t->key[i] != 0 && t->key[i] != key + 1) i = (i + 1) & (t->size - 1);
    t->key[i] = key + 1;
    t->count[i] += count;
}

int bpe_train(Bpe *b, const char *text, size_t len, int vocab_size) {
    memset(b, 0, sizeof *b);
    Pieces p = {0};
    Vocab v = {0};
    PairTable pairs = {0};
    const unsigned char *bytes = (const unsigned char *)text;
    size_t eot_len = strlen(BPE_EOT_TEXT);
    if (vocab_size < BPE_BYTE_TOKENS + 1) {
        fprintf(stderr, "bpe: vocab size too small (got %d, expected >= %d: the 256 bytes and "
                "end-of-text)\n", vocab_size, BPE_BYTE_TOKENS + 1);
        return -1;
    }
    int max_merges = vocab_size - BPE_BYTE_TOKENS - 1;
    b->merges = malloc(((size_t)max_merges + 1) * sizeof *b->merges);
    b->merge_count = malloc(((size_t)max_merges + 1) * sizeof *b->merge_count);
    b->offset = calloc((size_t)vocab_size + 1, sizeof *b->offset);
    b->bytes = malloc(BPE_BYTE_TOKENS + (size_t)max_merges * BPE_MAX_TOKEN_BYTES + eot_len);
    v.bpe = b;
    v.table_size = table_size_for((size_t)vocab_size);
    v.slot = calloc(v.table_size, sizeof *v.slot);
    if (!b->merges || !b->merge_count || !b->offset || !b->bytes || !v.slot ||
        pieces_build(&p, text, len) != 0) goto out_of_memory;
    size_t total = p.n ? p.token_offset[p.n - 1] + p.len[p.n - 1] : 0;
    pairs.size = table_size_for(total + 1);
    pairs.key = malloc(pairs.size * sizeof *pairs.key);
    pairs.count = malloc(pairs.size * sizeof *pairs.count);
    if (!pairs.key || !pairs.count) goto out_of_memory;
    for (int byte = 0; byte < BPE_BYTE_TOKENS; byte++) {
        unsigned char c = (unsigned char)byte;
        vocab_add(&v, &c, 1);
    }

    uint64_t V = (uint64_t)vocab_size;
    while (b->n_merges < max_merges) {
        /* count every adjacent pair, weighted by how often its piece occurs */
        memset(pairs.key, 0, pairs.size * sizeof *pairs.key);
        memset(pairs.count, 0, pairs.size * sizeof *pairs.count);
        for (size_t w = 0; w < p.n; w++) {
            const int *tokens = p.tokens + p.token_offset[w];
            for (int i = 0; i + 1 < p.n_tokens[w]; i++)
                pair_add(&pairs, (uint64_t)tokens[i] * V + (uint64_t)tokens[i + 1], p.count[w]);
        }
        /* the most frequent pair; ties go to the lower left id, then the lower right id */
        uint64_t best_key = 0;
        long best_count = 0;
        for (size_t i = 0; i < pairs.size; i++) {
            if (pairs.key[i] == 0) continue;
            uint64_t key = pairs.key[i] - 1;
            int left = (int)(key / V), right = (int)(key % V);
            if (token_len(b, left) + token_len(b, right) > BPE_MAX_TOKEN_BYTES) continue;
            if (pairs.count[i] > best_count ||
                (pairs.count[i] == best_count && key < best_key)) {
                best_key = key;
                best_count = pairs.count[i];
            }
        }
        if (best_count < 2) break;   /* a pair seen once teaches nothing */
        int left = (int)(best_key / V), right = (int)(best_key % V);
        size_t left_len = token_len(b, left), right_len = token_len(b, right);
        unsigned char merged[BPE_MAX_TOKEN_BYTES];
        memcpy(merged, b->bytes + b->offset[left], left_len);
        memcpy(merged + left_len, b->bytes + b->offset[right], right_len);
        size_t merged_len = left_len + right_len;
        /* segmentations are final, so no adjacent pair already spells a token: new */
        vocab_add(&v, merged, merged_len);
        b->merges[b->n_merges][0] = left;
        b->merges[b->n_merges][1] = right;
        b->merge_count[b->n_merges] = best_count;
        b->n_merges++;
        /* re-encode the pieces the new token can change (see the file comment) */
        for (size_t w = 0; w < p.n; w++) {
            const unsigned char *piece = bytes + p.start[w];
            int changed = p.len[w] == merged_len && memcmp(piece, merged, merged_len) == 0;
            const int32_t *start = p.token_start + p.token_offset[w];
            for (int i = 0; !changed && i + 1 < p.n_tokens[w]; i++) {
                int end = i + 2 < p.n_tokens[w] ? start[i + 2] : (int)p.len[w];
                changed = (size_t)(end - start[i]) == merged_len &&
                          memcmp(piece + start[i], merged, merged_len) == 0;
            }
            if (changed && piece_encode(&p, w, bytes, &v) != 0) goto fail;
        }
    }
    /* the end-of-text token comes last (it is never produced by encoding) */
    int eot = b->vocab_size++;
    memcpy(b->bytes + b->offset[eot], BPE_EOT_TEXT, eot_len);
    b->offset[eot + 1] = b->offset[eot] + eot_len;
    pieces_free(&p);
    free(v.slot);
    free(pairs.key);
    free(pairs.count);
    return 0;

out_of_memory:
    fprintf(stderr, "bpe: out of memory (text of %zu bytes, vocab size %d)\n", len, vocab_size);
fail:
    pieces_free(&p);
    free(v.slot);
    free(pairs.key);
    free(pairs.count);
    bpe_free(b);
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Saving                                                                      */

static void put_u32_le(unsigned char *p, uint32_t x) {
    p[0] = (unsigned char)x;
    p[1] = (unsigned char)(x >> 8);
    p[2] = (unsigned char)(x >> 16);
    p[3] = (unsigned char)(x >> 24);
}

int bpe_save(const Bpe *b, const char *path) {
    unsigned char header[TOKENIZER_HEADER_INTS * 4] = {0};
    put_u32_le(header, TOKENIZER_MAGIC);
    put_u32_le(header + 4, BPE_FILE_VERSION);
    put_u32_le(header + 8, (uint32_t)b->vocab_size);
    put_u32_le(header + 12, (uint32_t)(b->vocab_size - 1));   /* eot is the last id */
    FILE *file = fopen(path, "wb");
    if (!file) {
        fprintf(stderr, "bpe: %s: cannot open for writing (%s)\n", path, strerror(errno));
        return -1;
    }
    int ok = fwrite(header, sizeof header, 1, file) == 1;
    for (int id = 0; ok && id < b->vocab_size; id++) {
        unsigned char len = (unsigned char)token_len(b, id);
        ok = fwrite(&len, 1, 1, file) == 1 && fwrite(b->bytes + b->offset[id], len, 1, file) == 1;
    }
    /* on the disk before returning, so a caller's rename of the file is durable */
    if (ok) ok = fflush(file) == 0 && fsync(fileno(file)) == 0;
    if (fclose(file) != 0) ok = 0;
    if (!ok) {
        fprintf(stderr, "bpe: %s: write failed (%s)\n", path, strerror(errno));
        remove(path);
        return -1;
    }
    return 0;
}

void bpe_free(Bpe *b) {
    free(b->merges);
    free(b->merge_count);
    free(b->bytes);
    free(b->offset);
    memset(b, 0, sizeof *b);
}

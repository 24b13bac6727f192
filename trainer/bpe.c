/* bpe.c: learn byte-level BPE merges from a text (the tokenizer trainer).
 *
 * The text is cut into pieces by tokenizer_next_piece and identical pieces are kept once,
 * with a weight. A table holds every adjacent pair's count and the places it was made, and
 * a heap keeps the most frequent pair on top. Each step makes that pair the next token and
 * rewrites only the places where it now appears, moving the counts of the pairs around
 * them, so a step costs what it changes (learn says why the result is the encoder's).
 * It does not encode corpora (tokenizer.c does) and keeps no state between calls.
 */
#include "bpe.h"

#include <errno.h>       /* errno */
#include <stdint.h>      /* uint32_t, uint64_t, SIZE_MAX */
#include <stdio.h>       /* FILE, fwrite, fclose, fprintf, remove */
#include <stdlib.h>      /* calloc, malloc, realloc, free, qsort */
#include <string.h>      /* memcmp, memcpy, memset, strerror, strlen */
#include <time.h>        /* clock (progress lines) */

#include "hash.h"        /* hash_fnv1a32: the tables of pieces and tokens */
#include "os.h"          /* os_create_new, os_close_synced: the file written whole */
#include "tokenizer.h"   /* tokenizer_next_piece, TOKENIZER_MAGIC, TOKENIZER_HEADER_INTS */

#define BPE_FILE_VERSION 2          /* llm.c tokenizer version that stores vocab size and eot */
#define FIBONACCI 0x9E3779B97F4A7C15ull   /* 2^64 / golden ratio: spreads pair keys */
#define NONE SIZE_MAX               /* no position, no list entry, not in the heap */

/* ------------------------------------------------------------------------- */
/* Hash tables (open addressing; a slot holds index + 1, 0 = empty), growing arrays */

/* Smallest power of two >= 2 n (so the table stays at most half full). */
static size_t table_size_for(size_t n) {
    size_t size = 16;
    while (size < 2 * n) size *= 2;
    return size;
}

/* Room for need items of item_size bytes in array (*capacity items now), at least doubling.
 * Returns the array, moved or not, with *capacity updated; or NULL (out of memory; the
 * old array is still valid and *capacity unchanged). */
static void *grow(void *array, size_t *capacity, size_t need, size_t item_size) {
    if (need <= *capacity) return array;
    size_t wanted = *capacity < 16 ? 16 : 2 * *capacity;
    if (wanted < need) wanted = need;
    if (wanted > SIZE_MAX / item_size) return NULL;
    void *moved = realloc(array, wanted * item_size);
    if (moved) *capacity = wanted;
    return moved;
}

/* ------------------------------------------------------------------------- */
/* The distinct pieces, laid end to end                                        */

/* Every distinct piece's bytes, each followed by one separator position. A token is named
 * by the position of its first byte: token[g] is its id there and -1 at every other
 * position; the next token of the piece starts at g + its length, and a separator there
 * (token -1) ends the piece. */
typedef struct {
    size_t n;                /* distinct pieces */
    size_t size;             /* positions: the pieces' bytes and one separator each */
    size_t *at;              /* (n,) position of each piece's first byte */
    size_t *len;             /* (n,) bytes of each piece */
    long *count;             /* (n,) occurrences of each piece in the text */
    unsigned char *bytes;    /* (size,) the pieces' bytes; a separator holds 0 */
    int *token;              /* (size,) id of the token starting here, else -1 */
    size_t *prev;            /* (size,) start of the token before, or NONE for a piece's first */
    size_t *piece;           /* (size,) which piece a position belongs to */
    size_t *slot;            /* (table_size,) piece index + 1 by hash of its bytes; 0 = empty */
    size_t table_size;       /* a power of two */
} Pieces;

static void pieces_free(Pieces *p) {
    free(p->at); free(p->len); free(p->count); free(p->bytes);
    free(p->token); free(p->prev); free(p->piece); free(p->slot);
    memset(p, 0, sizeof *p);
}

/* The index of the distinct piece spelled by bytes[0 .. len), or NONE. */
static size_t pieces_find(const Pieces *p, const unsigned char *bytes, size_t len) {
    size_t mask = p->table_size - 1;
    for (size_t i = hash_fnv1a32(bytes, len) & mask;; i = (i + 1) & mask) {
        if (p->slot[i] == 0) return NONE;
        size_t w = p->slot[i] - 1;
        if (p->len[w] == len && memcmp(p->bytes + p->at[w], bytes, len) == 0) return w;
    }
}

/* Split text into pieces, keep the distinct ones with their counts, and start every piece
 * as its bytes (token id = byte value). Returns 0 or -1 (out of memory). */
static int pieces_build(Pieces *p, const char *text, size_t len) {
    memset(p, 0, sizeof *p);
    size_t n_all = 0;
    for (size_t at = 0; at < len; at = tokenizer_next_piece(text, len, at)) n_all++;
    p->table_size = table_size_for(n_all);
    p->slot = calloc(p->table_size, sizeof *p->slot);
    p->at = malloc((n_all + 1) * sizeof *p->at);
    p->len = malloc((n_all + 1) * sizeof *p->len);
    p->count = malloc((n_all + 1) * sizeof *p->count);
    p->bytes = malloc(len + n_all + 1);   /* at most: every piece distinct */
    if (!p->slot || !p->at || !p->len || !p->count || !p->bytes) goto fail;
    for (size_t at = 0; at < len;) {
        size_t end = tokenizer_next_piece(text, len, at), n = end - at;
        const unsigned char *piece = (const unsigned char *)text + at;
        size_t i = hash_fnv1a32(piece, n) & (p->table_size - 1);
        for (;; i = (i + 1) & (p->table_size - 1)) {
            if (p->slot[i] == 0) {   /* a new distinct piece: append it and a separator */
                p->at[p->n] = p->size;
                p->len[p->n] = n;
                p->count[p->n] = 1;
                memcpy(p->bytes + p->size, piece, n);
                p->bytes[p->size + n] = 0;
                p->size += n + 1;
                p->slot[i] = ++p->n;
                break;
            }
            size_t w = p->slot[i] - 1;
            if (p->len[w] == n && memcmp(p->bytes + p->at[w], piece, n) == 0) {
                p->count[w]++;
                break;
            }
        }
        at = end;
    }
    p->token = malloc((p->size + 1) * sizeof *p->token);
    p->prev = malloc((p->size + 1) * sizeof *p->prev);
    p->piece = malloc((p->size + 1) * sizeof *p->piece);
    if (!p->token || !p->prev || !p->piece) goto fail;
    for (size_t w = 0; w < p->n; w++) {
        for (size_t i = 0; i < p->len[w]; i++) {
            size_t g = p->at[w] + i;
            p->token[g] = p->bytes[g];
            p->prev[g] = i == 0 ? NONE : g - 1;
            p->piece[g] = w;
        }
        size_t separator = p->at[w] + p->len[w];
        p->token[separator] = -1;
        p->prev[separator] = NONE;
        p->piece[separator] = w;
    }
    return 0;
fail:
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
    size_t mask = v->table_size - 1;
    for (size_t i = hash_fnv1a32(bytes, len) & mask;; i = (i + 1) & mask) {
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
    size_t i = hash_fnv1a32(bytes, len) & (v->table_size - 1);
    while (v->slot[i] != 0) i = (i + 1) & (v->table_size - 1);
    v->slot[i] = id + 1;
}

/* ------------------------------------------------------------------------- */
/* Adjacent pairs: counts, where they were seen, and a heap of the best        */

typedef struct {
    int left, right;   /* token ids */
    long count;        /* occurrences in the current segmentations, weighted by piece count */
    size_t last_seen;  /* newest entry of its list of sightings, or NONE */
    size_t heap_at;    /* index in the heap; NONE if the pair is too long to merge */
} Pair;

/* A place where a pair was made. It stays in the pair's list after the pair is gone from
 * there (a later merge took one of its tokens); readers check it. */
typedef struct {
    size_t position;   /* start of the left token */
    size_t next;       /* the pair's previous sighting, or NONE */
} Sighting;

typedef struct {
    Pair *pair;              /* (n,) every pair ever seen; capacity `capacity` */
    size_t n, capacity;
    size_t *heap;            /* (n_heap,) pair indices, a binary heap: the next merge on top */
    size_t n_heap;           /* capacity `capacity` too */
    size_t *slot;            /* (table_size,) pair index + 1 by hash of (left, right); 0 = empty */
    size_t table_size;       /* a power of two, at least twice n */
    Sighting *seen;          /* (n_seen,) the pairs' lists; capacity seen_capacity */
    size_t n_seen, seen_capacity;
} Pairs;

static void pairs_free(Pairs *t) {
    free(t->pair); free(t->heap); free(t->slot); free(t->seen);
    memset(t, 0, sizeof *t);
}

static size_t pair_slot(const Pairs *t, int left, int right) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    return (size_t)((key * FIBONACCI) >> 32) & (t->table_size - 1);
}

/* The index of pair (left, right), or NONE if it was never seen. */
static size_t pairs_find(const Pairs *t, int left, int right) {
    for (size_t i = pair_slot(t, left, right);; i = (i + 1) & (t->table_size - 1)) {
        if (t->slot[i] == 0) return NONE;
        const Pair *pair = &t->pair[t->slot[i] - 1];
        if (pair->left == left && pair->right == right) return t->slot[i] - 1;
    }
}

/* 1 if pair a merges before pair b: the higher count; on a tie the lower left id, then
 * the lower right id. */
static int pair_before(const Pair *a, const Pair *b) {
    if (a->count != b->count) return a->count > b->count;
    return a->left != b->left ? a->left < b->left : a->right < b->right;
}

static void heap_put(Pairs *t, size_t at, size_t pair) {
    t->heap[at] = pair;
    t->pair[pair].heap_at = at;
}

/* Restore the heap order after the count of the pair at heap index `at` changed. */
static void heap_fix(Pairs *t, size_t at) {
    size_t pair = t->heap[at];
    while (at > 0 && pair_before(&t->pair[pair], &t->pair[t->heap[(at - 1) / 2]])) {
        heap_put(t, at, t->heap[(at - 1) / 2]);   /* move the parent down */
        at = (at - 1) / 2;
    }
    for (;;) {
        size_t child = 2 * at + 1;
        if (child >= t->n_heap) break;
        if (child + 1 < t->n_heap && pair_before(&t->pair[t->heap[child + 1]],
                                                 &t->pair[t->heap[child]])) child++;
        if (!pair_before(&t->pair[t->heap[child]], &t->pair[pair])) break;
        heap_put(t, at, t->heap[child]);          /* move the better child up */
        at = child;
    }
    heap_put(t, at, pair);
}

/* The index of pair (left, right), added with count 0 if new (into the heap too, unless
 * its token would exceed BPE_MAX_TOKEN_BYTES). Returns NONE when out of memory. */
static size_t pairs_get(Pairs *t, const Bpe *b, int left, int right) {
    size_t found = pairs_find(t, left, right);
    if (found != NONE) return found;
    if (t->n + 1 > t->capacity) {   /* the pairs and the heap grow together */
        size_t capacity = t->capacity, heap_capacity = t->capacity;
        Pair *pair = grow(t->pair, &capacity, t->n + 1, sizeof *t->pair);
        if (!pair) return NONE;
        t->pair = pair;
        size_t *heap = grow(t->heap, &heap_capacity, capacity, sizeof *t->heap);
        if (!heap) return NONE;
        t->heap = heap;
        t->capacity = capacity;
    }
    if (2 * (t->n + 1) > t->table_size) {   /* rehash into a table twice the size */
        size_t size = 2 * t->table_size, *slot = calloc(size, sizeof *slot);
        if (!slot) return NONE;
        free(t->slot);
        t->slot = slot;
        t->table_size = size;
        for (size_t k = 0; k < t->n; k++) {
            size_t i = pair_slot(t, t->pair[k].left, t->pair[k].right);
            while (t->slot[i] != 0) i = (i + 1) & (size - 1);
            t->slot[i] = k + 1;
        }
    }
    size_t index = t->n++, i = pair_slot(t, left, right);
    while (t->slot[i] != 0) i = (i + 1) & (t->table_size - 1);
    t->slot[i] = index + 1;
    Pair *pair = &t->pair[index];
    pair->left = left;
    pair->right = right;
    pair->count = 0;
    pair->last_seen = NONE;
    pair->heap_at = NONE;
    if (token_len(b, left) + token_len(b, right) <= BPE_MAX_TOKEN_BYTES) {
        t->n_heap++;
        heap_put(t, t->n_heap - 1, index);
        heap_fix(t, t->n_heap - 1);
    }
    return index;
}

/* ------------------------------------------------------------------------- */
/* Training                                                                    */

typedef struct {
    Bpe *bpe;          /* the result, growing */
    Vocab vocab;
    Pieces pieces;
    Pairs pairs;
    size_t *found;     /* (pieces.size,) scratch: where pairs spell the newest token */
} Learner;

/* Add delta occurrences of the pair whose left token starts at g (and whose right token
 * follows it) to its count, and record where it is when it is made (delta > 0). Returns
 * 0, or -1 when out of memory. */
static int count_pair(Learner *l, size_t g, long delta) {
    Pieces *p = &l->pieces;
    Pairs *t = &l->pairs;
    int left = p->token[g], right = p->token[g + token_len(l->bpe, left)];
    size_t index = pairs_get(t, l->bpe, left, right);
    if (index == NONE) return -1;
    l->bpe->work++;
    Pair *pair = &t->pair[index];
    pair->count += delta;
    if (pair->heap_at != NONE) heap_fix(t, pair->heap_at);
    if (delta > 0) {
        Sighting *seen = grow(t->seen, &t->seen_capacity, t->n_seen + 1, sizeof *t->seen);
        if (!seen) return -1;
        t->seen = seen;
        seen[t->n_seen].position = g;
        seen[t->n_seen].next = pair->last_seen;
        pair->last_seen = t->n_seen++;
    }
    return 0;
}

/* Merge the token starting at g with the one after it into token id, and move the
 * counts: its pairs with the tokens before and after become pairs of the new token.
 * Returns 0, or -1 when out of memory. */
static int merge_at(Learner *l, size_t g, int id) {
    Pieces *p = &l->pieces;
    long weight = p->count[p->piece[g]];
    size_t before = p->prev[g], right = g + token_len(l->bpe, p->token[g]);
    size_t after = right + token_len(l->bpe, p->token[right]);
    int has_after = p->token[after] >= 0;
    if ((before != NONE && count_pair(l, before, -weight) != 0) ||
        count_pair(l, g, -weight) != 0 ||
        (has_after && count_pair(l, right, -weight) != 0)) return -1;
    p->token[g] = id;
    p->token[right] = -1;
    if (has_after) p->prev[after] = g;
    if ((before != NONE && count_pair(l, before, weight) != 0) ||
        (has_after && count_pair(l, g, weight) != 0)) return -1;
    return 0;
}

/* The id of the token spelled by positions [from, to) (one piece's bytes), or -1. */
static int spelled(const Learner *l, size_t from, size_t to) {
    if (to - from > BPE_MAX_TOKEN_BYTES) return -1;
    return vocab_find(&l->vocab, l->pieces.bytes + from, to - from);
}

/* After a merge made the token at g: while it and a neighbour spell an (older) token,
 * merge that pair as the encoder would: the lower id first, the left pair on a tie.
 * Returns 0, or -1 when out of memory. */
static int settle(Learner *l, size_t g) {
    const Pieces *p = &l->pieces;
    for (;;) {
        size_t before = p->prev[g], end = g + token_len(l->bpe, p->token[g]);
        int with_before = before != NONE ? spelled(l, before, end) : -1;
        int with_after =
            p->token[end] >= 0 ? spelled(l, g, end + token_len(l->bpe, p->token[end])) : -1;
        if (with_before < 0 && with_after < 0) return 0;
        if (with_before >= 0 && (with_after < 0 || with_before <= with_after)) {
            if (merge_at(l, before, with_before) != 0) return -1;
            g = before;
        } else if (merge_at(l, g, with_after) != 0) {
            return -1;
        }
    }
}

static int compare_positions(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Bring every piece to what tokenizer.c's encoder makes of it now that the newest token,
 * id, exists: a piece that is a token is taken whole; otherwise the adjacent pair spelling
 * the lowest-id token merges, leftmost first, until none does. Only the places where a pair
 * spells the new token X change: X has the highest id, so the encoder does what it did
 * before X until no other pair spells a token, which is the current segmentation; then it
 * merges the leftmost pair spelling X; X and a neighbour may spell an older token, which
 * merges first (settle); then the next pair spelling X, left to right. Those merges make
 * tokens longer than X, so no new pair spells X: the places are known before starting.
 * Returns 0, or -1 when out of memory. */
static int learn(Learner *l, int id) {
    Pieces *p = &l->pieces;
    Pairs *t = &l->pairs;
    const Bpe *b = l->bpe;
    const unsigned char *x = b->bytes + b->offset[id];
    size_t n = token_len(b, id);
    // a piece that is the new token is taken whole: its pairs go
    size_t w = pieces_find(p, x, n);
    if (w != NONE) {
        size_t g = p->at[w];
        for (size_t h = g; p->token[h + token_len(b, p->token[h])] >= 0;
             h += token_len(b, p->token[h]))
            if (count_pair(l, h, -p->count[w]) != 0) return -1;
        for (size_t h = g; h < g + n; h++) p->token[h] = -1;
        p->token[g] = id;
    }
    // the places where a pair spells the new token, from the lists of those pairs; each
    // place is in one list at most once (a token at a position only ever grows, so a pair
    // gone from there never comes back), and these lists are never needed again
    size_t n_found = 0;
    for (size_t k = 1; k < n; k++) {
        int left = vocab_find(&l->vocab, x, k), right = vocab_find(&l->vocab, x + k, n - k);
        size_t index = left >= 0 && right >= 0 ? pairs_find(t, left, right) : NONE;
        if (index == NONE) continue;
        for (size_t s = t->pair[index].last_seen; s != NONE; s = t->seen[s].next) {
            size_t g = t->seen[s].position;
            l->bpe->work++;
            if (p->token[g] == left && p->token[g + k] == right) l->found[n_found++] = g;
        }
        t->pair[index].last_seen = NONE;
    }
    // left to right, as the encoder goes; skip a place an earlier merge took a token from
    qsort(l->found, n_found, sizeof *l->found, compare_positions);
    for (size_t i = 0; i < n_found; i++) {
        size_t g = l->found[i];
        if (p->token[g] < 0) continue;
        size_t right = g + token_len(b, p->token[g]);
        if (p->token[right] < 0 || right + token_len(b, p->token[right]) != g + n) continue;
        if (merge_at(l, g, id) != 0 || settle(l, g) != 0) return -1;
    }
    return 0;
}

static void learner_free(Learner *l) {
    pieces_free(&l->pieces);
    pairs_free(&l->pairs);
    free(l->vocab.slot);
    free(l->found);
    memset(l, 0, sizeof *l);
}

/* Processor seconds since start (clock: C's own, so the file needs no POSIX clock). */
static double seconds_since(clock_t start) {
    return (double)(clock() - start) / CLOCKS_PER_SEC;
}

int bpe_train(Bpe *b, const char *text, size_t len, int vocab_size) {
    return bpe_train_logged(b, text, len, vocab_size, NULL, 0.0);
}

int bpe_train_logged(Bpe *b, const char *text, size_t len, int vocab_size, FILE *log,
                     double every) {
    memset(b, 0, sizeof *b);
    Learner l = {0};
    clock_t start = clock();
    double logged = 0.0;   /* processor seconds at the last progress line */
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
    l.bpe = b;
    l.vocab.bpe = b;
    l.vocab.table_size = table_size_for((size_t)vocab_size);
    l.vocab.slot = calloc(l.vocab.table_size, sizeof *l.vocab.slot);
    l.pairs.table_size = 16;
    l.pairs.slot = calloc(l.pairs.table_size, sizeof *l.pairs.slot);
    if (!b->merges || !b->merge_count || !b->offset || !b->bytes || !l.vocab.slot ||
        !l.pairs.slot || pieces_build(&l.pieces, text, len) != 0) goto out_of_memory;
    l.found = malloc((l.pieces.size + 1) * sizeof *l.found);
    if (!l.found) goto out_of_memory;
    for (int byte = 0; byte < BPE_BYTE_TOKENS; byte++) {
        unsigned char c = (unsigned char)byte;
        vocab_add(&l.vocab, &c, 1);
    }
    // count every adjacent pair once, weighted by how often its piece occurs
    for (size_t w = 0; w < l.pieces.n; w++)
        for (size_t g = l.pieces.at[w]; g + 1 < l.pieces.at[w] + l.pieces.len[w]; g++)
            if (count_pair(&l, g, l.pieces.count[w]) != 0) goto out_of_memory;

    for (;;) {
        if (log && seconds_since(start) - logged >= every) {
            logged = seconds_since(start);
            fprintf(log, "bpe: %d/%d merges learned, %.1f s\n", b->n_merges, max_merges,
                    logged);
            fflush(log);
        }
        if (b->n_merges == max_merges || l.pairs.n_heap == 0) break;
        // the most frequent pair (ties: the lower left id, then the lower right id)
        const Pair *best = &l.pairs.pair[l.pairs.heap[0]];
        if (best->count < 2) break;   /* a pair seen once teaches nothing */
        int left = best->left, right = best->right;
        size_t left_len = token_len(b, left), right_len = token_len(b, right);
        unsigned char merged[BPE_MAX_TOKEN_BYTES];
        memcpy(merged, b->bytes + b->offset[left], left_len);
        memcpy(merged + left_len, b->bytes + b->offset[right], right_len);
        // segmentations are final, so no adjacent pair already spells a token: new
        vocab_add(&l.vocab, merged, left_len + right_len);
        b->merges[b->n_merges][0] = left;
        b->merges[b->n_merges][1] = right;
        b->merge_count[b->n_merges] = best->count;
        b->n_merges++;
        if (learn(&l, b->vocab_size - 1) != 0) goto out_of_memory;
    }
    // the end-of-text token comes last (it is never produced by encoding)
    int eot = b->vocab_size++;
    memcpy(b->bytes + b->offset[eot], BPE_EOT_TEXT, eot_len);
    b->offset[eot + 1] = b->offset[eot] + eot_len;
    learner_free(&l);
    return 0;

out_of_memory:
    fprintf(stderr, "bpe: out of memory (text of %zu bytes, vocab size %d)\n", len, vocab_size);
    learner_free(&l);
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
    FILE *file = os_create_new("bpe", path);   /* a new file, never through a link */
    if (!file) return -1;
    int ok = fwrite(header, sizeof header, 1, file) == 1;
    for (int id = 0; ok && id < b->vocab_size; id++) {
        unsigned char len = (unsigned char)token_len(b, id);
        ok = fwrite(&len, 1, 1, file) == 1 && fwrite(b->bytes + b->offset[id], len, 1, file) == 1;
    }
    if (!ok) {
        fprintf(stderr, "bpe: %s: write failed (%s)\n", path, strerror(errno));
        fclose(file);
        remove(path);
        return -1;
    }
    /* on the disk before returning, so a caller's rename of the file is durable */
    return os_close_synced(file, "bpe", path);
}

void bpe_free(Bpe *b) {
    free(b->merges);
    free(b->merge_count);
    free(b->bytes);
    free(b->offset);
    memset(b, 0, sizeof *b);
}

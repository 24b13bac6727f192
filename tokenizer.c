/* tokenizer.c: byte-level BPE: load a GPT-2 (llm.c) or Llama (llama2.c) tokenizer file,
 * encode text, decode ids.
 *
 * GPT-2 encoding has two stages. Pre-tokenization splits the text into pieces with GPT-2's
 * regex, written out by hand (no regex library). Then each piece starts as one token per
 * byte, and the adjacent pair whose bytes form the vocabulary token with the lowest id is
 * merged, again and again, as tiktoken does for llm.c's files: the id is the rank (a GGUF
 * file's merge list ranks the pairs instead). Only a GGUF vocabulary's special tokens,
 * end-of-text among them, are matched in text (encode_specials); llm.c's file has none.
 * Llama encoding has no pre-tokenization: the text (after a dummy-prefix space) starts as
 * one token per UTF-8 character, unknown characters fall back to byte tokens, and the
 * pair with the highest score merges first, as llama2.c does. Both use the same merge loop
 * (tokenizer_merge, which the BPE trainer bpe.c uses too).
 * Read tokenizer.h first; unicode/unicode.c holds the UTF-8 decoder and the character classes.
 */
#include "tokenizer.h"

#include <ctype.h>    /* isprint, isspace: what a token prints */
#include <math.h>     /* isfinite */
#include <stdint.h>   /* uint32_t, int32_t, INT32_MAX, SIZE_MAX */
#include <stdio.h>    /* FILE, fread, fseek, fclose, fprintf */
#include <stdlib.h>   /* malloc, realloc, free */
#include <string.h>   /* memcmp, memmove, memset */

#include "hash.h"     /* hash_fnv1a32, hash_mix64: the tables of tokens and of pairs */
#include "os.h"       /* os_open_read, os_file_size, os_read_exact: the file read whole */
#include "unicode.h"  /* unicode_utf8_next; unicode_is_letter, _is_number, _is_space */

#define HEADER_BYTES (TOKENIZER_HEADER_INTS * 4)  /* the header is 256 uint32 */
#define MAX_TOKEN_BYTES 255   /* a token's length is stored in one uint8 */

/* ---------------------------------------------------------------- the hash table */

/* One slot of the open-addressing table from a token's bytes to its id. */
struct TokenizerEntry {
    uint32_t hash;   /* FNV-1a of the token's bytes, to skip most byte comparisons */
    int32_t id;      /* token id, or -1 for an empty slot */
};

/* The id of the token whose bytes are exactly bytes[0 .. len), or -1 if there is none.
 * The table is at most half full, so the probe always reaches an empty slot. */
static int table_find(const Tokenizer *t, const unsigned char *bytes, size_t len) {
    if (len > t->max_token_len) return -1;
    uint32_t hash = hash_fnv1a32(bytes, len);
    size_t mask = t->table_size - 1;
    for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
        const TokenizerEntry *entry = &t->table[slot];
        if (entry->id < 0) return -1;
        if (entry->hash != hash) continue;
        size_t start = t->offset[entry->id];
        if (t->offset[entry->id + 1] - start == len && memcmp(t->bytes + start, bytes, len) == 0) {
            return entry->id;
        }
    }
}

/* One slot of the open-addressing table of merges (a GGUF file's): the pair (left, right)
 * merges into id, at this rank. */
struct TokenizerPair {
    int32_t left, right;   /* the pair's ids; left -1 for an empty slot */
    int32_t rank;          /* the merge's index in the file: the lowest merges first */
    int32_t id;            /* the token it makes */
};

static size_t pair_slot(const Tokenizer *t, int32_t left, int32_t right) {
    return (size_t)hash_mix64((uint64_t)(uint32_t)left << 32 | (uint32_t)right) &
           (t->pairs_size - 1);
}

/* The merge of the pair (left, right), or NULL if the file lists none. */
static const TokenizerPair *pair_find(const Tokenizer *t, int32_t left, int32_t right) {
    for (size_t slot = pair_slot(t, left, right);; slot = (slot + 1) & (t->pairs_size - 1)) {
        const TokenizerPair *p = &t->pairs[slot];
        if (p->left < 0) return NULL;
        if (p->left == left && p->right == right) return p;
    }
}

/* t->pairs from v's merges, the first of a pair listed twice kept (llama.cpp's). */
static int pairs_build(Tokenizer *t, const TokenizerVocab *v, const char *path) {
    size_t size = 2;
    while (size < 2 * (size_t)v->n_merges) size *= 2;   /* keep the load at most 1/2 */
    t->pairs = malloc(size * sizeof *t->pairs);
    if (!t->pairs) {
        fprintf(stderr, "tokenizer: %s: out of memory for %d merges\n", path, v->n_merges);
        return -1;
    }
    t->pairs_size = size;
    for (size_t slot = 0; slot < size; slot++) t->pairs[slot].left = -1;
    for (int k = 0; k < v->n_merges; k++) {
        const int32_t *m = v->merges + 3 * (size_t)k;
        size_t slot = pair_slot(t, m[0], m[1]);
        while (t->pairs[slot].left >= 0 &&
               !(t->pairs[slot].left == m[0] && t->pairs[slot].right == m[1]))
            slot = (slot + 1) & (size - 1);
        if (t->pairs[slot].left < 0) t->pairs[slot] = (TokenizerPair){m[0], m[1], k, m[2]};
    }
    return 0;
}

/* Fill the table with every token, in id order, so a byte string that occurs twice keeps
 * its lowest id. GPT-2's end-of-text is left out: a special token, never a merge result
 * (llama2.c looks up every token, BOS and EOS included, so Llama keeps them). */
static int table_build(Tokenizer *t, const char *path) {
    size_t size = 2;
    while (size < 2 * (size_t)t->vocab_size) size *= 2;   /* keep the load at most 1/2 */
    t->table = malloc(size * sizeof *t->table);
    if (!t->table) {
        fprintf(stderr, "tokenizer: %s: out of memory (got no %zu bytes for the hash table, "
                "expected malloc to succeed)\n", path, size * sizeof *t->table);
        return -1;
    }
    t->table_size = size;
    for (size_t slot = 0; slot < size; slot++) t->table[slot].id = -1;
    for (int id = 0; id < t->vocab_size; id++) {
        if (t->kind == TOKENIZER_GPT2 && id == t->eot_id) continue;
        const unsigned char *bytes = t->bytes + t->offset[id];
        size_t len = t->offset[id + 1] - t->offset[id];
        if (table_find(t, bytes, len) >= 0) continue;   /* a duplicate: keep the lower id */
        uint32_t hash = hash_fnv1a32(bytes, len);
        size_t slot = hash & (size - 1);
        while (t->table[slot].id >= 0) slot = (slot + 1) & (size - 1);
        t->table[slot].hash = hash;
        t->table[slot].id = id;
    }
    return 0;
}

/* ---------------------------------------------------------------- loading */

/* Little-endian uint32 at p, whatever the host's byte order. */
static uint32_t read_u32_le(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The header of llm.c's GPT-2 tokenizer file (size bytes, positioned at the start), read
 * and checked before anything is allocated: magic, version, vocab_size and eot id, the
 * last two into t. Returns 0, or -1 after a stderr line. */
static int gpt2_read_header(Tokenizer *t, FILE *file, size_t size, const char *path) {
    unsigned char header[HEADER_BYTES];
    if (size < HEADER_BYTES) {
        fprintf(stderr, "tokenizer: %s: file too short for the header (got %zu bytes, "
                "expected at least %d)\n", path, size, HEADER_BYTES);
        return -1;
    }
    if (os_read_exact(file, header, HEADER_BYTES, "tokenizer", path, "header") != 0) return -1;
    uint32_t magic = read_u32_le(header), version = read_u32_le(header + 4);
    uint32_t vocab_size = read_u32_le(header + 8), eot_id = read_u32_le(header + 12);
    if (magic != TOKENIZER_MAGIC) {
        fprintf(stderr, "tokenizer: %s: bad magic (got %u, expected %d)\n",
                path, (unsigned)magic, TOKENIZER_MAGIC);
        return -1;
    }
    if (version == 1) {   /* llm.c's first format: the GPT-2 sizes are implied */
        vocab_size = TOKENIZER_GPT2_VOCAB;
        eot_id = TOKENIZER_GPT2_EOT;
    } else if (version != 2) {
        fprintf(stderr, "tokenizer: %s: unknown version (got %u, expected 1 or 2)\n",
                path, (unsigned)version);
        return -1;
    }
    if (vocab_size == 0 || vocab_size > TOKENIZER_MAX_VOCAB) {
        fprintf(stderr, "tokenizer: %s: bad vocab_size (got %u, expected 1..%d)\n",
                path, (unsigned)vocab_size, TOKENIZER_MAX_VOCAB);
        return -1;
    }
    if (eot_id >= vocab_size) {
        fprintf(stderr, "tokenizer: %s: eot id out of range (got %u, expected 0..%u)\n",
                path, (unsigned)eot_id, (unsigned)vocab_size - 1);
        return -1;
    }
    t->vocab_size = (int)vocab_size;
    t->eot_id = (int)eot_id;
    return 0;
}

/* t->bytes holds the data_size bytes after the header as read: for each of t->vocab_size
 * tokens a uint8 length (1..255) and that many bytes. Drops the length bytes in place
 * (write_pos never passes read_pos), fills t->offset and t->max_token_len, and gives the
 * spare bytes back. Returns 0, or -1 after a stderr line (a zero length, a token cut off,
 * bytes after the last token; size, the file's, is for that message). */
static int gpt2_unpack_tokens(Tokenizer *t, size_t data_size, size_t size, const char *path) {
    size_t read_pos = 0, write_pos = 0;
    for (int id = 0; id < t->vocab_size; id++) {
        if (read_pos == data_size) {
            fprintf(stderr, "tokenizer: %s: truncated (got %d tokens, expected %d)\n",
                    path, id, t->vocab_size);
            return -1;
        }
        size_t len = t->bytes[read_pos++];
        if (len == 0) {
            fprintf(stderr, "tokenizer: %s: token %d is empty (got length 0, expected 1..%d)\n",
                    path, id, MAX_TOKEN_BYTES);
            return -1;
        }
        if (len > data_size - read_pos) {
            fprintf(stderr, "tokenizer: %s: truncated in token %d (got %zu bytes, expected %zu)\n",
                    path, id, data_size - read_pos, len);
            return -1;
        }
        t->offset[id] = (uint32_t)write_pos;
        memmove(t->bytes + write_pos, t->bytes + read_pos, len);
        write_pos += len;
        read_pos += len;
        if (len > t->max_token_len) t->max_token_len = len;
    }
    t->offset[t->vocab_size] = (uint32_t)write_pos;
    if (read_pos != data_size) {
        fprintf(stderr, "tokenizer: %s: trailing bytes after the last token (got file size %zu, "
                "expected %zu)\n", path, size, HEADER_BYTES + read_pos);
        return -1;
    }
    unsigned char *shrunk = realloc(t->bytes, write_pos);   /* give back the length bytes */
    if (shrunk) t->bytes = shrunk;                          /* (a failed shrink is harmless) */
    return 0;
}

/* The tokens after the header (the file positioned there, size bytes in all), checked
 * against the size bounds t->vocab_size implies, then read into t->bytes and t->offset.
 * Returns 0, or -1 after a stderr line. */
static int gpt2_read_tokens(Tokenizer *t, FILE *file, size_t size, const char *path) {
    // each token takes 1 length byte plus 1..255 bytes, which bounds the file size
    size_t vocab_size = (size_t)t->vocab_size;
    size_t data_size = size - HEADER_BYTES;
    size_t min_data = 2 * vocab_size, max_data = (1 + MAX_TOKEN_BYTES) * vocab_size;
    if (data_size < min_data) {
        fprintf(stderr, "tokenizer: %s: truncated (got %zu bytes of tokens, expected at least "
                "%zu for %u tokens)\n", path, data_size, min_data, (unsigned)vocab_size);
        return -1;
    }
    if (data_size > max_data) {
        fprintf(stderr, "tokenizer: %s: trailing bytes (got %zu bytes of tokens, expected at "
                "most %zu for %u tokens)\n", path, data_size, max_data, (unsigned)vocab_size);
        return -1;
    }
    t->bytes = malloc(data_size);
    t->offset = malloc((vocab_size + 1) * sizeof *t->offset);
    if (!t->bytes || !t->offset) {
        fprintf(stderr, "tokenizer: %s: out of memory (got no %zu bytes for the tokens, "
                "expected malloc to succeed)\n", path, data_size);
        return -1;
    }
    if (os_read_exact(file, t->bytes, data_size, "tokenizer", path, "tokens") != 0) return -1;
    return gpt2_unpack_tokens(t, data_size, size, path);
}

/* Reads llm.c's GPT-2 tokenizer file (size bytes, positioned at the start) into t: the
 * header, the tokens, then what encoding needs (the single-byte tokens, the ranks, the
 * hash table). Returns 0, or -1 after a stderr line (tokenizer_free releases the rest). */
static int load_gpt2(Tokenizer *t, FILE *file, size_t size, const char *path) {
    t->kind = TOKENIZER_GPT2;
    t->bos_id = -1;
    if (gpt2_read_header(t, file, size, path) != 0) return -1;
    if (gpt2_read_tokens(t, file, size, path) != 0) return -1;

    // the single-byte tokens every encoding starts from; a missing one fails at encode
    for (int b = 0; b < 256; b++) t->byte_token[b] = -1;
    for (int id = 0; id < t->vocab_size; id++) {
        unsigned char b = t->bytes[t->offset[id]];
        if (id != t->eot_id && t->offset[id + 1] - t->offset[id] == 1 && t->byte_token[b] < 0) {
            t->byte_token[b] = id;
        }
    }
    t->rank = malloc((size_t)t->vocab_size * sizeof *t->rank);
    if (!t->rank) {
        fprintf(stderr, "tokenizer: %s: out of memory for %d ranks\n", path, t->vocab_size);
        return -1;
    }
    for (int id = 0; id < t->vocab_size; id++) t->rank[id] = id;   /* the id is the rank */
    return table_build(t, path);
}

/* A token's score and id, sorted to rank the scores. */
typedef struct {
    float score;
    int32_t id;
} ScoredId;

/* Orders by descending score, then ascending id. */
static int by_score_desc(const void *a, const void *b) {
    const ScoredId *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The first field of llama2.c's tokenizer file (size bytes, positioned at the start, and
 * left there), max_token_length, checked into *max_len, and the size checked against the
 * 32-bit offsets, before anything is allocated. Returns 0, or -1 after a stderr line. */
static int llama_read_header(FILE *file, size_t size, const char *path, uint32_t *max_len) {
    unsigned char head[4];
    if (size < 4 || fread(head, 1, 4, file) != 4 || fseek(file, 0, SEEK_SET) != 0) {
        fprintf(stderr, "tokenizer: %s: file too short (got %zu bytes, expected a 4-byte "
                "max_token_length then tokens)\n", path, size);
        return -1;
    }
    *max_len = read_u32_le(head);
    if (*max_len < 1 || *max_len > TOKENIZER_MAX_TOKEN_LEN) {
        fprintf(stderr, "tokenizer: %s: bad max_token_length (got %d, expected 1..%d; or a GPT-2 "
                "file, which starts with magic %d)\n", path, (int32_t)*max_len,
                TOKENIZER_MAX_TOKEN_LEN, TOKENIZER_MAGIC);
        return -1;
    }
    if (size > UINT32_MAX) {   /* token offsets are 32-bit */
        fprintf(stderr, "tokenizer: %s: file too large (got %zu bytes, expected at most %u)\n",
                path, size, (unsigned)UINT32_MAX);
        return -1;
    }
    return 0;
}

/* Pass 1 over the whole file data (size bytes): checks every record (a finite float32
 * score, an int32 length 0..max_len, that many bytes) and counts the tokens into
 * *n_tokens and their bytes into *total. Returns 0, or -1 after a stderr line (a record
 * cut off or bad, too many tokens, or fewer than <unk>, BOS, EOS). */
static int llama_count_tokens(const unsigned char *data, size_t size, uint32_t max_len,
                              const char *path, size_t *n_tokens, size_t *total) {
    size_t pos = 4;
    *n_tokens = 0;
    *total = 0;
    while (pos < size) {
        if (size - pos < 8) {
            fprintf(stderr, "tokenizer: %s: truncated after token %zu (got %zu bytes, expected "
                    "8 for a score and a length)\n", path, *n_tokens, size - pos);
            return -1;
        }
        float score;
        uint32_t bits = read_u32_le(data + pos), len = read_u32_le(data + pos + 4);
        memcpy(&score, &bits, sizeof score);
        if (!isfinite(score) || len > max_len || len > size - pos - 8) {
            /* the first record bad: likely no llama2.c file at all (a GPT-2 one whose
             * magic was lost), so say what else the first bytes could have been */
            char other[96] = "";
            if (*n_tokens == 0)
                snprintf(other, sizeof other, "; or a GPT-2 file, which starts with magic %d",
                         TOKENIZER_MAGIC);
            fprintf(stderr, "tokenizer: %s: bad token %zu (got score %g, length %d with %zu bytes "
                    "left, expected a finite score and a length 0..%u%s)\n", path, *n_tokens,
                    (double)score, (int32_t)len, size - pos - 8, (unsigned)max_len, other);
            return -1;
        }
        pos += 8 + len;
        *total += len;
        if (++*n_tokens > TOKENIZER_MAX_VOCAB) {
            fprintf(stderr, "tokenizer: %s: too many tokens (expected at most %d)\n", path,
                    TOKENIZER_MAX_VOCAB);
            return -1;
        }
    }
    if (*n_tokens <= TOKENIZER_LLAMA_EOS) {
        fprintf(stderr, "tokenizer: %s: too few tokens (got %zu, expected at least %d: "
                "<unk>, BOS, EOS)\n", path, *n_tokens, TOKENIZER_LLAMA_EOS + 1);
        return -1;
    }
    return 0;
}

/* Pass 2 over data, checked by pass 1: each token's bytes into t->bytes and t->offset
 * (t->vocab_size of them), its score and id into order (vocab_size,). */
static void llama_copy_tokens(Tokenizer *t, const unsigned char *data, ScoredId *order) {
    size_t pos = 4, written = 0;
    for (size_t id = 0; id < (size_t)t->vocab_size; id++) {
        uint32_t bits = read_u32_le(data + pos), len = read_u32_le(data + pos + 4);
        memcpy(&order[id].score, &bits, sizeof order[id].score);
        order[id].id = (int32_t)id;
        t->offset[id] = (uint32_t)written;
        memcpy(t->bytes + written, data + pos + 8, len);
        written += len;
        pos += 8 + len;
        if (len > t->max_token_len) t->max_token_len = len;
    }
    t->offset[t->vocab_size] = (uint32_t)written;
}

/* t->rank from the scores in order (vocab_size,), which it sorts: a token's rank is its
 * position in descending score order; equal scores share a rank, so between them the
 * leftmost pair merges first, as in llama2.c's scan. */
static void llama_rank_scores(Tokenizer *t, ScoredId *order) {
    size_t n_tokens = (size_t)t->vocab_size;
    qsort(order, n_tokens, sizeof *order, by_score_desc);
    int32_t rank = 0;
    for (size_t i = 0; i < n_tokens; i++) {
        if (i > 0 && order[i].score != order[i - 1].score) rank = (int32_t)i;
        t->rank[order[i].id] = rank;
    }
}

/* Reads llama2.c's tokenizer file (size bytes, positioned at the start) into t: the
 * whole file is read, checked and counted (pass 1), then copied out and ranked (pass 2).
 * Returns 0, or -1 after a stderr line (tokenizer_free releases the rest). */
static int load_llama(Tokenizer *t, FILE *file, size_t size, const char *path) {
    t->kind = TOKENIZER_LLAMA;
    t->bos_id = TOKENIZER_LLAMA_BOS;
    t->eot_id = TOKENIZER_LLAMA_EOS;
    t->add_bos = 1;
    t->add_space = 1;
    t->stop_at_bos = 1;
    uint32_t max_len;
    if (llama_read_header(file, size, path, &max_len) != 0) return -1;
    unsigned char *data = malloc(size);
    ScoredId *order = NULL;
    if (!data) {
        fprintf(stderr, "tokenizer: %s: out of memory for a %zu-byte file\n", path, size);
        return -1;
    }
    size_t n_tokens, total;
    if (os_read_exact(file, data, size, "tokenizer", path, "file") != 0) goto fail;
    if (llama_count_tokens(data, size, max_len, path, &n_tokens, &total) != 0) goto fail;
    t->vocab_size = (int)n_tokens;
    t->bytes = malloc(total ? total : 1);
    t->offset = malloc((n_tokens + 1) * sizeof *t->offset);
    t->rank = malloc(n_tokens * sizeof *t->rank);
    order = malloc(n_tokens * sizeof *order);
    if (!t->bytes || !t->offset || !t->rank || !order) {
        fprintf(stderr, "tokenizer: %s: out of memory for %zu tokens\n", path, n_tokens);
        goto fail;
    }
    llama_copy_tokens(t, data, order);
    llama_rank_scores(t, order);
    for (int b = 0; b < 256; b++) t->byte_token[b] = -1;   /* Llama falls back to <0xHH> */
    free(data);
    free(order);
    return table_build(t, path);
fail:
    free(data);
    free(order);
    return -1;
}

int tokenizer_load(Tokenizer *t, const char *path) {
    size_t size = 0;
    unsigned char first[4];
    memset(t, 0, sizeof *t);
    for (int b = 0; b < 256; b++) t->byte_values[b] = (unsigned char)b;
    FILE *file = os_open_read("tokenizer", path, "a tokenizer file");
    if (!file) goto fail;
    if (os_file_size(file, "tokenizer", path, &size) != 0) goto fail;
    // llm.c's files start with their magic; llama2.c's with a small max_token_length
    int has_first = size >= 4 && fread(first, 1, 4, file) == 4;
    int is_gpt2 = has_first && read_u32_le(first) == TOKENIZER_MAGIC;
    if (has_first && memcmp(first, "GGUF", 4) == 0) {   /* a model, holding its own */
        fprintf(stderr, "tokenizer: %s: is a GGUF file (expected a tokenizer file: a GGUF "
                "model carries its own, read without -z)\n", path);
        goto fail;
    }
    if (fseek(file, 0, SEEK_SET) != 0) goto fail;
    if ((is_gpt2 ? load_gpt2 : load_llama)(t, file, size, path) != 0) goto fail;
    fclose(file);
    return 0;
fail:
    if (file) fclose(file);
    tokenizer_free(t);
    return -1;
}

/* A special token as llama-cli orders them: longest first, then by id. */
typedef struct {
    uint32_t len;
    int32_t id;
} SpecialToken;

static int special_longer_first(const void *a, const void *b) {
    const SpecialToken *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* t->silent, t->ends and t->special from v's (t's offsets set): copies, the special tokens
 * sorted longest first, ties by id, and those of no bytes or out of range dropped (a span of
 * no text is never one). Returns 0, or -1 when out of memory. */
static int token_roles(Tokenizer *t, const TokenizerVocab *v) {
    size_t n = (size_t)t->vocab_size, n_special = 0;
    if (v->silent && !(t->silent = malloc(n))) return -1;
    if (v->ends && !(t->ends = malloc(n))) return -1;
    if (v->silent) memcpy(t->silent, v->silent, n);
    if (v->ends) memcpy(t->ends, v->ends, n);
    if (!v->special || v->n_special < 1) return 0;
    SpecialToken *found = malloc((size_t)v->n_special * sizeof *found);
    if (!found) return -1;
    for (int k = 0; k < v->n_special; k++) {
        int32_t id = v->special[k];
        uint32_t len = id >= 0 && id < t->vocab_size ? t->offset[id + 1] - t->offset[id] : 0;
        if (len > 0) found[n_special++] = (SpecialToken){len, id};
    }
    qsort(found, n_special, sizeof *found, special_longer_first);
    t->special = n_special ? malloc(n_special * sizeof *t->special) : NULL;
    for (size_t i = 0; t->special && i < n_special; i++) t->special[i] = found[i].id;
    t->n_special = t->special ? (int)n_special : 0;
    free(found);
    return n_special && !t->special ? -1 : 0;
}

int tokenizer_init(Tokenizer *t, const TokenizerVocab *v, const char *path) {
    memset(t, 0, sizeof *t);
    for (int b = 0; b < 256; b++) t->byte_values[b] = (unsigned char)b;
    ScoredId *order = NULL;
    if (v->vocab_size < 1 || v->vocab_size > TOKENIZER_MAX_VOCAB) {
        fprintf(stderr, "tokenizer: %s: vocabulary out of range (got %d tokens, expected "
                "1..%d)\n", path, v->vocab_size, TOKENIZER_MAX_VOCAB);
        return -1;
    }
    size_t n = (size_t)v->vocab_size, total = v->offset[n];
    if (total > UINT32_MAX) {
        fprintf(stderr, "tokenizer: %s: vocabulary out of range (got %d tokens of %zu bytes, "
                "expected at most %u bytes)\n", path, v->vocab_size, total, UINT32_MAX);
        return -1;
    }
    t->kind = v->kind;
    t->vocab_size = v->vocab_size;
    t->bos_id = v->bos_id;
    t->eot_id = v->eos_id;
    t->add_bos = v->add_bos;
    t->add_space = v->add_space;
    t->merge_unknown = v->kind == TOKENIZER_LLAMA;
    t->raw_bytes = 1;
    t->pre = v->pre;
    t->bytes = malloc(total ? total : 1);
    t->offset = malloc((n + 1) * sizeof *t->offset);
    t->rank = malloc(n * sizeof *t->rank);
    order = malloc(n * sizeof *order);
    if (!t->bytes || !t->offset || !t->rank || !order) {
        fprintf(stderr, "tokenizer: %s: out of memory for %zu tokens\n", path, n);
        goto fail;
    }
    memcpy(t->bytes, v->bytes, total);
    for (size_t i = 0; i <= n; i++) t->offset[i] = (uint32_t)v->offset[i];
    if (token_roles(t, v) != 0) {
        fprintf(stderr, "tokenizer: %s: out of memory for %zu tokens\n", path, n);
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = v->offset[i + 1] - v->offset[i];
        if (len > t->max_token_len) t->max_token_len = len;
        order[i].score = v->scores ? v->scores[i] : 0.0f;
        order[i].id = (int32_t)i;
        if (v->kind == TOKENIZER_GPT2) t->rank[i] = (int32_t)i;
    }
    if (v->kind == TOKENIZER_LLAMA) llama_rank_scores(t, order);
    free(order);
    order = NULL;
    if (table_build(t, path) != 0) goto fail;
    if (v->merges && pairs_build(t, v, path) != 0) goto fail;
    for (int b = 0; b < 256; b++) {   /* Llama: <0xHH>; GPT-2: the single byte */
        char hex[7];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        unsigned char byte = (unsigned char)b;
        t->byte_token[b] = v->kind == TOKENIZER_LLAMA
                           ? table_find(t, (const unsigned char *)hex, 6) : table_find(t, &byte, 1);
    }
    return 0;
fail:
    free(order);
    tokenizer_free(t);
    return -1;
}

int tokenizer_find_id(const Tokenizer *t, const unsigned char *bytes, size_t len) {
    return table_find(t, bytes, len);
}

void tokenizer_free(Tokenizer *t) {
    free(t->rank);
    free(t->bytes);
    free(t->offset);
    free(t->table);
    free(t->pairs);
    free(t->silent);
    free(t->special);
    free(t->ends);
    memset(t, 0, sizeof *t);
}

/* ---------------------------------------------------------------- pre-tokenization */

/* The character classes GPT-2's regex distinguishes. */
typedef enum { CHAR_LETTER, CHAR_NUMBER, CHAR_SPACE, CHAR_OTHER } CharClass;

/* Class of the character at s[i] (i < len); its length in bytes goes to *width. */
static CharClass char_class_at(const unsigned char *s, size_t len, size_t i, size_t *width) {
    uint32_t cp;
    *width = unicode_utf8_next(s + i, len - i, &cp);
    if (cp == UNICODE_INVALID) return CHAR_OTHER;
    if (unicode_is_letter(cp)) return CHAR_LETTER;
    if (unicode_is_number(cp)) return CHAR_NUMBER;
    if (unicode_is_space(cp)) return CHAR_SPACE;
    return CHAR_OTHER;
}

/* Length of the contraction 's 't 're 've 'm 'll 'd at s[i], or 0; any_case 1: its
 * letters in either case ('S, 'Ll). */
static size_t contraction_length(const unsigned char *s, size_t len, size_t i, int any_case) {
    static const char *const suffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    if (s[i] != '\'') return 0;
    for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
        size_t n = strlen(suffixes[k]), j = 0;
        const unsigned char *after = s + i + 1;
        while (j < n && i + 1 + j < len &&
               (after[j] == suffixes[k][j] || (any_case && after[j] + 32 == suffixes[k][j])))
            j++;
        if (j == n) return 1 + n;
    }
    return 0;
}

size_t tokenizer_next_piece(const char *text, size_t len, size_t start) {
    const unsigned char *s = (const unsigned char *)text;
    size_t width;
    if (start >= len) return len;

    // 's|'t|'re|'ve|'m|'ll|'d
    size_t contraction = contraction_length(s, len, start, 0);
    if (contraction > 0) return start + contraction;

    // ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one class
    size_t run = (s[start] == ' ' && start + 1 < len) ? start + 1 : start;
    CharClass run_class = char_class_at(s, len, run, &width);
    if (run_class != CHAR_SPACE) {
        size_t end = run + width;
        while (end < len && char_class_at(s, len, end, &width) == run_class) end += width;
        return end;
    }

    // `\s+(?!\S)|\s+`: a whitespace run; if a non-space follows a run of two or more,
    // backtracking gives up the last character so it can join that word (" b")
    size_t end = start, last = start;
    while (end < len && char_class_at(s, len, end, &width) == CHAR_SPACE) {
        last = end;
        end += width;
    }
    if (end == len || last == start) return end;
    return last;
}

static int is_newline(unsigned char b) { return b == '\r' || b == '\n'; }

size_t tokenizer_next_piece_llama3(const char *text, size_t len, size_t start, int digits) {
    const unsigned char *s = (const unsigned char *)text;
    size_t width, end;
    if (start >= len) return len;

    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    size_t contraction = contraction_length(s, len, start, 1);
    if (contraction > 0) return start + contraction;

    // [^\r\n\p{L}\p{N}]?\p{L}+: a run of letters, after at most one character that is
    // neither a letter, a number nor a newline (" hello", "(hello")
    CharClass first = char_class_at(s, len, start, &width);
    size_t after = start + width;
    int letter_next = after < len && char_class_at(s, len, after, &width) == CHAR_LETTER;
    if (!is_newline(s[start]) && first != CHAR_NUMBER && (first == CHAR_LETTER || letter_next)) {
        for (end = after; end < len && char_class_at(s, len, end, &width) == CHAR_LETTER;)
            end += width;
        return end;
    }

    // \p{N}{1,3} (Qwen2: \p{N}): at most `digits` number characters
    if (first == CHAR_NUMBER) {
        end = start;
        for (int n = 0; n < digits && end < len; n++, end += width)
            if (char_class_at(s, len, end, &width) != CHAR_NUMBER) break;
        return end;
    }

    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`: an optional space, a run of other characters, newlines
    end = s[start] == ' ' && start + 1 < len ? start + 1 : start;
    if (char_class_at(s, len, end, &width) == CHAR_OTHER) {
        while (end < len && char_class_at(s, len, end, &width) == CHAR_OTHER) end += width;
        while (end < len && is_newline(s[end])) end++;
        return end;
    }

    // `\s*[\r\n]+`: a whitespace run up to its last newline; else `\s+(?!\S)|\s+` as
    // in GPT-2's regex (a run of two or more before a non-space gives up its last)
    size_t last = start, newline_end = 0;
    for (end = start; end < len && char_class_at(s, len, end, &width) == CHAR_SPACE;) {
        if (is_newline(s[end])) newline_end = end + 1;
        last = end;
        end += width;
    }
    if (newline_end > 0) return newline_end;
    if (end == start) return after;   /* no alternative matches: the character alone */
    return end < len && last > start ? last : end;
}

/* ---------------------------------------------------------------- merging one piece */

/* A pair of adjacent tokens that could merge: they cover piece[start .. end) and would
 * become token `id`. The heap holds these, lowest rank first. */
typedef struct {
    int32_t rank;    /* t->rank of the merged token: the lowest merges first */
    int32_t id;      /* id of the merged token */
    int32_t start;   /* byte offset of the left token */
    int32_t end;     /* byte offset just past the right token */
} MergeCandidate;

enum { TOKEN_MERGED = -1, TOKEN_UNKNOWN = -2 };   /* token[] values that are no id */

/* Working memory for merging a piece of up to `capacity` bytes. Tokens are identified by
 * the offset of their first byte and form a doubly linked list. Small pieces use the
 * arrays inside the struct (on the caller's stack); longer ones a malloc'd block. */
typedef struct {
    int32_t *prev;            /* (capacity,) start of the previous token, or -1 */
    int32_t *next;            /* (capacity,) start of the next token, or the piece length */
    int32_t *token;           /* (capacity,) id of the token starting here, TOKEN_MERGED if
                               * merged away, TOKEN_UNKNOWN if a character with no token */
    MergeCandidate *heap;     /* (3 * capacity,) binary min-heap of candidates */
    size_t capacity;          /* longest piece the arrays fit */
    void *block;              /* the malloc'd block behind the arrays, or NULL; owned */
    int32_t small_links[3][TOKENIZER_SMALL_PIECE];            /* prev, next, token */
    MergeCandidate small_heap[3 * TOKENIZER_SMALL_PIECE];
} MergeScratch;

/* Each merge removes a token and adds at most two candidates, so a piece of n bytes
 * pushes at most (n - 1) + 2 (n - 1) < 3n candidates. */
#define SCRATCH_BYTES_PER_BYTE (3 * sizeof(int32_t) + 3 * sizeof(MergeCandidate))

static void scratch_init(MergeScratch *scratch) {
    scratch->prev = scratch->small_links[0];
    scratch->next = scratch->small_links[1];
    scratch->token = scratch->small_links[2];
    scratch->heap = scratch->small_heap;
    scratch->capacity = TOKENIZER_SMALL_PIECE;
    scratch->block = NULL;
}

static void scratch_free(MergeScratch *scratch) {
    free(scratch->block);
    scratch->block = NULL;
}

/* Make room for a piece of n bytes, growing at least twofold so a call allocates only
 * O(log) times. */
static int scratch_reserve(MergeScratch *scratch, size_t n) {
    if (n <= scratch->capacity) return 0;
    size_t limit = (size_t)INT32_MAX - 1;   /* offsets are int32_t and may equal n */
    if (SIZE_MAX / SCRATCH_BYTES_PER_BYTE < limit) limit = SIZE_MAX / SCRATCH_BYTES_PER_BYTE;
    if (n > limit) {
        fprintf(stderr, "tokenizer: encode: piece too long (got %zu bytes, expected at most "
                "%zu)\n", n, limit);
        return -1;
    }
    size_t capacity = 2 * scratch->capacity;   /* cannot overflow: capacity <= limit */
    if (capacity < n) capacity = n;
    if (capacity > limit) capacity = limit;
    void *block = malloc(capacity * SCRATCH_BYTES_PER_BYTE);
    if (!block) {
        fprintf(stderr, "tokenizer: encode: out of memory (got no %zu bytes to merge a piece "
                "of %zu bytes, expected malloc to succeed)\n",
                capacity * SCRATCH_BYTES_PER_BYTE, n);
        return -1;
    }
    free(scratch->block);
    scratch->block = block;
    scratch->capacity = capacity;
    // the candidates first: their alignment is at least that of int32_t
    scratch->heap = block;
    scratch->prev = (int32_t *)(scratch->heap + 3 * capacity);
    scratch->next = scratch->prev + capacity;
    scratch->token = scratch->next + capacity;
    return 0;
}

/* 1 if a merges before b: the lower rank, and between equal ranks the leftmost pair,
 * which is the pair tiktoken's linear scan would pick. */
static int candidate_before(const MergeCandidate *a, const MergeCandidate *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->start < b->start);
}

static void heap_push(MergeCandidate *heap, size_t *count, MergeCandidate candidate) {
    size_t i = (*count)++;
    while (i > 0 && candidate_before(&candidate, &heap[(i - 1) / 2])) {   /* sift up */
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = candidate;
}

static MergeCandidate heap_pop(MergeCandidate *heap, size_t *count) {
    MergeCandidate top = heap[0], last = heap[--*count];
    size_t i = 0, n = *count;
    for (;;) {   /* sift `last` down from the root */
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && candidate_before(&heap[child + 1], &heap[child])) child++;
        if (!candidate_before(&heap[child], &last)) break;
        heap[i] = heap[child];
        i = child;
    }
    if (n > 0) heap[i] = last;
    return top;
}

/* Push the pair covering piece[start .. end) if its bytes form a token (with rules->pairs:
 * if the pair is listed). */
static void push_pair(const TokenizerMergeRules *rules, const unsigned char *piece,
                      int32_t start, int32_t end, MergeScratch *scratch, size_t *heap_count) {
    if (rules->pairs) {   /* the file's merges: the pair of tokens itself is ranked */
        int32_t left = scratch->token[start], right = scratch->token[scratch->next[start]];
        const TokenizerPair *p = left >= 0 && right >= 0 ? pair_find(rules->pairs, left, right)
                                                         : NULL;
        if (p) heap_push(scratch->heap, heap_count, (MergeCandidate){p->rank, p->id, start, end});
        return;
    }
    int id = rules->find(rules->vocab, piece + start, (size_t)(end - start));
    if (id >= 0) {
        MergeCandidate candidate = {rules->rank ? rules->rank[id] : id, id, start, end};
        heap_push(scratch->heap, heap_count, candidate);
    }
}

/* Length of the character at s[i] (i < n) as llama2.c's encode groups bytes: a byte and
 * the continuation bytes (10xxxxxx) after it, at most four bytes in all. */
static size_t llama_char_length(const unsigned char *s, size_t n, size_t i) {
    size_t j = i + 1;
    while (j < n && (s[j] & 0xC0) == 0x80 && j - i < 4) j++;
    return j - i;
}

/* The length of the character at s[i] (i < n) as llama.cpp's SentencePiece splits text:
 * what its first byte announces (1 for ASCII and for a stray continuation byte, 2, 3 or 4
 * for a lead byte), whatever follows, cut at n. */
static size_t lead_char_length(const unsigned char *s, size_t n, size_t i) {
    static const unsigned char length[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    size_t len = length[s[i] >> 4];
    return len < n - i ? len : n - i;
}

/* The length of the merge's starting unit at s[i] under rules' by_character. */
static size_t unit_length(int by_character, const unsigned char *s, size_t n, size_t i) {
    return by_character == 2 ? lead_char_length(s, n, i)
         : by_character == 1 ? llama_char_length(s, n, i) : 1;
}

/* Append id to ids if it fits; *count counts every id, so it ends as the size needed. */
static void emit(int id, int *ids, size_t cap, size_t *count) {
    if (*count < cap) ids[*count] = id;
    (*count)++;
}

/* Merge one piece of n >= 1 bytes (tokenizer_merge's rules) into scratch: afterwards the
 * tokens are token[i] for i = 0, next[0], next[next[0]], ... while i < n. Instead of
 * rescanning every pair after each merge (quadratic in n), a heap keeps the candidate
 * pairs ordered; entries made stale by an earlier merge are skipped when popped.
 * first_alone 1: piece[0] is a starting unit of its own whatever follows it (llama2.c's
 * dummy prefix, a token before the text's first character even if that is a stray
 * continuation byte). Returns 0, or -1 after a stderr line. */
static int merge_piece(const TokenizerMergeRules *rules, const unsigned char *piece, size_t n,
                       int first_alone, MergeScratch *scratch) {
    if (scratch_reserve(scratch, n) != 0) return -1;
    int32_t *prev = scratch->prev, *next = scratch->next, *token = scratch->token;
    int32_t length = (int32_t)n;
    size_t heap_count = 0;

    // the starting tokens, linked, and a candidate for every adjacent pair
    for (int32_t i = 0, last = -1; i < length; last = i, i = next[i]) {
        int32_t width = i == 0 && first_alone
                        ? 1 : (int32_t)unit_length(rules->by_character, piece, n, (size_t)i);
        prev[i] = last;
        next[i] = i + width;
        token[i] = rules->find(rules->vocab, piece + i, (size_t)width);
        if (token[i] < 0 && rules->allow_unknown) token[i] = TOKEN_UNKNOWN;
        else if (token[i] < 0) {
            const char *unit = rules->by_character ? "character" : "byte";
            fprintf(stderr, "tokenizer: merge: no token for the %s at offset %d (got none, "
                    "expected every starting %s to be a token)\n", unit, (int)i, unit);
            return -1;
        }
    }
    for (int32_t i = 0; next[i] < length; i = next[i])
        push_pair(rules, piece, i, next[next[i]], scratch, &heap_count);

    while (heap_count > 0) {
        MergeCandidate best = heap_pop(scratch->heap, &heap_count);
        // stale unless the left token still exists and is followed by exactly one token
        // that ends at best.end (then the pair's bytes, hence its rank, are unchanged)
        int32_t left = best.start, right = next[left];
        if (token[left] == TOKEN_MERGED || right >= length || next[right] != best.end) continue;
        token[left] = best.id;
        token[right] = TOKEN_MERGED;
        next[left] = best.end;
        if (best.end < length) prev[best.end] = left;
        // the merged token forms new pairs with its neighbours
        if (prev[left] >= 0) push_pair(rules, piece, prev[left], best.end, scratch, &heap_count);
        if (best.end < length) push_pair(rules, piece, left, next[best.end], scratch, &heap_count);
    }
    return 0;
}

long tokenizer_merge(const TokenizerMergeRules *rules, const unsigned char *piece, size_t n,
                     int *ids, int32_t *starts) {
    MergeScratch scratch;
    long count = 0;
    scratch_init(&scratch);
    if (n == 0 || merge_piece(rules, piece, n, 0, &scratch) != 0) {
        if (n == 0)
            fprintf(stderr, "tokenizer: merge: empty piece (got 0 bytes, expected at least 1)\n");
        scratch_free(&scratch);
        return -1;
    }
    for (int32_t i = 0; i < (int32_t)n; i = scratch.next[i]) {
        ids[count] = scratch.token[i];
        starts[count] = i;
        count++;
    }
    scratch_free(&scratch);
    return count;
}

/* find for a Tokenizer: its hash table. */
static int tokenizer_find(const void *vocab, const unsigned char *bytes, size_t len) {
    return table_find(vocab, bytes, len);
}

/* Encode one piece of n >= 1 bytes. GPT-2 starts from one token per byte (all bytes
 * have single-byte tokens); Llama from one token per character (all of which are in
 * the vocabulary), piece[0] alone if first_alone (merge_piece). */
static int encode_piece(const Tokenizer *t, const unsigned char *piece, size_t n,
                        int first_alone, MergeScratch *scratch, int *ids, size_t cap,
                        size_t *count) {
    TokenizerMergeRules rules = {tokenizer_find, t, t->rank, t->kind == TOKENIZER_LLAMA, 0,
                                 t->pairs ? t : NULL};
    // a piece that is itself a token is taken whole, as tiktoken does before merging; not
    // with a file's merges (llama.cpp merges)
    int whole = rules.by_character || t->pairs ? -1 : table_find(t, piece, n);
    if (whole >= 0) {
        emit(whole, ids, cap, count);
        return 0;
    }
    if (merge_piece(&rules, piece, n, first_alone, scratch) != 0) return -1;
    for (int32_t i = 0; i < (int32_t)n; i = scratch->next[i])
        emit(scratch->token[i], ids, cap, count);
    return 0;
}

/* ---------------------------------------------------------------- encode and decode */

/* 1 if id is one of t's special tokens. */
static int is_special(const Tokenizer *t, int id) {
    for (int k = 0; k < t->n_special; k++)
        if (t->special[k] == id) return 1;
    return 0;
}

/* The token a whole piece of n bytes is, or -1, as llama.cpp looks a Llama 3 piece up
 * (ignore_merges): by its GPT-2 spelling among the tokens' texts as the file writes them.
 * A special token's text is written as it is, which is its own GPT-2 spelling only in
 * printable ASCII (" xq" is not: its spelling is "\xc4\xa0xq"). */
static int whole_piece(const Tokenizer *t, const unsigned char *piece, size_t n) {
    int id = table_find(t, piece, n);
    if (id >= 0 && is_special(t, id))
        for (size_t i = 0; i < n; i++)
            if (piece[i] < '!' || piece[i] > '~') return -1;
    return id;
}

/* GPT-2: the BOS where the vocabulary asks for one (a GGUF file's add_bos_token) and bos
 * is 1, then pre-tokenize and merge each piece. at: where bytes lie in the text (for the
 * message on a byte with no token). */
static int encode_gpt2(const Tokenizer *t, const unsigned char *bytes, size_t len, size_t at,
                       int bos, MergeScratch *scratch, int *ids, size_t cap, size_t *count) {
    for (size_t i = 0; i < len; i++) {
        if (t->byte_token[bytes[i]] < 0) {
            fprintf(stderr, "tokenizer: encode: byte 0x%02X at offset %zu has no token (got no "
                    "single-byte token, expected one for every byte of the text)\n",
                    bytes[i], at + i);
            return -1;
        }
    }
    if (t->add_bos && bos) emit(t->bos_id, ids, cap, count);   /* a GGUF file's */
    for (size_t start = 0; start < len;) {
        /* the text up to the next number character (smollm: which is a piece alone),
         * pre-tokenized as if it ended there */
        size_t span = len, width;
        for (size_t i = start; t->pre == TOKENIZER_PRE_SMOLLM && i < len; i += width) {
            if (char_class_at(bytes, len, i, &width) == CHAR_NUMBER) {
                span = i > start ? i : i + width;
                break;
            }
        }
        for (size_t end; start < span; start = end) {
            const char *text = (const char *)bytes + start;
            end = start + (t->pre == TOKENIZER_PRE_LLAMA3
                           ? tokenizer_next_piece_llama3(text, span - start, 0, 3)
                           : t->pre == TOKENIZER_PRE_QWEN2
                           ? tokenizer_next_piece_llama3(text, span - start, 0, 1)
                           : tokenizer_next_piece(text, span - start, 0));
            int whole = t->pre == TOKENIZER_PRE_LLAMA3 ? whole_piece(t, bytes + start, end - start)
                                                       : -1;
            if (whole >= 0) emit(whole, ids, cap, count);   /* a token already: not merged */
            else if (encode_piece(t, bytes + start, end - start, 0, scratch, ids, cap, count) != 0)
                return -1;
        }
    }
    return 0;
}

/* llama.cpp's SentencePiece (t->merge_unknown): the whole text merges at once, a character
 * with no token taking part as its bytes (so "o" + "n" may become "on" though neither
 * letter is a token); what is left of such characters then falls back to its <0xHH>
 * tokens. */
static int encode_text_merged(const Tokenizer *t, const unsigned char *text, size_t n,
                              MergeScratch *scratch, int *ids, size_t cap, size_t *count) {
    TokenizerMergeRules rules = {tokenizer_find, t, t->rank, 2, 1, NULL};
    if (merge_piece(&rules, text, n, 0, scratch) != 0) return -1;
    for (int32_t i = 0; i < (int32_t)n; i = scratch->next[i]) {
        if (scratch->token[i] >= 0) {
            emit(scratch->token[i], ids, cap, count);
            continue;
        }
        for (int32_t k = i; k < scratch->next[i]; k++) {
            if (t->byte_token[text[k]] < 0) {
                fprintf(stderr, "tokenizer: encode: byte 0x%02X has no fallback token (got no "
                        "<0x%02X> in the vocabulary, expected one for every byte)\n", text[k],
                        text[k]);
                return -1;
            }
            emit(t->byte_token[text[k]], ids, cap, count);
        }
    }
    return 0;
}

/* Llama: BOS (bos 1), then " " (space 1) + text as runs of known characters, merged,
 * separated by the byte-fallback tokens of unknown characters (which never merge:
 * llama2.c looks up "<0xE2><0x80>" and finds nothing); or, for a vocabulary from a GGUF
 * file, as llama.cpp does (encode_text_merged; the space where add_space asks). A
 * continuation has neither the BOS nor the space. */
static int encode_llama(const Tokenizer *t, const unsigned char *text, size_t len, int bos,
                        int space, MergeScratch *scratch, int *ids, size_t cap,
                        size_t *count) {
    if (t->add_bos && bos) emit(t->bos_id, ids, cap, count);
    if (len == 0) return 0;
    if (t->merge_unknown) {
        size_t prefix = t->add_space && space ? 1 : 0;
        unsigned char *spaced = malloc(len + 1);   /* [" "] + text */
        if (!spaced) {
            fprintf(stderr, "tokenizer: encode: out of memory for %zu bytes\n", len + 1);
            return -1;
        }
        /* llama.cpp writes every space as U+2581, so a U+2581 in the text reads as one */
        size_t n = prefix;
        spaced[0] = ' ';
        for (size_t i = 0; i < len; i++) {
            int is_u2581 = i + 2 < len && text[i] == 0xE2 && text[i + 1] == 0x96 &&
                              text[i + 2] == 0x81;
            spaced[n++] = is_u2581 ? ' ' : text[i];
            if (is_u2581) i += 2;
        }
        int status = encode_text_merged(t, spaced, n, scratch, ids, cap, count);
        free(spaced);
        return status;
    }
    size_t prefix = space ? 1 : 0;
    if (prefix && table_find(t, (const unsigned char *)" ", 1) < 0) {
        fprintf(stderr, "tokenizer: encode: the vocabulary has no \" \" token for the dummy "
                "prefix (expected one, as llama2.c's encode needs)\n");
        return -1;
    }
    unsigned char *buffer = malloc(len + 1);   /* [" "] + text */
    if (!buffer) {
        fprintf(stderr, "tokenizer: encode: out of memory for %zu bytes\n", len + 1);
        return -1;
    }
    buffer[0] = ' ';
    memcpy(buffer + prefix, text, len);
    size_t n = len + prefix, run_start = 0, i = 0;
    int status = 0;
    while (i < n && status == 0) {
        /* the dummy prefix is a character of its own (llama2.c emits it as a token before
         * the text's first character, even a stray continuation byte) */
        size_t width = i < prefix ? 1 : llama_char_length(buffer, n, i);
        if (table_find(t, buffer + i, width) < 0) {
            // merge the run of known characters so far, then fall back to bytes
            if (i > run_start)
                status = encode_piece(t, buffer + run_start, i - run_start, run_start < prefix,
                                      scratch, ids, cap, count);
            for (size_t k = i; k < i + width && status == 0; k++) {
                int id = TOKENIZER_LLAMA_BYTE0 + buffer[k];
                if (id >= t->vocab_size) {
                    fprintf(stderr, "tokenizer: encode: byte 0x%02X has no fallback token (got "
                            "vocab %d, expected at least %d)\n", buffer[k], t->vocab_size,
                            id + 1);
                    status = -1;
                }
                emit(id, ids, cap, count);
            }
            run_start = i + width;
        }
        i += width;
    }
    if (status == 0 && n > run_start)
        status = encode_piece(t, buffer + run_start, n - run_start, run_start < prefix,
                              scratch, ids, cap, count);
    free(buffer);
    return status;
}

/* One run of text, at offset at of the whole: its BOS (bos 1) and, for Llama, its space
 * (space 1). */
static int encode_run(const Tokenizer *t, const unsigned char *text, size_t len, size_t at,
                      int bos, int space, MergeScratch *scratch, int *ids, size_t cap,
                      size_t *count) {
    if (t->kind == TOKENIZER_GPT2)
        return encode_gpt2(t, text, len, at, bos, scratch, ids, cap, count);
    return encode_llama(t, text, len, bos, space, scratch, ids, cap, count);
}

/* The special tokens that text (len,) spells, as llama.cpp's parse_special finds them: each
 * special token in turn (t->special's order) takes its leftmost occurrences that lie
 * wholly in text no token before it took. at (len,) gets the token's id at its first
 * byte, -2 at its others, and -1 on the text left. */
static void find_specials(const Tokenizer *t, const unsigned char *text, size_t len,
                          int32_t *at) {
    for (size_t i = 0; i < len; i++) at[i] = -1;
    for (int s = 0; s < t->n_special; s++) {
        int32_t id = t->special[s];
        const unsigned char *word = t->bytes + t->offset[id];
        size_t n = t->offset[id + 1] - t->offset[id], i = 0;
        while (n <= len && i <= len - n) {
            const unsigned char *hit = memchr(text + i, word[0], len - n + 1 - i);
            if (!hit) break;
            i = (size_t)(hit - text);
            size_t k = 0;
            while (k < n && at[i + k] == -1 && text[i + k] == word[k]) k++;
            if (k < n) {   /* no match, or one over text a token took */
                i++;
                continue;
            }
            at[i] = id;
            for (k = 1; k < n; k++) at[i + k] = -2;
            i += n;
        }
    }
}

/* tokenizer_encode with special tokens: BOS, then the special tokens the text spells, and
 * the runs of text between them, each encoded alone (Llama: after its own space), as
 * llama.cpp tokenizes a prompt's fragments. */
static int encode_specials(const Tokenizer *t, const unsigned char *text, size_t len,
                           MergeScratch *scratch, int *ids, size_t cap, size_t *count) {
    int32_t *at = malloc((len ? len : 1) * sizeof *at);
    if (!at) {
        fprintf(stderr, "tokenizer: encode: out of memory for %zu bytes\n", len);
        return -1;
    }
    find_specials(t, text, len, at);
    if (t->add_bos) emit(t->bos_id, ids, cap, count);
    int status = 0;
    for (size_t i = 0; i < len && status == 0;) {
        if (at[i] >= 0) {
            emit(at[i], ids, cap, count);
            i += t->offset[at[i] + 1] - t->offset[at[i]];
            continue;
        }
        size_t end = i;
        while (end < len && at[end] == -1) end++;
        status = encode_run(t, text + i, end - i, i, 0, 1, scratch, ids, cap, count);
        i = end;
    }
    free(at);
    return status;
}

/* tokenizer_encode and tokenizer_encode_continuation */
static int encode(const Tokenizer *t, const char *text, size_t len, int continuation,
                  int *ids, size_t cap, size_t *n_ids) {
    const unsigned char *bytes = (const unsigned char *)text;
    MergeScratch scratch;
    size_t count = 0;
    scratch_init(&scratch);
    *n_ids = 0;
    int status = t->n_special && !continuation
                 ? encode_specials(t, bytes, len, &scratch, ids, cap, &count)
                 : encode_run(t, bytes, len, 0, !continuation, !continuation, &scratch, ids,
                              cap, &count);
    scratch_free(&scratch);
    if (status != 0) return -1;
    if (count > cap) {
        fprintf(stderr, "tokenizer: encode: output too small (got room for %zu ids, expected "
                "%zu)\n", cap, count);
        *n_ids = count;
        return -1;
    }
    *n_ids = count;
    return 0;
}

int tokenizer_encode(const Tokenizer *t, const char *text, size_t len,
                     int *ids, size_t cap, size_t *n_ids) {
    return encode(t, text, len, 0, ids, cap, n_ids);
}

int tokenizer_encode_continuation(const Tokenizer *t, const char *text, size_t len,
                                  int *ids, size_t cap, size_t *n_ids) {
    return encode(t, text, len, 1, ids, cap, n_ids);
}

size_t tokenizer_max_ids(const Tokenizer *t, size_t len) {
    return (t->n_special ? 2 * len : len) + 2;
}

int tokenizer_ends(const Tokenizer *t, int id) {
    return id == t->eot_id || (t->stop_at_bos && id == t->bos_id) || (t->ends && t->ends[id]);
}

/* The byte HH if token id is spelled "<0xHH>", HH in upper-case hex (a Llama byte-fallback
 * token), else -1. */
static int byte_token_value(const Tokenizer *t, int id) {
    const unsigned char *s = t->bytes + t->offset[id];
    static const char hex[] = "0123456789ABCDEF";
    if (t->offset[id + 1] - t->offset[id] != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    const char *hi = memchr(hex, s[3], 16), *lo = memchr(hex, s[4], 16);   /* not hex's NUL */
    if (!hi || !lo) return -1;
    return (int)((hi - hex) * 16 + (lo - hex));
}

const unsigned char *tokenizer_decode(const Tokenizer *t, int prev_id, int id, size_t *len) {
    if (id < 0 || id >= t->vocab_size) {
        *len = 0;
        return NULL;
    }
    const unsigned char *bytes = t->bytes + t->offset[id];
    *len = t->offset[id + 1] - t->offset[id];
    if (t->kind == TOKENIZER_LLAMA) {
        int byte = byte_token_value(t, id);
        if (byte >= 0) {
            *len = 1;
            return &t->byte_values[byte];
        }
        if (prev_id == t->bos_id && *len > 0 && bytes[0] == ' ') {   /* llama2.c strips it */
            bytes++;
            (*len)--;
        }
    }
    return bytes;
}

const unsigned char *tokenizer_printed(const Tokenizer *t, int prev_id, int id, size_t *len) {
    const unsigned char *bytes = tokenizer_decode(t, prev_id, id, len);
    if (!t->raw_bytes && *len == 1 && !isprint(bytes[0]) && !isspace(bytes[0])) *len = 0;
    if (t->silent && *len > 0 && t->silent[id]) *len = 0;
    return bytes;
}

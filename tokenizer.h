/* tokenizer.h: GPT-2 byte-level BPE, read from llm.c's tokenizer file.
 *
 * File format (little-endian): a header of 256 uint32 {magic 20240328, version,
 * vocab_size, eot_id, 0...}; version 1 implies vocab_size 50257 and eot 50256,
 * version 2 stores them. Then, for each id in order, a uint8 length (>= 1) and
 * that many raw bytes. Tokens are raw bytes, not GPT-2's unicode-mapped strings.
 */
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stddef.h>   /* size_t */
#include <stdint.h>   /* uint32_t */

#define TOKENIZER_MAGIC 20240328      /* llm.c's tokenizer file magic */
#define TOKENIZER_HEADER_INTS 256     /* header size in uint32 */
#define TOKENIZER_GPT2_VOCAB 50257    /* version 1 implies this vocab size ... */
#define TOKENIZER_GPT2_EOT 50256      /* ... and this end-of-text id */
#ifndef TOKENIZER_MAX_VOCAB
#define TOKENIZER_MAX_VOCAB (1 << 20) /* sanity bound on vocab_size */
#endif
#ifndef TOKENIZER_SMALL_PIECE
#define TOKENIZER_SMALL_PIECE 64      /* pieces up to this many bytes merge in stack memory */
#endif

typedef struct TokenizerEntry TokenizerEntry;

typedef struct {
    int vocab_size;          /* number of tokens */
    int eot_id;              /* end-of-text token id */
    unsigned char *bytes;    /* (total_bytes,) all token bytes, concatenated; owned */
    uint32_t *offset;        /* (vocab_size + 1,) token i: bytes[offset[i] .. offset[i+1]); owned */
    int byte_token[256];     /* lowest non-eot id of each single byte, or -1 */
    TokenizerEntry *table;   /* open-addressing hash: byte string -> id; owned */
    size_t table_size;       /* slots in table (a power of two) */
    size_t max_token_len;    /* length in bytes of the longest token */
} Tokenizer;

/* Load a tokenizer file. Returns 0, or -1 after printing one line to stderr naming
 * the file and what was wrong. *t is zeroed first; tokenizer_free is safe either way. */
int tokenizer_load(Tokenizer *t, const char *path);

/* Release everything tokenizer_load allocated. Safe on a zeroed or freed Tokenizer. */
void tokenizer_free(Tokenizer *t);

/* Encode len bytes of text (any bytes, invalid UTF-8 included) into token ids with
 * GPT-2's pre-tokenization and lowest-id merging. Writes at most cap ids to ids and
 * the count to *n_ids. Returns 0, or -1 (with a stderr line) if cap is too small or
 * some byte has no single-byte token. Does not add end-of-text. When cap is too small
 * *n_ids receives the count needed; on other failures it is 0. Allocates only for
 * pieces longer than TOKENIZER_SMALL_PIECE bytes (freed before returning); the eot
 * token is never produced, so "<|endoftext|>" in text is encoded as plain text. */
int tokenizer_encode(const Tokenizer *t, const char *text, size_t len,
                     int *ids, size_t cap, size_t *n_ids);

/* The raw bytes of token id (not NUL-terminated; a token may contain 0x00), and
 * its length in *len. The pointer is owned by the tokenizer. id must be in
 * [0, vocab_size): callers validate ids first (outside it: NULL and *len 0). */
const unsigned char *tokenizer_decode(const Tokenizer *t, int id, size_t *len);

/* GPT-2 pre-tokenization: the end offset (exclusive) of the piece of text[0 .. len)
 * that starts at byte start (start < len, else returns len), exactly as the regex
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * matches there (JavaScript semantics, \s as in JavaScript). A byte that is not valid
 * UTF-8 counts as one character that is neither letter, number nor space. Uses only
 * the text, so a BPE trainer can split its corpus the same way. */
size_t tokenizer_next_piece(const char *text, size_t len, size_t start);

#endif /* TOKENIZER_H */

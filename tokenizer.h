/* tokenizer.h: byte-level BPE tokenizers of two families, told apart by the file.
 *
 * GPT-2 (llm.c's file, little-endian): a header of 256 uint32 {magic 20240328, version,
 * vocab_size, eot_id, 0...}; version 1 implies vocab_size 50257 and eot 50256, version
 * 2 stores them. Then, for each id in order, a uint8 length (>= 1) and that many raw
 * bytes. Tokens are raw bytes, not GPT-2's unicode-mapped strings. Merging: lowest id.
 *
 * Llama (llama2.c's tokenizer.bin, SentencePiece-style): an int32 max_token_length,
 * then for each id until the end of the file a float32 score, an int32 length and the
 * bytes. Merging: highest score. Ids 1 and 2 are BOS and EOS, ids 3..258 the byte
 * fallback tokens <0x00>..<0xFF>; encoding adds BOS and a "dummy prefix" space.
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
#define TOKENIZER_LLAMA_BOS 1         /* llama2.c: beginning of sequence */
#define TOKENIZER_LLAMA_EOS 2         /* llama2.c: end of sequence */
#define TOKENIZER_LLAMA_BYTE0 3       /* llama2.c: id of byte-fallback token <0x00> */
#ifndef TOKENIZER_MAX_TOKEN_LEN
#define TOKENIZER_MAX_TOKEN_LEN 65536 /* sanity bound on a Llama token's length */
#endif
#ifndef TOKENIZER_SMALL_PIECE
#define TOKENIZER_SMALL_PIECE 64      /* pieces up to this many bytes merge in stack memory */
#endif

typedef struct TokenizerEntry TokenizerEntry;
typedef struct TokenizerPair TokenizerPair;

typedef enum { TOKENIZER_GPT2, TOKENIZER_LLAMA } TokenizerKind;

/* How a GPT-2-kind vocabulary splits text into pieces before merging each (a GGUF file's
 * tokenizer.ggml.pre; every other file: GPT-2's). */
typedef enum {
    TOKENIZER_PRE_GPT2,     /* GPT-2's regex (tokenizer_next_piece) */
    TOKENIZER_PRE_SMOLLM,   /* SmolLM's: every number character a piece of its own, then
                             * GPT-2's regex on the text between them */
    TOKENIZER_PRE_QWEN2,    /* Qwen2's: Llama 3's regex with one number character a piece
                             * (tokenizer_next_piece_llama3, digits 1), every piece merged */
    TOKENIZER_PRE_LLAMA3    /* Llama 3's regex (tokenizer_next_piece_llama3), and a piece
                             * that is a token whole is that token, unmerged */
} TokenizerPre;

typedef struct {
    TokenizerKind kind;      /* which file format, hence which encoding rules */
    int vocab_size;          /* number of tokens */
    int eot_id;              /* end-of-text token id (Llama: EOS) */
    int bos_id;              /* beginning-of-sequence id (Llama: BOS), or -1 (GPT-2; a
                                GPT-2 GGUF file's own id where it names one) */
    int32_t *rank;           /* (vocab_size,) merge priority, lowest first: the id itself for
                                GPT-2, the rank of the score (descending) for Llama; owned */
    unsigned char byte_values[256];  /* byte_values[b] == b: what <0xHH> decodes to */
    unsigned char *bytes;    /* (total_bytes,) all token bytes, concatenated; owned */
    uint32_t *offset;        /* (vocab_size + 1,) token i: bytes[offset[i] .. offset[i+1]); owned */
    int byte_token[256];     /* the id that stands for each byte alone, or -1: GPT-2 files,
                              * the lowest non-eot id spelled by that byte; a GGUF
                              * vocabulary, its single byte (GPT-2) or its <0xHH> token
                              * (Llama); llama2.c files, -1 (their encode takes
                              * TOKENIZER_LLAMA_BYTE0 + the byte) */
    TokenizerEntry *table;   /* open-addressing hash: byte string -> id; owned */
    size_t table_size;       /* slots in table (a power of two) */
    TokenizerPair *pairs;    /* open-addressing hash: (left id, right id) -> the merge of
                              * that pair (a GGUF file's merges, which BPE ranks by pair, as
                              * llama.cpp does); NULL: a pair ranks as the token it makes
                              * (rank[]), as tiktoken does; owned */
    size_t pairs_size;       /* slots in pairs (a power of two) */
    size_t max_token_len;    /* length in bytes of the longest token */
    int add_bos;             /* 1 if encoding starts with BOS (llama2.c: always; GPT-2: a
                              * GGUF file's add_bos_token, llm.c's files never) */
    int add_space;           /* Llama: 1 if a space goes before the text (the dummy prefix) */
    int raw_bytes;           /* 1: a token of one unprintable byte prints as that byte (a
                              * GGUF file's vocabulary, as llama.cpp prints it); 0: it
                              * prints nothing, as llama2.c's and llm.c's safe_printf */
    int merge_unknown;       /* Llama: 1 to merge as llama.cpp does (a GGUF file's vocabulary:
                              * characters with no token merge too, then fall back to bytes),
                              * 0 as llama2.c does (they fall back first) */
    int stop_at_bos;         /* 1: a generated BOS ends the text as end-of-text does
                              * (llama2.c's files, whose stories each start with BOS, as
                              * llama2.c's run); 0: it is a token like any other (a GGUF
                              * file's vocabulary, as llama.cpp: BOS ends no generation) */
    unsigned char *silent;   /* (vocab_size,) 1 where a generated token prints nothing (a
                              * GGUF file's tokens that llama.cpp prints as nothing: <unk>,
                              * <s>, formats/gguf.c's rules); NULL: every token prints; owned */
    int32_t *special;        /* (n_special,) the tokens whose text, written in a prompt, reads
                              * as the token itself (a GGUF file's unknown, control and
                              * user-defined tokens, as llama-cli parses its prompt: "<s>" is
                              * BOS), longest first, ties by id; NULL: none; owned */
    int n_special;
    unsigned char *ends;     /* (vocab_size,) 1 for a token that ends a generation besides
                              * eot_id: a GGUF vocabulary's tokens llama.cpp ends at by their
                              * text (<|im_end|>, <|eot_id|>, <|endoftext|>, <|fim_pad|>,
                              * ...; read as control tokens whatever their type) or by its
                              * keys (eot_token_id, ...: formats/gguf.c); NULL: none; owned */
    TokenizerPre pre;        /* GPT-2: how text splits into pieces before merging */
} Tokenizer;

/* A vocabulary held in memory (a GGUF file's), for tokenizer_init. */
typedef struct {
    TokenizerKind kind;
    int vocab_size;              /* V */
    const unsigned char *bytes;  /* every token's bytes, concatenated (spaces as spaces) */
    const size_t *offset;        /* (V + 1,) token i is bytes[offset[i] .. offset[i+1]) */
    const float *scores;         /* Llama: (V,) merge scores, highest first; else NULL */
    int bos_id, eos_id;          /* beginning and end of sequence (GPT-2: end of text) */
    int add_bos, add_space;      /* Llama: as the Tokenizer fields */
    const unsigned char *silent; /* (V,) as the Tokenizer field, or NULL: every token prints */
    const unsigned char *ends;   /* (V,) as the Tokenizer field, or NULL: none but eos_id */
    const int32_t *special;      /* (n_special,) as the Tokenizer field but in any order (ids
                                  * of empty tokens ignored), or NULL: none */
    int n_special;
    TokenizerPre pre;            /* GPT-2: as the Tokenizer field */
    const int32_t *merges;       /* GPT-2: (n_merges, 3) each merge's left id, right id and
                                  * the id it makes, lowest rank first, or NULL (a pair
                                  * ranks as the id it makes) */
    int n_merges;
} TokenizerVocab;

/* Load a tokenizer file. Returns 0, or -1 after printing one line to stderr naming
 * the file and what was wrong. *t is zeroed first; tokenizer_free is safe either way. */
int tokenizer_load(Tokenizer *t, const char *path);

/* Builds a tokenizer from v (copied: v may be freed afterwards). A Llama vocabulary
 * encodes as llama.cpp's SentencePiece does (merge_unknown), its byte fallback by the
 * tokens spelled <0xHH>. Returns 0, or -1 after one stderr line naming path; *t is zeroed
 * first and tokenizer_free is safe either way. */
int tokenizer_init(Tokenizer *t, const TokenizerVocab *v, const char *path);

/* The id of the token spelled bytes[0 .. len) (the lowest, if several are), or -1. */
int tokenizer_find_id(const Tokenizer *t, const unsigned char *bytes, size_t len);

/* Release everything tokenizer_load allocated. Safe on a zeroed or freed Tokenizer. */
void tokenizer_free(Tokenizer *t);

/* Encode len bytes of text (any bytes, invalid UTF-8 included) into token ids. GPT-2:
 * BOS only where add_bos asks, pre-tokenization, then lowest-id merging; end-of-text is
 * not added. Llama: BOS, then
 * (for non-empty text) a space and the text, merged by highest score as llama2.c's
 * encode(text, bos=1, eos=0) does, with byte fallback for unknown characters. With
 * special tokens (a GGUF vocabulary's), the spans of text that spell one become it first,
 * as llama.cpp's parse_special splits a prompt, and each run of text between them is
 * encoded on its own (Llama: each after its own space). Writes at
 * most cap ids to ids and the count to *n_ids (at most tokenizer_max_ids).
 * Returns 0, or -1 (with a stderr line) if
 * cap is too small, some byte has no token, (Llama) the vocabulary has no " " token, or
 * memory runs out. When cap is too small *n_ids receives the count needed; on other
 * failures it is 0. Allocates for pieces longer than TOKENIZER_SMALL_PIECE bytes and, for
 * Llama, a copy of the text with its leading space (all freed before returning); outside
 * special tokens the eot token is never produced, so "<|endoftext|>" in text read with
 * llm.c's tokenizer file is encoded as plain text. */
int tokenizer_encode(const Tokenizer *t, const char *text, size_t len,
                     int *ids, size_t cap, size_t *n_ids);

/* The most ids tokenizer_encode makes of len bytes: len + 2 (BOS, a space), 2 len + 2 with
 * special tokens (each run of text between them a space more). */
size_t tokenizer_max_ids(const Tokenizer *t, size_t len);

/* 1 if generating token id ends the text: the end-of-text token, BOS where stop_at_bos,
 * or one of t->ends. */
int tokenizer_ends(const Tokenizer *t, int id);

/* tokenizer_encode for text that continues a sequence (a line of interactive input):
 * without the BOS, (Llama) without the dummy-prefix space and with no special tokens, so
 * that the ids spell exactly the text's bytes. */
int tokenizer_encode_continuation(const Tokenizer *t, const char *text, size_t len,
                                  int *ids, size_t cap, size_t *n_ids);

/* The raw bytes of token id (not NUL-terminated; a token may contain 0x00), and
 * its length in *len, when it follows token prev_id (-1 for none). For Llama, as
 * llama2.c prints it: a byte token <0xHH> is the byte HH, and a leading space is
 * dropped right after BOS. The pointer is owned by the tokenizer. id must be in
 * [0, vocab_size): callers validate ids first (outside it: NULL and *len 0). */
const unsigned char *tokenizer_decode(const Tokenizer *t, int prev_id, int id, size_t *len);

/* The bytes token id prints as after token prev_id, as run prints text: tokenizer_decode's,
 * but a tokenizer file's piece of one byte that is neither printable ASCII nor whitespace
 * (a control character, or a lone byte of a character the vocabulary spells in pieces)
 * prints nothing (*len 0), as the safe_printf of llama2.c and llm.c, whose output run's
 * matches byte for byte; a GGUF file's vocabulary (raw_bytes) prints every byte, as
 * llama.cpp does, and nothing for its silent tokens (<unk>, <s>). */
const unsigned char *tokenizer_printed(const Tokenizer *t, int prev_id, int id, size_t *len);

/* GPT-2 pre-tokenization: the end offset (exclusive) of the piece of text[0 .. len)
 * that starts at byte start (start < len, else returns len), exactly as the regex
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * matches there (JavaScript semantics, \s as in JavaScript). A byte that is not valid
 * UTF-8 counts as one character that is neither letter, number nor space. Uses only
 * the text, so a BPE trainer can split its corpus the same way. */
size_t tokenizer_next_piece(const char *text, size_t len, size_t start);

/* Llama 3's pre-tokenization (llama.cpp's llama-bpe), as tokenizer_next_piece: the regex
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * (the space before the fourth alternative is part of it) with digits 3; with digits 1,
 * \p{N} for \p{N}{1,3}: Qwen2's regex. */
size_t tokenizer_next_piece_llama3(const char *text, size_t len, size_t start, int digits);

/* ---- The merge loop of one piece, shared with the BPE trainer (bpe.c) ---- */

/* The id of the token spelled by bytes[0 .. len) in vocab, or -1 if there is none. */
typedef int (*TokenizerFind)(const void *vocab, const unsigned char *bytes, size_t len);

/* A vocabulary as tokenizer_merge sees it. */
typedef struct {
    TokenizerFind find;      /* looks up a byte string */
    const void *vocab;       /* passed to find; a view, not owned */
    const int32_t *rank;     /* (vocab size,) merge priority by id, lowest first; NULL: the id */
    int by_character;        /* 0: start from bytes; 1: from UTF-8 characters as llama2.c
                              * groups them (a byte and up to 3 continuation bytes after
                              * it); 2: as llama.cpp does (the length a first byte announces
                              * in its table of UTF-8 lengths, cut at the piece's end) */
    int allow_unknown;       /* 1: a starting character with no token may still merge, and
                              * stays id -2 if it does not (tokenizer.c's GGUF path); else 0 */
    const Tokenizer *pairs;  /* a tokenizer whose pairs rank the merges instead (a pair
                              * merges only as listed), or NULL */
} TokenizerMergeRules;

/* Merge one piece of n >= 1 bytes as tokenizer_encode does inside a piece: it starts as
 * one token per byte (or character), each of which must be a token, and the adjacent pair
 * whose bytes spell the token of lowest rank (with rules->pairs: the listed pair of lowest
 * rank; leftmost on ties) merges, again and again, until no pair spells a token (is
 * listed); O(n log n) with a heap. It does not first look the whole
 * piece up (GPT-2 encoding does; callers do that themselves). Writes the tokens' ids to
 * ids (n,) and their byte offsets in piece to starts (n,), and returns their count; or
 * -1 after a stderr line (a starting byte or character is no token, piece too long, out
 * of memory). Allocates only for pieces longer than TOKENIZER_SMALL_PIECE (freed). */
long tokenizer_merge(const TokenizerMergeRules *rules, const unsigned char *piece, size_t n,
                     int *ids, int32_t *starts);

#endif /* TOKENIZER_H */

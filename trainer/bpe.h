/* bpe.h: learn a byte-level BPE vocabulary from text, in the form tokenizer.c reads.
 *
 * The text is split into pieces with tokenizer_next_piece (GPT-2's pre-tokenization,
 * the same code the encoder uses), so merges never cross a piece boundary. The
 * vocabulary is written in id order: the 256 single bytes, then one token per merge
 * in the order learned, then an end-of-text token. Because each new token gets the
 * highest id so far, tokenizer.c's lowest-id merging replays the merges in the order
 * they were learned; bpe_train keeps every piece's segmentation equal to what that
 * encoder produces (see bpe.c), so the two agree exactly.
 */
#ifndef BPE_H
#define BPE_H

#include <stddef.h>   /* size_t */
#include <stdio.h>    /* FILE (progress lines) */

#define BPE_BYTE_TOKENS 256             /* ids 0..255 are the single bytes */
#define BPE_EOT_TEXT "<|endoftext|>"    /* bytes of the end-of-text token (GPT-2's) */
#define BPE_MAX_TOKEN_BYTES 255         /* the file stores each length in one byte */
#define BPE_LOG_SECONDS 2.0             /* processor seconds between train's progress lines */

typedef struct {
    int vocab_size;          /* 256 + n_merges + 1 (the end-of-text token, last) */
    int n_merges;            /* merges learned */
    int (*merges)[2];        /* (n_merges, 2) owned: token 256 + i = merges[i][0] ++ merges[i][1] */
    int *merge_count;        /* (n_merges,) owned: occurrences of the pair when it was chosen */
    unsigned char *bytes;    /* all token bytes, concatenated; owned */
    size_t *offset;          /* (vocab_size + 1,) token i: bytes[offset[i] .. offset[i+1]); owned */
    size_t work;             /* pair occurrences counted, uncounted or looked up while learning:
                                the training's cost, O(text bytes) (the tests bound it) */
} Bpe;

/* Learn up to vocab_size - 257 merges from text[0 .. len): at each step the adjacent
 * pair with the highest count over all pieces (ties: the lower left id, then the
 * lower right id) becomes the next token. Stops early when no pair occurs twice or a
 * token would exceed BPE_MAX_TOKEN_BYTES, so b->vocab_size may be smaller than asked.
 * Any bytes are valid text (binary data too). Cost: near-linear in the text (a merge
 * costs O(log pairs) for each place it changes, plus lookups of its token's splits);
 * memory about 70 bytes per byte of the distinct pieces. vocab_size must be >= 257.
 * Returns 0, or -1 after one stderr line (bad size, out of memory). *b is zeroed first;
 * bpe_free is safe either way. */
int bpe_train(Bpe *b, const char *text, size_t len, int vocab_size);

/* bpe_train that also shows its progress on long inputs: when `every` seconds of processor
 * time have passed since the start or the last line, it writes a line to log, flushed,
 * "bpe: 300/767 merges learned, 12.0 s" (checked after the pairs are counted and after
 * each merge; every = 0 writes one each time). For train: stdout, every BPE_LOG_SECONDS. */
int bpe_train_logged(Bpe *b, const char *text, size_t len, int vocab_size, FILE *log,
                     double every);

/* Write b as an llm.c tokenizer file, version 2 (vocab_size and eot id in the header),
 * which tokenizer_load reads, to a new file at path (os_create_new: whatever was there
 * is replaced, never written through), flushed to the disk (fsync) before it returns. To replace a file atomically, save to a temporary and rename it (train.c
 * does). Returns 0, or -1 after one stderr line naming path (the partial file removed). */
int bpe_save(const Bpe *b, const char *path);

/* Release everything bpe_train made. Safe on a zeroed or already freed Bpe. */
void bpe_free(Bpe *b);

#endif /* BPE_H */

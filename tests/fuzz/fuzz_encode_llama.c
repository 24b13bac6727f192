/* fuzz_encode_llama.c: fuzz target for tokenizer_encode with llama2.c tokenizers on
 * arbitrary bytes: BOS, the dummy-prefix space, characters as llama2.c groups them, byte
 * fallback, highest-score merging. Checks fuzz_check_encode's contract (encoding succeeds,
 * ids in range, BOS first, at most len + 2 ids) and that decoding, as run.c prints,
 * gives the text back.
 *
 * Tokenizers, loaded once: env FUZZ_LLAMA_TOKENIZER if set, else llama2c/tok512.bin (512
 * tokens), and llama2.c's 32000-token llama2c/tokenizer.bin, each from tests/data or else
 * the shared folder's testdata, when there. With none found, every input is skipped (said
 * once). It does not fuzz the files: fuzz_tokenizer_load does.
 */
#include <stdio.h>       /* fprintf */
#include <stdlib.h>      /* getenv */

#include "tests/fuzz/fuzz.h"   /* the entry points, fuzz_check_encode, paths */
#include "tokenizer.h"   /* Tokenizer, tokenizer_load */

#define TOK512 "llama2c/tok512.bin"        /* under tests/data or testdata */
#define TOK32000 "llama2c/tokenizer.bin"
enum { MAX_TOKENIZERS = 2 };

static Tokenizer tokenizers[MAX_TOKENIZERS];
static int n_tokenizers;

/* Loads the tokenizer at path into the next slot; a failure is fatal (a broken setup). */
static void add_tokenizer(const char *path) {
    Tokenizer *t = &tokenizers[n_tokenizers];
    if (tokenizer_load(t, path) != 0) fuzz_fail("%s: cannot load the tokenizer", path);
    if (t->kind != TOKENIZER_LLAMA) fuzz_fail("%s: not a llama2.c tokenizer", path);
    fprintf(stderr, "fuzz_encode_llama: %s: %d tokens\n", path, t->vocab_size);
    n_tokenizers++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char path[FUZZ_PATH_MAX];
    const char *chosen = getenv("FUZZ_LLAMA_TOKENIZER");
    if (chosen && *chosen) add_tokenizer(chosen);
    else if (fuzz_data_path(path, sizeof path, TOK512) == 0) add_tokenizer(path);
    if (fuzz_data_path(path, sizeof path, TOK32000) == 0) add_tokenizer(path);
    if (n_tokenizers == 0)
        fprintf(stderr, "fuzz_encode_llama: skipped: no llama2.c tokenizer found (%s in "
                "tests/data or SHARED_DIR/testdata)\n", TOK512);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const unsigned char empty[1];
    for (int i = 0; i < n_tokenizers; i++)
        fuzz_check_encode(&tokenizers[i], size ? data : empty, size,
                          FUZZ_ENCODE_MUST_SUCCEED | FUZZ_ENCODE_ROUNDTRIP);
    return 0;
}

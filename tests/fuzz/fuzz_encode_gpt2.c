/* fuzz_encode_gpt2.c: fuzz target for tokenizer_encode with GPT-2 (llm.c format)
 * tokenizers on arbitrary bytes: pre-tokenization, lowest-id merging, and the exact round
 * trip decode(encode(x)) == x, plus fuzz_check_encode's other checks (ids in range, never
 * end-of-text, at most one id per byte, the too-small-cap contract), under each of the
 * pre-tokenizers a GGUF file may name (GPT-2's, SmolLM's, Llama 3's).
 *
 * Tokenizers, loaded once: weights/tokenizer.bin (the shipped 1024-token one; env
 * FUZZ_GPT2_TOKENIZER names another instead), and GPT-2's own 50257-token file
 * gpt2/gpt2_tokenizer.bin from tests/data or the shared folder's testdata, when it is
 * there. It does not fuzz the files themselves: fuzz_tokenizer_load does.
 */
#include <stdio.h>       /* fprintf */
#include <stdlib.h>      /* getenv */

#include "tests/fuzz/fuzz.h"   /* the entry points, fuzz_check_encode, paths */
#include "tokenizer.h"   /* Tokenizer, tokenizer_load */

#define SHIPPED_TOKENIZER "weights/tokenizer.bin"
#define GPT2_TOKENIZER "gpt2/gpt2_tokenizer.bin"   /* under tests/data or testdata */
enum { MAX_TOKENIZERS = 2 };

static Tokenizer tokenizers[MAX_TOKENIZERS];
static int n_tokenizers;

/* Loads the tokenizer at path into the next slot; a failure is fatal (a broken setup). */
static void add_tokenizer(const char *path) {
    Tokenizer *t = &tokenizers[n_tokenizers];
    if (tokenizer_load(t, path) != 0) fuzz_fail("%s: cannot load the tokenizer", path);
    if (t->kind != TOKENIZER_GPT2) fuzz_fail("%s: not a GPT-2 tokenizer", path);
    fprintf(stderr, "fuzz_encode_gpt2: %s: %d tokens\n", path, t->vocab_size);
    n_tokenizers++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char path[FUZZ_PATH_MAX];
    const char *chosen = getenv("FUZZ_GPT2_TOKENIZER");
    if (chosen && *chosen) add_tokenizer(chosen);
    else if (fuzz_repo_path(path, sizeof path, SHIPPED_TOKENIZER) == 0) add_tokenizer(path);
    if (fuzz_data_path(path, sizeof path, GPT2_TOKENIZER) == 0) add_tokenizer(path);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const unsigned char empty[1];
    static const TokenizerPre pres[] = {TOKENIZER_PRE_GPT2, TOKENIZER_PRE_SMOLLM,
                                        TOKENIZER_PRE_QWEN2, TOKENIZER_PRE_LLAMA3};
    for (int i = 0; i < n_tokenizers; i++)
        for (size_t p = 0; p < sizeof pres / sizeof pres[0]; p++) {   /* each splitter */
            tokenizers[i].pre = pres[p];
            fuzz_check_encode(&tokenizers[i], size ? data : empty, size, FUZZ_ENCODE_ROUNDTRIP);
        }
    return 0;
}

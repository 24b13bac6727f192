/* fuzz_eval.c: fuzz target for the --eval path on arbitrary text: tokenize with the
 * shipped tokenizer (weights/tokenizer.bin), then score with eval_windows in short windows.
 *
 * The first input byte picks the window length (2..CTX_MAX, low bits), the model (bit
 * SHIPPED_BIT: the shipped weights/model.bin; else a tiny random GPT-2 of the same
 * vocabulary, made at start, 100 times faster) and whether a second copy of it serves as
 * the exact twin (TWIN_BIT: KL must then be exactly 0). The rest is the text, at most
 * SHIPPED_TEXT_MAX or TINY_TEXT_MAX bytes. Windows, tokens and bytes must be what the ids
 * imply, the loss finite and non-negative. Models load once; no other attention variant.
 */
#include <math.h>        /* isfinite */
#include <stdio.h>       /* remove */
#include <stdlib.h>      /* malloc, free */

#include "tests/fuzz/fuzz.h"   /* the entry points, FUZZ_CHECK, paths, fuzz_tiny_gpt2 */
#include "eval.h"        /* eval_windows, EvalResult */
#include "model.h"       /* model_load, model_set_context */
#include "tokenizer.h"   /* tokenizer_load, tokenizer_encode, tokenizer_decode */

#define SHIPPED_MODEL "weights/model.bin"
#define SHIPPED_TOKENIZER "weights/tokenizer.bin"
#define CTX_MAX 16             /* longest window, hence the attention state's positions */
#define CTX_BITS 0x0F          /* first byte: window length 2 + (b & CTX_BITS) % (CTX_MAX-1) */
#define SHIPPED_BIT 0x40       /* first byte: the shipped model instead of the tiny one */
#define TWIN_BIT 0x80          /* first byte: compare against a second, exact copy */
#define SHIPPED_TEXT_MAX 128   /* bytes of text per input: a run stays well under 1 s */
#define TINY_TEXT_MAX 1024     /* (under ASan) with either model */
#define TINY_DIM 8             /* the tiny model: width, */
#define TINY_HEADS 2           /* heads, one layer */
#define TINY_SEED 7            /* and its weights */
#define NLL_SLACK 1e-9         /* log-sum-exp >= any logit, up to rounding, per token */

/* [0]: the model, [1]: its exact twin; shipped and tiny. */
static Model shipped[2], tiny[2];
static Tokenizer tokenizer;

/* Loads path's model for windows of up to CTX_MAX tokens; failures are fatal (setup). */
static void load_model(Model *m, const char *path) {
    if (model_load(m, path, CTX_MAX, 0) != 0) fuzz_fail("%s: cannot load the model", path);
    int ctx = m->config.seq_len < CTX_MAX ? m->config.seq_len : CTX_MAX;
    if (ctx < 2 || model_set_context(m, ctx) != 0) fuzz_fail("%s: context too short", path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char path[FUZZ_PATH_MAX];
    if (fuzz_repo_path(path, sizeof path, SHIPPED_TOKENIZER) != 0 ||
        tokenizer_load(&tokenizer, path) != 0) fuzz_fail("%s: cannot load the tokenizer", path);
    if (fuzz_repo_path(path, sizeof path, SHIPPED_MODEL) != 0) fuzz_fail("path too long");
    load_model(&shipped[0], path);
    load_model(&shipped[1], path);
    if (tokenizer.vocab_size < shipped[0].config.vocab_size) fuzz_fail("tokenizer too small");
    /* the tiny model: as many tokens as the tokenizer, so any text fits it */
    Config c = {.family = MODEL_GPT2, .seq_len = CTX_MAX, .vocab_size = tokenizer.vocab_size,
                .padded_vocab_size = tokenizer.vocab_size, .n_layers = 1,
                .n_heads = TINY_HEADS, .n_kv_heads = TINY_HEADS, .dim = TINY_DIM};
    size_t size = 0;
    unsigned char *bytes = fuzz_tiny_gpt2(&c, 0, TINY_SEED, &size);
    if (!bytes || fuzz_temp_path(path, sizeof path, "eval_model") != 0 ||
        fuzz_write_file(path, bytes, size) != 0) fuzz_fail("cannot write the tiny model");
    free(bytes);
    load_model(&tiny[0], path);
    load_model(&tiny[1], path);
    remove(path);   /* the maps stay valid */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    Model *pair = data[0] & SHIPPED_BIT ? shipped : tiny;
    int ctx = 2 + (data[0] & CTX_BITS) % (pair[0].n_alloc - 1), use_twin = data[0] & TWIN_BIT;
    size_t text_max = pair == shipped ? SHIPPED_TEXT_MAX : TINY_TEXT_MAX;
    const char *text = (const char *)data + 1;
    size_t len = size - 1 < text_max ? size - 1 : text_max, n_ids = 0;
    int *ids = malloc((len + 2) * sizeof *ids);   /* as run.c sizes it */
    if (!ids) fuzz_fail("out of memory");
    if (tokenizer_encode(&tokenizer, text, len, ids, len + 2, &n_ids) != 0)
        fuzz_fail("the shipped tokenizer cannot encode %zu bytes", len);
    for (size_t t = 0; t < n_ids; t++)
        FUZZ_CHECK(ids[t] >= 0 && ids[t] < pair[0].config.vocab_size);
    EvalResult r;
    FUZZ_CHECK(eval_windows(&pair[0], use_twin ? &pair[1] : NULL, &tokenizer, ids,
                            (long)n_ids, ctx, 0, &r) == 0);
    /* what the ids imply: windows of ctx (a last one of a single token predicts nothing) */
    long tokens = 0, bytes = 0;
    int windows = 0;
    for (size_t start = 0; start < n_ids; start += (size_t)ctx) {
        size_t end = start + (size_t)ctx < n_ids ? start + (size_t)ctx : n_ids;
        if (end - start < 2) break;
        windows++;
        for (size_t t = start + 1; t < end; t++) {
            size_t piece;
            tokenizer_decode(&tokenizer, ids[t - 1], ids[t], &piece);
            bytes += (long)piece;
            tokens++;
        }
    }
    FUZZ_CHECK(r.windows == windows && r.tokens == tokens && r.bytes == bytes);
    FUZZ_CHECK(isfinite(r.nll) && r.nll >= -NLL_SLACK * (double)tokens);
    /* without a twin KL is 0 and agreement total by definition; with an identical twin the
     * logits are the same bits, so the same holds exactly */
    FUZZ_CHECK(r.kl == 0.0 && r.agree == r.tokens);
    free(ids);
    return 0;
}

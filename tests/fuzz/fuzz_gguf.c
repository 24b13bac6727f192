/* fuzz_gguf.c: fuzz target for GGUF files: checkpoint_load (which hands them to gguf.c)
 * and gguf_load_tokenizer on arbitrary bytes, and what runs on what loads.
 *
 * The bytes go to a per-process temp file (the loaders take a path). A model that loads
 * must have a consistent Config and Weights; a tokenizer that loads must keep
 * tokenizer_encode's contract on a few texts and decode every id; when both load and the
 * file is small, a few tokens run through model_load's model. make_seeds writes tiny valid
 * GGUF files (the llama and gpt2 architectures; F32, F16, BF16, Q8_0, Q5_0 and Q4_0
 * tensors, tied and separate outputs) and their truncations and corruptions as the seeds
 * (the K types need rows of a multiple of 256, which make these writers' seeds larger
 * than the fuzzers' 64 KiB inputs: they were fuzzed by hand from tests/data/gguf_llama's
 * Q4_K_M file, and test_gguf writes each from ggml's layout).
 */
#include <stdio.h>       /* remove */
#include <stdlib.h>      /* atexit */
#include <string.h>      /* strlen */

#include "tests/fuzz/fuzz.h"   /* the entry points, FUZZ_CHECK, temp files */
#include "checkpoint.h"  /* checkpoint_load, Config */
#include "gguf.h"        /* gguf_load_tokenizer */
#include "model.h"       /* model_load, model_set_context, model_forward */

#define FORWARD_MAX_BYTES (1 << 20)  /* larger files skip the forward pass */
#define FORWARD_CTX 4                /* positions the forward pass runs */

static char input_path[FUZZ_PATH_MAX];

static void remove_temp_file(void) { remove(input_path); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (fuzz_temp_path(input_path, sizeof input_path, "gguf") != 0)
        fuzz_fail("temp path too long");
    atexit(remove_temp_file);
    return 0;
}

static const char *const TEXTS[] = {"", "a", "Once upon a time", " \xe2\x96\x81 x\xff\xc3\xa9",
                                    "<s>a</s><unk><|endoftext|>b"};

/* A few tokens of the model at input_path, prefilled, then one more. */
static void run_forward(const Config *c) {
    Model m;
    if (model_load(&m, input_path, FORWARD_CTX, 0) != 0) {
        model_free(&m);
        return;
    }
    int n = m.n_alloc < FORWARD_CTX ? m.n_alloc : FORWARD_CTX, tokens[FORWARD_CTX];
    FUZZ_CHECK(model_set_context(&m, n) == 0);
    for (int t = 0; t < n; t++) tokens[t] = (7 * t) % c->vocab_size;
    FUZZ_CHECK(model_forward(&m, tokens, n, 0, 0) != NULL);
    FUZZ_CHECK(model_forward(&m, tokens, 1, n, 0) == NULL);   /* past the context */
    model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fuzz_write_file(input_path, data, size) != 0) fuzz_fail("cannot write the input");
    Checkpoint ck;
    int model = checkpoint_load(&ck, input_path) == 0;
    Config c = ck.config;
    if (model) {
        FUZZ_CHECK(ck.gguf || size < 4 || memcmp(data, GGUF_MAGIC, 4) != 0);
        FUZZ_CHECK(c.n_layers >= 1 && c.dim >= 1 && c.head_dim * c.n_heads == c.dim);
        FUZZ_CHECK(c.vocab_size >= 1 && c.n_heads % c.n_kv_heads == 0);
        const Weights *w = &ck.weights;
        FUZZ_CHECK(w->layers && w->norm_final_w);
        /* every matrix in exactly one form: fp32, halves or int8 */
        FUZZ_CHECK(fuzz_one_form(&w->token_embedding) && fuzz_one_form(&w->classifier));
        for (int l = 0; l < c.n_layers; l++)
            FUZZ_CHECK(fuzz_one_form(&w->layers[l].wq) && fuzz_one_form(&w->layers[l].w_down) &&
                       w->layers[l].norm2_w);
    } else {
        FUZZ_CHECK(ck.map == NULL && ck.owned == NULL && ck.weights.layers == NULL);
    }
    checkpoint_free(&ck);
    checkpoint_free(&ck);   /* safe twice */
    Tokenizer t;
    int tokenizer = gguf_load_tokenizer(&t, input_path) == 0;
    if (tokenizer) {
        for (size_t i = 0; i < sizeof TEXTS / sizeof TEXTS[0]; i++)
            fuzz_check_encode(&t, (const unsigned char *)TEXTS[i], strlen(TEXTS[i]), 0);
        for (int id = 0; id < t.vocab_size; id++) {
            size_t len;
            FUZZ_CHECK(tokenizer_decode(&t, id > 0 ? id - 1 : -1, id, &len) != NULL || len == 0);
        }
    }
    tokenizer_free(&t);
    tokenizer_free(&t);
    if (model && size <= FORWARD_MAX_BYTES) run_forward(&c);
    return 0;
}

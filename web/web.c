/* web.c: what the page (web/index.html, web/worker.js) calls in the engine compiled to
 * WebAssembly (wasm32-wasi, one thread). The worker holds weights/model.bin and
 * weights/tokenizer.bin in memory and serves them as files through its WASI shim, so
 * model_load and tokenizer_load read them as ./run does; stdout and stderr reach the page.
 *
 * Generation is generate() itself, the loop ./run runs, with run's context sizing and
 * sampler: the page's text is ./run's stdout byte for byte. A watcher (generate.h)
 * records each step's ten most likely tokens and hands the step to the page
 * (web_on_token, imported from the worker). Settings arrive as text and are parsed by
 * cli.h's strict parsers, with run's ranges (-n capped lower: a page is not a batch job).
 *
 * Every export returns 0 on success, WEB_BAD_DATA or WEB_USAGE after one stderr line.
 * Legend: V vocab, T tokens in the context, NH heads.
 */
#include <float.h>      /* FLT_MAX */
#include <limits.h>     /* INT_MAX */
#include <math.h>       /* expf */
#include <stdint.h>     /* uint64_t */
#include <stdio.h>      /* fprintf */
#include <stdlib.h>     /* malloc, free */
#include <string.h>     /* memset, memcpy */

#include "attention_spec.h"  /* attention_spec_parse_layers */
#include "cli.h"        /* cli_parse_int, cli_parse_float, cli_parse_u64, cli_printable */
#include "eval.h"       /* eval_windows: bits/char of a variant */
#include "generate.h"   /* Generation, generate */
#include "kernels.h"    /* kernels_all_finite */
#include "model.h"      /* Model, model_load, model_trace, model_attention_weights */
#include "sampler.h"    /* Sampler */
#include "tokenizer.h"  /* Tokenizer, tokenizer_encode, tokenizer_decode */

#define WEB_EXPORT(name) __attribute__((export_name(#name)))
#define WEB_IMPORT(name) __attribute__((import_module("web"), import_name(#name)))

#define WEB_BAD_DATA 1
#define WEB_USAGE 2
#define WEB_MODEL "weights/model.bin"
#define WEB_TOKENIZER "weights/tokenizer.bin"
#define WEB_PREFILL_CHUNK 256  /* run.c's PREFILL_CHUNK: the same chunks, the same sums */
#define WEB_MAX_STEPS 100000   /* -n in the page: at most this many tokens */
#define WEB_TOP 10             /* the most likely next tokens shown at each step */

/* The page's handler of a step: token `next` was sampled (web_top_* hold the ten most
 * likely of the distribution it was drawn from); implemented in worker.js. */
WEB_IMPORT(on_token) void web_on_token(int next);

static Model model;             /* loaded afresh for each run, as ./run loads it */
static char attention[512];     /* web_set_attention's spec, or "" for the model's own */
static int context;             /* S: the model's context, positions */
static Tokenizer tokenizer;
static Generation generation;   /* the last run, kept for the heatmaps */
static int loaded;
static int top_ids[WEB_TOP];
static float top_probs[WEB_TOP];
static int *ids;                /* (ids_cap,) web_encode's tokens */
static int ids_cap;
static float *weights;          /* (NH, T, T) web_attention's last layer */

WEB_EXPORT(web_alloc) void *web_alloc(int bytes) { return malloc(bytes > 0 ? (size_t)bytes : 1); }
WEB_EXPORT(web_free) void web_free(void *p) { free(p); }
WEB_EXPORT(web_top_ids) int *web_top_ids(void) { return top_ids; }
WEB_EXPORT(web_top_probs) float *web_top_probs(void) { return top_probs; }
WEB_EXPORT(web_ids) int *web_ids(void) { return ids; }

/* The model's shape: 0 layers, 1 heads, 2 vocab, 3 context, 4 width. */
WEB_EXPORT(web_config) int web_config(int what) {
    const Config *c = &model.config;
    int values[] = {c->n_layers, c->n_heads, c->vocab_size, context, c->dim};
    return what >= 0 && what < 5 ? values[what] : -1;
}

/* The model as ./run starts with it (model_set_context lowers its chunk for good), with
 * the page's attention spec. Returns 0, or WEB_BAD_DATA/WEB_USAGE after a message. */
static int fresh_model(void) {
    model_free(&model);
    if (model_load(&model, WEB_MODEL, WEB_PREFILL_CHUNK, 0) != 0) return WEB_BAD_DATA;
    context = model.max_ctx;
    if (!attention[0]) return 0;
    int L = model.config.n_layers;
    AttentionConfig *cfgs = calloc((size_t)L, sizeof *cfgs);
    char err[512];
    if (!cfgs) return WEB_BAD_DATA;
    int status = 0;
    if (attention_spec_parse_layers(attention, L, cfgs, err, sizeof err) != 0) {
        fprintf(stderr, "page: attention: %s\n", err);
        status = WEB_USAGE;
    } else if (model_set_attention_layers(&model, cfgs) != 0) {
        status = WEB_BAD_DATA;
    }
    free(cfgs);
    return status;
}

/* Loads the shipped model and tokenizer (once). */
WEB_EXPORT(web_load) int web_load(void) {
    if (loaded) return 0;
    if (fresh_model() != 0) return WEB_BAD_DATA;
    if (tokenizer_load(&tokenizer, WEB_TOKENIZER) != 0) return WEB_BAD_DATA;
    if (tokenizer.vocab_size != model.config.vocab_size) {
        fprintf(stderr, "page: the tokenizer does not belong to the model (got %d tokens, "
                "expected %d)\n", tokenizer.vocab_size, model.config.vocab_size);
        return WEB_BAD_DATA;
    }
    ids_cap = context + 2;
    if (!(ids = malloc((size_t)ids_cap * sizeof *ids))) return WEB_BAD_DATA;
    loaded = 1;
    return 0;
}

/* Encodes text (len bytes) into web_ids(); returns the count, or -1 after a stderr line
 * (empty, or longer than the context: the page's messages). */
WEB_EXPORT(web_encode) int web_encode(const char *text, int len) {
    size_t n = 0;
    if (len <= 0) {
        fprintf(stderr, "page: the prompt is empty (expected some text to continue)\n");
        return -1;
    }
    /* a prompt that may make more ids than ids holds is encoded into a scratch array, to
     * say how many tokens it has, and copied into ids when they fit the context */
    int *out = ids;
    size_t cap = tokenizer_max_ids(&tokenizer, (size_t)len);
    if (cap > (size_t)ids_cap && !(out = malloc(cap * sizeof *out))) {
        fprintf(stderr, "page: out of memory for a %d-byte prompt\n", len);
        return -1;
    }
    if (out == ids) cap = (size_t)ids_cap;
    int status = tokenizer_encode(&tokenizer, text, (size_t)len, out, cap, &n);
    if (status == 0 && n > (size_t)context) {
        fprintf(stderr, "page: prompt too long for the context (got %zu tokens, expected at "
                "most %d)\n", n, context);
        status = -1;
    }
    if (status == 0 && out != ids) memcpy(ids, out, n * sizeof *ids);
    if (out != ids) free(out);
    return status == 0 ? (int)n : -1;
}

/* The bytes of token id after token prev (-1: none), their count in *len. */
WEB_EXPORT(web_piece) const unsigned char *web_piece(int prev, int id, int *len) {
    size_t n = 0;
    const unsigned char *bytes = tokenizer_decode(&tokenizer, prev, id, &n);
    *len = (int)n;
    return bytes;
}

/* One setting's text parsed by cli.h's rule for its kind; WEB_USAGE after a message. */
static int setting_error(const char *flag, const char *text, const char *expected) {
    char shown[64];
    fprintf(stderr, "page: %s: invalid value (got '%s', expected %s)\n", flag,
            cli_printable(text, shown, sizeof shown), expected);
    return WEB_USAGE;
}

/* The watcher: the distribution next was drawn from is in g->logits, softmax(logits / T)
 * as the sampler left it (the raw logits when greedy: softmax them here, T = 1). */
static int watch_step(void *ctx, const Generation *g, int next) {
    const Sampler *s = ctx;
    const float *x = g->logits;
    int V = g->model->config.vocab_size;
    float max = x[0], sum = 1.0f;
    if (s->temperature == 0.0f) {
        for (int i = 1; i < V; i++) max = x[i] > max ? x[i] : max;
        sum = 0.0f;
        for (int i = 0; i < V; i++) sum += expf(x[i] - max);
    }
    for (int k = 0; k < WEB_TOP; k++) top_ids[k] = -1;
    for (int i = 0; i < V; i++) {   /* insertion into the ten best, largest first */
        float p = s->temperature == 0.0f ? expf(x[i] - max) / sum : x[i];
        int k = WEB_TOP;
        while (k > 0 && (top_ids[k - 1] < 0 || p > top_probs[k - 1])) k--;
        if (k == WEB_TOP) continue;
        for (int j = WEB_TOP - 1; j > k; j--) {
            top_ids[j] = top_ids[j - 1];
            top_probs[j] = top_probs[j - 1];
        }
        top_ids[k] = i;
        top_probs[k] = p;
    }
    web_on_token(next);
    return 0;
}

/* ./run weights/model.bin -i PROMPT -n N -t T -p P -k K -s SEED: the same context sizing
 * (prompt + N tokens, capped at the model's), the same keep rule, the same loop. The
 * text goes to stdout; web_stats has the speed line's numbers. */
WEB_EXPORT(web_generate) int web_generate(const char *prompt, int len, const char *n_text,
                                          const char *t_text, const char *p_text,
                                          const char *k_text, const char *seed_text) {
    int steps, top_k;
    float temperature, top_p;
    uint64_t seed;
    char range[64];
    snprintf(range, sizeof range, "an integer in 0..%d", WEB_MAX_STEPS);
    if (cli_parse_int(n_text, 0, WEB_MAX_STEPS, &steps) != 0)
        return setting_error("n", n_text, range);
    if (cli_parse_float(t_text, 0.0f, 100.0f, 0, &temperature) != 0)
        return setting_error("temperature", t_text, "a number in 0..100");
    if (cli_parse_float(p_text, 0.0f, 1.0f, 1, &top_p) != 0)
        return setting_error("top-p", p_text, "a number in (0, 1]");
    if (cli_parse_int(k_text, 0, INT_MAX, &top_k) != 0)
        return setting_error("top-k", k_text, "an integer, 0 = off");
    if (cli_parse_u64(seed_text, 1, &seed) != 0)
        return setting_error("seed", seed_text, "an integer in 1..18446744073709551615");
    int n_prompt = web_encode(prompt, len);
    if (n_prompt < 0) return WEB_USAGE;
    generation_free(&generation);
    memset(&generation, 0, sizeof generation);
    int status = fresh_model();
    if (status != 0) return status;
    int n_ctx = context;
    if ((long)n_prompt + steps < n_ctx) n_ctx = n_prompt + steps;
    int keep = tokenizer.add_bos && ids[0] == tokenizer.bos_id;   /* run's default */
    if (keep > n_ctx - 1) keep = n_ctx - 1;
    Sampler sampler;
    if (generation_init(&generation, &model, n_ctx, n_ctx, keep, 1) != 0 || model_trace(&model, 1) != 0 ||
        sampler_init(&sampler, model.config.vocab_size, temperature, top_p, top_k, seed) != 0)
        return WEB_BAD_DATA;
    GenerateOptions o;
    memset(&o, 0, sizeof o);
    o.steps = steps;
    o.watch = watch_step;
    o.watch_ctx = &sampler;
    status = generate(&generation, &tokenizer, &sampler, &o, ids, n_prompt);
    fflush(stdout);
    sampler_free(&sampler);
    return status == 0 ? 0 : WEB_BAD_DATA;
}

/* The last run's numbers: 0 input tokens, 1 their seconds, 2 generated tokens, 3 their
 * seconds, 4 tokens in the attention state (T of web_attention), 5 the first tokens a
 * context shift keeps (the state's rows: those, then the run's latest T - keep). */
WEB_EXPORT(web_stats) double web_stats(int what) {
    const GenerationStats *st = &generation.stats;
    double values[] = {(double)st->input_tokens, st->input_seconds, (double)st->generated,
                       st->generate_seconds, (double)generation.n_run, (double)generation.keep};
    return what >= 0 && what < 6 ? values[what] : -1.0;
}

/* The attention weights of layer `layer` over the last run's context (T = web_stats(4)
 * tokens, all of them queries), as --attn-map draws them: (NH, T, T), NAN where a key is
 * not visible. Returns the array (valid until the next call), or NULL after a message. */
WEB_EXPORT(web_attention) float *web_attention(int layer) {
    int T = generation.n_run;
    if (T < 1 || layer < 0 || layer >= model.config.n_layers) {
        fprintf(stderr, "page: no attention to show (got layer %d of a run of %d tokens)\n",
                layer, T);
        return NULL;
    }
    free(weights);
    weights = malloc((size_t)model.config.n_heads * (size_t)T * (size_t)T * sizeof *weights);
    if (!weights || model_attention_weights(&model, layer, 0, T, weights) != 0) return NULL;
    return weights;
}

/* Every layer's attention becomes spec (the --attn syntax; "" the model's own) from the
 * next run on; WEB_USAGE after the parser's message (the model then has its own). */
WEB_EXPORT(web_set_attention) int web_set_attention(const char *spec) {
    generation_free(&generation);
    memset(&generation, 0, sizeof generation);
    if (strlen(spec) >= sizeof attention) {
        fprintf(stderr, "page: attention: spec too long (expected at most %zu bytes)\n",
                sizeof attention - 1);
        return WEB_USAGE;
    }
    snprintf(attention, sizeof attention, "%s", spec);
    int status = fresh_model();
    if (status != 0) {
        attention[0] = '\0';
        fresh_model();
    }
    return status;
}

/* Bits per character of text (len bytes) under the current attention, in windows of the
 * model's context (lab/eval.c, as ./run --eval); negative after a message. */
WEB_EXPORT(web_bits_per_char) double web_bits_per_char(const char *text, int len) {
    size_t n = 0, cap = tokenizer_max_ids(&tokenizer, (size_t)len);
    int *all = malloc(cap * sizeof *all);
    EvalResult r;
    double bits = -1.0;
    generation_free(&generation);   /* the evaluation resets the attention state */
    memset(&generation, 0, sizeof generation);
    if (all && model_set_context(&model, context) == 0 &&
        tokenizer_encode(&tokenizer, text, (size_t)len, all, cap, &n) == 0 &&
        eval_windows(&model, NULL, &tokenizer, all, (long)n, context, 0, &r) == 0 &&
        r.bytes > 0)
        bits = r.nll / 0.6931471805599453 / (double)r.bytes;
    free(all);
    return bits;
}

/* run_lab.c: the attention lab's parts of the run program (run_lab.h): --attn for every
 * layer, --eval, --attn-map and --attn-top. Moved here from run.c and generate.c, their
 * messages unchanged, so that the engine's files include nothing from lab/.
 *
 * Legend: L layers, NH heads, T tokens in the context.
 */
#include "run_lab.h"

#include <errno.h>           /* errno */
#include <math.h>            /* sqrt; log, exp (the eval report) */
#include <stdio.h>           /* printf, fprintf, snprintf */
#include <stdlib.h>          /* malloc, free */
#include <string.h>          /* memset, memchr, memcmp, strcmp, strrchr, strstr, strerror */
#include <unistd.h>          /* isatty: --eval's progress only to a terminal; access */

#include "attention_spec.h"  /* attention_spec_parse_layers, attention_spec_format_layers */
#include "attnmap.h"         /* AttnMap, AttnTop, attnmap_write_svg, attnmap_print_top */
#include "eval.h"            /* EvalResult, eval_windows */
#include "gguf.h"            /* gguf_load_tokenizer: a GGUF --ref's own tokenizer */

/* ------------------------------------------------------------------------- */
/* --attn                                                                      */

int run_lab_set_attention(Model *m, const char *spec, const char *model_path,
                          RunLabUsage usage) {
    const Config *c = &m->config;
    char problem[512];
    AttentionConfig *cfgs = malloc((size_t)c->n_layers * sizeof *cfgs);
    if (!cfgs) {
        fprintf(stderr, "run: out of memory\n");
        return -1;
    }
    int status = 0;
    if (attention_spec_parse_layers(spec, c->n_layers, cfgs, problem, sizeof problem))
        status = usage("--attn", NULL, problem, NULL);
    for (int l = 0; l < c->n_layers && status == 0; l++) {
        /* a flag's value out of this model's range: a usage error, as --layer's */
        char why[256];
        if (attention_context_check(&cfgs[l], c->seq_len, why, sizeof why) != 0) {
            snprintf(problem, sizeof problem, "layer %d: %s", l, why);
            status = usage("--attn", NULL, problem, NULL);
        }
    }
    if (status == 0 && m->checkpoint.attention) {
        char trained[RUN_LAB_SPEC_TEXT];
        attention_spec_format_layers(m->checkpoint.attention, c->n_layers, trained,
                                     sizeof trained);
        fprintf(stderr, "run: --attn %s replaces the attention %s was trained with (%s)\n",
                spec, model_path, trained);
    }
    if (status == 0 && model_set_attention_layers(m, cfgs) != 0) status = -1;
    free(cfgs);
    return status;
}

/* ------------------------------------------------------------------------- */
/* The heatmap (--attn-map)                                                    */

const char *run_lab_map_format(const char *path) {
    const char *dot = strrchr(path, '.');
    if (!dot || dot == path || dot[-1] == '/') return NULL;
    if (strcmp(dot, ".svg") == 0) return "svg";
    if (strcmp(dot, ".html") == 0) return "html";
    return NULL;
}

int run_lab_check_map_path(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;   /* a new path (os_check_output has said what else may be wrong) */
    char head[512];     /* the signature is the second line: within the first bytes */
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = '\0';
    if (memchr(head, '\0', n) == NULL && strstr(head, ATTNMAP_SIGNATURE)) return 0;
    fprintf(stderr, "run: %s: exists and is not an attention map run wrote (got a file without "
            "its signature line, expected a new path or such a map; remove or rename the file "
            "to replace it)\n", path);
    return -1;
}

int run_lab_check_map_size(const char *path, int layer, int head, const Config *c, int T,
                           RunLabUsage usage) {
    long drawn = (layer >= 0 ? 1L : c->n_layers) * (head >= 0 ? 1L : c->n_heads);
    long per_pair = drawn > c->n_heads ? drawn : c->n_heads;   /* weights per (query, key) */
    long T_max = (long)sqrt((double)(RUN_LAB_MAP_MAX_WEIGHTS / per_pair));
    /* exact despite rounding */
    while (T_max * T_max * per_pair > RUN_LAB_MAP_MAX_WEIGHTS) T_max--;
    if (T <= T_max) return 0;
    char problem[64], expected[256];
    snprintf(problem, sizeof problem, "too large for up to %d tokens", T);
    snprintf(expected, sizeof expected, "at most %ld tokens with this model (a map holds at "
             "most %ld weights): fewer with -n or -c, or more with --layer and --head", T_max,
             RUN_LAB_MAP_MAX_WEIGHTS);
    return usage("--attn-map", path, problem, expected);
}

/* What attnmap's layer_weights asks for: one layer's weights over the final context. */
typedef struct {
    Model *model;
    int n_tokens;                 /* T */
    float *weights;               /* (NH, T, T) */
} MapLayers;

static const float *map_layer_weights(void *ctx, int layer) {
    MapLayers *layers = ctx;
    if (model_attention_weights(layers->model, layer, 0, layers->n_tokens, layers->weights))
        return NULL;
    return layers->weights;
}

int run_lab_write_map(const RunLabMap *o, Model *m, const Tokenizer *tok,
                      const Generation *g, SaveFile *out) {
    FILE *f = out->file;
    const Config *c = &m->config;
    int T = g->n_tokens, status = -1;
    const unsigned char **labels = malloc((size_t)T * sizeof *labels);
    size_t *lens = malloc((size_t)T * sizeof *lens);
    MapLayers layers = {m, T, malloc((size_t)c->n_heads * (size_t)T * (size_t)T *
                                     sizeof(float))};
    if (!labels || !lens || !layers.weights) {
        fprintf(stderr, "run: %s: out of memory for the attention map of %d tokens\n",
                o->path, T);
        goto done;
    }
    for (int t = 0; t < T; t++) labels[t] = tokenizer_decode(tok, -1, g->tokens[t], &lens[t]);
    char spec[RUN_LAB_SPEC_TEXT], title[4096 + RUN_LAB_SPEC_TEXT];
    attention_spec_format_layers(m->attention_configs, c->n_layers, spec, sizeof spec);
    snprintf(title, sizeof title, "%s, attention %s", o->model_path, spec);
    AttnMap map = {.n_layers = c->n_layers, .n_heads = c->n_heads, .n_tokens = T,
                   .layer = o->layer, .head = o->head, .n_prompt = g->n_prompt,
                   .n_shifts = g->stats.shifts, .n_kept = g->stats.shifts ? g->keep : 0,
                   .labels = labels, .label_lens = lens, .title = title,
                   .layer_weights = map_layer_weights, .ctx = &layers};
    int written = strcmp(run_lab_map_format(o->path), "svg") == 0
                ? attnmap_write_svg(&map, f) : attnmap_write_html(&map, f);
    if (written != 0 || fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "run: %s: cannot write the attention map (%s)\n", o->path,
                strerror(errno));
        goto done;
    }
    if (os_save_commit(out, "run") != 0) goto done;
    fprintf(stderr, "run: %s: attention of %d tokens, %s\n", o->path, T,
            o->layer >= 0 ? "one layer" : "every layer");
    status = 0;
done:
    os_save_discard(out);   /* a map not written whole leaves no file */
    free(labels);
    free(lens);
    free(layers.weights);
    return status;
}

/* ------------------------------------------------------------------------- */
/* Evaluation (--eval)                                                         */

/* The eval file's text (len bytes) encoded into a malloc'd *ids with *n_ids of them,
 * every id checked against the model's vocabulary c. Returns 0, or -1 after a stderr line
 * (*ids is then freed by the caller). */
static int encode_eval_text(const RunLabEval *o, const Tokenizer *tok, const Config *c,
                            const char *text, size_t len, int **ids, size_t *n_ids) {
    *n_ids = 0;
    *ids = malloc(tokenizer_max_ids(tok, len) * sizeof(int));
    if (!*ids) {
        fprintf(stderr, "run: out of memory for a %zu-byte eval file\n", len);
        return -1;
    }
    if (tokenizer_encode(tok, text, len, *ids, tokenizer_max_ids(tok, len), n_ids) != 0) return -1;
    for (size_t t = 0; t < *n_ids; t++) {
        if ((*ids)[t] >= c->vocab_size) {
            fprintf(stderr, "run: %s: token id out of range for the model (got %d at position "
                    "%zu, expected 0..%d)\n", o->eval_path, (*ids)[t], t, c->vocab_size - 1);
            return -1;
        }
    }
    return 0;
}

/* The model eval compares m against, into *exact: --ref's file, with the attention it
 * records (a trained variant's own), or m's own file again with exact attention over the
 * KV cache its format keeps by default (floats, for a file that is not GGUF); checked
 * to be of m's family and vocabulary with a context of at least ctx, and sized to ctx.
 * Returns 0, or -1 after a stderr line (model_free releases *exact either way). */
static int load_reference(const RunLabEval *o, const Model *m, int ctx, Model *exact) {
    const Config *c = &m->config;
    if (model_load(exact, o->ref_path ? o->ref_path : o->model_path, m->max_chunk, 1) != 0)
        return -1;
    if (exact->lab && !o->ref_path) {   /* m's own weights: the reference is exact attention */
        AttentionConfig plain;
        attention_config_default(&plain);
        if (model_set_attention(exact, &plain) != 0) return -1;
    }
    if (exact->config.family != c->family) {
        fprintf(stderr, "run: --ref %s: a model of the other family (got %s, expected %s like "
                "the model: their token ids would not mean the same text)\n", o->ref_path,
                exact->config.family == MODEL_GPT2 ? "GPT-2" : "Llama",
                c->family == MODEL_GPT2 ? "GPT-2" : "Llama");
        return -1;
    }
    if (exact->config.vocab_size != c->vocab_size) {
        fprintf(stderr, "run: --ref %s: vocabulary differs from the model's (got %d, expected "
                "%d)\n", o->ref_path, exact->config.vocab_size, c->vocab_size);
        return -1;
    }
    if (exact->max_ctx < ctx) {
        if (o->ref_path)
            fprintf(stderr, "run: --ref %s: context shorter than the windows (got %d, expected "
                    "at least %d; -c sets the window)\n", o->ref_path, exact->max_ctx, ctx);
        else   /* m's own file: its exact cache may hold fewer positions than m's halves or
                * variant state (no --ref to name) */
            fprintf(stderr, "run: --eval: exact attention over an %s KV cache, the comparison, "
                    "holds fewer positions than the windows (got %d, expected at least %d; -c "
                    "sets the window)\n", exact->half_cache ? "f16" : "f32", exact->max_ctx, ctx);
        return -1;
    }
    if (model_set_context(exact, ctx) != 0) return -1;
    return 0;
}

/* Whether --ref's tokenizer (a GGUF file's own, or, when the model's own is beside it,
 * tokenizer.bin beside --ref; none there: nothing to compare) spells each of the model's V
 * ids as tok does: a model of the same family and vocabulary size may have learned other
 * tokens, whose ids would not mean the same text. BOS and EOS, the same ids in both, may
 * be spelled otherwise (llama2.c's tokenizer.bin "\n<s>\n", a GGUF file's "<s>"): no text
 * encodes to them. Returns 0, or -1 after a stderr line. */
static int check_ref_tokenizer(const RunLabEval *o, const Model *exact, const Tokenizer *tok,
                               int V) {
    const char *ref_path = o->ref_path;
    char path[4096];
    const char *slash = strrchr(ref_path, '/');
    snprintf(path, sizeof path, "%.*stokenizer.bin", slash ? (int)(slash - ref_path + 1) : 0,
             ref_path);
    if (!exact->checkpoint.gguf && (!o->tokenizer_beside || access(path, F_OK) != 0)) return 0;
    Tokenizer ref;
    if ((exact->checkpoint.gguf ? gguf_load_tokenizer(&ref, ref_path)
                                : tokenizer_load(&ref, path)) != 0) return -1;
    int status = 0;
    for (int id = 0; id < V && status == 0; id++) {
        if ((id == tok->bos_id && id == ref.bos_id) || (id == tok->eot_id && id == ref.eot_id))
            continue;
        size_t a_len = 0, b_len = 0;
        const unsigned char *a = id < tok->vocab_size ? tokenizer_decode(tok, -1, id, &a_len)
                                                      : NULL;
        const unsigned char *b = id < ref.vocab_size ? tokenizer_decode(&ref, -1, id, &b_len)
                                                     : NULL;
        if (!a || !b || a_len != b_len || memcmp(a, b, a_len) != 0) {
            fprintf(stderr, "run: --ref %s: its tokenizer (%s) spells token %d otherwise than "
                    "the model's (expected the model's tokenizer: their token ids would not "
                    "mean the same text)\n", ref_path, exact->checkpoint.gguf ? "the file's "
                    "own" : path, id);
            status = -1;
        }
    }
    tokenizer_free(&ref);
    return status;
}

/* Prints eval's result block on stdout: what was scored (len bytes, n_ids tokens, in
 * windows of ctx), the attention, the loss, the comparison and the state and speed. */
static void print_eval_report(const RunLabEval *o, const Model *m, size_t len, size_t n_ids,
                              int ctx, const EvalResult *r) {
    const Config *c = &m->config;
    char spec[RUN_LAB_SPEC_TEXT];
    attention_spec_format_layers(m->attention_configs, c->n_layers, spec, sizeof spec);
    double nats = r->nll / (double)r->tokens;
    size_t state_bytes = m->attention_bytes;
    char windows[96], unscored[64] = "";
    if (r->last_window == ctx)
        snprintf(windows, sizeof windows, "%d window%s of %d", r->windows, r->windows == 1 ? "" :
                 "s", ctx);
    else
        snprintf(windows, sizeof windows, "%d window%s of %d (the last %d tokens)", r->windows,
                 r->windows == 1 ? "" : "s", ctx, r->last_window);
    if (r->unscored)
        snprintf(unscored, sizeof unscored, ", the last token alone in no window");
    printf("eval: %s: %zu bytes, %zu tokens, %s%s, %ld tokens predicted (%ld bytes)\n",
           o->eval_path, len, n_ids, windows, unscored, r->tokens, r->bytes);
    printf("attention: %s\n", spec);
    printf("loss: %.6f nats/token, %.6f bits/char, perplexity %.4f\n", nats,
           r->nll / (log(2.0) * (double)r->bytes), exp(nats));
    printf("vs %s: KL %.6f nats/token, top-1 agreement %.4f%%\n",
           o->ref_path                          ? o->ref_path
           : m->half_cache && !m->config.half_kv ? "exact, f32 KV cache"
                                                : "exact",
           r->kl / (double)r->tokens,
           100.0 * (double)r->agree / (double)r->tokens);
    printf("state: %zu bytes for %d layer%s at context %d (%.1f bytes/token); speed: %.1f "
           "tokens/s\n", state_bytes, c->n_layers, c->n_layers == 1 ? "" : "s", m->n_alloc,
           (double)state_bytes / (double)m->n_alloc,
           r->seconds > 0 ? (double)r->tokens / r->seconds : 0.0);
}

int run_lab_evaluate(const RunLabEval *o, Model *m, const Tokenizer *tok) {
    int ctx = o->ctx;
    size_t len;
    char *text = os_read_file("run", o->eval_path, "an eval file", o->max_bytes, &len);
    if (!text) return -1;
    int status = -1;
    Model exact;
    memset(&exact, 0, sizeof exact);
    size_t n_ids = 0;
    int *ids = NULL;
    if (encode_eval_text(o, tok, &m->config, text, len, &ids, &n_ids) != 0) goto done;
    /* something to compare with: another file, another attention, or a cache of halves
     * where the file's own is of floats (--cache-type f16 on a file that is not GGUF) */
    int compare = o->ref_path || m->lab || (m->half_cache && !m->config.half_kv);
    if (compare && load_reference(o, m, ctx, &exact) != 0) goto done;
    if (o->ref_path && check_ref_tokenizer(o, &exact, tok, m->config.vocab_size) != 0)
        goto done;
    EvalResult r;
    /* the progress line rewrites itself with \r: only for a terminal, not a log file */
    if (eval_windows(m, compare ? &exact : NULL, tok, ids, (long)n_ids, ctx,
                     isatty(STDERR_FILENO), &r) != 0)
        goto done;
    if (r.tokens == 0) {
        fprintf(stderr, "run: %s: nothing to evaluate (got %zu tokens, expected at least 2)\n",
                o->eval_path, n_ids);
        goto done;
    }
    print_eval_report(o, m, len, n_ids, ctx, &r);
    status = 0;
done:
    model_free(&exact);
    free(ids);
    free(text);
    return status;
}

/* ------------------------------------------------------------------------- */
/* The text view of attention (--attn-top)                                     */

int run_lab_top_init(RunLabTop *t, const Model *m, const Tokenizer *tok, int n_ctx, int layer,
                     int k) {
    memset(t, 0, sizeof *t);
    t->tok = tok;
    t->layer = layer;
    t->k = k;
    t->labels = malloc((size_t)n_ctx * sizeof *t->labels);
    t->lens = malloc((size_t)n_ctx * sizeof *t->lens);
    t->weights = malloc((size_t)m->config.n_heads * (size_t)n_ctx * sizeof(float));
    return t->labels && t->lens && t->weights ? 0 : -1;
}

int run_lab_top_print(void *ctx, const Generation *g, int next) {
    RunLabTop *view = ctx;
    const Tokenizer *tok = view->tok;
    int T = g->n_tokens;
    for (int t = 0; t < T; t++)
        view->labels[t] = tokenizer_decode(tok, -1, g->tokens[t], &view->lens[t]);
    if (model_attention_weights(g->model, view->layer, T - 1, T, view->weights) != 0)
        return -1;
    size_t len;
    const unsigned char *bytes = tokenizer_decode(tok, -1, next, &len);
    AttnTop top = {.n_heads = g->model->config.n_heads, .n_keys = T,
                   .layer = view->layer, .query = T - 1, .labels = view->labels,
                   .label_lens = view->lens, .row = view->weights};
    fputs("token ", stdout);
    attnmap_print_label(bytes, len, stdout);
    /* where it goes is not said: the last token of a turn is never placed, and in a full
     * context the shift that comes first decides it */
    printf(", chosen after reading position %d:\n", T - 1);
    attnmap_print_top(&top, view->k, stdout);
    return 0;
}

void run_lab_top_free(RunLabTop *t) {
    free(t->labels);
    free(t->lens);
    free(t->weights);
    memset(t, 0, sizeof *t);
}

/* test_eval.c: the attention lab on a whole model, through eval.c and ./run --eval.
 *
 * With exact attention, --eval's loss equals the loss computed here from plain
 * model_forward calls (one block per window), and that loss a float64 GPT-2 forward's
 * (tests/gpt2_f64.c) within 1e-6 nats/token; a window with sinks that covers the
 * whole window equals exact bit for bit (KL exactly 0, full top-1 agreement); a
 * short window really differs and keeps a smaller state; Performer's loss, by eval_windows
 * and by ./run --eval, is a float64 forward's with FAVOR+ weights from the same features
 * within 1e-6 nats/token, and a variant's random matrices stay as drawn when the context
 * is set. The model is the shipped
 * weights/model.bin when present, else ../shared's random GPT-2 small.bin (the
 * identities hold for any weights); the text is the start of the validation slice
 * of ../shared/data/tinyshakespeare.txt (bytes from floor(0.9 size) on), or without
 * ../shared the repository's README.md (the identities hold for any text; it says so).
 */
#include "eval.h"

#include <math.h>      /* log, fabs */
#include <stdio.h>     /* snprintf, fdopen */
#include <stdlib.h>    /* malloc, free, getenv, mkstemp */
#include <string.h>    /* strstr */
#include <unistd.h>    /* access, close */

#include "attention.h"    /* AttentionConfig */
#include "model.h"        /* model_load, model_forward, model_set_attention */
#include "tokenizer.h"    /* tokenizer_load, tokenizer_encode */
#include "tests/check.h"  /* check_* */
#include "tests/gpt2_f64.h"   /* gpt2_f64_model, gpt2_f64_forward: the float64 reference */

#define TEXT_BYTES 800    /* of the validation slice: ~260 GPT-2 tokens, fast */
#define CTX 64            /* window length */

/* NLL summed over windows of CTX, from one all-logits model_forward per window. */
static double plain_loss(Model *m, const int *ids, long n, long *tokens) {
    int V = m->config.vocab_size;
    double nll = 0;
    *tokens = 0;
    for (long w = 0; w * CTX < n; w++) {
        int len = n - w * CTX < CTX ? (int)(n - w * CTX) : CTX;
        if (len < 2) break;
        const float *logits = model_forward(m, ids + w * CTX, len - 1, 0, 1);
        if (!logits) return (double)NAN;
        for (int t = 0; t < len - 1; t++) {
            const float *row = logits + (size_t)t * V;
            double max = (double)row[0], sum = 0;
            for (int i = 1; i < V; i++) if ((double)row[i] > max) max = (double)row[i];
            for (int i = 0; i < V; i++) sum += exp((double)row[i] - max);
            /* log Z rounded to double before the subtraction, as eval.c's function returns
             * it (this matters where doubles are evaluated wider, FLT_EVAL_METHOD 2: x87) */
            double log_z = max + log(sum);
            nll += log_z - (double)row[ids[w * CTX + t + 1]];
            (*tokens)++;
        }
    }
    return nll;
}

/* The same NLL from a float64 forward written from GPT-2's definition (gpt2_f64.h) over
 * each window, with softmax attention or, where log_weight is not NULL, that kernel's
 * (Gpt2F64.log_weight); NaN for a model it does not take (or without memory). */
static double f64_loss(const Model *m, const int *ids, long n,
                       double (*log_weight)(const void *, int, int, const double *,
                                            const double *, int),
                       const void *ctx) {
    Gpt2F64 g;
    double *block = gpt2_f64_model(&g, m, CTX), nll = 0;
    g.log_weight = log_weight;
    g.log_weight_ctx = ctx;
    double *logits = malloc((size_t)CTX * (size_t)g.V * sizeof(double));
    int ok = block && logits;
    for (long w = 0; ok && w * CTX < n; w++) {
        int len = n - w * CTX < CTX ? (int)(n - w * CTX) : CTX;
        if (len < 2) break;
        ok = gpt2_f64_forward(&g, ids + w * CTX, len - 1, logits, -1, NULL) == 0;
        for (int t = 0; ok && t < len - 1; t++) {
            const double *row = logits + (size_t)t * g.V;
            double max = row[0], sum = 0;
            for (int i = 1; i < g.V; i++) if (row[i] > max) max = row[i];
            for (int i = 0; i < g.V; i++) sum += exp(row[i] - max);
            nll += max + log(sum) - row[ids[w * CTX + t + 1]];
        }
    }
    free(block);
    free(logits);
    return ok ? nll : (double)NAN;
}

/* Performer (FAVOR+) as ATTENTION.md defines it, from its random features: key k's weight
 * for query q is sum_f phi_f(q) phi_f(k), phi_f(x) = exp(w_f . (x s) - |x s|^2 / 2), s =
 * (1 / sqrt(HS))^(1/2) (the 1 / sqrt(m) of the features cancels when normalised). */
#define PERFORMER_M 64
typedef struct {
    float *w;      /* (L, NH, PERFORMER_M, HS): attention_draw_random's draw 0, layer by layer */
    int NH;
} Favor;

static double favor_log_weight(const void *ctx, int layer, int head, const double *q,
                               const double *k, int HS) {
    const Favor *fv = ctx;
    const float *w = fv->w + ((size_t)layer * fv->NH + (size_t)head) * PERFORMER_M * HS;
    double s = sqrt(1.0 / sqrt((double)HS)), q2 = 0, k2 = 0, l[PERFORMER_M], max = -HUGE_VAL;
    for (int i = 0; i < HS; i++) q2 += q[i] * s * q[i] * s, k2 += k[i] * s * k[i] * s;
    for (int f = 0; f < PERFORMER_M; f++) {   /* log phi_f(q) + log phi_f(k) */
        double wq = 0, wk = 0;
        for (int i = 0; i < HS; i++)
            wq += (double)w[f * HS + i] * q[i] * s, wk += (double)w[f * HS + i] * k[i] * s;
        l[f] = wq - q2 / 2 + wk - k2 / 2;
        if (l[f] > max) max = l[f];
    }
    double sum = 0;
    for (int f = 0; f < PERFORMER_M; f++) sum += exp(l[f] - max);
    return max + log(sum);
}

/* 6. Performer with PERFORMER_M features: eval_windows's loss (m's attention is changed)
 * against the float64 forward with FAVOR+'s weights from the same feature draws (the
 * engine folds keys under a running maximum in float; the sums are the same). Returns the
 * float64 loss per token, for ./run --eval (check_run_eval), or NaN. */
static double check_performer(Model *m, const Tokenizer *tok, const int *ids, size_t n_ids) {
    AttentionConfig cfg;
    attention_config_default(&cfg);
    cfg.kind = ATTENTION_PERFORMER;
    cfg.features = PERFORMER_M;
    int L = m->config.n_layers;
    size_t per_layer = attention_random_floats(&cfg, &m->heads);
    Favor fv = {malloc((size_t)L * per_layer * sizeof(float)), m->heads.n_heads};
    int ok = fv.w && per_layer == (size_t)fv.NH * PERFORMER_M * (size_t)m->heads.head_dim;
    for (int l = 0; ok && l < L; l++)
        ok = attention_draw_random(&cfg, &m->heads, l, 0, fv.w + (size_t)l * per_layer) == 0;
    EvalResult r;
    ok = ok && model_set_attention(m, &cfg) == 0 &&
         eval_windows(m, NULL, tok, ids, (long)n_ids, CTX, 0, &r) == 0;
    double f64 = ok ? f64_loss(m, ids, (long)n_ids, favor_log_weight, &fv) / (double)r.tokens
                    : (double)NAN;
    double got = ok ? r.nll / (double)r.tokens : (double)NAN;
    check_true(ok && fabs(got - f64) <= 1e-6, "performer:m=%d eval's loss is a float64 "
               "forward's with FAVOR+ weights of the same features within 1e-6 nats/token "
               "(%.9f vs %.9f: %.1e)", PERFORMER_M, got, f64, fabs(got - f64));
    free(fv.w);
    return f64;
}

/* 7. After model_set_context, which commits the state's pages, every random matrix in a
 * variant's state is still attention_draw_random's draw 0, bit for bit (Performer's
 * features, LSH's rotations). m's attention is changed. */
static void check_random_kept(Model *m) {
    const AttentionKind kinds[2] = {ATTENTION_PERFORMER, ATTENTION_LSH};
    for (int k = 0; k < 2; k++) {
        AttentionConfig cfg;
        attention_config_default(&cfg);
        cfg.kind = kinds[k];
        size_t per_layer = attention_random_floats(&cfg, &m->heads);
        float *want = malloc(per_layer * sizeof(float));
        int ok = want && model_set_attention(m, &cfg) == 0 && model_set_context(m, CTX) == 0;
        long differ = 0;
        for (int l = 0; ok && l < m->config.n_layers; l++) {
            ok = attention_draw_random(&cfg, &m->heads, l, 0, want) == 0;
            void *state = (char *)m->attention_state + m->attention_offset[l];
            const float *w = want;
            for (int h = 0; ok && h < m->heads.n_heads; h++)
                for (int r = 0; ok && r < (kinds[k] == ATTENTION_LSH ? cfg.rounds : 1); r++) {
                    int rows = 0;
                    const float *got = attention_state_random(&cfg, &m->heads, m->n_alloc, state,
                                                              h, r, &rows);
                    size_t n = (size_t)rows * (size_t)m->heads.head_dim;
                    ok = got && w + n <= want + per_layer;
                    for (size_t i = 0; ok && i < n; i++)
                        differ += memcmp(&got[i], &w[i], sizeof(float)) != 0;
                    w += n;
                }
        }
        check_true(ok && differ == 0, "%s: its state's random matrices after model_set_context "
                   "are draw 0's, bit for bit (%ld floats differ)",
                   k == 0 ? "performer" : "lsh", differ);
        free(want);
    }
}

/* log Z of a row (V,) in double, and its first largest index in *best. */
static double row_log_z(const float *row, int V, int *best) {
    int arg = 0;
    for (int i = 1; i < V; i++) if (row[i] > row[arg]) arg = i;
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)row[i] - (double)row[arg]);
    *best = arg;
    return (double)row[arg] + log(sum);
}

/* What eval_windows reports for m against exact, worked here from one all-logits
 * model_forward of each per window: the loss, KL(p_exact || p_m) summed (in float64:
 * sum p (ln p - ln q)) and the positions whose first most likely token agrees. */
static int reference_eval(Model *m, Model *exact, const int *ids, long n, double *nll,
                          double *kl, long *agree) {
    int V = m->config.vocab_size;
    *nll = *kl = 0;
    *agree = 0;
    for (long w = 0; w * CTX < n; w++) {
        int len = n - w * CTX < CTX ? (int)(n - w * CTX) : CTX;
        if (len < 2) break;
        const float *q = model_forward(m, ids + w * CTX, len - 1, 0, 1);
        const float *p = model_forward(exact, ids + w * CTX, len - 1, 0, 1);
        if (!q || !p) return -1;
        for (int t = 0; t < len - 1; t++) {
            const float *q_t = q + (size_t)t * V, *p_t = p + (size_t)t * V;
            int q_best, p_best;
            double log_zq = row_log_z(q_t, V, &q_best), log_zp = row_log_z(p_t, V, &p_best);
            *nll += log_zq - (double)q_t[ids[w * CTX + t + 1]];
            for (int i = 0; i < V; i++) {
                double log_p = (double)p_t[i] - log_zp, log_q = (double)q_t[i] - log_zq;
                *kl += exp(log_p) * (log_p - log_q);
            }
            *agree += q_best == p_best;
        }
    }
    return 0;
}

/* The model, tokenizer and text files: the shipped weights/ when present, else ../shared's
 * random GPT-2 small.bin; the training text's held-out part from ../shared, else this
 * repository's README. Returns 0, or -1 (after check_skip) when there is no model. */
static int choose_files(char model_path[512], char tok_path[512], char data_path[512]) {
    const char *shared = check_shared_dir();
    if (access("weights/model.bin", R_OK) == 0 && access("weights/tokenizer.bin", R_OK) == 0) {
        snprintf(model_path, 512, "weights/model.bin");
        snprintf(tok_path, 512, "weights/tokenizer.bin");
    } else if (shared) {
        snprintf(model_path, 512, "%s/testdata/gpt2/small.bin", shared);
        snprintf(tok_path, 512, "%s/testdata/gpt2/gpt2_tokenizer.bin", shared);
    } else {
        check_skip("no weights/ and no ../shared: no model to evaluate");
        return -1;
    }
    if (shared) {
        snprintf(data_path, 512, "%s/data/tinyshakespeare.txt", shared);
    } else {
        snprintf(data_path, 512, "README.md");
        printf("note: no ../shared: the text is README.md instead of Tiny Shakespeare\n");
    }
    return 0;
}

/* 8. --cache-type f16 with exact attention compares with exact attention over floats: its
 * KL and agreement are those of --ref naming the same file (loaded again, with the f32
 * cache its format keeps), and the report says so (it said "vs exact: KL 0, 100 %"
 * without comparing). On check_run_eval's text file, text_path. */
static void check_run_eval_half(const char *model_path, const char *tok_path,
                                const char *text_path) {
    const char *run_bin = getenv("RUN") && *getenv("RUN") ? getenv("RUN") : "./run";
    char command[2048], with_ref[2600], *half = NULL, *ref = NULL;
    snprintf(command, sizeof command, "%s %s -z %s --eval %s --ctx-size %d --cache-type f16",
             run_bin, model_path, tok_path, text_path, CTX);
    snprintf(with_ref, sizeof with_ref, "%s --ref %s", command, model_path);
    int code = check_run(command, &half, NULL) | check_run(with_ref, &ref, NULL);
    /* "vs LABEL: KL ..., top-1 agreement ...%": the label, then the figures */
    const char *half_vs = half ? strstr(half, "vs exact, f32 KV cache: ") : NULL;
    const char *ref_vs = ref ? strstr(ref, ": KL ") : NULL;
    const char *half_kl = half_vs ? strstr(half_vs, ": KL ") : NULL;
    size_t len = ref_vs ? strcspn(ref_vs, "\n") : 0;
    check_true(code == 0 && half_kl && ref_vs && strncmp(half_kl, ref_vs, len) == 0 &&
               half_kl[len] == '\n', "./run --eval --cache-type f16 is compared with the f32 "
               "cache (\"vs exact, f32 KV cache\") and reports --ref's figures (%.*s)",
               (int)len, ref_vs ? ref_vs : "");
    free(half);
    free(ref);
}

/* 2. The exact loss through ./run --eval (printed to 6 decimals) is plain_per_token,
 * a window with sinks covering the window reports KL 0 and full agreement, and
 * `--attn performer:m=64` prints performer_f64 (check_performer's float64 loss); then 8.
 * text is written (TEXT_BYTES) to a temporary file for them. */
static void check_run_eval(const char *model_path, const char *tok_path, const char *text,
                           double plain_per_token, double performer_f64) {
    char text_path[] = "/tmp/test_eval_XXXXXX";
    int fd = mkstemp(text_path);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    int written = f && fwrite(text, 1, TEXT_BYTES, f) == TEXT_BYTES;
    if (f) written = fclose(f) == 0 && written;
    else if (fd >= 0) close(fd);
    if (!check_true(written, "the text for ./run --eval written to %s", text_path)) {
        if (fd >= 0) remove(text_path);
        return;
    }
    const char *run_bin = getenv("RUN") && *getenv("RUN") ? getenv("RUN") : "./run";
    char command[2048], *out = NULL;
    snprintf(command, sizeof command, "%s %s -z %s --eval %s --ctx-size %d", run_bin, model_path,
             tok_path, text_path, CTX);
    int code = check_run(command, &out, NULL);
    const char *loss = out ? strstr(out, "loss: ") : NULL;
    double cli = loss ? strtod(loss + 6, NULL) : (double)NAN;
    check_true(code == 0 && fabs(cli - plain_per_token) <= 1e-6,
               "./run --eval (exact) prints the plain forward's loss: %.6f vs %.9f", cli,
               plain_per_token);
    free(out);
    snprintf(command, sizeof command, "%s %s -z %s --eval %s --ctx-size %d "
             "--attn window:w=%d,sinks=4", run_bin, model_path, tok_path, text_path, CTX, CTX - 4);
    out = NULL;
    code = check_run(command, &out, NULL);
    check_true(code == 0 && out && strstr(out, "KL 0.000000 nats/token, top-1 agreement 100.0000%"),
               "./run --eval --attn window:w=%d,sinks=4 reports KL 0 and 100%% agreement", CTX - 4);
    free(out);
    snprintf(command, sizeof command, "%s %s -z %s --eval %s --ctx-size %d "
             "--attn performer:m=%d", run_bin, model_path, tok_path, text_path, CTX, PERFORMER_M);
    out = NULL;
    code = check_run(command, &out, NULL);
    loss = out ? strstr(out, "loss: ") : NULL;
    cli = loss ? strtod(loss + 6, NULL) : (double)NAN;
    check_true(code == 0 && fabs(cli - performer_f64) <= 1e-6, "./run --eval --attn "
               "performer:m=%d prints the float64 FAVOR+ forward's loss: %.6f vs %.9f",
               PERFORMER_M, cli, performer_f64);
    free(out);
    check_run_eval_half(model_path, tok_path, text_path);
    remove(text_path);
}


/* 3. A window with sinks that covers the window is exact, bit for bit (plain: the exact
 * NLL); 4. a short window is a different function with a smaller state. m's attention
 * is changed; exact stays exact. */
static void check_windows(Model *m, Model *exact, const Tokenizer *tok, const int *ids,
                          size_t n_ids, double plain) {
    AttentionConfig cfg;
    attention_config_default(&cfg);
    cfg.kind = ATTENTION_WINDOW;
    cfg.window = CTX - 4;
    cfg.sinks = 4;
    EvalResult w;
    int ok = model_set_attention(m, &cfg) == 0 &&
             eval_windows(m, exact, tok, ids, (long)n_ids, CTX, 0, &w) == 0;
    check_true(ok && w.nll == plain && w.kl == 0.0 && w.agree == w.tokens,
               "window(%d) + 4 sinks == exact: same loss bits, KL %g, agreement %ld/%ld",
               CTX - 4, w.kl, w.agree, w.tokens);
    size_t ring_bytes = m->attention_bytes;

    cfg.window = 8;
    cfg.sinks = 0;
    ok = model_set_attention(m, &cfg) == 0 &&
         eval_windows(m, exact, tok, ids, (long)n_ids, CTX, 0, &w) == 0;
    check_true(ok && w.kl > 0.0 && w.nll != plain && m->attention_bytes < ring_bytes &&
               ring_bytes <= exact->attention_bytes,
               "window(8): KL %.3g > 0, state %zu < %zu <= exact %zu bytes per layer",
               w.kl / (double)w.tokens, m->attention_bytes, ring_bytes,
               exact->attention_bytes);
    double nll = 0, kl = 0;
    long agree = 0;
    ok = ok && reference_eval(m, exact, ids, (long)n_ids, &nll, &kl, &agree) == 0;
    check_true(ok && fabs(w.nll - nll) <= 1e-9 * nll && fabs(w.kl - kl) <= 1e-9 * kl &&
               w.agree == agree && agree < w.tokens, "window(8): loss, KL(exact || window) and "
               "top-1 agreement == this test's float64 sums (%.9g, %.9g, %ld of %ld; eval "
               "%.9g, %.9g, %ld)", nll, kl, agree, w.tokens, w.nll, w.kl, w.agree);
}

/* 5. Every kind runs on the model (m's attention is changed) and gives finite losses. */
static void check_every_kind(Model *m, const Tokenizer *tok, const int *ids, size_t n_ids) {
    const AttentionKind kinds[] = {ATTENTION_GAUSS, ATTENTION_DILATED, ATTENTION_STRIDED,
                                   ATTENTION_FIXED, ATTENTION_LSH, ATTENTION_LINEAR,
                                   ATTENTION_EFFICIENT, ATTENTION_PERFORMER};
    AttentionConfig cfg;
    EvalResult w;
    int finite = 1;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        attention_config_default(&cfg);
        cfg.kind = kinds[k];
        cfg.features = 32;
        finite &= model_set_attention(m, &cfg) == 0 &&
                  eval_windows(m, NULL, tok, ids, (long)(n_ids < 130 ? n_ids : 130), CTX, 0,
                               &w) == 0 && isfinite(w.nll);
    }
    check_true(finite, "every variant runs on the model with a finite loss");
}

int main(void) {
    char model_path[512], tok_path[512], data_path[512];
    if (choose_files(model_path, tok_path, data_path) != 0) return check_summary("test_eval");
    printf("model %s\n", model_path);
    size_t size;
    char *data = check_read_file(data_path, &size);
    Model m, exact;
    Tokenizer tok;
    memset(&m, 0, sizeof m);
    memset(&exact, 0, sizeof exact);
    memset(&tok, 0, sizeof tok);
    int *ids = NULL;
    if (!check_true(data && size > 10 * TEXT_BYTES, "read %s", data_path)) goto done;
    size_t split = size / 10 * 9 + size % 10 * 9 / 10;   /* floor(0.9 size), as train.c */
    const char *text = data + split;
    if (!check_true(model_load(&m, model_path, CTX, 0) == 0 && model_load(&exact, model_path, CTX, 0) == 0
                    && tokenizer_load(&tok, tok_path) == 0, "load model and tokenizer")) goto done;
    ids = malloc((TEXT_BYTES + 2) * sizeof(int));
    size_t n_ids = 0;
    int encoded = ids && tokenizer_encode(&tok, text, TEXT_BYTES, ids, TEXT_BYTES + 2, &n_ids) == 0;
    if (!check_true(encoded,
                    "tokenise %d bytes of the validation slice", TEXT_BYTES)) goto done;

    /* 1. exact through eval_windows == plain forward */
    long plain_tokens;
    double plain = plain_loss(&m, ids, (long)n_ids, &plain_tokens);
    EvalResult r;
    int ok = eval_windows(&m, NULL, &tok, ids, (long)n_ids, CTX, 0, &r) == 0;
    check_true(ok && r.tokens == plain_tokens && r.nll == plain && r.agree == r.tokens,
               "exact eval == plain forward loss, bitwise (%.9f vs %.9f nats/token, %ld "
               "tokens), and with no reference every token agrees (%ld)",
               r.nll / (double)r.tokens, plain / (double)plain_tokens, r.tokens, r.agree);
    double f64 = f64_loss(&m, ids, (long)n_ids, NULL, NULL) / (double)plain_tokens;
    check_true(fabs(plain / (double)plain_tokens - f64) <= 1e-6,
               "exact eval's loss is a float64 GPT-2 forward's within 1e-6 nats/token (%.9f vs "
               "%.9f: %.1e)", plain / (double)plain_tokens, f64,
               fabs(plain / (double)plain_tokens - f64));
    check_windows(&m, &exact, &tok, ids, n_ids, plain);
    check_every_kind(&m, &tok, ids, n_ids);
    double performer = check_performer(&m, &tok, ids, n_ids);
    check_random_kept(&m);
    check_run_eval(model_path, tok_path, text, plain / (double)plain_tokens, performer);
done:
    free(ids);
    free(data);
    tokenizer_free(&tok);
    model_free(&exact);
    model_free(&m);
    return check_summary("test_eval");
}

/* eval.c: evaluation over non-overlapping windows: negative log-likelihood, and
 * KL divergence and top-1 agreement against exact attention.
 *
 * Two models loaded from the same file (one with the variant's attention, one
 * exact) run the same chunks side by side, so only one chunk of logits of each is
 * alive at a time. All sums are in double. It does no file or argument handling:
 * run_lab.c reads the text, tokenises it and prints the result.
 */
#include "eval.h"

#include <math.h>     /* exp, log */
#include <stdio.h>    /* fprintf(stderr) */

#include "kernels.h"     /* kernels_all_finite */
#include "model.h"       /* model_forward */
#include "os.h"          /* os_seconds: the speed */
#include "tokenizer.h"   /* tokenizer_decode */

/* log Z of logits (V,): max + ln sum exp(logit - max), and the argmax in *best. */
static double log_normaliser(const float *logits, int V, int *best) {
    int arg = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[arg]) arg = i;
    double max = (double)logits[arg], sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp((double)logits[i] - max);
    *best = arg;
    return max + log(sum);
}

/* KL(p || q) = sum_i p_i (ln p_i - ln q_i) for p = softmax(a), q = softmax(b). */
static double kl_divergence(const float *a, double log_za, const float *b, double log_zb, int V) {
    double kl = 0.0;
    for (int i = 0; i < V; i++) {
        double log_p = (double)a[i] - log_za, log_q = (double)b[i] - log_zb;
        kl += exp(log_p) * (log_p - log_q);
    }
    return kl;
}

int eval_windows(Model *variant, Model *exact, const Tokenizer *tok, const int *ids,
                 long n_ids, int ctx, int progress, EvalResult *r) {
    int V = variant->config.vocab_size, chunk = variant->max_chunk;
    if (exact && exact->max_chunk < chunk) chunk = exact->max_chunk;
    *r = (EvalResult){0};
    long n_windows = (n_ids + ctx - 1) / ctx;
    for (long w = 0; w < n_windows; w++) {
        const int *win = ids + w * ctx;
        int len = n_ids - w * ctx < ctx ? (int)(n_ids - w * ctx) : ctx;
        if (len < 2) {                           /* one token predicts nothing */
            r->unscored = len;
            break;
        }
        for (int pos = 0; pos < len - 1; pos += chunk) {
            int n = len - 1 - pos < chunk ? len - 1 - pos : chunk;   /* rows that predict */
            double start = os_seconds();
            const float *logits = model_forward(variant, win + pos, n, pos, 1);
            r->seconds += os_seconds() - start;
            const float *ref = exact ? model_forward(exact, win + pos, n, pos, 1) : NULL;
            if (!logits || (exact && !ref)) {
                fprintf(stderr, "eval: forward failed in window %ld at position %d\n", w, pos);
                return -1;
            }
            for (int t = 0; t < n; t++) {
                const float *row = logits + (size_t)t * V;
                const float *bad = !kernels_all_finite(row, (size_t)V) ? row
                                 : ref && !kernels_all_finite(ref + (size_t)t * V, (size_t)V)
                                 ? ref : NULL;
                if (bad) {
                    fprintf(stderr, "eval: non-finite logits at token %ld (window %ld, position "
                            "%d) of the %s model (expected finite numbers: the weights hold a "
                            "NaN or infinity, or the activations overflowed)\n",
                            w * ctx + pos + t, w, pos + t, bad == row ? "evaluated" : "reference");
                    return -1;
                }
                int target = win[pos + t + 1], best, ref_best;
                double log_z = log_normaliser(row, V, &best);
                r->nll += log_z - (double)row[target];
                if (ref) {
                    const float *ref_row = ref + (size_t)t * V;
                    double ref_log_z = log_normaliser(ref_row, V, &ref_best);
                    r->kl += kl_divergence(ref_row, ref_log_z, row, log_z, V);
                    r->agree += best == ref_best;
                } else {
                    r->agree++;
                }
                size_t bytes;
                tokenizer_decode(tok, win[pos + t], target, &bytes);
                r->bytes += (long)bytes;
                r->tokens++;
            }
        }
        r->windows++;
        r->last_window = len;
        if (progress)
            fprintf(stderr, "\reval: window %ld/%ld, %ld tokens, %.4f nats/token", w + 1,
                    n_windows, r->tokens, r->tokens ? r->nll / (double)r->tokens : 0.0);
    }
    if (progress) fprintf(stderr, "\n");
    return 0;
}

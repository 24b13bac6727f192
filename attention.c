/* attention.c: attention and nothing else.
 *
 * Exact causal scaled dot-product attention, computed the way ATTENTION.md §2.1
 * recommends for decoding: write the visible scores into a scratch row, subtract
 * their maximum, exponentiate, normalise, then take the weighted sum of values.
 * It does not know about layers, weights or the KV cache's owner: model.c passes
 * plain arrays (see attention.h). No malloc, no stdio.
 *
 * Legend: T new queries, NH query heads, NKV kv heads, HS head size, t query index,
 * h head, t2 key position.
 */
#include "attention.h"

#include <math.h>   /* expf, INFINITY */

int attention_scratch_floats(const AttentionShape *shape, int n_ctx) {
    /* one score row of n_ctx floats per head, so heads can run in parallel */
    return shape->n_heads * n_ctx;
}

/* One head, one query: out_t (HS,) = softmax(scores) . v over keys 0 .. n_keys - 1.
 *   q_t (HS,); k, v (n_keys, kv_stride) read at column offset of this kv head;
 *   scores (n_keys,) scratch. */
static void attend_one(float *out_t, const float *q_t, const float *k, const float *v,
                       int kv_stride, int n_keys, int HS, float scale, float *scores) {
    /* pass 1: scores s_t2 = (q . k_t2) * scale, and their maximum */
    float max_score = -INFINITY;
    for (int t2 = 0; t2 < n_keys; t2++) {
        const float *k_t2 = k + (long)t2 * kv_stride;
        float dot = 0.0f;
        for (int i = 0; i < HS; i++) dot += q_t[i] * k_t2[i];
        scores[t2] = dot * scale;
        if (scores[t2] > max_score) max_score = scores[t2];
    }
    /* pass 2: w_t2 = exp(s_t2 - max) and Z = sum w; subtracting max keeps exp <= 1 */
    float sum = 0.0f;
    for (int t2 = 0; t2 < n_keys; t2++) {
        scores[t2] = expf(scores[t2] - max_score);
        sum += scores[t2];
    }
    float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;  /* an empty row gives zeros, not NaN */
    /* pass 3: out = sum_t2 (w_t2 / Z) v_t2 */
    for (int i = 0; i < HS; i++) out_t[i] = 0.0f;
    for (int t2 = 0; t2 < n_keys; t2++) {
        const float *v_t2 = v + (long)t2 * kv_stride;
        float a = scores[t2] * inv_sum;
        for (int i = 0; i < HS; i++) out_t[i] += a * v_t2[i];
    }
}

void attention_forward(const AttentionShape *shape, float *out, const float *q,
                       const float *k, const float *v, int pos, int T, float *scratch) {
    int NH = shape->n_heads, HS = shape->head_dim;
    int group = NH / shape->n_kv_heads;        /* query heads per kv head */
    int kv_stride = shape->n_kv_heads * HS;    /* floats per cached position */
    int n_ctx = pos + T;
    /* Heads are independent and each writes its own HS columns of out, and its own
     * scratch row, so running them on different threads changes no result. */
    #pragma omp parallel for schedule(static)
    for (int h = 0; h < NH; h++) {
        float *scores = scratch + (long)h * n_ctx;
        int kv_offset = (h / group) * HS;      /* seek to this head's columns of k, v */
        for (int t = 0; t < T; t++) {
            const float *q_t = q + ((long)t * NH + h) * HS;
            float *out_t = out + ((long)t * NH + h) * HS;
            attend_one(out_t, q_t, k + kv_offset, v + kv_offset, kv_stride, pos + t + 1, HS,
                       shape->scale, scores);
        }
    }
}

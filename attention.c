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
     * scratch row, so running them on different threads changes no result. A short
     * context stays on one thread: a parallel region would cost more than the work. */
    #pragma omp parallel for schedule(static) if ((long)NH * T * n_ctx * HS >= ATTENTION_PARALLEL_MIN_WORK)
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

/* ------------------------------------------------------------------------- */
/* Backward (for the trainer)                                                  */

int attention_backward_scratch_floats(const AttentionShape *shape, int n_ctx) {
    /* two rows per kv head (weights p and their gradients), so kv heads run in parallel */
    return shape->n_kv_heads * 2 * n_ctx;
}

/* One head, one query t with n_keys = t + 1 visible keys: recompute p = softmax(scores)
 * exactly as attend_one does, then accumulate the gradients of q_t, k, v.
 *   dout_t, q_t, dq_t (HS,); k, v, dk, dv (n_keys, kv_stride) at this kv head's columns;
 *   p, dp (n_keys,) scratch. */
static void attend_one_backward(float *dq_t, float *dk, float *dv, const float *dout_t,
                                const float *q_t, const float *k, const float *v,
                                int kv_stride, int n_keys, int HS, float scale,
                                float *p, float *dp) {
    /* recompute the weights: the same three steps, in the same order, as attend_one */
    float max_score = -INFINITY;
    for (int t2 = 0; t2 < n_keys; t2++) {
        const float *k_t2 = k + (long)t2 * kv_stride;
        float dot = 0.0f;
        for (int i = 0; i < HS; i++) dot += q_t[i] * k_t2[i];
        p[t2] = dot * scale;
        if (p[t2] > max_score) max_score = p[t2];
    }
    float sum = 0.0f;
    for (int t2 = 0; t2 < n_keys; t2++) {
        p[t2] = expf(p[t2] - max_score);
        sum += p[t2];
    }
    float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;
    /* dp_t2 = dout . v_t2, dv_t2 += p_t2 dout, and the softmax's weighted mean of dp */
    float mean_dp = 0.0f;
    for (int t2 = 0; t2 < n_keys; t2++) {
        const float *v_t2 = v + (long)t2 * kv_stride;
        float *dv_t2 = dv + (long)t2 * kv_stride;
        p[t2] *= inv_sum;
        float dot = 0.0f;
        for (int i = 0; i < HS; i++) {
            dot += dout_t[i] * v_t2[i];
            dv_t2[i] += p[t2] * dout_t[i];
        }
        dp[t2] = dot;
        mean_dp += p[t2] * dot;
    }
    /* ds_t2 = p_t2 (dp_t2 - mean_dp); scores were (q . k_t2) * scale */
    for (int t2 = 0; t2 < n_keys; t2++) {
        const float *k_t2 = k + (long)t2 * kv_stride;
        float *dk_t2 = dk + (long)t2 * kv_stride;
        float ds = p[t2] * (dp[t2] - mean_dp) * scale;
        for (int i = 0; i < HS; i++) {
            dq_t[i] += ds * k_t2[i];
            dk_t2[i] += ds * q_t[i];
        }
    }
}

void attention_backward(const AttentionShape *shape, float *dq, float *dk, float *dv,
                        const float *dout, const float *q, const float *k, const float *v,
                        int T, float *scratch) {
    int NH = shape->n_heads, NKV = shape->n_kv_heads, HS = shape->head_dim;
    int group = NH / NKV;                      /* query heads per kv head */
    int kv_stride = NKV * HS;
    /* Every query head of one kv head adds into the same dk, dv columns, so the unit of
     * parallel work is the kv head: its thread alone writes those columns and the dq
     * columns of its query heads, always in the order h, t, t2. */
    #pragma omp parallel for schedule(static)
    for (int kvh = 0; kvh < NKV; kvh++) {
        float *p = scratch + (long)kvh * 2 * T, *dp = p + T;
        int kv_offset = kvh * HS;              /* seek to this head's columns of k, v */
        for (int h = kvh * group; h < (kvh + 1) * group; h++) {
            for (int t = 0; t < T; t++) {
                long row = ((long)t * NH + h) * HS;    /* seek to q[t, h, :] */
                attend_one_backward(dq + row, dk + kv_offset, dv + kv_offset, dout + row,
                                    q + row, k + kv_offset, v + kv_offset, kv_stride, t + 1,
                                    HS, shape->scale, p, dp);
            }
        }
    }
}

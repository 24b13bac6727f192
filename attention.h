/* attention.h: the one interface through which the model reaches attention.
 *
 * The kernels take plain arrays and sizes and know nothing of the model: queries
 * for T new positions, the cached keys and values of every position so far, and
 * the head layout. Read attention.c next for the computation itself.
 *
 * Legend: NH query heads, NKV key/value heads (NH % NKV == 0; GPT-2 has NKV = NH,
 * grouped-query models share one K/V head among NH/NKV query heads), HS head size,
 * pos the position of the first new query, T the number of new queries.
 */
#ifndef ATTENTION_H
#define ATTENTION_H

#ifndef ATTENTION_PARALLEL_MIN_WORK
#define ATTENTION_PARALLEL_MIN_WORK (1L << 18)  /* less work (multiply-adds) runs on one thread */
#endif

typedef struct {
    int n_heads;      /* NH: query heads */
    int n_kv_heads;   /* NKV: key/value heads; query head h reads kv head h / (NH / NKV) */
    int head_dim;     /* HS: floats per head */
    float scale;      /* score = (q . k) * scale; 1/sqrt(HS) for scaled dot product */
} AttentionShape;

/* Floats of scratch attention_forward needs for a context of up to n_ctx positions. */
int attention_scratch_floats(const AttentionShape *shape, int n_ctx);

/* Exact causal multi-head scaled dot-product attention (ATTENTION.md §4.1), with a
 * max-subtracted softmax (§2.1). Query t (position pos + t) sees keys 0 .. pos + t.
 *   out     (T, NH * HS)            written
 *   q       (T, NH * HS)            queries of the T new positions
 *   k, v    (pos + T, NKV * HS)     keys and values of every position 0 .. pos + T - 1
 *   scratch (attention_scratch_floats(shape, pos + T),)  overwritten
 * Heads run in parallel under OpenMP; each output row is written by one thread, so
 * the result is bitwise identical for any thread count. Never allocates. */
void attention_forward(const AttentionShape *shape, float *out, const float *q,
                       const float *k, const float *v, int pos, int T, float *scratch);

/* Floats of scratch attention_backward needs for a context of up to n_ctx positions. */
int attention_backward_scratch_floats(const AttentionShape *shape, int n_ctx);

/* Backward of attention_forward with pos = 0 (training: T queries over T keys). The
 * softmax weights are recomputed from q and k, not stored. With out = softmax(s) . v
 * and s = (q . k) * scale, for each query t, head h and key t2 <= t:
 *   dv_t2 += p_t2 dout_t;  ds_t2 = p_t2 (dout_t . v_t2 - sum_j p_j dout_t . v_j);
 *   dq_t += ds_t2 scale k_t2;  dk_t2 += ds_t2 scale q_t.
 *   dq      (T, NH * HS)    accumulated (+=)
 *   dk, dv  (T, NKV * HS)   accumulated (+=)
 *   dout    (T, NH * HS)    gradient of the loss with respect to out
 *   q (T, NH * HS); k, v (T, NKV * HS): the forward's inputs
 *   scratch (attention_backward_scratch_floats(shape, T),)  overwritten
 * Key/value heads run in parallel under OpenMP; each writes only its own columns of
 * dq, dk and dv in a fixed order, so the result is bitwise identical for any thread
 * count. Never allocates. */
void attention_backward(const AttentionShape *shape, float *dq, float *dk, float *dv,
                        const float *dout, const float *q, const float *k, const float *v,
                        int T, float *scratch);

#endif /* ATTENTION_H */

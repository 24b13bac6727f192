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

#endif /* ATTENTION_H */

/* quant.c: per-group int8 quantization and the int8 matmul kernels declared in quant.h.
 *
 * The reference kernels, in plain C: what each computes, and what a build without vector
 * instructions runs. The instruction sets' versions of the hot ones (quantizing
 * activations, the matmul one row of x at a time, the prefill GEMM's register tile that
 * takes several rows of x at once, the matmul of packed rows) live behind simd/simd.h,
 * which names them simd_q8_*: each is the reference's own function where the build has no
 * vector version. The vector quantizer, the vector matmuls and the GEMM give the
 * reference's bits (so a prompt run at once and token by token agree exactly). Nothing
 * here threads, and only quant_pack allocates (a block's scratch): the caller splits
 * output columns among threads.
 */
#include "quant.h"

#include <math.h>     /* fabsf, roundf, rintf, isfinite, isnan, NAN */
#include <stddef.h>   /* size_t */
#include <stdint.h>   /* int8_t, int32_t, uint8_t */
#include <stdlib.h>   /* malloc, free */
#include <string.h>   /* memcpy, memset */

#include "simd/simd.h"  /* simd_q8_*: this build's vector kernels, or the references below */

/* The GEMM's driver (and the reference's rows) are kept out of quant_matmul_block, so that
 * a single row (decode) goes through it to the vector row path without saving the
 * registers the others use. */
#if defined(__GNUC__)
#define NEVER_INLINE __attribute__((noinline))
#else
#define NEVER_INLINE
#endif

int quant_groups(int cols, int group) {
    return (cols + group - 1) / group;
}

/* Length of group g of a row of cols values: group, except for a shorter last one. */
static int group_length(int g, int cols, int group) {
    int left = cols - g * group;
    return left < group ? left : group;
}

/* ------------------------------------------------------------------------- */
/* Reference kernels: portable C                                               */

/* The scale of a group whose largest magnitude is amax: amax / 127, or NaN when that is
 * not finite (amax NaN or inf), so that a non-finite input poisons every output that
 * uses its group instead of reaching a float-to-int conversion (undefined for NaN). */
static float scale_for(float amax) {
    float scale = amax / (float)QUANT_Q_MAX;
    return isfinite(scale) ? scale : NAN;
}

/* max |x| over x (n,), or NaN if x holds a NaN. */
static float absmax_reference(const float *x, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (isnan(a)) return NAN;
        if (a > amax) amax = a;
    }
    return amax;
}

/* q (n,) = round(x / scale) clamped to [-127, 127], with x (n,) finite and scale > 0, so
 * |x / scale| is at most about 127 (more only if scale is subnormal) and the conversion
 * to int8 is always defined. Halves round away from zero (roundf, as llama2.c's round()),
 * or to even if even (rintf in the default rounding mode, as torch.round). */
static void round_reference(int8_t *q, const float *x, int n, float scale, int even) {
    for (int i = 0; i < n; i++) {
        float v = even ? rintf(x[i] / scale) : roundf(x[i] / scale);
        if (v > (float)QUANT_Q_MAX) v = (float)QUANT_Q_MAX;
        if (v < (float)-QUANT_Q_MAX) v = (float)-QUANT_Q_MAX;
        q[i] = (int8_t)v;
    }
}

/* The exact dot product of a (n,) and b (n,), int8 values, n <= QUANT_GROUP_MAX. */
static int32_t dot_i8(const int8_t *a, const int8_t *b, int n) {
    int32_t sum = 0;
    for (int i = 0; i < n; i++) sum += (int32_t)a[i] * (int32_t)b[i];
    return sum;
}

/* x · w for one row x of the activations and one row w of the weights, both quantized
 * (q (cols,), scales (groups,)): per group the exact int32 dot product, times both
 * scales, summed in float. The portable path, one group after another. */
static float dot_row_reference(const int8_t *xq, const float *xs, const int8_t *wq,
                              const float *ws, int cols, int group) {
    float acc = 0.0f;
    for (int g = 0, c = 0; c < cols; g++, c += group) {
        int32_t dot = dot_i8(xq + c, wq + c, group_length(g, cols, group));
        acc += (float)dot * (xs[g] * ws[g]);
    }
    return acc;
}

/* ------------------------------------------------------------------------- */
/* Quantization                                                                */

/* Groups first .. of a row x (cols,) into q (cols,) and scale (groups,), halves rounded
 * as round_reference's even says. */
static void quantize_groups(int8_t *q, float *scale, const float *x, int first, int cols,
                            int group, int even) {
    for (int g = first; g < quant_groups(cols, group); g++) {
        int at = g * group, n = group_length(g, cols, group);
        float s = scale_for(absmax_reference(x + at, n));
        scale[g] = s;
        if (s > 0.0f)
            round_reference(q + at, x + at, n, s, even);
        else   /* zero (all-zero group, or underflow) or NaN */
            memset(q + at, 0, (size_t)n);
    }
}

void quant_quantize(int8_t *q, float *scale, const float *x, int rows, int cols, int group) {
    int groups = quant_groups(cols, group);
    for (int r = 0; r < rows; r++) {
        int8_t *q_r = q + (size_t)r * (size_t)cols;
        float *scale_r = scale + (size_t)r * (size_t)groups;
        const float *x_r = x + (size_t)r * (size_t)cols;
        /* this build's vector quantizer takes the groups it can from the first, the
         * reference the rest */
        quantize_groups(q_r, scale_r, x_r, simd_q8_quantize(q_r, scale_r, x_r, cols, group), cols,
                        group, 0);
    }
}

void quant_quantize_weights(int8_t *q, float *scale, const float *x, int cols, int group) {
    quantize_groups(q, scale, x, 0, cols, group, 1);
}

/* ------------------------------------------------------------------------- */
/* The packed layout (quant.h)                                                  */

int quant_pack_rows(const QuantMatrix *m) {
#if defined(SIMD_Q8_PACKED)
    if (m->cols > 0 && m->group % 4 == 0 && m->cols % m->group == 0 &&
        m->cols <= QUANT_GROUP_MAX)
        return m->rows / QUANT_PACK_ROWS * QUANT_PACK_ROWS;
#endif
    (void)m;
    return 0;
}

/* Where value c of row r (< m->packed) of m lies in its q, and its group's scale. */
static size_t packed_at(const QuantMatrix *m, int r, int c) {
    size_t block = (size_t)(r / QUANT_PACK_ROWS) * QUANT_PACK_ROWS * (size_t)m->cols;
    return block + (size_t)(c / 4) * (4 * QUANT_PACK_ROWS) + (size_t)(r % QUANT_PACK_ROWS) * 4 +
           (size_t)(c % 4);
}
static size_t packed_scale_at(const QuantMatrix *m, int r, int g) {
    size_t groups = (size_t)quant_groups(m->cols, m->group);
    return (size_t)(r / QUANT_PACK_ROWS) * QUANT_PACK_ROWS * groups +
           (size_t)g * QUANT_PACK_ROWS + (size_t)(r % QUANT_PACK_ROWS);
}

int quant_pack(QuantMatrix *m) {
    int rows = quant_pack_rows(m), cols = m->cols, groups = quant_groups(cols, m->group);
    if (rows == 0 || m->packed) return 0;   /* nothing to pack, or packed already */
    size_t q_bytes = (size_t)QUANT_PACK_ROWS * (size_t)cols;
    size_t s_floats = (size_t)QUANT_PACK_ROWS * (size_t)groups;
    int8_t *block = malloc(q_bytes + s_floats * sizeof(float));   /* a block's rows, as they were */
    if (!block) return -1;
    float *block_scale = (float *)(void *)(block + q_bytes);   /* q_bytes: a multiple of 4 */
    int8_t *q = (int8_t *)m->q;       /* the caller's writable memory (quant.h) */
    float *scale = (float *)m->scale;
    for (int b = 0; b < rows; b += QUANT_PACK_ROWS) {
        int8_t *q_b = q + (size_t)b * (size_t)cols;
        float *s_b = scale + (size_t)b * (size_t)groups;
        memcpy(block, q_b, q_bytes);
        memcpy(block_scale, s_b, s_floats * sizeof(float));
        for (int r = 0; r < QUANT_PACK_ROWS; r++) {
            for (int k = 0; k < cols / 4; k++) {   /* quad k of row r, each byte + 128 */
                uint32_t quad;
                memcpy(&quad, block + (size_t)r * (size_t)cols + 4 * (size_t)k, 4);
                quad ^= 0x80808080u;
                memcpy(q_b + (size_t)k * (4 * QUANT_PACK_ROWS) + (size_t)r * 4, &quad, 4);
            }
            for (int g = 0; g < groups; g++)
                s_b[(size_t)g * QUANT_PACK_ROWS + (size_t)r] =
                    block_scale[(size_t)r * (size_t)groups + (size_t)g];
        }
    }
    free(block);
    m->packed = rows;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Dequantization                                                              */

void quant_dequantize_row(float *out, const QuantMatrix *m, int row) {
    int groups = quant_groups(m->cols, m->group);
    if (row < m->packed) {   /* the packed layout: value + 128 as a byte, in quads */
        const uint8_t *quad = (const uint8_t *)m->q + packed_at(m, row, 0);
        for (int g = 0; g < groups; g++) {   /* (a packed row's groups are whole quads) */
            float s = m->scale[packed_scale_at(m, row, g)];
            for (int c = g * m->group; c < (g + 1) * m->group; c += 4) {
                for (int i = 0; i < 4; i++) out[c + i] = (float)((int)quad[i] - 128) * s;
                quad += 4 * QUANT_PACK_ROWS;   /* the row's next quad */
            }
        }
    } else {
        const int8_t *q = m->q + (size_t)row * (size_t)m->cols;
        const float *scale = m->scale + (size_t)row * (size_t)groups;
        for (int g = 0; g < groups; g++) {
            int c0 = g * m->group, n = group_length(g, m->cols, m->group);
            for (int c = c0; c < c0 + n; c++) out[c] = (float)q[c] * scale[g];
        }
    }
    if (m->offset) {   /* in rows, packed or not */
        const float *offset = m->offset + (size_t)row * (size_t)groups;
        for (int c = 0; c < m->cols; c++) out[c] -= offset[c / m->group];
    }
}

void quant_dequantize(float *out, const QuantMatrix *m) {
    for (int r = 0; r < m->rows; r++)
        quant_dequantize_row(out + (size_t)r * (size_t)m->cols, m, r);
}

/* ------------------------------------------------------------------------- */
/* Matmul                                                                      */

/* Columns o0 .. o1-1 of quant_matmul_block by dot_row_reference, one row of x at a time.
 * Kept out of line: matmul_rows below stays small, and a build whose vector kernel does
 * every column never enters it. */
static NEVER_INLINE void matmul_rows_reference(float *out, const int8_t *xq, const float *xs,
                                               const QuantMatrix *w, const float *bias, int N,
                                               int o0, int o1) {
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group), OC = w->rows;
    for (int o = o0; o < o1; o++) {
        const int8_t *wq = w->q + (size_t)o * (size_t)cols;
        const float *ws = w->scale + (size_t)o * (size_t)groups;
        for (int n = 0; n < N; n++)
            out[(size_t)n * (size_t)OC + (size_t)o] =
                dot_row_reference(xq + (size_t)n * (size_t)cols, xs + (size_t)n * (size_t)groups,
                                 wq, ws, cols, group) + (bias ? bias[o] : 0.0f);
    }
}

/* quant_matmul_block one row of x at a time (decode, and the rows and columns the GEMM's
 * tiles leave over): the vector path where the build has one for w's groups, the
 * reference for the rest. */
static void matmul_rows(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1) {
    int o = simd_q8_matmul_rows(out, xq, xs, w, bias, N, o0, o1);
    if (o < o1) matmul_rows_reference(out, xq, xs, w, bias, N, o, o1);
}

/* quant_matmul_block for N >= SIMD_Q8_GEMM_MIN_ROWS rows and at least C columns of a
 * matrix the build's GEMM tile (R x C) takes: its whole tiles, then the rows below them
 * (none where the tile pads its rows) and the columns right of them one row at a time,
 * with the same bits. */
static NEVER_INLINE void matmul_gemm(float *out, const int8_t *xq, const float *xs,
                                     const QuantMatrix *w, const float *bias, int N, int o0,
                                     int o1, int R, int C) {
    int cols = w->cols, groups = quant_groups(cols, w->group), OC = w->rows;
#if defined(SIMD_Q8_GEMM_ANY_ROWS)
    int n_tiled = N;   /* the tile pads its last block of rows */
    (void)R;
#else
    int n_tiled = N / R * R;
#endif
    int o_tiled = o0 + (o1 - o0) / C * C;
    simd_q8_gemm_tiles(out, xq, xs, w, bias, n_tiled, o0, o_tiled);
    matmul_rows(out, xq, xs, w, bias, n_tiled, o_tiled, o1);
    matmul_rows(out + (size_t)n_tiled * (size_t)OC, xq + (size_t)n_tiled * (size_t)cols,
                xs + (size_t)n_tiled * (size_t)groups, w, bias, N - n_tiled, o0, o1);
}

/* quant_matmul_block but the offsets: the build's kernels. */
static void matmul_block(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                         const float *bias, int N, int o0, int o1) {
    if (o0 < w->packed) {   /* the packed rows: the build's packed kernel (simd/simd.h) */
        int end = o1 < w->packed ? o1 : w->packed;
        simd_q8_matmul_packed(out, xq, xs, w, bias, N, o0, end);
        if (end == o1) return;
        o0 = end;   /* the rows after the last whole block stay in rows */
    }
    if (N >= SIMD_Q8_GEMM_MIN_ROWS && o1 - o0 >= SIMD_Q8_GEMM_COLS && simd_q8_gemm_takes(w)) {
        matmul_gemm(out, xq, xs, w, bias, N, o0, o1, SIMD_Q8_GEMM_ROWS, SIMD_Q8_GEMM_COLS);
        return;   /* prefill */
    }
    matmul_rows(out, xq, xs, w, bias, N, o0, o1);
}

/* sum over g of offset[g] * v[g] (offset, v (groups,)) in QUANT_OFFSET_LANES partial
 * sums (lane g % LANES, g rising), then the lanes in order. */
static float offset_sum(const float *offset, const float *v, int groups) {
    float lane[QUANT_OFFSET_LANES] = {0}, total = 0.0f;
    int g = 0;
    for (; g + QUANT_OFFSET_LANES <= groups; g += QUANT_OFFSET_LANES)
        for (int k = 0; k < QUANT_OFFSET_LANES; k++) lane[k] += offset[g + k] * v[g + k];
    for (; g < groups; g++) lane[g % QUANT_OFFSET_LANES] += offset[g] * v[g];
    for (int k = 0; k < QUANT_OFFSET_LANES; k++) total += lane[k];
    return total;
}

/* The offsets' part of quant_matmul_block (quant.h): out[n, o] -= offset_sum(offset[o],
 * v), v[g] = xs[n, g] * (the exact sum of row n's group g of xq), for columns o0 .. o1-1:
 * the build's vector tiles (simd_q8_subtract_offsets), then the rest here. The same bits
 * for any o0, o1, N, and in every build that evaluates floats as floats (FLT_EVAL_METHOD
 * 0; x87's keep wider sums). */
static void subtract_offsets(float *out, const int8_t *xq, const float *xs,
                             const QuantMatrix *w, int N, int o0, int o1) {
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group), OC = w->rows;
    float v[QUANT_OFFSET_MAX_GROUPS];
    for (int n = 0; n < N; n++) {
        const int8_t *xq_n = xq + (size_t)n * (size_t)cols;
        const float *xs_n = xs + (size_t)n * (size_t)groups;
        float *out_n = out + (size_t)n * (size_t)OC;
        for (int g = 0; g < groups; g++) {
            int32_t sum = 0;
            for (int c = g * group; c < g * group + group_length(g, cols, group); c++)
                sum += xq_n[c];
            v[g] = xs_n[g] * (float)sum;
        }
        for (int o = simd_q8_subtract_offsets(out_n, v, w, o0, o1); o < o1; o++)
            out_n[o] -= offset_sum(w->offset + (size_t)o * (size_t)groups, v, groups);
    }
}

void quant_matmul_block(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1) {
    matmul_block(out, xq, xs, w, bias, N, o0, o1);
    if (w->offset) subtract_offsets(out, xq, xs, w, N, o0, o1);
}

const char *quant_kernel_name(void) { return SIMD_Q8_NAME; }

void quant_gemm_tile(int *rows, int *cols) {
    *rows = SIMD_Q8_GEMM_ROWS;
    *cols = SIMD_Q8_GEMM_COLS;
}

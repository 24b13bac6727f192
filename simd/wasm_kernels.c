/* wasm_kernels.c: WebAssembly SIMD128 (the page, web/; built with -msimd128) for the two
 * loops a token spends its time in: the matrix-vector products and attention's dot
 * products. Each is kernels.c's reference with its eight lane sums held in two 4-lane
 * vectors: the same multiplies and adds (each rounded, none fused: SIMD128 has no FMA), in
 * the same order, the same final reduction, so the page computes the portable build's
 * bits. simd.h maps simd_matmul_block and simd_dots here in such a build.
 *
 * Legend: N rows of x, IC input width, OC output width.
 */
#include "simd/simd.h"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>   /* v128_t, wasm_f32x4_* */

/* acc[0 .. 7] of the reference: lane i % 8 += a[i] * b[i] over i < n */
static inline void lane_sums(float acc[LANES], const float *a, const float *b, int n) {
    v128_t lo = wasm_f32x4_splat(0.0f), hi = lo;
    int i = 0;
    for (; i + LANES <= n; i += LANES) {
        lo = wasm_f32x4_add(lo, wasm_f32x4_mul(wasm_v128_load(a + i), wasm_v128_load(b + i)));
        hi = wasm_f32x4_add(hi, wasm_f32x4_mul(wasm_v128_load(a + i + 4),
                                               wasm_v128_load(b + i + 4)));
    }
    wasm_v128_store(acc, lo);
    wasm_v128_store(acc + 4, hi);
    for (; i < n; i++) acc[i % LANES] += a[i] * b[i];
}

void simd_wasm_matmul_block(float *out, const float *x, const float *w, const float *b,
                            int n0, int n1, int o0, int o1, int IC, int OC) {
    for (int n = n0; n < n1; n++) {
        for (int o = o0; o < o1; o++) {
            float acc[LANES];
            lane_sums(acc, x + (size_t)n * IC, w + (size_t)o * IC, IC);
            out[(size_t)n * OC + o] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                                      ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        }
    }
    if (b)
        for (int n = n0; n < n1; n++)
            for (int o = o0; o < o1; o++) out[(size_t)n * OC + o] += b[o];
}

void simd_wasm_dots(float *out, const float *q, const float *k, int stride, const int32_t *rows,
                    int n_rows, int n) {
    for (int r = 0; r < n_rows; r++) {
        float acc[LANES];
        lane_sums(acc, q, k + (long)(rows ? rows[r] : r) * stride, n);
        out[r] = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    }
}
#endif

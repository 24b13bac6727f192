/* mca_tiles.c: the kernels' hot tiles, each in a function of its own with the shapes the
 * engine runs, for llvm-mca to model on cores this project has no machine of
 * (tools/mca_tiles.sh compiles it with -S for each target and models each function's
 * innermost loop). It includes the kernels' own sources, so the loops are the compiler's
 * code for them, not copies. Never linked into anything; nothing here runs.
 */
#include "simd/quant_x86.c"
#include "simd/vec_kernels.c"

#if defined(SIMD_Q8_PACKED)
/* A prompt's int8 tile (AVX-512 VNNI): 6 rows of x (packed: pack_x) by 2 blocks of 16
 * rows of w, a row of 768 values in groups of 32; its loop is one group (96 vpdpbusd,
 * then the float steps). No prefetches (a prompt's w is in the caches). */
void mca_q8_prompt(float *out, const uint8_t *w, const float *ws, const uint8_t *xp,
                   const __mmask16 *mask) {
    packed_tile(out, 768, w, ws, 1, QUANT_PACK_ROWS, 768, 32, xp, NULL, mask, PACKED_ROWS,
                PACKED_BLOCKS, 0);
}

/* Decode's int8 tile: one row of x (packed) against four runs of w (blocks 12 apart), one
 * group a loop (32 vpdpbusd); without the prefetches a cold w takes on Intel's cores. */
void mca_q8_decode(float *out, const uint8_t *w, const float *ws, const uint8_t *xp,
                   const __mmask16 *mask) {
    packed_tile(out, 0, w, ws, 12, 12 * QUANT_PACK_ROWS, 768, 32, xp, NULL, mask, 1,
                PACKED_RUNS, 0);
}
#endif

#if SIMD_VECTOR
/* A prompt's fp32 tile: GEMM_MR(GEMM_NV) rows of w by GEMM_NV vectors of rows of x
 * (transposed), one input column a loop. */
void mca_fp32_prompt(float *sums, const float *xt, const float *w) {
    gemm_tile(sums, xt, GEMM_NB, w, w, GEMM_KC, 768, GEMM_MR(GEMM_NV), GEMM_NV);
}

/* Decode's fp32 tile: one row of x against four rows of w a quarter of 768 rows apart. */
void mca_fp32_decode(float *out, const float *x, const float *w) {
    dot_rows_tile(out, 192, x, w, (size_t)192 * 768, 768, 4, 0, 0);
}

/* A prompt's attention, heads of 64: the dots of DOTS_QUERIES queries with eight keys (one
 * pass: eight values of each), and the weighted sums of SUMS_QUERIES queries over
 * SUMS_VECTORS vectors of the values (one pass: a row of v). */
void mca_attn_dots(float *out, const float *q, const void *const k_r[8]) {
    dots8_queries(out, 256, q, 768, k_r, 64);
}

void mca_attn_sums(float *out, float *const *w_t, const float *v) {
    weighted_sums_block(out, 768, w_t, v, 64, 256, SUMS_QUERIES, SUMS_VECTORS);
}
#endif

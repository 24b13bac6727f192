/* quant_neon.c: quant.c's int8 matmuls for NEON (AArch64), with the dot-product
 * instructions where the build has them: the row path (decode: one row of x against four
 * rows of w at a time) and the prefill tile (four rows of x by four of w). simd.h says when
 * a build uses them.
 */
#include "simd/simd.h"

#if defined(SIMD_Q8_NEON)
#include <arm_neon.h>   /* NEON (and dot-product) intrinsics */
#include <stddef.h>     /* size_t */
#include <stdint.h>     /* int8_t */

#include "quant.h"      /* QuantMatrix, quant_groups */

/* The tile is inlined into its caller, where its shape is constant: only then do its loops
 * unroll and its sums stay in registers. */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* Length of group g of a row of cols values: group, except for a shorter last one (quant.c's
 * group_length). */
static int group_length(int g, int cols, int group) {
    int left = cols - g * group;
    return left < group ? left : group;
}

/* This build quantizes by the reference; both matmuls give the reference's bits: per
 * group, each pair's exact integer dot product, converted to float, times (x's scale times
 * w's), added to the pair's sum in group order, then + bias, with four columns of a row of
 * x in the lanes of one float32x4 (no fused multiply-add: the build has -ffp-contract=off).
 * The vocabulary:
 *   dot16_add        a pair's four int32 lanes plus the products of 16 values
 *   totals4          four pairs' lanes summed into one vector of their four totals */
#define QUANT_GEMM_R 4      /* 4 x 4 pairs' integer lanes, 4 rows of x, 4 rows' sums: 24 of
                             * NEON's 32 registers, and a chunk of w */
#define QUANT_GEMM_C 4
#define QUANT_NEON_CHUNK 16 /* int8s per NEON register */

/* acc plus the 16 products x[i] * w[i]: four per lane with the dot-product instruction;
 * else eight int16 sums of two products (at most 2 * 127 * 127 = 32258, no overflow) added
 * pairwise into the lanes. */
static inline int32x4_t dot16_add(int32x4_t acc, int8x16_t x, int8x16_t w) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, x, w);
#else
    int16x8_t pairs = vmull_s8(vget_low_s8(x), vget_low_s8(w));
    pairs = vmlal_high_s8(pairs, x, w);
    return vpadalq_s16(acc, pairs);
#endif
}

/* lane c = the sum of the four lanes of a_c. */
static inline int32x4_t totals4(int32x4_t a0, int32x4_t a1, int32x4_t a2, int32x4_t a3) {
    return vpaddq_s32(vpaddq_s32(a0, a1), vpaddq_s32(a2, a3));
}

/* out rows n .. n+R-1, columns o .. o+3 = those rows of x times those rows of w, + bias,
 * for groups and widths that are multiples of 16 (every group, the last too, whole
 * chunks). R: QUANT_GEMM_R for the prefill tile, 1 for the row path (decode); a constant
 * at each call, so that the loops unroll and the sums stay in registers. */
static ALWAYS_INLINE void gemm_tile_neon(float *out, const int8_t *xq, const float *xs,
                                         const QuantMatrix *w, const float *bias, int n, int o,
                                         int R) {
    enum { C = QUANT_GEMM_C };
    int cols = w->cols, group = w->group, groups = quant_groups(cols, group), OC = w->rows;
    const int8_t *x0 = xq + (size_t)n * (size_t)cols, *w0 = w->q + (size_t)o * (size_t)cols;
    const float *xs0 = xs + (size_t)n * (size_t)groups;
    const float *ws0 = w->scale + (size_t)o * (size_t)groups;
    float32x4_t acc[QUANT_GEMM_R];
    for (int r = 0; r < R; r++) acc[r] = vdupq_n_f32(0.0f);
    for (int g = 0; g < groups; g++) {
        size_t at = (size_t)g * (size_t)group;
        int len = group_length(g, cols, group);
        int32x4_t dots[QUANT_GEMM_R][C];
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) dots[r][c] = vdupq_n_s32(0);
        for (int i = 0; i < len; i += QUANT_NEON_CHUNK) {
            int8x16_t x[QUANT_GEMM_R];
            for (int r = 0; r < R; r++)
                x[r] = vld1q_s8(x0 + (size_t)r * (size_t)cols + at + (size_t)i);
            for (int c = 0; c < C; c++) {
                int8x16_t w_c = vld1q_s8(w0 + (size_t)c * (size_t)cols + at + (size_t)i);
                for (int r = 0; r < R; r++) dots[r][c] = dot16_add(dots[r][c], x[r], w_c);
            }
        }
        const float *ws_g = ws0 + g;
        float32x4_t w_scale = vdupq_n_f32(ws_g[0]);
        w_scale = vsetq_lane_f32(ws_g[(size_t)groups], w_scale, 1);
        w_scale = vsetq_lane_f32(ws_g[2 * (size_t)groups], w_scale, 2);
        w_scale = vsetq_lane_f32(ws_g[3 * (size_t)groups], w_scale, 3);
        for (int r = 0; r < R; r++) {
            int32x4_t total = totals4(dots[r][0], dots[r][1], dots[r][2], dots[r][3]);
            float32x4_t scale = vmulq_f32(vdupq_n_f32(xs0[(size_t)r * (size_t)groups + (size_t)g]),
                                          w_scale);
            acc[r] = vaddq_f32(acc[r], vmulq_f32(vcvtq_f32_s32(total), scale));
        }
    }
    float32x4_t b = bias ? vld1q_f32(bias + o) : vdupq_n_f32(0.0f);   /* + 0, as the reference */
    for (int r = 0; r < R; r++)
        vst1q_f32(out + (size_t)(n + r) * (size_t)OC + (size_t)o, vaddq_f32(acc[r], b));
}

/* Whether this file's kernels take w: groups and width multiples of 16 (every group, the
 * last too, whole chunks); the rest go to the reference. */
static int neon_takes(const QuantMatrix *w) {
    return w->group % QUANT_NEON_CHUNK == 0 && w->cols % QUANT_NEON_CHUNK == 0;
}

/* Whether the prefill tile takes w. */
int simd_q8_gemm_takes(const QuantMatrix *w) { return neon_takes(w); }

/* quant.c's row path for columns o0 .. o1-1 of the N rows of x: the tile with one row of x,
 * each chunk of x loaded once for four rows of w, which lie next to each other in memory
 * (one stream), and those rows in L1 while the rows of x go past; returns the first column
 * it did not do (o0 for a w these kernels do not take). */
int simd_q8_matmul_rows(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1) {
    if (!neon_takes(w)) return o0;
    int o = o0;
    for (; o + QUANT_GEMM_C <= o1; o += QUANT_GEMM_C)
        for (int n = 0; n < N; n++) gemm_tile_neon(out, xq, xs, w, bias, n, o, 1);
    return o;
}

/* Tiles over rows 0 .. N-1 and columns o0 .. o1-1 (N and o1 - o0 multiples of the tile),
 * column tiles outside: a tile's rows of w stay in L1 while the rows of x go past. */
void simd_q8_gemm_tiles(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1) {
    for (int o = o0; o < o1; o += QUANT_GEMM_C)
        for (int n = 0; n < N; n += QUANT_GEMM_R)
            gemm_tile_neon(out, xq, xs, w, bias, n, o, QUANT_GEMM_R);
}

_Static_assert(QUANT_GEMM_R == SIMD_Q8_GEMM_ROWS && QUANT_GEMM_C == SIMD_Q8_GEMM_COLS,
               "simd.h announces this tile");
#else
/* ISO C wants a declaration in every translation unit: a build without NEON has nothing
 * else here. */
typedef int simd_quant_neon_none;
#endif /* SIMD_Q8_NEON */

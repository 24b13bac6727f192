/* quant_amx.c: the prefill's products of packed int8 rows on AMX tiles (Intel's Advanced
 * Matrix Extensions, AMX-INT8: Sapphire Rapids and later), where the core has them.
 *
 * An AVX-512 VNNI build (simd/simd.h: SIMD_Q8_AMX) compiles this whatever its own target,
 * and uses it only where cpu.c found the tiles at run time (simd_amx), so one binary
 * serves cores with and without them. It takes, from simd_q8_matmul_packed, whole blocks
 * of 16 rows of x by whole blocks of 16 rows of w; the rest stays with the VNNI tile.
 *
 * A tile is a 2-D register of up to 16 rows of 64 bytes. One instruction,
 * tdpbsud(C, A, B), adds to each int32 C[m][n] (16 x 16) the products of row m of A (16 x K
 * signed bytes) with column n of B, whose row k holds the four bytes k of every column n
 * side by side (K/4 x 64 unsigned bytes). These are the layouts the engine has already:
 *   A  16 rows of x, one group's K values of each: straight from xq (rows cols apart);
 *   B  one group of a block of packed w (quant.h): quad k of the block's 16 rows is 64
 *      bytes, each value + 128: the unsigned operand, as for vpdpbusd.
 * So C[m][n] = the exact dot product of the group + 128 x the sum of row m's group of x,
 * which that row's start (-128 x that sum: simd_q8_matmul_packed's starts) takes away.
 * Then the reference's float steps, a row of 16 outputs at a time, as the VNNI tile does:
 * acc + (float)dot * (x's scale * w's scale), group after group, + bias: the same bits.
 *
 * The tile's sums are stored to memory (tilestored) for those float steps; two sets of
 * tiles take groups in turn, so that a group's products run while the group before it is
 * scaled.
 *   tmm0, tmm1  C of the even and odd groups (16 x 16 int32)
 *   tmm2, tmm3  A of each (16 x K int8)
 *   tmm4, tmm5  B of each (K/4 x 64 uint8)
 * K is the group (4 .. 64), or 64 for groups of whole 64s, whose C takes group / 64
 * products in turn (int32 sums: exact in any order).
 */
#include "simd/simd.h"

#if defined(SIMD_Q8_AMX)
#include <immintrin.h>
#include <string.h>   /* memset */

#define AMX_ROWS 16   /* rows of x per tile (A's rows, C's rows) */
#define AMX_K_MAX 64  /* bytes of a tile's row */

/* The tiles' shapes, as ldtilecfg reads them (palette 1). */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];   /* bytes of a row of each tile */
    uint8_t rows[16];     /* rows of each tile */
} AmxConfig;

/* Values of a group that one product takes: K of the comment at the top. */
static int amx_k(int group) { return group <= AMX_K_MAX ? group : AMX_K_MAX; }

int simd_q8_amx_takes(const QuantMatrix *w) {
    return simd_amx() && w->group % 4 == 0 &&
           (w->group <= AMX_K_MAX || w->group % AMX_K_MAX == 0);
}

#define AMX_TARGET __attribute__((target("amx-tile,amx-int8,avx512f")))

/* The products of group g into tile TC (its operands on tiles TA, TB), stored to c[g % 4]
 * (16 x 16 int32); nothing past the last group. */
#define AMX_GROUP(TC, TA, TB, g)                                                            \
    do {                                                                                    \
        if ((g) >= groups) break;                                                           \
        _tile_zero(TC);                                                                     \
        for (int at = 0; at < group; at += K) {                                             \
            _tile_loadd(TA, x + (size_t)(g) * (size_t)group + (size_t)at, ldx);            \
            _tile_loadd(TB, wb + ((size_t)(g) * (size_t)group + (size_t)at) * 16, 64);      \
            _tile_dpbsud(TC, TA, TB);                                                       \
        }                                                                                   \
        _tile_stored(TC, c[(g) % 4], 64);                                                   \
    } while (0)

/* Row r's sum (acc##r, 16 outputs) + group g's float steps, from its int32 sums s. */
#define AMX_ROW(r)                                                                          \
    acc##r = _mm512_add_ps(                                                                 \
        acc##r,                                                                             \
        _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(                                  \
                          _mm512_load_si512(s + 16 * (r)),                                  \
                          _mm512_set1_epi32(starts[(size_t)(r) * (size_t)groups + gs]))),    \
                      _mm512_mul_ps(_mm512_set1_ps(xs[(size_t)(r) * (size_t)groups + gs]), ws_g)))
/* Group g's float steps for the 16 rows, when there is a group g. */
#define AMX_SCALE(g_)                                                                       \
    do {                                                                                    \
        int gs = (g_);                                                                      \
        if (gs >= groups) break;                                                            \
        const int32_t *s = c[gs % 4];                                                       \
        __m512 ws_g = _mm512_loadu_ps(ws + (size_t)gs * 16);                                \
        AMX_ROW(0); AMX_ROW(1); AMX_ROW(2); AMX_ROW(3); AMX_ROW(4); AMX_ROW(5);             \
        AMX_ROW(6); AMX_ROW(7); AMX_ROW(8); AMX_ROW(9); AMX_ROW(10); AMX_ROW(11);           \
        AMX_ROW(12); AMX_ROW(13); AMX_ROW(14); AMX_ROW(15);                                 \
    } while (0)
#define AMX_ACC(r) __m512 acc##r = _mm512_setzero_ps()
#define AMX_OUT(r) _mm512_storeu_ps(out + (size_t)(r) * ldo, _mm512_add_ps(acc##r, add))

/* out (16 rows, ldo apart) x 16 columns = 16 rows of x (x, ldx apart; xs, starts: (16,
 * groups)) times a block of packed w (wb, ws), + bias (16,) or + 0. Each group's products
 * are issued two groups ahead of its float steps, on four tiles in turn (C: tiles 0 .. 3;
 * A and B: tiles 4, 5 for even groups, 6, 7 for odd), so that the steps read sums stored
 * two groups before (a tile's store reaches memory only once what comes before it
 * retires) while the tiles work on the next ones. The 16 rows' sums stay in registers. */
static AMX_TARGET void amx_block(float *out, size_t ldo, const int8_t *x, size_t ldx,
                                 const float *xs, const int32_t *starts, const uint8_t *wb,
                                 const float *ws, const float *bias, int groups, int group) {
    int K = amx_k(group);
    _Alignas(64) int32_t c[4][AMX_ROWS * 16];
    AMX_ACC(0); AMX_ACC(1); AMX_ACC(2); AMX_ACC(3); AMX_ACC(4); AMX_ACC(5); AMX_ACC(6);
    AMX_ACC(7); AMX_ACC(8); AMX_ACC(9); AMX_ACC(10); AMX_ACC(11); AMX_ACC(12); AMX_ACC(13);
    AMX_ACC(14); AMX_ACC(15);
    AMX_GROUP(0, 4, 5, 0);
    AMX_GROUP(1, 6, 7, 1);
    for (int g = 0; g < groups; g += 4) {
        AMX_GROUP(2, 4, 5, g + 2);
        AMX_SCALE(g);
        AMX_GROUP(3, 6, 7, g + 3);
        AMX_SCALE(g + 1);
        AMX_GROUP(0, 4, 5, g + 4);
        AMX_SCALE(g + 2);
        AMX_GROUP(1, 6, 7, g + 5);
        AMX_SCALE(g + 3);
    }
    __m512 add = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();   /* + bias, or + 0 */
    AMX_OUT(0); AMX_OUT(1); AMX_OUT(2); AMX_OUT(3); AMX_OUT(4); AMX_OUT(5); AMX_OUT(6);
    AMX_OUT(7); AMX_OUT(8); AMX_OUT(9); AMX_OUT(10); AMX_OUT(11); AMX_OUT(12); AMX_OUT(13);
    AMX_OUT(14); AMX_OUT(15);
}

AMX_TARGET void simd_q8_amx_rows(float *out, const int8_t *xq, const float *xs,
                                 const int32_t *starts, const QuantMatrix *w, const float *bias,
                                 int N, int b0, int b1) {
    int cols = w->cols, group = w->group, groups = cols / group, OC = w->rows, K = amx_k(group);
    AmxConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 4; t++) {   /* C: 16 x 16 int32 */
        cfg.rows[t] = AMX_ROWS;
        cfg.colsb[t] = 64;
    }
    for (int t = 4; t < 8; t += 2) {
        cfg.rows[t] = AMX_ROWS;   /* A: 16 rows of K values of x */
        cfg.colsb[t] = (uint16_t)K;
        cfg.rows[t + 1] = (uint8_t)(K / 4);   /* B: K/4 quads of 16 rows of w */
        cfg.colsb[t + 1] = 64;
    }
    _tile_loadconfig(&cfg);
    /* a block of w at a time, for every block of rows of x: its 16 x cols bytes stay in L1
     * or L2 while x's rows pass */
    for (int n = 0; n + AMX_ROWS <= N; n += AMX_ROWS)
        for (int b = b0; b < b1; b++) {
            int o = b * QUANT_PACK_ROWS;
            amx_block(out + (size_t)n * (size_t)OC + (size_t)o, (size_t)OC,
                      xq + (size_t)n * (size_t)cols, (size_t)cols, xs + (size_t)n * (size_t)groups,
                      starts + (size_t)n * (size_t)groups,
                      (const uint8_t *)w->q + (size_t)o * (size_t)cols,
                      w->scale + (size_t)o * (size_t)groups, bias ? bias + o : NULL, groups, group);
        }
    _tile_release();
}

#else
/* ISO C wants a declaration in every translation unit: a build without the tiles has
 * nothing else here. */
typedef int simd_quant_amx_none;
#endif /* SIMD_Q8_AMX */

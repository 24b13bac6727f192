/* quant.h: int8 weight matrices with one fp32 scale per group, and the kernels on them.
 *
 * Symmetric per-group quantization (scale = max|x| / 127, q = round(x / scale)), its
 * inverse, and the int8 x int8 matmul of quantized activations by a quantized weight
 * matrix, with exact int32 dot products inside each group, and a weight matrix's optional
 * offsets (a minimum per group, as GGUF's K types have); the packed layout the vector
 * kernels may read instead of rows. It does not load files or thread, and allocates only
 * quant_pack's scratch: callers own every buffer and split the output columns among
 * threads themselves (each call is single-threaded and touches only its own columns).
 */
#ifndef QUANT_H
#define QUANT_H

#include <stdint.h>   /* int8_t */

#define QUANT_Q_MAX 127   /* q is clamped to [-127, 127]: -128 is never produced (see quant.c) */
/* Largest group size the kernels accept: a group's int32 dot product is at most
 * 127 * 127 * group in magnitude, which stays well below 2^31 for group <= 65536. */
#define QUANT_GROUP_MAX 65536

/* A weight matrix W (rows, cols) in int8 with one fp32 scale per group of `group`
 * consecutive values along each row: W[r, c] ~= q[r, c] * scale[r, c / group]. Each row
 * has groups_per_row = ceil(cols / group) groups; the last group of a row may be shorter
 * (so a 172-wide matrix quantizes with group 32 — unlike llama.cpp's Q8_0). All views. */
typedef struct {
    const int8_t *q;      /* (rows, cols); the first `packed` rows rearranged (below) */
    const float *scale;   /* (rows, ceil(cols / group)); likewise */
    int rows, cols, group;
    int cold;             /* 1: read from memory at each use (its model outgrows the caches):
                           * the x86 row kernel's four runs (simd/quant_x86.c: w of
                           * QUANT_STREAM_BYTES or more, groups a multiple of 32) and the
                           * packed rows' four runs for one row of x ask for its lines
                           * ahead; other kernels ignore it. Never changes a result. */
    int packed;           /* rows 0 .. packed-1 are in the packed layout (quant_pack, below);
                           * 0: all in rows */
    const float *offset;  /* NULL, or (rows, ceil(cols / group)) in rows, never packed: then
                           * W[r, c] ~= q[r, c] * scale[r, c / group] - offset[r, c / group]
                           * (GGUF's Q4_K, Q5_K, Q4_1, Q5_1: a minimum per block); at most
                           * QUANT_OFFSET_MAX_GROUPS groups a row */
} QuantMatrix;

/* The packed layout, which a build's vector kernels may read faster than rows (x86 with
 * AVX-512 VNNI: one 64-byte load then holds four values of 16 rows, and a multiply sums
 * them into 16 outputs at once, with no sums across lanes). Rows in blocks of
 * QUANT_PACK_ROWS; a block keeps the bytes and scales its rows had, rearranged:
 *   q      quad k (values 4k .. 4k+3) of the block's 16 rows side by side, quad after
 *          quad: byte (k, r, i) at k * 64 + r * 4 + i holds q[r, 4k + i] + 128, as an
 *          unsigned byte (q ^ 0x80: the operand the x86 multiply takes unsigned);
 *   scale  group g of the 16 rows side by side: scale[g * 16 + r].
 * A view of a packed matrix from a row that is a multiple of 16 is packed likewise. */
#define QUANT_PACK_ROWS 16
#define QUANT_OFFSET_LANES 8   /* the offsets' sums: 8 partial sums, added in a fixed order */
#define QUANT_OFFSET_MAX_GROUPS 4096   /* the most groups a row with offsets may have */

/* Groups per row: ceil(cols / group). cols >= 0, 1 <= group <= QUANT_GROUP_MAX. */
int quant_groups(int cols, int group);

/* Quantize x (rows, cols) into q (rows, cols) and scale (rows, quant_groups(cols, group)),
 * all caller-owned: per group, scale = max|x| / 127 and q = round-half-away(x / scale)
 * clamped to [-127, 127]. An all-zero group (or one whose scale underflows to 0) gets
 * scale 0 and q 0; a group holding NaN or +-inf gets scale NaN and q 0. */
void quant_quantize(int8_t *q, float *scale, const float *x, int rows, int cols, int group);

/* One row x (cols,) quantized as llama2.c's export.py writes a weight file: quant_quantize's
 * scales and values, except that a value halfway between two integers rounds to the even
 * one (torch.round), where activations round halves away (llama2.c's runq: round()). */
void quant_quantize_weights(int8_t *q, float *scale, const float *x, int cols, int group);

/* The rows of m that this build packs: its whole blocks of QUANT_PACK_ROWS where its vector
 * kernels read the packed layout, m's groups are whole quads (a multiple of 4 values: 32
 * in Q8_0 and quantize's files, 64 in llama2.c's) that fill its rows exactly, and its rows
 * are at most QUANT_GROUP_MAX values; else 0. */
int quant_pack_rows(const QuantMatrix *m);

/* Rearranges rows 0 .. quant_pack_rows(m)-1 of m's q and scale, which must be writable
 * (the caller's own memory), into the packed layout, in place, and sets m->packed (a
 * matrix packed already stays as it is). Returns 0, or -1 out of memory (m unchanged). */
int quant_pack(QuantMatrix *m);

/* out (cols,) = row `row` of m dequantized to fp32 (q * scale, less the offset if m has
 * them); out is caller-owned. */
void quant_dequantize_row(float *out, const QuantMatrix *m, int row);

/* out (rows, cols) = all of m dequantized to fp32; out is caller-owned. */
void quant_dequantize(float *out, const QuantMatrix *m);

/* Columns o0 .. o1-1 of out (N, OC = w->rows), all N rows, = x · Wᵀ + bias, where
 * x (N, cols) is given quantized as xq (N, cols) and xs (N, quant_groups(cols, group))
 * by quant_quantize with w's group, and bias (OC,) may be NULL. With offsets, each output
 * then loses sum over g of offset[o, g] * (xs[g] * the sum of group g's xq), in steps of
 * QUANT_OFFSET_LANES groups (quant.c: offset_sum). 0 <= o0 <= o1 <= OC;
 * other columns of out are not touched. Every q (xq and w->q) must be in [-127, 127].
 * Each output's bits depend only on its rows of x and W and the build, not on o0, o1, N:
 * several rows at once (prefill, through the GEMM's register tile where the build has
 * one) give each row the bits it gets alone (decode). */
void quant_matmul_block(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1);

/* The prefill GEMM's register tile in this build for matrices in rows: *rows rows of x by
 * *cols rows of w (output columns); 0 x 0 where it has none (builds without AVX2 or NEON).
 * (Packed rows go to the build's packed kernel whatever N: simd/simd.h.)
 * quant_matmul_block takes whole tiles of it when N >= *rows and the tile takes w (x86:
 * widths and groups that are multiples of 4, groups of at most 4,096 values, and then
 * every row, the last block of rows padded; NEON: groups and widths that are multiples
 * of 16), the rows and columns left over, and other matrices, one row at a time. */
void quant_gemm_tile(int *rows, int *cols);

/* The matmul kernel this build uses: "avx512-vnni", "avx-vnni" or "avx2" for groups that
 * are a multiple of 32 and groups of 16 in widths of a multiple of 32 (the x86 prefill
 * tile takes any group that is a multiple of 4;
 * "avx512-vnni" also reads packed rows, quant_pack_rows),
 * "neon-dotprod" or "neon" for groups and widths that are multiples of 16, else "portable"
 * (other groups go one row at a time by the portable path). Every
 * kernel gives every output the reference's bits (quant.c's dot_row_reference: per group
 * the exact int32 dot product, acc += (float)dot * (x's scale * w's scale), group after
 * group, then + bias). */
const char *quant_kernel_name(void);

#endif /* QUANT_H */

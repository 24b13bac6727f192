/* simd.h: the fence between the reference kernels and the instruction sets.
 *
 * kernels.c, quant.c and trainer/train_kernels.c hold the reference kernels in plain C and
 * call the fast paths only by the names below (simd_*). This header picks, at compile time,
 * what each name is: the vector kernel of this build's instruction set (defined in this
 * folder), or, where the build has none, the reference kernel itself (a macro naming it),
 * or "nothing done" (0) for the kernels whose vector part stops at the last whole vector.
 * Adding an instruction set is adding its files here and its lines below; the files at the
 * top never change for it. Like ggml's arch-fallback.h, this is the one place that maps a
 * kernel to its version: a reader of the reference kernels can stop at this file.
 *
 * The files here:
 *   vec.h           the float vocabulary (Vec, V8 and their operations), one section per
 *                   instruction set: AVX2 + FMA, AVX-512, NEON
 *   vec_kernels.c   the float kernels (engine's and trainer's), written once in vec.h
 *   quant_x86.c     the int8 kernels for AVX2 (with AVX-512 VNNI or AVX-VNNI where built)
 *   quant_neon.c    the int8 kernels for NEON (AArch64): the row path and the prefill tile
 *   cpu.c           what is read from the core at run time (simd_prefetch_rows, _packed)
 *   wasm_kernels.c  WebAssembly SIMD128 (the page, web/): the reference's matrix-vector
 *                   and attention dot products in 4-lane vectors, with the reference's bits
 *
 * Between vector builds: a NEON build gives an AVX2 build's bits but in the trainer's
 * LayerNorm backward; AVX-512 builds give them too, except there and in blocks of 8 to 15
 * rows (its broadcast tile starts at 16).
 *
 * Legend: N rows of x, IC input width, OC output width, C width.
 */
#ifndef SIMD_H
#define SIMD_H

#include <float.h>     /* FLT_EVAL_METHOD */
#include <stddef.h>    /* size_t */
#include <stdint.h>    /* int8_t, uint16_t, int32_t, uint32_t, uint64_t */
#include "kernels.h"   /* KernelsAdamW */
#include "quant.h"     /* QuantMatrix */

/* ---- which instruction set: float kernels ---- */

/* The vector lanes round every operation to float, which scalar C does only where floats
 * are evaluated as floats (FLT_EVAL_METHOD 0). On x87 (32-bit x86 unless built with -msse2
 * -mfpmath=sse) scalar code keeps extra precision, and the lanes would not give the bits of
 * the scalar loops they must equal (exp, GELU, AdamW): such a build uses the reference. */
#if defined(__AVX2__) && defined(__FMA__) && FLT_EVAL_METHOD == 0
#define SIMD_VECTOR 1          /* the AVX2 + FMA (and AVX-512) float kernels are compiled in */
#if defined(__AVX512F__)
#define SIMD_ISA "avx512"
#define SIMD_TILE_MR 6         /* the trainer's register tile: rows of C ... */
#define SIMD_TILE_COLS 64      /* ... by columns (4 vectors of 16) */
#else
#define SIMD_ISA "avx2+fma"
#define SIMD_TILE_MR 6
#define SIMD_TILE_COLS 16      /* 2 vectors of 8 */
#endif
#elif defined(__ARM_NEON) && defined(__aarch64__) && FLT_EVAL_METHOD == 0
#define SIMD_VECTOR 1          /* the NEON float kernels (AArch64: FMA, division and square
                                * root on vectors) */
#define SIMD_ISA "neon"
#define SIMD_TILE_MR 6
#define SIMD_TILE_COLS 16      /* 4 vectors of 4 */
#else
#define SIMD_VECTOR 0          /* the reference kernels only */
#define SIMD_ISA "portable"
#define SIMD_TILE_MR 4         /* the shape of the trainer's jobs (the reference computes
                                * each entry alone, whatever the tile) */
#define SIMD_TILE_COLS 64
#endif

/* ---- constants the vector kernels share with the references ---- */

#define SIMD_TILE_KB 128   /* the trainer's products: values of k per cache block (the
                            * vector tile's panel of B holds this many rows) */

#define LANES 8            /* lanes of the dot-product sums, in every build */

/* IN_REGISTER(v) keeps the x86 vector v in a register: gcc 12 otherwise folds a loaded
 * value into each FMA that reads it, loading it again for every one (attention's tiles were
 * then bound by their loads), and copies the int8 GEMM tile's lanes to other registers and
 * back at every quad (two moves per multiply). Elsewhere nothing (NEON's V8 is a pair of
 * registers, which no asm operand names). */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#define IN_REGISTER(v) ((void)0)
#endif
#define GELU_SQRT_2_OVER_PI 0.7978845608028654f  /* sqrt(2 / pi) in GELU's tanh form */
#define GELU_CUBIC 0.044715f                      /* coefficient of x^3 in GELU's tanh form */
#define EXP_LOG2E 1.44269504088896341f   /* 1 / ln 2 */
#define EXP_LN2_HI 0.693359375f          /* ln 2 split in two: the high part has few bits, */
#define EXP_LN2_LO -2.12194440e-4f       /* so k * hi is exact for |k| < 2^9 (Cody-Waite) */
#define EXP_ROUND 12582912.0f            /* 1.5 * 2^23: adding it rounds to an integer */
#define EXP_X_MIN -104.0f                /* exp(-104) rounds to 0 in float */
#define EXP_X_MAX 89.0f                  /* exp(89) overflows to +inf in float */

/* ---- the float kernels (vec_kernels.c), or the reference's ---- */
/* rows whose sums of squares simd_sum_squares forms at once (side by side in eight lanes) */
#define SIMD_SUM_SQUARES_ROWS 8

/* Rows of x per job of parallel/products.c's products of many rows: 64 x IC floats stay
 * in L2; the GEMM over halves packs them all at once. */
#define SIMD_JOB_ROWS 64

/* ---- the core the build runs on (cpu.c, in every build) ---- */

/* 1 where decode asks for the lines of a matrix read from memory ahead of its reads
 * (software prefetch: simd_matmul_block's and simd_matmul_row_half's rows, and an int8 w
 * marked cold, in rows), 0 where it leaves them to the hardware's prefetchers: the hints pay
 * on AMD family 26 (Zen 5) and on an Intel Xeon, and cost decode a fifth of its speed on
 * family 25 (Zen 4) (docs/performance.md, Where the speed comes from).
 * simd_prefetch_packed: the same for an int8 w packed by sixteen (quant_x86.c's four
 * runs): 1 on Intel only, where they pay; on Zen 5 they cost a thread 6-15 %. Both read
 * from CPUID at the first call. simd_set_prefetch(1 or 0) overrides the core's choice for
 * both (the tests run every path); -1 goes back to it. */
int simd_prefetch_rows(void);
int simd_prefetch_packed(void);
void simd_set_prefetch(int on);

/* The product's reference (kernels.c), what a build without vector kernels calls. */
void matmul_block_reference(float *out, const float *x, const float *w, const float *b,
                            int n0, int n1, int o0, int o1, int IC, int OC);

#if SIMD_VECTOR
/* kernels.c's matmul_block_reference: out[n0 .. n1, o0 .. o1) of out (N, OC) = x . w^T + b,
 * each output an 8-lane FMA dot product reduced in a fixed order (v8_sum); one row against
 * a large w reads it as four sequential runs of rows. */
void simd_matmul_block(float *out, const float *x, const float *w, const float *b, int n0,
                       int n1, int o0, int o1, int IC, int OC);
/* The same block by the broadcast (GEMM) tile: each output one lane's FMA chain over i in
 * increasing order, for products of N >= simd_gemm_min_rows() rows. */
void simd_gemm_block(float *out, const float *x, const float *w, const float *b, int n0,
                     int n1, int o0, int o1, int IC, int OC);
/* simd_gemm_block over w's values as halves: the same bits as over them as floats; and
 * simd_matmul_block's one row of x (out (OC,), rows o0 .. o1-1), likewise. */
void simd_gemm_block_half(float *out, const float *x, const uint16_t *w, const float *b,
                          int n0, int n1, int o0, int o1, int IC, int OC);
void simd_matmul_row_half(float *out, const float *x, const uint16_t *w, const float *b,
                          int o0, int o1, int IC, int OC);
/* The output columns per job of the GEMM for a product of N rows and OC columns cut into
 * about `blocks` blocks of columns, or 0 when N is under simd_gemm_min_rows() (the
 * dot-product tile is faster there). */
int simd_gemm_cols(int N, int OC, int blocks);
int simd_gemm_min_rows(void);
void simd_norm_stats(const float *x_n, int C, float *mean, float *rstd);
/* ss (8,) = sum_squares_reference's sums of SIMD_SUM_SQUARES_ROWS rows, bit for bit */
void simd_sum_squares(float *ss, const float *x, int C);
/* These do the whole vectors of their n values and return how many they did; the
 * reference does the rest, with the same bits. */
size_t simd_gelu(float *out, const float *x, size_t n);
size_t simd_swiglu(float *out, const float *hidden, const float *gate, size_t n);
size_t simd_gelu_backward(float *dx, const float *x, const float *dout, size_t n);
size_t simd_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                  const KernelsAdamW *h);
size_t simd_to_half(uint16_t *out, const float *x, size_t n);
size_t simd_from_half(float *out, const uint16_t *h, size_t n);
/* attention's loops: kernels.h's contracts */
float simd_dot(const float *a, const float *b, int n);
void simd_dots(float *out, const float *q, const float *k, int stride, const int32_t *rows,
               int n_rows, int n);
float simd_max(const float *x, int n, float init);
float simd_exp_sum(float *x, int n, float shift);
void simd_weighted_sum(float *out, const float *weights, float scale, const float *v,
                       int stride, const int32_t *rows, int n_rows, int n);
void simd_dots_half(float *out, const float *q, const uint16_t *k, int n_rows, int n);
void simd_weighted_sum_half(float *out, const float *weights, float scale, const uint16_t *v,
                            int n_rows, int n);
void simd_dots_causal(float *out, int ld, const float *q, int q_stride, int n_q,
                      const float *k, int stride, int n_first, int n);
void simd_weighted_sums_causal(float *out, int out_stride, float *weights, int ld,
                               const float *scales, int n_q, const float *v, int stride,
                               int n_first, int n, const float *ahead);
/* the trainer's (train_kernels.c's references) */
void simd_product_chains(float *c, int ldc, const float *a, long a_k, long a_m,
                         const float *b, int ldb, int kb, int zero, const float *bias, int m0,
                         int m1, int j0, int j1);
void simd_column_sums(float *db, const float *dout, int N, int OC, int o0, int o1);
void simd_layernorm_dx_row(float *dx_n, const float *x_n, const float *dout_n,
                           const float *w, int C, float m, float r);
void simd_dropout(float *out, const float *x, size_t n, uint64_t key, uint32_t threshold,
                  float keep_scale);
/* dst = src^T for one whole 32 x 32 block (rows ld_src floats apart in src, ld_dst in
 * dst); returns 1 (done). */
int simd_transpose32(float *dst, int ld_dst, const float *src, int ld_src);
#else
#if defined(__wasm_simd128__)   /* the page's build (web/): wasm_kernels.c, the same bits */
void simd_wasm_matmul_block(float *out, const float *x, const float *w, const float *b, int n0,
                            int n1, int o0, int o1, int IC, int OC);
void simd_wasm_dots(float *out, const float *q, const float *k, int stride,
                    const int32_t *rows, int n_rows, int n);
#define simd_matmul_block simd_wasm_matmul_block
#define simd_dots simd_wasm_dots
#else
#define simd_matmul_block matmul_block_reference
#define simd_dots dots_reference
#endif
#define simd_gemm_block matmul_block_reference   /* never chosen: simd_gemm_cols is 0 */
#define simd_gemm_block_half(...) ((void)0)       /* likewise */
#define simd_matmul_row_half(out, ...) ((void)(out))   /* never chosen: SIMD_VECTOR is 0 */
#define simd_gemm_cols(N, OC, blocks) ((void)(N), (void)(OC), (void)(blocks), 0)
#define simd_gemm_min_rows() 0
#define simd_norm_stats norm_stats_reference
#define simd_sum_squares(ss, x, C) sum_squares_reference(ss, x, SIMD_SUM_SQUARES_ROWS, C)
#define simd_gelu(out, x, n) ((size_t)0)
#define simd_swiglu(out, hidden, gate, n) ((size_t)0)
#define simd_gelu_backward(dx, x, dout, n) ((size_t)0)
#define simd_adamw(param, grad, m, v, n, h) ((size_t)0)
#define simd_to_half(out, x, n) ((size_t)0)
#define simd_from_half(out, h, n) ((size_t)0)
#define simd_dot dot_reference
#define simd_max max_reference
#define simd_exp_sum exp_sum_reference
#define simd_weighted_sum weighted_sum_reference
#define simd_dots_half dots_half_reference
#define simd_weighted_sum_half weighted_sum_half_reference
#define simd_dots_causal dots_causal_each
#define simd_weighted_sums_causal weighted_sums_causal_each
#define simd_product_chains product_chains_reference
#define simd_column_sums column_sums_reference
#define simd_layernorm_dx_row layernorm_dx_row_reference
#define simd_dropout dropout_reference
#define simd_transpose32(dst, ld_dst, src, ld_src) 0
#endif

/* ---- which instruction set: int8 kernels (quant_x86.c, quant_neon.c) ---- */
/* AVX2 suffices (integer lanes; no FMA: every path follows the reference's float steps),
 * where floats are evaluated as floats (FLT_EVAL_METHOD 0): on x87 the reference's float
 * steps keep extra precision that the lanes would not, as for the float kernels above. */
#if defined(__AVX2__) && FLT_EVAL_METHOD == 0
#define SIMD_Q8_X86 1
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define SIMD_Q8_NAME "avx512-vnni"
#elif defined(__AVXVNNI__)
#define SIMD_Q8_NAME "avx-vnni"
#else
#define SIMD_Q8_NAME "avx2"
#endif
/* The prefill tile (quant_x86.c): a register's lanes are rows of x, each lane a whole
 * group's int32 dot product, so that the float steps, a register of rows at a time, are the
 * reference's and give its bits. It takes any number of rows (SIMD_Q8_GEMM_ANY_ROWS: it
 * pads its last block of rows), and is used from SIMD_Q8_GEMM_MIN_ROWS rows up: half a
 * register's rows, where it overtakes the row path (measured on Zen 4). */
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define SIMD_Q8_GEMM_ROWS 16   /* rows of x in a register's lanes ... */
#else
#define SIMD_Q8_GEMM_ROWS 8
#endif
#define SIMD_Q8_GEMM_COLS 4    /* ... by rows of w (output columns) */
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define SIMD_Q8_PACKED 1       /* products of packed rows (quant.h's layout) */
#endif
#define SIMD_Q8_GEMM_MIN_ROWS (SIMD_Q8_GEMM_ROWS / 2)
#define SIMD_Q8_GEMM_ANY_ROWS 1
#elif defined(__ARM_NEON) && defined(__aarch64__)
#define SIMD_Q8_NEON 1
#if defined(__ARM_FEATURE_DOTPROD)
#define SIMD_Q8_NAME "neon-dotprod"
#else
#define SIMD_Q8_NAME "neon"
#endif
#define SIMD_Q8_GEMM_ROWS 4
#define SIMD_Q8_GEMM_COLS 4
#define SIMD_Q8_GEMM_MIN_ROWS 4   /* whole tiles of rows */
#else
#define SIMD_Q8_NAME "portable"
#define SIMD_Q8_GEMM_ROWS 0       /* no prefill tile */
#define SIMD_Q8_GEMM_COLS 0
#define SIMD_Q8_GEMM_MIN_ROWS 0
#endif

#if defined(SIMD_Q8_X86)
/* quant_quantize of one row x (cols,) into q (cols,) and scale (groups,), bit for bit,
 * from its first group while groups fill whole vector registers; returns how many groups
 * it did (quant.c does the rest). */
int simd_q8_quantize(int8_t *q, float *scale, const float *x, int cols, int group);
#else
#define simd_q8_quantize(q, scale, x, cols, group) 0
#endif
#if defined(SIMD_Q8_X86) || defined(SIMD_Q8_NEON)
/* quant_matmul_block's columns o0 .. one row of x at a time, for groups that are a
 * multiple of 32 or groups of 16 in widths of a multiple of 32 (x86), or groups and widths
 * that are multiples of 16 (NEON); returns the
 * first column it did not do (o0 for other matrices). */
int simd_q8_matmul_rows(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1);
#else
#define simd_q8_matmul_rows(out, xq, xs, w, bias, N, o0, o1) (o0)
#endif
#if defined(SIMD_Q8_X86) || defined(SIMD_Q8_NEON)
/* Whether the prefill tile takes w; and its whole tiles over rows 0 .. N-1 and columns
 * o0 .. o1-1 (o1 - o0 a multiple of SIMD_Q8_GEMM_COLS; N a multiple of SIMD_Q8_GEMM_ROWS,
 * or any N with SIMD_Q8_GEMM_ANY_ROWS), each output with the bits the row path gives it. */
int simd_q8_gemm_takes(const QuantMatrix *w);
void simd_q8_gemm_tiles(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1);
#else
#define simd_q8_gemm_takes(w) 0
#define simd_q8_gemm_tiles matmul_rows   /* never chosen: simd_q8_gemm_takes is 0 */
#endif

#if defined(SIMD_Q8_X86)
/* quant_matmul_block's offsets (quant.c: subtract_offsets) for one row of x, columns
 * o0 .. in whole tiles of 8: out[o] -= the sum over g of w->offset[o, g] * v[g] (v
 * (groups,)), in the reference's lanes and order, eight outputs at a time (its bits);
 * returns the first column it did not do. */
int simd_q8_subtract_offsets(float *out, const float *v, const QuantMatrix *w, int o0, int o1);
#else
#define simd_q8_subtract_offsets(out, v, w, o0, o1) (o0)
#endif

#if defined(SIMD_Q8_PACKED)
/* quant_matmul_block's columns o0 .. o1-1 (o1 <= w->packed: rows of w in the packed
 * layout), every row of x: a register's lanes are 16 rows of w, so each lane sums one
 * output's group whole and the reference's float steps follow, 16 outputs at a time (its
 * bits). */
void simd_q8_matmul_packed(float *out, const int8_t *xq, const float *xs, const QuantMatrix *w,
                           const float *bias, int N, int o0, int o1);
#else
#define simd_q8_matmul_packed(out, xq, xs, w, bias, N, o0, o1) ((void)0)   /* never packed */
#endif

/* ---- the thread pool's spin-wait hint (parallel/pool.c) ---- */
#if SIMD_VECTOR && defined(__AVX2__)
#include <immintrin.h>
#define simd_pause() _mm_pause()
#elif SIMD_VECTOR && defined(__ARM_NEON)
#define simd_pause() __asm__ __volatile__("yield")
#else
#define simd_pause() ((void)0)
#endif

#endif /* SIMD_H */

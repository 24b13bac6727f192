/* kernels.h: the numeric kernels of the forward and backward passes, each with the naive
 * reference the tests hold it to.
 *
 * Matrix products (fp32, IEEE halves, and int8 through quant.h), LayerNorm, RMSNorm, GELU
 * and SwiGLU, attention's loops, and the calls that split work across threads (kernels.c hands a
 * product to parallel/products.c, which cuts it into jobs, and a loop to the thread pool
 * of parallel/pool.c); then what the trainer adds
 * (its forward and backward products on one register tile, the LayerNorm and GELU
 * backward, AdamW, dropout: trainer/train_kernels.c). Every kernel is written in plain C;
 * fast paths use AVX-512, AVX2 + FMA or NEON (AArch64) intrinsics when the build targets
 * them, behind simd/simd.h (kernels_isa names the one built).
 * Results are bitwise identical for any thread count: each output is computed by one
 * thread, in an order that depends only on the shapes. They are not bitwise equal between
 * the SIMD and the portable paths (FMA rounds once, the portable path twice); tests bound
 * the difference against float64 references (simd/simd.h: which vector builds agree).
 *
 * Legend: N rows of activations, IC input width, OC output width, C width.
 */
#ifndef KERNELS_H
#define KERNELS_H

#include <stddef.h>   /* size_t */
#include <stdint.h>   /* int8_t, int32_t, uint16_t */
#include "quant.h"    /* QuantMatrix */

#define KERNELS_NORM_EPS 1e-5f   /* LayerNorm's (GPT-2) and RMSNorm's (Llama) epsilon but a
                                  * GGUF file's own (Config.norm_eps) */

/* A weight matrix W (OC, IC) as the forward pass uses it: fp32, IEEE halves, or int8 with
 * group scales. At most one of f32, f16 and q8.q is non-NULL (none: a matrix the model
 * has not, such as GPT-2's w_gate). Views: the model owns the memory. */
typedef struct {
    const float *f32;     /* (OC, IC) fp32 weights, or NULL */
    const float *f32_t;   /* (IC, OC) the same weights transposed, or NULL: the trainer
                           * makes them once per step for kernels_matmul_wt */
    const uint16_t *f16;  /* (OC, IC) halves (a GGUF F16 file's), or NULL */
    QuantMatrix q8;       /* int8 weights and scales, or q8.q NULL */
} Matrix;

/* ---- threads ---- */

/* Sets the number of threads the kernels (and attention) may use, 1 .. the cores
 * available, from the next kernels_run (or OpenMP loop) on. Returns the number that will
 * be used. Until then it is OMP_NUM_THREADS, or every core (without OpenMP: at most a
 * cgroup's CPU quota, os_quota_cpus); without OpenMP parallel/pool.c reads them as
 * OpenMP's runtime would (an invalid OMP_NUM_THREADS is reported on stderr and ignored). */
int kernels_set_threads(int n);

/* Caps the threads the environment asks for (OMP_NUM_THREADS) at the cores available:
 * more only wait for each other, and tens of thousands cannot even be started; where it
 * asks for no count, lowers OpenMP's default (every core) to a cgroup's CPU quota, as the
 * build without OpenMP does by itself. Returns the number asked for when it capped it
 * (for the program to say so), -1 where a build without OpenMP found OMP_NUM_THREADS no
 * count and ignored it (OpenMP's runtime says so itself), else 0. */
int kernels_cap_threads(void);

/* The number of threads kernels_run will use. */
int kernels_threads(void);

/* The jobs that cover n items per_job at a time (the count kernels_parallel_for takes),
 * and the items [*start, *end) of job j among them: how every row-wise and elementwise
 * loop cuts its work, by the shapes alone, so any thread count computes the same bits. */
int kernels_jobs(size_t n, size_t per_job);
void kernels_job_range(size_t *start, size_t *end, int j, size_t n, size_t per_job);

/* Runs body(ctx) on the calling thread with the other threads waiting as a pool: the
 * matmuls body makes hand their jobs to the pool instead of starting threads each time,
 * and the caller never waits for a thread that has not taken a job (another process on
 * its core cannot hold it up). The pool is an OpenMP parallel region, or without OpenMP
 * kernels_threads() - 1 POSIX threads started for body's duration. With one thread, or
 * called from inside body or a job, just calls body. */
void kernels_run(void (*body)(void *ctx), void *ctx);

/* ---- matrix products ---- */

/* out (N, OC) = x (N, IC) . w (OC, IC)^T + b (OC,); b may be NULL. The output is cut into
 * blocks that threads take dynamically. Few rows (decode): each output is a dot product
 * in eight partial sums (lane i takes inputs i, i + 8, ...), reduced in a fixed order.
 * Many rows (prefill, N >= kernels_gemm_min_rows() in a vector build): each output is one
 * sum in input order (a register-tiled GEMM). A vector build fuses each multiply-add
 * (FMA), the portable one rounds twice. Bits depend only on the shapes and the build,
 * never on the thread count. */
void kernels_matmul(float *out, const float *x, const float *w, const float *b,
                    int N, int IC, int OC);

/* The same product with an int8 matrix: x is quantized per group of w->group values
 * into xq (N, IC) and xs (N, quant_groups(IC, group)) (caller's scratch), then each
 * group's exact integer dot product is scaled and summed (quant.c). */
void kernels_matmul_q8(float *out, const float *x, const QuantMatrix *w, const float *b,
                       int N, int8_t *xq, float *xs);

/* One of several products of the same x (N, IC): out (N, OC) = x . w^T + b, w fp32 (f32),
 * halves (f16: the bits of the product over the matrix widened to floats) or int8 (q8),
 * b (OC,) or NULL. */
typedef struct {
    float *out;
    const Matrix *w;
    const float *b;
    int OC;
} KernelsProduct;

#define KERNELS_MAX_PRODUCTS 4   /* products of one parallel loop in kernels_matmuls */
#define KERNELS_HALF_MAX_IC 65536   /* the widest rows (IC) of a matrix of halves */

/* The n products p of one x (N >= 1 rows of IC), as if each were its own kernels_matmul or
 * kernels_matmul_q8 (the same bits), but with one wait for the threads where several
 * follow in one format: consecutive products in fp32, in halves, or in int8 with the same
 * groups (x quantized once into xq (N, IC) and xs (N, quant_groups(IC, group)), the
 * caller's scratch, NULL if no product is int8), are one parallel loop over all their
 * jobs (W_Q, W_K and W_V; the MLP's up and gate). For one row of x (decode) their
 * matrices are cut as one matrix of their rows stacked: each thread reads one run of rows.
 * Every matrix has IC columns (int8: q8.cols == IC; halves: IC <= KERNELS_HALF_MAX_IC). */
void kernels_matmuls(const KernelsProduct *p, int n, const float *x, int N, int IC,
                     int8_t *xq, float *xs);

/* Blocks of at least this many rows go through the broadcast (GEMM) tile, whose sums run
 * in another order than the dot-product tile's; 0 if the build has no such path. */
int kernels_gemm_min_rows(void);

/* The instruction set the kernels were built for: "avx512", "avx2+fma", "neon" or
 * "portable". */
const char *kernels_isa(void);

/* ---- normalisation and activations ---- */

/* mean and rstd = 1 / sqrt(var + eps) of the row x_n (C,), as kernels_layernorm (and the
 * trainer's backward) compute them. */
void kernels_norm_stats(const float *x_n, int C, float *mean, float *rstd);

/* out (N, C) = (x - mean) / sqrt(var + eps) * w + b over each row of x (N, C). */
void kernels_layernorm(float *out, const float *x, const float *w, const float *b, int N, int C);

/* out (N, C) = x / sqrt(mean(x^2) + eps) * w over each row of x (N, C). */
void kernels_rmsnorm(float *out, const float *x, const float *w, int N, int C, float eps);

/* out (n,) = GELU(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), with a
 * vectorisable exp (kernels_expf); within 2e-7 relative of the float64 formula. out may be
 * x (in place). */
void kernels_gelu(float *out, const float *x, size_t n);

/* out (n,) = SiLU(hidden) * gate, SiLU(v) = v / (1 + exp(-v)); out may be hidden. */
void kernels_swiglu(float *out, const float *hidden, const float *gate, size_t n);

/* exp(x) in float: within 2 ulp where exp(x) is a normal float (x >= -87.33), within 2^-149
 * where it is subnormal (down to x = -103.97; 0 below), +inf for x > 88.72284, NaN for NaN;
 * written so that a loop over it vectorises (no libm call). */
float kernels_expf(float x);

/* 1 if every value of x (n,) is finite (no NaN, no infinity), else 0. */
int kernels_all_finite(const float *x, size_t n);

/* ---- half precision (the KV cache's option, GGUF's rounding) ---- */

/* out (n,) = x (n,) as IEEE binary16 bit patterns (1 sign, 5 exponent, 10 fraction bits),
 * rounded to nearest, ties to even: |x| >= 65520 gives infinity, |x| < 2^-14 a subnormal
 * (steps of 2^-24, |x| <= 2^-25 gives a signed zero), a NaN a quiet NaN keeping the top 9
 * bits of its payload (what x86's F16C and AArch64's conversions give). */
void kernels_to_half(uint16_t *out, const float *x, size_t n);

/* out (n,) = the binary16 values h (n,) as floats, exactly (a signalling NaN comes back
 * quiet). */
void kernels_from_half(float *out, const uint16_t *h, size_t n);

/* ---- vector helpers (attention) ---- */

/* a (n,) . b (n,): eight partial sums (lane i % 8), summed in a fixed order: the
 * halving order of a vector's lanes, not the products' (kernels.c: lanes_sum). */
float kernels_dot(const float *a, const float *b, int n);

/* out (n_rows,) = q (n,) . row r of k, for the rows listed in rows (NULL: 0 .. n_rows-1),
 * each row n floats at k + row * stride; kernels_dot's arithmetic. */
void kernels_dots(float *out, const float *q, const float *k, int stride, const int32_t *rows,
                  int n_rows, int n);

/* out (n,) = sum over r of (weights[r] * scale) * row r of v, rows as in kernels_dots,
 * accumulated in row order. */
void kernels_weighted_sum(float *out, const float *weights, float scale, const float *v,
                          int stride, const int32_t *rows, int n_rows, int n);

/* kernels_dots and kernels_weighted_sum over rows 0 .. n_rows-1 of halves (n_rows, n) (a
 * KV cache kept in halves): each value read as kernels_from_half gives it, so the bits of
 * those kernels over the converted rows, with no copy of them. */
void kernels_dots_half(float *out, const float *q, const uint16_t *k, int n_rows, int n);
void kernels_weighted_sum_half(float *out, const float *weights, float scale,
                               const uint16_t *v, int n_rows, int n);

/* n_q queries in a row against causal prefixes of the same rows: query t (n,) at
 * q + t q_stride reads rows 0 .. n_first + t - 1 of k (n floats each, stride apart), and
 * out[t ld + r] = its dot with row r, as kernels_dots gives it (the same bits); each row is
 * read once for all the queries that see it. */
void kernels_dots_causal(float *out, int ld, const float *q, int q_stride, int n_q,
                         const float *k, int stride, int n_first, int n);

/* Query t of n_q: out (n,) at out + t out_stride = kernels_weighted_sum of the weights at
 * weights + t ld, scale scales[t], over rows 0 .. n_first + t - 1 of v (the same bits);
 * each row is read once for all the queries that see it. The weights are scratch: they
 * may be left scaled. ahead: NULL, or rows laid out as v's that the caller reads next
 * (decode: the next head's keys); a call of one query asks for them from memory as it
 * reads v's, so that they come from the caches. No result depends on ahead. */
void kernels_weighted_sums_causal(float *out, int out_stride, float *weights, int ld,
                                  const float *scales, int n_q, const float *v, int stride,
                                  int n_first, int n, const float *ahead);

/* The largest of init and the values of x (n,), by x > max comparisons (a NaN value is
 * never the largest; with init NaN the result is NaN). Of +0 and -0 either may be
 * returned. */
float kernels_max(const float *x, int n, float init);

/* The index of the largest value of x (n,), the first on ties: what the scan best = 0,
 * then best = i wherever x[i] > x[best], in order, ends at; so a NaN never wins, and with
 * x[0] NaN (or n < 2) the index is 0. */
int kernels_argmax(const float *x, int n);

/* x (n,) = exp(x - shift) (kernels_expf), in place; returns the sum of the new x. */
float kernels_exp_sum(float *x, int n, float shift);

/* Runs job(ctx, j) for j = 0 .. n_jobs-1, each writing only its own outputs: on the pool
 * inside kernels_run when work >= POOL_MIN_WORK (parallel/pool.h) and n_jobs is 2 .. 65535
 * (more jobs run there on the calling thread), as an OpenMP loop outside it when
 * work >= POOL_PARALLEL_MIN_MACS (in OpenMP builds), else on the calling thread alone.
 * work counts multiply-adds or the like, as a double: an estimate whose products of three
 * or four sizes overflow a 32-bit long, never a double. Called from inside a job (a job
 * that starts a loop of its own, on any thread), it runs that loop on the calling thread
 * alone. */
void kernels_parallel_for(void (*job)(void *ctx, int j), void *ctx, int n_jobs, double work);

/* ---- the trainer's kernels (trainer/train_kernels.c) ---- */

/* The trainer's forward product with the weights transposed in advance: out (N, OC) =
 * x (N, IC) . wt (IC, OC) + b (OC,) (b may be NULL), on a register tile of several rows
 * of x by several vectors of wt's row. Each output is one FMA chain over i in increasing
 * order from 0, then + b: the bits of kernels_matmul's broadcast path (N >=
 * kernels_gemm_min_rows(), IC <= 1024) and never dependent on the thread count. */
void kernels_matmul_wt(float *out, const float *x, const float *wt, const float *b,
                       int N, int IC, int OC);

/* How a kernel writes an output: added to what is there, or in place of it. */
typedef enum { KERNELS_ACCUMULATE, KERNELS_OVERWRITE } KernelsWrite;

/* C (M, NC) (+)= A . B on the calling thread alone, for small products inside a job
 * (attention's backward): A(k, m) = a[k * a_k + m * a_m] for k < K, B (K, NC) rows ldb
 * floats apart, C rows ldc apart. Each C[m][j] is one FMA chain over k in increasing order
 * from its old value (KERNELS_ACCUMULATE) or from 0 (KERNELS_OVERWRITE), on
 * kernels_matmul_wt's register tile. */
void kernels_product(float *c, int ldc, const float *a, long a_k, long a_m, const float *b,
                     int ldb, int M, int NC, int K, KernelsWrite write);

/* dst (cols, rows) = src (rows, cols)^T. dst and src must not overlap. */
void kernels_transpose(float *dst, const float *src, int rows, int cols);

/* Gradients of out = x w^T + b: dx (N, IC) += dout (N, OC) . w (OC, IC) (or =, with
 * dx_write KERNELS_OVERWRITE: no need to zero dx first); dw (OC, IC) += dout^T . x (N, IC);
 * db (OC,) += column sums of dout. dx and db may be NULL (not wanted). dx and dw use
 * kernels_matmul_wt's register tile: each entry is one FMA chain over o (dx) or n (dw), and
 * each of db one chain of adds over n, in increasing order, starting from its old value (or
 * 0), whatever the thread count. */
void kernels_matmul_backward(float *dx, float *dw, float *db, const float *dout,
                             const float *x, const float *w, int N, int IC, int OC,
                             KernelsWrite dx_write);

/* dx (n,) = GELU'(x) * dout for kernels_gelu's GELU; dx may be dout (in place). */
void kernels_gelu_backward(float *dx, const float *x, const float *dout, size_t n);

/* Backward of kernels_layernorm, out = LN(x; w, b) over rows of x (N, C): dx (N, C) +=
 * d loss / d x; dw, db (C,) += d loss / d w, d b, given dout (N, C) = d loss / d out.
 * mean, rstd (N,) receive each row's statistics (recomputed from x). Rows of dx, then
 * columns of dw and db (each a sum over n in increasing order) run as jobs of their own:
 * the same bits for any thread count. */
void kernels_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                                const float *x, const float *w, float *mean, float *rstd,
                                int N, int C);

/* One AdamW step's settings (Loshchilov & Hutter, AdamW, Algorithm 2). */
typedef struct {
    float lr;             /* learning rate of this step */
    float beta1, beta2;   /* moment decays */
    float eps;
    float weight_decay;   /* decoupled decay of this tensor (0 for biases and norms) */
    float grad_scale;     /* the gradient is multiplied by this first (clipping) */
    float correction1, correction2;   /* 1 - beta1^t, 1 - beta2^t */
} KernelsAdamW;

/* AdamW over n parameters: g = grad * grad_scale; m = beta1 m + (1 - beta1) g;
 * v = beta2 v + (1 - beta2) g g; param -= lr (m / c1 / (sqrt(v / c2) + eps) + decay param),
 * each in that order with no fused operation, so every path gives the scalar formula's
 * bits (vector division and square root round as the scalar ones). */
void kernels_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                   const KernelsAdamW *h);

/* Dropout, hash.h's rule: out[i] = 0 if element key + i of the mask is dropped at rate p,
 * else x[i] / (1 - p) (as x[i] * (1 / (1 - p))), for i < n; out may be x. p in [0, 1). */
void kernels_dropout(float *out, const float *x, size_t n, float p, uint64_t key);

#endif /* KERNELS_H */

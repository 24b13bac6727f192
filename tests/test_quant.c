/* test_quant.c: int8 quantization and the int8 matmul against float64 references.
 *
 * The quantizer is checked against its definition (bit for bit) and its properties
 * (round-trip error, range, the group's largest value at +-127, zero and non-finite
 * groups); the matmul against a float64 sum over the dequantized values at awkward
 * sizes and column ranges, against exact integer sums at the int8 extremes, and the
 * AVX2 path against the portable one on the same numbers; the prefill GEMM (several rows
 * of x at once) against the same rows one at a time and against the reference's float steps
 * written out here (reference_float), bit for bit, at sizes around its tile, and with the
 * columns cut between two threads. Data are fixed-seed random.
 */
#include "quant.h"
#include "simd/simd.h"   /* simd_set_prefetch */

#include <float.h>     /* FLT_EPSILON, FLT_MAX */
#include <math.h>      /* fabs, isnan, roundf, NAN, INFINITY */
#include <pthread.h>   /* pthread_create, pthread_join: the two-thread check */
#include <stdint.h>    /* int8_t, INT8_MIN, uint64_t */
#include <stdio.h>     /* snprintf */
#include <stdlib.h>    /* malloc, free */
#include <string.h>    /* memcmp, memcpy */

#include "tests/check.h"   /* check_* */

#define UNIT_ROUNDOFF ((double)FLT_EPSILON / 2.0)   /* u = 2^-24: error of one float rounding */
/* Extra roundings in the matmul besides one per group: the scale product, the multiply
 * (without FMA), the bias, and 5 to spare. */
#define MATMUL_EXTRA_ROUNDINGS 8
#define MAX_CASE 16384  /* scratch buffer length: covers OC * cols = 17 * 773, 13 * 773 */

static const int COLS[] = {1, 7, 31, 32, 33, 64, 100, 172, 288, 768 + 5};
static const int GROUPS[] = {32, 64, 4, 16, 20};
static const int OCS[] = {1, 3, 5, 8, 17};   /* around the GEMM's tiles of 4 columns */
static const int NS[] = {1, 2, 4, 7, 13};    /* rows: NEON's tiles of 4 and leftovers (x86's
                                               * tiles: test_gemm) */
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ------------------------------------------------------------------------- */
/* Quantization                                                                */

/* The definition, written as directly as possible: scale = max|x| / 127 in float, q =
 * roundf(x / scale) (halves away from zero) clamped to [-127, 127]; NaN scale and q 0 for
 * a non-finite group, q 0 for a zero scale. The kernel must give the same bits. */
static void reference_quantize(int8_t *q, float *scale, const float *x, int rows, int cols,
                               int group) {
    int groups = quant_groups(cols, group);
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < groups; g++) {
            const float *x_g = x + (size_t)r * cols + (size_t)g * group;
            int8_t *q_g = q + (size_t)r * cols + (size_t)g * group;
            int n = cols - g * group < group ? cols - g * group : group;
            float amax = 0.0f;
            int finite = 1;
            for (int i = 0; i < n; i++) {
                finite &= isfinite(x_g[i]) != 0;
                if (fabsf(x_g[i]) > amax) amax = fabsf(x_g[i]);
            }
            float s = finite ? amax / 127.0f : NAN;
            if (isinf(s)) s = NAN;
            scale[(size_t)r * groups + g] = s;
            for (int i = 0; i < n; i++) {
                float v = s > 0.0f ? roundf(x_g[i] / s) : 0.0f;
                q_g[i] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
            }
        }
}

static void test_groups(void) {
    check_true(quant_groups(0, 32) == 0 && quant_groups(1, 32) == 1 && quant_groups(32, 32) == 1
               && quant_groups(33, 32) == 2 && quant_groups(172, 32) == 6
               && quant_groups(773, 20) == 39, "quant_groups is ceil(cols / group)");
}

/* Properties of quant_quantize on random rows of three magnitudes, for every size. */
static void test_quantize_properties(void) {
    static float x[MAX_CASE], s[MAX_CASE], s_ref[MAX_CASE];
    static int8_t q[MAX_CASE], q_ref[MAX_CASE];
    const float amplitude[3] = {1.0f, 1e-3f, 300.0f};
    const int rows = 3;
    uint64_t seed = 1;
    for (int gi = 0; gi < COUNT(GROUPS); gi++) {
        int group = GROUPS[gi];
        long n_groups = 0, bad_trip = 0, bad_range = 0, bad_max = 0, bad_scale = 0, bad_bits = 0;
        double worst = 0.0;   /* largest |x - q * scale| / scale */
        for (int ci = 0; ci < COUNT(COLS); ci++) {
            int cols = COLS[ci], groups = quant_groups(cols, group);
            for (int r = 0; r < rows; r++)
                check_fill_random(&seed, x + (size_t)r * cols, cols, amplitude[r]);
            quant_quantize(q, s, x, rows, cols, group);
            reference_quantize(q_ref, s_ref, x, rows, cols, group);
            bad_bits += memcmp(q, q_ref, (size_t)(rows * cols)) != 0 ||
                        memcmp(s, s_ref, (size_t)(rows * groups) * sizeof(float)) != 0;
            for (int r = 0; r < rows; r++)
                for (int g = 0; g < groups; g++, n_groups++) {
                    int c0 = g * group, c1 = c0 + group < cols ? c0 + group : cols;
                    const float *x_r = x + (size_t)r * cols;
                    const int8_t *q_r = q + (size_t)r * cols;
                    float scale = s[r * groups + g], amax = 0.0f;
                    int at = c0;
                    for (int c = c0; c < c1; c++)
                        if (fabsf(x_r[c]) > amax) { amax = fabsf(x_r[c]); at = c; }
                    /* the cast rounds the quotient to float where floats are evaluated
                     * wider (FLT_EVAL_METHOD not 0: x87), as storing the scale did */
                    bad_scale += scale != (float)(amax / 127.0f);
                    bad_max += q_r[at] != (x_r[at] > 0.0f ? 127 : -127);
                    for (int c = c0; c < c1; c++) {
                        double err = fabs((double)x_r[c] - (double)q_r[c] * (double)scale);
                        /* round-to-nearest errs by <= scale / 2, plus the rounding of
                         * x / scale (<= 127.5 u relative) */
                        bad_trip += err > (double)scale * (0.5 + 128.0 * UNIT_ROUNDOFF);
                        bad_range += q_r[c] == INT8_MIN;   /* -128, the one int8 outside */
                        if (err / (double)scale > worst) worst = err / (double)scale;
                    }
                }
        }
        check_true(!bad_trip && !bad_range && !bad_max && !bad_scale,
                   "quantize group %d: %ld groups, |x - q*scale| <= scale/2 (worst %.6f scale; "
                   "%ld bad), q in [-127, 127] (%ld bad), max|x| -> +-127 (%ld bad), "
                   "scale = max|x|/127 (%ld bad)", group, n_groups, worst, bad_trip, bad_range,
                   bad_max, bad_scale);
        check_true(!bad_bits, "quantize group %d (%s build) is bitwise the definition "
                   "(%ld of %d sizes differ)", group, quant_kernel_name(), bad_bits,
                   COUNT(COLS));
    }
}

/* Halves round away from zero; zero, NaN, infinite, subnormal and huge groups. */
static void test_quantize_special(void) {
    /* a group of 32 with max 127, so scale is exactly 1 and x / scale is x: eight lanes
     * four times (the AVX2 loop), and the same values again as a 37-wide tail group */
    enum { G = 32, COLS_TIES = 69 };
    const float ties[G] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f,
                           -126.5f, 0.49999997f, -0.49999997f, 3.4999998f, 2.5000002f,
                           -0.0f, 0.0f, 64.5f, -64.5f, 99.75f, -99.25f, 1.0f, -1.0f,
                           7.5f, 8.5f, -7.5f, -8.5f, 0.25f, 0.75f, -0.75f, 10.5f, 11.5f,
                           -10.5f, -11.5f};
    const int8_t want[G] = {127, 1, 2, 3, -1, -2, -3, 127, -127, 0, 0, 3, 3, 0, 0, 65, -65,
                            100, -99, 1, -1, 8, 9, -8, -9, 0, 1, -1, 11, 12, -11, -12};
    float x[COLS_TIES], s[3];
    int8_t q[COLS_TIES];
    memcpy(x, ties, sizeof ties);
    memcpy(x + G, ties, sizeof ties);
    for (int i = 2 * G; i < COLS_TIES; i++) x[i] = 0.5f;   /* third group: 5 values, max 0.5 */
    quant_quantize(q, s, x, 1, COLS_TIES, G);
    int ok = s[0] == 1.0f && s[1] == 1.0f && memcmp(q, want, G) == 0 && memcmp(q + G, want, G) == 0;
    for (int i = 2 * G; i < COLS_TIES; i++) ok &= q[i] == 127;
    check_true(ok, "halves round away from zero (0.5 -> 1, 2.5 -> 3, -2.5 -> -3, 126.5 -> 127)");
    /* the weight file's quantizer: halves to even (torch.round), the rest as above */
    const int8_t want_even[G] = {127, 0, 2, 2, 0, -2, -2, 126, -126, 0, 0, 3, 3, 0, 0, 64,
                                 -64, 100, -99, 1, -1, 8, 8, -8, -8, 0, 1, -1, 10, 12, -10,
                                 -12};
    quant_quantize_weights(q, s, x, COLS_TIES, G);
    ok = s[0] == 1.0f && s[1] == 1.0f && memcmp(q, want_even, G) == 0 &&
         memcmp(q + G, want_even, G) == 0;
    for (int i = 2 * G; i < COLS_TIES; i++) ok &= q[i] == 127;
    check_true(ok, "a weight file's halves round to even (0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> "
               "-2, 126.5 -> 126)");

    /* one row of five 37-wide groups (32 through the AVX2 loop, 5 in the scalar tail):
     * zeros; a NaN in the SIMD part; a NaN in the tail; +inf; -inf among finite values */
    enum { W = 37, NG = 5 };
    float y[W * NG], sy[NG];
    int8_t qy[W * NG];
    uint64_t seed = 2;
    check_fill_random(&seed, y, W * NG, 1.0f);
    for (int i = 0; i < W; i++) y[i] = i % 2 ? 0.0f : -0.0f;
    y[W + 3] = NAN;
    y[2 * W + 35] = NAN;
    y[3 * W + 10] = INFINITY;
    y[4 * W + 36] = -INFINITY;
    memset(qy, 99, sizeof qy);
    quant_quantize(qy, sy, y, 1, W * NG, W);
    int zeros = 1;
    for (int i = 0; i < W * NG; i++) zeros &= qy[i] == 0;
    check_true(sy[0] == 0.0f && !signbit(sy[0]), "an all-zero group (+0 and -0) has scale +0");
    check_true(isnan(sy[1]) && isnan(sy[2]) && isnan(sy[3]) && isnan(sy[4]) && zeros,
               "groups with NaN (SIMD part or tail) or +-inf get scale NaN and q 0");
    /* the same in groups of 32, which the vector quantizers take whole, then a finite one */
    float u[G * 5], su[5];
    int8_t qu[G * 5];
    check_fill_random(&seed, u, G * 5, 1.0f);
    for (int i = 0; i < G; i++) u[i] = i % 2 ? 0.0f : -0.0f;
    u[G + 3] = NAN;   /* in the first register: a max after it would drop it */
    u[2 * G + 31] = INFINITY;
    u[3 * G] = -INFINITY;
    memset(qu, 99, sizeof qu);
    quant_quantize(qu, su, u, 1, G * 5, G);
    zeros = 1;
    for (int i = 0; i < G * 4; i++) zeros &= qu[i] == 0;
    int last_ok = su[4] > 0.0f && isfinite(su[4]);
    for (int i = 4 * G; i < 5 * G; i++) last_ok &= qu[i] != 0 || fabsf(u[i]) < su[4];
    check_true(su[0] == 0.0f && !signbit(su[0]) && isnan(su[1]) && isnan(su[2]) &&
               isnan(su[3]) && zeros && last_ok,
               "groups of 32: zero -> scale +0; NaN, +inf, -inf -> scale NaN, q 0; then a "
               "finite group quantized");

    /* subnormal: max|x| / 127 underflows to 0 (q 0), or is a subnormal scale (q in range,
     * with the largest at +-127); huge: FLT_MAX stays finite */
    float t[3 * G], st[3];
    int8_t qt[3 * G];
    for (int i = 0; i < G; i++) {
        t[i] = (i % 2 ? 1.0f : -1.0f) * 1.4e-45f;          /* the smallest subnormal */
        t[G + i] = (float)(i + 1) * 3e-41f * (i % 3 ? 1.0f : -1.0f);
        t[2 * G + i] = FLT_MAX / (float)(i + 1) * (i % 2 ? -1.0f : 1.0f);
    }
    quant_quantize(qt, st, t, 1, 3 * G, G);
    int in_range = 1, zero_q = 1;
    for (int i = 0; i < 3 * G; i++) in_range &= qt[i] != INT8_MIN;
    for (int i = 0; i < G; i++) zero_q &= qt[i] == 0;
    check_true(st[0] == 0.0f && zero_q && st[1] > 0.0f && qt[2 * G - 1] == 127 && in_range &&
               isfinite(st[2]) && qt[2 * G] == 127 && qt[2 * G + 3] == -32,
               "subnormal groups (scale 0 -> q 0; subnormal scale -> q in range) and FLT_MAX");

    /* a scale that rounds far down: max|x| = 190 * 2^-149 over 127 is 1.496 * 2^-149,
     * which rounds to 2^-149, so x / scale reaches +-190 and must be clamped to +-127: a
     * whole group (the vector quantizer's) and a last group of 2 (the reference's) */
    float c[G + 2], sc[2];
    int8_t qc[G + 2];
    memset(c, 0, sizeof c);
    c[0] = -190.0f * 0x1p-149f;
    c[1] = 100.0f * 0x1p-149f;
    c[G] = 190.0f * 0x1p-149f;
    c[G + 1] = -3.0f * 0x1p-149f;
    quant_quantize(qc, sc, c, 1, G + 2, G);
    check_true(sc[0] == 0x1p-149f && sc[1] == 0x1p-149f && qc[0] == -127 && qc[1] == 100 &&
               qc[G] == 127 && qc[G + 1] == -3, "a scale rounded down to 2^-149: q clamped to "
               "+-127 (got %d %d, %d %d)", qc[0], qc[1], qc[G], qc[G + 1]);
}

/* Every half k + 0.5 (k = 0 .. 126) and the floats on either side of it, both signs, in
 * groups of 32 whose first value 127 makes the scale exactly 1, so that x / scale is x: the
 * rounding at each of its boundaries against the definition's roundf. */
static void test_quantize_halves(void) {
    enum { G = 32, PER = G - 1, N = 127 * 6, NG = (N + PER - 1) / PER };
    float x[NG * G], s[NG], s_ref[NG];
    int8_t q[NG * G], q_ref[NG * G];
    for (int i = 0, g = 0; g < NG; g++) {
        x[g * G] = 127.0f;
        for (int j = 1; j < G; j++, i++) {
            float half = (float)(i / 6 % 127) + 0.5f, sign = i % 2 ? -1.0f : 1.0f;
            float v = i % 6 < 2 ? half : nextafterf(half, i % 6 < 4 ? 0.0f : 200.0f);
            x[g * G + j] = i < N ? sign * v : 0.0f;
        }
    }
    quant_quantize(q, s, x, 1, NG * G, G);
    reference_quantize(q_ref, s_ref, x, 1, NG * G, G);
    int ok = s[0] == 1.0f && memcmp(s, s_ref, sizeof s) == 0 && memcmp(q, q_ref, sizeof q) == 0;
    check_true(ok, "every k + 0.5 and its neighbours (k = 0..126, both signs) round as roundf");
}

static void test_dequantize(void) {
    enum { R = 3, C = 45, G = 20, NG = 3 };
    float x[R * C], s[R * NG], out[R * C], row[C];
    int8_t q[R * C];
    uint64_t seed = 3;
    check_fill_random(&seed, x, R * C, 2.0f);
    quant_quantize(q, s, x, R, C, G);
    QuantMatrix m = {q, s, R, C, G, 0, 0, NULL};
    quant_dequantize(out, &m);
    int ok = 1;
    for (int r = 0; r < R; r++) {
        quant_dequantize_row(row, &m, r);
        for (int c = 0; c < C; c++) {
            float want = (float)q[r * C + c] * s[r * NG + c / G];
            ok &= row[c] == want && out[r * C + c] == want;
        }
    }
    check_true(ok, "dequantize and dequantize_row give q * scale[r, c / group] exactly");
}

/* ------------------------------------------------------------------------- */
/* Matmul                                                                      */

/* A quantized matrix with its storage, for the tests. */
typedef struct {
    int8_t q[MAX_CASE];
    float s[MAX_CASE];
} QuantStore;

/* want (N, OC) = dequant(x) · dequant(w)ᵀ + bias in float64, and terms (N, OC) the sum of
 * |each product| plus |bias| (what the error bound scales with). */
static void reference_matmul(double *want, double *terms, const int8_t *xq, const float *xs,
                             const QuantMatrix *w, const float *bias, int N) {
    int cols = w->cols, groups = quant_groups(cols, w->group);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < w->rows; o++) {
            double sum = bias ? (double)bias[o] : 0.0, abs_sum = fabs(sum);
            for (int c = 0; c < cols; c++) {
                double xd = (double)xq[n * cols + c] * (double)xs[n * groups + c / w->group];
                double wd = (double)w->q[o * cols + c] *
                            (double)w->scale[o * groups + c / w->group];
                sum += xd * wd;
                abs_sum += fabs(xd * wd);
            }
            want[n * w->rows + o] = sum;
            terms[n * w->rows + o] = abs_sum;
        }
}

/* Runs quant_matmul_block on columns [o0, o1) of a NaN-filled out (N, OC) and returns
 * the largest error / bound over written columns (HUGE_VAL if a column outside the range
 * was written, a written one is NaN, or out of memory). The bound: a float sum of k terms
 * errs by at most about k u sum|terms| (Higham, Accuracy and Stability of Numerical
 * Algorithms, §4.2); the kernel adds one term per group, plus MATMUL_EXTRA_ROUNDINGS. */
static double run_range(const int8_t *xq, const float *xs, const QuantMatrix *w,
                        const float *bias, int N, int o0, int o1, const double *want,
                        const double *terms) {
    int OC = w->rows, groups = quant_groups(w->cols, w->group);
    size_t n_out = (size_t)N * (size_t)OC;
    float *out = malloc(n_out * sizeof *out);
    if (!out) return HUGE_VAL;
    for (size_t i = 0; i < n_out; i++) out[i] = NAN;
    quant_matmul_block(out, xq, xs, w, bias, N, o0, o1);
    double worst = 0.0;
    for (int n = 0; n < N && worst < HUGE_VAL; n++)
        for (int o = 0; o < OC; o++) {
            float got = out[(size_t)n * OC + o];
            if (o < o0 || o >= o1) {
                if (!isnan(got)) worst = HUGE_VAL;
                continue;
            }
            double bound = (groups + MATMUL_EXTRA_ROUNDINGS) * UNIT_ROUNDOFF *
                           terms[(size_t)n * OC + o] + 1e-30;
            double ratio = fabs((double)got - want[(size_t)n * OC + o]) / bound;
            if (isnan(got)) worst = HUGE_VAL;
            else if (ratio > worst) worst = ratio;
        }
    free(out);
    return worst;
}

/* Every combination of the sizes, with and without bias, on several column ranges. */
static void test_matmul_sizes(void) {
    static float x[MAX_CASE], xs[MAX_CASE], wf[MAX_CASE], ws[MAX_CASE], bias[MAX_CASE];
    static int8_t xq[MAX_CASE], wq[MAX_CASE];
    static double want[MAX_CASE], terms[MAX_CASE];
    uint64_t seed = 4;
    for (int gi = 0; gi < COUNT(GROUPS); gi++)
        for (int ci = 0; ci < COUNT(COLS); ci++) {
            int group = GROUPS[gi], cols = COLS[ci], groups = quant_groups(cols, group);
            int cases = 0;
            double worst = 0.0;
            for (int oi = 0; oi < COUNT(OCS); oi++)
                for (int ni = 0; ni < COUNT(NS); ni++) {
                    int OC = OCS[oi], N = NS[ni];
                    check_fill_random(&seed, wf, OC * cols, 0.5f);
                    for (int o = 0; o < OC; o += 2)   /* rows of different magnitudes */
                        for (int c = 0; c < cols; c++) wf[o * cols + c] *= 8.0f;
                    check_fill_random(&seed, x, N * cols, 1.0f);
                    if (N > 1)   /* one all-zero group: scale 0 */
                        for (int c = 0; c < cols && c < group; c++) x[cols + c] = 0.0f;
                    check_fill_random(&seed, bias, OC, 0.1f);
                    quant_quantize(wq, ws, wf, OC, cols, group);
                    quant_quantize(xq, xs, x, N, cols, group);
                    QuantMatrix w = {wq, ws, OC, cols, group, 0, 0, NULL};
                    /* ranges: all, inner (4-wide tiles plus leftovers), one column, empty */
                    int ranges[4][2] = {{0, OC}, {OC > 2 ? 1 : 0, OC > 2 ? OC - 1 : OC},
                                        {OC / 2, OC / 2 + 1}, {OC / 2, OC / 2}};
                    for (int with_bias = 0; with_bias < 2; with_bias++) {
                        const float *b = with_bias ? bias : NULL;
                        reference_matmul(want, terms, xq, xs, &w, b, N);
                        for (int ri = 0; ri < 4; ri++, cases++) {
                            double ratio = run_range(xq, xs, &w, b, N, ranges[ri][0],
                                                     ranges[ri][1], want, terms);
                            if (ratio > worst) worst = ratio;
                        }
                    }
                }
            check_true(worst <= 1.0, "matmul cols %d group %d (%d groups/row): %d cases "
                       "(OC 1/3/5/8/17, N 1/2/4/7/13, 4 ranges, +-bias), max error %.3g of bound",
                       cols, group, groups, cases, worst);
        }
}

/* Offsets (QuantMatrix.offset: GGUF's minimums, W = q scale - offset): for each shape,
 * with and without bias, the outputs are the same matrix's without offsets less the
 * offsets' sum in quant.h's order (8 lanes, lane g % 8, then the lanes in order), written
 * out here, bit for bit; within the float64 bound of the dequantized product; the same bits
 * all at once, column by column and row by row; packed (where the build packs) as in rows;
 * and quant_dequantize_row gives q * scale - offset exactly. Shapes: groups of 32 and 16,
 * fewer groups than lanes, a prompt's worth of rows (the GEMM), 256 groups; every count of
 * groups past the last whole 8 (0 to 7: the x86 kernel's masked tail). */
static void test_matmul_offsets(void) {
    const int shapes[][4] = {   /* N, cols, OC, group */
        {1, 256, 37, 32}, {7, 800, 20, 16}, {13, 96, 9, 32}, {70, 288, 33, 32},
        {3, 4096, 5, 16}, {5, 256, 32, 32}, {2, 416, 11, 32}, {4, 240, 17, 16},
        {1, 192, 9, 32}, {3, 384, 8, 32},
    };
    uint64_t seed = 21;
    for (int si = 0; si < COUNT(shapes); si++) {
        int N = shapes[si][0], cols = shapes[si][1], OC = shapes[si][2], group = shapes[si][3];
        int groups = quant_groups(cols, group);
        size_t nq = (size_t)N * (size_t)cols, wqn = (size_t)OC * (size_t)cols;
        size_t no = (size_t)N * (size_t)OC, ng = (size_t)OC * (size_t)groups;
        int8_t *xq = malloc(nq), *wq = malloc(wqn), *wq2 = malloc(wqn);
        float *x = malloc(nq * sizeof(float)), *xs = malloc(nq * sizeof(float));
        float *wf = malloc(wqn * sizeof(float)), *ws = malloc(wqn * sizeof(float));
        float *ws2 = malloc(wqn * sizeof(float)), *off = malloc(ng * sizeof(float));
        float *bias = malloc((size_t)OC * sizeof(float)), *row = malloc((size_t)cols * 4);
        float *plain = malloc(no * sizeof(float)), *got = malloc(no * sizeof(float));
        float *cut = malloc(no * sizeof(float)), *packed = malloc(no * sizeof(float));
        double *want = malloc(no * sizeof(double)), *terms = malloc(no * sizeof(double));
        if (!xq || !wq || !wq2 || !x || !xs || !wf || !ws || !ws2 || !off || !bias || !row ||
            !plain || !got || !cut || !packed || !want || !terms) {
            check_true(0, "offsets: out of memory");
            return;
        }
        check_fill_random(&seed, x, (long)nq, 1.0f);
        check_fill_random(&seed, wf, (long)wqn, 0.5f);
        check_fill_random(&seed, off, (long)ng, 0.3f);
        check_fill_random(&seed, bias, OC, 0.1f);
        quant_quantize(xq, xs, x, N, cols, group);
        quant_quantize(wq, ws, wf, OC, cols, group);
        QuantMatrix w = {wq, ws, OC, cols, group, 0, 0, off}, w0 = w;
        w0.offset = NULL;
        int same_ref = 1, same_cut = 1, same_packed = 1, dequant = 1;
        double worst = 0.0;
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *b = with_bias ? bias : NULL;
            quant_matmul_block(plain, xq, xs, &w0, b, N, 0, OC);
            quant_matmul_block(got, xq, xs, &w, b, N, 0, OC);
            for (int o = 0; o < OC; o++)   /* column by column, then row by row */
                quant_matmul_block(cut, xq, xs, &w, b, N, o, o + 1);
            for (size_t i = 0; i < no; i++) same_cut &= memcmp(&cut[i], &got[i], 4) == 0;
            for (int n = 0; n < N; n++)
                quant_matmul_block(cut + (size_t)n * OC, xq + (size_t)n * cols,
                                   xs + (size_t)n * groups, &w, b, 1, 0, OC);
            for (size_t i = 0; i < no; i++) same_cut &= memcmp(&cut[i], &got[i], 4) == 0;
            for (int n = 0; n < N; n++)
                for (int o = 0; o < OC; o++) {
                    float lane[8] = {0}, total = 0.0f;
                    double sum = b ? (double)b[o] : 0.0, abs_sum = fabs(sum);
                    for (int g = 0; g < groups; g++) {
                        int32_t xsum = 0;
                        for (int c = g * group; c < (g + 1) * group && c < cols; c++) {
                            double xd = (double)xq[n * cols + c] * (double)xs[n * groups + g];
                            double wd = (double)wq[o * cols + c] * (double)ws[o * groups + g] -
                                        (double)off[o * groups + g];
                            sum += xd * wd;
                            abs_sum += fabs(xd * (double)wq[o * cols + c] *
                                            (double)ws[o * groups + g]);
                            xsum += xq[n * cols + c];
                        }
                        float v = xs[n * groups + g] * (float)xsum;
                        abs_sum += fabs((double)off[o * groups + g] * (double)v);
                        lane[g % 8] += off[o * groups + g] * v;
                    }
                    for (int k = 0; k < 8; k++) total += lane[k];
                    size_t i = (size_t)n * OC + (size_t)o;
                    float expect = plain[i] - total;
                    same_ref &= memcmp(&expect, &got[i], 4) == 0;
                    want[i] = sum;
                    terms[i] = abs_sum;
                }
            for (size_t i = 0; i < no; i++) {
                double bound = (2.0 * groups + MATMUL_EXTRA_ROUNDINGS) * UNIT_ROUNDOFF *
                               terms[i] + 1e-30;
                double ratio = fabs((double)got[i] - want[i]) / bound;
                if (!(ratio <= worst)) worst = isnan(ratio) ? HUGE_VAL : ratio;
            }
            memcpy(wq2, wq, wqn);   /* a packed copy: the build's packed kernel, if any */
            memcpy(ws2, ws, (size_t)OC * (size_t)groups * sizeof(float));
            QuantMatrix wp = {wq2, ws2, OC, cols, group, 0, 0, off};
            if (quant_pack(&wp) == 0) {
                quant_matmul_block(packed, xq, xs, &wp, b, N, 0, OC);
                for (size_t i = 0; i < no; i++) same_packed &= memcmp(&packed[i], &got[i], 4) == 0;
                for (int r = 0; r < OC; r++) {
                    quant_dequantize_row(row, &wp, r);
                    for (int c = 0; c < cols; c++) {   /* two roundings, as quant.h says */
                        float v = (float)wq[r * cols + c] * ws[r * groups + c / group];
                        v -= off[r * groups + c / group];
                        dequant &= row[c] == v;
                    }
                }
            } else {
                same_packed = 0;
            }
        }
        check_true(same_ref, "offsets, N %d, cols %d, OC %d, group %d: the plain product less "
                   "the offsets' sum in its 8 lanes, bit for bit, +-bias", N, cols, OC, group);
        check_true(worst <= 1.0, "offsets, N %d, cols %d, OC %d, group %d: max error %.3g of "
                   "the float64 bound of the dequantized product", N, cols, OC, group, worst);
        check_true(same_cut, "offsets, N %d, cols %d, OC %d, group %d: the same bits column "
                   "by column and row by row", N, cols, OC, group);
        check_true(same_packed && dequant, "offsets, N %d, cols %d, OC %d, group %d: packed "
                   "(%d rows) as in rows, and dequantized rows q * scale - offset exactly", N,
                   cols, OC, group, quant_pack_rows(&w));
        free(xq); free(wq); free(wq2); free(x); free(xs); free(wf); free(ws); free(ws2);
        free(off); free(bias); free(row); free(plain); free(got); free(cut); free(packed);
        free(want); free(terms);
    }
}

/* Each output's bits must not depend on how the columns and rows are cut into calls
 * (threads cut columns): all at once, one column at a time, and one row at a time. */
static void test_matmul_cuts(void) {
    enum { C = 773, OC = 17, N = 7 };
    static float x[N * C], wf[OC * C], xs[N * C], ws[OC * C];
    static float whole[N * OC], by_col[N * OC], by_row[N * OC];
    static int8_t xq[N * C], wq[OC * C];
    uint64_t seed = 8;
    check_fill_random(&seed, x, N * C, 1.0f);
    check_fill_random(&seed, wf, OC * C, 1.0f);
    for (int group = 20; group <= 32; group += 12) {   /* portable, then SIMD when built */
        int groups = quant_groups(C, group);
        quant_quantize(xq, xs, x, N, C, group);
        quant_quantize(wq, ws, wf, OC, C, group);
        QuantMatrix w = {wq, ws, OC, C, group, 0, 0, NULL};
        quant_matmul_block(whole, xq, xs, &w, NULL, N, 0, OC);
        for (int o = 0; o < OC; o++) quant_matmul_block(by_col, xq, xs, &w, NULL, N, o, o + 1);
        for (int n = 0; n < N; n++)
            quant_matmul_block(by_row + n * OC, xq + n * C, xs + n * groups, &w, NULL, 1, 0, OC);
        check_true(memcmp(whole, by_col, sizeof whole) == 0 &&
                   memcmp(whole, by_row, sizeof whole) == 0,
                   "group %d: the same bits whole, column by column and row by row", group);
    }
}

/* q = +-127 everywhere with scales 1: every int16 pair sum at its largest (32258), and
 * every partial sum an integer below 2^24, so the result must be exact. 33 rows of x:
 * through the GEMM's tiles (a padded block) and one row at a time. Groups up to the whole
 * row: a group's own sum passes 2^22 from 260 values on (a tile that formed its float
 * through 1.5 x 2^23 would lose it). */
static void test_matmul_extremes(void) {
    enum { C = 1024, OC = 5, N = 33 };
    static int8_t xq[N * C], wq[OC * C];
    static float xs[N * C], ws[OC * C], out[N * OC];
    uint64_t seed = 5;
    const int groups_to_test[] = {32, 64, 16, 256, 512, 1024};
    for (int gi = 0; gi < (int)(sizeof groups_to_test / sizeof groups_to_test[0]); gi++) {
        int group = groups_to_test[gi], groups = quant_groups(C, group);
        for (int i = 0; i < N * C; i++) {   /* x rows: all +127, all -127, random signs */
            float r;
            check_fill_random(&seed, &r, 1, 1.0f);
            xq[i] = (int8_t)(i < C ? 127 : i < 2 * C ? -127 : r < 0.0f ? -127 : 127);
        }
        for (int i = 0; i < OC * C; i++) {
            float r;
            check_fill_random(&seed, &r, 1, 1.0f);
            int o = i / C;
            wq[i] = (int8_t)(o == 0 ? 127 : o == 1 ? -127 : r < 0.0f ? -127 : 127);
        }
        for (int i = 0; i < N * groups; i++) xs[i] = 1.0f;
        for (int i = 0; i < OC * groups; i++) ws[i] = 1.0f;
        QuantMatrix w = {wq, ws, OC, C, group, 0, 0, NULL};
        quant_matmul_block(out, xq, xs, &w, NULL, N, 0, OC);
        int exact = 1;
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++) {
                long sum = 0;
                for (int c = 0; c < C; c++) sum += (long)xq[n * C + c] * wq[o * C + c];
                exact &= out[n * OC + o] == (float)sum;
            }
        check_true(exact, "q = +-127 (pair sums 32258, no int16 saturation), group %d: "
                   "exact integer results (e.g. %.0f)", group, (double)out[0]);
    }
}

/* A NaN scale in x poisons its row of out; one in w poisons its column. */
static void test_matmul_nan(void) {
    enum { C = 96, OC = 6, N = 3, G = 32, NG = 3 };
    float x[N * C], wf[OC * C], xs[N * NG], ws[OC * NG], out[N * OC];
    int8_t xq[N * C], wq[OC * C];
    uint64_t seed = 6;
    check_fill_random(&seed, x, N * C, 1.0f);
    check_fill_random(&seed, wf, OC * C, 1.0f);
    x[1 * C + 40] = NAN;            /* row n = 1, group 1 */
    wf[4 * C + 95] = INFINITY;      /* row o = 4, group 2 */
    quant_quantize(xq, xs, x, N, C, G);
    quant_quantize(wq, ws, wf, OC, C, G);
    QuantMatrix w = {wq, ws, OC, C, G, 0, 0, NULL};
    quant_matmul_block(out, xq, xs, &w, NULL, N, 0, OC);
    int ok = 1;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++)
            ok &= (n == 1 || o == 4) ? isnan(out[n * OC + o]) : isfinite(out[n * OC + o]);
    check_true(ok, "a NaN in x gives a NaN row of out, an inf in w a NaN column; the rest finite");
}

/* The same numbers through the AVX2 kernel (group 32 or 64) and the portable one (the
 * same q viewed as groups of 16, each scale repeated): equal up to the roundings of two
 * (four) times as many groups, so within the sum of both bounds. */
static void test_simd_vs_portable(void) {
#ifndef __AVX2__
    check_skip("int8 AVX2 kernel vs portable: this build has no AVX2 kernel, both calls "
               "would run the portable one");
    return;
#endif
    enum { C = 768 + 5, OC = 17, N = 7 };
    static float x[N * C], wf[OC * C], xs[N * C], ws[OC * C], xs16[N * C], ws16[OC * C];
    static float simd[N * OC], portable[N * OC];
    static int8_t xq[N * C], wq[OC * C];
    static double want[N * OC], terms[N * OC];
    uint64_t seed = 7;
    check_fill_random(&seed, x, N * C, 1.0f);
    check_fill_random(&seed, wf, OC * C, 1.0f);
    for (int group = 32; group <= 64; group += 32) {
        int groups = quant_groups(C, group), groups16 = quant_groups(C, 16), per = group / 16;
        quant_quantize(xq, xs, x, N, C, group);
        quant_quantize(wq, ws, wf, OC, C, group);
        for (int n = 0; n < N; n++)
            for (int g = 0; g < groups16; g++) xs16[n * groups16 + g] = xs[n * groups + g / per];
        for (int o = 0; o < OC; o++)
            for (int g = 0; g < groups16; g++) ws16[o * groups16 + g] = ws[o * groups + g / per];
        QuantMatrix w = {wq, ws, OC, C, group, 0, 0, NULL}, w16 = {wq, ws16, OC, C, 16, 0, 0, NULL};
        quant_matmul_block(simd, xq, xs, &w, NULL, N, 0, OC);
        quant_matmul_block(portable, xq, xs16, &w16, NULL, N, 0, OC);
        reference_matmul(want, terms, xq, xs, &w, NULL, N);
        double worst = 0.0;
        for (int i = 0; i < N * OC; i++) {
            double bound = 2.0 * (groups16 + MATMUL_EXTRA_ROUNDINGS) * UNIT_ROUNDOFF * terms[i];
            double ratio = fabs((double)simd[i] - (double)portable[i]) / bound;
            if (!(ratio <= worst)) worst = ratio;
        }
        check_true(worst <= 1.0, "%s kernel (group %d) vs portable (group 16, same values): "
                   "max difference %.3g of the sum of both error bounds", quant_kernel_name(),
                   group, worst);
    }
}

/* ------------------------------------------------------------------------- */
/* The prefill GEMM                                                            */

/* A shape of the GEMM checks, its data and its results. */
typedef struct {
    int N, cols, OC, group, o0, o1;
    int8_t *xq, *wq;
    float *xs, *ws, *bias;
} GemmCase;

/* Fills c's quantized x (N, cols) and w (OC, cols), with rows of w of two magnitudes, an
 * all-zero group in row 1 of x, and bias; returns 0, or -1 out of memory. */
static int gemm_case_fill(GemmCase *c, uint64_t *seed) {
    size_t nx = (size_t)c->N * (size_t)c->cols, nw = (size_t)c->OC * (size_t)c->cols;
    int groups = quant_groups(c->cols, c->group);
    float *x = malloc(nx * sizeof(float)), *wf = malloc(nw * sizeof(float));
    c->xq = malloc(nx);
    c->wq = malloc(nw);
    c->xs = malloc((size_t)c->N * (size_t)groups * sizeof(float));
    c->ws = malloc((size_t)c->OC * (size_t)groups * sizeof(float));
    c->bias = malloc((size_t)c->OC * sizeof(float));
    if (!x || !wf || !c->xq || !c->wq || !c->xs || !c->ws || !c->bias) {
        free(x);
        free(wf);
        return -1;
    }
    check_fill_random(seed, x, (long)nx, 2.0f);
    check_fill_random(seed, wf, (long)nw, 0.25f);
    for (int o = 1; o < c->OC; o += 3)
        for (int i = 0; i < c->cols; i++) wf[(size_t)o * (size_t)c->cols + (size_t)i] *= 16.0f;
    if (c->N > 1)
        for (int i = 0; i < c->cols && i < c->group; i++) x[(size_t)c->cols + (size_t)i] = 0.0f;
    check_fill_random(seed, c->bias, c->OC, 0.1f);
    quant_quantize(c->xq, c->xs, x, c->N, c->cols, c->group);
    quant_quantize(c->wq, c->ws, wf, c->OC, c->cols, c->group);
    free(x);
    free(wf);
    return 0;
}

static void gemm_case_free(GemmCase *c) {
    free(c->xq);
    free(c->wq);
    free(c->xs);
    free(c->ws);
    free(c->bias);
}

/* out (1,) = row n of x times row o of w as quant.h defines the reference's float steps,
 * written out here: per group the exact int32 dot product, acc += (float)dot * (x's scale *
 * w's scale), group after group, then + bias (or + 0). */
static float reference_float(const GemmCase *c, const float *bias, int n, int o) {
    int groups = quant_groups(c->cols, c->group);
    float acc = 0.0f;
    for (int g = 0; g < groups; g++) {
        int32_t dot = 0;
        for (int i = g * c->group; i < (g + 1) * c->group && i < c->cols; i++)
            dot += (int32_t)c->xq[(size_t)n * (size_t)c->cols + (size_t)i] *
                   (int32_t)c->wq[(size_t)o * (size_t)c->cols + (size_t)i];
        acc += (float)dot * (c->xs[(size_t)n * (size_t)groups + (size_t)g] *
                             c->ws[(size_t)o * (size_t)groups + (size_t)g]);
    }
    return acc + (bias ? bias[o] : 0.0f);
}

/* One thread's share of a product: columns o0 .. o1-1 of all rows. */
typedef struct {
    float *out;
    const GemmCase *c;
    const QuantMatrix *w;
    const float *bias;
    int o0, o1;
} GemmShare;

static void *gemm_share_run(void *arg) {
    const GemmShare *s = arg;
    quant_matmul_block(s->out, s->c->xq, s->c->xs, s->w, s->bias, s->c->N, s->o0, s->o1);
    return NULL;
}

/* out = c's product by w, columns c->o0 .. c->o1-1 cut between two threads at an odd place
 * inside the range (each thread's columns as one call). Returns 1 if the second thread
 * ran, 0 if it could not start (its half then runs here). */
static int two_threads(float *out, const GemmCase *c, const QuantMatrix *w, const float *b) {
    int cut = c->o0 + (c->o1 - c->o0) / 2;
    cut += (cut % 2 == 0 && cut + 1 < c->o1);
    GemmShare share[2] = {{out, c, w, b, c->o0, cut}, {out, c, w, b, cut, c->o1}};
    pthread_t thread;
    int started = pthread_create(&thread, NULL, gemm_share_run, &share[1]) == 0;
    gemm_share_run(&share[0]);   /* while the other thread runs its half */
    if (started) started = pthread_join(thread, NULL) == 0;
    else gemm_share_run(&share[1]);
    return started;
}

/* For each shape, with and without bias, on columns o0 .. o1-1 of a NaN-filled out:
 * all N rows in one call (the GEMM) against each row alone (decode's path) bit for bit,
 * against the float64 reference within run_range's bound, and the same columns cut
 * between two threads at an odd column, bit for bit. Shapes: 1 row, odd and prime row
 * counts, 64 and 67 (a prompt chunk, and one past it), widths not multiples of 32 (a
 * short last group), groups of 16 to 160 (the tiles take widths and groups that are
 * multiples of 4 on x86, of 16 on NEON; the rest go one row at a time, as do portable
 * builds), and column ranges that start and end inside a tile; matrices of 72 KiB and
 * more, whose single rows read w as four runs of rows; and the x86 tile's padded blocks of
 * rows and its widest x (4,096 values; 4,100 goes one row at a time); and outputs whose
 * rows alias in L1 (OC a multiple of 1,024), which the x86 tile writes through a stage.
 * Each also with w marked cold (QuantMatrix.cold), whose single rows ask for w's lines
 * ahead (on every core: simd_set_prefetch(1)): the same bits. */
static void test_gemm(void) {
    const int shapes[][6] = {   /* N, cols, OC, group, o0, o1 */
        {1, 288, 16, 32, 0, 16},   {2, 288, 16, 32, 0, 16},   {3, 96, 9, 32, 0, 9},
        {4, 32, 4, 32, 0, 4},      {5, 64, 8, 32, 1, 7},      {7, 773, 17, 32, 0, 17},
        {13, 288, 41, 32, 3, 38},  {64, 288, 40, 32, 0, 40},  {67, 128, 13, 32, 0, 13},
        {8, 768, 12, 64, 0, 12},   {11, 773, 10, 64, 2, 10},  {9, 200, 7, 96, 0, 7},
        {6, 640, 8, 128, 0, 8},    {17, 1031, 11, 160, 0, 11}, {12, 100, 9, 20, 0, 9},
        {31, 37, 6, 32, 0, 6},     {4, 31, 5, 32, 0, 5},      {23, 353, 29, 16, 5, 24},
        {23, 352, 29, 16, 5, 24},  {10, 480, 9, 48, 0, 9},    {2, 64, 3, 32, 0, 3},
        /* large enough that a single row reads w as four runs (QUANT_STREAM_BYTES) */
        {3, 773, 101, 32, 0, 101}, {5, 1031, 83, 64, 1, 80},  {2, 768, 97, 32, 3, 94},
        {1, 800, 97, 32, 0, 97},   /* an odd number of groups (25) */
        {1, 768, 97, 16, 0, 97},   {3, 800, 101, 16, 1, 100},   /* groups of 16 (Q6_K) */
        /* the x86 tile (blocks of 32 rows with AVX-512 VNNI, 8 with AVX2): padded blocks,
         * groups that are not multiples of 32, several blocks a pass and several passes,
         * rows in several spans (more than 4,096 values, or more than 256 groups) */
        {16, 64, 8, 32, 0, 8},     {33, 96, 12, 32, 4, 12},   {47, 4096, 5, 64, 0, 5},
        {20, 4100, 4, 32, 0, 4},   {20, 200, 7, 96, 0, 7},    {20, 480, 9, 48, 0, 9},
        {40, 100, 9, 20, 1, 9},    {33, 1024, 8, 4, 0, 8},    {100, 2048, 6, 32, 0, 6},
        {17, 2048, 5, 4, 0, 5},    {18, 8256, 3, 64, 0, 3},    {20, 4352, 4, 32, 0, 4},
        /* blocks of at most a register's rows (AVX-512: 16) take a tile of one register */
        {16, 256, 6, 32, 0, 6},    {17, 256, 6, 32, 0, 6},    {48, 128, 5, 32, 1, 5},
        {49, 128, 5, 32, 0, 5},
        /* rows of whole cache lines (OC a multiple of 16, out 64-byte aligned), ranges
         * that start and end inside a line, several blocks, several spans */
        {70, 256, 64, 32, 3, 61},  {45, 256, 64, 32, 4, 60},  {40, 320, 48, 32, 0, 48},
        {33, 4100, 32, 32, 4, 28},
        /* rows 4 KiB apart and more (OC a multiple of 1,024): the x86 tile's staged order,
         * windows of 64 columns cut at both ends, short last blocks, several blocks */
        {70, 96, 1024, 32, 4, 1020}, {40, 64, 2048, 32, 0, 2048}, {17, 128, 1024, 64, 60, 200},
    };
    int tile_r, tile_c;
    quant_gemm_tile(&tile_r, &tile_c);
    uint64_t seed = 11;
    for (int si = 0; si < COUNT(shapes); si++) {
        GemmCase c = {shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3],
                      shapes[si][4], shapes[si][5], NULL, NULL, NULL, NULL, NULL};
        size_t n_out = (size_t)c.N * (size_t)c.OC, lines = (n_out * sizeof(float) + 63) / 64;
        float *whole = aligned_alloc(64, lines * 64), *rows = malloc(n_out * sizeof(float));
        float *two = aligned_alloc(64, lines * 64);   /* out's rows on whole cache lines */
        float *cold = malloc(2 * n_out * sizeof(float));   /* w cold: N rows, each alone */
        double *want = malloc(n_out * sizeof(double)), *terms = malloc(n_out * sizeof(double));
        if (!whole || !rows || !two || !cold || !want || !terms ||
            gemm_case_fill(&c, &seed) != 0) {
            check_true(0, "gemm N %d cols %d: out of memory", c.N, c.cols);
            free(whole); free(rows); free(two); free(cold); free(want); free(terms);
            gemm_case_free(&c);
            return;
        }
        int groups = quant_groups(c.cols, c.group);
        QuantMatrix w = {c.wq, c.ws, c.OC, c.cols, c.group, 0, 0, NULL}, w_cold = w;
        w_cold.cold = 1;   /* the row path asks for its lines ahead: the same sums */
        int same_rows = 1, same_two = 1, outside_ok = 1, threads_ok = 1, same_ref = 1;
        int same_cold = 1;
        double worst = 0.0;
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *b = with_bias ? c.bias : NULL;
            for (size_t i = 0; i < n_out; i++) whole[i] = rows[i] = two[i] = NAN;
            for (size_t i = 0; i < 2 * n_out; i++) cold[i] = NAN;
            quant_matmul_block(whole, c.xq, c.xs, &w, b, c.N, c.o0, c.o1);
            simd_set_prefetch(1);   /* the hints, whatever this core would choose */
            quant_matmul_block(cold, c.xq, c.xs, &w_cold, b, c.N, c.o0, c.o1);
            for (int n = 0; n < c.N; n++) {
                size_t at = (size_t)n * (size_t)c.OC;
                const int8_t *xq_n = c.xq + (size_t)n * (size_t)c.cols;
                const float *xs_n = c.xs + (size_t)n * (size_t)groups;
                quant_matmul_block(rows + at, xq_n, xs_n, &w, b, 1, c.o0, c.o1);
                quant_matmul_block(cold + n_out + at, xq_n, xs_n, &w_cold, b, 1, c.o0, c.o1);
            }
            simd_set_prefetch(-1);
            threads_ok &= two_threads(two, &c, &w, b);
            for (int n = 0; n < c.N; n++)
                for (int o = 0; o < c.OC; o++) {
                    size_t i = (size_t)n * (size_t)c.OC + (size_t)o;
                    if (o < c.o0 || o >= c.o1) {
                        outside_ok &= isnan(whole[i]) && isnan(two[i]);
                        continue;
                    }
                    same_rows &= memcmp(&whole[i], &rows[i], sizeof(float)) == 0;
                    same_cold &= memcmp(&whole[i], &cold[i], sizeof(float)) == 0 &&
                                 memcmp(&whole[i], &cold[n_out + i], sizeof(float)) == 0;
                    same_two &= memcmp(&whole[i], &two[i], sizeof(float)) == 0;
                    float ref = reference_float(&c, b, n, o);
                    same_ref &= memcmp(&whole[i], &ref, sizeof(float)) == 0;
                }
            reference_matmul(want, terms, c.xq, c.xs, &w, b, c.N);
            double ratio = run_range(c.xq, c.xs, &w, b, c.N, c.o0, c.o1, want, terms);
            if (ratio > worst) worst = ratio;
        }
        check_true(same_rows && outside_ok, "gemm (%d x %d tile) N %d, cols %d, OC %d, group %d, "
                   "columns %d..%d: all rows at once = each row alone, bit for bit, "
                   "+-bias", tile_r, tile_c, c.N, c.cols, c.OC, c.group, c.o0, c.o1 - 1);
        check_true(worst <= 1.0, "gemm N %d, cols %d, OC %d, group %d: max error %.3g of the "
                   "float64 bound", c.N, c.cols, c.OC, c.group, worst);
        check_true(same_ref, "gemm (%s) N %d, cols %d, OC %d, group %d: the reference's "
                   "float steps, bit for bit, +-bias", quant_kernel_name(), c.N, c.cols, c.OC,
                   c.group);
        check_true(threads_ok && same_two, "gemm N %d, cols %d, OC %d, group %d: columns "
                   "cut between 2 threads = 1 thread, bit for bit", c.N, c.cols, c.OC, c.group);
        check_true(same_cold, "gemm N %d, cols %d, OC %d, group %d: a cold w (its lines asked "
                   "for ahead), all rows at once and each alone = not cold, bit for bit",
                   c.N, c.cols, c.OC, c.group);
        free(whole); free(rows); free(two); free(cold); free(want); free(terms);
        gemm_case_free(&c);
    }
}

/* The packed layout as quant.h spells it, on a block of 16 rows by 64 values with q[r][c] =
 * (r * 64 + c) % 255 - 127 and scale[r][g] = r + g / 4: byte k * 64 + r * 4 + i holds
 * q[r][4k + i] + 128, scale g * 16 + r holds scale[r][g]; the rows after the block stay. */
static void test_pack_layout(void) {
    enum { R = 17, C = 64, G = 2 };
    int8_t q[R * C];
    float scale[R * G];
    for (int r = 0; r < R; r++) {
        for (int c = 0; c < C; c++) q[r * C + c] = (int8_t)((r * 64 + c) % 255 - 127);
        for (int g = 0; g < G; g++) scale[r * G + g] = (float)r + (float)g / 4.0f;
    }
    QuantMatrix m = {q, scale, R, C, 32, 0, 0, NULL};
    int rows = quant_pack_rows(&m);
    if (rows == 0) {
        check_skip("packed layout: this build packs no rows (its int8 products read rows)");
        return;
    }
    float before[R][C], after[R][C];
    for (int r = 0; r < R; r++) quant_dequantize_row(before[r], &m, r);
    check_true(quant_pack(&m) == 0 && m.packed == 16 && rows == 16,
               "packed layout: 17 rows pack their first block of 16");
    int bytes_ok = 1, scales_ok = 1, rest_ok = 1;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < C; c++)
            bytes_ok &= (uint8_t)q[(c / 4) * 64 + r * 4 + c % 4] ==
                        (uint8_t)(((r * 64 + c) % 255 - 127) + 128);
    for (int r = 0; r < 16; r++)
        for (int g = 0; g < G; g++) scales_ok &= scale[g * 16 + r] == (float)r + (float)g / 4.0f;
    for (int c = 0; c < C; c++) rest_ok &= q[16 * C + c] == (int8_t)((16 * 64 + c) % 255 - 127);
    rest_ok &= scale[16 * G] == 16.0f && scale[16 * G + 1] == 16.25f;
    check_true(bytes_ok, "packed layout: byte k*64 + r*4 + i = q[r][4k+i] + 128");
    check_true(scales_ok, "packed layout: scale g*16 + r = scale[r][g]");
    check_true(rest_ok, "packed layout: the 17th row (past the last whole block) as it was");
    int rows_ok = 1;
    for (int r = 0; r < R; r++) {
        quant_dequantize_row(after[r], &m, r);
        rows_ok &= memcmp(before[r], after[r], sizeof before[r]) == 0;
    }
    check_true(rows_ok, "packed layout: every row dequantizes as before packing");
    int8_t again[R * C];
    memcpy(again, q, sizeof again);
    check_true(quant_pack(&m) == 0 && m.packed == 16 && memcmp(again, q, sizeof again) == 0,
               "packed layout: a packed matrix packed again stays as it is");
    /* what the layout cannot hold stays in rows: a last group shorter than the rest (100
     * values in groups of 32), groups that are not whole quads (6), no values at all */
    QuantMatrix short_group = {q, scale, 16, 100, 32, 0, 0, NULL};
    QuantMatrix odd = {q, scale, 16, 96, 6, 0, 0, NULL};
    QuantMatrix empty = {q, scale, 16, 0, 32, 0, 0, NULL};
    check_true(quant_pack_rows(&short_group) == 0 && quant_pack_rows(&odd) == 0 &&
               quant_pack_rows(&empty) == 0,
               "packed layout: widths not a whole number of groups of whole quads, and width 0, "
               "are not packed");
}

/* Packed rows at the int8 extremes (every product +-127 x 127, groups of 1,024 and 32, so
 * each lane's sums reach 127 x 255 x 1,024 before the start takes 128 x the sum of x away)
 * against the reference's float steps written out, bit for bit; and a NaN scale in one
 * group of row 5 of w: NaN in that row's outputs only, as the reference. */
static void test_packed_extremes(void) {
    enum { N = 23, C = 2048, OC = 35 };   /* a tile's 6 rows, three more times, and 5 */
    QuantMatrix probe = {NULL, NULL, 16, 32, 32, 0, 0, NULL};
    if (quant_pack_rows(&probe) == 0) {
        check_skip("packed extremes: this build packs no rows (its int8 products read rows)");
        return;
    }
    static int8_t xq[N * C], wq[OC * C], pq[OC * C];
    static float xs[N * C / 4], ws[OC * C / 4], ps[OC * C / 4], out[N * OC];
    const int groups_of[] = {1024, 32};
    for (int gi = 0; gi < 2; gi++) {
        int group = groups_of[gi], groups = C / group;
        for (int i = 0; i < N * C; i++) xq[i] = (int8_t)((i / 3) % 2 ? 127 : -127);
        for (int i = 0; i < OC * C; i++) wq[i] = (int8_t)((i / 5) % 2 ? -127 : 127);
        for (int i = 0; i < N * groups; i++) xs[i] = 1.0f / (float)(1 + i % 3);
        for (int i = 0; i < OC * groups; i++) ws[i] = 0.5f + (float)(i % 4);
        for (int c = 0; c < C; c++) {   /* row 0 of w, and row 0 of x, all +127 */
            wq[c] = 127;
            xq[c] = 127;
        }
        for (int nan_row = 0; nan_row < 2; nan_row++) {
            if (nan_row) ws[5 * groups + groups - 1] = NAN;
            GemmCase c = {N, C, OC, group, 0, OC, xq, wq, xs, ws, NULL};
            memcpy(pq, wq, sizeof pq);
            memcpy(ps, ws, sizeof ps);
            QuantMatrix w = {pq, ps, OC, C, group, 0, 0, NULL};
            int ok = quant_pack(&w) == 0 && w.packed == 32;
            for (int rows_at_once = 0; rows_at_once < 2; rows_at_once++) {
                for (int i = 0; i < N * OC; i++) out[i] = 0.0f;
                if (rows_at_once)
                    quant_matmul_block(out, xq, xs, &w, NULL, N, 0, OC);
                else
                    for (int n = 0; n < N; n++)
                        quant_matmul_block(out + n * OC, xq + n * C, xs + n * groups, &w, NULL,
                                           1, 0, OC);
                for (int n = 0; n < N; n++)
                    for (int o = 0; o < OC; o++) {
                        float ref = reference_float(&c, NULL, n, o), got = out[n * OC + o];
                        ok &= isnan(ref) ? isnan(got) && nan_row && o == 5
                                         : memcmp(&ref, &got, sizeof ref) == 0;
                    }
            }
            check_true(ok, "packed extremes, groups of %d%s: the reference's float steps bit "
                       "for bit, all rows at once and each alone", group,
                       nan_row ? ", a NaN scale in row 5 (NaN there only)" : "");
        }
    }
}

/* The products of packed rows (where this build packs) against the reference's float steps
 * written out (reference_float, from the rows as they were), bit for bit, +-bias: all rows
 * of x at once, each row alone, and the columns cut between two threads at an odd column;
 * columns outside o0 .. o1-1 untouched. Shapes: one row (decode: whole blocks read as four
 * runs, and blocks cut by o0 and o1), 2 .. 13 rows (the tile of 6 rows by 2 blocks and
 * every smaller one), rows past the last whole block (in rows), ranges that start and end
 * inside a block, rows in several spans of groups, groups of 4 to 1,024 values, rows of x
 * in several chunks of packed rows. Each also with w marked cold, whose single rows ask
 * for w's lines ahead (simd_set_prefetch(1)): the same bits. */
static void test_packed(void) {
    const int shapes[][6] = {   /* N, cols, OC, group, o0, o1 */
        {1, 288, 16, 32, 0, 16},     {1, 768, 200, 32, 5, 197},  {1, 64, 147, 32, 0, 147},
        {1, 96, 130, 32, 17, 113},   {1, 32, 64, 32, 0, 64},     {2, 288, 50, 32, 3, 47},
        {3, 96, 48, 32, 0, 48},      {5, 64, 33, 32, 17, 33},    {6, 128, 64, 32, 0, 64},
        {7, 288, 81, 32, 1, 80},     {13, 96, 48, 32, 8, 40},    {12, 3072, 40, 32, 0, 40},
        {64, 288, 96, 32, 16, 96},   {70, 256, 64, 32, 3, 61},   {1, 4096, 37, 32, 2, 36},
        /* other groups of whole quads that fill the rows (llama2.c's 64, and down to 4) */
        {1, 768, 64, 64, 0, 64},     {7, 768, 48, 64, 5, 43},    {1, 100, 32, 20, 0, 32},
        {9, 100, 33, 20, 1, 33},     {1, 64, 16, 4, 0, 16},      {8, 64, 32, 4, 0, 32},
        {3, 2048, 32, 1024, 0, 32},  {13, 256, 40, 128, 2, 40},  {2, 48, 16, 16, 0, 16},
        /* rows of x in several chunks of packed rows (512 KiB a chunk): 102 rows a chunk,
         * 12 (a chunk and 8 rows), 2 (short of a tile) */
        {200, 4096, 32, 32, 5, 27},  {20, 12288, 32, 4, 0, 32},  {7, 65536, 17, 4, 0, 17},
        /* a prompt's many rows: whole blocks of 16 rows by 16 columns and the rows and part
         * blocks around them; one group, odd and even counts of groups, groups of 4 .. 64
         * values and of several 64s */
        {16, 32, 16, 32, 0, 16},     {17, 96, 48, 32, 0, 48},    {32, 288, 40, 32, 3, 37},
        {48, 768, 64, 64, 0, 64},    {33, 256, 32, 128, 0, 32},  {16, 2048, 32, 1024, 0, 32},
        {31, 100, 32, 20, 0, 32},    {16, 64, 48, 4, 16, 48},    {20, 48, 16, 16, 0, 16},
        {112, 768, 96, 32, 0, 96},
    };
    QuantMatrix probe = {NULL, NULL, 16, 32, 32, 0, 0, NULL};
    if (quant_pack_rows(&probe) == 0) {
        check_skip("packed products: this build packs no rows (its int8 products read rows)");
        return;
    }
    uint64_t seed = 29;
    for (int si = 0; si < COUNT(shapes); si++) {
        GemmCase c = {shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3],
                      shapes[si][4], shapes[si][5], NULL, NULL, NULL, NULL, NULL};
        size_t n_out = (size_t)c.N * (size_t)c.OC, nw = (size_t)c.OC * (size_t)c.cols;
        int groups = quant_groups(c.cols, c.group);
        float *all = malloc(n_out * sizeof(float)), *rows = malloc(n_out * sizeof(float));
        float *two = malloc(n_out * sizeof(float));
        int8_t *pq = malloc(nw);
        float *ps = malloc((size_t)c.OC * (size_t)groups * sizeof(float));
        if (!all || !rows || !two || !pq || !ps || gemm_case_fill(&c, &seed) != 0) {
            check_true(0, "packed N %d cols %d: out of memory", c.N, c.cols);
            free(all); free(rows); free(two); free(pq); free(ps);
            gemm_case_free(&c);
            return;
        }
        memcpy(pq, c.wq, nw);
        memcpy(ps, c.ws, (size_t)c.OC * (size_t)groups * sizeof(float));
        QuantMatrix w = {pq, ps, c.OC, c.cols, c.group, 0, 0, NULL};
        int packed_ok = quant_pack(&w) == 0 && w.packed == c.OC / 16 * 16;
        int same_ref = 1, outside_ok = 1, threads_ok = 1;
        for (int pass = 0; pass < 4; pass++) {   /* +-bias, w cold (its lines asked ahead) or not */
            const float *b = pass % 2 ? c.bias : NULL;
            w.cold = pass / 2;
            simd_set_prefetch(w.cold ? 1 : -1);
            for (size_t i = 0; i < n_out; i++) all[i] = rows[i] = two[i] = NAN;
            quant_matmul_block(all, c.xq, c.xs, &w, b, c.N, c.o0, c.o1);
            for (int n = 0; n < c.N; n++)
                quant_matmul_block(rows + (size_t)n * (size_t)c.OC,
                                   c.xq + (size_t)n * (size_t)c.cols,
                                   c.xs + (size_t)n * (size_t)groups, &w, b, 1, c.o0, c.o1);
            threads_ok &= two_threads(two, &c, &w, b);
            for (int n = 0; n < c.N; n++)
                for (int o = 0; o < c.OC; o++) {
                    size_t i = (size_t)n * (size_t)c.OC + (size_t)o;
                    if (o < c.o0 || o >= c.o1) {
                        outside_ok &= isnan(all[i]) && isnan(rows[i]) && isnan(two[i]);
                        continue;
                    }
                    float ref = reference_float(&c, b, n, o);
                    same_ref &= memcmp(&all[i], &ref, sizeof ref) == 0 &&
                                memcmp(&rows[i], &ref, sizeof ref) == 0 &&
                                memcmp(&two[i], &ref, sizeof ref) == 0;
                }
        }
        simd_set_prefetch(-1);
        check_true(packed_ok && threads_ok && same_ref && outside_ok,
                   "packed (%s) N %d, cols %d, OC %d (%d rows packed), columns %d..%d: the "
                   "reference's float steps bit for bit, all rows at once, each alone and "
                   "cut between 2 threads, +-bias, w cold or not", quant_kernel_name(), c.N,
                   c.cols, c.OC, w.packed, c.o0, c.o1 - 1);
        free(all); free(rows); free(two); free(pq); free(ps);
        gemm_case_free(&c);
    }
}

int main(void) {
    test_groups();
    test_quantize_properties();
    test_quantize_special();
    test_quantize_halves();
    test_dequantize();
    test_matmul_sizes();
    test_matmul_cuts();
    test_matmul_offsets();
    test_matmul_extremes();
    test_matmul_nan();
    test_simd_vs_portable();
    test_gemm();
    test_pack_layout();
    test_packed();
    test_packed_extremes();
    return check_summary("test_quant");
}

/* attention_kernels.c: additive scoring, attention pooling and Nystrom attention, the
 * kernels of tests/attention_kernels.h (docs/attention.md §2, §9, §7), for the tests.
 *
 * Each is written straight from its formula, one head at a time, in float with libm's
 * expf and tanhf: these kernels are checked against numbers, not timed. Read attention.c
 * for the attention the programs run.
 *
 * Legend: T positions, i query, j key, H hidden width of the additive score, P pooled
 * inputs of width C, A pooling hidden width, D head width, m Nystrom landmarks.
 */
#include "tests/attention_kernels.h"

#include <math.h>     /* expf, tanhf, fabsf, INFINITY */

/* a (n,) . b (n,), summed in order. */
static float dot_f(const float *a, const float *b, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += a[i] * b[i];
    return sum;
}

/* x (n,) = softmax(x), max-subtracted. */
static void softmax_inplace(float *x, int n) {
    float max = -INFINITY, sum = 0.0f;
    for (int i = 0; i < n; i++) if (x[i] > max) max = x[i];
    for (int i = 0; i < n; i++) sum += (x[i] = expf(x[i] - max));
    for (int i = 0; i < n; i++) x[i] /= sum;
}

/* ------------------------------------------------------------------------- */
/* Additive scoring (§2)                                                     */

void attention_additive(float *out, const float *q, const float *k, const float *v, int T,
                        int DQ, int DK, int DV, int H, const float *Wq, const float *Wk,
                        const float *wv, int causal, float *scratch) {
    float *u = scratch, *p = u + (long)T * H, *s = p + H;   /* (T, H), (H,), (T,) */
    for (int j = 0; j < T; j++)          /* u_j = W_k k_j, once per key */
        for (int c = 0; c < H; c++)
            u[(long)j * H + c] = dot_f(Wk + (long)c * DK, k + (long)j * DK, DK);
    for (int i = 0; i < T; i++) {
        for (int c = 0; c < H; c++) p[c] = dot_f(Wq + (long)c * DQ, q + (long)i * DQ, DQ);
        int n = causal ? i + 1 : T;
        for (int j = 0; j < n; j++) {    /* s_ij = w_v . tanh(p + u_j) */
            float score = 0.0f;
            for (int c = 0; c < H; c++) score += wv[c] * tanhf(p[c] + u[(long)j * H + c]);
            s[j] = score;
        }
        softmax_inplace(s, n);
        float *out_i = out + (long)i * DV;
        for (int e = 0; e < DV; e++) out_i[e] = 0.0f;
        for (int j = 0; j < n; j++)
            for (int e = 0; e < DV; e++) out_i[e] += s[j] * v[(long)j * DV + e];
    }
}

/* ------------------------------------------------------------------------- */
/* Attention pooling with a learned query (§9)                               */

void attention_pool(float *out, const float *x, int P, int C, int A, const float *W,
                    const float *b, const float *c, float *scratch) {
    float *s = scratch, *hidden = s + P;   /* (P,), (A,) */
    for (int p = 0; p < P; p++) {          /* s_p = c . relu(W x_p + b) */
        float score = 0.0f;
        for (int a = 0; a < A; a++) {
            hidden[a] = dot_f(W + (long)a * C, x + (long)p * C, C) + b[a];
            score += c[a] * (hidden[a] > 0.0f ? hidden[a] : 0.0f);
        }
        s[p] = score;
    }
    softmax_inplace(s, P);
    for (int i = 0; i < C; i++) out[i] = 0.0f;
    for (int p = 0; p < P; p++)
        for (int i = 0; i < C; i++) out[i] += s[p] * x[(long)p * C + i];
}

/* ------------------------------------------------------------------------- */
/* Nystrom attention, not causal (§7)                                        */

size_t attention_nystrom_scratch_floats(int T, int D, int m) {
    /* F (T, m), B (m, T), landmarks 2 (m, D), B V and Z B V 2 (m, D), six (m, m) */
    return (size_t)2 * T * m + (size_t)4 * m * D + (size_t)6 * m * m;
}

/* c (n, p) = a (n, r) . b (r, p) */
static void matmul_nn(float *c, const float *a, const float *b, int n, int r, int p) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < p; j++) c[(long)i * p + j] = 0.0f;
        for (int l = 0; l < r; l++) {
            float a_il = a[(long)i * r + l];
            for (int j = 0; j < p; j++) c[(long)i * p + j] += a_il * b[(long)l * p + j];
        }
    }
}

/* out (n, n) = alpha I - x (n, n) */
static void identity_minus(float *out, float alpha, const float *x, int n) {
    for (int i = 0; i < n * n; i++) out[i] = -x[i];
    for (int i = 0; i < n; i++) out[i * n + i] += alpha;
}

/* scores (n, p) = softmax over each row of (a (n, D) . b (p, D)^T) * s */
static void softmax_scores(float *scores, const float *a, const float *b, int n, int p, int D,
                           float s) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < p; j++)
            scores[(long)i * p + j] = dot_f(a + (long)i * D, b + (long)j * D, D) * s;
        softmax_inplace(scores + (long)i * p, p);
    }
}

void attention_nystrom(float *out, const float *q, const float *k, const float *v, int T, int D,
                       int m, int iters, float scale, float *scratch) {
    float *F = scratch, *B = F + (long)T * m, *Qm = B + (long)m * T, *Km = Qm + (long)m * D;
    float *BV = Km + (long)m * D, *ZBV = BV + (long)m * D, *A = ZBV + (long)m * D;
    float *Z = A + m * m, *AZ = Z + m * m, *t1 = AZ + m * m, *t2 = t1 + m * m, *Z2 = t2 + m * m;
    int seg = T / m;
    /* landmarks: segment means of q and k (unscaled; the scale goes on the scores) */
    for (int a = 0; a < m; a++) {
        for (int e = 0; e < D; e++) {
            float sq = 0.0f, sk = 0.0f;
            for (int r = a * seg; r < (a + 1) * seg; r++) {
                sq += q[(long)r * D + e];
                sk += k[(long)r * D + e];
            }
            Qm[(long)a * D + e] = sq / (float)seg;
            Km[(long)a * D + e] = sk / (float)seg;
        }
    }
    softmax_scores(F, q, Km, T, m, D, scale);    /* (T, m) */
    softmax_scores(A, Qm, Km, m, m, D, scale);   /* (m, m) */
    softmax_scores(B, Qm, k, m, T, D, scale);    /* (m, T) */
    /* Z_0 = A^T / (max column sum of A x max row sum of A) */
    float col_max = 0.0f, row_max = 0.0f;
    for (int j = 0; j < m; j++) {
        float col = 0.0f, row = 0.0f;
        for (int i = 0; i < m; i++) { col += fabsf(A[i * m + j]); row += fabsf(A[j * m + i]); }
        if (col > col_max) col_max = col;
        if (row > row_max) row_max = row;
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) Z[i * m + j] = A[j * m + i] / (col_max * row_max);
    /* Z <- Z (13 I - AZ (15 I - AZ (7 I - AZ))) / 4 */
    for (int it = 0; it < iters; it++) {
        matmul_nn(AZ, A, Z, m, m, m);
        identity_minus(t1, 7.0f, AZ, m);
        matmul_nn(t2, AZ, t1, m, m, m);
        identity_minus(t1, 15.0f, t2, m);
        matmul_nn(t2, AZ, t1, m, m, m);
        identity_minus(t1, 13.0f, t2, m);
        matmul_nn(Z2, Z, t1, m, m, m);
        for (int i = 0; i < m * m; i++) Z[i] = 0.25f * Z2[i];
    }
    matmul_nn(BV, B, v, m, T, D);
    matmul_nn(ZBV, Z, BV, m, m, D);
    matmul_nn(out, F, ZBV, T, m, D);
}

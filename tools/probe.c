/* probe.c: this machine's peaks, measured: memory read bandwidth, FMA throughput and int8
 * dot-product throughput.
 *
 * Read bandwidth: sum a float array far larger than any cache (PROBE_MIB), each thread its
 * own contiguous part, as one sequential run or as four side by side (as decode reads),
 * best of PROBE_PASSES passes. FMA throughput: PROBE_CHAINS independent vector
 * accumulators, each a = a * m + c, enough to cover the FMA latency on every pipe.
 * int8 throughput: the same chains of the int8 kernels' multiply-add of 8-bit values into
 * 32-bit lanes (AVX-512 VNNI vpdpbusd on 512 bits, AVX-VNNI on 256, else AVX2's vpmaddubsw,
 * vpmaddwd, vpaddd), counted as two operations a product, as the int8 GEMM's GOP/s are.
 * The int8 tile's ceiling: the int8 prefill tile's own instructions for a group of 32
 * values (simd/quant_x86.c: eight multiply-add steps into a register of int32 sums, then
 * the reference's float steps: a conversion, two multiplies and an add), with as many sums
 * as the tile has, in registers; the same unit, so ceiling / peak is the most of the int8
 * peak that tile can reach on this core (the float steps share pipes with the int8 ones on
 * some cores and not on others).
 * Both at 1 and 2 threads (OpenMP; without it, 1 only). The kernels use AVX-512 or AVX2+FMA
 * intrinsics when the build targets them, else plain C. Prints `key value` lines for
 * tools/bench.sh, e.g. `read_bw_gbs 1 12.3`; asserts nothing. Usage: probe [MiB]
 */
#include <errno.h>      /* errno, ERANGE */
#include <stdint.h>     /* int8_t, uint8_t, int32_t */
#include <stdio.h>      /* printf, fopen, fgets */
#include <stdlib.h>     /* aligned_alloc, free, strtol */
#include <string.h>     /* strncmp, strchr, strlen, memset */
#include <time.h>       /* clock_gettime */
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>  /* _mm512_* / _mm256_* intrinsics */
#endif
#ifdef _OPENMP
#include <omp.h>        /* omp_get_thread_num, omp_get_num_threads */
#endif

#define PROBE_MIB 512            /* default array size: far beyond any L3 of this class */
#define PROBE_MAX_MIB (1 << 16)  /* bound on the size argument (64 GiB) */
#define PROBE_PASSES 6           /* bandwidth passes per thread count, half of each
                                  * order; the best counts */
#define PROBE_FMA_ITERS 20000000L /* loop trips per thread per pass: 7.7 GFLOP at AVX-512 */
#define PROBE_FMA_PASSES 3       /* FMA passes per thread count; the best counts */
#define PROBE_CHAINS 12          /* independent accumulators: > latency x pipes (4 x 2) */
#define PROBE_SUMS 4             /* independent vector sums in the bandwidth loop (s0..s3) */
#define PROBE_MAX_THREADS 2      /* thread counts probed: 1 .. this */
#define PROBE_FMA_MUL 0.9999f    /* a = a * m + c converges to c / (1 - m): stays finite */
#define PROBE_FMA_ADD 0.0001f
#define BYTES_PER_MIB (1024.0 * 1024.0)
#define FLOPS_PER_FMA 2          /* a multiply and an add per lane */

#if defined(__AVX512F__)
#define PROBE_ISA "avx512"
#define PROBE_LANES 16           /* floats per __m512 */
#elif defined(__AVX2__) && defined(__FMA__)
#define PROBE_ISA "avx2+fma"
#define PROBE_LANES 8            /* floats per __m256 */
#else
#define PROBE_ISA "portable"
#define PROBE_LANES 8            /* floats per emulated vector (plain C multiply-add) */
#endif

/* Results land here so the compiler cannot drop the loops that compute them. */
static volatile float sink;

/* Seconds on a monotonic clock. */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- kernels (one thread's work) ---- */

/* Sum of x's floats at i + k apart, for k = 0 .. PROBE_SUMS-1 and i = 0, step, 2 step, ...
 * below count, PROBE_SUMS independent vector sums so that the add latency never limits
 * the memory stream: one sequential run (apart PROBE_LANES, step PROBE_SUMS PROBE_LANES),
 * or PROBE_SUMS runs side by side, apart floats from each other (step PROBE_LANES). */
static float sum_floats(const float *x, size_t count, size_t step, size_t apart) {
#if defined(__AVX512F__)
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < count; i += step) {
        s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x + i));
        s1 = _mm512_add_ps(s1, _mm512_loadu_ps(x + i + apart));
        s2 = _mm512_add_ps(s2, _mm512_loadu_ps(x + i + 2 * apart));
        s3 = _mm512_add_ps(s3, _mm512_loadu_ps(x + i + 3 * apart));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < count; i += step) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + apart));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(x + i + 2 * apart));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(x + i + 3 * apart));
    }
    float lanes[PROBE_LANES];
    _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    float total = 0.0f;
    for (int j = 0; j < PROBE_LANES; j++) total += lanes[j];
    return total;
#else
    float s[PROBE_SUMS][PROBE_LANES] = {{0}};   /* s[k][j] sums x[i + k apart + j] */
    for (size_t i = 0; i < count; i += step)
        for (int k = 0; k < PROBE_SUMS; k++)
            for (int j = 0; j < PROBE_LANES; j++) s[k][j] += x[i + (size_t)k * apart + j];
    float total = 0.0f;
    for (int k = 0; k < PROBE_SUMS; k++)
        for (int j = 0; j < PROBE_LANES; j++) total += s[k][j];
    return total;
#endif
}

/* Runs iters trips of PROBE_CHAINS independent multiply-adds on vectors of PROBE_LANES
 * floats starting from seed; returns a sum of the accumulators. */
static float fma_chains(long iters, float seed) {
    float total = 0.0f;
#if defined(__AVX512F__)
    __m512 a[PROBE_CHAINS];
    const __m512 m = _mm512_set1_ps(PROBE_FMA_MUL), c = _mm512_set1_ps(PROBE_FMA_ADD);
    for (int k = 0; k < PROBE_CHAINS; k++) a[k] = _mm512_set1_ps(seed + (float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < PROBE_CHAINS; k++) a[k] = _mm512_fmadd_ps(a[k], m, c);
    for (int k = 0; k < PROBE_CHAINS; k++) total += _mm512_reduce_add_ps(a[k]);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 a[PROBE_CHAINS];
    const __m256 m = _mm256_set1_ps(PROBE_FMA_MUL), c = _mm256_set1_ps(PROBE_FMA_ADD);
    for (int k = 0; k < PROBE_CHAINS; k++) a[k] = _mm256_set1_ps(seed + (float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < PROBE_CHAINS; k++) a[k] = _mm256_fmadd_ps(a[k], m, c);
    float lanes[PROBE_LANES];
    for (int k = 0; k < PROBE_CHAINS; k++) {
        _mm256_storeu_ps(lanes, a[k]);
        for (int j = 0; j < PROBE_LANES; j++) total += lanes[j];
    }
#else
    float a[PROBE_CHAINS * PROBE_LANES];   /* (CHAINS, LANES) */
    for (int k = 0; k < PROBE_CHAINS * PROBE_LANES; k++) a[k] = seed + (float)k;
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < PROBE_CHAINS * PROBE_LANES; k++)
            a[k] = a[k] * PROBE_FMA_MUL + PROBE_FMA_ADD;
    for (int k = 0; k < PROBE_CHAINS * PROBE_LANES; k++) total += a[k];
#endif
    return total;
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define PROBE_INT8_ISA "avx512-vnni"
#define PROBE_INT8_PRODUCTS 64   /* products per instruction chain step: 16 lanes x 4 */
#elif defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
#define PROBE_INT8_ISA "avx-vnni"
#define PROBE_INT8_PRODUCTS 32
#elif defined(__AVX2__)
#define PROBE_INT8_ISA "avx2"
#define PROBE_INT8_PRODUCTS 32
#else
#define PROBE_INT8_ISA "portable"
#define PROBE_INT8_PRODUCTS 8    /* 8 lanes, one multiply-add each, in plain C */
#endif

/* Runs iters trips of PROBE_CHAINS independent int8 multiply-adds of PROBE_INT8_PRODUCTS
 * products each (into 32-bit lanes, which wrap harmlessly); returns a sum of the lanes. */
static float int8_chains(long iters, float seed) {
    int base = (int)seed;
    float total = 0.0f;
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
    __m512i a[PROBE_CHAINS];
    const __m512i u = _mm512_set1_epi8(3), v = _mm512_set1_epi8(-5);
    for (int k = 0; k < PROBE_CHAINS; k++) a[k] = _mm512_set1_epi32(base + k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < PROBE_CHAINS; k++) a[k] = _mm512_dpbusd_epi32(a[k], u, v);
    for (int k = 0; k < PROBE_CHAINS; k++) total += (float)_mm512_reduce_add_epi32(a[k]);
#elif defined(__AVX2__)
    __m256i a[PROBE_CHAINS];
    const __m256i v = _mm256_set1_epi8(-5);
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
    const __m256i u = _mm256_set1_epi8(3);
#endif
    for (int k = 0; k < PROBE_CHAINS; k++) a[k] = _mm256_set1_epi32(base + k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < PROBE_CHAINS; k++) {
#if defined(__AVXVNNI__)
            a[k] = _mm256_dpbusd_avx_epi32(a[k], u, v);
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
            a[k] = _mm256_dpbusd_epi32(a[k], u, v);
#else
            /* the chain runs through the multiplies too (a[k]'s bytes as the unsigned
             * operand), or the compiler would hoist them out of the loop */
            a[k] = _mm256_add_epi32(a[k], _mm256_madd_epi16(_mm256_maddubs_epi16(a[k], v),
                                                            _mm256_set1_epi16(1)));
#endif
        }
    int lanes[8];
    for (int k = 0; k < PROBE_CHAINS; k++) {
        _mm256_storeu_si256((__m256i *)lanes, a[k]);
        for (int j = 0; j < 8; j++) total += (float)lanes[j];
    }
#else
    unsigned a[PROBE_CHAINS * 8];   /* (CHAINS, 8 lanes) */
    for (int k = 0; k < PROBE_CHAINS * 8; k++) a[k] = (unsigned)(base + k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < PROBE_CHAINS * 8; k++) a[k] = a[k] * 3u + 7u;
    for (int k = 0; k < PROBE_CHAINS * 8; k++) total += (float)a[k];
#endif
    return total;
}

/* The int8 tile's ceiling: iters trips of a whole tile (PROBE_TILE_V registers of rows x 4
 * columns) over one group: PROBE_GROUP_STEPS steps of loading each register of x and
 * broadcasting each column's four w, PROBE_INT8_PRODUCTS products a register and column into
 * its int32 sums (VNNI: x + 128 against w; AVX2: |x| against w with x's sign), then each
 * sum's float steps, sum += float(sums) * (x's scales * w's scale), the scales loaded too.
 * The pointers are made opaque at every step, so each load happens again, as the tile's do.
 * Returns a sum of the float sums. */
#define PROBE_GROUP_STEPS 8      /* a group of 32 values: 8 quads a lane */
#define PROBE_TILE_COLS 4
#define PROBE_OPAQUE(p) __asm__ volatile("" : "+r"(p))
/* the steps unrolled, so that the sums stay in registers (gcc and clang take this) */
#define PROBE_UNROLL _Pragma("GCC unroll 8")
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define PROBE_TILE_V 2
static float int8_tile(long iters, float seed) {
    enum { V = PROBE_TILE_V, C = PROBE_TILE_COLS };
    static uint8_t xq_[V][64];
    static int32_t wq_[C];
    static float xs_[V][16], ws_[C];
    uint8_t(*xq)[64] = xq_;
    int32_t *wq = wq_;
    float(*xs)[16] = xs_, *ws = ws_;
    __m512i d[V][C];
    __m512 f[V][C];
    memset(xq_, 3, sizeof xq_);
    for (int c = 0; c < C; c++) wq[c] = -5 * (c + 1), ws[c] = 1e-3f;
    for (int h = 0; h < V; h++)
        for (int j = 0; j < 16; j++) xs[h][j] = 1e-3f;
    for (int h = 0; h < V; h++)
        for (int c = 0; c < C; c++) {
            d[h][c] = _mm512_set1_epi32((int)seed + h + c);
            f[h][c] = _mm512_setzero_ps();
        }
    for (long i = 0; i < iters; i++) {
        PROBE_UNROLL
        for (int s = 0; s < PROBE_GROUP_STEPS; s++) {
            PROBE_OPAQUE(xq);
            PROBE_OPAQUE(wq);
            __m512i x[V];
            for (int h = 0; h < V; h++) x[h] = _mm512_loadu_si512(xq[h]);
            for (int c = 0; c < C; c++) {
                __m512i w = _mm512_set1_epi32(wq[c]);
                for (int h = 0; h < V; h++) d[h][c] = _mm512_dpbusd_epi32(d[h][c], x[h], w);
            }
        }
        PROBE_OPAQUE(xs);
        PROBE_OPAQUE(ws);
        for (int h = 0; h < V; h++) {
            __m512 x_scale = _mm512_loadu_ps(xs[h]);
            for (int c = 0; c < C; c++) {
                __m512 scale = _mm512_mul_ps(x_scale, _mm512_set1_ps(ws[c]));
                f[h][c] = _mm512_add_ps(f[h][c], _mm512_mul_ps(_mm512_cvtepi32_ps(d[h][c]), scale));
            }
        }
    }
    float total = 0.0f;
    for (int h = 0; h < V; h++)
        for (int c = 0; c < C; c++) total += _mm512_reduce_add_ps(f[h][c]);
    return total;
}
#elif defined(__AVX2__)
#define PROBE_TILE_V 1
static float int8_tile(long iters, float seed) {
    enum { C = PROBE_TILE_COLS };
    static int8_t xq_[32];
    static int32_t wq_[C];
    static float xs_[8], ws_[C];
    int8_t *xq = xq_;
    int32_t *wq = wq_;
    float *xs = xs_, *ws = ws_;
    __m256i d[C];
    __m256 f[C];
    memset(xq_, 3, sizeof xq_);
    for (int c = 0; c < C; c++) wq[c] = -5 * (c + 1), ws[c] = 1e-3f;
    for (int j = 0; j < 8; j++) xs[j] = 1e-3f;
    for (int c = 0; c < C; c++) {
        d[c] = _mm256_set1_epi32((int)seed + c);
        f[c] = _mm256_setzero_ps();
    }
    for (long i = 0; i < iters; i++) {
        PROBE_UNROLL
        for (int s = 0; s < PROBE_GROUP_STEPS; s++) {
            PROBE_OPAQUE(xq);
            PROBE_OPAQUE(wq);
            __m256i x = _mm256_loadu_si256((const __m256i *)xq);
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
            for (int c = 0; c < C; c++)
#if defined(__AVXVNNI__)
                d[c] = _mm256_dpbusd_avx_epi32(d[c], x, _mm256_set1_epi32(wq[c]));
#else
                d[c] = _mm256_dpbusd_epi32(d[c], x, _mm256_set1_epi32(wq[c]));
#endif
#else
            __m256i ax = _mm256_abs_epi8(x);   /* once a register of rows, as in the tile */
            for (int c = 0; c < C; c++) {
                __m256i sw = _mm256_sign_epi8(_mm256_set1_epi32(wq[c]), x);
                d[c] = _mm256_add_epi32(d[c], _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sw),
                                                                _mm256_set1_epi16(1)));
            }
#endif
            /* each step's sums in their registers, as the tile keeps them (IN_REGISTER):
             * else the compiler may sum a group's eight steps as a tree */
            for (int c = 0; c < C; c++) __asm__ volatile("" : "+x"(d[c]));
        }
        PROBE_OPAQUE(xs);
        PROBE_OPAQUE(ws);
        __m256 x_scale = _mm256_loadu_ps(xs);
        for (int c = 0; c < C; c++) {
            __m256 scale = _mm256_mul_ps(x_scale, _mm256_set1_ps(ws[c]));
            f[c] = _mm256_add_ps(f[c], _mm256_mul_ps(_mm256_cvtepi32_ps(d[c]), scale));
        }
    }
    __m256 all = f[0];
    for (int c = 1; c < C; c++) all = _mm256_add_ps(all, f[c]);
    float lanes[8], total = 0.0f;
    _mm256_storeu_ps(lanes, all);
    for (int j = 0; j < 8; j++) total += lanes[j];
    return total;
}
#endif

/* ---- the probes, at a given thread count ---- */

/* Best read bandwidth (GB/s) of summing x (n,) split into threads contiguous parts;
 * each part a multiple of PROBE_SUMS * PROBE_LANES floats (n is). Passes alternate between
 * reading each part as one sequential run and as PROBE_SUMS runs a quarter of it apart, side
 * by side, as decode reads a large matrix (simd/vec_kernels.c, dot_rows_vector; the int8
 * rows likewise): the best of either counts. (Zen 5 VM, one thread, 440 MiB: one run 33-37
 * GB/s, four 37-42.) */
static double read_bandwidth(const float *x, size_t n, int threads) {
    double best = 0.0;
    for (int pass = 0; pass < PROBE_PASSES; pass++) {
        int side_by_side = pass % 2;   /* 0: one sequential run, 1: PROBE_SUMS runs */
        float partial[PROBE_MAX_THREADS] = {0};
        double start = now();
        /* each thread sums its own contiguous part: disjoint reads, one write each */
        #pragma omp parallel num_threads(threads)
        {
            int t = 0, nt = 1;
#ifdef _OPENMP
            t = omp_get_thread_num();
            nt = omp_get_num_threads();
#endif
            size_t block = PROBE_SUMS * PROBE_LANES, blocks = n / block;
            size_t begin = blocks * (size_t)t / (size_t)nt * block;
            size_t end = blocks * (size_t)(t + 1) / (size_t)nt * block;
            size_t quarter = (end - begin) / PROBE_SUMS;   /* a multiple of PROBE_LANES */
            partial[t] = side_by_side ? sum_floats(x + begin, quarter, PROBE_LANES, quarter)
                                      : sum_floats(x + begin, end - begin, block, PROBE_LANES);
        }
        double seconds = now() - start;
        for (int t = 0; t < threads; t++) sink += partial[t];
        double gbs = (double)n * sizeof(float) / seconds / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

/* Best throughput (G operations/s) with every one of threads threads running iters trips of
 * chains (fma_chains, int8_chains or int8_tile), ops operations a trip. */
static double chain_throughput(float (*chains)(long, float), long iters, double ops,
                               int threads) {
    double best = 0.0;
    for (int pass = 0; pass < PROBE_FMA_PASSES; pass++) {
        float partial[PROBE_MAX_THREADS] = {0};
        int ran = 1;
        double start = now();
        /* each thread runs its own chains in registers and writes one result */
        #pragma omp parallel num_threads(threads)
        {
            int t = 0;
#ifdef _OPENMP
            t = omp_get_thread_num();
            if (t == 0) ran = omp_get_num_threads();
#endif
            partial[t] = chains(iters, (float)(pass + t));
        }
        double seconds = now() - start;
        for (int t = 0; t < threads; t++) sink += partial[t];
        double total = (double)ran * (double)iters * ops;
        if (total / seconds / 1e9 > best) best = total / seconds / 1e9;
    }
    return best;
}

/* Prints the CPU's "model name" from /proc/cpuinfo, or "unknown". */
static void print_cpu(void) {
    char line[256];
    const char *key = "model name";
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, key, strlen(key)) != 0 || !colon) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        colon[strcspn(colon, "\n")] = '\0';
        printf("cpu %s\n", colon);
        fclose(f);
        return;
    }
    if (f) fclose(f);
    printf("cpu unknown\n");
}

int main(int argc, char **argv) {
    long mib = PROBE_MIB;
    char *end = NULL;
    if (argc == 2) {
        errno = 0;
        mib = strtol(argv[1], &end, 10);
    }
    if (argc > 2 || (argc == 2 && (end == argv[1] || *end != '\0' || errno == ERANGE ||
                                   mib < 1 || mib > PROBE_MAX_MIB))) {
        fprintf(stderr, "usage: probe [MiB]  (array size for the bandwidth probe, 1..%d, "
                "default %d)\n", PROBE_MAX_MIB, PROBE_MIB);
        return 2;
    }
    size_t block = PROBE_SUMS * PROBE_LANES;
    size_t n = (size_t)((double)mib * BYTES_PER_MIB / sizeof(float)) / block * block;
    /* on cache lines (n floats are whole lines): a 512-bit load that straddles two lines
     * takes two line accesses, and the bandwidth would then be that of the split loads, not
     * of the memory */
    float *x = aligned_alloc(64, n * sizeof(float));
    if (!x) {
        fprintf(stderr, "probe: out of memory for a %ld MiB array\n", mib);
        return 1;
    }
    int max_threads = 1;
#ifdef _OPENMP
    max_threads = PROBE_MAX_THREADS;
#endif
    /* touch every page (in parallel, so each thread's part is local to it) */
    #pragma omp parallel for schedule(static) num_threads(max_threads)
    for (size_t i = 0; i < n; i++) x[i] = 1.0f;

    print_cpu();
    printf("isa %s\n", PROBE_ISA);
    printf("array_mib %ld\n", mib);
    for (int threads = 1; threads <= max_threads; threads++)
        printf("read_bw_gbs %d %.1f\n", threads, read_bandwidth(x, n, threads));
    for (int threads = 1; threads <= max_threads; threads++)
        printf("fma_gflops %d %.1f\n", threads,
               chain_throughput(fma_chains, PROBE_FMA_ITERS,
                                PROBE_CHAINS * PROBE_LANES * FLOPS_PER_FMA, threads));
    printf("int8_isa %s\n", PROBE_INT8_ISA);
    for (int threads = 1; threads <= max_threads; threads++)
        printf("int8_gops %d %.1f\n", threads,
               chain_throughput(int8_chains, PROBE_FMA_ITERS,
                                PROBE_CHAINS * PROBE_INT8_PRODUCTS * 2.0, threads));
#ifdef PROBE_TILE_V
    /* a trip: a group's steps for each register and column of the tile */
    for (int threads = 1; threads <= max_threads; threads++)
        printf("int8_tile_gops %d %.1f\n", threads,
               chain_throughput(int8_tile, PROBE_FMA_ITERS / PROBE_GROUP_STEPS,
                                PROBE_GROUP_STEPS * PROBE_TILE_V * PROBE_TILE_COLS *
                                    PROBE_INT8_PRODUCTS * 2.0, threads));
#endif
    free(x);
    return 0;
}

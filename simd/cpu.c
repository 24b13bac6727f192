/* cpu.c: what the kernels ask of the core they run on, beyond what the build targets.
 *
 * The build fixes the instruction set (simd.h); some choices depend on the core itself and
 * are read from it once, at run time. One so far: whether decode asks for a matrix's lines
 * ahead of its reads (simd_prefetch_rows), which pays on one core and costs on another
 * that runs the same instructions.
 */
#include "simd/simd.h"

#include <stdatomic.h>    /* the core's choice, read once by whichever thread asks first */

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>        /* __get_cpuid: the compiler's own header */

/* 1 on the cores where decode's hints were measured to pay: AMD's family 26 (Zen 5) and
 * later, and Intel's (a Xeon with AMX, 2026-12-03: fp32 decode 1.02-1.06x; no Intel client
 * core measured). AMD's family 25 (Zen 3, Zen 4) and the rest: 0. */
static int core_prefetches_rows(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    int amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;     /* AuthenticAMD */
    int intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;   /* GenuineIntel */
    if (intel) return 1;
    if (!amd || !__get_cpuid(1, &a, &b, &c, &d)) return 0;
    unsigned family = (a >> 8) & 0xfu;
    if (family == 0xfu) family += (a >> 20) & 0xffu;   /* the extended family */
    return family >= 0x1au;
}
#else
static int core_prefetches_rows(void) { return 0; }
#endif

static atomic_int prefetch_rows = -1;   /* -1: the core's choice, not read yet */

int simd_prefetch_rows(void) {
    int on = atomic_load_explicit(&prefetch_rows, memory_order_relaxed);
    if (on < 0) {   /* threads that race here each store the same value */
        on = core_prefetches_rows();
        atomic_store_explicit(&prefetch_rows, on, memory_order_relaxed);
    }
    return on;
}

void simd_set_prefetch_rows(int on) {
    atomic_store_explicit(&prefetch_rows, on < 0 ? -1 : on != 0, memory_order_relaxed);
}

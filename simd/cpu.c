/* cpu.c: what the kernels ask of the core they run on, beyond what the build targets.
 *
 * The build fixes the instruction set (simd.h); some choices depend on the core itself and
 * are read from it once, at run time: whether decode asks for a matrix's lines ahead of its
 * reads (simd_prefetch_rows), which pays on one core and costs on another that runs the
 * same instructions, and whether the core has AMX's tiles (simd_amx), which a build for
 * any AVX-512 VNNI core may use where they are.
 */
#if defined(__linux__)
#define _DEFAULT_SOURCE   /* syscall, which -D_POSIX_C_SOURCE alone hides */
#endif
#include "simd/simd.h"

#include <stdatomic.h>    /* the core's choice, read once by whichever thread asks first */

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>        /* __get_cpuid: the compiler's own header */

/* 1 on the cores where decode's hints were measured to pay: AMD's family 26 (Zen 5) and
 * later. Family 25 (Zen 3, Zen 4), Intel's cores and the rest: 0. */
static int core_prefetches_rows(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    int amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;   /* AuthenticAMD */
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

#if defined(SIMD_Q8_AMX)
#include <sys/syscall.h>  /* SYS_arch_prctl */
#include <unistd.h>       /* syscall */

/* 1 if the core has AMX's tiles and int8 products (CPUID leaf 7: EDX bits 24, 25) and
 * Linux lets this process use them: the kernel leaves a tile's state off until a process
 * asks (arch_prctl ARCH_REQ_XCOMP_PERM, 0x1023, for XTILEDATA, state component 18), and a
 * tile instruction before that ends the process (SIGILL). The grant is the process's, for
 * all its threads. */
static int core_amx(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (!(d & (1u << 24)) || !(d & (1u << 25))) return 0;
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}
#else
static int core_amx(void) { return 0; }
#endif

static atomic_int amx_core = -1;   /* -1: not read yet */
static atomic_int amx_on = 1;      /* simd_set_amx's switch */

int simd_amx(void) {
    int has = atomic_load_explicit(&amx_core, memory_order_relaxed);
    if (has < 0) {   /* threads that race here each ask, and store the same value */
        has = core_amx();
        atomic_store_explicit(&amx_core, has, memory_order_relaxed);
    }
    return has && atomic_load_explicit(&amx_on, memory_order_relaxed);
}

void simd_set_amx(int on) { atomic_store_explicit(&amx_on, on != 0, memory_order_relaxed); }

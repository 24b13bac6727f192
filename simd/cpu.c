/* cpu.c: what the kernels ask of the core they run on, beyond what the build targets.
 *
 * The build fixes the instruction set (simd.h); some choices depend on the core itself and
 * are read from it once, at run time. So far: whether decode asks for a matrix's lines ahead
 * of its reads (simd_prefetch_rows, simd_prefetch_packed), which pays on one core and costs
 * on another that runs the same instructions.
 */
#include "simd/simd.h"

#include <stdatomic.h>    /* the core's choice, read once by whichever thread asks first */

enum { HINT_ROWS = 1, HINT_PACKED = 2 };   /* the bits of the core's choice */

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>        /* __get_cpuid: the compiler's own header */

/* The hints that were measured to pay on this core: in rows, on AMD's family 26 (Zen 5)
 * and later, and on Intel's (a Xeon with AMX, 2026-12-03: fp32 decode 1.02-1.06x); in
 * packed rows, on Intel's (the Xeon: int8 decode 1.11-1.15x; Zen 5, 2026-12-04: 0.85-0.94x
 * at one thread, level at two). AMD's family 25 (Zen 3, Zen 4) and the rest: none. No
 * Intel client core measured. */
static int core_hints(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    int amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;     /* AuthenticAMD */
    int intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;   /* GenuineIntel */
    if (intel) return HINT_ROWS | HINT_PACKED;
    if (!amd || !__get_cpuid(1, &a, &b, &c, &d)) return 0;
    unsigned family = (a >> 8) & 0xfu;
    if (family == 0xfu) family += (a >> 20) & 0xffu;   /* the extended family */
    return family >= 0x1au ? HINT_ROWS : 0;
}
#else
static int core_hints(void) { return 0; }
#endif

static atomic_int hints = -1;   /* the core's HINT_ bits; -1: not read yet */

static int hint(int bit) {
    int on = atomic_load_explicit(&hints, memory_order_relaxed);
    if (on < 0) {   /* threads that race here each store the same value */
        on = core_hints();
        atomic_store_explicit(&hints, on, memory_order_relaxed);
    }
    return (on & bit) != 0;
}

int simd_prefetch_rows(void) { return hint(HINT_ROWS); }

int simd_prefetch_packed(void) { return hint(HINT_PACKED); }

void simd_set_prefetch(int on) {
    atomic_store_explicit(&hints, on < 0 ? -1 : on ? HINT_ROWS | HINT_PACKED : 0,
                          memory_order_relaxed);
}

/* hash.c: FNV-1a over byte strings, 32 and 64 bits (see hash.h). The mixing function
 * and the dropout rule are in hash.h itself.
 */
#include "hash.h"

#include <stddef.h>   /* size_t */
#include <stdint.h>   /* uint32_t, uint64_t */

#define FNV32_PRIME 16777619u                /* FNV-1a 32-bit prime: 2^24 + 2^8 + 0x93 */
#define FNV64_PRIME 0x100000001B3ull         /* FNV-1a 64-bit prime: 2^40 + 2^8 + 0xB3 */

uint32_t hash_fnv1a32(const void *bytes, size_t n) {
    const unsigned char *b = bytes;
    uint32_t hash = HASH_FNV32_OFFSET;
    for (size_t i = 0; i < n; i++) hash = (hash ^ b[i]) * FNV32_PRIME;
    return hash;
}

uint64_t hash_fnv1a64(uint64_t hash, const void *bytes, size_t n) {
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; i++) hash = (hash ^ b[i]) * FNV64_PRIME;
    return hash;
}

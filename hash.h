/* hash.h: the project's 64-bit mixing function, and the dropout rule built on it.
 *
 * hash_mix64 is splitmix64's output for the state z (Vigna,
 * https://prng.di.unimi.it/splitmix64.c): distinct inputs give well-spread outputs, so
 * hashing a key plus an index gives independent-looking bits for every index, in any
 * order and on any thread. The attention lab's random generator, the attention-weight
 * dropout and everything random in the trainer (initialisation, batches, dropout, token
 * noise) are built on it.
 *
 * The dropout rule: element i of the mask keyed by key is dropped when the top 24 bits of
 * hash_mix64(key + i) fall below hash_threshold(p) = ceil(p 2^24). That is exactly
 * "a uniform number in [0, 1) on a 2^-24 grid is below p", since p 2^24 is only p scaled
 * by a power of two.
 */
#ifndef HASH_H
#define HASH_H

#include <math.h>     /* ceilf */
#include <stdint.h>   /* uint64_t */

#define HASH_TOP_SHIFT 40        /* the top 24 bits of a hash ... */
#define HASH_ONE 16777216.0f     /* ... count in units of 2^-24 */

static inline uint64_t hash_mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ceil(p 2^24): hashes whose top 24 bits fall below it are dropped. */
static inline uint64_t hash_threshold(float p) { return (uint64_t)ceilf(p * HASH_ONE); }

/* 1 when the element whose hash is h is dropped under threshold. */
static inline int hash_drops(uint64_t h, uint64_t threshold) {
    return h >> HASH_TOP_SHIFT < threshold;
}

#endif /* HASH_H */

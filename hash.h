/* hash.h: the project's hashes: FNV-1a for byte strings (hash.c), and a 64-bit mixing
 * function with the dropout rule built on it.
 *
 * FNV-1a (Fowler, Noll, Vo; http://www.isthe.com/chongo/tech/comp/fnv/) hashes a byte
 * string one byte at a time: 32 bits for the string tables of the tokenizer and the BPE
 * trainer, 64 bits for the trainer's file checksums. The tables' contents, and so the
 * trainer's merges, do not depend on the hash: only where entries sit does.
 *
 * hash_mix64 is splitmix64's output for the state z (Vigna,
 * https://prng.di.unimi.it/splitmix64.c): distinct inputs give well-spread outputs, so
 * hashing a key plus an index gives independent-looking bits for every index, in any
 * order and on any thread. The attention lab's random generator, the attention-weight
 * dropout and everything random in the trainer (initialisation, batches, dropout, token
 * noise) are built on it. It and the dropout rule are static inline, against the rule
 * that headers hold no bodies: they run once per element in the kernels' inner loops,
 * where a call to another file could not be inlined.
 *
 * The dropout rule: element i of the mask keyed by key is dropped when the top 24 bits of
 * hash_mix64(key + i) fall below hash_threshold(p) = ceil(p 2^24). That is exactly
 * "a uniform number in [0, 1) on a 2^-24 grid is below p", since p 2^24 is only p scaled
 * by a power of two.
 */
#ifndef HASH_H
#define HASH_H

#include <math.h>     /* ceilf */
#include <stddef.h>   /* size_t */
#include <stdint.h>   /* uint32_t, uint64_t */

#define HASH_FNV32_OFFSET 2166136261u              /* FNV-1a 32-bit offset basis */
#define HASH_FNV64_OFFSET 0xCBF29CE484222325ull    /* FNV-1a 64-bit offset basis */
#define HASH_TOP_SHIFT 40        /* the top 24 bits of a hash ... */
#define HASH_ONE 16777216.0f     /* ... count in units of 2^-24 */

/* FNV-1a 32 of bytes[0 .. n). */
uint32_t hash_fnv1a32(const void *bytes, size_t n);

/* FNV-1a 64 of bytes[0 .. n), continuing from hash: HASH_FNV64_OFFSET to start, or the
 * hash of the bytes before them, so a file can be hashed in parts. */
uint64_t hash_fnv1a64(uint64_t hash, const void *bytes, size_t n);

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

#!/usr/bin/env python3
"""The attention lab's random draws (attention.c: splitmix64 seeding xoshiro256**,
Box-Muller's cosine branch), transcribed from their published definitions
(https://prng.di.unimi.it/) with the seeding attention.h describes, for
test_attention_variants' pinned values. Prints the first N normals of the stream of
(seed, draw, layer, head, round), rounded to float32:

    python3 tests/rng_reference.py SEED DRAW LAYER HEAD ROUND N
"""
import math
import struct
import sys

M = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z):   # splitmix64's output function of the state z
    z = (z + GOLDEN) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


def seed_state(seed, draw, layer, head, rnd):
    x = seed
    keys = [layer, head, rnd, draw]
    for i in range(4 if draw else 3):   # draw 0 mixes in no fourth key
        mixed = mix64(x)
        x = mixed ^ ((keys[i] * 0xD1B54A32D192ED03 + 1) & M)
    s = []
    for _ in range(4):
        s.append(mix64(x))
        x = (x + GOLDEN) & M
    return s


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M


def xoshiro256ss(s):
    result = (rotl((s[1] * 5) & M, 7) * 9) & M
    t = (s[1] << 17) & M
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = rotl(s[3], 45)
    return result


def normal(s):
    u1 = ((xoshiro256ss(s) >> 11) + 1) * 2.0 ** -53   # (0, 1]
    u2 = (xoshiro256ss(s) >> 11) * 2.0 ** -53
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def main():
    seed, draw, layer, head, rnd, n = (int(a) for a in sys.argv[1:7])
    s = seed_state(seed, draw, layer, head, rnd)
    for _ in range(n):
        print("%.9g" % struct.unpack("f", struct.pack("f", normal(s)))[0])


if __name__ == "__main__":
    main()

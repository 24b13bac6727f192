#!/usr/bin/env python3
"""pad_hidden.py: a llama2.c checkpoint with its MLP widened by hidden units of zeros.

Usage: python3 tools/pad_hidden.py IN.bin OUT.bin MULTIPLE

IN is a llama2.c legacy checkpoint (docs/formats.md: seven int32, then the fp32 tensors);
OUT is the same model with hidden_dim rounded up to a multiple of MULTIPLE: W1 and W3 get
rows of zeros, W2 columns of zeros. A zero unit adds SiLU(0) * 0 = 0 to every output, so
OUT computes what IN computes, in a shape whose rows ggml's 32-value blocks (Q4_0, Q5_0,
Q8_0) divide: tests/data/gguf_llama was made from tests/data/llama2c/s260k.bin so (its
SOURCES.json). Standard library only.
"""
import struct
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: pad_hidden.py IN.bin OUT.bin MULTIPLE")
    data = open(sys.argv[1], "rb").read()
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", data[:28])
    multiple = int(sys.argv[3])
    padded = (hidden + multiple - 1) // multiple * multiple
    head = dim // heads
    kv_dim = kv_heads * head
    floats = memoryview(data)[28:].cast("f")
    at = 0

    def take(n):
        nonlocal at
        part = floats[at:at + n]
        at += n
        return part

    out = [struct.pack("<7i", dim, padded, layers, heads, kv_heads, vocab, seq_len)]
    for n in (abs(vocab) * dim, layers * dim, layers * dim * dim, layers * kv_dim * dim,
              layers * kv_dim * dim, layers * dim * dim, layers * dim):
        out.append(take(n).tobytes())      # embedding, norms, attention: unchanged
    zeros_row = bytes(4 * dim)
    w1 = take(layers * hidden * dim)
    w2 = take(layers * dim * hidden)
    w3 = take(layers * hidden * dim)
    for l in range(layers):                # W1 (hidden, dim): rows of zeros after
        out.append(w1[l * hidden * dim:(l + 1) * hidden * dim].tobytes())
        out.append(zeros_row * (padded - hidden))
    for l in range(layers):                # W2 (dim, hidden): each row zeros after
        for r in range(dim):
            start = (l * dim + r) * hidden
            out.append(w2[start:start + hidden].tobytes())
            out.append(bytes(4 * (padded - hidden)))
    for l in range(layers):                # W3 as W1
        out.append(w3[l * hidden * dim:(l + 1) * hidden * dim].tobytes())
        out.append(zeros_row * (padded - hidden))
    out.append(floats[at:].tobytes())      # final norm, RoPE tables, a separate classifier
    open(sys.argv[2], "wb").write(b"".join(out))


if __name__ == "__main__":
    main()

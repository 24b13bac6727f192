#!/usr/bin/env python3
"""gguf_gpt2.py: write a GPT-2 checkpoint of this project (llm.c's fp32 format, as
weights/model.bin) and its tokenizer (llm.c's format, as weights/tokenizer.bin) as a GGUF
file in llama.cpp's `gpt2` architecture, with llama.cpp's own Python writer (gguf-py).

Usage:  python3 tools/gguf_gpt2.py LLAMA_CPP MODEL.bin TOKENIZER.bin OUT.gguf [f32|f16]

LLAMA_CPP is a llama.cpp checkout (its gguf-py folder is put on the import path; it needs
numpy, Debian's python3-numpy). The file is what llama.cpp's convert_hf_to_gguf.py writes for
a Hugging Face GPT2LMHeadModel (class GPT2Model there):
  metadata  gpt2.block_count, context_length, embedding_length, feed_forward_length (4C),
            attention.head_count, attention.layer_norm_epsilon (1e-5, as llm.c's),
            general.file_type (0 all F32, 1 mostly F16)
  tensors   token_embd, position_embd, output_norm(.bias), output (a copy of token_embd:
            GPT-2 ties them, and llama.cpp c392e50 requires the tensor), and per layer N
            blk.N.attn_norm, attn_qkv (the Q rows, then K, then V), attn_output, ffn_norm,
            ffn_up, ffn_down, each .weight and .bias. llm.c stores weights as (out, in),
            which is ggml's (in, out) order already: nothing is transposed.
  types     f16: 2-D .weight tensors in F16 except position_embd; the rest F32
  tokenizer tokenizer.ggml.model gpt2, pre gpt-2 (GPT-2's regex), the tokens in GPT-2's
            byte-to-unicode spelling (the end-of-text token as its text, typed control),
            and one merge per token: the two pieces the token's bytes end in when they are
            merged by lower id first with the tokens before it (as convert_hf_to_gguf.py
            rebuilds Qwen's merges from tiktoken ranks). bos, eos and unknown: end-of-text,
            as in GPT-2's files.
"""
import os
import struct
import sys

GPT2_MAGIC, GPT2_FP32, TOK_MAGIC = 20240326, 3, 20240328
LAYER_NORM_EPS = 1e-5   # llm.c's LayerNorm epsilon (kernels.h KERNELS_NORM_EPS)


def fail(msg):
    sys.stderr.write("gguf_gpt2: " + msg + "\n")
    sys.exit(1)


def bytes_to_unicode():
    """GPT-2's table: byte -> the character that spells it in a vocabulary."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) +
          list(range(0xAE, 0xFF + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def read_tokenizer(path):
    """(tokens as bytes, end-of-text id) from llm.c's tokenizer file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 1024:
        fail(f"{path}: too short for a tokenizer header (got {len(data)} bytes, expected 1024+)")
    magic, version, vocab, eot = struct.unpack_from("<4I", data)
    if magic != TOK_MAGIC or version not in (1, 2):
        fail(f"{path}: not an llm.c tokenizer (got magic {magic} version {version}, "
             f"expected {TOK_MAGIC} version 1 or 2)")
    if version == 1:
        vocab, eot = 50257, 50256
    tokens, p = [], 1024
    while p < len(data):
        n = data[p]
        tokens.append(data[p + 1:p + 1 + n])
        p += 1 + n
    if len(tokens) != vocab or p != len(data) or not 0 <= eot < vocab:
        fail(f"{path}: {len(tokens)} tokens (expected {vocab}, end-of-text {eot})")
    return tokens, eot


def merges_of(tokens, eot):
    """One merge "A B" per token past the 256 bytes (spelled as in the vocabulary)."""
    ids = {t: i for i, t in enumerate(tokens) if i != eot}
    for b in range(256):
        if tokens[b] != bytes([b]):
            fail(f"token {b} is not the byte {b} (expected the 256 bytes first)")
    spell = bytes_to_unicode()
    text = lambda t: "".join(spell[b] for b in t)
    merges = []
    for i in range(256, len(tokens)):
        if i == eot:
            continue
        parts = [bytes([b]) for b in tokens[i]]
        while True:   # merge the adjacent pair of lowest id below i, leftmost first
            best = None
            for k in range(len(parts) - 1):
                j = ids.get(parts[k] + parts[k + 1])
                if j is not None and j < i and (best is None or j < best[0]):
                    best = (j, k)
            if best is None:
                break
            k = best[1]
            parts[k:k + 2] = [parts[k] + parts[k + 1]]
        if len(parts) != 2:
            fail(f"token {i} {tokens[i]!r} is not the merge of two earlier tokens")
        merges.append(text(parts[0]) + " " + text(parts[1]))
    return [text(t) if i != eot else t.decode("utf-8") for i, t in enumerate(tokens)], merges


def read_model(path, np):
    """(config dict, {name: array}) from llm.c's fp32 GPT-2 checkpoint."""
    with open(path, "rb") as f:
        data = f.read()
    h = struct.unpack_from("<256i", data)
    if h[0] != GPT2_MAGIC or h[1] != GPT2_FP32:
        fail(f"{path}: not an llm.c fp32 GPT-2 checkpoint (got magic {h[0]} version {h[1]}, "
             f"expected {GPT2_MAGIC} version {GPT2_FP32})")
    if h[9] != 0 or h[10] != 0:
        fail(f"{path}: a trained attention variant or rotary positions (header slots 9, 10: "
             f"{h[9]}, {h[10]}; expected 0, 0: the gpt2 architecture has neither)")
    S, V, L, NH, C, Vp = h[2:8]
    cfg = dict(S=S, V=V, L=L, NH=NH, C=C, Vp=Vp)
    shapes = [("wte", (Vp, C)), ("wpe", (S, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
              ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)),
              ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)),
              ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)),
              ("fcprojb", (L, C)), ("lnfw", (C,)), ("lnfb", (C,))]
    need = 1024 + 4 * sum(int(np.prod(s)) for _, s in shapes)
    if len(data) != need:
        fail(f"{path}: {len(data)} bytes (expected {need} for its header)")
    out, p = {}, 1024
    for name, shape in shapes:
        n = int(np.prod(shape))
        out[name] = np.frombuffer(data, dtype="<f4", count=n, offset=p).reshape(shape)
        p += 4 * n
    return cfg, out


def main(argv):
    if len(argv) not in (5, 6) or (len(argv) == 6 and argv[5] not in ("f32", "f16")):
        fail("usage: gguf_gpt2.py LLAMA_CPP MODEL.bin TOKENIZER.bin OUT.gguf [f32|f16]")
    llama_cpp, model_path, tok_path, out_path = argv[1:5]
    outtype = argv[5] if len(argv) == 6 else "f32"
    sys.path.insert(0, os.path.join(llama_cpp, "gguf-py"))
    try:
        import numpy as np
        import gguf
    except ImportError as e:
        fail(f"cannot import {e.name} (expected numpy installed and gguf-py in "
             f"{llama_cpp}/gguf-py)")
    cfg, w = read_model(model_path, np)
    tokens, eot = read_tokenizer(tok_path)
    if len(tokens) != cfg["V"]:
        fail(f"{tok_path} has {len(tokens)} tokens (expected {cfg['V']}, the model's vocab)")
    spelled, merges = merges_of(tokens, eot)

    wr = gguf.GGUFWriter(out_path, "gpt2")
    wr.add_name(os.path.splitext(os.path.basename(model_path))[0])
    wr.add_block_count(cfg["L"])
    wr.add_context_length(cfg["S"])
    wr.add_embedding_length(cfg["C"])
    wr.add_feed_forward_length(4 * cfg["C"])
    wr.add_head_count(cfg["NH"])
    wr.add_layer_norm_eps(LAYER_NORM_EPS)
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if outtype == "f16"
                     else gguf.LlamaFileType.ALL_F32)
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("gpt-2")
    wr.add_token_list(spelled)
    wr.add_token_types([gguf.TokenType.CONTROL if i == eot else gguf.TokenType.NORMAL
                        for i in range(len(spelled))])
    wr.add_token_merges(merges)
    wr.add_bos_token_id(eot)
    wr.add_eos_token_id(eot)
    wr.add_unk_token_id(eot)

    def add(name, a, keep_f32=False):
        a = np.ascontiguousarray(a, dtype=np.float32)
        if outtype == "f16" and a.ndim == 2 and name.endswith(".weight") and not keep_f32:
            a = a.astype(np.float16)
        wr.add_tensor(name, a)

    V = cfg["V"]
    add("token_embd.weight", w["wte"][:V])
    add("position_embd.weight", w["wpe"], keep_f32=True)
    add("output_norm.weight", w["lnfw"])
    add("output_norm.bias", w["lnfb"])
    add("output.weight", w["wte"][:V])
    for l in range(cfg["L"]):
        b = f"blk.{l}."
        add(b + "attn_norm.weight", w["ln1w"][l])
        add(b + "attn_norm.bias", w["ln1b"][l])
        add(b + "attn_qkv.weight", w["qkvw"][l])
        add(b + "attn_qkv.bias", w["qkvb"][l])
        add(b + "attn_output.weight", w["attprojw"][l])
        add(b + "attn_output.bias", w["attprojb"][l])
        add(b + "ffn_norm.weight", w["ln2w"][l])
        add(b + "ffn_norm.bias", w["ln2b"][l])
        add(b + "ffn_up.weight", w["fcw"][l])
        add(b + "ffn_up.bias", w["fcb"][l])
        add(b + "ffn_down.weight", w["fcprojw"][l])
        add(b + "ffn_down.bias", w["fcprojb"][l])
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


if __name__ == "__main__":
    main(sys.argv)

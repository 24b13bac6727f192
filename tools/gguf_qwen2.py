#!/usr/bin/env python3
"""gguf_qwen2.py: write a tiny GGUF file in llama.cpp's `qwen2` architecture with random
weights and this project's tokenizer (llm.c's format, as weights/tokenizer.bin), with
llama.cpp's own Python writer (gguf-py): the test file of the engine's qwen2 reading, whose
reference outputs are llama.cpp's (tests/data/gguf_qwen2/SOURCES.json).

Usage:  python3 tools/gguf_qwen2.py LLAMA_CPP TOKENIZER.bin OUT.gguf [SEED [SHAPE]]

LLAMA_CPP is a llama.cpp checkout (its gguf-py folder is put on the import path; it needs
numpy, yaml and sentencepiece: Debian's python3-numpy, python3-yaml and
python3-sentencepiece). SEED (default 1) seeds numpy's RandomState (tests/data/gguf_qwen2's
file is seed 94, chosen among seeds 1 to 200 for its margins against near ties). SHAPE,
"LAYERS,CONTEXT,WIDTH,HIDDEN,HEADS,KV_HEADS,VOCAB", writes another shape for speed runs
("24,32768,896,4864,14,2,151936" is Qwen2.5-0.5B's, 1.98 GB): a VOCAB past the tokenizer's
tokens adds unused ones, <f0>, <f1>, ... (typed normal, in no merge). The file has
what llama.cpp's convert_hf_to_gguf.py writes for a Hugging Face Qwen2ForCausalLM with tied
embeddings (as Qwen2.5-0.5B), in a shape of its own:
  metadata  qwen2.block_count 2, context_length 128, embedding_length 64,
            feed_forward_length 160, attention.head_count 4, attention.head_count_kv 2
            (heads of 16), rope.freq_base 1e6, attention.layer_norm_rms_epsilon 1e-6,
            general.file_type 0 (all F32)
  tensors   token_embd, output_norm and per layer N blk.N.attn_norm, attn_q, attn_k,
            attn_v (each .weight and .bias), attn_output, ffn_norm, ffn_gate, ffn_up,
            ffn_down (.weight); no output.weight: the classifier is token_embd (tied).
            numpy's arrays are (rows, cols), ggml's order (cols, rows): attn_k.weight is
            32 rows of 64, ggml's (64, 32).
  values    chosen so that what tells qwen2 from llama shows and greedy steps do not tie:
            token_embd N(0, 0.003) (mean(x^2) near 1e-5: RMSNorm's epsilon 1e-6 against
            1e-5 moves the first norm a lot); norms' weights 1 + 0.1 N(0, 1); matrices
            N(0, 2 / sqrt(cols)); q and k biases N(0, 1) (Qwen's k biases are large), v
            biases N(0, 0.5); output_norm 100 (1 + 0.1 N(0, 1)), so that the tied logits
            (tiny embeddings times the normalized state) spread over a few units. The
            embeddings of the single bytes that do not print (all but 32-126 and newline:
            control bytes and the halves of UTF-8 sequences) are a tenth of that, so that
            their logits stay near 0 and greedy texts are printable ASCII, which JSON holds
            as it is. Drawn in the order the tensors are written.
  tokenizer as tools/gguf_gpt2.py writes it (tokenizer.ggml.model gpt2, the tokens in
            GPT-2's byte-to-unicode spelling, the end-of-text token as its text, typed
            control, one merge per token) but pre qwen2 (Qwen2's regex: digits one by one,
            contractions in either case); bos, eos and padding end-of-text, and
            add_bos_token false, as Qwen2.5's files.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_gpt2   # noqa: E402
from gguf_gpt2 import read_tokenizer, merges_of   # noqa: E402

LAYERS, CONTEXT, WIDTH, HIDDEN, HEADS, KV_HEADS = 2, 128, 64, 160, 4, 2
ROPE_BASE, RMS_EPS = 1000000.0, 1e-6
EMBED_STD, NORM_STD, MATRIX_GAIN = 0.003, 0.1, 2.0
Q_BIAS_STD, K_BIAS_STD, V_BIAS_STD, OUTPUT_NORM_SCALE = 1.0, 1.0, 0.5, 100.0
QUIET_BYTE_SCALE = 0.1


def fail(msg):
    sys.stderr.write("gguf_qwen2: " + msg + "\n")
    sys.exit(1)


def main(argv):
    gguf_gpt2.fail = fail   # the helpers' errors name this tool
    usage = "usage: gguf_qwen2.py LLAMA_CPP TOKENIZER.bin OUT.gguf [SEED [SHAPE]]"
    if len(argv) not in (4, 5, 6) or (len(argv) >= 5 and not argv[4].isdigit()):
        fail(usage)
    llama_cpp, tok_path, out_path = argv[1:4]
    seed = int(argv[4]) if len(argv) >= 5 else 1
    shape = [LAYERS, CONTEXT, WIDTH, HIDDEN, HEADS, KV_HEADS, 0]   # VOCAB 0: the tokenizer's
    if len(argv) == 6:
        parts = argv[5].split(",")
        if len(parts) != 7 or not all(x.isdigit() and int(x) > 0 for x in parts):
            fail(f"SHAPE {argv[5]!r}: expected seven positive integers, "
                 "LAYERS,CONTEXT,WIDTH,HIDDEN,HEADS,KV_HEADS,VOCAB; " + usage)
        shape = [int(x) for x in parts]
    layers, context, width, hidden, heads, kv_heads, vocab = shape
    if width % heads or heads % kv_heads or (width // heads) % 2:
        fail(f"SHAPE {argv[5]}: expected HEADS to divide WIDTH into heads of an even size "
             "and KV_HEADS to divide HEADS")
    sys.path.insert(0, os.path.join(llama_cpp, "gguf-py"))
    try:
        import numpy as np
        import gguf
    except ImportError as e:
        fail(f"cannot import {e.name} (expected numpy installed and gguf-py in "
             f"{llama_cpp}/gguf-py)")
    tokens, eot = read_tokenizer(tok_path)
    spelled, merges = merges_of(tokens, eot)
    if vocab and vocab < len(spelled):
        fail(f"SHAPE's VOCAB {vocab}: expected at least the tokenizer's {len(spelled)} tokens")
    spelled += [f"<f{i}>" for i in range(max(vocab - len(spelled), 0))]
    V, C, KV = len(spelled), width, width // heads * kv_heads

    wr = gguf.GGUFWriter(out_path, "qwen2")
    wr.add_name(os.path.splitext(os.path.basename(out_path))[0])
    wr.add_block_count(layers)
    wr.add_context_length(context)
    wr.add_embedding_length(C)
    wr.add_feed_forward_length(hidden)
    wr.add_head_count(heads)
    wr.add_head_count_kv(kv_heads)
    wr.add_rope_freq_base(ROPE_BASE)
    wr.add_layer_norm_rms_eps(RMS_EPS)
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("qwen2")
    wr.add_token_list(spelled)
    wr.add_token_types([gguf.TokenType.CONTROL if i == eot else gguf.TokenType.NORMAL
                        for i in range(V)])
    wr.add_token_merges(merges)
    wr.add_bos_token_id(eot)
    wr.add_eos_token_id(eot)
    wr.add_pad_token_id(eot)
    wr.add_add_bos_token(False)

    rng = np.random.RandomState(seed)

    def add(name, a):
        wr.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))

    def matrix(name, rows, cols):
        add(name, rng.normal(0.0, MATRIX_GAIN / np.sqrt(cols), (rows, cols)))

    def norm(name, scale=1.0):
        add(name, scale * (1.0 + NORM_STD * rng.normal(0.0, 1.0, C)))

    embd = rng.normal(0.0, EMBED_STD, (V, C))
    for b in range(256):   # bytes that do not print: a tenth, never chosen by greedy steps
        if not (32 <= b < 127 or b == 10):
            embd[b] *= QUIET_BYTE_SCALE
    add("token_embd.weight", embd)
    norm("output_norm.weight", OUTPUT_NORM_SCALE)
    for l in range(layers):
        b = f"blk.{l}."
        norm(b + "attn_norm.weight")
        matrix(b + "attn_q.weight", C, C)
        add(b + "attn_q.bias", rng.normal(0.0, Q_BIAS_STD, C))
        matrix(b + "attn_k.weight", KV, C)
        add(b + "attn_k.bias", rng.normal(0.0, K_BIAS_STD, KV))
        matrix(b + "attn_v.weight", KV, C)
        add(b + "attn_v.bias", rng.normal(0.0, V_BIAS_STD, KV))
        matrix(b + "attn_output.weight", C, C)
        norm(b + "ffn_norm.weight")
        matrix(b + "ffn_gate.weight", hidden, C)
        matrix(b + "ffn_up.weight", hidden, C)
        matrix(b + "ffn_down.weight", C, hidden)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env python3
"""torch_train_bench.py: the trainer's speed reference, the same GPT-2 step in PyTorch.

Usage: python3 tools/torch_train_bench.py [-L 4] [-C 128] [-H 4] [-T 128] [-B 16]
                                          [-v 1024] [-n 60] [--threads 1]

It times what `./train -L 4 -C 128 -H 4 -T 128 -B 16 -v 1024 -n 60` does in a step: the
same network (learned token and position tables, pre-LayerNorm blocks with biases, tanh
GELU, the classifier tied to the token table), the same dropouts (0.2 on the embedding
and each sublayer's output, 0.1 on the attention weights), cross-entropy, the backward,
clipping the gradient norm to 1, AdamW (decay 0.5 on the matrices and tables) and a moving average
of the weights (0.999), in float32 on the CPU. Tokens are random: a step's time does not
depend on their values. It prints the tokens/s of each tenth step and of the median step
after the first five, the threads and PyTorch's build (its BLAS and instruction sets).
It needs PyTorch (Debian: python3-torch); nothing of the engine uses it. Nothing is
asserted: this prints figures (weights/README.md, "Trainer speed").
"""
import argparse
import copy
import math
import time

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.up, self.down = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x, mask):
        B, T, C = x.shape
        # (B, T, 3C) -> three (B, H, T, C/H)
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.H)      # (B, H, T, T)
        att = F.dropout(att.masked_fill(mask[:T, :T], float("-inf")).softmax(-1), 0.1,
                        self.training)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.dropout(self.proj(y), 0.2, self.training)
        h = F.gelu(self.up(self.ln2(x)), approximate="tanh")
        return x + F.dropout(self.down(h), 0.2, self.training)


class GPT(nn.Module):
    def __init__(self, V, T, L, C, H):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))
        for name, q in self.named_parameters():   # GPT-2's initialisation, as the trainer's
            residual = "proj" in name or "down" in name   # the two projections into the stream
            if q.dim() == 2:
                nn.init.normal_(q, 0.0, 0.02 / math.sqrt(2 * L) if residual else 0.02)
            elif "ln" not in name:
                nn.init.zeros_(q)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = F.dropout(self.wte(idx) + self.wpe(torch.arange(T)), 0.2, self.training)
        for b in self.blocks:
            x = b(x, self.mask)
        logits = self.lnf(x) @ self.wte.weight.t()                       # (B, T, V)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for flag, default in (("-L", 4), ("-C", 128), ("-H", 4), ("-T", 128), ("-B", 16),
                          ("-v", 1024), ("-n", 60), ("--threads", 1)):
        p.add_argument(flag, type=int, default=default)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    model = GPT(a.v, a.T, a.L, a.C, a.H)
    ema = copy.deepcopy(model)
    decay = [q for q in model.parameters() if q.dim() == 2]       # the matrices and tables
    rest = [q for q in model.parameters() if q.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.5},
                             {"params": rest, "weight_decay": 0.0}], lr=2e-3)
    config = [line.strip() for line in torch.__config__.show().split("\n")
              if "CPU capability" in line]
    print(f"torch {torch.__version__}, {a.threads} thread(s), "
          f"{sum(q.numel() for q in model.parameters())} parameters; {' '.join(config)}")
    times = []
    for step in range(1, a.n + 1):
        idx = torch.randint(a.v, (a.B, a.T + 1))
        t0 = time.perf_counter()
        loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for e, q in zip(ema.parameters(), model.parameters()):
                e.lerp_(q, 1 - 0.999)
        dt = time.perf_counter() - t0
        times.append(dt)
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}, {a.B * a.T / dt:.0f} tok/s")
    steady = sorted(times[5:]) or times
    print(f"median step: {a.B * a.T / steady[len(steady) // 2]:.0f} tok/s")


if __name__ == "__main__":
    main()

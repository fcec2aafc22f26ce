"""The torch-xla model suite, as data: each case builds a model (on the CPU, in its
64-bit dtypes) and its inputs, and says what x64guard must do with it: run it and match
eager PyTorch on the CPU cast to 32 bits (floats within float32 tolerance, integers
exactly). Random draws are tested against torch-xla's own draws in test_rng.py.

The same cases run through the dynamo backend and through `narrow_exported`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch
from torch import nn


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    model: Callable[[], nn.Module]
    inputs: Callable[[int], tuple]
    rtol: float = 1e-5
    atol: float = 1e-5
    wide: tuple[str, ...] = ()         # 64-bit element types the unnarrowed program holds


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------- models

class EmbeddingArgmax(nn.Module):
    """Embedding lookup with int64 indices, a projection, argmax (int64 indices out)."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(50, 16)
        self.proj = nn.Linear(16, 10)

    def forward(self, idx):
        return self.proj(self.embedding(idx)).argmax(dim=-1)


class MLP64(nn.Module):
    """An MLP written for float64 (parameters and input)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
        self.double()

    def forward(self, x):
        return torch.softmax(self.net(x), dim=-1)


class TransformerBlock(nn.Module):
    """Token + position embeddings (int64 positions from arange), causal self-attention
    with a mask filled with float64's most negative number, layer norms, a GELU MLP, in
    float64; returns the logits and the greedy next token (int64)."""

    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, max_len: int = 16):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab)
        self.double()

    def forward(self, tokens):
        batch, length = tokens.shape
        positions = torch.arange(length, device=tokens.device)            # int64
        h = self.tok(tokens) + self.pos(positions)[None]
        q, k, v = self.qkv(self.norm1(h)).chunk(3, dim=-1)
        split = lambda t: t.reshape(batch, length, self.heads, -1).transpose(1, 2)  # noqa: E731
        q, k, v = split(q), split(k), split(v)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        causal = positions[None, :] > positions[:, None]                   # int64 comparison
        scores = scores.masked_fill(causal, torch.finfo(torch.float64).min)
        attn = torch.softmax(scores, dim=-1) @ v
        h = h + self.out(attn.transpose(1, 2).reshape(batch, length, -1))
        h = h + self.mlp(self.norm2(h))
        logits = self.head(h)
        return logits, logits[:, -1].argmax(dim=-1)


class FFT128(nn.Module):
    """A complex128 FFT: spectrum, a filter, the inverse transform, and a real FFT."""

    def forward(self, z, x):
        spectrum = torch.fft.fft(z)
        filtered = torch.fft.ifft(spectrum * torch.exp(-0.1 * torch.abs(spectrum)))
        return spectrum, filtered, torch.fft.rfft(x, norm="ortho")


class ArangeIndexing(nn.Module):
    """arange-based indexing: strided rows, gather, index_select, a cumulative sum of
    int64 counts, and a full reduction."""

    def forward(self, x, counts):
        rows = torch.arange(0, x.shape[0], 2, device=x.device)
        picked = x[rows]
        cols = (torch.arange(x.shape[1], device=x.device) * 3) % x.shape[1]
        gathered = torch.gather(picked, 1, cols.expand(picked.shape[0], -1))
        selected = torch.index_select(x, 0, rows.flip(0))
        offsets = torch.cumsum(counts, dim=0)
        return gathered, selected, offsets, offsets[-1] * 2 + rows.sum()


class FullSum(nn.Module):
    """torch-xla 2.9 exports `x.sum()` as `sum.dim_IntList(x, [])` and lowers that as
    "reduce nothing": `x.sum() + 1` became `x + 1`. Also mean, amax and std over all."""

    def forward(self, x, n):
        return x.sum() + 1, x.mean(), x.amax(), x.std(), n.sum(), torch.sum(x, dim=())


# --------------------------------------------------------------------------- cases

def _tokens(seed: int, batch: int, length: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=_generator(seed))   # int64


def _normal(seed: int, *shape, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=_generator(seed), dtype=dtype)


# `inputs(seed)`: seed 0 is what torch.export traces with; other seeds give other values
# of the same shapes (a second call must not reuse the first call's values).
CASES: list[Case] = [
    Case("embedding_argmax", EmbeddingArgmax, lambda seed: (_tokens(seed, 4, 7, 50),), wide=("s64",)),
    Case("mlp_float64", MLP64, lambda seed: (_normal(10 + seed, 5, 8),), wide=("f64",)),
    Case("transformer_block", TransformerBlock, lambda seed: (_tokens(20 + seed, 2, 12, 64),), rtol=1e-4,
         atol=1e-4, wide=("s64", "f64")),
    Case("fft_complex128", FFT128,
         lambda seed: (_normal(30 + seed, 3, 16, dtype=torch.complex128), _normal(40 + seed, 3, 16)),
         rtol=1e-4, atol=1e-4, wide=("c128", "f64")),
    Case("arange_indexing", ArangeIndexing,
         lambda seed: (_normal(60 + seed, 8, 5), torch.randint(0, 10, (8,), generator=_generator(70 + seed))),
         wide=("s64", "f64")),
    Case("full_sum", FullSum,
         lambda seed: (_normal(80 + seed, 4, 6), torch.randint(-5, 5, (2, 2), generator=_generator(90 + seed))),
         wide=("f64", "s64")),
]

BY_NAME = {case.name: case for case in CASES}


def build(case: Case) -> nn.Module:
    torch.manual_seed(0)
    return case.model().eval()

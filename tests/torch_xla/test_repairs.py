"""Ops torch-xla 2.9 cannot lower, decomposed by x64guard (x64guard/torch_xla/repairs.py):
EmbeddingBag, bucketize and weight_norm train through the backend narrowed and equal eager
(openxla runs them on the CPU; x64guard refused them before, issue 34 D3); an op neither
lowers is refused at the model's line before anything ran on the device."""

from __future__ import annotations

import gc
import warnings

import pytest
import torch
from torch import nn

import x64guard
import x64guard.torch_xla as xt
from x64guard.torch_xla import metrics as xla_metrics

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        yield


class HashedBag(nn.Module):
    """A hashing recommender's bag of ids (the issue's reproduction), any mode."""

    def __init__(self, mode: str, padding_idx: int | None = None):
        super().__init__()
        self.bag = nn.EmbeddingBag(64, 8, mode=mode, padding_idx=padding_idx)
        self.out = nn.Linear(8, 1)

    def forward(self, ids, offsets=None):
        return self.out(self.bag((ids * 1000003 + 12345) % 64, offsets)).square().sum()


class Bucketed(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(6, 4)
        self.register_buffer("bounds", torch.tensor([0.1, 0.5, 1.0, 2.0, 4.0]))

    def forward(self, x):
        return self.embed(torch.bucketize(x, self.bounds)).square().sum()


class WeightNormed(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 4, 3, padding=1))

    def forward(self, x):
        return self.conv(x).square().sum()


class Selected(nn.Module):
    """DeBERTa-style `(labels >= 0).nonzero()` selection."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x, labels):
        return self.lin(x[(labels >= 0).nonzero()[:, 0]]).square().sum()


BAG_IDS = torch.tensor([5, 17, 99, 3, 1500, 7, 8, 1999, 42, 11])
CASES = {
    "bag sum": (lambda: HashedBag("sum"), (BAG_IDS, torch.tensor([0, 3, 5, 8]))),
    "bag mean, empty bag": (lambda: HashedBag("mean"), (BAG_IDS, torch.tensor([0, 3, 3, 8]))),
    "bag max, 2-D, padding": (lambda: HashedBag("max", padding_idx=12345 % 64), (BAG_IDS.view(2, 5),)),
    "bucketize": (Bucketed, (torch.tensor([0.05, 0.7, 3.0, 9.0, 1.0]),)),
    "weight_norm": (WeightNormed, (torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(0)),)),
    "nonzero": (Selected, (torch.randn(5, 4, generator=torch.Generator().manual_seed(1)),
                           torch.tensor([1, -100, 2, 0, -100]))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_ops_torch_xla_cannot_lower_train_narrowed_and_equal_eager(name):
    build, args = CASES[name]
    torch.manual_seed(0)
    cpu = build()
    model = xt.to_device(cpu)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="x64guard")
    inputs = xt.to_device(list(args))
    theirs = xla_metrics.compile_count() - xla_metrics.own_compile_count()
    with torch.no_grad():
        inference = compiled(*inputs)
    loss = compiled(*inputs)
    loss.backward()
    expected = cpu(*args)
    expected.backward()
    assert inference.cpu().item() == pytest.approx(expected.item(), rel=1e-5)
    assert loss.cpu().item() == pytest.approx(expected.item(), rel=1e-5)
    for (path, p), q in zip(model.named_parameters(), cpu.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5, msg=path)
    # no graph torch-xla compiled on its own (its CPU fallback computes the inputs at full width first)
    assert xla_metrics.compile_count() - xla_metrics.own_compile_count() == theirs


def test_an_op_nothing_lowers_is_refused_at_its_line_before_anything_runs():
    def f(ids):
        return torch.special.i0((ids * 3).double())    # the line the refusal names

    torch._dynamo.reset()
    ids = xt.to_device(torch.tensor([1, 2, 3]))
    theirs = xla_metrics.compile_count() - xla_metrics.own_compile_count()
    fallbacks = xla_metrics.fallback_counts()
    try:
        torch.compile(f, backend="x64guard")(ids)
    except x64guard.X64GuardError as error:
        message = str(error)
    else:
        pytest.fail("not refused")
    gc.collect()     # the exception's frames held the trace's pending tensors: later syncs must not find them
    assert "aten::i0" in message and "no XLA lowering" in message
    assert f"{__file__}:{f.__code__.co_firstlineno + 1}" in message
    assert xla_metrics.fallback_counts() == fallbacks
    assert xla_metrics.compile_count() - xla_metrics.own_compile_count() == theirs

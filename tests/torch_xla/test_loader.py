"""`NarrowingDeviceLoader`: batches narrowed on the host in torch-xla's loader thread. The
model sees what `to_device` gives (int64 over int32 device data, float64 as float32),
values out of int32's range are refused naming the batch and key, and a training step
through the backend on its batches matches eager PyTorch at 32 bits, with no boundary
cast (no readback of 64-bit device data)."""

from __future__ import annotations

import copy
from collections import namedtuple

import pytest
import torch
from torch import nn

import x64guard
import x64guard.torch_xla as xt
from x64guard.torch_xla.boundary import narrow_alias

pytestmark = pytest.mark.torch

Pair = namedtuple("Pair", "ids weights")


def _batches():
    generator = torch.Generator().manual_seed(0)
    return [{"input_ids": torch.randint(-2**31, 2**31 - 1, (2, 5), generator=generator),
             "scores": torch.randn(2, 5, dtype=torch.float64, generator=generator),
             "mask": torch.ones(2, 5, dtype=torch.int32),
             "pair": (torch.arange(3), Pair(torch.tensor([7]), torch.tensor([0.5], dtype=torch.float64))),
             "name": "sample"} for _ in range(3)]


def test_values_and_types_are_to_devices():
    batches = _batches()
    given = copy.deepcopy(batches)
    loaded = list(xt.NarrowingDeviceLoader(batches))
    assert len(loaded) == 3
    for batch, theirs in zip(loaded, given):
        expected = xt.to_device(theirs)
        assert batch.keys() == expected.keys() and batch["name"] == "sample"
        ids = batch["input_ids"]
        assert isinstance(ids, xt.GuardedTensor) and ids.dtype == torch.int64 and ids.device.type == "xla"
        assert narrow_alias(ids).dtype == torch.int32          # the device holds int32 data
        assert torch.equal(narrow_alias(ids).cpu(), theirs["input_ids"].to(torch.int32))
        assert torch.equal(ids.cpu(), theirs["input_ids"])
        assert batch["scores"].dtype == torch.float32
        assert torch.equal(batch["scores"].cpu(), theirs["scores"].float())
        assert batch["mask"].dtype == torch.int32 and type(batch["mask"]) is type(expected["mask"])
        positions, pair = batch["pair"]
        assert type(batch["pair"]) is tuple and isinstance(pair, Pair)
        assert positions.dtype == torch.int64 and torch.equal(positions.cpu(), torch.arange(3))
        assert pair.weights.dtype == torch.float32 and torch.equal(pair.ids.cpu(), torch.tensor([7]))
    for batch, theirs in zip(batches, given):                  # the batches given are not changed
        assert torch.equal(batch["input_ids"], theirs["input_ids"]) and batch["scores"].dtype == torch.float64


def test_out_of_range_is_refused_naming_the_batch_and_key():
    batches = [{"input_ids": torch.tensor([[1, 2]])}, {"input_ids": torch.tensor([[3, 2**40]])}]
    loader = iter(xt.NarrowingDeviceLoader(batches))
    assert torch.equal(next(loader)["input_ids"].cpu(), torch.tensor([[1, 2]]))
    with pytest.raises(x64guard.X64GuardError, match=r"batch 1\['input_ids'\].*1099511627776 does not fit in int32"):
        next(loader)


def test_a_failing_data_loader_is_raised_not_ended():
    def broken():
        yield torch.tensor([1])
        raise ValueError("dataset file missing")

    loader = iter(xt.NarrowingDeviceLoader(broken()))
    next(loader)
    with pytest.raises(RuntimeError, match="dataset file missing"):
        next(loader)


class _Tagger(nn.Module):
    """PyTorch's 64-bit defaults: float64 weights, int64 ids and targets."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.head = nn.Linear(16, 5)
        self.double()

    def forward(self, ids, targets):
        scores = self.head(self.embed(ids))
        return nn.functional.cross_entropy(scores.flatten(0, 1), targets.flatten())


@pytest.mark.filterwarnings("ignore::x64guard.X64GuardWarning")   # the narrowing summary
def test_training_step_under_the_backend_matches_eager():
    import torch_xla

    torch.manual_seed(0)
    model = _Tagger()
    reference = copy.deepcopy(model).float()
    generator = torch.Generator().manual_seed(3)
    batches = [{"ids": torch.randint(0, 50, (4, 6), generator=generator),
                "targets": torch.randint(0, 5, (4, 6), generator=generator)} for _ in range(3)]
    torch._dynamo.reset()
    on_device = xt.to_device(model)
    compiled = torch.compile(on_device, backend="x64guard")
    optimizer = torch.optim.SGD(on_device.parameters(), lr=0.5)
    ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    casts = xt.counters()["boundary_casts"]
    losses = []
    for batch in xt.NarrowingDeviceLoader(batches):
        loss = compiled(**batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
        losses.append(loss.item())
    assert xt.counters()["boundary_casts"] == casts           # nothing 64-bit read back from the device
    expected = []
    for batch in batches:
        loss = reference(**batch)
        loss.backward()
        ref_optimizer.step()
        ref_optimizer.zero_grad()
        expected.append(loss.item())
    torch.testing.assert_close(losses, expected, rtol=1e-5, atol=1e-6)
    for mine, theirs in zip(on_device.parameters(), reference.parameters()):
        torch.testing.assert_close(mine.detach().cpu(), theirs.detach(), rtol=1e-5, atol=2e-6)

"""What a sync without arguments finds (x64guard/torch_xla/live.py), and what it leaves alone:

* a step built from `to_device`'s model and batch is found through the tensors x64guard made
  or was given: no read of the garbage collector's heap;
* a pending tensor x64guard does not track (a batch moved with `.to(device)`) is still
  found, through the collector, only because torch-xla's report names it;
* the registry keeps nothing alive; GuardedTensor's `__torch_function__` is its own again
  after dynamo's compiles end, and plain tensors' is never touched."""

from __future__ import annotations

import gc
import warnings
import weakref

import pytest
import torch

import x64guard
import x64guard.torch_xla as xt
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla import lazy, live, reads

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        yield


@pytest.fixture
def scans(monkeypatch):
    calls = []

    def counted(young_only, known):
        calls.append(young_only)
        return live.scan(young_only, known)

    monkeypatch.setattr(lazy, "scan", counted)
    return calls


class Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(20, 8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, ids, targets):
        return torch.nn.functional.cross_entropy(self.head(self.embed(ids)).flatten(0, 1), targets.flatten())


def test_a_step_of_to_device_tensors_reads_no_heap(scans):
    torch.manual_seed(0)
    model = xt.to_device(Tagger())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = {"ids": torch.randint(0, 20, (2, 5)), "targets": torch.randint(0, 3, (2, 5))}
    losses = []
    for _ in range(3):
        loss = model(**xt.to_device(batch))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        xt.sync()
        assert not any(_xc.needs_materialization([loss, *model.parameters()]))
        losses.append(float(loss.detach().cpu()))
    assert scans == []                     # the registry had every pending tensor
    assert losses[2] < losses[0]


def test_an_untracked_pending_tensor_is_still_found(scans):
    d = xt.xla_device()
    x = torch.randn(4, 4).to(d)            # moved by torch-xla, not by x64guard
    y = x * 2 + 1
    xt.sync()
    assert not _xc.needs_materialization([y])[0]
    assert scans and scans[0] is True      # the young generations first
    torch.testing.assert_close(y.cpu(), x.cpu() * 2 + 1)


def test_the_registry_keeps_nothing_alive():
    ids = xt.to_device(torch.arange(6).reshape(2, 3))
    made = ids * 2
    refs = [weakref.ref(ids), weakref.ref(made)]
    assert any(t is made for t in live.LIVE.candidates())
    del ids, made
    gc.collect()
    assert [ref() for ref in refs] == [None, None]


def test_guarded_torch_function_is_restored_and_plain_tensors_untouched():
    """The one switch left (reads.compiling, while dynamo compiles): restored when the last
    compile ends; plain tensors' `__torch_function__` is never touched, and a float tensor a
    sync computes keeps its class."""
    own = reads.GuardedTensor.__dict__["__torch_function__"]
    plain = torch.Tensor.__dict__["__torch_function__"]
    ids = xt.to_device(torch.tensor([[1, 2, 3]]))
    out = torch.compile(lambda t: (t * 2 + 1).sum(), backend="x64guard")(ids)
    assert reads.GuardedTensor.__dict__["__torch_function__"] is own
    reads.compiling(True)
    reads.compiling(True)
    reads.compiling(False)
    assert reads.GuardedTensor.__dict__["__torch_function__"] is not own    # a compile still runs
    reads.compiling(False)
    assert reads.GuardedTensor.__dict__["__torch_function__"] is own
    assert torch.Tensor.__dict__["__torch_function__"] is plain
    assert int(out) == 15
    untouched = torch.ones(3).to(xt.xla_device()) * 2
    xt.sync()
    assert type(untouched) is torch.Tensor

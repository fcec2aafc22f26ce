"""What a sync without arguments finds (x64guard/torch_xla/live.py), and what it leaves alone:

* a step built from `to_device`'s model and batch is found through the tensors x64guard made
  or was given: no read of the garbage collector's heap;
* a pending tensor x64guard does not track (a batch moved with `.to(device)`) is still
  found, through the collector, only because torch-xla's report names it;
* the registry keeps nothing alive; GuardedTensor's `__torch_function__` is its own again
  after dynamo's compiles end, and plain tensors' is never touched."""

from __future__ import annotations

import copy
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


@pytest.fixture
def reports(monkeypatch):
    """The device's pending tensors as torch-xla's live-tensor report gave them, a list a call."""
    calls, report = [], _xc.pending_tensor_report

    def counted(device):
        calls.append(report(device))
        return calls[-1]

    monkeypatch.setattr(live._xc, "pending_tensor_report", counted)
    return calls


def test_a_step_of_to_device_tensors_reads_no_heap(scans, reports):
    """Nor torch-xla's report (the IR text of each pending tensor): only to_device's ids are
    pending after the sync, and the device's count of pending tensors says so."""
    torch.manual_seed(0)
    model = xt.to_device(Tagger())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = {"ids": torch.randint(0, 20, (2, 5)), "targets": torch.randint(0, 3, (2, 5))}
    losses = []
    for _ in range(3):
        moved = xt.to_device(batch)
        loss = model(**moved)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        xt.sync()
        assert not any(_xc.needs_materialization([loss, *model.parameters()]))
        losses.append(float(loss.detach().cpu()))
    assert scans == []                     # the registry had every pending tensor
    assert reports == []
    assert _xc.pending_count(str(xt.xla_device())) >= 1     # the ids: pending converts of int32 data
    assert losses[2] < losses[0]


def test_the_gradient_of_a_leaf_computed_from_ids_is_found_without_the_heap(scans, reports):
    """A leaf made from `to_device`'s ids (an input-saliency map: embeddings detached and
    set to require grad) is a GuardedTensor; its gradient, which autograd made, is found
    through the leaf, is computed narrowed, and matches eager PyTorch's."""
    torch.manual_seed(0)
    model = Tagger()
    batch = {"ids": torch.randint(0, 20, (2, 5)), "targets": torch.randint(0, 3, (2, 5))}

    def saliency(model, ids, targets):
        embedded = model.embed(ids).detach().requires_grad_()
        loss = torch.nn.functional.cross_entropy(model.head(embedded).flatten(0, 1), targets.flatten())
        loss.backward()
        return embedded

    eager = copy.deepcopy(model)
    embedded = saliency(xt.to_device(model), **xt.to_device(batch))
    assert isinstance(embedded, reads.GuardedTensor) and embedded.is_leaf
    assert _xc.needs_materialization([embedded.grad])[0]
    xt.sync()
    assert not _xc.needs_materialization([embedded.grad])[0]
    assert scans == [] and reports == []   # found through the leaf, not the heap
    # (eager after XLA: autograd sizes its device queues at the process's first backward)
    torch.testing.assert_close(embedded.grad.cpu(), saliency(eager, **batch).grad)


@pytest.mark.filterwarnings("error")
def test_a_parameter_that_is_no_longer_a_leaf_is_synced_without_a_warning(scans, reports):
    """A frozen parameter updated in place from a tensor that requires grad is no autograd
    leaf (its `.grad` is never filled, and reading it warns): the sync computes it and reads
    no gradient of it."""
    model = xt.to_device(torch.nn.Linear(3, 2))
    model.bias.requires_grad_(False)
    shift = xt.to_device(torch.ones(2)).requires_grad_()
    model.bias.add_(shift * 2)
    assert isinstance(model.bias, torch.nn.Parameter) and not model.bias.is_leaf
    xt.sync()
    assert not _xc.needs_materialization([model.bias])[0]
    assert scans == [] and reports == []


def test_an_untracked_pending_tensor_is_still_found(scans, reports):
    d = xt.xla_device()
    ids = xt.to_device(torch.tensor([[3, 4]]))   # pending on purpose, known: not what makes the report read
    x = torch.randn(4, 4).to(d)            # moved by torch-xla, not by x64guard
    y = x * 2 + 1
    xt.sync()
    assert not _xc.needs_materialization([y])[0]
    assert scans and scans[0] is True      # the young generations first
    assert len(reports) == 1 and "f32[4,4]{1,0}" in dict(reports[0]).values()   # it named y; after y's sync, no report
    assert ids.tolist() == [[3, 4]]
    torch.testing.assert_close(y.cpu(), x.cpu() * 2 + 1)


def test_the_registry_keeps_nothing_alive():
    ids = xt.to_device(torch.arange(6).reshape(2, 3))
    made = ids * 2
    refs = [weakref.ref(ids), weakref.ref(made)]
    assert any(t is made for t in live.LIVE.candidates())
    del ids, made
    gc.collect()
    assert [ref() for ref in refs] == [None, None]


def test_made_tensors_stay_in_the_order_made_and_dead_ones_are_dropped():
    """An op's result usually dies before the next op: its entry is dropped later, not at its
    death. A live tensor whose id a dead one held comes after those made before it (the
    order a sync lowers them in), and between syncs the table stays bounded."""
    registry = live.LiveTensors(made_prune_at=8)
    first, second = torch.zeros(1), torch.zeros(2)
    for tensor in (first, second):
        registry.note_made(tensor)
    registry.note_made(first)                 # noted again: keeps its place
    dead, third, fourth = torch.zeros(3), torch.zeros(4), torch.zeros(5)
    registry.note_made(dead)
    registry.note_made(third)
    # `fourth` gets the id a dead tensor held, at that tensor's place (as CPython reuses ids)
    registry.made = {(id(fourth) if key == id(dead) else key): ref for key, ref in registry.made.items()}
    del dead
    gc.collect()
    registry.note_made(fourth)
    assert registry.candidates() == [first, second, third, fourth]
    for _ in range(100):
        registry.note_made(torch.zeros(1))    # each dies at once
    assert len(registry.made) <= 2 * 8 + 1
    assert registry.candidates() == [first, second, third, fourth]


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


# the heap scan that finds them reads no object's `__class__` (torch.distributed's deprecated
# `reduce_op` warned from there, at x64guard's line)
@pytest.mark.filterwarnings("error::FutureWarning")
def test_a_sync_without_arguments_names_the_64bit_parameters_it_refuses():
    """The names a sync without arguments gives what it found (formatted only for a message)
    reach the refusal of a float64 model moved by torch-xla, not by to_device (found by a
    heap scan); the step's tensors stay pending, and the next such sync leaves them alone."""
    d = xt.xla_device()
    linear = torch.nn.Linear(3, 2).double().to(d)
    optimizer = torch.optim.SGD(linear.parameters(), lr=0.1)
    linear(torch.ones(4, 3, dtype=torch.float64).to(d)).sum().backward()
    optimizer.step()
    with pytest.raises(x64guard.X64GuardError) as info:
        xt.sync()
    message = str(info.value)
    assert "a parameter float64[2, 3] (torch.float64)" in message and "a parameter float64[2] (torch.float64)" in message
    assert info.value.findings[0].kind == "sync-64bit-tensor"
    assert all(_xc.needs_materialization(list(linear.parameters())))
    xt.sync()                              # refused before: left as torch-xla left them
    assert linear.weight.dtype == torch.float64
    import torch_xla

    torch_xla.sync()                       # torch-xla computes them, at float64, as it would have
    assert not any(_xc.needs_materialization(list(linear.parameters())))

"""`GuardedTensor` (x64guard/torch_xla/reads.py): what `to_device` gives an int64 tensor,
so that reads of pending tensors computed from it run narrowed without `step()`."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import x64guard
import x64guard.torch_xla as xt
from x64guard.torch_xla.boundary import narrow_alias
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla import metrics as xla_metrics
from x64guard.torch_xla.reads import GuardedTensor


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        yield


def test_to_device_guards_int64_tensors_only():
    batch = xt.to_device({"ids": torch.tensor([[1, 2, 3]]), "scale": torch.tensor([0.5], dtype=torch.float64),
                          "mask": torch.tensor([[True, False, True]])})
    assert type(batch["ids"]) is GuardedTensor and batch["ids"].dtype == torch.int64
    assert type(batch["scale"]) is torch.Tensor and batch["scale"].dtype == torch.float32
    assert type(batch["mask"]) is torch.Tensor


def test_what_is_computed_from_guarded_ids_is_guarded_and_plain_on_the_host():
    ids = xt.to_device(torch.tensor([[4, 0, 7]]))
    derived = (ids > 0).long().cumsum(-1)
    assert type(derived) is GuardedTensor and derived.dtype == torch.int64
    host = derived.cpu()
    assert type(host) is torch.Tensor and host.dtype == torch.int64
    assert host.tolist() == [[1, 1, 2]]
    assert type(derived.to("cpu")) is torch.Tensor


@pytest.mark.parametrize("read", ["bool", "item", "int", "tolist", "cpu", "nonzero"])
def test_reads_of_pending_guarded_tensors_run_narrowed(read):
    """Each read of a pending tensor computed from to_device's ids: x64guard runs its
    graph (torch-xla compiles nothing of its own), and the value is eager's."""
    cpu_ids = torch.tensor([[3, 14, 15], [9, 26, 5]])
    ids = xt.to_device(cpu_ids)
    read_of = {"bool": lambda t: bool((t > 10).any()), "item": lambda t: t.sum().item(),
               "int": lambda t: int(t.max()), "tolist": lambda t: (t * 3 + 1).tolist(),
               "cpu": lambda t: (t % 7).cpu().tolist(), "nonzero": lambda t: (t > 10).nonzero().cpu().tolist()}[read]
    compiles, own = xla_metrics.compile_count(), xla_metrics.own_compile_count()
    value = read_of(ids * 1 + 0)       # pending: computed from the ids
    assert xla_metrics.compile_count() - compiles == xla_metrics.own_compile_count() - own
    assert value == read_of(cpu_ids)


def test_int64_arithmetic_that_overflows_int32_is_refused_at_the_read():
    """A read narrows the graph as sync does: an int64 product int32 cannot hold is refused
    (eager PyTorch's answer or a refusal, never a wrapped value)."""
    # (three ids, not test_outside_work's two: torch-xla reuses an IR node made before by
    # its shapes, device data and scalars alike, with the Python stack recorded then, or not:
    # after this test, that test's finding named torch-xla's op instead of its line)
    ids = xt.to_device(torch.tensor([2_000_000_000, 3, 5]))
    with pytest.raises(x64guard.X64GuardError, match="int64"):
        ((ids * 37) % 4099).tolist()


def test_one_hot_and_cross_entropy_take_guarded_ids():
    cpu_ids = torch.tensor([0, 3, 1])
    ids = xt.to_device(cpu_ids)
    logits = xt.to_device(torch.randn(3, 4))
    assert F.one_hot(ids, 4).cpu().tolist() == F.one_hot(cpu_ids, 4).tolist()
    assert F.cross_entropy(logits, ids).item() == pytest.approx(F.cross_entropy(logits.cpu(), cpu_ids).item(),
                                                                 rel=1e-6)


def test_guarded_ids_through_the_backend():
    torch.manual_seed(0)
    embed = torch.nn.Embedding(20, 4)
    cpu_ids = torch.tensor([[1, 5, 19]])
    compiled = torch.compile(xt.to_device(embed), backend="x64guard")
    out = compiled(xt.to_device(cpu_ids))
    assert torch.allclose(out.cpu(), embed(cpu_ids), atol=1e-6)


def test_dynamo_traces_guarded_tensors_as_plain_ones():
    """While dynamo compiles, GuardedTensor's __torch_function__ is off: dynamo traced into
    it before, and a read's check of a pending tensor (C++) broke the graph at every
    `Tensor.to` (a tiny OPT: 5 breaks, then a graph without inputs torch-xla cannot run);
    now one graph, and the subclass is itself again after."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(20, 8)
            self.head = torch.nn.Linear(8, 3)

        def forward(self, ids, labels):
            logits = self.head(self.embed(ids).mean(1))
            weight = (labels >= 0).to(torch.float32).mean()     # Tensor.to: one of the reads' functions
            return F.cross_entropy(logits, labels) * weight, F.one_hot(labels, 3).sum()

    cpu = Classifier()
    cpu_ids, cpu_labels = torch.tensor([[1, 5, 19], [2, 2, 7]]), torch.tensor([0, 2])
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(xt.to_device(cpu), backend="x64guard")
    batch = xt.to_device({"ids": cpu_ids, "labels": cpu_labels})
    loss, hot = compiled(**batch)
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 1
    assert GuardedTensor.__torch_function__ is not torch._C._disabled_torch_function_impl
    expected_loss, expected_hot = cpu(cpu_ids, cpu_labels)
    assert loss.item() == pytest.approx(expected_loss.item(), rel=1e-6) and hot.item() == expected_hot.item()


def test_results_are_fresh_tensors_not_aliases_of_plain_ones():
    """The class is given in place: PyTorch's default (`as_subclass`) made each result a
    view of a plain tensor, which stayed pending behind it with autograd's graph."""
    ids = xt.to_device(torch.tensor([[1, 2, 3]]))
    derived = ids * 2
    assert ids._base is None and derived._base is None and type(derived) is GuardedTensor
    mask = ids.to(ids.device, dtype=torch.bool)      # Tensor.to within the device: still guarded
    assert type(mask) is GuardedTensor and mask.dtype == torch.bool
    values, indices = torch.max(derived, dim=1)
    assert type(values) is GuardedTensor and type(indices) is GuardedTensor


def test_in_place_ops_and_no_op_conversions_leave_the_callers_tensor_as_it_is():
    ids = xt.to_device(torch.tensor([[1, 2, 3]]))
    plain = torch.zeros(1, 3, dtype=torch.int64, device=ids.device)
    assert plain.add_(ids) is plain and type(plain) is torch.Tensor
    assert plain.type_as(ids) is plain and type(plain) is torch.Tensor
    assert plain.cpu().tolist() == [[1, 2, 3]]


def test_a_sync_without_arguments_after_named_syncs_finds_nothing_stale():
    """Steps with dropout ended by sync(model, optimizer, loss), then the drop-in sync():
    with aliases, each step's loss kept a plain base pending (with autograd's graph), which
    this sync found and computed again: a program of stale steps, refused where it held an
    earlier step's random-number seed (the LSTM tagger of the model suite). Now nothing of
    the earlier steps is left to compute."""
    torch.manual_seed(0)
    model = xt.to_device(torch.nn.Sequential(torch.nn.Embedding(20, 8), torch.nn.Dropout(0.1),
                                             torch.nn.Linear(8, 3)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = xt.to_device(torch.tensor([[1, 5, 19, 4], [2, 2, 7, 0]]))
    for _ in range(2):
        loss = F.cross_entropy(model(ids).flatten(0, 1), (ids % 3).flatten())
        assert type(loss) is GuardedTensor
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        xt.sync(model, optimizer, loss)
    calls = xt.counters()["calls"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        xt.sync()
    assert xt.counters()["calls"] == calls
    assert not [w for w in caught if issubclass(w.category, x64guard.X64GuardWarning)], [str(w.message) for w in caught]


def test_a_sync_without_arguments_keeps_each_tensors_dtype():
    """The drop-in for torch_xla.sync(), which changes no dtype: an int64 tensor it
    computes stays int64 (over its int32 result, a GuardedTensor), a float32 one is simply
    computed; reading it back runs nothing 64-bit (torch-xla compiles nothing of its own)."""
    ids = xt.to_device(torch.tensor([[3, 14, 15], [9, 26, 5]]))
    positions = torch.full((2, 3), 7, dtype=torch.int64, device=ids.device) * 2 + ids
    scale = (ids > 10).float().mean()
    xt.sync()
    assert positions.dtype == torch.int64 and type(positions) is GuardedTensor
    assert narrow_alias(positions).dtype == torch.int32
    assert scale.dtype == torch.float32 and not _xc.needs_materialization([scale])[0]
    compiles, own = xla_metrics.compile_count(), xla_metrics.own_compile_count()
    assert positions.cpu().tolist() == [[17, 28, 29], [23, 40, 19]] and positions.cpu().dtype == torch.int64
    assert positions.sum().item() == 156
    assert xla_metrics.compile_count() - compiles == xla_metrics.own_compile_count() - own


def test_ids_moved_before_a_dynamo_reset_reach_the_backend_as_int64():
    """torch._dynamo.reset() clears dynamo's compile callbacks, which make GuardedTensor a
    plain tensor to dynamo; ids moved before it still trace as int64 (issue 34, D2:
    take_along_dim failed on int32 fake indices)."""
    x = torch.randn(3, 5)
    ids = xt.to_device(torch.tensor([1, 3, 0]))
    xd = xt.to_device(x)
    torch._dynamo.reset()
    out = torch.compile(lambda i, x: torch.take_along_dim(x, i[:, None], 1), backend="x64guard")(ids, xd)
    assert torch.equal(out.cpu(), torch.take_along_dim(x, torch.tensor([[1], [3], [0]]), 1))

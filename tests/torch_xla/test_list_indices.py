"""A Python-list index of a guarded (or, inside `step()`, any) XLA tensor becomes a shared
int32 device table (x64guard/torch_xla/list_indices.py): eager's values and gradients, and
a lazy graph with no fresh int64 data to read back on each step."""

from __future__ import annotations

import pytest
import torch
import torch_xla

import x64guard.torch_xla as xt
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.list_indices import int32_index

pytestmark = pytest.mark.torch


@pytest.fixture
def device():
    return torch_xla.device()


@pytest.mark.parametrize("index, expected", [
    ([-2], [-2]),
    ((Ellipsis, [-2], slice(None)), (Ellipsis, [-2], slice(None))),
    ((None, 1, [0, 3], slice(1, None), [2, -1]), (None, 1, [0, 3], slice(1, None), [2, -1])),
    ([2 ** 31 - 1, -2 ** 31], [2 ** 31 - 1, -2 ** 31]),
])
def test_lists_of_ints_become_int32_tables(device, index, expected):
    rewritten = int32_index(index, device)
    parts, wanted = (rewritten, expected) if isinstance(index, tuple) else ((rewritten,), (expected,))
    assert len(parts) == len(wanted)
    for part, want in zip(parts, wanted):
        if isinstance(want, list):
            assert part.dtype is torch.int32 and part.device.type == "xla"
            assert part.cpu().tolist() == want
        else:
            assert part == want


@pytest.mark.parametrize("index", [
    (Ellipsis, [0], torch.tensor([1])),        # beside an int64 tensor: torch-xla refuses int32 with int64
    [True, False],                             # a mask
    [[0, 1], [1, 0]],                          # nested: a 2-D index
    [2 ** 31],                                 # int32 cannot hold it
    [],                                        # empty
    list(range(65)),                           # longer than a shared table
    (slice(None), [0], True),                  # a bool part
    3, slice(1, 2), (1, slice(None)),          # no list
])
def test_other_indices_are_left_as_they_are(device, index):
    assert int32_index(index, device) is None


def test_one_table_serves_every_call_with_the_same_values(device):
    first, second = int32_index((Ellipsis, [-2]), device), int32_index((Ellipsis, [-2]), device)
    assert first[1] is second[1]


def _guarded_features():
    """Features computed from to_device's int64 ids (GuardedTensors, as a model's are), and eager's."""
    ids = torch.tensor([[1, 4, 2], [3, 0, 5]])
    table = torch.randn(6, 5, 4, generator=torch.Generator().manual_seed(0))
    device_table = table.to(torch_xla.device()).requires_grad_(True)
    table.requires_grad_(True)
    return xt.to_device(ids), device_table, ids, table


@pytest.mark.parametrize("index", [
    (Ellipsis, [-2], slice(None)),              # Falcon's multi-query split
    (Ellipsis, [-1, 0], slice(None)),
    ([1, 0], slice(None), [3, -1]),             # two lists, broadcast together
    (None, Ellipsis, [2]),
])
def test_guarded_list_indexing_gives_eager_values_and_gradients(index):
    ids, device_table, eager_ids, table = _guarded_features()
    features = torch.nn.functional.embedding(ids, device_table.flatten(1)).unflatten(-1, (5, 4))
    assert isinstance(features, xt.GuardedTensor)
    picked = features[index]
    expected = torch.nn.functional.embedding(eager_ids, table.flatten(1)).unflatten(-1, (5, 4))[index]
    (picked * picked).sum().backward()
    (expected * expected).sum().backward()
    xt.sync(picked, device_table.grad)
    assert torch.equal(picked.cpu(), expected.detach())
    assert torch.allclose(device_table.grad.cpu(), table.grad, rtol=1e-6, atol=1e-6)


def test_guarded_list_assignment_gives_eager_values():
    ids, _, eager_ids, _ = _guarded_features()
    values = ids * 10
    values[..., [0, -1]] = 7
    expected = eager_ids * 10
    expected[..., [0, -1]] = 7
    xt.sync()   # without arguments: the tensor keeps its dtype
    assert values.dtype is torch.int64 and torch.equal(values.cpu(), expected)


def test_a_list_beside_an_int64_tensor_index_still_indexes_as_eager():
    ids, _, eager_ids, _ = _guarded_features()
    rows = torch.tensor([1, 0])
    picked = (ids * 2)[rows.to(torch_xla.device()), [2, 0]]
    xt.sync(picked)
    assert torch.equal(picked.cpu(), (eager_ids * 2)[rows, [2, 0]])


def _readbacks(monkeypatch) -> list:
    reads = []
    original = _xc.cpu_tensors
    monkeypatch.setattr(_xc, "cpu_tensors", lambda tensors: reads.append(len(tensors)) or original(tensors))
    return reads


def test_a_guarded_step_indexed_by_a_list_reads_nothing_back(monkeypatch):
    """Each step's list is fresh, as a model's `qkv[..., [-2], :]` is; torch-xla would upload it
    as int64 data every time, which x64guard then read back to narrow."""
    ids, device_table, eager_ids, table = _guarded_features()
    reads = _readbacks(monkeypatch)
    totals = []
    for _ in range(3):
        features = torch.nn.functional.embedding(ids, device_table.flatten(1)).unflatten(-1, (5, 4))
        total = features[..., [-2], :].sum()
        xt.sync(total)
        totals.append(float(total.cpu()))
    expected = torch.nn.functional.embedding(eager_ids, table.flatten(1)).unflatten(-1, (5, 4))[..., [-2], :].sum()
    assert totals == [float(expected)] * 3
    assert reads == []


def test_inside_step_a_plain_xla_tensor_indexed_by_a_list_reads_nothing_back(monkeypatch, device):
    base = torch.arange(24.0).reshape(2, 3, 4)
    values = base.to(device)
    reads = _readbacks(monkeypatch)
    for _ in range(2):
        with xt.step():
            total = (values * 2)[:, [2, 0], :].sum()
        xt.sync(total)
        assert float(total.cpu()) == float((base * 2)[:, [2, 0], :].sum())
    assert reads == []

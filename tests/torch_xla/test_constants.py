"""The 64-bit device data a lazy graph takes that no input owns (torch-xla's scalars):
narrowed on the host, read back in one transfer per call, and each device buffer only
once; a value int32 cannot hold is refused, never cached or wrapped."""

from __future__ import annotations

import pytest
import torch
import torch_xla

import x64guard
import x64guard.torch_xla as xt
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla import constants

pytestmark = pytest.mark.torch


def test_out_of_range_constant_is_refused_and_not_cached():
    device = torch_xla.device()
    value = torch.tensor([2**40, 1]).to(device)
    with pytest.raises(x64guard.X64GuardError, match="1099511627776 does not fit in int32"):
        constants.narrowed_constants([value], [torch.int32], "an input of the lazy graph", device)
    assert _xc.data_id(value) not in constants.CONSTANTS.entries


@pytest.mark.filterwarnings("ignore::x64guard.X64GuardWarning")
def test_lazy_constants_are_read_back_in_one_transfer_once_per_buffer(monkeypatch):
    device = torch_xla.device()
    reads = []
    original = _xc.cpu_tensors
    monkeypatch.setattr(_xc, "cpu_tensors", lambda tensors: reads.append(len(tensors)) or original(tensors))
    ids = xt.to_device(torch.arange(6).reshape(2, 3))
    offsets = [torch.tensor([7]).to(device), torch.tensor([11]).to(device)]   # int64 device data, moved as is
    totals = []
    for _ in range(3):
        total = (ids + offsets[0] + offsets[1]).sum()
        xt.sync(total)
        totals.append(int(total.cpu()))
    assert totals == [int((torch.arange(6) + 18).sum())] * 3
    assert reads == [2]       # both in one transfer at the first step; the same buffers cached after

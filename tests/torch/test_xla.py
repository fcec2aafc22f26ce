"""On XLA tensors (torch-xla on the CPU, PJRT_DEVICE=CPU): the op table's dtypes, the values
of stock PyTorch, and no s64 in the HLO of the rows that hold no int64 of their own."""

from __future__ import annotations

import pytest
import torch

import x64guard.torch as xt
from tests.torch.ops import OPS, expected_dtype, inputs, outputs
from tests.torch.test_ops import assert_same_values, run

torch_xla = pytest.importorskip("torch_xla")

XLA_ROWS = [o for o in OPS if o.xla]


@pytest.fixture(scope="module")
def device():
    return torch_xla.device()


def hlo_s64(tensors) -> list[str]:
    text = torch_xla._XLAC._get_xla_tensors_hlo([t for t in tensors if isinstance(t, torch.Tensor)])
    return [line.strip() for line in text.splitlines() if "s64" in line]


@pytest.mark.parametrize("default", [torch.int32, torch.int8], ids=str)
@pytest.mark.parametrize("op", XLA_ROWS, ids=lambda o: o.name)
def test_xla_table(op, default, device):
    with xt.default_int_dtype(default):
        if op.random:
            torch.manual_seed(1234)
        got = outputs(op.fn(inputs(device)))
    assert all(g.device.type == "xla" for g in got if isinstance(g, torch.Tensor))
    assert [g.dtype for g in got] == [expected_dtype(s, default) for s in op.expect], op.name
    if not (op.graph_int64 or op.xla_s64 or "int64" in op.expect):
        assert hlo_s64(got) == [], op.name
    if op.random:
        return  # torch.manual_seed does not seed XLA's generator: nothing to compare with
    try:
        assert_same_values(got, run(op), op.name)            # stock PyTorch on the CPU
    except AssertionError:
        # XLA rounds some float reductions and breaks some ties (topk, cummax) differently;
        # then the values must be stock PyTorch's on XLA. (Where stock torch-xla is wrong,
        # e.g. a bool tensor's cumsum or `<< 2`, the setting's results are the CPU's.)
        assert_same_values(got, outputs(op.fn(inputs(device))), op.name)

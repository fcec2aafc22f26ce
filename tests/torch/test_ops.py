"""The op table (tests/torch/ops.py) under each default integer dtype: the dtypes the
table names, and the values stock PyTorch computes without the setting."""

from __future__ import annotations

import pytest
import torch

import x64guard.torch as xt
from tests.torch.ops import OPS, expected_dtype, inputs, outputs

DEFAULTS = [torch.int8, torch.int16, torch.int32, torch.int64]


def run(op, device="cpu"):
    if op.random:
        torch.manual_seed(1234)
    return outputs(op.fn(inputs(device)))


def assert_same_values(got, want, name):
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        if isinstance(w, torch.dtype):
            continue
        g, w = g.cpu(), w.cpu()
        assert g.shape == w.shape, name
        if w.is_floating_point():
            assert torch.equal(g, w), name
        else:
            assert torch.equal(g.to(torch.int64), w.to(torch.int64)), name


def assert_dtypes(got, op, default):
    want = [expected_dtype(spec, default) for spec in op.expect]
    assert [g.dtype for g in got] == want, f"{op.name} under {default}"


@pytest.fixture(scope="module")
def stock():
    """Every row run by stock PyTorch (no setting): the reference values."""
    return {op.name: run(op) for op in OPS}


def test_the_table_is_large_enough():
    assert len(OPS) >= 40


@pytest.mark.parametrize("default", DEFAULTS, ids=str)
@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_eager(op, default, stock):
    with xt.default_int_dtype(default):
        got = run(op)
    assert_dtypes(got, op, default)
    assert_same_values(got, stock[op.name], op.name)


def test_int64_is_stock_pytorch(stock):
    """Under int64 every row has exactly stock PyTorch's dtypes (the table says so too)."""
    with xt.default_int_dtype(torch.int64):
        assert torch.overrides._get_current_function_mode_stack() == []
        for op in OPS:
            got = run(op)
            assert [g.dtype for g in got] == [w.dtype for w in stock[op.name]], op.name

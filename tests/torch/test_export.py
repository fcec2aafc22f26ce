"""Inside torch.export, strict (Dynamo) and non-strict (Python tracing): the exported graph
holds no int64 where eager code would make none, and runs like eager code."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import x64guard.torch as xt
from tests.torch.graphs import int64_nodes
from tests.torch.ops import OPS, expected_dtype, inputs, outputs


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)

    def forward(self, x):
        b = x > 0
        ids = torch.tensor([0, 2, 1])
        positions = torch.arange(x.shape[0])
        count = b.sum() + (b + 1).sum(1)
        best = x.argmax(1)
        top, where = x.max(0)
        emb = self.emb(best)
        picked = torch.where(b, 1, 0)
        gathered = torch.gather(x, 1, best.unsqueeze(1))
        return ids, positions, count, best, top, where, emb, picked, gathered, torch.full((2,), 3)


class WithInt64Ops(torch.nn.Module):
    """sort's indices and cross_entropy's targets: int64 in the graph, converted at once."""

    def forward(self, x):
        order = torch.sort(x, 1).indices
        loss = F.cross_entropy(x, x.argmax(1))
        return order, loss


X = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Model().eval()


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "non-strict"])
def test_export_has_no_int64(strict, model):
    with xt.default_int_dtype(torch.int32):
        ep = torch.export.export(model, (X,), strict=strict)
        eager = model(X)
    assert int64_nodes(ep.graph_module) == []
    got = ep.module()(X)                       # the exported program, run without the setting
    assert [g.dtype for g in got] == [e.dtype for e in eager]
    assert {g.dtype for g in got} == {torch.int32, torch.float32}
    stock = model(X)
    for g, e, s in zip(got, eager, stock):
        assert torch.equal(g, e) and torch.equal(g.to(s.dtype), s)


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "non-strict"])
def test_export_int64_only_where_aten_requires_it(strict):
    with xt.default_int_dtype(torch.int32):
        ep = torch.export.export(WithInt64Ops(), (X,), strict=strict)
    wide = int64_nodes(ep.graph_module)
    assert set(wide) <= {"call_function aten.sort.default", "call_function <built-in function getitem>",
                         "call_function aten.to.dtype", "call_function aten._to_copy.default"}
    order, loss = ep.module()(X)
    assert order.dtype is torch.int32
    assert torch.equal(order, torch.sort(X, 1).indices.to(torch.int32))
    assert torch.equal(loss, F.cross_entropy(X, X.argmax(1)))


EXPORT_ROWS = [o for o in OPS if not o.data_dependent and not o.random and "int64" not in o.expect
               and not o.graph_int64 and o.xla]


class Row(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x, b):
        t = inputs()
        t.update(x=x, b=b)
        return tuple(outputs(self.op.fn(t)))


@pytest.mark.parametrize("op", EXPORT_ROWS, ids=lambda o: o.name)
def test_export_the_table_non_strict(op):
    t = inputs()
    with xt.default_int_dtype(torch.int16):
        ep = torch.export.export(Row(op), (t["x"], t["b"]), strict=False)
    got = ep.module()(t["x"], t["b"])
    assert [g.dtype for g in got] == [expected_dtype(s, torch.int16) for s in op.expect], op.name
    assert int64_nodes(ep.graph_module) == [], op.name

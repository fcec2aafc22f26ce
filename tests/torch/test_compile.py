"""Inside torch.compile: the op table's dtypes and values, with Dynamo's FX graph and the
aten graph AOT autograd makes of it free of int64 (except the rows the table marks);
graphs recompiled when the default changes; dynamic shapes; one inductor run."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

import x64guard.torch as xt
from tests.torch.graphs import AotRecorder, Recorder, int64_in_graphs, int64_nodes
from tests.torch.ops import OPS, expected_dtype, inputs, outputs
from tests.torch.test_ops import assert_same_values, run

# torch.tensor(numpy array) inside Dynamo: PyTorch warns about its own rewrite of the row.
pytestmark = pytest.mark.filterwarnings("ignore:To copy construct from a tensor")


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True):
        yield
    torch._dynamo.reset()


def compiled_run(op, backend, default):
    fn = torch.compile(op.fn, backend=backend, fullgraph=True)
    with xt.default_int_dtype(default):
        if op.random:
            torch.manual_seed(1234)
        return outputs(fn(inputs()))


@pytest.mark.parametrize("default", [torch.int32, torch.int8], ids=str)
@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_compiled_table(op, default):
    recorder = AotRecorder()
    got = compiled_run(op, recorder, default)
    assert [g.dtype for g in got] == [expected_dtype(s, default) for s in op.expect], op.name
    assert_same_values(got, run(op), op.name)

    assert len(recorder.graphs) == 1  # fullgraph: the whole call is one graph
    if not op.graph_int64 and "int64" not in op.expect:
        wide = int64_in_graphs(recorder.graphs)
        assert wide == [], f"{op.name}: int64 in Dynamo's graph: {wide}\n{recorder.graphs[0].code}"
        wide = int64_in_graphs(recorder.aten_graphs)
        assert wide == [], f"{op.name}: int64 in the aten graph: {wide}\n{recorder.aten_graphs[0].code}"


def model(x, table):
    """A small model of the kind Neuron users compile: no int64 anywhere in its graph."""
    ids = torch.tensor([[1, 4, 2], [0, 3, 3]])
    emb = torch.nn.functional.embedding(ids, table)                 # (2, 3, 4)
    scores = emb @ x.T                                              # (2, 3, 5)
    best = scores.argmax(-1)                                        # (2, 3)
    top, where = scores.max(1)                                      # (2, 5)
    mask = scores > 0
    positions = torch.arange(scores.shape[-1]).expand_as(scores)
    count = mask.sum(-1) + (mask + 1).sum() + torch.count_nonzero(scores)
    picked = torch.gather(scores, -1, best.unsqueeze(-1))
    ranked = torch.where(mask, positions, -1)
    return best, top, where, count, picked, ranked, torch.full((2,), 7)


MODEL_ARGS = (torch.randn(5, 4, generator=torch.Generator().manual_seed(0)),
              torch.randn(6, 4, generator=torch.Generator().manual_seed(1)))


def test_model_graph_has_no_int64_and_matches_eager():
    recorder = Recorder()
    compiled = torch.compile(model, backend=recorder, fullgraph=True)
    with xt.default_int_dtype(torch.int32):
        got = compiled(*MODEL_ARGS)
        eager = model(*MODEL_ARGS)
    stock = model(*MODEL_ARGS)
    assert int64_in_graphs(recorder.graphs) == []
    assert [g.dtype for g in got] == [e.dtype for e in eager]
    assert {g.dtype for g in got} == {torch.int32, torch.float32}
    for g, e, s in zip(got, eager, stock):
        assert torch.equal(g, e)
        assert torch.equal(g.to(s.dtype), s)


def test_aten_graph_has_no_int64():
    """The graph AOT autograd hands a compiler (forward and backward) holds no int64 either."""
    def loss(x, table):
        best, top, *_ = model(x, table)
        return top.sum() + best.sum()

    x, table = (a.clone().requires_grad_() for a in MODEL_ARGS)
    recorder = AotRecorder()
    compiled = torch.compile(loss, backend=recorder, fullgraph=True)
    with xt.default_int_dtype(torch.int32):
        value = compiled(x, table)
        value.backward()
    assert len(recorder.aten_graphs) == 2  # forward and backward
    assert int64_in_graphs(recorder.graphs + recorder.aten_graphs) == []
    grad = x.grad.clone()
    x.grad = None
    ref = model(x, table)
    (ref[1].sum() + ref[0].sum()).backward()
    assert torch.equal(grad, x.grad)  # max over a dim: the gradient reaches the same elements
    assert torch.equal(value.detach(), (ref[1].sum() + ref[0].sum()).detach())


def test_inductor_runs_the_model():
    compiled = torch.compile(model, fullgraph=True)
    with xt.default_int_dtype(torch.int32):
        got = compiled(*MODEL_ARGS)
        eager = model(*MODEL_ARGS)
    for g, e in zip(got, eager):
        assert g.dtype == e.dtype and torch.equal(g, e)


def test_changing_the_default_recompiles():
    """Dynamo guards on the mode types on the stack: each default gets its own graph."""
    recorder = Recorder()
    compiled = torch.compile(lambda x: (torch.arange(3) + x.argmax(), (x > 0).sum()), backend=recorder)
    x = torch.randn(4)
    seen = {}
    for default in (torch.int32, torch.int16, torch.int64, torch.int32, torch.int8):
        with xt.default_int_dtype(default):
            seen[default] = [t.dtype for t in compiled(x)]
    assert seen == {d: [d, d] for d in (torch.int32, torch.int16, torch.int64, torch.int8)}
    assert len(recorder.graphs) == 4  # int32 compiled once, reused


def test_dynamic_shapes():
    recorder = Recorder()
    compiled = torch.compile(lambda x: (torch.arange(x.shape[0]), torch.tensor([x.shape[0], 1]), x.argmax(0)),
                             backend=recorder, dynamic=True, fullgraph=True)
    with xt.default_int_dtype(torch.int32):
        for n in (3, 5, 9):
            got = compiled(torch.randn(n))
            assert [t.dtype for t in got] == [torch.int32] * 3
            assert torch.equal(got[0], torch.arange(n, dtype=torch.int32))
            assert got[1].tolist() == [n, 1]
    assert int64_in_graphs(recorder.graphs) == []


def test_overflow_is_refused_while_compiling():
    compiled = torch.compile(lambda x: x + torch.tensor([2 ** 40]), backend=Recorder())
    with xt.default_int_dtype(torch.int32):
        with pytest.raises(xt.DefaultIntOverflowError, match="1099511627776"):
            compiled(torch.ones(1, dtype=torch.int32))


def test_without_the_setting_compiled_graphs_are_stock():
    recorder = Recorder()
    compiled = torch.compile(lambda x: (torch.arange(3), x.argmax()), backend=recorder, fullgraph=True)
    got = compiled(torch.randn(4))
    assert [t.dtype for t in got] == [torch.int64, torch.int64]
    assert int64_nodes(recorder.graphs[0])

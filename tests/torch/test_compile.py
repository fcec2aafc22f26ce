"""Inside torch.compile: the op table's dtypes and values, with Dynamo's FX graph and the
aten graph AOT autograd makes of it free of int64 (except the rows the table marks);
graphs recompiled when the default changes; dynamic shapes; one inductor run; the operators
torch/_tensor.py wraps with functools.wraps (`1 - x`, `x ** 2`, `7 // x`, ...)."""

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


def rms_norm(h, eps=1e-6):
    """RMSNorm as Llama-style models write it, with `**`."""
    return h * torch.rsqrt((h ** 2).mean(-1, keepdim=True) + eps)


def model(x, table):
    """A small model of the kind Neuron users compile: no int64 anywhere in its graph. Its
    integer arithmetic uses the reversed and wrapped operators of torch/_tensor.py."""
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
    buckets = (2 ** (positions % 3) + (7 // (1 + positions)) - positions // 2) << 1 | 1 >> positions
    decay = 1.0 / (1 + positions) ** 2 * (1 - mask.sum(-1, keepdim=True)) + 3 % (1 + positions)
    return best, top, where, count, picked, ranked, torch.full((2,), 7), rms_norm(scores), buckets, decay


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
    """Dtypes as in eager under the setting; values as inductor's own without it (inductor
    fuses RMSNorm's float reduction, so eager's float bits are not its oracle)."""
    compiled = torch.compile(model, fullgraph=True)
    with xt.default_int_dtype(torch.int32):
        got = compiled(*MODEL_ARGS)
        eager = model(*MODEL_ARGS)
    stock = compiled(*MODEL_ARGS)
    for g, e, s in zip(got, eager, stock):
        assert g.dtype == e.dtype and torch.equal(g.to(s.dtype), s)
        assert g.is_floating_point() or torch.equal(g, e)


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


# The operators torch/_tensor.py wraps with functools.wraps, with a Python number on either
# side as users write them. Dynamo inlines the wrapper and hands the mode a copy of it
# (torch 2.15) that the mode must still recognise as the function of its table.
WRAPPED_FORMS = {
    "x ** 2": lambda x: x ** 2, "2 ** x": lambda x: 2 ** x, "1 - x": lambda x: 1 - x,
    "1.0 / x": lambda x: 1.0 / x, "x // 2": lambda x: x // 2, "7 // x": lambda x: 7 // x,
    "3 % x": lambda x: 3 % x, "1 << x": lambda x: 1 << x, "1 >> x": lambda x: 1 >> x,
}
# The same forms with a number int32 cannot hold: refused while compiling, as in eager.
TOO_WIDE = {
    "x ** 2**40": lambda x: x ** 2 ** 40, "2**40 ** x": lambda x: (2 ** 40) ** x,
    "2**40 - x": lambda x: 2 ** 40 - x, "x // 2**40": lambda x: x // 2 ** 40,
    "2**40 // x": lambda x: 2 ** 40 // x, "2**40 % x": lambda x: 2 ** 40 % x,
    "2**40 << x": lambda x: 2 ** 40 << x, "2**40 >> x": lambda x: 2 ** 40 >> x,
}


@pytest.mark.parametrize("form, operand", [(f, o) for o in ("int32", "bool") for f in WRAPPED_FORMS
                                            if (f, o) != ("1 - x", "bool")])  # PyTorch refuses bool `-`
def test_wrapped_operators_compile(form, operand):
    """A bool operand promotes to the default (int16 here; stock PyTorch: int64), an int32
    one stays int32; compiled values equal eager's under the setting, bit for bit."""
    fn = WRAPPED_FORMS[form]
    x = torch.tensor([1, 2, 3], dtype=torch.int32) if operand == "int32" else torch.ones(3, dtype=torch.bool)
    recorder = AotRecorder()
    compiled = torch.compile(fn, backend=recorder, fullgraph=True)
    with xt.default_int_dtype(torch.int16):
        got, eager = compiled(x), fn(x)
    integer = torch.int32 if operand == "int32" else torch.int16
    assert got.dtype == eager.dtype == (torch.float32 if form == "1.0 / x" else integer)
    assert torch.equal(got, eager)
    assert int64_in_graphs(recorder.graphs + recorder.aten_graphs) == []


@pytest.mark.parametrize("form", TOO_WIDE, ids=str)
def test_wrapped_operators_refuse_while_compiling(form):
    # Not fullgraph: Dynamo cannot trace the raise itself, so the refusal surfaces after a
    # graph break (as test_overflow_is_refused_while_compiling's).
    compiled = torch.compile(TOO_WIDE[form], backend=Recorder())
    with xt.default_int_dtype(torch.int32):
        with pytest.raises(xt.DefaultIntOverflowError, match="1099511627776"):
            compiled(torch.tensor([1, 2, 3], dtype=torch.int32))

"""The dynamo backend: registration, caching (no recompilation), the boundary (casts,
range checks, parameters cast once and again when they change), modes, refusals."""

from __future__ import annotations

import copy
import importlib.metadata
import warnings

import pytest
import torch
from torch import nn

import x64guard
import x64guard.torch_xla as xt
from x64guard.torch_xla import metrics as xla_metrics
from tests.torch_xla.common import DEVICE, HLO_WIDE, assert_matches, compiled, last_graph, quietly
from tests.torch_xla.models import MLP64, EmbeddingArgmax


class Shift(nn.Module):
    """int64 in, int64 out, with a float64 parameter: the smallest mixed graph."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([1.5, -2.0, 0.25], dtype=torch.float64))

    def forward(self, idx):
        return idx * 3 + 1, (idx.to(torch.float64) * self.scale).sum(dim=-1)


def _idx(*values):
    return torch.tensor([list(values)], dtype=torch.int64)


# --------------------------------------------------------------------------- registration

def test_backend_is_registered_by_entry_point_and_name():
    names = importlib.metadata.entry_points(group="torch_dynamo_backends").names
    assert "x64guard" in names
    assert "x64guard" in torch._dynamo.list_backends()
    assert torch._dynamo.lookup_backend("x64guard") is xt.backend


def test_compile_helper_and_torch_compile_options():
    model = Shift().eval()
    x = _idx(1, 2, 3)
    with torch.no_grad():
        reference = model(x)
    torch._dynamo.reset()
    via_helper = xt.compile(model.to(DEVICE).requires_grad_(False), mode="warn")
    assert_matches(reference, quietly(via_helper, x.to(DEVICE)))
    torch._dynamo.reset()
    strict = torch.compile(model, backend="x64guard", options={"mode": "error"})
    with pytest.raises(x64guard.X64GuardError) as info:
        strict(x.to(DEVICE))
    assert "type-64bit" in {f.kind for f in info.value.findings}
    torch._dynamo.reset()
    with pytest.raises(x64guard.X64GuardError, match="mode=error"):   # torch.compile's own `mode` reaches it too
        torch.compile(model, backend="x64guard", mode="error")(x.to(DEVICE))
    with pytest.raises(Exception, match="unknown option"):   # dynamo wraps it: BackendCompilerFailed
        torch._dynamo.reset()
        torch.compile(model, backend="x64guard", options={"colour": "red"})(x.to(DEVICE))


# --------------------------------------------------------------------------- caching

def test_repeat_calls_neither_trace_nor_compile():
    model = MLP64().eval().requires_grad_(False)
    fn = compiled(model)
    x = torch.randn(5, 8, dtype=torch.float64)
    quietly(fn, x.to(DEVICE))
    before, compiles = xt.counters(), xla_metrics.compile_count()
    for seed in range(5):
        x = torch.randn(5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
        assert_matches(model(x), fn(x.to(DEVICE)))
    after = xt.counters()
    assert after["traces"] == before["traces"] and after["programs"] == before["programs"]
    assert after["calls"] == before["calls"] + 5
    assert xla_metrics.compile_count() == compiles     # torch-xla compiled nothing more
    # The parameters were cast once; only the fresh float64 input is cast on each call.
    assert after["boundary_casts"] == before["boundary_casts"] + 5


def test_new_shape_is_a_new_specialization_and_the_old_one_stays():
    fn = compiled(EmbeddingArgmax().eval(), dynamic=False)
    for length in (3, 5, 3):
        quietly(fn, torch.randint(0, 50, (2, length)).to(DEVICE))
    graphs = xt.compiled_graphs()[-2:]   # dynamo compiled one graph per shape
    assert sorted(len(g.specializations()) for g in graphs) == [1, 1]


# --------------------------------------------------------------------------- the boundary

def test_int64_input_out_of_range_is_refused_never_wrapped():
    fn = compiled(Shift().eval().requires_grad_(False))
    quietly(fn, _idx(1, 2, 3).to(DEVICE))
    for bad in (2**31, -2**31 - 1, 2**40 + 1):
        with pytest.raises(x64guard.X64GuardError) as info:
            fn(_idx(1, bad, 3).to(DEVICE))
        assert info.value.findings[0].kind == "input-out-of-range"
        assert f"value {bad} does not fit in int32" in str(info.value)
        assert "L['idx']" in str(info.value)
    # The edges of int32 pass the input check; `idx * 3 + 1` of them leaves int32, where eager
    # PyTorch computes at int64: refused at the model's line, never wrapped.
    with pytest.raises(x64guard.X64GuardError) as info:
        fn(_idx(2**31 - 1, -2**31, 0).to(DEVICE))
    assert info.value.findings[0].kind == "integer-overflow" and "test_backend.py:29" in str(info.value)
    out, _ = fn(_idx(2**31 // 3 - 1, -(2**31 // 3), 0).to(DEVICE))
    assert out.dtype == torch.int32 and out.cpu().tolist() == [[(2**31 // 3 - 1) * 3 + 1, -(2**31 // 3) * 3 + 1, 1]]


def test_parameters_cast_once_and_again_when_they_change():
    model = Shift().eval().requires_grad_(False)
    on_device = Shift().eval().requires_grad_(False).to(DEVICE)
    torch._dynamo.reset()
    fn = torch.compile(on_device, backend="x64guard")
    x = _idx(1, 2, 3)
    assert_matches(model(x), quietly(fn, x.to(DEVICE)))
    casts = xt.counters()["boundary_casts"]
    fn(x.to(DEVICE))
    assert xt.counters()["boundary_casts"] == casts + 1  # the fresh int64 input; the parameter is cached
    with torch.no_grad():                                 # an optimizer step, in place on the device
        on_device.scale.mul_(2)
        model.scale.mul_(2)
    assert_matches(model(x), fn(x.to(DEVICE)))
    with torch.no_grad():
        on_device.scale.copy_(torch.tensor([3.0, 0.5, -1.0], dtype=torch.float64).to(DEVICE))
        model.scale.copy_(torch.tensor([3.0, 0.5, -1.0], dtype=torch.float64))
    assert_matches(model(x), fn(x.to(DEVICE)))


def test_cpu_inputs_are_cast_on_the_host():
    model = Shift().eval().requires_grad_(False)
    cpu_model = Shift().eval().requires_grad_(False)
    torch._dynamo.reset()
    fn = torch.compile(cpu_model, backend="x64guard")   # everything on the CPU: runs on the XLA device
    x = _idx(4, 5, 6)
    result = quietly(fn, x)
    assert all(t.device.type == "xla" for t in result)
    assert_matches(model(x), result)
    with pytest.raises(x64guard.X64GuardError, match="does not fit in int32"):
        fn(_idx(1, 2**35, 3))


# --------------------------------------------------------------------------- modes

def test_warn_mode_warns_once_per_graph():
    fn = compiled(Shift().eval().requires_grad_(False))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(_idx(1, 2, 3).to(DEVICE))
        fn(_idx(4, 5, 6).to(DEVICE))
    summaries = [w for w in caught if issubclass(w.category, x64guard.X64GuardWarning)]
    assert len(summaries) == 1 and "narrowed" in str(summaries[0].message)


def test_allow_mode_runs_full_width_and_switching_back_does_not_retrace():
    model = Shift().eval().requires_grad_(False)
    fn = compiled(model)
    x = _idx(1, 2, 3)
    narrowed = quietly(fn, x.to(DEVICE))
    traces = xt.counters()["traces"]
    with x64guard.mode("allow"):
        wide = fn(x.to(DEVICE))
    assert [t.dtype for t in wide] == [torch.int64, torch.float64]
    torch.testing.assert_close(wide[1].cpu(), model(x)[1])
    again = fn(x.to(DEVICE))
    assert [t.dtype for t in again] == [t.dtype for t in narrowed] == [torch.int32, torch.float32]
    assert xt.counters()["traces"] == traces


def test_error_mode_names_every_64bit_use_and_passes_32bit_graphs():
    fn = compiled(Shift().eval().requires_grad_(False), options={"mode": "error"})
    with pytest.raises(x64guard.X64GuardError) as info:
        fn(_idx(1, 2, 3).to(DEVICE))
    assert "mode=error" in str(info.value) and len(info.value.findings) > 1
    layer = nn.Linear(4, 2).eval().requires_grad_(False)
    clean = compiled(layer, options={"mode": "error"})
    x = torch.randn(3, 4)
    assert_matches(layer(x), clean(x.to(DEVICE)))    # float32 only: nothing to refuse


def test_out_of_range_constant_is_refused_or_saturated_on_request():
    class Big(nn.Module):
        def forward(self, x):
            return torch.clamp(x, max=2**40) + 1

    x = _idx(1, 2, 3)
    with pytest.raises(x64guard.X64GuardError) as info:
        quietly(compiled(Big()), x.to(DEVICE))
    assert "constant-out-of-range" in {f.kind for f in info.value.findings}
    saturated = quietly(compiled(Big(), options={"overflow": "saturate"}), x.to(DEVICE))
    assert saturated.cpu().tolist() == [[2, 3, 4]]


# --------------------------------------------------------------------------- refusals

def test_gradients_through_the_backend_match_eager():
    """Inputs that require grad: the graph goes through AOTAutograd (forward and backward
    graphs, each narrowed); the gradients are eager float32's (this model is float64 and
    on the device as it is: the autograd engine gives its float64 parameters float64
    gradients, cast from the narrowed float32 ones)."""
    model = MLP64()
    reference = copy.deepcopy(model).float()
    fn = compiled(model)
    x = torch.randn(2, 8, dtype=torch.float64)
    out = quietly(fn, x.to(DEVICE))
    assert out.requires_grad and out.dtype == torch.float32
    out.pow(2).sum().backward()
    reference(x.float()).pow(2).sum().backward()
    on_device = dict(fn._orig_mod.named_parameters())
    for name, parameter in reference.named_parameters():
        torch.testing.assert_close(on_device[name].grad.cpu().float(), parameter.grad, rtol=1e-5, atol=1e-6)
    assert {g.role for g in xt.compiled_graphs()[-2:]} == {"forward", "backward"}


def test_in_place_buffer_update_is_written_back():
    """A graph that writes to its inputs goes through AOTAutograd, which writes the
    narrowed program's results back into them (as for openxla)."""
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", torch.zeros((), dtype=torch.int64))

        def forward(self, x):
            self.seen.add_(x.shape[0])
            return x * 2

    fn = compiled(Counter())
    for calls in (1, 2):
        out = quietly(fn, torch.ones(3).to(DEVICE))
        assert out.cpu().tolist() == [2.0, 2.0, 2.0]
        assert fn._orig_mod.seen.cpu().item() == 3 * calls
    assert last_graph().role == "inference"


def test_cpu_fallback_op_is_refused_not_frozen():
    class Bessel(nn.Module):
        def forward(self, x):
            return torch.special.i1(x) + x

    with pytest.raises(x64guard.X64GuardError) as info:
        quietly(compiled(Bessel()), torch.randn(4).to(DEVICE))
    finding = info.value.findings[0]
    assert finding.kind == "torch-xla-fallback" and "special_i1" in finding.op


# --------------------------------------------------------------------------- torch-xla repairs

def test_reductions_over_an_empty_dim_list_reduce_everything():
    class Reductions(nn.Module):
        def forward(self, x):
            return (torch.sum(x, dim=[]), torch.mean(x, dim=()), torch.amax(x, dim=[]),
                    torch.std(x, dim=[]), torch.linalg.vector_norm(x, dim=[]))

    x = torch.randn(3, 4, dtype=torch.float64)
    with torch.no_grad():
        eager_xla = Reductions()(x.to(DEVICE))
    assert eager_xla[0].shape == (3, 4)    # torch-xla 2.9 alone: "reduce nothing"
    assert_matches(Reductions()(x), quietly(compiled(Reductions()), x.to(DEVICE)))


def test_program_hlo_has_no_64bit_types_and_names_the_narrowed_module():
    fn = compiled(Shift().eval().requires_grad_(False))
    quietly(fn, _idx(1, 2, 3).to(DEVICE))
    (spec,) = last_graph().specializations()
    assert not HLO_WIDE.search(spec.program.hlo)
    assert spec.result.changes.get("i64->i32") and spec.result.changes.get("f64->f32")
    assert "i64" in spec.stablehlo and "f64" in spec.stablehlo


def test_dynamic_shapes_specialize_per_shape_in_one_graph():
    model = EmbeddingArgmax().eval().requires_grad_(False)
    fn = compiled(model, dynamic=True)
    traces = xt.counters()["traces"]
    for length in (5, 9, 5, 12):
        tokens = torch.randint(0, 50, (2, length))
        assert_matches(model(tokens), quietly(fn, tokens.to(DEVICE)))
    assert len(last_graph().specializations()) == 3            # 5, 9, 12: the second 5 reuses the first
    assert xt.counters()["traces"] == traces + 3


# --------------------------------------------------------------------------- graphs without inputs

def test_a_graph_without_inputs_runs_as_openxla_runs_it():
    """torch-xla compiles and runs no graph without inputs ("Check failed: !inputs.empty()"),
    and dynamo gives the backend such graphs: code that only makes constants, here after a
    graph break. x64guard's program takes one unused int32 scalar of its own instead; the
    graph runs narrowed (int64 -> int32), with eager's values, once compiled."""

    def constants(x):
        y = x + 1
        torch._dynamo.graph_break()
        return torch.arange(5, device=DEVICE) * 3 + 1, torch.full((2,), 7, device=DEVICE) * 2, y

    torch._dynamo.reset()
    fn = torch.compile(constants, backend="x64guard")
    x = torch.ones(2, device=DEVICE)
    first = quietly(fn, x)
    traces = xt.counters()["traces"]
    second = quietly(fn, x)
    assert xt.counters()["traces"] == traces             # cached: the anchored program runs again
    for out in (first, second):
        assert out[0].dtype == torch.int32 and out[0].cpu().tolist() == [1, 4, 7, 10, 13]
        assert out[1].cpu().tolist() == [14, 14] and out[2].cpu().tolist() == [2.0, 2.0]

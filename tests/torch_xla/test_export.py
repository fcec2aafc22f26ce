"""`narrow_exported`: torch.export programs narrowed and run on the XLA device, the
`x.sum()` export bug of torch-xla 2.9 worked around, modes, the boundary."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import x64guard
import x64guard.torch_xla as xt
from tests.torch_xla.common import DEVICE, HLO_WIDE, assert_matches, quietly, to_device
from tests.torch_xla.models import BY_NAME, FullSum, build


def test_torch_xla_drops_a_full_sum_on_export_and_x64guard_does_not():
    from torch_xla import stablehlo

    case = BY_NAME["full_sum"]
    model = build(case)
    x, n = case.inputs(0)
    exported = torch.export.export(model, (x, n))
    assert any(node.target is torch.ops.aten.sum.dim_IntList and list(node.args[1]) == []
               for node in xt._xc.decompose_exported(exported).graph.nodes)
    # torch-xla's own export: `x.sum() + 1` came back as `x + 1` (shape (4, 6), not a number).
    plain = stablehlo.exported_program_to_stablehlo(exported)(x, n)
    assert plain[0].shape == x.shape
    # x64guard: the sum over every dimension, as eager PyTorch computes it.
    narrowed = quietly(xt.narrow_exported, exported)
    result = narrowed(x, n)
    assert result[0].shape == () and result[4].shape == ()
    assert_matches(model(x, n), result)


def test_text_findings_and_changes():
    case = BY_NAME["mlp_float64"]
    program = quietly(xt.narrow_exported, torch.export.export(build(case), case.inputs(0)))
    assert "f64" in program.original_text and "xf32>" in program.text
    assert program.changes["f64->f32"] > 0
    assert any(f.kind == "type-narrowed" for f in program.findings)
    assert not HLO_WIDE.search(program.hlo)
    assert x64guard.check(program.text, target="x32").ok


def test_warn_mode_warns_once():
    case = BY_NAME["embedding_argmax"]
    exported = torch.export.export(build(case), case.inputs(0))
    with pytest.warns(x64guard.X64GuardWarning, match="narrowed") as caught:
        program = xt.narrow_exported(exported, mode="warn")
    assert len([w for w in caught if issubclass(w.category, x64guard.X64GuardWarning)]) == 1
    program(*case.inputs(1))


def test_error_mode_refuses_and_allow_mode_runs_full_width():
    case = BY_NAME["transformer_block"]
    model = build(case)
    exported = torch.export.export(model, case.inputs(0))
    with pytest.raises(x64guard.X64GuardError, match="mode=error") as info:
        xt.narrow_exported(exported, mode="error")
    assert {f.kind for f in info.value.findings} >= {"type-64bit"}
    wide = xt.narrow_exported(exported, mode="allow")
    tokens = case.inputs(1)[0]
    logits, token = wide(tokens)
    assert logits.dtype == torch.float64 and token.dtype == torch.int64
    with torch.no_grad():
        reference = model(tokens)
    torch.testing.assert_close(logits.cpu(), reference[0])
    assert torch.equal(token.cpu(), reference[1])


def test_inputs_are_range_checked_on_the_host_and_on_the_device():
    case = BY_NAME["embedding_argmax"]
    program = quietly(xt.narrow_exported, torch.export.export(build(case), case.inputs(0)))
    tokens = case.inputs(0)[0].clone()
    tokens[1, 2] = 2**31
    for place in (lambda t: t, lambda t: t.to(DEVICE)):
        with pytest.raises(x64guard.X64GuardError, match=r"input 0 \(idx\): value 2147483648 does not fit"):
            program(place(tokens))
    with pytest.raises(TypeError, match="takes 1 input"):
        program(tokens, tokens)
    with pytest.raises(ValueError, match=r"input 0 is torch.int64\[4, 8\]; the program was exported and narrowed "
                                         r"for torch.int64\[4, 7\]"):
        program(torch.zeros(4, 8, dtype=torch.int64))
    program(tokens.clamp(0, 49).to(torch.int32))   # already narrowed: taken as it is


def test_output_structure_is_kept():
    class Named(nn.Module):
        def forward(self, x):
            return {"double": x * 2, "count": (x > 0).sum()}

    x = torch.randn(3, dtype=torch.float64)
    program = quietly(xt.narrow_exported, torch.export.export(Named(), (x,)))
    result = program(x)
    assert set(result) == {"double", "count"} and result["count"].dtype == torch.int32
    assert_matches(Named()(x), result)


def test_buffer_mutation_is_refused():
    class Running(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("total", torch.zeros(3, dtype=torch.float64))

        def forward(self, x):
            self.total.add_(x)
            return self.total * 2

    exported = torch.export.export(Running(), (torch.ones(3, dtype=torch.float64),))
    with pytest.raises(x64guard.X64GuardError) as info:
        xt.narrow_exported(exported)
    assert info.value.findings[0].kind == "input-mutation"


def test_exported_inputs_on_the_device_work_like_host_inputs():
    model = FullSum().eval()
    case = BY_NAME["full_sum"]
    program = quietly(xt.narrow_exported, torch.export.export(model, case.inputs(0)))
    inputs = case.inputs(3)
    assert_matches(model(*inputs), program(*to_device(inputs)))


class ScaledBatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(4)

    def forward(self, x, scale):
        return self.norm(x) * scale


@pytest.mark.parametrize("scalar", [0.0, 1.0, 2.0])
def test_regression_eval_batchnorm_with_scalar_inputs_0_and_1_is_not_a_mutation(scalar):
    """Issue 12: an eval-mode BatchNorm model (num_batches_tracked == 0) with a 0-dim input
    of value 0 or 1 was refused as `input-mutation`: torch-xla turns a 0-dim tensor holding
    0 or 1 into a constant of the graph (its special scalars) instead of device data, which
    read as a write, and would have frozen the value into the program. Such inputs are now
    transferred as device data, and stay inputs."""
    torch.manual_seed(0)
    model = ScaledBatchNorm().eval()
    x = torch.randn(3, 4)
    assert int(model.norm.num_batches_tracked) == 0
    program = quietly(xt.narrow_exported, torch.export.export(model, (x, torch.tensor(scalar))))
    for value in (scalar, 3.0, 1.0, 0.0):
        assert_matches(model(x, torch.tensor(value)), program(x, torch.tensor(value)))


@pytest.mark.slow
def test_torch_xla_failure_in_narrow_exported_is_one_line_with_the_path_and_a_workaround():
    from tests.torch_xla.real_models import BY_NAME

    case = BY_NAME["gpt2"]
    exported = torch.export.export(case.build().eval(), (), case.inputs(0))
    with pytest.raises(xt.TorchXlaFailure) as info:
        xt.narrow_exported(exported)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("x64guard.torch_xla (narrow_exported): torch-xla failed")
    assert "Cannot view a tensor with shape" in message and "backend='x64guard'" in message
    assert "Cannot view" in str(info.value.__cause__)


def test_an_op_torch_xla_runs_on_the_cpu_is_refused_at_its_line_before_it_runs():
    """Integer histc: torch-xla has no lowering and would run it on the CPU (where it fails for
    int, "histogram_cpu" not implemented); x64guard refuses it while tracing, at the model's
    line, before its inputs are computed on the device at full width."""
    def histogram(x):
        return torch.histc(x, bins=4, min=0, max=10) + 1

    with pytest.raises(x64guard.X64GuardError) as info:
        torch.compile(histogram, backend="x64guard")(torch.arange(6, dtype=torch.int32).to(DEVICE))
    message = str(info.value)
    assert "no XLA lowering for aten::histc" in message
    assert "test_export.py:" in message and "Move that op out of the compiled function" in message

"""Mixed-device graphs (x64guard/torch_xla/mixed.py): a graph that makes CPU tensors runs
its CPU part eagerly on the CPU, as PyTorch does, and its XLA part narrowed; a CPU value
computed from an XLA value is refused. Against eager PyTorch and torch-xla's openxla."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import x64guard
import x64guard.torch_xla as xt
from tests.torch_xla.common import DEVICE, HLO_WIDE, quietly


class CpuScales(nn.Module):
    """CPU tensors made inside forward: DeBERTa-v2's attention scale, a constant, a
    float64 one and (with `draw`) a CPU random draw; used by XLA ops and returned."""

    def __init__(self, draw: bool):
        super().__init__()
        self.draw = draw

    def forward(self, x):
        scale = torch.sqrt(torch.tensor(x.size(-1), dtype=torch.float))   # the scale line
        wide = torch.tensor(2.0, dtype=torch.float64) * 3
        noise = torch.rand(()) if self.draw else 0.5
        return x / scale + noise, torch.tensor(2.0) * 3, scale, wide


def _findings(graphs) -> list:
    return [f for g in graphs for spec in g.specializations() if spec.result is not None
            for f in spec.result.findings if f.kind == "cpu-part"]


def _new_graphs(before) -> list:
    return [g for g in xt.compiled_graphs() if not any(g is b for b in before)]


def test_cpu_part_runs_on_the_cpu_as_eager_and_openxla_do():
    x = torch.randn(3, 4)
    torch._dynamo.reset()
    before = xt.compiled_graphs()
    mine = quietly(torch.compile(CpuScales(draw=False), backend="x64guard"), xt.to_device(x))
    graphs = _new_graphs(before)
    findings = _findings(graphs)
    returned = [f for f in findings if "output 2 (float32[], a CPU tensor) ran on the CPU" in f.message]
    assert returned and returned[0].severity == "info"
    assert returned[0].location.file.endswith("test_mixed_device.py")
    assert "torch.sqrt(torch.tensor(x.size(-1)" in open(__file__).read().splitlines()[returned[0].location.line - 1]
    assert any("output 3 (float64[]" in f.message for f in findings)
    for graph in graphs:
        for spec in graph.specializations():
            assert not HLO_WIDE.search(spec.program.hlo)
    want = CpuScales(draw=False)(x)
    torch._dynamo.reset()
    openxla = torch.compile(CpuScales(draw=False), backend="openxla")(x.to(DEVICE))
    assert mine[0].device.type == "xla"
    torch.testing.assert_close(mine[0].cpu(), want[0])
    torch.testing.assert_close(mine[0].cpu(), openxla[0].cpu())
    for k in (1, 2, 3):                               # PyTorch's own CPU tensors, float64 kept
        assert mine[k].device.type == "cpu" and mine[k].dtype == want[k].dtype
        assert torch.equal(mine[k], want[k]) and torch.equal(mine[k], openxla[k].cpu())


def test_a_cpu_draw_is_drawn_on_every_call_as_eager_draws_it():
    """Not frozen into the program at its first value. (openxla moves the draw to the
    device, XLAConstructorMoverPass: another stream than eager's.)"""
    x = torch.randn(3, 4)
    torch._dynamo.reset()
    fast = torch.compile(CpuScales(draw=True), backend="x64guard")
    got = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        got.append(quietly(fast, xt.to_device(x))[0].cpu())
        torch.manual_seed(seed)
        torch.testing.assert_close(got[-1], CpuScales(draw=True)(x)[0])
    assert not torch.equal(got[0], got[1])


class ScaledLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        scale = torch.sqrt(torch.tensor(x.size(-1), dtype=torch.float))
        return (self.linear(x) / scale).square().mean()


def test_training_saves_the_cpu_scale_for_the_backward():
    """Under AOTAutograd the scale is saved for the backward: the forward graph returns
    it (the graph refused before), the backward takes it as a host input."""
    torch.manual_seed(0)
    model, x = ScaledLinear(), torch.randn(5, 4)
    reference = copy.deepcopy(model)
    torch._dynamo.reset()
    on_device = xt.to_device(model)
    loss = quietly(torch.compile(on_device, backend="x64guard"), xt.to_device(x))
    loss.backward()
    expected = reference(x)
    expected.backward()
    torch.testing.assert_close(loss.detach().cpu(), expected.detach())
    for mine, theirs in zip(on_device.parameters(), reference.parameters()):
        torch.testing.assert_close(mine.grad.cpu(), theirs.grad)


class ReadsTheDevice(nn.Module):
    def forward(self, x):
        y = x * 2
        return y, y.cpu() + 1                         # the read line


class ReadsAnInput(nn.Module):
    def forward(self, x):
        return x * 2, x.cpu()                         # the read line


@pytest.mark.parametrize("module, read", [(ReadsTheDevice, r"made at .*test_mixed_device.py:\d+ by mul"),
                                          (ReadsAnInput, r"the graph's input")], ids=["xla-value", "xla-input"])
def test_cpu_value_computed_from_an_xla_value_is_refused_naming_its_line(module, read):
    torch._dynamo.reset()
    fast = torch.compile(module(), backend="x64guard")
    with pytest.raises(x64guard.X64GuardError, match=r"computed from an XLA value \(" + read + r".*Read the value "
                                                     r"after") as info:
        fast(xt.to_device(torch.ones(3)))
    finding = info.value.findings[0]
    assert finding.kind == "cpu-part" and finding.severity == "error"
    assert "# the read line" in open(__file__).read().splitlines()[finding.location.line - 1]
    with x64guard.mode("allow"):                      # full width, as torch-xla runs it
        outputs = fast(xt.to_device(torch.ones(3)))
    assert outputs[1].device.type == "cpu" and torch.equal(outputs[1], CPU_RESULT[module])


CPU_RESULT = {ReadsTheDevice: torch.full((3,), 3.0), ReadsAnInput: torch.ones(3)}


def _deberta_v2():
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    torch.manual_seed(0)
    return DebertaV2ForSequenceClassification(DebertaV2Config(
        vocab_size=500, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=32, relative_attention=True, position_buckets=8, max_relative_positions=16,
        pos_att_type=["p2c", "c2p"], num_labels=3, type_vocab_size=0, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0))


def test_deberta_v2_trains_three_steps_as_eager():
    """DeBERTa-v2 makes its attention scale on the CPU (modeling_deberta_v2.py:116,
    `torch.sqrt(torch.tensor(..., dtype=torch.float) * scale_factor)`) and its log-bucket
    constants (lines 61, 65); openxla and the lazy path train it, and so does x64guard."""
    model = _deberta_v2().train()
    reference = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(0)
    batch = {"input_ids": torch.randint(0, 500, (2, 10), generator=generator),
             "attention_mask": torch.ones(2, 10, dtype=torch.long), "labels": torch.tensor([0, 2])}
    torch._dynamo.reset()
    before = xt.compiled_graphs()
    on_device = xt.to_device(model)
    fast = torch.compile(on_device, backend="x64guard")
    optimizer = torch.optim.SGD(on_device.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    moved = xt.to_device(batch)
    losses = []
    for _ in range(3):
        loss = quietly(fast, **moved).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        expected = reference(**batch).loss
        expected.backward()
        reference_optimizer.step()
        reference_optimizer.zero_grad()
        torch.testing.assert_close(loss.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-6)
        losses.append(loss.item())
    assert losses[2] < losses[0]
    for (name, mine), theirs in zip(on_device.named_parameters(), reference.parameters()):
        torch.testing.assert_close(mine.detach().cpu(), theirs.detach(), rtol=1e-5, atol=1e-6, msg=name)
    graphs = _new_graphs(before)
    assert {"forward", "backward"} <= {g.role for g in graphs}
    scale = [f for f in _findings(graphs) if f.location.file.endswith("modeling_deberta_v2.py")
             and f.location.line == 116 and "ran on the CPU" in f.message]
    assert scale
    for graph in graphs:
        for spec in graph.specializations():
            assert not HLO_WIDE.search(spec.program.hlo)

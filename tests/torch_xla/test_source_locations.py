"""Findings at the user's line: the backend's and `narrow_exported`'s findings name the
model's Python source (file and line, from the FX nodes' `stack_trace`) and its module
path (`transformer.h.0.attn`, from `nn_module_stack`), not torch-xla's module."""

from __future__ import annotations

import inspect
import re

import pytest
import torch

import x64guard
import x64guard.torch_xla as xt
from tests.torch_xla.common import DEVICE, quietly
from tests.torch_xla.real_models import BY_NAME

_AT_LINE = re.compile(r"^(?P<file>.+\.py):(?P<line>\d+)(?: \[(?P<modules>.*)\])?$")


def _located(findings) -> list[tuple[str, int, str]]:
    out = []
    for finding in findings:
        match = _AT_LINE.match(str(finding.location))
        if match:
            out.append((match.group("file"), int(match.group("line")), match.group("modules") or ""))
    return out


def _lines_of(function) -> range:
    lines, start = inspect.getsourcelines(function)
    return range(start, start + len(lines))


@pytest.mark.slow
def test_backend_error_mode_names_gpt2_lines_and_module_paths():
    from transformers.models.gpt2 import modeling_gpt2

    model = BY_NAME["gpt2"].build().double().eval().to(DEVICE)        # float64, int64 ids: 64-bit everywhere
    inputs = {k: v.to(DEVICE) if isinstance(v, torch.Tensor) else v for k, v in BY_NAME["gpt2"].inputs(0).items()}
    fn = torch.compile(model, backend="x64guard", options={"mode": "error"})
    with pytest.raises(x64guard.X64GuardError) as info, torch.no_grad():
        fn(**inputs)
    located = _located(info.value.findings)
    assert len(located) >= len(info.value.findings) * 3 // 4          # nearly every finding has a model line
    in_gpt2 = [(line, modules) for file, line, modules in located if file == modeling_gpt2.__file__]
    attention = _lines_of(modeling_gpt2.GPT2Attention.forward)
    assert any(line in attention and "transformer.h.0.attn (GPT2Attention)" in modules for line, modules in in_gpt2)
    assert any("transformer.h.1.attn (GPT2Attention)" in modules for _, modules in in_gpt2)
    message = str(info.value)
    assert f"{modeling_gpt2.__file__}:" in message and "transformer.h.0.attn" in message
    assert "line 17:30 of the input" not in message and "of the input" not in message


@pytest.mark.slow
def test_narrow_exported_findings_name_llama_lines_and_module_paths():
    from transformers.models.llama import modeling_llama

    case = BY_NAME["llama_float64"]
    exported = torch.export.export(case.build().eval(), (), case.inputs(0))
    program = quietly(xt.narrow_exported, exported)          # warn mode: findings, no error
    located = _located(program.findings)
    attention = _lines_of(modeling_llama.LlamaAttention.forward)
    assert any(file == modeling_llama.__file__ and line in attention and "model.layers.0.self_attn" in modules
               for file, line, modules in located)
    with pytest.raises(x64guard.X64GuardError) as info:
        xt.narrow_exported(exported, mode="error")
    assert any(file == modeling_llama.__file__ for file, _, _ in _located(info.value.findings))


def test_findings_of_a_small_model_point_at_its_forward():
    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(3, 3).double()

        def forward(self, x):
            return self.inner(x) * 2.5

    fn = torch.compile(Scale().eval().to(DEVICE), backend="x64guard", options={"mode": "error"})
    with pytest.raises(x64guard.X64GuardError) as info, torch.no_grad():
        fn(torch.ones(2, 3, dtype=torch.float64).to(DEVICE))
    located = _located(info.value.findings)
    forward = _lines_of(Scale.forward)
    assert any(file == __file__ and line in forward for file, line, _ in located)
    assert any(modules == "inner (Linear)" for _, _, modules in located)
    signature = [f for f in info.value.findings if f.op == "func.func"]
    assert signature and str(signature[0].location) == "the graph's inputs and results"

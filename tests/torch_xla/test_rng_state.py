"""The core pass on torch-xla's in-graph random numbers (issue 12, item 2, core half).

torch-xla draws with rng_bit_generator from a u64[2] state built from its int64 seed
(`seed * 214013 + 2531011`, in the graph). On the x32 target the state and that seed
arithmetic stay 64-bit; everything else narrows. The narrowed graph, run on the XLA CPU
backend with the same seed, must give exactly what torch-xla's own generator gives for the
32-bit version of the draw (torch.float32 for float64 draws, torch.int32 for int64 ones).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch_xla
import torch_xla.core.xla_model as xm

from tests.conftest import narrow_quietly
from tests.passes.test_rng import run, same_bits
from x64guard.torch_xla import _private as xc

DEVICE = torch_xla.device()

DRAWS = {
    "randn": lambda dt: torch.randn(3, 4, device=DEVICE, dtype=dt),
    "rand": lambda dt: torch.rand(5, device=DEVICE, dtype=dt),
    "bernoulli": lambda dt: torch.bernoulli(torch.full((6,), 0.3, device=DEVICE, dtype=dt)),
    "dropout": lambda dt: torch.nn.functional.dropout(torch.ones(2, 5, device=DEVICE, dtype=dt), 0.5, True),
    "two_draws": lambda dt: torch.randn(3, device=DEVICE, dtype=dt) + torch.rand(3, device=DEVICE, dtype=dt),
    "normal_": lambda dt: torch.empty(4, device=DEVICE, dtype=dt).normal_(2.0, 0.5),
    "uniform_": lambda dt: torch.empty(4, device=DEVICE, dtype=dt).uniform_(-1, 3),
    "randint": lambda dt: torch.randint(-7, 100, (2, 3), device=DEVICE, dtype=dt),
    "randint_full_int32_span": lambda dt: torch.randint(-2 ** 31, 2 ** 31 - 1, (8,), device=DEVICE, dtype=dt),
}
_NARROW_NUMPY = {"tensor<i32>": np.int32, "tensor<f32>": np.float32}


def _graph(draw, dtype, seed):
    xm.set_rng_state(seed)
    out = draw(dtype)
    text = xc.stablehlo_text([out], str(DEVICE))
    _, values = xc.graph_inputs([out])
    return text, [v.cpu().numpy() for v in values], out.cpu().numpy()


def _narrowed_inputs(result, args):
    """The graph's inputs as the narrowed module takes them: 64-bit data narrowed, the kept
    seed as it is (read from the narrowed signature)."""
    main = next(op for op in result.module.body.operations if str(op.attributes["sym_name"]) == '"main"')
    types = [str(a.type) for a in main.regions[0].blocks[0].arguments]
    return [a.astype(_NARROW_NUMPY[t]) if t in _NARROW_NUMPY and a.dtype.itemsize == 8 else a
            for a, t in zip(args, types)]


@pytest.mark.parametrize("name", DRAWS)
@pytest.mark.parametrize("wide", [False, True], ids=["32bit", "64bit"])
def test_narrowed_draw_is_torch_xlas_32bit_draw(name, wide):
    integer = name.startswith("randint")
    narrow_dtype = torch.int32 if integer else torch.float32
    dtype = (torch.int64 if integer else torch.float64) if wide else narrow_dtype
    for seed in (123, 2 ** 40 + 5):
        text, args, own = _graph(DRAWS[name], dtype, seed)
        assert same_bits(run(text, *args)[0], own)  # jaxlib's XLA draws what torch-xla's draws
        _, _, want = _graph(DRAWS[name], narrow_dtype, seed)
        result = narrow_quietly(text)
        assert "rng-state" in {f.kind for f in result.findings}
        assert all(f.severity != "error" for f in result.findings)
        got = run(result.text, *_narrowed_inputs(result, args))[0]
        assert same_bits(got, want), (name, seed, got, want)


def test_dropout_module_in_a_train_step_graph():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.3), torch.nn.Linear(8, 1)).to(DEVICE)
    model.train()
    x = torch.arange(12.0, device=DEVICE).reshape(3, 4) / 10
    xm.set_rng_state(7)
    loss = model(x).square().mean()
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    text = xc.stablehlo_text([loss, *grads], str(DEVICE))
    _, values = xc.graph_inputs([loss, *grads])
    args = [v.cpu().numpy() for v in values]
    result = narrow_quietly(text)
    got, want = run(result.text, *_narrowed_inputs(result, args)), run(text, *args)
    for g, w in zip(got, want):  # a float32 model: the narrowed graph is the same computation
        assert same_bits(g, w)

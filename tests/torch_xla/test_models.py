"""The model suite (tests/torch_xla/models.py) through the dynamo backend and through
`narrow_exported`: each result equals eager PyTorch on the CPU cast to 32 bits, on two
different inputs (nothing of the first call is frozen into the program); the HLO torch-xla compiles for the narrowed
program holds no 64-bit type, where torch-xla's own lowering held them."""

from __future__ import annotations

import pytest
import torch

import x64guard
import x64guard.torch_xla as xt
from tests.torch_xla.common import (DEVICE, HLO_WIDE, assert_matches, compiled, last_graph, quietly,
                                    stablehlo_has, to_device)
from tests.torch_xla.models import CASES, build

RUNS = list(CASES)


def _ids(cases):
    return [case.name for case in cases]


@pytest.mark.parametrize("case", RUNS, ids=_ids(RUNS))
def test_backend_matches_eager(case):
    model = build(case)
    fn = compiled(model)
    for seed in (0, 1):
        inputs = case.inputs(seed)
        with torch.no_grad():
            reference = model(*inputs)
            result = quietly(fn, *to_device(inputs))
        assert_matches(reference, result, case.rtol, case.atol)
    (spec,) = last_graph().specializations()
    assert not HLO_WIDE.search(spec.program.hlo), spec.program.hlo
    for wide in case.wide:   # torch-xla's own lowering had them: the test means something
        assert stablehlo_has(spec.stablehlo, wide), wide
    assert spec.result.changes


@pytest.mark.parametrize("case", RUNS, ids=_ids(RUNS))
def test_exported_matches_eager(case):
    model = build(case)
    program = quietly(xt.narrow_exported, torch.export.export(model, case.inputs(0)))
    for seed, place in ((0, lambda t: t), (1, to_device), (2, lambda t: t)):   # CPU and XLA inputs
        inputs = case.inputs(seed)
        with torch.no_grad():
            reference = model(*inputs)
        assert_matches(reference, program(*place(inputs)), case.rtol, case.atol)
    assert not HLO_WIDE.search(program.hlo), program.hlo
    for wide in case.wide:
        assert stablehlo_has(program.original_text, wide), wide
    assert x64guard.check(program.text, target="x32").ok   # no 64-bit element type left
    assert not x64guard.check(program.original_text, target="x32").ok


def test_model_suite_covers_the_issue():
    names = {case.name for case in CASES}
    assert {"embedding_argmax", "mlp_float64", "transformer_block", "fft_complex128",
            "arange_indexing", "full_sum"} <= names
    assert DEVICE.type == "xla"

"""The command line and the torch-xla backend agree on torch-xla's own StableHLO.

A float64 GELU lowered by torch-xla spells erf `stablehlo.custom_call @mhlo.erf`
(passes/patterns/spellings.py): `x64guard check` and `x64guard narrow` on the dumped
module must see what the torch-xla front end sees (the same findings, the same narrowed
module), not an unknown kernel."""

from __future__ import annotations

import json
import os
import warnings

import pytest

from tests.cli.conftest import run_cli
from x64guard.io import modules

pytestmark = pytest.mark.torch   # the matrix's environments have no torch: deselected there, never skipped


@pytest.fixture(scope="module")
def gelu_program():
    os.environ.setdefault("PJRT_DEVICE", "CPU")  # before torch_xla is imported
    import torch
    from torch import nn

    import x64guard.torch_xla as xt

    class Gelu(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(8, 8, dtype=torch.float64)

        def forward(self, x):
            return nn.functional.gelu(self.linear(x))

    torch.manual_seed(0)
    x = torch.randn(4, 8, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xt.narrow_exported(torch.export.export(Gelu(), (x,)), mode="warn")


def _without_locations(text: str) -> str:
    module, _ = modules.load(text)
    return module.operation.get_asm(enable_debug_info=False)


def test_check_and_narrow_on_a_dumped_torch_xla_module_agree_with_the_backend(gelu_program, tmp_path):
    dumped = tmp_path / "gelu.mlir"
    dumped.write_text(gelu_program.original_text)
    assert "@mhlo.erf" in gelu_program.original_text  # torch-xla's spelling is in the dump
    backend = [(f.op, f.count) for f in gelu_program.findings if f.kind == "type-narrowed"]
    assert ("chlo.erf", 1) in backend

    out = tmp_path / "gelu.narrowed.mlir"
    narrowed = run_cli("narrow", dumped, "-o", out)
    assert narrowed.returncode == 0, narrowed.stderr
    assert _without_locations(out.read_text()) == _without_locations(gelu_program.text)

    checked = run_cli("check", "--format", "json", dumped)
    assert checked.returncode == 1  # float64 reaches the x32 target: reported, not refused as a kernel
    findings = json.loads(checked.stdout)["files"][0]["modules"][0]["findings"]
    assert {f["kind"] for f in findings} == {"type-64bit"}
    assert [(f["op"], f["count"]) for f in findings] == backend

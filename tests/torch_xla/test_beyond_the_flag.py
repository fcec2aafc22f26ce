"""Side by side: torch-xla's `XLA_USE_32BIT_LONG=1` (read once, at start: it runs in a
child process) against x64guard on the same computations. The flag wraps out-of-range
int64 silently, keeps the uint64 that RNG ops emit and never narrows complex128 (whose
transfer back to the host then loses its imaginary part); x64guard refuses the first
two clearly and narrows the third correctly."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import x64guard
import x64guard.torch_xla as xt
from tests.torch_xla.common import DEVICE, HLO_WIDE, compiled, last_graph, quietly, run_python

FLAG_SIDE = r"""
import json, torch, torch_xla
hlo = torch_xla._XLAC._get_xla_tensors_hlo
dev = torch_xla.device()
report = {}
big = torch.tensor([2**40 + 1, 3]).to(dev) + 1
report["wrap_hlo_s64"] = "s64[" in hlo([big])
report["wrap"] = big.cpu().tolist()
noise = torch.randn(3, device=dev)
report["rng_hlo_u64"] = "u64[" in hlo([noise])
z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex128).to(dev) * 2
report["c128_hlo"] = "c128[" in hlo([z])
report["c128"] = [[v.real, v.imag] for v in z.cpu().tolist()]
w = torch.ones(2, dtype=torch.float64).to(dev) * 3
report["f64_hlo"] = "f64[" in hlo([w])
print(json.dumps(report))
"""


class AddOne(nn.Module):
    def forward(self, x):
        return x + 1


class Noise(nn.Module):
    def forward(self, x):
        return x + torch.randn(x.shape, device=x.device)


class Double(nn.Module):
    def forward(self, z):
        return z * 2


@pytest.fixture(scope="module")
def flag():
    proc = run_python(FLAG_SIDE, env={"XLA_USE_32BIT_LONG": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_out_of_range_int64_flag_wraps_silently_x64guard_refuses(flag):
    assert flag["wrap"] == [2, 4] and not flag["wrap_hlo_s64"]     # 2**40 + 1 + 1 == 2: no error, no warning
    x = torch.tensor([2**40 + 1, 3])
    fn = compiled(AddOne())
    with pytest.raises(x64guard.X64GuardError, match="value 1099511627777 does not fit in int32"):
        quietly(fn, x.to(DEVICE))
    program = quietly(xt.narrow_exported, torch.export.export(AddOne(), (torch.tensor([1, 3]),)))
    with pytest.raises(x64guard.X64GuardError, match="never wraps"):
        program(x)
    assert quietly(fn, torch.tensor([2**31 - 2, 3]).to(DEVICE)).cpu().tolist() == [2**31 - 1, 4]


def test_rng_flag_keeps_uint64_x64guard_keeps_only_the_state(flag):
    assert flag["rng_hlo_u64"]            # the flag's "32-bit" graph still holds u64 (the RNG state)
    x = torch.zeros(3)
    result = quietly(compiled(Noise()), x.to(DEVICE))
    assert result.dtype == torch.float32 and result.shape == x.shape
    assert torch.isfinite(result.cpu()).all() and result.cpu().abs().max() > 0   # a real draw, not zeros


def test_complex128_flag_keeps_it_and_loses_the_imaginary_part_x64guard_narrows(flag):
    assert flag["c128_hlo"]
    assert flag["c128"] == [[2.0, 0.0], [6.0, 0.0]]   # should be 2+4j, 6-8j
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex128)
    fn = compiled(Double())
    result = quietly(fn, z.to(DEVICE))
    assert result.dtype == torch.complex64
    assert result.cpu().tolist() == [2 + 4j, 6 - 8j]
    (spec,) = last_graph().specializations()
    assert spec.result.changes.get("c128->c64")
    assert not HLO_WIDE.search(spec.program.hlo)


class Scale(nn.Module):
    def forward(self, x):
        return x * 3


def test_float64_flag_keeps_it_x64guard_narrows(flag):
    assert flag["f64_hlo"]
    result = quietly(compiled(Scale()), torch.ones(2, dtype=torch.float64).to(DEVICE))
    assert result.dtype == torch.float32 and result.cpu().tolist() == [3.0, 3.0]
    (spec,) = last_graph().specializations()
    assert not HLO_WIDE.search(spec.program.hlo)

"""Shared helpers of the torch-xla tests: the device, running a model both ways, and
comparing against eager PyTorch on the CPU cast to 32 bits."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import warnings

import torch
import torch_xla

import x64guard
import x64guard.torch_xla as xt
from tests.support import child

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEVICE = torch_xla.device()

# 64-bit element types in HLO text (`s64[2,3]`, `f64[]`) and in StableHLO text.
HLO_WIDE = re.compile(r"\b(?:s64|u64|f64|c128)\[")


def stablehlo_has(text: str, hlo_type: str) -> bool:
    pattern = {"s64": r"(?:<|x)i64>", "u64": r"(?:<|x)ui64>", "f64": r"(?:(?<!complex)<|x)f64>",
               "c128": r"complex<f64>"}[hlo_type]
    return re.search(pattern, text) is not None


def narrowed_dtype(dtype: torch.dtype) -> torch.dtype:
    return xt.NARROW_DTYPE.get(dtype, dtype)


def assert_matches(reference, result, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """`result` (x64guard's, on the XLA device) equals `reference` (eager, CPU, 64-bit)
    cast to 32 bits: dtypes exactly, integers exactly, floats within tolerance."""
    expected = torch.utils._pytree.tree_leaves(reference)
    got = torch.utils._pytree.tree_leaves(result)
    assert len(expected) == len(got)
    for want, have in zip(expected, got):
        assert isinstance(have, torch.Tensor) and have.device.type == "xla", type(have)
        have = have.cpu()
        dtype = narrowed_dtype(want.dtype)
        assert have.dtype == dtype, (have.dtype, dtype)
        want = want.detach().to(dtype)
        if dtype.is_floating_point or dtype.is_complex:
            torch.testing.assert_close(have, want, rtol=rtol, atol=atol)
        else:
            assert torch.equal(have, want), (have, want)


def quietly(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        return fn(*args, **kwargs)


def to_device(inputs: tuple) -> tuple:
    return tuple(i.to(DEVICE) if isinstance(i, torch.Tensor) else i for i in inputs)


def compiled(model: torch.nn.Module, **kwargs):
    """A copy of `model` on the XLA device, compiled with the x64guard backend."""
    torch._dynamo.reset()
    return torch.compile(copy.deepcopy(model).to(DEVICE), backend="x64guard", **kwargs)


def last_graph():
    return xt.compiled_graphs()[-1] if xt.compiled_graphs() else None


def run_python(code: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter (for environment variables torch-xla reads once), on
    torch-xla's CPU device unless `env` says otherwise."""
    return child.run_python("-c", code, env={"PJRT_DEVICE": "CPU", **(env or {})}, timeout=timeout)


_HLO_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([\w.-]+) = (\(.*?\)|\S+) ([a-z][\w-]*)\((.*)$")


def wide_values_beside_rng_state(hlo: str) -> list[str]:
    """Instructions of an HLO text whose result holds a 64-bit type, except the one
    64-bit value the x32 profile allows a program that draws random numbers: the
    u64[N] state of rng-bit-generator (made by bitcast-convert from u32 words, and the
    state the generator returns)."""
    types: dict[str, str] = {}
    wide = []
    for line in hlo.splitlines():
        match = _HLO_INSTRUCTION.match(line)
        if match is None:
            if HLO_WIDE.search(line) and "entry_computation_layout" in line:
                wide.append(line.strip())      # a 64-bit parameter or result of the program
            continue
        name, result, op, rest = match.groups()
        types[name] = result
        if not HLO_WIDE.search(result):
            continue
        operand = re.search(r"%([\w.-]+)", rest)
        operand_type = types.get(operand.group(1), "") if operand else ""
        if op == "rng-bit-generator" or (op == "bitcast-convert" and re.match(r"u64\[", result)
                                         and ("u32[" in rest.split(")")[0] or operand_type.startswith("u32["))):
            continue
        if op == "get-tuple-element" and "index=0" in rest and re.fullmatch(r"u64\[\d*\]\{?[\d,]*\}?", result):
            continue
        wide.append(line.strip())
    return wide

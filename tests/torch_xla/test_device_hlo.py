"""What reaches the device, read from XLA's own dump (`--xla_dump_to`) of every module
torch-xla compiled in a child process running the transformer block of the suite:

* through `narrow_exported` with inputs on the host: no module holds a 64-bit type;
* through the backend with the model (float64) and its int64 tokens already on the
  device: the program holds none; the only modules with 64-bit types are the boundary
  casts of those tensors (a convert, with min/max for the range check of integers).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.torch_xla.common import run_python

CHILD = r"""
import copy, json, sys, warnings
import torch, torch_xla
import x64guard, x64guard.torch_xla as xt
from tests.torch_xla.models import BY_NAME, build
warnings.simplefilter("ignore", x64guard.X64GuardWarning)
case = BY_NAME["transformer_block"]
model = build(case)
if sys.argv[1] == "export":
    program = xt.narrow_exported(torch.export.export(model, case.inputs(0)))
    for seed in (1, 2):
        out = program(*case.inputs(seed))
else:
    fn = torch.compile(copy.deepcopy(model).to(torch_xla.device()), backend="x64guard")
    with torch.no_grad():
        for seed in (1, 2):
            out = fn(*[t.to(torch_xla.device()) for t in case.inputs(seed)])
print(json.dumps([t.cpu().tolist() for t in out][1]))
"""

WIDE = re.compile(r"\b(?:s64|u64|f64|c128)\[")
# A boundary cast: a convert, with min/max (a reduce, or its stack) for the range check of integers.
BOUNDARY_OPS = {"parameter", "convert", "reshape", "reduce", "constant", "tuple", "minimum", "maximum",
                "concatenate", "broadcast", "bitcast", "copy", "call", "get-tuple-element"}


def _modules(dump: Path) -> dict[str, str]:
    """torch-xla's graphs (XLA names them SyncTensorsGraph.N), before optimizations."""
    return {path.name: path.read_text() for path in sorted(dump.glob("*SyncTensorsGraph*.before_optimizations.txt"))}


def _ops(text: str) -> set[str]:
    return set(re.findall(r"= \S+ ([a-z][\w-]*)\(", text))


@pytest.fixture(scope="module", params=["export", "backend"])
def dump(request, tmp_path_factory):
    where = tmp_path_factory.mktemp(f"xla_dump_{request.param}")
    code = f"import sys; sys.argv = ['child', {request.param!r}]\n" + CHILD
    proc = run_python(code, env={"XLA_FLAGS": f"--xla_dump_to={where} --xla_dump_hlo_as_text"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(json.loads(proc.stdout.strip().splitlines()[-1])) == 2   # the greedy tokens, computed
    return request.param, _modules(where)


def test_no_64bit_type_in_the_program(dump):
    path, modules = dump
    programs = {name: text for name, text in modules.items() if not _ops(text) <= BOUNDARY_OPS}
    assert len(programs) == 1, sorted(modules)   # the transformer: dot, erf, gather, ...
    for name, text in programs.items():
        assert "dot(" in text and not WIDE.search(text), (name, WIDE.findall(text)[:5])
    wide = [name for name, text in modules.items() if WIDE.search(text)]
    if path == "export":   # inputs and parameters cast on the host: nothing 64-bit at all
        assert not wide
    else:                  # tensors already on the device in 64 bits: only their boundary casts
        assert wide        # (float64 parameters, int64 tokens)
        assert all(_ops(modules[name]) <= BOUNDARY_OPS for name in wide)

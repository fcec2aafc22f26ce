"""Artifacts produced by JAX for the command-line tests, and a runner for the real command.

Every test runs `python -m x64guard ...` in a subprocess (the command as users run it),
from the repository root, on files written once per session.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from tests.cli import programs
from x64guard.io import modules

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(programs.__file__).resolve()


@dataclasses.dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args, cwd=ROOT, env=None, input=None, timeout=120) -> Result:
    environment = dict(os.environ)
    environment.pop("X64GUARD_DEBUG", None)
    environment.pop("NO_COLOR", None)
    environment.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "x64guard", *map(str, args)], cwd=cwd, env=environment,
                          input=input, capture_output=True, timeout=timeout,
                          text=not isinstance(input, bytes))
    out, err = proc.stdout, proc.stderr
    if isinstance(out, bytes):
        out, err = out.decode(errors="replace"), err.decode(errors="replace")
    return Result(proc.returncode, out, err)


def lower(fn, *args, x64: bool):
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", x64)
    try:
        return jax.jit(fn).lower(*args)
    finally:
        jax.config.update("jax_enable_x64", previous)


def export_serialized(fn, *args) -> bytes:
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        return bytes(jax.export.export(jax.jit(fn))(*args).serialize())
    finally:
        jax.config.update("jax_enable_x64", previous)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    """Name -> file. f64 ones come from `programs.f64_model` traced with x64 on."""
    out = tmp_path_factory.mktemp("artifacts")
    files: dict[str, Path] = {}

    def write(name: str, data) -> None:
        path = out / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        files[name] = path

    x64 = np.arange(4, dtype=np.float64)
    clean = lower(programs.clean, np.ones(4, np.float32), x64=False)
    f64 = lower(programs.f64_model, x64, x64=True)
    complex64 = lower(programs.complex_model, np.ones(4, np.float32), x64=False)
    big = lower(programs.big_constant, np.arange(4, dtype=np.int64), x64=True)

    write("clean.mlir", clean.as_text(debug_info=True))
    write("f64.mlir", f64.as_text(debug_info=True))
    write("complex64.mlir", complex64.as_text(debug_info=True))
    write("big_constant.mlir", big.as_text(debug_info=True))
    module, _ = modules.load(f64.as_text(debug_info=True))
    write("f64.mlirbc", modules.to_bytecode(module))
    write("f64.portable.bc", modules.to_portable_artifact(module))
    write("f64.hlo.txt", f64.as_text(dialect="hlo", debug_info=True))
    write("f64.hlo.pb", f64.compiler_ir("hlo").as_serialized_hlo_module_proto())
    write("f64.compiled.hlo.txt", f64.compile().as_text())  # optimized: fusions, mhlo ops
    write("f64.exported", export_serialized(programs.f64_model, x64))
    bytecode = modules.to_bytecode(module)
    write("truncated.mlirbc", bytecode[: len(bytecode) // 2])
    write("garbage.mlir", "this is not MLIR { at all\n")
    write("garbage.bin", bytes(range(7, 250, 3)) * 5)
    write("empty.mlir", "")
    return files


@pytest.fixture(scope="session")
def f64_line() -> int:
    return programs.marker_line("f64-model")

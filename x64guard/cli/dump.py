"""Where `x64guard gate` and `pytest --x64guard` point JAX's IR dump (and torch-xla's graph
dump), and what they find there afterwards. Imports neither JAX nor the pass: the pytest
plugin sets this up before the suite's first `import jax`, which reads these variables.

JAX 0.10 writes each module it compiles to `$JAX_DUMP_IR_TO/jax_irNNNN_<module>_compile.mlir`
(and `..._export.mlir` for `jax.export`): the StableHLO as lowered, with debug locations
unless `JAX_INCLUDE_DEBUG_INFO_IN_DUMPS` is false, so it is set to 1. The module is
`module @jit_<function>`, which names the jitted function. `JAX_DUMP_IR_MODES` must
contain `stablehlo` (its default). `JAX_ENABLE_X64` is left as the command has it.

Where torch-xla is installed, its graph dump is pointed at the same directory:
`XLA_SAVE_TENSORS_FILE` with `XLA_SAVE_TENSORS_FMT=stablehlo` (and `XLA_HLO_DEBUG=1` for
source locations), one file holding one graph per execution with the Python frames
that ran it.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path


class UsageError(Exception):
    """A command-line mistake: `x64guard: error: ...`, exit 2."""


JAX_DUMP_SUBDIR = "jax"
TORCH_XLA_SUBDIR = "torch_xla"
TORCH_XLA_FILE = "graphs.txt"  # inputs.TORCH_XLA_GRAPH_FILE finds it in a kept dump


def torch_xla_available() -> bool:
    return importlib.util.find_spec("torch_xla") is not None


def dump_environment(dump_root: Path, base: dict[str, str] | None = None,
                     torch_xla: bool | None = None) -> dict[str, str]:
    """The command's environment: the caller's, plus the dump settings."""
    env = dict(os.environ if base is None else base)
    env["JAX_DUMP_IR_TO"] = str(dump_root / JAX_DUMP_SUBDIR)
    modes = [m for m in env.get("JAX_DUMP_IR_MODES", "stablehlo").split(",") if m]
    if "stablehlo" not in modes:
        modes.append("stablehlo")
    env["JAX_DUMP_IR_MODES"] = ",".join(modes)
    env["JAX_INCLUDE_DEBUG_INFO_IN_DUMPS"] = "1"
    if torch_xla_available() if torch_xla is None else torch_xla:
        (dump_root / TORCH_XLA_SUBDIR).mkdir(parents=True, exist_ok=True)
        env["XLA_SAVE_TENSORS_FILE"] = str(dump_root / TORCH_XLA_SUBDIR / TORCH_XLA_FILE)
        env["XLA_SAVE_TENSORS_FMT"] = "stablehlo"
        env["XLA_HLO_DEBUG"] = "1"
        env["XLA_IR_DEBUG"] = "1"
    return env


def dumped_files(dump_root: Path) -> list[Path]:
    """What the command left: JAX's modules in the order it compiled them, then torch-xla's
    graph files (one per device ordinal: `graphs.txt`, `graphs.txt.1`, ...); a process that
    dumped into a folder of its own (a pytest-xdist worker under `pytest --x64guard`) after
    the others, folder by folder."""
    def in_order(directory: Path, pattern: str) -> list[Path]:
        return sorted(directory.rglob(pattern), key=lambda p: (p.parent != directory, str(p.parent), p.name))
    return (in_order(dump_root / JAX_DUMP_SUBDIR, "jax_ir*.mlir")
            + in_order(dump_root / TORCH_XLA_SUBDIR, TORCH_XLA_FILE + "*"))


def prepare_dump_dir(keep: str | None) -> Path:
    if keep is None:
        return Path(tempfile.mkdtemp(prefix="x64guard-gate-"))
    root = Path(keep)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise UsageError(f"--keep {keep}: must be an empty directory or a new path "
                         "(JAX numbers its dumps from 0 in every run and would mix with old ones)")
    root.mkdir(parents=True, exist_ok=True)
    return root

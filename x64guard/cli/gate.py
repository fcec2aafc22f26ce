"""`x64guard gate -- CMD ARGS...`: run a command (a test suite) with JAX's IR dump on,
then check every module it compiled.

JAX 0.10 writes each module it compiles to `$JAX_DUMP_IR_TO/jax_irNNNN_<module>_compile.mlir`
(and `..._export.mlir` for `jax.export`): the StableHLO as lowered, with debug locations
unless `JAX_INCLUDE_DEBUG_INFO_IN_DUMPS` is false, so the gate sets it to 1. The module is
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
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from x64guard.cli.results import FileResult, Run, check_file, merge_repeated_compilations
from x64guard.cli.where import relative


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
    graph files (one per device ordinal: `graphs.txt`, `graphs.txt.1`, ...)."""
    jax_files = sorted((dump_root / JAX_DUMP_SUBDIR).glob("jax_ir*.mlir"))
    torch_files = sorted((dump_root / TORCH_XLA_SUBDIR).glob(TORCH_XLA_FILE + "*"))
    return jax_files + torch_files


def prepare_dump_dir(keep: str | None) -> Path:
    if keep is None:
        return Path(tempfile.mkdtemp(prefix="x64guard-gate-"))
    root = Path(keep)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise UsageError(f"--keep {keep}: must be an empty directory or a new path "
                         "(JAX numbers its dumps from 0 in every run and would mix with old ones)")
    root.mkdir(parents=True, exist_ok=True)
    return root


def run_gate(command: list[str], *, target: str, fail_on: str, keep: str | None = None,
             command_stdout=None, progress_factory=None, neuron_cc_flags: str | None = None) -> Run:
    if not command:
        raise UsageError("gate needs a command after `--`, e.g. x64guard gate -- pytest -q")
    dump_root = prepare_dump_dir(keep)
    try:
        env = dump_environment(dump_root)
        try:
            completed = subprocess.run(command, env=env, stdout=command_stdout)
        except FileNotFoundError:
            raise UsageError(f"command not found: {command[0]}") from None
        except PermissionError:
            raise UsageError(f"command not executable: {command[0]}") from None
        files = dumped_files(dump_root)
        torch_xla_dumped = any(path.parent.name == TORCH_XLA_SUBDIR for path in files)
        if not torch_xla_dumped:
            _remove_if_empty(dump_root / TORCH_XLA_SUBDIR)  # prepared for torch-xla, which wrote nothing
        progress = progress_factory(len(files)) if progress_factory else None
        run = Run("gate", target, fail_on)
        for index, path in enumerate(files):
            if progress:
                progress(index, path.name)
            run.files.append(_check_dump(path, target, ephemeral=keep is None, neuron_cc_flags=neuron_cc_flags))
        if progress:
            progress.close()
        run.files = merge_repeated_compilations(run.files)
        run.gate = {
            "command": list(command),
            "command_line": shlex.join(command),
            "returncode": completed.returncode,
            # Only a kept directory is named: without --keep it is deleted before the report
            # is written, and its absolute path would name nothing.
            "dump_dir": relative(str(dump_root)) if keep is not None else None,
            "kept": keep is not None,
            "dumped_files": len(files),
            # torch-xla's graph dump was requested (it is installed) and it wrote graphs.
            "torch_xla": torch_xla_dumped,
        }
        return run
    finally:
        if keep is None:
            shutil.rmtree(dump_root, ignore_errors=True)


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:  # missing, or not empty
        pass


def _check_dump(path: Path, target: str, ephemeral: bool, neuron_cc_flags: str | None = None) -> FileResult:
    result = check_file(str(path), target, neuron_cc_flags=neuron_cc_flags)
    result.ephemeral = ephemeral
    for module in result.modules:
        module.unit.ephemeral = ephemeral
    return result

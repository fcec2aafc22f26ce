"""`x64guard gate -- CMD ARGS...`: run a command (a test suite) with JAX's IR dump on,
then check every module it compiled (the dump's set-up: `dump.py`).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from x64guard.cli.dump import TORCH_XLA_SUBDIR, UsageError, dump_environment, dumped_files, prepare_dump_dir
from x64guard.cli.results import FileResult, Run, check_file, merge_repeated_compilations
from x64guard.cli.where import relative


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
        return check_dump(dump_root, dumped_files(dump_root), command, completed.returncode, target=target,
                          fail_on=fail_on, kept=keep is not None, progress_factory=progress_factory,
                          neuron_cc_flags=neuron_cc_flags)
    finally:
        if keep is None:
            shutil.rmtree(dump_root, ignore_errors=True)


def check_dump(dump_root: Path, files: list[Path], command: list[str], returncode: int, *, target: str,
               fail_on: str, kept: bool, progress_factory=None, neuron_cc_flags: str | None = None) -> Run:
    """The gate's run over what a command dumped (`files`, in order): what `x64guard gate`
    and `pytest --x64guard` report."""
    torch_xla_dumped = any(path.is_relative_to(dump_root / TORCH_XLA_SUBDIR) for path in files)
    if not torch_xla_dumped:
        _remove_if_empty(dump_root / TORCH_XLA_SUBDIR)  # prepared for torch-xla, which wrote nothing
    progress = progress_factory(len(files)) if progress_factory else None
    run = Run("gate", target, fail_on)
    for index, path in enumerate(files):
        if progress:
            progress(index, path.name)
        run.files.append(_check_dump(path, target, ephemeral=not kept, neuron_cc_flags=neuron_cc_flags))
    if progress:
        progress.close()
    run.files = merge_repeated_compilations(run.files)
    run.gate = {
        "command": list(command),
        "command_line": shlex.join(command),
        "returncode": returncode,
        # Only a kept directory is named: without --keep it is deleted before the report
        # is written, and its absolute path would name nothing.
        "dump_dir": relative(str(dump_root)) if kept else None,
        "kept": kept,
        "dumped_files": len(files),
        # torch-xla's graph dump was requested (it is installed) and it wrote graphs.
        "torch_xla": torch_xla_dumped,
    }
    return run


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

"""`pytest --x64guard[=TARGET]`: run a test suite under x64guard's gate.

pytest loads this module in every run (the `pytest11` entry point `x64guard`); without
`--x64guard` it does nothing, and loading it imports neither JAX nor the pass. With the
flag it does what `x64guard gate -- pytest ...` does, inside the pytest process:

* before the first conftest is imported, JAX's IR dump (and torch-xla's graph dump, where
  torch-xla is installed) is pointed at a temporary directory (`--x64guard-keep DIR`:
  that one, kept), as environment variables the suite's `import jax` reads; processes the
  suite starts inherit them. pytest-xdist workers dump into folders of their own (JAX
  numbers its dumps from 0 in every process);
* after the session every module the suite compiled is checked against TARGET (default
  x32) as the gate checks it, the gate's text report is printed in the terminal summary,
  and each `--x64guard-report=PATH` is written (`.json`, `.sarif`, else text);
* the exit status follows the gate's rules when pytest's own is 0: 1 when a module has a
  finding at or above `--x64guard-fail-on` (default error), 2 when a dump could not be
  read. A nonzero pytest status is kept.

The variables set are put back when the session ends.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

DEFAULT_TARGET = "x32"  # tables.DEFAULT_TARGET (read without the pass: see _target_names)
FAIL_ON = ("error", "warning", "info")
_DUMP_ROOT_VARIABLE = "X64GUARD_PYTEST_DUMP"  # the controller's dump directory, for xdist workers
_GATE = pytest.StashKey["_Gate"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("x64guard", "x64guard: check the modules a JAX or torch-xla suite compiles")
    group.addoption("--x64guard", nargs="?", const=DEFAULT_TARGET, default=None, metavar="TARGET",
                    help="run the suite under x64guard's gate: check every module it compiles against TARGET "
                         f"(default {DEFAULT_TARGET}; `x64guard targets` lists them) and fail the run when one does "
                         "not pass. Write --x64guard=TARGET before test paths")
    group.addoption("--x64guard-report", action="append", default=[], metavar="PATH",
                    help="also write the gate's report to PATH: .json, .sarif, anything else text (repeatable)")
    group.addoption("--x64guard-fail-on", default="error", choices=FAIL_ON,
                    help="a module fails with a finding at least this severe (default: error)")
    group.addoption("--x64guard-keep", metavar="DIR", default=None,
                    help="dump the compiled modules into DIR (empty or new) and keep them")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """The dump is set up before any conftest can import JAX, which reads it at import."""
    options = early_config.known_args_namespace
    if options.x64guard is None:
        return
    targets = _target_names()
    if options.x64guard not in targets:
        raise pytest.UsageError(
            f"--x64guard: unknown target {options.x64guard!r} (one of {', '.join(targets)}); a test path right "
            "after --x64guard is read as its target: write --x64guard=TARGET, or put --x64guard after the paths")
    gate = _Gate(options.x64guard, options.x64guard_fail_on, options.x64guard_report, options.x64guard_keep)
    gate.start()
    early_config.stash[_GATE] = gate


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    gate = session.config.stash.get(_GATE, None)
    if gate is None or gate.worker:
        return
    command = ["pytest", *session.config.invocation_params.args]
    run = gate.check(command, int(exitstatus))
    for path in gate.reports:
        gate.write_report(run, path)
    if session.exitstatus == 0:
        session.exitstatus = run.exit_code()


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    gate = config.stash.get(_GATE, None)
    if gate is None or gate.run is None:
        return
    from x64guard.cli.formats import render_text
    from x64guard.cli.term import Style

    terminalreporter.section("x64guard")
    for file in gate.run.errors:  # as `x64guard gate` says them: once, here
        terminalreporter.write_line(f"x64guard: error: {file.path}: {file.error}")
    terminalreporter.write(render_text(gate.run, Style(terminalreporter.hasmarkup), reasons_on_stderr=True))
    for path in gate.reports:
        terminalreporter.write_line(f"x64guard: report written to {path}")


def pytest_unconfigure(config: pytest.Config) -> None:
    gate = config.stash.get(_GATE, None)
    if gate is not None:
        gate.stop()


class _Gate:
    """One gated session: the dump directory, the variables set for it, the result."""

    def __init__(self, target: str, fail_on: str, reports: list[str], keep: str | None):
        self.target, self.fail_on, self.reports, self.keep = target, fail_on, list(reports), keep
        # A pytest-xdist worker of a gated session: it dumps, the controller checks.
        self.worker = os.environ.get("PYTEST_XDIST_WORKER") if os.environ.get(_DUMP_ROOT_VARIABLE) else None
        self.root: Path | None = None
        self.saved: dict[str, str | None] = {}     # variable -> its value before (None: unset)
        self.saved_jax: dict[str, object] = {}     # jax.config flag -> its value before
        self.run = None

    def start(self) -> None:
        from x64guard.cli.dump import JAX_DUMP_SUBDIR, TORCH_XLA_FILE, TORCH_XLA_SUBDIR, UsageError, dump_environment
        from x64guard.cli.dump import prepare_dump_dir

        if self.worker:
            self.root = Path(os.environ[_DUMP_ROOT_VARIABLE])
            changes = {"JAX_DUMP_IR_TO": str(self.root / JAX_DUMP_SUBDIR / self.worker)}
            if os.environ.get("XLA_SAVE_TENSORS_FILE"):
                (self.root / TORCH_XLA_SUBDIR / self.worker).mkdir(parents=True, exist_ok=True)
                changes["XLA_SAVE_TENSORS_FILE"] = str(self.root / TORCH_XLA_SUBDIR / self.worker / TORCH_XLA_FILE)
        else:
            try:
                self.root = prepare_dump_dir(self.keep)
            except UsageError as exc:
                raise pytest.UsageError(str(exc).replace("--keep", "--x64guard-keep", 1)) from None
            environment = dump_environment(self.root)
            changes = {k: v for k, v in environment.items() if os.environ.get(k) != v}
            changes[_DUMP_ROOT_VARIABLE] = str(self.root)
        for name, value in changes.items():
            self.saved.setdefault(name, os.environ.get(name))
            os.environ[name] = value
        _update_loaded_jax(changes, self.saved_jax)

    def check(self, command: list[str], returncode: int):
        from x64guard.cli.dump import dumped_files
        from x64guard.cli.gate import check_dump

        self.run = check_dump(self.root, dumped_files(self.root), command, returncode, target=self.target,
                              fail_on=self.fail_on, kept=self.keep is not None)
        return self.run

    def write_report(self, run, path: str) -> None:
        from x64guard.cli.formats import render
        from x64guard.cli.inputs import InputError, write_atomically

        fmt = {".json": "json", ".sarif": "sarif"}.get(Path(path).suffix.lower(), "text")
        try:
            write_atomically(path, render(run, fmt).encode("utf-8"))
        except InputError as exc:
            raise pytest.UsageError(f"--x64guard-report: {exc}") from None

    def stop(self) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.saved.clear()
        _restore_loaded_jax(self.saved_jax)
        if not self.worker and self.keep is None and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
        self.root = None


# JAX reads its dump settings once, at import. Should a plugin loaded before this one have
# imported JAX already, the same settings go through jax.config, and are put back after.
_JAX_FLAGS = {"JAX_DUMP_IR_TO": "jax_dump_ir_to", "JAX_DUMP_IR_MODES": "jax_dump_ir_modes",
              "JAX_INCLUDE_DEBUG_INFO_IN_DUMPS": "jax_include_debug_info_in_dumps"}


def _update_loaded_jax(changes: dict[str, str], saved: dict[str, object]) -> None:
    if "jax" not in sys.modules:
        return
    import jax

    for variable, flag in _JAX_FLAGS.items():
        if variable in changes:
            saved.setdefault(flag, getattr(jax.config, flag))
            value = changes[variable]
            jax.config.update(flag, value == "1" if flag == "jax_include_debug_info_in_dumps" else value)


def _restore_loaded_jax(saved: dict[str, object]) -> None:
    if saved:
        import jax

        for flag, value in saved.items():
            jax.config.update(flag, value)
        saved.clear()


def _target_names() -> list[str]:
    """The target profiles' names, read from the targets table alone: importing
    `x64guard.passes` would load the pass and JAX before the suite's own `import jax`."""
    loaded = sys.modules.get("x64guard.passes.tables.targets")
    if loaded is None:
        path = Path(__file__).parent / "passes" / "tables" / "targets.py"
        name = "_x64guard_pytest_plugin_targets"
        spec = importlib.util.spec_from_file_location(name, path)
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded  # dataclasses look their module up while the table is built
        try:
            spec.loader.exec_module(loaded)
        finally:
            del sys.modules[name]
    return list(loaded.TARGET_PROFILES)

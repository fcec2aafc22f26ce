"""Hostile input through the command line: `python -m x64guard check FILE` and
`python -m x64guard narrow FILE -o OUT` on mutated text, bytecode and portable artifacts,
each `narrow` case its own process and `check` cases five files per process (the command
as users run it; a batch that dies is re-run one file per process to name the case).

The contract: exit 0 or 1 with a usable result (a mutation can leave the module valid), or
exit 2 with exactly one line `x64guard: error: FILE: reason` on stderr and no traceback;
never a signal, another exit code or a hang. `narrow` writes its output only when it
succeeds. 100 cases in `make test`; `make fuzz N=...` runs N.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.reliability import hostile
from tests.reliability.conftest import env_int

CASES = env_int("X64GUARD_CLI_CASES", 100)
RUN_SEED = env_int("X64GUARD_HOSTILE_SEED", 0) + 2
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60
SUFFIX = {"text": ".mlir", "bytecode": ".mlirbc", "artifact": ".mlirbc"}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("X64GUARD_DEBUG", "NO_COLOR", "X64GUARD_MODE"):
        env.pop(name, None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("JAX_PLATFORMS", "cpu")
    env["X64GUARD_READER_TIMEOUT"] = "4"  # a looping bytecode reader is stopped sooner than TIMEOUT
    return env


def write_case(seeds: dict[str, bytes], index: int, workdir: Path) -> tuple[str, Path]:
    desc, data = hostile.make_case(seeds, RUN_SEED, index)
    blob = data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape")
    kind = desc.split(" of ")[-1].split(":")[0] if " of " in desc else "text"
    path = workdir / f"case{index}{SUFFIX.get(kind, '.mlir')}"
    path.write_bytes(blob)
    return desc, path


def _run(command: list[str]) -> tuple[int | None, str]:
    try:
        proc = subprocess.run([sys.executable, "-m", "x64guard", *command], cwd=ROOT, env=_env(),
                              capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, ""
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


def _exit_problem(what: str, returncode: int | None, stderr: str) -> str | None:
    if returncode is None:
        return f"{what} hung (> {TIMEOUT} s)"
    if returncode not in (0, 1, 2):
        return f"{what} exited {returncode}: {stderr[-400:]!r}"
    if "Traceback" in stderr:
        return f"{what} printed a traceback: {stderr[-400:]!r}"
    return None


def check_batch(cases: list[tuple[int, str, Path]]) -> list[str]:
    """`x64guard check` on several files at once (an unreadable file does not stop the
    others): one `x64guard: error: FILE: reason` line per unreadable file. If the process
    dies, every file is checked alone to name the case that killed it."""
    returncode, stderr = _run(["check", *[str(path) for _, _, path in cases]])
    what = "`x64guard check` on cases " + ", ".join(str(i) for i, _, _ in cases)
    problem = _exit_problem(what, returncode, stderr)
    if problem and len(cases) > 1:
        return [p for case in cases for p in check_batch([case])]
    if problem:
        index, desc, _ = cases[0]
        return [f"case {index} [{desc}]: {problem}"]
    found = []
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    for line in lines:
        if not line.startswith("x64guard: error: ") or not any(line.startswith(f"x64guard: error: {p}: ")
                                                               for _, _, p in cases):
            found.append(f"{what}: unexpected stderr line {line[:300]!r}")
    named = [i for i, _, p in cases if any(ln.startswith(f"x64guard: error: {p}: ") for ln in lines)]
    for index, desc, path in cases:
        if sum(ln.startswith(f"x64guard: error: {path}: ") for ln in lines) > 1:
            found.append(f"case {index} [{desc}]: more than one error line")
    if (returncode == 2) != bool(named):
        found.append(f"{what}: exit {returncode} but error lines for cases {named}")
    return found


def narrow_case(index: int, desc: str, path: Path) -> str | None:
    out = path.with_name(f"out{index}{path.suffix}")
    returncode, stderr = _run(["narrow", str(path), "-o", str(out)])
    what = f"case {index} [{desc}] `x64guard narrow`"
    problem = _exit_problem(what, returncode, stderr)
    if problem:
        return problem
    if returncode == 2:
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        if len(lines) != 1 or not lines[0].startswith(f"x64guard: error: {path}: "):
            return f"{what} exited 2 without exactly one `x64guard: error: FILE: reason` line: {stderr[-400:]!r}"
        if out.exists():
            return f"{what} exited 2 but wrote {out.name}"
    elif returncode == 0 and (not out.exists() or out.stat().st_size == 0):
        return f"{what} exited 0 without writing its output"
    elif returncode == 1 and out.exists():
        return f"{what} refused (exit 1) but wrote {out.name}"
    return None


BATCH = 5


def test_command_line_on_hostile_input_exits_0_1_or_2_with_one_line(hostile_seeds, tmp_path):
    seeds = hostile.read_seeds(hostile_seeds)
    cases = [(i, *write_case(seeds, i, tmp_path)) for i in range(CASES)]
    checks = [c for c in cases if c[0] % 2 == 0]
    narrows = [c for c in cases if c[0] % 2 == 1]
    jobs = [lambda b=checks[k:k + BATCH]: check_batch(b) for k in range(0, len(checks), BATCH)]
    jobs += [lambda c=c: [p] if (p := narrow_case(*c)) else [] for c in narrows]
    with ThreadPoolExecutor(2) as pool:
        found = [p for result in pool.map(lambda job: job(), jobs) for p in result]
    assert not found, f"{len(found)} problem(s) in {CASES} command-line cases:\n" + "\n".join(found[:25])

"""Run ecosystem programs in child processes, several per child.

A child (`python -m tests.ecosystem.harness child OUT NAME...`) writes `START name` before
each program and one JSON record after it to the file OUT. If it dies (abort, segfault) or
stops making progress, the program it was on is recorded as a `crash` with how the child
ended and the tail of its output, and a fresh child continues with the next program.
Programs are spread over `workers` children running at the same time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.ecosystem.harness import DEFAULT_REGISTRY, Record
from tests.support.child import ROOT, child_env

# Seconds one program may run before its child is killed (the slowest takes well under a
# minute on a quiet 2-core machine; the margin is for a busy one).
PROGRAM_TIMEOUT = float(os.environ.get("X64GUARD_ECOSYSTEM_TIMEOUT", "900"))


def default_workers() -> int:
    return max(1, int(os.environ.get("X64GUARD_ECOSYSTEM_WORKERS", min(2, os.cpu_count() or 1))))


def program_env() -> dict[str, str]:
    # Each program runs the way its library runs by default: equinox (and so every diffrax
    # solve) checks errors with a host callback unless EQX_ON_ERROR says otherwise.
    return child_env(unset=("EQX_ON_ERROR", "X64GUARD_MODE", "JAX_ENABLE_X64", "X64GUARD_DEBUG"),
                     defaults={"JAX_PLATFORMS": "cpu"})


def _describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return f"hung: killed after {PROGRAM_TIMEOUT:.0f} s without finishing"
    if returncode < 0:
        try:
            return f"child killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"child killed by signal {-returncode}"
    return f"child exited with status {returncode}"


def run_sequence(names: list[str], libraries: dict[str, str], registry: str = DEFAULT_REGISTRY) -> list[Record]:
    """Records of `names` (programs of `registry`, 'module:attribute'), in order, run by as
    many successive children as crashes need."""
    records: dict[str, Record] = {}
    remaining = list(names)
    with tempfile.TemporaryDirectory(prefix="x64guard-eco-") as tmp:
        attempt = 0
        while remaining:
            attempt += 1
            out_path = Path(tmp) / f"records-{attempt}.txt"
            log_path = Path(tmp) / f"log-{attempt}.txt"
            out_path.touch()
            with open(log_path, "wb") as log:
                proc = subprocess.Popen([sys.executable, "-m", "tests.ecosystem.harness", "child", registry,
                                         str(out_path), *remaining], cwd=ROOT, env=program_env(), stdout=log, stderr=log)
                current, last_progress, consumed, killed = None, time.monotonic(), 0, False
                while True:
                    returncode = proc.poll()
                    lines = out_path.read_text(encoding="utf-8").splitlines()
                    for line in lines[consumed:]:
                        last_progress = time.monotonic()
                        if line.startswith("START "):
                            current = line[len("START "):]
                        elif line.startswith("{"):
                            record = Record.from_dict(json.loads(line))
                            records[record.name] = record
                            current = None
                    consumed = len(lines)
                    if returncode is not None:
                        break
                    if current is not None and time.monotonic() - last_progress > PROGRAM_TIMEOUT:
                        killed = True
                        proc.kill()
                        proc.wait()
                        returncode = None
                        break
                    time.sleep(0.2)
            if current is None:
                # Died between programs (or at start-up): blame the next one not yet run.
                current = next((n for n in remaining if n not in records), None)
                if current is None:
                    break
            if current not in records:
                tail = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-4:]
                records[current] = Record(current, libraries.get(current, "?"), "crash", False, "other",
                                          _describe_exit(None if killed else returncode)
                                          + (": " + " | ".join(tail)[-400:] if tail else ""))
            remaining = [n for n in remaining if n not in records]
    return [records[n] for n in names]


def run_programs(programs, workers: int | None = None, registry: str = DEFAULT_REGISTRY) -> list[Record]:
    """Records of `programs` (in their order; they must be in `registry`), `workers`
    children at a time."""
    workers = workers or default_workers()
    programs = list(programs)
    libraries = {p.name: p.library for p in programs}
    # Slow programs first, dealt out in turn, so that the children finish close together.
    order = sorted(programs, key=lambda p: not p.slow)
    shares = [[p.name for p in order[k::workers]] for k in range(workers)]
    with ThreadPoolExecutor(workers) as pool:
        parts = list(pool.map(lambda share: run_sequence(share, libraries, registry), [s for s in shares if s]))
    found = {r.name: r for part in parts for r in part}
    return [found[p.name] for p in programs]

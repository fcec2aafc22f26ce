"""Run hostile cases in child processes and collect per-case outcomes.

A child runs a range of cases (tests/reliability/hostile.py, `child`), printing `START i`
on stderr before each and one JSON line per case on stdout. If it dies (abort, segfault,
timeout), the case it was on is recorded as a crash with its signal, and a fresh child
continues from the next case. Ranges run in parallel, one child per worker.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.support.child import ROOT, child_env

CASE_TIMEOUT = 30.0  # seconds without progress; every case takes far less (a hang counts as a crash)


def _child_env() -> dict[str, str]:
    # Bytecode that makes jaxlib's reader loop is stopped after this long (per call), well
    # inside CASE_TIMEOUT; the default scales for real, large modules.
    return child_env({"X64GUARD_READER_TIMEOUT": "4"}, unset=("X64GUARD_DEBUG",), defaults={"JAX_PLATFORMS": "cpu"})


def _describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "hung (killed after the timeout)"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with {returncode}"


def run_range(seeds_dir: Path, family: str, run_seed: int, start: int, stop: int) -> list[dict]:
    """Outcomes of cases [start, stop): the child's JSON records, plus {"index", "crash"}
    records for cases that killed their child."""
    records: dict[int, dict] = {}
    first = start
    while first < stop:
        cmd = [sys.executable, "-m", "tests.reliability.hostile", "child", str(seeds_dir), family, str(run_seed),
               str(first), str(stop)]
        err_path = Path(seeds_dir).parent / f"stderr-{family}-{run_seed}-{first}.txt"
        with open(err_path, "w+b") as err:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=_child_env(), stdout=subprocess.PIPE, stderr=err)
            deadline_per_case = CASE_TIMEOUT
            last_progress = time.monotonic()
            killed = False
            assert proc.stdout is not None
            # Read lines as they come; a watchdog thread kills a child that stops progressing.
            import threading

            def watchdog():
                nonlocal killed
                while proc.poll() is None:
                    if time.monotonic() - last_progress > deadline_per_case:
                        killed = True
                        proc.kill()
                        return
                    time.sleep(1.0)

            threading.Thread(target=watchdog, daemon=True).start()
            done = False
            for line in proc.stdout:
                last_progress = time.monotonic()
                record = json.loads(line)
                if record.get("done"):
                    done = True
                    continue
                records[record["index"]] = record
            returncode = proc.wait()
            err.seek(0)
            stderr = err.read().decode("utf-8", "replace")
        err_path.unlink(missing_ok=True)
        if done and returncode == 0:
            break
        started = [int(line.split()[1]) for line in stderr.splitlines() if line.startswith("START ")]
        current = started[-1] if started else first
        tail = [ln for ln in stderr.splitlines() if not ln.startswith("START ")][-5:]
        records[current] = {"index": current, "crash": _describe_exit(None if killed else returncode),
                            "stderr": "\n".join(tail)[-1500:]}
        first = current + 1
    return [records[i] for i in sorted(records)]


def run_cases(seeds_dir: Path, family: str, run_seed: int, count: int, workers: int = 2) -> list[dict]:
    """All `count` cases of run `run_seed` over the seeds of `family`, split over
    `workers` children in parallel."""
    bounds = [count * k // workers for k in range(workers + 1)]
    with ThreadPoolExecutor(workers) as pool:
        parts = pool.map(lambda k: run_range(seeds_dir, family, run_seed, bounds[k], bounds[k + 1]), range(workers))
    return [r for part in parts for r in part]

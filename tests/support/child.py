"""Running Python in a child process, for the tests that need a fresh interpreter (what an
import does, environment variables read once, crashes that must not take pytest down).

Every child gets the same environment (`child_env`): this process's, with the repository
root first on PYTHONPATH so that `x64guard` and `tests` import from this checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterable, Mapping

ROOT = Path(__file__).resolve().parents[2]


def child_env(extra: Mapping[str, str] | None = None, *, unset: Iterable[str] = (),
              defaults: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment with the repository root first on PYTHONPATH, the
    variables `unset` removed, `defaults` set where not already set, and `extra` set."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for name in unset:
        env.pop(name, None)
    for name, value in (defaults or {}).items():
        env.setdefault(name, value)
    env.update(extra or {})
    return env


def run_python(*argv: str, env: Mapping[str, str] | None = None, unset: Iterable[str] = (),
               timeout: float = 300, input: str | None = None) -> subprocess.CompletedProcess:
    """`python ARGV...` in a child, from the repository root, output captured as text."""
    return subprocess.run([sys.executable, *argv], input=input, capture_output=True, text=True, timeout=timeout,
                          env=child_env(env, unset=unset), cwd=ROOT)


def run_code(code: str, **options) -> subprocess.CompletedProcess:
    """`python -c CODE` (dedented) in a child; options as run_python's."""
    return run_python("-c", textwrap.dedent(code), **options)


def run_json(code: str, **options) -> dict:
    """Run `code` in a child that must succeed, and return the JSON its last line prints."""
    proc = run_code(code, **options)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])

"""Shared fixtures and the knobs `make fuzz` turns (environment variables):

X64GUARD_FUZZ_EXAMPLES   differential fuzzing examples (default 300)
X64GUARD_FUZZ_SEED       a seed for the differential fuzzer (default: derandomized, fixed)
X64GUARD_HOSTILE_CASES   hostile-input cases through the library, per family (default 1000 x 2)
X64GUARD_HOSTILE_SEED    their run seed (default 0)
X64GUARD_CLI_CASES       hostile-input cases through the command line (default 100)
"""

from __future__ import annotations

import os

import pytest

from tests.reliability import hostile


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


@pytest.fixture(scope="session")
def hostile_seeds(tmp_path_factory):
    """Valid inputs (text, bytecode, portable artifact) written once per session."""
    directory = tmp_path_factory.mktemp("hostile") / "seeds"
    hostile.write_seeds(directory)
    return directory

"""Short forms of the differential oracle's helpers for tests outside the corpus."""

from __future__ import annotations

from tests.corpus.oracle import lower_x64 as _lower_x64
from tests.corpus.oracle import run_oracle, run_text, to32


def lower_x64(fn, *args) -> str:
    """StableHLO text of `fn` traced with x64 on (for this trace only), locations included."""
    return _lower_x64(fn, args)


def run_x32(fn, args):
    """JAX's own answer: `fn` traced and run with x64 off on the 32-bit inputs."""
    return run_oracle(fn, [to32(a) for a in args])


def run_narrowed(text: str, args):
    """The narrowed module compiled and run on the CPU backend on the 32-bit inputs."""
    return run_text(text, [to32(a) for a in args])

"""What a real-ecosystem program is, as data.

A `Program` names a library and a `build` function. `build()` runs in the child with x64
OFF (the way a user's script prepares data and models before calling a jitted step) and
returns `(fn, args)`: the function a user would put under `jax.jit`, and its positional
arguments (pytrees of arrays: float32/int32 data as x32 JAX sees it, typed or raw PRNG keys,
numpy float64/int64 arrays where the program asks for 64-bit inputs).

The harness runs `jax.jit(fn)(*args)` with x64 off (the reference) and
`x64guard.jit(fn)(*args)` with x64 on (the candidate) and compares every output leaf's bits.

Libraries are imported inside `build`, so that listing the programs (pytest collection, the
table's parent process) imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

Built = tuple[Callable[..., Any], tuple]


@dataclass(frozen=True)
class Refusal:
    """Why refusing this program is right: x32 JAX itself would not give the program's
    answer. `kinds`: the finding kinds the refusal may carry (any one suffices)."""

    kinds: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class Program:
    name: str
    library: str
    build: Callable[[], Built]
    # What the program is, in user terms (shown by --list).
    what: str
    refusal: Refusal | None = None
    # Takes more than ~5 s in the child (compile-heavy): marked `slow` in pytest.
    slow: bool = False
    # The X64GuardWarnings its call emits where that is not the narrowing summary plus the
    # lossy changes it announces (or none where x32 JAX's program runs): test_ecosystem.py.
    warnings: int | None = None

    def __repr__(self) -> str:  # short pytest ids and messages
        return f"Program({self.name!r})"


class Registry:
    """Programs in declaration order; `@registry.program(...)` adds the decorated build."""

    def __init__(self, library: str):
        self.library = library
        self.programs: list[Program] = []

    def program(self, name: str, what: str, *, refusal: Refusal | None = None, slow: bool = False,
                warnings: int | None = None) -> Callable[[Callable[[], Built]], Callable[[], Built]]:
        def add(build: Callable[[], Built]) -> Callable[[], Built]:
            self.programs.append(Program(name, self.library, build, what, refusal, slow, warnings))
            return build
        return add

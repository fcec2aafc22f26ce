"""Narrowed programs shared between specializations.

When dynamo recompiles a function (a guard failed: Hugging Face's classifiers set
`config.problem_type` during their first call), AOTAutograd hands the backend new
forward and backward graphs that mostly lower to the same StableHLO as before: torch-xla
numbers its IR nodes anew, so only the module's name and its location names differ.
Each such graph used to be compiled again under a fresh name. Here a narrowed module is
identified by its text without debug information and without its name (plus its
parameter types and device), and identical ones share one compiled XLA program: one
`XlaComputation` under one name, so torch-xla's computation cache holds it once.

Locations never change what a program computes; they only name model lines in findings,
which each specialization keeps for itself (as it keeps its own overflow checks).
"""

from __future__ import annotations

import hashlib
import re
import threading
import weakref
from typing import Any, Callable, Sequence

_MODULE_NAME = re.compile(r"^module @[^\s{]+", re.MULTILINE)


def fingerprint(module, in_types: Sequence[tuple[tuple[int, ...], Any]], device: str) -> str:
    """What identifies a narrowed program: its MLIR without locations, its name dropped,
    its parameters' (shape, dtype) and the device."""
    text = module.operation.get_asm(enable_debug_info=False)
    text = _MODULE_NAME.sub("module @m", text, count=1)
    digest = hashlib.sha256(text.encode())
    digest.update(repr((list(in_types), device)).encode())
    return digest.hexdigest()


class Compiled:
    """One compiled program as torch-xla holds it: the computation, its name, the
    lazy graph's hash (the key of torch-xla's computation cache), its parameter order,
    result dtypes and HLO text. Shared by every `Program` whose module has its
    fingerprint; alive while one of them is."""

    __slots__ = ("name", "computation", "order", "out_dtypes", "hlo", "graph", "__weakref__")

    def __init__(self, name: str, computation) -> None:
        self.name = name
        self.computation = computation
        self.order: list[int] = []
        self.out_dtypes: list = []
        self.hlo = ""
        self.graph = b""


class SharedPrograms:
    """The live compiled programs by fingerprint (weakly: a program lives while a `Program`
    uses it), and how many times one was shared. One per process, as torch-xla's
    computation cache the programs are compiled into."""

    def __init__(self) -> None:
        self.programs: "weakref.WeakValueDictionary[str, Compiled]" = weakref.WeakValueDictionary()
        self.shared = 0
        self._lock = threading.Lock()

    def get(self, key: str | None, build: Callable[[], Compiled]) -> Compiled:
        """The compiled program of `key`, built (and compiled) by `build` only when no live
        program has that fingerprint; `key=None` never shares."""
        if key is None:
            return build()
        with self._lock:
            found = self.programs.get(key)
            if found is not None:
                self.shared += 1
                return found
            compiled = self.programs[key] = build()
            return compiled


SHARED = SharedPrograms()
shared = SHARED.get

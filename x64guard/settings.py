"""x64guard's mode: `x64guard.mode(...)`, `x64guard.set_mode(...)`, `x64guard.current_mode()`.

Plain Python, no framework: a process default (initially $X64GUARD_MODE, read, never
written, when this module is first used; else warn) and, per thread, the modes of the
`with x64guard.mode(...)` blocks it is in (the innermost wins, restored on exit).

A front end whose framework caches compiled programs keys those caches by the mode through
a mirror (`add_mirror`): the JAX front end mirrors the mode into a JAX configuration state
that takes part in jax.jit's cache key and the persistent compilation cache key
(x64guard/jax/mode_key.py), registered when x64guard.jit is first used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import Callable, ContextManager, Iterator, Protocol

from x64guard import modes
from x64guard.modes import Mode


class ModeMirror(Protocol):
    """A front end's copy of the mode, kept equal to it by this module."""

    def set_default(self, mode: Mode) -> None:
        """The process default changed (`set_mode`)."""

    def override(self, mode: Mode) -> ContextManager:
        """`mode` for this thread while the returned context is entered."""


@dataclasses.dataclass
class _Block:
    mode: Mode
    exits: contextlib.ExitStack  # the mirrors' overrides of this block, left with it


_lock = threading.Lock()
_default: Mode = modes.mode_from_environment()
_mirrors: dict[str, ModeMirror] = {}
_thread = threading.local()  # .blocks: this thread's open `mode(...)` blocks, outermost first


def _blocks() -> list[_Block]:
    blocks = getattr(_thread, "blocks", None)
    if blocks is None:
        blocks = _thread.blocks = []
    return blocks


def current_mode() -> Mode:
    """The mode in force in this thread: x64guard.mode(...) > set_mode(...) > $X64GUARD_MODE > warn."""
    blocks = _blocks()
    return blocks[-1].mode if blocks else _default


def set_mode(mode: "Mode | str") -> None:
    """Set the process-wide default mode (other threads included)."""
    global _default
    resolved = modes.resolve_mode(mode)
    with _lock:
        _default = resolved
        for mirror in _mirrors.values():
            mirror.set_default(resolved)


@contextlib.contextmanager
def mode(mode: "Mode | str") -> Iterator[Mode]:
    """`with x64guard.mode("allow"): ...` sets the mode for this thread, restored on exit."""
    resolved = modes.resolve_mode(mode)
    blocks = _blocks()
    with contextlib.ExitStack() as exits:
        for mirror in list(_mirrors.values()):
            exits.enter_context(mirror.override(resolved))
        blocks.append(_Block(resolved, exits))
        try:
            yield resolved
        finally:
            blocks.pop()


def add_mirror(name: str, make: Callable[[Mode], ModeMirror]) -> None:
    """Keep a front end's copy of the mode equal to it from now on: `make(default)` builds
    it from the current process default (once per `name`). This thread's open `mode(...)`
    blocks are entered into it too, each left with its block. Another thread's open block
    reaches it when that thread next enters one."""
    with _lock:
        if name in _mirrors:
            return
        mirror = _mirrors[name] = make(_default)
    for block in _blocks():  # outermost first, so each block's exit restores the one around it
        block.exits.enter_context(mirror.override(block.mode))


modes.set_default_mode_source(current_mode)

"""torch.compile support. (a) Dynamo (torch 2.9) hands a call to the torch-function modes
on the stack only for functions it considers overridable, leaving out the factories PyTorch
lists as "ignored" (torch.tensor, arange, randint, randperm, ...) which eager mode does hand
to modes: a compiled graph would create int64 where eager code creates the default. The
patch makes Dynamo hand those factories to modes, as eager mode does (modes only: tensor
subclasses still never see them).

Scoped: it is in place while some thread has a narrow default (a `Hold` from when a thread
sets one until it goes back to int64, by `set_default_int_dtype(torch.int64)` or the exit
of `default_int_dtype(...)`, or the thread ends), and Dynamo's own method is put back when
the last one ends. Dynamo's module is patched when it is imported (a meta path finder, removed on
release too), so that eager-only programs never import Dynamo.
(b) While Dynamo traces or compiles, torch functions that run for real are its own (fake
propagation, AOT autograd, inductor), not the user's (Dynamo traces those symbolically
through the mode): they see stock PyTorch (`_private.dynamo_is_tracing`, read by the mode).
The private calls themselves are in _private.py."""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Callable

from x64guard.torch._private import DYNAMO_VARIABLES, hand_factories_to_modes
from x64guard.torch.factories import DTYPE_DEFAULTS

_DYNAMO_FACTORIES = frozenset(DTYPE_DEFAULTS)


class _Patch:
    """The process-wide state of the patch: how many threads hold a narrow default, the
    finder waiting for Dynamo's import, the function that undoes the patch."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.holders = 0
        self.finder: "_DynamoImportHook | None" = None
        self.restore: "Callable[[], None] | None" = None

    def apply(self, module) -> None:
        with self.lock:
            if self.holders and self.restore is None:
                self.restore = hand_factories_to_modes(module, _DYNAMO_FACTORIES)


_PATCH = _Patch()


class _DynamoImportHook:
    """A meta path finder that patches Dynamo's module right after it is first executed."""

    def find_spec(self, name, path=None, target=None):
        if name != DYNAMO_VARIABLES:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _PATCH.apply(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def _hold() -> None:
    with _PATCH.lock:
        _PATCH.holders += 1
        if DYNAMO_VARIABLES in sys.modules:
            _PATCH.apply(sys.modules[DYNAMO_VARIABLES])
        elif _PATCH.finder is None:
            _PATCH.finder = _DynamoImportHook()
            sys.meta_path.insert(0, _PATCH.finder)


def _release() -> None:
    with _PATCH.lock:
        _PATCH.holders -= 1
        if _PATCH.holders:
            return
        if _PATCH.finder is not None:
            if _PATCH.finder in sys.meta_path:
                sys.meta_path.remove(_PATCH.finder)
            _PATCH.finder = None
        if _PATCH.restore is not None:
            _PATCH.restore()
            _PATCH.restore = None


class Hold:
    """One thread's narrow default: Dynamo is patched (now, or when it is imported) while
    any Hold is open. `close()` ends it; so does the Hold's collection (its thread ended)."""

    def __init__(self) -> None:
        _hold()
        self._end = weakref.finalize(self, _release)
        self._end.atexit = False  # nothing to put back at interpreter exit

    def close(self) -> None:
        self._end()  # runs `_release` once, however often it is called

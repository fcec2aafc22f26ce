"""The torch-function mode that applies the rules, and the API that installs it on the
calling thread: set_default_int_dtype, get_default_int_dtype, default_int_dtype."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import torch
from torch.overrides import TorchFunctionMode

from x64guard.torch.dynamo_patch import Hold
from x64guard.torch._private import (dynamo_is_tracing, function_mode_stack, pop_function_mode,
                                     push_function_mode)
from x64guard.torch.bounds import ALLOWED_DTYPES
from x64guard.torch.rules import RULES

# The functions of the rule table that torch wraps with functools.wraps (Tensor.__rsub__,
# __pow__, __floordiv__, ... in torch/_tensor.py). Dynamo inlines such a wrapper, and its
# call of handle_torch_function hands the modes the wrapper read from its own closure: on
# torch 2.15 a stand-in that hashes by identity of Dynamo's own tracker, not as the function
# does, so a dict lookup misses and the "key absent" guard it installs fails at once (2.9
# hashes it right). Identity (`is`) holds on both, so while Dynamo traces, the mode swaps it
# for the table's own object before any lookup.
_WRAPPED_RULES = tuple(func for func in RULES if hasattr(func, "__wrapped__"))


def _table_function(func):
    """`func` as the rule table holds it: the same object, one Dynamo traces as itself."""
    for wrapped in _WRAPPED_RULES:
        if func is wrapped:
            return wrapped
    return func


# Where the mode classes say they come from (their repr, torch.compile's guards): the
# public package, as before it was split.
_PUBLIC_MODULE = "x64guard.torch"


class _DefaultIntMode(TorchFunctionMode):
    """Applies the rules for `dtype`. One subclass per dtype: torch.compile guards on the
    types of the modes on the stack, so graphs are never shared between dtypes."""

    dtype: torch.dtype = torch.int64

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if torch.compiler.is_dynamo_compiling():
            func = _table_function(func)
        rule = RULES.get(func)
        if rule is None or (not torch.compiler.is_dynamo_compiling() and dynamo_is_tracing()):
            if kwargs:
                return func(*args, **kwargs)
            return func(*args)
        return rule(self.dtype, func, args, kwargs if kwargs else {})


_DefaultIntMode.__module__ = _PUBLIC_MODULE
_MODE_TYPES = {d: type(f"DefaultInt{str(d).split('.')[-1].capitalize()}Mode", (_DefaultIntMode,),
                       {"dtype": d, "__module__": _PUBLIC_MODULE})
               for d in (torch.int8, torch.int16, torch.int32)}

_state = threading.local()


def _validate(d: Any) -> torch.dtype:
    if not isinstance(d, torch.dtype) or d not in ALLOWED_DTYPES:
        raise TypeError(f"x64guard.torch: the default integer dtype must be one of torch.int8, torch.int16, "
                        f"torch.int32, torch.int64; got {d!r}")
    return d


def _install(d: torch.dtype) -> None:
    """Make d this thread's default: x64guard's mode (if any) is replaced where it sits in
    the torch-function mode stack, so other modes keep their order; int64 leaves none."""
    current = getattr(_state, "mode", None)
    new = _MODE_TYPES[d]() if d is not torch.int64 else None
    above = []
    if current is not None and any(m is current for m in function_mode_stack()):
        while True:
            mode = pop_function_mode()
            if mode is current:
                break
            above.append(mode)
    if new is not None:
        push_function_mode(new)
    for mode in reversed(above):
        push_function_mode(mode)
    _state.mode = new
    if new is not None and getattr(_state, "dynamo_hold", None) is None:
        _state.dynamo_hold = Hold()  # Dynamo patched while this thread has a narrow default
    elif new is None and getattr(_state, "dynamo_hold", None) is not None:
        _state.dynamo_hold.close()
        _state.dynamo_hold = None


def get_default_int_dtype() -> torch.dtype:
    """The calling thread's default integer dtype (torch.int64 unless set)."""
    mode = getattr(_state, "mode", None)
    return torch.int64 if mode is None else mode.dtype


def set_default_int_dtype(d: torch.dtype) -> None:
    """Set the calling thread's default integer dtype: torch.int8, int16, int32 or int64
    (anything else raises TypeError). torch.int64 restores PyTorch's own behaviour exactly.
    The floating-point default (torch.set_default_dtype) is not touched."""
    _install(_validate(d))


@contextlib.contextmanager
def default_int_dtype(d: torch.dtype) -> Iterator[torch.dtype]:
    """`with default_int_dtype(torch.int32): ...` sets the calling thread's default and
    restores, on exit (also on an exception), the one in force on entry. Blocks nest."""
    d = _validate(d)
    previous = get_default_int_dtype()
    _install(d)
    try:
        yield d
    finally:
        _install(previous)

"""The user's line: where a front end's warnings and messages point.

A front end calls the core pass from deep inside a framework (jax.jit's trace, dynamo's
backend call). Python's `stacklevel` cannot name the user's frame there, so the front end
finds it: the innermost frame outside x64guard and the framework's own directories. Both
front ends share this; each passes its framework's directories.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any, Callable, Iterable

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

# A two-line trampoline whose code object is re-labelled with the user's file and line, so
# that `warnings.warn(..., stacklevel=...)` inside the call lands on the user's line (with
# the user's module registry and filters), as if the user had called the pass there.
_CALL_AT = (lambda call, args, kwargs: call(*args, **kwargs)).__code__


def module_dirs(*modules: Any) -> tuple[str, ...]:
    """The directories of imported packages (a framework's frames are never the user's)."""
    return tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in modules)


def user_frame(excluded: Iterable[str] = ()):
    """The innermost frame outside x64guard and the `excluded` directories, or None."""
    excluded = (PACKAGE_DIR, *excluded)
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(excluded) and not filename.startswith("<frozen"):
            return frame
        frame = frame.f_back
    return None


def call_at_user_line(call: Callable, args: tuple, kwargs: dict, excluded: Iterable[str] = ()):
    """`call(*args, **kwargs)`, seen by the warnings machinery as called from the user's line."""
    frame = user_frame(excluded)
    if frame is None:
        return call(*args, **kwargs)
    code = _CALL_AT.replace(co_filename=frame.f_code.co_filename, co_firstlineno=frame.f_lineno,
                            co_name=frame.f_code.co_name)
    return types.FunctionType(code, frame.f_globals)(call, args, kwargs)

"""Where x64guard.jit's warnings land: the user's calling line (or the library code that
called the function), with that module's warning registry and filters, in any thread.

JAX's and jaxlib's frames and x64guard's own are never the user's line; x64guard's are
also kept out of the source locations JAX attaches to ops, so that findings point at the
user's line, not at x64guard's call into jax.
"""

from __future__ import annotations

import functools
import warnings

from x64guard import _user_line
from x64guard.api import NarrowResult, narrow
from x64guard.jax import _private

_private.exclude_from_user_frames(_user_line.PACKAGE_DIR)


@functools.lru_cache(maxsize=None)
def excluded_source_dirs() -> tuple[str, ...]:
    """Directories whose frames are never 'the user's line': JAX's and jaxlib's."""
    import jax
    import jaxlib

    return _user_line.module_dirs(jax, jaxlib)


def user_frame():
    """The innermost frame outside x64guard and JAX: the line that called x64guard.jit's
    function (or the library code that did)."""
    return _user_line.user_frame(excluded_source_dirs())


def user_place() -> str:
    """'file:line' of the user's calling line, '?' when there is none."""
    frame = user_frame()
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"


def replay_at_user_line(recorded) -> None:
    """Warnings recorded by catch_warnings, issued again where they were, through the
    user's filters and their module's registry."""
    frame = user_frame()
    registry = frame.f_globals.setdefault("__warningregistry__", {}) if frame is not None else None
    for w in recorded:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, registry=registry)


def warn_at_user_line(message: str) -> None:
    """One X64GuardWarning at the user's calling line (their module's registry and filters)."""
    from x64guard.errors import X64GuardWarning

    frame = user_frame()
    if frame is None:
        warnings.warn(message, X64GuardWarning, stacklevel=2)
        return
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(f"x64guard: {message}", X64GuardWarning, frame.f_code.co_filename, frame.f_lineno,
                           module=frame.f_globals.get("__name__"), registry=registry)


def narrow_at_user_line(module, **kwargs) -> NarrowResult:
    return _user_line.call_at_user_line(narrow, (module,), kwargs, excluded_source_dirs())



def raising_line(error: BaseException) -> str:
    """'file:line (function)' of the innermost frame of `error`'s traceback outside x64guard
    and JAX (the library or user line whose JAX call raised), '?' when there is none."""
    import traceback

    excluded = (_user_line.PACKAGE_DIR, *excluded_source_dirs())
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith(excluded) and not f.filename.startswith("<frozen")]
    return f"{frames[-1].filename}:{frames[-1].lineno} ({frames[-1].name})" if frames else "?"

"""Where x64guard.jit's warnings land: the user's calling line (or the library code that
called the function), with that module's warning registry and filters, in any thread.

JAX's and jaxlib's frames and x64guard's own are never the user's line; x64guard's are
also kept out of the source locations JAX attaches to ops, so that findings point at the
user's line, not at x64guard's call into jax.
"""

from __future__ import annotations

import functools

from x64guard import user_place as _user_place
from x64guard.jax import _private

_private.exclude_from_user_frames(_user_place.PACKAGE_DIR)


@functools.lru_cache(maxsize=None)
def excluded_source_dirs() -> tuple[str, ...]:
    """Directories whose frames are never 'the user's line': JAX's and jaxlib's."""
    import jax
    import jaxlib

    return _user_place.module_dirs(jax, jaxlib)


def user_frame() -> "_user_place.UserPlace | None":
    """The innermost line outside x64guard and JAX: the line that called x64guard.jit's
    function (or the library code that did)."""
    return _user_place.find_user_place(excluded_source_dirs())


def user_place() -> str:
    """'file:line' of the user's calling line, '?' when there is none."""
    place = user_frame()
    return str(place) if place is not None else "?"


def warn_messages_at_user_line(messages) -> None:
    """What the pass would have warned (`NarrowResult.warnings`), issued at the user's line."""
    place = user_frame()
    for message in messages:
        _user_place.warn_at(message, place)


def warn_at_user_line(message: str) -> None:
    """One X64GuardWarning at the user's calling line (their module's registry and filters)."""
    _user_place.warn_at(f"x64guard: {message}", user_frame())



def raising_line(error: BaseException) -> str:
    """'file:line (function)' of the innermost frame of `error`'s traceback outside x64guard
    and JAX (the library or user line whose JAX call raised), '?' when there is none."""
    import traceback

    excluded = (_user_place.PACKAGE_DIR, *excluded_source_dirs())
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith(excluded) and not f.filename.startswith("<frozen")]
    return f"{frames[-1].filename}:{frames[-1].lineno} ({frames[-1].name})" if frames else "?"

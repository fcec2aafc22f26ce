"""The user's line: where a front end's warnings point.

A front end calls the core pass from deep inside a framework (jax.jit's trace, dynamo's
backend call), where `stacklevel` cannot name the user's frame. The front end finds it here
(the innermost frame outside x64guard and the framework's own directories) and issues its
warnings there with `warnings.warn_explicit`, through that module's registry and the
user's filters, as `warnings.warn` would from that line. Both front ends share this; each
passes its framework's directories.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import warnings
from typing import Any, Iterable

from x64guard.errors import X64GuardWarning

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def module_dirs(*modules: Any) -> tuple[str, ...]:
    """The directories of imported packages (a framework's frames are never the user's)."""
    return tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in modules)


@dataclasses.dataclass(frozen=True)
class UserPlace:
    """A line of the user's code: where a warning about it is issued."""

    filename: str
    lineno: int
    function: str
    module_globals: dict = dataclasses.field(repr=False, compare=False)

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"


def find_user_place(excluded: Iterable[str] = ()) -> UserPlace | None:
    """The innermost frame outside x64guard and the `excluded` directories, or None."""
    excluded = (PACKAGE_DIR, *excluded)
    frame = inspect.currentframe()
    try:
        while frame is not None:
            filename = frame.f_code.co_filename
            if not filename.startswith(excluded) and not filename.startswith("<frozen"):
                return UserPlace(filename, frame.f_lineno, frame.f_code.co_name, frame.f_globals)
            frame = frame.f_back
        return None
    finally:
        del frame  # no reference cycle through this frame


def warn_at(message: "str | Warning", place: UserPlace | None, category: type[Warning] = X64GuardWarning) -> None:
    """`message` as a warning issued from `place`: the user's filters, and their module's
    `__warningregistry__` (the 'default' action shows it once per line, as for any warning
    of theirs). Without a place, at the caller's caller."""
    if place is None:
        warnings.warn(message, category, stacklevel=3)
        return
    registry = place.module_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, category, place.filename, place.lineno,
                           module=place.module_globals.get("__name__"), registry=registry)

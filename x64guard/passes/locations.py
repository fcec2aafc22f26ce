"""Turning MLIR locations into what a user can open: file:line:col.

JAX attaches `loc("jit(f)/mul"(callsite("f"("model.py":10:12) at ...)))` to every op.
The innermost file location (the first one printed) is the user's line that produced
the op. These bindings expose no accessors for location parts, so the printed form of
the location itself (never the module's text) is read.
"""

from __future__ import annotations

import re

from jax.extend.mlir import ir

_FILE_LINE_COL = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
_NAME = re.compile(r'^loc\("((?:[^"\\]|\\.)*)"')


class LocationNames:
    """Caches the readable form of each distinct location (most ops share a few)."""

    def __init__(self) -> None:
        self._cache: dict[ir.Attribute, tuple[str | None, str | None]] = {}

    def resolve(self, location: ir.Location) -> tuple[str | None, str | None]:
        """(file:line:col or None, JAX's op name such as 'jit(f)/mul' or None)."""
        return self.resolve_attr(location.attr)

    def resolve_attr(self, attr: ir.Attribute) -> tuple[str | None, str | None]:
        """The same, keyed by the location's attribute (Location objects hash by identity)."""
        found = self._cache.get(attr)
        if found is None:
            found = self._cache[attr] = parse_location(str(attr))
        return found


def parse_location(text: str) -> tuple[str | None, str | None]:
    file_match = _FILE_LINE_COL.search(text)
    name_match = _NAME.match(text)
    where = None
    if file_match and file_match.group(1) not in ("", "-"):
        path, line, column = file_match.group(1), file_match.group(2), int(file_match.group(3))
        # JAX records Python's 0-based column offsets; editors and tools count from 1.
        where = f"{path}:{line}:{column + 1 if path.endswith('.py') else column}"
    elif file_match:
        where = f"line {file_match.group(2)}:{file_match.group(3)} of the input"
    return where, (name_match.group(1) if name_match else None)

"""MLIR locations -> `findings.Location`: the file, line and column a user can open.

JAX attaches `loc("jit(f)/mul"(callsite("f"("model.py":10:12) at ...)))` to every op. The
innermost file location (the first one printed) is the user's line that produced the op.
jaxlib's bindings hand locations back as their own classes (`NameLoc`, `CallSiteLoc`,
`FusedLoc`, `FileLineColLoc`, `UnknownLoc`), whose parts are read directly: depth first,
in the order MLIR prints them (a name's child, a call site's callee before its caller, a
fused location's parts in order). A module parsed from text without locations carries
the parser's own `"-":line:col` (or `"":line:col`) for each op: a line of the input, not a
source. Measured on a 33k-op JAX module: 7 us per location against 24 us for reading the
printed form; a bare input position costs about 1 us.
"""

from __future__ import annotations

import re

from jax.extend.mlir import ir

from x64guard.findings import Location

_FILE_LOC = ir.FileLineColLoc
_NAME_LOC = ir.NameLoc
_CALL_SITE_LOC = ir.CallSiteLoc
_FUSED_LOC = ir.FusedLoc
_UNKNOWN_LOC = ir.UnknownLoc
_INPUT_FILES = ("-", "")  # the parser's file names, the usual one first
_FILE_AT = ir.Location.file


def file_location(file: str, line: int, column: int) -> Location:
    """A file position as x64guard reports it. JAX records Python's 0-based column offsets;
    editors and tools count from 1."""
    if file in _INPUT_FILES:
        return Location.input_line(line, column)
    return Location.source(file, line, column + 1 if file.endswith(".py") else column)


def input_position(location: ir.Location, function: str | None) -> Location:
    return Location.input_line(location.start_line, location.start_col, function)


class LocationResolver:
    """Resolves each distinct location once (most ops of a JAX module share a few)."""

    def __init__(self, context: ir.Context | None = None) -> None:
        self._context = context  # the locations' context, when one resolver serves one module
        self._cache: dict[ir.Attribute, tuple[Location | None, str | None]] = {}

    def is_input_position(self, location: ir.FileLineColLoc) -> bool:
        """Whether a file location is the parser's position in the input text (`"-"` or
        `""` as its file), told without reading its file name: the bindings' `filename`
        aborts the process on a name that is not valid UTF-8 (below), and printing the
        location to check first costs twice as much as building the parser's own location
        at the same line and column and comparing (locations are uniqued)."""
        line, column = location.start_line, location.start_col
        context = self._context or location.context
        for name in _INPUT_FILES:
            if _FILE_AT(name, line, column, context=context) == location:
                return True
        return False

    def resolve(self, location: ir.Location) -> Location | None:
        """The source (or input) position of `location`, or None when it has none."""
        if type(location) is _UNKNOWN_LOC:
            return None
        return self.resolve_with_name(location)[0]

    def resolve_with_name(self, location: ir.Location) -> tuple[Location | None, str | None]:
        """(position or None, the outermost name such as JAX's 'jit(f)/mul', or None)."""
        attr = location.attr
        found = self._cache.get(attr)
        if found is None:
            found = self._cache[attr] = _resolve(location)
        return found


def _resolve(location: ir.Location) -> tuple[Location | None, str | None]:
    text = str(location.attr)
    if "\\" in text:
        # The bindings' string accessors (filename, name_str) abort the process, uncatchably
        # (a nanobind conversion error), on a string that is not valid UTF-8, which a corrupted
        # bytecode file can hold. MLIR prints every byte outside printable ASCII as an escape
        # (\XX), so only a printed form without one is read through them.
        return parse_location(text)
    name = location.name_str if type(location) is _NAME_LOC else None
    found = _first_file(location, 0)
    if found is _UNREADABLE:  # a location class these bindings do not hand back typed
        return parse_location(str(location.attr))
    return found, name


_UNREADABLE = object()
_MAX_DEPTH = 256  # call-site chains are as deep as the Python stack that traced the op


def _first_file(location: ir.Location, depth: int):
    kind = type(location)
    if kind is _FILE_LOC:
        return file_location(location.filename, location.start_line, location.start_col)
    if kind is _UNKNOWN_LOC or depth > _MAX_DEPTH:
        return None
    if kind is _NAME_LOC:
        return _first_file(location.child_loc, depth + 1)
    if kind is _CALL_SITE_LOC:
        callee = _first_file(location.callee, depth + 1)
        return callee if callee is not None else _first_file(location.caller, depth + 1)
    if kind is _FUSED_LOC:
        for part in location.locations:
            found = _first_file(part, depth + 1)
            if found is not None:
                return found
        return None
    return _UNREADABLE


# ---- the printed form, for locations the bindings do not type (opaque locations) ----------

_FILE_LINE_COL = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
_NAME = re.compile(r'^loc\("((?:[^"\\]|\\.)*)"')


def parse_location(text: str) -> tuple[Location | None, str | None]:
    """(position, name) from a location's printed form: the first file location printed."""
    file_match = _FILE_LINE_COL.search(text)
    name_match = _NAME.match(text)
    where = None
    if file_match:
        where = file_location(file_match.group(1), int(file_match.group(2)), int(file_match.group(3)))
    name = name_match.group(1) if name_match and not text.startswith(('loc("-":', 'loc("":')) else None
    return where, name

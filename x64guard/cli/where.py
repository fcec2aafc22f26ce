"""Where a finding is, for every report format: the one place the command line reads the
core's `Finding.location` (a structured `x64guard.findings.Location`: its fields, never its
text).

A finding is either at a `Source` (a file and line someone can open: the user's Python
line JAX recorded, or a line of the MLIR text file that was checked) or at a
`ModulePosition` (the function of the module, its signature or its n-th op, plus the
module's file when it still exists and the call site of the jitted function when the
module says). Every finding gets one or the other, in every format.

Units record where their jitted function was called from as text (`file:line:col` from
JAX, `file:line` from torch-xla's frames): `parse_origin` reads that, not findings.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from x64guard.findings import CALL_SITE, POSITION, Location

_FILE_LOCATION = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<column>\d+)(?: \(in @(?P<function>[^)]*)\))?$")
_FILE_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+)$")  # torch-xla's frames: file:line


def relative(path: str) -> str:
    """`path` relative to the working directory when it is inside it, else unchanged."""
    try:
        resolved = Path(path).resolve()
        return str(resolved.relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return path


@dataclasses.dataclass(frozen=True)
class Source:
    """A place in a file someone can open."""

    file: str                # as the module names it (absolute for JAX), or the input file
    line: int
    column: int
    function: str | None = None   # the JAX library function the op came from ("in @fn")

    @property
    def path(self) -> str:
        return relative(self.file)

    def display(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"

    def to_json(self) -> dict:
        return {"path": self.path, "line": self.line, "column": self.column, "in_function": self.function}


@dataclasses.dataclass(frozen=True)
class ModulePosition:
    """A place inside a module that has no source line: a function's signature or its n-th op."""

    module: str | None       # the module's symbol name, e.g. jit_model
    function: str | None     # the MLIR function, e.g. main
    op_index: int | None     # 1-based position of the op in the walk; None: the function as a whole
    file: str | None         # the module's file, when it can be opened (not stdin, not a removed dump)
    anchor: Source | None    # where the module's jitted function was called from, when it says

    def display(self) -> str:
        inside = f"@{self.function}" if self.function else "the module"
        if self.op_index is not None:
            inside += f" op #{self.op_index}"
        return f"{inside} of module @{self.module}" if self.module else inside

    def to_json(self) -> dict:
        return {"module": self.module, "function": self.function, "op_index": self.op_index,
                "path": relative(self.file) if self.file else None,
                "anchor": self.anchor.to_json() if self.anchor else None}


def parse_origin(origin: str | None) -> Source | None:
    """A call site as units record it: `file:line:col` (JAX) or `file:line` (torch-xla)."""
    if not origin:
        return None
    match = _FILE_LOCATION.match(origin) or _FILE_LINE.match(origin)
    if not match or match.group("file").startswith("<"):
        return None
    groups = match.groupdict()
    return Source(groups["file"], int(groups["line"]), int(groups.get("column") or 0))


def source_of(location: Location, text_file: str | None) -> Source | None:
    """The Source of a core location, or None. `text_file`: the MLIR text file the module
    was read from (a line of the input is a line of it), else None."""
    if location.has_file:
        return Source(location.file, location.line, location.column,
                      location.function if location.origin == CALL_SITE else None)
    if location.input_position and text_file:
        return Source(text_file, location.line, location.column,
                      location.function if location.origin == CALL_SITE else None)
    return None


def module_position(location: Location, module: str | None, file: str | None, anchor: Source | None) -> ModulePosition:
    """Where a finding without a Source is: a function or its n-th op (a position); any
    other location (a line of an input read from stdin, a place) names no function."""
    if location.origin == POSITION:
        return ModulePosition(module, location.function, location.op_index, file, anchor)
    return ModulePosition(module, None, None, file, anchor)


def display_location(location: Location) -> str:
    """A core location with its file made relative, for text output."""
    source = source_of(location, None)
    if source is None:
        return str(location)
    return source.display() + (f" (in @{source.function})" if source.function else "")


def display_origin(origin: str) -> str:
    """A unit's recorded call site (`file:line:col`) with its file made relative."""
    match = _FILE_LOCATION.match(origin)
    if not match or match.group("file").startswith("<"):
        return origin  # torch-xla's `file:line` frames are shown as recorded
    return f"{relative(match.group('file'))}:{match.group('line')}:{match.group('column')}"

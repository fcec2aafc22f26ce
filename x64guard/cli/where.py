"""Where a finding is, for every report format: the one place the command line reads the
core's `Finding.location` strings.

A finding is either at a `Source` (a file and line someone can open: the user's Python
line JAX recorded, or a line of the MLIR text file that was checked) or at a
`ModulePosition` (the function of the module, its signature or its n-th op, plus the
module's file when it still exists and the call site of the jitted function when the
module says). Every finding gets one or the other, in every format.

The core's location forms today: `/path/f.py:12:8`, `/path/f.py:12:8 (in @fn)`,
`line 3:5 of the input`, `@main op #4`, `@main`, `the module`. When `Finding.location`
becomes a structured value, `parse_core_location` is what changes.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

_FILE_LOCATION = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<column>\d+)(?: \(in @(?P<function>[^)]*)\))?$")
_FILE_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+)$")  # torch-xla's frames: file:line
_INPUT_LOCATION = re.compile(r"^line (?P<line>\d+):(?P<column>\d+) of the input$")
_MODULE_POSITION = re.compile(r"^@(?P<function>[^\s]+?)(?: op #(?P<op>\d+))?$")


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


def parse_core_location(location: str) -> dict:
    """The parts of a core location string: {'file', 'line', 'column', 'function'} for a file
    location, {'input_line', 'input_column'} for a line of the checked text, {'function',
    'op_index'} for a module position, {} otherwise."""
    match = _FILE_LOCATION.match(location)
    if match and not match.group("file").startswith("<"):
        return {"file": match.group("file"), "line": int(match.group("line")),
                "column": int(match.group("column")), "function": match.group("function")}
    match = _INPUT_LOCATION.match(location)
    if match:
        return {"input_line": int(match.group("line")), "input_column": int(match.group("column"))}
    match = _MODULE_POSITION.match(location)
    if match:
        return {"function": match.group("function"),
                "op_index": int(match.group("op")) if match.group("op") else None}
    return {}


def parse_origin(origin: str | None) -> Source | None:
    """A call site as units record it: `file:line:col` (JAX) or `file:line` (torch-xla)."""
    if not origin:
        return None
    match = _FILE_LOCATION.match(origin) or _FILE_LINE.match(origin)
    if not match or match.group("file").startswith("<"):
        return None
    groups = match.groupdict()
    return Source(groups["file"], int(groups["line"]), int(groups.get("column") or 0))


def source_of(location: str, text_file: str | None) -> Source | None:
    """The Source of a core location, or None. `text_file`: the MLIR text file the module
    was read from (a `line L:C of the input` location is a line of it), else None."""
    parts = parse_core_location(location)
    if "file" in parts:
        return Source(parts["file"], parts["line"], parts["column"], parts["function"])
    if "input_line" in parts and text_file:
        return Source(text_file, parts["input_line"], parts["input_column"])
    return None


def module_position(location: str, module: str | None, file: str | None, anchor: Source | None) -> ModulePosition:
    parts = parse_core_location(location)
    return ModulePosition(module, parts.get("function"), parts.get("op_index"), file, anchor)


def display_location(location: str) -> str:
    """A core location string with its file made relative, for text output."""
    source = source_of(location, None)
    if source is None:
        return location
    return source.display() + (f" (in @{source.function})" if source.function else "")

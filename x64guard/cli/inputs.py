"""Finding and reading the modules the command line is given.

A path is a file or a directory (searched recursively for the suffixes in
`MODULE_SUFFIXES`). A file given by name is read whatever its suffix: its content says
what it is. One file is usually one module; a torch-xla graph file
(`XLA_SAVE_TENSORS_FILE`) holds one module per executed graph.

Nothing here narrows or checks: every unit's `data` goes to `x64guard.check` /
`x64guard.narrow` as MLIR text (str), MLIR bytecode / portable artifact (bytes), or the
path of a bytecode file (MLIR reads it itself, after x64guard's reader process vetted it:
a large file is never copied into Python).
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import os
import re
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from x64guard.io import modules
from x64guard.cli import hlo


class InputError(Exception):
    """A path x64guard cannot read: reported as `x64guard: error: PATH: reason`, exit 2."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class Format(enum.StrEnum):
    MLIR_TEXT = "mlir-text"
    MLIR_BYTECODE = "mlir-bytecode"
    PORTABLE_ARTIFACT = "portable-artifact"
    HLO_TEXT = "hlo-text"
    HLO_PROTO = "hlo-proto"
    JAX_EXPORT = "jax-export"
    TORCH_XLA_GRAPHS = "torch-xla-graphs"


FORMAT_NAMES = {
    Format.MLIR_TEXT: "MLIR text",
    Format.MLIR_BYTECODE: "MLIR bytecode",
    Format.PORTABLE_ARTIFACT: "StableHLO portable artifact",
    Format.HLO_TEXT: "HLO text",
    Format.HLO_PROTO: "HLO proto",
    Format.JAX_EXPORT: "jax.export artifact",
    Format.TORCH_XLA_GRAPHS: "torch-xla graph dump",
}

# What a directory search picks up. Files named on the command line are read whatever
# their suffix.
MODULE_SUFFIXES = (".mlir", ".mlirbc", ".bc", ".stablehlo", ".hlo", ".hlo.txt", ".hlo.pb",
                   ".before_optimizations.txt", ".exported", ".jax_exported", ".jaxexport")

# torch-xla graph dumps as `x64guard gate --keep` leaves them (torch_xla/graphs.txt, one
# more file per device ordinal): picked up by a directory search too.
TORCH_XLA_GRAPH_FILE = re.compile(r"^graphs\.txt(?:\.\d+)?$")

STDIN = "-"
_PORTABLE_VERSION = re.compile(rb"ML\xefR.StableHLO_v(\d+\.\d+\.\d+)\x00", re.S)
_MODULE_NAME = re.compile(r"^\s*module\s+@([\w.$-]+|\"[^\"]*\")", re.M)
_GRAPH_BLOCK = re.compile(
    r"^\[(?P<title>[^\]\n]*)\]\nTensorsGraphInfo:\n(?P<frames>(?:[ \t]+[^\n]*\n)*)"
    r".*?^## BEGIN_GRAPH\n(?P<graph>.*?)\n## END_GRAPH$", re.S | re.M)
_FRAME = re.compile(r"^\s+(?P<function>.*?) \((?P<file>.*):(?P<line>\d+)\)\s*$")


@dataclasses.dataclass
class Unit:
    """One module to check or narrow."""

    path: str                     # the file, as the user named it (or the dump file)
    format: Format
    data: str | bytes | Path      # what x64guard.check / x64guard.narrow read (Path: a bytecode file)
    name: str | None = None       # the module's symbol name, e.g. jit_model
    function: str | None = None   # the jitted function, e.g. model
    label: str | None = None      # which module of a multi-module file, e.g. "graph 2"
    origin: str | None = None     # where it came from, when the file says (torch-xla frames)
    version: str | None = None    # a portable artifact's StableHLO version
    ephemeral: bool = False       # a dump file removed after the run: never point at it
    exported: Any = None          # a jax.export artifact's `Exported` (written back by `narrow`)

    @property
    def display(self) -> str:
        return f"{self.path} ({self.label})" if self.label else self.path


def discover(paths: list[str]) -> list[str]:
    """Files to read, in a stable order: files as given, directories searched."""
    found: list[str] = []
    for raw in paths:
        if raw == STDIN:
            found.append(raw)
            continue
        path = Path(raw)
        if path.is_dir():
            matches = sorted(
                str(p) for p in path.rglob("*")
                if p.is_file() and (p.name.endswith(MODULE_SUFFIXES) or TORCH_XLA_GRAPH_FILE.match(p.name))
                and not any(part.startswith(".") for part in p.relative_to(path).parts))
            if not matches:
                raise InputError(raw, "no module files in this directory (looked for "
                                      + ", ".join(MODULE_SUFFIXES) + ")")
            found.extend(matches)
        elif path.exists():
            if not path.is_file():
                raise InputError(raw, "not a regular file")
            found.append(raw)
        else:
            raise InputError(raw, "no such file or directory")
    return found


def read_bytes(path: str) -> bytes:
    if path == STDIN:
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None


def read_units(path: str, data: bytes | None = None) -> list[Unit]:
    """The modules in one file (`data`: its content, when already read, e.g. standard
    input). A bytecode file is left for MLIR to read by path; anything else is read here.
    Raises InputError when the file holds none x64guard can read."""
    display = "<stdin>" if path == STDIN else path
    if data is None:
        head = _read_head(path)
        if head.startswith(modules.BYTECODE_MAGIC):
            return [_bytecode_unit(display, head, Path(path))]
        data = read_bytes(path)
    if not data.strip():
        raise InputError(display, "the file is empty (no module to read)")
    if data.startswith(modules.BYTECODE_MAGIC):
        return [_bytecode_unit(display, data, data)]
    text = _utf8(data)
    if text is not None:
        if hlo.looks_like_hlo_text(text):
            name = hlo.hlo_module_name(text)
            return [Unit(display, Format.HLO_TEXT, _convert(display, hlo.hlo_text_to_stablehlo, text),
                         name=name, function=function_name(name))]
        if "## BEGIN_GRAPH" in text:
            return _torch_xla_graphs(display, text)
        name = _text_module_name(text)
        return [Unit(display, Format.MLIR_TEXT, text, name=name, function=function_name(name))]
    exported = _jax_export(display, data)
    if exported is not None:
        return [exported]
    if display.endswith(".pb"):
        return [Unit(display, Format.HLO_PROTO, _convert(display, hlo.hlo_proto_to_stablehlo, data))]
    hint = "" if _has_flatbuffers() else " (reading jax.export artifacts needs the 'flatbuffers' package)"
    raise InputError(display, "not a module x64guard can read: neither MLIR text, MLIR bytecode, a StableHLO "
                              f"portable artifact, HLO text, nor a serialized jax.export artifact{hint}")


# Enough of a file to tell bytecode by its magic number and a portable artifact by the
# producer string after it (`ML\xefR` `\r` `StableHLO_v1.13.7` `\0`).
_HEAD_BYTES = 64


def _read_head(path: str) -> bytes:
    if path == STDIN:
        return b""
    try:
        with open(path, "rb") as stream:
            return stream.read(_HEAD_BYTES)
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None


def _bytecode_unit(display: str, head: bytes, data: bytes | Path) -> Unit:
    version = _PORTABLE_VERSION.match(head)
    fmt = Format.PORTABLE_ARTIFACT if version else Format.MLIR_BYTECODE
    return Unit(display, fmt, data, version=version.group(1).decode() if version else None)


def function_name(module_name: str | None) -> str | None:
    """The jitted function a JAX module was lowered from: `jit_model` -> `model`."""
    if not module_name:
        return None
    for prefix in ("jit_", "pjit_", "pmap_", "xmap_"):
        if module_name.startswith(prefix) and len(module_name) > len(prefix):
            return module_name[len(prefix):]
    return None


def _utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _text_module_name(text: str) -> str | None:
    match = _MODULE_NAME.search(text)
    return match.group(1).strip('"') if match else None


def _convert(display: str, convert, source):
    try:
        return convert(source)
    except ValueError as exc:
        raise InputError(display, str(exc)) from None


def _has_flatbuffers() -> bool:
    return importlib.util.find_spec("flatbuffers") is not None


def _jax_export(display: str, data: bytes) -> Unit | None:
    """A serialized `jax.export.Exported` (a flatbuffer with no magic number: tried only
    after the formats that have one). None when the data is not one."""
    if not _has_flatbuffers():
        return None
    from jax import export

    try:
        exported = export.deserialize(bytearray(data))
        module = bytes(exported.mlir_module_serialized)
        name = exported.fun_name
    except Exception:  # flatbuffers raises struct.error, AttributeError, IndexError, ...
        return None
    if not module.startswith(modules.BYTECODE_MAGIC):
        return None
    version = _PORTABLE_VERSION.match(module)
    return Unit(display, Format.JAX_EXPORT, module, name=f"jit_{name}", function=name,
                version=version.group(1).decode() if version else None, exported=exported)


def _torch_xla_graphs(display: str, text: str) -> list[Unit]:
    """torch-xla's XLA_SAVE_TENSORS_FILE: `[title]`, `TensorsGraphInfo:` with the Python
    frames (innermost first), then the graph between `## BEGIN_GRAPH` / `## END_GRAPH`
    (StableHLO text with XLA_SAVE_TENSORS_FMT=stablehlo, HLO text with =hlo)."""
    units = []
    for index, match in enumerate(_GRAPH_BLOCK.finditer(text), start=1):
        graph = match.group("graph").strip()
        frames = [m.groupdict() for m in map(_FRAME.match, match.group("frames").splitlines()) if m]
        user = next((f for f in frames if not _is_library_file(f["file"])), frames[0] if frames else None)
        label = f"graph {index}: {match.group('title')}"
        if hlo.looks_like_hlo_text(graph):
            data: str | bytes = _convert(f"{display} ({label})", hlo.hlo_text_to_stablehlo, graph)
            name = hlo.hlo_module_name(graph)
        elif graph.startswith(("module", "#loc", "func.func")):
            data, name = graph, _text_module_name(graph)
        else:
            continue  # text or dot format: a graph x64guard cannot read
        units.append(Unit(display, Format.TORCH_XLA_GRAPHS, data, name=name,
                          function=user["function"] if user else None, label=label,
                          origin=f"{user['file']}:{user['line']}" if user else None))
    if not units:
        raise InputError(display, "a torch-xla graph dump with no StableHLO or HLO graph in it "
                                  "(set XLA_SAVE_TENSORS_FMT=stablehlo or hlo)")
    return units


def _is_library_file(file: str) -> bool:
    parts = Path(file).parts
    return "site-packages" in parts or "dist-packages" in parts or file.startswith("<")


# Writing a narrowed module back in its input's format.

def narrowed_bytes(unit: Unit, result, narrow: Callable[[bytes, str], Any] | None = None) -> bytes:
    """The narrowed module (a NarrowResult) in the format `unit` was read in. `narrow(data,
    what)` narrows the other modules a format carries (a jax.export artifact's VJPs) the way
    `result` was narrowed, or raises."""
    if unit.format is Format.JAX_EXPORT:
        return _narrowed_jax_export(unit.exported, result, unit.version, narrow)
    if unit.format is Format.MLIR_TEXT:
        return name_parser_locations(result.text, unit.path).encode("utf-8")
    if unit.format is Format.MLIR_BYTECODE:
        return result.bytecode()
    if unit.format is Format.PORTABLE_ARTIFACT:
        return result.portable_artifact(unit.version)
    if unit.format is Format.HLO_TEXT:
        return hlo.stablehlo_to_hlo_text(result.text).encode("utf-8")
    if unit.format is Format.HLO_PROTO:
        return hlo.stablehlo_to_hlo_proto(result.text)
    raise InputError(unit.display, f"x64guard narrow cannot write a {FORMAT_NAMES[unit.format]} back")


# MLIR's parser calls the text it reads "-": a file's parse errors and the parser
# locations its narrowed text carries name the file instead (a quote inside a string
# attribute is printed escaped, so `"-":L:C` outside one is a location).
_PARSER_LOCATION = re.compile(r'(?<=[(\s\[,])"-":(\d+):(\d+)')
_PARSER_DIAGNOSTIC = re.compile(r'loc\("-":(\d+):(\d+)\)')


def name_parse_error(reason: str, display: str) -> str:
    """`loc("-":1:1): expected ...` -> `model.mlir:1:1: expected ...`."""
    return _PARSER_DIAGNOSTIC.sub(lambda m: f"{display}:{m[1]}:{m[2]}", reason)


def name_parser_locations(text: str, path: str) -> str:
    """The narrowed text of a file with its parser locations naming the file."""
    if path == "<stdin>":
        return text
    quoted = '"' + "".join(c if c.isprintable() and c not in '"\\' else "".join(f"\\{b:02X}" for b in c.encode())
                           for c in path) + '"'
    return _PARSER_LOCATION.sub(lambda m: f"{quoted}:{m[1]}:{m[2]}", text)


def writable(unit: Unit) -> bool:
    return unit.format is not Format.TORCH_XLA_GRAPHS


# Writing a jax.export artifact back: the same `Exported` with its module narrowed and its
# avals given the types of the narrowed module's @main, serialized again.

def _narrowed_jax_export(exported, result, version: str | None, narrow) -> bytes:
    depth = 0
    vjps = []
    current = exported
    while current.has_vjp():  # the VJPs serialized with it (serialize(vjp_order=n))
        current = current.vjp()
        depth += 1
        vjps.append(current)
    narrowed_vjp = None
    for order in range(depth, 0, -1):  # innermost first: each VJP holds the next
        vjp = vjps[order - 1]
        if narrow is None:
            raise ValueError("x64guard: narrowing a jax.export artifact with VJPs needs `narrow`")
        vjp_result = narrow(bytes(vjp.mlir_module_serialized), "its VJP" if order == 1 else f"its VJP of order {order}")
        narrowed_vjp = _with_narrowed_module(vjp, vjp_result, _portable_version(vjp), narrowed_vjp)
    top = _with_narrowed_module(exported, result, version, narrowed_vjp)
    return bytes(top.serialize(vjp_order=depth))


def _portable_version(exported) -> str | None:
    match = _PORTABLE_VERSION.match(bytes(exported.mlir_module_serialized[:_HEAD_BYTES]))
    return match.group(1).decode() if match else None


def _with_narrowed_module(exported, result, version: str | None, vjp):
    in_types, out_types = _main_element_types(result.module)
    kept = exported.module_kept_var_idx
    # @main takes the kept arguments last (after the platform index and effect tokens)
    # and returns the results last (after the tokens).
    if len(in_types) < len(kept) or len(out_types) < len(exported.out_avals):
        raise ValueError("x64guard: the module's @main does not match the jax.export artifact's signature")
    in_element = dict(zip(kept, in_types[len(in_types) - len(kept):]))
    out_element = out_types[len(out_types) - len(exported.out_avals):]
    in_avals = tuple(_narrowed_aval(aval, in_element.get(index)) for index, aval in enumerate(exported.in_avals))
    out_avals = tuple(_narrowed_aval(aval, element) for aval, element in zip(exported.out_avals, out_element))
    return dataclasses.replace(
        exported, in_avals=in_avals, out_avals=out_avals,
        mlir_module_serialized=bytes(result.portable_artifact(version)),
        _get_vjp=None if vjp is None else (lambda _exported, narrowed=vjp: narrowed))


def _narrowed_aval(aval, element: str | None):
    """The aval's dtype as the narrowed module has it. Only 64-bit dtypes change (key
    types and 8/16-bit types stay); an argument the module dropped (unused) gets the
    32-bit counterpart, as x32 JAX would export it."""
    from x64guard.passes.tables import NARROW_NUMPY_DTYPE, NUMPY_DTYPE, numpy_narrowed

    dtype = getattr(aval, "dtype", None)
    if not isinstance(dtype, np.dtype) or dtype not in NARROW_NUMPY_DTYPE:
        return aval
    if element is None:
        return aval.update(dtype=numpy_narrowed(dtype))
    return aval.update(dtype=NUMPY_DTYPE.get(element, dtype))


def _main_element_types(module) -> tuple[list[str | None], list[str | None]]:
    """Element types (MLIR spelling; None for tokens) of @main's arguments and results."""
    from jax.extend.mlir import ir

    from x64guard.passes.ir_queries import main_function

    def element(t) -> str | None:
        return str(t.element_type) if isinstance(t, ir.ShapedType) else None

    with module.context:
        main = main_function(module)
        if main is None:
            raise ValueError("x64guard: the jax.export artifact's module has no @main")
        function = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        return [element(t) for t in function.inputs], [element(t) for t in function.results]


def _output_mode(target: Path) -> int:
    """The permission bits a new file would get (0o666 less the umask), or those of the
    file `target` already is."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        pass
    mask = os.umask(0o022)  # read it (the only way); put it back at once
    os.umask(mask)
    return 0o666 & ~mask


def write_atomically(path: str, data: bytes) -> None:
    """Write `data` to `path` (`-`: standard output) so that a failure leaves no half file."""
    if path == STDIN:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    except OSError as exc:
        raise InputError(path, f"cannot write here: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            # mkstemp creates the file 0600; the output follows the umask (or keeps the mode
            # of the file it replaces), as `open(path, "w")` would.
            os.fchmod(out.fileno(), _output_mode(target))
        os.replace(temp, target)
    except OSError as exc:
        Path(temp).unlink(missing_ok=True)
        raise InputError(path, f"cannot write: {exc.strerror or exc}") from None

"""Getting modules in and out: MLIR text, MLIR bytecode, StableHLO portable artifacts.

Uses the MLIR bindings that ship in jaxlib through their public `jax.extend` paths.
Every parsed module gets its own MLIR context with the dialects JAX emits registered
(contexts are not safe to share across threads, and keep their constants until they
die). Unregistered dialects parse, so ops x64guard has never heard of are narrowed
generically. Bytecode from outside is vetted in a separate process first
(`x64guard.io.isolated_reader`): jaxlib's bytecode reader can crash on corrupted input.
"""

from __future__ import annotations

import enum
import functools
import os

import numpy as np

from x64guard import bindings, versions

versions.check_jax_version()  # before JAX's bindings: a clear message for an untested JAX

from jax.extend import lowering  # noqa: E402
from jax.extend.mlir import ir, passmanager  # noqa: E402
from jax.extend.mlir import serialize_portable_artifact  # noqa: E402
from jax.extend.mlir.dialects import chlo, sdy, stablehlo  # noqa: E402

from x64guard.io import isolated_reader  # noqa: E402
from x64guard.errors import X64GuardError  # noqa: E402

BYTECODE_MAGIC = b"ML\xefR"


class SourceFormat(enum.StrEnum):
    TEXT = "text"
    BYTECODE = "bytecode"
    PORTABLE_ARTIFACT = "portable-artifact"
    MODULE = "module"


def make_context() -> ir.Context:
    """A context with the dialects JAX emits. Each parsed module gets its own (about half
    a millisecond): MLIR keeps a context's constants until the context dies, so a shared
    context would keep every constant ever read, and contexts are not safe to share
    across threads from Python."""
    context = ir.Context()
    context.append_dialect_registry(lowering.upstream_dialects)  # loaded on demand
    for dialect in (stablehlo, chlo, sdy):
        dialect.register_dialect(context)
    bindings.register_mhlo(context)
    context.allow_unregistered_dialects = True
    return context


Readable = "str | bytes | bytearray | memoryview | os.PathLike | ir.Module | ir.Operation"


def load(module: Readable, *, trusted: bool = False) -> tuple[ir.Module, SourceFormat]:
    """A module x64guard may rewrite freely: parsed from text, bytes or a file, or a clone
    of a given `ir.Module` (which is never mutated).

    MLIR bytecode (and portable artifacts) is vetted in a separate process first
    (`isolated_reader`), because jaxlib's reader can crash on corrupted bytecode;
    `trusted=True` skips that for bytecode this process's own tools produced.
    """
    if isinstance(module, ir.Module):
        return clone(module), SourceFormat.MODULE
    if isinstance(module, ir.Operation) or hasattr(module, "operation") and isinstance(module.operation, ir.Operation):
        operation = module if isinstance(module, ir.Operation) else module.operation
        if operation.name != "builtin.module":
            raise TypeError(f"x64guard: expected a builtin.module, got {operation.name}")
        with make_context():
            return ir.Module.parse(_to_bytecode(operation)), SourceFormat.MODULE
    if isinstance(module, str):
        return _parse_text(module), SourceFormat.TEXT
    if isinstance(module, (bytes, bytearray, memoryview)):
        return _parse_bytes(bytes(module), trusted)
    if isinstance(module, os.PathLike):
        return _parse_file(os.fspath(module), trusted)
    raise TypeError(f"x64guard: cannot read a module from {type(module).__name__}; pass MLIR text (str), "
                    "bytecode or a portable artifact (bytes), a file (pathlib.Path), or an ir.Module")


def clone(module: ir.Module) -> ir.Module:
    """A deep copy in the module's own context, locations included.

    `Operation.clone` copies in C++; its result is a detached ModuleOp, so its few
    top-level ops move into a fresh `ir.Module` carrying the same attributes.
    """
    source = module.operation
    with module.context, source.location:
        copy = source.clone()
        fresh = ir.Module.create(source.location)
        try:
            for name in source.attributes:
                fresh.operation.attributes[name] = copy.attributes[name]
        except TypeError:
            # A module attribute the bindings cannot read (complex dense elements, a
            # location): copy the whole module through bytecode instead.
            copy.erase()
            return ir.Module.parse(_to_bytecode(source))
        for op in list(copy.regions[0].blocks[0].operations):
            fresh.body.append(op)
        copy.erase()
    return fresh


def _to_bytecode(operation: ir.Operation) -> bytes:
    import io
    buffer = io.BytesIO()
    operation.write_bytecode(buffer)
    return buffer.getvalue()


# The MLIR text parser recurses on the C stack: far deeper nesting than any real program
# has crashes the process, so it is refused before parsing. Types nest with <>.
MAX_NESTING = 4000  # brackets; about 2,000 nested regions, measured to parse in any thread
_BRACKET_STEP = np.zeros(256, np.int8)
_BRACKET_STEP[list(b"{([<")] = 1
_BRACKET_STEP[list(b"})]>")] = -1
_OPENERS = tuple(bytes([c]) for c in b"{([<")
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"{([<})]>")


def _parse_text(text: str) -> ir.Module:
    if not text.strip():
        raise ValueError("x64guard: the input is empty (no MLIR module to read)")
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates, e.g. from errors="surrogateescape"
        raise ValueError(f"x64guard: the input is not valid UTF-8 text ({exc.reason} at {exc.start})") from None
    depth = _max_nesting(encoded)
    if depth > MAX_NESTING:
        raise ValueError(f"x64guard: the input nests brackets {depth} deep; x64guard reads at most "
                         f"{MAX_NESTING} (deeper input would overflow the MLIR parser's stack)")
    try:
        with make_context():
            return ir.Module.parse(encoded)  # the bytes already made: no second copy of a large text
    except ir.MLIRError as exc:
        raise ValueError(f"x64guard: the input is not a valid MLIR module: {_first_diagnostic(exc)}"
                         + _quantized_hint(exc)) from None


def _quantized_hint(exc: Exception) -> str:
    """Why a quantized module fails to read, and what to do: jaxlib's bindings register no
    `quant` dialect, so `!quant.uniform` types parse as opaque types that StableHLO's
    uniform_quantize / dequantize / quantized ops then reject."""
    diagnostics = [str(d.message) for d in getattr(exc, "error_diagnostics", None) or []]
    if not any("!quant." in text for text in [str(exc), *diagnostics]):
        return ""
    return (f". This module uses quantized types (!quant.uniform): the MLIR bindings in jaxlib "
            f"{_jaxlib_version()} do not include the quant dialect, so x64guard cannot read quantized "
            "StableHLO. Quantized storage types are 8-32-bit integers already; check the float model "
            "before quantization instead, or lower the quantized ops to integer arithmetic first "
            "(stablehlo-opt --stablehlo-legalize-quant-to-math)")


def _jaxlib_version() -> str:
    try:
        import jaxlib
        return jaxlib.__version__
    except (ImportError, AttributeError):
        return "(unknown version)"


def _max_nesting(encoded: bytes) -> int:
    """The deepest bracket nesting, counted over the raw text, conservatively: brackets
    inside strings count, and a closing bracket with no opener (an arrow's '>', a string's
    ')') never hides the nesting that follows it (the deepest rise above any earlier level)."""
    if sum(encoded.count(opener) for opener in _OPENERS) <= MAX_NESTING:
        return 0  # cannot nest deeper than it opens
    # Only the brackets matter, once every '->' (which closes nothing) is gone: the rest is
    # dropped in C before numpy sees it (a tenth of a JAX module's text).
    brackets = encoded.replace(b"->", b"").translate(None, delete=_NOT_BRACKETS)
    levels = np.cumsum(_BRACKET_STEP[np.frombuffer(brackets, np.uint8)], dtype=np.int32)
    lowest_so_far = np.minimum.accumulate(np.minimum(levels, 0))
    return int((levels - lowest_so_far).max(initial=0))


def _parse_bytes(data: bytes, trusted: bool) -> tuple[ir.Module, SourceFormat]:
    if not data.strip():
        raise ValueError("x64guard: the input is empty (no MLIR module to read)")
    if not data.startswith(BYTECODE_MAGIC):
        return _parse_text(_decode_text(data)), SourceFormat.TEXT
    if not trusted:
        _raise_if_unsafe(isolated_reader.vet_bytes(data))
    return _read_bytecode(data)


def _parse_file(path: str, trusted: bool) -> tuple[ir.Module, SourceFormat]:
    """A file. Bytecode is parsed by MLIR itself, so a large file is never copied into
    Python; anything else is read and handled as bytes are."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(len(BYTECODE_MAGIC))
            if head != BYTECODE_MAGIC:
                return _parse_bytes(head + stream.read(), trusted)
    except OSError as exc:
        raise ValueError(f"x64guard: cannot read {path}: {exc.strerror or exc}") from None
    if not trusted:
        before = _identity(path)
        _raise_if_unsafe(isolated_reader.vet_file(path))
        if _identity(path) != before:  # what was vetted must be what is read
            raise ValueError(f"x64guard: {path} changed while x64guard was reading it")
    return _read_bytecode(path)


def _identity(path: str) -> tuple:
    st = os.stat(path)
    return st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns


def _decode_text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("x64guard: the input is neither MLIR bytecode nor UTF-8 MLIR text") from None


def _raise_if_unsafe(reason: str | None) -> None:
    if reason is not None:
        raise ValueError(reason)


def read_bytecode(source: "bytes | str") -> ir.Module:
    """Bytecode or a portable artifact (bytes, or a file's path as str), read in this
    process: what the isolated reader runs. Corrupted input can crash the calling process."""
    return _read_bytecode(source)[0]


def _read_bytecode(source: "bytes | str") -> tuple[ir.Module, SourceFormat]:
    try:
        with make_context() as context:
            try:
                module = ir.Module.parseFile(source) if isinstance(source, str) else ir.Module.parse(source)
            except ir.MLIRError as exc:
                raise ValueError(f"x64guard: unreadable MLIR bytecode: {_first_diagnostic(exc)}"
                                 + _quantized_hint(exc)) from None
            except UnicodeDecodeError:
                raise
            except (ValueError, RuntimeError) as exc:  # e.g. "SmallVector unable to grow" from the reader
                raise ValueError(f"x64guard: unreadable MLIR bytecode: {exc}") from None
            if not _is_vhlo(module):
                return module, SourceFormat.BYTECODE
            try:
                _vhlo_to_stablehlo(module)
            except ir.MLIRError as exc:
                raise ValueError(f"x64guard: unreadable StableHLO portable artifact: {_first_diagnostic(exc)}") from None
            return module, SourceFormat.PORTABLE_ARTIFACT
    except UnicodeDecodeError as exc:  # a name or diagnostic in the input that is not UTF-8
        raise ValueError(f"x64guard: unreadable MLIR bytecode: text in it is not valid UTF-8 ({exc})") from None


def _is_vhlo(module: ir.Module) -> bool:
    return any(op.operation.name.startswith("vhlo.") for op in module.body.operations)


@functools.cache
def _deserialize_pipeline(current_version: str) -> str:
    stablehlo.register_stablehlo_passes()  # process-wide; registering again is harmless
    return f"builtin.module(vhlo-to-version{{target={current_version}}},vhlo-legalize-to-stablehlo)"


def _vhlo_to_stablehlo(module: ir.Module) -> None:
    """A parsed portable artifact (VHLO ops) becomes StableHLO of this version, in place:
    StableHLO's own deserialization pipeline, the one `deserialize_portable_artifact` runs
    after parsing. Run on the module already parsed (from a file by MLIR itself), so an
    artifact is parsed once and never copied into Python."""
    pipeline = _deserialize_pipeline(stablehlo.get_current_version())
    passmanager.PassManager.parse(pipeline).run(module.operation)


def _first_diagnostic(exc: Exception) -> str:
    diagnostics = getattr(exc, "error_diagnostics", None)
    if diagnostics:
        d = diagnostics[0]
        return f"{d.location}: {d.message}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def to_text(module: ir.Module, *, verified: bool = False) -> str:
    """The module's text with locations. `verified=True` skips the printer's own
    verification (x64guard verified the module already); never pass it for IR that has
    not been verified, MLIR may crash printing invalid IR."""
    return module.operation.get_asm(enable_debug_info=True, large_elements_limit=None,
                                    assume_verified=verified)


def to_bytecode(module: ir.Module) -> bytes:
    return _to_bytecode(module.operation)


def to_portable_artifact(module: ir.Module, target: str | None = None) -> bytes:
    """A StableHLO portable artifact (VHLO bytecode) for `target` (default: current)."""
    version = target or stablehlo.get_current_version()
    return serialize_portable_artifact(module, version)


__all__ = ["SourceFormat", "X64GuardError", "load", "clone", "to_text", "to_bytecode",
           "to_portable_artifact", "make_context", "read_bytecode"]

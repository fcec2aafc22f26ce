"""Getting modules in and out: MLIR text, MLIR bytecode, StableHLO portable artifacts.

Uses the MLIR bindings that ship in jaxlib through their public `jax.extend` paths.
Each thread gets its own MLIR context (contexts are not safe to share across threads
from Python), with the dialects JAX emits registered. Unregistered dialects parse, so
ops x64guard has never heard of are narrowed generically.
"""

from __future__ import annotations

import enum
import threading

import numpy as np

from jax.extend import lowering
from jax.extend import mlir as jex_mlir
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import chlo, sdy, stablehlo

from x64guard import _compat
from x64guard.errors import X64GuardError

BYTECODE_MAGIC = b"ML\xefR"
_local = threading.local()


class SourceFormat(str, enum.Enum):
    TEXT = "text"
    BYTECODE = "bytecode"
    PORTABLE_ARTIFACT = "portable-artifact"
    MODULE = "module"


def make_context() -> ir.Context:
    context = ir.Context()
    context.append_dialect_registry(lowering.upstream_dialects)
    context.load_all_available_dialects()
    for dialect in (stablehlo, chlo, sdy):
        dialect.register_dialect(context)
    _compat.register_mhlo(context)
    context.allow_unregistered_dialects = True
    return context


def thread_context() -> ir.Context:
    context = getattr(_local, "context", None)
    if context is None:
        context = _local.context = make_context()
    return context


def load(module: "str | bytes | bytearray | memoryview | ir.Module | ir.Operation"
         ) -> tuple[ir.Module, SourceFormat]:
    """A module x64guard may rewrite freely: parsed from text/bytes, or a clone of a
    given `ir.Module` (which is never mutated)."""
    if isinstance(module, ir.Module):
        return clone(module), SourceFormat.MODULE
    if isinstance(module, ir.Operation) or hasattr(module, "operation") and isinstance(module.operation, ir.Operation):
        operation = module if isinstance(module, ir.Operation) else module.operation
        if operation.name != "builtin.module":
            raise TypeError(f"x64guard: expected a builtin.module, got {operation.name}")
        with operation.context:
            return ir.Module.parse(_to_bytecode(operation)), SourceFormat.MODULE
    if isinstance(module, str):
        return _parse_text(module), SourceFormat.TEXT
    if isinstance(module, (bytes, bytearray, memoryview)):
        return _parse_bytes(bytes(module))
    raise TypeError(f"x64guard: cannot read a module from {type(module).__name__}; "
                    "pass MLIR text (str), bytecode or a portable artifact (bytes), or an ir.Module")


def clone(module: ir.Module) -> ir.Module:
    """A deep copy in the module's own context, locations included.

    `Operation.clone` copies in C++; its result is a detached ModuleOp, so its few
    top-level ops move into a fresh `ir.Module` carrying the same attributes.
    """
    source = module.operation
    with module.context, source.location:
        copy = source.clone()
        fresh = ir.Module.create(source.location)
        for name in source.attributes:
            fresh.operation.attributes[name] = copy.attributes[name]
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
# has crashes the process, so it is refused before parsing.
MAX_NESTING = 4000  # brackets; about 2,000 nested regions, measured to parse in any thread
_BRACKET_STEP = np.zeros(256, np.int8)
_BRACKET_STEP[list(b"{([")] = 1
_BRACKET_STEP[list(b"})]")] = -1


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
    context = thread_context()
    try:
        with context:
            return ir.Module.parse(encoded)  # the bytes already made: no second copy of a large text
    except ir.MLIRError as exc:
        raise ValueError(f"x64guard: the input is not a valid MLIR module: {_first_diagnostic(exc)}") from None


def _max_nesting(encoded: bytes) -> int:
    """The deepest bracket nesting, counted over the raw text (brackets inside strings
    count too, which only makes the limit conservative)."""
    if encoded.count(b"{") + encoded.count(b"(") + encoded.count(b"[") <= MAX_NESTING:
        return 0  # cannot nest deeper than it opens
    steps = _BRACKET_STEP[np.frombuffer(encoded, np.uint8)]
    return int(np.cumsum(steps, dtype=np.int32).max(initial=0))


def _parse_bytes(data: bytes) -> tuple[ir.Module, SourceFormat]:
    if not data.strip():
        raise ValueError("x64guard: the input is empty (no MLIR module to read)")
    if not data.startswith(BYTECODE_MAGIC):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("x64guard: the input is neither MLIR bytecode nor UTF-8 MLIR text") from None
        return _parse_text(text), SourceFormat.TEXT
    context = thread_context()
    with context:
        try:
            module = ir.Module.parse(data)
        except ir.MLIRError as exc:
            raise ValueError(f"x64guard: unreadable MLIR bytecode: {_first_diagnostic(exc)}") from None
        if _is_vhlo(module):
            try:
                module = jex_mlir.deserialize_portable_artifact(data, context)
            except Exception as exc:  # the bindings raise plain Exceptions here
                raise ValueError(f"x64guard: unreadable StableHLO portable artifact: {exc}") from None
            if not isinstance(module, ir.Module):
                module = ir.Module.parse(module)
            return module, SourceFormat.PORTABLE_ARTIFACT
    return module, SourceFormat.BYTECODE


def _is_vhlo(module: ir.Module) -> bool:
    return any(op.operation.name.startswith("vhlo.") for op in module.body.operations)


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
    return jex_mlir.serialize_portable_artifact(module, version)


__all__ = ["SourceFormat", "X64GuardError", "load", "clone", "to_text", "to_bytecode",
           "to_portable_artifact", "thread_context", "make_context"]

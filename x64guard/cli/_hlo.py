"""HLO <-> StableHLO for the command line: the only non-public JAX use in x64guard.cli.

`jax.extend.mlir.hlo_to_stablehlo` (public) converts a serialized HloModuleProto. HLO
*text* (what `lowered.as_text(dialect="hlo")`, `compiled.as_text()` and XLA's
`--xla_dump_to` write) must first be parsed into a proto, and writing a narrowed module
back as HLO needs the reverse conversion; jaxlib offers both only under private names
(`jaxlib._hlo.hlo_module_from_text`, `jaxlib._jax.mlir.mlir_module_to_xla_computation`).
They are kept here, behind two functions, so that a jaxlib change breaks one file.
"""

from __future__ import annotations

import re

from jax.extend import mlir as jex_mlir

_HLO_NAME = re.compile(r"^\s*HloModule\s+([^\s,]+)")


def looks_like_hlo_text(text: str) -> bool:
    return _HLO_NAME.match(text) is not None


def hlo_module_name(text: str) -> str | None:
    match = _HLO_NAME.match(text)
    return match.group(1) if match else None


def hlo_text_to_stablehlo(text: str) -> bytes:
    """MLIR bytecode of the StableHLO module equivalent to the HLO text (locations from
    the HLO's metadata/stack frames are kept)."""
    from jaxlib import _hlo  # private: see the module docstring

    try:
        module = _hlo.hlo_module_from_text(text)
    except Exception as exc:  # JaxRuntimeError with XLA's parser message
        raise ValueError(f"not valid HLO text: {_first_line(exc)}") from None
    return hlo_proto_to_stablehlo(module.as_serialized_hlo_module_proto())


def hlo_proto_to_stablehlo(proto: bytes) -> bytes | str:
    """StableHLO bytecode for the HLO module; generic-form MLIR text instead when the
    converter kept MHLO ops (XLA's optimized HLO: `mhlo.fusion`, `mhlo.bitcast`, whose
    attributes x64guard's context, which has no MHLO dialect, cannot read from bytecode)."""
    try:
        bytecode = jex_mlir.hlo_to_stablehlo(proto)
    except Exception as exc:
        raise ValueError(f"not a convertible HloModuleProto: {_first_line(exc)}") from None
    return _without_mhlo_bytecode(bytecode)


def _without_mhlo_bytecode(bytecode: bytes) -> bytes | str:
    from jax.extend.mlir import ir
    from jaxlib.mlir.dialects import mhlo

    from x64guard import mlir

    global _MHLO_CONTEXT
    if _MHLO_CONTEXT is None:
        _MHLO_CONTEXT = mlir.make_context()
        mhlo.register_mhlo_dialect(_MHLO_CONTEXT)
    with _MHLO_CONTEXT:
        module = ir.Module.parse(bytecode)
        uses_mhlo = []

        def visit(op):
            if op.name.startswith("mhlo."):
                uses_mhlo.append(op.name)
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        if not uses_mhlo:
            return bytecode
        return module.operation.get_asm(enable_debug_info=True, print_generic_op_form=True,
                                        large_elements_limit=None)


_MHLO_CONTEXT = None


def stablehlo_to_hlo_text(module_bytecode: bytes | str) -> str:
    from jaxlib._jax import mlir as jaxlib_mlir  # private: see the module docstring

    computation = jaxlib_mlir.mlir_module_to_xla_computation(module_bytecode, use_tuple_args=False,
                                                             return_tuple=False)
    return computation.as_hlo_text(print_large_constants=True)


def stablehlo_to_hlo_proto(module_bytecode: bytes | str) -> bytes:
    from jaxlib._jax import mlir as jaxlib_mlir  # private: see the module docstring

    computation = jaxlib_mlir.mlir_module_to_xla_computation(module_bytecode, use_tuple_args=False,
                                                             return_tuple=False)
    return computation.as_serialized_hlo_module_proto()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

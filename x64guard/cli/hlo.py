"""HLO <-> StableHLO for the command line.

`jax.extend.mlir.hlo_to_stablehlo` (public) converts a serialized HloModuleProto. HLO
*text* (what `lowered.as_text(dialect="hlo")`, `compiled.as_text()` and XLA's
`--xla_dump_to` write) must first be parsed into a proto, and writing a narrowed module
back as HLO needs the reverse conversion; jaxlib offers both only privately, so they
live in x64guard/bindings.py, the core's one shim of private jaxlib calls.
"""

from __future__ import annotations

import re

from jax.extend import mlir as jex_mlir

from x64guard import bindings

_HLO_NAME = re.compile(r"^\s*HloModule\s+([^\s,]+)")


def looks_like_hlo_text(text: str) -> bool:
    return _HLO_NAME.match(text) is not None


def hlo_module_name(text: str) -> str | None:
    match = _HLO_NAME.match(text)
    return match.group(1) if match else None


def hlo_text_to_stablehlo(text: str) -> bytes:
    """MLIR bytecode of the StableHLO module equivalent to the HLO text (locations from
    the HLO's metadata/stack frames are kept)."""
    try:
        proto = bindings.hlo_text_to_proto(text)
    except Exception as exc:  # JaxRuntimeError with XLA's parser message
        raise ValueError(f"not valid HLO text: {_first_line(exc)}") from None
    return hlo_proto_to_stablehlo(proto)


def hlo_proto_to_stablehlo(proto: bytes) -> bytes:
    """StableHLO bytecode for the HLO module (XLA's optimized HLO converts with MHLO ops
    such as mhlo.fusion left in, which x64guard's context reads)."""
    try:
        return jex_mlir.hlo_to_stablehlo(proto)
    except Exception as exc:
        raise ValueError(f"not a convertible HloModuleProto: {_first_line(exc)}") from None


def stablehlo_to_hlo_text(module: bytes | str) -> str:
    return bindings.stablehlo_to_xla_computation(module).as_hlo_text(print_large_constants=True)


def stablehlo_to_hlo_proto(module: bytes | str) -> bytes:
    return bindings.stablehlo_to_xla_computation(module).as_serialized_hlo_module_proto()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

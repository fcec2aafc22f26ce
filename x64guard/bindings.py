"""The jaxlib bindings the core needs beyond `jax.extend`, and nothing else.

Why this module exists: the core (io/, cli/, passes/) reads and writes MLIR and HLO through
JAX's public `jax.extend.mlir`, except for three things jaxlib offers only privately. They
live here, the core's one bottom-floor shim, so that the core imports no front end (the JAX
front end keeps its own private calls in x64guard/jax/_private.py) and a jaxlib release
that moves one breaks this file only. tests/test_layers.py fails on a private framework
import anywhere else outside the `_private` modules.

Versions: each was run here on jaxlib 0.10.2 (the shared venv). The project's `make
test-matrix` rows (tests/matrix/jax-0.11.txt, jax-0.12.txt) ran the same calls, from
x64guard/jax/_private.py, on jaxlib 0.11.2 and 0.12.0.1; they were not re-tried on 0.11 or
0.12 since moving here.
"""

from __future__ import annotations


def register_mhlo(context) -> None:
    """MHLO, for modules converted from XLA's optimized HLO (mhlo.fusion, ...): jaxlib ships
    the dialect but `jax.extend.mlir.dialects` does not expose it.
    (jaxlib.mlir.dialects.mhlo.register_mhlo_dialect: run on jaxlib 0.10.2.)"""
    from jaxlib.mlir.dialects import mhlo

    mhlo.register_mhlo_dialect(context)


def hlo_text_to_proto(text: str) -> bytes:
    """A serialized HloModuleProto from HLO text: jaxlib parses HLO text only privately
    (`jax.extend.mlir.hlo_to_stablehlo` takes a proto).
    (jaxlib._hlo.hlo_module_from_text: run on jaxlib 0.10.2.)"""
    from jaxlib import _hlo

    return _hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()


def stablehlo_to_xla_computation(module: "str | bytes"):
    """An XlaComputation from StableHLO (text or bytecode): the way back to HLO, which no
    public API offers. (jaxlib._jax.mlir.mlir_module_to_xla_computation: run on jaxlib
    0.10.2.)"""
    from jaxlib._jax import mlir as jaxlib_mlir

    return jaxlib_mlir.mlir_module_to_xla_computation(module, use_tuple_args=False, return_tuple=False)

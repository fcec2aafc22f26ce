"""Whether two modules are the same program, as x64guard.jit's cross-check asks of a library
primitive's two lowerings (one narrowed, one x32 JAX's): printed without locations, after
folding converts to the same type, which compute nothing (narrowing turns x64 JAX's int64
-> int32 index converts into them; x32 JAX traces none)."""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.passes.rewriter import Rewriter


def _identity_converts(op: ir.Operation, found: list) -> list:
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                _identity_converts(child.operation, found)
    if op.name == "stablehlo.convert" and op.operands[0].type == op.results[0].type:
        found.append(op)
    return found


def canonical_text(module: ir.Module) -> str:
    """`module` (x64guard's own: it is changed) with identity converts folded, printed
    without locations."""
    rewriter = Rewriter()
    for convert in _identity_converts(module.operation, []):
        rewriter.replace_all_uses(convert.results[0], convert.operands[0])
        rewriter.erase(convert)
    return module.operation.get_asm(enable_debug_info=False)

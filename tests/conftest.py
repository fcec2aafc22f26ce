"""Shared helpers: narrowing snippets quietly, and asserting what a module holds."""

from __future__ import annotations


import pytest
from jax.extend.mlir import ir

import x64guard

WIDE_ELEMENTS = ("i64", "ui64", "si64", "f64", "complex<f64>")


def narrow_quietly(text, **kwargs) -> x64guard.NarrowResult:
    """`narrow` without its warnings: the library's own `narrow_module`."""
    return x64guard.narrow_module(text, **kwargs)


def all_types(module: ir.Module) -> list[ir.Type]:
    """Every result, block argument and TypeAttr type in the module."""
    found: list[ir.Type] = []

    def visit(op):
        found.extend(r.type for r in op.results)
        for region in op.regions:
            for block in region.blocks:
                found.extend(a.type for a in block.arguments)
        for name in op.attributes:
            try:
                attr = op.attributes[name]
            except TypeError:
                continue
            if isinstance(attr, ir.TypeAttr):
                found.append(attr.value)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def wide_types(module: ir.Module) -> list[str]:
    import re
    pattern = re.compile(r"\b(?:[su]?i64|f64)\b")
    return [str(t) for t in all_types(module) if pattern.search(str(t))]


def kinds(findings) -> set[str]:
    return {f.kind for f in findings}


def refusal(text, **kwargs) -> x64guard.X64GuardError:
    with pytest.raises(x64guard.X64GuardError) as info:
        narrow_quietly(text, **kwargs)
    return info.value

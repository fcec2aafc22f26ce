"""The generic rule: narrow every type an op carries, whatever its dialect.

Op results, the arguments of every block of every region, and TypeAttr attributes
(`func.func`'s `function_type`, ...). Dense attributes are left alone: on any op but a
constant they are structure (dimension lists, padding), not data.

This runs once per op, so it is written for speed: one function, locals bound once,
locations kept as attributes and resolved only once per distinct location at the end.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Severity
from x64guard.passes.rewriter import Rewriter
from x64guard.passes.tables import CONSTANT_OPS, TYPE_ATTR_FREE_DIALECTS

_MISSING = object()


class ConvertOpTypes:
    """Applied to every op after its named rules."""

    def __init__(self, rw: Rewriter) -> None:
        self._rw = rw
        self._scan_attributes: dict[str, bool] = {}
        self._unregistered: dict[str, bool] = {}

    def apply(self, op: ir.Operation, name: str) -> None:
        rw = self._rw
        cache = rw.converter.cache
        olds: list[ir.Type] = []
        for value in op.results:
            old = value.type
            new = cache.get(old, _MISSING)
            if new is _MISSING:
                new = rw.converter.convert(old)
            if new is not None:
                olds.append(old)
                if not rw.dry_run:
                    value.set_type(new)
            elif old in rw.converter.unsupported:
                report_unsupported_type(rw, op, old)
        regions = op.regions
        if len(regions):
            for region in regions:
                for block in region.blocks:
                    for arg in block.arguments:
                        old = arg.type
                        new = rw.converter.convert(old)
                        if new is not None:
                            olds.append(old)
                            if not rw.dry_run:
                                arg.set_type(new)
                        elif old in rw.converter.unsupported:
                            report_unsupported_type(rw, op, old)
        scan = self._scan_attributes.get(name)
        if scan is None:
            scan = self._scan_attributes[name] = (
                name not in CONSTANT_OPS and not name.startswith(TYPE_ATTR_FREE_DIALECTS))
            self._unregistered[name] = not rw.context.is_registered_operation(name)
        if scan:
            self._convert_type_attributes(op, rw, olds)
        if olds:
            rw.record_narrowed(op, name, olds)
            if self._unregistered[name]:
                rw.report("unknown-op", Severity.WARNING, op,
                          f"{name} is an op x64guard does not know: its types were narrowed generically. If its "
                          "meaning depends on bit widths, keep this module in 64 bits (mode='allow')")

    @staticmethod
    def _convert_type_attributes(op: ir.Operation, rw: Rewriter, olds: list[ir.Type]) -> None:
        attributes = op.attributes
        for attr_name in list(attributes):
            attr = attributes[attr_name]
            if not isinstance(attr, ir.TypeAttr):
                continue
            old = attr.value
            new = rw.converter.convert(old)
            if new is not None:
                olds.append(old)
                if not rw.dry_run:
                    attributes[attr_name] = ir.TypeAttr.get(new)


def report_unsupported_type(rw: Rewriter, op: ir.Operation, t: ir.Type) -> None:
    rw.report("unsupported-type", Severity.ERROR, op,
              f"x64guard cannot narrow values of type {t}; keep this module in 64 bits (mode='allow') "
              "or report the type so it can be added to x64guard's type table")

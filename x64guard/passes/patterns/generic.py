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
from x64guard.passes.tables import CHECK_DIALECT_OPS, CONSTANT_OPS, TYPE_ATTR_FREE_DIALECTS

_MISSING = object()


class ConvertOpTypes:
    """Applied to every op after its named rules."""

    def __init__(self, rw: Rewriter) -> None:
        self._rw = rw
        # Per op name: (may have regions, may have TypeAttrs, unregistered). Learned from
        # the first op of each name; ops of the registered JAX dialects have a fixed
        # region count and never a TypeAttr, so most ops skip both looks.
        self._op_info: dict[str, tuple[bool, bool, bool]] = {}

    def _learn(self, op: ir.Operation, name: str) -> tuple[bool, bool, bool]:
        # Ops of StableHLO's test `check` dialect are not registered, but known.
        unregistered = not self._rw.context.is_registered_operation(name) and name not in CHECK_DIALECT_OPS
        fixed_shape = name.startswith(TYPE_ATTR_FREE_DIALECTS) and not unregistered
        info = (not fixed_shape or len(op.regions) > 0,
                name not in CONSTANT_OPS and not fixed_shape,
                unregistered)
        self._op_info[name] = info
        return info

    def apply(self, op: ir.Operation, name: str, result_types: list[ir.Type]) -> None:
        rw = self._rw
        info = self._op_info.get(name) or self._learn(op, name)
        converter = rw.converter
        cache = converter.cache
        olds = None
        index = 0
        for old in result_types:
            new = cache.get(old, _MISSING)
            if new is _MISSING:
                new = converter.convert(old)
            if new is not None:
                if olds is None:
                    olds = [old]
                else:
                    olds.append(old)
                if not rw.dry_run:
                    value = op.result if len(result_types) == 1 else op.results[index]
                    value.set_type(new)
                    rw.types_before[hash(value)] = old
            elif old in converter.unsupported:
                report_unsupported_type(rw, op, old)
            index += 1
        if info[0]:
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.arguments:
                        old = arg.type
                        new = converter.convert(old)
                        if new is not None:
                            olds = (olds or []) + [old]
                            if not rw.dry_run:
                                arg.set_type(new)
                                rw.types_before[hash(arg)] = old
                        elif old in converter.unsupported:
                            report_unsupported_type(rw, op, old)
        if info[1]:
            olds = self._convert_type_attributes(op, rw, olds or [])
        if olds:
            # Inlined Rewriter.record_narrowed: this runs for nearly every op.
            key = (name, op.location.attr, rw.function, olds[0] if len(olds) == 1 else tuple(olds))
            narrowed = rw.narrowed_log
            narrowed[key] = narrowed.get(key, 0) + 1
        if info[2] and (olds or self._has_wide_operand(op, rw)):
            # An op from outside the known dialects: its operands count too (they were
            # narrowed by their producers), as for a custom_call.
            rw.report("unknown-op", Severity.WARNING, op,
                      f"{name} is an op x64guard does not know: its types were narrowed generically. If its "
                      "meaning depends on bit widths, keep this module in 64 bits (mode='allow')")

    @staticmethod
    def _has_wide_operand(op: ir.Operation, rw: Rewriter) -> bool:
        return any(rw.converter.convert(rw.type_before(value)) is not None for value in op.operands)

    @staticmethod
    def _convert_type_attributes(op: ir.Operation, rw: Rewriter, olds: list[ir.Type]) -> list[ir.Type]:
        attributes = op.attributes
        for attr_name in list(attributes):
            try:
                attr = attributes[attr_name]
            except TypeError:
                # Dense attributes the bindings cannot cast (complex elements: "Can't cast
                # unknown element type DenseTypedElementsAttr") are never TypeAttrs.
                continue
            if not isinstance(attr, ir.TypeAttr):
                continue
            old = attr.value
            new = rw.converter.convert(old)
            if new is not None:
                olds.append(old)
                if not rw.dry_run:
                    attributes[attr_name] = ir.TypeAttr.get(new)
        return olds


def report_unsupported_type(rw: Rewriter, op: ir.Operation, t: ir.Type) -> None:
    spelling = str(t)
    if "!quant." in spelling:
        # jaxlib registers no quant dialect: `!quant.uniform<i8:f64, ...>` is an opaque type
        # here, whose expressed type x64guard cannot rebuild.
        rw.report("unsupported-type", Severity.ERROR, op,
                  f"values of quantized type {spelling}: the MLIR bindings in jaxlib do not include the quant "
                  "dialect, so x64guard cannot narrow its 64-bit expressed type; check the float model before "
                  "quantization, or lower the quantized ops to integer arithmetic first "
                  "(stablehlo-opt --stablehlo-legalize-quant-to-math)")
        return
    rw.report("unsupported-type", Severity.ERROR, op,
              f"x64guard cannot narrow values of type {t}; keep this module in 64 bits (mode='allow') "
              "or report the type so it can be added to x64guard's type table")

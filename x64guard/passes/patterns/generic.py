"""The generic rule: narrow every type an op carries, whatever its dialect.

Op results, the arguments of every block of every region, and TypeAttr attributes
(`func.func`'s `function_type`, ...). Dense attributes are left alone: on any op but a
constant they are structure (dimension lists, padding), not data.

This runs for every op, so it is written for speed: locals bound once, an op without a
64-bit result and without regions or type attributes costs a few dictionary lookups, and
locations are kept raw and resolved only for the findings that list them (store.py).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome, RewritePattern
from x64guard.passes.ir_queries import read_attribute
from x64guard.passes.tables import CHECK_DIALECT_OPS, CONSTANT_OPS, never_has_type_attributes

_MISSING = object()


class ConvertOpTypes(RewritePattern):
    """Applied to every op after its named rules (unless one keeps its types)."""

    converts_types = True

    @staticmethod
    def _learn(op: ir.Operation, name: str, ctx: OpContext) -> tuple[bool, bool, bool]:
        """(may have regions, may have TypeAttrs, unregistered), learned from the first op of
        each name (per run: `PassRun.op_info`). Ops of the registered JAX dialects have a
        fixed region count and never a TypeAttr, so most ops skip both looks."""
        # Ops of StableHLO's test `check` dialect are not registered, but known.
        unregistered = not ctx.run.context.is_registered_operation(name) and name not in CHECK_DIALECT_OPS
        fixed_shape = never_has_type_attributes(name) and not unregistered
        info = (not fixed_shape or len(op.regions) > 0,
                name not in CONSTANT_OPS and not fixed_shape,
                unregistered)
        ctx.run.op_info[name] = info
        return info

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        run = ctx.run
        name = ctx.name
        info = run.op_info.get(name) or self._learn(op, name, ctx)
        converter = run.converter
        cache = converter.cache
        rewriter = run.rewriter
        result_types = ctx.result_types
        olds = None
        if len(result_types) == 1:  # most ops: the one result read without a loop
            old = result_types[0]
            new = cache.get(old, _MISSING)
            if new is _MISSING:
                new = converter.convert(old)
            if new is not None:
                olds = [old]
                rewriter.set_type(op.result, new, old)
            elif old in converter.unsupported:
                report_unsupported_type(ctx, old)
        elif result_types:
            olds = _convert_results(op, ctx, result_types)
        if info[0]:
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.arguments:
                        old = arg.type
                        new = converter.convert(old)
                        if new is not None:
                            olds = (olds or []) + [old]
                            rewriter.set_type(arg, new, old)
                        elif old in converter.unsupported:
                            report_unsupported_type(ctx, old)
        if info[1]:
            olds = _convert_type_attributes(op, ctx, olds or [])
        if olds:
            run.store.record_narrowed(name, ctx.function, olds, op.location)
        if info[2] and (olds or _has_wide_operand(op, ctx)):
            # An op from outside the known dialects: its operands count too (they were
            # narrowed by their producers), as for a custom_call.
            ctx.report(Kind.UNKNOWN_OP, Severity.WARNING,
                       f"{name} is an op x64guard does not know: its types were narrowed generically. If its "
                       "meaning depends on bit widths, keep this module in 64 bits (mode='allow')")
        return Outcome.REWROTE


def _convert_results(op: ir.Operation, ctx: OpContext, result_types) -> list[ir.Type] | None:
    olds = None
    for index, old in enumerate(result_types):
        new = ctx.converter.convert(old)
        if new is not None:
            olds = (olds or []) + [old]
            ctx.rewriter.set_type(op.results[index], new, old)
        elif old in ctx.converter.unsupported:
            report_unsupported_type(ctx, old)
    return olds


def _has_wide_operand(op: ir.Operation, ctx: OpContext) -> bool:
    return any(ctx.converter.convert(ctx.type_before(value)) is not None for value in op.operands)


def _convert_type_attributes(op: ir.Operation, ctx: OpContext, olds: list[ir.Type]) -> list[ir.Type]:
    for attr_name in list(op.attributes):
        # None: dense attributes the bindings cannot cast (complex elements: "Can't cast
        # unknown element type DenseTypedElementsAttr"), which are never TypeAttrs.
        attr = read_attribute(op, attr_name)
        if not isinstance(attr, ir.TypeAttr):
            continue
        old = attr.value
        new = ctx.converter.convert(old)
        if new is not None:
            olds.append(old)
            ctx.rewriter.set_attribute(op, attr_name, ir.TypeAttr.get(new))
    return olds


def report_unsupported_type(ctx: OpContext, t: ir.Type) -> None:
    spelling = str(t)
    if "!quant." in spelling:
        # jaxlib registers no quant dialect: `!quant.uniform<i8:f64, ...>` is an opaque type
        # here, whose expressed type x64guard cannot rebuild.
        ctx.report(Kind.UNSUPPORTED_TYPE, Severity.ERROR,
                   f"values of quantized type {spelling}: the MLIR bindings in jaxlib do not include the quant "
                   "dialect, so x64guard cannot narrow its 64-bit expressed type; check the float model before "
                   "quantization, or lower the quantized ops to integer arithmetic first "
                   "(stablehlo-opt --stablehlo-legalize-quant-to-math)")
        return
    ctx.report(Kind.UNSUPPORTED_TYPE, Severity.ERROR,
               f"x64guard cannot narrow values of type {t}; keep this module in 64 bits (mode='allow') "
               "or report the type so it can be added to x64guard's type table")

"""custom_call: a kernel name may encode its element type, or call back into Python.

What a target means comes from `tables.custom_call_policy` (data): type-generic targets
are narrowed as any op, LAPACK kernels are renamed to their single-precision twins, and
every other target with a 64-bit operand or result is refused, naming the target. JAX's
Python host callbacks get advice of their own (`x64guard.jit` runs them at 32 bits).

"64-bit" means before narrowing: the walk narrows an operand's producer before it
reaches the call, so operand types are read as they were (`OpContext.type_before`).
Otherwise a call whose only 64-bit types are operands (jax.debug.print, a kernel with
no results) would be handed 32-bit buffers without a word.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome, RewritePattern
from x64guard.passes.tables import DTYPE_NAMED_COMPUTATIONS, CustomCallPolicy, custom_call_policy

_KEEP_64 = "keep this module in 64 bits (mode='allow')"


def custom_call_target(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["call_target_name"]).value


def wide_operands_and_results(op: ir.Operation, ctx: OpContext) -> list[str]:
    """'operand #0 (tensor<2xf64>)', 'result #1 (...)' for every 64-bit type the op had
    before narrowing (tuples and tokens included: the converter looks inside tuples)."""
    converter = ctx.converter
    wide = []
    for index, value in enumerate(op.operands):
        before = ctx.type_before(value)
        if converter.convert(before) is not None or before in converter.unsupported:
            wide.append(f"operand #{index} ({before})")
    for index, result_type in enumerate(ctx.result_types):
        if converter.convert(result_type) is not None or result_type in converter.unsupported:
            wide.append(f"result #{index} ({result_type})")
    return wide


class NarrowCustomCall(RewritePattern):
    op_names = frozenset({"stablehlo.custom_call"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        wide = wide_operands_and_results(op, ctx)
        if not wide:
            return Outcome.NO_MATCH
        target = custom_call_target(op)
        policy, renamed = custom_call_policy(target)
        op_name = f"stablehlo.custom_call @{target}"
        what = ", ".join(wide[:4]) + (f" and {len(wide) - 4} more" if len(wide) > 4 else "")
        if policy is CustomCallPolicy.TYPE_GENERIC:
            _rename_dtype_named_computations(op, target, ctx)
            return Outcome.REWROTE
        if policy is CustomCallPolicy.RENAMED:
            ctx.report(Kind.CUSTOM_CALL_RENAMED, Severity.INFO, f"@{target} -> @{renamed}", op_name=op_name)
            ctx.rewriter.set_attribute(op, "call_target_name", ir.StringAttr.get(renamed))
            return Outcome.REWROTE
        if policy is CustomCallPolicy.HOST_CALLBACK:
            ctx.report(Kind.CUSTOM_CALL, Severity.ERROR,
                       f"custom_call @{target} is a host callback (jax.pure_callback, io_callback, "
                      f"jax.debug.print or jax.debug.callback) that JAX traced for 64-bit values: {what}; "
                      "narrowed, the Python function would receive and return 32-bit buffers it was not "
                      "traced for. Use x64guard.jit(f), which traces the callback at 32 bits, or "
                      f"{_KEEP_64}", op_name=op_name)
            return Outcome.REWROTE
        if policy is CustomCallPolicy.COMPILED_KERNEL:
            ctx.report(Kind.CUSTOM_CALL, Severity.ERROR,
                       f"custom_call @{target} runs a kernel compiled for the types it was traced with: "
                      f"{what}; narrowing would hand it 32-bit buffers. Trace the kernel with 32-bit "
                      f"inputs (x64 off, or x64guard.jit), or {_KEEP_64}", op_name=op_name)
            return Outcome.REWROTE
        ctx.report(Kind.CUSTOM_CALL, Severity.ERROR,
                   f"custom_call @{target} has 64-bit types, {what}, and x64guard does not know a 32-bit "
                  f"version of it; {_KEEP_64}, or add the target to x64guard's custom_call table "
                  "(x64guard/passes/tables/ops.py) if its kernel works on any element type",
                  op_name=op_name)
        return Outcome.REWROTE


def _rename_dtype_named_computations(op: ir.Operation, target: str, ctx: OpContext) -> None:
    """A type-generic call's computations named after its operand's 64-bit element type
    (`tables.DTYPE_NAMED_COMPUTATIONS`) take the name x32 JAX gives them: the 32-bit type's.
    Only an internal function of this module (`_internal`) whose name holds exactly the
    operand's element type, and only where the new name is free; a rename changes no
    computation."""
    pattern = DTYPE_NAMED_COMPUTATIONS.get(target)
    if pattern is None or "called_computations" not in op.attributes or not len(op.operands):
        return
    wide = ctx.type_before(op.operands[0])
    element, narrowed = str(ir.ShapedType(wide).element_type), str(ir.ShapedType(ctx.narrowed(wide)).element_type)
    if element == narrowed:
        return
    names = [ir.FlatSymbolRefAttr(a).value for a in ir.ArrayAttr(op.attributes["called_computations"])]
    renamed = ctx.run.renamed_computations
    module = op.parent.parent  # call -> its function -> the module
    symbols = ir.SymbolTable(module)
    new_names = []
    for name in names:
        match = pattern.match(name)
        if name not in renamed and match is not None and match.group("type") == element:
            new = name[:match.start("type")] + narrowed + name[match.end("type"):]
            function = symbols[name] if name in symbols else None
            if function is None or new in symbols or new in renamed.values() or not _internal(function, ctx):
                new_names.append(name)
                continue
            ctx.rewriter.set_attribute(function.operation, "sym_name", ir.StringAttr.get(new))
            renamed[name] = new
            ctx.report(Kind.CUSTOM_CALL_RENAMED, Severity.INFO,
                       f"@{target}'s computation @{name} -> @{new}: JAX names it after the element type, and x32 "
                       "JAX's is the 32-bit one (a rename: nothing it computes changes)",
                       op_name=f"stablehlo.custom_call @{target}")
        new_names.append(renamed.get(name, name))
    if new_names != names:
        ctx.rewriter.set_attribute(op, "called_computations",
                                   ir.ArrayAttr.get([ir.FlatSymbolRefAttr.get(n) for n in new_names]))


def _internal(function, ctx: OpContext) -> bool:
    """No one outside the module can call `function`: it is private, or the module was
    lowered by JAX, whose only entry point is @main (JAX leaves the comparators it builds
    public)."""
    attributes = function.attributes
    if "sym_visibility" in attributes and ir.StringAttr(attributes["sym_visibility"]).value == "private":
        return True
    return ctx.run.jax_origin and ir.StringAttr(attributes["sym_name"]).value != "main"

"""After a rewriting run: prove that no 64-bit element type is left.

What may stay 64-bit: structural attributes (dimension lists, padding: never read here),
and what the target profile keeps (the RNG state and the seed arithmetic that builds it,
with the public signatures that pass them; `PassRun.kept_ops`, `IdiomState.kept_signatures`).
Everything else a value or a type attribute carries must have narrowed. A failure is a bug
in x64guard: an internal error naming the op, never a silent return (as IREE's
`applyFullConversion` proves a conversion legal).

Only run when the pass refused nothing: a refused module is not narrowed by design.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.errors import X64GuardError
from x64guard.passes.driver import PassRun, walk
from x64guard.passes.locations import LocationResolver
from x64guard.passes.tables import CHECK_DIALECT_OPS, TYPE_ATTR_FREE_DIALECTS


class IllegalNarrowing(X64GuardError):
    """x64guard left a 64-bit type it should have narrowed: a bug in x64guard."""


def check_legality(module: ir.Module, run: PassRun) -> None:
    """Raise IllegalNarrowing at the first op (in walk order) that still has a 64-bit type
    outside what the run keeps."""
    converter = run.converter
    kept = run.kept_ops
    signatures = getattr(run.idioms, "kept_signatures", None) or {}
    wide: dict[ir.Type, bool] = {}  # type -> still 64-bit (types are uniqued: few distinct ones)
    type_attributes: dict[str, bool] = {}  # op name -> may carry TypeAttrs
    context = module.context
    function = ["?"]
    advance = ir.WalkResult.ADVANCE

    def is_wide(t: ir.Type) -> bool:
        found = wide.get(t)
        if found is None:
            found = wide[t] = converter.convert(t) is not None or t in converter.unsupported
        return found

    def is_convertible(t: ir.Type) -> bool:
        return converter.convert(t) is not None

    def visit(op: ir.Operation) -> ir.WalkResult:
        if kept and op in kept:
            return advance
        for index, t in enumerate(op.results.types):
            if is_wide(t):
                _fail(op, f"result #{index} is {t}", function[0])
        name = op.name
        kept_arguments: frozenset = frozenset()
        if name == "func.func":
            function[0] = ir.StringAttr(op.attributes["sym_name"]).value
            if function[0] in signatures:
                kept_arguments = signatures[function[0]][0]
        if len(op.regions):
            for region in op.regions:
                for number, block in enumerate(region.blocks):
                    for arg in block.arguments:
                        if is_wide(arg.type) and not (number == 0 and arg.arg_number in kept_arguments):
                            _fail(op, f"a block argument (#{arg.arg_number}) is {arg.type}", function[0])
        may_have = type_attributes.get(name)
        if may_have is None:
            may_have = type_attributes[name] = not (name.startswith(TYPE_ATTR_FREE_DIALECTS)
                                                    and context.is_registered_operation(name))
        if may_have:
            # TypeAttrs: only types the converter rebuilds. A foreign type mentioning f64
            # (`!foo.bar<f64>`) in an attribute is opaque data the pass leaves as it is
            # (values of such types are refused by the generic rule instead).
            _check_type_attributes(op, name, is_convertible, signatures.get(function[0]) if name == "func.func" else None,
                                   function[0])
        if name in CHECK_DIALECT_OPS and CHECK_DIALECT_OPS[name] and CHECK_DIALECT_OPS[name] in op.attributes:
            try:
                value = op.attributes[CHECK_DIALECT_OPS[name]]
            except TypeError:  # complex dense attributes cannot be read: their type is in the text
                value = None
            # Only an expected value of the checked operand's type narrows with it (one of
            # another type is left as it is: patterns/check_ops.py).
            if isinstance(value, ir.DenseElementsAttr) and is_wide(value.type) and len(op.operands) == 1 \
                    and op.operands[0].type == converter.convert(value.type):
                _fail(op, f"its expected value is {value.type}", function[0])
        return advance

    walk(module.operation, visit)


def _check_type_attributes(op: ir.Operation, name: str, is_wide, signature, function: str) -> None:
    attributes = op.attributes
    for attr_name in list(attributes):
        try:
            attr = attributes[attr_name]
        except TypeError:  # dense attributes the bindings cannot cast are never TypeAttrs
            continue
        if not isinstance(attr, ir.TypeAttr) or not is_wide(attr.value):
            continue
        if signature is not None and attr_name == "function_type":
            kept_arguments, kept_results = signature
            function_type = ir.FunctionType(attr.value)
            if not any(is_wide(t) for i, t in enumerate(function_type.inputs) if i not in kept_arguments) \
                    and not any(is_wide(t) for i, t in enumerate(function_type.results) if i not in kept_results):
                continue
        _fail(op, f"its attribute {attr_name} is {attr.value}", function)


def _fail(op: ir.Operation, what: str, function: str) -> None:
    where = LocationResolver().resolve(op.location)
    place = f"{where}" if where is not None else f"@{function}"
    raise IllegalNarrowing(
        f"x64guard internal error: after narrowing, {op.name} at {place} still has a 64-bit type ({what}) "
        "that nothing reported; this is a bug in x64guard, please report it with the input module")

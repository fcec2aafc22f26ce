"""The questions the package asks of MLIR objects, answered once.

`is_wide` (is this type one x64guard narrows?), `is_wide_signed_integer` (one of them
that holds int64 arithmetic), `read_attribute` (an attribute the
bindings may not be able to hand to Python) and `main_function` (a module's @main).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.passes.tables import INTEGER_RANGE, NARROW_ELEMENT_TYPE


def element_type(t: ir.Type) -> ir.Type:
    """The element type of a shaped type (tensor, vector, memref); any other type itself."""
    return t.element_type if isinstance(t, ir.ShapedType) else t


def is_wide(t: ir.Type) -> bool:
    """The package's one answer to "is this type 64-bit?": does `t` hold an element type the
    type table narrows (`tables.NARROW_ELEMENT_TYPE`: i64, si64, ui64, f64, complex<f64>)? A
    scalar, a shaped type (tensor, vector, memref) of one, or a tuple or function type with
    one among its parts. (A foreign type that only mentions f64, `!foo.bar<f64>`, is not one:
    the type converter records those it cannot rebuild, `TypeConverter.unsupported`.)"""
    if isinstance(t, ir.TupleType):
        return any(is_wide(t.get_type(i)) for i in range(t.num_types))
    if isinstance(t, ir.FunctionType):
        return any(is_wide(part) for part in (*t.inputs, *t.results))
    return str(element_type(t)) in NARROW_ELEMENT_TYPE


def is_wide_signed_integer(t: ir.Type) -> bool:
    """Is `t` (or its elements) a 64-bit integer type x64guard narrows that holds negative
    values (i64, si64): what int64 arithmetic computes in? Unsigned ui64 is not."""
    name = str(element_type(t))
    return name in NARROW_ELEMENT_TYPE and INTEGER_RANGE.get(name, (0, 0))[0] < 0


def read_attribute(op: ir.Operation | ir.OpView, name: str) -> ir.Attribute | None:
    """`op.attributes[name]`, or None when the op has no such attribute or the bindings
    cannot hand it over: they downcast attributes to their Python classes and raise
    TypeError for some (dense attributes of complex elements, "Can't cast"; attributes of
    dialects the bindings do not know). Such an attribute is read from the op's text."""
    try:
        return op.attributes[name]
    except (KeyError, TypeError):
        return None


def main_function(module: ir.Module) -> ir.Operation | None:
    """The module's `func.func @main` (the entry point JAX, torch-xla and jax.export use),
    or None when it has none."""
    for op in module.body.operations:
        operation = op.operation
        if operation.name != "func.func":
            continue
        sym_name = read_attribute(operation, "sym_name")
        if sym_name is not None and ir.StringAttr(sym_name).value == "main":
            return operation
    return None

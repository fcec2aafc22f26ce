"""Small helpers for rules that match op graphs: producers, splat constants, builders.

Matching is structural: op names, element types, shapes and constant values, read from
the module itself (never from its printed text or from names alone).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from x64guard.passes.ir_queries import read_attribute

# Ops that only move or repeat a scalar constant into a shape (their first operand; a
# dynamic broadcast's second is the shape it broadcasts to).
_SPLAT_CARRIERS = ("stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.dynamic_broadcast_in_dim",
                   "stablehlo.convert")


def producer(value: ir.Value, name: str | None = None) -> ir.Operation | None:
    """The op defining `value` (None for a block argument, or if it is not a `name`)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if name is not None and op.name != name:
        return None
    return op


def result_number(value: ir.Value) -> int:
    return ir.OpResult(value).result_number


def element_spelling(t: ir.Type) -> str:
    return str(t.element_type if isinstance(t, ir.ShapedType) else t)


def shape_of(t: ir.Type) -> list[int] | None:
    if isinstance(t, ir.RankedTensorType) and t.has_static_shape:
        return list(t.shape)
    return None


def users(value: ir.Value) -> list[ir.Operation]:
    return [use.owner.operation if hasattr(use.owner, "operation") else use.owner for use in value.uses]


def splat_value(value: ir.Value, carriers: Iterable[str] = _SPLAT_CARRIERS[:3]):
    """The number every element of `value` holds, if it is a splat constant (possibly
    broadcast or reshaped); else None. Integers come back as Python ints as the element
    type reads them (unsigned types unsigned), floats as floats."""
    op = carried_from(value, carriers)
    if op is None or op.name != "stablehlo.constant":
        return None
    attr = read_attribute(op, "value")  # None for complex dense attributes
    if not isinstance(attr, (ir.DenseIntElementsAttr, ir.DenseFPElementsAttr)) or not attr.is_splat:
        return None
    scalar = attr.get_splat_value()
    if isinstance(scalar, ir.IntegerAttr):
        number = scalar.value
        element = ir.IntegerType(scalar.type)
        if element.is_unsigned and number < 0:
            number += 1 << element.width
        return number
    return scalar.value


def carried_from(value: ir.Value, carriers: Iterable[str], hops: int = 4) -> ir.Operation | None:
    """The op whose result reaches `value` through ops named in `carriers` (each passing on
    its first operand), at most `hops` ops back; None for a block argument or a longer chain."""
    for _ in range(hops):
        op = producer(value)
        if op is None or op.name not in carriers:
            return op
        value = op.operands[0]
    return None


def splat_chain(value: ir.Value) -> list[ir.Operation] | None:
    """[the splat constant, the ops carrying it to `value`...] when `value` is a splat that
    `splat_value` reads (without converts), else None."""
    chain: list[ir.Operation] = []
    for _ in range(4):
        op = producer(value)
        if op is None:
            return None
        chain.append(op)
        if op.name == "stablehlo.constant":
            return chain[::-1]
        if op.name not in _SPLAT_CARRIERS[:3]:
            return None
        value = op.operands[0]
    return None


def dense_values(value: ir.Value) -> np.ndarray | None:
    """The values of a (non-complex) dense constant, or None."""
    op = producer(value, "stablehlo.constant")
    if op is None:
        return None
    attr = read_attribute(op, "value")
    if not isinstance(attr, (ir.DenseIntElementsAttr, ir.DenseFPElementsAttr)):
        return None
    if attr.is_splat:
        return np.array([attr.get_splat_value().value])
    return np.asarray(attr).ravel()


# ---- builders (call inside `with ir.InsertionPoint(...), location:`) -------------------

def tensor_type(like: ir.Type, element: str) -> ir.RankedTensorType:
    """`like`'s shape with another element type."""
    return ir.RankedTensorType.get(list(ir.RankedTensorType(like).shape), ir.Type.parse(element))


def splat(like: ir.Type, element: str, number) -> ir.Value:
    """A constant of `like`'s shape filled with `number` (a scalar broadcast, as JAX writes it)."""
    scalar_type = ir.RankedTensorType.get([], ir.Type.parse(element))
    scalar_element = scalar_type.element_type
    if isinstance(scalar_element, ir.IntegerType):
        attr = ir.IntegerAttr.get(scalar_element, int(number))
    else:
        attr = ir.FloatAttr.get(scalar_element, float(number))
    scalar = stablehlo.constant(ir.DenseElementsAttr.get_splat(scalar_type, attr))
    shape = list(ir.RankedTensorType(like).shape)
    if not shape:
        return scalar
    return stablehlo.broadcast_in_dim(tensor_type(like, element), scalar, [])


def convert(value: ir.Value, element: str) -> ir.Value:
    return stablehlo.convert(tensor_type(value.type, element), value)

"""Reading and writing constant values through the MLIR bindings.

Dense int/float attributes expose a buffer. Two kinds do not, in these bindings:
complex dense attributes (reading them raises TypeError; indexing attributes by
position aborts the process) and `dense_resource` blobs. For those the printed form of
the one attribute or blob is decoded: hex (`"0x..."`, raw little-endian bytes) or a
list of (re,im) literals that MLIR prints so that they round-trip exactly.
"""

from __future__ import annotations

import re

import numpy as np
from jax.extend.mlir import ir

from x64guard.passes.ir_queries import read_attribute
from x64guard.passes.tables import NUMPY_DTYPE

_DENSE_BODY = re.compile(r"value = dense<(.*)> : tensor<", re.S)
_RESOURCE_BLOB = re.compile(r'dialect_resources:\s*\{\s*builtin:\s*\{\s*[\w.$-]+:\s*"0x([0-9A-Fa-f]*)"')
_NUMBER = re.compile(r"[-+]?0x[0-9A-Fa-f]+|[-+]?(?:inf|nan)|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


class UnreadableConstant(ValueError):
    pass


def read_constant(op: ir.Operation, result_type: ir.Type) -> tuple[np.ndarray, bool]:
    """(values, is_splat). A splat comes back as a 0-d array."""
    dtype = NUMPY_DTYPE[str(element_of(result_type))]
    attr = read_attribute(op, "value")
    if attr is None:  # complex dense attributes cannot be cast by the bindings
        return _read_printed_dense(op, dtype, result_type)
    read = read_number_attribute(attr, result_type)
    if read is not None:
        return read
    if isinstance(attr, ir.DenseResourceElementsAttr) or str(attr).startswith("dense_resource<"):
        return _read_resource(op, dtype, result_type), False
    raise UnreadableConstant(f"unsupported constant attribute {str(attr)[:80]}")


def read_number_attribute(attr: ir.Attribute, result_type: ir.Type) -> tuple[np.ndarray, bool] | None:
    """(values, is_splat) of a dense int/float attribute or a scalar one, the kinds the
    bindings hand over as numbers; None for any other (complex, dense_resource)."""
    dtype = NUMPY_DTYPE[str(element_of(result_type))]
    if isinstance(attr, (ir.DenseIntElementsAttr, ir.DenseFPElementsAttr)):
        if attr.is_splat:
            return np.array(attr.get_splat_value().value, dtype=dtype), True
        return np.asarray(attr).astype(dtype, copy=False).reshape(result_type.shape), False
    if isinstance(attr, (ir.IntegerAttr, ir.FloatAttr)):
        return np.array(attr.value, dtype=dtype), True
    return None


def named_attributes(attr: ir.DictAttr) -> dict[str, ir.Attribute] | None:
    """The entries of a dictionary attribute, or None when one of them cannot be read.

    Entries the bindings cannot cast (dense attributes with complex elements, locations)
    raise TypeError when read by name but ABORT the process when read by position
    (`attr[i].attr`): names are taken by position (safe), values by name.
    """
    names = [attr[i].name for i in range(len(attr))]
    entries = {}
    for name in names:
        try:
            entries[name] = attr[name]
        except TypeError:
            return None
    return entries


def element_of(t: ir.Type) -> ir.Type:
    return t.element_type if isinstance(t, ir.ShapedType) else t


def constant_attribute(values: np.ndarray, splat: bool, new_type: ir.Type) -> ir.Attribute:
    """The `value` attribute of a constant of `new_type` holding `values`."""
    element = element_of(new_type)
    if not isinstance(new_type, ir.ShapedType):  # a scalar constant such as arith.constant 3 : i64
        return scalar_attr(element, values.item())
    is_complex = isinstance(element, ir.ComplexType)
    if splat and not is_complex:
        return ir.DenseElementsAttr.get_splat(new_type, scalar_attr(element, values.item()))
    if splat:
        values = np.full(new_type.shape, values, dtype=values.dtype)
    return ir.DenseElementsAttr.get(np.ascontiguousarray(values), type=element, shape=list(new_type.shape))


def scalar_attr(element: ir.Type, value) -> ir.Attribute:
    if isinstance(element, ir.IntegerType):
        return ir.IntegerAttr.get(element, int(value))
    return ir.FloatAttr.get(element, float(value))


def _read_printed_dense(op: ir.Operation, dtype: np.dtype, result_type: ir.Type) -> tuple[np.ndarray, bool]:
    text = op.get_asm(print_generic_op_form=True, large_elements_limit=None)
    match = _DENSE_BODY.search(text)
    if match is None:
        raise UnreadableConstant("cannot read the constant's value")
    body = match.group(1).strip()
    count = int(np.prod(result_type.shape))
    if body.startswith('"0x'):
        raw = np.frombuffer(bytes.fromhex(body[3:-1]), dtype=dtype)
    else:
        parts = [_number(tok, dtype) for tok in _NUMBER.findall(body)]
        if dtype.kind == "c":
            # Parts assigned, not added: re + 1j*im would turn -0.0 into 0.0 and inf+nan*j
            # into nan+nan*j.
            raw = np.empty(len(parts) // 2, dtype)
            raw.real, raw.imag = parts[0::2], parts[1::2]
        else:
            raw = np.array(parts, dtype=dtype)
    if raw.size == 1 and count != 1:
        return raw.reshape(()), True
    if raw.size != count:
        raise UnreadableConstant(f"constant holds {raw.size} values, its type {count}")
    return raw.reshape(result_type.shape), False


def _number(token: str, dtype: np.dtype) -> float:
    if "0x" in token.lower():
        bits = int(token, 16)
        width = 32 if dtype in (np.dtype(np.complex64), np.dtype(np.float32)) else 64
        return float(np.array(bits, dtype=np.uint64 if width == 64 else np.uint32)
                     .view(np.float64 if width == 64 else np.float32))
    return float(token)


def _read_resource(op: ir.Operation, dtype: np.dtype, result_type: ir.Type) -> np.ndarray:
    """A dense_resource blob: print a scratch module holding a clone of this one op
    (MLIR prints only the blobs the printed ops use) and decode the blob's hex."""
    with op.context, op.location:
        scratch = ir.Module.create()
        with ir.InsertionPoint(scratch.body):
            op.clone()
        text = scratch.operation.get_asm(large_resource_limit=None)
    match = _RESOURCE_BLOB.search(text)
    if match is None:
        raise UnreadableConstant("the dense_resource blob of this constant is missing or elided")
    blob = bytes.fromhex(match.group(1))
    values = np.frombuffer(blob[4:], dtype=dtype)  # the first 4 bytes are the alignment
    count = int(np.prod(result_type.shape))
    if values.size != count:
        raise UnreadableConstant(f"dense_resource blob holds {values.size} values, its type {count}")
    return values.reshape(result_type.shape)

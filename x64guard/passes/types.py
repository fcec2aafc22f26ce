"""The generic type converter: any MLIR type in, its narrowed counterpart out.

Scalars follow `tables.NARROW_ELEMENT_TYPE`; containers (ranked, unranked and
dynamically shaped tensors with their encodings, tuples, function types) are rebuilt
around their converted parts. Results are cached per type: MLIR types are uniqued, so a
module with 30,000 `tensor<4xf64>` values converts that type once.
"""

from __future__ import annotations

import re

from jax.extend.mlir import ir

from x64guard.passes.tables import ELEMENT_TYPE, NARROW_ELEMENT_TYPE

# A 64-bit scalar spelled anywhere in a type's text (complex<f64> spells f64).
_MENTIONS_64BIT = re.compile(r"\b(?:" + "|".join(re.escape(wide) for wide in NARROW_ELEMENT_TYPE
                                                  if wide.isalnum()) + r")\b")


class TypeConverter:
    """Maps types to narrowed types; `None` means "unchanged"."""

    def __init__(self, context: ir.Context):
        self._context = context
        self.cache: dict[ir.Type, ir.Type | None] = {}
        self._change_key: dict[ir.Type, str] = {}
        self._scalar: dict[str, ir.Type] = {}
        self._spelling: dict[ir.Type, str] = {}
        self._element_spelling: dict[ir.Type, str] = {}
        with context:
            for wide, narrow in NARROW_ELEMENT_TYPE.items():
                self._scalar[wide] = ir.Type.parse(narrow)
        # 64-bit types this converter does not know how to rebuild (vector<f64>, ...).
        self.unsupported: set[ir.Type] = set()

    @property
    def context(self) -> ir.Context:
        return self._context

    def convert(self, t: ir.Type) -> ir.Type | None:
        try:
            return self.cache[t]
        except KeyError:
            pass
        narrowed = self._convert_uncached(t)
        self.cache[t] = narrowed
        return narrowed

    def spelling(self, t: ir.Type) -> str:
        """str(t), cached (printing a type costs a round trip through C++)."""
        s = self._spelling.get(t)
        if s is None:
            s = self._spelling[t] = str(t)
        return s

    def element_spelling(self, t: ir.Type) -> str:
        """The element type's spelling of a shaped type (the type's own otherwise), cached."""
        s = self._element_spelling.get(t)
        if s is None:
            s = self._element_spelling[t] = str(t.element_type if isinstance(t, ir.ShapedType) else t)
        return s

    def change_key(self, t: ir.Type) -> str:
        """'f64->f32' for a type whose (innermost) 64-bit element narrows."""
        key = self._change_key.get(t)
        if key is None:
            wide = self._first_wide_scalar(t)
            key = f"{_short(wide)}->{_short(NARROW_ELEMENT_TYPE[wide])}" if wide else "other"
            self._change_key[t] = key
        return key

    def _first_wide_scalar(self, t: ir.Type) -> str | None:
        if isinstance(t, ir.ShapedType):
            return self._first_wide_scalar(t.element_type)
        if isinstance(t, ir.TupleType):
            for i in range(t.num_types):
                found = self._first_wide_scalar(t.get_type(i))
                if found:
                    return found
            return None
        if isinstance(t, ir.FunctionType):
            for part in list(t.inputs) + list(t.results):
                found = self._first_wide_scalar(part)
                if found:
                    return found
            return None
        s = str(t)
        return s if s in NARROW_ELEMENT_TYPE else None

    def _unsupported_if_element_is(self, t: ir.Type) -> None:
        """A tensor of an element type x64guard cannot rebuild (`!quant.uniform<i8:f64, ...>`)
        cannot be narrowed either: report the tensor, which is what ops carry."""
        if t.element_type in self.unsupported:
            self.unsupported.add(t)

    def _convert_uncached(self, t: ir.Type) -> ir.Type | None:
        with self._context:
            if isinstance(t, ir.RankedTensorType):
                element = self.convert(t.element_type)
                if element is None:
                    self._unsupported_if_element_is(t)
                    return None
                return ir.RankedTensorType.get(t.shape, element, t.encoding)
            if isinstance(t, ir.UnrankedTensorType):
                element = self.convert(t.element_type)
                if element is None:
                    self._unsupported_if_element_is(t)
                    return None
                return ir.UnrankedTensorType.get(element)
            if isinstance(t, ir.TupleType):
                parts = [t.get_type(i) for i in range(t.num_types)]
                converted = [self.convert(p) for p in parts]
                if all(c is None for c in converted):
                    return None
                return ir.TupleType.get_tuple([c or p for c, p in zip(converted, parts)])
            if isinstance(t, ir.FunctionType):
                inputs, results = list(t.inputs), list(t.results)
                new_inputs = [self.convert(p) for p in inputs]
                new_results = [self.convert(p) for p in results]
                if all(c is None for c in new_inputs + new_results):
                    return None
                return ir.FunctionType.get([c or p for c, p in zip(new_inputs, inputs)],
                                           [c or p for c, p in zip(new_results, results)])
            spelling = str(t)
            scalar = self._scalar.get(spelling)
            if scalar is None and _MENTIONS_64BIT.search(spelling):
                self.unsupported.add(t)
            return scalar


def _short(spelling: str) -> str:
    return ELEMENT_TYPE[spelling].short

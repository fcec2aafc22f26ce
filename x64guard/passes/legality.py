"""After a rewriting run: prove that no 64-bit element type is left.

What may stay 64-bit: structural attributes (dimension lists, padding: never read here),
and what the target profile keeps (the RNG state and the seed arithmetic that builds it,
with the public signatures that pass them; `PassRun.kept_ops`, `IdiomState.kept_signatures`).
Everything else a value or a type attribute carries must have narrowed. A failure is a bug
in x64guard: an internal error naming the op, never a silent return (as IREE's
`applyFullConversion` proves a conversion legal).

The pass checks each op during its one walk, right after the op's rules ran (and the ops
rules created, after the walk): no second walk. A failure only counts when the pass
refused nothing: a refused module is not narrowed by design.
"""

from __future__ import annotations

from typing import Iterable

from jax.extend.mlir import ir

from x64guard.errors import X64GuardError
from x64guard.passes.driver import PassRun, collect
from x64guard.passes.ir_queries import is_wide, read_attribute
from x64guard.passes.locations import LocationResolver
from x64guard.passes.tables import CHECK_DIALECT_OPS, never_has_type_attributes


class IllegalNarrowing(X64GuardError):
    """x64guard left a 64-bit type it should have narrowed: a bug in x64guard."""


class Legality:
    """The check, op by op: `check_op` right after the narrowing phase's patterns dealt
    with the op (every op the module keeps is collected before that phase; it reads the
    op's types again, as they are now, whatever the patterns did), `check_ops` for ops a
    pattern created during the phase (which the walk never reaches). The first failure
    is kept, not raised: a module with refusals is not narrowed by design, and the pass
    only knows at the end whether it refused something (`raise_first`)."""

    def __init__(self, run: PassRun) -> None:
        self._converter = run.converter
        self._kept = run.kept_ops
        self._signatures = getattr(run.idioms, "kept_signatures", None) or {}
        self._context = run.context
        self._wide: dict[ir.Type, bool] = {}  # type -> still 64-bit (types are uniqued: few distinct ones)
        self._type_attributes: dict[str, bool] = {}  # op name -> may carry TypeAttrs
        # op name -> only its results can hold a type (registered, no regions, no TypeAttrs)
        self._plain: dict[str, bool] = {}
        # The first failure, described when found (the op may be erased by `finish` before
        # the pass raises it).
        self.failure: str | None = None

    def _still_wide(self, t: ir.Type) -> bool:
        """`is_wide`, or a 64-bit type the converter could not rebuild (cached per type)."""
        found = self._wide.get(t)
        if found is None:
            converter = self._converter
            converter.convert(t)  # records a type it cannot rebuild in `unsupported`
            found = self._wide[t] = is_wide(t) or t in converter.unsupported
        return found

    def _is_convertible(self, t: ir.Type) -> bool:
        return self._converter.convert(t) is not None

    def check_op(self, op: ir.Operation, name: str, function: str) -> None:
        """Check `op` as it is now (called for every op: written for speed)."""
        if self.failure is not None:
            return
        wide = self._wide
        for t in op.results.types:
            if wide.get(t) is not False:  # 64-bit, or a type not seen yet
                self._check_results(op, function)
                break
        plain = self._plain.get(name)
        if plain is None:
            plain = self._plain[name] = (never_has_type_attributes(name) and name not in CHECK_DIALECT_OPS
                                         and self._context.is_registered_operation(name) and not len(op.regions))
        if not plain:
            self._check_structure(op, name, function)

    def _check_results(self, op: ir.Operation, function: str) -> None:
        for index, t in enumerate(op.results.types):
            if self._still_wide(t) and self.failure is None:
                self.failure = _describe(op, f"result #{index} is {t}", function)

    def _check_structure(self, op: ir.Operation, name: str, function: str) -> None:
        """Block arguments, type attributes and `check` expectations."""
        if self.failure is not None:
            return
        kept_arguments: frozenset = frozenset()
        signature = self._signatures.get(function) if name == "func.func" else None
        if signature is not None:
            kept_arguments = signature[0]
        if len(op.regions):
            for region in op.regions:
                for number, block in enumerate(region.blocks):
                    for arg in block.arguments:
                        if self._still_wide(arg.type) and not (number == 0 and arg.arg_number in kept_arguments):
                            what = f"a block argument (#{arg.arg_number}) is {arg.type}"
                            self.failure = _describe(op, what, function)
                            return
        may_have = self._type_attributes.get(name)
        if may_have is None:
            may_have = self._type_attributes[name] = not (never_has_type_attributes(name)
                                                          and self._context.is_registered_operation(name))
        if may_have:
            # TypeAttrs: only types the converter rebuilds. A foreign type mentioning f64
            # (`!foo.bar<f64>`) in an attribute is opaque data the pass leaves as it is
            # (values of such types are refused by the generic rule instead).
            what = _wide_type_attribute(op, self._is_convertible, signature)
            if what is not None:
                self.failure = _describe(op, what, function)
                return
        expected = CHECK_DIALECT_OPS.get(name)
        if expected and expected in op.attributes:
            value = read_attribute(op, expected)  # None for complex dense attributes: their type is in the text
            # Only an expected value of the checked operand's type narrows with it (one of
            # another type is left as it is: patterns/check_ops.py).
            if isinstance(value, ir.DenseElementsAttr) and self._still_wide(value.type) and len(op.operands) == 1 \
                    and op.operands[0].type == self._converter.convert(value.type):
                self.failure = _describe(op, f"its expected value is {value.type}", function)

    def check_ops(self, ops: Iterable[ir.Operation], function: str = "?") -> None:
        for op in ops:
            if not (self._kept and op in self._kept):
                self.check_op(op, op.name, function)

    def raise_first(self) -> None:
        """Raise IllegalNarrowing for the first op that failed, if one did."""
        if self.failure is not None:
            raise IllegalNarrowing(self.failure)


def check_legality(module: ir.Module, run: PassRun) -> None:
    """The whole module, walked on its own (for tests and debugging; the pass checks op
    by op during its walk): raise IllegalNarrowing at the first op, in walk order, that
    still has a 64-bit type outside what the run keeps."""
    legality = Legality(run)
    walked = collect(module)
    for op, name, function in zip(walked.ops, walked.names, walked.functions):
        if not (run.kept_ops and op in run.kept_ops):
            legality.check_op(op, name, function)
    legality.raise_first()


def _wide_type_attribute(op: ir.Operation, narrows, signature) -> str | None:
    attributes = op.attributes
    for attr_name in list(attributes):
        attr = read_attribute(op, attr_name)  # None: the bindings cannot cast it, never a TypeAttr
        if not isinstance(attr, ir.TypeAttr) or not narrows(attr.value):
            continue
        if signature is not None and attr_name == "function_type":
            kept_arguments, kept_results = signature
            function_type = ir.FunctionType(attr.value)
            if not any(narrows(t) for i, t in enumerate(function_type.inputs) if i not in kept_arguments) \
                    and not any(narrows(t) for i, t in enumerate(function_type.results) if i not in kept_results):
                continue
        return f"its attribute {attr_name} is {attr.value}"
    return None


def _describe(op: ir.Operation, what: str, function: str) -> str:
    where = LocationResolver().resolve(op.location)
    place = f"{where}" if where is not None else f"@{function}"
    return (f"x64guard internal error: after narrowing, {op.name} at {place} still has a 64-bit type ({what}) "
            "that nothing reported; this is a bug in x64guard, please report it with the input module")

"""Every mutation of a module goes through a `Rewriter`.

`Rewriter` changes the module: types, attributes, operands, locations, new ops (and their
regions' blocks) at an insertion point it grants, block arguments, uses, erasures (some
deferred until the walk is over: a pre-order walk must not lose the op it stands on). The
front ends' edits (x64guard/torch_xla/: its RNG inputs, overflow checks, result dtypes and
source locations) go through one too, with no deferred change (no `finish`).
`RecordingRewriter` is its twin for `mode='allow'` and `check`: the same methods, which
count what would change and touch nothing. Patterns never ask which one they were given;
one that tried to mutate the module without a rewriter would be caught by
tests/passes/test_driver.py (no pattern module calls a mutating binding directly), and one
that asked a recording rewriter for an insertion point would fail loudly instead of
half-narrowing a module reported as unchanged.
"""

from __future__ import annotations

import contextlib
import io
from collections import Counter
from typing import Callable, Iterator, Sequence

from jax.extend.mlir import ir

from x64guard.passes.ir_queries import read_attribute


class RecordingRewriterCannotBuild(RuntimeError):
    """A rule asked a recording rewriter for something only a real rewrite can give."""


class Rewriter:
    """Mutates the module it is applied to."""

    mutates = True

    def __init__(self) -> None:
        # Values whose type this rewriter changed, keyed by the value's hash (its MLIR
        # identity; nothing is erased during the walk), with their type before: patterns
        # see operands already narrowed, and some must judge what they were (a custom_call
        # whose only 64-bit types are its operands).
        self.types_before: dict[int, ir.Type] = {}
        # A constant's `value` before this rewriter first changed it, keyed by the hash of
        # its result (Python op objects do not hash stably; values do): a convert of it is
        # judged by what the 64-bit module computes (patterns/casts.py). Attributes are
        # uniqued, so this holds references, not copies.
        self.values_before: dict[int, ir.Attribute | None] = {}
        self._forwarded: list[tuple[ir.Operation, int]] = []
        self._replaced: list[tuple[ir.Operation, ir.Operation]] = []
        self._erased_functions: set[str] = set()

    def type_before(self, value: ir.Value) -> ir.Type:
        """`value`'s type before this rewriter changed it (its type now if it did not)."""
        if self.types_before:
            before = self.types_before.get(hash(value))
            if before is not None:
                return before
        return value.type

    def value_before(self, op: ir.Operation) -> ir.Attribute | None:
        """`op`'s `value` attribute before this rewriter changed it (None when the bindings
        cannot hand it over: complex elements)."""
        key = hash(op.results[0])
        if key in self.values_before:
            return self.values_before[key]
        return read_attribute(op, "value")

    # --- in place, during the walk ------------------------------------------------------
    def set_type(self, value: ir.Value, new: ir.Type, old: ir.Type) -> None:
        value.set_type(new)
        self.types_before[hash(value)] = old

    def set_attribute(self, op: ir.Operation, name: str, attr: "ir.Attribute | Callable[[], ir.Attribute]") -> None:
        """`attr` may be a function that builds it (a large constant's values): only a
        rewriting run calls it."""
        if name == "value" and len(op.results) == 1:
            self.values_before.setdefault(hash(op.results[0]), read_attribute(op, name))
        op.attributes[name] = attr() if callable(attr) else attr

    def set_operand(self, op: ir.Operation, index: int, value: ir.Value) -> None:
        """`op`'s operand `index` becomes `value`."""
        op.operands[index] = value

    def set_location(self, op: ir.Operation, location: ir.Location) -> None:
        """A front end's relocation (the model's source line): types and uses unchanged."""
        op.location = location

    def set_function_type(self, function: ir.Operation, inputs: Sequence[ir.Type], results: Sequence[ir.Type]) -> None:
        """`function`'s `function_type` after its block's arguments or its return changed."""
        self.set_attribute(function, "function_type",
                           ir.TypeAttr.get(ir.FunctionType.get(list(inputs), list(results))))

    # --- deferred until the walk is over --------------------------------------------------
    def forward_operand(self, op: ir.Operation, index: int = 0) -> None:
        """After the walk, `op`'s single result is replaced by its operand `index` (the
        first by default); `op` is erased."""
        self._forwarded.append((op, index))

    def replace_op(self, op: ir.Operation, name: str, results: Sequence[ir.Type], operands: Sequence[ir.Value],
                   attributes: dict | None) -> None:
        """A new `name` op is created before `op`; after the walk it takes over `op`'s uses
        and `op` is erased."""
        with ir.InsertionPoint(op), op.location:
            replacement = ir.Operation.create(name, results=list(results), operands=list(operands),
                                              attributes=attributes)
        self._replaced.append((op, replacement))

    def erase_function(self, name: str) -> None:
        """After the walk, the module's function `name` is erased."""
        self._erased_functions.add(name)

    def finish(self, module: ir.Module) -> list[ir.Operation]:
        """Carry out the deferred changes; returns the ops `replace_op` created (the walk
        never reached them: the legality check looks at them here)."""
        # The operand is read only now, in walk order: when `op` forwards the result of
        # an op forwarded before it (convert(convert(x))), its operand already is `x`.
        # Holding the Value from walk time would dangle once its producer is erased.
        for op, index in self._forwarded:
            op.results[0].replace_all_uses_with(op.operands[index])
            op.erase()
        self._forwarded.clear()
        created = []
        for op, replacement in self._replaced:
            for old, new in zip(op.results, replacement.results):
                old.replace_all_uses_with(new)
            op.erase()
            created.append(replacement)
        self._replaced.clear()
        if self._erased_functions:
            for op in list(module.body.operations):
                op = op.operation
                if op.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value in self._erased_functions:
                    op.erase()
            self._erased_functions.clear()
        return created

    # --- immediately (the idiom phase rewrites before the walk) ---------------------------
    @contextlib.contextmanager
    def insert_before(self, op: ir.Operation) -> Iterator[None]:
        """Ops built inside (dialect builders, `create_op`) go before `op`, at its location."""
        with ir.InsertionPoint(op), op.location:
            yield

    @contextlib.contextmanager
    def insert_after(self, op: ir.Operation) -> Iterator[None]:
        with ir.InsertionPoint.after(op), op.location:
            yield

    @contextlib.contextmanager
    def insert_at_end(self, block: ir.Block) -> Iterator[None]:
        """Ops built inside go at the end of `block` (the body of an op `create_op` made
        with regions), at the location of the enclosing context."""
        with ir.InsertionPoint(block):
            yield

    def create_op(self, name: str, results: Sequence[ir.Type], operands: Sequence[ir.Value],
                  attributes: dict | None = None, regions: int = 0) -> ir.Operation:
        """A new op at the current insertion point (inside `insert_before`/`insert_after`/
        `insert_at_end`); `regions` empty regions, filled with `append_block`."""
        return ir.Operation.create(name, results=list(results), operands=list(operands), attributes=attributes,
                                   regions=regions)

    def append_block(self, region: ir.Region, argument_types: Sequence[ir.Type]) -> ir.Block:
        """A new last block of `region` (of an op `create_op` made), with arguments of `argument_types`."""
        return region.blocks.append(*argument_types)

    def add_argument(self, block: ir.Block, type_: ir.Type, location: ir.Location) -> ir.Value:
        """A new last argument of `block` (a front end's new program input); the function's
        `function_type` is the caller's to update (`set_function_type`)."""
        return block.add_argument(type_, location)

    def erase_argument(self, block: ir.Block, index: int) -> None:
        """`block`'s argument `index`, which must have no uses left; `function_type` as above."""
        block.erase_argument(index)

    def replace_all_uses(self, value: ir.Value, new: ir.Value, *, except_in: ir.Operation | None = None) -> None:
        if except_in is None:
            value.replace_all_uses_with(new)
        else:
            value.replace_all_uses_except(new, except_in)

    def replace_uses_in(self, op: ir.Operation, value: ir.Value, new: ir.Value) -> None:
        """Uses of `value` by `op` only."""
        op.replace_uses_of_with(value, new)

    def retype(self, value: ir.Value, new: ir.Type) -> None:
        """An idiom rule's type change (not a narrowing: nothing to remember)."""
        value.set_type(new)

    def erase(self, op: ir.Operation) -> None:
        op.erase()

    def scratch_copy(self, module: ir.Module) -> ir.Module:
        """The module itself: a rewriting run works on what it was given."""
        return module


class RecordingRewriter(Rewriter):
    """The twin of `Rewriter` for `mode='allow'` and `check`: counts what would change
    (`recorded`), changes nothing."""

    mutates = False

    def __init__(self) -> None:
        super().__init__()
        self.recorded: Counter[str] = Counter()

    def set_type(self, value: ir.Value, new: ir.Type, old: ir.Type) -> None:
        self.recorded["set_type"] += 1

    def set_attribute(self, op: ir.Operation, name: str, attr) -> None:
        self.recorded["set_attribute"] += 1

    def forward_operand(self, op: ir.Operation, index: int = 0) -> None:
        self.recorded["forward_operand"] += 1

    def replace_op(self, op, name, results, operands, attributes) -> None:
        self.recorded["replace_op"] += 1

    def erase_function(self, name: str) -> None:
        self.recorded["erase_function"] += 1

    def finish(self, module: ir.Module) -> list[ir.Operation]:
        return []

    def insert_before(self, op: ir.Operation):
        raise RecordingRewriterCannotBuild("x64guard internal error: a recording run cannot insert ops")

    insert_after = insert_before

    insert_at_end = insert_before

    def create_op(self, *args, **kwargs):
        raise RecordingRewriterCannotBuild("x64guard internal error: a recording run cannot create ops")

    def append_block(self, *args, **kwargs):
        raise RecordingRewriterCannotBuild("x64guard internal error: a recording run cannot create blocks")

    def add_argument(self, *args, **kwargs):
        raise RecordingRewriterCannotBuild("x64guard internal error: a recording run cannot add arguments")

    def set_operand(self, op, index, value) -> None:
        self.recorded["set_operand"] += 1

    def set_location(self, op, location) -> None:
        self.recorded["set_location"] += 1

    def erase_argument(self, block, index) -> None:
        self.recorded["erase_argument"] += 1

    def replace_all_uses(self, value, new, *, except_in=None) -> None:
        self.recorded["replace_all_uses"] += 1

    def replace_uses_in(self, op, value, new) -> None:
        self.recorded["replace_uses_in"] += 1

    def retype(self, value, new) -> None:
        self.recorded["retype"] += 1

    def erase(self, op) -> None:
        self.recorded["erase"] += 1

    def scratch_copy(self, module: ir.Module) -> ir.Module:
        """A copy in the same context that a rewriting phase may change while this run
        records: the idiom phase of a recording run rewrites this copy, so that the walk
        reads exactly the module a rewriting run would (bytecode keeps locations; cheap
        next to a parse of text). Made only when an idiom rule may apply."""
        buffer = io.BytesIO()
        module.operation.write_bytecode(buffer)
        return ir.Module.parse(buffer.getvalue(), context=module.context)

"""When an overflow check cannot fire, whatever the program computes: from its inputs' magnitudes.

`overflow_checks.guard` adds a check beside each signed 64-bit op the range analysis cannot
prove stays in int32 for inputs anywhere in int32's range. Many it can prove for small
inputs: `ids + 1000`, an embedding's backward fixing up negative indices, or `index + 6`,
torch's negative index constants made positive. For each check this finds the main
function's signed integer arguments its operands are computed from (a backward slice), and
the largest M of a ladder of powers of two for which the same analysis, those arguments
seeded with [-M, M], proves the op safe. A front end that knows its inputs' magnitudes
(values it range-checked on the host) need not read such a flag back, and reading it back
waits for the device on every call.

The proof is the analysis's own: it is monotone in its inputs' ranges, so a check proved
for [-M, M] is proved for every smaller range. A check whose operands come from no
argument, or from one of another type, is never settled this way (magnitude -1).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from jax.extend.mlir import ir

# descending: the first M that proves a check is the largest of the ladder that does
LADDER = tuple(2 ** e for e in (30, 28, 24, 20, 16, 15, 12, 8, 4, 0))
# where a module has integer results, the ladder goes at least this far down for their
# bounds (ids and positions are mostly below it), even when its checks are all settled
OUTPUT_FLOOR = 2 ** 16


@dataclasses.dataclass(frozen=True)
class SettledBelow:
    """A check cannot fire when each of main's arguments numbered in `arguments` holds
    values of magnitude at most `magnitude` (-1: no magnitude settles it)."""

    arguments: tuple[int, ...]
    magnitude: int

    def holds(self, magnitude_of: Callable[[int], "int | None"]) -> bool:
        if self.magnitude < 0:
            return False
        for argument in self.arguments:
            known = magnitude_of(argument)
            if known is None or known > self.magnitude:
                return False
        return True


@dataclasses.dataclass(frozen=True)
class OutputBound:
    """An integer result of main holds values of magnitude at most `bounds[k][1]` when each of
    main's arguments numbered in `arguments` holds values of magnitude at most `bounds[k][0]`
    (and the call was not refused: a range past a check is the range the check allows)."""

    arguments: tuple[int, ...]
    bounds: tuple[tuple[int, int], ...]     # (argument magnitude, result magnitude), ascending

    def given(self, magnitude_of: Callable[[int], "int | None"]) -> "int | None":
        largest = 0
        for argument in self.arguments:
            known = magnitude_of(argument)
            if known is None:
                return None
            largest = max(largest, known)
        return next((result for limit, result in self.bounds if largest <= limit), None)


def _seedable(value_type) -> bool:
    """Signed (signless) 32- and 64-bit integer tensors: the arguments whose magnitude a
    front end may know. Narrower integers keep their type's range."""
    if not isinstance(value_type, ir.RankedTensorType):
        return False
    element = ir.RankedTensorType(value_type).element_type
    return isinstance(element, ir.IntegerType) and ir.IntegerType(element).width in (32, 64) \
        and not ir.IntegerType(element).is_unsigned


def _arguments_reaching(op, block, memo: dict) -> frozenset:
    """The numbers of `block`'s arguments that `op`'s operands, or the operands of any op
    nested in its regions, are computed from (a superset: every def-use edge counts)."""
    key = op.operation if hasattr(op, "operation") else op
    found = memo.get(key)
    if found is not None:
        return found
    memo[key] = frozenset()     # (no cycles in SSA; this only stops a revisit)
    reached: set = set()
    for value in key.operands:
        owner = value.owner
        if isinstance(owner, ir.Block):
            if owner == block:
                reached.add(ir.BlockArgument(value).arg_number)
            continue
        reached |= _arguments_reaching(owner, block, memo)
    for region in key.regions:
        for inner_block in region.blocks:
            for inner in inner_block.operations:
                reached |= _arguments_reaching(inner, block, memo)
    memo[key] = frozenset(reached)
    return memo[key]


def settled_below(operations: Sequence, block, checked: Sequence, analysis: Callable[[dict], Any],
                  results: Sequence = ()) -> tuple[list[SettledBelow], list["OutputBound | None"]]:
    """One `SettledBelow` per op of `checked` (the ops a full-range analysis of `operations`,
    main's ops, checked, in its order), and an `OutputBound` per value of `results` (main's
    returned values; None for one not a 32- or 64-bit signed integer, or bounded by no
    argument). `analysis(seeds)` makes a fresh analysis that builds nothing, its block
    arguments' ranges seeded; its `visit(op)` records what it would check in `.checked`,
    and `.range(value)` gives a value's range."""
    arguments = [a for a in block.arguments if _seedable(a.type)]
    memo: dict = {}
    reaching = [tuple(sorted(n for n in _arguments_reaching(op, block, memo)
                             if _seedable(block.arguments[n].type))) for op in checked]
    magnitudes = [-1] * len(checked)
    open_checks = {op.operation: k for k, op in enumerate(checked)}
    bounded = {k: (_result_arguments(value, block, memo), []) for k, value in enumerate(results)
               if _seedable(value.type)}
    for magnitude in LADDER if arguments else ():
        run = analysis({a: (-magnitude, magnitude) for a in arguments})
        with ir.Location.unknown():
            for op in operations:
                run.visit(op.operation)
        still = {op.operation for op in run.checked}
        for key in [key for key in open_checks if key not in still]:
            magnitudes[open_checks.pop(key)] = magnitude
        for k, (_, levels) in bounded.items():
            lo, hi = run.range(results[k])
            levels.append((magnitude, max(abs(lo), abs(hi))))
        if not open_checks and (not bounded or magnitude <= OUTPUT_FLOOR):
            break
    outputs = [None] * len(results)
    for k, (args, levels) in bounded.items():
        if args and levels and levels[-1][1] < 2 ** 31 - 1:
            outputs[k] = OutputBound(args, tuple(sorted(levels)))
    return [SettledBelow(args, m) for args, m in zip(reaching, magnitudes)], outputs


def _result_arguments(value, block, memo: dict) -> tuple[int, ...]:
    if isinstance(value.owner, ir.Block):      # an argument returned as it is
        return (ir.BlockArgument(value).arg_number,) if value.owner == block else ()
    return tuple(sorted(n for n in _arguments_reaching(value.owner, block, memo)
                        if _seedable(block.arguments[n].type)))

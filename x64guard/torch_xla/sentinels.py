"""Integer scalars of a lazy graph: torch-xla's sentinels, narrowed exactly; every other
64-bit scalar range-checked, and refused at the model's line.

torch-xla sends a Python number an op takes to the device as a 0-dim parameter of the lazy
graph (the backend inlines them as constants while it traces: `_private.inline_scalars`).
A one-sided int64 clamp (`t.clamp(min=0)`) fills its open bound with INT64_MAX or INT64_MIN,
and `masked_fill(m, torch.iinfo(torch.int64).max)` fills with the extreme itself. The core
pass maps those constants to int32's extremes (tables.INTEGER_SENTINELS), what JAX traces
with x64 off. Here the same holds for a parameter, and only where the module proves that
the value just bounds a clamp, a `minimum` or a `maximum` on the open side, or fills
(a branch of `select`, or a result): the parameter reaches those ops only through
`broadcast_in_dim` / `reshape`. Its value is read on every call (as every 64-bit scalar
of a lazy graph already is) and mapped only when it is that sentinel.
"""

from __future__ import annotations

import dataclasses

import torch
from jax.extend.mlir import ir

from x64guard.findings import Finding, Kind, Severity
from x64guard.errors import X64GuardError
from x64guard.passes.ir_queries import main_function
from x64guard.passes.locations import parse_location
from x64guard.passes.tables import INTEGER_SENTINELS
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.overflow import NO_LINE

_SENTINELS = INTEGER_SENTINELS["i64"]
_MIN, _MAX = min(_SENTINELS), max(_SENTINELS)
_BOTH = frozenset(_SENTINELS)
_WIDE_INTEGER = frozenset({"i64", "si64"})
_PASSING = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape"})
# op -> {operand position: the sentinel(s) that leave the result as if the bound were absent}
_BOUNDS = {
    "stablehlo.clamp": {0: frozenset({_MIN}), 2: frozenset({_MAX})},
    "stablehlo.minimum": {0: frozenset({_MAX}), 1: frozenset({_MAX})},
    "stablehlo.maximum": {0: frozenset({_MIN}), 1: frozenset({_MIN})},
    "stablehlo.select": {1: _BOTH, 2: _BOTH},        # a fill: masked_fill, where
}
_RESULT = "func.return"                               # a full(iinfo.max) the step returns: a fill


@dataclasses.dataclass(frozen=True)
class ScalarUse:
    """One 64-bit integer parameter of a lazy graph: which sentinels it may hold (empty:
    none; every value must fit), and where the model uses it, for refusals."""

    sentinels: frozenset
    where: str


def scalar_uses(module: ir.Module) -> dict[int, ScalarUse]:
    """Per 0-dim 64-bit integer parameter of the main function (by position), the
    sentinels its uses allow and the first op that uses it. Call after the module's ops
    were given the model's lines and before the pass narrows it."""
    main = main_function(module)
    found = {}
    for argument in main.regions[0].blocks[0].arguments:
        kind = argument.type
        if not isinstance(kind, ir.RankedTensorType) or kind.rank != 0 or str(kind.element_type) not in _WIDE_INTEGER:
            continue
        allowed, first = _allowed(argument, _BOTH)
        found[argument.arg_number] = ScalarUse(allowed, _describe(first))
    return found


def _allowed(value: ir.Value, allowed: frozenset, depth: int = 0) -> tuple[frozenset, "ir.Operation | None"]:
    """The sentinels every use of `value` leaves harmless (through broadcasts and
    reshapes), and the first op that computes with it (past those)."""
    first = None
    for use in value.uses:
        op = use.owner.operation if hasattr(use.owner, "operation") else use.owner
        if op.name in _PASSING and depth < 8:
            inner, consumer = _allowed(op.results[0], allowed, depth + 1)
            allowed &= inner
            first = first or consumer or op
            continue
        first = first or op
        if op.name != _RESULT:
            allowed &= _BOUNDS.get(op.name, {}).get(use.operand_number, frozenset())
    return allowed, first


def _describe(op: "ir.Operation | None") -> str:
    if op is None:
        return "a scalar of the lazy graph no op uses"
    where, _ = parse_location(str(op.location))
    line = f" at {where.file}:{where.line}" if where is not None and where.file not in (None, "-", "") else \
        f" ({NO_LINE})"
    return f"a Python number of the lazy graph, taken by {op.name}{line}"


def scalar_input(value: torch.Tensor, dtype: torch.dtype, use: ScalarUse, device: torch.device) -> torch.Tensor:
    """A 64-bit 0-dim parameter as the narrowed program takes it: a sentinel its uses
    allow becomes int32's; any other value must fit in `dtype`, else it is refused at
    the op that takes it (x64guard never wraps a value the step passed)."""
    number = int(value.cpu())
    if number in use.sentinels:
        number = _SENTINELS[number]
    info = torch.iinfo(dtype)
    if not info.min <= number <= info.max:
        message = (f"{use.where}: value {number} does not fit in {str(dtype).removeprefix('torch.')}; x64guard "
                   f"never wraps it (only INT64_MAX / INT64_MIN bounding a clamp or filling narrow, to int32's). "
                   f"Use a number in [{info.min}, {info.max}], or run this step in 64 bits (torch_xla.sync())")
        finding = Finding(Kind.INPUT_OUT_OF_RANGE, Severity.ERROR, "argument", use.where, message)
        raise X64GuardError(f"x64guard.torch_xla.sync: {message}", [finding])
    with _xc.device_data_transfers():
        return torch.tensor(number, dtype=dtype).to(device)

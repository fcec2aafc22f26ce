"""torch-xla's lowering of a graph read in this process and adapted for the core pass: its
result dtypes, its RNG seed, and its integer scalars (torch-xla's INT64_MAX / INT64_MIN
sentinels, below). (Its spelling of erf and of float32 scalar compares are rules
of the pass: x64guard/passes/patterns/spellings.py.)"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Sequence

import numpy as np
import torch
from jax.extend.mlir import ir

from x64guard.errors import X64GuardError
from x64guard.findings import Finding, Kind, Severity
from x64guard.io import modules as xmlir
from x64guard.passes.ir_queries import main_function
from x64guard.passes.locations import parse_location
from x64guard.passes.rewriter import Rewriter
from x64guard.passes.tables import INTEGER_SENTINELS
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.base import MLIR_ELEMENT
from x64guard.torch_xla.failures import refusal
from x64guard.torch_xla.small_values import upload
from x64guard.torch_xla.overflow import NO_LINE
from x64guard.torch_xla.rng import RngStateError, RngStates, extract_rng_states


def _match_result_dtypes(module, dtypes: Sequence[torch.dtype]) -> int:
    """Make each result of the main function the element type of the tensor it computes.

    torch-xla's lowering may compute a tensor in another element type than the tensor's
    own and convert when it is read: native_dropout's mask, a bool tensor, is lowered as
    float32 holding 0 and 1/(1-p). Returned as it is, the mask reaches AOTAutograd's
    backward graph as float32 and scales the gradient twice (openxla does exactly that:
    its dropout gradients are 1/(1-p) too large). Here the result is converted as
    torch-xla converts it on reading (to bool: `!= 0`). Returns how many results changed."""
    from jax.extend.mlir import ir

    main = main_function(module)
    block = main.regions[0].blocks[0]
    terminator = block.operations[len(block.operations) - 1]
    rewriter = Rewriter()
    changed = 0
    with module.context, terminator.location:
        for k, (value, dtype) in enumerate(zip(list(terminator.operands), dtypes)):
            want = MLIR_ELEMENT.get(dtype)
            shaped = ir.RankedTensorType(value.type)
            if want is None or str(shaped.element_type) == want:
                continue
            target = ir.RankedTensorType.get(shaped.shape, ir.Type.parse(want))
            with rewriter.insert_before(terminator):
                if dtype is torch.bool:
                    zero = rewriter.create_op("stablehlo.constant", [value.type], [], {
                        "value": ir.DenseElementsAttr.get_splat(value.type, _zero_attr(shaped.element_type))})
                    converted = rewriter.create_op(
                        "stablehlo.compare", [target], [value, zero.result],
                        {"comparison_direction": ir.Attribute.parse("#stablehlo<comparison_direction NE>")})
                else:
                    converted = rewriter.create_op("stablehlo.convert", [target], [value])
            rewriter.set_operand(terminator, k, converted.result)
            changed += 1
        if changed:
            function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
            rewriter.set_function_type(main, function_type.inputs, [v.type for v in terminator.operands])
    return changed


def _zero_attr(element):
    from jax.extend.mlir import ir

    if isinstance(element, ir.IntegerType):
        return ir.IntegerAttr.get(element, 0)
    return ir.FloatAttr.get(element, 0.0)


class _Lowering(NamedTuple):
    """torch-xla's lowering of a graph, prepared for the pass."""

    module: Any                     # the MLIR module, adapted in place
    text: str                       # its text as torch-xla lowered it, before any change
    seed_index: int | None          # where torch-xla's seed is among the graph's inputs
    rng: RngStates | None           # the generator states x64guard computes on the host


def read_lowering(bytecode: bytes, ids: list, out_dtypes: list, advice: str = "") -> _Lowering:
    """torch-xla's own lowering of a graph, read in this process and prepared for the pass."""
    module, _ = xmlir.load(bytecode, trusted=True)
    text = xmlir.to_text(module)
    _match_result_dtypes(module, out_dtypes)
    seed_id = _xc.seed_id()
    seed_index = ids.index(seed_id) if seed_id in ids else None
    try:
        rng = extract_rng_states(module, seed_index)
    except RngStateError as exc:
        raise refusal(Kind.RNG_STATE_SOURCE, exc.op, f"{exc}; x64guard computes torch-xla's generator states on the "
                      f"host and cannot here{advice}") from None
    return _Lowering(module, text, seed_index, rng)


# ----------------------------------------------------------------------------- integer scalars
# Integer scalars of a lazy graph: torch-xla's sentinels, narrowed exactly; every other
# 64-bit scalar range-checked, and refused at the model's line.
#
# torch-xla sends a Python number an op takes to the device as a 0-dim parameter of the lazy
# graph (the backend inlines them as constants while it traces: `_private.inline_scalars`).
# A one-sided int64 clamp (`t.clamp(min=0)`) fills its open bound with INT64_MAX or INT64_MIN,
# and `masked_fill(m, torch.iinfo(torch.int64).max)` fills with the extreme itself. The core
# pass maps those constants to int32's extremes (tables.INTEGER_SENTINELS), what JAX traces
# with x64 off. Here the same holds for a parameter, and only where the module proves that
# the value just bounds a clamp, a `minimum` or a `maximum` on the open side, or fills
# (a branch of `select`, or a result): the parameter reaches those ops only through
# `broadcast_in_dim` / `reshape`. Its value is read on every call (as every 64-bit scalar
# of a lazy graph already is) and mapped only when it is that sentinel.


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
    the op that takes it (x64guard never wraps a value the step passed). `value` on the
    host or the device (read back)."""
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
    return upload(torch.tensor(number, dtype=dtype), device)

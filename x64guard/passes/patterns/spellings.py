"""torch-xla's spellings, read as the ops they are (rules of the idiom phase).

torch-xla's StableHLO is HLO converted back by XLA, and says some things otherwise than
the StableHLO JAX emits. Rewritten before the narrowing walk, so that the torch-xla
backend and `x64guard check`/`narrow` on a dumped torch-xla module see the same module:

* `RespellCustomCall`: a custom_call whose target is an op (tables.CUSTOM_CALL_SPELLINGS:
  `@mhlo.erf`, GELU's erf) becomes that op; the custom_call rules would refuse it as an
  unknown kernel with 64-bit operands.
* `NarrowScalarCompare`: torch-xla compares a float32 tensor with a Python float
  (`torch.rand_like(x) < 0.9`, dropout's mask) in float64: the tensor converted to f64
  against an f64 splat. Eager PyTorch compares in the tensor's dtype (a wrapped scalar
  takes it: measured, `float32(0.9) < 0.9` is False in eager, True in f64). The compare
  becomes the float32 compare eager computes (the splat rounded as XLA's convert rounds
  it), so that a float32 model holds no 64-bit type and mode='error' does not refuse it.
  Not in a module JAX lowered: there an f64 compare is what the user asked for.

Neither reports a finding: the module says the same thing, spelled as JAX spells it. The
ops they replace are erased after the phase without counting as narrowed
(`IdiomState.spelled_away`).
"""

from __future__ import annotations

import numpy as np
from jax.extend.mlir import ir

from x64guard.passes.driver import OpContext, Outcome, PassRun
from x64guard.passes.idioms import IdiomPattern
from x64guard.passes.ir_queries import read_attribute
from x64guard.passes.matching import element_spelling, producer, tensor_type
from x64guard.passes.tables import CUSTOM_CALL_SPELLINGS, Spelling


def _spelling(op: ir.Operation) -> Spelling | None:
    target = read_attribute(op, "call_target_name")
    if target is None:
        return None
    spelling = CUSTOM_CALL_SPELLINGS.get(ir.StringAttr(target).value)
    if spelling is None or len(op.operands) != spelling.operands:
        return None
    return spelling


class RespellCustomCall(IdiomPattern):
    """`stablehlo.custom_call @mhlo.erf(%x)` -> `chlo.erf %x` (tables.CUSTOM_CALL_SPELLINGS)."""

    op_names = frozenset({"stablehlo.custom_call"})
    # Any width: a float32 `@mhlo.erf` is as foreign to a target's check (neuronx-cc's
    # NCC_EHCA005, an unknown custom_call) as a float64 one is to the narrowing.
    result_elements = None

    def may_match(self, op: ir.Operation, run: PassRun) -> bool:
        return _spelling(op) is not None

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        spelling = _spelling(op)
        if spelling is None:
            return Outcome.NO_MATCH
        with ctx.rewriter.insert_before(op):
            respelled = ctx.rewriter.create_op(spelling.op, list(op.results.types), list(op.operands))
        for old, new in zip(op.results, respelled.results):
            ctx.rewriter.replace_all_uses(old, new)
        ctx.idioms.spelled_away.append(op)
        return Outcome.REWROTE


def _float32_operands(op: ir.Operation) -> list | None:
    """Per operand of an f64 compare, the f32 value converted to it or the splat constant's
    value rounded to float32; None when the compare is not one of a float32 tensor."""
    operands = list(op.operands)
    if len(operands) != 2 or element_spelling(operands[0].type) != "f64" \
            or not isinstance(operands[0].type, ir.RankedTensorType):
        return None
    narrowed: list = []
    for value in operands:
        convert = producer(value, "stablehlo.convert")
        if convert is not None and element_spelling(convert.operands[0].type) == "f32":
            narrowed.append(convert.operands[0])
            continue
        constant = producer(value, "stablehlo.constant")
        attr = read_attribute(constant, "value") if constant is not None else None
        if not isinstance(attr, ir.DenseFPElementsAttr) or not attr.is_splat:
            return None
        narrowed.append(float(np.float32(attr.get_splat_value().value)))
    if all(isinstance(v, float) for v in narrowed):
        return None  # two constants: nothing of a float32 tensor here
    return narrowed


class NarrowScalarCompare(IdiomPattern):
    """`compare(convert(x: f32) to f64, splat c: f64)` -> `compare(x, splat f32(c))`."""

    op_names = frozenset({"stablehlo.compare"})

    def may_match(self, op: ir.Operation, run: PassRun) -> bool:
        return not run.jax_origin and _float32_operands(op) is not None

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        narrowed = None if ctx.run.jax_origin else _float32_operands(op)
        if narrowed is None:
            return Outcome.NO_MATCH
        f32 = tensor_type(op.operands[0].type, "f32")
        element = f32.element_type
        olds = [producer(value) for value in op.operands]
        with ctx.rewriter.insert_before(op):
            values = [v if not isinstance(v, float) else ctx.rewriter.create_op(
                "stablehlo.constant", [f32], [],
                {"value": ir.DenseElementsAttr.get_splat(f32, ir.FloatAttr.get(element, v))}).result
                for v in narrowed]
        for old, value in zip(list(op.operands), values):
            ctx.rewriter.replace_uses_in(op, old, value)
        ctx.idioms.spelled_away.extend(old for old in olds if old is not None)
        return Outcome.REWROTE

"""torch-xla's lowering of a graph read in this process and adapted for the core pass: its
result dtypes and its RNG seed. (Its spelling of erf and of float32 scalar compares are rules
of the pass: x64guard/passes/patterns/spellings.py.)"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np
import torch

from x64guard.findings import Kind
from x64guard.io import modules as xmlir
from x64guard.passes.ir_queries import main_function
from x64guard.passes.rewriter import Rewriter
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.base import MLIR_ELEMENT
from x64guard.torch_xla.failures import _refusal
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


def _read_lowering(bytecode: bytes, ids: list, out_dtypes: list, advice: str = "") -> _Lowering:
    """torch-xla's own lowering of a graph, read in this process and prepared for the pass."""
    module, _ = xmlir.load(bytecode, trusted=True)
    text = xmlir.to_text(module)
    _match_result_dtypes(module, out_dtypes)
    seed_id = _xc.seed_id()
    seed_index = ids.index(seed_id) if seed_id in ids else None
    try:
        rng = extract_rng_states(module, seed_index)
    except RngStateError as exc:
        raise _refusal(Kind.RNG_STATE_SOURCE, exc.op, f"{exc}; x64guard computes torch-xla's generator states on the "
                       f"host and cannot here{advice}") from None
    return _Lowering(module, text, seed_index, rng)

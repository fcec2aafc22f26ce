"""torch-xla's lowering of a graph read in this process and adapted for the core pass:
its spelling of erf and of float32 scalar compares, its result dtypes, its RNG seed."""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np
import torch

from x64guard.findings import Kind
from x64guard.io import modules as xmlir
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.failures import _refusal
from x64guard.torch_xla.rng import RngStateError, RngStates, extract_rng_states


def _adapt_spelling(module) -> None:
    """torch-xla's StableHLO (HLO converted by XLA) spells HLO's `erf` as
    `stablehlo.custom_call @mhlo.erf`, which the core refuses as an unknown kernel with
    64-bit operands. It is CHLO's `erf`: written as `chlo.erf`, the core narrows it like
    any op and it expands for float32 when compiled (JAX's x32 erf). GELU needs it.
    Rewrites `module` in place."""
    from jax.extend.mlir import ir

    found: list = []
    folds: list = []

    def visit(op):
        if op.name == "stablehlo.custom_call" and "call_target_name" in op.attributes and \
                ir.StringAttr(op.attributes["call_target_name"]).value == "mhlo.erf" and len(op.operands) == 1:
            found.append(op)
        elif op.name == "stablehlo.compare":
            folds.append(op)
        return ir.WalkResult.ADVANCE

    with module.context:
        module.operation.walk(visit)
        for op in found:
            with ir.InsertionPoint(op), op.location:
                erf = ir.Operation.create("chlo.erf", results=[op.results[0].type], operands=[op.operands[0]])
            op.results[0].replace_all_uses_with(erf.results[0])
            op.erase()
        for op in folds:
            _fold_scalar_compare(op)


def _owner(value):
    owner = value.owner
    return owner.operation if hasattr(owner, "operation") else owner


def _fold_scalar_compare(op) -> None:
    """torch-xla compares a float32 tensor with a Python float (`torch.rand_like(x) < 0.9`,
    x64guard's dropout mask) in float64: the tensor converted to f64 against an f64 splat.
    Eager PyTorch compares in the tensor's dtype (a wrapped scalar takes it: measured,
    `float32(0.9) < 0.9` is False in eager, True in f64). The compare becomes the float32
    compare eager computes (the splat rounded as XLA's convert rounds it), so that a
    float32 model holds no 64-bit type and mode='error' does not refuse it."""
    from jax.extend.mlir import ir

    operands = list(op.operands)
    if len(operands) != 2 or str(ir.RankedTensorType(operands[0].type).element_type) != "f64":
        return
    narrowed = []
    for value in operands:
        source = _owner(value)
        name = getattr(source, "name", None)
        if name == "stablehlo.convert" and \
                str(ir.RankedTensorType(source.operands[0].type).element_type) == "f32":
            narrowed.append(source.operands[0])
        elif name == "stablehlo.constant":
            try:
                dense = ir.DenseFPElementsAttr(source.attributes["value"])
            except ValueError:
                return
            if not dense.is_splat:
                return
            narrowed.append(float(np.float32(dense.get_splat_value().value)))
        else:
            return
    if all(isinstance(v, float) for v in narrowed):
        return
    with ir.InsertionPoint(op), op.location:
        f32 = ir.RankedTensorType.get(ir.RankedTensorType(operands[0].type).shape, ir.F32Type.get())
        values = [v if not isinstance(v, float) else ir.Operation.create(
            "stablehlo.constant", results=[f32],
            attributes={"value": ir.DenseElementsAttr.get_splat(f32, ir.FloatAttr.get(ir.F32Type.get(), v))}).result
            for v in narrowed]
    for k, value in enumerate(values):
        old = _owner(op.operands[k])
        op.operands[k] = value
        if not list(old.results[0].uses):
            old.erase()


_MLIR_ELEMENT = {torch.bool: "i1", torch.int8: "i8", torch.uint8: "ui8", torch.int16: "i16", torch.int32: "i32",
                 torch.int64: "i64", torch.uint32: "ui32", torch.uint64: "ui64", torch.float16: "f16",
                 torch.bfloat16: "bf16", torch.float32: "f32", torch.float64: "f64", torch.complex64: "complex<f32>",
                 torch.complex128: "complex<f64>"}


def _match_result_dtypes(module, dtypes: Sequence[torch.dtype]) -> int:
    """Make each result of the main function the element type of the tensor it computes.

    torch-xla's lowering may compute a tensor in another element type than the tensor's
    own and convert when it is read: native_dropout's mask, a bool tensor, is lowered as
    float32 holding 0 and 1/(1-p). Returned as it is, the mask reaches AOTAutograd's
    backward graph as float32 and scales the gradient twice (openxla does exactly that:
    its dropout gradients are 1/(1-p) too large). Here the result is converted as
    torch-xla converts it on reading (to bool: `!= 0`). Returns how many results changed."""
    from jax.extend.mlir import ir

    main = next(op.operation for op in module.body.operations if op.operation.name == "func.func"
                and ir.StringAttr(op.operation.attributes["sym_name"]).value == "main")
    block = main.regions[0].blocks[0]
    terminator = block.operations[len(block.operations) - 1]
    changed = 0
    with module.context, terminator.location:
        for k, (value, dtype) in enumerate(zip(list(terminator.operands), dtypes)):
            want = _MLIR_ELEMENT.get(dtype)
            shaped = ir.RankedTensorType(value.type)
            if want is None or str(shaped.element_type) == want:
                continue
            target = ir.RankedTensorType.get(shaped.shape, ir.Type.parse(want))
            with ir.InsertionPoint(terminator):
                if dtype is torch.bool:
                    zero = ir.Operation.create("stablehlo.constant", results=[value.type], attributes={
                        "value": ir.DenseElementsAttr.get_splat(value.type, _zero_attr(shaped.element_type))})
                    converted = ir.Operation.create(
                        "stablehlo.compare", results=[target], operands=[value, zero.result],
                        attributes={"comparison_direction": ir.Attribute.parse("#stablehlo<comparison_direction NE>")})
                else:
                    converted = ir.Operation.create("stablehlo.convert", results=[target], operands=[value])
            terminator.operands[k] = converted.result
            changed += 1
        if changed:
            function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
            results = [v.type for v in terminator.operands]
            main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(function_type.inputs, results))
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
    _adapt_spelling(module)
    _match_result_dtypes(module, out_dtypes)
    seed_id = _xc.seed_id()
    seed_index = ids.index(seed_id) if seed_id in ids else None
    try:
        rng = extract_rng_states(module, seed_index)
    except RngStateError as exc:
        raise _refusal(Kind.RNG_STATE_SOURCE, exc.op, f"{exc}; x64guard computes torch-xla's generator states on the "
                       f"host and cannot here{advice}") from None
    return _Lowering(module, text, seed_index, rng)

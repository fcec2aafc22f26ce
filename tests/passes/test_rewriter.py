"""The Rewriter's edits for front ends (issue 24): each rewrites a small module, compared
as text; its recording twin changes nothing and refuses to build."""

from __future__ import annotations

import pytest
from jax.extend.mlir import ir

from x64guard.io import modules
from x64guard.passes.rewriter import RecordingRewriter, RecordingRewriterCannotBuild, Rewriter

_MODULE = ("func.func @main(%x: tensor<2xf32>, %y: tensor<2xf32>) -> tensor<2xf32> {\n"
           "  %0 = stablehlo.add %x, %x : tensor<2xf32>\n"
           "  return %0 : tensor<2xf32>\n}")


def _load(text: str = _MODULE):
    module, _ = modules.load(text)
    main = module.body.operations[0].operation
    block = main.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    return module, main, block, ops


def _body(module) -> str:
    """The module's text without its `module {` wrapper and locations."""
    lines = [line for line in str(module).splitlines() if not line.startswith("#loc")]
    assert lines[0].startswith("module") and lines[-1] == "}"
    return "\n".join(lines[1:-1])


def test_set_operand():
    module, main, block, (add, ret) = _load()
    with module.context:
        Rewriter().set_operand(add, 1, block.arguments[1])
    assert "stablehlo.add %arg0, %arg1 : tensor<2xf32>" in _body(module)


def test_set_location():
    module, main, block, (add, ret) = _load()
    with module.context:
        Rewriter().set_location(add, ir.Location.file("model.py", 7, 0))
    assert 'loc("model.py":7:0)' in module.operation.get_asm(enable_debug_info=True)


def test_set_function_type():
    module, main, block, (add, ret) = _load()
    with module.context, ir.Location.unknown():
        i32 = ir.RankedTensorType.get([2], ir.IntegerType.get_signless(32))
        Rewriter().set_function_type(main, [a.type for a in block.arguments], [i32])
    # the signature only: the return's operand is the caller's to change (verify would say so)
    assert str(ir.TypeAttr(main.attributes["function_type"]).value) == \
        "(tensor<2xf32>, tensor<2xf32>) -> tensor<2xi32>"


def test_add_argument_and_erase_argument_keep_the_signature_with_set_function_type():
    module, main, block, (add, ret) = _load()
    rewriter = Rewriter()
    with module.context, ir.Location.unknown():
        i32 = ir.RankedTensorType.get([3], ir.IntegerType.get_signless(32))
        rewriter.add_argument(block, i32, ir.Location.unknown())
        rewriter.erase_argument(block, 1)
        rewriter.set_function_type(main, [a.type for a in block.arguments], [ret.operands[0].type])
    assert _body(module) == (
        "  func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<3xi32>) -> tensor<2xf32> {\n"
        "    %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32>\n"
        "    return %0 : tensor<2xf32>\n"
        "  }")


def test_create_op_with_a_region_append_block_and_insert_at_end():
    module, main, block, (add, ret) = _load()
    rewriter = Rewriter()
    with module.context, ir.Location.unknown():
        scalar = ir.RankedTensorType.get([], ir.F32Type.get())
        with rewriter.insert_before(ret):
            zero = rewriter.create_op("stablehlo.constant", [scalar], [], {
                "value": ir.DenseElementsAttr.get_splat(scalar, ir.FloatAttr.get(ir.F32Type.get(), 0.0))})
            reduce = rewriter.create_op("stablehlo.reduce", [scalar], [add.result, zero.result],
                                        {"dimensions": ir.DenseI64ArrayAttr.get([0])}, regions=1)
            body = rewriter.append_block(reduce.regions[0], [scalar, scalar])
            with rewriter.insert_at_end(body):
                total = rewriter.create_op("stablehlo.add", [scalar], [body.arguments[0], body.arguments[1]])
                rewriter.create_op("stablehlo.return", [], [total.result])
            new_return = rewriter.create_op(ret.name, [], [add.result, reduce.result])
        rewriter.erase(ret)
        rewriter.set_function_type(main, [a.type for a in block.arguments], [v.type for v in new_return.operands])
    module.operation.verify()
    assert _body(module) == (
        "  func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> (tensor<2xf32>, tensor<f32>) {\n"
        "    %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32>\n"
        "    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n"
        "    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [0] : "
        "(tensor<2xf32>, tensor<f32>) -> tensor<f32>\n"
        "    return %0, %1 : tensor<2xf32>, tensor<f32>\n"
        "  }")


def test_the_recording_twin_counts_the_new_edits_and_changes_nothing():
    module, main, block, (add, ret) = _load()
    before = str(module)
    recording = RecordingRewriter()
    with module.context, ir.Location.unknown():
        recording.set_operand(add, 1, block.arguments[1])
        recording.set_location(add, ir.Location.file("model.py", 7, 0))
        recording.erase_argument(block, 1)
        recording.set_function_type(main, [], [])
    assert str(module) == before
    assert recording.recorded == {"set_operand": 1, "set_location": 1, "erase_argument": 1, "set_attribute": 1}


@pytest.mark.parametrize("build", [
    lambda r, block, region: r.add_argument(block, None, None),
    lambda r, block, region: r.append_block(region, []),
    lambda r, block, region: r.insert_at_end(block).__enter__(),
])
def test_the_recording_twin_refuses_to_build(build):
    module, main, block, _ = _load()
    with pytest.raises(RecordingRewriterCannotBuild):
        build(RecordingRewriter(), block, main.regions[0])

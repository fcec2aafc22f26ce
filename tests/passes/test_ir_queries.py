"""passes/ir_queries.py: `is_wide`, the package's one answer to "is this type 64-bit?",
agrees with the type table row by row and looks into shaped, tuple and function types."""

from __future__ import annotations

import pytest
from jax.extend.mlir import ir

from x64guard.io.modules import make_context
from x64guard.passes.ir_queries import is_wide
from x64guard.passes.tables import ELEMENT_TYPES, NARROW_ELEMENT_TYPE


@pytest.fixture(scope="module")
def parse():
    context = make_context()
    return lambda text: ir.Type.parse(text, context)


def test_every_row_of_the_type_table(parse):
    for row in ELEMENT_TYPES:
        assert is_wide(parse(row.mlir)) == (row.mlir in NARROW_ELEMENT_TYPE), row.mlir


@pytest.mark.parametrize("text, wide", [
    ("tensor<2x3xf64>", True), ("tensor<*xi64>", True), ("tensor<?xcomplex<f64>>", True),
    ("vector<4xui64>", True), ("memref<2xsi64>", True), ("tensor<2xf32>", False), ("tensor<i32>", False),
    ("tuple<tensor<i32>, tensor<2xi64>>", True), ("tuple<tensor<i32>>", False),
    ("(tensor<f32>) -> tensor<f64>", True), ("(tensor<f32>) -> tensor<i32>", False),
    ("!stablehlo.token", False),
])
def test_shaped_tuple_and_function_types(parse, text, wide):
    assert is_wide(parse(text)) is wide

"""The generic rule: every type, in every region, of every dialect; structure untouched."""

import pytest

from tests.conftest import narrow_quietly, wide_types

REGION_OPS = {
    "while": """
func.func @main(%n: tensor<i64>, %x: tensor<f64>) -> tensor<f64> {
  %c0 = stablehlo.constant dense<0> : tensor<i64>
  %r:2 = stablehlo.while(%i = %c0, %acc = %x) : tensor<i64>, tensor<f64>
  cond {
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i64>
    %j = stablehlo.add %i, %one : tensor<i64>
    %f = stablehlo.convert %i : (tensor<i64>) -> tensor<f64>
    %a = stablehlo.add %acc, %f : tensor<f64>
    stablehlo.return %j, %a : tensor<i64>, tensor<f64>
  }
  return %r#1 : tensor<f64>
}""",
    "case_and_if": """
func.func @main(%k: tensor<i32>, %p: tensor<i1>, %x: tensor<f64>) -> tensor<f64> {
  %0 = "stablehlo.case"(%k) ({
    %a = stablehlo.negate %x : tensor<f64>
    stablehlo.return %a : tensor<f64>
  }, {
    stablehlo.return %x : tensor<f64>
  }) : (tensor<i32>) -> tensor<f64>
  %1 = "stablehlo.if"(%p) ({
    stablehlo.return %0 : tensor<f64>
  }, {
    %b = stablehlo.abs %0 : tensor<f64>
    stablehlo.return %b : tensor<f64>
  }) : (tensor<i1>) -> tensor<f64>
  return %1 : tensor<f64>
}""",
    "reduce_and_reduce_window": """
func.func @main(%x: tensor<8xf64>) -> (tensor<f64>, tensor<9xf64>) {
  %init = stablehlo.constant dense<0.0> : tensor<f64>
  %0 = stablehlo.reduce(%x init: %init) across dimensions = [0] : (tensor<8xf64>, tensor<f64>) -> tensor<f64>
   reducer(%a: tensor<f64>, %b: tensor<f64>) {
    %s = stablehlo.add %a, %b : tensor<f64>
    stablehlo.return %s : tensor<f64>
  }
  %1 = "stablehlo.reduce_window"(%x, %init) ({
  ^bb0(%a: tensor<f64>, %b: tensor<f64>):
    %s = stablehlo.add %a, %b : tensor<f64>
    stablehlo.return %s : tensor<f64>
  }) {window_dimensions = array<i64: 2>, padding = dense<[[1, 1]]> : tensor<1x2xi64>} : (tensor<8xf64>, tensor<f64>) -> tensor<9xf64>
  return %0, %1 : tensor<f64>, tensor<9xf64>
}""",
    "sort": """
func.func @main(%x: tensor<4xf64>, %i: tensor<4xi64>) -> tensor<4xi64> {
  %0:2 = "stablehlo.sort"(%x, %i) ({
  ^bb0(%a: tensor<f64>, %b: tensor<f64>, %c: tensor<i64>, %d: tensor<i64>):
    %p = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f64>, tensor<f64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<4xf64>, tensor<4xi64>) -> (tensor<4xf64>, tensor<4xi64>)
  return %0#1 : tensor<4xi64>
}""",
    "scatter": """
func.func @main(%x: tensor<5xf64>, %idx: tensor<2x1xi64>, %u: tensor<2xf64>) -> tensor<5xf64> {
  %0 = "stablehlo.scatter"(%x, %idx, %u) ({
  ^bb0(%a: tensor<f64>, %b: tensor<f64>):
    %s = stablehlo.add %a, %b : tensor<f64>
    stablehlo.return %s : tensor<f64>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<5xf64>, tensor<2x1xi64>, tensor<2xf64>) -> tensor<5xf64>
  return %0 : tensor<5xf64>
}""",
    "select_and_scatter": """
func.func @main(%x: tensor<4xf64>, %s: tensor<2xf64>) -> tensor<4xf64> {
  %init = stablehlo.constant dense<0.0> : tensor<f64>
  %0 = "stablehlo.select_and_scatter"(%x, %s, %init) ({
  ^bb0(%a: tensor<f64>, %b: tensor<f64>):
    %p = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f64>, tensor<f64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }, {
  ^bb0(%a: tensor<f64>, %b: tensor<f64>):
    %t = stablehlo.add %a, %b : tensor<f64>
    stablehlo.return %t : tensor<f64>
  }) {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>} : (tensor<4xf64>, tensor<2xf64>, tensor<f64>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}""",
    "collectives": """
func.func @main(%x: tensor<4xi64>) -> (tensor<4xi64>, tensor<2xi64>) {
  %0 = "stablehlo.all_reduce"(%x) ({
  ^bb0(%a: tensor<i64>, %b: tensor<i64>):
    %s = stablehlo.add %a, %b : tensor<i64>
    stablehlo.return %s : tensor<i64>
  }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<4xi64>) -> tensor<4xi64>
  %1 = "stablehlo.reduce_scatter"(%x) ({
  ^bb0(%a: tensor<i64>, %b: tensor<i64>):
    %s = stablehlo.add %a, %b : tensor<i64>
    stablehlo.return %s : tensor<i64>
  }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>, scatter_dimension = 0 : i64} : (tensor<4xi64>) -> tensor<2xi64>
  return %0, %1 : tensor<4xi64>, tensor<2xi64>
}""",
    "composite_and_call": """
func.func @main(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.composite "my.square" %x {decomposition = @square, composite_attributes = {k = 2 : i64}} : (tensor<3xf64>) -> tensor<3xf64>
  %1 = func.call @square(%0) : (tensor<3xf64>) -> tensor<3xf64>
  return %1 : tensor<3xf64>
}
func.func private @square(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.multiply %x, %x : tensor<3xf64>
  return %0 : tensor<3xf64>
}""",
    "dynamic_unranked_tuple": """
func.func @main(%x: tensor<?x3xf64>, %u: tensor<*xi64>, %t: tuple<tensor<f64>, tensor<i1>>) -> (tensor<?x3xf64>, tensor<*xi64>, tuple<tensor<f64>, tensor<i1>>) {
  %0 = stablehlo.abs %x : tensor<?x3xf64>
  return %0, %u, %t : tensor<?x3xf64>, tensor<*xi64>, tuple<tensor<f64>, tensor<i1>>
}""",
    "unknown_dialect": """
func.func @main(%x: tensor<3xf64>) -> tensor<3xui64> {
  %0 = "mydialect.frobnicate"(%x) {ty = f64} : (tensor<3xf64>) -> tensor<3xui64>
  return %0 : tensor<3xui64>
}""",
    "chlo_and_scalars": """
func.func @main(%x: tensor<3xf64>, %s: f64) -> tensor<3xf64> {
  %0 = chlo.erf_inv %x : tensor<3xf64> -> tensor<3xf64>
  return %0 : tensor<3xf64>
}""",
}


@pytest.mark.parametrize("name", sorted(REGION_OPS))
def test_every_type_narrows_and_the_module_verifies(name):
    result = narrow_quietly(REGION_OPS[name])
    assert wide_types(result.module) == []
    assert result.module.operation.verify()
    assert sum(result.changes.values()) > 0


def test_structural_i64_attributes_are_untouched():
    text = narrow_quietly(REGION_OPS["reduce_and_reduce_window"]).text
    assert "padding = dense<1> : tensor<1x2xi64>" in text or "dense<[[1, 1]]> : tensor<1x2xi64>" in text
    assert "array<i64: 2>" in text
    text = narrow_quietly(REGION_OPS["collectives"]).text
    assert "tensor<1x1xi64>" in text  # replica_groups is structure
    text = narrow_quietly(REGION_OPS["composite_and_call"]).text
    assert "k = 2 : i64" in text  # composite attributes are structure


def test_type_attributes_narrow():
    text = narrow_quietly(REGION_OPS["unknown_dialect"]).text
    assert "ty = f32" in text and "tensor<3xui32>" in text


def test_iota_dimension_and_dims_are_structure():
    text = narrow_quietly("""
func.func @main() -> tensor<4x2xi64> {
  %0 = stablehlo.iota dim = 1 : tensor<4x2xi64>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<4x2xi64>) -> tensor<2x4xi64>
  %2 = stablehlo.transpose %1, dims = [1, 0] : (tensor<2x4xi64>) -> tensor<4x2xi64>
  return %2 : tensor<4x2xi64>
}""").text
    assert "iota dim = 1 : tensor<4x2xi32>" in text and "dims = [1, 0]" in text


def test_dynamic_shape_operands_are_data():
    result = narrow_quietly("""
func.func @main(%x: tensor<?xf64>, %shape: tensor<1xi64>) -> tensor<?xf64> {
  %0 = stablehlo.dynamic_broadcast_in_dim %x, %shape, dims = [0] : (tensor<?xf64>, tensor<1xi64>) -> tensor<?xf64>
  return %0 : tensor<?xf64>
}""")
    assert wide_types(result.module) == []
    assert "tensor<1xi32>" in result.text


def test_changes_count_per_type_change():
    result = narrow_quietly(REGION_OPS["sort"])
    assert set(result.changes) == {"f64->f32", "i64->i32"}

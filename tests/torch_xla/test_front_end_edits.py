"""The torch-xla front end's edits of a module (made through the core's Rewriter, before
the pass narrows it), compared as text; after the pass, the edited module holds no 64-bit
type the pass would refuse (passes/legality.py's whole-module check)."""

from __future__ import annotations

import torch
from jax.extend.mlir import ir

from x64guard.io import modules
from x64guard.modes import Overflow
from x64guard.passes import NarrowX64Pass
from x64guard.passes.driver import PassRun
from x64guard.passes.legality import check_legality
from x64guard.passes.rewriter import Rewriter
from x64guard.passes.store import FindingsStore
from x64guard.passes.tables import DEFAULT_TARGET, TARGET_PROFILES
from x64guard.passes.types import TypeConverter
from x64guard.torch_xla.lowering import _match_result_dtypes
from x64guard.torch_xla.overflow import guard


def _narrowed_is_legal(module) -> None:
    """The pass checks op by op as it narrows; this is the whole module checked once more,
    on its own, the guard's and the dtype fix's ops included."""
    NarrowX64Pass().apply(module)
    converter = TypeConverter(module.context)
    run = PassRun(module.context, converter, FindingsStore(converter), Rewriter(), TARGET_PROFILES[DEFAULT_TARGET],
                  Overflow.ERROR)
    with module.context, ir.Location.unknown():
        check_legality(module, run)


def _main_text(module) -> str:
    return modules.to_text(module)


_GUARDED_MULTIPLY = """\
module {
  func.func @main(%arg0: tensor<4xi64>, %arg1: tensor<4xi64>) -> (tensor<4xi64>, tensor<1xi1>) {
    %0 = stablehlo.multiply %arg0, %arg1 : tensor<4xi64>
    %c = stablehlo.constant dense<0> : tensor<4xi64>
    %c_0 = stablehlo.constant dense<1> : tensor<4xi64>
    %1 = stablehlo.compare NE, %arg0, %c : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
    %2 = stablehlo.select %1, %arg0, %c_0 : tensor<4xi1>, tensor<4xi64>
    %3 = stablehlo.divide %0, %2 : tensor<4xi64>
    %4 = stablehlo.compare NE, %3, %arg1 : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
    %5 = stablehlo.and %1, %4 : tensor<4xi1>
    %c_1 = stablehlo.constant dense<-1> : tensor<4xi64>
    %6 = stablehlo.compare EQ, %arg0, %c_1 : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
    %c_2 = stablehlo.constant dense<-2147483648> : tensor<4xi64>
    %7 = stablehlo.compare EQ, %arg1, %c_2 : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
    %8 = stablehlo.and %6, %7 : tensor<4xi1>
    %9 = stablehlo.or %5, %8 : tensor<4xi1>
    %c_3 = stablehlo.constant dense<false> : tensor<i1>
    %10 = stablehlo.reduce(%9 init: %c_3) applies stablehlo.or across dimensions = [0] : (tensor<4xi1>, tensor<i1>) -> tensor<i1>
    %11 = stablehlo.reshape %10 : (tensor<i1>) -> tensor<1xi1>
    return %0, %11 : tensor<4xi64>, tensor<1xi1>
  }
}
"""


def test_the_overflow_guard_adds_one_flags_result_and_narrows_legally():
    module, _ = modules.load("func.func @main(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {\n"
                             "  %0 = stablehlo.multiply %a, %b : tensor<4xi64>\n"
                             "  return %0 : tensor<4xi64>\n}")
    checks = guard(module)
    assert len(checks.locations) == 1
    module.operation.verify()
    assert str(module) == _GUARDED_MULTIPLY
    _narrowed_is_legal(module)
    assert "-> (tensor<4xi32>, tensor<1xi1>)" in _main_text(module)


def test_nothing_is_added_when_every_op_is_proved_safe():
    module, _ = modules.load("func.func @main(%a: tensor<4xi32>) -> tensor<4xi64> {\n"
                             "  %0 = stablehlo.convert %a : (tensor<4xi32>) -> tensor<4xi64>\n"
                             "  %1 = stablehlo.maximum %0, %0 : tensor<4xi64>\n"
                             "  return %1 : tensor<4xi64>\n}")
    before = str(module)
    assert not guard(module)
    assert str(module) == before


def test_a_float32_lowered_bool_result_is_compared_to_zero_and_narrows_legally():
    module, _ = modules.load("func.func @main(%a: tensor<3xf32>, %b: tensor<3xi64>)"
                             " -> (tensor<3xf32>, tensor<3xi64>) {\n"
                             "  return %a, %b : tensor<3xf32>, tensor<3xi64>\n}")
    assert _match_result_dtypes(module, [torch.bool, torch.int64]) == 1
    module.operation.verify()
    assert str(module) == (
        "module {\n"
        "  func.func @main(%arg0: tensor<3xf32>, %arg1: tensor<3xi64>) -> (tensor<3xi1>, tensor<3xi64>) {\n"
        "    %cst = stablehlo.constant dense<0.000000e+00> : tensor<3xf32>\n"
        "    %0 = stablehlo.compare NE, %arg0, %cst : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>\n"
        "    return %0, %arg1 : tensor<3xi1>, tensor<3xi64>\n"
        "  }\n"
        "}\n")
    _narrowed_is_legal(module)
    assert "-> (tensor<3xi1>, tensor<3xi32>)" in _main_text(module)

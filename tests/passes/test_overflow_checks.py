"""The overflow guard's edits of a module (x64guard/passes/overflow_checks.py, made through
the pass's Rewriter before the pass narrows it), compared as text; after the pass, the
guarded module holds no 64-bit type the pass would refuse (passes/legality.py's
whole-module check)."""

from __future__ import annotations

from tests.passes.legal_narrowing import narrowed_is_legal
from x64guard.io import modules
from x64guard.passes.overflow_checks import guard


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
    narrowed_is_legal(module)
    assert "-> (tensor<4xi32>, tensor<1xi1>)" in _main_text(module)


def test_nothing_is_added_when_every_op_is_proved_safe():
    module, _ = modules.load("func.func @main(%a: tensor<4xi32>) -> tensor<4xi64> {\n"
                             "  %0 = stablehlo.convert %a : (tensor<4xi32>) -> tensor<4xi64>\n"
                             "  %1 = stablehlo.maximum %0, %0 : tensor<4xi64>\n"
                             "  return %1 : tensor<4xi64>\n}")
    before = str(module)
    assert not guard(module)
    assert str(module) == before




def test_unsigned_and_narrower_integers_are_not_checked():
    """ui64 (random-number words) is not int64 arithmetic; i32 arithmetic is the program's."""
    module, _ = modules.load("func.func @main(%a: tensor<4xui64>, %b: tensor<4xi32>) -> (tensor<4xui64>, tensor<4xi32>) {\n"
                             "  %0 = stablehlo.multiply %a, %a : tensor<4xui64>\n"
                             "  %1 = stablehlo.multiply %b, %b : tensor<4xi32>\n"
                             "  return %0, %1 : tensor<4xui64>, tensor<4xi32>\n}")
    before = str(module)
    assert not guard(module)
    assert str(module) == before


_SETTLING = """func.func @main(%ids: tensor<4xi32>, %b: tensor<4xi64>, %c: tensor<4xi32>, %f: tensor<4xf32>)
    -> (tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>) {
  %wide = stablehlo.convert %ids : (tensor<4xi32>) -> tensor<4xi64>
  %vocab = stablehlo.constant dense<1000> : tensor<4xi64>
  %0 = stablehlo.add %wide, %vocab : tensor<4xi64>
  %1 = stablehlo.multiply %wide, %b : tensor<4xi64>
  %cw = stablehlo.convert %c : (tensor<4xi32>) -> tensor<4xi64>
  %2 = stablehlo.multiply %cw, %cw : tensor<4xi64>
  %fi = stablehlo.convert %f : (tensor<4xf32>) -> tensor<4xi64>
  %3 = stablehlo.add %fi, %vocab : tensor<4xi64>
  return %0, %1, %2, %3 : tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>
}"""


def test_each_check_says_which_arguments_and_magnitudes_settle_it():
    """ids + 1000 holds for |ids| <= 2**30; a product of two arguments for both <= 2**15
    (2**16 squared leaves int32); a value converted from a float is settled by no input
    magnitude. The module's checks are the same as without this."""
    from x64guard.passes.overflow_settling import SettledBelow

    module, _ = modules.load(_SETTLING)
    checks = guard(module)
    module.operation.verify()
    assert checks.settled == [SettledBelow((0,), 2 ** 30), SettledBelow((0, 1), 2 ** 15),
                              SettledBelow((2,), 2 ** 15), SettledBelow((), -1)]
    assert not checks.settled_by(lambda n: 3)          # the float-derived add is never settled
    checks.settled, checks.locations = checks.settled[:3], checks.locations[:3]
    assert checks.settled_by(lambda n: 2 ** 15)
    assert not checks.settled_by(lambda n: 2 ** 15 + 1)
    assert not checks.settled_by(lambda n: None if n == 1 else 0)   # an unknown argument settles nothing
    narrowed_is_legal(module)

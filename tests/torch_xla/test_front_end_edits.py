"""The torch-xla front end's edits of a module (made through the core's Rewriter, before
the pass narrows it), compared as text; after the pass, the edited module holds no 64-bit
type the pass would refuse (passes/legality.py's whole-module check). The overflow
guard's edits: tests/passes/test_overflow_checks.py."""

from __future__ import annotations

import torch

from tests.passes.legal_narrowing import narrowed_is_legal
from x64guard.io import modules
from x64guard.torch_xla.lowering import _match_result_dtypes


def _main_text(module) -> str:
    return modules.to_text(module)


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
    narrowed_is_legal(module)
    assert "-> (tensor<3xi1>, tensor<3xi32>)" in _main_text(module)

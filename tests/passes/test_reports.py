"""Issue 21's report defects, as regressions: what the pass counts and how constants held
by other ops narrow."""

from __future__ import annotations

import numpy as np

import x64guard
from tests.cli.test_narrow import _COUNTERS_ONLY

_CHECKED_SUBNORMAL = """
func.func @main() {
  %c = stablehlo.constant dense<4.940000e-324> : tensor<f64>
  "check.expect_almost_eq_const"(%c) {value = dense<4.940000e-324> : tensor<f64>} : (tensor<f64>) -> ()
  return
}
"""


def test_idiom_rewrites_are_changes_in_both_modes():
    for mode in ("allow", "warn"):
        result = x64guard.narrow(_COUNTERS_ONLY, mode=mode)
        assert result.changes.get("ui64->ui32", 0) >= 3, (mode, result.changes)
        assert "no 64-bit types" not in result.summary()


def test_a_check_constant_narrows_as_the_constant_it_is_compared_with():
    text = x64guard.narrow(_CHECKED_SUBNORMAL, mode="warn").text
    values = {line.split("dense<")[1].split(">")[0] for line in text.splitlines() if "dense<" in line}
    assert len(values) == 1, values
    assert np.float32(values.pop()) == np.finfo(np.float32).smallest_subnormal


def test_a_check_constant_without_dtype_constants_rounds_as_the_constant_does():
    text = x64guard.narrow(_CHECKED_SUBNORMAL, mode="warn", dtype_constants=False).text
    values = {line.split("dense<")[1].split(">")[0] for line in text.splitlines() if "dense<" in line}
    assert values == {"0.000000e+00"}, values

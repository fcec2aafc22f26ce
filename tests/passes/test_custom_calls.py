"""custom_call: LAPACK kernels renamed (and proven by running them), type-generic targets
narrowed, host callbacks and unknown kernels with a 64-bit operand or result refused."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import x64guard
from tests.conftest import narrow_quietly, refusal
from x64guard.passes.tables import HOST_CALLBACK_CUSTOM_CALLS, CustomCallPolicy, custom_call_policy
from tests.runner import lower_x64, run_narrowed, run_x32


def test_unknown_custom_call_with_64bit_types_is_refused_naming_the_target():
    error = refusal("""
func.func @main(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.custom_call @my_fancy_kernel(%x) : (tensor<3xf64>) -> tensor<3xf64>
  return %0 : tensor<3xf64>
}""")
    finding = next(f for f in error.findings if f.kind == "custom-call")
    assert "@my_fancy_kernel" in finding.op and "@my_fancy_kernel" in finding.message
    assert finding.location.line == 3


def test_custom_call_without_64bit_types_is_left_alone():
    result = narrow_quietly("""
func.func @main(%x: tensor<3xf32>, %y: tensor<3xf64>) -> (tensor<3xf32>, tensor<3xf64>) {
  %0 = stablehlo.custom_call @my_fancy_kernel(%x) : (tensor<3xf32>) -> tensor<3xf32>
  return %0, %y : tensor<3xf32>, tensor<3xf64>
}""")
    assert "@my_fancy_kernel" in result.text


def test_type_generic_custom_call_narrows():
    result = narrow_quietly("""
func.func @main(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.custom_call @Sharding(%x) {mhlo.sharding = "{replicated}"} : (tensor<3xf64>) -> tensor<3xf64>
  return %0 : tensor<3xf64>
}""")
    assert "@Sharding(%arg0) {mhlo.sharding = \"{replicated}\"} : (tensor<3xf32>) -> tensor<3xf32>" in result.text


def _spd(n=4):
    a = np.arange(n * n, dtype=np.float64).reshape(n, n) / 7.0 + np.eye(n)
    return a @ a.T + n * np.eye(n)


LINALG = {
    "inv": (lambda a: jnp.linalg.inv(a), (_spd(),)),
    "solve": (lambda a, b: jnp.linalg.solve(a, b), (_spd(), np.arange(4.0))),
    "eigh": (lambda a: jnp.linalg.eigh(a)[0], (_spd(),)),
    "svd": (lambda a: jnp.linalg.svd(a, compute_uv=False), (_spd(),)),
    "qr": (lambda a: jnp.linalg.qr(a)[1], (_spd(),)),
    "cholesky": (lambda a: jnp.linalg.cholesky(a), (_spd(),)),
    "complex_inv": (lambda a: jnp.linalg.inv(a), (_spd() + 1j * np.eye(4),)),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_lapack_kernels_are_remapped_and_run_bit_identical_to_x32(name):
    fn, args = LINALG[name]
    text = lower_x64(fn, *args)
    assert "lapack_d" in text or "lapack_z" in text
    result = narrow_quietly(text)
    assert "lapack_d" not in result.text and "lapack_z" not in result.text
    renamed = [f for f in result.findings if f.kind == "custom-call-renamed"]
    assert renamed and all((f.location.file or "").endswith("test_custom_calls.py") for f in renamed)
    got = run_narrowed(result.text, args)
    want = run_x32(fn, args)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


# --- issue 15: 64-bit before narrowing, operands or results, in every mode -------------

# name -> (module, the 64-bit types the refusal must name). Operands reach the call through
# producers (narrowed before the walk reaches the call), block arguments, tuples, tokens.
OPERAND_RESULT_CASES = {
    "operand_only_argument": ("""
func.func @main(%arg0: tensor<2xf64>) {
  stablehlo.custom_call @my_kernel(%arg0) {has_side_effect = true} : (tensor<2xf64>) -> ()
  return
}""", ["operand #0 (tensor<2xf64>)"]),
    "operand_only_from_a_producer": ("""
func.func @main(%arg0: tensor<2xf64>) -> tensor<2xi32> {
  %0 = stablehlo.negate %arg0 : tensor<2xf64>
  %1 = stablehlo.custom_call @my_kernel(%0) : (tensor<2xf64>) -> tensor<2xi32>
  return %1 : tensor<2xi32>
}""", ["operand #0 (tensor<2xf64>)"]),
    "result_only": ("""
func.func @main(%arg0: tensor<2xf32>) -> tensor<2xi64> {
  %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<2xf32>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}""", ["result #0 (tensor<2xi64>)"]),
    "operand_and_result": ("""
func.func @main(%arg0: tensor<2xi64>) -> tensor<2xf64> {
  %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<2xi64>) -> tensor<2xf64>
  return %0 : tensor<2xf64>
}""", ["operand #0 (tensor<2xi64>)", "result #0 (tensor<2xf64>)"]),
    "mixed_widths": ("""
func.func @main(%a: tensor<2xf32>, %b: tensor<3xui64>, %c: tensor<i1>) -> (tensor<2xf32>, tensor<complex<f64>>) {
  %0:2 = stablehlo.custom_call @my_kernel(%a, %b, %c) : (tensor<2xf32>, tensor<3xui64>, tensor<i1>) -> (tensor<2xf32>, tensor<complex<f64>>)
  return %0#0, %0#1 : tensor<2xf32>, tensor<complex<f64>>
}""", ["operand #1 (tensor<3xui64>)", "result #1 (tensor<complex<f64>>)"]),
    "tuple_and_token_operands": ("""
func.func @main(%t: !stablehlo.token, %x: tensor<2xf64>, %y: tensor<2xf32>) -> !stablehlo.token {
  %0 = stablehlo.tuple %x, %y : tuple<tensor<2xf64>, tensor<2xf32>>
  %1 = stablehlo.custom_call @my_kernel(%t, %0) {has_side_effect = true} : (!stablehlo.token, tuple<tensor<2xf64>, tensor<2xf32>>) -> !stablehlo.token
  return %1 : !stablehlo.token
}""", ["operand #1 (tuple<tensor<2xf64>, tensor<2xf32>>)"]),
    "tuple_result_with_token": ("""
func.func @main(%t: !stablehlo.token, %x: tensor<2xf32>) -> tuple<!stablehlo.token, tensor<i64>> {
  %0 = stablehlo.custom_call @my_kernel(%t, %x) : (!stablehlo.token, tensor<2xf32>) -> tuple<!stablehlo.token, tensor<i64>>
  return %0 : tuple<!stablehlo.token, tensor<i64>>
}""", ["result #0 (tuple<!stablehlo.token, tensor<i64>>)"]),
    "operand_from_a_region_argument": ("""
func.func @main(%n: tensor<i64>) -> tensor<i64> {
  %r = stablehlo.while(%i = %n) : tensor<i64>
  cond {
    %c = stablehlo.constant dense<10> : tensor<i64>
    %p = stablehlo.compare LT, %i, %c, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    stablehlo.custom_call @my_kernel(%i) {has_side_effect = true} : (tensor<i64>) -> ()
    stablehlo.return %i : tensor<i64>
  }
  return %r : tensor<i64>
}""", ["operand #0 (tensor<i64>)"]),
}


def _custom_call_findings(findings):
    return sorted((str(f.location), f.op, f.message) for f in findings if f.kind == "custom-call")


@pytest.mark.parametrize("case", sorted(OPERAND_RESULT_CASES))
def test_unknown_custom_call_with_64bit_operands_or_results_is_refused_in_every_mode(case):
    """Issue 15, reproduction 1: the walk narrows an operand's producer before it reaches
    the call, so only a 64-bit *result* used to be caught in warn mode."""
    text, wide = OPERAND_RESULT_CASES[case]
    warn = refusal(text, mode="warn")
    error = refusal(text, mode="error")
    report = x64guard.check(text)
    allow = narrow_quietly(text, mode="allow")
    found = {name: _custom_call_findings(findings) for name, findings in
             [("warn", warn.findings), ("error", error.findings), ("check", report.findings),
              ("allow", allow.findings)]}
    assert found["warn"] == found["error"] == found["check"] == found["allow"], found
    ((location, op, message),) = found["warn"]
    assert op == "stablehlo.custom_call @my_kernel" and "@my_kernel" in message
    assert location.startswith("line ") and location.endswith("of the input")
    for part in wide:
        assert part in message
    assert not report.ok


def test_operand_only_custom_call_reproduction_from_the_issue():
    """`x64guard.narrow(text, mode="warn")` returned `(tensor<2xf32>) -> ()` with only a
    type-narrowed finding."""
    text, _ = OPERAND_RESULT_CASES["operand_only_argument"]
    error = refusal(text, mode="warn")
    assert [f.kind for f in error.findings if f.severity is x64guard.Severity.ERROR] == ["custom-call"]
    assert "line 3:3 of the input" in str(error)


def test_custom_call_with_32bit_operands_that_were_always_32bit_is_left_alone():
    """A narrowed program can feed an unknown kernel values that were 32-bit all along."""
    result = narrow_quietly("""
func.func @main(%x: tensor<3xf32>, %y: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.convert %y : (tensor<3xf64>) -> tensor<3xf32>
  %1 = stablehlo.add %x, %0 : tensor<3xf32>
  stablehlo.custom_call @my_kernel(%1, %x) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
  return %y : tensor<3xf64>
}""")
    assert "@my_kernel" in result.text and not [f for f in result.findings if "custom-call" in f.kind]


@pytest.mark.parametrize("target", sorted(HOST_CALLBACK_CUSTOM_CALLS))
def test_host_callbacks_are_refused_pointing_at_x64guard_jit(target):
    text = f"""
func.func @main(%x: tensor<3xf64>) {{
  stablehlo.custom_call @{target}(%x) {{has_side_effect = true}} : (tensor<3xf64>) -> ()
  return
}}"""
    error = refusal(text)
    (finding,) = [f for f in error.findings if f.kind == "custom-call"]
    assert finding.op == f"stablehlo.custom_call @{target}"
    assert "x64guard.jit" in finding.message and "operand #0 (tensor<3xf64>)" in finding.message


def test_jax_debug_print_under_x64_is_refused_at_the_users_line():
    """jax.debug.print has operands and no results: the case the issue found silent."""
    def shout(x):
        jax.debug.print("x = {x}", x=x)  # the refused line
        return x + 1.0

    text = lower_x64(shout, np.arange(3.0))
    assert "python_cpu_callback" in text
    error = refusal(text)
    (finding,) = [f for f in error.findings if f.kind == "custom-call"]
    assert "x64guard.jit" in finding.message
    assert (finding.location.file, finding.location.line) == (__file__, shout.__code__.co_firstlineno + 1)
    report = x64guard.check(text)
    assert [f.location for f in report.findings if f.kind == "custom-call"] == [finding.location]


@pytest.mark.parametrize("target", ["shape_assertion", "cusolver_getrf_ffi", "check.expect_close"])
def test_type_generic_targets_from_the_table_narrow(target):
    result = narrow_quietly(f"""
func.func @main(%x: tensor<3xf64>, %y: tensor<3xi64>) {{
  stablehlo.custom_call @{target}(%x, %y) {{has_side_effect = true}} : (tensor<3xf64>, tensor<3xi64>) -> ()
  return
}}""")
    assert f"@{target}(%arg0, %arg1) {{has_side_effect = true}} : (tensor<3xf32>, tensor<3xi32>) -> ()" in result.text


@pytest.mark.parametrize("target", ["tpu_custom_call", "__gpu$xla.gpu.triton"])
def test_compiled_kernels_are_refused(target):
    error = refusal(f"""
func.func @main(%x: tensor<3xf64>) -> tensor<3xf64> {{
  %0 = stablehlo.custom_call @"{target}"(%x) : (tensor<3xf64>) -> tensor<3xf64>
  return %0 : tensor<3xf64>
}}""")
    (finding,) = [f for f in error.findings if f.kind == "custom-call"]
    assert "compiled for the types it was traced with" in finding.message


def test_every_table_target_has_one_policy():
    """The tables are disjoint, and every policy is reachable from some target."""
    from x64guard.passes import tables
    sets = [tables.TYPE_GENERIC_CUSTOM_CALLS, tables.HOST_CALLBACK_CUSTOM_CALLS, tables.COMPILED_KERNEL_CUSTOM_CALLS]
    for i, a in enumerate(sets):
        for b in sets[i + 1:]:
            assert not a & b
    assert custom_call_policy("lapack_dgetrf_ffi") == (CustomCallPolicy.RENAMED, "lapack_sgetrf_ffi")
    assert custom_call_policy("lapack_zheevd_ffi") == (CustomCallPolicy.RENAMED, "lapack_cheevd_ffi")
    assert custom_call_policy("hipsolver_syevd_ffi")[0] is CustomCallPolicy.TYPE_GENERIC
    assert custom_call_policy("xla_ffi_python_cpu_callback")[0] is CustomCallPolicy.HOST_CALLBACK
    assert custom_call_policy("my_kernel") == (CustomCallPolicy.UNKNOWN, None)


def test_host_callback_spellings_match_the_installed_jax():
    """jax/_src/callback.py builds `xla_ffi{_partitioned}_python_{cpu,gpu}_callback`;
    buffer_callback.py names its own. Every spelling the installed JAX can emit is listed."""
    import inspect

    from jax._src import buffer_callback, callback
    source = inspect.getsource(callback)
    assert 'f"xla_ffi{partition}_python_{device}_callback"' in source
    spellings = {f"xla_ffi{p}_python_{d}_callback" for p in ("", "_partitioned") for d in ("cpu", "gpu")}
    spellings |= set(re.findall(r'"(xla_buffer_python_\w+_callback)"', inspect.getsource(buffer_callback)))
    assert spellings <= HOST_CALLBACK_CUSTOM_CALLS

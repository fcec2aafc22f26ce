"""Random numbers: each rule on golden modules from real lowerings (tests/passes/golden/rng,
regenerate.py there), then the same module run narrowed against JAX's x32 program (or
torch-xla's 32-bit graph) bit for bit. Unrecognized idioms stay refused.

The full matrix of samplers, keys and transformations is in the differential corpus
(tests/corpus/random_programs.py)."""

from __future__ import annotations

import os
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import x64guard
from tests.conftest import kinds, narrow_quietly, refusal
from tests.corpus.oracle import _cpu, run_oracle, x64
from tests.runner import lower_x64

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "rng")
KEY = np.array([0, 1234], np.uint32)
RBG_KEY = np.array([7, 11, 13, 1234], np.uint32)
R = jax.random


def golden(name: str) -> str:
    with open(os.path.join(GOLDEN, f"{name}.mlir")) as f:
        return f.read()


def run(text: str, *args) -> list[np.ndarray]:
    """Compile `text` on the CPU backend and run it on `args` as given (int64 stays int64)."""
    from jax._src import compiler
    backend, device, devices = _cpu()
    executable = backend.compile_and_load(text, devices, compiler.get_compile_options(
        num_replicas=1, num_partitions=1, backend=backend))
    with x64(True):
        inputs = [jax.device_put(np.asarray(a), device) for a in args]
    return [np.asarray(o) for o in executable.execute(inputs)]


def code(result: x64guard.NarrowResult) -> str:
    """The narrowed module's text without locations."""
    return result.module.operation.get_asm(enable_debug_info=False)


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    return got.dtype == want.dtype and got.shape == want.shape and \
        np.array_equal(np.ascontiguousarray(got).view(np.uint8), np.ascontiguousarray(want).view(np.uint8))


def x32(fn, *args, partitionable: bool = True) -> list[np.ndarray]:
    """JAX's own x32 program for `fn`."""
    with jax.threefry_partitionable(partitionable):
        return run_oracle(fn, list(args))


def assert_x32_bits(result: x64guard.NarrowResult, fn, *args, partitionable: bool = True) -> None:
    got, want = run(result.text, *args), x32(fn, *args, partitionable=partitionable)
    assert len(got) == len(want) and all(same_bits(g, w) for g, w in zip(got, want)), (got, want)


def only_info(result) -> None:
    assert not [f for f in result.findings if f.severity is not x64guard.Severity.INFO], result.findings


# ---- jax.random: words, floats, randint --------------------------------------------------

def test_threefry_words_become_the_xor_of_the_kernel_outputs():
    result = narrow_quietly(golden("jax_bits_u64_x64"))
    assert "stablehlo.xor" in result.text and "shift_left" not in result.text.split("func.func private")[0]
    assert not re.search(r"\bui64\b", result.text)
    assert "rng-words" in kinds(result.findings)
    only_info(result)
    assert_x32_bits(result, lambda k: R.bits(k, (5,), jnp.uint64), KEY)


def test_threefry_words_not_partitionable_use_x32_counters():
    result = narrow_quietly(golden("jax_bits_u64_not_partitionable_x64"))
    # Five words: x32 JAX pads its five counters with a 0, which the new call's counters select.
    assert "compare  EQ" in result.text or "compare EQ" in result.text
    assert len(re.findall(r"call @threefry2x32", result.text)) == 1  # the x64 call is gone
    assert "rng-words" in kinds(result.findings)
    assert_x32_bits(result, lambda k: R.bits(k, (5,), jnp.uint64), KEY, partitionable=False)


def test_reshaped_words_are_words():
    result = narrow_quietly(golden("jax_uniform_2x3_not_partitionable_x64"))
    assert {"rng-words", "rng-floats"} <= kinds(result.findings)
    assert_x32_bits(result, lambda k: R.uniform(k, (2, 3)), KEY, partitionable=False)


def test_float64_uniform_bits_become_float32_bits():
    result = narrow_quietly(golden("jax_uniform_x64"))
    assert "1065353216" in result.text and "4607182418800017408" not in result.text
    assert re.search(r"constant dense<9> : tensor<ui32>", code(result))
    assert "rng-floats" in kinds(result.findings)
    only_info(result)
    assert_x32_bits(result, lambda k: R.uniform(k, (4,)), KEY)


def test_randint_multiplier_is_two_to_the_sixteen():
    result = narrow_quietly(golden("jax_randint_x64"))
    assert "dense<65536>" in result.text and "4294967296" not in result.text
    assert "rng-randint" in kinds(result.findings)
    assert_x32_bits(result, lambda k: R.randint(k, (5,), -3, 1000), KEY)


def test_rbg_64bit_draw_becomes_a_32bit_draw_from_the_same_state():
    result = narrow_quietly(golden("jax_uniform_rbg_x64"))
    assert re.search(r"rng_bit_generator .*\(tensor<2xui64>\) -> \(tensor<2xui64>, tensor<4xui32>\)", code(result))
    assert {"rng-draw", "rng-floats", "rng-state"} <= kinds(result.findings)
    only_info(result)
    assert_x32_bits(result, lambda k: R.uniform(R.wrap_key_data(k, impl="rbg"), (4,)), RBG_KEY)


def test_findings_point_at_the_users_line():
    result = narrow_quietly(lower_x64(lambda k: R.uniform(k, (3,)), KEY))
    (floats,) = [f for f in result.findings if f.kind == "rng-floats"]
    assert (floats.location.file or "").endswith("test_rng.py") and floats.op == "stablehlo.bitcast_convert"


# ---- JAX's exact 64-bit idioms -------------------------------------------------------------

def test_x32_programs_counters_are_computed_in_32_bits():
    text = golden("jax_uniform_x32")
    result = narrow_quietly(text)
    assert not re.search(r"\bui64\b", result.text)
    (counters,) = [f for f in result.findings if f.kind == "rng-counters"]
    assert counters.severity is x64guard.Severity.INFO and "below 2**32" in counters.message
    # The counters changed type (issue 21: an idiom rewrite is a change, and the summary says so).
    assert set(result.changes) == {"ui64->ui32"} and result.changes["ui64->ui32"] > 0, result.changes
    assert "no 64-bit types" not in result.summary()
    assert_x32_bits(result, lambda k: R.uniform(k, (4,)), KEY)


def test_counters_of_2_to_the_32_elements_or_more_still_warn():
    text = """
    func.func @main() -> (tensor<5000000000xui32>, tensor<5000000000xui32>) {
      %0 = stablehlo.iota dim = 0 : tensor<5000000000xui64>
      %c = stablehlo.constant dense<32> : tensor<ui64>
      %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<5000000000xui64>
      %2 = stablehlo.shift_right_logical %0, %1 : tensor<5000000000xui64>
      %3 = stablehlo.convert %2 : (tensor<5000000000xui64>) -> tensor<5000000000xui32>
      %4 = stablehlo.convert %0 : (tensor<5000000000xui64>) -> tensor<5000000000xui32>
      return %3, %4 : tensor<5000000000xui32>, tensor<5000000000xui32>
    }"""
    result = x64guard.narrow(text, mode="allow")
    assert "rng-counters" not in kinds(result.findings)
    assert "shift-by-width" in kinds(result.findings)


def test_seed_split_is_exact_and_quiet():
    result = narrow_quietly(golden("jax_key_from_seed_x64"))
    assert "dense<-1> : tensor<i32>" in result.text
    assert {"low-word-mask", "rng-seed"} <= kinds(result.findings)
    only_info(result)
    for seed in (np.int64(42), np.int64(-5), np.int64(2 ** 31 - 1)):
        assert same_bits(run(result.text, seed.astype(np.int32))[0], x32(lambda s: R.key_data(R.key(s)), seed)[0])


def test_float32_sampling_under_x64_brings_no_warning():
    text = lower_x64(lambda k: (R.uniform(k, (5,), jnp.float32), R.normal(k, (3,), jnp.float32),
                                R.randint(k, (4,), 0, 9, jnp.int32)), KEY)
    with warnings.catch_warnings():
        warnings.simplefilter("error", x64guard.X64GuardWarning)
        try:
            result = x64guard.narrow(text)
        except x64guard.X64GuardWarning as warning:  # a summary of real narrowing is fine, a lossy count is not
            assert "lossy" not in str(warning), warning
            result = narrow_quietly(text)
    assert not [f for f in result.findings if f.severity is x64guard.Severity.WARNING]


# ---- the RNG state ----------------------------------------------------------------------------

def test_rng_state_is_kept_on_x32():
    result = narrow_quietly(golden("jax_randint_rbg_x32"))
    assert re.search(r"bitcast_convert .*-> tensor<2xui64>", code(result))
    state = [f for f in result.findings if f.kind == "rng-state"]
    assert state and all(f.severity is x64guard.Severity.INFO for f in state)
    assert x64guard.check(golden("jax_randint_rbg_x32"), target="x32").ok
    assert_x32_bits(result, lambda k: R.randint(R.wrap_key_data(k, impl="rbg"), (5,), 0, 9), RBG_KEY)


def test_rng_state_is_refused_on_x32_strict():
    error = refusal(golden("jax_randint_rbg_x32"), target="x32-strict")
    (state,) = {(f.kind, f.op) for f in error.findings if f.kind == "rng-state"}
    assert state == ("rng-state", "stablehlo.rng_bit_generator")
    message = next(f.message for f in error.findings if f.kind == "rng-state")
    assert "x32-strict" in message and "threefry" in message
    assert "bitcast-width" not in kinds(error.findings)  # one clear refusal, no noise
    report = x64guard.check(golden("jax_randint_rbg_x32"), target="x32-strict")
    assert not report.ok and {"rng-state", "type-64bit"} <= set(report.counts_by_kind())


def test_torch_xla_seed_parameter_and_lcg_stay_64bit():
    text = golden("torch_xla_randn_f32")
    result = narrow_quietly(text)
    assert "func.func @main(%arg0: tensor<i64>)" in code(result)
    assert "dense<214013> : tensor<i64>" in code(result)
    only_info(result)
    seed = np.int64(123)
    assert same_bits(run(result.text, seed)[0], run(text, seed)[0])


def test_torch_xla_two_draws_share_the_seed_chain():
    text = golden("torch_xla_two_draws_f32")
    result = narrow_quietly(text)
    only_info(result)
    for seed in (np.int64(0), np.int64(123), np.int64(-(2 ** 62))):
        assert same_bits(run(result.text, seed)[0], run(text, seed)[0])


def test_torch_xla_float64_draw_is_the_float32_graphs_draw():
    result = narrow_quietly(golden("torch_xla_randn_f64"))
    assert "1.1920929E-7" in result.text and "2.2204460492503131E-16" not in result.text
    assert {"rng-draw", "rng-floats", "rng-state"} <= kinds(result.findings)
    seed = np.int64(123)
    assert same_bits(run(result.text, seed)[0], run(golden("torch_xla_randn_f32"), seed)[0])


def test_torch_xla_randint_words_are_reduced_exactly_in_32_bits():
    text = golden("torch_xla_randint_i64")
    result = narrow_quietly(text)
    assert "tensor<2x3x2xui32>" in result.text and "rng-randint" in kinds(result.findings)
    wide = {m.group(1) for line in code(result).splitlines() if re.search(r"\b[su]?i64\b", line)
            for m in [re.search(r"(stablehlo\.\w+|func\.func)", line)] if m}
    # Only the seed chain (torch-xla's LCG in int64) and the generator keep 64-bit types.
    assert wide <= {"stablehlo.multiply", "stablehlo.add", "stablehlo.convert", "stablehlo.reshape",
                    "stablehlo.concatenate", "stablehlo.constant", "stablehlo.rng_bit_generator", "func.func"}, wide
    assert x64guard.check(result.text, target="x32").ok
    for seed in (123, 7, 2 ** 40 + 3):
        args64 = (np.int64(seed), np.int64(100), np.int64(-7))
        want = run(text, *args64)[0]
        got = run(result.text, np.int64(seed), np.int32(100), np.int32(-7))[0]
        assert np.array_equal(got, want.astype(np.int32)), (got, want)


@pytest.mark.parametrize("span", [1, 2, 3, 1000, 2 ** 16 + 1, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 7, 2 ** 32 - 1])
def test_remainder_of_a_word_pair_is_exact(span):
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import func as func_dialect

    from x64guard.io import modules
    from x64guard.passes.patterns.random_bits import _remainder_of_pair

    n = 64
    with modules.make_context() as context, ir.Location.unknown(context):
        module = ir.Module.create()
        t = ir.RankedTensorType.get([n], ir.Type.parse("ui32"))
        with ir.InsertionPoint(module.body):
            @func_dialect.FuncOp.from_py_func(t, t, t, name="main")
            def main(high, low, divisor):
                return _remainder_of_pair(high, low, divisor)
        text = str(module)
    rng = np.random.default_rng(span)
    high = rng.integers(0, 2 ** 32, n, dtype=np.uint64)
    low = rng.integers(0, 2 ** 32, n, dtype=np.uint64)
    high[:4], low[:4] = [0, 2 ** 32 - 1, 2 ** 32 - 1, 0], [0, 2 ** 32 - 1, 0, 2 ** 32 - 1]
    want = np.array([((int(h) << 32) | int(lo)) % span for h, lo in zip(high, low)], np.uint32)
    got = run(text, high.astype(np.uint32), low.astype(np.uint32), np.full(n, span, np.uint32))[0]
    assert np.array_equal(got, want)


_STATE_MODULE = """
func.func @main(%seed: tensor<i64>, %x: tensor<3xi64>) -> ({results}) {{
  %a = stablehlo.constant dense<214013> : tensor<i64>
  %c = stablehlo.constant dense<2531011> : tensor<i64>
  %z = stablehlo.constant dense<0> : tensor<1xui64>
  %0 = stablehlo.multiply %seed, %a : tensor<i64>
  %1 = stablehlo.add %0, %c : tensor<i64>
  %2 = stablehlo.convert %1 : (tensor<i64>) -> tensor<ui64>
  %3 = stablehlo.reshape %2 : (tensor<ui64>) -> tensor<1xui64>
  %4 = stablehlo.concatenate %3, %z, dim = 0 : (tensor<1xui64>, tensor<1xui64>) -> tensor<2xui64>
  %s, %w = stablehlo.rng_bit_generator %4, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3xui32>)
  {body}
}}"""


def test_a_state_value_returned_by_main_stays_64bit():
    text = _STATE_MODULE.format(results="tensor<3xui32>, tensor<i64>, tensor<3xi64>",
                                body="return %w, %1, %x : tensor<3xui32>, tensor<i64>, tensor<3xi64>")
    result = narrow_quietly(text)
    assert "func.func @main(%arg0: tensor<i64>, %arg1: tensor<3xi32>) -> (tensor<3xui32>, tensor<i64>, " \
           "tensor<3xi32>)" in code(result)
    got = run(result.text, np.int64(5), np.arange(3, dtype=np.int32))
    assert got[1].dtype == np.int64 and int(got[1]) == 5 * 214013 + 2531011


def test_a_state_value_also_used_as_data_is_converted_for_that_use():
    body = """%b = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<i64>) -> tensor<3xi64>
  %y = stablehlo.add %x, %b : tensor<3xi64>
  return %w, %y : tensor<3xui32>, tensor<3xi64>"""
    result = narrow_quietly(_STATE_MODULE.format(results="tensor<3xui32>, tensor<3xi64>", body=body))
    assert re.search(r"stablehlo.convert %\w+ : \(tensor<i64>\) -> tensor<i32>", code(result))
    got = run(result.text, np.int64(5), np.arange(3, dtype=np.int32))
    assert np.array_equal(got[1], np.arange(3, dtype=np.int32) + np.int32(5 * 214013 + 2531011))


def test_a_seed_argument_also_used_as_data_is_refused():
    body = """%b = stablehlo.broadcast_in_dim %seed, dims = [] : (tensor<i64>) -> tensor<3xi64>
  %y = stablehlo.add %x, %b : tensor<3xi64>
  return %w, %y : tensor<3xui32>, tensor<3xi64>"""
    error = refusal(_STATE_MODULE.format(results="tensor<3xui32>, tensor<3xi64>", body=body))
    assert any(f.kind == "rng-state" and "also used as data" in f.message for f in error.findings)


def test_a_state_from_an_op_x64guard_does_not_keep_is_refused():
    text = """
    func.func @main(%k: tensor<2xui64>) -> tensor<3xui32> {
      %0 = stablehlo.xor %k, %k : tensor<2xui64>
      %s, %w = stablehlo.rng_bit_generator %0, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3xui32>)
      return %w : tensor<3xui32>
    }"""
    error = refusal(text)
    (finding,) = [f for f in error.findings if f.kind == "rng-state"]
    assert "stablehlo.xor" in finding.message


# ---- what is not recognized stays refused ------------------------------------------------------

def test_float64_bits_built_from_user_words_are_refused():
    def user_floats(u):
        return lax.bitcast_convert_type((u >> np.uint64(12)) | np.uint64(0x3FF0000000000000), jnp.float64)
    error = refusal(lower_x64(user_floats, np.arange(3, dtype=np.uint64)))
    finding = next(f for f in error.findings if f.kind == "rng-bits")
    assert finding.op == "stablehlo.bitcast_convert" and (finding.location.file or "").endswith("test_rng.py")


def test_a_kernel_is_recognized_by_its_body_not_its_name():
    text = """
    func.func private @threefry2x32(%k1: tensor<ui32>, %k2: tensor<ui32>, %x: tensor<3xui32>, %y: tensor<3xui32>)
        -> (tensor<3xui32>, tensor<3xui32>) {
      %0 = stablehlo.xor %x, %y : tensor<3xui32>
      return %0, %y : tensor<3xui32>, tensor<3xui32>
    }
    func.func @main(%k1: tensor<ui32>, %k2: tensor<ui32>, %x: tensor<3xui32>) -> tensor<3xui64> {
      %0:2 = call @threefry2x32(%k1, %k2, %x, %x) : (tensor<ui32>, tensor<ui32>, tensor<3xui32>, tensor<3xui32>)
          -> (tensor<3xui32>, tensor<3xui32>)
      %1 = stablehlo.convert %0#0 : (tensor<3xui32>) -> tensor<3xui64>
      %2 = stablehlo.convert %0#1 : (tensor<3xui32>) -> tensor<3xui64>
      %c = stablehlo.constant dense<32> : tensor<ui64>
      %3 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<3xui64>
      %4 = stablehlo.shift_left %1, %3 : tensor<3xui64>
      %5 = stablehlo.or %4, %2 : tensor<3xui64>
      return %5 : tensor<3xui64>
    }"""
    error = refusal(text)
    assert "rng-bits" in kinds(error.findings) and "rng-words" not in kinds(error.findings)


def test_user_word_joins_still_warn():
    result = narrow_quietly(lower_x64(lambda hi, lo: (hi.astype(jnp.uint64) << 32) | lo.astype(jnp.uint64),
                                      np.arange(3, dtype=np.uint32), np.arange(3, dtype=np.uint32)))
    assert "shift-by-width" in kinds(result.findings) and "rng-words" not in kinds(result.findings)


def test_rng_bit_generator_with_a_64bit_key_input_keeps_it():
    text = lower_x64(lambda k: lax.rng_bit_generator(k, (3,), dtype=jnp.uint32)[1], np.array([1, 2], np.uint64))
    result = narrow_quietly(text)
    assert re.search(r"func.func public @main\(%arg0: tensor<2xui64>", code(result))
    key = np.array([1, 2], np.uint64)
    assert same_bits(run(result.text, key)[0], run(text, key)[0])


# ---- dry runs ------------------------------------------------------------------------------------

def test_allow_mode_and_check_leave_their_module_alone():
    from x64guard.io import modules
    module, _ = modules.load(golden("jax_uniform_rbg_x64"))
    before = str(module)
    result = x64guard.narrow(module, mode="allow")
    assert str(result.module) == before  # allow returns the module as it was, 64-bit random idioms included
    assert "rng-floats" in kinds(result.findings)
    x64guard.check(module)
    assert str(module) == before


def test_mode_error_accepts_the_kept_state_on_x32_only():
    """mode='error' refuses every 64-bit use the target does not accept: the RNG state is one
    x32 accepts, x32-strict does not."""
    text = golden("torch_xla_randn_f32")
    result = x64guard.narrow(text, mode="error")
    assert "rng-state" in kinds(result.findings)
    with pytest.raises(x64guard.X64GuardError) as info:
        x64guard.narrow(text, mode="error", target="x32-strict")
    assert "rng-state" in kinds(info.value.findings)


def test_unknown_target_is_a_value_error():
    with pytest.raises(ValueError, match="x32-strict"):
        x64guard.narrow(golden("jax_uniform_x32"), target="x23")

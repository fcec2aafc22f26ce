"""Named regression tests: every example the fuzzers found, as the fuzzer printed it.

Each test pins the verdict the property reached (or the behaviour a fix restored), so that a
change in x64guard, JAX or the classifier that turns it into something else shows up by
name. Findings that are still open live in test_open_bugs.py until fixed, then move here.
"""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import x64guard
from tests.corpus.oracle import lower_x64
from tests.reliability.differential import check_program, classify_mismatch
from tests.reliability.grammar import Input, Node, Program

pytestmark = pytest.mark.filterwarnings("ignore::x64guard.X64GuardWarning")


def test_fft_then_svd_fails_to_compile_in_xla_for_x32_jax_too():
    """Found by the differential fuzzer (seed 22): the narrowed module did not compile
    (`RET_CHECK failure ... fft_thunk.cc:168 IsMonotonicWithDim0Major`). JAX's own x32
    program fails the same way: an XLA CPU layout bug (FFT output into LAPACK's
    column-major operand), not x64guard's."""
    program = Program(inputs=(Input(dtype='complex128', shape=(4, 4), seed=314),),
                      nodes=(Node(op='fft', args=(0,)), Node(op='svd', args=(1,))), outputs=(2,))
    assert check_program(program).outcome == "xla-fails"


def test_float64_max_literal_becomes_float32_max_by_design():
    """Found by the differential fuzzer (seed 11): a Python literal 1.7976931348623157e308
    in an x64 program narrows to float32's max (x64guard maps the 64-bit sentinels to the
    32-bit ones, README), while x32 JAX rounds the literal to inf. The module cannot tell a
    literal from `jnp.finfo(jnp.float64).max`; the classifier calls it `sentinel-literal`."""
    program = Program(inputs=(Input(dtype='uint64', shape=(2, 1, 3), seed=1),),
                      nodes=(Node(op='const', params=(('value', '1.7976931348623157e+308'), ('dtype', None))),
                             Node(op='add', args=(0, 1))), outputs=(2,))
    assert check_program(program).outcome == "sentinel-literal"
    complex_program = Program(inputs=(Input(dtype='complex128', shape=(1,), seed=1),),
                              nodes=(Node(op='const', params=(('value', '1.7976931348623157e+308'), ('dtype', None))),
                                     Node(op='add', args=(0, 1))), outputs=(2,))
    assert check_program(complex_program).outcome == "sentinel-literal"


def test_finfo_max_of_the_dtype_is_exact():
    """The same value written as JAX writes it, relative to the dtype: bit-identical."""
    program = Program(inputs=(Input(dtype='float64', shape=(5,), seed=3, special=True),),
                      nodes=(Node(op='float_max_clip', args=(0,)), Node(op='nan_to_num', args=(0,))),
                      outputs=(1, 2))
    assert check_program(program).outcome == "identical"


def test_prng_key_from_a_python_int_inside_the_trace_is_refused_cleanly():
    """Found while building the grammar: `jax.random.PRNGKey(3)` inside an x64 trace masks
    the int64 seed with 0xFFFFFFFF (threefry_seed), an int64 constant int32 cannot hold:
    refused with constant-out-of-range at the user's line. (With overflow='wrap' the result
    would equal x32 JAX's; a narrower rule could accept the idiom.) Refused or identical."""
    program = Program(inputs=(Input(dtype='float64', shape=(3,), seed=1),),
                      nodes=(Node(op='random_prng_key', args=(0,), params=(('seed', 3),)),), outputs=(1,))
    verdict = check_program(program)
    assert verdict.outcome in ("refused", "identical")
    if verdict.outcome == "refused":
        assert {f.kind for f in verdict.findings if f.severity == "error"} == {"constant-out-of-range"}


def test_uint64_random_bits_are_refused_as_rng_bits():
    """Found by the differential fuzzer (seed 11, a grammar bug: `jax.random.bits` without a
    dtype asks for uint64 under x64): refused, naming the idiom, as the README says."""
    fn = lambda n: jnp.sum(n) + 0 * jnp.sum(  # noqa: E731
        __import__("jax").random.bits(__import__("jax").random.wrap_key_data(np.array([0, 5], np.uint32)), (2,)))
    text = lower_x64(fn, (np.arange(3, dtype=np.int64),))
    with pytest.raises(x64guard.X64GuardError) as info:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x64guard.narrow(text)
    assert "rng-bits" in {f.kind for f in info.value.findings}


def test_uint64_searchsorted_against_int64_is_a_jax_promotion_difference():
    """Found by the differential fuzzer (seed 11): searchsorted of sorted uint64 values with
    int64 queries promotes to float64 under x64 and to int32 under x32 (JAX's lattice), inside
    the op, so the output dtypes agree but the programs differ: a documented limit."""
    program = Program(inputs=(Input(dtype='uint64', shape=(2, 2, 2), seed=5, special=True),
                              Input(dtype='int64', shape=(2, 2, 2), seed=6, special=True)),
                      nodes=(Node(op='searchsorted', args=(0, 1), params=(('side', 'right'),)),), outputs=(2,))
    kind, detail = classify_mismatch(program)
    assert kind == "dtype-dependent", detail
    assert check_program(program).outcome in ("identical", "dtype-dependent")


def test_int64_sentinels_of_the_dtype_in_gathers_are_exact():
    """jnp.take(mode='fill') fills int64 with iinfo(int64).min: mapped to int32's min."""
    program = Program(inputs=(Input(dtype='int64', shape=(4,), seed=9, special=True),
                              Input(dtype='int64', shape=(3,), seed=10, special=True)),
                      nodes=(Node(op='take', args=(0, 1), params=(('axis', None), ('mode', 'fill'))),
                             Node(op='int_min_where', args=(0,))), outputs=(2, 3))
    assert check_program(program).outcome == "identical"


def test_out_of_range_constants_are_refused_with_findings():
    program = Program(inputs=(Input(dtype='int64', shape=(3,), seed=2),),
                      nodes=(Node(op='const', params=(('value', '1099511627776'), ('dtype', 'int64'), ('shape', ()))),
                             Node(op='add', args=(0, 1))), outputs=(2,))
    verdict = check_program(program)
    assert verdict.outcome == "refused" and "constant-out-of-range" in verdict.detail
    program = Program(inputs=(Input(dtype='float64', shape=(3,), seed=2),),
                      nodes=(Node(op='const', params=(('value', '1e39'), ('dtype', None))),
                             Node(op='multiply', args=(0, 1))), outputs=(2,))
    verdict = check_program(program)
    assert verdict.outcome == "refused" and "constant-overflow" in verdict.detail


def test_width_changing_bitcast_is_refused():
    program = Program(inputs=(Input(dtype='float64', shape=(3,), seed=2),),
                      nodes=(Node(op='bitcast_width', args=(0,), params=(('dtype', 'uint32'),)),), outputs=(1,))
    verdict = check_program(program)
    assert verdict.outcome == "refused" and verdict.detail == "bitcast-width"


def test_float16_lapack_is_not_generated():
    """Found by the differential fuzzer (seed 11, a grammar bug): svd of float16 traces but
    JAX cannot lower it (no LAPACK kernel), with x64 on or off. LAPACK ops take
    float32/64 and complex64/128 only now."""
    from tests.reliability.grammar import OPS
    assert not OPS["svd"].kinds[0](np.dtype(np.float16))
    assert OPS["svd"].kinds[0](np.dtype(np.float64))


# --------------------------------------------------------------------------- fixed in ccb139d
# Found by the fuzzers; x64guard was wrong or crashed; fixed in the core.

def _narrow_text(text: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return x64guard.narrow(text).text


def test_complex_constant_keeps_negative_zero():
    """Differential fuzzer, seeds 11, 22, 31, 32: complex constants were read as re + 1j*im,
    which turns (-0.0, 0.0) into (0.0, 0.0)."""
    program = Program(inputs=(Input(dtype='complex64', shape=(3, 2), seed=3989),),
                      nodes=(Node(op='const', params=(('value', '-0.0'), ('dtype', 'complex128'), ('shape', ()))),),
                      outputs=(1,))
    assert check_program(program).outcome == "identical"


def test_complex_constant_keeps_an_infinite_real_part_beside_nan():
    """Differential fuzzer, seed 31: the dense constant [[inf+nanj, ...]] became nan+nanj."""
    program = Program(inputs=(Input(dtype='uint64', shape=(0,), seed=272, special=True),),
                      nodes=(Node(op='const', params=(('value', 'inf'), ('dtype', 'complex128'), ('shape', (2, 2)),
                                                      ('dense', True))),), outputs=(1,))
    assert check_program(program).outcome == "identical"


def test_complex_constant_values_keep_their_signed_zeros():
    """The narrowed constant itself, read back (XLA's CPU backend drops the sign of a zero
    in a complex constant it returns directly, for x32 JAX too, so the bits are checked
    in the module, not in a run)."""
    from x64guard.passes.constant_io import read_constant
    text = """func.func @main() -> tensor<3xcomplex<f64>> {
  %0 = stablehlo.constant dense<[(-0.0, 0.0), (1.0, -0.0), (0x7FF0000000000000, 0x7FF8000000000000)]> : tensor<3xcomplex<f64>>
  return %0 : tensor<3xcomplex<f64>>
}"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = x64guard.narrow(text)
    op = result.module.body.operations[0].regions[0].blocks[0].operations[0]
    got, _ = read_constant(op, op.results[0].type)
    want = np.empty(3, np.complex64)
    want.real, want.imag = [-0.0, 1.0, np.inf], [0.0, -0.0, np.nan]
    assert got.tobytes() == want.tobytes(), f"{got!r} != {want!r}"


def test_complex_negative_zero_on_a_branch_cut():
    """The visible consequence: log(-0+0j) = -inf+pi*j; with the sign lost, -inf+0j."""
    from tests.corpus.oracle import bit_identical, run_oracle, run_text, to32
    c = np.complex128(complex(-0.0, 0.0))
    fn = lambda x: jnp.log(jnp.where(jnp.real(x) > 0, c, x))  # noqa: E731
    args = (np.ones(2, np.complex128),)
    got = run_text(_narrow_text(lower_x64(fn, args)), [to32(a) for a in args])[0]
    want = run_oracle(fn, [to32(a) for a in args])[0]
    assert want[0].imag == np.float32(np.pi)
    assert bit_identical(got, want), f"narrowed {got!r}, x32 JAX {want!r}"


@pytest.mark.parametrize("fn", [x64guard.narrow, x64guard.check], ids=["narrow", "check"])
def test_text_with_lone_surrogates_is_a_value_error(fn):
    """Hostile-input fuzzer (non_utf8, str with surrogates): TypeError from the bindings."""
    with pytest.raises(ValueError, match="^x64guard: "):
        fn("func.func @main() {\n  return\n}\n// \udcff")


DEEP_CASES = [("regions", 5_000), ("regions", 50_000), ("case", 5_000), ("module", 5_000), ("dense", 50_000),
              ("attr", 50_000), ("dict", 50_000), ("loc", 50_000), ("parens", 100_000)]
DEEP_CHILD = """
import json, sys, warnings
warnings.simplefilter("ignore")
import x64guard
from tests.reliability import hostile
for kind, depth in json.loads(sys.argv[1]):
    print("START", kind, depth, file=sys.stderr, flush=True)
    text = hostile._nest(kind, depth)
    for fn in (x64guard.narrow, x64guard.check):
        try:
            fn(text)
            print(kind, depth, fn.__name__, "ok", flush=True)
        except ValueError as exc:
            print(kind, depth, fn.__name__, "ValueError", str(exc).splitlines()[0][:160], flush=True)
"""


def test_deep_nesting_is_a_value_error_not_a_crash():
    """Found while building the hostile-input fuzzer: the MLIR text parser recursed once per
    nesting level and overflowed the C stack (SIGSEGV) on 5,000 nested regions or `module {`
    and on 50,000 nested brackets; x64guard now refuses nesting deeper than
    mlir.MAX_NESTING before parsing. In a child process (a crash would kill pytest)."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    proc = subprocess.run([sys.executable, "-c", DEEP_CHILD, json.dumps(DEEP_CASES)], capture_output=True,
                          text=True, timeout=600, cwd=Path(__file__).resolve().parents[2])
    started = [ln for ln in proc.stderr.splitlines() if ln.startswith("START")]
    assert proc.returncode == 0, f"exit {proc.returncode} during {started[-1:]}: {proc.stderr[-300:]}"
    for kind, depth in DEEP_CASES:
        for api in ("narrow", "check"):
            assert f"{kind} {depth} {api} ValueError x64guard:" in proc.stdout, (kind, depth, api, proc.stdout)


def test_narrow_on_nested_tuple_types_is_a_value_error():
    """x64guard's type converter recursed in Python per tuple level: RecursionError."""
    from tests.reliability import hostile
    with pytest.raises(ValueError, match="^x64guard: "):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x64guard.narrow(hostile._nest("tuple", 500))


def test_programs_jax_cannot_lower_are_not_blamed_on_x64guard():
    """Found by the differential fuzzer (seeds 41, 42): an FFT of a zero-length axis and a
    convolution with an empty kernel trace (eval_shape) but JAX cannot lower them, with x64
    on or off. The generator now keeps such operands non-empty, and the property reports
    `jax-cannot-lower` instead of failing when both lowerings fail."""
    from tests.reliability.grammar import OPS
    assert OPS["rfft"].nonempty and OPS["conv2d"].nonempty
    program = Program(inputs=(Input(dtype='float64', shape=(2, 0), seed=1),),
                      nodes=(Node(op='rfft', args=(0,)),), outputs=(1,))
    assert check_program(program).outcome == "jax-cannot-lower"

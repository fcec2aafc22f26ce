"""Named regression tests: every example the fuzzers found, as the fuzzer printed it.

Each test pins the verdict the property reached (or the behaviour a fix restored), so that a
change in x64guard, JAX or the classifier that turns it into something else shows up by
name.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import x64guard
from tests.corpus.oracle import lower_x64
from tests.reliability.differential import check_program, classify_mismatch, x32_expands_lgamma
from tests.reliability import hostile
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


def test_lgamma_of_a_variance_is_x32_jax_bits_or_the_documented_x32_lowering():
    """Found by the differential fuzzer (seed 2, jax 0.12, 2026-12-07): 3869.5747 where x32
    JAX gives 3869.5745. jax 0.12 lowers float64 lgamma to `chlo.lgamma`, float32 lgamma to
    its own expansion; narrowed, the CHLO op is XLA's float32 expansion. `narrow` now warns
    `x32-lowering` there (the classifier accepts the difference only with that warning);
    where JAX emits chlo.lgamma at both widths (0.10, 0.11) the bits are x32 JAX's."""
    program = Program(inputs=(Input(dtype='int64', shape=(2, 3), seed=0, special=False),),
                      nodes=(Node(op='var', args=(0,), params=(('axis', None), ('ddof', 0))),
                             Node(op='lgamma', args=(1,), params=())), outputs=(2,))
    verdict = check_program(program)
    if x32_expands_lgamma():
        assert verdict.outcome in ("x32-lowering", "identical")  # identical: XLA rounds as JAX does
        text = lower_x64(program.fn(), program.args())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x64guard.narrow(text)
        assert any("[x32-lowering]" in str(w.message) for w in caught)
    else:
        assert verdict.outcome == "identical"


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


def test_uint64_random_bits_are_x32_jaxs_bits():
    """Found by the differential fuzzer (seed 11, a grammar bug: `jax.random.bits` without a
    dtype asks for uint64 under x64). Refused as rng-bits until x64guard learned jax.random's
    word idiom; now narrowed to the words x32 JAX draws (`b1 ^ b2`). The fuzzer's program also
    adds an int64 sum to the uint64 draw, which JAX promotes to float64 under x64 and to int32
    under x32 (a promotion difference, as in dd_mixed_uint_int): the draw is compared alone."""
    import jax

    def draw(n):
        return jnp.sum(n), jax.random.bits(jax.random.wrap_key_data(np.array([0, 5], np.uint32)), (2,))

    fuzzed = lambda n: jnp.sum(n) + 0 * jnp.sum(draw(n)[1])  # noqa: E731
    args = (np.arange(3, dtype=np.int64),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert "rng-words" in {f.kind for f in x64guard.narrow(lower_x64(fuzzed, args)).findings}
        result = x64guard.narrow(lower_x64(draw, args))
    from tests.runner import run_narrowed, run_x32
    got, want = run_narrowed(result.text, args), run_x32(draw, args)
    assert [(a.dtype, a.tobytes()) for a in map(np.asarray, got)] == \
        [(a.dtype, a.tobytes()) for a in map(np.asarray, want)]


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
    modules.MAX_NESTING before parsing. In a child process (a crash would kill pytest)."""
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
    """x64guard's type converter recursed in Python per tuple level: RecursionError. Under
    Python's default recursion limit (a library loaded earlier in the process may have raised
    it, and then the module narrows)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises(ValueError, match="^x64guard: "):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                x64guard.narrow(hostile._nest("tuple", 500))
    finally:
        sys.setrecursionlimit(limit)


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


# --------------------------------------------------------------------------- corrupted bytecode
# jaxlib's bytecode reader aborts, crashes or loops on these; x64guard reads bytecode in a
# separate process first (x64guard/io/isolated_reader.py). Each case runs in a child process
# too, so that a regression kills the child, not pytest.

BYTECODE_CHILD = """
import sys, warnings
warnings.simplefilter("ignore")
import x64guard
data = open(sys.argv[1], "rb").read()
for fn in (x64guard.narrow, x64guard.check):
    try:
        fn(data)
        print(fn.__name__, "ok")
    except ValueError as exc:
        print(fn.__name__, "ValueError", str(exc).splitlines()[0][:300])
"""
ROOT = Path(__file__).resolve().parents[2]


def _read_in_child(data: bytes, tmp_path: Path) -> str:
    path = tmp_path / "case.mlirbc"
    path.write_bytes(data)
    env = dict(os.environ, X64GUARD_READER_TIMEOUT="3",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", BYTECODE_CHILD, str(path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stdout}{proc.stderr[-600:]}"
    lines = proc.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == ["narrow", "check"], proc.stdout
    return proc.stdout


def test_bytecode_with_a_non_utf8_op_name_is_a_value_error(tmp_path):
    """Hostile-input fuzzer (byte_flip of bytecode, cases 256/287/...): SIGABRT
    (`nanobind ... str_from_cstr_and_size(): conversion error!` while the reader built a
    diagnostic)."""
    output = _read_in_child(hostile.hand_written_bytecode().replace(b"multiply", b"\xa6ultiply", 1), tmp_path)
    assert output.count("ValueError x64guard: the MLIR bytecode reader was killed by SIGABRT") == 2, output


def test_bytecode_with_one_flipped_byte_is_a_value_error_not_a_segfault(tmp_path):
    """Hostile-input fuzzer (byte_flip of bytecode:hand.mlirbc, case 1691): byte 333 of the
    hand-written seed's bytecode 0x11 -> 0x80 made the reader SIGSEGV."""
    data = hostile.hand_written_bytecode()
    assert data[333] == 0x11
    output = _read_in_child(hostile.patched(data, 333, 0x80), tmp_path)
    assert output.count("ValueError x64guard: the MLIR bytecode reader was killed by SIGSEGV") == 2, output


def test_bytecode_reader_errors_carry_an_x64guard_message(tmp_path):
    """Hostile-input fuzzer (bytecode_header, case 188): a raw ValueError ('SmallVector
    unable to grow ...') escaped the bytecode reader unexplained."""
    output = _read_in_child(hostile.patched(hostile.hand_written_bytecode(), 21, 0x00), tmp_path)
    assert output.count("ValueError x64guard: unreadable MLIR bytecode") == 2, output


HANGING_BYTECODE = (
    "TUzvUg1NTElSMjMuMC4wZ2l0AAFRBwEFCTsBAw8DBwcTFwUzGx8jJxMrLzM3Oz9DR0tPU1dbX2Nna29zdwM+BZYEPQH1BwsPCxMT"
    "LxMLEwsTLxMTExcTCw8LFwszMxMTCwsTLxMPDwsPCw8TEw8LDwsLEwsTCwsTCxMLEw8TCxMLDy8TDxMLFy8PCwsLEw8PFxMTExMb"
    "CwsLCxsTCxMLEwsTCwsLCw8PDx8PCx8LDw8LJw8LGwsLDwsPCx8LDw8FFQsLCwsLCwsLJycBhgITHwsTDxMfCxMTCwsTDxMfCxMP"
    "Ex8LLwtPMwsLCxMLEwsTCw8LEwsLCwsTCwsLCxMLEwsPCwsTCw8fExMfExMfEwsTCxMLCxMTHxcLExMfLwsTEx8XCxMTHwsTCxML"
    "Cw8LEwsTExMfCxMLEx8PDw8LCxMTHy8TExMfDxMfCxMfLw8PDxMLCxMLCxMLFwsTEx8XCxMTHwsTCwsTCw8TCy8TCwE9DxMTDw8T"
    "DxMTDw8HCxMTDxMXKwsfIxcbHxcXFxcPAmITHwU9FcvTBT8jDQEBHSoDBSUBEQAAAAAAAAAAHeICAQVBHa4CAQVDHW4CASUHEQAA"
    "AAAAAAAAHaICAR3GAgEVugMFHdID1gMVBgQFBUUdB+0FRx2KA44DBUkjDQMRAQAAAAAAAAAjDQMRAAAAAAAAAAAd5gIPFfoDBQVL"
    "BU0dsgIBJQERAQAAAAAAAAAdygIBHXcBFScFBU8djR8FUREZAB0CBDUVfgRDERUFBVMVxwUFVQVXFRICBQUpFSYCBQVZBVsVSgIF"
    "BV0VXgIFBV8degIXHTkBHYICAQVhHcICAQUTEQ0BJQcRAAAAAAAA+H8dKfYCHXN9HYMuAwVjHVIDVgMlAREFAAAAAAAAAB2LHwVl"
    "BWcFaR3OAx8diyMdjSMdZgRqBBc3MTkXNzFdFzcxhRc3MakDBaNRpVEFawVtBW8NJQEJrbG1uQMDLa8FcQMDLbMFcwMDLbcFdQMD"
    "LbsFdwV5BXsNKR0VxR0lVR0HyS0DB94EGZcdzc8FfS1DB74CJXkFfxXV2x3X2QWBLQMJPgUnQgWhHd3fBYMt4QcNN3MFhQ0rHefp"
    "BYcd6ycFiS0DB+IEGZkNLR0V8x0lWwcHBQsHAwUDBQEFBwcJBwUXAQMBAQEDAQUPAQMBAQEDAQUdBxYCLQMH5gQdOQ0vHRUiAh0l"
    "Xx0HKgItAwfqBE9ZDTEdFTYCHToCAQWLDTMdFUYCHSVlHQdOAi0DB/IENVkNNR0VWgIdJWkdB2ICLQMH8gRdmw03JRMRAAAAAAAA"
    "AAAFjSU5IQUAAAAAAAAAAAAAAAAAAAAjDQMRBgAAAAAAAAAFjwlrBRsdigIBBSEdkgIBBZEdmgIBBSUdcwEFkx2qAgEFJwWVBZcJ"
    "YR2+AgEFmQWbBZ0Fnx3SAgEFKx3aAgEFLREZAQUvBaEd7gIBBaMdOX0tAwfiBGVvHTn+Ah0pAgMtAwfiBGORHXcKAx0pDgMtAwfi"
    "BFuRHRYDAQWlHR4DAQWnHSYDAQWpBasVMgMFHQc2Ay0DB94ELTcdPgNCAwWtFUYDBR0HSgMtAwfeBDtPJQcR/Knx0k1iUD8FrxVa"
    "AwUdB14DLQMH3gQ7XR1mA2oDBbEVbgMFHQdyAy0DB94EYZUJUx1+A1UFsx2GA0MFtQW3FSdDCVkdmgNbBbkdRaIDFaYDBR0HqgMt"
    "AwfqBBlHCV0dtgNfBbsdB74DLQMH6gQZaR2PHx1JHx1FHwW9Bb8V2gMFHQfeAy0DB+4EKz8lARECAAAAAAAAAB2D6gMV7gMFHQfy"
    "Ay0DB+4EK0cdSTUdB/4DLQMH7gQZkwXBHQcKBC0DB/IEHyslAREGAAAAAAAAAB2PIx1JIx1FIx0iBCMFwwljHS4EZQXFCWcdOgRp"
    "BccdQgRGBAXJFUoENR0pTgQtAwfuBF9pHVYEWgQFyxVeBDUdKWIELQMH7gSBiwXNHW4EAQXPCVcdegRPBdEVJycdhgRPBdMlARED"
    "AAAAAAAAAB2SBE8F1RsBDRsDGQ0bAxkXGwEXGwEZGwMZGQECBBsDDScbAxkfGwEfAQICDQEJGwMNFxsDFQ0BCgQbAxkVGwUZBRUF"
    "BwUDDwkFHQcRExcFBwsFBQMFBQcDAQUFAQUFAwUDAwUFAwEDAwUHCQEBAwEFAw8DBwUDAwMRBQMRAxEbBQUJDRsBFQRCFAUBUQGh"
    "AQcEGhQDASUDUAEDBwTCCANnuwcLEgMHGgMfIgMACUILBQMHC0aBBwMFAwcNRoEJAwsFAQkvRjoDCwMFAwEJQgsNAwcLRoUHAwUD"
    "DxcGhQMFBQ0RFwZiAwMFBQEBB0Z6Aw8DBQcLExUJQgsRAwEJQoIDEQMBMRYrCQMBAQUJAxsZFwsEpQMNDwkHmQObA50LnwAJQisT"
    "AwENRo4EFQMJBQMJEQQrAwsDERMJB5kDmwOdC58AB0Z2BBcFAQUHAQUHCUIrGQMBDwaCBAMBBQMNEQQrCQEPCQsHRpYDGwMDAyMJ"
    "QgsRAwELRp4DBwMdAycJQgsdAwEHRrIDHwMDBQMrCUILEQMBC0aJBwMDAy8NRokVAwsFLTEJQgsdAwELRkcHAwMDNQ8GRwMDBS03"
    "EwbCAwMDBzM5LRUGxgMDIQM7C0bKAyEDIwM9M1aRIwMdByk/AwcELQMHCwUDlwOXAA8GRwMBBQEDEQSRAwUJQiERAwEbViEhAwEF"
    "QUMHBC0DBwsFAyEDIQAPBiEDAQUBAxEEIQMFCUILJQMBDUbmAycDCQVFRxUG9gMDOwNJNRZNAw8DSwkDAwk5BlIEAw8FBQURBE0D"
    "ZwMDCRcGPgQDDwUFBREETQNnCUILEQMBC0aTBwMDA08NRpMVAwsFJVEJQgspAwELRpUHAwMDVQ8GlQMDBSVXEwYSBAMDB1NZJRUG"
    "FgQDIQNbC0YaBCEDIwNdN0YeBCsDBQUjXwdGKgQtAwcDTQdGNgQvAxEDAwUECwlhQWNlA1DDMQcELQMJCwcVCQkAEwYTAwUHAQMF"
    "BQQBAwcDUOUzBwSLAxUjBwUBCQAJQgEZAwEPBkEDAQUDBxUG8gIDAQMDC0Z/BwMDAwsXBn8DAwUBDRUG+gIDBQMPDwYGAwMFBQUR"
    "BQQBBQkTA1DxNQcEogIDCQ8DCQArQtYCNwMDLVYPOQUFAwUBAwcEIgIDJ0MJDzMPMwMzAzMACUIPBQMHDUY7OwMJBQEJCUIPBQMH"
    "EwYTAwcHCw0BDUYdPQMJBQEBCUIPPwMHEwYTAwcHERMPCUIPBQMHDUY7OwMJBQMXCUIPBQMHEwYTAwcHGRsDDUYdPQMJBQMDCUIP"
    "PwMHEwYTAwcHHyEdDUbqAkEDCQUVIxEEDwMlBQQBAwcDUB4CQwcEzgIDL1sFBQEAFQZvAwEDAwlCAREDAQ1GO0UDCQUFBwlCARkD"
    "AQdGugJHAwEHCQsFC0Z1BwMDAw0nBnUDAwUBDwlCAREDAQtGHQcDAwMTDUYdSQMLBREVCUIBEQMBC0Y/BwMDAxkNRj8VAwsFERsJ"
    "QgERAwENRj8VAwkFDR8LRh0HAwsDIQ1GHUsDCwUdIykGzgIDCwUlFwtGQQcDAwMNDwZBAwMFESkTBhMDAwcnKxEFBAEDLQNQMgJN"
    "BwQtAwkLBxEBAQATBhMDAQcBAwUFBAEDBwNQQgJPBwTZAxUrAx0AGQZxAxsDAR8GhgIDGwMBIQaOAgMbAwUjBpYCAw8FAwcXBp4C"
    "Aw8FAQkZBnEDGwMLCUIbBQMHG1YbIQMHBQ0PBwQtAwcLBQ8bDxsADwYbAwcFAQMRBBsDBSVGpgILAwcDEQUEAQMTA1BWAlEHBDUD"
    "Bw8DBQAVBm8DEQMBB0YBUwMRAwMFBAEDBQNQAVUHBHcDCRMDIQAJQhdXAxMLRhcHAxMDAx1WF1kDEQUBBQcELQMHCwUnbSdtAA8G"
    "FwMTBQEDEQQXAwUFBAEDBwYDAQUBAIIV1ystPRkbOzsnIx0ZJSctKRsZJycXFw8FBQUNDQcHCRkHExcJJyUJLxsdExlFFQ8LFRUV"
    "FQ0lKSEXFRUJEw8LExEZDzkxKwUhYRcLET1REw8LEQ0LCwsJFQsRDwsdDwsTEQ8JESMTCw8PFQsRYnVpbHRpbgBmdW5jAHN0YWJs"
    "ZWhsbwBtb2R1bGUAcmV0dXJuAGNhbGwAY29uc3RhbnQAYnJvYWRjYXN0X2luX2RpbQBjb21wYXJlAGFkZABzZWxlY3QAY29udmVy"
    "dABtdWx0aXBseQByZWFsAHJlZHVjZQByZWR1Y2Vfd2luZG93AGltYWcAbmVnYXRlAGNvbXBsZXgAc3FydAByZW1haW5kZXIAYW5k"
    "AGlvdGEAc29ydABzaW5lAHdoaWxlAHNjYXR0ZXIAY2FzZQBnYXRoZXIAc3VidHJhY3QAL3dvcmsvbWFpbi90ZXN0cy9yZWxpYWJp"
    "bGl0eS9ob3N0aWxlLnB5AF9qYXhfc2VlZF9mdW5jdGlvbi48bG9jYWxzPi5mAHByaXZhdGUAaml0OgBqaXQoZikvaml0AF9qYXhf"
    "c2VlZF9mdW5jdGlvbi48bG9jYWxzPi5mLjxsb2NhbHM+LjxsYW1iZGE+AGpheC5yZXN1bHRfaW5mbwAtAGNvbnZlcnRfZWxlbWVu"
    "dF90eXBlAGppdChmKS9icm9hZGNhc3RfaW5fZGltAGppdChmKS9jb252ZXJ0X2VsZW1lbnRfdHlwZQBfd2hlcmUAY2xvc2VkX2Nh"
    "bGwAYXJnc29ydABfd2hlcmVfMABub3JtAGN1bXN1bQBjdW1zdW1fMQBtdWwAaml0KGYpL2d0AGppdChmKS9sdABqaXQoZikvYWRk"
    "AGppdChmKS9zZWxlY3RfbgBtaGxvLm51bV9wYXJ0aXRpb25zAG1obG8ubnVtX3JlcGxpY2FzAGppdF9mAHJlc3VsdFswXQByZXN1"
    "bHRbMV0AcmVzdWx0WzJdAHJlc3VsdFszXQBtYWluAHB1YmxpYwBsb3dlcl94NjQAL3dvcmsvbWFpbi90ZXN0cy9jb3JwdXMvb3Jh"
    "Y2xlLnB5AHdyaXRlX3NlZWRzADxtb2R1bGU+AC90bXAvZnovaDIucHkAY2xvc2VkX2NhbGw6AHdoaWxlL2JvZHkvY2xvc2VkX2Nh"
    "bGwAaml0AHJlZHVjZV93aW5kb3dfc3VtAHJlZHVjZV93aW5kb3dfc3VtOgBuZWcAcmVkdWNlX3N1bQBzZWxlY3RfbgBlcQBqaXQo"
    "X3doZXJlKQByZW0AbmUAbHQAc29ydDoAbHRfdG8AeABuAGMAaml0KGYpAGppdChmKS9zaW4Aaml0KGYpL211bABqaXQoZikvaW50"
    "ZWdlcl9wb3cAaml0KGYpL2ppdChfd2hlcmUpAGppdChmKS9zY2FuAGppdChmKS93aGlsZQBqaXQoZikvaml0KGFyZ3NvcnQpAGpp"
    "dChmKS9qaXQocmVtYWluZGVyKQBqaXQoZikvc2NhdHRlci1hZGQAaml0KGYpL3JlZHVjZV9zdW0Aaml0KGYpL2NvbmQAaml0KGYp"
    "L2dhdGhlcgBqaXQoZikvaml0KG5vcm0pAGppdChmKS9qaXQoY3Vtc3VtKQBqaXQoZikvY29uZC9icmFuY2hfMV9mdW4vbXVsAGpp"
    "dChmKS9jb25kL2JyYW5jaF8wX2Z1bi9zdWIAc2NhdHRlci1hZGQ6AHNjYXR0ZXItYWRkAGppdChmKS93aGlsZS9ib2R5L2Nsb3Nl"
    "ZF9jYWxsAGppdChmKS93aGlsZS9ib2R5L2FkZABqaXQoZikvd2hpbGUvY29uZC9sdAAIWgNbB54CAREBqQGuAr3+AgMZAwkH5gP/"
    "AwEFTgMLAXYDAQEDDQWKBAfWA/cLAXIEAQEDPQsBkgMBAQOHCwGuAwEBAzEJlwoClwXiAwfWA/8FDgQJDgKXLwsBJgQBAQsBMgQB"
    "AQ0BwQEBUyMNAeMBAVcjDQHvAQFZIwN5B/O+BQfmA/0H5gP7A3sHDgT3DwEaAgEBXSMH1gP9CwG2AgEBB9YD+wcGBPsPAS4CAQFh"
    "Iw8BPgIBAWMjDwFSAgEBZyMLAX4CAQEPAWYCAQFrIwVqAg9f5gRfdgJf")


def test_bytecode_that_makes_the_reader_loop_is_stopped(tmp_path):
    """Hostile-input fuzzer (byte_flip of bytecode:jax.mlirbc, case 710): one byte of a JAX
    module's bytecode changed (offset 782, 0xd1 -> 0x43) and the parse never returned (a
    CPU loop in the reader; RSS flat). The reader process is stopped after its timeout."""
    output = _read_in_child(base64.b64decode(HANGING_BYTECODE), tmp_path)
    assert output.count("ValueError x64guard: the MLIR bytecode reader did not finish within 3 s") == 2, output


def test_command_line_on_a_segfaulting_bytecode_exits_2(tmp_path):
    """Command-line fuzzer (case 92): `x64guard check` exited -11."""
    path = tmp_path / "bad.mlirbc"
    path.write_bytes(hostile.patched(hostile.hand_written_bytecode(), 333, 0x80))
    proc = subprocess.run([sys.executable, "-m", "x64guard", "check", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, f"exit {proc.returncode}: {proc.stderr[-500:]}"
    assert proc.stderr.strip().splitlines() == [
        f"x64guard: error: {path}: the MLIR bytecode reader was killed by SIGSEGV on this input (corrupted "
        "bytecode, or bytecode this jaxlib's MLIR cannot read); x64guard read it in a separate process, so this "
        "one is unaffected"]


@pytest.mark.parametrize("fn", [x64guard.narrow, x64guard.check], ids=["narrow", "check"])
def test_bytecode_with_a_non_utf8_attribute_name_is_a_value_error(fn):
    """Hostile-input fuzzer (bit_flip of bytecode:hand.mlirbc, make fuzz SEED=3, binary case
    33): the module reads, then RuntimeError `nanobind::detail::str_from_cstr_and_size():
    conversion error!` escaped x64guard's generic rule listing the attribute names."""
    from x64guard.io import modules
    text = ('func.func @main(%x: tensor<f64>) -> tensor<f64> {\n'
            '  %0 = "acme.widget"(%x) {kind = f64} : (tensor<f64>) -> tensor<f64>\n'
            '  return %0 : tensor<f64>\n}')
    data = modules.to_bytecode(modules.load(text)[0]).replace(b"kind", b"k\xeend", 1)
    with pytest.raises(ValueError, match="^x64guard: the module holds a name that is not valid UTF-8"):
        fn(data)


def test_deeply_nested_tuple_types_are_a_value_error_not_a_crash(tmp_path):
    """Hostile-input fuzzer: 50,000 nested tuple<...> types crashed the MLIR text parser
    (SIGSEGV); the nesting guard counted {([ only and now counts <> too."""
    output = _read_in_child(hostile._nest("tuple", 50_000).encode(), tmp_path)
    assert output.count("ValueError x64guard: the input nests brackets 50001 deep") == 2, output


def test_arrows_and_stray_closers_do_not_hide_nesting():
    """The nesting guard counts conservatively: '->' closes nothing, and closing brackets
    with no opener (in strings, say) cannot lower the count of what follows them."""
    from x64guard.io import modules
    depth = modules.MAX_NESTING + 1
    hidden = ("->" * 5000 + ")" * 5000 + "<" * depth).encode()
    assert modules._max_nesting(hidden) == depth
    assert modules._max_nesting(("(" * depth + ")" * depth).encode()) == depth
    assert modules._max_nesting(b"(tensor<i32>) -> tensor<i32>" * 2000) == 2  # 6,000 openers, 2 deep


NON_UTF8_DIAGNOSTIC_BYTECODE = (
    "TUzvUg1NTElSMjMuMC4wZ2l0AAEzCQEFCQ0XAQMTAwUHFwUPGx8jJxcrLwcDMQOJXxsBWwsTExMTCw8LEwsLCxMTExPPC08TE48T"
    "LxMTDxMTExMTLxMTExMLCxMTLxMTEwUFCwsBGxcPExMHDw8nCxcHDwsCDgUFGxcjBwkXARU5FwEVSwMDCw0FHRENBQUfFwEFAw0P"
    "BSEFIxcBBwcXAQc1FwEHbRcBB5MlB2EAAAAAAADwPwAAAAAAAABAAAAAAAAACEAAAAAAAAAAgAAAAAAAABRAAAAAAAAAGEAFJSUF"
    "IQEAAAAAAAAAAgAAAAAAAAAXAQ0VFwEPFSUBQQAAAAAAAPg/AAAAAAAABMAAAAAAAADwf////////+9/FwERFSUDEQAAAAAAAAAA"
    "FwETFRcBFRkhBQEXAS0VFwEvFRcBMRUXATMVFwE1CyUDEQEAAAAAAAAAFwEhHRcBIxsXASUbAwNLTQUnDQkXAScZFwEpDyUDEQMA"
    "AAAAAAAAFwEZHRcBGxkXAR0PBwcFCxsFCQkJGwELGwMJCxsDDRENAQIEAQICBQcHBQEHBwUBEwkbBQkJFQsbARkBCQT+AgUBUREJ"
    "AQcE1gIDAQUDUBkDBwSqAgMfMwcPGwsdAx8AB0IDBQMHCQYDAwcFAQcHQicHAwULBikDBQUDCwdCLQkDAQdCMQsDAxEWMwUDAQUR"
    "BQkDCQ8FBwUDBwAHQlUNAwMTRlcPAxcFHyMPBFkDJQMNFwUHBQMHAAdCQxEDAwkGRQMDBR8jCwZHAwEFIQ8VB09JAwEDJw8EUQUl"
    "KQdCNxMDBQkGOQMFBQ0XDQY7AxMDFQ0GPQMBAxsFBD8HCRkdBg0BAQMpMQCFMRHLESHLy8vLy8sDAAAAAAAAAAQAAAAAAAAAALoC"
    "Kw0LEw8LCykFDxENERMJEw8PCxULEWJ1aWx0aW4AZvVuYwBzdGFibGVobG8AYWNtZQBtb2R1bGUAcmV0dXJuAGNvbnN0YW50AGFk"
    "ZABtdWx0aXBseQBjb252ZXJ0AHdoaWxlAGNvbXBhcmUAd2lkZ2V0AC0AbWhsby5udW1fcGFydGl0aW9ucwBzZWVkAG1haW4AcnVi"
    "bGljAG1vZGVsLnB5AGtpbmQAYmxvYjEACDkVBR8BDQETAQEVLwMhAyUDKwMvA1MFt10DQQM1")


@pytest.mark.parametrize("trusted", [False, True], ids=["vetted", "trusted"])
def test_bytecode_whose_text_is_not_utf8_is_an_x64guard_value_error(trusted):
    """`make fuzz` SEED=7 (bit_flip of bytecode:hand.mlirbc, binary case 1610): the reader
    raised a bare UnicodeDecodeError ("'utf-8' codec can't decode byte 0xf5 ..."), a
    ValueError without x64guard's message."""
    data = base64.b64decode(NON_UTF8_DIAGNOSTIC_BYTECODE)
    for fn in (x64guard.narrow, x64guard.check):
        with pytest.raises(ValueError, match="^x64guard: unreadable MLIR bytecode: text in it is not valid UTF-8"):
            fn(data, trusted=trusted)

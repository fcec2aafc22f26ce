"""Bad input: a clear ValueError (X64GuardError is one), never a crash or an abort.

The cases run in a child process, so that an abort inside the MLIR bindings (which kills
the whole process) fails the test with the case's name instead of killing pytest.
"""

import json
import textwrap

import numpy as np
import pytest

import x64guard
from tests.conftest import kinds, narrow_quietly
from tests.support.child import run_code

GOOD = """
func.func @main(%x: tensor<3xcomplex<f64>>, %y: tensor<2xi64>) -> tensor<3xcomplex<f64>> {
  %c = stablehlo.constant dense<[(1.0, 2.0), (3.0, 4.0), (5.0, 6.0)]> : tensor<3xcomplex<f64>>
  %0 = stablehlo.add %x, %c : tensor<3xcomplex<f64>>
  return %0 : tensor<3xcomplex<f64>>
}"""

CHILD = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("ignore")
    import x64guard
    from x64guard.io import modules
    good = sys.stdin.read()
    module, _ = modules.load(good)
    bytecode = modules.to_bytecode(module)
    artifact = modules.to_portable_artifact(module)
    cases = {
        "empty text": "", "blank text": "   \\n", "empty bytes": b"",
        "malformed": "module {", "not mlir": "hello world",
        "bad type": "func.func @f(%x: tensor<3xf99>) { return }",
        "undefined value": "func.func @f() -> tensor<f64> { return %x : tensor<f64> }",
        "garbage with magic": b"ML\\xefR" + bytes(range(256)) * 4,
        "non-utf8": b"\\xff\\xfe\\x00module",
    }
    for name, blob in (("bytecode", bytecode), ("artifact", artifact)):
        for cut in sorted({4, 5, 8, 16, len(blob) // 3, len(blob) // 2, len(blob) - 9, len(blob) - 1}):
            cases[f"truncated {name} at {cut}"] = blob[:cut]
        flipped = bytearray(blob)
        for i in range(7, len(flipped), 13):
            flipped[i] ^= 0x5A
        cases[f"byte-flipped {name}"] = bytes(flipped)
    results = {}
    for name, data in cases.items():
        print(name, file=sys.stderr, flush=True)
        for fn in (x64guard.narrow, x64guard.check):
            try:
                fn(data)
                outcome = "ok"
            except ValueError as exc:
                outcome = "ValueError: " + str(exc).splitlines()[0]
            except Exception as exc:
                outcome = f"UNEXPECTED {type(exc).__name__}: {exc}"
            results[f"{name} / {fn.__name__}"] = outcome
    print(json.dumps(results))
""")


@pytest.fixture(scope="module")
def outcomes():
    proc = run_code(CHILD, input=GOOD)
    last_case = proc.stderr.strip().splitlines()[-1:] if proc.stderr else []
    assert proc.returncode == 0, f"child died ({proc.returncode}) during case {last_case}: {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_no_case_crashes_or_aborts(outcomes):
    unexpected = {k: v for k, v in outcomes.items() if v.startswith("UNEXPECTED")}
    assert not unexpected


@pytest.mark.parametrize("case", ["empty text", "blank text", "empty bytes"])
def test_empty_input_says_so(outcomes, case):
    assert outcomes[f"{case} / narrow"].startswith("ValueError: x64guard: the input is empty")


@pytest.mark.parametrize("case", ["malformed", "not mlir", "bad type", "undefined value"])
def test_malformed_text_names_the_problem_and_its_line(outcomes, case):
    message = outcomes[f"{case} / narrow"]
    assert message.startswith("ValueError: x64guard: the input is not a valid MLIR module: loc(")


def test_bad_bytes_are_value_errors(outcomes):
    for name, outcome in outcomes.items():
        if name.startswith(("truncated", "garbage", "non-utf8")):
            assert outcome.startswith("ValueError: x64guard:"), (name, outcome)


def test_unknown_dialect_is_narrowed_generically_with_a_warning():
    result = narrow_quietly("""
func.func @main(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = "acme.widget"(%x) : (tensor<3xf64>) -> tensor<3xf64>
  return %0 : tensor<3xf64>
}""")
    finding = next(f for f in result.findings if f.kind == "unknown-op")
    assert finding.op == "acme.widget" and finding.severity == "warning"
    assert "tensor<3xf32>" in result.text


def test_huge_constant_narrows_exactly():
    values = np.random.default_rng(0).standard_normal(2_000_000)
    text = f"""
func.func @main() -> tensor<2000000xf64> {{
  %0 = stablehlo.constant dense<"0x{values.tobytes().hex()}"> : tensor<2000000xf64>
  return %0 : tensor<2000000xf64>
}}"""
    result = narrow_quietly(text)
    from x64guard.passes.constant_io import read_constant
    op = result.module.body.operations[0].regions[0].blocks[0].operations[0]
    got, _ = read_constant(op, op.results[0].type)
    assert got.tobytes() == values.astype(np.float32).tobytes()


def test_huge_out_of_range_constant_reports_a_few_examples_not_all():
    values = np.full(100_000, 2**40, dtype=np.int64)
    values[0] = 1
    text = f"""
func.func @main() -> tensor<100000xi64> {{
  %0 = stablehlo.constant dense<"0x{values.tobytes().hex()}"> : tensor<100000xi64>
  return %0 : tensor<100000xi64>
}}"""
    with pytest.raises(x64guard.X64GuardError) as info:
        narrow_quietly(text)
    (finding,) = info.value.findings
    assert "99999 value(s) (1099511627776, 1099511627776, 1099511627776)" in finding.message
    assert len(str(info.value)) < 1000


# Quantized StableHLO: jaxlib 0.10's bindings register no quant dialect (issue 15).
QUANTIZED = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.uniform_quantize %x : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.1:3>>
  %1 = stablehlo.uniform_dequantize %0 : (tensor<4x!quant.uniform<i8:f32, 0.1:3>>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}"""


@pytest.mark.parametrize("entry", ["narrow", "check"])
def test_quantized_module_says_the_quant_dialect_is_missing_and_what_to_do(entry):
    with pytest.raises(ValueError) as info:
        getattr(x64guard, entry)(QUANTIZED)
    message = str(info.value)
    assert "quantized types (!quant.uniform)" in message and "do not include the quant dialect" in message
    assert "stablehlo-legalize-quant-to-math" in message and "float model" in message


def test_quantized_module_through_the_command_line_is_one_line(tmp_path):
    from tests.cli.conftest import run_cli
    path = tmp_path / "quantized.mlir"
    path.write_text(QUANTIZED)
    result = run_cli("check", path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "do not include the quant dialect" in line and "internal error" not in line


def test_quantized_type_with_a_64bit_expressed_type_is_refused_naming_the_quant_dialect():
    text = """
func.func @main(%x: tensor<4x!quant.uniform<i8:f64, 0.1:3>>) -> tensor<4x!quant.uniform<i8:f64, 0.1:3>> {
  return %x : tensor<4x!quant.uniform<i8:f64, 0.1:3>>
}"""
    report = x64guard.check(text)
    (finding,) = [f for f in report.findings if f.kind == "unsupported-type"]
    assert "quant dialect" in finding.message and not report.ok


def test_stablehlo_type_errors_that_only_mention_quantized_types_get_no_quant_hint():
    """StableHLO's verifier lists 'quantized' among the allowed types of most ops: only a
    module that spells a !quant type gets the quant advice."""
    with pytest.raises(ValueError) as info:
        x64guard.check("func.func @f(%x: tensor<3xf64>) -> tensor<3xi1> {\n"
                       "  %0 = stablehlo.add %x, %x : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xi1>\n"
                       "  return %0 : tensor<3xi1>\n}")
    assert "quant dialect" not in str(info.value)

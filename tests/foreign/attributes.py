"""Modules x64guard did not see made: any op name, any attribute kind, anywhere.

A hypothesis strategy writes one module per example: an op (a known StableHLO op, a
constant, a custom_call, a composite, or an op of a dialect nobody registered, such as
StableHLO's test `check` dialect) carrying an attribute of one kind (dense int / float /
complex of every width, splat and non-splat, hex, dense_resource, arrays, dictionaries,
type attributes, locations, sparse and opaque dialect attributes), placed on the op, the
function or the module. Every public entry point must then return, or raise ValueError
(X64GuardError is one): never a foreign exception, never an abort.

Reading some attributes through the bindings aborts the process (jaxlib's casters throw
through C++), so the property runs in a child process (`python -m tests.foreign.attributes
EXAMPLES`) that prints each case on stderr before running it: the parent test names the
case that killed it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Element types as MLIR spells them, with a value formatter for dense literals.
INT_TYPES = ["i1", "i4", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64", "si32", "si64"]
FLOAT_TYPES = ["f8E4M3FN", "f8E5M2", "bf16", "f16", "f32", "f64"]
COMPLEX_TYPES = ["complex<f32>", "complex<f64>", "complex<i32>", "complex<i64>"]
OPERAND_TYPES = ["f64", "f32", "i64", "ui64", "i32", "complex<f64>", "complex<f32>", "i1"]

INT_RANGES = {"i1": (0, 1), "i4": (-8, 7), "i8": (-128, 127), "i16": (-2**15, 2**15 - 1),
              "i32": (-2**31, 2**31 - 1), "i64": (-2**63, 2**63 - 1), "si32": (-2**31, 2**31 - 1),
              "si64": (-2**63, 2**63 - 1), "ui8": (0, 255), "ui16": (0, 2**16 - 1),
              "ui32": (0, 2**32 - 1), "ui64": (0, 2**64 - 1)}
SPECIAL_FLOATS = ["0.0", "-0.0", "1.0", "-1.5", "0x7FC00000", "1.0e-300", "1.7976931348623157e+308",
                  "3.4028234663852886e+38", "65504.0", "0x7FF0000000000000"]

RESOURCE_BLOB = "0x08000000" + "0000000000000000" + "000000000000F03F"  # alignment, 0.0, 1.0 (f64)


def _shape(draw) -> tuple[list[int], bool]:
    shape = draw(st.sampled_from([[], [1], [2], [3], [2, 2], [0]]))
    splat = draw(st.booleans()) or not shape or 0 in shape
    return shape, splat


def _count(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _tensor(shape: list[int], element: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"


def _nested(values: list[str], shape: list[int]) -> str:
    if not shape:
        return values[0]
    if len(shape) == 1:
        return "[" + ", ".join(values) + "]"
    step = _count(shape[1:])
    return "[" + ", ".join(_nested(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"


@st.composite
def dense_attribute(draw) -> tuple[str, str]:
    """(attribute text, its tensor type)."""
    kind = draw(st.sampled_from(["int", "float", "complex", "hex", "resource", "empty"]))
    shape, splat = _shape(draw)
    if kind == "resource":
        return f"dense_resource<blob1> : {_tensor([2], 'f64')}", _tensor([2], "f64")
    if kind == "empty":
        element = draw(st.sampled_from(INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES))
        return f"dense<> : {_tensor([0], element)}", _tensor([0], element)
    if kind == "int":
        element = draw(st.sampled_from(INT_TYPES))
        lo, hi = INT_RANGES[element]
        value = st.one_of(st.sampled_from([lo, hi, 0, 1, -1 if lo < 0 else 2, 2**31 - 1 if hi > 2**31 else hi]),
                          st.integers(lo, hi))
        if element == "i1":
            value = st.sampled_from(["true", "false"])
        element_value = lambda: str(draw(value))  # noqa: E731
    elif kind in ("float", "hex"):
        element = draw(st.sampled_from(FLOAT_TYPES))
        element_value = lambda: draw(st.sampled_from(SPECIAL_FLOATS[:4] + SPECIAL_FLOATS[5:7]))  # noqa: E731
    else:
        element = draw(st.sampled_from(COMPLEX_TYPES))
        part = st.sampled_from(["1", "-2", "0"]) if "i" in element.split("<")[1] else \
            st.sampled_from(["1.0", "-0.0", "2.5e+00", "1.0e-300"])
        element_value = lambda: f"({draw(part)}, {draw(part)})"  # noqa: E731
    tensor = _tensor(shape, element)
    if kind == "hex":
        width = {"f8E4M3FN": 1, "f8E5M2": 1, "bf16": 2, "f16": 2, "f32": 4, "f64": 8}[element]
        count = 1 if splat else _count(shape)
        return f'dense<"0x{"3C" * width * count}"> : {tensor}', tensor
    if splat:
        return f"dense<{element_value()}> : {tensor}", tensor
    return f"dense<{_nested([element_value() for _ in range(_count(shape))], shape)}> : {tensor}", tensor


@st.composite
def any_attribute(draw, depth: int = 0) -> str:
    choices = ["dense", "dense", "array", "type", "scalar", "string", "loc", "dialect", "sparse", "unit"]
    if depth < 2:
        choices += ["list", "dict"]
    kind = draw(st.sampled_from(choices))
    if kind == "dense":
        return draw(dense_attribute())[0]
    if kind == "array":
        return draw(st.sampled_from(["array<i64: 1, 2>", "array<i64>", "array<f64: 1.0, -0.0>",
                                     "array<i1: true>", "array<i32: 7>"]))
    if kind == "type":
        return draw(st.sampled_from(["f64", "i64", "ui64", "complex<f64>", "tensor<2xf64>", "tensor<?xi64>",
                                     "(f64) -> i64", "tuple<f64, i64>", "!stablehlo.token", "!foo.bar<f64>",
                                     "tensor<4x!quant.uniform<i8:f32, 0.1:3>>", "vector<4xf64>", "none"]))
    if kind == "scalar":
        return draw(st.sampled_from(["1 : i64", "18446744073709551615 : ui64", "-9223372036854775808 : i64",
                                     "1.0 : f64", "0x7FF8000000000000 : f64", "true", "1.5 : bf16"]))
    if kind == "string":
        return draw(st.sampled_from(['"plain"', '"dense<(1.0, 2.0)> : tensor<complex<f64>>"', '"\\00\\FF"', '""']))
    if kind == "loc":
        return draw(st.sampled_from(['loc("a.py":1:2)', "loc(unknown)", 'loc(fused["a", "b"])',
                                     'loc("name"("f.py":3:4))', 'loc(callsite("a":1:1 at "b":2:2))']))
    if kind == "dialect":
        return draw(st.sampled_from(["#foo.bar<1>", "#stablehlo<comparison_direction LT>",
                                     "#stablehlo.dot<lhs_contracting_dimensions = [0]>", "affine_map<(d0) -> (d0)>",
                                     "#sdy.sharding<@mesh, [{}]>"]))
    if kind == "sparse":
        return draw(st.sampled_from(["sparse<[[0]], [1.0]> : tensor<2xf64>",
                                     "sparse<[[0]], [(1.0, 2.0)]> : tensor<2xcomplex<f64>>"]))
    if kind == "unit":
        return "unit"
    if kind == "list":
        return "[" + ", ".join(draw(st.lists(any_attribute(depth + 1), max_size=3))) + "]"
    entries = draw(st.lists(any_attribute(depth + 1), max_size=3))
    return "{" + ", ".join(f"k{i} = {a}" for i, a in enumerate(entries)) + "}"


PLACES = ["unknown_op", "check_const", "known_op", "constant", "custom_call", "custom_call_dict", "composite",
          "func", "module", "arg_attr"]
UNKNOWN_OPS = ["check.expect_almost_eq_const", "check.expect_eq_const", "foo.bar", "mydialect.kernel",
               "stablehlo.not_an_op", "tf.Const"]


@st.composite
def module_text(draw) -> str:
    place = draw(st.sampled_from(PLACES))
    element = draw(st.sampled_from(OPERAND_TYPES))
    t = f"tensor<2x{element}>"
    attr = draw(any_attribute())
    body = f"%0 = stablehlo.add %arg0, %arg0 : {t}" if element != "i1" else f"%0 = stablehlo.and %arg0, %arg0 : {t}"
    func_attr = module_attr = arg_attr = extra = ""
    if place == "unknown_op":
        name = draw(st.sampled_from(UNKNOWN_OPS))
        body = f'%0 = "{name}"(%arg0) {{value = {attr}}} : ({t}) -> {t}'
    elif place == "check_const":
        name = draw(st.sampled_from(UNKNOWN_OPS[:2]))
        dense, dense_type = draw(dense_attribute())
        body = f'"{name}"(%arg0) {{value = {dense}}} : ({t}) -> ()\n  %0 = stablehlo.negate %arg0 : {t}'
        if element == "i1":
            body = body.replace("stablehlo.negate", "stablehlo.not")
    elif place == "known_op":
        op = "stablehlo.and" if element == "i1" else "stablehlo.add"
        body = f"%0 = {op} %arg0, %arg0 {{x = {attr}}} : {t}"
    elif place == "constant":
        dense, dense_type = draw(dense_attribute())
        body = (f"%c = stablehlo.constant {dense}\n  %0 = stablehlo.add %arg0, %arg0 : {t}")
        if element == "i1":
            body = body.replace("stablehlo.add", "stablehlo.and")
    elif place in ("custom_call", "custom_call_dict"):
        target = draw(st.sampled_from(["my_kernel", "Sharding", "lapack_dgetrf_ffi", "xla_ffi_python_cpu_callback",
                                       "check.expect_close", "shape_assertion"]))
        config = f"backend_config = {{x = {attr}}}, api_version = 4 : i32" if place == "custom_call_dict" \
            else f"x = {attr}"
        body = f"%0 = stablehlo.custom_call @{target}(%arg0) {{{config}}} : ({t}) -> {t}"
    elif place == "composite":
        op = draw(st.sampled_from(["chlo.erf", "chlo.top_k", "my.composite"]))
        body = (f'%0 = stablehlo.composite "{op}" %arg0 {{composite_attributes = {{k = {attr}}}, '
                f"decomposition = @decomposition}} : ({t}) -> {t}")
        extra = (f"\n  func.func private @decomposition(%a: {t}) -> {t} {{\n"
                 f"    return %a : {t}\n  }}")
    elif place == "func":
        func_attr = f" attributes {{x = {attr}}}"
    elif place == "module":
        module_attr = f" attributes {{foo.x = {attr}}}"
    else:
        arg_attr = f" {{foo.x = {attr}}}"
    return (f"module{module_attr} {{\n  func.func @main(%arg0: {t}{arg_attr}) -> {t}{func_attr} {{\n"
            f"  {body}\n  return %0 : {t}\n  }}{extra}\n}}\n"
            f'{{-#\n  dialect_resources: {{ builtin: {{ blob1: "{RESOURCE_BLOB}" }} }}\n#-}}\n')


def outcomes(text: str) -> dict[str, str]:
    """What every public entry point does with `text`: 'ok', 'ValueError: ...', or
    'FOREIGN <type>: ...' (the failures the property looks for)."""
    import x64guard
    from x64guard.io import modules
    from x64guard.cli import app

    results: dict[str, str] = {}

    def record(name: str, fn) -> None:
        try:
            fn()
            results[name] = "ok"
        except ValueError as exc:  # X64GuardError is one
            message = str(exc).splitlines()[0] if str(exc) else ""
            results[name] = f"{type(exc).__name__}: {message[:160]}"
            if not message.startswith("x64guard"):
                results[name] = f"FOREIGN message {results[name]}"
        except Exception as exc:  # noqa: BLE001 - this is what the property looks for
            results[name] = f"FOREIGN {type(exc).__name__}: {str(exc)[:200]}"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in ("warn", "error", "allow"):
            record(f"narrow/{mode}", lambda: x64guard.narrow(text, mode=mode))
        for overflow in ("saturate", "wrap"):
            record(f"narrow/{overflow}", lambda: x64guard.narrow(text, overflow=overflow))
        for target in ("x32", "neuron", "x64"):
            record(f"check/{target}", lambda: x64guard.check(text, target=target))
        try:
            module, _ = modules.load(text)
        except ValueError:
            module = None
        if module is not None:
            record("narrow/ir.Module", lambda: x64guard.narrow(module))
            record("check/ir.Module", lambda: x64guard.check(module))
            bytecode = modules.to_bytecode(module)
            record("narrow/bytecode", lambda: x64guard.narrow(bytecode, trusted=True))
    # The command line, in this process: exit 0/1 with a report, or 2 with a reason that is
    # not an internal error.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "module.mlir")
        with open(path, "w") as f:
            f.write(text)
        for argv in (["check", "--format", "json", "-o", os.path.join(tmp, "r.json"), path],
                     ["narrow", path, "-o", os.path.join(tmp, "out.mlir")]):
            import contextlib
            import io
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = app.main(argv)
            name = f"cli/{argv[0]}"
            results[name] = f"exit {code}"
            if code not in (0, 1, 2) or "internal error" in err.getvalue():
                results[name] = f"FOREIGN exit {code}: {err.getvalue().strip()[:200]}"
    return results


def foreign(results: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in results.items() if v.startswith("FOREIGN")}


def run_property(examples: int) -> None:
    """The property, run by hypothesis in this process (the child)."""

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(module_text())
    def no_foreign_exception(text: str) -> None:
        print("CASE " + json.dumps(text), file=sys.stderr, flush=True)
        found = foreign(outcomes(text))
        assert not found, f"foreign exception(s) {found} for:\n{text}"

    no_foreign_exception()


if __name__ == "__main__":
    run_property(int(sys.argv[1]))
    print("PROPERTY HELD", flush=True)

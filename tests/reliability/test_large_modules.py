"""Large modules: a big float64 constant narrows within a memory budget, a 100,000-op module
narrows without recursion limits or super-linear time, and 500 nested regions are fine.

The 400 MB / 200,000-op figures are benchmarks (`make bench`, bench/large.py); these are
the small versions, with asserted limits.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

import x64guard
from tests.conftest import wide_types
from x64guard.io import modules

ROOT = Path(__file__).resolve().parents[2]
CONSTANT_MB = 20
MEMORY_LIMIT = 2.5

pytestmark = pytest.mark.filterwarnings("ignore::x64guard.X64GuardWarning")


def _bench_large():
    spec = importlib.util.spec_from_file_location("x64guard_bench_large", ROOT / "bench" / "large.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def constant_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("large") / "constant.mlirbc"
    _bench_large().write_constant_module(path, CONSTANT_MB * 1_000_000, "bytecode")
    return path


def test_narrowing_a_20mb_float64_constant_adds_at_most_2_5x(constant_file):
    """What narrowing itself costs: a child parses the module, resets its peak RSS, narrows
    it; peak minus RSS before narrowing, over the constant's size (bench/large.py row
    'module'; the bindings' parse of the bytes is measured by the benchmark)."""
    row = _bench_large().measure_memory(constant_file, "module", CONSTANT_MB * 1_000_000, timeout=300)
    assert row["ok"], row.get("error")
    assert row["changes"] == {"f64->f32": 2}   # the constant and the function's result
    assert row["ratio"] <= MEMORY_LIMIT, (
        f"narrowing a {CONSTANT_MB} MB float64 constant took +{row['extra_mb']:.0f} MB of peak RSS = "
        f"{row['ratio']:.2f}x the constant (limit {MEMORY_LIMIT}x)")


# --------------------------------------------------------------------------- many ops

def synthetic_module(steps: int) -> str:
    """An x64 module of about 7.3 ops per step: a long chain in @main with constants,
    converts, locations, calls to a private function, and a while loop every 500 steps."""
    lines = ["#loc1 = loc(\"model.py\":1:1)",
             "func.func private @helper(%a: tensor<8xf64>) -> tensor<8xf64> {",
             "  %c = stablehlo.constant dense<2.5> : tensor<8xf64>",
             "  %0 = stablehlo.multiply %a, %c : tensor<8xf64>",
             "  return %0 : tensor<8xf64>", "}",
             "func.func public @main(%x0: tensor<8xf64>, %n0: tensor<8xi64>) -> (tensor<8xf64>, tensor<8xi64>) {"]
    add = lines.append
    for i in range(steps):
        loc = f'loc("model.py":{i % 5000 + 1}:{i % 7 + 1})'
        add(f"  %c{i} = stablehlo.constant dense<{1 + (i % 17) * 1e-3}> : tensor<8xf64> {loc}")
        add(f"  %s{i} = stablehlo.sine %x{i} : tensor<8xf64> {loc}")
        add(f"  %m{i} = stablehlo.multiply %s{i}, %c{i} : tensor<8xf64> {loc}")
        add(f"  %k{i} = stablehlo.convert %n{i} : (tensor<8xi64>) -> tensor<8xf64> {loc}")
        if i % 50 == 0:
            add(f"  %x{i + 1} = func.call @helper(%m{i}) : (tensor<8xf64>) -> tensor<8xf64> {loc}")
        else:
            add(f"  %x{i + 1} = stablehlo.add %m{i}, %k{i} : tensor<8xf64> {loc}")
        add(f"  %d{i} = stablehlo.constant dense<{i % 7 + 1}> : tensor<8xi64> {loc}")
        if i % 500 == 0:
            add(f"  %n{i + 1} = stablehlo.while(%a = %n{i}) : tensor<8xi64>\n   cond {{\n"
                f"    %t = stablehlo.constant dense<true> : tensor<i1>\n    stablehlo.return %t : tensor<i1>\n"
                f"  }} do {{\n    %b = stablehlo.add %a, %d{i} : tensor<8xi64>\n"
                f"    stablehlo.return %b : tensor<8xi64>\n  }} {loc}")
        else:
            add(f"  %n{i + 1} = stablehlo.add %n{i}, %d{i} : tensor<8xi64> {loc}")
    add(f"  return %x{steps}, %n{steps} : tensor<8xf64>, tensor<8xi64>")
    add("}")
    return "\n".join(lines)


def _count_ops(module) -> int:
    from jax.extend.mlir import ir
    count = 0

    def visit(_op):
        nonlocal count
        count += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return count


def _best_narrow(module, runs=3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        x64guard.narrow(module)
        times.append(time.perf_counter() - start)
    return min(times)


def test_a_100k_op_module_narrows_without_recursion_limits_in_linear_time():
    small_text, large_text = synthetic_module(1_500), synthetic_module(15_000)
    small, _ = modules.load(small_text)
    large, _ = modules.load(large_text)
    n_small, n_large = _count_ops(small), _count_ops(large)
    assert n_large > 100_000
    limit = sys.getrecursionlimit()
    result = x64guard.narrow(large)
    assert sys.getrecursionlimit() == limit
    assert result.module.operation.verify()
    assert not wide_types(result.module)
    assert result.changes["f64->f32"] > 50_000 and result.changes["i64->i32"] > 20_000
    # Text in, text out too (the printer and the parser of x64guard's own output).
    text = x64guard.narrow(large_text).text
    assert "f64" not in text.replace("jax.", "")
    small_us = _best_narrow(small) / n_small * 1e6
    large_us = _best_narrow(large) / n_large * 1e6
    # Loose (timing on a shared machine): quadratic behaviour would show as ~10x here.
    assert large_us <= 3.0 * small_us, (
        f"time per op grows with the module: {small_us:.2f} us/op at {n_small:,} ops, "
        f"{large_us:.2f} us/op at {n_large:,} ops")


# --------------------------------------------------------------------------- nesting

NESTED = textwrap.dedent('''
    import sys, warnings
    warnings.simplefilter("ignore")
    import x64guard
    from tests.reliability.test_large_modules import nested_module
    depth, kinds = int(sys.argv[1]), sys.argv[2]
    text = nested_module(depth, kinds)
    result = x64guard.narrow(text)
    assert result.module.operation.verify()
    narrowed = result.text
    assert " i64" not in narrowed and "xi64" not in narrowed and "<i64>" not in narrowed, narrowed[:2000]
    report = x64guard.check(text)
    print("ok", result.changes, len(report.findings))
''')


def nested_module(depth: int, kinds: str = "while,if,case") -> str:
    """`depth` nested regions of stablehlo.while / stablehlo.if / stablehlo.case (cycling
    through `kinds`), each level adding to an i64 value (built from the inside out)."""
    cycle = [("while", "if", "case").index(k) for k in kinds.split(",")]
    body = f"%w{depth} = stablehlo.add %v{depth}, %one : tensor<i64>"
    for d in range(depth - 1, -1, -1):
        inner = f"{body}\n"
        kind = cycle[d % len(cycle)]
        if kind == 0:
            body = (f"%w{d} = stablehlo.while(%a{d} = %v{d}) : tensor<i64>\n cond {{\n"
                    f"  %p{d} = stablehlo.compare LT, %a{d}, %one, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>\n"
                    f"  stablehlo.return %p{d} : tensor<i1>\n }} do {{\n"
                    f"  %v{d + 1} = stablehlo.add %a{d}, %one : tensor<i64>\n{inner}"
                    f"  stablehlo.return %w{d + 1} : tensor<i64>\n }}")
        elif kind == 1:
            body = (f"%q{d} = stablehlo.compare GT, %v{d}, %one, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>\n"
                    f"%w{d} = \"stablehlo.if\"(%q{d}) ({{\n"
                    f"  %v{d + 1} = stablehlo.multiply %v{d}, %one : tensor<i64>\n{inner}"
                    f"  stablehlo.return %w{d + 1} : tensor<i64>\n }}, {{\n"
                    f"  stablehlo.return %v{d} : tensor<i64>\n }}) : (tensor<i1>) -> tensor<i64>")
        else:
            body = (f"%w{d} = \"stablehlo.case\"(%idx) ({{\n"
                    f"  %v{d + 1} = stablehlo.subtract %v{d}, %one : tensor<i64>\n{inner}"
                    f"  stablehlo.return %w{d + 1} : tensor<i64>\n }}, {{\n"
                    f"  %f{d} = stablehlo.constant dense<2.5> : tensor<f64>\n"
                    f"  %g{d} = stablehlo.convert %f{d} : (tensor<f64>) -> tensor<i64>\n"
                    f"  stablehlo.return %g{d} : tensor<i64>\n }}) : (tensor<i32>) -> tensor<i64>")
    return ("func.func @main(%v0: tensor<i64>, %idx: tensor<i32>) -> tensor<i64> {\n"
            "%one = stablehlo.constant dense<1> : tensor<i64>\n"
            f"{body}\nreturn %w0 : tensor<i64>\n}}")


@pytest.mark.parametrize("kinds", ["while,if,case", "while"])
def test_500_nested_while_if_case_regions_narrow(kinds):
    """In a child process: a stack overflow in the bindings would kill pytest otherwise."""
    proc = subprocess.run([sys.executable, "-c", NESTED, "500", kinds], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.startswith("ok {"), proc.stdout

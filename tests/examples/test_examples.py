"""The examples run as a user runs them (what `make demo` prints)."""

import os

from tests.support.child import run_python

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_example(name: str) -> str:
    proc = run_python(os.path.join(ROOT, "examples", name), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_demo():
    out = run_example("demo.py")
    assert out.count("bit-identical to x32 JAX") == 3 and "DIFFERS" not in out
    assert "refused:" in out and "rng-bits" in out
    assert "examples/demo.py:23:" in out  # where: the user's lines


def test_scoped_precision():
    out = run_example("scoped_precision.py")
    assert "global jax_enable_x64 = True" in out
    assert "reference step returns float64, narrowed step returns float32" in out
    errors = [float(e) for e in out.split("after each window of 2000 RK4 steps:\n")[1].split("\n")[0].split()]
    assert len(errors) == 10 and all(0 < e < 1e-4 for e in errors)
    assert "warnings: 1 " in out


def test_demo_examples_use_only_the_public_api_and_no_torch():
    """`make demo` installs the core and JAX only (no torch) and shows the public API:
    the examples it runs import nothing private of x64guard, and nothing of torch."""
    import ast

    for name in ("demo.py", "scoped_precision.py"):
        tree = ast.parse(open(os.path.join(ROOT, "examples", name)).read())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported |= {f"{node.module}.{alias.name}" for alias in node.names}
        private = {m for m in imported if m.startswith("x64guard") and any(p.startswith("_") for p in m.split("."))}
        assert not private, f"{name} imports private names: {private}"
        assert not {m for m in imported if m.split(".")[0] in ("torch", "torch_xla")}, name

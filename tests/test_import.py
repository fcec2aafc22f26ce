"""`import x64guard` is quiet: no JAX, no torch, no backend, no environment change; each
public name and front end is loaded the first time it is used. Every case runs in a fresh
interpreter (what an import does can only be seen once per process)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.child import run_json

ROOT = Path(__file__).resolve().parents[1]


def test_import_loads_no_jax_no_torch_no_front_end_and_changes_no_environment():
    out = run_json("""
        import json, os, sys
        before = dict(os.environ)
        import x64guard
        print(json.dumps({
            "heavy": sorted(m for m in ("jax", "jaxlib", "torch", "torch_xla", "numpy") if m in sys.modules),
            "x64guard": sorted(m for m in sys.modules if m.startswith("x64guard")),
            "environment_unchanged": dict(os.environ) == before,
        }))
    """, env={"X64GUARD_MODE": "ERROR"})
    assert out["heavy"] == []
    assert out["x64guard"] == ["x64guard", "x64guard.errors", "x64guard.modes"]
    assert out["environment_unchanged"]


def test_first_use_loads_what_it_needs_and_starts_no_backend():
    out = run_json("""
        import json, os, sys, warnings
        before = dict(os.environ)
        import x64guard
        from jax._src import xla_bridge
        text = '''func.func @main(%x: tensor<2xf64>) -> tensor<2xf64> {
          %0 = stablehlo.add %x, %x : tensor<2xf64>
          return %0 : tensor<2xf64>
        }'''
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", x64guard.X64GuardWarning)
            narrowed = x64guard.narrow(text)
        report = x64guard.check(text)
        after_core = {"front_ends": sorted(m for m in ("x64guard.jax.function", "x64guard.torch", "x64guard.torch_xla",
                                                       "x64guard.cli", "torch") if m in sys.modules),
                      "backends": sorted(xla_bridge._backends)}
        doubled = x64guard.jit(lambda v: v * 2)  # wrapping a function starts nothing either
        print(json.dumps({
            "narrowed": "tensor<2xf32>" in narrowed.text, "ok": report.ok,
            "after_core": after_core,
            "jit_module": x64guard.jit.__module__, "jax_front_end_loaded": "x64guard.jax.function" in sys.modules,
            "backends_after_jit": sorted(xla_bridge._backends),
            "mode": str(x64guard.current_mode()),
            "environment_unchanged": dict(os.environ) == before,
        }))
    """, env={"JAX_PLATFORMS": "cpu", "X64GUARD_MODE": "Warn"})
    assert out["narrowed"] and not out["ok"]
    assert out["after_core"] == {"front_ends": [], "backends": []}
    assert out["jit_module"] == "x64guard.jax.function" and out["jax_front_end_loaded"]
    assert out["backends_after_jit"] == []
    assert out["mode"] == "warn"  # $X64GUARD_MODE read case-insensitively, never rewritten
    assert out["environment_unchanged"]


def test_front_ends_are_attributes_loaded_on_first_use():
    out = run_json("""
        import json, sys
        import x64guard
        names = set(dir(x64guard))
        cli_main = x64guard.cli.main
        loaded = {m: m in sys.modules for m in ("x64guard.cli", "x64guard.torch", "x64guard.torch_xla", "torch")}
        try:
            x64guard.no_such_name
        except AttributeError as exc:
            missing = str(exc)
        print(json.dumps({"dir": sorted(names & {"narrow", "check", "jit", "torch", "torch_xla", "cli", "mode"}),
                          "all_resolve": all(getattr(x64guard, n) is not None for n in x64guard.__all__),
                          "loaded": loaded, "missing": missing, "cli_main": cli_main.__module__}))
    """)
    assert out["dir"] == ["check", "cli", "jit", "mode", "narrow", "torch", "torch_xla"]
    assert out["all_resolve"]
    assert out["loaded"] == {"x64guard.cli": True, "x64guard.torch": False, "x64guard.torch_xla": False,
                             "torch": False}
    assert "has no attribute 'no_such_name'" in out["missing"]
    assert out["cli_main"] == "x64guard.cli.app"


@pytest.mark.slow  # importing torch in a fresh interpreter
@pytest.mark.torch
def test_torch_front_end_is_an_attribute():
    out = run_json("""
        import json, sys
        import x64guard
        before = "torch" in sys.modules
        setter = x64guard.torch.set_default_int_dtype
        print(json.dumps({"before": before, "after": "torch" in sys.modules, "module": setter.__module__}))
    """)
    assert out == {"before": False, "after": True, "module": "x64guard.torch"}


def test_mode_environment_variable_is_read_not_written():
    out = run_json("""
        import json, os
        import x64guard
        with x64guard.mode("allow"):
            inside = str(x64guard.current_mode())
        print(json.dumps({"initial": str(x64guard.current_mode()), "inside": inside,
                          "env": os.environ["X64GUARD_MODE"]}))
    """, env={"X64GUARD_MODE": " ERROR "})
    assert out == {"initial": "error", "inside": "allow", "env": " ERROR "}


def test_isolated_reader_imports_nothing_of_x64guard():
    """x64guard.io.modules imports x64guard.io.isolated_reader, never the reverse: the reader's
    process is x64guard/io/_bytecode_reader.py, which imports both."""
    tree = ast.parse((ROOT / "x64guard" / "io" / "isolated_reader.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert not {name for name in imported if name.startswith("x64guard")}, imported

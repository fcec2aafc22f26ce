"""torch/dynamo_patch.py is contained: Dynamo's `torch_function_override_enabled` is patched
only while some thread has a narrow default, and put back (the same object, inherited or
not as before) when the last one ends: `set_default_int_dtype(torch.int64)`, the exit of
`default_int_dtype(...)`, or the thread's end. The import finder is gone with it, so
another library's torch-function mode under torch.compile then meets Dynamo's own method.
Each case runs in a fresh interpreter (what the first import of Dynamo does)."""

from __future__ import annotations

import textwrap

import pytest

from tests.support.child import run_json

pytest.importorskip("torch")

_STATE = """
import json, sys, threading
import torch
import x64guard.torch as xt
from x64guard.torch import dynamo_patch

NAME = "torch_function_override_enabled"

def state():
    module = sys.modules.get("torch._dynamo.variables.torch")
    cls = getattr(module, "TorchInGraphFunctionVariable", None)
    method = None if cls is None else getattr(cls, NAME)
    return {"imported": module is not None,
            "patched": bool(getattr(method, "_x64guard", False)),
            "own": None if cls is None else NAME in vars(cls),
            "method": None if method is None else id(method),
            "finder": any(isinstance(f, dynamo_patch._DynamoImportHook) for f in sys.meta_path)}
"""


def run(body: str) -> dict:
    return run_json(_STATE + textwrap.dedent(body))


def test_patched_while_a_narrow_default_is_set_and_put_back_after():
    out = run("""
        seen = {"start": state()}
        xt.set_default_int_dtype(torch.int32)
        seen["set_before_import"] = state()
        import torch._dynamo.variables.torch
        seen["imported_while_set"] = state()
        xt.set_default_int_dtype(torch.int16)
        seen["narrow_to_narrow"] = state()
        xt.set_default_int_dtype(torch.int64)
        seen["unset"] = state()
        with xt.default_int_dtype(torch.int8):
            seen["in_block"] = state()
        seen["after_block"] = state()
        print(json.dumps(seen))
    """)
    assert out["start"] == {"imported": False, "patched": False, "own": None, "method": None, "finder": False}
    assert out["set_before_import"]["finder"] and not out["set_before_import"]["imported"]
    assert out["imported_while_set"]["patched"]
    assert out["narrow_to_narrow"]["patched"]
    unset = out["unset"]
    assert not unset["patched"] and not unset["finder"]
    assert out["in_block"]["patched"]
    assert out["after_block"] == unset  # the same method object, defined where it was


def test_dynamos_own_method_is_the_one_put_back():
    out = run("""
        import torch._dynamo.variables.torch
        before = state()
        with xt.default_int_dtype(torch.int32):
            during = state()
        print(json.dumps({"before": before, "during": during, "after": state()}))
    """)
    assert out["during"]["patched"] and out["during"]["method"] != out["before"]["method"]
    assert out["after"] == out["before"]


def test_the_last_thread_with_a_narrow_default_puts_it_back_also_when_the_thread_ends():
    out = run("""
        import gc
        import torch._dynamo.variables.torch
        seen = {}
        entered, leave = threading.Event(), threading.Event()

        def worker():
            xt.set_default_int_dtype(torch.int32)  # never unset: the thread just ends
            entered.set()
            leave.wait()

        thread = threading.Thread(target=worker)
        thread.start(); entered.wait()
        with xt.default_int_dtype(torch.int16):
            pass
        seen["other_thread_still_narrow"] = state()["patched"]
        leave.set(); thread.join(); gc.collect()
        seen["after_thread_ended"] = state()["patched"]
        print(json.dumps(seen))
    """)
    assert out == {"other_thread_still_narrow": True, "after_thread_ended": False}

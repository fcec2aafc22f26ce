"""The torch version gate (x64guard/versions.py, run when x64guard.torch is imported): a
torch outside the tested range is refused with a message naming the range and the override,
unless the override is set; the installed torch (2.9.0 in `make test`, 2.15.0 in the
matrix's torch-2.15 row) is inside it."""

from __future__ import annotations

import pytest
import torch

from tests.support.child import run_json
from x64guard import versions


def test_the_installed_torch_is_tested():
    assert versions.TESTED_TORCH[0] <= versions.version_tuple(torch.__version__) < versions.TESTED_TORCH[1]


@pytest.mark.parametrize("version", ["2.8.0", "2.16.0", "2.16.0a0+git1234", "3.0.0"])
def test_untested_torch_is_refused_with_the_range_and_the_override(version, monkeypatch):
    monkeypatch.delenv(versions.ALLOW_UNTESTED_TORCH_ENV, raising=False)
    monkeypatch.setattr(torch, "__version__", version)
    with pytest.raises(ImportError) as info:
        versions.check_torch_version()
    message = str(info.value)
    assert f"x64guard.torch is tested with torch >= 2.9.0 and < 2.16.0, but torch {version} is installed" in message
    assert "pip install 'torch>=2.9,<2.16'" in message
    assert "X64GUARD_ALLOW_UNTESTED_TORCH=1" in message


@pytest.mark.parametrize("version", ["2.9.0", "2.9.1+cu128", "2.15.0", "2.15.2+cpu"])
def test_tested_torch_passes(version, monkeypatch):
    monkeypatch.delenv(versions.ALLOW_UNTESTED_TORCH_ENV, raising=False)
    monkeypatch.setattr(torch, "__version__", version)
    versions.check_torch_version()


@pytest.mark.slow  # a fresh interpreter importing torch and JAX: about 7 s on a quiet machine
def test_the_import_checks_and_the_override_lets_it_through():
    """In a fresh interpreter: `import x64guard.torch` refuses torch 2.16.0; with the
    override set, the same import succeeds and the setting works."""
    result = run_json("""
        import json, os, torch
        torch.__version__ = "2.16.0"
        try:
            import x64guard.torch
            refused = None
        except ImportError as exc:
            refused = str(exc)
        os.environ["X64GUARD_ALLOW_UNTESTED_TORCH"] = "1"
        import x64guard.torch as xt
        with xt.default_int_dtype(torch.int32):
            dtype = str(torch.tensor([1]).dtype)
        print(json.dumps({"refused": refused, "dtype": dtype}))
    """, unset=(versions.ALLOW_UNTESTED_TORCH_ENV,))
    assert "but torch 2.16.0 is installed" in result["refused"]
    assert result["dtype"] == "torch.int32"

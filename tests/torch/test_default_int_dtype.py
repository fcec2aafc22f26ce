"""The API: set/get/the context manager, validation, int64 as stock PyTorch, the floating
default untouched, nesting, threads, and overflow refused rather than wrapped."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

import x64guard
import x64guard.torch as xt
from x64guard.torch.default_int import _DefaultIntMode


def our_modes():
    return [m for m in torch.overrides._get_current_function_mode_stack() if isinstance(m, _DefaultIntMode)]


# --------------------------------------------------------------------------- API

def test_set_and_get():
    assert xt.get_default_int_dtype() is torch.int64
    for d in (torch.int8, torch.int16, torch.int32, torch.int64):
        xt.set_default_int_dtype(d)
        assert xt.get_default_int_dtype() is d
        assert torch.tensor([1, 2, 3]).dtype is d
    assert our_modes() == []


@pytest.mark.parametrize("bad", [torch.float32, torch.uint8, torch.bool, torch.uint32, torch.complex64, "int32",
                                 int, None, np.int32, 32])
def test_other_dtypes_raise_type_error_naming_the_allowed(bad):
    with pytest.raises(TypeError, match=r"torch\.int8, torch\.int16, torch\.int32, torch\.int64"):
        xt.set_default_int_dtype(bad)
    with pytest.raises(TypeError, match="torch.int32"):
        with xt.default_int_dtype(bad):
            pass
    assert xt.get_default_int_dtype() is torch.int64


def test_int64_leaves_no_mode_at_all():
    """Setting int64 restores PyTorch exactly: nothing intercepts any call."""
    xt.set_default_int_dtype(torch.int32)
    assert len(our_modes()) == 1
    xt.set_default_int_dtype(torch.int64)
    assert our_modes() == []
    with xt.default_int_dtype(torch.int16):
        with xt.default_int_dtype(torch.int64):
            assert our_modes() == []
            assert torch.tensor([1]).dtype is torch.int64
        assert len(our_modes()) == 1


def test_floating_default_is_untouched():
    before = torch.get_default_dtype()
    try:
        with xt.default_int_dtype(torch.int32):
            assert torch.get_default_dtype() is before
            torch.set_default_dtype(torch.float64)
            assert torch.tensor([1.5]).dtype is torch.float64
            assert torch.tensor([1]).dtype is torch.int32
            assert torch.arange(3).dtype is torch.int32
            assert torch.arange(0.0, 1.0, 0.5).dtype is torch.float64
            assert (torch.tensor([True]) + 1.5).dtype is torch.float64
        assert torch.get_default_dtype() is torch.float64
    finally:
        torch.set_default_dtype(before)


def test_explicit_int64_requests_are_honoured():
    with xt.default_int_dtype(torch.int32):
        assert torch.tensor([1], dtype=torch.int64).dtype is torch.int64
        assert torch.as_tensor([1], dtype=torch.long).dtype is torch.int64
        assert torch.arange(3, dtype=torch.int64).dtype is torch.int64
        assert torch.full((1,), 2, dtype=torch.int64).dtype is torch.int64
        assert torch.randint(0, 3, (2,), dtype=torch.int64).dtype is torch.int64
        assert torch.tensor([True, False]).sum(dtype=torch.int64).dtype is torch.int64
        assert torch.tensor([1, 2]).long().dtype is torch.int64
        assert torch.tensor([2 ** 40], dtype=torch.int64).item() == 2 ** 40
        out = torch.empty(3, dtype=torch.int64)
        torch.arange(3, out=out)
        assert out.dtype is torch.int64


def test_the_module_imports_without_touching_torch_state():
    import importlib

    stack = torch.overrides._get_current_function_mode_stack()
    importlib.reload(xt)
    assert torch.overrides._get_current_function_mode_stack() == stack


def test_import_x64guard_does_not_need_torch():
    """torch is an extra: `import x64guard` works where torch cannot be imported, and does
    not import x64guard.torch."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"   # `import torch` now raises ImportError
            "import x64guard\n"
            "assert 'x64guard.torch' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


# --------------------------------------------------------------------------- nesting

def test_nesting_restores_the_outer_default():
    with xt.default_int_dtype(torch.int32) as d:
        assert d is torch.int32
        with xt.default_int_dtype(torch.int16):
            assert torch.arange(2).dtype is torch.int16
            with xt.default_int_dtype(torch.int8):
                assert torch.arange(2).dtype is torch.int8
            assert torch.arange(2).dtype is torch.int16
        assert torch.arange(2).dtype is torch.int32
        assert len(our_modes()) == 1
    assert torch.arange(2).dtype is torch.int64
    assert our_modes() == []


def test_an_exception_restores_the_default():
    with pytest.raises(RuntimeError, match="boom"):
        with xt.default_int_dtype(torch.int16):
            raise RuntimeError("boom")
    assert xt.get_default_int_dtype() is torch.int64 and our_modes() == []


def test_set_inside_a_block_lasts_until_the_block_ends():
    xt.set_default_int_dtype(torch.int32)
    with xt.default_int_dtype(torch.int16):
        xt.set_default_int_dtype(torch.int8)
        assert xt.get_default_int_dtype() is torch.int8
    assert xt.get_default_int_dtype() is torch.int32  # the block restores what it found


def test_other_modes_keep_their_place_on_the_stack():
    seen = []

    class Logger(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(getattr(func, "__name__", ""))
            return func(*args, **(kwargs or {}))

    with xt.default_int_dtype(torch.int32):
        with Logger() as logger:
            with xt.default_int_dtype(torch.int16):
                stack = torch.overrides._get_current_function_mode_stack()
                assert stack[-1] is logger and isinstance(stack[-2], _DefaultIntMode)
                assert torch.arange(3).dtype is torch.int16
            assert torch.overrides._get_current_function_mode_stack()[-1] is logger
            assert torch.arange(3).dtype is torch.int32
    assert "arange" in seen


# --------------------------------------------------------------------------- threads

def test_the_setting_belongs_to_the_calling_thread():
    """Per thread (PyTorch's torch-function mode stack is thread-local): a thread started
    after set_default_int_dtype still sees int64, and a thread's setting stays there."""
    xt.set_default_int_dtype(torch.int32)
    seen = {}

    def worker():
        seen["start"] = (xt.get_default_int_dtype(), torch.tensor([1]).dtype)
        xt.set_default_int_dtype(torch.int8)
        seen["set"] = torch.tensor([1]).dtype

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == {"start": (torch.int64, torch.int64), "set": torch.int8}
    assert xt.get_default_int_dtype() is torch.int32 and torch.tensor([1]).dtype is torch.int32


def test_threads_with_different_defaults_do_not_interfere():
    defaults = [torch.int8, torch.int16, torch.int32, torch.int64] * 2
    barrier = threading.Barrier(len(defaults))
    errors = []

    def worker(d):
        try:
            with xt.default_int_dtype(d):
                barrier.wait(timeout=60)
                for _ in range(200):
                    x = torch.randn(5)
                    got = (torch.tensor([1, 2]).dtype, torch.arange(3).dtype, x.argmax().dtype,
                           (x > 0).sum().dtype, torch.where(x > 0, 1, 0).dtype)
                    assert got == (d,) * 5, (d, got)
                    assert xt.get_default_int_dtype() is d
            assert xt.get_default_int_dtype() is torch.int64
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(d,)) for d in defaults]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# --------------------------------------------------------------------------- overflow

OVERFLOWS = [
    ("tensor", torch.int32, lambda: torch.tensor([2 ** 40]), "1099511627776"),
    ("tensor_negative", torch.int32, lambda: torch.tensor([[1], [-2 ** 31 - 1]]), "-2147483649"),
    ("tensor_scalar_int8", torch.int8, lambda: torch.tensor(200), "200"),
    ("as_tensor", torch.int16, lambda: torch.as_tensor([40000]), "40000"),
    ("full", torch.int32, lambda: torch.full((2,), 2 ** 31), "2147483648"),
    ("arange", torch.int32, lambda: torch.arange(0, 2 ** 40, 2 ** 39), "549755813888"),
    ("arange_int8", torch.int8, lambda: torch.arange(130), "129"),
    ("randint", torch.int16, lambda: torch.randint(0, 2 ** 20, (2,)), "1048575"),
    ("randperm", torch.int8, lambda: torch.randperm(300), "299"),
    ("where", torch.int32, lambda: torch.where(torch.tensor([True]), 2 ** 40, 0), "1099511627776"),
    ("argmax", torch.int8, lambda: torch.randn(200).argmax(), "200"),
    ("max_dim", torch.int8, lambda: torch.randn(2, 300).max(1), "300"),
    ("nonzero", torch.int8, lambda: torch.ones(3, 130).nonzero(), "130"),
    ("sort", torch.int8, lambda: torch.randn(1000).sort(), "1000"),
    ("bool_sum", torch.int8, lambda: torch.ones(500, dtype=torch.bool).sum(), "500"),
    ("count_nonzero", torch.int8, lambda: torch.count_nonzero(torch.ones(20, 20)), "400"),
]


@pytest.mark.parametrize("default,fn,value", [o[1:] for o in OVERFLOWS], ids=[o[0] for o in OVERFLOWS])
def test_overflow_is_refused_not_wrapped(default, fn, value):
    with xt.default_int_dtype(default):
        with pytest.raises(xt.DefaultIntOverflowError) as info:
            fn()
    message = str(info.value)
    assert value in message and str(default) in message and "dtype=torch.int64" in message
    assert isinstance(info.value, OverflowError) and isinstance(info.value, x64guard.X64GuardError)


def test_the_same_values_fit_the_wider_defaults():
    with xt.default_int_dtype(torch.int32):
        assert torch.tensor([2 ** 31 - 1, -2 ** 31]).tolist() == [2 ** 31 - 1, -2 ** 31]
        assert torch.randperm(300).sort().values.tolist() == list(range(300))
        assert torch.ones(500, dtype=torch.bool).sum().item() == 500
    with xt.default_int_dtype(torch.int8):
        assert torch.tensor([127, -128]).tolist() == [127, -128]
        assert torch.arange(127).max().item() == 126


SCALAR_OPERANDS = [
    ("bool_add", lambda: torch.tensor([True]) + 2 ** 40),
    ("add", lambda: torch.arange(3) + 2 ** 40),
    ("radd", lambda: 2 ** 40 + torch.arange(3)),
    ("sub", lambda: torch.arange(3) - 2 ** 33),
    ("rsub", lambda: 2 ** 33 - torch.arange(3)),
    ("mul", lambda: torch.tensor([1, 2]) * 2 ** 32),
    ("floordiv", lambda: torch.tensor([1, 2]) // 2 ** 32),
    ("truediv", lambda: torch.tensor([1, 2]) / 2 ** 40),
    ("div_floor", lambda: torch.div(torch.tensor([1, 2]), 2 ** 40, rounding_mode="floor")),
    ("eq", lambda: torch.tensor([0, 1]) == 2 ** 32),
    ("lt", lambda: torch.lt(torch.tensor([0, 1]), 2 ** 32)),
    ("iadd", lambda: torch.tensor([0, 1]).__iadd__(2 ** 40)),
    ("add_", lambda: torch.tensor([0, 1]).add_(2 ** 40)),
]


@pytest.mark.parametrize("fn", [s[1] for s in SCALAR_OPERANDS], ids=[s[0] for s in SCALAR_OPERANDS])
def test_python_integers_that_do_not_fit_the_tensor_are_refused(fn):
    """PyTorch wraps a Python integer operand into an int32 tensor's range silently
    (int32 + 2**40 adds 0, int32 == 2**32 compares with 0): under the setting, refused."""
    with xt.default_int_dtype(torch.int32):
        with pytest.raises(xt.DefaultIntOverflowError, match="does not fit in the default integer dtype"):
            fn()
    assert torch.equal(torch.tensor([0, 1]) == 2 ** 32, torch.tensor([False, False]))  # stock: int64


def test_python_integers_that_fit_pass():
    with xt.default_int_dtype(torch.int32):
        a = torch.arange(3)
        assert (a + (2 ** 31 - 3)).tolist() == [2 ** 31 - 3, 2 ** 31 - 2, 2 ** 31 - 1]
        assert (a == 2).tolist() == [False, False, True]
        assert (torch.randn(2) * 2 ** 40).dtype is torch.float32  # float tensors take any integer
        assert (a.to(torch.int64) + 2 ** 40).dtype is torch.int64   # explicit int64 too

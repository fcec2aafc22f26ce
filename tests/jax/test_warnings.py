"""Every warning x64guard.jit emits (the per-module summary and each lossy finding, from
x64guard.narrow) points at the user's calling line: its filename is this test file and
its line the line that called the narrowed function, whether called directly, inside an
outer jax.jit, under vmap or grad, through .lower(), or from another thread."""

from __future__ import annotations

import inspect
import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import x64guard


def tiny_scale(x):
    # float64 asked for explicitly (whatever the input's width): 1e-50 underflows
    # float32, a lossy finding
    return x.astype(jnp.float64) * 1e-50 + jnp.cos(x)


def this_line() -> int:
    return inspect.currentframe().f_back.f_lineno


def x64guard_warnings(caught) -> list[warnings.WarningMessage]:
    return [w for w in caught if issubclass(w.category, x64guard.X64GuardWarning)]


def assert_all_at(caught, line: int) -> None:
    ours = x64guard_warnings(caught)
    assert ours, "x64guard warned"
    for w in ours:
        assert (w.filename, w.lineno) == (__file__, line), f"{w.filename}:{w.lineno}: {w.message}"


def test_summary_and_lossy_findings_point_at_the_calling_line():
    fn = x64guard.jit(tiny_scale)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(np.linspace(0, 1, 3)); line = this_line()  # noqa: E702
    ours = x64guard_warnings(caught)
    assert len(ours) >= 2 and "lossy" in str(ours[0].message), [str(w.message) for w in ours]  # summary + finding
    assert_all_at(caught, line)


@pytest.mark.parametrize("how", ["outer_jit", "vmap", "grad", "lower", "grad_of_x64guard"])
def test_composed_calls_point_at_the_calling_line(how):
    fn = x64guard.jit(tiny_scale)
    x = np.linspace(0, 1, 3, dtype=np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if how == "outer_jit":
            jax.jit(lambda v: fn(v) * 2)(x); line = this_line()  # noqa: E702
        elif how == "vmap":
            jax.vmap(fn)(np.stack([x, x])); line = this_line()  # noqa: E702
        elif how == "grad":
            jax.grad(lambda v: fn(v).sum())(x); line = this_line()  # noqa: E702
        elif how == "lower":
            fn.lower(x); line = this_line()  # noqa: E702
        else:
            x64guard.jit(jax.grad(lambda v: tiny_scale(v).sum()))(x); line = this_line()  # noqa: E702
    assert_all_at(caught, line)


def test_warnings_from_another_thread_point_at_its_line():
    fn = x64guard.jit(tiny_scale)
    lines, caught = [], []

    def work():
        fn(np.linspace(0, 1, 4)); lines.append(this_line())  # noqa: E702

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    assert_all_at(caught, lines[0])


def test_default_filter_warns_once_per_line_in_the_users_module():
    """With Python's default filter, the user module's registry decides: the same narrowed
    signature warns once; a new signature (a new module) warns again."""
    fn = x64guard.jit(lambda x: x * 2.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            fn(np.ones(2))
        fn(np.ones(3))
    assert len(x64guard_warnings(caught)) == 2


def test_the_cross_checks_warning_filter_is_restored_and_hides_only_jax_truncation_notes():
    """The x32 cross-check trace filters JAX's "Explicitly requested dtype float64 ...
    truncated" notes (docs/design-process.md): the filter list is the user's again after
    the call, and a UserWarning of the user's own still reaches them."""
    jax.config.update("jax_enable_x64", True)
    try:
        def f(x):
            warnings.warn("the user's own note", UserWarning)
            return x.astype(jnp.float64) * 2

        before = list(warnings.filters)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x64guard.jit(f)(np.arange(3.0))
            inside = list(warnings.filters)
        assert list(warnings.filters) == before
        assert inside[0][0] == "always"
        notes = [str(w.message) for w in caught if w.category is UserWarning]
        assert "the user's own note" in notes
        assert not [n for n in notes if "Explicitly requested dtype" in n], notes
    finally:
        jax.config.update("jax_enable_x64", False)

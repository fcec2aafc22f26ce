"""x64guard/x32_lowerings.py: what the running JAX lowers float32 primitives to, probed."""

from __future__ import annotations

import jax
import numpy as np

from tests.corpus.oracle import x64
from tests.reliability.differential import x32_expands_lgamma
from x64guard.passes.tables import X32_EXPANDED_CHLO
from x64guard.x32_lowerings import expands_at_float32


def test_the_lgamma_probe_agrees_with_x32_jax_s_own_module():
    # Written apart in the fuzzer: x32 JAX's module of float32 lgamma, read for chlo.lgamma.
    assert expands_at_float32("chlo.lgamma") is x32_expands_lgamma()


def test_every_row_of_the_table_names_a_jax_lax_function_that_lowers_at_float32():
    for op, primitive in X32_EXPANDED_CHLO.items():
        assert op.startswith("chlo.")
        text = jax.jit(getattr(jax.lax, primitive)).lower(jax.ShapeDtypeStruct((), np.float32)).as_text()
        assert "f32" in text


def test_an_op_outside_the_table_is_taken_as_emitted():
    assert expands_at_float32("chlo.erf") is False


def test_probing_leaves_jax_s_configuration_as_it_was():
    expands_at_float32.cache_clear()
    for flag in (True, False):
        with x64(flag):
            expands_at_float32("chlo.lgamma")
            assert jax.config.jax_enable_x64 is flag
            expands_at_float32.cache_clear()

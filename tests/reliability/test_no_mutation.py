"""No mutation: narrowing never changes the module it is given, and JAX's own jax.jit of the
same function still runs correctly (full width, same bits) after x64guard narrowed its
lowering.

`jax.jit(f).lower(...).compiler_ir()` hands out JAX's cached module object: a pass that
rewrote it in place would poison JAX's executable cache (a later `jax.jit(f)(x)` fails or
runs the narrowed program). The property runs over generated programs (grammar.py), in every
mode, through `narrow` and `check`, and checks the module's text with locations before and
after, then re-runs JAX.
"""

from __future__ import annotations

import os
import warnings

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings

import x64guard
from tests.corpus.oracle import bit_identical, x64
from tests.reliability.grammar import Program, programs
from x64guard.io import modules

pytestmark = [pytest.mark.filterwarnings("ignore::x64guard.X64GuardWarning"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]  # float64 inputs beyond float32 -> inf
EXAMPLES = int(os.environ.get("X64GUARD_NO_MUTATION_EXAMPLES", "").strip() or 40)
SEED = os.environ.get("X64GUARD_FUZZ_SEED", "").strip()


def _asm(module) -> str:
    return module.operation.get_asm(enable_debug_info=True, large_elements_limit=None)


def _run_x64(fn, args):
    with x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]


def _touch_everything(module) -> None:
    """Every entry point that takes a module, in every mode."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in ("allow", "warn", "error"):
            for overflow in ("error", "saturate", "wrap"):
                try:
                    result = x64guard.narrow(module, mode=mode, overflow=overflow)
                    result.text
                    result.bytecode()
                except x64guard.X64GuardError:
                    pass
        for target in ("x32", "neuron", "x64"):
            x64guard.check(module, target=target)


def check_no_mutation(program: Program) -> None:
    fn, args = program.fn(), program.args()
    jax.clear_caches()
    before_run = _run_x64(fn, args)
    with x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jitted = jax.jit(fn)
        lowered = jitted.lower(*args)
        module = lowered.compiler_ir("stablehlo")
    text_before = _asm(module)
    parsed, _ = modules.load(text_before)            # also an ir.Module in x64guard's own context
    parsed_before = _asm(parsed)

    _touch_everything(module)
    _touch_everything(parsed)

    assert _asm(module) == text_before, "x64guard changed JAX's module (compiler_ir())"
    assert _asm(parsed) == parsed_before, "x64guard changed an ir.Module it was given"
    assert module.operation.verify()
    with x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The same Lowered object, the same jit object, and a fresh jit object: all full width.
        compiled = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(lowered.compile()(*args))]
        again = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(jitted(*args))]
    fresh = _run_x64(fn, args)
    for got in (compiled, again, fresh):
        assert len(got) == len(before_run)
        for g, w in zip(got, before_run):
            assert bit_identical(g, w), f"JAX's result changed after x64guard narrowed its lowering: {g!r} vs {w!r}"


def test_narrowing_never_changes_its_input_and_jax_still_runs():
    run = settings(max_examples=EXAMPLES, derandomize=not SEED, deadline=None, database=None, print_blob=False,
                   suppress_health_check=list(HealthCheck))(given(programs(min_ops=2, max_ops=6))(check_no_mutation))
    if SEED:
        run = seed(int(SEED))(run)
    run()


def test_no_mutation_of_text_or_bytes_inputs():
    """str and bytes are immutable in Python, but a bytearray or memoryview is not."""
    text = ('func.func @main(%x: tensor<2xf64>) -> tensor<2xf64> {\n'
            '  %c = stablehlo.constant dense<[1.5, 1.0E+300]> : tensor<2xf64>\n'
            '  %0 = stablehlo.add %x, %c : tensor<2xf64>\n  return %0 : tensor<2xf64>\n}')
    module, _ = modules.load(text)
    blob = bytearray(modules.to_bytecode(module))
    copy = bytes(blob)
    for data in (blob, memoryview(blob)):
        for overflow in ("error", "saturate"):
            try:
                x64guard.narrow(data, overflow=overflow)
            except x64guard.X64GuardError:
                pass
        x64guard.check(data)
    assert bytes(blob) == copy

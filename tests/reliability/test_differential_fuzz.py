"""Property-based differential fuzzing of x64guard.narrow (grammar.py, differential.py).

For every generated JAX program traced with x64 on, x64guard.narrow either returns a module
that verifies, holds no 64-bit element type and, compiled on the CPU, gives outputs
bit-identical to the same program traced and run with x64 off; or raises X64GuardError
whose findings say what, where and why (accepted only for programs with a hazard: a
constant the 32-bit type cannot hold, a width-changing bitcast, a PRNG key made from a
Python int inside the trace). Mismatches that JAX's own jaxprs explain (a dtype-dependent
algorithm, a sentinel-valued literal) are documented limits and are counted, not failed.

`make test`: a fixed, derandomized run of 300 examples. `make fuzz N=2000 [SEED=...]`:
X64GUARD_FUZZ_EXAMPLES / X64GUARD_FUZZ_SEED. Every failure the fuzzer has found is a named
test in test_fuzz_regressions.py (paste the `Program(...)` it prints).
"""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.reliability import differential
from tests.reliability.conftest import env_int
from tests.reliability.grammar import N_OPS, OPS, programs

EXAMPLES = env_int("X64GUARD_FUZZ_EXAMPLES", 300)
SEED = os.environ.get("X64GUARD_FUZZ_SEED", "").strip()

pytestmark = [pytest.mark.filterwarnings("ignore::x64guard.X64GuardWarning"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]  # float64 inputs beyond float32 -> inf


def test_grammar_covers_at_least_40_operations():
    assert N_OPS >= 40
    families = {"cond", "switch", "fori_loop", "while_loop", "scan", "sum", "argmax", "cumsum", "sort", "scatter",
                "take", "astype", "bitcast", "reshape", "concatenate", "dynamic_slice", "matmul", "inv"}
    assert families <= set(OPS)


def test_narrowed_programs_are_bit_identical_to_x32_jax_or_refused():
    outcomes: Counter = Counter()
    ops_seen: Counter = Counter()
    dtypes_seen: set[str] = set()
    shapes_seen: set[tuple] = set()
    differential.DTYPE_DEPENDENT_SEEN.clear()

    fuzz_settings = settings(max_examples=EXAMPLES, derandomize=not SEED, deadline=None, database=None,
                             print_blob=False, suppress_health_check=list(HealthCheck))

    @fuzz_settings
    @given(programs())
    def prop(program):
        verdict = differential.check_program(program)
        outcomes[verdict.outcome] += 1
        ops_seen.update(node.op for node in program.nodes)
        dtypes_seen.update(i.dtype for i in program.inputs)
        shapes_seen.update(i.shape for i in program.inputs)

    if SEED:
        prop = seed(int(SEED))(prop)
    start = time.perf_counter()
    prop()
    elapsed = time.perf_counter() - start
    total = sum(outcomes.values())
    print(f"\ndifferential fuzzing: {total} programs ({'seed ' + SEED if SEED else 'derandomized'}) in "
          f"{elapsed:.0f} s: {dict(sorted(outcomes.items()))}; {len(ops_seen)} of {N_OPS} ops, "
          f"{len(dtypes_seen)} input dtypes, {len(shapes_seen)} shapes")
    for program, why in differential.DTYPE_DEPENDENT_SEEN[:5]:
        print(f"  documented limit ({why.splitlines()[0][:160]}):\n    {program!r}")
    # The run must have exercised what it claims to (hypothesis replays failures only).
    assert total >= EXAMPLES * 0.9
    assert outcomes["identical"] >= total * 0.7
    if EXAMPLES >= 300:  # (a short `make fuzz N=20` cannot cover the grammar)
        assert len(ops_seen) >= min(40, N_OPS)
        assert {"int64", "uint64", "float64", "complex128", "bool", "int8", "float16"} <= dtypes_seen
        assert () in shapes_seen and any(0 in s for s in shapes_seen)

"""The data behind x64guard.jit's input-width policy (docs/jit.md, "Input widths").

32-bit inputs (float32, complex64, int32) reach x64guard.jit's 64-bit trace either
widened to 64 bits or at their own width. Which is right is decided from differential
data: every corpus program (tests/corpus/programs.py) and N programs of the fuzz grammar
(tests/reliability/grammar.py) are called through x64guard.jit with 32-bit inputs under
each policy and compared with x32 JAX (`jax.jit` with x64 off on the same inputs):

  identical  same dtypes, shapes and bits as x32 JAX
  refused    X64GuardError (x32 JAX ran the program)
  both-fail  X64GuardError or another error, and x32 JAX raised too
  wrong      a result that differs from x32 JAX's   <- never acceptable
  ran        a result where x32 JAX raised          <- silently different behaviour
  crash      an error that is not X64GuardError where x32 JAX ran

Run: `python -m tests.jax.input_widths [N_FUZZ]` (prints the table). The test
tests/jax/test_input_widths.py runs a sample of it for the chosen policy.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections import Counter
from typing import Callable, Iterator, Sequence

import numpy as np

import jax

import x64guard
from x64guard.jax import inputs as xjax_inputs
from tests.corpus import oracle
from tests.corpus.programs import CASES

F32, C64, I32 = np.dtype(np.float32), np.dtype(np.complex64), np.dtype(np.int32)
POLICIES: dict[str, frozenset] = {
    "widen all": frozenset(),
    "floats at own width": frozenset({F32, C64}),
    "floats and int32 at own width": frozenset({F32, C64, I32}),
}


@contextlib.contextmanager
def policy(own_width: frozenset) -> Iterator[None]:
    previous = xjax_inputs.OWN_WIDTH
    xjax_inputs.OWN_WIDTH = own_width
    try:
        yield
    finally:
        xjax_inputs.OWN_WIDTH = previous


def _leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def verdict(fn: Callable, args32: Sequence[np.ndarray], want: list[np.ndarray] | None) -> tuple[str, str]:
    """x64guard.jit(fn) on the 32-bit inputs against x32 JAX's outputs (None: x32 raised)."""
    oracle._forget_traces()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = _leaves(x64guard.jit(fn)(*args32))
    except x64guard.X64GuardError as exc:
        return ("both-fail" if want is None else "refused"), ",".join(sorted({f.kind for f in exc.findings}))
    except Exception as exc:  # noqa: BLE001 -- classified, not hidden
        return ("both-fail" if want is None else "crash"), f"{type(exc).__name__}: {str(exc)[:120]}"
    if want is None:
        return "ran", ""
    if len(got) != len(want) or not all(oracle.bit_identical(g, w) for g, w in zip(got, want)):
        detail = next((oracle.describe_mismatch(g, w) for g, w in zip(got, want) if not oracle.bit_identical(g, w)),
                      f"{len(got)} outputs vs {len(want)}")
        return "wrong", detail
    return "identical", ""


def x32_outputs(fn: Callable, args32: Sequence[np.ndarray]) -> list[np.ndarray] | None:
    try:
        return oracle.run_oracle(fn, args32)
    except Exception:  # noqa: BLE001 -- x32 JAX refusing the program is data here
        return None


def corpus_programs() -> Iterator[tuple[str, Callable, list[np.ndarray]]]:
    for case in CASES:
        args = oracle.materialize_args(case)
        yield f"corpus:{case.name}", case.fn, [oracle.to32(a) for a in args]


def fuzz_programs(n: int) -> list[tuple[str, Callable, list[np.ndarray]]]:
    from hypothesis import HealthCheck, given, settings

    from tests.reliability.grammar import programs

    found: list = []

    @settings(max_examples=n, derandomize=True, deadline=None, database=None, print_blob=False,
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def collect(program):
        found.append(program)

    collect()
    return [(f"fuzz:{i}", p.fn(), p.args32()) for i, p in enumerate(found)]


def run(n_fuzz: int, policies: dict[str, frozenset] = POLICIES) -> dict[str, dict[str, Counter]]:
    """{source: {policy: Counter(outcome)}} and the examples of each non-identical outcome."""
    table: dict[str, dict[str, Counter]] = {}
    examples: dict[tuple[str, str], list[str]] = {}
    differing: list[str] = []
    sources = [("corpus", list(corpus_programs()))] + ([("fuzz", fuzz_programs(n_fuzz))] if n_fuzz else [])
    for source, items in sources:
        table[source] = {name: Counter() for name in policies}
        for label, fn, args32 in items:
            want = x32_outputs(fn, args32)
            outcomes = {}
            for name, own in policies.items():
                with policy(own):
                    outcome, detail = verdict(fn, args32, want)
                outcomes[name] = outcome
                table[source][name][outcome] += 1
                if outcome not in ("identical", "both-fail"):
                    examples.setdefault((name, outcome), []).append(f"{label}: {detail}")
            if len(set(outcomes.values())) > 1:
                differing.append(f"{label}: " + ", ".join(f"{n}={o}" for n, o in outcomes.items()))
    run.examples = examples  # type: ignore[attr-defined]
    run.differing = differing  # type: ignore[attr-defined]
    return table


def print_table(table: dict[str, dict[str, Counter]]) -> None:
    outcomes = ["identical", "refused", "both-fail", "wrong", "ran", "crash"]
    print(f"{'source':8} {'policy':32} " + " ".join(f"{o:>9}" for o in outcomes))
    for source, by_policy in table.items():
        for name, counts in by_policy.items():
            print(f"{source:8} {name:32} " + " ".join(f"{counts[o]:>9}" for o in outcomes))
    differing = getattr(run, "differing", [])
    print(f"\nprograms whose outcome depends on the policy ({len(differing)}):")
    for line in differing:
        print(f"  {line}")
    for (name, outcome), items in sorted(getattr(run, "examples", {}).items()):
        print(f"\n{name} / {outcome} ({len(items)}):")
        for item in items[:8]:
            print(f"  {item}")


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    print_table(run(n))

"""Differential corpus: x64guard's narrowing of JAX's x64 lowering must be bit-identical to
JAX's own x32 program, and the programs it cannot narrow faithfully must be refused.

See tests/corpus/programs.py (the cases, as data) and tests/corpus/oracle.py (the harness).
"""

from __future__ import annotations

import pytest

import x64guard
from tests.corpus import oracle
from tests.corpus.programs import CASES
from tests.corpus.random_programs import X32_COMPATIBLE
from tests.sample import corpus_params


@pytest.mark.filterwarnings("ignore::x64guard.X64GuardWarning")
@pytest.mark.parametrize("case", corpus_params(CASES))
def test_corpus(case):
    outcome = oracle.check_case(case, x64guard.narrow, x64guard.X64GuardError)
    # Every x64 program still fails `check --target x32` (the x32 profile knows JAX's x32
    # programs, not x64 ones), except those whose only 64-bit value is the RNG state.
    assert x64guard.check(outcome.x64_text, target="x32").ok is (case.name in X32_COMPATIBLE), case.name

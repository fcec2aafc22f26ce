"""Differential corpus: x64guard's narrowing of JAX's x64 lowering must be bit-identical to
JAX's own x32 program, and the programs it cannot narrow faithfully must be refused.

See tests/corpus/programs.py (the cases, as data) and tests/corpus/oracle.py (the harness).
"""

from __future__ import annotations

import pytest

import x64guard
from tests.corpus import oracle
from tests.corpus.programs import CASES


@pytest.mark.filterwarnings("ignore::x64guard.X64GuardWarning")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_corpus(case):
    oracle.check_case(case, x64guard.narrow, x64guard.X64GuardError)

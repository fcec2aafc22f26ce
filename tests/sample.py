"""What `make test-fast` runs of the large families of cases: a sample. `make test` runs
every case.

A case outside the sample is marked `sampled_out` (deselected by `make test-fast`). The
differential corpus and JAX's x32 programs are sampled by a hash of the case's name (about
one in SAMPLE_EVERY, so adding a case never moves the others in or out of the sample);
every refusal case of the corpus is in it. Smaller families (the command line's input
formats) mark their cases by hand with `SAMPLED_OUT`.
"""

from __future__ import annotations

import zlib

import pytest

from tests.corpus.programs import Case
from tests.corpus.random_programs import SLOW_CASES

SAMPLE_EVERY = 8
SAMPLED_OUT = pytest.mark.sampled_out

# Corpus cases that take more than about 5 s on a quiet 2-core machine, besides the
# random samplers of random_programs.SLOW_CASES: marked `slow` too.
HEAVY_CASES: frozenset[str] = frozenset({"long_unrolled_chain"})


def in_sample(name: str) -> bool:
    return zlib.crc32(name.encode()) % SAMPLE_EVERY == 0


def in_ecosystem_sample(name: str) -> bool:
    """About one ecosystem program in two (by the same hash): the matrix's ci tier runs
    these of the programs not marked slow; `make test` runs every program."""
    return zlib.crc32(name.encode()) % 2 == 0


def corpus_params(cases: list[Case]) -> list:
    """The corpus as pytest parameters: `slow` and `sampled_out` marks, the case's name as id."""
    def marks(case: Case) -> list:
        sampled = case.expect != "narrow" or in_sample(case.name)
        return ([pytest.mark.slow] if case.name in SLOW_CASES | HEAVY_CASES else []) + ([] if sampled else [SAMPLED_OUT])

    return [pytest.param(case, marks=marks(case), id=case.name) for case in cases]


def named_params(cases: list[tuple]) -> list:
    """(name, ...) tuples as pytest parameters, sampled by name, the name as id."""
    return [pytest.param(*case, marks=[] if in_sample(case[0]) else [SAMPLED_OUT], id=case[0]) for case in cases]

"""What `make test-fast` runs of the large families of cases: a sample. `make test` runs
every case.

A case outside the sample is marked `sampled_out` (deselected by `make test-fast`). The
differential corpus and JAX's x32 programs are sampled by a hash of the case's name (about
one in SAMPLE_EVERY, so adding a case never moves the others in or out of the sample);
every refusal case of the corpus is in it. Smaller families (the command line's input
formats) mark their cases by hand with `SAMPLED_OUT`.

The matrix's ci tier splits each hashed sample between its rows: `X64GUARD_SAMPLE_SHARD=k/n`
(set by tools/matrix.sh) keeps shard k of n of every hashed sample, so the rows together run
`make test-fast`'s sample and each runs 1/n of it, within CI's time. Refusal cases and the
families marked by hand are in every shard.
"""

from __future__ import annotations

import os
import re
import zlib

import pytest

from tests.corpus.programs import Case
from tests.corpus.random_programs import SLOW_CASES

SAMPLE_EVERY = 8
SAMPLED_OUT = pytest.mark.sampled_out

# Corpus cases that take more than about 5 s on a quiet 2-core machine, besides the
# random samplers of random_programs.SLOW_CASES: marked `slow` too.
HEAVY_CASES: frozenset[str] = frozenset({"long_unrolled_chain"})


def sample_shard() -> tuple[int, int]:
    """(k, n) of `X64GUARD_SAMPLE_SHARD=k/n`; (0, 1), the whole sample, when unset."""
    text = os.environ.get("X64GUARD_SAMPLE_SHARD", "0/1")
    match = re.fullmatch(r"(\d+)/([1-9]\d*)", text)
    if match is None or int(match[1]) >= int(match[2]):
        raise ValueError(f"X64GUARD_SAMPLE_SHARD is k/n with 0 <= k < n, not {text!r}")
    return int(match[1]), int(match[2])


def _in_hashed_sample(name: str, every: int) -> bool:
    """One name in `every` by the hash of the name, less the other shards' part of it: the
    residues every*k of every*n partition the residue 0 of `every`."""
    index, count = sample_shard()
    return zlib.crc32(name.encode()) % (every * count) == every * index


def in_sample(name: str) -> bool:
    return _in_hashed_sample(name, SAMPLE_EVERY)


def in_ecosystem_sample(name: str) -> bool:
    """About one ecosystem program in two (by the same hash): the matrix's ci tier runs
    these of the programs not marked slow (split between its rows); `make test` runs every
    program."""
    return _in_hashed_sample(name, 2)


def corpus_params(cases: list[Case]) -> list:
    """The corpus as pytest parameters: `slow` and `sampled_out` marks, the case's name as id."""
    def marks(case: Case) -> list:
        sampled = case.expect != "narrow" or in_sample(case.name)
        return ([pytest.mark.slow] if case.name in SLOW_CASES | HEAVY_CASES else []) + ([] if sampled else [SAMPLED_OUT])

    return [pytest.param(case, marks=marks(case), id=case.name) for case in cases]


def named_params(cases: list[tuple]) -> list:
    """(name, ...) tuples as pytest parameters, sampled by name, the name as id."""
    return [pytest.param(*case, marks=[] if in_sample(case[0]) else [SAMPLED_OUT], id=case[0]) for case in cases]

"""The matrix's ci tier splits the hashed samples between its rows: the shards must partition
`make test-fast`'s sample exactly, or a row would run nothing of a family or CI would lose
cases without saying so."""

from __future__ import annotations

import pytest

from tests import sample

NAMES = [f"case_{i}" for i in range(4000)]


def _selected(monkeypatch, shard: str | None, keep) -> set[str]:
    if shard is None:
        monkeypatch.delenv("X64GUARD_SAMPLE_SHARD", raising=False)
    else:
        monkeypatch.setenv("X64GUARD_SAMPLE_SHARD", shard)
    return {name for name in NAMES if keep(name)}


@pytest.mark.parametrize("keep", [sample.in_sample, sample.in_ecosystem_sample], ids=["corpus", "ecosystem"])
@pytest.mark.parametrize("count", [2, 3])
def test_shards_partition_the_whole_sample(monkeypatch, keep, count):
    whole = _selected(monkeypatch, None, keep)
    shards = [_selected(monkeypatch, f"{k}/{count}", keep) for k in range(count)]
    assert set().union(*shards) == whole
    assert sum(len(s) for s in shards) == len(whole)      # disjoint
    assert all(len(s) > len(whole) / count / 2 for s in shards), [len(s) for s in shards]


@pytest.mark.parametrize("text", ["2/2", "1", "a/b", "0/0", "-1/2"])
def test_a_malformed_shard_is_an_error(monkeypatch, text):
    monkeypatch.setenv("X64GUARD_SAMPLE_SHARD", text)
    with pytest.raises(ValueError, match="X64GUARD_SAMPLE_SHARD"):
        sample.in_sample("x")

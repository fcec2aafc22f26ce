"""Finding kinds are one table (x64guard.findings.Kind, KIND_TABLE): every kind has a row,
and every kind the package spells as a literal is a Kind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import x64guard
from x64guard.findings import KIND_TABLE, Finding, Kind, Location

PACKAGE = Path(x64guard.__file__).resolve().parent
# Kinds given as string literals: Finding("kind", ...), _refusal("kind", ...).
_LITERAL_KIND = re.compile(r"(?:\bFinding|_refusal)\(\s*\"([a-z0-9-]+)\"")


def test_every_kind_has_a_row():
    assert set(KIND_TABLE) == set(Kind)


def test_every_literal_kind_in_the_package_is_a_kind():
    spelled = {m.group(1) for p in PACKAGE.rglob("*.py") for m in _LITERAL_KIND.finditer(p.read_text())}
    assert spelled and spelled - {str(k) for k in Kind} == set()


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown finding kind"):
        Finding("no-such-kind", "error", "op", Location.at("the module"), "message")


@pytest.mark.parametrize("location, text", [
    (Location.source("/m/model.py", 10, 13), "/m/model.py:10:13"),
    (Location.source("model.py", 4, None, "h.0.attn (Attention)"), "model.py:4 [h.0.attn (Attention)]"),
    (Location.input_line(3, 5, "main"), "line 3:5 of the input"),
    (Location.position("main", 4), "@main op #4"),
    (Location.position(None), "the module"),
    (Location.source("lib.py", 2, 1).called_from("helper"), "lib.py:2:1 (in @helper)"),
    (Location.at("the traced graph"), "the traced graph"),
])
def test_a_location_reads_as_people_write_it(location, text):
    assert str(location) == text

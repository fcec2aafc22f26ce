"""Finding kinds are one table (x64guard.findings.Kind, KIND_TABLE): every kind has a row,
and every kind the package spells as a literal is a Kind."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import x64guard
from x64guard.cli.inputs import Format
from x64guard.findings import KIND_TABLE, Finding, Kind, Location, Severity
from x64guard.io.modules import SourceFormat
from x64guard.modes import Mode, Overflow
from x64guard.passes.tables import CustomCallPolicy

PACKAGE = Path(x64guard.__file__).resolve().parent
ROOT = PACKAGE.parent
# Kinds given as string literals: Finding("kind", ...), _refusal("kind", ...).
_LITERAL_KIND = re.compile(r"(?:\bFinding|_refusal)\(\s*\"([a-z0-9-]+)\"")


def _literal_kinds() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        spelled = {m.group(1) for m in _LITERAL_KIND.finditer(path.read_text())}
        if spelled:
            found[path.relative_to(ROOT).as_posix()] = spelled
    return found


def test_every_kind_has_a_row():
    assert set(KIND_TABLE) == set(Kind)


def test_no_finding_is_built_with_a_string_kind():
    # Finding refuses a string at run time; this finds one in code no test reaches.
    assert _literal_kinds() == {}, "build Findings with Kind members"


def test_a_string_kind_is_refused():
    with pytest.raises(TypeError, match="Kind member"):
        Finding("no-such-kind", "error", "op", Location.at("the module"), "message")
    with pytest.raises(TypeError, match="Kind member"):
        Finding("type-narrowed", "info", "op", Location.at("the module"), "message")


def test_severity_and_location_strings_are_converted():
    finding = Finding(Kind.TYPE_NARROWED, "info", "op", "the module", "message")
    assert finding.severity is Severity.INFO and finding.location == Location.at("the module")


def test_string_enums_read_as_their_values():
    # StrEnum: str(), format() and json all give the value (a `(str, Enum)` would give Cls.MEMBER)
    for member in (Severity.ERROR, Kind.TYPE_NARROWED, Mode.WARN, Overflow.SATURATE, Format.MLIR_TEXT,
                   SourceFormat.PORTABLE_ARTIFACT, CustomCallPolicy.RENAMED):
        assert str(member) == f"{member}" == member.value
        assert json.dumps({"k": member}) == json.dumps({"k": member.value})
    assert repr(Severity.ERROR) == "'error'" and repr(Kind.TYPE_NARROWED) == "'type-narrowed'"


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

"""Modules without source locations (lowered with `as_text()`, HLO conversions, torch-xla):
findings are grouped per op and function, so the report stays small; every place is still
listed in JSON and SARIF."""

from __future__ import annotations

import json
import re

import x64guard
from tests.cli.conftest import run_cli

N_ADDS = 2000


def chain_module(n: int = N_ADDS) -> str:
    """@main: n float64 adds in a chain, one per line (line 2 + i), no locations."""
    lines = ["func.func @main(%x: tensor<4xf64>) -> tensor<4xf64> {"]
    previous = "%x"
    for i in range(n):
        lines.append(f"  %{i} = stablehlo.add {previous}, %x : tensor<4xf64>")
        previous = f"%{i}"
    lines += [f"  return {previous} : tensor<4xf64>", "}"]
    return "\n".join(lines) + "\n"


def test_library_groups_ops_without_locations_with_their_first_places():
    report = x64guard.check(chain_module())
    adds = [f for f in report.findings if f.op == "stablehlo.add"]
    assert len(adds) == 1
    add = adds[0]
    assert add.count == N_ADDS and add.location.function == "main" and add.location.line == 2
    assert [p.line for p in add.positions] == [2, 3, 4, 5, 6]
    assert add.unlisted_positions == N_ADDS - 5
    every = x64guard.check(chain_module(), all_positions=True)
    add = next(f for f in every.findings if f.op == "stablehlo.add")
    assert [p.line for p in add.positions] == list(range(2, 2 + N_ADDS)) and add.unlisted_positions == 0


def test_text_report_is_one_line_per_group(tmp_path):
    path = tmp_path / "chain.mlir"
    path.write_text(chain_module())
    result = run_cli("check", path)
    assert result.returncode == 1
    finding_lines = [line for line in result.stdout.splitlines() if "[type-64bit]" in line]
    assert len(finding_lines) == 2  # the signature, and the adds
    assert f"chain.mlir:2:8 (first of {N_ADDS} places in @main): error: stablehlo.add ({N_ADDS} types)" \
        in result.stdout


def test_places_mean_one_thing_in_narrow_and_check(tmp_path):
    """issue 36: for the same adds `narrow` said "at 2 places" (its findings) where `check`
    said "first of N places" (the ops' positions). A place is a source line, or without
    one an op's position: the count is the same in narrow's summary, check's text and JSON."""
    path = tmp_path / "chain.mlir"
    path.write_text(chain_module())
    narrowed = run_cli("narrow", path, "-o", tmp_path / "out.mlir")
    assert narrowed.returncode == 0, narrowed.stderr
    # the adds' places, and the signature's
    assert f"x64guard: narrowed {N_ADDS + 2} types (f64->f32 x{N_ADDS + 2}) at {N_ADDS + 1} places;" \
        in narrowed.stderr, narrowed.stderr
    report = json.loads(run_cli("check", "--format", "json", path).stdout)
    assert report["summary"]["by_kind"]["type-64bit"] == {"findings": 2, "places": N_ADDS + 1, "ops": N_ADDS + 2}
    text = run_cli("check", path).stdout
    assert re.search(rf"^  type-64bit\s+2\s+{N_ADDS + 1}\s+{N_ADDS + 2}$", text, re.M), text


def test_json_and_sarif_list_every_place(tmp_path):
    path = tmp_path / "chain.mlir"
    path.write_text(chain_module())
    data = json.loads(run_cli("check", "--format", "json", path).stdout)
    findings = [f for file in data["files"] for module in file["modules"] for f in module["findings"]]
    add = next(f for f in findings if f["op"] == "stablehlo.add")
    assert [p["source"]["line"] for p in add["positions"]] == list(range(2, 2 + N_ADDS))
    sarif = json.loads(run_cli("check", "--format", "sarif", path).stdout)
    result = next(r for r in sarif["runs"][0]["results"] if r["properties"]["op"] == "stablehlo.add")
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 2
    assert [r["physicalLocation"]["region"]["startLine"] for r in result["relatedLocations"]] == \
        list(range(3, 2 + N_ADDS))

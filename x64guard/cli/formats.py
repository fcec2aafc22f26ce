"""Renderers: a `Run` in, a string out. text for people, json for scripts, sarif for
code-scanning dashboards, github for workflow-command annotations.

Each renders the core's findings as they are (kind, severity, op, location, message,
count); none decides anything.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import x64guard
from x64guard.cli.results import (SEVERITIES, ModuleResult, Run, Source, format_name, relative,
                                  target_description)
from x64guard.cli.term import Style
from x64guard.findings import Finding

FORMATS = ("text", "json", "sarif", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_GITHUB_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def render(run: Run, fmt: str, style: Style | None = None) -> str:
    if fmt == "text":
        return render_text(run, style or Style(False))
    if fmt == "json":
        return json.dumps(to_json(run), indent=2) + "\n"
    if fmt == "sarif":
        return json.dumps(to_sarif(run), indent=2) + "\n"
    if fmt == "github":
        return render_github(run)
    raise ValueError(f"unknown format {fmt!r}")


def one_column(source: Source) -> int:
    """SARIF and GitHub count columns from 1, as x64guard's locations do (the core turns
    JAX's 0-based Python column offsets into 1-based columns)."""
    return max(source.column, 1)


def relative_location(where: str) -> str:
    """`/abs/path/f.py:8:6` with the path made relative to the working directory."""
    file, sep, rest = where.rpartition(":")
    file2, sep2, line = file.rpartition(":")
    if sep and sep2 and line.isdigit() and rest.isdigit():
        return f"{relative(file2)}:{line}:{rest}"
    return relative(where) if not sep else where


# text

def render_text(run: Run, style: Style) -> str:
    out: list[str] = []
    head = f"x64guard {run.command} --target {run.target} ({target_description(run.target)})"
    out.append(style(head, "bold"))
    if run.gate:
        out.append(_gate_line(run))
    clean: list[str] = []
    for file in run.files:
        if file.error is not None:
            out.append("")
            out.append(f"{style(file.path, 'bold')}: {style.severity('error')}: cannot read: {file.error}")
            continue
        for module in file.modules:
            if not module.findings:
                clean.append(_module_title(module, run) + (f" x{module.repeats}" if module.repeats > 1 else ""))
                continue
            out.append("")
            out.append(style(_module_title(module, run), "bold") + _module_suffix(module, run))
            shown: set[tuple[str, str]] = set()
            for finding in _ordered(module):
                out.append("  " + _finding_line(module, finding, style, shown))
    if clean:
        out.append("")
        if run.gate:
            out.append(f"{len(clean)} module(s) without findings: " + ", ".join(clean))
        else:
            out.extend(f"{title}: {style('ok', 'green')}" for title in clean)
    out.append("")
    out.extend(_summary_table(run, style))
    return "\n".join(out) + "\n"


def _gate_line(run: Run) -> str:
    gate = run.gate
    status = gate["returncode"]
    word = "passed" if status == 0 else f"failed (exit status {status})"
    dumps = f"; modules kept in {gate['dump_dir']}" if gate.get("kept") else ""
    distinct = f" ({len(run.modules)} distinct)" if len(run.modules) != gate["dumped_files"] else ""
    return f"command `{gate['command_line']}` {word}; {gate['dumped_files']} module(s) compiled{distinct}{dumps}"


def _module_title(module: ModuleResult, run: Run) -> str:
    unit = module.unit
    if run.gate:
        return f"jit({unit.function})" if unit.function else f"module @{unit.name or '?'}"
    name = f" @{unit.name}" if unit.name else ""
    return f"{unit.display} [{format_name(unit.format)}{name}]"


def _module_suffix(module: ModuleResult, run: Run) -> str:
    unit = module.unit
    parts = []
    if run.gate:
        source = module.primary_source(run.fail_on)
        if source:
            parts.append(f" at {source.display()}")
        if unit.origin and (source is None or relative_location(unit.origin) != source.display()):
            parts.append(f", called from {relative_location(unit.origin)}")
        dumps = f", {module.repeats} dumps like" if module.repeats > 1 else ","
        parts.append(f" (module @{unit.name}{dumps} {Path(unit.path).name})" if unit.name
                     else f" ({Path(unit.path).name})")
    elif unit.function:
        parts.append(f" (jit({unit.function})" + (f", called from {relative_location(unit.origin)})"
                                                 if unit.origin else ")"))
    return "".join(parts)


def _ordered(module: ModuleResult) -> list[Finding]:
    """Unlocated findings (the function signature) first, then by file, line, column."""
    def key(finding: Finding):
        source = module.source(finding)
        return (0, "", 0, 0) if source is None else (1, source.file, source.line, source.column)
    return sorted(module.findings, key=key)


def _finding_line(module: ModuleResult, finding: Finding, style: Style, shown: set) -> str:
    """`file:line:col: severity: op (xN): message [kind]`. The core's messages say what
    happened, then `; ` what to do: the advice is printed once per module and kind."""
    source = module.source(finding)
    where = source.display() + (f" (in @{source.function})" if source.function else "") if source else finding.location
    times = f" (x{finding.count})" if finding.count > 1 else ""
    what, sep, advice = finding.message.partition("; ")
    message = finding.message
    if sep and (finding.kind, advice) in shown:
        message = what
    elif sep:
        shown.add((finding.kind, advice))
    return (f"{where}: {style.severity(str(finding.severity))}: {finding.op}{times}: {message} "
            + style(f"[{finding.kind}]", "dim"))


def _summary_table(run: Run, style: Style) -> list[str]:
    severities = run.counts_by_severity()
    header = ["files", "modules", "unreadable", "findings", *severities]
    values = [len(run.files), len(run.modules), len(run.errors), len(run.findings), *severities.values()]
    lines = [style("Summary", "bold"), *_table([header, values])]
    kinds = run.counts_by_kind()
    if kinds:
        lines.append("")
        lines.extend(_table([["kind", "places", "ops"], *[[k, p, o] for k, (p, o) in kinds.items()]],
                            left=1))
    lines.append("")
    lines.append(verdict(run, style))
    return lines


def _table(rows: list[list], left: int = 0) -> list[str]:
    """Columns padded to their widest cell; the first `left` columns left-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return ["  " + "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
            for row in cells]


def verdict(run: Run, style: Style | None = None) -> str:
    style = style or Style(False)
    failing = run.failing()
    modules = [m for m in run.modules if m.failing(run.fail_on)]
    reasons = []
    if run.errors:
        reasons.append(f"{len(run.errors)} file(s) could not be read")
    if run.command_failed:
        reasons.append(f"the command failed (exit status {run.gate['returncode']})")
    if failing:
        reasons.append(f"{len(failing)} finding(s) at or above {run.fail_on} in {len(modules)} of "
                       f"{len(run.modules)} module(s) for target {run.target}")
    if reasons:
        return style("FAIL", "red", "bold") + ": " + "; ".join(reasons)
    return (style("OK", "green", "bold") + f": {len(run.modules)} module(s), nothing at or above "
            f"{run.fail_on} for target {run.target}")


# json

def finding_json(module: ModuleResult, finding: Finding) -> dict:
    source = module.source(finding)
    data = finding.to_dict()
    data["source"] = None if source is None else {
        "file": source.file, "path": relative(source.file), "line": source.line,
        "column": source.column, "in_function": source.function}
    return data


def to_json(run: Run) -> dict:
    kinds = run.counts_by_kind()
    data = {
        "tool": {"name": "x64guard", "version": x64guard.__version__},
        "command": run.command,
        "target": {"name": run.target, "description": target_description(run.target)},
        "fail_on": run.fail_on,
        "exit_code": run.exit_code(),
        "summary": {
            "files": len(run.files), "modules": len(run.modules), "unreadable": len(run.errors),
            "findings": len(run.findings), "ops": sum(f.count for f in run.findings),
            "failing": len(run.failing()),
            "by_severity": run.counts_by_severity(),
            "by_kind": {k: {"places": p, "ops": o} for k, (p, o) in kinds.items()},
        },
        "files": [{
            "path": file.path,
            "format": str(file.format) if file.format else None,
            "error": file.error,
            "modules": [{
                "name": m.unit.name, "function": m.unit.function, "label": m.unit.label,
                "origin": m.unit.origin, "passed": not m.failing(run.fail_on),
                "findings": [finding_json(m, f) for f in m.findings],
            } for m in file.modules],
        } for file in run.files],
    }
    if run.gate:
        data["gate"] = {k: v for k, v in run.gate.items()}
    return data


# sarif

def to_sarif(run: Run) -> dict:
    kinds = sorted({f.kind for f in run.findings})
    rule_index = {k: i for i, k in enumerate(kinds)}
    levels: dict[str, str] = {}
    for f in run.findings:  # a rule's default level: the most severe finding of its kind
        current = levels.get(f.kind)
        if current is None or SEVERITIES.index(str(f.severity)) > SEVERITIES.index(current):
            levels[f.kind] = str(f.severity)
    rules = [{
        "id": kind,
        "name": "".join(part.capitalize() for part in kind.split("-")),
        "shortDescription": {"text": f"x64guard {kind}"},
        "defaultConfiguration": {"level": _SARIF_LEVEL[levels[kind]]},
    } for kind in kinds]
    results = []
    for module in run.modules:
        for finding in module.findings:
            results.append(_sarif_result(run, module, finding, rule_index[finding.kind]))
    notifications = [{
        "level": "error",
        "message": {"text": f"cannot read: {file.error}"},
        "locations": [{"physicalLocation": {"artifactLocation": _artifact(file.path)}}],
    } for file in run.errors]
    invocation = {"executionSuccessful": not run.errors, "exitCode": run.exit_code()}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    if run.gate:
        invocation["commandLine"] = run.gate["command_line"]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "x64guard", "version": x64guard.__version__,
                                "semanticVersion": x64guard.__version__, "rules": rules}},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().resolve().as_uri() + "/"}},
            "invocations": [invocation],
            "results": results,
            "properties": {"target": run.target, "failOn": run.fail_on},
        }],
    }


def _artifact(path: str) -> dict:
    rel = relative(path)
    if not Path(rel).is_absolute():
        return {"uri": Path(rel).as_posix(), "uriBaseId": "%SRCROOT%"}
    return {"uri": Path(path).resolve().as_uri()}


def _sarif_result(run: Run, module: ModuleResult, finding: Finding, index: int) -> dict:
    source = module.source(finding)
    unit = module.unit
    where = f"module @{unit.name}" if unit.name else unit.display
    text = f"{finding.op}{f' (x{finding.count})' if finding.count > 1 else ''}: {finding.message}"
    if source is None:
        text += f" ({where}, {finding.location})"
    result = {
        "ruleId": finding.kind,
        "ruleIndex": index,
        "level": _SARIF_LEVEL[str(finding.severity)],
        "message": {"text": text},
        "partialFingerprints": {"x64guardFinding/v1": _fingerprint(unit.name, finding, source)},
        "properties": {"op": finding.op, "count": finding.count, "location": finding.location,
                       "module": unit.name, "function": unit.function,
                       "file": Path(unit.display).name if unit.ephemeral else unit.display},
    }
    location = _sarif_location(module, source, run)
    if location is not None:
        if unit.name:
            location["logicalLocations"] = [{"name": unit.function or unit.name, "kind": "function"}]
        result["locations"] = [location]
    return result


def _sarif_location(module: ModuleResult, source: Source | None, run: Run) -> dict | None:
    if source is not None:
        return {"physicalLocation": {"artifactLocation": _artifact(source.file),
                                     "region": {"startLine": max(source.line, 1),
                                                "startColumn": one_column(source)}}}
    if not module.unit.ephemeral and module.unit.path != "<stdin>":
        return {"physicalLocation": {"artifactLocation": _artifact(module.unit.path)}}
    anchor = _anchor(module, run)  # a gate dump is gone: the call site, else the function's line
    if anchor is not None:
        return {"physicalLocation": {"artifactLocation": _artifact(anchor.file),
                                     "region": {"startLine": max(anchor.line, 1)}}}
    return None


def _anchor(module: ModuleResult, run: Run) -> Source | None:
    return module.call_site() or module.primary_source(run.fail_on)


def _fingerprint(module_name: str | None, finding: Finding, source: Source | None) -> str:
    where = f"{relative(source.file)}:{source.line}:{source.column}" if source else finding.location
    key = "\0".join([finding.kind, finding.op, where, module_name or ""])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


# github

def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(run: Run) -> str:
    lines = []
    for file in run.errors:
        lines.append(f"::error file={_escape_property(relative(file.path))},"
                     f"title={_escape_property('x64guard unreadable input')}::{_escape_data(file.error)}")
    for module in run.modules:
        for finding in module.findings:
            lines.append(_github_line(module, finding, run))
    lines.append(verdict(run))
    return "\n".join(lines) + "\n"


def _github_line(module: ModuleResult, finding: Finding, run: Run) -> str:
    source = module.source(finding)
    unit = module.unit
    props = []
    if source is not None:
        props += [f"file={_escape_property(relative(source.file))}", f"line={max(source.line, 1)}",
                  f"col={one_column(source)}"]
    elif not unit.ephemeral and unit.path != "<stdin>":
        props.append(f"file={_escape_property(relative(unit.path))}")
    elif (anchor := _anchor(module, run)) is not None:
        props += [f"file={_escape_property(relative(anchor.file))}", f"line={max(anchor.line, 1)}"]
    props.append(f"title={_escape_property('x64guard ' + finding.kind)}")
    who = f"jit({unit.function})" if unit.function else (f"@{unit.name}" if unit.name else unit.display)
    times = f" (x{finding.count})" if finding.count > 1 else ""
    where = "" if source is not None else f" at {finding.location}"
    message = f"{who}: {finding.op}{times}{where}: {finding.message}"
    return f"::{_GITHUB_COMMAND[str(finding.severity)]} {','.join(props)}::{_escape_data(message)}"

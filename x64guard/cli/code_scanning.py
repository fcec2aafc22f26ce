"""SARIF 2.1.0 (code-scanning dashboards) and GitHub workflow commands (pull-request
annotations): a `Run` in, a document or lines out, placed as every format places findings
(`ModuleResult.locate`)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import x64guard
from x64guard.cli.formats import count_text, file_path, one_column, position_text, verdict
from x64guard.cli.results import SEVERITIES, ModuleResult, Run
from x64guard.cli.where import ModulePosition, Source, display_location, relative
from x64guard.findings import Finding

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_GITHUB_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


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
        **_neuron_rule_text(kind),
    } for kind in kinds]
    results = []
    for module in run.modules:
        for finding in module.findings:
            results.append(_sarif_result(run, module, finding, rule_index[finding.kind]))
    notifications = [{
        "level": "error",
        "message": {"text": f"cannot read: {file.error}"},
        "locations": [{"physicalLocation": {"artifactLocation": artifact_location(file_path(file))}}],
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


def artifact_location(path: str) -> dict:
    rel = relative(path)
    if not Path(rel).is_absolute():
        return {"uri": Path(rel).as_posix(), "uriBaseId": "%SRCROOT%"}
    return {"uri": Path(path).resolve().as_uri()}


def _neuron_rule_text(kind: str) -> dict:
    """A Neuron code's trigger, documented fix and page (tables.NEURON_RULES)."""
    from x64guard.passes.tables import NEURON_RULE

    row = NEURON_RULE.get(kind)
    if row is None:
        return {}
    return {"fullDescription": {"text": f"{row.trigger} (aws-neuron-sdk 2.32: {row.doc})"},
            "help": {"text": f"fix: {row.fix}"}}


def _sarif_result(run: Run, module: ModuleResult, finding: Finding, index: int) -> dict:
    where = module.locate(finding)
    source = where if isinstance(where, Source) else None
    unit = module.unit
    text = f"{finding.op}{count_text(finding)}: {finding.message}"
    if source is None:
        text += f" (at {where.display()})"
    result = {
        "ruleId": finding.kind,
        "ruleIndex": index,
        "level": _SARIF_LEVEL[str(finding.severity)],
        "message": {"text": text},
        "partialFingerprints": {"x64guardFinding/v1": _fingerprint(unit.name, finding, source)},
        "properties": {"op": finding.op, "count": finding.count, "location": display_location(finding.location),
                       "module": unit.name, "function": unit.function,
                       "file": Path(unit.display).name if unit.ephemeral else relative(unit.display)},
    }
    location = _sarif_location(module, where, run)
    location["logicalLocations"] = [_logical_location(module, where)]
    result["locations"] = [location]
    if len(finding.positions) > 1:  # the other places of a group without source locations
        related = []
        for number, position in enumerate(finding.positions[1:], 1):
            other = module.locate(dataclasses.replace(finding, location=position, positions=()))
            entry = _sarif_location(module, other, run)
            entry["logicalLocations"] = [_logical_location(module, other)]
            entry["id"] = number
            related.append(entry)
        result["relatedLocations"] = related
        result["properties"]["places"] = len(finding.positions) + finding.unlisted_positions
    return result


def _logical_location(module: ModuleResult, where: Source | ModulePosition) -> dict:
    unit = module.unit
    if isinstance(where, ModulePosition) and where.function:
        name = f"@{where.function}" + (f" op #{where.op_index}" if where.op_index is not None else "")
        qualified = f"{unit.name or unit.display}/{name}"
        return {"name": name, "fullyQualifiedName": qualified, "kind": "function"}
    return {"name": unit.function or unit.name or unit.display, "kind": "function"}


def _sarif_location(module: ModuleResult, where: Source | ModulePosition, run: Run) -> dict:
    """Every result has a location: its source line; else the module's file; else where a
    removed gate dump was called from (or its first located finding); else the logical
    location alone (added by the caller)."""
    if isinstance(where, Source):
        return {"physicalLocation": {"artifactLocation": artifact_location(where.file),
                                     "region": {"startLine": max(where.line, 1), "startColumn": one_column(where)}}}
    if where.file:
        return {"physicalLocation": {"artifactLocation": artifact_location(where.file)}}
    anchor = where.anchor or module.primary_source(run.fail_on)
    if anchor is not None:
        return {"physicalLocation": {"artifactLocation": artifact_location(anchor.file),
                                     "region": {"startLine": max(anchor.line, 1)}}}
    return {}


def _fingerprint(module_name: str | None, finding: Finding, source: Source | None) -> str:
    where = f"{source.path}:{source.line}:{source.column}" if source else str(finding.location)
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
        lines.append(f"::error file={_escape_property(file_path(file))},"
                     f"title={_escape_property('x64guard unreadable input')}::{_escape_data(file.error)}")
    for module in run.modules:
        for finding in module.findings:
            lines.append(_github_line(module, finding, run))
    lines.append(verdict(run))
    return "\n".join(lines) + "\n"


def _github_line(module: ModuleResult, finding: Finding, run: Run) -> str:
    where = module.locate(finding)
    unit = module.unit
    props = []
    if isinstance(where, Source):
        props += [f"file={_escape_property(where.path)}", f"line={max(where.line, 1)}", f"col={one_column(where)}"]
    elif where.file:
        props.append(f"file={_escape_property(relative(where.file))}")
    elif (anchor := where.anchor or module.primary_source(run.fail_on)) is not None:
        props += [f"file={_escape_property(anchor.path)}", f"line={max(anchor.line, 1)}"]
    props.append(f"title={_escape_property('x64guard ' + finding.kind)}")
    who = f"jit({unit.function})" if unit.function else (f"@{unit.name}" if unit.name else relative(unit.display))
    times = count_text(finding)
    at = "" if isinstance(where, Source) else f" at {position_text(where, finding)}"
    message = f"{who}: {finding.op}{times}{at}: {finding.message}"
    return f"::{_GITHUB_COMMAND[str(finding.severity)]} {','.join(props)}::{_escape_data(message)}"

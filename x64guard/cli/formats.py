"""Renderers: a `Run` in, a string out. text for people, json for scripts, sarif for
code-scanning dashboards, github for workflow-command annotations (those two in
`code_scanning.py`).

Each renders the core's findings as they are (kind, severity, op, location, message,
count); none decides anything. Where a finding is comes from `ModuleResult.locate` (a
source line or a position in the module, x64guard/cli/where.py) in every format.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from pathlib import Path

import x64guard
from x64guard.cli.results import (ModuleResult, Run, format_name, is_compilation_dump, target_description,
                                  target_summary)
from x64guard.cli.term import Style
from x64guard.cli.where import ModulePosition, Source, display_location, display_origin, relative
from x64guard.findings import Finding, Kind

FORMATS = ("text", "json", "sarif", "github")
TYPE_COUNTING_KINDS = frozenset({Kind.TYPE_64BIT, Kind.TYPE_NARROWED})  # their count is of types, not ops

# The text report stays short on large suites: modules (grouped by jitted function) listed
# with their findings, findings per group, and names in one-line lists. JSON lists all.
# A report of up to UNCAPPED_LINES finding lines is printed whole.
UNCAPPED_LINES = 60
MAX_GROUPS = 25
MAX_FINDINGS_PER_GROUP = 12
MAX_NAMES = 30
# The verdict is repeated as the last line when the details push the summary's verdict
# this many lines up (a short report says it once).
VERDICT_REPEATED_AFTER = 20


def render(run: Run, fmt: str, style: Style | None = None, reasons_on_stderr: bool = False) -> str:
    """`reasons_on_stderr`: the command line printed each unreadable file's reason on
    stderr already; the text report (on the same terminal) then only counts them."""
    if fmt == "text":
        return render_text(run, style or Style(False), reasons_on_stderr)
    if fmt == "json":
        return json.dumps(to_json(run), indent=2) + "\n"
    if fmt == "sarif":
        from x64guard.cli.code_scanning import to_sarif
        return json.dumps(to_sarif(run), indent=2) + "\n"
    if fmt == "github":
        from x64guard.cli.code_scanning import render_github
        return render_github(run)
    raise ValueError(f"unknown format {fmt!r}")


def count_text(finding: Finding) -> str:
    """What a finding's count counts, after its op: ` (3 ops)`; ` (2 types)` for the
    kinds that count 64-bit types (the `f64->f32 x2` of their message); nothing for one."""
    if finding.count <= 1:
        return ""
    return f" ({finding.count} {'types' if finding.kind in TYPE_COUNTING_KINDS else 'ops'})"


def one_column(source: Source) -> int:
    """SARIF and GitHub count columns from 1, as x64guard's locations do (the core turns
    JAX's 0-based Python column offsets into 1-based columns)."""
    return max(source.column, 1)


# text

def render_text(run: Run, style: Style, reasons_on_stderr: bool = False) -> str:
    """The summary first (counts, kinds, verdict), then the modules with findings grouped
    by jitted function, failing groups first, capped (`--format json` lists everything);
    the verdict again at the end when the details are long. Unreadable files' reasons are
    listed unless `reasons_on_stderr`: each is said once."""
    out: list[str] = [style(f"x64guard {run.command} --target {run.target} ({target_summary(run.target)})", "bold")]
    if run.gate:
        out.append(_gate_line(run))
    elif run.compilations != len(run.modules):
        out.append(f"{run.compilations} compilation dump(s) read, {len(run.modules)} distinct "
                   "(repeated compilations with the same findings are merged)")
    out.append("")
    out.extend(_summary_table(run, style))
    details: list[str] = []
    for file in [] if reasons_on_stderr else run.errors[:MAX_GROUPS]:
        details.append(f"{style(file.path, 'bold')}: {style.severity('error')}: cannot read: {file.error}")
    if len(run.errors) > MAX_GROUPS and not reasons_on_stderr:
        details.append(f"... and {len(run.errors) - MAX_GROUPS} more unreadable file(s)")
    groups = _groups([m for m in run.modules if m.findings], run)
    if groups:
        if details:
            details.append("")
        details.extend(_group_lines(groups, run, style))
    clean = [m for m in run.modules if not m.findings]
    if clean:
        details.append("")
        details.extend(_clean_lines(clean, run, style))
    if details:
        out.append("")
        out.extend(details)
        if len(details) > VERDICT_REPEATED_AFTER:
            out.append("")
            out.append(verdict(run, style))
    return "\n".join(out) + "\n"


def _groups(modules: list[ModuleResult], run: Run) -> list[list[ModuleResult]]:
    """Modules grouped by title (a jitted function compiled for several shapes is one
    group), groups with failing findings first, otherwise in the order they were read."""
    by_title: dict[str, list[ModuleResult]] = {}
    for module in modules:
        by_title.setdefault(_module_title(module, run), []).append(module)
    groups = list(by_title.values())
    return sorted(groups, key=lambda g: not any(m.failing(run.fail_on) for m in g))


def _group_lines(groups: list[list[ModuleResult]], run: Run, style: Style) -> list[str]:
    rows_per_group = [_group_rows(group) for group in groups]
    capped = sum(len(rows) for rows in rows_per_group) > UNCAPPED_LINES
    max_groups = MAX_GROUPS if capped else len(groups)
    max_rows = MAX_FINDINGS_PER_GROUP if capped else None
    count = sum(len(g) for g in groups)
    head = f"{count} module(s) with findings"
    if len(groups) > max_groups:
        head += f"; the first {max_groups} of {len(groups)} groups shown"
    lines = [style(head + ":", "bold")]
    advice_shown: set[tuple[str, str]] = set()
    for group, rows in zip(groups[:max_groups], rows_per_group):
        first = group[0]
        title = style(_module_title(first, run), "bold") + _module_suffix(first, run)
        if len(group) > 1:
            title += f" [{len(group)} variants with different findings]"
        lines.append("")
        lines.append(title)
        lines.extend("  " + finding_line(module, finding, style, advice_shown)
                     for module, finding in rows[:max_rows])
        if max_rows is not None and len(rows) > max_rows:
            lines.append(f"  ... and {len(rows) - max_rows} more finding(s) here "
                         "(`--format json` lists every finding)")
    rest = groups[max_groups:]
    if rest:
        names = [_module_title(g[0], run) + (f" ({len(g)} variants)" if len(g) > 1 else "") for g in rest]
        lines.append("")
        lines.append(f"... and {sum(len(g) for g in rest)} more module(s) with findings: " + _name_list(names)
                     + " (`--format json` lists every finding)")
    return lines


def _group_rows(group: list[ModuleResult]) -> list[tuple[ModuleResult, Finding]]:
    """The findings of a group's variants, each distinct one once, in module order."""
    seen: set[tuple] = set()
    rows = []
    for module in group:
        for finding in _ordered(module):
            key = (finding.kind, str(finding.severity), finding.op, finding.location, finding.message)
            if key not in seen:
                seen.add(key)
                rows.append((module, finding))
    return rows


def _clean_lines(clean: list[ModuleResult], run: Run, style: Style) -> list[str]:
    titles = [_module_title(m, run) + (f" (compiled {m.repeats} times)" if m.repeats > 1 else "") for m in clean]
    if run.gate or len(clean) > MAX_NAMES or any(is_compilation_dump(m) for m in clean):
        return [f"{len(clean)} module(s) without findings: " + _name_list(titles)]
    return [f"{title}: {style('ok', 'green')}" for title in titles]


def _name_list(names: list[str]) -> str:
    listed = ", ".join(names[:MAX_NAMES])
    return listed + (f", ... ({len(names) - MAX_NAMES} more)" if len(names) > MAX_NAMES else "")


def _gate_line(run: Run) -> str:
    gate = run.gate
    status = gate["returncode"]
    word = "passed" if status == 0 else f"failed (exit status {status})"
    dumps = f"; modules kept in {gate['dump_dir']}" if gate.get("kept") else ""
    distinct = f" ({len(run.modules)} distinct)" if len(run.modules) != gate["dumped_files"] else ""
    return f"command `{gate['command_line']}` {word}; {gate['dumped_files']} module(s) compiled{distinct}{dumps}"


def _module_title(module: ModuleResult, run: Run) -> str:
    unit = module.unit
    if run.gate or is_compilation_dump(module):
        return f"jit({unit.function})" if unit.function else f"module @{unit.name or '?'}"
    name = f" @{unit.name}" if unit.name else ""
    return f"{unit.display} [{format_name(unit.format)}{name}]"


def _module_suffix(module: ModuleResult, run: Run) -> str:
    unit = module.unit
    parts = []
    if run.gate or is_compilation_dump(module):
        source = module.primary_source(run.fail_on)
        if source:
            parts.append(f" at {source.display()}")
        if unit.origin and (source is None or display_origin(unit.origin) != source.display()):
            parts.append(f", called from {display_origin(unit.origin)}")
        dumps = f", {module.repeats} dumps like" if module.repeats > 1 else ","
        parts.append(f" (module @{unit.name}{dumps} {Path(unit.path).name})" if unit.name
                     else f" ({Path(unit.path).name})")
    elif unit.function:
        parts.append(f" (jit({unit.function})" + (f", called from {display_origin(unit.origin)})"
                                                 if unit.origin else ")"))
    return "".join(parts)


def _ordered(module: ModuleResult) -> list[Finding]:
    """Unlocated findings (the function signature) first, then by file, line, column."""
    def key(finding: Finding):
        source = module.source(finding)
        return (0, "", 0, 0) if source is None else (1, source.file, source.line, source.column)
    return sorted(module.findings, key=key)


def finding_line(module: ModuleResult, finding: Finding, style: Style, shown: set) -> str:
    """`file:line:col: severity: op (xN): message [kind]` (`@main op #4: ...` without a
    source line). The core's messages say what happened, then `; ` what to do: the advice
    is printed once per report and kind."""
    where = module.locate(finding)
    if isinstance(where, Source):
        place = where.display() + (f" (in @{where.function})" if where.function else "")
    else:
        place = position_text(where, finding)
    if finding.positions:  # a group of ops without a source location: this is its first place
        places = len(finding.positions) + finding.unlisted_positions
        inside = f" in @{finding.location.function}" if finding.location.function else ""
        place += f" (first of {places} places{inside})"
    times = count_text(finding)
    what, sep, advice = finding.message.partition("; ")
    message = finding.message
    if sep and (finding.kind, advice) in shown:
        message = what
    elif sep:
        shown.add((finding.kind, advice))
    return (f"{place}: {style.severity(str(finding.severity))}: {finding.op}{times}: {message} "
            + style(f"[{finding.kind}]", "dim"))


def position_text(position: ModulePosition, finding: Finding) -> str:
    """A position inside the module its group names: `@main (signature)`, `@main op #4`."""
    if position.function is None:
        return str(finding.location)
    text = f"@{position.function}"
    if position.op_index is not None:
        return f"{text} op #{position.op_index}"
    return text + (" (signature)" if finding.op == "func.func" else "")


def _summary_table(run: Run, style: Style) -> list[str]:
    severities = run.counts_by_severity()
    header = ["files", "modules", "unreadable", "findings", *severities]
    values = [len(run.files), len(run.modules), len(run.errors), len(run.findings), *severities.values()]
    lines = [style("Summary", "bold"), *_table([header, values])]
    kinds = run.counts_by_kind()
    if kinds:
        lines.append("")
        lines.extend(_table([["kind", "findings", "places", "ops"], *[[k, *counts] for k, counts in kinds.items()]],
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
    """The core's fields (the location with its path made relative), plus where the finding
    is: a `source` line, or else its `position` in the module, never neither."""
    where = module.locate(finding)
    data = finding.to_dict()
    data["location"] = display_location(finding.location)
    data["source"] = where.to_json() if isinstance(where, Source) else None
    data["position"] = where.to_json() if isinstance(where, ModulePosition) else None
    if finding.positions:  # every place of a group without source locations (as many as were asked)
        data["positions"] = [_place_json(module.locate(dataclasses.replace(finding, location=p, positions=())))
                             for p in finding.positions]
    return data


def _place_json(where: Source | ModulePosition) -> dict:
    return {"source": where.to_json(), "position": None} if isinstance(where, Source) else \
        {"source": None, "position": where.to_json()}


def report_schema() -> dict:
    """The JSON Schema every `--format json` report follows (shipped with the package)."""
    return json.loads(resources.files("x64guard.cli").joinpath("schema", "report.schema.json").read_text("utf-8"))


def to_json(run: Run) -> dict:
    kinds = run.counts_by_kind()
    data = {
        "tool": {"name": "x64guard", "version": x64guard.__version__},
        "command": run.command,
        "target": {"name": run.target, "description": target_description(run.target)},
        "fail_on": run.fail_on,
        "exit_code": run.exit_code(),
        "summary": {
            "files": len(run.files), "modules": len(run.modules), "compilations": run.compilations,
            "unreadable": len(run.errors),
            "findings": len(run.findings), "ops": sum(f.count for f in run.findings),
            "failing": len(run.failing_modules()), "failing_findings": len(run.failing()),
            "by_severity": run.counts_by_severity(),
            "by_kind": {k: {"findings": n, "places": p, "ops": o} for k, (n, p, o) in kinds.items()},
        },
        "files": [{
            "path": file_path(file),
            "format": str(file.format) if file.format else None,
            "error": file.error,
            "modules": [{
                "name": m.unit.name, "function": m.unit.function, "label": m.unit.label,
                "origin": display_origin(m.unit.origin) if m.unit.origin else None,
                "repeats": m.repeats, "passed": not m.failing(run.fail_on),
                "findings": [finding_json(m, f) for f in m.findings],
            } for m in file.modules],
        } for file in run.files],
    }
    if run.gate:
        data["gate"] = {k: v for k, v in run.gate.items()}
    return data


def file_path(file) -> str:
    """A file as reports name it: relative to the working directory where it can be, its
    name only for a gate dump deleted after the run (the temporary directory names nothing)."""
    return Path(file.path).name if file.ephemeral else relative(file.path)


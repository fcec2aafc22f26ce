"""What a command-line run found: per file, per module, the core's findings as they are.

`check_units` is the only place the command line calls the core for `check`; renderers
(`formats.py`) read a `Run` and nothing else.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path

import x64guard
from x64guard.io import modules
from x64guard.cli.inputs import (FORMAT_NAMES, Format, InputError, Unit, function_name, name_parse_error,
                                 read_units)
from x64guard.cli.where import ModulePosition, Source, module_position, parse_origin, source_of
from x64guard.findings import SEVERITY_RANK, Finding, Severity, count_places
from x64guard.passes.tables import TARGET_PROFILES

SEVERITIES = [str(s) for s in sorted(SEVERITY_RANK, key=SEVERITY_RANK.get)]  # info, warning, error

@dataclasses.dataclass
class ModuleResult:
    unit: Unit
    findings: list[Finding]
    repeats: int = 1              # how many compilation dumps had this module with these findings

    @property
    def name(self) -> str | None:
        return self.unit.name

    @property
    def function(self) -> str | None:
        return self.unit.function

    def failing(self, fail_on: str) -> list[Finding]:
        threshold = SEVERITY_RANK[Severity(fail_on)]
        return [f for f in self.findings if SEVERITY_RANK[Severity(f.severity)] >= threshold]

    def source(self, finding: Finding) -> Source | None:
        """Where a finding is as a file and line, or None when the module does not say."""
        text_file = self.unit.path if self.unit.format is Format.MLIR_TEXT and self.unit.path != "<stdin>" else None
        return source_of(finding.location, text_file)

    def locate(self, finding: Finding) -> Source | ModulePosition:
        """A Source when there is one, else the finding's position in the module."""
        source = self.source(finding)
        if source is not None:
            return source
        file = None if self.unit.ephemeral or self.unit.path == "<stdin>" else self.unit.path
        return module_position(finding.location, self.unit.name, file, self.call_site())

    def call_site(self) -> Source | None:
        """Where the jitted function was called from, when the module says."""
        return parse_origin(self.unit.origin)

    def primary_source(self, fail_on: str) -> Source | None:
        """The source line most responsible: the first located finding that fails, else any."""
        for finding in self.failing(fail_on) + self.findings:
            source = self.source(finding)
            if source is not None:
                return source
        return None


@dataclasses.dataclass
class FileResult:
    path: str
    format: Format | None = None
    modules: list[ModuleResult] = dataclasses.field(default_factory=list)
    error: str | None = None      # why the file could not be read (exit 2)
    ephemeral: bool = False       # a gate dump removed after the run: reports give its name only


@dataclasses.dataclass
class Run:
    command: str                  # check | gate
    target: str
    fail_on: str
    files: list[FileResult] = dataclasses.field(default_factory=list)
    gate: dict | None = None      # the wrapped command, its status, the dump directory

    @property
    def modules(self) -> list[ModuleResult]:
        return [m for f in self.files for m in f.modules]

    @property
    def compilations(self) -> int:
        """Modules read, counting every repeated compilation (merged into one module)."""
        return sum(m.repeats for m in self.modules)

    @property
    def errors(self) -> list[FileResult]:
        return [f for f in self.files if f.error is not None]

    @property
    def findings(self) -> list[Finding]:
        return [f for m in self.modules for f in m.findings]

    def failing(self) -> list[Finding]:
        return [f for m in self.modules for f in m.failing(self.fail_on)]

    def failing_modules(self) -> list[ModuleResult]:
        return [m for m in self.modules if m.failing(self.fail_on)]

    def counts_by_kind(self) -> dict[str, tuple[int, int, int]]:
        """kind -> (findings, places, ops): places as `findings.count_places` counts them
        (per module: places are lines or positions of one module), ops the findings'
        summed counts. Most findings first."""
        by_kind: dict[str, dict[int, list[Finding]]] = {}
        for index, module in enumerate(self.modules):
            for f in module.findings:
                by_kind.setdefault(f.kind, {}).setdefault(index, []).append(f)
        counts = {}
        for kind, per_module in by_kind.items():
            findings = [f for group in per_module.values() for f in group]
            counts[kind] = (len(findings), sum(count_places(group) for group in per_module.values()),
                            sum(f.count for f in findings))
        return dict(sorted(counts.items(), key=lambda item: (-item[1][0], item[0])))

    def counts_by_severity(self) -> dict[str, int]:
        counts = Counter(str(f.severity) for f in self.findings)
        return {s: counts.get(s, 0) for s in reversed(SEVERITIES)}

    @property
    def command_failed(self) -> bool:
        return bool(self.gate) and self.gate.get("returncode") != 0

    def exit_code(self) -> int:
        if self.errors:
            return 2
        if self.failing() or self.command_failed:
            return 1
        return 0


# JAX's IR dump names: jax_ir0007_jit_step_compile.mlir (also _export, per dump mode).
_JAX_DUMP_NAME = re.compile(r"^jax_ir\d+_.+\.mlir$")


def is_compilation_dump(module: ModuleResult) -> bool:
    """A module JAX or torch-xla dumped as it compiled it (what `gate` collects)."""
    return module.unit.format is Format.TORCH_XLA_GRAPHS or bool(_JAX_DUMP_NAME.match(Path(module.unit.path).name))


def merge_repeated_compilations(files: list[FileResult]) -> list[FileResult]:
    """One entry per distinct (module name, findings) among compilation dumps: a test suite
    compiles the same function for many shapes, and JAX compiles one tiny module per eager
    op it runs. Other files are kept as they are. `gate` and `check DIR` both merge here."""
    seen: dict[tuple, ModuleResult] = {}
    merged: list[FileResult] = []
    for file in files:
        if file.error is not None:
            merged.append(file)
            continue
        kept = []
        for module in file.modules:
            if not is_compilation_dump(module):
                kept.append(module)
                continue
            key = (module.unit.name, module.unit.function,
                   tuple((f.kind, str(f.severity), f.op, f.location, f.message) for f in module.findings))
            if key in seen:
                seen[key].repeats += module.repeats
                continue
            seen[key] = module
            kept.append(module)
        if kept:
            file.modules = kept
            merged.append(file)
    return merged


def target_description(name: str) -> str:
    return TARGET_PROFILES[name].description


def target_summary(name: str) -> str:
    return TARGET_PROFILES[name].summary


def check_units(units: list[Unit], target: str, all_positions: bool = False,
                neuron_cc_flags: str | None = None) -> list[ModuleResult]:
    return [check_unit(unit, target, all_positions, neuron_cc_flags) for unit in units]


def check_unit(unit: Unit, target: str, all_positions: bool = False,
               neuron_cc_flags: str | None = None) -> ModuleResult:
    """`all_positions`: groups of ops without a source location list every place (JSON,
    SARIF), not only the first few (text)."""
    try:
        module, _ = modules.load(unit.data)
    except ValueError as exc:
        raise InputError(unit.display, name_parse_error(_reason(exc), unit.display)) from None
    if unit.name is None:
        unit.name = _sym_name(module)
        if unit.function is None:
            unit.function = function_name(unit.name)
    if unit.origin is None and unit.function:
        unit.origin, traced_name = call_site(module, unit.function, unit.name)
        unit.function = traced_name or unit.function
    report = x64guard.check(module, target=target, all_positions=all_positions, neuron_cc_flags=neuron_cc_flags)
    return ModuleResult(unit, list(report.findings))


# JAX names the location of `@main`'s own ops `jit(<function>)`, and the module after it
# with every character outside [\w.-] made "_" and the last ones dropped (`jit(<lambda>)`
# -> `jit__lambda`; jax/_src/interpreters/mlir.py, 0.10).
_TRACED_NAME = re.compile(r"^(?:p?jit|pmap)\((.*)\)$")
_NOT_IN_MODULE_NAMES = re.compile(r"[^\w.-]")


def call_site(module, function: str, module_name: str | None = None) -> tuple[str | None, str | None]:
    """Where a jitted function was called from, and its name as traced (`<lambda>` for the
    module `jit__lambda`): JAX names the location of `@main`'s own ops (its return)
    `jit(<function>)`, over the caller's file location. (None, None) when it does not say."""
    from x64guard.passes.ir_queries import main_function
    from x64guard.passes.locations import LocationResolver

    resolver = LocationResolver()
    main = main_function(module)
    if main is None:
        return None, None
    for region in main.regions:
        for block in region.blocks:
            for inner in block.operations:
                where, name = resolver.resolve_with_name(inner.operation.location)
                traced = _TRACED_NAME.match(name or "")
                if traced and where is not None and where.has_file and (
                        traced.group(1) == function
                        or _NOT_IN_MODULE_NAMES.sub("_", traced.group(0)).rstrip("_") == module_name):
                    return str(where), traced.group(1)  # a unit's origin: `file:line:col`
    return None, None


def check_file(path: str, target: str, data: bytes | None = None, all_positions: bool = False,
               neuron_cc_flags: str | None = None) -> FileResult:
    result = FileResult("<stdin>" if path == "-" else path)
    try:
        units = read_units(path, data)
        result.format = units[0].format
        result.modules = check_units(units, target, all_positions, neuron_cc_flags)
    except InputError as exc:
        result.error = exc.reason
    return result


def format_name(fmt: Format | None) -> str:
    return FORMAT_NAMES.get(fmt, "unknown") if fmt else "unknown"


def _sym_name(module) -> str | None:
    from jax.extend.mlir import ir

    attributes = module.operation.attributes
    if "sym_name" in attributes:
        return ir.StringAttr(attributes["sym_name"]).value
    return None


def _reason(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.removeprefix("x64guard: ")

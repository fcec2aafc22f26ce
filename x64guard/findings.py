"""Findings: what the pass saw, where, and what the user can do about it.

A `Finding` is plain data: a `Kind` (the one table of every kind x64guard emits, below), a
`Severity`, the op, a structured `Location`, the message and how many ops it stands for.
Renderers (the command line's text, JSON, SARIF) read these fields; nothing parses the
human form `str(finding)` back.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field


class Severity(enum.StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


    def __repr__(self) -> str:   # shown as the string it compares equal to, in lists and dicts
        return repr(self.value)


SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


class Kind(enum.StrEnum):
    """Every kind of finding x64guard emits: the pass, `check`, the API and the front ends.
    A kind is a stable identifier (SARIF rule ids, JSON, `[kind]` in text); `KIND_TABLE`
    says what each means and who emits it. A Finding of a kind not listed here is a bug."""

    def __repr__(self) -> str:   # shown as the string it compares equal to, in lists and dicts
        return repr(self.value)

    # the narrowing pass (x64guard/passes)
    TYPE_NARROWED = "type-narrowed"
    TYPE_64BIT = "type-64bit"
    CONSTANT_OUT_OF_RANGE = "constant-out-of-range"
    CONSTANT_OVERFLOW = "constant-overflow"
    CONSTANT_UNDERFLOW = "constant-underflow"
    CONSTANT_COLLAPSE = "constant-collapse"
    CONSTANT_UNREADABLE = "constant-unreadable"
    DTYPE_CONSTANT = "dtype-constant"
    BITCAST_WIDTH = "bitcast-width"
    SHIFT_BY_WIDTH = "shift-by-width"
    WIDTH_DEPENDENT_OP = "width-dependent-op"
    IDENTITY_FOLDED = "identity-folded"
    CUSTOM_CALL = "custom-call"
    CUSTOM_CALL_RENAMED = "custom-call-renamed"
    COMPOSITE_RESTORED = "composite-restored"
    X32_LOWERING = "x32-lowering"
    UNKNOWN_OP = "unknown-op"
    UNSUPPORTED_TYPE = "unsupported-type"
    RNG_BITS = "rng-bits"
    RNG_STATE = "rng-state"
    RNG_COUNTERS = "rng-counters"
    RNG_SEED = "rng-seed"
    RNG_WORDS = "rng-words"
    RNG_FLOATS = "rng-floats"
    RNG_RANDINT = "rng-randint"
    RNG_DRAW = "rng-draw"
    LOW_WORD_MASK = "low-word-mask"
    # check's target profiles (x64guard/passes/patterns/profile.py)
    COMPLEX_TYPE = "complex-type"
    CUSTOM_CALL_UNKNOWN = "custom-call-unknown"
    # the Neuron target profiles (x64guard/passes/patterns/neuron.py): neuronx-cc's own codes,
    # and what jax-neuronx documents without one (rows of tables.NEURON_RULES)
    NCC_ESFH002 = "NCC_ESFH002"
    NCC_EVRF035 = "NCC_EVRF035"
    NCC_EVRF060 = "NCC_EVRF060"
    NCC_EVRF016 = "NCC_EVRF016"
    NCC_EVRF061 = "NCC_EVRF061"
    NCC_EVRF063 = "NCC_EVRF063"
    NCC_EVRF062 = "NCC_EVRF062"
    NCC_EVRF022 = "NCC_EVRF022"
    NCC_EVRF013 = "NCC_EVRF013"
    NCC_EVRF014 = "NCC_EVRF014"
    NCC_EVRF004 = "NCC_EVRF004"
    NCC_EVRF006 = "NCC_EVRF006"
    NCC_EHCA005 = "NCC_EHCA005"
    NCC_EUOC002 = "NCC_EUOC002"
    NCC_EMOD025 = "NCC_EMOD025"
    NCC_EVRF010 = "NCC_EVRF010"
    NCC_EVRF011 = "NCC_EVRF011"
    NCC_EVRF017 = "NCC_EVRF017"
    NCC_EVRF018 = "NCC_EVRF018"
    NCC_EVRF019 = "NCC_EVRF019"
    NEURON_COND = "neuron-cond"
    NEURON_DYNAMIC_WHILE = "neuron-dynamic-while"
    NEURON_HOST_CALLBACK = "neuron-host-callback"
    NEURON_SORT_COMPARATOR = "neuron-sort-comparator"
    NEURON_REDUCE_PRECISION = "neuron-reduce-precision"
    NEURON_VARIADIC_REDUCE = "neuron-variadic-reduce"
    NEURON_THREEFRY = "neuron-threefry"
    # the library API (x64guard/api.py)
    SERIALIZED_CHLO = "serialized-chlo"
    # the front ends (x64guard/jax/, x64guard/torch_xla/)
    INPUT_OUT_OF_RANGE = "input-out-of-range"
    CALLBACK_RESULT_OUT_OF_RANGE = "callback-result-out-of-range"
    TRACE_DIFFERS = "trace-differs"
    TRACE_NOT_LOWERED = "trace-not-lowered"
    TRACE_FAILED = "trace-failed"
    TRACE_SHARED_STATE = "trace-shared-state"
    IDENTITY_CONVERT = "identity-convert"
    TORCH_XLA_FALLBACK = "torch-xla-fallback"
    TORCH_XLA_EXECUTION = "torch-xla-execution"
    CPU_OUTPUT = "cpu-output"
    CPU_PART = "cpu-part"
    INPUT_MUTATION = "input-mutation"
    RNG_STATE_SOURCE = "rng-state-source"
    EXPORT_INPUT = "export-input"
    SYNC_64BIT_TENSOR = "sync-64bit-tensor"
    INTEGER_OVERFLOW = "integer-overflow"
    SYNC_PENDING = "sync-pending"
    OUTSIDE_GRAPH = "outside-graph"
    LAZY_READ = "lazy-read"
    WIDE_IDS = "wide-ids"
    INTERNAL = "internal"


# The Neuron kinds neuronx-cc downcasts with a warning unless --implicit-integer-downcast says
# otherwise (and EVRF035 on trn1 for int32).
_NEURON_DOWNCAST_KINDS = frozenset({"NCC_EVRF035", "NCC_EVRF060", "NCC_EVRF061", "NCC_EVRF062", "NCC_EVRF063"})

# kind -> (severities it is emitted with, who emits it, what it means). docs/design.md
# points here; tests check that every kind has a row and every emitted kind is a Kind.
KIND_TABLE: dict[Kind, tuple[str, str, str]] = {
    Kind.TYPE_NARROWED: ("info", "pass", "64-bit types of an op were narrowed (grouped per op name and place)"),
    Kind.TYPE_64BIT: ("error, info", "check, narrow(mode='error')",
                      "64-bit types reach a target that does not accept them (info on x64), or mode='error' "
                      "refuses them"),
    Kind.CONSTANT_OUT_OF_RANGE: ("error, warning", "pass",
                                 "integer constant values outside the 32-bit range, or a convert of a constant "
                                 "to a 64-bit integer type whose values its 32-bit type cannot hold (warning "
                                 "with overflow='saturate'/'wrap')"),
    Kind.CONSTANT_OVERFLOW: ("error, warning", "pass", "float64 constants beyond float32's range"),
    Kind.CONSTANT_UNDERFLOW: ("warning", "pass", "nonzero float64 constants that become 0"),
    Kind.CONSTANT_COLLAPSE: ("warning", "pass", "float64 constants that become exactly +-1.0"),
    Kind.CONSTANT_UNREADABLE: ("error", "pass", "a 64-bit constant x64guard cannot read"),
    Kind.DTYPE_CONSTANT: ("info", "pass", "a finfo(float64) value replaced by finfo(float32)'s (docs/constants.md)"),
    Kind.BITCAST_WIDTH: ("error", "pass", "a bitcast that would no longer reinterpret the same bits"),
    Kind.SHIFT_BY_WIDTH: ("error, warning, info", "pass", "a shift by 32 or more of a 64-bit integer: by 32, a "
                                                          "warning; by 33-63, refused (x32 JAX shifts a width-derived "
                                                          "amount by 32 less); arithmetic by 63, info (the same sign "
                                                          "fill)"),
    Kind.WIDTH_DEPENDENT_OP: ("info, warning", "pass", "count_leading_zeros/popcnt of a 64-bit integer: info in "
                                                       "a JAX module (x32 JAX counts 32 bits too), a warning "
                                                       "in others"),
    Kind.IDENTITY_FOLDED: ("info", "pass", "an exact identity of the x64 trace (a whole-array scatter) folded into "
                                           "its operand"),
    Kind.CUSTOM_CALL: ("error", "pass", "a custom_call with 64-bit types and no 32-bit version "
                                        "(host callback, compiled kernel, unknown target)"),
    Kind.CUSTOM_CALL_RENAMED: ("info", "pass", "a LAPACK/BLAS kernel renamed to its single-precision twin"),
    Kind.COMPOSITE_RESTORED: ("info", "pass", "a CHLO op restored from its composite"),
    Kind.X32_LOWERING: ("warning", "pass", "a float64 CHLO op whose float32 counterpart the running JAX lowers "
                                           "with its own expansion (jax 0.12's lgamma): correct to float32, not "
                                           "x32 JAX's bits"),
    Kind.UNKNOWN_OP: ("warning", "pass", "an op of an unknown dialect narrowed generically"),
    Kind.UNSUPPORTED_TYPE: ("error", "pass", "a 64-bit type x64guard cannot rebuild (quantized, vector, ...)"),
    Kind.RNG_BITS: ("error", "pass", "64-bit random bits of a source x64guard does not know"),
    Kind.RNG_STATE: ("info, error", "pass", "the RNG state kept 64-bit (info), or refused"),
    Kind.RNG_COUNTERS: ("info", "pass", "iota_2x32_shape's counters, exact in 32 bits"),
    Kind.RNG_SEED: ("info", "pass", "threefry_seed's high word"),
    Kind.RNG_WORDS: ("info", "pass", "64-bit random words drawn as x32 JAX draws them"),
    Kind.RNG_FLOATS: ("info", "pass", "float64 uniforms built as the 32-bit program builds them"),
    Kind.RNG_RANDINT: ("info", "pass", "randint's 64-bit arithmetic computed as in 32 bits"),
    Kind.RNG_DRAW: ("info", "pass", "a 64-bit rng_bit_generator draw made 32-bit from the same state"),
    Kind.LOW_WORD_MASK: ("info", "pass", "x & 0xFFFFFFFF before a 32-bit convert becomes x & -1"),
    Kind.COMPLEX_TYPE: ("error", "check", "complex values on a target without complex types"),
    Kind.CUSTOM_CALL_UNKNOWN: ("error", "check", "a custom_call target the target does not provide"),
    **{kind: ("error, warning" if kind.value in _NEURON_DOWNCAST_KINDS else "error", "check, narrow (Neuron targets)",
              f"neuronx-cc would reject it (tables.NEURON_RULES[{kind.value!r}]; docs/targets.md)")
       for kind in Kind if kind.value.startswith("NCC_")},
    **{kind: ("warning" if kind is Kind.NEURON_THREEFRY else "error", "check, narrow (Neuron targets)",
              f"a jax-neuronx limit without a code (tables.NEURON_RULES[{kind.value!r}]; docs/targets.md)")
       for kind in Kind if kind.value.startswith("neuron-")},
    Kind.SERIALIZED_CHLO: ("warning", "narrow", "a portable artifact whose CHLO ops were expanded for float64"),
    Kind.INPUT_OUT_OF_RANGE: ("error", "x64guard.jit, torch-xla", "a 64-bit input value outside the 32-bit range"),
    Kind.CALLBACK_RESULT_OUT_OF_RANGE: ("error", "x64guard.jit", "a host callback returned a value outside "
                                                                 "the 32-bit range"),
    Kind.TRACE_DIFFERS: ("error, info", "x64guard.jit", "the x64 trace is another program than the x32 trace "
                                                        "(library code that decides by jax_enable_x64 or by the "
                                                        "dtype): refused (error) or the x32 program run (info)"),
    Kind.TRACE_FAILED: ("error, info", "x64guard.jit", "the x64 trace raised (a library that mixes 64-bit and "
                                                       "32-bit values under x64) where the x32 trace does not: "
                                                       "refused (error) or the x32 program run (info)"),
    Kind.TRACE_SHARED_STATE: ("error, warning, info", "x64guard.jit", "the x32 trace reused arrays the function "
                                                                      "kept from its x64 trace (a lazily built "
                                                                      "table, a cache): compared through them "
                                                                      "(info), else the narrowed x64 program run "
                                                                      "unchecked (warning) or refused (error)"),
    Kind.TRACE_NOT_LOWERED: ("error, warning", "x64guard.jit", "JAX could not lower a trace x64guard.jit made: the "
                                                               "x64 one (the x32 program run (warning) or refused "
                                                               "(error)), or the x32 one where it was to run "
                                                               "(refused)"),
    Kind.IDENTITY_CONVERT: ("info", "x64guard.jit, narrow", "the narrowed module and x32 JAX's may differ by converts "
                                                           "to the type their operand has (weak typing the module "
                                                           "does not record, host callback operands): they compute "
                                                           "nothing"),
    Kind.TORCH_XLA_FALLBACK: ("error", "torch-xla", "the graph falls back to CPU ops"),
    Kind.TORCH_XLA_EXECUTION: ("error", "torch-xla", "tracing the graph executed part of it"),
    Kind.CPU_OUTPUT: ("error", "torch-xla", "the graph returns a tensor of another device"),
    Kind.CPU_PART: ("info, error", "torch-xla", "part of the graph computes on the CPU: run there eagerly, as PyTorch "
                                                "runs it (info); refused when it reads an XLA value (error)"),
    Kind.INPUT_MUTATION: ("error", "torch-xla", "the graph writes to an input in place"),
    Kind.RNG_STATE_SOURCE: ("error", "torch-xla", "the graph's generator state cannot be computed on the host"),
    Kind.EXPORT_INPUT: ("error", "torch-xla", "an exported program takes an input kind x64guard does not pass"),
    Kind.SYNC_64BIT_TENSOR: ("error", "torch-xla", "x64guard.torch_xla.sync would write a narrowed result into a "
                                                   "64-bit tensor in place"),
    Kind.INTEGER_OVERFLOW: ("error", "torch-xla", "int64 arithmetic of a narrowed program left int32's range at "
                                                  "run time (eager PyTorch would not wrap): refused, never wrapped"),
    Kind.SYNC_PENDING: ("warning", "torch-xla", "XLA tensors x64guard.torch_xla.sync could not run narrowed stay "
                                                "pending; torch-xla would compute them at full width"),
    Kind.OUTSIDE_GRAPH: ("warning", "torch-xla", "dynamo left 64-bit work outside the graphs it gave the backend "
                                                 "(a graph break, skipped code); torch-xla runs it unnarrowed"),
    Kind.LAZY_READ: ("warning", "torch-xla", "torch-xla compiled graphs of its own between two lazy syncs (a mid-step "
                                             "read); they ran unnarrowed"),
    Kind.WIDE_IDS: ("warning", "torch-xla", "int64 tensors to_device made (int32 device data) were computed at 64 "
                                            "bits on the device by torch-xla's own sync (torch_xla.sync())"),
    Kind.INTERNAL: ("error", "torch-xla", "x64guard could not map the graph's inputs"),
}


# ---- where a finding is ------------------------------------------------------------------

SOURCE = "source"        # a line of a file someone can open (the user's Python line JAX recorded)
CALL_SITE = "call-site"  # the op has no location: where its function is first called from
INPUT = "input"          # a line:column of the MLIR text the module was read from (no source location)
POSITION = "position"    # a function of the module, and the op's position in the pass's walk
PLACE = "place"          # somewhere outside the module's ops: "the module", an argument's path


@dataclass(frozen=True)
class Location:
    """Where a finding is. `origin` says which fields mean something:

    source     file, line, column (1-based; JAX's 0-based Python columns are counted from 1;
               None where only the line is known: torch-xla's model lines), and `note`
               (torch-xla: the model's module paths behind that line)
    call-site  file, line, column of the first call of `function` (or `input` True: an input line)
    input      line, column of the input text; `function` the op's function
    position   function, and op_index (1-based in walk order) or None for the function as a whole
    place      place (free text)
    """

    origin: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    function: str | None = None
    op_index: int | None = None
    place: str | None = None
    input: bool = False  # call-site only: the call's own location is a line of the input text
    note: str | None = None  # source only: what else is known of the line (shown in brackets)

    @classmethod
    def source(cls, file: str, line: int, column: int | None, note: str | None = None) -> "Location":
        return cls(SOURCE, file=file, line=line, column=column, note=note)

    @classmethod
    def input_line(cls, line: int, column: int, function: str | None = None) -> "Location":
        return cls(INPUT, line=line, column=column, function=function)

    @classmethod
    def position(cls, function: str | None, op_index: int | None = None) -> "Location":
        return cls(POSITION, function=function, op_index=op_index)

    @classmethod
    def at(cls, place: str) -> "Location":
        return cls(PLACE, place=place)

    def called_from(self, function: str) -> "Location":
        """An op of `function` without a location of its own, placed at this call of it."""
        if self.origin in (SOURCE, CALL_SITE):
            return Location(CALL_SITE, file=self.file, line=self.line, column=self.column, function=function)
        return Location(CALL_SITE, line=self.line, column=self.column, function=function, input=True)

    @property
    def has_file(self) -> bool:
        """A file and line someone can open (the module's own input lines aside)."""
        return self.origin in (SOURCE, CALL_SITE) and not self.input and self.file is not None

    @property
    def input_position(self) -> bool:
        """A line of the input text (own or of a call site)."""
        return self.origin == INPUT or (self.origin == CALL_SITE and self.input)

    def __str__(self) -> str:
        origin = self.origin
        if origin == SOURCE:
            where = f"{self.file}:{self.line}" + (f":{self.column}" if self.column is not None else "")
            return where + (f" [{self.note}]" if self.note else "")
        if origin == CALL_SITE:
            where = (f"line {self.line}:{self.column} of the input" if self.input
                     else f"{self.file}:{self.line}:{self.column}")
            return f"{where} (in @{self.function})"
        if origin == INPUT:
            return f"line {self.line}:{self.column} of the input"
        if origin == POSITION:
            inside = f"@{self.function}" if self.function else "the module"
            return inside if self.op_index is None else f"{inside} op #{self.op_index}"
        return self.place or "?"

    def to_dict(self) -> dict:
        out = {"origin": self.origin}
        for name in ("file", "line", "column", "function", "op_index", "place", "note"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.input:
            out["input"] = True
        return out


# ---- findings ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    """One thing the pass saw, grouped: never one per element.

    `kind` is a `Kind`; `location` where it is (the first place, for a group); `count` how
    many ops (for `type-narrowed`: how many types) it stands for. Ops with a source location
    are grouped per op and location; ops without one (modules lowered without debug info,
    ops with an unknown location) per op and function, with `positions` holding where
    they are: the first few, or every one when asked (`x64guard.check(..., all_positions=True)`).
    `positions` is empty when `location` stands for every op of the finding.
    `kind` must be a `Kind` member (TypeError otherwise); strings given for severity or
    location are converted (a location string is a place).
    """

    kind: Kind
    severity: Severity
    op: str
    location: Location
    message: str
    count: int = 1
    positions: tuple[Location, ...] = ()
    unlisted_positions: int = 0  # places of this finding's ops not in `positions` (only the first were asked for)

    def __post_init__(self) -> None:
        if not isinstance(self.kind, Kind):  # a string would let a kind outside the table through
            raise TypeError(f"x64guard: a Finding's kind is a x64guard.findings.Kind member, not {self.kind!r}")
        if not isinstance(self.severity, Severity):
            object.__setattr__(self, "severity", Severity(self.severity))
        if not isinstance(self.location, Location):
            object.__setattr__(self, "location", Location.at(str(self.location)))

    def __str__(self) -> str:
        times = f" (x{self.count})" if self.count > 1 else ""
        return f"{self.location}: {self.severity}: {self.op}{times}: {self.message} [{self.kind}]"

    def to_dict(self) -> dict:
        data = {"kind": str(self.kind), "severity": str(self.severity), "op": self.op,
                "location": str(self.location), "message": self.message, "count": self.count}
        if self.positions:
            data["positions"] = [str(p) for p in self.positions]
            data["unlisted_positions"] = self.unlisted_positions
        return data


def count_places(findings) -> int:
    """How many places `findings` are at: distinct source lines (file:line:column), or, for
    ops without a source location, distinct op positions in the module (a group's
    `positions` and `unlisted_positions`). One meaning wherever x64guard says "places"."""
    places: set[Location] = set()
    unlisted = 0
    for finding in findings:
        places.update(finding.positions or (finding.location,))
        unlisted += finding.unlisted_positions
    return len(places) + unlisted


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.ERROR]


def format_findings(findings: list[Finding], limit: int = 50) -> str:
    lines = [f"  {f}" for f in findings[:limit]]
    if len(findings) > limit:
        lines.append(f"  ... and {len(findings) - limit} more")
    return "\n".join(lines)


@dataclass
class Report:
    """What `x64guard.check` found: no rewrite, every 64-bit use and every blocker."""

    target: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing would reach the target in a form it does not accept."""
        return not errors(self.findings)

    def counts_by_kind(self) -> dict[str, int]:
        counter: Counter[str] = Counter()
        for f in self.findings:
            counter[f.kind] += f.count
        return dict(counter)

    def __str__(self) -> str:
        head = f"x64guard check --target {self.target}: " + ("ok" if self.ok else "not ok")
        return head + ("\n" + format_findings(self.findings) if self.findings else "")

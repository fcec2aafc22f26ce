"""A small pattern-rewrite driver in the style of xDSL: one `RewritePattern` per op kind,
a `Rewriter` that carries the shared state (type converter, findings, deferred erasures).

MLIR's Python bindings offer no greedy driver for Python patterns, so the driver is a
single pre-order walk: a parent's region arguments are converted before its body is
visited, and every value is defined before it is used in the same block.
"""

from __future__ import annotations

import abc
from collections import Counter, defaultdict
from typing import Callable, Iterable

from jax.extend.mlir import ir

from x64guard.findings import Finding, Severity
from x64guard.passes.locations import LocationNames
from x64guard.passes.tables import DEFAULT_TARGET, TARGET_PROFILES, TargetProfile
from x64guard.passes.types import TypeConverter


# What `match_and_rewrite` returns when the op must keep its types: the generic type
# conversion is skipped too (the RNG state, which a target profile keeps 64-bit).
KEEP_TYPES = "keep-types"


class RewritePattern(abc.ABC):
    """Rewrites the ops named in `op_names`. One job per pattern.

    `match_and_rewrite` returns True when it has dealt with the op completely: later
    named patterns for that op are skipped (the generic type conversion still runs;
    `KEEP_TYPES` skips that too).
    Patterns see operands already narrowed (the walk is pre-order) and results not yet;
    `rewriter.result_types` holds the op's result types, fetched once per op.
    """

    op_names: frozenset[str] = frozenset()

    @abc.abstractmethod
    def match_and_rewrite(self, op: ir.Operation, rewriter: "Rewriter") -> bool:
        """Rewrite `op` (or only report); True when no later named pattern should run."""


class Rewriter:
    """State shared by the patterns during one application of a pass."""

    def __init__(self, context: ir.Context, *, overflow: str, dry_run: bool = False,
                 profile: "TargetProfile | None" = None):
        self.context = context
        self.profile = profile or TARGET_PROFILES[DEFAULT_TARGET]
        self.converter = TypeConverter(context)
        self.overflow = overflow
        # In a dry run (mode allow, `check`) patterns report but leave the module alone.
        self.dry_run = dry_run
        self._locations = LocationNames()
        self._findings: Counter[tuple] = Counter()
        # (op name, location attribute, function, old type(s)) -> count: the raw material of
        # the grouped type-narrowed findings and of `changes`, resolved once at the end.
        self.narrowed_log: dict[tuple, int] = {}
        self._forwarded: list[ir.Operation] = []
        # (composite, op that replaces it), swapped after the walk.
        self._replaced: list[tuple[ir.Operation, ir.Operation]] = []
        # Decomposition functions of restored composites: not narrowed, erased after the
        # walk (with any finding made inside them, should one precede its composite).
        self.dropped_functions: set[str] = set()
        # Narrowed splat constants, per (attribute, narrowed type).
        self.splat_cache: dict[tuple, ir.Attribute] = {}
        self.function = "?"
        self.result_types: list[ir.Type] = []
        # Callee -> where it is first called from: the location of ops in functions that
        # carry none of their own.
        self.call_sites: dict[str, str] = {}
        self.op_index = 0
        # Values this walk has narrowed (results, block arguments), keyed by the value's hash
        # (its MLIR identity; nothing is erased during the walk), with their type before:
        # patterns see operands already narrowed, and some must judge what they were
        # (a custom_call whose only 64-bit types are its operands).
        self.types_before: dict[int, ir.Type] = {}
        # Set by the idiom phase (passes/idioms.py), read by the narrowing walk: ops whose
        # types stay as they are (the RNG state a profile keeps), ops no named pattern needs
        # to look at (their idiom is already reported), and the per-run state of the idioms.
        self.kept_ops: set[ir.Operation] = set()
        self.claimed_ops: set[ir.Operation] = set()
        self.idioms = None

    def type_before(self, value: ir.Value) -> ir.Type:
        """`value`'s type before this walk narrowed it (its type now if it did not)."""
        if self.types_before:
            before = self.types_before.get(hash(value))
            if before is not None:
                return before
        return value.type

    # --- where -----------------------------------------------------------------
    def where(self, op: ir.Operation) -> str:
        """file:line:col of `op`; for an op without one (JAX's library code in a private
        function), the first call site of its function; else its position."""
        file_loc, _ = self._locations.resolve(op.location)
        return file_loc or self._function_site(self.function) or f"@{self.function} op #{self.op_index}"

    def record_call(self, op: ir.Operation) -> None:
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        if callee not in self.call_sites:
            site = self._locations.resolve(op.location)[0] or self.call_sites.get(self.function)
            if site:
                self.call_sites[callee] = site

    def _function_site(self, function: str) -> str | None:
        site = self.call_sites.get(function)
        return f"{site} (in @{function})" if site else None

    def jax_name(self, op: ir.Operation) -> str | None:
        return self._locations.resolve(op.location)[1]

    # --- findings --------------------------------------------------------------
    def report(self, kind: str, severity: Severity, op: ir.Operation, message: str,
               op_name: str | None = None) -> None:
        self._findings[(kind, severity, op_name or op.name, self.where(op), message, self.function)] += 1

    def record_narrowed(self, op: ir.Operation, name: str, old_types: list[ir.Type]) -> None:
        """`op` changed these types (results, block arguments, type attributes)."""
        # Keyed by the location's attribute: Location objects hash by identity.
        key = (name, op.location.attr, self.function, old_types[0] if len(old_types) == 1 else tuple(old_types))
        self.narrowed_log[key] = self.narrowed_log.get(key, 0) + 1

    def changes(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (_, _, _, olds), n in self.narrowed_log.items():
            for old in olds if isinstance(olds, tuple) else (olds,):
                out[self.converter.change_key(old)] += n
        return dict(out)

    def findings(self) -> list[Finding]:
        dropped = self.dropped_functions
        out = [Finding(kind, sev, name, where, msg, count)
               for (kind, sev, name, where, msg, function), count in self._findings.items() if function not in dropped]
        grouped: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for (name, location, function, olds), n in self.narrowed_log.items():
            if function in dropped:
                continue
            where = (self._locations.resolve_attr(location)[0]
                     or self._function_site(function) or f"@{function}")
            for old in olds if isinstance(olds, tuple) else (olds,):
                grouped[(name, where)][self.converter.change_key(old)] += n
        for (name, where), keys in grouped.items():
            summary = ", ".join(f"{k}" + (f" x{n}" if n > 1 else "") for k, n in sorted(keys.items()))
            out.append(Finding("type-narrowed", Severity.INFO, name, where,
                               f"narrowed {summary}", sum(keys.values())))
        return out

    # --- mutations -------------------------------------------------------------
    def forward_operand(self, op: ir.Operation) -> None:
        """After the walk, replace `op`'s single result by its first operand and erase it."""
        self._forwarded.append(op)

    def replace_op(self, op: ir.Operation, replacement: ir.Operation) -> None:
        """After the walk, `replacement`'s results take over `op`'s uses; `op` is erased."""
        self._replaced.append((op, replacement))

    def finish(self, module: ir.Module) -> None:
        # The operand is read only now, in walk order: when `op` forwards the result of
        # an op forwarded before it (convert(convert(x))), its operand already is `x`.
        # Holding the Value from walk time would dangle once its producer is erased.
        for op in self._forwarded:
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
        self._forwarded.clear()
        for op, replacement in self._replaced:
            for old, new in zip(op.results, replacement.results):
                old.replace_all_uses_with(new)
            op.erase()
        self._replaced.clear()
        if self.dropped_functions:
            for op in list(module.body.operations):
                attrs = op.operation.attributes
                if op.operation.name == "func.func" and ir.StringAttr(attrs["sym_name"]).value in self.dropped_functions:
                    op.operation.erase()


def walk(module: ir.Module, visit: Callable[[ir.Operation], object]) -> None:
    """Pre-order walk that lets Python exceptions through unchanged.

    `visit` must return `ir.WalkResult.ADVANCE`; the bindings would wrap an exception
    raised inside it in a RuntimeError, so `guarded` keeps it and `walk` re-raises it.
    """
    failure: list[BaseException] = []

    def guarded(op: ir.Operation) -> ir.WalkResult:
        try:
            return visit(op)
        except BaseException as exc:  # re-raised below, with its own type and traceback
            failure.append(exc)
            return ir.WalkResult.INTERRUPT

    module.operation.walk(guarded, ir.WalkOrder.PRE_ORDER)
    if failure:
        raise failure[0]


def index_patterns(patterns: Iterable[RewritePattern]) -> dict[str, list[RewritePattern]]:
    table: dict[str, list[RewritePattern]] = defaultdict(list)
    for pattern in patterns:
        for name in pattern.op_names:
            table[name].append(pattern)
    return dict(table)

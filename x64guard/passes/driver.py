"""The driver: rewrite patterns, the context each one is handed, and the one walk.

In the style of xDSL (a `RewritePattern` per op kind) and of JAX's lowering (each rule is
handed a `LoweringRuleContext`; here an `OpContext`: the op's name and result types, its
function and position, and the run's converter, findings store and rewriter). Patterns
report through the context and mutate only through `ctx.rewriter`, which is a recording
twin in `mode='allow'` and `check`: no pattern knows which kind of run it is in.

The module is walked once (`collect`: pre-order) and both phases read that list. In
pre-order a parent's region arguments are converted before its body is visited, and every
value is defined before it is used in the same block, so patterns see their operands
already narrowed (and `ctx.type_before` what they were). jaxlib's
`rewrite.walk_and_apply_patterns` takes Python callables too, but only per op name and
in post-order, and measured no faster than this walk when every op needs a look; the
bindings' `walk(op_class=...)` filter costs more than an unfiltered walk (docs/design.md,
"Measured").
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.modes import Overflow
from x64guard.passes.rewriter import Rewriter
from x64guard.passes.store import FindingsStore
from x64guard.passes.tables import TargetProfile
from x64guard.passes.types import TypeConverter

class Outcome(enum.Enum):
    """What `match_and_rewrite` returns."""

    NO_MATCH = enum.auto()    # the pattern did not deal with the op: the op's next named pattern runs
    REWROTE = enum.auto()     # it dealt with the op: later named patterns for the op do not run (any-op ones do)
    KEEP_TYPES = enum.auto()  # as REWROTE, and the op keeps its types: the type conversion is skipped too
                              # (the RNG state, which a target profile keeps 64-bit)


class RewritePattern(abc.ABC):
    """Rewrites (or reports on) the ops named in `op_names`. One job per pattern.

    A pattern with no `op_names` applies to every op, after the named ones (the generic
    type conversion); `converts_types` says whether `Outcome.KEEP_TYPES` skips it.
    """

    op_names: frozenset[str] = frozenset()
    converts_types: bool = False

    @abc.abstractmethod
    def match_and_rewrite(self, op: ir.Operation, ctx: "OpContext") -> Outcome:
        """Rewrite `op` through `ctx.rewriter` (or only report through `ctx.report`)."""


@dataclass(eq=False)
class PassRun:
    """What one application of the pass shares between its patterns."""

    context: ir.Context
    converter: TypeConverter
    store: FindingsStore
    rewriter: Rewriter
    profile: TargetProfile
    overflow: Overflow
    # The module was lowered by JAX (`module @jit_...`): its x32 counterpart is x32 JAX's trace.
    jax_origin: bool = False
    # finfo(float64) values replaced by float32's (NarrowX64Pass's `dtype_constants`).
    dtype_constants: bool = True
    # CHLO op name -> does x32 JAX lower its float32 counterpart otherwise (NarrowX64Pass's
    # `x32_expanded`; tables.X32_EXPANDED_CHLO).
    x32_expanded: Callable[[str], bool] = lambda name: False
    # Set by the idiom phase (passes/idioms.py), read by the narrowing walk: ops whose
    # types stay as they are (the RNG state a profile keeps), ops no named pattern needs
    # to look at (their idiom is already reported), and the per-run state of the idioms.
    kept_ops: set = field(default_factory=set)
    claimed_ops: set = field(default_factory=set)
    idioms: object = None
    # Per-run caches of the patterns: a constant's attribute -> its exact narrowed splat
    # (None: not one); what the generic rule learned about each op name.
    splat_cache: dict = field(default_factory=dict)
    # Called computations renamed after their narrowed element type: old name -> new name.
    renamed_computations: dict = field(default_factory=dict)
    op_info: dict = field(default_factory=dict)
    function: str = "?"
    op_index: int = 0


class OpContext:
    """What a pattern is handed for one op. The narrowing phase points one context at each
    op in turn (building one per op costs more than most rules): a pattern uses it while
    it deals with its op and keeps no reference to it."""

    __slots__ = ("op", "name", "result_types", "function", "op_index", "run")

    def __init__(self, op: ir.Operation, name: str, result_types: Sequence[ir.Type], run: PassRun):
        self.op = op
        self.name = name
        self.result_types = result_types
        self.function = run.function
        self.op_index = run.op_index
        self.run = run

    @property
    def converter(self) -> TypeConverter:
        return self.run.converter

    @property
    def rewriter(self) -> Rewriter:
        return self.run.rewriter

    @property
    def profile(self) -> TargetProfile:
        return self.run.profile

    @property
    def overflow(self) -> Overflow:
        return self.run.overflow

    @property
    def idioms(self):
        return self.run.idioms

    def narrowed(self, t: ir.Type) -> ir.Type:
        """`t` as it is after narrowing (operands already are, in a rewriting walk)."""
        return self.run.converter.convert(t) or t

    def type_before(self, value: ir.Value) -> ir.Type:
        return self.run.rewriter.type_before(value)

    def with_result_types(self, result_types: Sequence[ir.Type]) -> "OpContext":
        """The same op seen with other result types (a rule that narrows an attribute as
        a constant of another type would)."""
        other = OpContext(self.op, self.name, result_types, self.run)
        other.function, other.op_index = self.function, self.op_index
        return other

    def report(self, kind: Kind, severity: Severity, message: str, *, at: ir.Operation | None = None,
               op_name: str | None = None, function: str | None = None) -> None:
        """A finding at this op (or at `at`, another op the rule found, in `function` if it
        is not this op's)."""
        where = (at or self.op).location
        self.run.store.report(kind, severity, op_name or (at.name if at is not None else self.name), where,
                              function or self.function, self.op_index, message)

    def drop_function(self, name: str) -> None:
        """The module's function `name` is not walked, its findings are dropped, and a
        rewriting run erases it after the walk."""
        self.run.store.dropped_functions.add(name)
        self.run.rewriter.erase_function(name)


def index_patterns(patterns: Iterable[RewritePattern]) -> tuple[dict[str, tuple[RewritePattern, ...]],
                                                                 tuple[RewritePattern, ...]]:
    """(op name -> its patterns in order, the any-op patterns in order)."""
    named: dict[str, list[RewritePattern]] = {}
    any_op: list[RewritePattern] = []
    for pattern in patterns:
        if not pattern.op_names:
            any_op.append(pattern)
        for name in pattern.op_names:
            named.setdefault(name, []).append(pattern)
    return {name: tuple(found) for name, found in named.items()}, tuple(any_op)


@dataclass(eq=False)
class WalkedOps:
    """A module's ops in walk order (pre-order), each with its name and the function it is
    in (the last `func.func` the walk entered), read once by `collect`: the idiom phase
    looks for its anchors in `names`, and the narrowing phase iterates the lists instead of
    walking again (a walk costs more than the work on most ops). Valid while no op of the
    module is erased or inserted: a phase that changes the module's ops collects again."""

    ops: list
    names: list
    functions: list

    def calls(self) -> Iterator[tuple[str, ir.Location, str]]:
        """(callee, location, calling function) of every func.call, in walk order."""
        for op, name, function in zip(self.ops, self.names, self.functions):
            if name == "func.call":
                yield op.attributes["callee"].value, op.location, function


def collect(module: ir.Module) -> WalkedOps:
    """The one walk of the bindings that a pass application needs (two when the idiom
    phase rewrote something)."""
    ops: list[ir.Operation] = []
    names: list[str] = []
    functions: list[str] = []
    add_op, add_name, add_function = ops.append, names.append, functions.append
    function = "?"
    advance = ir.WalkResult.ADVANCE

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal function
        name = op.name
        if name == "func.func":
            function = ir.StringAttr(op.attributes["sym_name"]).value
        add_op(op)
        add_name(name)
        add_function(function)
        return advance

    walk(module.operation, visit)
    return WalkedOps(ops, names, functions)


def apply_patterns(walked: WalkedOps, run: PassRun, patterns: Sequence[RewritePattern],
                   check_op: Callable[[ir.Operation, str, str], None] | None = None) -> None:
    """The narrowing phase (narrow and check alike), over the ops in walk order: per op,
    its named patterns, the first that deals with it ending them, then the any-op patterns,
    then `check_op` (the legality check of a rewriting run: passes/legality.py).

    Patterns change the op they are handed and defer erasures to `Rewriter.finish`, so
    every op collected stays valid; ops of a function a pattern drops are not looked at."""
    named, any_op = index_patterns(patterns)
    NO_MATCH, KEEP_TYPES = Outcome.NO_MATCH, Outcome.KEEP_TYPES  # locals: read once per op
    kept, claimed = run.kept_ops, run.claimed_ops
    reporting = tuple(p for p in any_op if not p.converts_types)  # profile rules (check): they only report
    dropped = run.store.dropped_functions
    ctx = OpContext(None, "", (), run)  # one context, pointed at each op in turn
    index = 0
    for op, name, function in zip(walked.ops, walked.names, walked.functions):
        index += 1
        if dropped and function in dropped and name != "builtin.module":
            continue  # a restored composite's decomposition: erased after the walk
        ctx.op, ctx.name, ctx.result_types, ctx.function, ctx.op_index = op, name, op.results.types, function, index
        if kept and op in kept:  # the RNG state: its types stay; only the reporting rules look at it
            for pattern in reporting:
                pattern.match_and_rewrite(op, ctx)
            continue
        keep_types = False
        candidates = named.get(name)
        if candidates is not None and not (claimed and op in claimed):
            for pattern in candidates:
                outcome = pattern.match_and_rewrite(op, ctx)
                if outcome is not NO_MATCH:
                    keep_types = outcome is KEEP_TYPES
                    break
        for pattern in any_op:
            if not (keep_types and pattern.converts_types):
                pattern.match_and_rewrite(op, ctx)
        if check_op is not None:
            check_op(op, name, function)


def walk(root: ir.Operation, visit: Callable[[ir.Operation], ir.WalkResult]) -> None:
    """Pre-order walk that lets Python exceptions through unchanged (the bindings would
    wrap one raised inside the callback in a RuntimeError)."""
    failure: list[BaseException] = []

    def guarded(op: ir.Operation) -> ir.WalkResult:
        try:
            return visit(op)
        except BaseException as exc:  # re-raised below, with its own type and traceback
            failure.append(exc)
            return ir.WalkResult.INTERRUPT

    root.walk(guarded, ir.WalkOrder.PRE_ORDER)
    if failure:
        raise failure[0]

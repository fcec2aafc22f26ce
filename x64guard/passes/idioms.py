"""Phase 1 of the pass: 64-bit idioms whose 32-bit meaning is not their narrowed types.

JAX's x64 random numbers are the main case: `(hi << 32) | lo` words, floats made by
or-ing mantissa bits into the bits of 1.0, randint's `2**32 % span` multiplier. Narrowed
type by type they become garbage; JAX's x32 program draws the same counters through the
same kernel and builds its numbers with other constants (`hi ^ lo`, `>> 9 | 0x3F800000`,
`2**16 % span`). Each rule here is a `RewritePattern` anchored at the op that ends its
idiom (the use-def chain is walked backwards from there) that rewrites the still-64-bit
module in place into the form x32 JAX traces, bridged by converts the narrowing walk then
removes. Rules run one after another over the whole module, so a rule sees what earlier
rules made (floats are built from the words the word rule produced).

The phase also decides what keeps its 64-bit type (the RNG state, per target profile):
`PassRun.kept_ops`, which the narrowing walk leaves alone.

The rules use the narrowing walk's machinery: each is a `RewritePattern` handed an
`OpContext`, mutating only through `ctx.rewriter`. A recording run (`check`, mode allow)
must not change its module, yet its walk must read what a rewriting run's walk reads:
when any rule could apply, the phase rewrites an explicit scratch copy
(`RecordingRewriter.scratch_copy`) with a rewriting `Rewriter`, and the recording walk
reads that copy (tests/passes/test_driver.py checks both halves).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Sequence

from jax.extend.mlir import ir

from x64guard.passes.driver import OpContext, PassRun, RewritePattern, WalkedOps, collect
from x64guard.passes.matching import splat, splat_chain, splat_value, users
from x64guard.passes.rewriter import Rewriter

# Ops an idiom rule may leave without uses and that the phase may then erase: side-effect
# free, so an unused one changes nothing. (func.call is erased only when a rule says so.)
_PURE_OPS = frozenset({
    "stablehlo.constant", "stablehlo.broadcast_in_dim", "stablehlo.convert", "stablehlo.bitcast_convert",
    "stablehlo.shift_left", "stablehlo.shift_right_logical", "stablehlo.or", "stablehlo.xor",
    "stablehlo.and", "stablehlo.slice", "stablehlo.concatenate", "stablehlo.reshape", "stablehlo.iota",
    "stablehlo.dynamic_broadcast_in_dim",
    "stablehlo.multiply", "stablehlo.add", "stablehlo.remainder", "stablehlo.select", "stablehlo.compare",
})


class IdiomPattern(RewritePattern):
    """A rule of the idiom phase."""

    # Element types of the anchor's first result the rule can match (None: any): a cheap
    # filter for the walk that collects anchors.
    result_elements: frozenset[str] | None = None
    # True for rules that only rewrite what earlier rules made (floats from their words):
    # such anchors alone never make a recording run copy its module.
    follows_earlier_rules: bool = False

    def may_match(self, op: ir.Operation, run: PassRun) -> bool:
        """A cheap look at an anchor before the phase starts (no anchor a rule may match:
        a recording run copies nothing). True unless the rule says otherwise."""
        return True

    @staticmethod
    def replace_constants(ctx: OpContext, uses: Sequence[tuple[ir.Operation, ir.Value]], element: str,
                          number_for: Callable[[object], object]) -> None:
        """Give each (user op, splat constant operand) of `uses` the constant
        `number_for(old number)`, built as the old one was (the scalar constant and the ops
        that broadcast it, static or dynamic, cloned around the new number): one for all
        uses of a value when the idiom is all that uses it (as x32 JAX traces it), else one
        per user."""
        by_value: dict[ir.Value, list[ir.Operation]] = {}
        for user, value in dict.fromkeys(uses):
            by_value.setdefault(value, []).append(user)
        for value, idiom_users in by_value.items():
            chain = splat_chain(value)
            number = number_for(splat_value(value))
            if set(users(value)) <= set(idiom_users):
                ctx.rewriter.replace_all_uses(value, _rebuilt(ctx, chain, element, number))
                ctx.idioms.maybe_dead.extend(chain)
            else:
                for user in idiom_users:
                    ctx.rewriter.replace_uses_in(user, value, _rebuilt(ctx, chain, element, number))

    @staticmethod
    def replace_root(ctx: OpContext, op: ir.Operation, value: ir.Value) -> None:
        """Every use of `op`'s result becomes `value`; `op` is erased after the phase if
        nothing uses it any more."""
        ctx.rewriter.replace_all_uses(op.results[0], value)
        ctx.idioms.maybe_dead.append(op)


@dataclass
class IdiomState:
    """What one application of the phase knows; lives on `PassRun.idioms`."""

    module: ir.Operation | None = None
    # name -> func.func, for rules that look into a callee (is it the threefry kernel?).
    functions: dict[str, ir.Operation] = field(default_factory=dict)
    # Facts about callees, computed once per name (see patterns/random_bits.py).
    callee_facts: dict[tuple[str, str], bool] = field(default_factory=dict)
    # A 64-bit random word (a value of the x64 program) -> the 32-bit word x32 JAX draws
    # in its place. Words come from the rules that recognized their source.
    random_words: dict[ir.Value, ir.Value] = field(default_factory=dict)
    # Ops a rule replaced or bypassed: erased after the phase if nothing uses them.
    maybe_dead: list[ir.Operation] = field(default_factory=list)
    # func.call ops a rule bypassed (pure kernel calls): erasable like the ops above.
    dead_calls: set[ir.Operation] = field(default_factory=set)
    # Public function name -> (argument numbers, result numbers) that keep a 64-bit type
    # (the RNG seed or state; patterns/rng_state.py).
    kept_signatures: dict[str, tuple[frozenset, frozenset]] = field(default_factory=dict)
    state_decided: bool = False  # KeepRngState has run (it decides for every generator at once)
    # (op, enclosing function, walk position) of every op a rule of the phase is anchored at,
    # in walk order, from the module's one walk (a rule that needs all of them reads this).
    anchored: list[tuple[ir.Operation, str, int]] = field(default_factory=list)
    # Ops a spelling rule replaced (patterns/spellings.py): erased after the phase when
    # nothing uses them, not counted as changes (the module says the same thing).
    spelled_away: list[ir.Operation] = field(default_factory=list)


class IdiomPhase:
    """Applies the idiom rules, in order, to every op they anchor at."""

    def __init__(self, patterns: Sequence[IdiomPattern]):
        self._patterns = tuple(patterns)
        self._by_anchor: dict[str, list[IdiomPattern]] = {}
        for pattern in self._patterns:
            for name in pattern.op_names:
                self._by_anchor.setdefault(name, []).append(pattern)

    def apply(self, module: ir.Module, run: PassRun, walked: WalkedOps) -> tuple[ir.Module, WalkedOps]:
        """Rewrite the idioms of `module` (whose ops `walked` lists), or of a scratch copy in
        a recording run; returns the module the narrowing phase must read, and its ops."""
        found, independent = self._anchored_ops(walked, run)
        if not independent:
            return module, walked  # nothing a rule could start from: the module is as it was
        phase = run
        if not run.rewriter.mutates:
            module = run.rewriter.scratch_copy(module)
            found, _ = self._anchored_ops(collect(module), run)
            # The same run (findings, kept ops, idiom state), rewriting the copy.
            phase = dataclasses.replace(run, rewriter=Rewriter())
        run.idioms = phase.idioms = state = IdiomState(module=module.operation, functions=_functions(module),
                                                       anchored=found)
        with module.context, ir.Location.unknown(module.context):
            for pattern in self._patterns:
                for op, function, index in found:
                    if op.name in pattern.op_names:
                        phase.function, phase.op_index = function, index
                        pattern.match_and_rewrite(op, OpContext(op, op.name, op.results.types, phase))
            _erase_spelled_away(state, phase.rewriter)
            _erase_dead(state, phase.rewriter, run)
        return module, collect(module)  # ops were inserted and erased: collected afresh

    def _anchored_ops(self, walked: WalkedOps, run: PassRun) -> tuple[list[tuple[ir.Operation, str, int]], bool]:
        """(op, enclosing function, walk position) for every op some rule may match, in
        walk order, and whether any rule that needs no earlier rewrite may match."""
        by_anchor = self._by_anchor
        element = run.converter.element_spelling
        found: list[tuple[ir.Operation, str, int]] = []
        independent = False
        for index, name in enumerate(walked.names):
            patterns = by_anchor.get(name)
            if patterns is None:
                continue
            op = walked.ops[index]
            spelling = element(op.results[0].type) if len(op.results) else None
            wanted = [p for p in patterns if (p.result_elements is None or spelling in p.result_elements)
                      and p.may_match(op, run)]
            if wanted:
                found.append((op, walked.functions[index], index + 1))
                independent = independent or any(not p.follows_earlier_rules for p in wanted)
        return found, independent


def _rebuilt(ctx: OpContext, chain: list[ir.Operation], element: str, number) -> ir.Value:
    """`chain` (a constant, then the ops that broadcast or reshape it) built again around
    `number`, just before the chain's last op (so every shape operand it reads dominates)."""
    root, carriers = chain[0], chain[1:]
    with ctx.rewriter.insert_before(chain[-1]):
        new = splat(root.results[0].type, element, number)
        for op in carriers:
            attributes = {name: op.attributes[name] for name in op.attributes}
            new = ctx.rewriter.create_op(op.name, [op.results[0].type], [new, *list(op.operands)[1:]],
                                         attributes).results[0]
    return new


def _functions(module: ir.Module) -> dict[str, ir.Operation]:
    out = {}
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and "sym_name" in op.attributes:
            out[ir.StringAttr(op.attributes["sym_name"]).value] = op
    return out


def _erase_spelled_away(state: IdiomState, rewriter: Rewriter) -> None:
    """Erase the ops spelling rules replaced, if unused (before `_erase_dead`, which must
    not meet them: an erased op cannot even be hashed)."""
    unused = [op for op in dict.fromkeys(state.spelled_away)
              if not any(True for result in op.results for _ in result.uses)]
    if unused:
        gone = set(unused)
        state.maybe_dead = [op for op in state.maybe_dead if op not in gone]
        for op in unused:
            rewriter.erase(op)


def _erase_dead(state: IdiomState, rewriter: Rewriter, run: PassRun) -> None:
    """Erase the ops rules left without uses, then whatever only they used. Their 64-bit
    results are changes of the module like any narrowed type (`PassResult.changes`: a
    module whose ui64 counters a rule rewrote has changed), counted before each erasure.

    First decide (every op still alive: Python objects of one op hash alike), then erase
    users before producers. An erased op's Python objects are invalid, even for hashing,
    so none is touched again."""
    def erasable(op: ir.Operation) -> bool:
        return op.name in _PURE_OPS or op in state.dead_calls

    def only_used_by(op: ir.Operation, dead: set) -> bool:
        return all(_owner(use) in dead for result in op.results for use in result.uses)

    dead: set[ir.Operation] = set()
    worklist = [op for op in state.maybe_dead if op is not None]
    while worklist:
        op = worklist.pop()
        if op in dead or not erasable(op) or not only_used_by(op, dead):
            continue
        dead.add(op)
        worklist.extend(v.owner.operation for v in op.operands if not isinstance(v.owner, ir.Block))
    while dead:
        ready = [op for op in dead if not any(True for result in op.results for _ in result.uses)]
        if not ready:
            return  # cannot happen in SSA form; leave the rest to the narrowing walk
        for op in ready:
            dead.discard(op)
            run.store.record_idiom_change(op.results.types)
            rewriter.erase(op)


def _owner(use) -> ir.Operation:
    owner = use.owner
    return owner.operation if hasattr(owner, "operation") else owner

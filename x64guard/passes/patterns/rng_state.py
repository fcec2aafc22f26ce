"""The state of XLA's RngBitGenerator: 64-bit words by definition (u64[2] or u64[3]).

JAX's own 32-bit programs bitcast their uint32[4] rbg keys to that state for every
`rbg`/`unsafe_rbg` draw; torch-xla builds it from its int64 seed (`seed * 214013 +
2531011`, an LCG in int64) for every draw. A 32-bit state would be another generator, so
the target profile decides (`TargetProfile.rng_state`):

* keep: the state and the arithmetic that builds it (back to the uint32 key or to the
  int64 seed parameter) stay 64-bit; the draws then give exactly what the 32-bit programs
  draw from the same state. Ops that only read the state into 32-bit values (JAX's
  bitcast back to uint32[4]) stay as they are; any other use of a state value gets a
  convert to its narrowed type (the value narrowing would have computed).
* refuse: every draw from such a state is an `rng-state` error.

`KeepRngState` (a rule of the idiom phase, anchored at the first generator) decides for all
generators at once, since draws can share their seed arithmetic; `KeepStateSignature`
(a rule of the narrowing walk) keeps the 64-bit seed parameters and state results of
public functions in their signature.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome, RewritePattern
from x64guard.passes.idioms import IdiomPattern
from x64guard.passes.ir_queries import is_wide
from x64guard.passes.tables import RNG_STATE_REFUSE

# Ops the state and its seed are built from (JAX: bitcast, reshape; torch-xla: the LCG's
# multiply and add, convert, reshape, concatenate with a constant).
_STATE_OPS = frozenset({
    "stablehlo.constant", "stablehlo.convert", "stablehlo.bitcast_convert", "stablehlo.reshape",
    "stablehlo.broadcast_in_dim", "stablehlo.concatenate", "stablehlo.slice", "stablehlo.multiply",
    "stablehlo.add",
})


def _users(value: ir.Value) -> list[ir.Operation]:
    return [use.owner.operation if hasattr(use.owner, "operation") else use.owner for use in value.uses]


@dataclass
class _Chain:
    ops: set = field(default_factory=set)                # 64-bit ops that stay 64-bit
    arguments: dict = field(default_factory=dict)         # function name -> kept argument numbers
    problem: tuple[ir.Operation | None, str] | None = None


def _function_of(block: ir.Block) -> ir.Operation | None:
    owner = block.owner
    return owner.operation if owner is not None and owner.operation.name == "func.func" else None


def _is_public(function: ir.Operation) -> bool:
    if "sym_visibility" not in function.attributes:
        return True
    return ir.StringAttr(function.attributes["sym_visibility"]).value == "public"


def _name(function: ir.Operation) -> str:
    return ir.StringAttr(function.attributes["sym_name"]).value


def _collect_backward(value: ir.Value, chain: _Chain, seen: set) -> None:
    """Everything 64-bit the state `value` is computed from."""
    stack = [value]
    while stack and chain.problem is None:
        value = stack.pop()
        if value in seen or not is_wide(value.type):
            continue
        seen.add(value)
        owner = value.owner
        if isinstance(owner, ir.Block):
            function = _function_of(owner)
            if function is None or owner != function.regions[0].blocks[0] or not _is_public(function):
                chain.problem = (None, f"its 64-bit state (or seed) is an argument of a region or of a private "
                                       f"function ({value.type})")
                return
            chain.arguments.setdefault(_name(function), set()).add(ir.BlockArgument(value).arg_number)
            continue
        op = owner.operation
        if op.name not in _STATE_OPS:
            chain.problem = (op, f"its 64-bit state comes from {op.name}, which x64guard does not keep at 64 bits")
            return
        chain.ops.add(op)
        stack.extend(op.operands)


class KeepRngState(IdiomPattern):
    """Keeps (or refuses, per profile) the 64-bit state of every rng_bit_generator. The
    first generator's turn decides for all of them (draws can share seed arithmetic)."""

    op_names = frozenset({"stablehlo.rng_bit_generator"})

    def match_and_rewrite(self, first: ir.Operation, ctx: OpContext) -> Outcome:
        idioms, run = ctx.idioms, ctx.run
        if idioms.state_decided:
            return Outcome.NO_MATCH
        idioms.state_decided = True
        # Every generator is an anchor of this rule: the phase found them all in the one walk.
        generators = [(op, function) for op, function, _ in idioms.anchored
                      if op.name == "stablehlo.rng_bit_generator" and is_wide(op.operands[0].type)]
        if not generators:
            return Outcome.NO_MATCH
        chain, seen = _Chain(), set()
        for generator, function_name in generators:
            _collect_backward(generator.operands[0], chain, seen)
            if chain.problem is not None:
                op, why = chain.problem
                ctx.report(Kind.RNG_STATE, Severity.ERROR,
                           f"the RNG state of this rng_bit_generator cannot be kept: {why}. Draw with jax.random's "
                           "default threefry keys, or keep this module in 64 bits (mode='allow')",
                           at=op or generator, op_name="stablehlo.rng_bit_generator", function=function_name)
                run.claimed_ops.update(chain.ops | {generator})
                return Outcome.REWROTE
            chain.ops.add(generator)
        if ctx.profile.rng_state == RNG_STATE_REFUSE:
            for generator, function_name in generators:
                ctx.report(Kind.RNG_STATE, Severity.ERROR,
                           f"rng_bit_generator's state is {generator.operands[0].type}: 64-bit words by definition, "
                           f"and the {ctx.profile.name} target allows no 64-bit type (a 32-bit state would be another "
                           "generator). Draw with jax.random's default threefry keys (jax.random.key(seed)), or use "
                           "the x32 target, which keeps this state", at=generator, function=function_name)
            # One rng-state error says it all: no bitcast-width noise from the state's bitcasts.
            run.claimed_ops.update(chain.ops)
            run.claimed_ops.update(user for op in chain.ops for result in op.results for user in _users(result))
            return Outcome.REWROTE
        kept_results = self._close_forward(chain, generators, ctx)
        if chain.problem is not None:
            op, why = chain.problem
            ctx.report(Kind.RNG_STATE, Severity.ERROR,
                       f"the RNG state cannot be kept: {why}; keep this module in 64 bits (mode='allow')", at=op,
                       function=generators[-1][1])
            run.claimed_ops.update(chain.ops)
            return Outcome.REWROTE
        run.kept_ops.update(chain.ops)
        for name in set(chain.arguments) | set(kept_results):
            idioms.kept_signatures[name] = (frozenset(chain.arguments.get(name, ())),
                                            frozenset(kept_results.get(name, ())))
        for generator, function_name in generators:
            ctx.report(Kind.RNG_STATE, Severity.INFO,
                       f"the RNG state ({generator.operands[0].type}, XLA's RngBitGenerator state) and the arithmetic "
                       f"that builds it stay 64-bit: the {ctx.profile.name} target keeps it, and the draws are "
                       "the 32-bit programs' draws from the same state", at=generator, function=function_name)
        return Outcome.REWROTE

    @staticmethod
    def _close_forward(chain: _Chain, generators: list[tuple[ir.Operation, str]],
                       ctx: OpContext) -> dict[str, set[int]]:
        """Decide every use of a kept value outside the chain; returns the public
        functions' results that stay 64-bit. The new state a generator returns may flow
        on as state (reshaped, returned); the seed arithmetic only feeds generators."""
        kept_results: dict[str, set[int]] = {}
        seen = {r for op in chain.ops for r in op.results if is_wide(r.type)}
        arguments = {v for op in chain.ops for v in op.operands if isinstance(v.owner, ir.Block) and is_wide(v.type)}
        seen |= arguments
        new_states = {generator.results[0] for generator, _ in generators}
        worklist = list(seen)
        while worklist:
            value = worklist.pop()
            for user in dict.fromkeys(_users(value)):  # each user once, in order
                if user in chain.ops or user in ctx.run.claimed_ops:
                    continue
                wide_results = [r for r in user.results if is_wide(r.type)]
                reads_kept_only = all(v in seen or not is_wide(v.type) for v in user.operands)
                if user.name == "func.return":
                    function = _function_of(user.block)
                    if function is not None and _is_public(function) and user.block == function.regions[0].blocks[0]:
                        numbers = [i for i, v in enumerate(user.operands) if v == value]
                        kept_results.setdefault(_name(function), set()).update(numbers)
                        continue
                elif reads_kept_only and not wide_results:
                    chain.ops.add(user)  # reads the state into 32-bit values (JAX's bitcast back to uint32)
                    continue
                elif reads_kept_only and value in new_states and user.name in _STATE_OPS:
                    chain.ops.add(user)  # the new state, reshaped or sliced: still state
                    for result in wide_results:
                        seen.add(result)
                        new_states.add(result)
                        worklist.append(result)
                    continue
                if value in arguments:
                    chain.problem = (user, "the 64-bit seed or state argument is also used as data")
                    return kept_results
                with ctx.rewriter.insert_before(user):
                    bridge = ctx.rewriter.create_op("stablehlo.convert", [value.type], [value])
                ctx.rewriter.replace_uses_in(user, value, bridge.results[0])
                ctx.run.claimed_ops.add(bridge)  # narrowed into a convert from the kept value
        return kept_results


class KeepStateSignature(RewritePattern):
    """func.func of a public function whose RNG seed or state is kept 64-bit: the other
    arguments and results are narrowed as the generic rule would, those stay."""

    op_names = frozenset({"func.func"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext):
        if ctx.idioms is None or ctx.function not in ctx.idioms.kept_signatures:
            return Outcome.NO_MATCH
        kept_arguments, kept_results = ctx.idioms.kept_signatures[ctx.function]
        convert = ctx.converter.convert
        olds: list[ir.Type] = []
        for block_number, block in enumerate(op.regions[0].blocks):
            for arg in block.arguments:
                if block_number == 0 and arg.arg_number in kept_arguments:
                    continue
                old = arg.type
                new = convert(old)
                if new is not None:
                    olds.append(old)
                    ctx.rewriter.set_type(arg, new, old)
        old_type = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        inputs = [t if i in kept_arguments else (convert(t) or t) for i, t in enumerate(old_type.inputs)]
        results = [t if i in kept_results else (convert(t) or t) for i, t in enumerate(old_type.results)]
        new_type = ir.FunctionType.get(inputs, results)
        if new_type != old_type:
            olds.append(old_type)
            ctx.rewriter.set_attribute(op, "function_type", ir.TypeAttr.get(new_type))
        if olds:
            ctx.run.store.record_narrowed(op.name, ctx.function, olds, op.location)
        return Outcome.KEEP_TYPES

"""torch-xla's random numbers, made into a 32-bit program input.

What torch-xla 2.9 emits for every random draw (torch.rand/randn/randint/bernoulli,
dropout), measured on its StableHLO:

    func.func @main(%seed: tensor<i64>, ...)              # the base seed: s64 device data
      %s1 = multiply %seed, 214013 : i64                  # one step of an s64 LCG per draw,
      %s1' = add %s1, 2531011 : i64                       #   chained from draw to draw
      %w = convert %s1' : i64 -> ui64
      %state = concatenate reshape(%w), dense<0> : 2xui64 # XLA's u64[2] RngBitGenerator state
      %new_state, %bits = rng_bit_generator %state, algorithm = DEFAULT
                          : (2xui64) -> (2xui64, ...xui32 for float32 draws, ...xui64 for randint)

`%new_state` is never used: each draw re-derives its state from the seed. The seed
arithmetic is 64-bit integer arithmetic (narrowed, it would give another stream), so it
cannot stay in a 32-bit program. This module takes it out: each generator's state is
computed on the host from the seed for every call (`RngStates.words`) and passed in as
32-bit words, `tensor<K x N x 2 x i32>` for K generators of state `tensor<N x ui64>`,
which the program turns into the state with a bitcast, as JAX's own x32 programs do for
their `rbg` keys (`bitcast_convert ui32[..., 2] -> ui64[...]`). The state is then the one
64-bit value of the program, which the core pass keeps where the target profile allows it.

The host evaluation interprets exactly the ops torch-xla emitted (constants, integer
multiply/add/subtract, convert, bitcast_convert, reshape, concatenate, broadcast_in_dim),
with 64-bit wrap-around as XLA computes them; any other op in a state's computation is
refused (`rng-state-source`), never guessed.
"""

from __future__ import annotations

import dataclasses
import numpy as np
from jax.extend.mlir import ir

from x64guard.passes.constant_io import read_constant
from x64guard.passes.driver import collect
from x64guard.passes.ir_queries import element_type, main_function
from x64guard.passes.rewriter import Rewriter
from x64guard.passes.tables import INTEGER_NUMPY_DTYPE

# The integer element types a state computation may hold, and their numpy dtypes: the core's
# type table's 8- to 64-bit integers (i1 and ml_dtypes' sub-byte integers are no state words).
_NUMPY = {mlir: dtype.type for mlir, dtype in INTEGER_NUMPY_DTYPE.items()
          if mlir != "i1" and dtype.type.__module__ == "numpy"}

# The ops a state computation may hold; anything else is refused.
_STATE_OPS = frozenset({"stablehlo.constant", "stablehlo.multiply", "stablehlo.add", "stablehlo.subtract",
                        "stablehlo.convert", "stablehlo.bitcast_convert", "stablehlo.reshape",
                        "stablehlo.concatenate", "stablehlo.broadcast_in_dim"})


# The location of the ops that turn the input words into states (findings there are x64guard's own).
STATE_LOCATION = "x64guard: torch-xla RNG state"


class RngStateError(ValueError):
    """A generator's state is computed from something x64guard does not evaluate."""

    def __init__(self, message: str, op: str):
        super().__init__(message)
        self.op = op


def _element(t: ir.Type) -> str:
    return str(element_type(t))


def _shape(t: ir.Type) -> tuple[int, ...]:
    return tuple(ir.ShapedType(t).shape)


@dataclasses.dataclass
class _Step:
    """One op of a state computation, in evaluation order."""

    name: str
    operands: list[int]          # indices of earlier steps (or -1: the seed)
    dtype: type
    shape: tuple[int, ...]
    value: np.ndarray | None = None          # constants
    dimension: int = 0                       # concatenate
    dims: tuple[int, ...] = ()               # broadcast_in_dim


@dataclasses.dataclass
class RngStates:
    """The states of a program's random-number generators, as a function of the seed."""

    steps: list[_Step]
    outputs: list[int]           # per generator: the step that yields its state
    state_shape: tuple[int, ...]  # tensor<N x ui64>: (N,)

    @property
    def count(self) -> int:
        return len(self.outputs)

    def input_shape(self) -> tuple[int, ...]:
        """The shape of the 32-bit input that carries every state: (K, N, 2)."""
        return (self.count, *self.state_shape, 2)

    def words(self, seed: int) -> np.ndarray:
        """Every generator's state for `seed`, as the int32 words of the program input
        (low word first, as bitcast_convert reads them)."""
        values: list[np.ndarray] = []
        with np.errstate(over="ignore"):
            seed_value = np.array(seed & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64).astype(np.int64)
            for step in self.steps:
                values.append(_evaluate(step, [seed_value if i < 0 else values[i] for i in step.operands]))
        states = np.stack([values[i].astype(np.uint64, copy=False).reshape(self.state_shape) for i in self.outputs])
        return states.view(np.uint32).reshape(self.input_shape()).view(np.int32)


def _evaluate(step: _Step, operands: list[np.ndarray]) -> np.ndarray:
    name = step.name
    if name == "stablehlo.constant":
        return step.value
    if name in ("stablehlo.multiply", "stablehlo.add", "stablehlo.subtract"):
        a, b = (np.asarray(o, dtype=step.dtype) for o in operands)
        out = a * b if name == "stablehlo.multiply" else a + b if name == "stablehlo.add" else a - b
        return np.asarray(out, dtype=step.dtype)
    (x,) = operands[:1]
    if name == "stablehlo.convert":
        return np.asarray(x).astype(step.dtype)       # integer converts wrap modulo 2**bits, as XLA's do
    if name == "stablehlo.bitcast_convert":
        return np.ascontiguousarray(x).view(step.dtype).reshape(step.shape)
    if name == "stablehlo.reshape":
        return np.asarray(x).reshape(step.shape)
    if name == "stablehlo.concatenate":
        return np.concatenate([np.asarray(o) for o in operands], axis=step.dimension)
    if name == "stablehlo.broadcast_in_dim":
        source = np.asarray(x)
        shape = [1] * len(step.shape)
        for axis, size in zip(step.dims, source.shape):
            shape[axis] = size
        return np.broadcast_to(source.reshape(shape), step.shape).copy()
    raise AssertionError(name)  # _STATE_OPS lists exactly the ops above


def extract_rng_states(module: ir.Module, seed_argument: int | None) -> RngStates | None:
    """Rewrite `module` (in place) so that every `rng_bit_generator` of its main function
    takes its state from a new last argument of 32-bit words, and return how to compute
    those words from the seed; the seed argument is removed when nothing else uses it.
    None when the module draws no random numbers. Raises RngStateError when a state is
    computed from anything but the seed argument and constants."""
    main = _main(module)
    block = main.regions[0].blocks[0]
    main_name = ir.StringAttr(main.attributes["sym_name"]).value
    walked = collect(module)   # the driver's walk; generators have no regions: document order
    generators = [op for op, name, function in zip(walked.ops, walked.names, walked.functions)
                  if name == "stablehlo.rng_bit_generator" and function == main_name]
    if not generators:
        return None
    seed = block.arguments[seed_argument] if seed_argument is not None else None
    steps: list[_Step] = []
    ops: list[ir.Operation] = []           # the op of each step

    def step_of(value: ir.Value) -> int:
        if seed is not None and value == seed:
            return -1
        owner = value.owner
        if isinstance(owner, ir.Block):
            raise RngStateError("the state of a random-number generator is computed from an input other than "
                                "torch-xla's seed", "func.func")
        op = owner.operation if hasattr(owner, "operation") else owner
        for k, known in enumerate(ops):
            if known == op:
                return k
        if op.name not in _STATE_OPS:
            raise RngStateError(f"the state of a random-number generator is computed with {op.name}, which x64guard "
                                "does not evaluate on the host", op.name)
        steps.append(_host_step(op, [step_of(v) for v in op.operands]))
        ops.append(op)
        return len(steps) - 1

    outputs = []
    state_shape = None
    for generator in generators:
        if generator.operation.block != block:
            raise RngStateError("a random-number generator inside a nested region", "stablehlo.rng_bit_generator")
        state = generator.operands[0]
        shape = _shape(state.type)
        if _element(state.type) != "ui64" or (state_shape is not None and shape != state_shape):
            raise RngStateError(f"a random-number generator with state {state.type}", "stablehlo.rng_bit_generator")
        state_shape = shape
        outputs.append(step_of(state))
    plan = RngStates(steps, outputs, state_shape)
    _rewrite(module, main, block, generators, plan, seed_argument, ops, Rewriter())
    return plan


def _host_step(op: ir.Operation, operands: list[int]) -> _Step:
    """One op of a state's computation as a step evaluated on the host (`operands`: the
    steps, or -1 for the seed, feeding it)."""
    result = op.results[0].type
    element = _element(result)
    if element not in _NUMPY:
        raise RngStateError(f"the state of a random-number generator is computed in {element}", op.name)
    step = _Step(op.name, operands, _NUMPY[element], _shape(result))
    if op.name == "stablehlo.constant":
        step.value = np.broadcast_to(read_constant(op, result)[0], step.shape).astype(step.dtype)
    elif op.name == "stablehlo.concatenate":
        step.dimension = ir.IntegerAttr(op.attributes["dimension"]).value
    elif op.name == "stablehlo.broadcast_in_dim":
        step.dims = tuple(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
    return step


def _main(module: ir.Module) -> ir.Operation:
    main = main_function(module)
    if main is None:
        raise RngStateError("the module has no main function", "builtin.module")
    return main


def _rewrite(module: ir.Module, main: ir.Operation, block: ir.Block, generators: list, plan: RngStates,
             seed_argument: int | None, state_ops: list[ir.Operation], rewriter: Rewriter) -> None:
    with module.context, ir.Location.unknown():
        i32 = ir.IntegerType.get_signless(32)
        ui32 = ir.IntegerType.get_unsigned(32)
        ui64 = ir.IntegerType.get_unsigned(64)
        words_type = ir.RankedTensorType.get(list(plan.input_shape()), i32)
        location = ir.Location.file(STATE_LOCATION, 0, 0)
        words = rewriter.add_argument(block, words_type, location)
        first = block.operations[0]
        per_state = [*plan.state_shape, 2]
        for k, generator in enumerate(generators):
            with rewriter.insert_before(first), location:
                start = ir.DenseI64ArrayAttr.get([k] + [0] * len(per_state))
                limit = ir.DenseI64ArrayAttr.get([k + 1] + per_state)
                strides = ir.DenseI64ArrayAttr.get([1] * (len(per_state) + 1))
                sliced = rewriter.create_op(
                    "stablehlo.slice", [ir.RankedTensorType.get([1] + per_state, i32)], [words],
                    {"start_indices": start, "limit_indices": limit, "strides": strides})
                shaped = rewriter.create_op("stablehlo.reshape", [ir.RankedTensorType.get(per_state, i32)],
                                            [sliced.result])
                unsigned = rewriter.create_op("stablehlo.bitcast_convert", [ir.RankedTensorType.get(per_state, ui32)],
                                              [shaped.result])
                state = rewriter.create_op("stablehlo.bitcast_convert",
                                           [ir.RankedTensorType.get(list(plan.state_shape), ui64)], [unsigned.result])
            rewriter.set_operand(generator, 0, state.result)
        # The old state computations, now unused: users before producers (steps are in
        # evaluation order), each op once.
        for op in reversed(state_ops):
            if not any(True for r in op.results for _ in r.uses):
                rewriter.erase(op)
        if seed_argument is not None:
            seed = block.arguments[seed_argument]
            if any(True for _ in seed.uses):
                raise RngStateError("torch-xla's seed is used beyond the random-number generators' states",
                                    "func.func")
            rewriter.erase_argument(block, seed_argument)
        arguments = [a.type for a in block.arguments]
        function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        rewriter.set_function_type(main, arguments, function_type.results)
        _drop_argument_attributes(main, seed_argument, len(arguments), rewriter)


def _drop_argument_attributes(main: ir.Operation, removed: int | None, count: int, rewriter: Rewriter) -> None:
    """Keep `arg_attrs`, if any, in step with the arguments."""
    if "arg_attrs" not in main.attributes:
        return
    attrs = list(ir.ArrayAttr(main.attributes["arg_attrs"]))
    if removed is not None:
        attrs.pop(removed)
    while len(attrs) < count:
        attrs.append(ir.DictAttr.get({}))
    rewriter.set_attribute(main, "arg_attrs", ir.ArrayAttr.get(attrs))


def openxla_next_seed(seed: int) -> int:
    """The seed after a compiled call, as torch-xla's dynamo bridge advances it
    (torch_xla/_dynamo/dynamo_bridge.py, GraphInputMatcher)."""
    return (1012031 + seed * 7012063) % 18446744073709551615

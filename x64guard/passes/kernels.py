"""Proving what a function computes, from its body: the Threefry-2x32 kernel, and the
counters jax.random feeds it.

The random-word rules (patterns/random_bits.py) rewrite 64-bit words built from a
kernel's two outputs into the words x32 JAX builds from the same kernel. That is exact
only if the kernel IS Threefry-2x32, its first output the high word, and its counters the
ones jax.random lays out. A function's name proves nothing (JAX renames and inlines its
kernels between releases: `@threefry2x32`, a while loop with or without a `@closed_call`),
and a fingerprint of constants proves little (a look-alike can hold the same rotation
tables). So the body is evaluated symbolically, lane by lane:

* every value is either **concrete** (a numpy array: constants, loop counters, the
  rotation tables, anything computed from constants alone) or a **term**: one formula per
  lane over the kernel's inputs, the same for every lane, each input read at the lane its
  shape broadcasts to, numpy's way (a scalar key is the same in every lane; a vmapped
  kernel's keys of shape (n, 1) and counters of shape (1, m) make (n, m) lanes);
* terms are built from 32-bit `add`, `xor`, `or`, `shift_left` and `shift_right_logical`
  by constant amounts, hash-consed; add, xor and or are flattened and their constants
  folded (they are associative and commutative modulo 2**32), so the same computation
  written in another order is the same term;
* loops whose condition is concrete are unrolled (at most `_MAX_TRIPS` trips), calls are
  followed, and anything else (an op the evaluator does not model, an op that mixes lanes,
  a data-dependent loop) ends the proof with "not shown".

The outputs' terms must equal those of Threefry-2x32 as specified (Salmon et al., SC'11:
20 rounds, rotations and key-schedule parity in tables/idioms.py), built by the same builder.
Incomplete normalisation can only make the proof fail (a refusal), never succeed wrongly.
"""

from __future__ import annotations

import numpy as np
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from x64guard.passes.ir_queries import read_attribute
from x64guard.passes.tables import INTEGER_NUMPY_DTYPE, THREEFRY_KEY_PARITY, THREEFRY_ROTATIONS

_MASK = 0xFFFFFFFF
_MAX_TRIPS = 64        # unrolled loop trips, all loops of one proof together
_MAX_DEPTH = 8         # nested calls and regions


class NotShown(Exception):
    """The body does something the evaluator does not model: the fact is not proved."""


class Terms:
    """Hash-consed 32-bit lane terms. A term is an int id; `nodes[id]` is its tuple:
    ("arg", i) | ("const", c) | (op, operand ids..., constant) for add/xor/or (operands
    sorted) | ("shl"/"shr", operand id, amount)."""

    def __init__(self) -> None:
        self.nodes: list[tuple] = []
        self._ids: dict[tuple, int] = {}

    def _make(self, node: tuple) -> int:
        found = self._ids.get(node)
        if found is None:
            found = self._ids[node] = len(self.nodes)
            self.nodes.append(node)
        return found

    def arg(self, i: int) -> int:
        return self._make(("arg", i))

    def const(self, c: int) -> int:
        return self._make(("const", int(c) & _MASK))

    def constant_of(self, t: int) -> int | None:
        node = self.nodes[t]
        return node[1] if node[0] == "const" else None

    def _flat(self, op: str, operands: list[int], fold, unit: int) -> int:
        parts: list[int] = []
        constant = unit
        for t in operands:
            node = self.nodes[t]
            if node[0] == "const":
                constant = fold(constant, node[1])
            elif node[0] == op:
                parts.extend(node[1:-1])
                constant = fold(constant, node[-1])
            else:
                parts.append(t)
        constant &= _MASK
        if not parts:
            return self.const(constant)
        if len(parts) == 1 and constant == unit:
            return parts[0]
        return self._make((op, *sorted(parts), constant))

    def add(self, *ts: int) -> int:
        return self._flat("add", list(ts), lambda a, b: (a + b) & _MASK, 0)

    def xor(self, *ts: int) -> int:
        return self._flat("xor", list(ts), lambda a, b: a ^ b, 0)

    def or_(self, *ts: int) -> int:
        return self._flat("or", list(ts), lambda a, b: a | b, 0)

    def shift(self, op: str, t: int, amount: int) -> int:
        if not 0 <= amount < 32:
            raise NotShown(f"a shift by {amount}")
        c = self.constant_of(t)
        if c is not None:
            return self.const(c << amount if op == "shl" else c >> amount)
        return t if amount == 0 else self._make((op, t, amount))

    def rotate_left(self, t: int, amount: int) -> int:
        return self.or_(self.shift("shl", t, amount), self.shift("shr", t, 32 - amount))


def threefry2x32_terms(terms: Terms, k0: int, k1: int, x0: int, x1: int) -> tuple[int, int]:
    """Threefry-2x32 (20 rounds) as specified, over terms."""
    ks = [k0, k1, terms.xor(k0, k1, terms.const(THREEFRY_KEY_PARITY))]
    x0, x1 = terms.add(x0, ks[0]), terms.add(x1, ks[1])
    for group in range(5):
        for r in THREEFRY_ROTATIONS[group % 2]:
            x0 = terms.add(x0, x1)
            x1 = terms.xor(x0, terms.rotate_left(x1, r))
        x0 = terms.add(x0, ks[(group + 1) % 3])
        x1 = terms.add(x1, ks[(group + 2) % 3], terms.const(group + 1))
    return x0, x1


# ---- the evaluator ---------------------------------------------------------------------

def _shape_and_dtype(t: ir.Type) -> tuple[tuple[int, ...], np.dtype]:
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        raise NotShown(f"a value of type {t}")
    dtype = INTEGER_NUMPY_DTYPE.get(str(t.element_type))  # integer kernels only
    if dtype is None:
        raise NotShown(f"an element type {t.element_type}")
    return tuple(t.shape), dtype


def _dense(op: ir.Operation) -> np.ndarray:
    shape, dtype = _shape_and_dtype(op.results[0].type)
    attr = read_attribute(op, "value")
    if attr is None:
        raise NotShown("an unreadable constant")
    if not isinstance(attr, ir.DenseIntElementsAttr):
        raise NotShown("a non-integer constant")
    if attr.is_splat:
        scalar = ir.IntegerAttr(attr.get_splat_value()).value
        return np.full(shape, np.array(scalar).astype(dtype), dtype=dtype)  # astype wraps, as the module does
    return np.asarray(attr).astype(dtype).reshape(shape)


def _attr_ints(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


class _Lane:
    """A term standing for every lane of a value of `shape` (() for a scalar)."""

    __slots__ = ("term", "shape")

    def __init__(self, term: int, shape: tuple[int, ...]) -> None:
        self.term, self.shape = term, shape


class Evaluator:
    """Evaluates a function on abstract inputs (numpy arrays or `_Lane` terms)."""

    def __init__(self, terms: Terms, functions: dict[str, ir.Operation]) -> None:
        self.terms = terms
        self.functions = functions
        self.trips = 0

    # -- entry points --
    def call(self, name: str, args: list, depth: int = 0) -> list:
        function = self.functions.get(name)
        if function is None or depth > _MAX_DEPTH:
            raise NotShown(f"a call of @{name}")
        region = function.regions[0]
        if len(region.blocks) != 1:
            raise NotShown(f"@{name} has {len(region.blocks)} blocks")
        return self.block(region.blocks[0], args, depth + 1)

    def block(self, block: ir.Block, args: list, depth: int) -> list:
        env: dict = {}
        if len(block.arguments) != len(args):
            raise NotShown("an argument count mismatch")
        for argument, value in zip(block.arguments, args):
            env[argument] = value
        for op in block.operations:
            name = op.operation.name
            if name in ("func.return", "stablehlo.return"):
                return [env[v] for v in op.operands]
            results = self.op(op.operation, [self._read(env, v) for v in op.operands], depth)
            for result, value in zip(op.results, results):
                env[result] = value
        raise NotShown("a block without a return")

    @staticmethod
    def _read(env: dict, value: ir.Value):
        try:
            return env[value]
        except KeyError as error:  # a value from an enclosing region: not modelled
            raise NotShown("a value captured from an enclosing region") from error

    # -- ops --
    def op(self, op: ir.Operation, operands: list, depth: int) -> list:
        name = op.name
        if name == "stablehlo.constant":
            return [_dense(op)]
        if name == "func.call":
            return self.call(ir.FlatSymbolRefAttr(op.attributes["callee"]).value, operands, depth)
        if name == "stablehlo.while":
            return self.loop(op, operands, depth)
        if name == "sdy.sharding_constraint" or name == "stablehlo.optimization_barrier":
            return list(operands)
        if all(isinstance(x, np.ndarray) for x in operands):
            return [self.concrete(op, operands)]
        return [self.symbolic(op, operands)]

    def loop(self, op: ir.Operation, carried: list, depth: int) -> list:
        cond, body = op.regions[0].blocks[0], op.regions[1].blocks[0]
        while True:
            (go,) = self.block(cond, carried, depth + 1)
            if not isinstance(go, np.ndarray) or go.shape != ():
                raise NotShown("a loop whose condition depends on the data")
            if not bool(go):
                return carried
            self.trips += 1
            if self.trips > _MAX_TRIPS:
                raise NotShown("a loop of too many trips")
            carried = self.block(body, carried, depth + 1)

    def concrete(self, op: ir.Operation, xs: list) -> np.ndarray:
        name = op.name
        shape, dtype = _shape_and_dtype(op.results[0].type)
        with np.errstate(over="ignore"):
            if name == "stablehlo.add":
                out = xs[0] + xs[1]
            elif name == "stablehlo.subtract":
                out = xs[0] - xs[1]
            elif name == "stablehlo.multiply":
                out = xs[0] * xs[1]
            elif name in ("stablehlo.xor", "stablehlo.or", "stablehlo.and"):
                out = {"stablehlo.xor": np.bitwise_xor, "stablehlo.or": np.bitwise_or,
                       "stablehlo.and": np.bitwise_and}[name](xs[0], xs[1])
            elif name in ("stablehlo.shift_left", "stablehlo.shift_right_logical"):
                bits = np.dtype(xs[0].dtype).itemsize * 8
                unsigned = xs[0].astype(np.uint64) & np.uint64((1 << bits) - 1)
                amount = xs[1].astype(np.uint64)
                shifted = (unsigned << amount) if name == "stablehlo.shift_left" else (unsigned >> amount)
                out = np.where(amount < bits, shifted, np.uint64(0)) & np.uint64((1 << bits) - 1)
            elif name == "stablehlo.convert":
                out = xs[0]
            elif name == "stablehlo.compare":
                direction = stablehlo.ComparisonDirectionAttr(op.attributes["comparison_direction"]).value
                compare = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
                           "GT": np.greater, "GE": np.greater_equal}
                out = compare[direction](xs[0], xs[1])
            elif name == "stablehlo.select":
                out = np.where(xs[0], xs[1], xs[2])
            elif name == "stablehlo.slice":
                starts, limits, strides = (_attr_ints(op, a) for a in ("start_indices", "limit_indices", "strides"))
                out = xs[0][tuple(slice(a, b, s) for a, b, s in zip(starts, limits, strides))]
            elif name == "stablehlo.reshape":
                out = xs[0].reshape(shape)
            elif name == "stablehlo.broadcast_in_dim":
                dims = _attr_ints(op, "broadcast_dimensions")
                expanded = xs[0].reshape([xs[0].shape[dims.index(d)] if d in dims else 1 for d in range(len(shape))])
                out = np.broadcast_to(expanded, shape)
            elif name == "stablehlo.iota":
                axis = ir.IntegerAttr(op.attributes["iota_dimension"]).value
                out = np.broadcast_to(np.arange(shape[axis]).reshape(
                    [shape[axis] if d == axis else 1 for d in range(len(shape))]), shape)
            elif name == "stablehlo.concatenate":
                out = np.concatenate(xs, axis=ir.IntegerAttr(op.attributes["dimension"]).value)
            else:
                raise NotShown(f"{name} on constants")
        # numpy casts between integer types wrap, as the module's integers do.
        out = np.asarray(out).astype(dtype)
        if out.shape != shape:
            raise NotShown(f"{name} made shape {out.shape}, not {shape}")
        return out

    def _term(self, x, shape: tuple[int, ...]) -> int:
        """The lane term of operand `x` of an elementwise op whose lanes have `shape`."""
        if isinstance(x, _Lane):
            if x.shape != shape:
                raise NotShown("an op that mixes lanes")
            return x.term
        flat = np.asarray(x).ravel()
        if flat.size == 0 or not np.all(flat == flat[0]) or x.dtype != np.uint32:
            raise NotShown("a non-uniform or non-uint32 constant among the lanes")
        return self.terms.const(int(flat[0]))

    def symbolic(self, op: ir.Operation, xs: list) -> _Lane:
        name = op.name
        shape, dtype = _shape_and_dtype(op.results[0].type)
        if dtype != np.uint32:
            raise NotShown(f"{name} on {dtype.name} data")
        t = self.terms
        if name == "stablehlo.broadcast_in_dim":
            x = xs[0]
            dims = _attr_ints(op, "broadcast_dimensions")
            if not isinstance(x, _Lane) or not _broadcasts_like_numpy(x.shape, shape, dims):
                raise NotShown("a broadcast that moves lanes")
            return _Lane(x.term, shape)
        if name in ("stablehlo.add", "stablehlo.xor", "stablehlo.or"):
            a, b = (self._term(x, shape) for x in xs)
            return _Lane({"stablehlo.add": t.add, "stablehlo.xor": t.xor, "stablehlo.or": t.or_}[name](a, b), shape)
        if name in ("stablehlo.shift_left", "stablehlo.shift_right_logical"):
            amount = t.constant_of(self._term(xs[1], shape))
            if amount is None or isinstance(xs[1], _Lane):
                raise NotShown("a shift by a data-dependent amount")
            return _Lane(t.shift("shl" if name == "stablehlo.shift_left" else "shr", self._term(xs[0], shape),
                                 amount), shape)
        raise NotShown(f"{name} on the kernel's data")


def _broadcasts_like_numpy(source: tuple[int, ...], result: tuple[int, ...], dims: list[int]) -> bool:
    """The broadcast reads lane `t` of `result` from lane `t` of `source` aligned at the
    trailing axes, size-1 axes repeated: numpy's rule, under which every input that
    broadcasts to `source` reads the same lane whether the broadcast happens first or not."""
    offset = len(result) - len(source)
    return offset >= 0 and dims == list(range(offset, len(result))) and \
        all(s in (1, r) for s, r in zip(source, result[offset:]))


def computes_threefry2x32(function: ir.Operation, functions: dict[str, ir.Operation]) -> bool:
    """`function` (a func.func taking (key0, key1, counters0, counters1) uint32 and returning
    two uint32 values of the shape they broadcast to) computes Threefry-2x32 lane by lane,
    outputs in the order (x0, x1). Proved from its body; any doubt is False."""
    try:
        arguments = function.regions[0].blocks[0].arguments
        if len(arguments) != 4:
            return False
        shapes = [_shape_and_dtype(a.type) for a in arguments]
        if any(dtype != np.uint32 for _, dtype in shapes):
            return False
        try:
            lanes = tuple(np.broadcast_shapes(*(shape for shape, _ in shapes)))
        except ValueError:
            return False
        terms = Terms()
        inputs = [_Lane(terms.arg(i), shape) for i, (shape, _) in enumerate(shapes)]
        outputs = Evaluator(terms, functions).block(function.regions[0].blocks[0], inputs, 0)
        if len(outputs) != 2 or not all(isinstance(o, _Lane) and o.shape == lanes for o in outputs):
            return False
        want = threefry2x32_terms(terms, *(x.term for x in inputs))
        return (outputs[0].term, outputs[1].term) == want
    except NotShown:
        return False


def concrete_value(value: ir.Value, functions: dict[str, ir.Operation]) -> np.ndarray | None:
    """The value of `value` if it is computed from constants alone by ops the evaluator
    models (iotas, broadcasts, arithmetic, slices, converts), else None. Used to prove a
    kernel's counters: what they hold is read, not guessed from their shape."""
    evaluator = Evaluator(Terms(), functions)

    def evaluate(v: ir.Value, depth: int):
        owner = v.owner
        if isinstance(owner, ir.Block) or depth > 32:
            raise NotShown("a block argument")
        op = owner.operation
        if op.name == "stablehlo.constant":
            return _dense(op)
        if op.name in ("func.call", "stablehlo.while") or op.regions:
            raise NotShown(op.name)
        xs = [evaluate(x, depth + 1) for x in op.operands]
        if not all(isinstance(x, np.ndarray) for x in xs):
            raise NotShown(op.name)
        if op.name == "sdy.sharding_constraint":
            return xs[0]
        return evaluator.concrete(op, xs)

    try:
        return evaluate(value, 0)
    except NotShown:
        return None

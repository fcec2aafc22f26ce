"""Signed 64-bit integer arithmetic that int32 cannot hold: proved safe, or checked at run time.

A StableHLO range analysis, run on a module before the pass narrows it, for front ends
whose oracle is 64-bit integer arithmetic (eager PyTorch at int64, not x32 JAX: narrowed
to int32, `(ids * 31) % 4093` wraps where eager does not, and gives another answer with
no error). It looks at every signed 64-bit integer op that can produce a value int32
cannot hold (add, subtract, multiply, negate, abs, power, shift_left, divide's INT_MIN /
-1, and sums: reduce and reduce_window with an add body, integer dot_general, scatter
with an add body):

* a range analysis proves most of them safe: every 64-bit value of a narrowed program
  lies in int32 (inputs are range-checked, constants are the core's business), and
  constants, iota, comparisons, converts from narrower types, remainders, slices,
  selects, min/max and the like narrow that range further (positions made from an iota
  plus an offset, the sign fix-up of a floor remainder, argmax indices);
* what it cannot prove gets a check computed beside it. Elementwise ops are checked
  exactly, in the narrowed program's own int32 arithmetic (the sign rule of two's
  complement for add and subtract, r / a == b for multiply, INT_MIN for negate, abs and
  divide by -1); sums (and power, shift_left) get a bound in float32, a type the program
  keeps: count x largest magnitude >= 2**31 * (1 - 2**-20). The checks form one extra
  bool result of the main function (`guard`), which the front end reads after each call
  and turns into an `integer-overflow` refusal at the op's location. Never a wrapped value.

The bound of a sum is conservative: a sum whose count x largest term reaches int32's
limit is refused even when its terms cancel or its true value is just below the limit.
Refused, never wrong.

Types are the type table's (`ir_queries.is_wide_signed_integer`, `tables.INTEGER_RANGE`).
Unsigned 64-bit values (random-number words) are not this module's: the core keeps or
refuses them. Every edit goes through the pass's Rewriter.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Sequence

from jax.extend.mlir import ir

from x64guard.passes.ir_queries import element_type, is_wide_signed_integer, main_function, read_attribute
from x64guard.passes.overflow_settling import OutputBound, SettledBelow, settled_below
from x64guard.passes.rewriter import Rewriter
from x64guard.passes.tables import INTEGER_RANGE

I32_MIN, I32_MAX = -(2 ** 31), 2 ** 31 - 1
_FULL = (I32_MIN, I32_MAX)
# |float32 result| at or above this counts as overflowing: float32's rounding of values
# below 2**31 stays below 2**31 * (1 + 2**-22), and operands are exact to 2**-24.
_THRESHOLD = float(2 ** 31) * (1.0 - 2.0 ** -20)

_PASS_THROUGH = {"stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.transpose", "stablehlo.slice",
                 "stablehlo.dynamic_slice", "stablehlo.gather", "stablehlo.reverse", "stablehlo.copy",
                 "stablehlo.dynamic_reshape", "stablehlo.optimization_barrier", "stablehlo.sort"}
_UNION = {"stablehlo.concatenate": None, "stablehlo.select": (1, 2), "stablehlo.pad": None,
          "stablehlo.maximum": None, "stablehlo.minimum": None, "stablehlo.dynamic_update_slice": (0, 1)}


@dataclasses.dataclass
class OverflowChecks:
    """What `guard` added: one location text per check, in the order of the flags the
    module's last result holds, and for each when it cannot fire (`overflow_settling`)."""

    locations: list[str]
    settled: list[SettledBelow] = dataclasses.field(default_factory=list)
    outputs: list["OutputBound | None"] = dataclasses.field(default_factory=list)

    def settled_by(self, magnitude_of) -> bool:
        """Whether no check can fire, given `magnitude_of(n)`: the largest magnitude main's
        argument n holds on this call, or None where it is not known."""
        return bool(self.settled) and all(s.holds(magnitude_of) for s in self.settled)

    def __bool__(self) -> bool:
        return bool(self.locations)


def _type_range(value) -> tuple[int, int]:
    """The values `value`'s element type holds, within int32 (the type table's ranges)."""
    name = str(element_type(value.type))
    if name == "i1":
        return (0, 1)
    return _clip(*INTEGER_RANGE.get(name, _FULL))


def _constant_range(op) -> tuple[int, int]:
    attr = read_attribute(op, "value")
    if attr is None:
        return _FULL
    try:
        dense = ir.DenseIntElementsAttr(attr)
    except ValueError:
        return _FULL
    if dense.is_splat:
        value = dense.get_splat_value().value
        return (value, value)
    if len(dense) > 4096:
        return _FULL
    values = [dense[k] for k in range(len(dense))]
    return (min(values), max(values))


def _clip(lo: int, hi: int) -> tuple[int, int]:
    return (max(lo, I32_MIN), min(hi, I32_MAX))


def _fits(lo: int, hi: int) -> bool:
    return lo >= I32_MIN and hi <= I32_MAX


def _body_ops(op) -> set[str]:
    names = set()
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                names.add(inner.operation.name)
    return names - {"stablehlo.return"}


def _count(shape: Sequence[int], dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= max(int(shape[d]), 1)
    return n


class _Guard:
    """The range analysis, and the checks it builds; with no rewriter it builds nothing and
    only records which ops it would check (`overflow_settling`'s seeded runs)."""

    def __init__(self, module, rewriter: "Rewriter | None"):
        self.module = module
        self.rewriter = rewriter
        self.ranges: dict = {}
        self.flags: list = []
        self.locations: list[str] = []
        self.checked: list = []

    def range(self, value) -> tuple[int, int]:
        found = self.ranges.get(value)
        return found if found is not None else _type_range(value)

    # ------------------------------------------------------------------ building checks

    def _f32(self, shape):
        return ir.RankedTensorType.get(shape, ir.F32Type.get())

    def _op(self, name: str, result_type, operands, attributes=None):
        if self.rewriter is None:
            return None
        return self.rewriter.create_op(name, [result_type], operands, attributes or {}).result

    def _scalar(self, value: float, shape):
        tensor = self._f32(shape)
        return self._op("stablehlo.constant", tensor, [],
                        {"value": ir.DenseElementsAttr.get_splat(tensor, ir.FloatAttr.get(ir.F32Type.get(), value))})

    def _as_f32(self, value):
        shape = ir.RankedTensorType(value.type).shape
        return self._op("stablehlo.convert", self._f32(shape), [value])

    def _reduce(self, value, body: str, init: float):
        """`value` (float32 or i1, any shape) reduced to a scalar with `body` (max, or)."""
        if self.rewriter is None:
            return None
        shape = ir.RankedTensorType(value.type).shape
        element = ir.RankedTensorType(value.type).element_type
        scalar = ir.RankedTensorType.get([], element)
        start = self._scalar(init, []) if isinstance(element, ir.F32Type) else self._op(
            "stablehlo.constant", scalar, [], {"value": ir.DenseElementsAttr.get_splat(
                scalar, ir.IntegerAttr.get(element, 0))})
        reduce = self.rewriter.create_op("stablehlo.reduce", [scalar], [value, start],
                                         {"dimensions": ir.DenseI64ArrayAttr.get(list(range(len(shape))))}, regions=1)
        block = self.rewriter.append_block(reduce.regions[0], [scalar, scalar])
        with self.rewriter.insert_at_end(block):
            combined = self._op(body, scalar, [block.arguments[0], block.arguments[1]])
            self.rewriter.create_op("stablehlo.return", [], [combined])
        return reduce.result

    def _largest(self, value):
        """max |value| over all elements, in float32 (a scalar)."""
        magnitude = self._op("stablehlo.abs", self._f32(ir.RankedTensorType(value.type).shape), [self._as_f32(value)])
        return self._reduce(magnitude, "stablehlo.maximum", 0.0)

    def _flag(self, op, magnitude) -> None:
        """Record `magnitude` (a float32 scalar) >= the threshold as a check of `op`."""
        bool_type = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
        limit = self._scalar(_THRESHOLD, [])
        flag = self._op("stablehlo.compare", bool_type, [magnitude, limit], {
            "comparison_direction": ir.Attribute.parse("#stablehlo<comparison_direction GE>")})
        self._record(op, flag)

    # exact checks in the narrowed program's own integer arithmetic: the ops below are
    # written at 64 bits and narrowed with the rest, so they test what the int32 op did
    def _i64(self, value: int, like):
        tensor = ir.RankedTensorType(like.type)
        return self._op("stablehlo.constant", tensor, [], {"value": ir.DenseElementsAttr.get_splat(
            tensor, ir.IntegerAttr.get(tensor.element_type, value))})

    def _bool(self, like):
        return ir.RankedTensorType.get(ir.RankedTensorType(like.type).shape, ir.IntegerType.get_signless(1))

    def _cmp(self, a, b, direction: str):
        return self._op("stablehlo.compare", self._bool(a), [a, b], {
            "comparison_direction": ir.Attribute.parse(f"#stablehlo<comparison_direction {direction}>")})

    def _exact_check(self, op) -> None:
        """add/subtract: the sign rule of two's complement (the result's sign differs from
        both operands' for add, from a's and not b's for subtract); multiply: r / a != b
        for a != 0, or -1 * INT_MIN; negate and abs: INT_MIN; divide: INT_MIN / -1."""
        if self.rewriter is None:
            return self._record(op, None)
        name = op.name
        operands = list(op.operands)
        r = op.results[0]
        a = operands[0]
        t = a.type
        if name in ("stablehlo.add", "stablehlo.subtract"):
            b = operands[1]
            ar = self._op("stablehlo.xor", t, [a, r])
            other = self._op("stablehlo.xor", t, [b, r] if name == "stablehlo.add" else [a, b])
            both = self._op("stablehlo.and", t, [ar, other])
            bad = self._cmp(both, self._i64(0, a), "LT")
        elif name == "stablehlo.multiply":
            b = operands[1]
            zero, one = self._i64(0, a), self._i64(1, a)
            nonzero = self._cmp(a, zero, "NE")
            safe_a = self._op("stablehlo.select", t, [nonzero, a, one])
            back = self._op("stablehlo.divide", t, [r, safe_a])
            differs = self._op("stablehlo.and", self._bool(a), [nonzero, self._cmp(back, b, "NE")])
            corner = self._op("stablehlo.and", self._bool(a), [self._cmp(a, self._i64(-1, a), "EQ"),
                                                                 self._cmp(b, self._i64(I32_MIN, a), "EQ")])
            bad = self._op("stablehlo.or", self._bool(a), [differs, corner])
        elif name in ("stablehlo.negate", "stablehlo.abs"):
            bad = self._cmp(a, self._i64(I32_MIN, a), "EQ")
        else:  # divide
            b = operands[1]
            bad = self._op("stablehlo.and", self._bool(a), [self._cmp(a, self._i64(I32_MIN, a), "EQ"),
                                                             self._cmp(b, self._i64(-1, a), "EQ")])
        self._record(op, self._reduce(bad, "stablehlo.or", 0))

    def _record(self, op, flag) -> None:
        self.checked.append(op)
        self.flags.append(flag)
        self.locations.append(str(op.location))

    def _elementwise_check(self, op, name: str) -> None:
        if self.rewriter is None:
            return self._record(op, None)
        operands = [self._as_f32(v) for v in op.operands]
        shape = ir.RankedTensorType(op.operands[0].type).shape
        result = self._op(name, self._f32(shape), operands)
        magnitude = self._op("stablehlo.abs", self._f32(shape), [result])
        self._flag(op, self._reduce(magnitude, "stablehlo.maximum", 0.0))

    def _bounded_check(self, op, terms: list, count: int, extra=None) -> None:
        """count x prod(max |term|) (+ max |extra|) >= the threshold."""
        if self.rewriter is None:
            return self._record(op, None)
        bound = self._scalar(float(count), [])
        for term in terms:
            bound = self._op("stablehlo.multiply", self._f32([]), [bound, self._largest(term)])
        if extra is not None:
            bound = self._op("stablehlo.add", self._f32([]), [bound, self._largest(extra)])
        self._flag(op, bound)

    # ------------------------------------------------------------------ the analysis

    def visit(self, op) -> None:
        """Record the range of `op`'s int64 result; add a check where it may leave int32."""
        name = op.name
        results = list(op.results)
        if not results:
            return
        if name == "stablehlo.constant":
            if is_wide_signed_integer(results[0].type):
                self.ranges[results[0]] = _clip(*_constant_range(op))
            return
        if name == "stablehlo.iota":
            shape = ir.RankedTensorType(results[0].type).shape
            dim = ir.IntegerAttr(op.attributes["iota_dimension"]).value
            self.ranges[results[0]] = (0, max(int(shape[dim]) - 1, 0))
            return
        if name == "stablehlo.compare":
            return
        if not any(is_wide_signed_integer(r.type) for r in results):
            return
        r = [self.range(v) for v in op.operands]
        if not (self._data_movement(op, name, r) or self._arithmetic(op, name, r)):
            self._other(op, name, r)

    def _data_movement(self, op, name: str, r: list) -> bool:
        """Ops whose result's range follows from their operands' without arithmetic.
        Returns whether `name` is one of them."""
        out, operands = op.results[0], list(op.operands)
        if name == "stablehlo.convert":
            self.ranges[out] = _clip(*r[0]) if isinstance(element_type(operands[0].type), ir.IntegerType) else _FULL
        elif name in _PASS_THROUGH:
            self.ranges[out] = r[0]
        elif name in _UNION:
            chosen = _UNION[name] or range(len(r))
            self.ranges[out] = (min(r[k][0] for k in chosen), max(r[k][1] for k in chosen))
        elif name == "stablehlo.clamp":
            self.ranges[out] = (max(r[1][0], r[0][0]), min(r[1][1], r[2][1]))
        elif name == "stablehlo.sign":
            self.ranges[out] = (max(-1, min(r[0][0], 0)), min(1, max(r[0][1], 0)))
        else:
            return False
        return True

    def _arithmetic(self, op, name: str, r: list) -> bool:
        """Elementwise arithmetic: interval bounds, and an exact check where they leave
        int32. Returns whether `name` is handled here."""
        out = op.results[0]
        if name in ("stablehlo.add", "stablehlo.subtract", "stablehlo.multiply"):
            (a0, a1), (b0, b1) = r
            if name == "stablehlo.add":
                lo, hi = a0 + b0, a1 + b1
            elif name == "stablehlo.subtract":
                lo, hi = a0 - b1, a1 - b0
            else:
                products = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
                lo, hi = min(products), max(products)
        elif name == "stablehlo.negate":
            lo, hi = -r[0][1], -r[0][0]
        elif name == "stablehlo.abs":
            lo = 0 if r[0][0] <= 0 <= r[0][1] else min(abs(r[0][0]), abs(r[0][1]))
            hi = max(abs(r[0][0]), abs(r[0][1]))
        elif name == "stablehlo.divide":
            (a0, a1), (b0, b1) = r
            if a0 <= I32_MIN and b0 <= -1 <= b1:
                self._exact_check(op)
            big = max(abs(a0), abs(a1))
            self.ranges[out] = _clip(-big, big)
            return True
        elif name == "stablehlo.remainder":
            (a0, a1), (b0, b1) = r
            bound = max(abs(b0), abs(b1), 1) - 1
            bound = min(bound, max(abs(a0), abs(a1)))
            self.ranges[out] = (0 if a0 >= 0 else -bound, 0 if a1 <= 0 else bound)
            return True
        else:
            return False
        if not _fits(lo, hi):
            self._exact_check(op)
        self.ranges[out] = _clip(lo, hi)
        return True

    def _other(self, op, name: str, r: list) -> None:
        """Shifts, bitwise ops, power, reductions, dot products and scatters."""
        out = op.results[0]
        if name in ("stablehlo.shift_right_arithmetic", "stablehlo.shift_right_logical"):
            self.ranges[out] = (min(r[0][0], 0), max(r[0][1], 0)) if name.endswith("arithmetic") or r[0][0] >= 0 \
                else _FULL
        elif name in ("stablehlo.and", "stablehlo.or", "stablehlo.xor", "stablehlo.not"):
            if all(lo >= 0 for lo, _ in r) and name != "stablehlo.not":
                top = max(hi for _, hi in r)
                self.ranges[out] = (0, min(top, I32_MAX) if name == "stablehlo.and" else
                                    min((1 << max(top, 1).bit_length()) - 1, I32_MAX))
        elif name in ("stablehlo.shift_left", "stablehlo.power"):
            if name == "stablehlo.power":
                self._elementwise_check(op, name)
            else:
                self._shift_check(op)
        elif name in ("stablehlo.reduce", "stablehlo.reduce_window"):
            self._reduction(op, r)
        elif name == "stablehlo.dot_general":
            self._dot(op, r)
        elif name == "stablehlo.scatter":
            self._scatter(op, r)

    def _scatter(self, op, r: list) -> None:
        out, operands = op.results[0], list(op.operands)
        body = _body_ops(op)
        if "stablehlo.add" in body and len(operands) == 3:
            (o0, o1), _, (u0, u1) = r
            n = max(_count(ir.RankedTensorType(operands[2].type).shape,
                           range(len(ir.RankedTensorType(operands[2].type).shape))), 1)
            lo, hi = o0 + n * min(u0, 0), o1 + n * max(u1, 0)
            if not _fits(lo, hi):
                self._bounded_check(op, [operands[2]], n, extra=operands[0])
            self.ranges[out] = _clip(lo, hi)
        elif body <= {"stablehlo.maximum", "stablehlo.minimum", "stablehlo.select", "stablehlo.compare"} \
                and len(operands) == 3:
            self.ranges[out] = (min(r[0][0], r[2][0]), max(r[0][1], r[2][1]))

    def _shift_check(self, op) -> None:
        if self.rewriter is None:
            return self._record(op, None)
        # a << b == a * 2**b for the shifts that do not overflow
        a, b = (self._as_f32(v) for v in op.operands)
        shape = ir.RankedTensorType(op.operands[0].type).shape
        two = self._scalar(2.0, shape)
        scale = self._op("stablehlo.power", self._f32(shape), [two, b])
        product = self._op("stablehlo.multiply", self._f32(shape), [a, scale])
        magnitude = self._op("stablehlo.abs", self._f32(shape), [product])
        self._flag(op, self._reduce(magnitude, "stablehlo.maximum", 0.0))

    def _reduction(self, op, r) -> None:
        body = _body_ops(op)
        operands = list(op.operands)
        half = len(operands) // 2
        results = list(op.results)
        shape = ir.RankedTensorType(operands[0].type).shape
        if op.name == "stablehlo.reduce":
            n = _count(shape, ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        else:
            window = ir.DenseI64ArrayAttr(op.attributes["window_dimensions"])
            n = 1
            for w in window:
                n *= max(int(w), 1)
        if body == {"stablehlo.add"} and half == 1:
            (x0, x1), (i0, i1) = r[0], r[1]
            lo, hi = i0 + n * min(x0, 0), i1 + n * max(x1, 0)
            if is_wide_signed_integer(results[0].type) and not _fits(lo, hi):
                self._bounded_check(op, [operands[0]], n, extra=operands[1])
            self.ranges[results[0]] = _clip(lo, hi)
        elif body == {"stablehlo.multiply"} and half == 1:
            (x0, x1) = r[0]
            big = max(abs(x0), abs(x1), abs(r[1][0]), abs(r[1][1]))
            if big > 1 and is_wide_signed_integer(results[0].type):
                # |product| <= max|x| ** n: checked as n * log2(max|x|) through a power in float32
                largest = self._largest(operands[0])
                power = self._op("stablehlo.power", self._f32([]), [largest, self._scalar(float(n), [])])
                self._flag(op, power)
            self.ranges[results[0]] = _FULL if big > 1 else (-1, 1)
        elif body <= {"stablehlo.maximum", "stablehlo.minimum", "stablehlo.select", "stablehlo.compare",
                      "stablehlo.and", "stablehlo.or"}:
            for k, result in enumerate(results):
                (x0, x1), (i0, i1) = r[k], r[half + k] if half + k < len(r) else r[k]
                self.ranges[result] = (min(x0, i0), max(x1, i1))

    def _dot(self, op, r) -> None:
        lhs, rhs = list(op.operands)[:2]
        numbers = str(op.attributes["dot_dimension_numbers"])
        match = re.search(r"lhs_contracting_dimensions = \[([\d, ]*)\]", numbers)
        dims = [int(d) for d in match.group(1).split(",") if d.strip()] if match else []
        n = _count(ir.RankedTensorType(lhs.type).shape, dims)
        (a0, a1), (b0, b1) = r[0], r[1]
        products = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
        lo, hi = n * min(min(products), 0), n * max(max(products), 0)
        if not _fits(lo, hi):
            self._bounded_check(op, [lhs, rhs], n)
        self.ranges[op.results[0]] = _clip(lo, hi)


def _main(module):
    main = main_function(module)
    if main is None:
        raise ValueError("the module has no main function")
    return main


def guard(module) -> OverflowChecks:
    """Add the checks to `module` (in place, before narrowing) as one more result of
    its main function, `tensor<N x i1>`, one flag per check; returns their locations.
    Nothing is added when every 64-bit integer op is proved to stay in int32."""
    main = _main(module)
    block = main.regions[0].blocks[0]
    rewriter = Rewriter()
    guard_ = _Guard(module, rewriter)
    with module.context:
        for argument in block.arguments:
            if is_wide_signed_integer(argument.type):
                guard_.ranges[argument] = _FULL     # inputs are range-checked to int32
        operations = list(block.operations)
        terminator = operations[-1]
        for op in operations[:-1]:
            with rewriter.insert_before(terminator), op.location:   # the checks at the checked op's line
                guard_.visit(op.operation)
        if not guard_.flags:
            return OverflowChecks([])

        def seeded(seeds: dict) -> _Guard:
            dry = _Guard(module, None)
            dry.ranges.update(seeds)
            return dry

        settled, outputs = settled_below(operations[:-1], block, guard_.checked, seeded,
                                         list(terminator.operands))
        with rewriter.insert_before(terminator), ir.Location.unknown():
            one = ir.RankedTensorType.get([1], ir.IntegerType.get_signless(1))
            pieces = [rewriter.create_op("stablehlo.reshape", [one], [f]).result for f in guard_.flags]
            flags_type = ir.RankedTensorType.get([len(pieces)], ir.IntegerType.get_signless(1))
            flags = pieces[0] if len(pieces) == 1 else rewriter.create_op(
                "stablehlo.concatenate", [flags_type], pieces,
                {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)}).result
        # The flags are one more operand of the return: a new terminator replaces the old.
        with rewriter.insert_before(terminator):
            new_terminator = rewriter.create_op(terminator.name, [], list(terminator.operands) + [flags])
        rewriter.erase(terminator)
        function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        rewriter.set_function_type(main, function_type.inputs, [v.type for v in new_terminator.operands])
    return OverflowChecks(guard_.locations, settled, outputs)

"""AWS Neuron (issue 23): what neuronx-cc documents it rejects, found in the module before
the compile, each reported with the compiler's own code (`NCC_EVRF035`) as its kind.

The rows (trigger, fix, doc page) are data: `tables.NEURON_RULES`. The compiler flags that
change a verdict (`--native-int64`, `--implicit-integer-downcast`) are read by
`NeuronOptions.resolve`: the profile's own flags, then NEURON_CC_FLAGS (or
`--neuron-cc-flags` / `neuron_cc_flags=`), as neuronx-cc reads them. The rules only
report (`check`, and `narrow` on what it narrowed); none rewrites. Nothing here was run
against neuronx-cc: the rules come from the Neuron SDK 2.32 documentation.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.constant_io import UnreadableConstant, read_constant
from x64guard.passes.driver import OpContext, Outcome, RewritePattern
from x64guard.passes.matching import producer
from x64guard.passes.patterns.custom_calls import custom_call_target
from x64guard.passes.tables import (HOST_CALLBACK_CUSTOM_CALLS, NEURON_COMPLEX64_OPS, NEURON_CUSTOM_CALLS,
                                    NEURON_DEFAULT_FLAGS, NEURON_DOWNCAST_OPS, NEURON_FLAGS_ENV, NEURON_RULE,
                                    NEURON_SORT_COMPARISONS, NEURON_TOPK_MAX_K, NEURON_UNSUPPORTED_OPS,
                                    XLA_SHARDING_CUSTOM_CALLS, TargetProfile)

_NATIVE_INT64 = ("enabled", "default", "disabled")
_INT64 = frozenset({"i64", "si64", "ui64"})
_SHIFT_OK = frozenset({"i32", "si32", "ui32", "f32"})
_TOPK_TARGETS = frozenset({"TopK", "mhlo.topk"})
_THREEFRY_CALLEES = frozenset({"threefry2x32", "_threefry_split", "_threefry_fold_in", "_threefry_random_bits"})


@dataclass(frozen=True)
class NeuronOptions:
    """The compiler's options that change a verdict, as resolved for one check."""

    chip: str                    # "trn1" | "trn2"
    native_int64: bool           # --native-int64=enabled on trn2 and later
    downcast: frozenset[str]     # ops --implicit-integer-downcast lets through with a warning
    flags: str                   # what was read, in order (the report says it)

    @classmethod
    def resolve(cls, profile: TargetProfile, flags: str | None = None) -> "NeuronOptions":
        """`flags`: the user's (--neuron-cc-flags); None reads $NEURON_CC_FLAGS when it is set."""
        if flags is None:
            flags = os.environ.get(NEURON_FLAGS_ENV, "")
        native, downcast = "default", "all"
        for text in (NEURON_DEFAULT_FLAGS, profile.neuron_flags, flags):
            native, downcast = _parse(text, native, downcast)
        allowed = frozenset(NEURON_DOWNCAST_OPS) if downcast == "all" else \
            frozenset() if downcast == "none" else frozenset(downcast.split(","))
        chip = profile.neuron_chip or "trn2"
        used = " ".join(t for t in (profile.neuron_flags, flags) if t)
        return cls(chip, native == "enabled" and chip != "trn1", allowed, used)

    def describe(self) -> str:
        native = "native int64" if self.native_int64 else "int64 downcast to int32 by the compiler"
        down = ",".join(sorted(self.downcast)) or "none"
        return f"{self.chip}, {native}, --implicit-integer-downcast={down}"


def _parse(text: str, native: str, downcast: str) -> tuple[str, str]:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"x64guard: cannot read the Neuron compiler flags {text!r}: {exc}") from None
    i = 0
    while i < len(words):
        word = words[i]
        name, _, value = word.partition("=")
        if name in ("--native-int64", "--implicit-integer-downcast"):
            if not _:
                i += 1
                value = words[i] if i < len(words) else ""
            if name == "--native-int64":
                if value not in _NATIVE_INT64:
                    raise ValueError(f"x64guard: --native-int64 takes {', '.join(_NATIVE_INT64)}, not {value!r}")
                native = value
            else:
                parts = [p for p in value.split(",") if p]
                known = {"none", "all", *NEURON_DOWNCAST_OPS}
                if not parts or any(p not in known for p in parts) or (len(parts) > 1 and {"none", "all"} & set(parts)):
                    raise ValueError(f"x64guard: --implicit-integer-downcast takes none, all or a comma-separated "
                                     f"list of {', '.join(NEURON_DOWNCAST_OPS)}, not {value!r}")
                downcast = ",".join(parts)
        i += 1
    return native, downcast


def _element(t: ir.Type) -> ir.Type:
    return t.element_type if isinstance(t, ir.ShapedType) else t


def _is_integer(t: ir.Type) -> bool:
    return isinstance(_element(t), ir.IntegerType)


def _ints(op: ir.Operation, name: str) -> list[int]:
    if name not in op.attributes:
        return []
    attr = op.attributes[name]
    try:
        return [int(v) for v in ir.DenseI64ArrayAttr(attr)]
    except (TypeError, ValueError):
        return [int(v) for v in ir.DenseIntElementsAttr(attr)]


def _block_argument_number(value: ir.Value) -> int | None:
    return ir.BlockArgument(value).arg_number if isinstance(value.owner, ir.Block) else None


def _is_constant(value: ir.Value) -> bool:
    op = producer(value)
    while op is not None and op.name in ("stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert"):
        op = producer(op.operands[0])
    return op is not None and op.name == "stablehlo.constant"


def _direction(op: ir.Operation) -> str:
    return str(op.attributes["comparison_direction"]).split()[-1].rstrip(">")


class NeuronRules(RewritePattern):
    """Every rule of `tables.NEURON_RULES`, in the pass's one walk (check only reports)."""

    def __init__(self, profile: TargetProfile, options: NeuronOptions) -> None:
        self._profile = profile
        self._options = options
        self._complex_seen = False  # a complex type met so far in the walk (operands are read only then)
        self._by_name = {
            "stablehlo.constant": self._constant,
            "stablehlo.dot": self._dot, "stablehlo.dot_general": self._dot,
            "stablehlo.scatter": self._scatter,
            "stablehlo.all_reduce": self._collective, "stablehlo.reduce_scatter": self._collective,
            "stablehlo.power": self._power,
            "stablehlo.shift_right_arithmetic": self._shift,
            "chlo.top_k": self._top_k,
            "stablehlo.rng_bit_generator": self._rng,
            "stablehlo.custom_call": self._custom_call,
            "stablehlo.convolution": self._convolution,
            "stablehlo.reduce_window": self._reduce_window,
            "stablehlo.case": self._cond, "stablehlo.if": self._cond,
            "stablehlo.while": self._while,
            "stablehlo.sort": self._sort,
            "stablehlo.reduce_precision": self._limit("neuron-reduce-precision"),
            "stablehlo.reduce": self._reduce,
            "stablehlo.set_dimension_size": self._limit("NCC_EMOD025"),
            "func.call": self._call,
        }
        for name in NEURON_UNSUPPORTED_OPS:
            self._by_name[name] = self._limit("NCC_EUOC002")

    # --- reporting ----------------------------------------------------------------------
    def _report(self, ctx: OpContext, kind: str, detail: str, severity: Severity = Severity.ERROR,
                op_name: str | None = None) -> None:
        row = NEURON_RULE[kind]
        code = f" ({kind})" if kind.startswith("NCC_") else ""
        verdict = "neuronx-cc rejects it" if kind.startswith("NCC_") else "jax-neuronx does not support it"
        if severity is Severity.WARNING:
            verdict = "neuronx-cc accepts it with a warning" if kind.startswith("NCC_") else \
                "jax-neuronx supports it only in part"
        ctx.report(Kind(kind), severity,
                   f"{detail}: {verdict} on {self._profile.name}{code}; fix: {row.fix} [{row.doc}]",
                   op_name=op_name)

    def _downcast(self, key: str) -> Severity:
        return Severity.WARNING if key in self._options.downcast else Severity.ERROR

    def _limit(self, kind: str):
        def rule(op: ir.Operation, ctx: OpContext) -> None:
            self._report(ctx, kind, NEURON_RULE[kind].trigger)
        return rule

    # --- the walk -------------------------------------------------------------------------
    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        name = ctx.name
        spelling = ctx.converter.spelling
        spelled = [spelling(t) for t in ctx.result_types]
        if len(op.regions):
            spelled += [spelling(a.type) for region in op.regions for block in region.blocks for a in block.arguments]
        for s in spelled:
            if "?" in s:
                self._report(ctx, "NCC_EMOD025", f"a dynamic dimension ({s})")
                break
        if not self._complex_seen:  # every value is defined (and spelled here) before its uses
            self._complex_seen = any("complex<" in s for s in spelled)
        if self._complex_seen and (name not in NEURON_COMPLEX64_OPS or any("complex<f64>" in s for s in spelled)):
            complex_types = [s for s in spelled + [spelling(v.type) for v in op.operands] if "complex<" in s]
            if complex_types:
                c128 = any("complex<f64>" in s for s in complex_types)
                self._report(ctx, "NCC_EVRF004", ("complex128 values" if c128 else
                                                  f"complex64 values in {name}, not an op the 2.32 notes list "
                                                  "for complex64"))
        rule = self._by_name.get(name)
        if rule is not None:
            try:
                rule(op, ctx)
            except (IndexError, KeyError, TypeError, ValueError):
                # An op without the regions or attributes its definition gives it (text
                # parsed without verification): its rule cannot judge it; never a crash.
                pass
        return Outcome.NO_MATCH

    # --- the rules, per op --------------------------------------------------------------
    def _constant(self, op: ir.Operation, ctx: OpContext) -> None:
        t = ctx.result_types[0]
        if "ui64" not in ctx.converter.spelling(t) or ctx.converter.element_spelling(t) != "ui64":
            return
        try:
            values, _ = read_constant(op, t)
        except UnreadableConstant:
            return
        if values.size and int(values.max()) > 0xFFFFFFFF:
            self._report(ctx, "NCC_ESFH002", f"a ui64 constant {int(values.max())} beyond 32 bits")

    def _dot(self, op: ir.Operation, ctx: OpContext) -> None:
        t = op.operands[0].type
        if not _is_integer(t):
            return
        element = ctx.converter.element_spelling(t)
        severity = self._downcast("dot")
        if element not in _INT64 and self._options.chip == "trn1":
            severity = Severity.WARNING  # trn1 only warns for int32 (EVRF035's page)
        self._report(ctx, "NCC_EVRF035", f"an integer dot ({element} operands)", severity)

    def _scatter(self, op: ir.Operation, ctx: OpContext) -> None:
        inputs = (len(op.operands) - 1) // 2
        block = op.regions[0].blocks[0]
        returned = list(block.operations)[-1].operands
        overwrites = all(_block_argument_number(v) is not None and _block_argument_number(v) >= inputs
                         for v in returned)
        if overwrites:
            return
        element = ctx.converter.element_spelling(op.operands[0].type)
        if element == "i1":
            self._report(ctx, "NCC_EVRF016", "a scatter that combines boolean values")
        elif _is_integer(op.operands[0].type):
            self._report(ctx, "NCC_EVRF060", f"a scatter that combines {element} values", self._downcast("scatter"))

    def _collective(self, op: ir.Operation, ctx: OpContext) -> None:
        if any(_is_integer(v.type) for v in op.operands):
            element = ctx.converter.element_spelling(op.operands[0].type)
            if ctx.name == "stablehlo.all_reduce":
                self._report(ctx, "NCC_EVRF061", f"an all-reduce of {element} values", self._downcast("all_reduce"))
            else:
                self._report(ctx, "NCC_EVRF063", f"a reduce-scatter of {element} values",
                             self._downcast("reduce_scatter"))

    def _power(self, op: ir.Operation, ctx: OpContext) -> None:
        element = ctx.converter.element_spelling(op.results[0].type)
        if element in _INT64:
            self._report(ctx, "NCC_EVRF062", f"a {element} power", self._downcast("pow"))

    def _shift(self, op: ir.Operation, ctx: OpContext) -> None:
        element = ctx.converter.element_spelling(op.operands[0].type)
        if element not in _SHIFT_OK:
            self._report(ctx, "NCC_EVRF022", f"a shift-right-arithmetic of {element} values")

    def _top_k(self, op: ir.Operation, ctx: OpContext, name: str | None = None) -> None:
        operand = op.operands[0].type
        if _is_integer(operand):
            self._report(ctx, "NCC_EVRF013", f"TopK on {ctx.converter.element_spelling(operand)} input",
                         op_name=name)
        result = op.results[0].type
        if isinstance(result, ir.RankedTensorType) and result.rank and result.shape[-1] > NEURON_TOPK_MAX_K:
            self._report(ctx, "NCC_EVRF014", f"TopK with k = {result.shape[-1]} > {NEURON_TOPK_MAX_K}",
                         op_name=name)

    def _rng(self, op: ir.Operation, ctx: OpContext) -> None:
        algorithm = str(op.attributes["rng_algorithm"]) if "rng_algorithm" in op.attributes else "DEFAULT"
        if "DEFAULT" not in algorithm:
            self._report(ctx, "NCC_EVRF006", f"an rng_bit_generator with algorithm {algorithm.split()[-1].rstrip('>')}")

    def _custom_call(self, op: ir.Operation, ctx: OpContext) -> None:
        target = custom_call_target(op)
        spelled = f"stablehlo.custom_call @{target}"
        if target in HOST_CALLBACK_CUSTOM_CALLS:
            self._report(ctx, "neuron-host-callback", f"a host callback (@{target})", op_name=spelled)
        elif target in _TOPK_TARGETS:
            self._top_k(op, ctx, spelled)
        elif target not in NEURON_CUSTOM_CALLS and target not in XLA_SHARDING_CUSTOM_CALLS:
            self._report(ctx, "NCC_EHCA005", f"custom_call @{target}, not a target neuronx-cc recognises",
                         op_name=spelled)

    def _convolution(self, op: ir.Operation, ctx: OpContext) -> None:
        lhs = any(d > 1 for d in _ints(op, "lhs_dilation"))
        if lhs and any(d > 1 for d in _ints(op, "rhs_dilation")):
            self._report(ctx, "NCC_EVRF010", "a convolution with both input (lhs) and kernel (rhs) dilation")
        if lhs and any(s > 1 for s in _ints(op, "window_strides")):
            self._report(ctx, "NCC_EVRF011", "a strided convolution with input (lhs) dilation")

    def _reduce_window(self, op: ir.Operation, ctx: OpContext) -> None:
        if any(d > 1 for d in _ints(op, "base_dilations")):
            self._report(ctx, "NCC_EVRF017", f"a reduce_window with base dilation {_ints(op, 'base_dilations')}")
        if any(d > 1 for d in _ints(op, "window_dilations")):
            self._report(ctx, "NCC_EVRF018", f"a reduce_window with window dilation {_ints(op, 'window_dilations')}")
        if len(op.operands) != 2:
            self._report(ctx, "NCC_EVRF019", f"a reduce_window of {len(op.operands) // 2} inputs")

    def _cond(self, op: ir.Operation, ctx: OpContext) -> None:
        self._report(ctx, "neuron-cond", f"a conditional ({ctx.name}: lax.cond or lax.switch)")

    def _while(self, op: ir.Operation, ctx: OpContext) -> None:
        if not _static_trip_count(op):
            self._report(ctx, "neuron-dynamic-while", "a while loop whose trip count is not a constant")

    def _sort(self, op: ir.Operation, ctx: OpContext) -> None:
        returned = list(op.regions[0].blocks[0].operations)[-1].operands
        compare = producer(returned[0], "stablehlo.compare") if len(returned) == 1 else None
        if compare is None or _direction(compare) not in NEURON_SORT_COMPARISONS:
            self._report(ctx, "neuron-sort-comparator", "a sort whose comparator is not one LT/LE/GT/GE compare "
                         f"({len(op.operands)} operands)")

    def _reduce(self, op: ir.Operation, ctx: OpContext) -> None:
        if len(op.operands) > 2:
            self._report(ctx, "neuron-variadic-reduce", f"a reduction of {len(op.operands) // 2} inputs at once")

    def _call(self, op: ir.Operation, ctx: OpContext) -> None:
        callee = str(op.attributes["callee"]).lstrip("@") if "callee" in op.attributes else ""
        if callee in _THREEFRY_CALLEES:
            self._report(ctx, "neuron-threefry", f"jax.random's threefry kernel (@{callee})", Severity.WARNING)


def _static_trip_count(op: ir.Operation) -> bool:
    """A counted loop: the condition compares a loop variable that starts at a constant and
    steps by a constant with a constant (JAX's fori_loop with static bounds and scan)."""
    cond, body = op.regions[0].blocks[0], op.regions[1].blocks[0]
    returned = list(cond.operations)[-1].operands
    compare = producer(returned[0], "stablehlo.compare") if len(returned) == 1 else None
    if compare is None or _direction(compare) not in ("LT", "LE", "GT", "GE", "NE"):
        return False
    a, b = compare.operands
    index = _block_argument_number(a) if _is_constant(b) else _block_argument_number(b) if _is_constant(a) else None
    if index is None or not _is_constant(op.operands[index]):
        return False
    step = producer(list(body.operations)[-1].operands[index])
    if step is None or step.name not in ("stablehlo.add", "stablehlo.subtract"):
        return False
    x, y = step.operands
    return (_block_argument_number(x) == index and _is_constant(y)) or \
        (_block_argument_number(y) == index and _is_constant(x))


def neuron_patterns(profile: TargetProfile, flags: str | None = None) -> tuple[RewritePattern, ...]:
    """The Neuron rules for `profile` (none for a profile that is not a Neuron target)."""
    if profile.neuron_chip is None:
        return ()
    return (NeuronRules(profile, NeuronOptions.resolve(profile, flags)),)

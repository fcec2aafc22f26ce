"""A narrowed program: a StableHLO module as one op of torch-xla's lazy graph, compiled
into torch-xla's computation cache and run from there."""

from __future__ import annotations

import itertools
from typing import Sequence

import torch

from x64guard.errors import X64GuardError
from x64guard.findings import Finding, Kind, Severity
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla import metrics as xla_metrics
from x64guard.torch_xla import outside as _outside
from x64guard.torch_xla import share as _share
from x64guard.torch_xla.base import COUNTERS
from x64guard.torch_xla.magnitudes import MAGNITUDES
from x64guard.passes.overflow_checks import OverflowChecks
from x64guard.torch_xla.overflow import describe


_PROGRAM_IDS = itertools.count()


class Program:
    """A narrowed StableHLO module as one op of torch-xla's lazy graph, compiled into
    torch-xla's computation cache and run from there (`_run_cached_graph`).

    `in_types` are the module's parameters in order (shape, dtype); `run` takes XLA
    tensors of exactly those types in that order.
    """

    def __init__(self, module_text: str, in_types: Sequence[tuple[tuple[int, ...], torch.dtype]],
                 device: torch.device, counted: bool = True, checks: OverflowChecks | None = None,
                 share_key: str | None = None):
        # int64 arithmetic checked at run time (x64guard/torch_xla/overflow.py): the module's
        # last result holds one flag per check, read after each call
        self.checks = checks if checks else None
        self._positions: tuple = (None, {})    # (the graph's order, main's argument -> its place)
        self._settleable = self.checks is not None and all(s.magnitude >= 0 for s in self.checks.settled)
        self._bounded_outputs = [(k, bound) for k, bound in enumerate(self.checks.outputs) if bound is not None] \
            if self.checks is not None else []
        self.in_types = [(tuple(shape), dtype) for shape, dtype in in_types]
        # torch-xla compiles and runs no graph without inputs ("Check failed: !inputs.empty()");
        # dynamo gives the backend such graphs (code that only makes constants, after a graph
        # break), which openxla runs: the module takes one unused int32 scalar instead
        self._anchor = None
        if not self.in_types:
            module_text = _with_anchor_argument(module_text)
            self.in_types = [((), torch.int32)]
            with _xc.device_data_transfers():   # device data, not a constant of the graph
                self._anchor = MAGNITUDES.note(torch.zeros((), dtype=torch.int32).to(device), 0)
        self.device = device
        self.device_str = str(device)
        built = []

        def build() -> _share.Compiled:
            name = f"x64guard_{next(_PROGRAM_IDS)}"
            compiled = _share.Compiled(name, _xc.computation_from_proto(name, _xc.stablehlo_to_hlo_proto(module_text)))
            self._compile(compiled)
            built.append(compiled)
            return compiled

        # a module identical to a live program's but for locations (`share_key`, x64guard/
        # torch_xla/share.py): that program, compiled once
        self._compiled = _share.shared(share_key, build)
        if counted:
            COUNTERS["programs" if built else "programs_shared"] += 1

    name = property(lambda self: self._compiled.name)
    # the graph's parameter order, of the module's parameters (none for an anchored program:
    # its one parameter is x64guard's, not the caller's)
    order = property(lambda self: [] if self._anchor is not None else self._compiled.order)
    out_dtypes = property(lambda self: self._compiled.out_dtypes)
    hlo = property(lambda self: self._compiled.hlo)
    graph = property(lambda self: self._compiled.graph)

    def _compile(self, compiled: _share.Compiled) -> None:
        placeholders = [_xc.placeholder(shape, dtype) for shape, dtype in self.in_types]
        outputs = _xc.call_computation("xla::" + compiled.name, placeholders, compiled.computation)
        order_ids, _ = _xc.graph_inputs(outputs)
        index = {_xc.tensor_id(p): k for k, p in enumerate(placeholders)}
        compiled.order = [index[i] for i in order_ids]
        compiled.out_dtypes = [o.dtype for o in outputs]
        compiled.hlo = _xc.hlo_text(outputs)
        compiled.graph = _xc.graph_hash(outputs)
        _xc.warm_up(outputs)

    def run(self, ordered: list[torch.Tensor]) -> list[torch.Tensor]:
        """Run on XLA tensors given in the graph's parameter order (`self.order[j]` is the
        module parameter that graph parameter j takes)."""
        if self._anchor is not None:
            ordered = [self._anchor]
        pending = _xc.needs_materialization(ordered)
        if True in pending:  # lazy inputs: execute their own graphs first, as torch-xla's dynamo backend does
            _outside.materialize_inputs([t for t, p in zip(ordered, pending) if p], self.device_str)
        try:
            results = _xc.run_cached(self.graph, ordered)
        except RuntimeError as exc:  # evicted from torch-xla's computation cache: compile again
            if "cache" not in str(exc).lower() and "not found" not in str(exc).lower():
                raise
            self._compile(self._compiled)
            results = _xc.run_cached(self.graph, ordered)
        if self.checks is not None:
            flags = results.pop()
            magnitude_of = self._magnitude_of(ordered)
            # no check can fire on this call, from the magnitudes of the inputs their ops
            # read (magnitudes.py): the flags are not read, and the call does not wait
            if not (self._settleable and self.checks.settled_by(magnitude_of)):
                _raise_on_overflow(self.checks, flags)
            for k, bound in self._bounded_outputs:
                magnitude = bound.given(magnitude_of)
                if magnitude is not None:    # (an integer result's, for the programs it feeds)
                    MAGNITUDES.note(results[k], magnitude)
        return results

    def _magnitude_of(self, ordered: list[torch.Tensor]):
        """main's argument number -> the magnitude noted for its tensor on this call."""
        order = self.order
        if self._positions[0] is not order:     # (the graph's order is set again by a recompile)
            self._positions = (order, {n: j for j, n in enumerate(order)})
        position = self._positions[1]
        seen: dict[int, "int | None"] = {}

        def magnitude_of(n: int) -> "int | None":
            if n not in seen:
                j = position.get(n)
                seen[n] = None if j is None or j >= len(ordered) else MAGNITUDES.of(ordered[j])
            return seen[n]

        return magnitude_of


def _with_anchor_argument(module_text: str) -> str:
    """`module_text` with one more, unused, argument: an int32 scalar (`Program`'s anchor)."""
    from x64guard.io import modules as xmlir
    from x64guard.passes.ir_queries import main_function
    from x64guard.passes.rewriter import Rewriter

    module, _ = xmlir.load(module_text, trusted=True)
    main = main_function(module)
    rewriter = Rewriter()
    ir = xmlir.ir
    with module.context, ir.Location.unknown():
        block = main.regions[0].blocks[0]
        rewriter.add_argument(block, ir.RankedTensorType.get([], ir.IntegerType.get_signless(32)),
                              ir.Location.unknown())
        function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        rewriter.set_function_type(main, [a.type for a in block.arguments], function_type.results)
        if "arg_attrs" in main.attributes:   # one dictionary per argument
            attrs = list(ir.ArrayAttr(main.attributes["arg_attrs"])) + [ir.DictAttr.get({})]
            rewriter.set_attribute(main, "arg_attrs", ir.ArrayAttr.get(attrs))
    return xmlir.to_text(module)


def _raise_on_overflow(checks: OverflowChecks, flags: torch.Tensor) -> None:
    """Raise, before any result is returned, when a checked int64 op of the program left
    int32's range on this call (eager PyTorch would have computed it at int64)."""
    COUNTERS["overflow_reads"] += 1
    with xla_metrics.own_compiles():
        hit = flags.cpu().reshape(-1).tolist()
    if not any(hit):
        return
    places = [describe(checks.locations[k]) for k, flag in enumerate(hit) if flag]
    message = (f"int64 arithmetic at {places[0]}" + (f" (and {len(places) - 1} more place(s))" if len(places) > 1
                                                     else "") +
               " produced a value int32 cannot hold on this call; eager PyTorch computes it at int64, and the "
               "narrowed program would have wrapped. x64guard refuses rather than return a different answer. "
               "Keep the values in int32's range (a hash: reduce the operands modulo the table size first), "
               "compute this in a float dtype, or run the graph in 64 bits (mode='allow')")
    findings = [Finding(Kind.INTEGER_OVERFLOW, Severity.ERROR, "arithmetic", place, message) for place in places[:1]]
    raise X64GuardError(f"x64guard.torch_xla: {message}", findings)

"""Tracing: a graph traced with torch-xla at full width, its StableHLO narrowed and
compiled (a Specialization), and each later call's inputs and outputs."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, NamedTuple, Sequence

import torch
from torch.utils import _pytree as pytree

from x64guard.api import NarrowResult
from x64guard.findings import Kind
from x64guard.modes import Mode
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla import outside as _outside
from x64guard.torch_xla import share as _share
from x64guard.torch_xla.base import COUNTERS, NARROW_DTYPE
from x64guard.torch_xla.boundary import BOUNDARY, narrow_alias, to_program_input, narrow_through_host
from x64guard.torch_xla.failures import refusal, torch_xla_failures, TraceWatch
from x64guard.torch_xla.narrowing import narrow_lowered
from x64guard.torch_xla.lowering import read_lowering
from x64guard.passes.overflow_checks import guard
from x64guard.torch_xla.program import Program
from x64guard.torch_xla.repairs import TorchXlaRepairs
from x64guard.torch_xla.rng import RngStates, openxla_next_seed
from x64guard.torch_xla.source import SourceMap, node_source


@dataclasses.dataclass
class ParameterSource:
    """Where one parameter of the narrowed program comes from on each call."""

    kind: str            # "arg" (the graph's i-th input), "attr" (a tensor attribute of the graph), "const",
    #                      "rng" (the generators' states, from torch-xla's seed)
    index: int = -1
    name: str = ""
    value: Any = None    # "const": the narrowed constant, on the device; "rng": the RngStates
    path: str = ""


class _PlanStep(NamedTuple):
    """One parameter of the compiled graph, in the graph's order, as a call fills it."""

    kind: int            # _ARG, _CONST, _ATTR or _RNG
    payload: Any         # _ARG: the input's index; _CONST: the tensor; _ATTR: the attribute's name; _RNG: RngStates
    dtype: torch.dtype   # what the program takes
    path: str            # the parameter's name, for messages


class _OutputLeaf(NamedTuple):
    """One leaf of the graph's output structure."""

    kind: str            # "tensor": the program's value-th output; "value": `value` itself (not a tensor)
    value: Any


class _Owner(NamedTuple):
    """Whose device buffer a parameter of the lowered module reads."""

    kind: str            # "arg" (a graph input) or "attr" (a tensor attribute of the graph)
    key: Any             # the input's index, or the attribute's name


@dataclasses.dataclass
class Specialization:
    """One traced, narrowed and compiled graph, and how to call it."""

    program: Program | None       # None when the graph returns no tensor
    sources: list[ParameterSource]
    dtypes: list[torch.dtype]       # what each program parameter takes
    out_spec: Any
    out_leaves: list[_OutputLeaf]
    result: NarrowResult | None     # the core's NarrowResult: .text, .findings, .changes
    stablehlo: str = ""             # torch-xla's StableHLO of the graph, before narrowing
    plan: list[_PlanStep] = dataclasses.field(default_factory=list)   # per graph parameter, in the graph's order
    flat_tuple: bool = False        # the outputs are a flat tuple of the program's tensors, in order
    rng: RngStates | None = None    # the random-number generators' states, when the graph draws any

    def prepare(self) -> "Specialization":
        """The steady-state form of `sources`: one _PlanStep per parameter of the compiled
        graph, in the graph's order; and whether outputs need no unflattening."""
        order = self.program.order if self.program is not None else range(len(self.sources))
        kinds = {"arg": _ARG, "const": _CONST, "attr": _ATTR, "rng": _RNG}
        self.plan = []
        for k in order:
            source, dtype = self.sources[k], self.dtypes[k]
            payload = {"arg": source.index, "const": source.value, "attr": source.name,
                       "rng": source.value}[source.kind]
            self.plan.append(_PlanStep(kinds[source.kind], payload, dtype, source.path))
        spec = self.out_spec
        self.flat_tuple = (spec is not None and spec.type is tuple and all(c.is_leaf() for c in spec.children_specs)
                           and [v for _, v in self.out_leaves] == list(range(len(self.out_leaves)))
                           and all(kind == "tensor" for kind, _ in self.out_leaves))
        return self


_ARG, _CONST, _ATTR, _RNG = 0, 1, 2, 3


TRACE_LOCK = threading.RLock()   # torch-xla's tracing state (and its process-wide flags) is process-wide


def trace_graph(run: Callable[[list], Any], args: Sequence, paths: Sequence[str], attrs: dict[str, torch.Tensor],
                mode: Mode, overflow: str, device: torch.device, *, expected: Sequence | None = None,
                nodes: Sequence[torch.fx.Node] | None = None, path: str = "backend", target: str = "x32"
                ) -> Specialization:
    with TRACE_LOCK, torch_xla_failures(path, "handling the graph's inputs or outputs"):
        # (torch-xla's own exceptions outside the trace and the lowering, e.g. its replacement
        # GRU's inputs that are no XLA tensors, come as TorchXlaFailure too)
        return _trace_locked(run, args, paths, attrs, mode, overflow, device, expected, nodes, path, target)


@dataclasses.dataclass
class _TraceInputs:
    """The graph's inputs as the trace takes them, and whose buffers they are."""

    positions: list[int]                 # which inputs are tensors
    paths: Sequence[str]
    trace_args: list                     # what `run` is called with
    bases: dict[int, torch.Tensor]       # per tensor input: the device data it is traced on
    owners: dict[str, _Owner]            # device buffer id -> whose it is
    before: dict[int, tuple] = dataclasses.field(default_factory=dict)   # data ids before the trace

    def path_of(self, i: int) -> str:
        return self.paths[i] if i < len(self.paths) else f"input {i}"


def _trace_locked(run: Callable[[list], Any], args: Sequence, paths: Sequence[str], attrs: dict[str, torch.Tensor],
                  mode: Mode, overflow: str, device: torch.device, expected: Sequence | None,
                  nodes: Sequence[torch.fx.Node] | None, path: str, target: str) -> Specialization:
    """Trace `run(args)` with torch-xla at full width, narrow its StableHLO, compile it.

    Tensor inputs are traced on device data of their own (`_trace_inputs`). Each
    parameter of the lowered module is then matched to its owner by device buffer
    (`_parameter_sources`). `nodes`, when the graph is run node by node from trampoline
    frames, places findings at the model's lines. `target`: the profile the core pass
    narrows for (`x64guard.narrow`'s).
    """
    device_str = str(device)
    keep_wide = mode is Mode.ALLOW
    inputs = _trace_inputs(args, paths, attrs, keep_wide, overflow, device, expected)
    outputs = _run_trace(run, inputs.trace_args, keep_wide, overflow, device_str, path)
    out_tensors, out_leaves, out_spec = _split_outputs(outputs, nodes)
    _refuse_mutated_inputs(inputs)
    if not out_tensors:
        return Specialization(None, [], [], out_spec, out_leaves, None).prepare()

    with torch_xla_failures(path, "lowering the graph"), _xc.python_frames_recorded():  # (read when lowering too)
        bytecode = _xc.stablehlo_bytecode(out_tensors, device_str)
    ids, values = _xc.graph_inputs(out_tensors)
    lowering = read_lowering(bytecode, ids, [t.dtype for t in out_tensors],
                             ". Draw the random numbers outside the compiled function and pass them in")
    if lowering.seed_index is not None:
        if lowering.rng is None:
            raise refusal(Kind.RNG_STATE_SOURCE, "graph", "torch-xla's RNG seed is an input of this graph but feeds "
                          "no random-number generator; x64guard would freeze its value. Please report this")
        del ids[lowering.seed_index], values[lowering.seed_index]
    sources_map = SourceMap(nodes) if nodes is not None else None
    if sources_map is not None:
        sources_map.relocate(lowering.module)
    checks = guard(lowering.module) if not keep_wide else None
    result = narrow_lowered(lowering.module, mode, overflow, sources_map, target)

    sources, dtypes, in_types = _parameter_sources(ids, values, args, inputs, lowering.rng, keep_wide, overflow,
                                                   device)
    del outputs, out_tensors, values, inputs     # the trace's tensors go before the compile
    with torch_xla_failures(path, "compiling the narrowed program"):
        program = Program(result.text, in_types, device, checks=checks,
                           share_key=_share.fingerprint(result.module, in_types, device_str))
    return Specialization(program, sources, dtypes, out_spec, out_leaves, result, lowering.text,
                          rng=lowering.rng).prepare()


def _trace_inputs(args: Sequence, paths: Sequence[str], attrs: dict[str, torch.Tensor], keep_wide: bool,
                  overflow: str, device: torch.device, expected: Sequence | None) -> _TraceInputs:
    """Each tensor input on device data of its own: an XLA tensor on an alias of its
    buffer (a clone shares it, so writes during the trace stay on the clone); a host
    tensor transferred once, narrowed on the host first when it is 64-bit (the trace
    widens it again inside the graph, a convert the core pass removes), so that no 64-bit
    data reaches the device. `expected[i]`, the dtype the graph was traced for, widens an
    input that arrives narrowed (AOTAutograd's saved tensors are our own 32-bit outputs).
    Owners: the inputs' buffers, then the graph's tensor attributes' (read again on every
    call)."""
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    inputs = _TraceInputs(positions, paths, list(args), {}, {})
    aliases = {i: narrow_alias(args[i]) for i in positions if args[i].device.type == "xla"} if not keep_wide \
        else {}
    lazy = [args[i] for i in positions if args[i].device.type == "xla" and aliases.get(i) is None]
    if lazy:
        flags = _xc.needs_materialization(lazy)
        _outside.materialize_inputs([t for t, pending in zip(lazy, flags) if pending], str(device))
    with _xc.device_data_transfers():
        for i in positions:
            a = args[i].detach()
            if aliases.get(i) is not None:
                base = aliases[i].clone()     # traced widened below, like a host input
            elif a.device.type == "xla":
                base = a.clone()
            elif not keep_wide and a.dtype in NARROW_DTYPE:
                base = narrow_through_host(a, NARROW_DTYPE[a.dtype], inputs.path_of(i), device, overflow)
            else:
                base = a.to(device)
            inputs.bases[i] = base
            buffer = _xc.buffer_id(base)
            if buffer is not None:
                inputs.owners.setdefault(buffer, _Owner("arg", i))
            want = a.dtype if a.device.type != "xla" or aliases.get(i) is not None else (
                expected[i] if expected and i < len(expected) else None)
            if want is not None and want is not base.dtype and NARROW_DTYPE.get(want) is base.dtype:
                inputs.trace_args[i] = base.to(want)     # a convert in the graph, removed by the core pass
            else:
                inputs.trace_args[i] = base
    for name, value in attrs.items():
        if value.device.type == "xla" and not _xc.needs_materialization([value])[0]:
            buffer = _xc.buffer_id(value)
            if buffer is not None:
                inputs.owners.setdefault(buffer, _Owner("attr", name))
    inputs.before = {i: (_xc.data_id(inputs.bases[i]), _xc.data_id(inputs.trace_args[i])) for i in positions}
    return inputs


def _run_trace(run: Callable[[list], Any], trace_args: list, keep_wide: bool, overflow: str, device_str: str,
               path: str) -> Any:
    """`run(trace_args)` under torch-xla's lazy tracing, with x64guard's repairs, watched
    for executions; the user's generator left as it was."""
    COUNTERS["traces"] += 1
    seed_before = _xc.rng_seed(device_str)
    try:
        repairs = TorchXlaRepairs(narrow_transfers=None if keep_wide else overflow, refuse_fallbacks=True)
        with torch_xla_failures(path, "tracing the graph"), torch.no_grad(), _xc.inline_scalars(), \
                _xc.python_frames_recorded(), repairs, TraceWatch():
            return run(trace_args)
    finally:
        if _xc.rng_seed(device_str) != seed_before:   # the trace drew: leave the user's generator as it was
            _xc.set_rng_seed(seed_before, device_str)


def _split_outputs(outputs: Any, nodes: Sequence[torch.fx.Node] | None
                   ) -> tuple[list[torch.Tensor], list[_OutputLeaf], Any]:
    """The traced outputs' XLA tensors, every leaf as an _OutputLeaf, and the structure."""
    leaves, out_spec = pytree.tree_flatten(outputs)
    out_tensors: list[torch.Tensor] = []
    out_leaves: list[_OutputLeaf] = []
    for position, leaf in enumerate(leaves):
        if isinstance(leaf, torch.Tensor):
            if leaf.device.type != "xla":
                # (a graph's CPU part runs on the CPU, x64guard/torch_xla/mixed.py: this one's
                # nodes carried no device in their metadata, so it was not recognised)
                raise refusal(Kind.CPU_OUTPUT, "output", f"the graph returns a {leaf.device.type} tensor "
                              f"({_output_origin(nodes, position, leaf)}) that x64guard could not place in the "
                              "graph's CPU part. Make that tensor on the device (device=x.device), or keep the "
                              "code that makes it out of the compiled function")
            out_leaves.append(_OutputLeaf("tensor", len(out_tensors)))
            out_tensors.append(leaf)
        else:
            out_leaves.append(_OutputLeaf("value", leaf))
    return out_tensors, out_leaves, out_spec


def _refuse_mutated_inputs(inputs: _TraceInputs) -> None:
    mutated = [inputs.path_of(i) for i in inputs.positions
               if (_xc.data_id(inputs.bases[i]), _xc.data_id(inputs.trace_args[i])) != inputs.before[i]]
    if mutated:
        raise refusal(Kind.INPUT_MUTATION, "graph", f"the graph writes to {', '.join(mutated)} in place (a buffer "
                      "update, e.g. BatchNorm in training mode, or a cache); x64guard does not write narrowed "
                      "results back into 64-bit tensors. Call model.eval() or keep the update outside the graph")


def _parameter_sources(ids: list, values: list, args: Sequence, inputs: _TraceInputs, rng: RngStates | None,
                       keep_wide: bool, overflow: str, device: torch.device
                       ) -> tuple[list[ParameterSource], list[torch.dtype], list[tuple[tuple[int, ...], torch.dtype]]]:
    """Each parameter of the lowered module matched to its owner by device buffer: a graph
    input, a tensor attribute of the graph, a constant the graph created (narrowed once),
    or torch-xla's RNG seed (whose arithmetic is taken out of the program:
    x64guard/torch_xla/rng.py); with what the program takes for it."""
    input_ids = {_xc.tensor_id(t) for i in inputs.positions for t in (args[i], inputs.bases[i], inputs.trace_args[i])
                 if t.device.type == "xla"}
    sources, dtypes, in_types = [], [], []
    for tensor_id, value in zip(ids, values):
        owner = inputs.owners.get(_xc.data_id(value))
        dtype = value.dtype if keep_wide else NARROW_DTYPE.get(value.dtype, value.dtype)
        if owner is None and tensor_id in input_ids:  # never freeze an input's value into the program
            raise refusal(Kind.INTERNAL, "graph", "x64guard could not tell which input feeds a parameter of the "
                          "lowered graph; refusing rather than freezing its first value. Please report this")
        if owner is None:
            where = "a constant of the graph"
            source = ParameterSource("const", value=_constant_input(value, dtype, where, device, overflow), path=where)
        elif owner.kind == "arg":
            source = ParameterSource("arg", index=owner.key, path=inputs.path_of(owner.key))
        else:
            source = ParameterSource("attr", name=owner.key, path=owner.key)
        sources.append(source)
        dtypes.append(dtype)
        in_types.append((tuple(value.shape), dtype))
    if rng is not None:   # the module's last parameter: every generator's state, as int32 words
        sources.append(ParameterSource("rng", value=rng, path="the random-number generators' states"))
        dtypes.append(torch.int32)
        in_types.append((rng.input_shape(), torch.int32))
    return sources, dtypes, in_types


def _output_origin(nodes: Sequence[torch.fx.Node] | None, position: int, leaf: torch.Tensor) -> str:
    """Which output a graph returns and the model line that made it, for messages."""
    what = f"output {position}, {str(leaf.dtype).removeprefix('torch.')}{list(leaf.shape)}"
    output = next((node for node in (nodes or ()) if node.op == "output"), None)
    if output is None:
        return what
    made = pytree.tree_leaves(output.args[0]) if output.args else []
    node = made[position] if position < len(made) else None
    if not isinstance(node, torch.fx.Node):
        return what
    source = node_source(node)
    return f"{what}, made at {source.describe()} by {source.target}"


def _constant_input(value: torch.Tensor, dtype: torch.dtype, where: str, device: torch.device,
                    overflow: str) -> torch.Tensor:
    """Device data the traced graph made itself, as the program takes it. torch-xla
    uploads some constants while it traces (the int64 index tables of its `as_strided`
    lowering, for one); a 64-bit one is read back once and narrowed on the host (with the
    overflow policy of constants), never cast by a 64-bit graph on the device."""
    if value.dtype is dtype:
        return value
    return narrow_through_host(value, dtype, where, device, overflow)


def rng_words(rng: RngStates, device: torch.device, device_str: str) -> torch.Tensor:
    """The generators' states for this call, from torch-xla's running seed (a host value),
    then the seed advanced as torch-xla's own dynamo bridge advances it after a call."""
    seed = _xc.rng_seed(device_str)
    words = torch.from_numpy(rng.words(seed)).to(device)
    _xc.set_rng_seed(openxla_next_seed(seed), device_str)
    return words


def program_inputs(spec: Specialization, args: Sequence, attr: Callable[[str], torch.Tensor] | None,
                   device: torch.device, device_str: str) -> list[torch.Tensor]:
    """The program's inputs for one call, in the compiled graph's order. The steady state
    takes two fast paths: an XLA tensor already of the program's dtype goes through as
    it is, and a 64-bit XLA tensor whose narrowed copy is cached for its current device
    data (a parameter) costs one identity lookup."""
    inputs = []
    append = inputs.append
    entries = BOUNDARY.entries
    data_id = _xc.data_id_function()
    for kind, payload, dtype, path in spec.plan:
        if kind == _CONST:
            append(payload)
            continue
        if kind == _RNG:
            append(rng_words(payload, device, device_str))
            continue
        x = args[payload] if kind == _ARG else attr(payload)
        if isinstance(x, torch.Tensor) and x.is_xla:
            if x.dtype is dtype:
                append(x)
                continue
            entry = entries.get(id(x))
            if entry is not None and entry.ref() is x and entry.data == data_id(x):
                append(entry.narrowed)
                continue
        append(to_program_input(x, dtype, path, device, device_str))
    return inputs


def outputs_from(spec: Specialization, tensors: list[torch.Tensor]):
    if spec.flat_tuple:
        return tuple(tensors)
    leaves = [tensors[v] if kind == "tensor" else v for kind, v in spec.out_leaves]
    return pytree.tree_unflatten(leaves, spec.out_spec)

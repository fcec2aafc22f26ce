"""`narrow_exported`: a torch.export program lowered by torch-xla, narrowed, and run on
the XLA device."""

from __future__ import annotations


import torch
from torch.utils import _pytree as pytree

from x64guard.api import NarrowResult
from x64guard.findings import Finding, Kind
from x64guard.modes import Mode, resolve_mode, resolve_overflow
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.base import COUNTERS, NARROW_DTYPE, xla_device
from x64guard.torch_xla.boundary import to_program_input
from x64guard.torch_xla.failures import refusal, torch_xla_failures
from x64guard.torch_xla.source import run_node_by_node
from x64guard.torch_xla.tracing import outputs_from, program_inputs, ParameterSource, Specialization, trace_graph


class NarrowedProgram:
    """What `narrow_exported` returns: callable like the exported program's module
    (its user inputs in, its output structure out), running the narrowed StableHLO on
    the XLA device. Inputs may be CPU or XLA tensors (64-bit ones are cast, integers
    range-checked); outputs are 32-bit XLA tensors (mode allow: full width)."""

    def __init__(self, spec: Specialization, in_spec, examples: list, device: torch.device):
        self._spec = spec
        self._in_spec = in_spec
        self._n_inputs = len(examples)
        # What each user input must be: the program was traced for these shapes and dtypes.
        self._expected = [(tuple(e.shape), e.dtype) if isinstance(e, torch.Tensor) else None for e in examples]
        self._device = device
        self._device_str = str(device)

    @property
    def original_text(self) -> str:
        """torch-xla's StableHLO of the program, before narrowing."""
        return self._spec.stablehlo

    @property
    def result(self) -> NarrowResult | None:
        return self._spec.result

    @property
    def text(self) -> str:
        """The narrowed StableHLO module (text, with locations)."""
        return self._spec.result.text if self._spec.result is not None else ""

    @property
    def hlo(self) -> str:
        """The HLO torch-xla compiles and runs for each call."""
        return self._spec.program.hlo if self._spec.program is not None else ""

    @property
    def findings(self) -> list[Finding]:
        return self._spec.result.findings if self._spec.result is not None else []

    @property
    def changes(self) -> dict[str, int]:
        return self._spec.result.changes if self._spec.result is not None else {}

    def __call__(self, *args, **kwargs):
        flat = pytree.tree_flatten((args, kwargs))[0]
        if len(flat) != self._n_inputs:
            raise TypeError(f"x64guard.torch_xla: the exported program takes {self._n_inputs} input(s), got {len(flat)}")
        flat = [x if isinstance(x, torch.Tensor) else torch.as_tensor(x) for x in flat]
        for i, (x, expected) in enumerate(zip(flat, self._expected)):
            if expected is not None and (tuple(x.shape) != expected[0] or x.dtype not in (
                    expected[1], NARROW_DTYPE.get(expected[1], expected[1]))):
                raise ValueError(f"x64guard.torch_xla: input {i} is {x.dtype}{list(x.shape)}; the program was "
                                 f"exported and narrowed for {expected[1]}{list(expected[0])}")
        spec = self._spec
        if spec.program is None:
            return outputs_from(spec, [])
        inputs = program_inputs(spec, flat, None, self._device, self._device_str)
        tensors = spec.program.run(inputs)
        COUNTERS["calls"] += 1
        return outputs_from(spec, tensors)


def narrow_exported(exported_program, *, mode: "Mode | str | None" = None, overflow: str = "error",
                    target: str = "x32") -> NarrowedProgram:
    """Narrow a `torch.export` program lowered by torch-xla, and return a callable that
    runs it on the XLA device (`.text`: the narrowed StableHLO; `.findings`, `.changes`).

    The program is decomposed as torch-xla's StableHLO export decomposes it, traced on
    the XLA device at full width (with its example inputs' shapes) and lowered, without
    serialization; its parameters, buffers and constants are narrowed once, on the host,
    and kept on the device. mode: allow (keep 64-bit types), warn (narrow, one
    X64GuardWarning), error (refuse any 64-bit use); default: x64guard's current mode.
    """
    resolved = resolve_mode(mode)
    policy = resolve_overflow(overflow).value
    with torch_xla_failures("narrow_exported", "decomposing the exported program"):
        decomposed = _xc.decompose_exported(exported_program)   # functional: writes become outputs
    signature = decomposed.graph_signature
    mutated = list(signature.buffers_to_mutate.values()) + list(signature.user_inputs_to_mutate.values())
    if mutated:
        raise refusal(Kind.INPUT_MUTATION, "graph", f"the exported program writes to {', '.join(map(str, mutated))} "
                      "in place; x64guard does not write narrowed results back into 64-bit tensors. Export the "
                      "model in eval mode or without the in-place update")
    device = xla_device()
    user_inputs, flat, paths, state_positions, user_positions = _exported_inputs(decomposed)
    graph_module = decomposed.graph_module
    nodes = list(graph_module.graph.nodes)

    def run(args):
        interpreter = _xc.export_interpreter(graph_module, device)
        run_node_by_node(interpreter, nodes)   # findings at the model's lines
        try:
            return interpreter.run(*args, enable_io_processing=False)
        finally:
            interpreter.env.clear()

    spec = trace_graph(run, flat, paths, {}, resolved, policy, device, nodes=nodes, path="narrow_exported",
                       target=target)
    # Parameters, buffers and constants are narrowed once, from the host copies.
    for k, source in enumerate(spec.sources):
        if source.kind == "arg":
            if source.index in state_positions:
                spec.sources[k] = ParameterSource("const", value=to_program_input(
                    state_positions[source.index], spec.dtypes[k], source.path, device, str(device)), path=source.path)
            else:
                source.index = user_positions[source.index]
    spec.out_spec = _exported_out_spec(exported_program, spec)
    spec.prepare()
    return NarrowedProgram(spec, exported_program.call_spec.in_spec, user_inputs, device)


def _exported_inputs(decomposed) -> tuple[list, list, list[str], dict, dict]:
    """The decomposed program's example user inputs, and its flat inputs in the graph's
    order with their names: (user inputs, flat, paths, graph position -> the state tensor
    it takes, graph position -> user input index)."""
    from torch.export.graph_signature import InputKind

    state = {**decomposed.state_dict, **decomposed.constants}
    example_args, example_kwargs = decomposed.example_inputs or ((), {})
    user_inputs = pytree.tree_flatten((example_args, example_kwargs))[0]
    flat, paths, state_positions, user_positions = [], [], {}, {}
    for spec_in in decomposed.graph_signature.input_specs:
        if spec_in.kind == InputKind.USER_INPUT:
            user_positions[len(flat)] = len(user_positions)
            paths.append(f"input {len(user_positions) - 1} ({spec_in.arg.name})")
            flat.append(user_inputs[len(user_positions) - 1])
        elif spec_in.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            value = state[spec_in.target]
            state_positions[len(flat)] = value
            paths.append(spec_in.target)
            flat.append(value.detach())
        else:
            raise refusal(Kind.EXPORT_INPUT, str(spec_in.kind), f"the exported program takes a {spec_in.kind.name} "
                          "input, which x64guard does not pass")
    return user_inputs, flat, paths, state_positions, user_positions


def _exported_out_spec(exported_program, spec: Specialization):
    """The program's own output structure (the graph returns a flat tuple)."""
    out_spec = exported_program.call_spec.out_spec
    if out_spec is None or out_spec.num_leaves != len(spec.out_leaves):
        return spec.out_spec
    return out_spec

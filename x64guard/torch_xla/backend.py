"""The dynamo backend `x64guard` and `compile`: each FX graph dynamo (or AOTAutograd)
hands over runs as a narrowed program, cached per input signature."""

from __future__ import annotations

import functools
import threading
import weakref
from typing import Any, Callable, Sequence

import torch

from x64guard.errors import X64GuardError
from x64guard.findings import Finding
from x64guard.modes import Mode, resolve_mode, resolve_overflow
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla import mixed
from x64guard.torch_xla import outside as _outside
from x64guard.torch_xla.base import COUNTERS, BACKEND_NAME, xla_device
from x64guard.torch_xla.boundary import narrow_alias
from x64guard.torch_xla.failures import TorchXlaFailure, failed_before_trace
from x64guard.torch_xla.repairs import DECOMPOSITIONS, TorchXlaRepairs
from x64guard.torch_xla.source import run_node_by_node
from x64guard.torch_xla.tracing import outputs_from, program_inputs, Specialization, trace_graph


class _InferenceOnly(torch.autograd.Function):
    """Outputs of a graph compiled for inference, called with inputs that require grad
    (dynamo recompiles when grad mode or requires_grad change, so this is a safety net):
    their backward raises instead of silently giving no gradient."""

    @staticmethod
    def forward(ctx, anchor, *outputs):
        ctx.mark_non_differentiable(*[o for o in outputs if not (o.is_floating_point() or o.is_complex())])
        return tuple(o.detach() for o in outputs)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("x64guard.torch_xla: this graph was compiled for inference and cannot be differentiated; "
                           "call the compiled model with gradients enabled from the first call on")


def _placeholder_paths(gm: torch.fx.GraphModule) -> list[str]:
    """What to call each input in messages: dynamo's source (L['idx'],
    L['self']._modules['emb']._parameters['weight']) where known."""
    paths = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        source = getattr(node.meta.get("grapharg"), "source", None)
        try:
            paths.append(source.name() if source is not None else str(node.target))
        except Exception:  # noqa: BLE001 - a name is only for messages
            paths.append(str(node.target))
    return paths


def _placeholder_examples(gm: torch.fx.GraphModule) -> list:
    """Each input's example value: dynamo's `example_value`, AOTAutograd's `val`."""
    return [node.meta.get("example_value", node.meta.get("val")) for node in gm.graph.nodes
            if node.op == "placeholder"]


def _graph_attributes(gm: torch.fx.GraphModule) -> dict[str, torch.Tensor]:
    """Tensors the graph reads with get_attr (read again on every call, never frozen)."""
    found = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            try:
                value = _get_attr(gm, str(node.target))
            except AttributeError:
                continue
            if isinstance(value, torch.Tensor):
                found[str(node.target)] = value
    return found


def _key_positions(gm: torch.fx.GraphModule, args: tuple) -> list[int]:
    """Which inputs the cache key must look at: every non-tensor input, and every tensor
    whose example value in the graph has a symbolic (or unknown) shape."""
    examples = _placeholder_examples(gm)
    positions = []
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            positions.append(i)
            continue
        example = examples[i] if i < len(examples) else None
        shape = getattr(example, "shape", None)
        if shape is None or len(shape) != a.dim() or not all(isinstance(d, int) for d in shape):
            positions.append(i)
    return positions


def _get_attr(gm: torch.fx.GraphModule, name: str) -> torch.Tensor:
    value = gm
    for part in name.split("."):
        value = getattr(value, part)
    return value


def _run_located(gm: torch.fx.GraphModule) -> tuple[Callable[[list], Any], list[torch.fx.Node]]:
    """A function running `gm` node by node, each node from its own trampoline frame
    (x64guard/torch_xla/source.py), and the nodes in that order."""
    nodes = list(gm.graph.nodes)

    def run(args):
        interpreter = torch.fx.Interpreter(gm)
        run_node_by_node(interpreter, nodes)
        try:
            return interpreter.run(*args)
        finally:
            interpreter.env.clear()    # the trace's lazy tensors go now, not at the next collection

    return run, nodes


class _CompiledGraph:
    """What the backend runs for one FX graph (dynamo's, or one of AOTAutograd's forward
    and backward graphs): cached per input signature and mode; a call after the first
    with the same signature neither traces nor compiles.

    `role` says which graph it is ("graph", "forward", "backward", "inference");
    `paths`, what to call its inputs in messages (dynamo's sources by default)."""

    def __init__(self, gm: torch.fx.GraphModule, mode: Mode | None, overflow: str, *, role: str = "graph",
                 paths: Sequence[str] | None = None, target: str = "x32", findings: Sequence[Finding] = ()):
        self._gm = gm
        self._findings = list(findings)   # the graph's own (its CPU part's), before the narrowing's
        self._target = target
        self._mode = mode
        self._overflow = overflow
        self.role = role
        self._cache: dict[tuple, Specialization] = {}
        self._lock = threading.Lock()
        self._paths = list(paths) if paths is not None else _placeholder_paths(gm)
        self._attr = functools.partial(_get_attr, gm)
        # The dtype each input was traced for: AOTAutograd's graphs may get our narrowed outputs.
        self._expected = [getattr(e, "dtype", None) for e in _placeholder_examples(gm)]
        self.device = xla_device()
        self._device_str = str(self.device)
        self._key_positions: list[int] | None = None
        self._arity = -1

    def __call__(self, *args):
        mode = self._mode or resolve_mode(None)
        if mode is Mode.ALLOW:  # full width, as torch-xla runs it (with its repairs)
            with TorchXlaRepairs():
                return self._gm(*args)
        key = self._key(mode, args)
        spec = self._cache.get(key)
        if spec is None:
            with self._lock:
                spec = self._cache.get(key)
                if spec is None:
                    _outside.note_pending_inputs(args, self._paths, _is_alias)
                    run, nodes = _run_located(self._gm)
                    spec = trace_graph(run, args, self._paths, _graph_attributes(self._gm), mode, self._overflow,
                                       self.device, expected=self._expected, nodes=nodes, path="backend",
                                       target=self._target)
                    if spec.result is not None and self._findings:
                        spec.result.findings = self._findings + list(spec.result.findings)
                    self._cache[key] = spec
        if spec.program is None:
            return outputs_from(spec, [])
        inputs = program_inputs(spec, args, self._attr, self.device, self._device_str)
        tensors = spec.program.run(inputs)
        COUNTERS["calls"] += 1
        _outside.note_graph_call()
        if self.role == "graph" and torch.is_grad_enabled():
            anchor = next((a for a in args if isinstance(a, torch.Tensor) and a.requires_grad), None)
            if anchor is not None:
                tensors = list(_InferenceOnly.apply(anchor, *tensors))
        return outputs_from(spec, tensors)

    def _key(self, mode: Mode, args: tuple) -> tuple:
        """The cache key: the mode, the values of non-tensor inputs (SymInts arrive as
        ints), and the shapes of the tensors whose shapes dynamo left symbolic (dynamo's
        guards already pin every tensor's dtype and device, and its static shapes); in
        AOTAutograd's graphs, also each tensor's dtype (a saved tensor may arrive narrowed)."""
        positions = self._key_positions
        if positions is None or len(args) != self._arity:
            positions = self._key_positions = _key_positions(self._gm, args)
            self._arity = len(args)
        key = (mode, *[a.shape if isinstance(a, torch.Tensor) else (type(a), a) for a in map(args.__getitem__,
                                                                                           positions)])
        if self.role != "graph":
            key += tuple(a.dtype for a in args if isinstance(a, torch.Tensor))
        return key

    def specializations(self) -> list[Specialization]:
        """One per input signature and mode seen so far (`.program.hlo`, `.result`)."""
        return list(self._cache.values())


class _MixedDeviceGraph:
    """A graph with a CPU part (x64guard/torch_xla/mixed.py): the CPU part runs eagerly
    on the CPU, the XLA part narrowed (`xla`, a _CompiledGraph taking the CPU values it
    uses as inputs); or, when the CPU part reads an XLA value, its refusal, raised on
    every call (mode allow runs the graph as torch-xla would)."""

    def __init__(self, gm: torch.fx.GraphModule, role: str, mode: Mode | None, part=None,
                 xla: _CompiledGraph | None = None, refusal: X64GuardError | None = None):
        self._gm, self.role, self._mode = gm, role, mode
        self._part, self.xla, self._refusal = part, xla, refusal
        self.findings = list(part.findings) if part is not None else list(refusal.findings)

    def __call__(self, *args):
        if self._refusal is not None:
            if (self._mode or resolve_mode(None)) is Mode.ALLOW:
                with TorchXlaRepairs():
                    return self._gm(*args)
            raise self._refusal
        return self._part.run(self.xla, args)

    def specializations(self) -> list[Specialization]:
        return self.xla.specializations() if self.xla is not None else []


def _graph_for(gm: torch.fx.GraphModule, mode: Mode | None, overflow: str, *, role: str = "graph",
               paths: Sequence[str] | None = None, target: str = "x32"):
    """What the backend runs for one FX graph: a _CompiledGraph, or, when the graph
    computes on the CPU too, a _MixedDeviceGraph around one (both registered)."""
    try:
        part = mixed.split(gm)
    except X64GuardError as refusal:
        return _MixedDeviceGraph(gm, role, mode, refusal=refusal)
    if part is None:
        graph = _CompiledGraph(gm, mode, overflow, role=role, paths=paths, target=target)
        _register_graph(graph)
        return graph
    paths = list(paths if paths is not None else _placeholder_paths(gm)) + part.feed_paths
    xla = _CompiledGraph(part.xla_gm, mode, overflow, role=role, paths=paths, target=target, findings=part.findings)
    _register_graph(xla)
    return _MixedDeviceGraph(gm, role, mode, part, xla)


_COMPILED_GRAPHS: list[weakref.ref] = []   # in the order the backend compiled them


def _is_alias(x: torch.Tensor) -> bool:
    return narrow_alias(x) is not None


def _register_graph(graph: _CompiledGraph) -> None:
    _COMPILED_GRAPHS[:] = [ref for ref in _COMPILED_GRAPHS if ref() is not None] + [weakref.ref(graph)]


_MUTATING_NAMES = frozenset({"setitem", "__setitem__", "set_", "copy_", "resize_", "index_put_"})


def _mutates(gm: torch.fx.GraphModule) -> bool:
    """Whether dynamo's graph may write to a tensor in place (an in-place method or
    function, `inplace=True`, item assignment). Conservative: a graph that mutates only
    its own intermediates also goes the AOTAutograd way, which handles both."""
    for node in gm.graph.nodes:
        if node.op not in ("call_method", "call_function"):
            continue
        name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
        if (name.endswith("_") and not name.endswith("__")) or name in _MUTATING_NAMES or \
                node.kwargs.get("inplace") is True:
            return True
    return False


def _autograd_backend(gm: torch.fx.GraphModule, example_inputs: Sequence, mode: Mode | None, overflow: str,
                      target: str = "x32"):
    """The graph through AOTAutograd, as torch-xla's own `openxla` backend goes (its
    forward, backward and inference graphs each narrowed like any graph): what training
    needs, and what applies in-place updates of inputs (optimizer steps, BatchNorm's
    running statistics) by writing the graph's results back into them."""
    from functorch.compile import make_boxed_func

    dynamo_paths = _placeholder_paths(gm)

    def paths_for(fx: torch.fx.GraphModule, role: str) -> list[str]:
        names = [str(node.target) for node in fx.graph.nodes if node.op == "placeholder"]
        out = []
        for name in names:
            if name.startswith("primals_") and name[8:].isdigit() and int(name[8:]) <= len(dynamo_paths):
                out.append(dynamo_paths[int(name[8:]) - 1])
            elif name.startswith("arg") and "_" in name and role == "inference":
                position = name[3:].split("_", 1)[0]
                out.append(dynamo_paths[int(position)] if position.isdigit() and int(position) < len(dynamo_paths)
                           else name)
            else:
                out.append(f"{name} (an input of the {role} graph)")
        return out

    def compiler(role: str):
        def compile_graph(fx: torch.fx.GraphModule, examples: Sequence):
            return make_boxed_func(_graph_for(fx, mode, overflow, role=role, paths=paths_for(fx, role),
                                              target=target))

        return compile_graph

    try:
        return _xc.aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                            inference_compiler=compiler("inference"), decompositions=DECOMPOSITIONS)(gm, example_inputs)
    except (X64GuardError, TorchXlaFailure):
        raise
    except Exception as exc:  # noqa: BLE001 - handed to the caller as a TorchXlaFailure, with its cause
        failure = failed_before_trace(exc, "AOTAutograd", _openxla_verdict(gm, example_inputs))
        failure.__cause__ = exc
        return _raising(failure)


def _openxla_verdict(gm: torch.fx.GraphModule, example_inputs: Sequence) -> str:
    """What torch-xla's own backend makes of the same graph: a failure there is torch-xla's
    (or PyTorch's), not x64guard's."""
    try:
        _xc.dynamo_backend("openxla")(gm, example_inputs)
    except Exception as exc:  # noqa: BLE001 - its verdict, reported
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        return (f"torch-xla's own backend fails on the same graph too ({type(exc).__name__}: {first[:200]}): a "
                "torch-xla or PyTorch limit. Workaround: keep that code out of the compiled function "
                "(torch._dynamo.disable), or run it eagerly")
    return ("torch-xla's own backend (openxla) compiles the same graph: please report this to x64guard; meanwhile "
            "keep that code out of the compiled function (torch._dynamo.disable)")


def _raising(failure: Exception) -> Callable:
    """What dynamo runs for a graph that could not be compiled: each call raises `failure`
    (raised inside the backend, dynamo would wrap it as BackendCompilerFailed)."""
    def failed(*args):
        raise failure

    return failed


def backend(gm: torch.fx.GraphModule, example_inputs: Sequence, *, mode: "Mode | str | None" = None,
            overflow: str = "error", options: dict | None = None, target: str = "x32") -> Callable:
    """The dynamo backend `x64guard`: `torch.compile(model, backend="x64guard")`.

    mode: allow (run the graph at full width, as torch-xla does), warn (narrow; one
    X64GuardWarning per graph), error (refuse any 64-bit use). None: the mode in force
    at each call (x64guard.mode / set_mode / $X64GUARD_MODE, else warn).
    `torch.compile(..., backend="x64guard", options={"mode": "error", "overflow": "saturate"})`
    passes them through torch.compile. target: the profile narrowed for (`x64guard.narrow`'s;
    "neuron-trn2" reports what neuronx-cc would still reject), an option too.

    Graphs that need gradients (an input requires grad and grad mode is on) or write to
    their inputs in place (an optimizer step) go through AOTAutograd, as torch-xla's
    `openxla` backend does; its forward and backward graphs are each narrowed. Other
    graphs run as dynamo captured them.
    """
    options = dict(options or {})
    mode = options.pop("mode", mode)
    overflow = options.pop("overflow", overflow)
    target = options.pop("target", target)
    if options:
        raise TypeError(f"x64guard backend: unknown option(s) {sorted(options)}; it takes 'mode', 'overflow' "
                        "and 'target'")
    _outside.arm()
    _outside.note_graph()
    resolved = None if mode is None else resolve_mode(mode)
    policy = resolve_overflow(overflow).value
    needs_grad = torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad
                                                 for x in example_inputs)
    if needs_grad or _mutates(gm):
        return _autograd_backend(gm, example_inputs, resolved, policy, target)
    return _graph_for(gm, resolved, policy, target=target)


# dynamo's compile callbacks recognise frames compiled for it: RNN modules are traced there,
# and 64-bit work dynamo leaves outside the graphs is reported (outside.py)
backend._x64guard_backend = True


def compile(model: Callable, *, mode: "Mode | str | None" = None, overflow: str = "error", target: str = "x32",
            **compile_kwargs):
    """`torch.compile(model, backend="x64guard")` with x64guard's mode and overflow policy:
    the graphs dynamo captures run narrowed on the XLA device.

    Extra keyword arguments go to torch.compile (`fullgraph=True`, `dynamic=...`).
    """
    resolved = None if mode is None else resolve_mode(mode)
    policy = resolve_overflow(overflow).value

    def x64guard_backend(gm, example_inputs, **kwargs):
        return backend(gm, example_inputs, mode=resolved, overflow=policy, target=target, **kwargs)

    x64guard_backend._x64guard_backend = True
    _outside.arm()

    compiled = torch.compile(model, backend=x64guard_backend, **compile_kwargs)

    @functools.wraps(model if not isinstance(model, torch.nn.Module) else model.forward)
    def with_rnns(*args, **kwargs):
        # dynamo does not trace nn.RNN/LSTM/GRU by default: it runs them eagerly, at full
        # width, narrowed by nobody (an LSTM tagger: 0 graphs). Traced, they are narrowed.
        with torch._dynamo.config.patch(allow_rnn=True):
            return compiled(*args, **kwargs)

    with_rnns.compiled = compiled
    return with_rnns


def compiled_graphs() -> list[_CompiledGraph]:
    """The live graphs the backend compiled (for inspection: `.specializations()`,
    each with its `.program.hlo` and narrowing `.result`)."""
    return [graph for graph in (ref() for ref in _COMPILED_GRAPHS) if graph is not None]


def _register_backend() -> None:
    """`torch.compile(..., backend="x64guard")` works without importing x64guard when
    x64guard is installed (entry point `torch_dynamo_backends`); from a source tree
    without the entry point, importing this module registers it."""
    if BACKEND_NAME not in torch.compiler.list_backends(exclude_tags=()):   # names the entry points too
        _xc.register_dynamo_backend(BACKEND_NAME, backend)


_register_backend()

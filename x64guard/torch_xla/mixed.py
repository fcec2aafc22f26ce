"""Mixed-device graphs: the part of an FX graph that computes on the CPU runs on the CPU.

A model may make CPU tensors inside its forward (DeBERTa-v2's `torch.sqrt(torch.tensor(d,
dtype=torch.float))` attention scale, a `torch.tensor(...)` constant) and use them in XLA
ops; under AOTAutograd such a tensor is saved for the backward, so the forward graph
returns it. torch-xla's own `openxla` backend partitions the graph and runs its non-XLA
nodes eagerly. x64guard splits the graph in two, by the device of each node's value
(dynamo's `example_value`, AOTAutograd's `val`):

* the CPU part: nodes whose tensors are on the CPU, computed from constants, factories
  (`torch.tensor(...)`, `torch.rand(())`) and shapes, not from a tensor input (a host
  input is moved to the device narrowed, as before, with what is computed from it). It runs eagerly on the CPU on every call, exactly as PyTorch
  runs it (random draws included), at PyTorch's dtypes: a CPU tensor the graph returns
  is PyTorch's own, never narrowed, never on the device;
* the XLA part: the rest, traced, narrowed and compiled as any graph, with each CPU value
  it uses as one more input (moved to the device on every call, narrowed on the host
  and range-checked when it is 64-bit, as any host input is).

A CPU value computed from an XLA value is refused (`cpu-part`): it would need a read from
the device inside the graph, of a value the XLA part narrowed (a float64 result read back
at float32 precision, with PyTorch's float64 dtype). Read it after the call instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch.utils import _pytree as pytree

from x64guard.torch_xla.source import node_source
from x64guard.errors import X64GuardError
from x64guard.findings import Finding, Kind, Location, Severity

CPU, XLA, NO_TENSOR, UNKNOWN = "cpu", "xla", "none", "unknown"


@dataclasses.dataclass
class CpuPart:
    """A graph split by device: `cpu_gm(*args)` returns the CPU values (the feeds of the
    XLA part, then the CPU outputs); `xla_gm(*args, *feeds)` the rest, with None where
    the graph returns a CPU tensor. `leaves`: output position -> k, the k-th CPU output."""

    cpu_gm: torch.fx.GraphModule | None
    xla_gm: torch.fx.GraphModule
    feed_paths: list[str]
    feeds: int
    leaves: dict[int, int]
    out_spec: Any                   # the structure of the graph's output
    findings: list[Finding]

    def run(self, xla_call, args: tuple) -> Any:
        values = list(self.cpu_gm(*args)) if self.cpu_gm is not None else []
        result = xla_call(*args, *values[:self.feeds])
        leaves = self.out_spec.flatten_up_to(result)   # the graph's own output leaves, whatever their values
        for position, k in self.leaves.items():
            leaves[position] = values[self.feeds + k]
        return pytree.tree_unflatten(leaves, self.out_spec)


def device_of(node: torch.fx.Node, gm: torch.fx.GraphModule) -> str:
    """Where a node's tensors are: CPU, XLA (any XLA tensor), NO_TENSOR, or UNKNOWN."""
    if node.op == "get_attr":
        value = gm
        try:
            for part in str(node.target).split("."):
                value = getattr(value, part)
        except AttributeError:
            return UNKNOWN
    elif "val" in node.meta or "example_value" in node.meta:
        value = node.meta.get("val", node.meta.get("example_value"))
    else:
        return UNKNOWN
    tensors = [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]
    if not tensors:
        return NO_TENSOR if node.op != "get_attr" else UNKNOWN
    return CPU if all(t.device.type == "cpu" for t in tensors) else XLA


def _node_args(node: torch.fx.Node) -> list[torch.fx.Node]:
    return [a for a in pytree.tree_leaves((node.args, node.kwargs)) if isinstance(a, torch.fx.Node)]


def _refusal(node: torch.fx.Node, source: torch.fx.Node) -> X64GuardError:
    made, read = node_source(node), node_source(source)
    origin = f"the graph's input {source.target}" if source.op == "placeholder" else \
        f"made at {read.describe()} by {read.target}"
    message = (f"a CPU tensor made at {made.describe()} by {made.target} is computed from an XLA value ({origin}): "
               "that is a read from the device inside the graph, of a value "
               "x64guard narrowed. Read the value after the compiled call (return the XLA tensor and call .cpu() "
               "on the result), or make that tensor on the device")
    finding = Finding(Kind.CPU_PART, Severity.ERROR, made.target, _location(made), message)
    return X64GuardError(f"x64guard.torch_xla: {message}", [finding])


def _location(source) -> Location:
    if source.file:
        inside = f"{source.module_path} ({source.module_type})" if source.module_path else None
        return Location.source(source.file, source.line, None, inside)
    return Location.at("the traced graph")


def _host_nodes(gm: torch.fx.GraphModule, devices: dict) -> tuple[set, set]:
    """The nodes the CPU part computes (CPU tensors made from constants, factories and
    shapes; values without tensors made from inputs' shapes and such nodes), and among
    them those that hold CPU data (to be moved out of the XLA part).

    A CPU tensor computed from a tensor input stays in the XLA part, traced on the
    device as before: a host input is moved to the device narrowed, and what the graph
    computes from it is narrowed with the rest (x64guard's contract for host inputs)."""
    host, on_cpu, from_input = set(), set(), set()
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        args = _node_args(node)
        if devices[node] == CPU:
            read = next((a for a in args if devices[a] == XLA), None)
            if read is not None:
                raise _refusal(node, read)
            if any(a in from_input or devices[a] == UNKNOWN or (a.op == "placeholder" and devices[a] == CPU)
                   or (a.op != "placeholder" and a not in host) for a in args):
                from_input.add(node)        # (an input's, or unknown: left to the XLA part's trace)
                continue
            host.add(node)
            on_cpu.add(node)
        elif devices[node] == NO_TENSOR and node.op == "call_function" and \
                all(a in host or a.op == "placeholder" for a in args):
            host.add(node)                  # a shape or a number: copied where needed
            if any(a in on_cpu for a in args):
                on_cpu.add(node)            # made from CPU data (an .item()): moved
    return host, on_cpu


def split(gm: torch.fx.GraphModule) -> CpuPart | None:
    """The graph split by device, or None when it has no CPU part (nothing changes)."""
    devices = {node: device_of(node, gm) for node in gm.graph.nodes}
    host, on_cpu = _host_nodes(gm, devices)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    output = next(n for n in gm.graph.nodes if n.op == "output")
    out_nodes, out_spec = pytree.tree_flatten(output.args[0])
    cpu_outs = [p for p, n in enumerate(out_nodes) if isinstance(n, torch.fx.Node) and n in on_cpu]
    feeds = [n for n in on_cpu if any(u.op != "output" and u not in host for u in n.users)]
    feeds.sort(key=list(gm.graph.nodes).index)
    if not feeds and not cpu_outs:
        return None
    wanted = feeds + [out_nodes[p] for p in cpu_outs]
    cpu_gm = _cpu_module(gm, placeholders, wanted) if wanted else None
    xla_gm = _xla_module(gm, placeholders, feeds, on_cpu, out_nodes, out_spec, set(cpu_outs))
    leaves = {p: k for k, p in enumerate(cpu_outs)}
    findings = _findings([(out_nodes[p], f"output {p}") for p in cpu_outs], "returned as PyTorch computes it, "
                         "not narrowed")
    findings += _findings([(n, "") for n in feeds], "an input of the device program, moved to the device on "
                          "every call")
    paths = [f"the CPU tensor made at {node_source(n).describe()} by {node_source(n).target}" for n in feeds]
    return CpuPart(cpu_gm, xla_gm, paths, len(feeds), leaves, out_spec, findings)


def _findings(made: list[tuple[torch.fx.Node, str]], then: str) -> list[Finding]:
    """One info finding per model line, op and value: the outputs (or inputs of the
    device program) it made, and that it ran on the CPU."""
    groups: dict[tuple, list[str]] = {}
    for node, what in made:
        value = node.meta.get("val", node.meta.get("example_value"))
        kind = f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}" if isinstance(value, torch.Tensor) \
            else "a value"
        groups.setdefault((node_source(node), kind), []).append(what)
    findings = []
    for (source, kind), whats in groups.items():
        named = ", ".join(w for w in whats if w)
        what = f"{named} ({kind}, a CPU tensor)" if named else f"a CPU tensor ({kind})"
        findings.append(Finding(Kind.CPU_PART, Severity.INFO, source.target, _location(source),
                                f"{what} ran on the CPU, eagerly as PyTorch runs it; {then}", count=len(whats)))
    return findings


def _cpu_module(gm: torch.fx.GraphModule, placeholders: list, wanted: list) -> torch.fx.GraphModule:
    """The graph's inputs -> the wanted CPU values, and only what they need."""
    needed: set = set()
    stack = list(wanted)
    while stack:
        node = stack.pop()
        if node in needed or node.op == "placeholder":
            continue
        needed.add(node)
        stack.extend(_node_args(node))
    graph = torch.fx.Graph()
    env: dict = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder" or node in needed:
            env[node] = graph.node_copy(node, env.__getitem__)
    graph.output([env[n] for n in wanted])
    return torch.fx.GraphModule(gm, graph)


def _xla_module(gm: torch.fx.GraphModule, placeholders: list, feeds: list, on_cpu: set, out_nodes: list,
                out_spec, dropped: set) -> torch.fx.GraphModule:
    """The graph with each fed CPU value an input of its own, the CPU nodes gone, and
    None where a CPU tensor was returned."""
    graph = torch.fx.Graph()
    env: dict = {}
    graph.graph_copy(gm.graph, env)
    anchor = env[placeholders[-1]] if placeholders else None
    for node in feeds:
        with graph.inserting_after(anchor) if anchor is not None else graph.inserting_before(None):
            fed = graph.placeholder(f"cpu_{node.name}")
        fed.meta = dict(node.meta)
        env[node].replace_all_uses_with(fed)
        anchor = fed
    leaves = [None if p in dropped else (env[n] if isinstance(n, torch.fx.Node) else n)
              for p, n in enumerate(out_nodes)]
    graph.output(pytree.tree_unflatten(leaves, out_spec))
    for node in reversed(list(gm.graph.nodes)):
        if node in on_cpu and not env[node].users:
            graph.erase_node(env[node])
    graph.lint()
    return torch.fx.GraphModule(gm, graph)

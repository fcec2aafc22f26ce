"""Capturing the graphs torch.compile and torch.export make, and finding int64 in them."""

from __future__ import annotations

import torch


class Recorder:
    """A torch.compile backend that keeps Dynamo's FX graphs and runs them as they are."""

    def __init__(self):
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


class AotRecorder:
    """A torch.compile backend that keeps Dynamo's FX graph and the aten-level graphs AOT
    autograd makes of it (what inductor or a Neuron/XLA backend would compile), and runs
    the aten graphs."""

    def __init__(self):
        from torch._dynamo.backends.common import aot_autograd
        from torch._functorch.aot_autograd import make_boxed_func

        self.graphs: list[torch.fx.GraphModule] = []
        self.aten_graphs: list[torch.fx.GraphModule] = []

        def keep(gm, example_inputs):
            self.aten_graphs.append(gm)
            return make_boxed_func(gm.forward)

        self._aot = aot_autograd(fw_compiler=keep, bw_compiler=keep)

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return self._aot(gm, example_inputs)


def node_values(node: torch.fx.Node) -> list:
    value = node.meta.get("example_value", node.meta.get("val"))
    if isinstance(value, (tuple, list)):
        return list(value)
    return [value]


def int64_nodes(gm: torch.fx.GraphModule) -> list[str]:
    """Every node of the graph that holds an int64 tensor, as `op target`."""
    found = []
    for node in gm.graph.nodes:
        if any(isinstance(v, torch.Tensor) and v.dtype is torch.int64 for v in node_values(node)):
            found.append(f"{node.op} {node.target}")
    return found


def int64_in_graphs(graphs) -> list[str]:
    return [name for gm in graphs for name in int64_nodes(gm)]

"""Findings at the user's line: StableHLO ops of a torch-xla graph traced back to the FX
nodes that made them, and those to the model's Python source.

torch-xla records the Python stack of every IR node it creates while its IR debugging is
on (`_private.python_frames_recorded`), and its StableHLO lowering writes that
stack into each op's MLIR location (`callsite(... at ...)`). The FX graph is run node by
node, each node from a frame of its own: a one-line function compiled under the file
name TRAMPOLINE_FILE at line k + 1 for node k. An op whose location holds that frame was
made by node k, whose `stack_trace` names the model's line and whose `nn_module_stack` its
module path (`transformer.h.0.attn`).

`SourceMap.relocate` gives each op the location of its model line (so the core pass,
which reads the first file:line:col of a location, reports it, and the narrowed text
carries it), and `locate_findings` adds the module path to findings: the one place where
findings of the torch-xla front end are mapped to the model's source.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import types
from collections import defaultdict
from typing import Any, Callable, Sequence

import torch
from jax.extend.mlir import ir

import x64guard
from x64guard.findings import POSITION, SOURCE, Finding, Location
from x64guard.passes.rewriter import Rewriter
from x64guard.torch_xla import _private as _xc

TRAMPOLINE_FILE = "x64guard-fx-node"
_TRAMPOLINE_FRAME = re.compile(r'"' + re.escape(TRAMPOLINE_FILE) + r'":(\d+):')
_STACK_FRAME = re.compile(r'File "([^"]+)", line (\d+), in ([^\n]+)\n([^\n]*)')

# Frames in these directories are PyTorch's and x64guard's own, never the model's line.
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (torch, x64guard))


def _at_node(run, node): return run(node)  # noqa: E704 - one line: the call's line is the code's first line


@functools.lru_cache(maxsize=None)
def _trampoline(index: int) -> Callable[[Callable, Any], Any]:
    """`_at_node` with its code relocated to TRAMPOLINE_FILE, line index + 1 (nothing is
    compiled or evaluated: the same bytecode under another file name and first line)."""
    code = _at_node.__code__.replace(co_filename=TRAMPOLINE_FILE, co_firstlineno=index + 1)
    return types.FunctionType(code, _at_node.__globals__, "at_node")


def run_node_by_node(interpreter: torch.fx.Interpreter, nodes: Sequence[torch.fx.Node]) -> None:
    """Make `interpreter` run each node of `nodes` from its own trampoline frame.

    The interpreter's class is swapped for a subclass (made once per class) rather than
    its `run_node` replaced by a closure: a closure would hold the interpreter in a
    reference cycle, and with it every lazy tensor of the trace until the next garbage
    collection; torch_xla.sync() syncs such tensors too, and failed on the buffers
    torch-xla had donated meanwhile ("buffer ... is deleted")."""
    interpreter._x64guard_node_index = {node: k for k, node in enumerate(nodes)}
    interpreter.__class__ = _located_class(type(interpreter))


@functools.lru_cache(maxsize=None)
def _located_class(base: type) -> type:
    def run_node(self, node):
        return _trampoline(self._x64guard_node_index[node])(super(located, self).run_node, node)

    located = type(f"Located{base.__name__}", (base,), {"run_node": run_node})
    return located


@dataclasses.dataclass(frozen=True)
class NodeSource:
    """Where one FX node comes from in the model."""

    file: str | None
    line: int | None
    module_path: str            # "transformer.h.0.attn", "" at the top level
    module_type: str            # "GPT2Attention"
    target: str                 # "aten.view.default", "addmm"

    def describe(self) -> str:
        where = f"{self.file}:{self.line}" if self.file else "the traced graph"
        inside = f"{self.module_path} ({self.module_type})" if self.module_path else self.module_type
        return f"{where} [{inside}]" if inside else where


def node_source(node: torch.fx.Node) -> NodeSource:
    """The model line and module of an FX node, from dynamo's (or torch.export's)
    `stack_trace` and `nn_module_stack`."""
    file, line = _user_frame(node.meta.get("stack_trace") or "")
    path, kind = "", ""
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack") or {}
    if stack:
        path, kind = list(stack.values())[-1][:2]
        path = module_path(str(path))
        kind = getattr(kind, "__name__", None) or str(kind).rsplit(".", 1)[-1].rstrip("'>")
    target = node.target
    name = str(target) if not callable(target) else getattr(target, "__name__", str(target))
    if _xc.is_op_overload(target):
        name = str(target)
    return NodeSource(file, line, path, kind, name)


def _user_frame(stack_trace: str) -> tuple[str | None, int | None]:
    """The innermost frame outside PyTorch and x64guard (the model's own code, or the
    library code that builds it), else the innermost frame."""
    frames = [(m.group(1), int(m.group(2))) for m in _STACK_FRAME.finditer(stack_trace)]
    for file, line in reversed(frames):
        if not os.path.abspath(file).startswith(_LIBRARY_DIRS):
            return file, line
    return frames[-1] if frames else (None, None)


_DYNAMO_PART = re.compile(r"\._modules\['([^']+)'\]|\['([^']+)'\]|\[(\d+)\]")


def module_path(source: str) -> str:
    """dynamo's `L['self']._modules['transformer']._modules['h']._modules['0'].attn` ->
    `transformer.h.0.attn` (torch.export's paths already have that form)."""
    text = re.sub(r"^L\['self'\]|^L\['fn'\]|^self", "", source)
    text = _DYNAMO_PART.sub(lambda m: "." + (m.group(1) or m.group(2) or m.group(3)), text)
    return text.lstrip(".")


def _relocate(module: ir.Module, location_for: Callable[[str], "ir.Location | None"]) -> int:
    """Give each op the location `location_for` finds from its own (once per distinct
    location text); returns how many ops were relocated."""
    cache: dict[str, ir.Location | None] = {}
    count = 0
    rewriter = Rewriter()
    with module.context:
        def visit(op):
            nonlocal count
            text = str(op.location)
            if text not in cache:
                cache[text] = location_for(text)
            if cache[text] is not None:
                rewriter.set_location(op, cache[text])
                count += 1
            return ir.WalkResult.ADVANCE

        # The bindings' post-order walk, not the driver's pre-order one: the order in which
        # `location_for` first sees a line's FX nodes is the order of the module paths the
        # findings name (SourceMap.at_line).
        module.operation.walk(visit)
    return count


class SourceMap:
    """FX nodes of one traced graph, by trampoline line; relocates a module's ops."""

    def __init__(self, nodes: Sequence[torch.fx.Node]):
        self._nodes = list(nodes)
        self._sources: dict[int, NodeSource] = {}
        # "file:line" -> module paths and targets seen there (for findings)
        self.at_line: dict[tuple[str, int], list[NodeSource]] = defaultdict(list)

    def source(self, index: int) -> NodeSource | None:
        if not 0 <= index < len(self._nodes):
            return None
        found = self._sources.get(index)
        if found is None:
            found = self._sources[index] = node_source(self._nodes[index])
        return found

    def relocate(self, module: ir.Module) -> int:
        """Give every op made by a known FX node the location of its model line, named
        by its module path; returns how many ops were relocated."""
        return _relocate(module, self._location_for)

    def _location_for(self, text: str) -> "ir.Location | None":
        match = _TRAMPOLINE_FRAME.search(text)
        if match is None:
            return None
        source = self.source(int(match.group(1)) - 1)
        if source is None or source.file is None:
            return None
        seen = self.at_line[(source.file, source.line)]
        if source not in seen:
            seen.append(source)
        file_location = ir.Location.file(source.file, source.line, 0)
        return ir.Location.name(source.module_path or source.module_type or source.target, childLoc=file_location)


def locate_findings(findings: Sequence[Finding], sources: "SourceMap | None") -> list[Finding]:
    """Findings with their model line and module path(s): `modeling_gpt2.py:187
    [transformer.h.0.attn (GPT2Attention), transformer.h.1.attn (GPT2Attention)]`.
    Findings that the relocation already put at a model line (file:line:col) gain the
    module paths of the FX nodes behind that line; findings at the same line with the
    same message are merged (their counts summed)."""
    if sources is None:
        return list(findings)
    merged: dict[tuple, Finding] = {}
    for finding in findings:
        location = finding.location
        if location.origin == SOURCE and location.line is not None:
            seen = sources.at_line.get((location.file, location.line))
            if seen:
                modules = []
                for source in seen:
                    described = f"{source.module_path} ({source.module_type})" if source.module_path else \
                        source.module_type
                    if described and described not in modules:
                        modules.append(described)
                location = Location.source(location.file, location.line, None,
                                           ", ".join(modules) if modules else None)
        elif finding.op == "func.func" and location.origin == POSITION \
                and location.function is not None:
            location = Location.at("the graph's inputs and results")  # the signature: no op of the model made it
        key = (finding.kind, finding.severity, finding.op, location, finding.message)
        if key in merged:
            previous = merged[key]
            merged[key] = dataclasses.replace(previous, count=previous.count + finding.count)
        else:
            merged[key] = dataclasses.replace(finding, location=location)
    return list(merged.values())


_CALLSITE_FRAME = re.compile(r'"([^"]+)":(\d+):\d+')


class StackSourceMap:
    """For graphs traced from Python directly, with no FX graph (the lazy loop): torch-xla
    recorded the Python stack of each IR node (innermost frame first in the callsite
    location); each op gets the location of the innermost frame outside PyTorch, torch-xla
    and x64guard (the model's line, `modeling_opt.py:...` for library models). Used as a
    `SourceMap` by `locate_findings` (no module paths: `at_line` stays empty)."""

    def __init__(self, excluded: Sequence[str]):
        self._excluded = tuple(excluded) + _LIBRARY_DIRS
        self.at_line: dict[tuple[str, int], list[NodeSource]] = {}

    def relocate(self, module: ir.Module) -> int:
        return _relocate(module, self._location_for)

    def _location_for(self, text: str) -> "ir.Location | None":
        for file, line in _CALLSITE_FRAME.findall(text):
            if not os.path.abspath(file).startswith(self._excluded) and not file.startswith("<frozen"):
                return ir.Location.file(file, int(line), 0)
        return None

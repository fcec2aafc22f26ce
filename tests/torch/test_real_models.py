"""`set_default_int_dtype` on real models (the transformers and timm models of the
torch-xla suite, tests/torch_xla/real_models.py, on the CPU): how many int64 results the
aten graphs of a compiled forward still hold under `default_int_dtype(torch.int32)`, and
why each one is there.

Two ways in: ids as a tokenizer returns them (int64, made before the setting, which it
cannot reach), and the pattern docs/torch.md recommends: ids passed as int32 and the
model's int64 buffers (made before the setting too) converted to int32. Every int64
result that remains must be explained: the graph's own int64 inputs and what follows
from them, an explicit int64 request in library code (`dtype=torch.long`, `.long()`,
honoured by design), or an index aten only has in int64 (converted at once). The counts go
to RESULTS, printed at the end of the session and copied into docs/torch.md.
"""

from __future__ import annotations

import copy
import linecache
import os
import re

import pytest
import torch

import x64guard.torch as xt
from tests.torch.graphs import AotRecorder, node_values

pytest.importorskip("transformers")
pytest.importorskip("timm")

from tests.torch_xla.real_models import MODELS, RealModel, output_of  # noqa: E402

RESULTS: dict[str, dict[str, str]] = {}

# An int64 request written in the source line that made the node.
_EXPLICIT = re.compile(r"\b(?:torch\.long|torch\.int64|\.long\(\)|dtype=torch\.int|int64)\b")
# aten ops whose index results exist only in int64 (x64guard converts them to the default at once).
_INT64_ONLY_INDICES = {"sort", "topk", "max_pool2d_with_indices", "unique", "nonzero", "kthvalue", "mode",
                       "cummax", "cummin", "bincount", "multinomial", "searchsorted"}
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (torch, xt))


def _source_line(node: torch.fx.Node) -> tuple[str, str]:
    """(file:line, statement) of the innermost frame outside PyTorch and x64guard that made
    the node; a statement spread over several lines is read whole."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in [^\n]+\n([^\n]*)', node.meta.get("stack_trace") or "")
    for file, line, code in reversed(frames):
        if not os.path.abspath(file).startswith(_LIBRARY_DIRS):
            return f"{os.path.basename(file)}:{line}", _statement(file, int(line)) or code.strip()
    if not frames:
        return "?", ""
    return f"{os.path.basename(frames[-1][0])}:{frames[-1][1]}", frames[-1][2].strip()


def _statement(file: str, line: int) -> str:
    text = linecache.getline(file, line)
    k = line
    while text.count("(") > text.count(")") and k < line + 8:
        k += 1
        text += linecache.getline(file, k)
    return " ".join(text.split())


def _is_int64(node: torch.fx.Node) -> bool:
    return any(isinstance(v, torch.Tensor) and v.dtype is torch.int64 for v in node_values(node))


def _why(node: torch.fx.Node, reasons: dict[torch.fx.Node, str]) -> str:
    """Why an int64 result is there: an int64 input, an explicit int64 request in the
    source, an index aten has only in int64, or what it is computed from."""
    if node.op == "placeholder":
        return "int64 input"
    target = getattr(node.target, "__name__", str(node.target)).split(".")[0]
    if target in _INT64_ONLY_INDICES:
        return "aten index result (int64 only)"
    _, code = _source_line(node)
    if _EXPLICIT.search(code):
        return "explicit int64 in library code"
    sources = {reasons[a] for a in node.all_input_nodes if a in reasons}
    if "int64 input" in sources or "follows an int64 input" in sources:
        return "follows an int64 input"
    if sources:
        return "follows an explicit int64 request"
    return "unexplained"


def _int64_results(graphs: list[torch.fx.GraphModule]) -> list[tuple[torch.fx.Node, str]]:
    found = []
    for gm in graphs:
        reasons: dict[torch.fx.Node, str] = {}
        for node in gm.graph.nodes:
            if node.op == "output" or not _is_int64(node):
                continue
            reasons[node] = _why(node, reasons)
            found.append((node, reasons[node]))
    return found


def _trace(model: RealModel, built: torch.nn.Module, inputs: dict) -> tuple[list, torch.Tensor]:
    torch._dynamo.reset()
    recorder = AotRecorder()
    with xt.default_int_dtype(torch.int32), torch.no_grad():
        result = torch.compile(built, backend=recorder)(**inputs)
    return recorder.aten_graphs, output_of(model, result)


def _as_int32(inputs: dict) -> dict:
    return {k: v.to(torch.int32) if isinstance(v, torch.Tensor) and v.dtype == torch.int64 else v
            for k, v in inputs.items()}


def _int32_buffers(module: torch.nn.Module) -> torch.nn.Module:
    """The model's int64 buffers (position ids, relative-position indices, batch counts:
    made before any setting) as int32, as x64guard.torch_xla.to_device moves them."""
    for owner in module.modules():
        for name, buffer in list(owner._buffers.items()):
            if buffer is not None and buffer.dtype == torch.int64:
                owner._buffers[name] = buffer.to(torch.int32)
    return module


def _summary(results: list[tuple[torch.fx.Node, str]]) -> str:
    counts: dict[str, int] = {}
    for _, reason in results:
        counts[reason] = counts.get(reason, 0) + 1
    return f"{len(results)}" + (" (" + ", ".join(f"{n} {r}" for r, n in sorted(counts.items())) + ")"
                               if counts else "")


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_int64_results_under_default_int32_are_explained(model: RealModel):
    built = model.build().eval()
    stock = copy.deepcopy(built)
    inputs = model.inputs(0)
    with torch.no_grad():
        expected = output_of(model, stock(**inputs))

    graphs, got = _trace(model, copy.deepcopy(built), inputs)          # ids as tokenizers give them: int64
    as_given = _int64_results(graphs)
    torch.testing.assert_close(got, expected)                          # the setting changes no value
    pattern = _int32_buffers(copy.deepcopy(built))                      # the pattern: int32 ids and buffers
    graphs32, got32 = _trace(model, pattern, _as_int32(inputs))
    with_int32_ids = _int64_results(graphs32)
    torch.testing.assert_close(got32, expected)

    unexplained = [f"{n.target} at {_source_line(n)}" for n, why in with_int32_ids if why == "unexplained"]
    assert not unexplained, unexplained
    assert not [n for n, why in with_int32_ids if why in ("int64 input", "follows an int64 input")]
    assert len(with_int32_ids) <= len(as_given)
    explicit = sorted({f"{_source_line(n)[0]}: {_source_line(n)[1][:60]}" for n, why in with_int32_ids
                       if why == "explicit int64 in library code"})
    RESULTS[model.name] = {"int64 ids": _summary(as_given), "int32 ids and buffers": _summary(with_int32_ids),
                           "explicit int64 lines": "; ".join(explicit) or "-"}

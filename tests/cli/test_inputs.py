"""Reading inputs: format sniffing, directories, torch-xla graph dumps."""

import numpy as np
import pytest

from tests.cli import programs
from tests.cli.conftest import lower, run_cli
from x64guard.cli.inputs import Format, InputError, discover, function_name, read_units


def test_function_names_from_jax_module_names():
    assert function_name("jit_model") == "model"
    assert function_name("jit__mean") == "_mean"
    assert function_name("pmap_step") == "step"
    assert function_name("main") is None and function_name(None) is None


@pytest.mark.parametrize("name, fmt", [
    ("f64.mlir", Format.MLIR_TEXT), ("f64.mlirbc", Format.MLIR_BYTECODE),
    ("f64.portable.bc", Format.PORTABLE_ARTIFACT), ("f64.hlo.txt", Format.HLO_TEXT),
    ("f64.exported", Format.JAX_EXPORT),
])
def test_formats_are_recognised_by_content(artifacts, tmp_path, name, fmt):
    renamed = tmp_path / "no-suffix"
    renamed.write_bytes(artifacts[name].read_bytes())
    (unit,) = read_units(str(renamed))
    assert unit.format is fmt


def test_hidden_directories_and_other_files_are_skipped(tmp_path, artifacts):
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "a.mlir").write_text(artifacts["clean.mlir"].read_text())
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.mlir").write_text(artifacts["clean.mlir"].read_text())
    (tmp_path / "notes.txt").write_text("hello")
    assert discover([str(tmp_path)]) == [str(tmp_path / "sub" / "b.mlir")]
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no module files"):
        discover([str(tmp_path / "empty")])


def torch_xla_graph_file(graphs) -> str:
    """The layout torch-xla's XLA_SAVE_TENSORS_FILE uses (torch_xla/csrc/debug_util.cpp):
    `[title]`, `TensorsGraphInfo:` and the Python frames innermost first, the hashes,
    then the graph between `## BEGIN_GRAPH` and `## END_GRAPH`."""
    blocks = []
    for title, frames, graph in graphs:
        lines = [f"[{title}]", "TensorsGraphInfo:"]
        lines += [f"  {fn} ({file}:{line})" for fn, file, line in frames]
        lines += ["", "Hashes: (5d3a0b1c)", "", "## BEGIN_GRAPH", graph, "## END_GRAPH", "", ""]
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory):
    f64 = lower(programs.f64_model, np.arange(4, dtype=np.float64), x64=True)
    clean = lower(programs.clean, np.ones(4, np.float32), x64=False)
    frames = [("mark_step", "/venv/lib/python3.11/site-packages/torch_xla/core/xla_model.py", 1050),
              ("train_step", "/work/project/train.py", 42), ("<module>", "/work/project/train.py", 60)]
    text = torch_xla_graph_file([
        ("ScheduleSyncTensorsGraph", frames, f64.as_text(debug_info=True)),
        ("ScheduleSyncTensorsGraph", frames[1:], clean.as_text(dialect="hlo")),
    ])
    path = tmp_path_factory.mktemp("torch_xla") / "graphs.txt"
    path.write_text(text)
    return path


def test_torch_xla_graph_dump_is_one_unit_per_graph(graph_file):
    first, second = read_units(str(graph_file))
    assert first.format is second.format is Format.TORCH_XLA_GRAPHS
    assert first.label == "graph 1: ScheduleSyncTensorsGraph"
    assert first.function == "train_step" and first.origin == "/work/project/train.py:42"
    assert isinstance(first.data, str) and "tensor<4xf64>" in first.data
    assert isinstance(second.data, bytes)  # HLO converted to StableHLO bytecode


def test_torch_xla_graph_dump_is_checked_per_graph(graph_file):
    result = run_cli("check", "--format", "json", graph_file)
    assert result.returncode == 1
    import json
    (file,) = json.loads(result.stdout)["files"]
    assert file["format"] == "torch-xla-graphs"
    assert [m["passed"] for m in file["modules"]] == [False, True]


def test_a_graph_dump_without_readable_graphs_is_refused(tmp_path):
    path = tmp_path / "graphs.txt"
    path.write_text(torch_xla_graph_file([("SyncTensorsGraph", [], "IR {\n  %0 = f32[] prim::Constant()\n}")]))
    with pytest.raises(InputError, match="XLA_SAVE_TENSORS_FMT=stablehlo"):
        read_units(str(path))

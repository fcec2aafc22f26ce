"""Where findings are placed when ops carry bare file locations: the parser's own
positions (a module printed without debug info) are grouped per op and function; a real
file is a source line; a file name that is not valid UTF-8 is never read through the
bindings' accessor, which would abort the process (the check runs in a child)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from x64guard.io import modules
from x64guard.findings import INPUT, SOURCE
from x64guard.passes import NarrowX64Pass

_MODULE = """func.func @main(%x: tensor<2xf64>) -> tensor<2xf64> {{
  %0 = stablehlo.sine %x : tensor<2xf64> loc({first})
  %1 = stablehlo.sine %0 : tensor<2xf64> loc({second})
  return %1 : tensor<2xf64>
}}"""


def _narrowed_sines(first: str, second: str):
    module, _ = modules.load(_MODULE.format(first=first, second=second))
    findings = NarrowX64Pass().apply(module).findings
    return [f for f in findings if f.op == "stablehlo.sine"]


def test_parser_positions_are_one_group_per_op_and_function():
    [group] = _narrowed_sines('"-":2:8', '"-":3:8')
    assert group.location.origin == INPUT and len(group.positions) + group.unlisted_positions == 2
    assert [(p.line, p.column) for p in group.positions] == [(2, 8), (3, 8)]


def test_a_bare_file_location_is_a_source_line():
    first, second = _narrowed_sines('"model.py":10:4', '"model.py":11:4')
    assert (first.location.origin, first.location.file, first.location.line, first.location.column) == \
        (SOURCE, "model.py", 10, 5)
    assert (second.location.line, second.location.column) == (11, 5)


def test_a_range_of_the_input_is_still_an_input_position():
    [group] = _narrowed_sines('"-":2:8 to 2:20', '"-":3:8')
    assert group.location.origin == INPUT and len(group.positions) + group.unlisted_positions == 2


def test_a_file_name_that_is_not_utf8_is_placed_without_a_crash():
    # `loc("\\FF.py":2:8)`: MLIR unescapes \FF into a byte that is not valid UTF-8.
    text = _MODULE.format(first='"\\FF.py":2:8', second='"-":3:8')
    code = textwrap.dedent("""
        import sys
        from x64guard.io import modules
        from x64guard.passes import NarrowX64Pass
        module, _ = modules.load(sys.stdin.read())
        for f in NarrowX64Pass().apply(module).findings:
            print(f.op, f.location.origin, f.location.line)
        """)
    proc = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert "stablehlo.sine input 3" in lines, lines
    assert any(line.startswith("stablehlo.sine source 2") for line in lines), lines

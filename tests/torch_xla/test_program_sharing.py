"""Which narrowed modules share one compiled program (x64guard/torch_xla/share.py): equal
but for locations and the module's name, with the same parameter types and device; any
other difference keeps them apart. (The end-to-end case, a dynamo recompile that compiles
nothing new: tests/torch_xla/test_training.py.)"""

from __future__ import annotations

from x64guard.torch_xla import share
from x64guard.io import modules as xmlir

_MODULE = """module @IrToHlo.{n} attributes {{mhlo.is_dynamic = false}} {{
  func.func @main(%arg0: tensor<2x3xf32> loc("p0.{n}")) -> tensor<2x3xf32> {{
    %cst = stablehlo.constant dense<{c}> : tensor<2x3xf32> loc(#loc1)
    %0 = stablehlo.add %arg0, %cst : tensor<2x3xf32> loc(#loc2)
    return %0 : tensor<2x3xf32> loc(#loc0)
  }} loc(#loc0)
}} loc(#loc0)
#loc0 = loc(unknown)
#loc1 = loc("constant.{n}")
#loc2 = loc(callsite("add.{n}" at "model.py":{line}:3))
"""

TYPES = [((2, 3), "float32")]


def _key(n: int, constant: str = "1.0", line: int = 7, types=TYPES, device: str = "xla:0") -> str:
    module, _ = xmlir.load(_MODULE.format(n=n, c=constant, line=line))
    return share.fingerprint(module, types, device)


def test_modules_equal_but_for_locations_and_name_share_a_key():
    assert _key(712) == _key(710, line=99)


def test_any_other_difference_keeps_modules_apart():
    base = _key(712)
    assert _key(712, constant="2.0") != base
    assert _key(712, types=[((2, 3), "int32")]) != base
    assert _key(712, device="xla:1") != base


def test_a_program_is_built_once_per_live_key_and_never_without_one():
    built = []

    def build():
        built.append(share.Compiled(f"p{len(built)}", None))
        return built[-1]

    first = share.shared("key-a", build)
    assert share.shared("key-a", build) is first and len(built) == 1
    assert share.shared(None, build) is not first and len(built) == 2
    del first, built[:]      # no program holds it any more: the next one is built again
    assert share.shared("key-a", build) is built[0]

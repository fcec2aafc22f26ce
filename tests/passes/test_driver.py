"""The driver's contract: patterns mutate only through the rewriter, a recording run
changes nothing yet reports what a rewriting run does, and a rewriting run that leaves a
64-bit type behind fails loudly (passes/legality.py)."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
from jax.extend.mlir import ir

import x64guard
from x64guard.io import modules
from x64guard.modes import Overflow
from x64guard.passes import NarrowX64Pass
from x64guard.passes.driver import Outcome, PassRun, RewritePattern, collect
from x64guard.passes.legality import IllegalNarrowing, check_legality
from x64guard.passes.rewriter import RecordingRewriter, RecordingRewriterCannotBuild, Rewriter
from x64guard.passes.store import FindingsStore
from x64guard.passes.tables import DEFAULT_TARGET, TARGET_PROFILES
from x64guard.passes.types import TypeConverter

PACKAGE = Path(x64guard.__file__).resolve().parent
GOLDEN_RNG = Path(__file__).resolve().parent / "golden" / "rng"

# Bindings that change a module. In pattern modules they may only appear as calls on a rewriter.
_MUTATING = re.compile(r"(?<!rewriter)\.(?:set_type|erase|replace_all_uses_with|replace_all_uses_except|"
                       r"replace_uses_of_with|move_before|move_after)\(|ir\.Operation\.create\(|"
                       r"InsertionPoint|\.attributes\[[^\]]+\]\s*=(?!=)|\.location\s*=(?!=)|"
                       r"\.operands\[[^\]]+\]\s*=(?!=)|\.blocks\.append\(|"
                       r"(?<!rewriter)\.(?:erase_argument\(|add_argument\((?![\"']))")  # not argparse's
# A walk of the bindings (`op.walk(...)`), or of driver.walk outside the driver.
_WALKS = re.compile(r"\.walk\(|(?<![\w.])walk\((?!op_class)")


ROOT = PACKAGE.parent

# Files of the package allowed to change a module other than through a pass's Rewriter,
# by path from the repository root, with why. Front ends edit modules through a Rewriter
# too (x64guard/torch_xla/); a front-end entry is an edit not yet routed (issue 24).
MUTATION_ALLOWED: dict[str, str] = {
    "x64guard/passes/rewriter.py": "the Rewriter itself: every mutation of the pass goes through it",
    "x64guard/passes/constant_io.py": "builds a scratch module to read a printed constant back",
    "x64guard/io/modules.py": "clones a module (copies its attributes, erases the copy)",
    "x64guard/torch_xla/mixed.py": "replace_all_uses_with on a torch.fx graph, not on MLIR",
}
# Files allowed to call the bindings' `walk` (the pass walks once, in driver.py).
WALK_ALLOWED: dict[str, str] = {
    "x64guard/passes/driver.py": "the one walk (collect) and the guarded walk helper",
    "x64guard/jax/primitive.py": "front end: finds host callbacks in a lowered submodule of JAX's own",
    "x64guard/torch_xla/source.py": "front end: relocates ops in the bindings' post-order (the driver's walk is "
                                    "pre-order), whose order sets the order of the module paths findings name",
}


def _package_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_no_pattern_mutates_a_module_except_through_its_rewriter():
    offenders = []
    for path in _package_files():
        if _relative(path) in MUTATION_ALLOWED:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if _MUTATING.search(code):
                offenders.append(f"{_relative(path)}:{number}: {line.strip()}")
    assert offenders == []


def test_the_allow_lists_name_files_that_exist_and_need_it():
    # an entry whose file moved, or no longer mutates/walks, is left over: remove or update it
    for allowed, pattern in ((MUTATION_ALLOWED, _MUTATING), (WALK_ALLOWED, _WALKS)):
        for name in allowed:
            path = ROOT / name
            assert path.is_file(), f"{name} (allow-listed) does not exist"
            assert any(pattern.search(line.split("#", 1)[0]) for line in path.read_text().splitlines()), \
                f"{name} is allow-listed but does not need it"


def test_no_dry_run_flag_anywhere_in_the_package():
    assert [p.name for p in PACKAGE.rglob("*.py") if "dry_run" in p.read_text()] == []


def _findings(result) -> list[tuple]:
    return [(str(f.severity), str(f.kind), f.op, str(f.location), f.count) for f in result.findings]


@pytest.mark.parametrize("name", ["jax_randint_x64", "jax_bits_u64_x64", "jax_uniform_2x3_not_partitionable_x64"])
def test_recording_run_of_an_idiom_module_reports_what_rewriting_does_and_changes_nothing(name):
    text = (GOLDEN_RNG / f"{name}.mlir").read_text()
    recorded_module, _ = modules.load(text)
    before = recorded_module.operation.get_asm()
    recorded = NarrowX64Pass(record_only=True).apply(recorded_module)
    assert recorded_module.operation.get_asm() == before
    rewritten_module, _ = modules.load(text)
    rewritten = NarrowX64Pass().apply(rewritten_module)
    assert _findings(recorded) == _findings(rewritten)
    assert recorded.changes == rewritten.changes and rewritten.changes
    assert sum(recorded.recorded.values()) > 0 and not rewritten.recorded


def test_recording_rewriter_cannot_build_ops():
    module, _ = modules.load("func.func @main(%x: tensor<2xf64>) -> tensor<2xf64> {\n  return %x : tensor<2xf64>\n}")
    op = module.body.operations[0].regions[0].blocks[0].operations[0]
    with pytest.raises(RecordingRewriterCannotBuild):
        with RecordingRewriter().insert_before(op):
            pass


def test_legality_names_the_op_a_rewriting_run_left_64bit():
    # What a bug in a rule would leave: the module as given, reported as narrowed.
    module, _ = modules.load("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                          "  %0 = stablehlo.convert %x : (tensor<2xf32>) -> tensor<2xf64>\n"
                          "  %1 = stablehlo.convert %0 : (tensor<2xf64>) -> tensor<2xf32>\n"
                          "  return %1 : tensor<2xf32>\n}")
    converter = TypeConverter(module.context)
    run = PassRun(module.context, converter, FindingsStore(converter), Rewriter(), TARGET_PROFILES[DEFAULT_TARGET],
                  Overflow.ERROR)
    with module.context, ir.Location.unknown(), pytest.raises(IllegalNarrowing, match=r"stablehlo\.convert at line 2:8 of the input .*result #0 is "
                                               r"tensor<2xf64>"):
        check_legality(module, run)


def test_one_walk_serves_narrow_and_check():
    # driver.walk (pre-order, exceptions passed through) is the only call of the bindings'
    # walk, and driver.collect its only caller: patterns read the ops collected.
    walkers = [_relative(p) for p in _package_files()
               if any(_WALKS.search(line.split("#", 1)[0]) for line in p.read_text().splitlines())]
    assert set(walkers) - set(WALK_ALLOWED) == set()


class _KeepsConvertTypes(RewritePattern):
    """What a buggy rule would do: claim a convert and keep its 64-bit result."""

    op_names = frozenset({"stablehlo.convert"})

    def match_and_rewrite(self, op, ctx):
        return Outcome.KEEP_TYPES


def test_the_walk_checks_each_op_after_its_rules_and_raises_for_a_rule_that_left_64bit():
    module, _ = modules.load("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                          "  %0 = stablehlo.convert %x : (tensor<2xf32>) -> tensor<2xf64>\n"
                          "  %1 = stablehlo.sine %0 : tensor<2xf64>\n"
                          "  %2 = stablehlo.convert %1 : (tensor<2xf64>) -> tensor<2xf32>\n"
                          "  return %2 : tensor<2xf32>\n}")
    with pytest.raises(IllegalNarrowing, match=r"stablehlo\.convert at line 2:8 of the input .*result #0 is "
                                               r"tensor<2xf64>"):
        NarrowX64Pass(extra_patterns=[_KeepsConvertTypes()]).apply(module)


def test_a_recording_run_does_not_check_legality():
    module, _ = modules.load("func.func @main(%x: tensor<2xf32>) -> tensor<2xf64> {\n"
                          "  %0 = stablehlo.convert %x : (tensor<2xf32>) -> tensor<2xf64>\n"
                          "  return %0 : tensor<2xf64>\n}")
    result = NarrowX64Pass(record_only=True, extra_patterns=[_KeepsConvertTypes()]).apply(module)
    assert result.changes  # the function's signature still counts


def test_the_walk_reads_each_op_once_in_walk_order_and_skips_a_dropped_function():
    # Collected once; a function dropped during the walk (a restored composite's
    # decomposition) is not looked at, and its findings are dropped.
    module, _ = modules.load("func.func private @decomposition(%x: tensor<f64>) -> tensor<f64> {\n"
                          "  return %x : tensor<f64>\n}\n"
                          "func.func @main(%x: tensor<f64>) -> tensor<f64> {\n"
                          "  %0 = stablehlo.negate %x : tensor<f64>\n"
                          "  return %0 : tensor<f64>\n}")
    walked = collect(module)
    assert walked.names == ["builtin.module", "func.func", "func.return", "func.func", "stablehlo.negate",
                            "func.return"]
    assert walked.functions == ["?", "decomposition", "decomposition", "main", "main", "main"]


def _own_returns(node: ast.AST):
    """The return statements of a function, not of the functions it defines."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Return):
            yield child
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _own_returns(child)


def test_every_pattern_returns_an_outcome():
    # `return True` / `return "keep-types"` would be read as REWROTE: patterns name their outcome.
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(fn, ast.FunctionDef) and fn.name == "match_and_rewrite") or path.name == "driver.py":
                continue
            returns = list(_own_returns(fn))
            if not isinstance(fn.body[-1], (ast.Return, ast.Raise)):
                offenders.append(f"{path.name}:{fn.lineno}: falls off its end (returns None)")
            offenders += [f"{path.name}:{node.lineno}: return {ast.unparse(node.value) if node.value else ''}"
                          for node in returns if not (node.value is not None
                                                      and ast.unparse(node.value).startswith("Outcome."))]
    assert offenders == []


def test_the_pass_is_a_frozen_value_with_an_overflow_enum():
    narrow = NarrowX64Pass(overflow=Overflow.SATURATE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        narrow.overflow = Overflow.WRAP
    assert narrow == NarrowX64Pass(overflow=Overflow.SATURATE) and narrow.name == "x64guard-narrow"
    with pytest.raises(TypeError, match="Overflow"):
        NarrowX64Pass(overflow="wrap")

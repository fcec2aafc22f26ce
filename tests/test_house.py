"""The house rules of docs/design.md, read from the package's source: sizes, seams, and no
process-wide tricks. Each check is also run on a planted offender, so that none passes
because it looks at nothing."""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "x64guard"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
MAX_CROSS_FILE_PRIVATE_IMPORTS = 10
# The one process-wide change left on a library path, with its reason (docs/design-process.md):
# JAX's float64-truncation UserWarnings filtered during x64guard.jit's x32 cross-check trace
# (no silent jax_explicit_x64_dtypes value; warning filters are context-local only from 3.14).
# And one code object relabelled, not as anyone's line: torch_xla/source.py runs each FX node
# from a one-line frame under x64guard's own file name "x64guard-fx-node", line k + 1 for
# node k, which torch-xla's recorded IR stacks then carry: how an op is traced back to its
# node (torch-xla has no per-node metadata hook at 2.9).
ALLOWED_TRICKS = {"jax/trace_check.py": ["catch_warnings"],
                  "torch_xla/source.py": ["code.replace(co_filename=...)", "code.replace(co_firstlineno=...)"]}


def _modules() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _tree(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def long_functions(tree: ast.Module) -> list[tuple[str, int]]:
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def private_names_imported(tree: ast.Module) -> list[tuple[str, str]]:
    """(module, name) of every `from x64guard... import _name` (a module's private name
    used by another file). A front end's `_private*` modules are meant to be imported by
    that front end: they are where its private framework calls live."""
    return [(node.module or "", alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("x64guard") for alias in node.names
            if alias.name.startswith("_") and not alias.name.startswith(("__", "_private"))]


def process_wide_tricks(tree: ast.Module) -> list[str]:
    """Calls the house does not make on a library path: recording or filtering warnings
    process-wide, configuration in context variables, code objects relabelled to forge a
    caller's frame."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("catch_warnings", "ContextVar"):
            found.append(node.attr)
        elif isinstance(node, ast.keyword) and node.arg in ("co_filename", "co_firstlineno"):
            found.append(f"code.replace({node.arg}=...)")
    return found


def test_no_module_is_over_500_lines():
    over = {str(p.relative_to(PACKAGE)): n for p in _modules()
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not over


def test_no_function_is_over_60_lines():
    over = {str(p.relative_to(PACKAGE)): found for p in _modules() if (found := long_functions(_tree(p)))}
    assert not over


def test_private_names_stay_in_their_file():
    found = [(str(p.relative_to(PACKAGE)), *pair) for p in _modules() for pair in private_names_imported(_tree(p))]
    assert len(found) <= MAX_CROSS_FILE_PRIVATE_IMPORTS, "\n".join(map(str, found))


def test_no_process_wide_tricks_in_the_package():
    found = {str(p.relative_to(PACKAGE)): tricks for p in _modules() if (tricks := process_wide_tricks(_tree(p)))}
    assert found == ALLOWED_TRICKS


@pytest.mark.parametrize("source, check", [
    ("def f():\n" + "    x = 1\n" * 61, long_functions),
    ("from x64guard.jax.build import _kept_state_finding\n", private_names_imported),
    ("import warnings\nwith warnings.catch_warnings():\n    pass\n", process_wide_tricks),
    ("import contextvars\nT = contextvars.ContextVar('t')\n", process_wide_tricks),
    ("code = f.__code__.replace(co_filename='user.py', co_firstlineno=3)\n", process_wide_tricks),
])
def test_each_check_catches_a_planted_offender(source, check):
    assert check(ast.parse(source))

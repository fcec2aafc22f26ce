"""The package's layers, read from its source (an AST scan, nothing imported):

(a) the core (the root modules, io/, passes/, cli/) imports no front end (x64guard.jax,
    x64guard.torch, x64guard.torch_xla): front ends use the core, never the reverse;
(b) private framework modules are imported only by each front end's `_private*.py` and by
    x64guard/bindings.py (the core's one shim of private jaxlib calls), so a framework
    release that moves one breaks those files only.

Private, for (b): `jax._src`, everything under `jaxlib` (the bare `import jaxlib`, for its
`__version__`, is public), and the `_`-prefixed top-level modules and names of jax, torch
and torch_xla (`torch._dynamo`, `torch._decomp`, `torch_xla._XLAC`, `from torch import _C`).
Deeper ones are not counted: `torch.utils._python_dispatch.TorchDispatchMode` is how torch's
documentation says to write a dispatch mode, and torch 2.9 has no public pytree module. `jaxlib.mlir` counts as
private too: `jax.extend.mlir` is JAX's public re-export of the same bindings (ir,
passmanager, the dialects JAX emits); what it leaves out (the mhlo dialect) is what moves
between jaxlib releases, so it belongs in the shim. Imports are what is checked: statements
at any depth, and `importlib.import_module` / `__import__` with a literal name.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "x64guard"
FRONT_ENDS = ("x64guard.jax", "x64guard.torch", "x64guard.torch_xla")
FRAMEWORKS = ("jax", "jaxlib", "torch", "torch_xla")
SHIM = "bindings.py"

# Private framework imports outside the `_private` modules that are known and on their way
# out, each (file, module) with why it is here. Empty this as they move.
ALLOWED_PRIVATE: dict[tuple[str, str], str] = {}


class Import(NamedTuple):
    file: str        # relative to x64guard/, with '/'
    line: int
    module: str      # absolute dotted name
    names: tuple     # for `from M import a, b`: ('a', 'b'); else ()


def _resolve(rel: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = ["x64guard", *rel.parts[:-1]]  # a package's __init__.py is in its own package
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(rel: Path, source: str) -> Iterator[Import]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(rel.as_posix(), node.lineno, alias.name, ())
        elif isinstance(node, ast.ImportFrom):
            yield Import(rel.as_posix(), node.lineno, _resolve(rel, node), tuple(a.name for a in node.names))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__"):
                yield Import(rel.as_posix(), node.lineno, node.args[0].value, ())


def package_imports(root: Path = PACKAGE) -> Iterator[Import]:
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        yield from imports_of(rel, path.read_text())


def is_core(file: str) -> bool:
    return file.split("/")[0] not in ("jax", "torch", "torch_xla")


def imports_front_end(imp: Import) -> bool:
    targets = [imp.module] + [f"{imp.module}.{name}" for name in imp.names]
    return any(t == front or t.startswith(front + ".") for t in targets for front in FRONT_ENDS)


def _private_part(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def is_private_framework(imp: Import) -> bool:
    parts = imp.module.split(".")
    if parts[0] not in FRAMEWORKS:
        return False
    if parts[0] == "jaxlib":
        return len(parts) > 1 or any(_private_part(n) for n in imp.names)
    if len(parts) > 1:
        return _private_part(parts[1])
    return any(_private_part(n) for n in imp.names)


def may_import_private(file: str) -> bool:
    name = file.rsplit("/", 1)[-1]
    return name.startswith("_private") or file == SHIM


def core_front_end_imports(imports) -> list[Import]:
    return [i for i in imports if is_core(i.file) and imports_front_end(i)]


def misplaced_private_imports(imports) -> list[Import]:
    return [i for i in imports if is_private_framework(i) and not may_import_private(i.file)
            and (i.file, i.module) not in ALLOWED_PRIVATE]


def test_the_core_imports_no_front_end():
    found = core_front_end_imports(package_imports())
    assert not found, "\n".join(f"x64guard/{i.file}:{i.line} imports {i.module}" for i in found)


def test_private_framework_modules_are_imported_only_by_the_private_modules():
    found = misplaced_private_imports(package_imports())
    assert not found, "\n".join(f"x64guard/{i.file}:{i.line} imports {i.module} {i.names or ''}" for i in found)


def test_every_allowed_entry_is_still_needed():
    """An allow-list entry whose import has moved is removed, so the list only shrinks."""
    present = {(i.file, i.module) for i in package_imports() if is_private_framework(i)}
    assert not set(ALLOWED_PRIVATE) - present


def test_the_scan_reads_the_package():
    imports = list(package_imports())
    files = {i.file for i in imports}
    assert {"api.py", "io/modules.py", "cli/hlo.py", "jax/_private.py", "torch_xla/_private.py"} <= files
    assert any(i.file == SHIM and i.module == "jaxlib._jax" for i in imports)


@pytest.mark.parametrize("file, source", [
    ("io/modules.py", "from x64guard.jax import _private\n"),
    ("cli/hlo.py", "def f():\n    from ..jax import _private\n"),
    ("passes/check.py", "import x64guard.torch_xla.base\n"),
    ("settings.py", "from x64guard import jax\n"),
    ("api.py", "import importlib\nimportlib.import_module('x64guard.torch')\n"),
])
def test_a_planted_front_end_import_in_the_core_is_caught(file, source):
    assert core_front_end_imports(imports_of(Path(file), source))


@pytest.mark.parametrize("file, source", [
    ("passes/check.py", "from jax._src import config\n"),
    ("io/modules.py", "from jaxlib import _jax\n"),
    ("io/modules.py", "import jaxlib.mlir.dialects.mhlo\n"),
    ("torch/default_int.py", "import torch._dynamo\n"),
    ("torch_xla/lazy.py", "from torch_xla import _XLAC\n"),
    ("torch_xla/lazy.py", "import torch_xla._XLAC\n"),
    ("torch/calls.py", "from torch import _C\n"),
    ("jax/build.py", "def f():\n    from jax._src.interpreters import pxla\n"),
])
def test_a_planted_private_import_is_caught(file, source):
    assert misplaced_private_imports(imports_of(Path(file), source))


@pytest.mark.parametrize("file, source", [
    ("jax/_private.py", "from jax._src import config\n"),
    ("torch_xla/_private.py", "from torch_xla import _XLAC\n"),
    (SHIM, "from jaxlib import _hlo\n"),
    ("versions.py", "import jaxlib\n"),
    ("io/modules.py", "from jax.extend.mlir import ir\n"),
    ("torch/calls.py", "from torch.overrides import TorchFunctionMode\n"),
    ("torch_xla/mixed.py", "from torch.utils import _pytree\n"),
    ("cli/app.py", "from x64guard.cli import hlo\n"),
])
def test_public_imports_and_the_private_modules_pass(file, source):
    imports = list(imports_of(Path(file), source))
    assert not misplaced_private_imports(imports) and not core_front_end_imports(imports)

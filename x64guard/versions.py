"""Which framework versions x64guard is tested with, and the plain error for any other.

The MLIR bindings ship inside jaxlib and change between releases (method names, type
downcasting, walk semantics); torch-xla's private calls change too. x64guard says so
plainly when it meets an untested version, instead of failing somewhere deep inside a pass.
"""

from __future__ import annotations

import os

# [low, high): 0.10.x on Python 3.11, 0.11.x and 0.12.x on Python 3.12/3.13 (`make test-matrix`).
TESTED_JAX = ((0, 10, 0), (0, 13, 0))
ALLOW_UNTESTED_ENV = "X64GUARD_ALLOW_UNTESTED_JAX"


def version_tuple(version: str) -> tuple[int, ...]:
    """(major, minor, micro) of a version string; a local part (+cu128) is ignored."""
    parts = []
    for piece in version.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def check_jax_version() -> None:
    import jax
    import jaxlib

    require_tested_versions(
        {"jax": jax.__version__, "jaxlib": jaxlib.__version__}, TESTED_JAX, ALLOW_UNTESTED_ENV,
        "x64guard is tested with {name} >= {low} and < {high}, but {name} {version} is installed. Its MLIR "
        "bindings change between releases; install a tested version (pip install 'jax>=0.10,<0.13' "
        "'jaxlib>=0.10,<0.13') or set {env}=1 to try anyway.")


def require_tested_versions(versions: dict[str, str], tested: tuple[tuple[int, ...], tuple[int, ...]],
                            allow_env: str, message: str) -> None:
    """ImportError(`message`) for the first package outside `tested` = [low, high),
    unless $`allow_env` is set. `message` may use {name} {version} {low} {high} {env}."""
    low, high = tested
    if os.environ.get(allow_env):
        return
    for name, version in versions.items():
        if not (low <= version_tuple(version) < high):
            raise ImportError(message.format(name=name, version=version, low=".".join(map(str, low)),
                                             high=".".join(map(str, high)), env=allow_env))


# [low, high), for torch and torch-xla alike: x64guard.torch_xla calls torch-xla's private
# graph API (x64guard/torch_xla/_private.py), which changes between releases.
TESTED_TORCH_XLA = ((2, 9, 0), (2, 10, 0))
ALLOW_UNTESTED_TORCH_XLA_ENV = "X64GUARD_ALLOW_UNTESTED_TORCH_XLA"


def check_torch_xla_version() -> None:
    import torch
    import torch_xla

    require_tested_versions(
        {"torch": torch.__version__, "torch-xla": torch_xla.__version__}, TESTED_TORCH_XLA,
        ALLOW_UNTESTED_TORCH_XLA_ENV,
        "x64guard.torch_xla is tested with {name} >= {low} and < {high}, but {name} {version} is installed. It "
        "uses torch-xla's private graph calls (torch_xla._XLAC), which change between releases; install the "
        "tested pair (pip install 'x64guard[torch-xla]', i.e. torch==2.9.0 torch-xla==2.9.0) or set {env}=1 "
        "to try anyway.")


# [low, high): x64guard.torch (set_default_int_dtype) on plain PyTorch. It teaches Dynamo
# through PyTorch's private calls (x64guard/torch/_private.py) and leans on how Dynamo
# traces torch-function modes, both of which change between releases. Tested on 2.9.0
# (`make test`) and 2.15.0 (`make test-matrix`'s torch-2.15 row).
TESTED_TORCH = ((2, 9, 0), (2, 16, 0))
ALLOW_UNTESTED_TORCH_ENV = "X64GUARD_ALLOW_UNTESTED_TORCH"


def check_torch_version() -> None:
    import torch

    require_tested_versions(
        {"torch": torch.__version__}, TESTED_TORCH, ALLOW_UNTESTED_TORCH_ENV,
        "x64guard.torch is tested with {name} >= {low} and < {high}, but {name} {version} is installed. It "
        "relies on how torch.compile (Dynamo) traces torch-function modes and on PyTorch's private calls "
        "(x64guard/torch/_private.py), which change between releases; install a tested torch "
        "(pip install 'torch>=2.9,<2.16') or set {env}=1 to try anyway.")

"""Everything x64guard needs from JAX beyond its stable API, in one place.

The MLIR bindings ship inside jaxlib and change between releases (method names, type
downcasting, walk semantics). x64guard is tested against the range below and says so
plainly when it meets another version, instead of failing somewhere deep inside a pass.
"""

from __future__ import annotations

import os

TESTED_JAX = ((0, 10, 0), (0, 11, 0))  # [low, high)
ALLOW_UNTESTED_ENV = "X64GUARD_ALLOW_UNTESTED_JAX"


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def check_jax_version() -> None:
    import jax
    import jaxlib

    low, high = TESTED_JAX
    for name, version in (("jax", jax.__version__), ("jaxlib", jaxlib.__version__)):
        if not (low <= _version_tuple(version) < high) and not os.environ.get(ALLOW_UNTESTED_ENV):
            raise ImportError(
                f"x64guard is tested with {name} >= {'.'.join(map(str, low))} and < "
                f"{'.'.join(map(str, high))}, but {name} {version} is installed. Its MLIR bindings change "
                f"between releases; install a tested version (pip install 'jax>=0.10,<0.11' 'jaxlib>=0.10,<0.11') "
                f"or set {ALLOW_UNTESTED_ENV}=1 to try anyway.")

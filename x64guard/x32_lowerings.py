"""What the running JAX lowers a float32 primitive to, where the pass's narrowing of the
float64 lowering is not it (`tables.X32_EXPANDED_CHLO`).

Probed by lowering, through public JAX APIs, never read from a version: a float32 input
keeps its type whatever jax_enable_x64 says, so the probe changes no configuration. Each
probe runs once per process, and only when a module holds the op (a lowering: about
40 ms in a fresh process).
"""

from __future__ import annotations

import functools

from x64guard.passes.tables import X32_EXPANDED_CHLO


@functools.cache
def expands_at_float32(op_name: str) -> bool:
    """True if the running JAX lowers the float32 counterpart of the CHLO op `op_name`
    with an expansion of its own instead of the op (jax 0.12's `lgamma`)."""
    primitive = X32_EXPANDED_CHLO.get(op_name)
    if primitive is None:
        return False
    import jax
    import numpy as np

    try:
        function = getattr(jax.lax, primitive)
        text = jax.jit(function).lower(jax.ShapeDtypeStruct((), np.float32)).as_text()
    except Exception:  # noqa: BLE001  (a JAX that cannot say: not proved to emit the op)
        return True
    return op_name not in text

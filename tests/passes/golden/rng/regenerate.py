"""Regenerate the golden modules of tests/passes/test_rng.py from real lowerings:

    PYTHONPATH=. .venv/bin/python tests/passes/golden/rng/regenerate.py

JAX modules are lowered with x64 on (`*_x64.mlir`) or off (`*_x32.mlir`), without
locations; torch-xla modules are what torch-xla 2.9 gives `_get_stablehlo` on the CPU
device after `xm.set_rng_state(123)` (its seed enters as the i64 parameter).
"""

from __future__ import annotations

import os
import re
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KEY = np.array([0, 1234], np.uint32)
RBG_KEY = np.array([7, 11, 13, 1234], np.uint32)


def _jax_modules() -> dict[str, str]:
    import jax
    import jax.numpy as jnp

    from tests.corpus.oracle import _forget_traces, x64

    R = jax.random

    def lower(fn, args, enabled: bool, partitionable: bool = True) -> str:
        _forget_traces()
        with x64(enabled), warnings.catch_warnings(), jax.threefry_partitionable(partitionable):
            warnings.simplefilter("ignore")
            return jax.jit(fn).lower(*args).as_text(debug_info=False)

    return {
        "jax_bits_u64_x64": lower(lambda k: R.bits(k, (5,), jnp.uint64), (KEY,), True),
        "jax_bits_u64_not_partitionable_x64": lower(lambda k: R.bits(k, (5,), jnp.uint64), (KEY,), True, False),
        "jax_uniform_2x3_not_partitionable_x64": lower(lambda k: R.uniform(k, (2, 3)), (KEY,), True, False),
        "jax_uniform_x64": lower(lambda k: R.uniform(k, (4,)), (KEY,), True),
        "jax_uniform_x32": lower(lambda k: R.uniform(k, (4,)), (KEY,), False),
        "jax_randint_x64": lower(lambda k: R.randint(k, (5,), -3, 1000), (KEY,), True),
        "jax_uniform_rbg_x64": lower(lambda k: R.uniform(R.wrap_key_data(k, impl="rbg"), (4,)), (RBG_KEY,), True),
        "jax_randint_rbg_x32": lower(lambda k: R.randint(R.wrap_key_data(k, impl="rbg"), (5,), 0, 9), (RBG_KEY,),
                                     False),
        "jax_key_from_seed_x64": lower(lambda s: R.key_data(R.key(s)), (np.int64(42),), True),
    }


_TORCH_XLA_DRAWS = {
    "torch_xla_randn_f32": "torch.randn(3, 4, device=dev)",
    "torch_xla_randn_f64": "torch.randn(3, 4, device=dev, dtype=torch.float64)",
    "torch_xla_dropout_f32": "torch.nn.functional.dropout(torch.ones(2, 5, device=dev), 0.5, True)",
    "torch_xla_two_draws_f32": "torch.randn(3, device=dev) + torch.rand(3, device=dev)",
    "torch_xla_randint_i64": "torch.randint(-7, 100, (2, 3), device=dev)",
}

_TORCH_XLA_SCRIPT = """
import os, sys
os.environ.setdefault("PJRT_DEVICE", "CPU")
import torch, torch_xla
import torch_xla.core.xla_model as xm
from x64guard.torch_xla import _private as xc
dev = torch_xla.device()
xm.set_rng_state(123)
y = {draw}
sys.stdout.write(xc.stablehlo_text([y], str(dev)))
"""


def _torch_xla_modules() -> dict[str, str]:
    import subprocess

    out = {}
    root = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
    for name, draw in _TORCH_XLA_DRAWS.items():
        proc = subprocess.run([sys.executable, "-c", _TORCH_XLA_SCRIPT.format(draw=draw)], capture_output=True,
                              text=True, check=True, cwd=root, env={**os.environ, "PYTHONPATH": root})
        out[name] = re.sub(r"\A.*?(?=module @)", "", proc.stdout, flags=re.S)
    return out


def main() -> None:
    modules = {**_jax_modules(), **_torch_xla_modules()}
    for name, text in modules.items():
        with open(os.path.join(HERE, f"{name}.mlir"), "w") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        print(name, len(text))


if __name__ == "__main__":
    main()

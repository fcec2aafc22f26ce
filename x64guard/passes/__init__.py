"""The StableHLO narrowing pass. Knows nothing of jax.jit, torch or the command line."""

from x64guard.passes.narrow import NarrowX64Pass, PassResult

__all__ = ["NarrowX64Pass", "PassResult"]

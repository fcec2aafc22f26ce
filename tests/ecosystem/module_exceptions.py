"""Ecosystem programs whose narrowed module is not the module jax.jit lowers with x64 off,
and why (tests/module_equality.py, checked first by test_ecosystem.py). Data, measured (a
program listed here that becomes module-equal fails until its entry goes).

Empty since 2026-12-01: of the 31 programs listed before,
- 15 trace differently with x64 off (dropout's float64 uniforms, numpyro's and blackjax's
  samplers, diffrax's SDE and adjoint solves): x64guard.jit runs x32 JAX's own program
  (`trace-differs`), narrowed only where x32 JAX itself holds uint64 counters;
- 16 differ from x32 JAX's module only by converts to the type their operand already has
  (weak typing the module does not record, host callback operands, converts inside a
  library primitive's lowering): the test checks the modules are equal once those are
  folded, and x64guard.jit names them (`identity-convert`, info)."""

from tests.module_equality import KnownDifference

MODULE_EXCEPTIONS: dict[str, KnownDifference] = {}

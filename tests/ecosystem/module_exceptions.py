"""Ecosystem programs whose narrowed module is not the module jax.jit lowers with x64 off,
and why (tests/module_equality.py, checked first by test_ecosystem.py). Data, measured (a
program listed here that becomes module-equal fails until its entry goes).

Of the 31 programs listed before 2026-12-01, none is left:
- 15 trace differently with x64 off (dropout's float64 uniforms, numpyro's and blackjax's
  samplers, diffrax's SDE and adjoint solves): x64guard.jit runs x32 JAX's own program
  (`trace-differs`), narrowed only where x32 JAX itself holds uint64 counters;
- 16 differ from x32 JAX's module only by converts to the type their operand already has
  (weak typing the module does not record, host callback operands, converts inside a
  library primitive's lowering): the test checks the modules are equal once those are
  folded, and x64guard.jit names them (`identity-convert`, info)."""

from tests.module_equality import KnownDifference

# jaxopt's solvers call `jnp.where` (a private `_where` function in the module) at int32
# and at int64 in the x64 trace: JAX lowers each signature once, so the x64 module holds
# two more copies of `_where` than x32 JAX's (38 functions against 36 for LBFGS, measured
# on jax 0.10.2), whose types differ only until narrowed; JAX's numbered names then shift.
# Same ops, same bits. Removing it means lowering such functions once (JAX's lowering cache
# decides by jaxpr, which a module-level merge cannot see): docs/ecosystem.md.
_PRIVATE_FUNCTION_TWICE = KnownDifference(
    None, "a private function (jnp.where's `_where`) lowered once per 64-bit signature in the x64 trace, "
          "once in x32 JAX's: two more identical functions once narrowed, names renumbered")

MODULE_EXCEPTIONS: dict[str, KnownDifference] = {
    "jaxopt_lbfgs_rosenbrock": _PRIVATE_FUNCTION_TWICE,
    "jaxopt_implicit_diff_ridge": _PRIVATE_FUNCTION_TWICE,
}

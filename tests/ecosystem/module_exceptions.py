"""Ecosystem programs whose narrowed module is not the module jax.jit lowers with x64 off,
and why (tests/module_equality.py, checked first by test_ecosystem.py). Data, measured on
2026-12-01 (a program listed here that becomes module-equal fails until its entry goes).

None of these has a finding that names it yet (kind None): they are the open part of
issue 21 item 1 for this suite. Most come from how x64guard.jit traces (float32 inputs
widened to float64, callback operands converted: x64guard/jax.py, item 2's owner) and from
converts whose weak or strong typing the module does not record."""

from tests.module_equality import KnownDifference

_CONVERTS = ("an identity convert x32 JAX traces and x64guard removes, or the reverse: the x64 trace (inputs "
             "widened to float64 by x64guard.jit) converts values x32 JAX holds weak-typed, and the module does "
             "not record which values were weak")
_CALLBACKS = ("a host callback's operand: x64guard.jit converts it around the callback (x64guard/jax.py), x32 JAX "
              "passes it as it is")
_NUMBERING = ("the x64 trace holds more private functions (numbered names such as _where_18 shift by one) "
              "or calls them in another order")
_UNANALYSED = ("the x64 trace (float32 inputs widened to float64 by x64guard.jit) is another op graph: "
               "not analysed yet")

MODULE_EXCEPTIONS: dict[str, KnownDifference] = {
    "linen_mlp_dropout_train_step": KnownDifference(None, _CONVERTS),
    "eqx_dropout_train_step": KnownDifference(None, _CONVERTS),
    "diffrax_tsit5_pid_saveat": KnownDifference(None, _CONVERTS),
    "numpyro_svi_step_autonormal": KnownDifference(None, _CONVERTS),
    "numpyro_distribution_samples": KnownDifference(None, _CONVERTS),
    "random_gamma_family_typed_key": KnownDifference(None, _CONVERTS),
    "eqx_error_if_default": KnownDifference(None, _CALLBACKS),
    "debug_print_train_step": KnownDifference(None, _CALLBACKS),
    "io_callback_fetch_by_index": KnownDifference(None, _CALLBACKS),
    "diffrax_dopri5_pid_dense": KnownDifference(None, _CALLBACKS),
    "diffrax_backsolve_adjoint_grad": KnownDifference(None, _CALLBACKS),
    "diffrax_euler_sde_virtual_brownian_tree": KnownDifference(None, _NUMBERING),
    "diffrax_heun_sde_virtual_brownian_tree": KnownDifference(None, _NUMBERING),
    "numpyro_nuts_sample_kernel": KnownDifference(None, _UNANALYSED),
    "numpyro_hmc_sample_kernel": KnownDifference(None, _UNANALYSED),
    "blackjax_nuts_steps": KnownDifference(None, _UNANALYSED),
    "blackjax_mala_scan": KnownDifference(None, _UNANALYSED),
    "blackjax_random_walk_rmh": KnownDifference(None, _UNANALYSED),
    "blackjax_window_adaptation": KnownDifference(None, _UNANALYSED),
    "numpyro_log_density_hierarchical": KnownDifference(None, _UNANALYSED),
    "jsp_special_betainc_misc": KnownDifference(None, _UNANALYSED),
    # The second suite (measured 2026-12-01, after x64guard.jit compares library primitives
    # by their lowering): bit-identical, module-unequal in the same two ways.
    "lineax_tridiagonal": KnownDifference(None, _CONVERTS),
    "haiku_lstm_dynamic_unroll": KnownDifference(None, _CONVERTS),
    "optx_bfgs_rosenbrock": KnownDifference(None, _CONVERTS),
    "optx_gauss_newton_fit": KnownDifference(None, _CONVERTS),
    "optx_implicit_grad_minimise": KnownDifference(None, _CONVERTS),
    "optx_newton_root": KnownDifference(None, _CALLBACKS),
    "optx_chord_root": KnownDifference(None, _CALLBACKS),
    "optx_bisection_root": KnownDifference(None, _CALLBACKS),
    "optx_implicit_grad_root": KnownDifference(None, _CALLBACKS),
    "optx_fixed_point_iteration": KnownDifference(None, _CALLBACKS),
}

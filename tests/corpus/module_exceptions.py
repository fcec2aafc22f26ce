"""Corpus programs whose narrowed module is not the module jax.jit lowers with x64 off, and why
(tests/module_equality.py; checked first by tests/corpus/oracle.py). Data, measured: an entry
whose program becomes module-equal fails its case until it is removed. `kind` names the finding
that reports the difference (required): the pass's on the lowered module, or, for library code
that branches on the dtype at trace time (which no module records), x64guard.jit's on the same
function (`named_by`). None where no finding can see it (names JAX derives from the dtype, a
convert that computes nothing whose origin the module does not record)."""

from tests.module_equality import KnownDifference

_THREEFRY_ORIGINAL = ("jax_threefry_partitionable=False: x64guard rebuilds the words x32 JAX draws from the x64 "
                      "program's own counter ops (the same bits, see the bit oracle), laid out unlike x32 JAX's trace")

MODULE_EXCEPTIONS: dict[str, KnownDifference] = {
    "random_bits_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_uniform_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_normal_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_bernoulli_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_randint_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_categorical_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_gumbel_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_gamma_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_beta_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_dirichlet_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_truncated_normal_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_exponential_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_choice_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_choice_p_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_t_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_laplace_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_multivariate_normal_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_uniform_scan_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_normal_scan_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_bernoulli_scan_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_randint_scan_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_categorical_scan_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_gamma_scan_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_bits_scan_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_bits_large_not_partitionable": KnownDifference("rng-words", _THREEFRY_ORIGINAL),
    "random_uniform_float32_and_float64": KnownDifference(
        "rng-floats", "the x64 trace holds _uniform for float32 and for float64: narrowed, two identical "
                      "functions (_uniform, _uniform_0) where x32 JAX traces one"),
    "finfo_betainc": KnownDifference("trace-differs", "betainc's continued fraction runs 600 iterations for float64 and 200 for float32 (a constant of the trace)", named_by="x64guard.jit"),
    "lib_eigh_tridiagonal": KnownDifference("trace-differs", "eigh_tridiagonal's bisection counts float64's 53 mantissa bits where float32 has 24", named_by="x64guard.jit"),
    "lib_special_erfcx": KnownDifference("trace-differs", "erfcx evaluates a 9-term polynomial for float64 and a 5-term one for float32", named_by="x64guard.jit"),
    "lib_numpyro_interval_censored": KnownDifference("trace-differs", "numpyro's censored likelihood clamps with dtype-derived bounds traced as other ops", named_by="x64guard.jit"),
    "matmul_mixed_f32_f64": KnownDifference(
        "identity-convert", "a float32 @ float64 dot_general: its x64 lowering converts the float64 operand to "
                            "float64, narrowed a convert to the same type that x32 JAX's float32 @ float32 has none "
                            "of; the module cannot tell it from a weak-typed argument's (the pass would name 169 of "
                            "502 corpus modules), x64guard.jit's cross-check sees the two operand widths",
        named_by="x64guard.jit"),
}

"""Every real-ecosystem program, in table order (one module per library)."""

from __future__ import annotations

import importlib

from tests.ecosystem.programs.base import Program, Refusal

# Modules holding `PROGRAMS`, in table order.
MODULES = ("flax_linen", "flax_nnx", "optax_steps", "equinox_models", "diffrax_solves", "numpyro_inference",
           "blackjax_sampling", "jax_numerics", "jax_callbacks",
           # The second real-library suite (docs/ecosystem.md).
           "lineax_solves", "optimistix_solves", "quadax_quadrature", "tfp_jax", "haiku_models",
           # The third: libraries first met in a field run (docs/ecosystem.md).
           "jaxopt_solvers", "tinygp_processes", "interpax_interpolation", "ott_transport",
           "evosax_strategies", "distrax_distributions")


def all_programs() -> list[Program]:
    programs: list[Program] = []
    for module in MODULES:
        programs.extend(importlib.import_module(f"tests.ecosystem.programs.{module}").PROGRAMS)
    names = [p.name for p in programs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate ecosystem program names: {duplicates}")
    return programs


def by_name() -> dict[str, Program]:
    return {p.name: p for p in all_programs()}


__all__ = ["Program", "Refusal", "all_programs", "by_name", "MODULES"]

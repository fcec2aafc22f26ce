"""evosax, as its users write it: a strategy object built once (`CMA_ES`, `Open_ES`,
`SNES`), its `default_params`, and the ask-evaluate-tell loop
inside `jax.lax.fori_loop` with keys split each generation."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from tests.ecosystem.programs.base import Registry

registry = Registry("evosax")


def _sphere(population):
    return jnp.sum((population - 1.0) ** 2, axis=-1)


def _loop(strategy, generations=5):
    """A run of `generations` ask/tell steps, as evosax's examples write it."""
    params = strategy.default_params

    def run(key, params, mean):
        key, init_key = jax.random.split(key)
        state = strategy.init(init_key, mean, params)

        def generation(_, carry):
            key, state = carry
            key, ask_key, tell_key = jax.random.split(key, 3)
            population, state = strategy.ask(ask_key, state, params)
            state, _ = strategy.tell(tell_key, population, _sphere(population), state, params)
            return key, state

        _, state = jax.lax.fori_loop(0, generations, generation, (key, state))
        return state.best_solution, state.best_fitness, strategy.get_mean(state)

    return run, params


def _program(make):
    mean = jnp.zeros(4, jnp.float32)
    run, params = _loop(make(mean))
    return run, (jax.random.key(0), params, mean)


@registry.program("evosax_cma_es_sphere", "CMA_ES(population_size=8): five generations on a sphere function", slow=True)
def cma_es_sphere():
    from evosax.algorithms import CMA_ES

    return _program(lambda mean: CMA_ES(population_size=8, solution=mean))


@registry.program("evosax_open_es_sphere",
                  "Open_ES(population_size=8, antithetic sampling, optax SGD): five generations")
def open_es_sphere():
    from evosax.algorithms import Open_ES

    return _program(lambda mean: Open_ES(population_size=8, solution=mean))


@registry.program("evosax_snes_sphere", "SNES(population_size=8): separable natural evolution, five generations")
def snes_sphere():
    from evosax.algorithms import SNES

    return _program(lambda mean: SNES(population_size=8, solution=mean))


PROGRAMS = registry.programs

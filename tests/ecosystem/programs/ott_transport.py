"""ott-jax, as its users write it: entropic optimal transport between point clouds with
`linear.solve` (Sinkhorn at its default threshold and iteration caps), its regularised cost
and its gradient, the Sinkhorn divergence, and soft sorting, ranking and quantiles."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("ott-jax")


def _clouds(seed=0, n=12, m=10, d=2):
    rng = np.random.default_rng(seed)
    return (jnp.asarray(rng.standard_normal((n, d)).astype(np.float32)),
            jnp.asarray((rng.standard_normal((m, d)) + 1.0).astype(np.float32)))


@registry.program("ott_sinkhorn_point_clouds",
                  "ott.solvers.linear.solve(PointCloud(x, y, epsilon=0.1)): reg_ot_cost, convergence, "
                  "iterations", slow=True)
def sinkhorn_point_clouds():
    from ott.geometry import pointcloud
    from ott.solvers import linear

    def transport(x, y):
        out = linear.solve(pointcloud.PointCloud(x, y, epsilon=0.1))
        return out.reg_ot_cost, out.converged, out.n_iters, out.matrix

    return transport, _clouds()


@registry.program("ott_sinkhorn_cost_grad",
                  "jax.grad of the Sinkhorn cost w.r.t. the source points (implicit differentiation, "
                  "ott's default)", slow=True)
def sinkhorn_cost_grad():
    from ott.geometry import pointcloud
    from ott.solvers import linear

    def cost(x, y):
        return linear.solve(pointcloud.PointCloud(x, y, epsilon=0.5)).reg_ot_cost

    return jax.grad(cost), _clouds(1)


@registry.program("ott_sinkhorn_divergence",
                  "ott.tools.sinkhorn_divergence.sinkhorn_divergence(PointCloud, x, y, epsilon=0.2)", slow=True)
def sinkhorn_divergence():
    from ott.geometry import pointcloud
    from ott.tools import sinkhorn_divergence as sd

    def divergence(x, y):
        out, _ = sd.sinkhorn_divergence(pointcloud.PointCloud, x, y, epsilon=0.2)
        return out

    return divergence, _clouds(2)


@registry.program("ott_soft_sort_rank",
                  "ott.tools.soft_sort.sort, .ranks and .quantile of a vector (Sinkhorn to a fixed grid)", slow=True)
def soft_sort_rank():
    from ott.tools import soft_sort

    def sort_and_rank(v):
        return soft_sort.sort(v), soft_sort.ranks(v), soft_sort.quantile(v, q=jnp.asarray([0.2, 0.5, 0.8]))

    return sort_and_rank, (jnp.asarray([0.3, -1.2, 2.5, 0.0, 1.1, -0.4], jnp.float32),)


PROGRAMS = registry.programs

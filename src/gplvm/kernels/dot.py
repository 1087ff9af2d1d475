"""Non-stationary and degenerate kernels: Linear, White, Constant."""

from __future__ import annotations

import jax.numpy as jnp

from gplvm._pytree import pytree_dataclass
from gplvm.kernels.base import AbstractKernel
from gplvm.registry import register
from gplvm.typing import Parameter


@register("gplvm.kernels.Linear")
@pytree_dataclass
class Linear(AbstractKernel):
    """k(x, x') = Σ_q σ²_q x_q x'_q (``variance`` scalar, or (Q,) for ARD)."""

    variance: Parameter = 1.0

    def _cross(self, X1, X2):
        return (X1 * jnp.asarray(self.variance, dtype=float)) @ X2.T

    def _diag(self, X):
        return jnp.sum(X**2 * jnp.asarray(self.variance, dtype=float), axis=1)


@register("gplvm.kernels.White")
@pytree_dataclass
class White(AbstractKernel):
    """Independent noise: σ² I on ``k(X)``; a cross-covariance ``k(X1, X2)`` is 0.

    As in GPflow, white noise belongs to the diagonal of a Gram matrix, not to pairs of distinct
    input sets, even if they happen to share rows.
    """

    variance: Parameter = 1.0

    def _cross(self, X1, X2):
        return jnp.zeros((X1.shape[0], X2.shape[0]))

    def _gram(self, X):
        return jnp.asarray(self.variance, dtype=float) * jnp.eye(X.shape[0])

    def _diag(self, X):
        return jnp.full(X.shape[0], jnp.asarray(self.variance, dtype=float))


@register("gplvm.kernels.Constant")
@pytree_dataclass
class Constant(AbstractKernel):
    """k(x, x') = σ² (a random offset shared by all points)."""

    variance: Parameter = 1.0

    def _cross(self, X1, X2):
        return jnp.full((X1.shape[0], X2.shape[0]), jnp.asarray(self.variance, dtype=float))

    def _diag(self, X):
        return jnp.full(X.shape[0], jnp.asarray(self.variance, dtype=float))

"""The coincidence kernel: σ² on identical inputs, 0 elsewhere (seed 003 §3.1's baseline).

With this spatial kernel and the spatial inducing inputs at the pixels, the structured GPLVM
is the Bayesian GPLVM on the flattened images (K_s = σ²I makes every Kronecker factor
block-diagonal over pixels; issue 13).  Unlike :class:`~gplvm.kernels.White`, whose
cross-covariance between two input sets is 0 even where they share points (so Ψ1 would vanish
at inducing inputs placed on the pixels), this kernel compares the points themselves.
It factorises over input dimensions: 1[x = x'] = Π_a 1[x_a = x'_a].  Its values do not depend
on the inputs smoothly, so it has no gradient with respect to them (none is needed: pixel
coordinates are fixed).
"""

from __future__ import annotations

import jax.numpy as jnp

from gplvm._pytree import pytree_dataclass
from gplvm.kernels.base import AbstractKernel
from gplvm.registry import register
from gplvm.typing import Parameter


@register("gplvm.kernels.Coincidence")
@pytree_dataclass
class Coincidence(AbstractKernel):
    """k(x, x') = σ² if x = x' (every coordinate equal), else 0 — in Gram and cross matrices."""

    variance: Parameter = 1.0

    def _cross(self, X1, X2):
        same = jnp.all(X1[:, None, :] == X2[None, :, :], axis=-1)
        return jnp.asarray(self.variance, dtype=float) * same.astype(float)

    def _diag(self, X):
        return jnp.full(X.shape[0], jnp.asarray(self.variance, dtype=float))

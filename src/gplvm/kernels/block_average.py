"""Covariance of block averages of a field: for pixels that are averages over an area.

A downsampled image's pixel is the mean of the finer pixels in its block, not the field's value
at the block centre.  If f has covariance k, the block means m(x) = (1/J)Σ_j f(x + δ_j) over the
J sub-points δ_j of the block around x have covariance

.. math:: \\tilde k(x, x') = \\frac{1}{J^2}\\sum_{j,l} k(x + δ_j, x' + δ_l),

which is A K Aᵀ for the averaging matrix A — for a product grid still one factor per axis, so
the structured GPLVM's Kronecker algebra (seed 003 eq. 17) is unchanged.  Predicting the field
itself at points x* (super-resolution, seed 003 §3.2) needs the point-to-block covariance
(1/J)Σ_l k(x*, x' + δ_l) (:meth:`BlockAverage.point_cross`) and the point variance k(x*, x*)
(:meth:`BlockAverage.point_diag`);
:mod:`gplvm.models.gplvm_family.variants.structured.structured_fitted` uses them
at new pixel coordinates when the spatial kernel has them.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp

from gplvm._pytree import pytree_dataclass, static_field
from gplvm.kernels.base import AbstractKernel, _as_2d
from gplvm.registry import register


@register("gplvm.kernels.BlockAverage")
@pytree_dataclass
class BlockAverage(AbstractKernel):
    """Block means of a field with covariance ``kernel``.

    Attributes:
        kernel: the covariance of the underlying field.
        offsets: the sub-point offsets along each input dimension (static); the block's
            sub-points are their Cartesian product over dimensions.  The default (−½, ½) is a
            2 × 2 block of unit pixels around a centre, as 2× downsampling makes it.
    """

    kernel: AbstractKernel
    offsets: tuple = static_field(default=(-0.5, 0.5))

    def _deltas(self, Q):
        return jnp.asarray(list(itertools.product(self.offsets, repeat=Q)), dtype=float)

    def _sub_points(self, X):
        """(J·N, Q): every point's block sub-points, sub-point major."""
        deltas = self._deltas(X.shape[1])
        return (deltas[:, None, :] + X[None]).reshape(-1, X.shape[1]), deltas.shape[0]

    def _cross(self, X1, X2):
        S1, J = self._sub_points(X1)
        S2, _ = self._sub_points(X2)
        K = self.kernel._cross(S1, S2).reshape(J, X1.shape[0], J, X2.shape[0])
        return K.mean(axis=(0, 2))

    def _diag(self, X):
        deltas = self._deltas(X.shape[1])
        return jax.vmap(lambda x: self.kernel._cross(x + deltas, x + deltas).mean())(X)

    def point_cross(self, X_point, X_block):
        """Cov(f(x*), m(x')) = (1/J)Σ_l k(x*, x' + δ_l): (N*, N)."""
        X_point, X_block = _as_2d(X_point), _as_2d(X_block)
        S, J = self._sub_points(X_block)
        K = self.kernel._cross(X_point, S).reshape(X_point.shape[0], J, X_block.shape[0])
        return K.mean(axis=1)

    def point_diag(self, X_point):
        """Var f(x*) = k(x*, x*)."""
        return self.kernel.diag(X_point)

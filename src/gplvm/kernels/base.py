"""Kernel base class and the kernel algebra (STYLE.md 3).

A kernel is a small immutable pytree: its positive hyper-parameters are leaves, so ``jax.grad``
differentiates through ``k(X1, X2)``.  ``k1 + k2`` and ``k1 * k2`` build :class:`Sum` and
:class:`Product`.  Positivity is enforced only in :mod:`gplvm.transforms`: ``unconstrained()``
maps every leaf through the inverse softplus, ``from_unconstrained`` maps back.
"""

from __future__ import annotations

import jax.numpy as jnp

from gplvm._pytree import pytree_dataclass
from gplvm.registry import register
from gplvm.transforms import to_constrained_positive, to_unconstrained_positive
from gplvm.typing import Array, ArrayLike, Float, Real

#: Inputs of a kernel: N points in Q dimensions, or N scalars (one input dimension).
Inputs = Real[ArrayLike, "N Q"] | Real[ArrayLike, " N"]
#: The second set of inputs of a cross-covariance (M points, e.g. the inducing inputs Z).
OtherInputs = Real[ArrayLike, "M Q"] | Real[ArrayLike, " M"]


def _as_2d(X: Inputs) -> Float[Array, "N Q"]:
    X = jnp.asarray(X, dtype=float)
    return X[:, None] if X.ndim == 1 else X


class AbstractKernel:
    """A positive-definite covariance function k(x, x').

    Subclasses implement :meth:`_cross` (the N1 × N2 cross-covariance of two 2-D arrays) and
    :meth:`_diag` (its diagonal for one 2-D array); the public :meth:`__call__` and
    :meth:`diag` take 1-D or 2-D inputs.  Every leaf of a kernel pytree is a positive
    hyper-parameter.
    """

    def __call__(self, X1: Inputs, X2: OtherInputs | None = None) -> Float[Array, "N M"]:
        """Cross-covariance matrix ``K[i, j] = k(X1[i], X2[j])``; ``X2=None`` means ``X1``.

        Args:
            X1: ``(N, Q)`` points (e.g. X), or ``(N,)`` for one input dimension.
            X2: ``(M, Q)`` points with the same Q (e.g. Z), or None for ``X1`` itself.

        Returns:
            ``(N, M)``: Kuf-like cross-covariances, or the ``(N, N)`` Gram matrix of ``X1``.
        """
        X1 = _as_2d(X1)
        if X2 is None:
            return self._gram(X1)
        return self._cross(X1, _as_2d(X2))

    def _gram(self, X):
        return self._cross(X, X)

    def _cross(self, X1, X2):  # pragma: no cover - abstract
        raise NotImplementedError

    def diag(self, X: Inputs) -> Float[Array, " N"]:
        """The diagonal ``k(x_n, x_n)`` (Kff_diag) without forming the N × N matrix.

        A 1-D ``X`` holds N points of one input dimension, as in :meth:`__call__`.
        """
        return self._diag(_as_2d(X))

    def _diag(self, X):  # pragma: no cover - abstract
        raise NotImplementedError

    def __add__(self, other: "AbstractKernel") -> "Sum":
        return Sum(self, other)

    def __mul__(self, other: "AbstractKernel") -> "Product":
        return Product(self, other)

    def unconstrained(self) -> "AbstractKernel":
        """The kernel with every hyper-parameter mapped to the real line (inverse softplus)."""
        return to_unconstrained_positive(self)

    @staticmethod
    def from_unconstrained(u: "AbstractKernel") -> "AbstractKernel":
        """Inverse of :meth:`unconstrained` (softplus on every leaf)."""
        return to_constrained_positive(u)

    @property
    def is_stationary(self) -> bool:
        return False


@register("gplvm.kernels.Sum")
@pytree_dataclass
class Sum(AbstractKernel):
    """k(x, x') = k1(x, x') + k2(x, x')."""

    k1: AbstractKernel
    k2: AbstractKernel

    def _cross(self, X1, X2):
        return self.k1._cross(X1, X2) + self.k2._cross(X1, X2)

    def _gram(self, X):
        return self.k1._gram(X) + self.k2._gram(X)

    def _diag(self, X):
        return self.k1._diag(X) + self.k2._diag(X)


@register("gplvm.kernels.Product")
@pytree_dataclass
class Product(AbstractKernel):
    """k(x, x') = k1(x, x') · k2(x, x') (a valid kernel by the Schur product theorem)."""

    k1: AbstractKernel
    k2: AbstractKernel

    def _cross(self, X1, X2):
        return self.k1._cross(X1, X2) * self.k2._cross(X1, X2)

    def _gram(self, X):
        return self.k1._gram(X) * self.k2._gram(X)

    def _diag(self, X):
        return self.k1._diag(X) * self.k2._diag(X)

"""Kernel base class and the kernel algebra (STYLE.md 3).

A kernel is a small immutable pytree: its positive hyper-parameters are leaves, so ``jax.grad``
differentiates through ``k(X1, X2)``.  ``k1 + k2`` and ``k1 * k2`` build :class:`Sum` and
:class:`Product`.  Positivity is enforced only in :mod:`gplvm.transforms`: ``unconstrained()``
maps every leaf through the inverse softplus, ``from_unconstrained`` maps back.
"""

from __future__ import annotations

from typing import Optional

import jax.numpy as jnp

from gplvm._pytree import pytree_dataclass
from gplvm.transforms import to_constrained_positive, to_unconstrained_positive
from gplvm.registry import register


def _as_2d(X):
    X = jnp.asarray(X, dtype=float)
    return X[:, None] if X.ndim == 1 else X


class AbstractKernel:
    """A positive-definite covariance function k(x, x').

    Subclasses implement :meth:`_cross` (the N1 × N2 cross-covariance of two 2-D arrays) and
    :meth:`diag`.  Every leaf of a kernel pytree is a positive hyper-parameter.
    """

    def __call__(self, X1, X2: Optional[jnp.ndarray] = None) -> jnp.ndarray:
        """Cross-covariance matrix ``K[i, j] = k(X1[i], X2[j])``; ``X2=None`` means ``X1``."""
        X1 = _as_2d(X1)
        if X2 is None:
            return self._gram(X1)
        return self._cross(X1, _as_2d(X2))

    def _gram(self, X):
        return self._cross(X, X)

    def _cross(self, X1, X2):  # pragma: no cover - abstract
        raise NotImplementedError

    def diag(self, X) -> jnp.ndarray:
        """The diagonal ``k(x_n, x_n)`` without forming the N × N matrix."""
        raise NotImplementedError

    def __add__(self, other: "AbstractKernel") -> "Sum":
        return Sum(self, other)

    def __mul__(self, other: "AbstractKernel") -> "Product":
        return Product(self, other)

    def unconstrained(self):
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

    def diag(self, X):
        return self.k1.diag(X) + self.k2.diag(X)


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

    def diag(self, X):
        return self.k1.diag(X) * self.k2.diag(X)

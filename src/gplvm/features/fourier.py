r"""Random Fourier features for any stationary kernel (Rahimi & Recht 2007; seed 000 eq. 18;
seed 002 eq. 35).

.. math:: \phi(x) = \sqrt{\sigma^2 / (M/2)}\,[\sin(W x), \cos(W x)], \qquad W = \varepsilon / \ell,

with ε (M/2 × Q) drawn once from the unit-length-scale spectral density (see
:mod:`gplvm.kernels.stationary`).  Holding ε fixed makes φ a smooth function of X, ℓ and σ²,
and its error max|ΦΦᵀ − K| falls like 1/sqrt(M).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gplvm._pytree import pytree_dataclass, replace
from gplvm.features.base import AbstractFeatureMap, sin_cos_features
from gplvm.kernels.base import AbstractKernel
from gplvm.kernels.stationary import AbstractStationary
from gplvm.transforms import inverse_softplus, softplus
from gplvm.registry import register
from gplvm.typing import Array, Float, Parameter, PRNGKeyArray, PyTree


def _check_even(n_features: int) -> None:
    if n_features < 2 or n_features % 2:
        raise ValueError(f"n_features={n_features}: [sin, cos] features come in pairs, so "
                         f"n_features must be an even number >= 2")


@register("gplvm.features.RandomFourierFeatures")
@pytree_dataclass
class RandomFourierFeatures(AbstractFeatureMap):
    """[sin, cos] random features of a stationary kernel.

    Build with :meth:`create`.  Trainable: the kernel's length-scale(s) and variance.
    """

    kernel: AbstractStationary
    eps: Parameter  # (M/2, Q) standard frequencies, held fixed

    @classmethod
    def create(cls, kernel: AbstractKernel, n_features: int, input_dim: int,
               key: PRNGKeyArray) -> "RandomFourierFeatures":
        """Draw ``n_features / 2`` frequencies for ``kernel`` on ``input_dim`` inputs."""
        if not isinstance(kernel, AbstractStationary):
            raise ValueError(f"random Fourier features need a stationary kernel with a spectral "
                             f"density; got {type(kernel).__name__}")
        _check_even(n_features)
        ell = jnp.asarray(kernel.lengthscale)
        if ell.ndim == 1 and ell.shape[0] != input_dim:
            raise ValueError(f"the kernel has {ell.shape[0]} ARD length-scales but input_dim "
                             f"is {input_dim}")
        eps = kernel.sample_standard_frequencies(key, n_features // 2, input_dim)
        return cls(kernel=kernel, eps=eps)

    @property
    def n_features(self) -> int:
        return 2 * self.eps.shape[0]

    @property
    def input_dim(self) -> int:
        return self.eps.shape[1]

    @property
    def W(self) -> Float[Array, "M2 Q"]:
        """Frequencies W = ε / ℓ, shape (M/2, Q)."""
        return self.eps / jnp.asarray(self.kernel.lengthscale, dtype=float)

    def _features(self, X):
        scale = jnp.sqrt(jnp.asarray(self.kernel.variance, dtype=float) / self.eps.shape[0])
        return sin_cos_features(X @ self.W.T, scale)

    def unconstrained(self) -> dict[str, Float[Array, "..."]]:
        return {"lengthscale": inverse_softplus(self.kernel.lengthscale),
                "variance": inverse_softplus(self.kernel.variance)}

    def from_unconstrained(self, u: PyTree) -> "RandomFourierFeatures":
        kernel = replace(self.kernel, lengthscale=softplus(u["lengthscale"]),
                         variance=softplus(u["variance"]))
        return replace(self, kernel=kernel)


def random_fourier_features(kernel: AbstractKernel, n_features: int, input_dim: int,
                            key: PRNGKeyArray | None = None, seed: int = 0
                            ) -> RandomFourierFeatures:
    """Convenience constructor: ``RandomFourierFeatures.create`` with a key or an int seed."""
    key = jax.random.PRNGKey(seed) if key is None else key
    return RandomFourierFeatures.create(kernel, n_features, input_dim, key)

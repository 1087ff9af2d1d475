r"""A-la-Carte features with learnable frequencies (Yang, Smola, Song & Wilson 2014; seed 002 §1.4).

The spectral density is a mixture of Gaussians (the spectral-mixture kernel of Wilson & Adams),

.. math:: p(w) = \sum_{c=1}^{C} \pi_c\, N(w \mid \mu_c, \mathrm{diag}\, s_c^2),

and A-la-Carte learns the M/2 frequencies W themselves, initialised by a draw from p(w): the
features are ``sqrt(σ²/(M/2)) [sin(XWᵀ), cos(XWᵀ)]`` with W and σ² trainable.  The implied
kernel is the (learned) empirical spectral measure's ``σ²/(M/2) Σ_i cos(w_i·τ)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gplvm._pytree import pytree_dataclass, replace
from gplvm.features.base import AbstractFeatureMap, sin_cos_features
from gplvm.features.fourier import _check_even
from gplvm.transforms import inverse_softplus, softplus
from gplvm.registry import register
from gplvm.typing import Array, Float, Parameter, PRNGKeyArray, PyTree


@register("gplvm.features.ALaCarteFeatures")
@pytree_dataclass
class ALaCarteFeatures(AbstractFeatureMap):
    """[sin, cos] features on trainable frequencies W (M/2 × Q) with a variance σ²."""

    W: Parameter                  # (M/2, Q) frequencies, trainable
    variance: Parameter = 1.0

    @classmethod
    def create(cls, n_features: int, input_dim: int, key: PRNGKeyArray, n_mixture: int = 4,
               lengthscale: float = 1.0, variance: float = 1.0) -> "ALaCarteFeatures":
        """Initialise W from a random spectral mixture.

        Component means μ_c ~ N(0, ℓ⁻² I)/2 (low frequencies, where smooth functions live),
        scales s_c = 1/(2ℓ); weights uniform.  The first component is centred at zero, so with
        ``n_mixture=1`` this is the RBF(2ℓ)... spectral draw with a learnable W.
        """
        _check_even(n_features)
        n_freq = n_features // 2
        km, kc, kz = jax.random.split(key, 3)
        mu = 0.5 * jax.random.normal(km, (n_mixture, input_dim)) / lengthscale
        mu = mu.at[0].set(0.0)
        comp = jax.random.randint(kc, (n_freq,), 0, n_mixture)
        W = mu[comp] + jax.random.normal(kz, (n_freq, input_dim)) / lengthscale
        return cls(W=W, variance=jnp.asarray(variance, dtype=float))

    @property
    def n_features(self) -> int:
        return 2 * self.W.shape[0]

    @property
    def input_dim(self) -> int:
        return self.W.shape[1]

    def _features(self, X):
        scale = jnp.sqrt(jnp.asarray(self.variance, dtype=float) / self.W.shape[0])
        return sin_cos_features(X @ self.W.T, scale)

    def unconstrained(self) -> dict[str, Float[Array, "..."]]:
        return {"W": self.W, "variance": inverse_softplus(self.variance)}

    def from_unconstrained(self, u: PyTree) -> "ALaCarteFeatures":
        return replace(self, W=u["W"], variance=softplus(u["variance"]))

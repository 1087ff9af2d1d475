"""Negative binomial likelihood with logit link (seed 000, eqs. 26 and 29).

Seed 000 writes y ~ NB(r, p) with p = σ(ψ) the "success" probability of the Zhou–Carin
parametrisation:

.. math:: p(y \\mid \\psi) = \\frac{\\Gamma(y + r)}{\\Gamma(r)\\, y!}\\, \\sigma(\\psi)^{y}\\,
          \\sigma(-\\psi)^{r} = \\frac{\\Gamma(y + r)}{\\Gamma(r)\\, y!}
          \\frac{(e^{\\psi})^{y}}{(1 + e^{\\psi})^{y + r}},

i.e. eq. 26 with a = y, b = y + r.  Mean r·e^ψ, variance r·e^ψ(1 + e^ψ) = μ + μ²/r.  In SciPy's
convention this is ``scipy.stats.nbinom(r, 1 - σ(ψ))`` (SciPy's p is the probability of the
event counted by r, here σ(−ψ)).
"""

from __future__ import annotations

from typing import Any, ClassVar

import jax
import jax.scipy.special  # noqa: F401  (betainc, gammaincc for the CDFs)
import jax.scipy.stats  # noqa: F401
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from gplvm._pytree import pytree_dataclass, replace
from gplvm._validation import check_counts
from gplvm.likelihoods._common import as_float, check_positive, plain_softplus, sigmoid_product
from gplvm.likelihoods.base import AbstractLikelihood
from gplvm.transforms import inverse_softplus, softplus
from gplvm.registry import register
from gplvm.typing import Array


@register("gplvm.likelihoods.NegativeBinomial")
@pytree_dataclass
class NegativeBinomial(AbstractLikelihood):
    """y | ψ ~ NB(r, σ(ψ)) of seed 000, eq. 29: mean r·e^ψ, variance mean·(1 + e^ψ).

    Args:
        dispersion: r > 0, a scalar or one value per column (shape (D,)).  Trainable through
            softplus⁻¹(r); larger r is closer to Poisson.
    """

    dispersion: Any = 1.0

    name: ClassVar[str] = "negative_binomial"
    supports_polya_gamma: ClassVar[bool] = True
    sampled_parameter: ClassVar[tuple[str, str] | None] = (
        "dispersion", "the dispersion (eq. 29's gamma prior)")
    log_rate_slice: ClassVar[bool] = True
    count_layouts: ClassVar[tuple[str, ...]] = ("nonzero", "customers", "log_factorial")

    @classmethod
    def from_state(cls, trials: Array, noise_var: Array, dispersion: Array
                   ) -> NegativeBinomial:
        return cls(dispersion=dispersion)

    def _log_prob(self, Y: Array, F: Array) -> Array:
        r = as_float(self.dispersion, F)
        log_coef = gammaln(Y + r) - gammaln(r) - gammaln(Y + 1.0)
        # y·ψ − (y + r)·softplus(ψ) = y·log σ(ψ) + r·log σ(−ψ), exact for |ψ| ≫ 1.
        return log_coef + Y * F - (Y + r) * jnp.logaddexp(F, 0.0)

    def _psi_log_prob(self, Y: Array, F: Array) -> Array:
        return Y * F - (Y + self.dispersion) * plain_softplus(F)

    def _psi_free_total(self, data) -> Array | None:
        # log Γ(y + r_j) − log Γ(r_j), 0 at y = 0: over the positive counts only; −Σ log y!
        if data.nonzero is None or data.log_factorial is None:
            return None
        y, col = data.nonzero
        r = self.dispersion[col]
        return jnp.sum(gammaln(y + r) - gammaln(r)) - data.log_factorial

    def _grad_log_prob(self, Y: Array, F: Array) -> Array:
        # y − (y + r)·σ(ψ), the score of y·ψ − (y + r)·softplus(ψ)
        return Y - (Y + as_float(self.dispersion, F)) * jax.nn.sigmoid(F)

    def _curvature(self, Y: Array, F: Array) -> Array:
        return (Y + as_float(self.dispersion, F)) * sigmoid_product(F)

    def _inverse_link(self, F: Array) -> Array:
        F = as_float(F)
        return as_float(self.dispersion, F) * jnp.exp(F)

    def _conditional_variance(self, F: Array) -> Array:
        # r e^ψ (1 + e^ψ) = μ / σ(−ψ).
        F = as_float(F)
        return self._inverse_link(F) / jax.nn.sigmoid(-F)

    def _cdf(self, y: Array, F: Array) -> Array:
        # scipy's nbinom(r, p) with p = 1 − σ(ψ) = σ(−ψ): P(Y <= k) = I_p(r, k + 1)
        r = jnp.broadcast_to(as_float(self.dispersion, F), F.shape)
        k = jnp.floor(y)
        val = jax.scipy.special.betainc(r, jnp.maximum(k, 0.0) + 1.0, jax.nn.sigmoid(-F))
        return jnp.where(k < 0, 0.0, val)

    def _sample(self, key: Array, F: Array) -> Array:
        # Gamma–Poisson mixture: λ ~ Ga(shape r, scale e^ψ), y | λ ~ Poisson(λ).
        key_gamma, key_poisson = jax.random.split(key)
        r = jnp.broadcast_to(as_float(self.dispersion, F), F.shape)
        rate = jax.random.gamma(key_gamma, r, dtype=F.dtype) * jnp.exp(F)
        return jax.random.poisson(key_poisson, rate).astype(F.dtype)

    def _check(self, Y: np.ndarray) -> None:
        check_positive(self.dispersion, "dispersion", Y.shape[1])
        check_counts(Y, what="negative binomial")

    def _polya_gamma_params(self, Y: Array) -> tuple[Array, Array, Array]:
        """a = y, b = y + r, κ = (y − r)/2 (seed 000, text after eq. 28); zeros where Y is NaN."""
        Y_safe = jnp.where(jnp.isnan(Y), 0.0, Y)
        r = as_float(self.dispersion, Y)
        return self._pg_masked(Y, Y_safe, Y_safe + r, 0.5 * (Y_safe - r))

    def unconstrained(self) -> dict[str, Any]:
        return {"dispersion": inverse_softplus(self.dispersion)}

    def from_unconstrained(self, u: dict[str, Any]) -> NegativeBinomial:
        return replace(self, dispersion=softplus(u["dispersion"]))

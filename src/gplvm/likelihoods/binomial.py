"""Logistic-link likelihoods for binary and bounded counts: Bernoulli and binomial (seed 000, §3.3).

With p = σ(f) = e^f / (1 + e^f),

.. math:: \\mathrm{Bin}(y \\mid n, \\sigma(f)) = \\binom{n}{y} \\frac{(e^f)^y}{(1 + e^f)^n},

which is seed 000, eq. 26 with a = y, b = n and c(y) = C(n, y) (b = 1 for the Bernoulli).
The log-density is evaluated as y·f − n·softplus(f), never as log σ(f) or log(1 − σ(f)) of a
rounded probability, so it is exact for |f| ≫ 1 on both sides.
"""

from __future__ import annotations

from typing import Any, ClassVar

import jax
import jax.scipy.special  # noqa: F401  (betainc, gammaincc for the CDFs)
import jax.scipy.stats  # noqa: F401
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from gplvm._pytree import pytree_dataclass
from gplvm._validation import _where, check_counts
from gplvm.likelihoods._common import as_float, plain_softplus, sigmoid_product, softplus
from gplvm.likelihoods.base import AbstractLikelihood
from gplvm.registry import register
from gplvm.typing import Array


def logit_centre(Y: np.ndarray, trials: np.ndarray) -> np.ndarray:
    """The logit of each column's mean proportion Σy / Σn, clipped half a count inside
    (0, 1) (:meth:`AbstractLikelihood.intercept_centre` of the logistic family)."""
    obs = ~np.isnan(Y)
    Y0 = np.where(obs, Y, 0.0)
    n_obs = np.maximum(obs.sum(0), 1)
    p = Y0.sum(0) / np.maximum((trials * obs).sum(0), 1e-12)
    p = np.clip(p, 0.5 / n_obs, 1 - 0.5 / n_obs)
    return np.log(p) - np.log1p(-p)


@register("gplvm.likelihoods.Bernoulli")
@pytree_dataclass
class Bernoulli(AbstractLikelihood):
    """y | f ~ Bernoulli(σ(f)) for binary data coded 0/1 (NaN = missing)."""

    name: ClassVar[str] = "bernoulli"
    supports_polya_gamma: ClassVar[bool] = True

    def _log_prob(self, Y: Array, F: Array) -> Array:
        return Y * F - softplus(F)

    def _psi_log_prob(self, Y: Array, F: Array) -> Array:
        return Y * F - plain_softplus(F)

    @classmethod
    def intercept_centre(cls, Y: np.ndarray, offset: np.ndarray, trials: np.ndarray
                         ) -> np.ndarray:
        return logit_centre(Y, trials)

    def _grad_log_prob(self, Y: Array, F: Array) -> Array:
        return Y - jax.nn.sigmoid(F)

    def _curvature(self, Y: Array, F: Array) -> Array:
        return jnp.broadcast_to(sigmoid_product(F), jnp.shape(Y - F))

    def _inverse_link(self, F: Array) -> Array:
        return jax.nn.sigmoid(as_float(F))

    def _conditional_variance(self, F: Array) -> Array:
        # σ(f)·σ(−f) rather than p(1 − p): no cancellation when p rounds to 1.
        F = as_float(F)
        return jax.nn.sigmoid(F) * jax.nn.sigmoid(-F)

    def _cdf(self, y: Array, F: Array) -> Array:
        # P(Y <= y): 0 below 0, 1 − σ(f) = σ(−f) on [0, 1), 1 from 1 on
        return jnp.where(y < 0, 0.0, jnp.where(y < 1, jax.nn.sigmoid(-F), 1.0))

    def _sample(self, key: Array, F: Array) -> Array:
        return jax.random.bernoulli(key, jax.nn.sigmoid(F)).astype(F.dtype)

    def _check(self, Y: np.ndarray) -> None:
        bad = ~np.isnan(Y) & (Y != 0) & (Y != 1)
        if bad.any():
            raise ValueError(f"Y has {int(bad.sum())} entries outside {{0, 1}} at (row, column) "
                             f"{_where(bad)}; the bernoulli likelihood needs binary data coded "
                             f"0/1 (NaN for missing); for counts use likelihood='binomial' or "
                             f"'poisson'")

    def _polya_gamma_params(self, Y: Array) -> tuple[Array, Array, Array]:
        """a = y, b = 1, κ = y − 1/2 (seed 000, text after eq. 28); zeros where Y is NaN."""
        return self._pg_masked(Y, Y, jnp.ones_like(Y))


@register("gplvm.likelihoods.Binomial")
@pytree_dataclass
class Binomial(AbstractLikelihood):
    """y | f ~ Binomial(n_trials, σ(f)).

    Args:
        n_trials: number of trials n ≥ 0, a scalar or an integer array broadcastable to the shape
            of ``Y``: one per column (D,), one per row (N, 1), or one per entry (N, D).  Data,
            not trainable.
    """

    n_trials: Any = 1

    name: ClassVar[str] = "binomial"
    supports_polya_gamma: ClassVar[bool] = True
    takes_trials: ClassVar[bool] = True

    @classmethod
    def from_state(cls, trials: Array, noise_var: Array, dispersion: Array) -> Binomial:
        return cls(n_trials=trials)

    def _psi_log_prob(self, Y: Array, F: Array) -> Array:
        return Y * F - self.n_trials * plain_softplus(F)

    @classmethod
    def intercept_centre(cls, Y: np.ndarray, offset: np.ndarray, trials: np.ndarray
                         ) -> np.ndarray:
        return logit_centre(Y, trials)

    def _log_prob(self, Y: Array, F: Array) -> Array:
        n = as_float(self.n_trials, F)
        log_choose = gammaln(n + 1.0) - gammaln(Y + 1.0) - gammaln(n - Y + 1.0)
        return log_choose + Y * F - n * softplus(F)

    def _grad_log_prob(self, Y: Array, F: Array) -> Array:
        return Y - as_float(self.n_trials, F) * jax.nn.sigmoid(F)

    def _curvature(self, Y: Array, F: Array) -> Array:
        n = as_float(self.n_trials, F)
        return jnp.broadcast_to(n * sigmoid_product(F), jnp.shape(Y - F))

    def _inverse_link(self, F: Array) -> Array:
        F = as_float(F)
        return as_float(self.n_trials, F) * jax.nn.sigmoid(F)

    def _conditional_variance(self, F: Array) -> Array:
        F = as_float(F)
        return as_float(self.n_trials, F) * jax.nn.sigmoid(F) * jax.nn.sigmoid(-F)

    def _cdf(self, y: Array, F: Array) -> Array:
        # P(Y <= k) = I_{1-p}(n - k, k + 1) (regularised incomplete beta), p = σ(f)
        n = jnp.broadcast_to(as_float(self.n_trials, F), F.shape)
        k = jnp.floor(y)
        inside = (k >= 0) & (k < n)
        val = jax.scipy.special.betainc(jnp.where(inside, n - k, 1.0),
                                        jnp.where(inside, k + 1.0, 1.0), jax.nn.sigmoid(-F))
        return jnp.where(k < 0, 0.0, jnp.where(k >= n, 1.0, val))

    def _sample(self, key: Array, F: Array) -> Array:
        n = jnp.broadcast_to(as_float(self.n_trials, F), F.shape)
        return jax.random.binomial(key, n, jax.nn.sigmoid(F), dtype=F.dtype)

    def _check(self, Y: np.ndarray) -> None:
        n = np.asarray(self.n_trials, dtype=float)
        try:
            shape = np.broadcast_shapes(n.shape, Y.shape)
        except ValueError:
            shape = None
        if shape != Y.shape:
            raise ValueError(f"n_trials has shape {n.shape}, which does not broadcast to the "
                             f"shape of Y {Y.shape}; pass a scalar, one value per column "
                             f"(shape ({Y.shape[1]},)), per row (shape ({Y.shape[0]}, 1)) or "
                             f"per entry")
        bad = ~np.isfinite(n) | (n < 0) | (n != np.round(n))
        if bad.any():
            raise ValueError(f"n_trials has {int(bad.sum())} entries that are not non-negative "
                             f"integers; the binomial likelihood needs whole numbers of trials")
        check_counts(Y, upper=np.broadcast_to(n, Y.shape), what="binomial")

    def _polya_gamma_params(self, Y: Array) -> tuple[Array, Array, Array]:
        """a = y, b = n_trials, κ = y − n/2 (seed 000, eq. 26); zeros where Y is NaN."""
        return self._pg_masked(Y, Y, jnp.broadcast_to(as_float(self.n_trials, Y), Y.shape))

"""Poisson likelihood with log link, y | f ~ Poisson(e^f) (seed 000, §3.3 and Table 1)."""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.scipy.special  # noqa: F401  (betainc, gammaincc for the CDFs)
import jax.scipy.stats  # noqa: F401
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from gplvm._pytree import pytree_dataclass
from gplvm._validation import check_counts
from gplvm.likelihoods._common import as_float
from gplvm.likelihoods.base import AbstractLikelihood
from gplvm.registry import register
from gplvm.typing import Array


@register("gplvm.likelihoods.Poisson")
@pytree_dataclass
class Poisson(AbstractLikelihood):
    """y | f ~ Poisson(λ = e^f).

    Not of the logistic form of seed 000, eq. 26 (``supports_polya_gamma`` is False): the
    paper samples its weights by elliptical slice sampling instead.
    """

    name: ClassVar[str] = "poisson"
    log_rate_slice: ClassVar[bool] = True
    count_layouts: ClassVar[tuple[str, ...]] = ("nonzero", "log_factorial")

    def _log_prob(self, Y: Array, F: Array) -> Array:
        # y·f − e^f − log y!: uses f directly, never log(e^f), so it is exact for f ≪ 0.
        return Y * F - jnp.exp(F) - gammaln(Y + 1.0)

    def _psi_log_prob(self, Y: Array, F: Array) -> Array:
        return Y * F - jnp.exp(F)

    def _psi_free_total(self, data) -> Array | None:
        # −Σ log y!, summed once over the observed counts (the sampler's data layout)
        if data.nonzero is None or data.log_factorial is None:
            return None
        return -data.log_factorial

    def _grad_log_prob(self, Y: Array, F: Array) -> Array:
        return Y - jnp.exp(F)

    def _curvature(self, Y: Array, F: Array) -> Array:
        return jnp.broadcast_to(jnp.exp(F), jnp.shape(Y - F))

    def _inverse_link(self, F: Array) -> Array:
        return jnp.exp(as_float(F))

    def _conditional_variance(self, F: Array) -> Array:
        return jnp.exp(as_float(F))

    def _predictive_mean_var(self, F_mean: Array, F_var: Array,
                             n_points: int) -> tuple[Array, Array]:
        """Closed form under f ~ N(m, v) (log-normal moments; ``n_points`` is ignored).

        .. math:: E[y] = e^{m + v/2}, \\qquad
                  \\mathrm{Var}[y] = E[y] + (e^{v} - 1)\\, e^{2m + v}.
        """
        mean = jnp.exp(F_mean + F_var / 2.0)
        return mean, mean + jnp.expm1(F_var) * mean**2

    def _expected_log_prob(self, Y: Array, F_mean: Array, F_var: Array,
                           n_points: int) -> Array:
        # Closed form y·m − e^{m + v/2} − log y!; 0 where Y is NaN.
        missing = jnp.isnan(Y)
        Y_safe = jnp.where(missing, 0.0, Y)
        ell = Y_safe * F_mean - jnp.exp(F_mean + F_var / 2.0) - gammaln(Y_safe + 1.0)
        return jnp.where(missing, 0.0, ell)

    def _cdf(self, y: Array, F: Array) -> Array:
        # P(Y <= k) = Q(k + 1, λ), the regularised upper incomplete gamma function
        k = jnp.floor(y)
        val = jax.scipy.special.gammaincc(jnp.maximum(k, 0.0) + 1.0, jnp.exp(F))
        return jnp.where(k < 0, 0.0, val)

    def _sample(self, key: Array, F: Array) -> Array:
        return jax.random.poisson(key, jnp.exp(F)).astype(F.dtype)

    def _check(self, Y: np.ndarray) -> None:
        check_counts(Y, what="poisson")

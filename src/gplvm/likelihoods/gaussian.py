"""Gaussian likelihood y | f ~ N(f, noise_var) (seeds 000, 001, 002)."""

from __future__ import annotations

from typing import Any, ClassVar

import jax
import jax.scipy.special  # noqa: F401  (betainc, gammaincc for the CDFs)
import jax.scipy.stats  # noqa: F401
import jax.numpy as jnp
import numpy as np

from gplvm._pytree import pytree_dataclass, replace
from gplvm.likelihoods._common import as_float, check_positive
from gplvm.likelihoods.base import AbstractLikelihood
from gplvm.transforms import inverse_softplus, softplus
from gplvm.registry import register
from gplvm.typing import Array


@register("gplvm.likelihoods.Gaussian")
@pytree_dataclass
class Gaussian(AbstractLikelihood):
    """y | f ~ N(f, noise_var), identity link.

    Args:
        noise_var: the noise *variance* σ² (not the precision ``beta_noise``); a scalar or one
            value per column (shape (D,)).  Trainable, optimised as softplus⁻¹(σ²).
    """

    noise_var: Any = 1.0

    name: ClassVar[str] = "gaussian"
    is_count: ClassVar[bool] = False
    sampled_parameter: ClassVar[tuple[str, str] | None] = (
        "noise_var", "the noise variance (inverse-gamma prior)")
    takes_offset: ClassVar[bool] = False
    conjugate_normal: ClassVar[bool] = True

    @classmethod
    def from_state(cls, trials: Array, noise_var: Array, dispersion: Array) -> Gaussian:
        return cls(noise_var=noise_var)

    def _log_prob(self, Y: Array, F: Array) -> Array:
        var = as_float(self.noise_var, F)
        return -0.5 * (jnp.log(2.0 * jnp.pi * var) + (Y - F) ** 2 / var)

    def _psi_log_prob(self, Y: Array, F: Array) -> Array:
        return -0.5 * (Y - F) ** 2 / self.noise_var

    def _psi_free_total(self, data) -> Array:
        # −½ log(2πσ_j²) per observed entry
        n_obs = jnp.sum(data.observed, axis=0)
        return -0.5 * jnp.sum(n_obs * jnp.log(2.0 * jnp.pi * self.noise_var))

    def _grad_log_prob(self, Y: Array, F: Array) -> Array:
        return (Y - F) / as_float(self.noise_var, F)

    def _curvature(self, Y: Array, F: Array) -> Array:
        return jnp.broadcast_to(1.0 / as_float(self.noise_var, F), jnp.shape(Y - F))

    def _inverse_link(self, F: Array) -> Array:
        return as_float(F)

    def _conditional_variance(self, F: Array) -> Array:
        F = as_float(F)
        return jnp.broadcast_to(as_float(self.noise_var, F), F.shape)

    def _predictive_mean_var(self, F_mean: Array, F_var: Array,
                             n_points: int) -> tuple[Array, Array]:
        # Closed form: y ~ N(F_mean, F_var + noise_var).
        return F_mean, self._conditional_variance(F_mean) + F_var

    def _expected_log_prob(self, Y: Array, F_mean: Array, F_var: Array,
                           n_points: int) -> Array:
        # Closed form: −½ log(2πσ²) − ((y − m)² + v) / (2σ²); 0 where Y is NaN.
        missing = jnp.isnan(Y)
        Y_safe = jnp.where(missing, 0.0, Y)
        var = as_float(self.noise_var, F_mean)
        ell = -0.5 * (jnp.log(2.0 * jnp.pi * var) + ((Y_safe - F_mean) ** 2 + F_var) / var)
        return jnp.where(missing, 0.0, ell)

    def _cdf(self, y: Array, F: Array) -> Array:
        return jax.scipy.stats.norm.cdf((y - F) / jnp.sqrt(as_float(self.noise_var, F)))

    def _sample(self, key: Array, F: Array) -> Array:
        noise = jax.random.normal(key, F.shape, dtype=F.dtype)
        return F + jnp.sqrt(as_float(self.noise_var, F)) * noise

    def _check(self, Y: np.ndarray) -> None:
        check_positive(self.noise_var, "noise_var", Y.shape[1])

    def unconstrained(self) -> dict[str, Any]:
        return {"noise_var": inverse_softplus(self.noise_var)}

    def from_unconstrained(self, u: dict[str, Any]) -> Gaussian:
        return replace(self, noise_var=softplus(u["noise_var"]))

r"""Stationary kernels and their spectral densities (Bochner's theorem; seed 002 §1.4, Table 1).

Every kernel here has the form :math:`k(\tau) = \sigma^2 \rho(r^2)` with the scaled squared distance
:math:`r^2 = \sum_q \tau_q^2 / \ell_q^2` (isotropic: one ℓ; ARD: one ℓ per input dimension).
By Bochner's theorem :math:`\rho(\tau) = E_{w \sim p}[\cos(w^\top \tau)]` for a probability
density :math:`p` — the *spectral density*.  Because ρ depends on τ only through τ/ℓ, the
frequencies factor as :math:`w = \varepsilon / \ell` (element-wise) with ε drawn from the
density of the unit-length-scale kernel; :meth:`sample_standard_frequencies` draws ε, and random
feature maps keep ε fixed so that features stay differentiable in ℓ (reparameterisation).

Derivations of the standard densities (unit ℓ, input dimension d):

* **RBF** :math:`\rho = e^{-r^2/2}`: the characteristic function of N(0, I) is
  :math:`e^{-\|\tau\|^2/2}`, so ε ~ N(0, I_d) and w ~ N(0, diag ℓ⁻²).  (Seed 002 Table 1 writes
  ℓ⁻¹ for the covariance; it is ℓ⁻².)
* **Matérn ν** :math:`\rho = \frac{2^{1-\nu}}{\Gamma(\nu)}(\sqrt{2\nu} r)^\nu K_\nu(\sqrt{2\nu} r)`:
  its Fourier transform is :math:`\propto (2\nu + \|w\|^2)^{-(\nu + d/2)}`, which is the density of
  a multivariate Student-t with 2ν degrees of freedom and scale matrix I,
  :math:`\propto (1 + \|w\|^2/(2\nu))^{-(2\nu + d)/2}`.  Sample ε = z / sqrt(u / 2ν) with
  z ~ N(0, I_d), u ~ χ²_{2ν} (a Gaussian scale mixture).  Matern12 (exponential, ν = ½) is the
  multivariate t with 1 degree of freedom — the multivariate *Cauchy*.  A product of univariate
  Cauchy densities (seed 002's "Laplace" row) belongs to exp(−‖τ‖₁/ℓ), a different kernel.
* **Rational quadratic** :math:`\rho = (1 + r^2/(2\alpha))^{-\alpha}`: with τ ~ Gamma(α, rate α),
  :math:`E[e^{-\tau r^2/2}] = (1 + r^2/(2\alpha))^{-\alpha}`, so ε = sqrt(τ) z, z ~ N(0, I_d).
  With α = 1 this is seed 002's Cauchy kernel 1/(1 + ‖τ‖²/ℓ_c²) only after ℓ_c = √2 ℓ.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from gplvm._pytree import pytree_dataclass
from gplvm.kernels.base import AbstractKernel
from gplvm.registry import register
from gplvm.typing import Array, ArrayLike, Float, Parameter, PRNGKeyArray, Real


def _safe_sqrt(x):
    """sqrt with a zero (not NaN) gradient at 0: the double-where trick."""
    positive = x > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, x, 1.0)), 0.0)


class AbstractStationary(AbstractKernel):
    """σ² ρ(r²) with r² the length-scale-scaled squared distance.

    Subclasses define ``lengthscale`` (scalar or (Q,) for ARD), ``variance`` and implement
    :meth:`_profile` (ρ as a function of r²) and :meth:`sample_standard_frequencies`.
    """

    lengthscale: Parameter
    variance: Parameter

    @property
    def is_stationary(self) -> bool:
        return True

    def scaled_sqdist(self, X1: Float[Array, "N Q"], X2: Float[Array, "M Q"]
                      ) -> Float[Array, "N M"]:
        """r²[i, j] = Σ_q (X1[i, q] − X2[j, q])² / ℓ_q², clipped at 0 against round-off."""
        ell = jnp.asarray(self.lengthscale, dtype=float)
        A, B = X1 / ell, X2 / ell
        r2 = (jnp.sum(A**2, axis=1)[:, None] + jnp.sum(B**2, axis=1)[None, :]
              - 2.0 * A @ B.T)
        return jnp.maximum(r2, 0.0)

    def _cross(self, X1, X2):
        return jnp.asarray(self.variance, dtype=float) * self._profile(self.scaled_sqdist(X1, X2))

    def _gram(self, X):
        r2 = self.scaled_sqdist(X, X)
        # the diagonal is exactly zero distance; the expansion leaves ~1e-16 round-off there
        r2 = r2 * (1.0 - jnp.eye(X.shape[0]))
        return jnp.asarray(self.variance, dtype=float) * self._profile(r2)

    def _diag(self, X):
        return jnp.full(X.shape[0], jnp.asarray(self.variance, dtype=float))

    def correlation(self, r2: Real[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
        """ρ(r²) = k(τ)/σ² as a function of the scaled squared distance."""
        return self._profile(jnp.asarray(r2, dtype=float))

    def _profile(self, r2):  # pragma: no cover - abstract
        raise NotImplementedError

    def sample_standard_frequencies(self, key: PRNGKeyArray, n: int, input_dim: int
                                    ) -> Float[Array, "n input_dim"]:
        """ε of shape (n, input_dim) from the spectral density of the unit-ℓ kernel."""
        return self._standard_frequencies(key, n, input_dim)

    def _standard_frequencies(self, key, n, input_dim):  # pragma: no cover - abstract
        raise NotImplementedError

    def sample_frequencies(self, key: PRNGKeyArray, n: int, input_dim: int
                           ) -> Float[Array, "n input_dim"]:
        """Frequencies W (n × input_dim, e.g. M/2 × Q) with E[cos(w·(x − x'))] = k(x − x')/σ²."""
        eps = self.sample_standard_frequencies(key, n, input_dim)
        return eps / jnp.asarray(self.lengthscale, dtype=float)

    def log_spectral_density(self, W: Real[ArrayLike, "M2 Q"] | Real[ArrayLike, " Q"]
                             ) -> Float[Array, " M2"]:
        """log p(w) of the (normalised) spectral density, one value per row of W (M/2 × Q;
        a 1-D ``W`` is one frequency)."""
        return self._log_spectral_density(jnp.atleast_2d(jnp.asarray(W, dtype=float)))

    def _log_spectral_density(self, W):
        raise NotImplementedError(f"{type(self).__name__} has no closed-form spectral density")


@register("gplvm.kernels.RBF")
@pytree_dataclass
class RBF(AbstractStationary):
    """Squared exponential k = σ² exp(−r²/2); spectral density N(0, diag ℓ⁻²)."""

    lengthscale: Parameter = 1.0
    variance: Parameter = 1.0

    def _profile(self, r2):
        return jnp.exp(-0.5 * r2)

    def _standard_frequencies(self, key, n, input_dim):
        return jax.random.normal(key, (n, input_dim))

    def _log_spectral_density(self, W):
        ell = jnp.broadcast_to(jnp.asarray(self.lengthscale, dtype=float), (W.shape[1],))
        eps = W * ell
        return (-0.5 * jnp.sum(eps**2, axis=1) - 0.5 * W.shape[1] * math.log(2 * math.pi)
                + jnp.sum(jnp.log(ell)))


class AbstractMatern(AbstractStationary):
    """Matérn ν; spectral density a multivariate t with 2ν degrees of freedom, scale diag ℓ⁻²."""

    nu: float

    def _standard_frequencies(self, key, n, input_dim):
        kz, ku = jax.random.split(key)
        dof = 2.0 * self.nu
        z = jax.random.normal(kz, (n, input_dim))
        u = 2.0 * jax.random.gamma(ku, dof / 2.0, (n, 1))  # chi-square with 2ν dof
        return z / jnp.sqrt(u / dof)

    def _log_spectral_density(self, W):
        d = W.shape[1]
        dof = 2.0 * self.nu
        ell = jnp.broadcast_to(jnp.asarray(self.lengthscale, dtype=float), (d,))
        eps = W * ell
        return (gammaln((dof + d) / 2) - gammaln(dof / 2) - 0.5 * d * jnp.log(dof * jnp.pi)
                - 0.5 * (dof + d) * jnp.log1p(jnp.sum(eps**2, axis=1) / dof)
                + jnp.sum(jnp.log(ell)))


@register("gplvm.kernels.Matern12")
@pytree_dataclass
class Matern12(AbstractMatern):
    """Exponential kernel σ² exp(−r) (Matérn ν = ½); spectral density multivariate Cauchy."""

    lengthscale: Parameter = 1.0
    variance: Parameter = 1.0
    nu = 0.5

    def _profile(self, r2):
        return jnp.exp(-_safe_sqrt(r2))


@register("gplvm.kernels.Matern32")
@pytree_dataclass
class Matern32(AbstractMatern):
    """σ² (1 + √3 r) exp(−√3 r); spectral density multivariate t with 3 degrees of freedom."""

    lengthscale: Parameter = 1.0
    variance: Parameter = 1.0
    nu = 1.5

    def _profile(self, r2):
        s = math.sqrt(3.0) * _safe_sqrt(r2)
        return (1.0 + s) * jnp.exp(-s)


@register("gplvm.kernels.Matern52")
@pytree_dataclass
class Matern52(AbstractMatern):
    """σ² (1 + √5 r + 5r²/3) exp(−√5 r); spectral density multivariate t with 5 dof."""

    lengthscale: Parameter = 1.0
    variance: Parameter = 1.0
    nu = 2.5

    def _profile(self, r2):
        s = math.sqrt(5.0) * _safe_sqrt(r2)
        return (1.0 + s + 5.0 * r2 / 3.0) * jnp.exp(-s)


@register("gplvm.kernels.RationalQuadratic")
@pytree_dataclass
class RationalQuadratic(AbstractStationary):
    """σ² (1 + r²/(2α))^(−α): a Gamma(α, rate α) scale mixture of RBFs.

    ``alpha`` is a trainable positive leaf of the kernel, but random feature maps hold the
    frequencies drawn at one α fixed (the Gamma draw is not reparameterisable in α).
    """

    lengthscale: Parameter = 1.0
    variance: Parameter = 1.0
    alpha: Parameter = 1.0

    def _profile(self, r2):
        alpha = jnp.asarray(self.alpha, dtype=float)
        return jnp.power(1.0 + r2 / (2.0 * alpha), -alpha)

    def _standard_frequencies(self, key, n, input_dim):
        kz, kt = jax.random.split(key)
        alpha = jnp.asarray(self.alpha, dtype=float)
        tau = jax.random.gamma(kt, alpha, (n, 1)) / alpha
        return jnp.sqrt(tau) * jax.random.normal(kz, (n, input_dim))

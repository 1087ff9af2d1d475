r"""Bayesian linear regression on a feature basis (seed 002 §1.2, eqs. 12–17).

Model: :math:`y = \Phi w + \epsilon`, :math:`w \sim N(0, \Lambda)` with Λ diagonal (one variance
per basis block), :math:`\epsilon \sim N(0, \sigma^2 I)`.  Two exact routes, chosen by shape so
that the cost is O(N M min(N, M)):

**Primal (N ≥ M)**, through the M × M matrix

.. math:: B = I_M + \Lambda^{1/2} \Phi^\top \Phi \Lambda^{1/2} / \sigma^2 = L L^\top,

which is better conditioned than :math:`A = \Lambda^{-1} + \Phi^\top\Phi/\sigma^2` when some
prior variances are small:

* eq. 14 by the Woodbury identity and the matrix determinant lemma:
  :math:`\log|\sigma^2 I + \Phi\Lambda\Phi^\top| = N \log\sigma^2 + \log|B|` and
  :math:`y^\top(\sigma^2 I + \Phi\Lambda\Phi^\top)^{-1} y = (y^\top y - \|L^{-1} b\|^2)/\sigma^2`
  with :math:`b = \Lambda^{1/2}\Phi^\top y/\sigma`;
* posterior :math:`C = A^{-1} = \Lambda^{1/2} B^{-1} \Lambda^{1/2}`,
  :math:`m = C\Phi^\top y/\sigma^2 = \Lambda^{1/2} B^{-1} b / \sigma`;
* predictive (eqs. 15–17): mean :math:`\phi_*^\top m`, variance
  :math:`\sigma^2 + \|L^{-1}\Lambda^{1/2}\phi_*\|^2`.

**Dual (N < M)**, through the N × N covariance of eq. 14 itself,
:math:`K = \Phi\Lambda\Phi^\top + \sigma^2 I = L_K L_K^\top`: eq. 14 directly,
:math:`m = \Lambda\Phi^\top K^{-1} y` and :math:`C = \Lambda - \Lambda\Phi^\top K^{-1}\Phi\Lambda`
(the push-through and Woodbury identities applied to the primal forms), predictive variance
:math:`\sigma^2 + \phi_*^\top\Lambda\phi_* - \|L_K^{-1}\Phi\Lambda\phi_*\|^2`.  With M = 2000
random features and a few hundred points this is what makes the GP limit cheap.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp

from gplvm.linalg import logdet_from_cholesky, solve_triangular
from gplvm.registry import register


@register("gplvm.state.LinearPosterior")
class LinearPosterior(NamedTuple):
    """N(m, C) over the weights (primal form): C = S B⁻¹ S, S = Λ^{1/2}, B = L Lᵀ."""

    m: jnp.ndarray           # (M,)
    L: jnp.ndarray           # (M, M) lower factor of B
    sqrt_prior: jnp.ndarray  # (M,) Λ^{1/2}
    noise_var: jnp.ndarray

    def covariance(self) -> jnp.ndarray:
        Linv_S = solve_triangular(self.L, jnp.diag(self.sqrt_prior))
        return Linv_S.T @ Linv_S

    def predict(self, Phi_star):
        V = solve_triangular(self.L, (Phi_star * self.sqrt_prior).T)
        return Phi_star @ self.m, self.noise_var + jnp.sum(V**2, axis=0)


@register("gplvm.state.DualLinearPosterior")
class DualLinearPosterior(NamedTuple):
    """N(m, C) over the weights (dual form): C = Λ − (ΦΛ)ᵀ K⁻¹ (ΦΛ), K = L Lᵀ (N × N)."""

    m: jnp.ndarray           # (M,)
    L: jnp.ndarray           # (N, N) lower factor of K = ΦΛΦᵀ + σ²I
    Phi_prior: jnp.ndarray   # (N, M) ΦΛ of the training inputs
    prior_var: jnp.ndarray   # (M,) Λ
    noise_var: jnp.ndarray

    def covariance(self) -> jnp.ndarray:
        W = solve_triangular(self.L, self.Phi_prior)
        return jnp.diag(self.prior_var) - W.T @ W

    def predict(self, Phi_star):
        V = solve_triangular(self.L, self.Phi_prior @ Phi_star.T)
        prior_f = (Phi_star**2) @ self.prior_var
        return Phi_star @ self.m, self.noise_var + prior_f - jnp.sum(V**2, axis=0)


def _primal(Phi, prior_var, noise_var):
    sqrt_prior = jnp.sqrt(prior_var)
    PS = Phi * sqrt_prior                      # Φ Λ^{1/2}
    B = jnp.eye(Phi.shape[1]) + PS.T @ PS / noise_var
    return jnp.linalg.cholesky(B), sqrt_prior, PS


def _dual(Phi, prior_var, noise_var):
    Phi_prior = Phi * prior_var                # Φ Λ
    K = Phi_prior @ Phi.T + noise_var * jnp.eye(Phi.shape[0])
    return jnp.linalg.cholesky(K), Phi_prior


def _use_dual(Phi) -> bool:
    return Phi.shape[0] < Phi.shape[1]


def log_marginal_likelihood(Phi, y, prior_var, noise_var):
    """log N(y | 0, Φ Λ Φᵀ + σ² I) in O(N M min(N, M)) (seed 002 eq. 14).

    Args:
        Phi: features (N, M).
        y: targets (N,).
        prior_var: diagonal of Λ, shape (M,).
        noise_var: σ².
    """
    N = Phi.shape[0]
    if _use_dual(Phi):
        L, _ = _dual(Phi, prior_var, noise_var)
        alpha = solve_triangular(L, y)
        return -0.5 * (N * math.log(2 * math.pi) + logdet_from_cholesky(L) + alpha @ alpha)
    L, _, PS = _primal(Phi, prior_var, noise_var)
    c = solve_triangular(L, PS.T @ y / jnp.sqrt(noise_var))
    quad = (y @ y - c @ c) / noise_var
    logdet = N * jnp.log(noise_var) + logdet_from_cholesky(L)
    return -0.5 * (N * math.log(2 * math.pi) + logdet + quad)


def posterior(Phi, y, prior_var, noise_var):
    """The exact weight posterior N(m, C) (seed 002, below eq. 14), primal or dual by shape."""
    if _use_dual(Phi):
        L, Phi_prior = _dual(Phi, prior_var, noise_var)
        alpha = solve_triangular(L, solve_triangular(L, y), trans=True)    # K⁻¹ y
        return DualLinearPosterior(Phi_prior.T @ alpha, L, Phi_prior, prior_var,
                                   jnp.asarray(noise_var))
    L, sqrt_prior, PS = _primal(Phi, prior_var, noise_var)
    b = PS.T @ y / jnp.sqrt(noise_var)
    v = solve_triangular(L, solve_triangular(L, b), trans=True)
    return LinearPosterior(sqrt_prior * v / jnp.sqrt(noise_var), L, sqrt_prior,
                           jnp.asarray(noise_var))


def predict(post, Phi_star):
    """Predictive mean φ*ᵀm and variance σ² + φ*ᵀCφ* of y* (seed 002 eqs. 16–17)."""
    return post.predict(Phi_star)

r"""Bayesian linear regression on a feature basis (seed 002 §1.2, eqs. 12–17).

Model: :math:`y = \Phi w + \epsilon`, :math:`w \sim N(0, \Lambda)` with Λ diagonal (one variance
per basis block), :math:`\epsilon \sim N(0, \sigma^2 I)`.  Everything is computed through the
M × M matrix

.. math:: B = I_M + \Lambda^{1/2} \Phi^\top \Phi \Lambda^{1/2} / \sigma^2 = L L^\top,

which is better conditioned than :math:`A = \Lambda^{-1} + \Phi^\top\Phi/\sigma^2` when some
prior variances are small, at a cost of O(N M²):

* eq. 14 by the Woodbury identity and the matrix determinant lemma:
  :math:`\log|\sigma^2 I + \Phi\Lambda\Phi^\top| = N \log\sigma^2 + \log|B|` and
  :math:`y^\top(\sigma^2 I + \Phi\Lambda\Phi^\top)^{-1} y = (y^\top y - \|L^{-1} b\|^2)/\sigma^2`
  with :math:`b = \Lambda^{1/2}\Phi^\top y/\sigma`;
* posterior :math:`C = A^{-1} = \Lambda^{1/2} B^{-1} \Lambda^{1/2}`,
  :math:`m = C\Phi^\top y/\sigma^2 = \Lambda^{1/2} B^{-1} b / \sigma`;
* predictive (eqs. 15–17): mean :math:`\phi_*^\top m`, variance
  :math:`\sigma^2 + \|L^{-1}\Lambda^{1/2}\phi_*\|^2`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp

from gplvm.linalg import logdet_from_cholesky, solve_triangular


class LinearPosterior(NamedTuple):
    """N(m, C) over the weights, kept in factored form: C = S B⁻¹ S, S = Λ^{1/2}, B = L Lᵀ."""

    m: jnp.ndarray       # (M,)
    L: jnp.ndarray       # (M, M) lower factor of B
    sqrt_prior: jnp.ndarray  # (M,) Λ^{1/2}
    noise_var: jnp.ndarray

    def covariance(self) -> jnp.ndarray:
        Linv_S = solve_triangular(self.L, jnp.diag(self.sqrt_prior))
        return Linv_S.T @ Linv_S


def _factor(Phi, prior_var, noise_var):
    sqrt_prior = jnp.sqrt(prior_var)
    PS = Phi * sqrt_prior                      # Φ Λ^{1/2}
    B = jnp.eye(Phi.shape[1]) + PS.T @ PS / noise_var
    return jnp.linalg.cholesky(B), sqrt_prior, PS


def log_marginal_likelihood(Phi, y, prior_var, noise_var):
    """log N(y | 0, Φ Λ Φᵀ + σ² I) in O(N M²) (seed 002 eq. 14).

    Args:
        Phi: features (N, M).
        y: targets (N,).
        prior_var: diagonal of Λ, shape (M,).
        noise_var: σ².
    """
    N = Phi.shape[0]
    L, _, PS = _factor(Phi, prior_var, noise_var)
    b = PS.T @ y / jnp.sqrt(noise_var)
    c = solve_triangular(L, b)
    quad = (y @ y - c @ c) / noise_var
    logdet = N * jnp.log(noise_var) + logdet_from_cholesky(L)
    return -0.5 * (N * math.log(2 * math.pi) + logdet + quad)


def posterior(Phi, y, prior_var, noise_var) -> LinearPosterior:
    """The exact weight posterior N(m, C) (seed 002, below eq. 14)."""
    L, sqrt_prior, PS = _factor(Phi, prior_var, noise_var)
    b = PS.T @ y / jnp.sqrt(noise_var)
    v = solve_triangular(L, solve_triangular(L, b), trans=True)
    return LinearPosterior(sqrt_prior * v / jnp.sqrt(noise_var), L, sqrt_prior,
                           jnp.asarray(noise_var))


def predict(post: LinearPosterior, Phi_star):
    """Predictive mean φ*ᵀm and variance σ² + φ*ᵀCφ* of y* (seed 002 eqs. 16–17)."""
    mean = Phi_star @ post.m
    V = solve_triangular(post.L, (Phi_star * post.sqrt_prior).T)
    return mean, post.noise_var + jnp.sum(V**2, axis=0)

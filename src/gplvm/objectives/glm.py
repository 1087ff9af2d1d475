r"""The GLM evidence lower bound with a mixture-of-Gaussians posterior (seed 002 §1.3).

q(w) = (1/K) Σ_k N(w | m_k, Ψ_k), Ψ_k diagonal (eq. 21).  The bound (eqs. 22–27) is

.. math::
    \mathcal{L} \approx \frac{1}{K}\sum_k \Big[\frac{N}{|B|}\sum_{n \in B}\frac{1}{L}\sum_l
        \log p(y_n \mid f_{nk}^{(l)}) + \log N(m_k \mid 0, \Lambda)
        - \tfrac12 \mathrm{tr}(\Lambda^{-1}\Psi_k)\Big]
        - \frac{1}{K}\sum_k \log \sum_j \frac{1}{K} N(m_k \mid m_j, \Psi_k + \Psi_j),

* the expected log-likelihood of eq. 25 by the reparameterisation trick (eq. 26).  The
  likelihood sees w only through :math:`f_n = \phi_n^\top w`, and under
  :math:`w \sim N(m_k, \Psi_k)` this scalar is exactly
  :math:`N(\phi_n^\top m_k,\ (\phi_n \odot \phi_n)^\top \operatorname{diag}\Psi_k)`, so we draw
  :math:`f_{nk}^{(l)} = \phi_n^\top m_k
  + \sqrt{(\phi_n\odot\phi_n)^\top\Psi_k}\,\epsilon_{nk}^{(l)}`
  (the "local" reparameterisation of Kingma, Salimans & Welling 2015).  The estimate has the
  same expectation as eq. 25 with draws of the M-vector w, costs O(B M K) instead of
  O(B M K L), and has lower variance because the draws are independent across data points;
* the expected log-prior :math:`\langle \log N(w|0,\Lambda)\rangle_{q_k} = \log N(m_k|0,\Lambda)
  - \frac12\mathrm{tr}(\Lambda^{-1}\Psi_k)` in closed form;
* the entropy lower bound of eq. 24;
* the minibatch boost N/|B| of eq. 6 on the data term only (the prior and entropy terms are the
  "g(θ)" of eq. 4, counted once per step).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp


def entropy_lower_bound(m, psi):
    """Eq. 24: −(1/K) Σ_k log Σ_j (1/K) N(m_k | m_j, Ψ_k + Ψ_j) for diagonal Ψ (K × M arrays)."""
    K = m.shape[0]
    var = psi[:, None, :] + psi[None, :, :]                  # (K, K, M)
    diff2 = (m[:, None, :] - m[None, :, :]) ** 2
    log_n = -0.5 * jnp.sum(jnp.log(2 * math.pi * var) + diff2 / var, axis=-1)
    return -jnp.mean(logsumexp(log_n, axis=1) - math.log(K))


def expected_log_prior(m, psi, prior_var):
    """(1/K) Σ_k [log N(m_k | 0, Λ) − ½ tr(Λ⁻¹ Ψ_k)] (the prior term of eq. 27)."""
    log_n = -0.5 * jnp.sum(jnp.log(2 * math.pi * prior_var) + m**2 / prior_var, axis=-1)
    return jnp.mean(log_n - 0.5 * jnp.sum(psi / prior_var, axis=-1))


def latent_moments(Phi, m, psi):
    """Mean and variance of f = φᵀw under each component: two (N, K) arrays.

    E[f] = Φ m_kᵀ and Var[f] = (Φ ⊙ Φ) Ψ_kᵀ, exact for diagonal Ψ_k.
    """
    return Phi @ m.T, (Phi * Phi) @ psi.T


def expected_log_lik(key, Phi, y, m, psi, likelihood, n_samples: int = 10):
    """Σ_n (1/K) Σ_k ⟨log p(y_n | f)⟩_{q_k} by L reparameterised draws per (n, k) (eqs. 25–26).

    Args:
        key: ``jax.random`` key.
        Phi: features (B, M); y: targets (B,).
        m, psi: mixture means and diagonal variances, (K, M) each.
        likelihood: a :mod:`gplvm.likelihoods` object.
        n_samples: L.
    """
    F_mean, F_var = latent_moments(Phi, m, psi)                                  # (B, K)
    eps = jax.random.normal(key, (n_samples,) + F_mean.shape, dtype=F_mean.dtype)
    F = F_mean + jnp.sqrt(F_var) * eps                                           # (L, B, K)
    ll = likelihood._masked_log_prob(jnp.broadcast_to(y[None, :, None], F.shape), F)
    return jnp.sum(ll) / (n_samples * m.shape[0])


class Mixture(NamedTuple):
    """q(w) = (1/K) Σ_k N(w | m_k, Ψ_k) of eq. 21: the means ``m`` and the diagonals ``psi`` of
    the covariances, (K, M) each."""

    m: jax.Array
    psi: jax.Array


def elbo(key, Phi_batch, y_batch, n_total: int, q: Mixture, prior_var, likelihood,
         n_samples: int = 10):
    """The stochastic bound of eq. 27 on one minibatch (to be maximised).

    Args:
        key: ``jax.random`` key for the reparameterised draws.
        Phi_batch: features of the minibatch (B, M); y_batch: its targets (B,).
        n_total: N, the full data size (the N/B boost of eq. 6).
        q: the mixture q(w) (:class:`Mixture`).
        prior_var: Λ's diagonal (M,).
        likelihood: a :mod:`gplvm.likelihoods` object.
        n_samples: L, draws per data point and component.
    """
    m, psi = q
    data = expected_log_lik(key, Phi_batch, y_batch, m, psi, likelihood, n_samples)
    data = n_total / Phi_batch.shape[0] * data
    return data + expected_log_prior(m, psi, prior_var) + entropy_lower_bound(m, psi)

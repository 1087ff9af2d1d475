r"""The GLM evidence lower bound with a mixture-of-Gaussians posterior (seed 002 §1.3).

q(w) = (1/K) Σ_k N(w | m_k, Ψ_k), Ψ_k diagonal (eq. 21).  The bound (eqs. 22–27) is

.. math::
    \mathcal{L} \approx \frac{1}{K}\sum_k \Big[\frac{N}{|B|}\sum_{n \in B}\frac{1}{L}\sum_l
        \log p(y_n \mid \phi_n^\top f_k^{(l)}) + \log N(m_k \mid 0, \Lambda)
        - \tfrac12 \mathrm{tr}(\Lambda^{-1}\Psi_k)\Big]
        - \frac{1}{K}\sum_k \log \sum_j \frac{1}{K} N(m_k \mid m_j, \Psi_k + \Psi_j),

with :math:`f_k^{(l)} = m_k + \sqrt{\Psi_k}\odot\epsilon^{(l)}` (eq. 26, the reparameterisation
trick, so gradients flow through the samples), the expected log-prior
:math:`\langle \log N(w|0,\Lambda)\rangle_{q_k} = \log N(m_k|0,\Lambda) - \frac12
\mathrm{tr}(\Lambda^{-1}\Psi_k)` in closed form, the entropy lower bound of eq. 24, and the
minibatch boost N/|B| of eq. 6 on the data term only (the prior and entropy terms are the
"g(θ)" of eq. 4, counted once per step).
"""

from __future__ import annotations

import math

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
    """(1/K) Σ_k [log N(m_k | 0, Λ) − ½ tr(Λ⁻¹ Ψ_k)]."""
    log_n = -0.5 * jnp.sum(jnp.log(2 * math.pi * prior_var) + m**2 / prior_var, axis=-1)
    return jnp.mean(log_n - 0.5 * jnp.sum(psi / prior_var, axis=-1))


def sample_weights(key, m, psi, n_samples: int):
    """Reparameterised draws f_k^(l) = m_k + sqrt(Ψ_k) ⊙ ε^(l): shape (K, L, M) (eq. 26)."""
    eps = jax.random.normal(key, (m.shape[0], n_samples, m.shape[1]))
    return m[:, None, :] + jnp.sqrt(psi)[:, None, :] * eps


def elbo(key, Phi_batch, y_batch, n_total: int, m, psi, prior_var, likelihood,
         n_samples: int = 5):
    """The stochastic bound of eq. 27 on one minibatch (to be maximised).

    Args:
        Phi_batch: features of the minibatch (B, M); y_batch: its targets (B,).
        n_total: N, the full data size (the N/B boost of eq. 6).
        m, psi: mixture means and diagonal variances, (K, M) each.
        prior_var: Λ's diagonal (M,).
        likelihood: a :mod:`gplvm.likelihoods` object (log_prob of (B, 1) arrays).
    """
    K = m.shape[0]
    W = sample_weights(key, m, psi, n_samples).reshape(K * n_samples, -1)   # (K·L, M)
    F = Phi_batch @ W.T                                                      # (B, K·L)
    ll = likelihood._masked_log_prob(jnp.broadcast_to(y_batch[:, None], F.shape), F)
    data = n_total / Phi_batch.shape[0] * jnp.sum(ll) / (K * n_samples)
    return data + expected_log_prior(m, psi, prior_var) + entropy_lower_bound(m, psi)

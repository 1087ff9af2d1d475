r"""A non-centred scale move of each DP component with its frequencies (issue 30).

Under kernel learning (seed 000, eqs. 21–25) each frequency has the prior
:math:`w_m \sim N(\mu_k, \Sigma_k)` of its cluster k, and the DP sweep draws
:math:`(\mu_k, \Sigma_k)` given the members (eq. 24) while the sampler moves the members given
:math:`(\mu_k, \Sigma_k)`: the centred parametrisation of a hierarchical model.  Where the
likelihood pins no single frequency, a cluster whose members sit close together has a small
:math:`\Sigma_k`, which keeps them close: a funnel that the two conditional steps leave slowly
(the DP kernel's frequencies mix ~10× slower than a fixed RBF's: ``benchmarks/README.md``,
issue 30, "the DP components' scale").  The remedy for a funnel is to move the scale with the
deviations it scales (Papaspiliopoulos, Roberts & Sköld 2007; Yu & Meng 2011): for one
occupied cluster k and :math:`s = e^{\ell}`, :math:`\ell \sim N(0, \tau^2)`,

.. math:: \Sigma_k \mapsto s^2 \Sigma_k, \qquad w_m \mapsto \mu_k + s\,(w_m - \mu_k)
          \quad (z_m = k),

whose whitened deviations :math:`\Sigma_k^{-1/2}(w_m - \mu_k)` stay where they are, accepted
with probability min(1, r),

.. math:: \log r = \ell(W^\star) - \ell(W) - Q(\nu_0 + 1)\log s
          - \tfrac12 (s^{-2} - 1)\big[\lambda_0 (\mu_k - \mu_0)^\top\Sigma_k^{-1}(\mu_k - \mu_0)
          + \mathrm{tr}(\Psi_0 \Sigma_k^{-1})\big],

ℓ the log-likelihood given β (and σ² or r).  The prior terms: the members' densities gain
:math:`s^{-Q n_k}` and their Jacobian :math:`s^{Q n_k}` (they cancel); the NIW base measure
(:mod:`gplvm.samplers._niw`) gains :math:`-Q\log s` in μ_k's Gaussian and
:math:`-(\nu_0 + Q + 1) Q \log s` in the inverse-Wishart, Σ_k's Jacobian
:math:`s^{Q(Q+1)}`.  The map is a symmetric family in ℓ (Green 1995), so no proposal ratio.
The occupied clusters are visited in slot order, each with every step size of
:data:`CLUSTER_STEPS` (a composition of valid kernels; which clusters exist depends on z only,
which no move changes).  Empty slots' parameters are read by nothing (:mod:`gplvm.samplers.
dp_mixture`) and are left alone.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax

from gplvm.samplers.dp_mixture import DPMixtureState, NIWPrior

Array = jax.Array

#: random-walk scales τ of ℓ = log s, one move each per occupied cluster and sweep
CLUSTER_STEPS = (0.3, 0.1, 0.03)


def _log_prior_ratio(log_s: Array, mu: Array, Sigma: Array, prior: NIWPrior) -> Array:
    """The prior and Jacobian terms of log r (module docstring) for one cluster's (μ_k, Σ_k)."""
    Q = mu.shape[-1]
    d = mu - prior.mu0
    P = jnp.linalg.inv(Sigma)
    quad = prior.lambda0 * d @ P @ d + jnp.trace(prior.Psi0 @ P)
    return -Q * (prior.nu0 + 1.0) * log_s - 0.5 * (jnp.exp(-2.0 * log_s) - 1.0) * quad


def _scaled(Sigma: Array, s: Array) -> Array:
    """s²Σ_k, the proposed component covariance."""
    return s * s * Sigma


def cluster_scale_moves(key: Array, W: Array, dp: DPMixtureState, prior: NIWPrior,
                        log_lik: Callable[[Array], Array]
                        ) -> tuple[Array, DPMixtureState, Array]:
    """The moves of the module docstring for every occupied cluster.

    Args:
        key: a ``jax.random`` key.
        W: (M2, Q) frequencies.
        dp: the DP mixture's state (its z, μ and α are not changed).
        prior: the NIW base measure.
        log_lik: W ↦ the log-likelihood given everything else.

    Returns:
        (W, dp with the new Σ, number of accepted moves).
    """
    K = dp.mu.shape[0]
    n_steps = len(CLUSTER_STEPS)
    occupied = jnp.zeros(K, jnp.int32).at[dp.z].add(1) > 0
    slots = jnp.argsort(~occupied, stable=True)           # occupied slots first, in order
    steps = jnp.asarray(CLUSTER_STEPS, W.dtype)

    def move(i, carry):
        W, Sigma, current, n_acc = carry
        slot, step = slots[i // n_steps], steps[i % n_steps]
        key_s, key_u = jax.random.split(jax.random.fold_in(key, i))
        log_s = step * jax.random.normal(key_s, (), W.dtype)
        s = jnp.exp(log_s)
        mu_k, Sigma_k = dp.mu[slot], Sigma[slot]
        W_new = jnp.where((dp.z == slot)[:, None], mu_k + s * (W - mu_k), W)
        proposed = log_lik(W_new)
        log_r = proposed - current + _log_prior_ratio(log_s, mu_k, Sigma_k, prior)
        accept = jnp.log(jax.random.uniform(key_u, (), W.dtype)) < log_r
        return (jnp.where(accept, W_new, W),
                Sigma.at[slot].set(jnp.where(accept, _scaled(Sigma_k, s), Sigma_k)),
                jnp.where(accept, proposed, current), n_acc + accept.astype(jnp.int32))

    init = (W, dp.Sigma, log_lik(W), jnp.zeros((), jnp.int32))
    W, Sigma, _, n_acc = lax.fori_loop(0, jnp.sum(occupied) * n_steps, move, init)
    return W, dp._replace(Sigma=Sigma), n_acc

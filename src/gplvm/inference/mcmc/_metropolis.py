r"""Metropolis–Hastings with the prior as proposal (seed 000, eq. 22).

With :math:`q(w^\star) = p(w^\star)` the prior ratio cancels the proposal ratio and the
acceptance probability is the likelihood ratio

.. math:: \rho_{\mathrm{MH}} = \min\{1,\; p(Y \mid w^\star) / p(Y \mid w)\}.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def metropolis_hastings_prior(key: Array, current, proposal, log_lik_current: Array,
                              log_lik_proposal: Array):
    """Accept or reject prior proposals, independently for each entry of ``log_lik_*``.

    Args:
        key: a ``jax.random`` key.
        current: the current value, a pytree whose leaves have leading shape
            ``log_lik_current.shape`` (scalar log-likelihood: any shapes).
        proposal: a draw from the prior, same structure as ``current``.
        log_lik_current: ``Float[Array, "..."]`` log-likelihood of ``current`` (scalar, or one
            per independent block).
        log_lik_proposal: the same for ``proposal``.

    Returns:
        ``(new, log_lik_new, accepted)``: the kept value (pytree like ``current``), its
        log-likelihood, and the boolean acceptance (shape of ``log_lik_current``).  A NaN
        proposal log-likelihood is rejected.
    """
    log_lik_current = jnp.asarray(log_lik_current)
    log_lik_proposal = jnp.asarray(log_lik_proposal)
    log_u = jnp.log(jax.random.uniform(key, log_lik_current.shape, log_lik_current.dtype))
    # accept with probability min(1, L(w*) / L(w)); log u < NaN is False, so NaN is rejected
    accepted = log_u < log_lik_proposal - log_lik_current

    def choose(p, c):
        a = accepted.reshape(accepted.shape + (1,) * (jnp.ndim(c) - accepted.ndim))
        return jnp.where(a, p, c)

    new = jax.tree_util.tree_map(choose, proposal, current)
    return new, jnp.where(accepted, log_lik_proposal, log_lik_current), accepted

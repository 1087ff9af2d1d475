r"""A joint scale move of the latents and the frequencies (issue 30).

The features depend on X and W only through X Wᵀ (seed 000, eq. 18), so the map
T_c: (X, W) ↦ (cX, W/c) leaves Φ — and with it the likelihood — unchanged.  Only the priors
see c: p(cX) pulls the latents in, p(W/c) (the kernel's spectral density, or each frequency's
DP component) pulls the frequencies in, and the balance is the kernel's length-scale.  A sampler
that moves X given W and W given X cannot move along this direction (each block is pinned by
the likelihood given the other): it is the mode that mixes worst in the Gibbs sweep (#14's
note: ESS 2–8 per 1000 sweeps for the kernel's scale).

The move proposes log c ~ N(0, s²) (symmetric in log c) and accepts with probability

.. math:: \min\Big(1, \frac{p(cX)\,\prod_m p(w_m/c)}{p(X)\,\prod_m p(w_m)}\,
          c^{NQ - (M/2)Q}\Big),

the last factor the Jacobian of T_c (Green 1995: a deterministic map drawn from a symmetric
family carries its determinant into the ratio), and Π_m p(w_m/c) the frequencies' prior p(W/c)
as the sweep gives it (``FrequencyPrior.total``: under ``dp_components='integrated'`` the DP
components integrated out given the assignments).  It needs no likelihood evaluation.  A few step
sizes s are applied in turn (a composition of valid kernels).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array

#: random-walk scales of log c, one move each per sweep
SCALE_STEPS = (0.1, 0.03, 0.01)


def scale_moves(key: Array, X: Array, W: Array, log_prior_W) -> tuple[Array, Array, Array]:
    """:data:`SCALE_STEPS` Metropolis moves of (X, W) ↦ (cX, W/c) under X ~ N(0, I).

    Args:
        log_prior_W: W ↦ log p(W) up to a constant (``FrequencyPrior.total``).

    Returns:
        (X, W, number of accepted moves).
    """
    N, Q = X.shape
    n_freq = W.shape[0]

    def log_target(X, W):
        return -0.5 * jnp.sum(X**2) + log_prior_W(W)

    def move(carry, inputs):
        X, W, current, n_acc = carry
        step, key = inputs
        key_c, key_u = jax.random.split(key)
        log_c = step * jax.random.normal(key_c, (), X.dtype)
        X_new, W_new = X * jnp.exp(log_c), W * jnp.exp(-log_c)
        proposed = log_target(X_new, W_new)
        log_ratio = proposed - current + (N * Q - n_freq * Q) * log_c
        accept = jnp.log(jax.random.uniform(key_u, (), X.dtype)) < log_ratio
        return lax.cond(accept, lambda: (X_new, W_new, proposed, n_acc + 1),
                        lambda: (X, W, current, n_acc)), None

    steps = jnp.asarray(SCALE_STEPS, X.dtype)
    keys = jax.random.split(key, len(SCALE_STEPS))
    (X, W, _, n_acc), _ = lax.scan(move, (X, W, log_target(X, W), jnp.zeros((), jnp.int32)),
                                   (steps, keys))
    return X, W, n_acc

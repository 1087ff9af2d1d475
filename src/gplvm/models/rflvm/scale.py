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
family carries its determinant into the ratio).  It needs no likelihood evaluation.  A few step
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
        log_prior_W: (m, w) ↦ log p(w_m = w) up to a constant of m
            (:class:`.frequencies.FrequencyPrior`).

    Returns:
        (X, W, number of accepted moves).
    """
    N, Q = X.shape
    n_freq = W.shape[0]
    rows = jnp.arange(n_freq)

    def log_target(X, W):
        prior_W = jnp.sum(jax.vmap(log_prior_W)(rows, W))
        return -0.5 * jnp.sum(X**2) + prior_W

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


def dp_scale_moves(key: Array, X: Array, W: Array, dp, prior) -> tuple[Array, Array, object,
                                                                      Array]:
    r""":data:`SCALE_STEPS` Metropolis moves of T_c with the DP mixture's components carried
    along: (X, W, μ_k, Σ_k) ↦ (cX, W/c, μ_k/c, Σ_k/c²) for the occupied clusters.

    Under kernel learning the frequencies' prior is their components' N(μ_k, Σ_k), which the
    DP sweep fits to them; with the components held, :func:`scale_moves` must pull every w_m
    away from its μ_k, which a tight component forbids.  Carried along, each member's density
    gains c^Q, cancelling W's Jacobian c^{-Q}, and what is left is X's prior and the NIW base
    measure (:mod:`gplvm.samplers._niw`; ν0 Q log c net of Σ_k's Jacobian c^{-Q(Q+1)}, μ_k's
    Gaussian against its Jacobian):

    .. math:: \log r = NQ\log c - \tfrac12 (c^2 - 1)\lVert X\rVert^2 + \sum_{k\ \mathrm{occ.}}
              \Big[\nu_0 Q \log c - \tfrac12 (c^2 - 1)\,\mathrm{tr}(\Psi_0\Sigma_k^{-1})
              - \tfrac{\lambda_0}2 \big(d_k(c)^\top \Sigma_k^{-1} d_k(c)
              - d_k(1)^\top \Sigma_k^{-1} d_k(1)\big)\Big],

    d_k(c) = μ_k − c μ0.  No likelihood is evaluated (Φ depends on X Wᵀ only).

    Args:
        dp: the :class:`gplvm.samplers.dp_mixture.DPMixtureState` (z and α unchanged).
        prior: its NIW base measure.

    Returns:
        (X, W, dp, number of accepted moves).
    """
    N, Q = X.shape
    K = dp.mu.shape[0]
    occupied = (jnp.zeros(K, jnp.int32).at[dp.z].add(1) > 0).astype(X.dtype)
    precision = jnp.linalg.inv(dp.Sigma)                     # (K, Q, Q), fixed by the moves
    trace = jnp.einsum("ij,kji->k", prior.Psi0, precision)    # tr(Ψ0 Σ_k⁻¹)

    def log_ratio(log_c, X, mu, trace, precision):
        c = jnp.exp(log_c)

        def quad(d):
            return jnp.einsum("ki,kij,kj->k", d, precision, d)
        clusters = (nu_q * log_c - 0.5 * (c * c - 1.0) * trace
                    - 0.5 * prior.lambda0 * (quad(mu - c * prior.mu0) - quad(mu - prior.mu0)))
        return N * Q * log_c - 0.5 * (c * c - 1.0) * jnp.sum(X**2) + jnp.sum(occupied * clusters)

    nu_q = prior.nu0 * Q

    def move(carry, inputs):
        X, W, total, n_acc = carry
        step, key = inputs
        key_c, key_u = jax.random.split(key)
        log_c = step * jax.random.normal(key_c, (), X.dtype)
        # the components as they stand after the earlier moves: μ_k/t, Σ_k/t²
        accept = (jnp.log(jax.random.uniform(key_u, (), X.dtype))
                  < log_ratio(log_c, X, dp.mu / total, trace * total**2,
                              precision * total**2))
        c = jnp.where(accept, jnp.exp(log_c), 1.0)
        return (c * X, W / c, total * c, n_acc + accept.astype(jnp.int32)), None

    steps = jnp.asarray(SCALE_STEPS, X.dtype)
    keys = jax.random.split(key, len(SCALE_STEPS))
    init = (X, W, jnp.ones((), X.dtype), jnp.zeros((), jnp.int32))
    (X, W, total, n_acc), _ = lax.scan(move, init, (steps, keys))
    return X, W, dp._replace(mu=dp.mu / total, Sigma=dp.Sigma / total**2), n_acc

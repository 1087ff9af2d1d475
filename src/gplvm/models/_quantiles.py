r"""Predictive quantiles by root finding on a Monte Carlo predictive CDF (seed 002 eqs. 30–31).

Given S posterior draws f_s of the latent function at each query point,

.. math:: P(y^* \le \alpha) \approx \frac1S \sum_s P(y^* \le \alpha \mid f_s),

and the p-quantile solves :math:`P(y^* \le \alpha) = p` (eq. 31).  The approximate CDF is
non-decreasing in α, so bisection on a bracket that surely contains the root cannot fail.  For
counts the CDF is a step function and has no root, so the quantile is
:math:`\min\{y \in \mathbb{N} : P(y^* \le y) \ge p\}`, found by bisection over the integers.
Both run vectorised over query points and levels in one compiled loop.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp


def mixture_cdf(likelihood, alpha, F):
    """(1/S) Σ_s P(y ≤ α_n | f_ns); α (N,), F (N, S)."""
    return jnp.mean(likelihood.cdf(jnp.broadcast_to(alpha[:, None], F.shape), F), axis=1)


def _continuous(likelihood, F, p, lower, upper, n_steps):
    """Bisection for the root of eq. 31 between ``lower`` and ``upper`` (both (N,))."""
    def body(_, bounds):
        lo, hi = bounds          # invariant: CDF(lo) < p <= CDF(hi)
        mid = 0.5 * (lo + hi)
        below = mixture_cdf(likelihood, mid, F) < p
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo, hi = jax.lax.fori_loop(0, n_steps, body, (lower, upper))
    return 0.5 * (lo + hi)


def _count(likelihood, F, p, upper):
    """min{y ∈ {0, 1, ...} : P(y* ≤ y) ≥ p}, with ``upper`` (N,) an integer where the CDF ≥ p.

    Integer bisection keeps CDF(lo) < p <= CDF(hi) with lo = −1 meaning "below 0"; it stops
    when every bracket has shrunk to neighbouring integers (about log2(upper) rounds).
    """
    def cond(bounds):
        lo, hi = bounds
        return jnp.any(hi - lo > 1)

    def body(bounds):
        lo, hi = bounds
        mid = jnp.floor(0.5 * (lo + hi))
        ok = mixture_cdf(likelihood, mid, F) >= p
        open_ = hi - lo > 1
        return jnp.where(open_ & ~ok, mid, lo), jnp.where(open_ & ok, mid, hi)

    _, hi = jax.lax.while_loop(cond, body, (-jnp.ones_like(upper), upper))
    return hi


@partial(jax.jit, static_argnames=("n_steps",))
def quantiles(likelihood, F, levels, n_steps: int = 60):
    """Predictive quantiles at each level: shape (N, len(levels)).

    Args:
        likelihood: a :mod:`gplvm.likelihoods` object with a ``cdf``.
        F: posterior draws of the latent function, (N, S).
        levels: probabilities in (0, 1), shape (P,).
        n_steps: bisection steps for continuous likelihoods (the bracket of ±12 predictive
            standard deviations shrinks by 2⁻⁶⁰, far below float64 resolution).
    """
    mean = likelihood._inverse_link(F)
    sd = jnp.sqrt(likelihood._conditional_variance(F))
    if likelihood.is_count:
        def one(p):
            # Cantelli: for each draw P(y < μ + σ sqrt(p/(1−p))) ≥ p, so the max over draws is
            # an integer where the mixture CDF is ≥ p
            upper = jnp.ceil(jnp.max(mean + sd * jnp.sqrt(p / (1 - p)), axis=1)) + 1.0
            # an overflowing draw (e^f = inf) must not make the bisection endless: 2^(p+1) is
            # the largest count the dtype (p mantissa bits) tells apart from its neighbours:
            # 2⁵³ in float64, 2²⁴ in float32
            top = 2.0 ** (jnp.finfo(upper.dtype).nmant + 1)
            upper = jnp.where(jnp.isfinite(upper), jnp.minimum(upper, top), top)
            return _count(likelihood, F, p, upper)
    else:
        width = 12.0 * jnp.max(sd, axis=1)
        lower, upper = jnp.min(mean, axis=1) - width, jnp.max(mean, axis=1) + width

        def one(p):
            return _continuous(likelihood, F, p, lower, upper, n_steps)
    return jax.vmap(one, out_axes=1)(levels)

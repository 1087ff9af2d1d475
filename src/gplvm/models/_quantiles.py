r"""Predictive quantiles by root finding on a Monte Carlo predictive CDF (seed 002 eqs. 30–31).

Given S posterior draws f_s of the latent function at each query point,

.. math:: P(y^* \le \alpha) \approx \frac1S \sum_s P(y^* \le \alpha \mid f_s),

and the p-quantile solves :math:`P(y^* \le \alpha) = p` (eq. 31).  For continuous likelihoods
we bisect on a bracket that surely contains the root; for counts the CDF is a step function and
has no root, so the quantile is :math:`\min\{y \in \mathbb{N} : P(y^* \le y) \ge p\}`, found by
bisection over the integers.  Both run vectorised over query points in one compiled loop.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp


def _mixture_cdf(likelihood, alpha, F):
    """(1/S) Σ_s P(y ≤ α_n | f_ns); α (N,), F (N, S)."""
    return jnp.mean(likelihood.cdf(jnp.broadcast_to(alpha[:, None], F.shape), F), axis=1)


@partial(jax.jit, static_argnames=("n_steps",))
def continuous_quantile(likelihood, F, p, lower, upper, n_steps: int = 80):
    """Bisection for the root of eq. 31 between ``lower`` and ``upper`` (both (N,))."""
    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        below = _mixture_cdf(likelihood, mid, F) < p
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo, hi = jax.lax.fori_loop(0, n_steps, body, (lower, upper))
    return 0.5 * (lo + hi)


@partial(jax.jit, static_argnames=("n_steps",))
def count_quantile(likelihood, F, p, upper, n_steps: int = 64):
    """min{y ∈ {0, 1, ...} : P(y* ≤ y) ≥ p}, with ``upper`` (N,) an integer where the CDF ≥ p."""
    def body(_, bounds):
        lo, hi = bounds          # invariant: CDF(lo) < p <= CDF(hi) (lo = −1 means "below 0")
        mid = jnp.floor(0.5 * (lo + hi))
        ok = _mixture_cdf(likelihood, mid, F) >= p
        done = hi - lo <= 1
        return (jnp.where(done | ok, lo, mid), jnp.where(~done & ok, mid, hi))

    lo, hi = jax.lax.fori_loop(0, n_steps, body, (-jnp.ones_like(upper), upper))
    return hi

r"""Exact PG(1, c) draws: Devroye's alternating-series rejection sampler.

Polson, Scott & Windle (2013, JASA 108:1339, §4 and Algorithm 1; "PSW" below) sample
:math:`J^*(1, z)` with :math:`z = |c|/2` and return :math:`\omega = J^*(1, z)/4 \sim PG(1, c)`.
The density of :math:`J^*(1, z)` is

.. math::
    f(x \mid z) = \cosh(z)\, e^{-z^2 x / 2} \sum_{n \ge 0} (-1)^n a_n(x),

with two expansions of the same function, used left and right of :math:`t = 0.64`:

.. math::
    a_n^L(x) = \pi (n + \tfrac12) \big(\tfrac{2}{\pi x}\big)^{3/2} e^{-2 (n + 1/2)^2 / x}
    \quad (x \le t), \qquad
    a_n^R(x) = \pi (n + \tfrac12)\, e^{-(n + 1/2)^2 \pi^2 x / 2} \quad (x > t).

For this t the terms decrease from n = 0 on, so the partial sums bracket f and
:math:`e^{-z^2x/2} a_0(x)` is an envelope.  The steps below are numbered as in PSW.

1. Envelope, right of t: :math:`e^{-z^2x/2} a_0^R(x) \propto` Exp(rate :math:`k_z = \pi^2/8 +
   z^2/2`) shifted to start at t; mass :math:`M_R = \tfrac{\pi}{2} e^{-k_z t}/k_z`.
2. Envelope, left of t: for :math:`z < 1/t` a Lévy (inverse-χ²₁) density truncated to (0, t),
   mass :math:`M_L = 2\,\mathrm{erfc}(1/\sqrt{2t})`, and the tilt :math:`e^{-z^2x/2}` moves into
   the acceptance; for :math:`z \ge 1/t` the inverse Gaussian IG(μ = 1/z, λ = 1) on all of
   (0, ∞), mass :math:`M_L = 2 e^{-z}`, with proposals above t rejected.  (PSW truncate both
   proposals to (0, t) and loop inside the proposal; folding those loops into the acceptance
   test is the same rejection sampler with envelope :math:`g_L + g_R` and target pieces
   :math:`f\,1[x \le t]` and :math:`f\,1[x > t]`, and lets one attempt use four uniforms.)
3. Choose right with probability :math:`M_R/(M_L + M_R)` and draw X from that piece.
4. Accept with probability :math:`\sum_n (-1)^n a_n(X)/a_0(X)` (times the tilt on the Lévy
   piece).  Devroye's series method decides this with partial sums; here
   :math:`a_n/a_0 = (2n+1)\, q^{n(n+1)/2}` with :math:`q = e^{-4/X}` (left) or
   :math:`e^{-\pi^2 X}` (right), and :math:`q \le e^{-6.25}` on both sides, so the four terms
   n ≤ 3 give the ratio to within :math:`9 q^{10} < 10^{-26}`: the same decision as the
   exact series at double precision, without a data-dependent inner loop.
5. Return X/4.

Overall acceptance is :math:`1/(\cosh(z)(M_L + M_R))`: 0.9993 at c = 0, at least 0.72
everywhere (the minimum is just below |c| = 2/t = 3.125, where the Lévy piece's tilt bites),
tending to 1 as |c| grows.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri

from gplvm._validation import require_float64
from gplvm.samplers._rejection import open_uniforms, until_accepted
from gplvm.typing import ArrayLike, Float, PRNGKeyArray, Real

_T = 0.64                                                  # PSW's truncation point t
_LEVY_TAIL = 0.5 * math.erfc(1.0 / math.sqrt(2.0 * _T))   # P(N > 1/sqrt(t)), N ~ N(0, 1)
_LOG_MASS_LEVY = math.log(2.0 * math.erfc(1.0 / math.sqrt(2.0 * _T)))


def _envelope(z: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Rate k_z of the right piece and P(right) = M_R / (M_L + M_R) (steps 1-2), in log space."""
    rate = math.pi ** 2 / 8.0 + 0.5 * z * z
    log_right = math.log(math.pi / 2.0) - rate * _T - jnp.log(rate)
    log_left = jnp.where(z < 1.0 / _T, _LOG_MASS_LEVY, math.log(2.0) - z)
    return rate, jax.nn.sigmoid(log_right - log_left)


def _series_ratio(x: jax.Array, right: jax.Array) -> jax.Array:
    """Step 4: sum_n (-1)^n a_n(x) / a_0(x) with the expansion of the piece x was drawn from
    (``right``: x > t; chosen by branch, not by comparing x with t, which rounding could flip),
    exact to < 1e-26 with four terms."""
    q = jnp.exp(-jnp.where(right, math.pi ** 2 * x, 4.0 / x))
    q3 = q * q * q
    return 1.0 - 3.0 * q + 5.0 * q3 - 7.0 * q3 * q3


def _left_proposal(z: jax.Array, u1: jax.Array, u2: jax.Array):
    """Step 2: a draw from the left piece and its extra acceptance factor."""
    levy = z < 1.0 / _T
    # One inverse-CDF normal serves both pieces: |N| > 1/sqrt(t) for the truncated Lévy
    # (then X = 1/N^2 < t), |N| unrestricted for the chi-square_1 variate Y = N^2 of
    # Michael, Schucany & Haas (1976).
    n_abs = -ndtri(u1 * jnp.where(levy, _LEVY_TAIL, 0.5))
    x_levy = 1.0 / (n_abs * n_abs)
    mu = 1.0 / jnp.maximum(z, 1.0 / _T)
    w = mu * n_abs * n_abs
    s = jnp.sqrt(w * (w + 4.0))
    # Smaller root of the MSH quadratic, mu (s - w) / (s + w), written without cancellation
    # and with mu applied last, so that nothing underflows for |c| up to 1e300.
    ratio = jnp.where(w > 0.0, 4.0 * w / ((s + w) * (s + w)), 1.0)      # root / mu, in (0, 1]
    x_ig = mu * jnp.where(u2 * (1.0 + ratio) > 1.0, 1.0 / ratio, ratio)
    x = jnp.where(levy, x_levy, x_ig)
    factor = jnp.where(levy, jnp.exp(-0.5 * z * z * x_levy), (x_ig <= _T).astype(x.dtype))
    return x, factor


def _attempt(key: jax.Array, params: tuple) -> tuple[jax.Array, jax.Array]:
    z, rate, p_right = params
    u_branch, u_accept, u1, u2 = open_uniforms(key, (4,) + z.shape)
    x_right = _T - jnp.log(u1) / rate                              # step 3, right piece
    x_left, factor = _left_proposal(z, u1, u2)                     # step 3, left piece
    right = u_branch <= p_right
    x = jnp.where(right, x_right, x_left)
    ratio = _series_ratio(x, right) * jnp.where(right, 1.0, factor)  # step 4
    bad = ~jnp.isfinite(z)
    return (u_accept <= ratio) | bad, jnp.where(bad, jnp.nan, 0.25 * x)   # step 5


def polya_gamma_one(key: PRNGKeyArray, c: Real[ArrayLike, "*shape"]
                    ) -> Float[jax.Array, "*shape"]:
    """Exact draws ω ~ PG(1, c), one per element of ``c``.

    Args:
        key: a ``jax.random`` key.
        c: tilting parameters, any shape.

    Returns:
        Array with the shape of ``c``; NaN where ``c`` is not finite.
    """
    require_float64("Pólya-gamma draws")
    c = jnp.asarray(c, dtype=jnp.float64)
    z = 0.5 * jnp.abs(c).ravel()
    if z.size == 0:
        return jnp.zeros(c.shape)
    rate, p_right = _envelope(z)
    return until_accepted(key, _attempt, (z, rate, p_right)).reshape(c.shape)

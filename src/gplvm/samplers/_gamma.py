r"""Gamma(shape, 1) draws by Marsaglia & Tsang (2000), batched with :func:`until_accepted`.

``jax.random.gamma`` measured 0.7 million draws/s on the 2-core development CPU; the Pólya-gamma
series needs 2 to 18 gammas per draw, so it uses this batched version instead (about 10
million draws/s there).

Marsaglia & Tsang, "A simple method for generating gamma variables", ACM TOMS 26:363 (2000):
for shape :math:`\alpha \ge 1`, with :math:`d = \alpha - 1/3` and :math:`v = (1 + x/\sqrt{9d})^3`,
:math:`x \sim N(0, 1)`, accept :math:`d v` when :math:`\log U < x^2/2 + d - d v + d \log v`
(acceptance above 0.95).  For :math:`\alpha < 1` they boost:
:math:`G_\alpha = G_{\alpha + 1} U^{1/\alpha}`, computed in logs so that tiny shapes underflow
to 0 rather than to NaN.  U is independent of :math:`G_{\alpha + 1}`, so it is drawn once per
element after the rejection loop (and only when some shape is below 1), not with every attempt:
an attempt then takes two uniforms, a log fewer and no power (the series of
:mod:`.polya_gamma_series` draws shapes below 1 only when b < 1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import ndtri

from gplvm.samplers._rejection import open_uniforms, until_accepted


def _attempt(key: jax.Array, params: tuple) -> tuple[jax.Array, jax.Array]:
    """One Marsaglia–Tsang proposal and test for shapes ``alpha`` >= 1 (NaN: never accepted
    otherwise, so invalid shapes are flagged accepted with value NaN)."""
    (alpha,) = params
    u_normal, u_accept = open_uniforms(key, (2,) + alpha.shape)
    d = alpha - 1.0 / 3.0
    x = ndtri(u_normal)
    v = 1.0 + x / jnp.sqrt(9.0 * d)
    v = v * v * v
    safe_v = jnp.where(v > 0.0, v, 1.0)
    ok = (v > 0.0) & (jnp.log(u_accept) < 0.5 * x * x + d - d * safe_v + d * jnp.log(safe_v))
    bad = ~(alpha > 0.0) | ~jnp.isfinite(alpha)
    return ok | bad, jnp.where(bad, jnp.nan, d * safe_v)


def _boosted(alpha: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(which shapes are boosted, the shapes the attempts use): α + 1 where 0 < α < 1.  Only
    valid shapes are boosted: 0, negative and NaN shapes reach the attempt unchanged, which
    flags them and gives NaN (a boosted -0.8 would never be accepted)."""
    boost = alpha < 1.0
    return boost, jnp.where(boost & (alpha > 0.0), alpha + 1.0, alpha)


def gamma(key: jax.Array, alpha: jax.Array, n_active=None) -> jax.Array:
    """Independent draws G ~ Gamma(alpha, 1), one per element of the 1-D array ``alpha``.

    Args:
        key: a ``jax.random`` key.
        alpha: shapes, shape (n,); NaN is returned where ``alpha`` is not positive and finite.
        n_active: draw only the first ``n_active`` (may be traced; default all); the rest are
            0.

    Returns:
        Array of shape (n,).
    """
    key, key_boost = jax.random.split(key)
    boost, boosted_alpha = _boosted(alpha)
    g = until_accepted(key, _attempt, (boosted_alpha,), n_active)

    def boosted():
        u = open_uniforms(key_boost, alpha.shape)
        return g * jnp.where(boost, jnp.exp(jnp.log(u) / alpha), 1.0)

    # The boost is skipped when no shape needs it (b >= 1 in the series): a cond, not a select,
    # so that it costs nothing there; under vmap it becomes a select, which is still exact.
    return lax.cond(jnp.any(boost), boosted, lambda: g)


def gamma_small(key: jax.Array, alpha: jax.Array) -> jax.Array:
    """:func:`gamma` for a few hundred draws, compiled small: every element still pending is
    attempted again in one ``while_loop`` (a handful of rounds at acceptance above 0.95),
    without :func:`until_accepted`'s list, whose bookkeeping pays off only for large batches.
    ``jax.random.gamma`` and :func:`gamma` each compile in ~1 s of CPU; this in a fraction of
    it (issue 30, item 4: the DP mixture's sweep draws all its gammas with it).

    Round ``i`` uses ``fold_in(key, i)``, so every attempt sees fresh uniforms; each element
    keeps its first accepted value.  Shapes below 1 are boosted as in :func:`gamma`; NaN where
    a shape is not positive and finite.

    Args:
        key: a ``jax.random`` key.
        alpha: shapes, shape (n,).

    Returns:
        Float64 array of shape (n,).
    """
    key, key_boost = jax.random.split(key)
    alpha = jnp.asarray(alpha, jnp.float64)
    boost, boosted_alpha = _boosted(alpha)

    def body(carry):
        i, done, value = carry
        ok, v = _attempt(jax.random.fold_in(key, i), (boosted_alpha,))
        return i + 1, done | ok, jnp.where(ok & ~done, v, value)

    init = (jnp.zeros((), jnp.int32), jnp.zeros(alpha.shape, bool), jnp.zeros_like(alpha))
    _, _, g = lax.while_loop(lambda c: ~jnp.all(c[1]), body, init)
    u = open_uniforms(key_boost, alpha.shape)
    return g * jnp.where(boost, jnp.exp(jnp.log(u) / alpha), 1.0)

r"""Gamma(shape, 1) draws by Marsaglia & Tsang (2000), batched with :func:`until_accepted`.

``jax.random.gamma`` measured 0.7 million draws/s on the 2-core development CPU; the Pólya-gamma
series needs 2 to 18 gammas per draw, so it uses this batched version instead (about 10
million draws/s there).

Marsaglia & Tsang, "A simple method for generating gamma variables", ACM TOMS 26:363 (2000):
for shape :math:`\alpha \ge 1`, with :math:`d = \alpha - 1/3` and :math:`v = (1 + x/\sqrt{9d})^3`,
:math:`x \sim N(0, 1)`, accept :math:`d v` when :math:`\log U < x^2/2 + d - d v + d \log v`
(acceptance above 0.95).  For :math:`\alpha < 1` they boost:
:math:`G_\alpha = G_{\alpha + 1} U^{1/\alpha}`, computed in logs so that tiny shapes underflow
to 0 rather than to NaN.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri

from gplvm.samplers._rejection import open_uniforms, until_accepted


def _attempt(key: jax.Array, params: tuple) -> tuple[jax.Array, jax.Array]:
    (alpha,) = params
    u_normal, u_accept, u_boost = open_uniforms(key, (3,) + alpha.shape)
    boost = alpha < 1.0
    d = jnp.where(boost, alpha + 1.0, alpha) - 1.0 / 3.0
    x = ndtri(u_normal)
    v = 1.0 + x / jnp.sqrt(9.0 * d)
    v = v * v * v
    safe_v = jnp.where(v > 0.0, v, 1.0)
    ok = (v > 0.0) & (jnp.log(u_accept) < 0.5 * x * x + d - d * safe_v + d * jnp.log(safe_v))
    # The boost uniform is independent of the acceptance test, so drawing a fresh one with
    # every attempt leaves G_{alpha+1} U^{1/alpha} exact.
    g = d * safe_v * jnp.where(boost, jnp.exp(jnp.log(u_boost) / alpha), 1.0)
    bad = ~(alpha > 0.0) | ~jnp.isfinite(alpha)
    return ok | bad, jnp.where(bad, jnp.nan, g)


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
    return until_accepted(key, _attempt, (alpha,), n_active)

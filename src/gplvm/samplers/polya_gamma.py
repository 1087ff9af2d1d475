r"""Pólya-gamma draws ω ~ PG(b, c) for any b > 0 and real c (seed 000, eqs. 26-28).

PG(b, c) is the law of :math:`\frac{1}{2\pi^2}\sum_k g_k / ((k-\frac12)^2 + c^2/(4\pi^2))`,
:math:`g_k \sim \mathrm{Ga}(b, 1)` (eq. 27), with cumulant generating function

.. math:: \log E[e^{s\omega}] = b \log\cosh(c/2) - b \log\cosh\!\sqrt{c^2/4 - s/2},

mean :math:`\frac{b}{2c}\tanh\frac{c}{2}` and variance
:math:`\frac{b}{4c^3}\,\frac{\sinh c - c}{\cosh^2(c/2)}` (b/4 and b/24 at c = 0).

:func:`polya_gamma` picks, element by element, one of three regimes.

**Exact: integer b ≤ MAX_EXACT_B (= 8).**  The sum of b independent PG(1, c) draws from
Devroye's alternating-series sampler (:mod:`.polya_gamma_devroye`; Polson, Scott & Windle
2013), exact up to the 2^-53 resolution of the uniforms.  One PG(1, c) draw takes 1.0 to 1.4
proposals (acceptance 0.72 to 0.9993), so b of them cost less than one series draw up to
b ≈ 10 (|c| ≤ 8π) or b ≈ 30 (larger |c|): up to 8, exactness is also the cheaper choice.

**Series: every other b** (non-integer, or integer > 8).  Eq. 27 with the first 8 gamma terms
exact and the rest replaced by shifted gammas matched to its first three cumulants
(:mod:`.polya_gamma_series`).  The mean, variance and third cumulant are exact; the fourth
cumulant is off by at most 2.1e-3 of itself for any b (1.7e-4 when every |c| ≤ 8π, 5e-7 for
|c| ≤ 10), so the excess kurtosis is off by at most 5.3e-4/b (2.0e-4/b; 1.4e-6/b), against a
standard error of 0.015 for the excess kurtosis of 10^5 draws.  When every series element has
|c| ≤ 8π the rest is one shifted gamma (9 gammas per draw); otherwise 19 geometric blocks
(27 gammas per draw), chosen at run time with ``lax.cond``.

**Normal limit: series b with |c| > MAX_C_SERIES (= 1e12).**  There the block sums of the
series lose their precision (they are differences of tails that agree to 1 part in |c|), and
PG(b, c) is N(b/(2|c|), b/(2|c|^3)) to within a skewness of :math:`4.3/\sqrt{b|c|}`
(:math:`\kappa_3 \to 1.5\,b/|c|^5`), under 4.3e-6/√b: invisible to any feasible number of
draws.  Elsewhere no normal or two-moment approximation is used: at b = 1000 and c = 0 the
skewness, 0.062, is still 8 standard errors of the sample skewness of 10^5 draws.

Everything is ``jax.random`` and ``lax`` control flow with static shapes: jit, vmap and
reproducibility (same key, same draws) hold.  Under ``vmap`` the data-dependent ``lax.cond``
becomes a select that runs both branches, and loops run until the slowest batch member ends:
correct, but slower than one call on the stacked arrays.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from gplvm._validation import _where
from gplvm.samplers.polya_gamma_devroye import polya_gamma_one
from gplvm.samplers.polya_gamma_series import polya_gamma_series
from gplvm.typing import ArrayLike, Float, PRNGKeyArray, Real

MAX_EXACT_B = 8
MAX_C_SERIES = 1e12


def _concrete(x) -> np.ndarray | None:
    """``x`` as a NumPy array, or None when it is traced (inside jit, nothing can be checked)."""
    try:
        return np.asarray(x, dtype=float)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _count(mask: np.ndarray, one: str, many: str) -> str:
    k = int(mask.sum())
    return f"{k} {one if k == 1 else many}"


def _check(b, c) -> None:
    b_np, c_np = _concrete(b), _concrete(c)
    if b_np is not None:
        bad = np.atleast_1d(~(b_np > 0) | ~np.isfinite(b_np))
        if bad.any():
            raise ValueError(
                f"b has {_count(bad, 'entry', 'entries')} that are not finite and positive "
                f"(at positions {_where(bad)}; e.g. b = {float(np.atleast_1d(b_np)[bad][0])}); "
                f"PG(b, c) needs b > 0. In a binomial or negative-binomial model b is the "
                f"number of trials (or y + r): drop or mask the entries with zero trials "
                f"before sampling omega")
    if c_np is not None:
        bad = np.atleast_1d(~np.isfinite(c_np))
        if bad.any():
            raise ValueError(
                f"c has {_count(bad, 'non-finite entry', 'non-finite entries')} (at positions "
                f"{_where(bad)}); pass finite linear predictors (a NaN here usually means "
                f"the model diverged)")


def _overwrite(omega: jax.Array, mask: jax.Array, draw, key: jax.Array, b: jax.Array,
               c: jax.Array) -> jax.Array:
    """``omega`` with ``draw(key, b, c)`` where ``mask`` holds (harmless b = 1, c = 0 passed
    elsewhere); when ``mask`` is empty nothing runs and ``omega`` passes through uncopied."""
    def run():
        new = draw(key, jnp.where(mask, b, 1.0), jnp.where(mask, c, 0.0))
        return jnp.where(mask, new, omega)

    return lax.cond(jnp.any(mask), run, lambda: omega)


def _normal_limit(key: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """N(b/(2|c|), b/(2|c|^3)), the exact mean and variance once tanh(|c|/2) = 1 in float64."""
    c = jnp.abs(c)
    draw = b / (2.0 * c) + jnp.sqrt(b / (2.0 * c)) / c * jax.random.normal(key, c.shape)
    return jnp.maximum(draw, 0.0)


def _exact_sum(key: jax.Array, exact: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """Sum of b PG(1, c) draws where ``exact`` holds (junk elsewhere).  The first round is
    outside the loop, so that b = 1 costs one sampler call and no extra array."""
    first = lax.cond(jnp.any(exact), lambda: polya_gamma_one(jax.random.fold_in(key, 0), c),
                     lambda: jnp.zeros_like(c))

    def add_one(r, total):
        draw = polya_gamma_one(jax.random.fold_in(key, r), c)
        return total + jnp.where(exact & (r < b), draw, 0.0)

    rounds = jnp.max(jnp.where(exact, b, 0.0)).astype(jnp.int32)
    return lax.fori_loop(1, rounds, add_one, first)


def polya_gamma(key: PRNGKeyArray, b: Real[ArrayLike, "*#shape"],
                c: Real[ArrayLike, "*#shape"] = 0.0, shape: tuple[int, ...] | None = None
                ) -> Float[jax.Array, "*#shape"]:
    r"""Draw ω ~ PG(b, c) elementwise (seed 000, eq. 27; the regimes are in the module docs).

    Args:
        key: a ``jax.random`` key.
        b: shape parameters, b > 0, any array broadcastable with ``c`` (and ``shape``).
        c: tilting parameters (in the Gibbs step of eq. 28, the linear predictor
            :math:`\varphi_w(x_i)^\top \beta_j`), any real values.
        shape: output shape; defaults to the broadcast shape of ``b`` and ``c``.

    Returns:
        Float64 array of the broadcast shape.  Inside ``jit`` invalid parameters (b <= 0, or a
        non-finite b or c) cannot raise and give NaN instead.

    Raises:
        ValueError: if ``b`` or ``c`` is concrete and has an entry that is invalid.
    """
    _check(b, c)   # in Python, before tracing: a traced function can neither inspect nor raise
    b = jnp.asarray(b, dtype=jnp.float64)
    c = jnp.asarray(c, dtype=jnp.float64)
    out_shape = jnp.broadcast_shapes(b.shape, c.shape) if shape is None else tuple(shape)
    return _polya_gamma(key, b, c, out_shape)


@partial(jax.jit, static_argnames="out_shape")
def _polya_gamma(key: jax.Array, b: jax.Array, c: jax.Array, out_shape: tuple[int, ...]):
    # Jitted even when called eagerly: the while loops would otherwise be compiled one by one
    # on every call.
    b = jnp.broadcast_to(b, out_shape).ravel()
    c = jnp.broadcast_to(c, out_shape).ravel()
    if b.size == 0:
        return jnp.zeros(out_shape)
    key_exact, key_series, key_limit = jax.random.split(key, 3)
    valid = (b > 0) & jnp.isfinite(b) & jnp.isfinite(c)
    exact = valid & (b == jnp.round(b)) & (b <= MAX_EXACT_B)
    limit = valid & ~exact & (jnp.abs(c) > MAX_C_SERIES)
    series = valid & ~exact & ~limit
    # Each regime runs only if one of its elements is present; invalid entries need no
    # masking before the samplers, which return NaN for them and never loop on them.
    omega = _exact_sum(key_exact, exact, b, c)
    omega = _overwrite(omega, series, polya_gamma_series, key_series, b, c)
    omega = _overwrite(omega, limit, _normal_limit, key_limit, b, c)
    return jnp.where(valid, omega, jnp.nan).reshape(out_shape)

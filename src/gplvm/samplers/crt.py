r"""Chinese-restaurant-table draws and the negative-binomial dispersion update (seed 000,
eqs. 29–31).

For :math:`y \sim \mathrm{NB}(r, p)`, :math:`P(y) = \frac{\Gamma(y + r)}{y!\,\Gamma(r)}
p^y (1 - p)^r`, Zhou & Carin (2012) augment with the number of tables
:math:`L \sim \mathrm{CRT}(y, r)` that y customers occupy in a Chinese restaurant of
concentration r:

.. math:: L = \sum_{t=1}^{y} b_t, \quad b_t \sim \mathrm{Bernoulli}\Big(\frac{r}{r + t - 1}\Big),
          \qquad P(L = l) = \frac{\Gamma(r)}{\Gamma(y + r)}\, |s(y, l)|\, r^l,

so that :math:`\Gamma(y + r)/\Gamma(r) = \sum_l |s(y, l)| r^l` makes the joint of (y, L)
conjugate to a Gamma prior on r.  With :math:`r_j \sim \mathrm{Ga}(a_0, \text{rate } h)`
(eq. 29) the Gibbs pair is

.. math:: L_{nj} \sim \mathrm{CRT}(y_{nj}, r_j), \qquad
          r_j \sim \mathrm{Ga}\Big(a_0 + \sum_n L_{nj},\
          \text{rate } h - \sum_n \log(1 - p_{nj})\Big),

(eqs. 30–31 of seed 000 print a garbled version), with :math:`-\log(1 - p) =
\mathrm{softplus}(\psi)` under the logit link :math:`p = \sigma(\psi)`.

**Cost and the one approximation.**  The first ``exact_terms`` (T0, default 1024) Bernoulli
terms of every entry are drawn exactly, as a flat list of "customers": the work is
:math:`\sum_n \min(y_n, T_0)`, not (number of entries) × max y — 1.8·10^5 for the 529 × 1000
congress counts (max 631: all exact), 8.6·10^5 for the 214 × 4 bridges counts (151 to 8873).
Beyond T0 the rest, :math:`S = \sum_{t=T_0+1}^{y} b_t`, is drawn as Poisson(μ) with its exact
mean :math:`\mu = r(\psi(r + y) - \psi(r + T_0))`.  By Barbour & Hall (1984),

.. math:: d_{TV}(S, \mathrm{Po}(\mu)) \le \frac{1 - e^{-\mu}}{\mu} \sum_{t > T_0} p_t^2
          \le \min\Big(\frac{r}{r + T_0},\ \frac{r^2}{r + T_0 - 1}\Big)

per entry (:func:`tail_tv_bound`; the second form uses :math:`\sum p_t^2 \le p_{T_0+1}
\sum p_t`).  At y = 5000 and T0 = 1024 the bound is 1.3e-4 (r = 0.5), 1.5e-3 (r = 3),
4.9e-3 (r = 10) and 2.4e-2 (r = 50); for any y it is below 2.4e-4, 2.9e-3, 9.7e-3 and
4.7e-2.  The mean of L stays exact and its variance grows by
:math:`\sum_{t>T_0} p_t^2 = r^2(\psi'(r + T_0) - \psi'(r + y))` (:func:`tail_variance_excess`),
e.g. 1.8 on a variance of 181 at r = 50, y = 5000.  Entries with y ≤ T0 are exact; a larger
``exact_terms`` makes more of them so (all of bridges at T0 = 8873, about 5x the time).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import digamma, polygamma

from gplvm._validation import _where, require_float64
from gplvm.typing import Array, ArrayLike, Float, PRNGKeyArray, Real, ScalarLike

__all__ = ["chinese_restaurant_table", "sample_nb_dispersion", "tail_tv_bound",
           "tail_variance_excess"]

EXACT_TERMS = 1024
CHUNK = 1 << 14


def _concrete(x) -> np.ndarray | None:
    try:
        return np.asarray(x, dtype=float)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _check(y, r) -> None:
    y_np, r_np = _concrete(y), _concrete(r)
    if y_np is not None:
        with np.errstate(invalid="ignore"):
            bad = np.atleast_1d(~np.isnan(y_np) & ~((y_np >= 0) & (y_np == np.round(y_np))
                                                    & np.isfinite(y_np)))
        if bad.any():
            raise ValueError(
                f"the counts have {int(bad.sum())} entries that are not non-negative integers "
                f"(at {_where(bad)}; e.g. {float(np.atleast_1d(y_np)[bad][0])}); the "
                f"negative-binomial likelihood needs counts 0, 1, 2, ... (NaN marks missing)")
    if r_np is not None:
        bad = np.atleast_1d(~(r_np > 0) | ~np.isfinite(r_np))
        if bad.any():
            raise ValueError(f"the dispersion r has {int(bad.sum())} entries that are not finite "
                             f"and positive (at {_where(bad)}); CRT(y, r) needs r > 0")


def chinese_restaurant_table(key: PRNGKeyArray, y: Real[ArrayLike, "*#shape"],
                             r: Real[ArrayLike, "*#shape"], exact_terms: int = EXACT_TERMS
                             ) -> Float[Array, "*#shape"]:
    r"""Draw L ~ CRT(y, r) elementwise (Zhou & Carin 2012; the module docstring).

    Args:
        key: a ``jax.random`` key.
        y: counts, non-negative integers stored as floats; NaN (missing) gives L = 0.
        r: concentrations r > 0, broadcastable with ``y`` (e.g. (J,) against (N, J)).
        exact_terms: T0 (static); the terms t ≤ T0 are exact, the rest Poisson (module docs).

    Returns:
        Float64 array of the broadcast shape, integer-valued, 0 ≤ L ≤ y (L ≥ 1 when y ≥ 1).

    Raises:
        ValueError: if ``y`` or ``r`` is concrete and has an invalid entry.
    """
    _check(y, r)
    require_float64("Chinese-restaurant-table draws")
    y = jnp.asarray(y, dtype=jnp.float64)
    r = jnp.asarray(r, dtype=jnp.float64)
    shape = jnp.broadcast_shapes(y.shape, r.shape)
    return _crt(key, jnp.broadcast_to(y, shape), jnp.broadcast_to(r, shape), int(exact_terms))


@partial(jax.jit, static_argnames="exact_terms")
def _crt(key: Array, y: Array, r: Array, exact_terms: int) -> Array:
    shape = y.shape
    y = jnp.where(jnp.isnan(y), 0.0, y).ravel()
    r = r.ravel()
    if y.size == 0:
        return jnp.zeros(shape)
    k_head, k_tail = jax.random.split(key)
    L = _exact_head(k_head, jnp.minimum(y, exact_terms).astype(int), r)
    mu_tail = jnp.where(y > exact_terms, r * (digamma(r + y) - digamma(r + exact_terms)), 0.0)
    L = L + jax.random.poisson(k_tail, mu_tail).astype(L.dtype)
    return L.reshape(shape)


def _exact_head(key: Array, n_terms: Array, r: Array) -> Array:
    """Sum over t = 1..n_terms[i] of Bernoulli(r_i/(r_i + t − 1)), for every i.

    1. The terms of all entries form one flat list of "customers", entry after entry
       (entry i owns positions ends[i] − n_terms[i] .. ends[i] − 1).
    2. Chunks of C customers (C a power of two from 256 to CHUNK, about the number of
       entries) are drawn in a loop of ceil(total/C) rounds; each
       customer finds its entry by binary search in ``ends`` and its rank t within it.
    3. A customer opens a table when u (r + t − 1) < r, u ~ U[0, 1); tables are summed back
       into their entries.
    """
    size = n_terms.shape[0]
    chunk_size = int(min(CHUNK, max(256, 1 << (size - 1).bit_length())))   # static
    # The barrier stops XLA from constant-folding the cumsum when the counts are a jit
    # constant (closed-over data): folding 5e5 entries took XLA 5 s at compile time.
    ends = jnp.cumsum(lax.optimization_barrier(n_terms))
    starts = ends - n_terms
    total = ends[-1]

    def chunk(c, L):
        g = c * chunk_size + jnp.arange(chunk_size, dtype=ends.dtype)
        entry = jnp.minimum(jnp.searchsorted(ends, g, side="right"), size - 1)
        t = (g - starts[entry] + 1).astype(r.dtype)
        rr = r[entry]
        u = jax.random.uniform(jax.random.fold_in(key, c), (chunk_size,), dtype=r.dtype)
        table = (g < total) & (u * (rr + t - 1.0) < rr)
        return L.at[entry].add(table.astype(r.dtype))

    n_chunks = (total + chunk_size - 1) // chunk_size
    return lax.fori_loop(0, n_chunks, chunk, jnp.zeros(size, r.dtype))


def _tail_moments(y, r, exact_terms: int) -> tuple[Array, Array, Array]:
    """(tail?, Σ_{t>T0} p_t, Σ_{t>T0} p_t²) by digamma and trigamma differences."""
    y = jnp.asarray(y, dtype=jnp.float64)
    r = jnp.asarray(r, dtype=jnp.float64)
    tail = y > exact_terms
    y_safe = jnp.where(tail, y, exact_terms + 1.0)
    mu = r * (digamma(r + y_safe) - digamma(r + exact_terms))
    sum_sq = r**2 * (polygamma(1, r + exact_terms) - polygamma(1, r + y_safe))
    return tail, mu, sum_sq


def tail_variance_excess(y: Real[ArrayLike, "*#shape"], r: Real[ArrayLike, "*#shape"],
                         exact_terms: int = EXACT_TERMS) -> Float[Array, "*#shape"]:
    r"""Var of the drawn L minus Var of CRT(y, r): :math:`\sum_{t=T_0+1}^{y} p_t^2`
    = r²(ψ'(r + T0) − ψ'(r + y)) where y > T0, else 0 (the Poisson tail's only second-moment
    error; the mean is exact)."""
    tail, _, sum_sq = _tail_moments(y, r, exact_terms)
    return jnp.where(tail, sum_sq, 0.0)


def tail_tv_bound(y: Real[ArrayLike, "*#shape"], r: Real[ArrayLike, "*#shape"],
                  exact_terms: int = EXACT_TERMS) -> Float[Array, "*#shape"]:
    r"""Barbour & Hall's bound on the total-variation distance between the drawn L and
    CRT(y, r): :math:`(1 - e^{-\mu})\mu^{-1}\sum_{t>T_0} p_t^2`, 0 where y ≤ T0."""
    tail, mu, sum_sq = _tail_moments(y, r, exact_terms)
    return jnp.where(tail, -jnp.expm1(-mu) / mu * sum_sq, 0.0)


def sample_nb_dispersion(key: PRNGKeyArray, Y: Real[ArrayLike, "N J"],
                         psi: Real[ArrayLike, "N J"], r: Real[ArrayLike, "#J"], a0: ScalarLike,
                         h: Real[ArrayLike, "#J"] | ScalarLike, exact_terms: int = EXACT_TERMS
                         ) -> Float[Array, " J"]:
    r"""One Gibbs update of the negative-binomial dispersions (seed 000, eqs. 29–31).

    .. math:: L_{nj} \sim \mathrm{CRT}(y_{nj}, r_j), \qquad
              r_j \sim \mathrm{Ga}\Big(a_0 + \sum_n L_{nj},\
              \text{rate } h + \sum_n \mathrm{softplus}(\psi_{nj})\Big),

    sums over the observed entries only; softplus(ψ) = −log(1 − p) computed without
    forming 1 − p, which underflows for large ψ.

    Args:
        key: a ``jax.random`` key.
        Y: ``Float[Array, "N J"]`` counts, NaN = missing.
        psi: ``Float[Array, "N J"]`` linear predictors, p = sigmoid(ψ) (any value where Y
            is missing).
        r: ``Float[Array, "J"]`` current dispersions.
        a0: shape of the Gamma prior on r_j.
        h: rate of the Gamma prior on r_j (scalar or (J,)).
        exact_terms: passed to :func:`chinese_restaurant_table`.

    Returns:
        ``Float[Array, "J"]`` the new dispersions.
    """
    _check(Y, r)
    require_float64("Negative-binomial dispersion draws")
    Y = jnp.asarray(Y, dtype=jnp.float64)
    psi = jnp.asarray(psi, dtype=jnp.float64)
    r = jnp.asarray(r, dtype=jnp.float64)
    return _nb_dispersion(key, Y, psi, r, jnp.asarray(a0, jnp.float64),
                          jnp.asarray(h, jnp.float64), int(exact_terms))


@partial(jax.jit, static_argnames="exact_terms")
def _nb_dispersion(key, Y, psi, r, a0, h, exact_terms):
    k_crt, k_gamma = jax.random.split(key)
    observed = ~jnp.isnan(Y)
    L = _crt(k_crt, Y, jnp.broadcast_to(r, Y.shape), exact_terms)        # 0 where missing
    psi = jnp.where(observed, psi, 0.0)
    # softplus(ψ) as max(ψ, 0) + log1p(e^{−|ψ|}): jax.nn.softplus's value for finite ψ, ~4x
    # faster (no NaN/inf branches, no custom derivative)
    softplus = jnp.maximum(psi, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(psi)))
    neg_log1m_p = jnp.where(observed, softplus, 0.0)
    shape = a0 + jnp.sum(L, axis=0)
    rate = h + jnp.sum(neg_log1m_p, axis=0)
    return jax.random.gamma(k_gamma, shape, dtype=r.dtype) / rate

r"""Negative-binomial dispersion updates of the RFLVM (seed 000 eqs. 29–31).

Two exact moves per sweep, composed:

1. **CRT** (Zhou & Carin 2012; eqs. 30–31 corrected): L_nj ~ CRT(y_nj, r_j), then
   r_j ~ Ga(a0 + Σ_n L_nj, rate h − Σ_n log(1 − p_nj)) with ψ held fixed (accepted against the
   log-mean prior, :func:`update_dispersion_crt`), and the prior's rate
   h | r ~ Ga(b0 + D a0, rate g0 + Σ_j r_j) (eq. 29's hierarchy).
2. **Mean-preserving Metropolis moves** on (log r_j, c_j), c_j the column's intercept.  Under the
   logit link the mean is r e^ψ, so with ψ fixed the CRT step can only move r as far as the data
   let the *mean* move: on large counts (bridge traffic, 151–8873 a day) the conditional of r
   given ψ is a few per cent wide and r stays near its starting value for thousands of sweeps
   (measured: r ≈ 10, 120 or 1000 after 500 sweeps, depending only on the start).  The move
   proposes (log r_j + ε, c_j − ε), ε ~ N(0, s²): every ψ_nj drops by ε, so r e^ψ — and the mean
   — are unchanged and only the dispersion changes.  The map is a translation of (log r, c),
   so the proposal is symmetric.  The prior is on the log-mean m = c + log r, independent of r
   (:func:`gplvm.models.rflvm.init.nb_prior_mean`), so the move leaves it unchanged and the
   target on (log r, c) is p(y | r, ψ) Ga(r | a0, h) r: the ratio needs only column sums.  A
   few step sizes s (a mixture of valid kernels) cover both the wide posterior of small r and
   the narrow one of large r.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import digamma, gammaln

from gplvm._pytree import to_device
from gplvm.likelihoods._common import plain_softplus as softplus
from gplvm.samplers.crt import EXACT_TERMS, sample_nb_dispersion

Array = jax.Array

#: random-walk scales on log r of the mean-preserving moves, one move each per sweep
MOVE_SCALES = (1.0, 0.3, 0.1, 0.03)


class NBParams(NamedTuple):
    """The negative binomial's parameters that the dispersion steps move or condition on.

    Attributes:
        r: (D,) dispersions r_j.
        h: () the rate of their Gamma(a0, rate h) prior (eq. 29).
        intercept: (D,) the columns' intercepts c_j (the last row of β), which enter the
            log-mean prior on c_j + log r_j and which the mean-preserving moves shift.
    """

    r: Array
    h: Array
    intercept: Array


def update_dispersion_crt(key: Array, data, psi: Array, nb: NBParams, prior: tuple,
                          log_mean_prior: tuple):
    """CRT step for r (ψ fixed), corrected for the log-mean prior, then the step for h.

    The CRT pair L | r, r | L is a data-augmentation kernel, reversible with respect to
    p(r | y, ψ) ∝ NB(y | r, ψ) Ga(r | a0, h).  The full conditional also carries the log-mean
    prior N(c + log r | m0, v) (:func:`gplvm.models.rflvm.init.nb_prior_mean`), so the CRT
    draw r' is a proposal accepted with probability min(1, N(c + log r')/N(c + log r)): a
    Metropolis–Hastings step with a reversible proposal kernel.

    Args:
        data: the counts ``Y`` (N, D), the mask ``observed`` (N, D) and ``customers``, the
            :func:`crt_layout` of the counts or None (the sampler lays them out), as
            :class:`.spec.RFLVMData` holds them.
        psi: (N, D) linear predictor including the intercepts and the offset.
        nb: r, h and the intercepts c_j (:class:`NBParams`).
        prior: (a0, b0, g0) of eq. 29;  log_mean_prior: (m0 (D,), precision) of c_j + log r_j.

    Returns:
        (r, h).
    """
    key_r, key_u, key_h = jax.random.split(key, 3)
    a0, b0, g0 = prior
    m0, prec = log_mean_prior
    r, h, intercept = nb
    if data.customers is None:
        Y_nan = jnp.where(data.observed > 0, data.Y, jnp.nan)
        r_prop = sample_nb_dispersion(key_r, Y_nan, psi, r, a0, h)
    else:
        r_prop = _dispersion_given_customers(key_r, data.customers, data.observed, psi, r, a0,
                                             h)
    log_ratio = -0.5 * prec * ((intercept + jnp.log(r_prop) - m0) ** 2
                               - (intercept + jnp.log(r) - m0) ** 2)
    accept = jnp.log(jax.random.uniform(key_u, r.shape, r.dtype)) < log_ratio
    r = jnp.where(accept, r_prop, r)
    shape = b0 + r.shape[0] * a0
    h = jax.random.gamma(key_h, shape, dtype=r.dtype) / (g0 + jnp.sum(r))
    return r, h


def crt_layout(y: np.ndarray, col: np.ndarray, exact_terms: int = EXACT_TERMS) -> tuple:
    """The CRT draws of the dispersion step laid out once, from the counts (host NumPy).

    L_nj ~ CRT(y_nj, r_j) is a sum of Bernoulli(r_j/(r_j + t − 1)) over t = 1..y_nj
    (:mod:`gplvm.samplers.crt`); the step needs only the column totals Σ_n L_nj.  The terms
    of rank t in column j all have the same probability, and the rows' terms are independent,
    so their sum is Binomial(c_jt, r_j/(r_j + t − 1)) with c_jt = #{n : y_nj ≥ t} — the same
    distribution of Σ_n L_nj as one Bernoulli per "customer" (entry and rank).  The layout
    lists the (column, rank, c_jt) with c_jt > 0 and t ≤ T0: at most Σ_j min(max_n y_nj, T0)
    entries, against Σ_nj min(y_nj, T0) customers (the customers' list was 5·10⁸ long for
    a 1000 × 1000 negative-binomial S-curve, and its sweep needed 19.7 GB; 8.6·10⁵ for
    bridges, here ≤ 4,096).  Counts above T0 keep the sampler's Poisson tail (exact mean).

    Args:
        y, col: the K positive observed counts and their columns.
        exact_terms: T0 of :func:`gplvm.samplers.crt.chinese_restaurant_table`.

    Returns:
        (column (P,) int32, rank t (P,), c_jt (P,), tail counts (K',), tail columns (K',)) as
        device arrays.  Each list ends with one entry that adds nothing (rank ∞ with c = 0,
        which never opens a table, and a tail count of T0, whose Poisson mean is 0), so that
        no array is empty: the driver places every leaf of the state on its devices by chain,
        and JAX gives a zero-size array another sharding than the compiled program expects (a
        negative-binomial fit with 2 chains on 2 devices failed on data with no count above
        T0).
    """
    y = np.asarray(y, float)
    col = np.asarray(col, np.int64)
    head = np.minimum(y, exact_terms).astype(np.int64)
    # c_jt = (entries of column j) − #{n : head_nj < t}, from the entries sorted by (j, head)
    stride = exact_terms + 1
    keys = np.sort(col * stride + head)
    cols, first, n_entries = np.unique(keys // stride, return_index=True, return_counts=True)
    longest = keys[first + n_entries - 1] % stride             # max_n min(y_nj, T0) per column
    pair_col = np.repeat(cols, longest)
    rank = np.arange(int(longest.sum())) - np.repeat(np.cumsum(longest) - longest, longest) + 1
    below = np.searchsorted(keys, pair_col * stride + rank, side="left")
    count = np.repeat(first + n_entries, longest) - below
    tail = y > exact_terms
    return to_device((np.append(pair_col, 0).astype(np.int32),
                      np.append(rank.astype(float), np.inf), np.append(count.astype(float), 0.0),
                      np.append(y[tail], float(exact_terms)),
                      np.append(col[tail], 0).astype(np.int32)))


def column_tables(key: Array, customers: tuple, r: Array) -> Array:
    """Σ_n L_nj, L_nj ~ CRT(y_nj, r_j), for every column j, from :func:`crt_layout`'s layout.

    The c_jt terms of rank t in column j open Binomial(c_jt, r_j/(r_j + t − 1)) tables (the
    Bernoulli of :func:`gplvm.samplers.crt.chinese_restaurant_table`, summed over rows);
    counts above T0 add Poisson(r(ψ(r + y) − ψ(r + T0))), T0 being the one the layout was
    built with.
    """
    k_head, k_tail = jax.random.split(key)
    col, rank, count, y_tail, col_tail = customers
    D = r.shape[0]
    rr = r[col]
    opened = jax.random.binomial(k_head, count, rr / (rr + rank - 1.0), dtype=r.dtype)
    tables = jax.ops.segment_sum(opened, col, num_segments=D)
    r_tail = r[col_tail]
    t0 = y_tail[-1]          # the layout's last tail entry is T0 itself (mean 0): its T0
    mu = r_tail * (digamma(r_tail + y_tail) - digamma(r_tail + t0))
    tail = jax.random.poisson(k_tail, mu).astype(r.dtype)
    return tables + jax.ops.segment_sum(tail, col_tail, num_segments=D)


def _dispersion_given_customers(key: Array, customers: tuple, observed: Array, psi: Array,
                                r: Array, a0, h) -> Array:
    """:func:`gplvm.samplers.crt.sample_nb_dispersion`, its tables by :func:`column_tables`:
    the same distribution, without laying the customers out in every sweep (inside a compiled
    sweep, counts traced, that search took the step from ~20 ms to ~290 ms on congress109;
    issue 14)."""
    k_crt, k_gamma = jax.random.split(key)
    rate = h + jnp.sum(softplus(psi) * observed, axis=0)
    tables = column_tables(k_crt, customers, r)
    return jax.random.gamma(k_gamma, a0 + tables, dtype=r.dtype) / rate


def log_gamma_ratio(Y: Array, observed: Array, r: Array, nonzero=None) -> Array:
    """Σ_n log Γ(y_nj + r_j) − log Γ(r_j) over observed entries (D,).

    The term is exactly zero where y = 0, so with ``nonzero`` = (y, column) of the entries
    with y > 0 (:attr:`.spec.RFLVMData.nonzero`) only those are evaluated: on congress109,
    9% of the N × D log-gamma calls.
    """
    if nonzero is None:
        return jnp.sum((gammaln(Y + r) - gammaln(r)) * observed, axis=0)
    y, col = nonzero
    D = r.shape[0]
    n_pos = jax.ops.segment_sum(jnp.ones_like(y), col, num_segments=D)
    return jax.ops.segment_sum(gammaln(y + r[col]), col, num_segments=D) - n_pos * gammaln(r)


def nb_column_log_lik(Y: Array, observed: Array, psi: Array, r: Array, nonzero=None
                      ) -> Array:
    """Σ_n log NB(y_nj | r_j, p = σ(ψ_nj)) over observed entries, up to −log y! (D,)."""
    vals = Y * psi - (Y + r) * softplus(psi)
    return jnp.sum(vals * observed, axis=0) + log_gamma_ratio(Y, observed, r, nonzero)


def mean_preserving_moves(key: Array, data, psi: Array, nb: NBParams, a0,
                          scales=MOVE_SCALES):
    """Metropolis moves (log r_j, c_j) → (log r_j + ε, c_j − ε), one per scale (module doc).

    Args:
        data: the counts ``Y`` (N, D), the mask ``observed`` (N, D) and ``nonzero``, the
            (y, column) of the observed entries with y > 0 or None (:func:`log_gamma_ratio`),
            as :class:`.spec.RFLVMData` holds them.
        psi: (N, D) linear predictor including the intercepts and the offset.
        nb: the dispersions r (D,), the rate h of their Gamma(a0, rate h) prior and the
            intercepts c_j (D,) (:class:`NBParams`).
        a0: the shape of that prior.

    Returns:
        (r, intercept, ψ) after the moves, and the number of accepted moves per column.
    """
    Y, observed, nonzero = data.Y, data.observed, data.nonzero
    r, h, intercept = nb
    # ψ is not rewritten move by move: each column's accepted shifts add up in ``shift`` and
    # ψ − shift is formed inside the sums (fused, never stored), then once at the end.
    log_lik = nb_column_log_lik(Y, observed, psi, r, nonzero)
    n_acc = jnp.zeros(r.shape, jnp.int32)
    shift = jnp.zeros(r.shape, r.dtype)
    for scale, k in zip(scales, jax.random.split(key, len(scales))):
        k_eps, k_u = jax.random.split(k)
        eps = scale * jax.random.normal(k_eps, r.shape, r.dtype)
        r_new, c_new = r * jnp.exp(eps), intercept - eps
        log_lik_new = nb_column_log_lik(Y, observed, psi - (shift + eps), r_new, nonzero)
        log_ratio = log_lik_new - log_lik + a0 * eps - h * (r_new - r)
        accept = jnp.log(jax.random.uniform(k_u, r.shape, r.dtype)) < log_ratio
        r = jnp.where(accept, r_new, r)
        intercept = jnp.where(accept, c_new, intercept)
        shift = jnp.where(accept, shift + eps, shift)
        log_lik = jnp.where(accept, log_lik_new, log_lik)
        n_acc = n_acc + accept
    psi = psi - shift
    return r, intercept, psi, n_acc

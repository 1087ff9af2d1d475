r"""Pólya-gamma draws ω ~ PG(b, c) for any b > 0 and real c (seed 000, eqs. 26-28).

PG(b, c) is the law of :math:`\frac{1}{2\pi^2}\sum_k g_k / ((k-\frac12)^2 + c^2/(4\pi^2))`,
:math:`g_k \sim \mathrm{Ga}(b, 1)` (eq. 27), with cumulant generating function

.. math:: \log E[e^{s\omega}] = b \log\cosh(c/2) - b \log\cosh\!\sqrt{c^2/4 - s/2},

mean :math:`\frac{b}{2c}\tanh\frac{c}{2}` and variance
:math:`\frac{b}{4c^3}\,\frac{\sinh c - c}{\cosh^2(c/2)}` (b/4 and b/24 at c = 0).

:func:`polya_gamma` picks, element by element, one of three methods.

**Exact: b = 1 or 2.**  The sum of b independent PG(1, c) draws from Devroye's
alternating-series sampler (:mod:`.polya_gamma_devroye`; Polson, Scott & Windle 2013), exact up
to the 2^-53 resolution of the uniforms.  One PG(1, c) draw takes 1.0 to 1.4 proposals
(acceptance 0.72 to 0.9993); two of them cost about what one series draw does, three more.

**Series: every other b** (non-integer, or integer >= 3).  Eq. 27 with K exact terms (K = 0
for b >= 1, up to 16 for small b) and the rest replaced by a shift and two gammas, the
Gauss–Radau rule that makes the first five cumulants exact (:mod:`.polya_gamma_series`, which
also gives the Kolmogorov–Smirnov distances that set K).  K + 2 gamma variates per draw.

**Normal limit: series b with |c| > MAX_C_SERIES (= 1e12).**  There PG(b, c) is
N(b/(2|c|), b/(2|c|^3)) to within a skewness of :math:`4.3/\sqrt{b|c|}`
(:math:`\kappa_3 \to 1.5\,b/|c|^5`), under 4.3e-6/√b: invisible to any feasible number of
draws, while the tail sums of the series (of order :math:`|c|^{1-2m}`, multiplied together in
the Gauss rule) head for the end of the float64 range.  Elsewhere no normal or two-moment
approximation is used: at b = 1000 and c = 0 the skewness, 0.062, is still 8 standard errors
of the sample skewness of 10^5 draws.

**Each method runs on its own entries only.**  Entries are sorted by class (method, and K
for the series) into a layout where each class fills whole chunks of static size
(:func:`_layout`: one prefix sum for all classes, a scatter in, a gather out); one loop then
draws chunk after chunk, each with the one method of its class (``lax.switch``).  So the cost
is that of each entry's own method, plus at most one partly filled chunk per class present.

Everything is ``jax.random`` and ``lax`` control flow with static shapes: jit, vmap and
reproducibility (same key, same draws) hold.  Under ``vmap`` the switch becomes a select
that runs every method on every chunk, and loops run until the slowest batch member ends:
correct, but far slower than one call on the stacked arrays.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from gplvm._validation import _where, require_float64
from gplvm.samplers.polya_gamma_devroye import polya_gamma_one
from gplvm.samplers.polya_gamma_series import HEAD_TERMS, head_class, polya_gamma_series
from gplvm.typing import ArrayLike, Float, PRNGKeyArray, Real

MAX_EXACT_B = 2
MAX_C_SERIES = 1e12
#: Largest chunk of the dispatch loop (see :func:`_chunk_size`).
MAX_CHUNK = 16384
# Classes of entries: the exact sampler for b = 1, ..., MAX_EXACT_B (classes 0, 1, ...), the
# series with HEAD_TERMS[i] exact terms (class _SERIES + i) and the normal limit.
_SERIES = MAX_EXACT_B
_LIMIT = _SERIES + len(HEAD_TERMS)
_N_CLASSES = _LIMIT + 1          # also the class of invalid entries, which are not drawn
_INVALID = 2 ** 30               # their position in the layout: past its end
_BITS = 64 // _N_CLASSES         # bits per class in the packed counts of _ranks


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


def _normal_limit(key: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """N(b/(2|c|), b/(2|c|^3)), the exact mean and variance once tanh(|c|/2) = 1 in float64."""
    c = jnp.abs(c)
    draw = b / (2.0 * c) + jnp.sqrt(b / (2.0 * c)) / c * jax.random.normal(key, c.shape)
    return jnp.maximum(draw, 0.0)


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
    require_float64("Pólya-gamma draws")
    b = jnp.asarray(b, dtype=jnp.float64)
    c = jnp.asarray(c, dtype=jnp.float64)
    out_shape = jnp.broadcast_shapes(b.shape, c.shape) if shape is None else tuple(shape)
    return _polya_gamma(key, b, c, out_shape)


def _classes(b: jax.Array, c: jax.Array) -> jax.Array:
    """Class of each entry; invalid ones (b <= 0, or b or c not finite) get _N_CLASSES."""
    valid = (b > 0) & jnp.isfinite(b) & jnp.isfinite(c)
    exact = (b == jnp.round(b)) & (b <= MAX_EXACT_B)
    series = jnp.where(jnp.abs(c) > MAX_C_SERIES, _LIMIT, _SERIES + head_class(b))
    cls = jnp.where(exact, b.astype(jnp.int32) - 1, series)
    return jnp.where(valid, cls, _N_CLASSES)


def _chunk_size(n: int) -> int:
    """About n/8 rounded up to a power of two, within [256, MAX_CHUNK] and at most n: each
    class present wastes at most one partly filled chunk, and each chunk costs the loop a
    fixed overhead (tens of microseconds on CPU)."""
    return min(n, MAX_CHUNK, max(256, 1 << ((n - 1) // 8).bit_length()))


def _ranks(cls: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A numbering 0, 1, ... of the entries of each class, in column-major order of a
    (rows, n/rows) view of ``cls`` (any fixed order will do), and the size of each class.

    One prefix sum serves all classes: each entry contributes 1 << (B cls) to a uint64, with
    B = 64 // (number of classes) bits per class, which cannot overflow with fewer than 2^B
    rows; the sums run down the rows (a ``scan`` adding whole rows, which XLA vectorises:
    0.5 ns an entry on CPU, against 8 for ``cumsum`` along the entries), and a short prefix
    sum over the column totals follows.
    """
    n = cls.shape[0]
    rows = max(1, min(2 ** _BITS - 1, n // 64))
    cols = -(-n // rows)
    view = jnp.pad(cls, (0, rows * cols - n), constant_values=_N_CLASSES).reshape(rows, cols)
    shift = (_BITS * jnp.minimum(view, _N_CLASSES - 1)).astype(jnp.uint64)
    one_hot = jnp.where(view < _N_CLASSES, jnp.uint64(1) << shift, jnp.uint64(0))
    down = lax.scan(lambda total, row: (total + row, total + row), one_hot[0] * 0, one_hot)[1]
    field = lambda x, sh: ((x >> sh) & jnp.uint64(2 ** _BITS - 1)).astype(jnp.int32)
    totals = jnp.stack([field(down[-1], jnp.uint64(_BITS * r)) for r in range(_N_CLASSES)])
    before = jnp.cumsum(totals, axis=1) - totals                  # (classes, cols)
    col = jnp.broadcast_to(jnp.arange(cols), view.shape)
    rank = field(down, shift) - 1 + before[jnp.minimum(view, _N_CLASSES - 1), col]
    return rank.ravel()[:n], jnp.sum(totals, axis=1)


def _layout(cls: jax.Array, size: int) -> tuple[jax.Array, jax.Array]:
    """Positions of the entries in a layout where the classes follow each other, each
    filling whole chunks of ``size`` (invalid entries get an index past the end), and the
    index of the first chunk after each class."""
    rank, counts = _ranks(cls)
    ends = jnp.cumsum((counts + size - 1) // size)
    starts = (ends - (counts + size - 1) // size) * size
    pos = jnp.where(cls < _N_CLASSES, starts.at[cls].get(mode="clip") + rank, _INVALID)
    return pos, ends


def _exact_sum(key: jax.Array, c: jax.Array, rounds) -> jax.Array:
    """Sum of ``rounds`` independent PG(1, c) draws."""
    add = lambda r, total: total + polya_gamma_one(jax.random.fold_in(key, r), c)
    return lax.fori_loop(0, rounds, add, jnp.zeros_like(c))


def _draw_chunk(key, b, c, cls):
    """ω for one chunk of the sorted layout, all of class ``cls`` (padding has b = c = NaN)."""
    branch = jnp.where(cls < _SERIES, 0, jnp.where(cls == _LIMIT, 2, 1))
    head = jnp.asarray(HEAD_TERMS, jnp.int32)[jnp.clip(cls - _SERIES, 0, len(HEAD_TERMS) - 1)]
    return lax.switch(branch, [lambda: _exact_sum(key, c, cls + 1),
                               lambda: polya_gamma_series(key, b, c, head),
                               lambda: _normal_limit(key, b, c)])


@partial(jax.jit, static_argnames="out_shape")
def _polya_gamma(key: jax.Array, b: jax.Array, c: jax.Array, out_shape: tuple[int, ...]):
    # Jitted even when called eagerly: the while loops would otherwise be compiled one by one
    # on every call.
    b = jnp.broadcast_to(b, out_shape).ravel()
    c = jnp.broadcast_to(c, out_shape).ravel()
    n = b.size
    if n == 0:
        return jnp.zeros(out_shape)
    size = _chunk_size(n)
    cls = _classes(b, c)
    pos, ends = _layout(cls, size)
    length = (-(-n // size) + _N_CLASSES - 1) * size       # the most chunks the layout can use
    b_sorted = jnp.full(length, jnp.nan).at[pos].set(b, mode="drop")
    c_sorted = jnp.full(length, jnp.nan).at[pos].set(c, mode="drop")

    def body(j, omega):
        start = j * size
        chunk = [lax.dynamic_slice(x, (start,), (size,)) for x in (b_sorted, c_sorted)]
        cls_j = jnp.sum(j >= ends, dtype=jnp.int32)
        draws = _draw_chunk(jax.random.fold_in(key, j), *chunk, cls_j)
        return lax.dynamic_update_slice(omega, draws, (start,))

    omega = lax.fori_loop(0, ends[_N_CLASSES - 1], body, jnp.zeros(length))
    return omega.at[pos].get(mode="fill", fill_value=jnp.nan).reshape(out_shape)

"""Imputed entries with their predictive intervals, each column on its own scale: every value
is a z-score of its column, (y − m_d) / s_d with m_d and s_d the mean and standard deviation
of the column's observed entries, so a column in the thousands (wine's proline) and one in
tenths share one readable axis.  One row of the plot per named column."""

from __future__ import annotations

import numpy as np

from gplvm.plot._axes import column_names, legend_outside, new_axes, require

#: above this many columns only every k-th column's name is written on the axis
MAX_NAMED = 40


def column_scale(Y) -> tuple[np.ndarray, np.ndarray]:
    """(D,) mean and standard deviation of each column's observed (non-NaN) entries; a
    column with fewer than two observed values or no spread gets sd 1 (shown unscaled)."""
    observed = ~np.isnan(Y)
    count = observed.sum(axis=0)
    mean = np.where(count > 0, np.nansum(Y, axis=0) / np.maximum(count, 1), 0.0)
    centred = np.where(observed, Y - mean, 0.0)
    sd = np.sqrt((centred ** 2).sum(axis=0) / np.maximum(count - 1, 1))
    return mean, np.where((count > 1) & (sd > 0), sd, 1.0)


def _predictive_sd(model, Y, X) -> np.ndarray:
    """(N, D) predictive sd of every entry at the rows' latent means X."""
    _, var = model.predict(np.asarray(X), return_var=True)
    var = np.asarray(var, dtype=float).reshape(len(Y), -1) if np.ndim(var) > 1 else var
    return np.sqrt(np.broadcast_to(np.asarray(var, dtype=float), Y.shape))


def imputation(model, Y, X=None, truth=None, ax=None, offset=None, columns=None,
               filled=None):
    """The imputed entries of ``Y`` (``model.impute(Y)``) with ±2 sd predictive intervals, as
    z-scores of their columns (:func:`column_scale` of the observed entries).

    The intervals are ``model.predict(X, return_var=True)`` at the rows' latent means ``X``
    (default ``model.transform(Y)``; pass ``model.X_mean_`` for the training data): they leave
    out the uncertainty of the latents, and for models whose ``predict`` variance has no noise
    (the RFLVM) they are intervals of the mean.

    Args:
        model: a fitted model with ``impute`` and ``predict``.
        Y: (N, D) data with NaN entries (images (N, H, W) are read as N × HW columns).
        X: optional (N, Q) latent means of Y's rows.
        truth: optional true values, Y's shape: drawn as imputed against true (both
            z-scores), with the diagonal; without it each column is one row of the plot, its
            observed entries grey dots and its imputed entries orange.
        ax: the Axes to draw on (default: a new figure, not registered with pyplot).
        offset: optional (N,) row offsets of a count model fitted with offsets, passed to
            ``model.impute`` (``predict`` takes none: the intervals' widths are those of a row
            at offset 0).
        columns: optional D column names (default the model's ``feature_names_in_``, which
            ``gplvm fit`` sets from the data file's header).
        filled: optional ``model.impute(Y)`` already computed (a caller that wrote it
            elsewhere need not impute twice; ``offset`` is then unused).

    Returns:
        The Axes; the errorbar's line of points (``gid='imputed'``) and its bars
        (``gid='intervals'``) have one entry per NaN of Y, in z-score units.
    """
    require(model, "predict", "imputation")
    shape = np.shape(Y)
    Y = np.asarray(Y, dtype=float).reshape(shape[0], -1)
    missing = np.isnan(Y)
    if not missing.any():
        raise ValueError("Y has no missing (NaN) entries; there is nothing imputed to show")
    if filled is None:
        filled = (model.impute(Y.reshape(shape)) if offset is None
                  else model.impute(Y.reshape(shape), offset=offset))
    filled = np.asarray(filled, dtype=float).reshape(Y.shape)
    X = model.transform(Y.reshape(shape)) if X is None else X
    mean, sd = column_scale(Y)
    z = (filled - mean) / sd
    z_sd = (_predictive_sd(model, Y, X) / sd)[missing]
    rows, cols = np.nonzero(missing)
    names = column_names(model, Y.shape[1], columns)
    if truth is None:
        ax = new_axes(ax, figsize=(7.5, min(10.0, 1.6 + 0.32 * Y.shape[1])))
        _strips(ax, z, missing, cols, z_sd, names, _interval_name(model))
    else:
        ax = new_axes(ax, figsize=(5.5, 4.5))
        x = ((np.asarray(truth, dtype=float).reshape(Y.shape) - mean) / sd)[missing]
        low, high = np.nanmin(x), np.nanmax(x)
        ax.plot([low, high], [low, high], color="grey", lw=0.8, ls="--", label="imputed = true")
        _bars(ax, x, z[missing], z_sd, vertical=True, what=_interval_name(model))
        ax.set_xlabel("true value (z-score of its column)")
        ax.set_ylabel("imputed value (z-score of its column)")
        legend_outside(ax)
    ax.set_title(f"{type(model).__name__}: {missing.sum()} imputed entries in "
                 f"{len(np.unique(cols))} columns\nz-score = (value − column mean) / column sd, "
                 f"both of the observed entries", fontsize=8)
    return ax


def _interval_name(model) -> str:
    """What the bars are: the RFLVM's ``predict`` variance is that of the mean (no noise)."""
    from gplvm.plot._diagnostics import has_frequencies

    return ("imputed ± 2 sd of the\npredictive mean (no noise)" if has_frequencies(model)
            else "imputed ± 2 predictive sd")


def _bars(ax, x, y, sd, vertical: bool, what: str):
    """Imputed points with ±2 sd bars (gids 'imputed' and 'intervals')."""
    kw = {"yerr": 2 * sd} if vertical else {"xerr": 2 * sd}
    bars = ax.errorbar(x, y, fmt="o", ms=2.5, lw=0.6, color="tab:orange", ecolor="#f5b97f",
                       zorder=3, label=what, **kw)
    bars.lines[0].set_gid("imputed")
    bars.lines[2][0].set_gid("intervals")


def _strips(ax, z, missing, cols, z_sd, names, what):
    """One horizontal strip per column (first column on top): observed z-scores as jittered
    grey dots in its upper half, imputed ones with horizontal ±2 sd bars stacked evenly in
    its lower half (one level each, so no bar hides another)."""
    D = z.shape[1]
    jitter = np.random.default_rng(0).uniform(-0.35, -0.05, z.shape)
    seen = ~missing
    ax.scatter(z[seen], (np.arange(D) + jitter)[seen], s=3, color="0.6", edgecolors="none",
               label="observed", gid="observed", rasterized=True)
    per_column = np.bincount(cols, minlength=D)
    order = np.argsort(cols, kind="stable")
    level = np.empty(len(cols), dtype=int)               # each entry's rank in its column
    level[order] = np.arange(len(cols)) - np.searchsorted(cols[order], cols[order])
    _bars(ax, z[missing], cols + 0.05 + 0.35 * (level + 0.5) / per_column[cols], z_sd,
          vertical=False, what=what)
    step = -(-D // MAX_NAMED)                      # ceil: at most MAX_NAMED names
    ax.set_yticks(range(0, D, step), names[::step], fontsize=7)
    ax.set_ylim(D - 0.4, -0.6)
    ax.axvline(0.0, color="0.85", lw=0.8, zorder=0)
    beyond = _clip_range(ax, z[np.isfinite(z)])
    ax.set_xlabel("z-score of the column (observed mean 0, sd 1)"
                  + (f"\n{beyond} of {z.size} values beyond the axis; bars cut at its ends"
                     if beyond else ""))
    legend_outside(ax)


def _clip_range(ax, values, tail: float = 0.0025, least: float = 3.0) -> int:
    """Fit the x-axis to the values but their 0.25% tails on each side (never narrower than
    ±``least``): a near-constant column (an image's edge pixel) has z-scores in the tens and
    bars a hundred sd wide, which would squeeze every other column to a line.  Returns how
    many values lie beyond the axis."""
    low = min(-least, np.quantile(values, tail) - 0.5)
    high = max(least, np.quantile(values, 1.0 - tail) + 0.5)
    ax.set_xlim(low, high)
    return int(np.sum((values < low) | (values > high)))

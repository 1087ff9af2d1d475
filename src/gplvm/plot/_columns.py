"""Views over the output columns: imputed entries with predictive intervals (``impute`` and
``predict(return_var=True)``), and for models that group columns (``assignments_``, the
DP-GP-LVM's q(z_d) = Cat(φ_d), seed 001 §3) the column → group probabilities and each
column's relevance of every latent dimension (seed 001 Fig. 6)."""

from __future__ import annotations

import numpy as np

from gplvm.plot._axes import new_axes, require


def imputation(model, Y, X=None, truth=None, ax=None, offset=None):
    """The imputed entries of ``Y`` (``model.impute(Y)``) with ±2 sd predictive intervals.

    The intervals are ``model.predict(X, return_var=True)`` at the rows' latent means ``X``
    (default ``model.transform(Y)``; pass ``model.X_mean_`` for the training data): they leave
    out the uncertainty of the latents, and for models whose ``predict`` variance has no noise
    (the RFLVM) they are intervals of the mean.

    Args:
        model: a fitted model with ``impute`` and ``predict``.
        Y: (N, D) data with NaN entries.
        X: optional (N, Q) latent means of Y's rows.
        truth: optional (N, D) true values: drawn as imputed against true, with the diagonal;
            without it each entry is drawn at its column, observed entries in grey.
        ax: the Axes to draw on (default: a new figure, not registered with pyplot).
        offset: optional (N,) row offsets of a count model fitted with offsets, passed to
            ``model.impute`` (``predict`` takes none: the intervals' widths are those of a row
            at offset 0).

    Returns:
        The Axes; the errorbar's line of points (``gid='imputed'``) and its bars
        (``gid='intervals'``) have one entry per NaN of Y.
    """
    require(model, "predict", "imputation")
    Y = np.asarray(Y, dtype=float)
    missing = np.isnan(Y)
    if not missing.any():
        raise ValueError("Y has no missing (NaN) entries; there is nothing imputed to show")
    filled = np.asarray(model.impute(Y) if offset is None else model.impute(Y, offset=offset))
    X = model.transform(Y) if X is None else X
    _, var = model.predict(np.asarray(X), return_var=True)
    sd = np.sqrt(np.broadcast_to(np.asarray(var, dtype=float), Y.shape))[missing]
    rows, cols = np.nonzero(missing)
    ax = new_axes(ax)
    if truth is None:
        seen_rows, seen_cols = np.nonzero(~missing)
        ax.scatter(seen_cols, Y[~missing], s=4, color="0.7", label="observed", gid="observed")
        x = cols + 0.2
        ax.set_xlabel("column")
    else:
        x = np.asarray(truth, dtype=float)[missing]
        low, high = np.nanmin(x), np.nanmax(x)
        ax.plot([low, high], [low, high], color="grey", lw=0.8, ls="--")
        ax.set_xlabel("true value")
    bars = ax.errorbar(x, filled[missing], yerr=2 * sd, fmt="o", ms=3, lw=0.8,
                       color="tab:orange", label="imputed ± 2 sd")
    bars.lines[0].set_gid("imputed")
    bars.lines[2][0].set_gid("intervals")
    ax.set_ylabel("value")
    ax.legend(fontsize=7)
    ax.set_title(f"{type(model).__name__}: {missing.sum()} imputed entries", fontsize=9)
    return ax


def assignments(model, ax=None):
    """The probability that each output column follows each used group (``assignments_``,
    columns × ``atoms_``), as an image.

    Returns:
        The Axes; its image has one row per column and one column per used group.
    """
    phi = np.asarray(require(model, "assignments_", "assignments"), dtype=float)
    used = np.asarray(getattr(model, "atoms_", np.arange(phi.shape[1])))
    ax = new_axes(ax, figsize=(3.5, 5.0))
    ax.imshow(phi[:, used], aspect="auto", cmap="Greys", vmin=0.0, vmax=1.0,
              interpolation="nearest")
    ax.set_xticks(range(len(used)))
    ax.set_xlabel("group")
    ax.set_ylabel("output column")
    ax.set_title("P(column follows group)", fontsize=9)
    return ax


def column_relevance(model) -> np.ndarray:
    """(D, Q) each column's relevance of each latent dimension, Σ_g P(column in g) × the
    group's ``relevance_`` row over the used groups, scaled so each row's largest is 1."""
    phi = np.asarray(require(model, "assignments_", "factors"), dtype=float)
    rel = np.atleast_2d(np.asarray(model.relevance_, dtype=float))
    used = np.asarray(getattr(model, "atoms_", np.arange(rel.shape[0])))
    weights = phi[:, used] @ rel
    return weights / np.max(weights, axis=1, keepdims=True)


def factors(model, ax=None):
    """Output columns × latent dimensions shaded by each column's relevance
    (:func:`column_relevance`): which latent dimensions each column uses (seed 001 Fig. 6).

    Returns:
        The Axes; its image is :func:`column_relevance` (D rows, Q columns).
    """
    shade = column_relevance(model)
    ax = new_axes(ax, figsize=(3.5, 5.0))
    ax.imshow(shade, aspect="auto", cmap="Greys", vmin=0.0, vmax=1.0, interpolation="nearest")
    ax.set_xticks(range(shade.shape[1]))
    ax.set_xlabel("latent dimension")
    ax.set_ylabel("output column")
    ax.set_title(f"{type(model).__name__}: relevance per column", fontsize=9)
    return ax

"""The latent space of a fitted model: means coloured by label, with their uncertainty drawn as
±2 sd ellipses from ``X_var_`` (variational posteriors q(x_n) = N(μ_n, diag S_n), seed 001 §B)
or as a cloud of aligned posterior draws from ``X_samples_`` (MCMC, seed 000 §3)."""

from __future__ import annotations

import numpy as np

from gplvm.plot._axes import legend_outside, new_axes, require


def relevance_per_dimension(model) -> np.ndarray | None:
    """(Q,) ``relevance_``, or for a model with one row of relevances per column group (the
    DP-GP-LVM) their mean over the output columns, Σ_g n_g r_gq / Σ_g n_g with n_g = Σ_d φ_dg
    the expected number of columns in group g (``assignments_``; equal weights without it);
    None for a model without relevance."""
    rel = getattr(model, "relevance_", None)
    if rel is None:
        return None
    rel = np.atleast_2d(np.asarray(rel, dtype=float))
    phi = getattr(model, "assignments_", None)
    if phi is None or rel.shape[0] == 1:
        return rel.mean(axis=0)
    used = np.asarray(getattr(model, "atoms_", np.arange(rel.shape[0])))
    n_columns = np.asarray(phi, dtype=float)[:, used].sum(axis=0)
    return n_columns @ rel / n_columns.sum()


def most_relevant(model, n: int = 2) -> tuple[int, ...]:
    """The ``n`` latent dimensions with the largest :func:`relevance_per_dimension`, most
    relevant first; the first ``n`` for a model without relevance."""
    Q = int(np.shape(model.X_mean_)[1])
    score = relevance_per_dimension(model)
    if score is None:
        return tuple(range(min(n, Q)))
    return tuple(int(q) for q in np.argsort(-score, kind="stable")[:min(n, Q)])


def _categories(labels, n: int):
    """(names, index of each row's name), names sorted; ``None`` labels are one category."""
    if labels is None:
        return [None], np.zeros(n, dtype=int)
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise ValueError(f"labels has shape {labels.shape} but the model has {n} rows; give "
                         f"one label per training row")
    names, index = np.unique(labels.astype(str) if labels.dtype == object else labels,
                             return_inverse=True)
    return list(names), index


def _colours(k: int):
    from matplotlib import colormaps

    cmap = colormaps["tab10" if k <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(k)]


def latent(model, labels=None, dims=None, ax=None, n_draws: int = 20, s: float = 12.0,
           label_name: str | None = None):
    """Scatter the latent means in two dimensions with their uncertainty.

    Args:
        model: a fitted latent-variable model (``X_mean_``; ``X_samples_`` or ``X_var_``).
        labels: optional (N,) labels of the training rows; one colour and legend entry each.
        dims: the two latent dimensions to show (default :func:`most_relevant`: the most
            relevant on x); a model with one latent dimension is drawn against the row number.
        ax: the Axes to draw on (default: a new figure, not registered with pyplot).
        n_draws: MCMC models: the last ``n_draws`` draws of each chain form the cloud.
        s: marker size of the means.
        label_name: what the labels are (a column name such as ``'cultivar'``), for the
            title and the legend's title (default: the ``name`` of a pandas Series given as
            ``labels``, else "label").

    Returns:
        The Axes: one scatter of means per label (``gid='means'``), and a collection with
        ``gid='uncertainty'`` (ellipses, one per row) or ``gid='posterior draws'``; the
        legend, outside the data area, names the labels and says what the uncertainty is.
    """
    X = np.asarray(require(model, "X_mean_", "latent"), dtype=float)
    N, Q = X.shape
    dims = most_relevant(model, 2) if dims is None else tuple(int(d) for d in dims)
    if any(d < 0 or d >= Q for d in dims) or len(dims) not in (1, 2):
        raise ValueError(f"dims={dims} must be one or two latent dimensions in 0..{Q - 1}")
    label_name = label_name or (getattr(labels, "name", None) if labels is not None else None)
    names, index = _categories(labels, N)
    ax = new_axes(ax, figsize=(7.0, 4.5))
    colours = np.array(_colours(len(names)))
    xy = X[:, dims] if len(dims) == 2 else np.column_stack([X[:, dims[0]], np.arange(N)])
    caption = _draw_uncertainty(ax, model, xy, dims, colours[index], n_draws)
    for k, name in enumerate(names):
        rows = index == k
        ax.scatter(xy[rows, 0], xy[rows, 1], s=s, color=colours[k], edgecolors="none",
                   label="latent mean" if name is None else str(name), gid="means", zorder=3)
    handles, _ = ax.get_legend_handles_labels()
    legend_outside(ax, handles=handles + ([caption] if caption is not None else []),
                   title=None if labels is None else str(label_name or "label"),
                   markerscale=1.5, ncols=1 + len(names) // 16)
    ax.set_xlabel(dimension_label(model, dims[0]))
    ax.set_ylabel(dimension_label(model, dims[1]) if len(dims) == 2 else "row")
    coloured = "" if labels is None else f", coloured by {label_name or 'label'}"
    ax.set_title(f"{type(model).__name__}: latent means{coloured}", fontsize=9)
    return ax


def dimension_label(model, q: int) -> str:
    """``latent dimension q`` and, on a second line, its rank by relevance and its
    :func:`relevance_per_dimension` (the quantity of
    :func:`~gplvm.plot._diagnostics.relevance_quantity`, averaged over columns for a model
    with column groups), or a note that the model has no relevance."""
    from gplvm.plot._diagnostics import relevance_quantity

    score = relevance_per_dimension(model)
    if score is None:
        return f"latent dimension {q}\n(no relevance: {type(model).__name__})"
    rank = most_relevant(model, len(score)).index(q) + 1
    which = "most relevant" if rank == 1 else f"{_ordinal(rank)} most relevant"
    symbol = relevance_quantity(model)[0]
    grouped = np.ndim(model.relevance_) == 2 and np.shape(model.relevance_)[0] > 1
    mean = " (mean over columns)" if grouped else ""
    return f"latent dimension {q}\n{which}, {symbol}{mean} = {score[q]:.3g}"


def _ordinal(k: int) -> str:
    return f"{k}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(k if k < 20 else k % 10, 'th')}"


def _draw_uncertainty(ax, model, xy, dims, colours, n_draws):
    """Posterior draws (sampled models) or ±2 sd ellipses (variational ones) behind the
    means; returns a grey legend entry saying what they are (None when none is drawn)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from gplvm.plot._diagnostics import is_map_fit

    draws = getattr(model, "X_samples_", None)
    if draws is not None:
        chains, stored = np.shape(draws)[:2]
        kept = min(n_draws, stored)
        _draw_cloud(ax, np.asarray(draws), dims, colours, n_draws)
        what = (f"faint dots: each row at the\nmode of each of {chains} restarts"
                if is_map_fit(model) else
                f"faint dots: last {kept} draws\nof each of {chains} chains\n"
                f"per row (aligned frame)")
        return Line2D([], [], ls="", marker="o", ms=3, color="0.5", alpha=0.5, label=what)
    if getattr(model, "X_var_", None) is not None and len(dims) == 2:
        _draw_ellipses(ax, xy, np.asarray(model.X_var_)[:, dims], colours)
        return Patch(facecolor="0.5", alpha=0.3, label="shaded ellipses:\n±2 sd of q(x_n)")
    return None


def _draw_ellipses(ax, xy, var, colours):
    """±2 sd axis-aligned ellipses of q(x_n) = N(μ_n, diag S_n), one per row: semi-axes
    2·sqrt(S_nq) along each shown dimension."""
    from matplotlib.collections import EllipseCollection

    sd = np.sqrt(var)
    ellipses = EllipseCollection(4 * sd[:, 0], 4 * sd[:, 1], np.zeros(len(xy)), units="xy",
                                 offsets=xy, offset_transform=ax.transData,
                                 facecolors=colours, alpha=0.15, edgecolors="none",
                                 zorder=1)
    ellipses.set_gid("uncertainty")
    ax.add_collection(ellipses)
    pad = 2 * sd
    ax.update_datalim(np.vstack([xy - pad, xy + pad]))
    ax.autoscale_view()


def _draw_cloud(ax, samples, dims, colours, n_draws):
    """The last ``n_draws`` aligned draws of each chain, coloured as their row."""
    kept = samples[:, -n_draws:]                          # (chains, draws, N, Q)
    points = kept.reshape(-1, kept.shape[-2], kept.shape[-1])
    if len(dims) == 2:
        x, y = points[..., dims[0]], points[..., dims[1]]
    else:
        x = points[..., dims[0]]
        y = np.broadcast_to(np.arange(points.shape[1]), x.shape)
    cloud = ax.scatter(x.ravel(), y.ravel(), s=3, alpha=0.25, edgecolors="none",
                       color=np.tile(colours, (len(points), 1)), zorder=1)
    cloud.set_gid("posterior draws")

"""The latent space of a fitted model: means coloured by label, with their uncertainty drawn as
±2 sd ellipses from ``X_var_`` (variational posteriors q(x_n) = N(μ_n, diag S_n), seed 001 §B)
or as a cloud of aligned posterior draws from ``X_samples_`` (MCMC, seed 000 §3)."""

from __future__ import annotations

import numpy as np

from gplvm.plot._axes import new_axes, require


def most_relevant(model, n: int = 2) -> tuple[int, ...]:
    """The ``n`` latent dimensions with the largest ``relevance_`` (a model with one row of
    relevances per column group, such as the DP-GP-LVM, ranks each dimension by its largest
    relevance in any group relative to that group's largest); the first ``n`` without one."""
    Q = int(np.shape(model.X_mean_)[1])
    rel = getattr(model, "relevance_", None)
    if rel is None:
        return tuple(range(min(n, Q)))
    rel = np.atleast_2d(np.asarray(rel, dtype=float))
    score = np.max(rel / np.max(rel, axis=1, keepdims=True), axis=0)
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


def latent(model, labels=None, dims=None, ax=None, n_draws: int = 20, s: float = 12.0):
    """Scatter the latent means in two dimensions with their uncertainty.

    Args:
        model: a fitted latent-variable model (``X_mean_``; ``X_samples_`` or ``X_var_``).
        labels: optional (N,) labels of the training rows; one colour and legend entry each.
        dims: the two latent dimensions to show (default :func:`most_relevant`); a model with
            one latent dimension is drawn against the row number.
        ax: the Axes to draw on (default: a new figure, not registered with pyplot).
        n_draws: MCMC models: the last ``n_draws`` draws of each chain form the cloud.
        s: marker size of the means.

    Returns:
        The Axes: one scatter of means per label (``gid='means'``), and a collection with
        ``gid='uncertainty'`` (ellipses, one per row) or ``gid='posterior draws'``.
    """
    X = np.asarray(require(model, "X_mean_", "latent"), dtype=float)
    N, Q = X.shape
    dims = most_relevant(model, 2) if dims is None else tuple(int(d) for d in dims)
    if any(d < 0 or d >= Q for d in dims) or len(dims) not in (1, 2):
        raise ValueError(f"dims={dims} must be one or two latent dimensions in 0..{Q - 1}")
    ax = new_axes(ax)
    names, index = _categories(labels, N)
    colours = np.array(_colours(len(names)))
    xy = X[:, dims] if len(dims) == 2 else np.column_stack([X[:, dims[0]], np.arange(N)])
    draws = getattr(model, "X_samples_", None)
    if draws is not None:
        _draw_cloud(ax, np.asarray(draws), dims, colours[index], n_draws)
    elif getattr(model, "X_var_", None) is not None and len(dims) == 2:
        _draw_ellipses(ax, xy, np.asarray(model.X_var_)[:, dims], colours[index])
    for k, name in enumerate(names):
        rows = index == k
        ax.scatter(xy[rows, 0], xy[rows, 1], s=s, color=colours[k], edgecolors="none",
                   label=None if name is None else str(name), gid="means", zorder=3)
    if labels is not None:
        ax.legend(fontsize=7, markerscale=1.5, loc="best")
    ax.set_xlabel(f"latent dimension {dims[0]}")
    ax.set_ylabel(f"latent dimension {dims[1]}" if len(dims) == 2 else "row")
    ax.set_title(f"{type(model).__name__}: latent means", fontsize=9)
    return ax


def _draw_ellipses(ax, xy, var, colours):
    """±2 sd axis-aligned ellipses of q(x_n) (diagonal covariance), one per row."""
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

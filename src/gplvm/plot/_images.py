"""Imputed images beside the observed ones (issue 32, item 4): for images a strip per pixel
(:func:`gplvm.plot.imputation`, 560 strips for a Frey face) cannot be read, so images are
shown as pictures — the rows with the most missing pixels, observed above (missing pixels in
red), imputed below, on one grey scale."""

from __future__ import annotations

import numpy as np

#: images shown at most
N_IMAGES = 6


def imputed_images(Y, filled, n_images: int = N_IMAGES, title: str = "imputed images"):
    """Observed and imputed images of the ``n_images`` rows with the most missing pixels.

    Args:
        Y: (N, H, W) grey images, NaN at the missing pixels.
        filled: ``Y`` with its missing pixels imputed (e.g. ``model.impute(Y)``), same size.
        n_images: how many rows to show (fewer if Y has fewer rows with a missing pixel).
        title: the figure's title.

    Returns:
        (2, n) array of Axes of one new figure (not registered with pyplot): row 0 the
        observed images, row 1 the imputed ones.
    """
    import matplotlib
    from matplotlib.figure import Figure

    Y = np.asarray(Y, dtype=float)
    if Y.ndim != 3:
        raise ValueError(f"Y has shape {Y.shape}; imputed_images takes grey images (N, H, W) "
                         f"(use plot.imputation for tables)")
    filled = np.asarray(filled, dtype=float).reshape(Y.shape)
    missing = np.isnan(Y)
    per_row = missing.reshape(len(Y), -1).sum(axis=1)
    if not per_row.any():
        raise ValueError("Y has no missing (NaN) pixels; there is nothing imputed to show")
    rows = np.argsort(-per_row, kind="stable")[:min(n_images, int((per_row > 0).sum()))]
    low, high = np.nanmin(Y), np.nanmax(Y)
    fig = Figure(figsize=(1.5 * len(rows) + 1.2, 3.8), layout="constrained")
    axes = fig.subplots(2, len(rows), squeeze=False)
    observed_map = matplotlib.colormaps["gray"].with_extremes(bad="tab:red")
    for k, i in enumerate(rows):
        axes[0, k].imshow(np.ma.masked_invalid(Y[i]), cmap=observed_map, vmin=low, vmax=high)
        axes[1, k].imshow(filled[i], cmap="gray", vmin=low, vmax=high)
        axes[0, k].set_title(f"row {i}\n{per_row[i] / Y[i].size:.0%} missing", fontsize=8)
        for ax in axes[:, k]:
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0, 0].set_ylabel("observed\n(red: missing)")
    axes[1, 0].set_ylabel("imputed")
    fig.suptitle(f"{title}: the {len(rows)} rows with the most missing pixels", fontsize=10)
    return axes

"""The factorisation plot of the DP-GP-LVM (seed 001, Figure 6): one row per output column,
one column per latent dimension, shaded by the column's ARD weights (the shading of
:func:`gplvm.plot.factors`, :func:`gplvm.plot.column_relevance`)."""

from __future__ import annotations

import numpy as np


def plot_factorisation(model, ax=None, truth=None, order=None, title="DP-GP-LVM"):
    """Draw columns × latent dimensions shaded by each column's ARD weights.

    Args:
        model: a fitted :class:`~gplvm.DPGPLVM`.
        ax: a matplotlib axis (a new figure when None); with ``truth`` a pair of axes.
        truth: optional (D, Q) boolean or weights of the true factorisation, drawn beside.
        order: optional permutation of the latent dimensions for display.
        title: the title of the model's panel.

    Returns:
        The axis (or the pair of axes).
    """
    import matplotlib.pyplot as plt

    from gplvm.plot import column_relevance

    shade = column_relevance(model)
    if order is not None:
        shade = shade[:, order]
    panels = [(shade, title)] if truth is None else [(np.asarray(truth, float), "truth"),
                                                     (shade, title)]
    if ax is None:
        _, ax = plt.subplots(1, len(panels), figsize=(2.2 * len(panels) + 1, 5), squeeze=False)
        ax = ax[0] if len(panels) > 1 else ax[0, 0]
    axes = np.atleast_1d(ax)
    for a, (image, name) in zip(axes, panels):
        a.imshow(image, aspect="auto", cmap="Greys", vmin=0.0, vmax=1.0,
                 interpolation="nearest")
        a.set_xlabel("latent dimension")
        a.set_ylabel("output column")
        a.set_xticks(range(image.shape[1]))
        a.set_title(name)
    return ax

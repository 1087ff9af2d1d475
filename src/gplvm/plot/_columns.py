"""Views over the output columns of models that group them (``assignments_``, the
DP-GP-LVM's q(z_d) = Cat(φ_d), seed 001 §3): the column → group probabilities and each
column's relevance of every latent dimension (seed 001 Fig. 6); the imputed entries are in
:mod:`gplvm.plot._imputation`."""

from __future__ import annotations

import numpy as np

from gplvm.plot._axes import column_names, new_axes, require
from gplvm.plot._diagnostics import integer_ticks


def assignments(model, ax=None):
    """The probability that each output column follows each used group (``assignments_``,
    columns × ``atoms_``), as an image.

    Returns:
        The Axes; its image has one row per column and one column per used group.
    """
    phi = np.asarray(require(model, "assignments_", "assignments"), dtype=float)
    used = np.asarray(getattr(model, "atoms_", np.arange(phi.shape[1])))
    ax = new_axes(ax, figsize=_column_figsize(phi.shape[0]))
    image = ax.imshow(phi[:, used], aspect="auto", cmap="Greys", vmin=0.0, vmax=1.0,
                      interpolation="nearest")
    integer_ticks(ax.xaxis, len(used))
    ax.set_xlabel("group")
    _name_rows(ax, model, phi.shape[0])
    ax.figure.colorbar(image, ax=ax, label="P(column follows group)", shrink=0.8)
    ax.set_title(f"{type(model).__name__}: column → group", fontsize=9)
    return ax


def _column_figsize(D: int) -> tuple[float, float]:
    return 4.5, min(10.0, max(3.5, 1.2 + 0.22 * D))


def _name_rows(ax, model, D: int) -> None:
    """Rows of an image named by the output columns (at most 40 names written)."""
    names = column_names(model, D)
    step = -(-D // 40)
    ax.set_yticks(range(0, D, step), names[::step], fontsize=7)
    ax.set_ylabel("output column")


def column_relevance(model) -> np.ndarray:
    """(D, Q) each column's relevance of each latent dimension, Σ_g P(column in g) × the
    group's ``relevance_`` row over the used groups, scaled so each row's largest is 1; 0
    for a column kept out of the fit (``dropped_columns_``: it follows no group)."""
    phi = np.asarray(require(model, "assignments_", "factors"), dtype=float)
    rel = np.atleast_2d(np.asarray(model.relevance_, dtype=float))
    used = np.asarray(getattr(model, "atoms_", np.arange(rel.shape[0])))
    weights = phi[:, used] @ rel
    largest = np.max(weights, axis=1, keepdims=True)
    return np.where(largest > 0, weights / np.where(largest > 0, largest, 1.0), 0.0)


def factors(model, ax=None):
    """Output columns × latent dimensions shaded by each column's relevance
    (:func:`column_relevance`): which latent dimensions each column uses (seed 001 Fig. 6).

    Returns:
        The Axes; its image is :func:`column_relevance` (D rows, Q columns).
    """
    shade = column_relevance(model)
    ax = new_axes(ax, figsize=_column_figsize(shade.shape[0]))
    image = ax.imshow(shade, aspect="auto", cmap="Greys", vmin=0.0, vmax=1.0,
                      interpolation="nearest")
    integer_ticks(ax.xaxis, shade.shape[1])
    ax.set_xlabel("latent dimension")
    _name_rows(ax, model, shade.shape[0])
    ax.figure.colorbar(image, ax=ax, shrink=0.8,
                       label="Σ_g P(column in g) · 1/ℓ²_g\n(relative to the column's largest)")
    ax.set_title(f"{type(model).__name__}: relevance per column", fontsize=9)
    return ax

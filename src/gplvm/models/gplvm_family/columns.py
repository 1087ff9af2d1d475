"""Columns kept out of a fit and put back on output (issue 32; docs/contract.md, "Columns kept
out of the fit").

A column whose observed entries are all equal, or that has none
(:func:`gplvm._validation.uninformative_columns`), says nothing about the latent points.  The
family's estimators fit the other columns and widen the fitted value to all D columns, with
the dropped ones coded in the standardisation itself:

* a constant column c: ``Y_mean = c``, ``Y_std = 0``;
* a column with no observed entry: ``Y_mean = Y_std = NaN``;

and a zero column in the map (V = 0; DP-GP-LVM: no atom, φ_d = 0).  Every prediction is then
``(standardised value) · Y_std + Y_mean``, which is exactly c with variance 0 for a constant
column and NaN for an empty one, through the same code as the fitted columns; a file holds
the widened value, so a loaded model predicts the same.  ``Y_std > 0`` marks the fitted columns
(:func:`kept_columns`; every column of a model fitted or saved before issue 32).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from gplvm._validation import kept_columns, standardise_kept  # noqa: F401 (re-exported)
from gplvm.models.gplvm_family.fitted import FittedGPLVM
from gplvm.objectives.new_rows import FittedMap


def standardise_all(Y, Y_mean, Y_std) -> np.ndarray:
    """Every column of Y standardised, (N, D), the dropped ones NaN (missing: the fitted value
    has no information on them to condition new rows on)."""
    kept = kept_columns(Y_std)
    if kept.all():
        return (Y - Y_mean) / Y_std
    with np.errstate(invalid="ignore", divide="ignore"):
        Ys = (Y - Y_mean) / Y_std
    Ys[:, ~kept] = np.nan
    return Ys


def widen(a, kept: np.ndarray, fill=0):
    """``a`` with its last axis (the fitted columns) widened to all D columns, ``fill`` at the
    dropped ones."""
    a = jnp.asarray(a)
    out = jnp.full(a.shape[:-1] + (len(kept),), fill, dtype=a.dtype)
    return out.at[..., np.flatnonzero(kept)].set(a)


def widen_map(fmap: FittedMap, kept: np.ndarray) -> FittedMap:
    """A :class:`FittedMap` of the fitted columns widened to all D columns (zero columns of V,
    group 0, at the dropped ones)."""
    return fmap._replace(V=widen(fmap.V, kept), column_group=widen(fmap.column_group, kept))


def put_back(fitted, Y_mean, Y_std):
    """A fitted value of the kept columns widened to all columns, with the full
    standardisation ``Y_mean``, ``Y_std`` (D,) coding the dropped ones (module docstring).
    Returned unchanged when no column was dropped.

    A :class:`FittedGPLVM` is widened here; a variant's fitted value widens itself, by its
    method ``widened(kept, Y_mean, Y_std)`` (e.g. the DP-GP-LVM's ``FittedDPGPLVM.widened``),
    so that this core module knows no variant."""
    kept = kept_columns(Y_std)
    if kept.all():
        return fitted
    Y_mean, Y_std = np.asarray(Y_mean), np.asarray(Y_std)
    if isinstance(fitted, FittedGPLVM):
        return fitted._replace(map=widen_map(fitted.map, kept), Y_mean=Y_mean, Y_std=Y_std)
    if hasattr(fitted, "widened"):
        return fitted.widened(kept, Y_mean, Y_std)
    raise TypeError(f"no columns to put back into {type(fitted).__name__}")

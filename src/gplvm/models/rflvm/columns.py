"""Columns of Y the RFLVM keeps out of its fit and puts back on output (issue 32;
docs/contract.md, "Columns kept out of the fit"), the GPLVM family's rule
(:mod:`gplvm.models.gplvm_family.columns`) for the likelihoods where it applies:

* Gaussian: a column whose observed entries are all equal, or that has none
  (:func:`gplvm._validation.uninformative_columns`): its likelihood does not depend on X and
  standardising it divides by 0;
* Poisson, negative binomial, binomial, Bernoulli: a column with no observed entry only.  A
  constant count column (all zeros, say) is data: it pins its intercept (and the negative
  binomial's dispersion) and stays in the fit;
* multinomial: none (a category never observed is refused in :mod:`.checks`: the multinomial
  leaves out every row with a missing category, so no row would be left).

The sampler sees the kept columns only (the spec, the data and the draws are those of the fit
on them alone).  The dropped ones are coded in the standardisation of all D columns, as in the
family: a constant column c has ``mean_ = c``, ``scale_ = 0``; a never-observed column has
``mean_ = scale_ = NaN``; so every output ``(value) · scale_ + mean_``, with the value of a
dropped column set to 0 (:func:`widen`), is exactly c with variance 0, or NaN.  ``scale_ > 0``
marks the kept columns (every column of a model fitted or saved before issue 32), so a file
needs no new entry and a loaded model predicts the same.
"""

from __future__ import annotations

import numpy as np

from gplvm.likelihoods import likelihood_class
from gplvm._validation import (column_standardisation, dropped_columns_notice,
                               standardise_kept, uninformative_columns)


def dropped_columns(kind: str, Y: np.ndarray) -> np.ndarray:
    """(D,) True for the columns of ``Y`` a fit with likelihood ``kind`` keeps out (module
    docstring)."""
    if likelihood_class(kind).conjugate_normal:     # no intercept: a constant says nothing
        return uninformative_columns(Y)
    return np.isnan(Y).all(axis=0)


def standardise_fit(Y: np.ndarray, kind: str, standardize: bool, dropped=None):
    """``(Y_mean_, Y_std_, Ys)``: the standardisation of all D columns (centring and scaling
    only for the Gaussian with ``standardize``), the ``dropped`` ones coded in it (module
    docstring), with the one-line notice naming them; ``Ys`` the kept columns standardised,
    what the sampler reads.  In the float32 mode (gplvm.config) predictions in original units
    are float32 too."""
    dropped = np.zeros(Y.shape[1], bool) if dropped is None else dropped
    if dropped.any():
        dropped_columns_notice("RFLVM", Y, dropped)
    Y_mean, Y_std = column_standardisation(
        Y, dropped, likelihood_class(kind).conjugate_normal and standardize)
    return Y_mean, Y_std, standardise_kept(Y, Y_mean, Y_std)


def narrow(a, n_columns: int, kept: np.ndarray):
    """``a``'s kept columns when its last axis runs over all ``n_columns`` columns of Y (a
    binomial's numbers of trials per column); unchanged otherwise (a scalar, one column)."""
    if a is None or kept.all() or np.ndim(a) == 0 or np.shape(a)[-1] != n_columns:
        return a
    return np.asarray(a)[..., kept]


def widen(a, kept: np.ndarray, fill: float = 0.0) -> np.ndarray:
    """``a`` with its last axis (the kept columns) widened to all D columns, ``fill`` at the
    dropped ones (0: then ``· scale_ + mean_`` gives the dropped column's code)."""
    a = np.asarray(a)
    if kept.all():
        return a
    out = np.full(a.shape[:-1] + (len(kept),), fill, dtype=a.dtype)
    out[..., kept] = a
    return out

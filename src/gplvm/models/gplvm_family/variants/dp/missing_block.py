"""The missing-data protocol of seed 001 §G.

The rows are permuted, and the columns permuted in groups of ``pair`` (so that the x and y of a
2-D point stay together); the first rows are the training set, complete; in each remaining
(test) row the last ``n_missing`` column groups are removed — one block.  The model is fitted on
the training rows; each test row's q(x*) is inferred from its observed columns with the model
fixed; the predictive mean and covariance of the missing block under q(x*) give the
log-likelihood of the true values.  Given x*, the columns are independent (their q(u_d) are),
so with the moment-matched Gaussian of :func:`.dp_fitted.predict_uncertain` per entry the
block's covariance is diagonal.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.stats import norm

from gplvm._validation import as_2d_float
from gplvm.models._common import check_is_fitted
from gplvm.models.gplvm_family.variants.dp import dp_fitted
from gplvm.models.gplvm_family.variants.dp.dp_fitted import FittedDPGPLVM, predict_uncertain


class MissingBlockSplit(NamedTuple):
    """Y_train (N − n_test, D) complete; Y_test (n_test, D) with the block set to NaN;
    Y_truth (n_test, D) complete; missing (D,) the removed columns (original column order)."""

    Y_train: np.ndarray
    Y_test: np.ndarray
    Y_truth: np.ndarray
    missing: np.ndarray


def missing_block_split(Y, n_test: int, n_missing: int, random_state=0,
                        pair: int = 2) -> MissingBlockSplit:
    """Permute rows and column groups of size ``pair`` and remove a block (module docstring).

    Args:
        Y: (N, D) complete data, D a multiple of ``pair``.
        n_test: test rows.
        n_missing: column groups removed from every test row.
        random_state: seed of the permutations.
        pair: columns that move together (2 for (x, y) coordinates, 1 for none).
    """
    Y = np.asarray(Y, dtype=float)
    N, D = Y.shape
    if np.isnan(Y).any():
        raise ValueError("the protocol starts from complete data; Y has NaN entries")
    if D % pair:
        raise ValueError(f"Y has {D} columns, not a multiple of pair={pair}")
    n_groups = D // pair
    if not (0 < n_test < N and 0 < n_missing < n_groups):
        raise ValueError(f"need 0 < n_test < {N} and 0 < n_missing < {n_groups}; got "
                         f"n_test={n_test}, n_missing={n_missing}")
    rng = np.random.default_rng(random_state)
    rows = rng.permutation(N)
    column_groups = rng.permutation(n_groups)
    missing = np.zeros(D, dtype=bool)
    for g in column_groups[n_groups - n_missing:]:
        missing[g * pair:(g + 1) * pair] = True
    train, test = rows[:N - n_test], rows[N - n_test:]
    Y_test = Y[test].copy()
    Y_test[:, missing] = np.nan
    return MissingBlockSplit(Y[train], Y_test, Y[test], missing)


def block_log_likelihood(fitted: FittedDPGPLVM, X_mean, X_var, Y_test, Y_truth):
    """Σ over the missing entries of log N(y_true; m, v), (m, v) the predictive moments under
    q(x*) = N(X_mean, diag X_var); also returns (m, v) of every entry."""
    mean, var = predict_uncertain(fitted, X_mean, X_var)
    missing = np.isnan(Y_test)
    value = float(np.sum(norm.logpdf(Y_truth[missing], mean[missing], np.sqrt(var[missing]))))
    return value, mean, var


def missing_data_log_likelihood(model, Y_test, Y_truth):
    """Seed 001 §G's score of a fitted DPGPLVM or BayesianGPLVM on test rows with a missing
    block: q(x*) of each row from its observed columns (``transform``, model fixed), then the
    log-likelihood of the true missing values under the predictive mean and (diagonal)
    covariance at q(x*) (:mod:`gplvm.models.gplvm_family.variants.dp.missing_block`).

    Args:
        model: a fitted :class:`DPGPLVM` or :class:`~gplvm.BayesianGPLVM`.
        Y_test: (N*, D) rows with NaN in the missing block.
        Y_truth: (N*, D) the same rows complete.

    Returns:
        (log-likelihood summed over the missing entries, predictive mean, predictive variance).
    """
    check_is_fitted(model, "fitted_")
    Y_test, Y_truth = as_2d_float(Y_test, "Y_test", allow_nan=True), as_2d_float(Y_truth,
                                                                                "Y_truth")
    if Y_test.shape != Y_truth.shape:
        raise ValueError(f"Y_test {Y_test.shape} and Y_truth {Y_truth.shape} must be the same "
                         f"rows")
    fitted = model.fitted_
    if not isinstance(fitted, dp_fitted.FittedDPGPLVM):
        fitted = dp_fitted.from_single(fitted)
    X_mean, X_var = model.transform(Y_test, return_var=True)
    return block_log_likelihood(fitted, X_mean, X_var, Y_test, Y_truth)

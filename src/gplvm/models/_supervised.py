"""Input checks and scikit-learn tags shared by the supervised models (X observed).

``BayesianLinearRegression`` and ``BayesianGLM`` take X and y as scikit-learn's estimators do:
:func:`sklearn.utils.validation.validate_data` turns lists, data frames and read-only or
Fortran-ordered arrays into arrays, refuses complex, sparse and string input with its own
messages, checks the number (and names) of the columns against the fitted ones, and sets
``n_features_in_`` (and ``feature_names_in_`` for a data frame).  Then gplvm's own check names
the rows and columns of any non-finite entry (neither model accepts missing values).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import validate_data

from gplvm._validation import as_1d_float, as_2d_float


def fit_inputs(estimator, X, y, *, numeric_y: bool = True):
    """X as a finite float64 (N, D) array with N ≥ 2, and y as a 1-D array of N targets.

    Args:
        estimator: the estimator being fitted (gets ``n_features_in_``).
        X, y: the training data as given.
        numeric_y: y must be finite numbers (regression); ``False`` keeps class labels as
            given (strings allowed) for a classifier.
    """
    X, y = validate_data(estimator, X, y, reset=True, dtype=np.float64,
                         ensure_all_finite=False, ensure_min_samples=2, y_numeric=numeric_y)
    X = as_2d_float(X, "X")
    return X, (as_1d_float(y, "y") if numeric_y else np.asarray(y))


def query_inputs(estimator, X) -> np.ndarray:
    """Query points as a finite float64 array with the fitted number of columns."""
    X = validate_data(estimator, X, reset=False, dtype=np.float64, ensure_all_finite=False)
    return as_2d_float(X, "X")


def no_missing_values(tags):
    """Tags of a supervised model that needs y and refuses NaN (it has no missing-data model)."""
    tags.input_tags.allow_nan = False
    tags.target_tags.required = True
    return tags


def warn_not_converged(model_name: str, what: str, fix: str) -> None:
    """scikit-learn's ``ConvergenceWarning`` for an optimiser stopped at its iteration limit."""
    warnings.warn(f"{model_name}: {what}; {fix}", ConvergenceWarning, stacklevel=3)

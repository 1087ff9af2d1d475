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

from gplvm._validation import (
    as_1d, as_1d_float, as_2d_float, check_consistent_length, check_magnitude,
)


#: what to do about features too large for the random features
_SCALE_X = ("standardise X (e.g. sklearn.preprocessing.StandardScaler) before fitting; random "
            "features of such values are meaningless")


def fit_inputs(estimator, X, y, *, numeric_y: bool = True):
    """X as a finite float64 (N, D) array with N ≥ 2, and y as a 1-D array of N targets.

    gplvm's own checks run first (after the estimator's ``check_params``), so every refusal
    names X or y and the fix; then
    scikit-learn's ``validate_data`` records ``n_features_in_`` (and column names).

    Args:
        estimator: the estimator being fitted (gets ``n_features_in_``).
        X, y: the training data as given.
        numeric_y: y must be finite numbers (regression); ``False`` keeps class labels as
            given (strings allowed) for a classifier.
    """
    X_checked = as_2d_float(X, "X", min_rows=2)
    check_magnitude(X_checked, "X", _SCALE_X)
    if y is None:
        raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the "
                         f"target y is None; pass the targets, fit(X, y)")
    if numeric_y:
        y_checked = as_1d_float(y, "y")
        check_magnitude(y_checked, "y", "rescale y (e.g. divide it by its largest entry)")
    else:
        y_checked = as_1d(y, "y")
    check_consistent_length(X_checked, y_checked)
    X, y = validate_data(estimator, X, y, reset=True, dtype=np.float64,
                         ensure_all_finite=False, ensure_min_samples=2, y_numeric=numeric_y)
    return X_checked, (y_checked if numeric_y else np.asarray(y))


def query_inputs(estimator, X) -> np.ndarray:
    """Query points as a finite float64 array with the fitted number of columns."""
    X_checked = as_2d_float(X, "X")
    check_magnitude(X_checked, "X", _SCALE_X)
    validate_data(estimator, X, reset=False, dtype=np.float64, ensure_all_finite=False)
    return X_checked


def no_missing_values(tags):
    """Tags of a supervised model that needs y and refuses NaN (it has no missing-data model)."""
    tags.input_tags.allow_nan = False
    tags.target_tags.required = True
    return tags


def warn_not_converged(model_name: str, what: str, fix: str) -> None:
    """scikit-learn's ``ConvergenceWarning`` for an optimiser stopped at its iteration limit."""
    warnings.warn(f"{model_name}: {what}; {fix}", ConvergenceWarning, stacklevel=3)


def central_interval(model, X, coverage: float):
    """The central predictive interval (lower, upper) of ``model`` at X with the given
    coverage c: its (1 − c)/2 and (1 + c)/2 quantiles (``model.predict_quantile``)."""
    if not 0.0 < coverage < 1.0:
        raise ValueError(f"coverage={coverage} must lie strictly between 0 and 1")
    a = (1.0 - coverage) / 2.0
    bounds = model.predict_quantile(X, [a, 1.0 - a])
    return bounds[:, 0], bounds[:, 1]


class SupervisedResume:
    """``resume()`` of the supervised estimators (GLM, Bayesian linear regression): that of
    :class:`~gplvm.models._checkpoint.ResumableMixin` (listed after this class), then the fit's
    warning when the finished run has not settled (the estimator's ``_unsettled()``: None, or
    the arguments of :func:`warn_not_converged`), raised here as ``fit`` raises it."""

    def resume(self, Y=None):
        """Finish an interrupted (or checkpointed) fit from its stored state (the optimiser's
        state of the run in progress, then whatever the fit had still to run): the result
        equals an uninterrupted fit's bit for bit.  ``Y``: every estimator's ``resume`` takes
        it; these fits keep their data, so leave it None.  Warns as ``fit`` when the finished
        run has not settled."""
        resuming = self._resumable()
        super().resume(Y)
        if resuming and self._unsettled():
            warn_not_converged(*self._unsettled())
        return self

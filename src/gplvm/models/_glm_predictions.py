"""The Bayesian GLM's predictions (seed 002 eqs. 28–31): labels or the predictive expectation
and standard deviation, class (trial) probabilities, quantiles and central intervals by root
finding on the predictive CDF, scikit-learn's score and the mean log predictive density — a
mixin of :class:`gplvm.BayesianGLM`, the numbers made in :mod:`gplvm.models._glm_core`.
Which of them a model offers follows from its likelihood (scikit-learn's ``available_if``).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils.metaestimators import available_if

from gplvm.likelihoods import AbstractLikelihood, get_likelihood
from gplvm.models import _glm_core as core
from gplvm.models._common import check_is_fitted, in_model_precision
from gplvm.models._rows import map_rows
from gplvm.models._supervised import central_interval, query_inputs


def is_binary(lik) -> bool:
    """One Bernoulli outcome per sample: the Bernoulli likelihood or a binomial of one trial."""
    return lik.name == "bernoulli" or (lik.name == "binomial" and np.ndim(lik.n_trials) == 0
                                       and float(lik.n_trials) == 1.0)


def declared_likelihood(model):
    """The likelihood the parameters name, or None when they name none (``fit`` says why)."""
    if not isinstance(model.likelihood, (str, AbstractLikelihood)):
        return None
    try:
        return get_likelihood(model.likelihood)
    except ValueError:
        return None


def is_classifier(model) -> bool:
    lik = declared_likelihood(model)
    return lik is not None and is_binary(lik)


def has_trial_probability(model) -> bool:
    lik = declared_likelihood(model)
    return lik is not None and lik.name in ("bernoulli", "binomial")


def is_regressor(model) -> bool:
    return not is_classifier(model)


class GLMPredictions:
    """The prediction verbs of a fitted ``BayesianGLM`` (it has ``weights_mean_``,
    ``weights_var_``, ``features_``, ``likelihood_``, ``y_mean_``, ``classes_`` for a
    classifier, ``_predict_key`` and ``n_predict_samples``)."""

    def _fitted_classifier(self) -> bool:
        check_is_fitted(self, "weights_mean_")
        return is_binary(self.likelihood_)

    def _predictive(self, X):
        """The checked query and the fitted :class:`~gplvm.models._glm_core.Predictive`."""
        check_is_fitted(self, "weights_mean_")
        X = query_inputs(self, X)
        return X, core.predictive(self._predict_key, self.features_, self.weights_mean_,
                                  self.weights_var_, self.y_mean_, int(self.n_predict_samples))

    @in_model_precision
    def predict(self, X, return_std: bool = False):
        """Classifier: the most probable label.  Regressor: the predictive expectation E[y*]
        (eq. 29); ``return_std`` adds the predictive standard deviation (law of total variance
        over the draws of f*).  Each row's output depends on that row only."""
        if self._fitted_classifier():
            if return_std:
                raise ValueError("this BayesianGLM is a classifier: predict returns labels and "
                                 "has no standard deviation; use predict_proba")
            return self.classes_[np.argmax(self._trial_probabilities(X), axis=1)]
        X, pred = self._predictive(X)
        mean, var = map_rows(core.moments, X, pred, self.likelihood_)
        return (mean, np.sqrt(var)) if return_std else mean

    @available_if(has_trial_probability)
    @in_model_precision
    def predict_proba(self, X):
        """Classifier: the class probabilities (N*, 2) in the order of ``classes_``.  Binomial
        count model: [1 − p, p], the outcome probabilities of one trial (p = E[σ(f*)])."""
        return self._trial_probabilities(X)

    def _trial_probabilities(self, X):
        X, pred = self._predictive(X)
        p1 = map_rows(core.success_probability, X, pred)
        return np.column_stack([1.0 - p1, p1])

    @available_if(is_regressor)
    @in_model_precision
    def predict_quantile(self, X, q):
        """The q-quantile(s) of the predictive distribution by root finding (eqs. 30–31).

        Args:
            X: query inputs (N*, D).
            q: a level in (0, 1) or a sequence of levels.

        Returns:
            (N*,) for a scalar ``q``, else (N*, len(q)).  For count likelihoods the quantile is
            min{y : P(y* ≤ y) ≥ q} (a step CDF has no root).
        """
        levels = np.atleast_1d(np.asarray(q, dtype=float))
        if levels.ndim != 1 or not np.all((levels > 0) & (levels < 1)):
            raise ValueError(f"q={q!r}: quantile levels must lie strictly between 0 and 1")
        X, pred = self._predictive(X)
        out = map_rows(core.quantiles, X, pred, self.likelihood_, jnp.asarray(levels))
        return out[:, 0] if np.ndim(q) == 0 else out

    @available_if(is_regressor)
    @in_model_precision
    def predict_interval(self, X, coverage: float = 0.9):
        """The central predictive interval (lower, upper) with the given coverage: the
        (1 − c)/2 and (1 + c)/2 quantiles."""
        return central_interval(self, X, coverage)

    @in_model_precision
    def score(self, X, y, sample_weight=None):
        """scikit-learn's score: the accuracy of a classifier, R² of a regressor."""
        if self._fitted_classifier():
            return float(accuracy_score(y, self.predict(X), sample_weight=sample_weight))
        return float(r2_score(y, self.predict(X), sample_weight=sample_weight))

    @in_model_precision
    def log_predictive_density(self, X, y):
        """Mean log predictive density of y under the Monte Carlo predictive (eq. 28), in y's
        units (labels of ``classes_`` for a classifier)."""
        X, pred = self._predictive(X)
        y = self._observed(y, X.shape[0])
        return float(np.mean(map_rows(core.log_density, (X, y), pred, self.likelihood_)))

    def _observed(self, y, n_rows):
        """Held-out targets as the likelihood's numbers (0/1 codes of the labels)."""
        y = np.asarray(y)
        if y.ndim != 1 or len(y) != n_rows:
            raise ValueError(f"y must be 1-D with one target per row of X ({n_rows}); got "
                             f"shape {y.shape}")
        if hasattr(self, "classes_"):
            unknown = ~np.isin(y, self.classes_)
            if unknown.any():
                raise ValueError(f"y has labels {np.unique(y[unknown])[:5].tolist()} that are "
                                 f"not among the fitted classes {self.classes_.tolist()}")
            y = np.searchsorted(self.classes_, y).astype(float)
        y = np.asarray(y, dtype=float)
        self.likelihood_.validate(y[:, None], name="y")
        return y

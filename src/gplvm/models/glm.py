"""``BayesianGLM``: revrand's GeneralizedLinearModel (seed 002 §1.3) on any feature map.

Posterior over the weights: a mixture of K diagonal Gaussians (eq. 21), fitted by maximising
the stochastic bound of :mod:`gplvm.objectives.glm` with Adam over minibatches (eqs. 5–6, 25–27),
jointly with the weight-prior variances, the likelihood's parameters and the basis
hyper-parameters.  Predictions integrate over q(w) by Monte Carlo: the expectation of eq. 29,
class probabilities, and quantiles / intervals by root finding on the predictive CDF
(eqs. 30–31).  The numbers are made in :mod:`gplvm.models._glm_core`; this module checks,
chooses and stores.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._tags import ClassifierTags, RegressorTags
from sklearn.utils.multiclass import check_classification_targets

from gplvm._params import (CHECKPOINT, FEATURES, FLAG, LIKELIHOOD, NON_NEGATIVE, POSITIVE,
                          POSITIVE_INT, RANDOM_STATE, check_params, optional)
from gplvm._pytree import replace
from gplvm._random import as_key
from gplvm._validation import check_counts
from gplvm.features import AbstractFeatureMap
from gplvm.inference import minimise
from gplvm.io import SaveMixin
from gplvm.io.legacy import upgrade_glm
from gplvm.likelihoods import get_likelihood
from gplvm.models import _glm_core as core
from gplvm.models._checkpoint import ResumableMixin, holding_checkpoint
from gplvm.models._glm_predictions import GLMPredictions, is_binary, is_classifier
from gplvm.models._common import check_features, default_features
from gplvm.models.fit_state import GLMFitState
from gplvm.models._supervised import (SupervisedResume, fit_inputs, no_missing_values,
                                      warn_not_converged)
from gplvm.registry import register
from gplvm.transforms import softplus

_SUPPORTED = ("gaussian", "bernoulli", "binomial", "poisson", "negative_binomial")


@register("gplvm.BayesianGLM", estimator=True)
class BayesianGLM(GLMPredictions, SupervisedResume, ResumableMixin, SaveMixin, BaseEstimator):
    """Bayesian generalised linear model on random features, by stochastic variational inference.

    **Classifier or regressor, by likelihood.**  With ``"bernoulli"`` (or a binomial of one
    trial) the model is a scikit-learn binary classifier: ``fit`` takes any two distinct labels
    (strings too) and stores them in ``classes_``, ``predict`` returns labels,
    ``predict_proba`` the (N*, 2) class probabilities, ``score`` the accuracy, and scikit-learn
    treats it as a classifier (stratified folds, ``scoring="accuracy"``).  With the other
    likelihoods it is a regressor: ``predict`` returns E[y*] (``return_std`` adds the predictive
    standard deviation), ``predict_quantile``/``predict_interval`` give predictive quantiles,
    and ``score`` is R², as for scikit-learn's regressors (and ``BayesianLinearRegression``).
    Methods that make no sense for the likelihood are absent (``AttributeError``), e.g.
    ``predict_proba`` of a Gaussian model.  The mean log predictive density (eq. 28), a proper
    scoring rule for any likelihood, is :meth:`log_predictive_density`.

    Args:
        likelihood: ``"gaussian"``, ``"bernoulli"``, ``"binomial"``, ``"poisson"``,
            ``"negative_binomial"`` (any case) or a likelihood object, e.g.
            ``Binomial(n_trials=10)`` (a scalar number of trials) or ``Gaussian(noise_var=0.5)``.
            An object's parameters are initial values, in y's units, and are learned; a name
            starts the Gaussian noise variance at Var(y) (at 1 without ``standardize``).
        features: a feature map from :mod:`gplvm.features` (or a composition, which gets one
            prior variance per block); ``None`` builds random Fourier features of an RBF kernel
            whose length-scale(s) start at the median pairwise distance of X and are learned.
        n_mixture: K, the number of diagonal Gaussians in q(w) (eq. 21).
        n_features: the number of features of the default map.
        ard: one length-scale per input column for the default map (the bound then decides how
            much each input matters); ``False`` for a single one.
        n_samples: L, reparameterised draws per data point and component and step (eq. 25).
        batch_size: minibatch size B (eqs. 5–6); ``None`` uses min(N, 256).
        n_iter: Adam steps.
        learning_rate: Adam's initial step size; it decays along a cosine to 1/20 of itself
            over ``n_iter`` steps, so the last iterates average out the gradient noise.
        prior_var: initial weight-prior variance (one per basis block, learned).  With a
            feature map of unit kernel variance it is the prior variance of f = φᵀw (in the
            units of the standardised y for the Gaussian likelihood).
        n_predict_samples: S, draws of f* per query point for predictions (eqs. 29–30).
        standardize: Gaussian likelihood only: fit to y centred and scaled to unit variance,
            so that the fit does not depend on y's location and scale (API.md); every fitted
            attribute and prediction is in y's units.  Other likelihoods model y as it is.
        random_state: seed (int or ``jax.random`` key) for the features, the initialisation,
            the minibatches and the prediction draws.
        progress: show a progress bar with the (negative) bound.
        checkpoint: a file path: the model is saved there (:meth:`save`) after an Adam step at
            most every ``checkpoint_interval`` seconds and when the run ends or is interrupted
            (Ctrl-C), so a killed process loses at most that much work;
            ``gplvm.load(path).resume()`` finishes the run with exactly the iterates, history
            and predictions of an uninterrupted one (the Adam state and the PRNG key are in
            the file).  A file written mid-run holds the training data and has
            ``interrupted_`` set; a finished fit's keeps neither.
        checkpoint_interval: seconds between checkpoint writes (0: after every step).

    The defaults (ARD, 1000 Adam steps from 0.04 with a cosine decay, q(w) started at a
    diagonal Laplace approximation, 400 features) were chosen on a validation split of the
    training part of digits 3 vs 5, by the bound and the validation log-loss.

    Attributes:
        features_, likelihood_ (noise variance in y's units), prior_var_ (per block),
        weights_mean_ (K, M), weights_var_ (K, M) (all in y's units), y_mean_, y_std_ (the
        standardisation; 0 and 1 without it), classes_ (classifiers), history_ (negative bound
        per step), n_iter_, converged_ (see :func:`gplvm.models._glm_core.bound_settled`),
        interrupted_ (Ctrl-C stopped the fit early), n_features_in_.
    """

    #: the fitted value, what a file holds (docs/contract.md); ``_predict_key``, the key of the
    #: predictions' Monte Carlo draws, is kept: random_state=None would not give it again
    _fitted_fields = ("n_features_in_", "feature_names_in_", "classes_", "y_mean_", "y_std_",
                      "_predict_key", "features_", "likelihood_", "prior_var_", "weights_mean_",
                      "weights_var_", "history_", "n_iter_", "interrupted_", "converged_")
    _optional_fields = ("feature_names_in_", "classes_")   # a data frame's; a classifier's
    _fitted_attribute = _precision_attribute = "weights_mean_"  # also the predictions' dtype
    #: one rule per constructor argument (:mod:`gplvm._params`)
    _parameter_constraints = {
        "likelihood": LIKELIHOOD, "features": FEATURES, "n_mixture": POSITIVE_INT,
        "n_features": POSITIVE_INT, "ard": FLAG, "n_samples": POSITIVE_INT,
        "batch_size": optional(POSITIVE_INT, "256"), "n_iter": POSITIVE_INT,
        "learning_rate": POSITIVE, "prior_var": POSITIVE, "n_predict_samples": POSITIVE_INT,
        "standardize": FLAG, "random_state": RANDOM_STATE, "progress": FLAG,
        "checkpoint": CHECKPOINT, "checkpoint_interval": NON_NEGATIVE}

    def __init__(self, likelihood="gaussian", features: AbstractFeatureMap | None = None,
                 n_mixture: int = 10, n_features: int = 400, ard: bool = True,
                 n_samples: int = 5, batch_size: int | None = None, n_iter: int = 1000,
                 learning_rate: float = 0.04, prior_var: float = 1.0,
                 n_predict_samples: int = 200, standardize: bool = True, random_state=0,
                 progress: bool = True, checkpoint=None, checkpoint_interval: float = 60.0):
        self.likelihood = likelihood
        self.features = features
        self.n_mixture = n_mixture
        self.n_features = n_features
        self.ard = ard
        self.n_samples = n_samples
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.learning_rate = learning_rate
        self.prior_var = prior_var
        self.n_predict_samples = n_predict_samples
        self.standardize = standardize
        self.random_state = random_state
        self.progress = progress
        self.checkpoint = checkpoint
        self.checkpoint_interval = checkpoint_interval

    def __sklearn_tags__(self):
        tags = no_missing_values(super().__sklearn_tags__())
        if is_classifier(self):
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags(multi_class=False)
        else:
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        return tags

    # ------------------------------------------------------------------ validation
    def _likelihood(self):
        lik = get_likelihood(self.likelihood)
        if lik.name not in _SUPPORTED:
            raise ValueError(f"BayesianGLM models one target per sample; the {lik.name} "
                             f"likelihood is not one of its likelihoods {_SUPPORTED}")
        if lik.name == "binomial" and np.ndim(lik.n_trials) != 0:
            raise ValueError("BayesianGLM needs a scalar n_trials for the binomial likelihood "
                             "(the same number of trials for every sample); got an array of "
                             f"shape {np.shape(lik.n_trials)}")
        return lik

    def _class_codes(self, y, lik):
        """Labels → 0/1 codes of ``classes_`` (sorted, as scikit-learn's classifiers)."""
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
        if len(classes) != 2:
            raise ValueError(f"Only binary classification is supported. y has {len(classes)} "
                             f"distinct class(es) {classes[:5].tolist()}; the {lik.name} "
                             f"likelihood makes a binary classifier, which needs exactly two "
                             f"classes (one-vs-rest with sklearn.multiclass.OneVsRestClassifier "
                             f"for more)")
        return classes, codes.astype(float)

    def _scaling(self, y, lik):
        """(mean, sd) that standardise y: the Gaussian likelihood with ``standardize`` only."""
        if lik.name != "gaussian" or not self.standardize:
            return 0.0, 1.0
        y_mean, y_std = float(np.mean(y)), float(np.std(y))
        if not y_std > 0:
            raise ValueError("y is constant; there is nothing to regress (or pass "
                             "standardize=False)")
        return y_mean, y_std

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Maximise the bound of eq. 27 over q(w) and all hyper-parameters.

        Args:
            X: inputs (N, D), finite, N ≥ 2.
            y: targets (N,): two distinct labels of any type for a classifier; else finite
                numbers in the likelihood's support (integers for the count likelihoods).

        Warns:
            ConvergenceWarning: the bound was still rising at the end of the run
                (:func:`gplvm.models._glm_core.bound_settled`).
        """
        check_params(self)
        lik = self._likelihood()
        classifier = is_binary(lik)
        X, y = fit_inputs(self, X, y, numeric_y=not classifier)
        if classifier:
            classes, y = self._class_codes(y, lik)
        if lik.name in ("poisson", "negative_binomial", "binomial"):
            check_counts(y[:, None], "y", upper=getattr(lik, "n_trials", None), what=lik.name)
        lik.validate(y[:, None], name="y")
        y_mean, y_std = self._scaling(y, lik)
        check_features(self.features, X.shape[1])
        # validation done: computation starts here
        vars(self).pop("classes_", None)        # a regressor keeps no classes of an earlier fit
        if classifier:
            self.classes_ = classes
        lik_fit = lik
        if lik.name == "gaussian" and not isinstance(self.likelihood, str):
            lik_fit = replace(lik, noise_var=lik.noise_var / y_std**2)   # y's units → fit's
        self.y_mean_, self.y_std_ = y_mean, y_std
        key = as_key(self.random_state)
        k_feat, k_init, k_fit, self._predict_key = jax.random.split(key, 4)
        features = self.features if self.features is not None else default_features(
            X, self.n_features, k_feat, ard=self.ard)
        Xj, yj = jnp.asarray(X), jnp.asarray((y - y_mean) / y_std)
        u0 = core.initial_params(k_init, features, lik_fit, Xj, yj, float(self.prior_var),
                                 int(self.n_mixture))
        # what resume() needs to go on: the run's start, data and, once stopped, its state
        self._fit_state_ = GLMFitState(u0, k_fit, features, lik_fit, Xj, yj)
        if self._run()._unsettled():
            warn_not_converged(*self._unsettled())
        return self

    @holding_checkpoint
    def _run(self):
        """Adam on −eq. 27 from the start (or the stored state) in ``_fit_state_``; sets the
        fitted attributes, saves the checkpoint and warns when the bound has not settled."""
        run = self._fit_state_
        X, lik = run.X, run.likelihood
        B = min(X.shape[0], 256) if self.batch_size is None else int(min(self.batch_size,
                                                                         X.shape[0]))
        options = self._checkpointing(self._record_checkpoint, run.state)._replace(
            optimizer=core.optimizer(float(self.learning_rate), int(self.n_iter)), key=run.key)
        res = minimise(core.neg_elbo(B, int(self.n_samples)), run.u0,
                       args=(run.features, lik, X, run.y), method="adam",
                       n_iter=int(self.n_iter), progress=self.progress,
                       desc=f"BayesianGLM ({lik.name})", options=options)
        self._set_fitted(res.params, res.history, res.interrupted)
        if res.interrupted:
            self._fit_state_ = run._replace(state=res.state)
        self._end_run(res.interrupted)
        return self

    def _unsettled(self):
        """Whether to warn that the bound has not settled, and with what (the warning itself
        is raised in fit or resume, so that it points at the caller's line)."""
        if self.converged_ or self.interrupted_:
            return None
        return ("BayesianGLM", f"the bound was still rising after n_iter={self.n_iter} Adam "
                               f"steps", "increase n_iter (or learning_rate)")

    def _record_checkpoint(self, state):
        """The run as it stands after an Adam step: a model of the current iterate, flagged
        interrupted, that resume() continues from ``state``."""
        self._set_fitted(state.params, state.history, True)
        self._fit_state_ = self._fit_state_._replace(state=state)

    def _set_fitted(self, u, history, interrupted):
        """The fitted attributes of unconstrained parameters ``u`` (y's units)."""
        run = self._fit_state_
        fm, lk, _ = core.unpack(u, run.features, run.likelihood)
        self.features_ = fm
        self.likelihood_ = replace(lk, noise_var=lk.noise_var * self.y_std_**2) \
            if lk.name == "gaussian" else lk
        self.prior_var_ = np.asarray(softplus(u["prior_var"])) * self.y_std_**2
        self.weights_mean_ = np.asarray(u["m"]) * self.y_std_
        self.weights_var_ = np.asarray(softplus(u["psi"])) * self.y_std_**2
        self.history_, self.n_iter_ = np.asarray(history), len(history)
        self.interrupted_ = bool(interrupted)
        self.converged_ = core.bound_settled(self.history_, run.X.shape[0])

    @classmethod
    def _upgrade_fitted(cls, fitted: dict, format_version: int, params: dict | None = None) -> dict:
        """Attributes of a file of an older format, as today's (:mod:`gplvm.io.legacy`: format 1
        never standardised y, and fitted a Bernoulli model to 0/1 targets without
        ``classes_``)."""
        return upgrade_glm(fitted, format_version)

"""``BayesianLinearRegression``: revrand's StandardLinearModel (seed 002 §1.2) on any feature map.

Type-II maximum likelihood of the noise variance σ², one weight-prior variance per basis block
(the diagonal Λ of eq. 13) and the basis hyper-parameters (length-scales), by L-BFGS on the exact
log marginal likelihood (eq. 14, O(N M²) via :mod:`gplvm.objectives.linear_model`), with several
restarts; then the exact posterior N(m, C) and predictive distribution (eqs. 15–17).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import norm
from sklearn.base import BaseEstimator, RegressorMixin

from gplvm._params import (CHECKPOINT, FEATURES, FLAG, NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE,
                          POSITIVE_INT, PRIOR_VAR, RANDOM_STATE, check_params, optional)
from gplvm._random import as_key
from gplvm.features import AbstractFeatureMap
from gplvm.io import SaveMixin
from gplvm.registry import register
from gplvm.models import _blr_fit as core
from gplvm.models._checkpoint import ResumableMixin, holding_checkpoint
from gplvm.models._common import check_features, check_is_fitted, default_features, \
    in_model_precision
from gplvm.models._rows import map_rows
from gplvm.models._supervised import (
    SupervisedResume, central_interval, fit_inputs, no_missing_values, query_inputs,
    warn_not_converged,
)
from gplvm.models.fit_state import BLRFitState, BLRRun
from gplvm.transforms import softplus


@register("gplvm.BayesianLinearRegression", estimator=True)
class BayesianLinearRegression(SupervisedResume, ResumableMixin, SaveMixin, RegressorMixin,
                               BaseEstimator):
    """Bayesian linear regression on random features with learned hyper-parameters.

    Args:
        features: a feature map from :mod:`gplvm.features` (or a composition, which gets one
            prior variance per block); ``None`` builds random Fourier features of an RBF kernel
            (``n_features``) whose length-scale(s) start at the median pairwise distance of X
            and are learned.
        n_features: the number of features of the default map.
        ard: one length-scale per input column for the default map (the marginal likelihood
            then decides how much each input matters); ``False`` for a single one.
        noise_var, prior_var: σ² and the weight-prior variance, in the units of y (squared);
            initial values when ``optimize``, the values used when not.  ``None`` starts from
            0.1·Var(y) and Var(y) (E[y²] instead of Var(y) when ``standardize=False``, since the
            model then has mean zero).  ``prior_var`` may also be one value per block.
        optimize: learn the hyper-parameters; ``False`` keeps the given ones and only
            conditions the weights (exact Bayesian linear regression).
        n_restarts: extra L-BFGS runs from random perturbations of the initial values (noise,
            prior variances and length-scales multiplied by exp(N(0, 1))); the largest
            marginal likelihood wins.
        max_iter: L-BFGS iterations per run.
        tol: a run stops when the relative change of eq. 14 stays below ``tol`` for 10
            iterations (1e-7 of a few hundred nats is far below any difference that matters).
        standardize: centre y and scale it to unit variance before fitting (predictions are in
            the original units); the hyper-parameter values above are always in y's units.
        random_state: seed (int or ``jax.random`` key) for the default features and restarts.
        progress: show a progress bar.
        checkpoint: a file path: the model is saved there (:meth:`save`) after an L-BFGS
            iteration at most every ``checkpoint_interval`` seconds and when the fit ends or is
            interrupted (Ctrl-C), so a killed process loses at most that much work;
            ``gplvm.load(path).resume()`` finishes the run in progress and the restarts after
            it with exactly the result of an uninterrupted fit (the L-BFGS state, the best
            finished run and the restarts' key are in the file).  A file written mid-fit holds
            the training data and has ``interrupted_`` set; a finished fit's keeps neither.
        checkpoint_interval: seconds between checkpoint writes (0: after every iteration).

    The fitted weights' posterior is exact; its cost is O(N M min(N, M)) per evaluation of
    eq. 14 (the M × M Woodbury form when N ≥ M, the N × N form otherwise).

    Attributes:
        features_ (the fitted map), noise_var_, prior_var_ (one per block, y's units),
        log_marginal_likelihood_ (eq. 14 at the fitted values, of the centred y when
        ``standardize``), posterior_ (the weight posterior N(m, C) of the standardised problem,
        in factored form; see :meth:`weights_posterior`), history_, n_iter_, converged_,
        interrupted_, n_features_in_.
    """

    #: one rule per constructor argument (:mod:`gplvm._params`)
    _parameter_constraints = {"features": FEATURES, "n_features": POSITIVE_INT, "ard": FLAG,
        "noise_var": optional(POSITIVE, "0.1"), "prior_var": PRIOR_VAR, "optimize": FLAG,
        "n_restarts": NON_NEGATIVE_INT, "max_iter": POSITIVE_INT, "tol": NON_NEGATIVE,
        "standardize": FLAG, "random_state": RANDOM_STATE, "progress": FLAG,
        "checkpoint": CHECKPOINT, "checkpoint_interval": NON_NEGATIVE}
    #: the fitted value, what a file holds (docs/contract.md)
    _fitted_fields = ("n_features_in_", "feature_names_in_", "y_mean_", "y_std_", "features_",
                      "prior_var_", "noise_var_", "posterior_", "log_marginal_likelihood_",
                      "history_", "n_iter_", "converged_", "interrupted_")
    _optional_fields = ("feature_names_in_",)         # fitted on a data frame
    _precision_attribute = "prior_var_"         # the precision its predictions compute in
    _fitted_attribute = "posterior_"            # resume() of an unfitted model: NotFittedError

    def __init__(self, features: AbstractFeatureMap | None = None, n_features: int = 400,
                 ard: bool = True, noise_var=None, prior_var=None, optimize: bool = True,
                 n_restarts: int = 2, max_iter: int = 500, tol: float = 1e-7,
                 standardize: bool = True, random_state=0, progress: bool = False,
                 checkpoint=None, checkpoint_interval: float = 60.0):
        self.features = features
        self.n_features = n_features
        self.ard = ard
        self.noise_var = noise_var
        self.prior_var = prior_var
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.tol = tol
        self.standardize = standardize
        self.random_state = random_state
        self.progress = progress
        self.checkpoint = checkpoint
        self.checkpoint_interval = checkpoint_interval

    def __sklearn_tags__(self):
        return no_missing_values(super().__sklearn_tags__())

    # ------------------------------------------------------------------ validation
    def _initial_values(self, y, n_blocks, y_std):
        """σ² and Λ per block in the units of the (standardised) targets."""
        scale = float(np.var(y)) if self.standardize else float(np.mean(y**2))
        scale = scale if scale > 0 else 1.0
        noise = 0.1 * scale if self.noise_var is None else self.noise_var
        prior = scale if self.prior_var is None else self.prior_var
        prior = np.asarray(prior, dtype=float)
        if prior.ndim == 1 and prior.shape[0] != n_blocks:
            raise ValueError(f"prior_var has shape {prior.shape}; pass a scalar or one value per "
                             f"basis block ({n_blocks} blocks)")
        var_y = y_std**2
        return float(noise) / var_y, np.broadcast_to(prior, (n_blocks,)) / var_y

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Learn the hyper-parameters by maximising eq. 14, then condition the weights.

        Args:
            X: inputs (N, D), finite, N ≥ 2.
            y: targets (N,), finite.

        Warns:
            ConvergenceWarning: the best L-BFGS run stopped at ``max_iter`` before its
                convergence test (see ``tol``) was met.
        """
        check_params(self)
        X, y = fit_inputs(self, X, y)
        y_mean, y_std = (float(y.mean()), float(y.std())) if self.standardize else (0.0, 1.0)
        if y_std == 0:
            raise ValueError("y is constant; there is nothing to regress (or pass "
                             "standardize=False)")
        check_features(self.features, X.shape[1])
        n_blocks = 1 if self.features is None else len(self.features.blocks)
        noise0, prior0 = self._initial_values(y, n_blocks, y_std)
        # validation done: computation starts here
        self.y_mean_, self.y_std_ = y_mean, y_std
        k_feat, k_restart = jax.random.split(as_key(self.random_state))
        fmap = self.features if self.features is not None else default_features(
            X, self.n_features, k_feat, ard=self.ard)
        Xj = jnp.asarray(X)
        ys = jnp.asarray((y - self.y_mean_) / self.y_std_)
        u0 = core.initial_params(fmap, jnp.asarray(prior0), jnp.asarray(noise0))
        # what resume() needs to go on: the starts, the data and, once stopped, where
        self._fit_state_ = BLRFitState(u0, k_restart, fmap, Xj, ys)
        if self._run()._unsettled():
            warn_not_converged(*self._unsettled())
        return self

    @holding_checkpoint
    def _run(self):
        """The L-BFGS restarts from ``_fit_state_`` (none without ``optimize``), then the
        fitted attributes; saves the checkpoint."""
        run = self._fit_state_
        if not self.optimize:
            self._set_fitted(BLRRun(np.nan, run.u0, np.array([]), 0, True), False)
            self._end_run(False)
            return self
        end = core.restarts(run, int(self.n_restarts), int(self.max_iter), self.progress,
                            self._options)
        self._fit_state_ = end.run
        self._set_fitted(end.chosen, end.interrupted)
        self._end_run(end.interrupted)
        return self

    def _options(self, run):
        """The L-BFGS options of the run in progress of ``run``: its start and checkpoint."""
        def record(state):      # a model of the best iterate so far, flagged interrupted
            self._fit_state_ = run._replace(state=state)
            self._set_fitted(core.stopped_at(run, state), True)

        return self._checkpointing(record, run.state)._replace(tol=float(self.tol))

    def _set_fitted(self, chosen, interrupted):
        """The fitted attributes of the run ``chosen`` (a BLRRun): the weights conditioned on
        its hyper-parameters, in y's units."""
        run = self._fit_state_
        fm, prior, noise, post, lml = core.condition(chosen.params, run.features, run.X, run.y)
        self.features_ = fm
        self.prior_var_ = np.asarray(softplus(chosen.params["prior_var"])) * self.y_std_**2
        self.noise_var_ = float(noise) * self.y_std_**2
        self.posterior_ = post
        self.log_marginal_likelihood_ = float(lml) - run.X.shape[0] * np.log(self.y_std_)
        self.history_, self.n_iter_ = chosen.history, chosen.n_iter
        self.converged_, self.interrupted_ = chosen.converged, interrupted

    def _unsettled(self):
        """Whether to warn that the best run stopped at ``max_iter``, and with what (raised in
        fit or resume, so that it points at the caller's line)."""
        if not self.optimize or self.converged_ or self.interrupted_ or \
                self.n_iter_ != int(self.max_iter):
            return None
        return ("BayesianLinearRegression", f"L-BFGS stopped at max_iter={self.max_iter} "
                f"before the marginal likelihood settled (relative change below "
                f"tol={self.tol} for 10 iterations)", "increase max_iter or tol")

    # ------------------------------------------------------------------ prediction
    @in_model_precision
    def predict(self, X, return_std: bool = False):
        """Predictive mean of y* (eq. 16); with ``return_std`` also the square root of eq. 17
        (noise included), both in the units of y."""
        check_is_fitted(self, "posterior_")
        X = query_inputs(self, X)
        mean, var = map_rows(core.predict, X, self.posterior_, self.features_)
        mean = mean * self.y_std_ + self.y_mean_
        if not return_std:
            return mean
        return mean, np.sqrt(var) * self.y_std_

    @in_model_precision
    def predict_quantile(self, X, q):
        """Quantile(s) of the Gaussian predictive of eq. 15: mean + sd·Φ⁻¹(q).

        Returns (N*,) for a scalar ``q``, else (N*, len(q)).
        """
        levels = np.atleast_1d(np.asarray(q, dtype=float))
        if levels.ndim != 1 or not np.all((levels > 0) & (levels < 1)):
            raise ValueError(f"q={q!r}: quantile levels must lie strictly between 0 and 1")
        mean, sd = self.predict(X, return_std=True)
        out = mean[:, None] + sd[:, None] * norm.ppf(levels)[None, :]
        return out[:, 0] if np.ndim(q) == 0 else out

    @in_model_precision
    def predict_interval(self, X, coverage: float = 0.9):
        """The central predictive interval (lower, upper) with the given coverage."""
        return central_interval(self, X, coverage)

    @in_model_precision
    def weights_posterior(self):
        """Mean m (M,) and covariance C (M, M) of the weights, in the units of y (for the
        centred targets when ``standardize``)."""
        check_is_fitted(self, "posterior_")
        m, C = core.weights(self.posterior_)
        return np.asarray(m) * self.y_std_, np.asarray(C) * self.y_std_**2

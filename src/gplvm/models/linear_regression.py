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
from sklearn.base import BaseEstimator, RegressorMixin

from gplvm._random import as_key
from gplvm._validation import as_1d_float, as_2d_float, check_consistent_length
from gplvm.features import AbstractFeatureMap
from gplvm.inference import minimise
from gplvm.models._common import (
    block_expand, check_is_fitted, default_features, freeze_feature_variance,
)
from gplvm.objectives import linear_model as lm
from gplvm.transforms import inverse_softplus, softplus


class BayesianLinearRegression(RegressorMixin, BaseEstimator):
    """Bayesian linear regression on random features with learned hyper-parameters.

    Args:
        features: a feature map from :mod:`gplvm.features` (or a composition); ``None`` builds
            random Fourier features of an RBF kernel (``n_features``) whose length-scale starts
            at the median pairwise distance of X and is learned.
        n_features: the number of features of the default map.
        ard: one length-scale per input column for the default map.
        noise_var, prior_var: initial σ² and weight-prior variance (in standardised units when
            ``standardize``).
        optimize: learn the hyper-parameters (False keeps the given ones: exact conditioning).
        n_restarts: extra L-BFGS runs from perturbed initial values; the best bound wins.
        max_iter: L-BFGS iterations per run.
        standardize: centre and scale y, report in original units.
        random_state: seed for the features and restarts.
        progress: show a progress bar.

    Attributes:
        features_, noise_var_, prior_var_ (per block), posterior_ (weights N(m, C)),
        log_marginal_likelihood_, history_, n_iter_, converged_.
    """

    def __init__(self, features: AbstractFeatureMap | None = None, n_features: int = 400,
                 ard: bool = False, noise_var: float = 0.1, prior_var: float = 1.0,
                 optimize: bool = True, n_restarts: int = 2, max_iter: int = 500,
                 standardize: bool = True, random_state=0, progress: bool = False):
        self.features = features
        self.n_features = n_features
        self.ard = ard
        self.noise_var = noise_var
        self.prior_var = prior_var
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.standardize = standardize
        self.random_state = random_state
        self.progress = progress

    # ------------------------------------------------------------------ helpers
    def _check_X(self, X, fitted_dim=None):
        X = as_2d_float(X, "X")
        if fitted_dim is not None and X.shape[1] != fitted_dim:
            raise ValueError(f"X has {X.shape[1]} columns but the model was fitted on "
                             f"{fitted_dim}")
        return X

    @staticmethod
    def _unpack(u, fmap):
        fmap = fmap.from_unconstrained(freeze_feature_variance(u["features"]))
        prior = block_expand(softplus(u["prior_var"]), fmap.blocks)
        return fmap, prior, softplus(u["noise_var"])

    # ------------------------------------------------------------------ API
    def fit(self, X, y):
        """Learn hyper-parameters by maximising eq. 14, then condition the weights."""
        X = self._check_X(X)
        y = as_1d_float(y, "y")
        check_consistent_length(X, y)
        if len(y) < 2:
            raise ValueError("need at least 2 samples to fit a regression")
        key = as_key(self.random_state)
        kf, kr = jax.random.split(key)
        self.y_mean_, self.y_std_ = (float(y.mean()), float(y.std())) if self.standardize \
            else (0.0, 1.0)
        if self.y_std_ == 0:
            raise ValueError("y is constant; there is nothing to regress")
        ys = jnp.asarray((y - self.y_mean_) / self.y_std_)
        fmap = self.features if self.features is not None else default_features(
            X, self.n_features, kf, ard=self.ard)
        if fmap.input_dim != X.shape[1]:
            raise ValueError(f"the feature map expects {fmap.input_dim} input columns but X "
                             f"has {X.shape[1]}")
        Xj = jnp.asarray(X)
        u0 = {"features": fmap.unconstrained(),
              "prior_var": inverse_softplus(jnp.full(len(fmap.blocks), self.prior_var)),
              "noise_var": inverse_softplus(jnp.asarray(self.noise_var))}

        @jax.jit
        def neg_lml(u):
            fm, prior, noise = self._unpack(u, fmap)
            return -lm.log_marginal_likelihood(fm(Xj), ys, prior, noise)

        best = (u0, float(neg_lml(u0)), np.array([]), 0, True)
        if self.optimize:
            best = None
            for r in range(self.n_restarts + 1):
                start = u0 if r == 0 else self._perturb(u0, jax.random.fold_in(kr, r))
                res = minimise(neg_lml, start, method="lbfgs", n_iter=self.max_iter,
                               progress=self.progress, desc=f"BLR fit {r + 1}")
                value = float(neg_lml(res.params))
                if best is None or value < best[1]:
                    best = (res.params, value, res.history, res.n_iter, res.converged)
                if res.interrupted:
                    break
        u, value, history, n_iter, converged = best
        fm, prior, noise = self._unpack(u, fmap)
        self.features_ = fm
        self.prior_var_ = np.asarray(softplus(u["prior_var"])) * self.y_std_**2
        self.noise_var_ = float(noise) * self.y_std_**2
        self.posterior_ = jax.jit(lm.posterior)(fm(Xj), ys, prior, noise)
        self.log_marginal_likelihood_ = -value - len(y) * np.log(self.y_std_)
        self.history_, self.n_iter_, self.converged_ = history, n_iter, converged
        self.n_features_in_ = X.shape[1]
        return self

    @staticmethod
    def _perturb(u0, key):
        leaves, tree = jax.tree_util.tree_flatten(u0)
        keys = jax.random.split(key, len(leaves))
        new = [x + 0.5 * jax.random.normal(k, jnp.shape(x)) for x, k in zip(leaves, keys)]
        return jax.tree_util.tree_unflatten(tree, new)

    def predict(self, X, return_std: bool = False):
        """Predictive mean of y* (eq. 16); with ``return_std`` also sqrt of eq. 17 (noise included)."""
        check_is_fitted(self, "posterior_")
        X = self._check_X(X, self.n_features_in_)
        mean, var = _predict(self.posterior_, self.features_, jnp.asarray(X))
        mean = np.asarray(mean) * self.y_std_ + self.y_mean_
        if not return_std:
            return mean
        return mean, np.sqrt(np.asarray(var)) * self.y_std_

    def weights_posterior(self):
        """Mean and covariance of the weights (standardised units)."""
        check_is_fitted(self, "posterior_")
        return np.asarray(self.posterior_.m), np.asarray(self.posterior_.covariance())


@jax.jit
def _predict(post, fmap, X):
    return lm.predict(post, fmap(X))

"""``BayesianGLM``: revrand's GeneralizedLinearModel (seed 002 §1.3) on any feature map.

Posterior over the weights: a mixture of K diagonal Gaussians (eq. 21), fitted by maximising
the stochastic bound of :mod:`gplvm.objectives.glm` with Adam over minibatches (eqs. 5–6, 25–27),
jointly with the weight-prior variances, the likelihood's parameters and the basis
hyper-parameters.  Predictions integrate over q(w) by Monte Carlo: the expectation of eq. 29,
class probabilities, and quantiles / intervals by root finding on the predictive CDF
(eqs. 30–31).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator

from gplvm._random import as_key
from gplvm._validation import as_1d_float, as_2d_float, check_consistent_length
from gplvm.features import AbstractFeatureMap
from gplvm.inference import minimise
from gplvm.likelihoods import get_likelihood
from gplvm.models import _quantiles
from gplvm.models._common import (
    block_expand, check_is_fitted, default_features, freeze_feature_variance,
)
from gplvm.objectives import glm as glm_objective
from gplvm.transforms import inverse_softplus, softplus

_SUPPORTED = ("gaussian", "bernoulli", "binomial", "poisson", "negative_binomial")


class BayesianGLM(BaseEstimator):
    """Bayesian generalised linear model on random features, by stochastic variational inference.

    Args:
        likelihood: ``"gaussian"``, ``"bernoulli"``, ``"binomial"``, ``"poisson"``,
            ``"negative_binomial"`` or a likelihood object (e.g. ``Binomial(n_trials=10)``).
        features: a feature map; ``None`` builds random Fourier features of an RBF kernel with
            a length-scale learned from the data (initialised at the median distance).
        n_features: features of the default map.
        n_mixture: K, the number of diagonal Gaussians in q(w) (eq. 21).
        n_samples: L, reparameterised draws per component and step (eq. 25).
        batch_size: minibatch size B (eqs. 5–6); ``None`` uses min(N, 256).
        n_iter, learning_rate: Adam steps and step size.
        prior_var: initial weight-prior variance (one per basis block, learned).
        n_predict_samples: S, posterior draws for predictions (eqs. 29–30).
        random_state: seed (features, initialisation, minibatches, predictions).
        progress: show a progress bar with the bound.

    Attributes:
        features_, likelihood_, prior_var_, weights_mean_ (K, M), weights_var_ (K, M),
        history_ (negative bound per step), n_iter_, converged_ (False: Adam runs all steps).
    """

    def __init__(self, likelihood="gaussian", features: AbstractFeatureMap | None = None,
                 n_features: int = 400, n_mixture: int = 10, n_samples: int = 5,
                 batch_size: int | None = None, n_iter: int = 3000, learning_rate: float = 0.01,
                 prior_var: float = 1.0, ard: bool = False, n_predict_samples: int = 500,
                 random_state=0, progress: bool = True):
        self.likelihood = likelihood
        self.features = features
        self.n_features = n_features
        self.n_mixture = n_mixture
        self.n_samples = n_samples
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.learning_rate = learning_rate
        self.prior_var = prior_var
        self.ard = ard
        self.n_predict_samples = n_predict_samples
        self.random_state = random_state
        self.progress = progress

    # ------------------------------------------------------------------ validation
    def _likelihood(self):
        lik = get_likelihood(self.likelihood)
        if lik.name not in _SUPPORTED:
            raise ValueError(f"BayesianGLM supports the univariate likelihoods {_SUPPORTED}; "
                             f"got {lik.name!r}")
        return lik

    def _check_X(self, X):
        X = as_2d_float(X, "X")
        if hasattr(self, "n_features_in_") and X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} columns but the model was fitted on "
                             f"{self.n_features_in_}")
        return X

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Maximise the bound of eq. 27 over q(w) and all hyper-parameters."""
        lik = self._likelihood()
        X = self._check_X(X)
        y = as_1d_float(y, "y")
        check_consistent_length(X, y)
        lik.validate(y[:, None], name="y")
        if len(y) < 2:
            raise ValueError("need at least 2 samples to fit a GLM")
        key = as_key(self.random_state)
        k_feat, k_init, k_fit = jax.random.split(key, 3)
        fmap = self.features if self.features is not None else default_features(
            X, self.n_features, k_feat, ard=self.ard)
        if fmap.input_dim != X.shape[1]:
            raise ValueError(f"the feature map expects {fmap.input_dim} input columns but X "
                             f"has {X.shape[1]}")
        N, M, K = X.shape[0], fmap.n_features, self.n_mixture
        B = min(N, 256) if self.batch_size is None else int(min(self.batch_size, N))
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        u0 = {
            "features": fmap.unconstrained(),
            "likelihood": lik.unconstrained(),
            "prior_var": inverse_softplus(jnp.full(len(fmap.blocks), float(self.prior_var))),
            "m": 0.1 * jax.random.normal(k_init, (K, M)),
            "psi": inverse_softplus(jnp.full((K, M), 0.01 * float(self.prior_var))),
        }
        n_samples = int(self.n_samples)

        def neg_elbo(u, step_key):
            k_batch, k_mc = jax.random.split(step_key)
            idx = jax.random.choice(k_batch, N, (B,), replace=False) if B < N else jnp.arange(N)
            fm, lk, prior = self._unpack(u, fmap, lik)
            return -glm_objective.elbo(k_mc, fm(Xj[idx]), yj[idx], N, u["m"], softplus(u["psi"]),
                                       prior, lk, n_samples)

        res = minimise(neg_elbo, u0, method="adam", n_iter=self.n_iter,
                       learning_rate=self.learning_rate, key=k_fit, progress=self.progress,
                       desc=f"BayesianGLM ({lik.name})")
        u = res.params
        self.features_, self.likelihood_, prior = self._unpack(u, fmap, lik)
        self.prior_var_ = np.asarray(softplus(u["prior_var"]))
        self.weights_mean_ = np.asarray(u["m"])
        self.weights_var_ = np.asarray(softplus(u["psi"]))
        self.history_ = res.history
        self.n_iter_, self.converged_, self.interrupted_ = res.n_iter, res.converged, \
            res.interrupted
        self.n_features_in_ = X.shape[1]
        return self

    @staticmethod
    def _unpack(u, fmap, lik):
        fm = fmap.from_unconstrained(freeze_feature_variance(u["features"]))
        lk = lik.from_unconstrained(u["likelihood"])
        return fm, lk, block_expand(softplus(u["prior_var"]), fm.blocks)

    # ------------------------------------------------------------------ prediction
    def _latent_samples(self, X, n_samples=None, random_state=None):
        """S draws of f* = φ(x*)ᵀ w, w ~ q(w) (the mixture of eq. 21): shape (N*, S)."""
        check_is_fitted(self, "weights_mean_")
        X = self._check_X(X)
        S = int(n_samples or self.n_predict_samples)
        key = as_key(self.random_state if random_state is None else random_state)
        key = jax.random.fold_in(key, 7919)
        return _draw_latent_jit(key, self.features_, jnp.asarray(X),
                            jnp.asarray(self.weights_mean_), jnp.asarray(self.weights_var_), S)

    def predict(self, X, return_std: bool = False):
        """Predictive expectation E[y*] (eq. 29); ``return_std`` adds the predictive sd
        (law of total variance over the posterior draws)."""
        F = self._latent_samples(X)
        mean_f = self.likelihood_.inverse_link(F)
        mean = np.asarray(jnp.mean(mean_f, axis=1))
        if not return_std:
            return mean
        var = jnp.mean(self.likelihood_.conditional_variance(F), axis=1) + jnp.var(mean_f, axis=1)
        return mean, np.sqrt(np.asarray(var))

    def predict_proba(self, X):
        """P(y* = 1) for Bernoulli, or the success probability for binomial data: (N*, 2)."""
        if self.likelihood_.name not in ("bernoulli", "binomial"):
            raise ValueError("predict_proba needs a Bernoulli or binomial likelihood")
        p1 = np.asarray(jnp.mean(jax.nn.sigmoid(self._latent_samples(X)), axis=1))
        return np.column_stack([1.0 - p1, p1])

    def predict_quantile(self, X, q):
        """The q-quantile of the predictive distribution by root finding (eqs. 30–31).

        For counts the quantile is min{y : P(y* ≤ y) ≥ q} (a step CDF has no root).
        """
        if not 0.0 < q < 1.0:
            raise ValueError(f"q={q} must lie strictly between 0 and 1")
        F = self._latent_samples(X)
        lik = self.likelihood_
        mean = lik.inverse_link(F)
        sd = jnp.sqrt(lik.conditional_variance(F))
        if lik.is_count:
            # Cantelli: for each draw, P(y ≤ μ + σ sqrt(q/(1−q))) ≥ q, so the max bounds the mixture
            upper = jnp.ceil(jnp.max(mean + sd * np.sqrt(q / (1 - q)), axis=1)) + 1.0
            return np.asarray(_quantiles.count_quantile(lik, F, q, upper))
        width = 12.0 * jnp.max(sd, axis=1)
        return np.asarray(_quantiles.continuous_quantile(
            lik, F, q, jnp.min(mean, axis=1) - width, jnp.max(mean, axis=1) + width))

    def predict_interval(self, X, coverage: float = 0.9):
        """A central predictive interval (lower, upper) with the given coverage."""
        if not 0.0 < coverage < 1.0:
            raise ValueError(f"coverage={coverage} must lie strictly between 0 and 1")
        a = (1.0 - coverage) / 2.0
        return self.predict_quantile(X, a), self.predict_quantile(X, 1.0 - a)

    def score(self, X, y):
        """Mean log predictive density of y under the Monte Carlo predictive (eq. 28)."""
        X = self._check_X(X)
        y = as_1d_float(y, "y")
        check_consistent_length(X, y)
        F = self._latent_samples(X)
        lp = self.likelihood_.log_prob(jnp.broadcast_to(jnp.asarray(y)[:, None], F.shape), F)
        lpd = jax.scipy.special.logsumexp(lp, axis=1) - np.log(F.shape[1])
        return float(jnp.mean(lpd))


def _draw_latent_fn(key, fmap, X, m, psi, S):
    kc, ke = jax.random.split(key)
    comp = jax.random.randint(kc, (S,), 0, m.shape[0])
    W = m[comp] + jnp.sqrt(psi[comp]) * jax.random.normal(ke, (S, m.shape[1]))
    return fmap(X) @ W.T


_draw_latent_jit = jax.jit(_draw_latent_fn, static_argnums=5)

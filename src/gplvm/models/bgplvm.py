"""``BayesianGPLVM``: the Bayesian GPLVM (Titsias & Lawrence 2010) for any kernel.

A thin estimator over the GPLVM family's core (:mod:`gplvm.models.gplvm_family`): the collapsed
bound in the stable form of seed 001 §B with one column group per missingness pattern and unit
column weights, q(X) under the iid or the dynamical prior (seed 001 §E, seed 003 §2.2.1),
Ψ-statistics analytic where they exist and by the unscented transform otherwise (seed 004),
the dense linear-algebra route, and new-row inference with the model fixed (seed 003 eqs. 36–37).
"""

from __future__ import annotations

import warnings
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import ConvergenceWarning

from gplvm._random import as_key
from gplvm._validation import as_2d_float, check_no_constant_columns
from gplvm.inference import minimise
from gplvm.io import SaveMixin
from gplvm.kernels import RBF, AbstractKernel
from gplvm.linalg import CholeskyError, escalate_jitter
from gplvm.models._common import check_is_fitted
from gplvm.models.gplvm_family import fitted as fam
from gplvm.models.gplvm_family.bound import Problem, negative_bound, negative_bound_keyed
from gplvm.models.gplvm_family.format1 import upgrade_format1
from gplvm.models.gplvm_family.init import (initial_inducing, initial_jitter, initial_latents,
                                            initial_variances, resolve_rule)
from gplvm.models.gplvm_family.latent import DynamicalLatent, IidLatent
from gplvm.models.gplvm_family.new_rows import infer_latents, nearest_training_latents
from gplvm.models.gplvm_family.route import DenseRoute
from gplvm.objectives import collapsed
from gplvm.priors import dynamical
from gplvm.registry import register
from gplvm.transforms import inverse_softplus


@register("gplvm.BayesianGPLVM", estimator=True)
class BayesianGPLVM(SaveMixin, TransformerMixin, BaseEstimator):
    """Bayesian Gaussian-process latent variable model with a collapsed variational bound.

    Args:
        n_components: Q, the latent dimension.
        n_inducing: M, the number of inducing inputs.
        kernel: a kernel on Q inputs; ``None`` is an ARD RBF.
        psi_rule: ``None`` (analytic where it exists, unscented otherwise), ``'analytic'``,
            ``'unscented'``, ``'gauss_hermite'``, ``'monte_carlo'`` or a rule object.
        standardize: centre and scale the columns of Y; results are reported in original units.
        max_iter: L-BFGS iterations (``optimizer='adam'``: Adam steps), over all restarts.
        optimizer: ``'lbfgs'`` or ``'adam'``.
        learning_rate: Adam's step size.
        init_X_var: initial q(X) variances: a number for that constant, or ``None`` (the
            default) to draw each from U(0, 0.1) as GPy does (mean 0.05).  The issue's
            constant 0.1 gave 5 oil-flow 1-NN errors (median over 5 seeds) in both this
            library and GPy; GPy's draws gave 2 here (benchmarks/README.md).  Under the
            dynamical prior the variances start near 0.1 (or near the number given).
        init_noise_fraction: initial noise variance as a fraction of the (standardised) variance.
        time_kernel: the kernel over time stamps for the dynamical prior (default RBF whose
            length-scale starts at a tenth of the time span).
        transform_max_iter: L-BFGS steps per row when inferring latents of new rows.
        random_state: seed (initialisation of Z, Monte Carlo psi-statistics, sampling).
        progress: show a progress bar with the bound.

    Attributes:
        X_mean_, X_var_ (N, Q); Z_ (M, Q); kernel_; noise_var_ (original units, per column);
        relevance_ (Q,) inverse squared length-scales; history_ (bound per iteration, all
        restarts); n_iter_; converged_; elbo_ (the final bound, standardised units);
        time_kernel_ (dynamical prior only); jitter_ (added to Kuu's diagonal); fitted_ (the
        :class:`~gplvm.models.gplvm_family.fitted.FittedGPLVM` that every verb reads).
    """

    def __init__(self, n_components: int = 2, n_inducing: int = 30,
                 kernel: AbstractKernel | None = None, psi_rule=None, standardize: bool = True,
                 max_iter: int = 2000, optimizer: str = "lbfgs", learning_rate: float = 0.01,
                 init_X_var: Optional[float] = None, init_noise_fraction: float = 0.01,
                 time_kernel: AbstractKernel | None = None, transform_max_iter: int = 300,
                 random_state=0, progress: bool = True):
        self.n_components = n_components
        self.n_inducing = n_inducing
        self.kernel = kernel
        self.psi_rule = psi_rule
        self.standardize = standardize
        self.max_iter = max_iter
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.init_X_var = init_X_var
        self.init_noise_fraction = init_noise_fraction
        self.time_kernel = time_kernel
        self.transform_max_iter = transform_max_iter
        self.random_state = random_state
        self.progress = progress

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # ------------------------------------------------------------------ validation
    def _validate_fit_args(self, Y, times, groups):
        Y = as_2d_float(Y, "Y", allow_nan=True, min_rows=2)
        Q = self.n_components
        if not isinstance(Q, (int, np.integer)) or Q < 1:
            raise ValueError(f"n_components={Q!r} must be a positive integer")
        if not isinstance(self.n_inducing, (int, np.integer)) or self.n_inducing < 1:
            raise ValueError(f"n_inducing={self.n_inducing!r} must be a positive integer")
        if Y.shape[0] < max(Q + 1, 3):
            raise ValueError(f"Y has {Y.shape[0]} rows; a {Q}-dimensional latent space needs "
                             f"at least {max(Q + 1, 3)}")
        if self.standardize:
            check_no_constant_columns(Y)
        if self.init_X_var is not None and not (np.isfinite(self.init_X_var)
                                                and self.init_X_var > 0):
            raise ValueError(f"init_X_var={self.init_X_var!r}; give a positive number, or None "
                             f"for GPy's U(0, 0.1) draws")
        if self.optimizer not in ("lbfgs", "adam"):
            raise ValueError(f"optimizer={self.optimizer!r}; use 'lbfgs' or 'adam'")
        if times is not None:
            times = np.asarray(times, dtype=float).ravel()
            if times.shape[0] != Y.shape[0] or not np.all(np.isfinite(times)):
                raise ValueError(f"times must be {Y.shape[0]} finite time stamps, one per row "
                                 f"of Y; got shape {np.shape(times)}")
            if groups is not None and np.asarray(groups).ravel().shape[0] != Y.shape[0]:
                raise ValueError("groups must give one sequence label per row of Y")
        elif groups is not None:
            raise ValueError("groups labels independent sequences of the dynamical prior; pass "
                             "times as well")
        return Y, times

    def _standardisation(self, Y):
        if self.standardize:
            return np.nanmean(Y, axis=0), np.nanstd(Y, axis=0)
        return np.zeros(Y.shape[1]), np.ones(Y.shape[1])

    # ------------------------------------------------------------------ fit
    def fit(self, Y, y=None, *, times=None, groups=None):
        """Maximise the collapsed bound over q(X), Z and the hyper-parameters.

        Args:
            Y: (N, D) data; NaN marks a missing entry (left out of the bound).
            y: ignored (scikit-learn's unsupervised convention).
            times: (N,) time stamps for the dynamical prior (each latent dimension a GP in t).
            groups: (N,) sequence labels: independent sequences (block-diagonal time prior).
        """
        del y
        Y, times = self._validate_fit_args(Y, times, groups)
        Y_mean, Y_std = self._standardisation(Y)
        Ys = (Y - Y_mean) / Y_std
        key = as_key(self.random_state)
        Q, M = int(self.n_components), int(min(self.n_inducing, Y.shape[0]))
        X0, fracs = initial_latents(Ys, Q)
        Z0 = initial_inducing(X0, M, key)
        kernel = self.kernel if self.kernel is not None else RBF(
            lengthscale=jnp.asarray(1.0 / fracs), variance=1.0)
        noise0 = self.init_noise_fraction * float(np.nanvar(Ys))
        u = {"Z": jnp.asarray(Z0), "kernel": kernel.unconstrained(),
             "noise_var": inverse_softplus(jnp.asarray(noise0))}
        latent = self._latent_prior(times, groups, Y.shape[0])
        if times is None:
            u.update(latent.initial_params(X0, initial_variances(X0.shape, self.init_X_var, key)))
        else:
            u.update(latent.initial_params(X0, 0.1 if self.init_X_var is None
                                           else self.init_X_var))
        problem = Problem(jnp.asarray(np.nan_to_num(Ys)), collapsed.group_columns(Ys), latent,
                          kernel, resolve_rule(self.psi_rule, key), DenseRoute(),
                          initial_jitter(kernel, Z0))
        u, history, n_iter, converged, interrupted, problem = self._optimise(u, problem)
        self._set_fitted(u, problem, Y_mean, Y_std)
        self.history_ = -history
        self.n_iter_, self.converged_, self.interrupted_ = n_iter, converged, interrupted
        self.times_, self.groups_ = times, groups
        self._train_Y = Y
        self.n_features_in_ = Y.shape[1]
        return self

    def _latent_prior(self, times, groups, n_rows):
        if times is None:
            return IidLatent()
        span = float(np.ptp(times)) or 1.0
        time_kernel = self.time_kernel if self.time_kernel is not None else RBF(
            lengthscale=span / 10.0, variance=1.0)
        return DynamicalLatent(dynamical.sequence_layout(times, groups), time_kernel, n_rows)

    def _optimise(self, u, problem):
        """L-BFGS (or Adam) on the negative bound within ``max_iter`` iterations in all.

        When the bound turns non-finite the run restarts from the last finite iterate with the
        next jitter rung of :func:`gplvm.linalg.escalate_jitter` on Kuu (the library's one
        jitter policy); the history and iteration count span every restart.
        """
        fun = negative_bound if self.optimizer == "lbfgs" else negative_bound_keyed
        histories, n_done = [], 0
        while True:
            result = minimise(fun, u, method=self.optimizer, n_iter=self.max_iter - n_done,
                              learning_rate=self.learning_rate, progress=self.progress,
                              desc="BayesianGPLVM", args=(problem,))
            u = result.params
            histories.append(result.history)
            n_done += result.n_iter
            if n_done >= self.max_iter or result.converged or result.interrupted:
                break
            kernel = problem.kernel.from_unconstrained(u["kernel"])
            scale = float(jnp.mean(kernel.diag(u["Z"])))
            try:
                jitter = escalate_jitter(problem.jitter, scale, name="Kuu")
            except CholeskyError as err:
                warnings.warn(f"BayesianGPLVM: the bound stayed non-finite ({err}); keeping "
                              f"the last finite parameters", RuntimeWarning, stacklevel=3)
                break
            problem = problem._replace(jitter=jitter)
            warnings.warn(f"BayesianGPLVM: raising the Kuu jitter to {jitter:.1e} and "
                          f"continuing", RuntimeWarning, stacklevel=3)
        if (self.optimizer == "lbfgs" and n_done >= self.max_iter and not result.converged
                and not result.interrupted):
            warnings.warn(f"BayesianGPLVM: L-BFGS stopped at max_iter={self.max_iter} before "
                          f"the bound converged; raise max_iter", ConvergenceWarning,
                          stacklevel=3)
        return (u, np.concatenate(histories), n_done, bool(result.converged),
                bool(result.interrupted), problem)

    def _set_fitted(self, u, problem, Y_mean, Y_std):
        summary = fam.fitted_from(u, problem, Y_mean, Y_std)
        self.fitted_ = summary.fitted
        self.params_ = u
        self._problem = problem
        self.X_mean_, self.X_var_ = summary.X_mean, summary.X_var
        self.elbo_ = summary.bound
        self.jitter_ = problem.jitter

    @classmethod
    def _upgrade_fitted(cls, fitted: dict, format_version: int) -> dict:
        """Attributes of a file written before issue 11 (format 1), as today's."""
        return upgrade_format1(fitted) if format_version < 2 else fitted

    # ------------------------------------------------------------------ fitted values
    @property
    def kernel_(self):
        check_is_fitted(self, "fitted_")
        return self.fitted_.kernel

    @property
    def Z_(self):
        check_is_fitted(self, "fitted_")
        return np.asarray(self.fitted_.Z)

    @property
    def rule_(self):
        """The Ψ-statistic rule the bound used."""
        check_is_fitted(self, "fitted_")
        return self.fitted_.rule

    @property
    def Y_mean_(self):
        check_is_fitted(self, "fitted_")
        return self.fitted_.Y_mean

    @property
    def Y_std_(self):
        check_is_fitted(self, "fitted_")
        return self.fitted_.Y_std

    @property
    def noise_var_(self):
        """Noise variance per column, original units."""
        check_is_fitted(self, "fitted_")
        return float(self.fitted_.map.noise_var) * self.fitted_.Y_std**2

    @property
    def time_kernel_(self):
        check_is_fitted(self, "fitted_")
        latent = self._problem.latent
        return latent.fitted_time_kernel(self.params_) if isinstance(
            latent, DynamicalLatent) else None

    @property
    def relevance_(self):
        """Inverse squared length-scale of each latent dimension (ARD relevance)."""
        ell = getattr(self.kernel_, "lengthscale", None)
        if ell is None:
            raise AttributeError("the kernel has no length-scale, so no ARD relevance")
        return np.broadcast_to(1.0 / np.asarray(ell) ** 2, (self.n_components,)).copy()

    # ------------------------------------------------------------------ new rows
    def _standardise_new(self, Y):
        check_is_fitted(self, "fitted_")
        Y = as_2d_float(Y, "Y", allow_nan=True)
        if Y.shape[1] != self.n_features_in_:
            raise ValueError(f"Y has {Y.shape[1]} columns but the model was fitted on "
                             f"{self.n_features_in_}; pass rows with the same columns")
        return Y, (Y - self.Y_mean_) / self.Y_std_

    def _infer_new(self, Ys):
        """q(x*) of each standardised row, each row optimised on its own with the model fixed."""
        train_Ys = (self._train_Y - self.Y_mean_) / self.Y_std_
        X_start = nearest_training_latents(train_Ys, self.X_mean_, Ys)
        return infer_latents(self.fitted_, Ys, X_start, np.median(self.X_var_, axis=0),
                             self.transform_max_iter)

    def transform(self, Y, return_var: bool = False):
        """Posterior mean (and variance) of the latents of new rows, which may contain NaN."""
        X_mean, X_var, _ = self._infer_new(self._standardise_new(Y)[1])
        return (X_mean, X_var) if return_var else X_mean

    def fit_transform(self, Y, y=None, *, times=None, groups=None):
        return self.fit(Y, times=times, groups=groups).X_mean_

    def score(self, Y, y=None):
        """The lower bound on log p(Y*) of rows Y* with the model held fixed, in the original
        units of Y: the new-row bound at its optimum (:mod:`gplvm.objectives.new_rows`) minus
        Σ log Y_std_d over the observed entries (the Jacobian of the standardisation)."""
        Y, Ys = self._standardise_new(Y)
        bound = float(np.sum(self._infer_new(Ys)[2]))
        jacobian = float(np.sum(np.where(np.isnan(Y), 0.0, np.log(self.Y_std_))))
        return bound - jacobian

    # ------------------------------------------------------------------ prediction
    def _check_X(self, X):
        check_is_fitted(self, "fitted_")
        X = as_2d_float(X, "X")
        if X.shape[1] != self.n_components:
            raise ValueError(f"X has {X.shape[1]} columns but the latent space has "
                             f"{self.n_components}")
        return X

    def predict(self, X, return_var: bool = False):
        """Predictive mean (and variance, noise included) of Y at latent points X (N*, Q)."""
        X = self._check_X(X)
        return fam.predict(self.fitted_, X, return_var)

    def inverse_transform(self, X):
        """The predictive mean of Y at latent points X."""
        return self.predict(X)

    def impute(self, Y):
        """A copy of Y with its NaN entries replaced by posterior predictive means.

        The fill is E[f*] = ψ1(q(x*)) K_uu⁻¹ ū_d, which averages over the latents'
        uncertainty.  For the training data itself (same shape, same observed values) the fitted
        q(X) is used — under the dynamical prior it carries information from neighbouring
        frames; for other rows q(x*) is inferred with the model fixed (:meth:`transform`).
        """
        Y, Ys = self._standardise_new(Y)
        Y = Y.copy()
        if Y.shape == self._train_Y.shape and np.array_equal(Y, self._train_Y, equal_nan=True):
            X_mean, X_var = self.X_mean_, self.X_var_
        else:
            X_mean, X_var, _ = self._infer_new(Ys)
        filled = fam.expected_y(self.fitted_, X_mean, X_var)
        missing = np.isnan(Y)
        Y[missing] = filled[missing]
        return Y

    def sample(self, n_samples: int = 1, X=None, random_state=None):
        """Draw data from the fitted generative model: X ~ N(0, I) (or the given X), then
        f ~ q(f | X) jointly over the rows, then Gaussian noise.  Returns (Y, X)."""
        check_is_fitted(self, "fitted_")
        key = as_key(self.random_state if random_state is None else random_state)
        kx, kf, kn = jax.random.split(jax.random.fold_in(key, 104729), 3)
        if X is None:
            X = np.asarray(jax.random.normal(kx, (int(n_samples), self.n_components)))
        X = self._check_X(X)
        return fam.sample(self.fitted_, X, kf, kn), X

    def predict_times(self, t_new, sequence: int = 0, return_var: bool = False):
        """Latent trajectory and Y at new times of one training sequence (dynamical prior;
        seed 003 eq. 35).  Returns (X_mean, X_var, Y_mean[, Y_var])."""
        check_is_fitted(self, "fitted_")
        if not isinstance(self._problem.latent, DynamicalLatent):
            raise ValueError("predict_times needs a model fitted with times= (dynamical prior)")
        X_mean, X_var = self._problem.latent.predict(self.params_, t_new, sequence)
        out = (np.asarray(X_mean), np.asarray(X_var),
               fam.expected_y(self.fitted_, X_mean, X_var))
        if return_var:
            out = out + (self.predict(np.asarray(X_mean), return_var=True)[1],)
        return out

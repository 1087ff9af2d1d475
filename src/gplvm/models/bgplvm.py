"""``BayesianGPLVM``: the Bayesian GPLVM (Titsias & Lawrence 2010) for any kernel.

Collapsed bound in the stable form of seed 001 §B (:mod:`gplvm.objectives.collapsed`),
psi-statistics analytic where they exist and by the unscented transform otherwise (seed 004),
missing entries left out of the bound, an optional dynamical prior over time stamps
(seed 001 §E, seed 003 §2.2.1), and new-row inference with the model fixed (seed 003 eqs. 36–37,
:mod:`gplvm.objectives.new_rows`).
"""

from __future__ import annotations

import warnings
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from gplvm._random import as_key
from gplvm._validation import as_2d_float, check_no_constant_columns
from gplvm.inference import minimise
from gplvm.io import SaveMixin
from gplvm.registry import register
from gplvm.kernels import RBF, AbstractKernel
from gplvm.linalg import CholeskyError, inv_from_cholesky, safe_cholesky
from gplvm.models import _bgplvm_core as core
from gplvm.models._bgplvm_init import initial_inducing, initial_latents, initial_variances
from gplvm.models._common import check_is_fitted
from gplvm.objectives import collapsed, new_rows
from gplvm.priors import dynamical
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
        max_iter: L-BFGS iterations (``optimizer='adam'``: Adam steps).
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
        transform_max_iter: L-BFGS iterations when inferring latents of new rows.
        random_state: seed (initialisation of Z, Monte Carlo psi-statistics, sampling).
        progress: show a progress bar with the bound.

    Attributes:
        X_mean_, X_var_ (N, Q); Z_ (M, Q); kernel_; noise_var_ (original units, per column);
        relevance_ (Q,) inverse squared length-scales; history_ (negative bound per
        iteration); n_iter_; converged_; elbo_ (the final bound, standardised units);
        time_kernel_ (dynamical prior only); jitter_ (added to Kuu's diagonal).
    """

    def __init__(self, n_components: int = 2, n_inducing: int = 30,
                 kernel: AbstractKernel | None = None, psi_rule=None, standardize: bool = True,
                 max_iter: int = 2000, optimizer: str = "lbfgs", learning_rate: float = 0.01,
                 init_X_var: Optional[float] = None, init_noise_fraction: float = 0.01,
                 time_kernel: AbstractKernel | None = None, transform_max_iter: int = 300,
                 random_state=None, progress: bool = True):
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

    def _standardise(self, Y):
        if self.standardize:
            self.Y_mean_ = np.nanmean(Y, axis=0)
            self.Y_std_ = np.nanstd(Y, axis=0)
        else:
            self.Y_mean_, self.Y_std_ = np.zeros(Y.shape[1]), np.ones(Y.shape[1])
        return (Y - self.Y_mean_) / self.Y_std_

    # ------------------------------------------------------------------ fit
    def fit(self, Y, times=None, groups=None):
        """Maximise the collapsed bound over q(X), Z and the hyper-parameters.

        Args:
            Y: (N, D) data; NaN marks a missing entry (left out of the bound).
            times: (N,) time stamps for the dynamical prior (each latent dimension a GP in t).
            groups: (N,) sequence labels: independent sequences (block-diagonal time prior).
        """
        Y, times = self._validate_fit_args(Y, times, groups)
        Ys = self._standardise(Y)
        key = as_key(self.random_state)
        Q, M = int(self.n_components), int(min(self.n_inducing, Y.shape[0]))
        X0, fracs = initial_latents(Ys, Q)
        Z0 = initial_inducing(X0, M, key)
        kernel = self.kernel if self.kernel is not None else RBF(
            lengthscale=jnp.asarray(1.0 / fracs), variance=1.0)
        self.rule_ = _resolve_rule(self.psi_rule, kernel, key)
        groups_info = collapsed.group_columns(Ys)
        noise0 = self.init_noise_fraction * float(np.nanvar(Ys))
        u = {"Z": jnp.asarray(Z0), "kernel": kernel.unconstrained(),
             "noise_var": inverse_softplus(jnp.asarray(noise0))}
        layout, time_template = None, None
        if times is None:
            u["X_mean"] = jnp.asarray(X0)
            u["X_var"] = inverse_softplus(initial_variances(X0.shape, self.init_X_var, key))
        else:
            span = float(np.ptp(times)) or 1.0
            time_template = self.time_kernel if self.time_kernel is not None else RBF(
                lengthscale=span / 10.0, variance=1.0)
            layout = dynamical.sequence_layout(times, groups)
            u.update(_dynamic_init(time_template, layout, X0,
                                   0.1 if self.init_X_var is None else self.init_X_var))
            u["time_kernel"] = time_template.unconstrained()
        jitter = _initial_jitter(kernel, Z0)
        static = core.Static(jnp.asarray(np.nan_to_num(Ys)), groups_info, layout, jitter)
        u, result, static = self._optimise(u, kernel, time_template, static)
        self._set_fitted(u, kernel, time_template, static, result, Ys)
        self.times_, self.groups_ = times, groups
        self._train_Y = Y
        return self

    def _optimise(self, u, kernel, time_template, static):
        """L-BFGS (or Adam) on the negative bound; escalate the jitter if it turns non-finite."""
        fun = core.negative_bound if self.optimizer == "lbfgs" else core.negative_bound_keyed
        for _ in range(4):
            result = minimise(fun, u, method=self.optimizer, n_iter=self.max_iter,
                              learning_rate=self.learning_rate, progress=self.progress,
                              desc="BayesianGPLVM",
                              args=(kernel, time_template, self.rule_, static))
            u = result.params
            if result.n_iter >= self.max_iter or result.converged or result.interrupted:
                break
            # stopped on a non-finite bound: more jitter on Kuu, then continue from there
            static = static._replace(jitter=max(10 * static.jitter, 1e-8))
            warnings.warn(f"BayesianGPLVM: raising the Kuu jitter to {static.jitter:.1e} and "
                          f"continuing", RuntimeWarning, stacklevel=3)
        return u, result, static

    def _set_fitted(self, u, kernel, time_template, static, result, Ys):
        value, parts, (kern, noise_var, X_mean, X_var, _) = core.bound_and_parts_jit(
            u, kernel, time_template, self.rule_, static)
        U_mean, Sigma_u = core.optimal_q_u_jit(parts, static.groups, noise_var)
        Kuu_inv = inv_from_cholesky(parts.Lu)
        self.params_ = u
        self.X_mean_, self.X_var_ = np.asarray(X_mean), np.asarray(X_var)
        self.Z_ = np.asarray(u["Z"])
        self.kernel_ = kern
        self.noise_var_std_ = float(noise_var)
        self.noise_var_ = self.noise_var_std_ * self.Y_std_**2
        self.elbo_ = float(value)
        self.history_ = -result.history
        self.n_iter_, self.converged_ = result.n_iter, result.converged
        self.interrupted_ = result.interrupted
        self.jitter_ = static.jitter
        self.time_kernel_ = (time_template.from_unconstrained(u["time_kernel"])
                             if time_template is not None else None)
        self._static = static
        self._time_template = time_template
        self._fixed = new_rows.FixedModel(Kuu_inv @ U_mean,
                                          jnp.einsum("mk,gkl,ln->gmn", Kuu_inv, Sigma_u, Kuu_inv),
                                          Kuu_inv, static.groups.column_group,
                                          jnp.asarray(noise_var))
        self.n_features_in_ = Ys.shape[1]

    @property
    def relevance_(self):
        """Inverse squared length-scale of each latent dimension (ARD relevance)."""
        check_is_fitted(self, "kernel_")
        ell = getattr(self.kernel_, "lengthscale", None)
        if ell is None:
            raise AttributeError("the kernel has no length-scale, so no ARD relevance")
        return np.broadcast_to(1.0 / np.asarray(ell) ** 2, (self.n_components,)).copy()

    # ------------------------------------------------------------------ new rows
    def _check_Y_new(self, Y):
        check_is_fitted(self, "kernel_")
        Y = as_2d_float(Y, "Y", allow_nan=True)
        if Y.shape[1] != self.n_features_in_:
            raise ValueError(f"Y has {Y.shape[1]} columns but the model was fitted on "
                             f"{self.n_features_in_}")
        return (Y - self.Y_mean_) / self.Y_std_

    def _infer_new(self, Y):
        """Optimise q(X*) for new rows by the new-row bound with the model fixed."""
        from gplvm.models._bgplvm_transform import infer_new_rows

        return infer_new_rows(self, self._check_Y_new(Y))

    def transform(self, Y, return_var: bool = False):
        """Posterior mean (and variance) of the latents of new rows, which may contain NaN."""
        X_mean, X_var, _ = self._infer_new(Y)
        return (X_mean, X_var) if return_var else X_mean

    def fit_transform(self, Y, y=None, times=None, groups=None):
        return self.fit(Y, times=times, groups=groups).X_mean_

    def score(self, Y, y=None):
        """The lower bound on log p(Y*) for rows Y* with the model held fixed (standardised
        units): the new-row bound of :mod:`gplvm.objectives.new_rows` at its optimum."""
        return float(self._infer_new(Y)[2])

    # ------------------------------------------------------------------ prediction
    def predict(self, X, return_var: bool = False):
        """Predictive mean (and variance, noise included) of Y at latent points X (N*, Q)."""
        from gplvm.models._bgplvm_predict import predict_at

        return predict_at(self, X, return_var)

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
        from gplvm.models._bgplvm_predict import expected_f

        check_is_fitted(self, "kernel_")
        Y = np.array(Y, dtype=float)
        if self._is_training_data(Y):
            X_mean, X_var = self.X_mean_, self.X_var_
        else:
            X_mean, X_var, _ = self._infer_new(Y)
        filled = expected_f(self, X_mean, X_var) * self.Y_std_ + self.Y_mean_
        missing = np.isnan(Y)
        Y[missing] = filled[missing]
        return Y

    def _is_training_data(self, Y) -> bool:
        train = self._train_Y
        return Y.shape == train.shape and bool(np.array_equal(Y, train, equal_nan=True))

    def sample(self, n_samples: int = 1, X=None, random_state=None):
        """Draw data from the fitted generative model: X ~ N(0, I) (or the given X), then
        f ~ q(f | X) jointly over the rows, then Gaussian noise.  Returns (Y, X)."""
        from gplvm.models._bgplvm_predict import sample_from

        return sample_from(self, n_samples, X, random_state)

    def predict_times(self, t_new, sequence: int = 0, return_var: bool = False):
        """Latent trajectory and Y at new times of one training sequence (dynamical prior;
        seed 003 eq. 35).  Returns (X_mean, X_var, Y_mean[, Y_var])."""
        from gplvm.models._bgplvm_predict import predict_at_times

        return predict_at_times(self, t_new, sequence, return_var)


def _resolve_rule(psi_rule, kernel, key):
    """The psi-statistic rule object; a Monte Carlo rule without a key gets the model's."""
    from gplvm._pytree import replace
    from gplvm.expectations import resolve_rule
    from gplvm.expectations.rules import MonteCarlo

    rule = resolve_rule(psi_rule)
    if isinstance(rule, MonteCarlo) and rule.key is None:
        rule = replace(rule, key=jax.random.fold_in(key, 1))
    del kernel
    return rule


def _initial_jitter(kernel, Z0) -> float:
    """The jitter policy applied to the initial Kuu (0.0 unless it is needed)."""
    try:
        return float(safe_cholesky(np.asarray(kernel(jnp.asarray(Z0))), name="Kuu").jitter)
    except CholeskyError as err:
        raise ValueError(f"the initial inducing covariance cannot be factorised ({err}); "
                         f"check the kernel's hyper-parameters") from err


def _dynamic_init(time_template, layout, X0, init_var):
    """Start q(X) near the PCA means and Λ so that the variances are about ``init_var``.

    μ̄ = (K_t + I)⁻¹ X0 per sequence, a ridge solve: the mean K_t μ̄ is X0 smoothed along time.
    The plain solve K_t⁻¹ X0 is ill-conditioned for a smooth K_t and gives huge μ̄ and gradients.
    """
    N, Q = X0.shape
    mu_bar = np.zeros((N, Q))
    for s in range(layout.index.shape[0]):
        rows = np.asarray(layout.index[s])[np.asarray(layout.mask[s]) > 0]
        K = np.asarray(time_template(jnp.asarray(np.asarray(layout.times[s])[: len(rows), None])))
        mu_bar[rows] = np.linalg.solve(K + np.eye(len(rows)), X0[rows])
    # with S = (K⁻¹ + Λ)⁻¹ ≈ Λ⁻¹ when Λ ≫ K⁻¹, Λ = 1/init_var gives variances near init_var
    return {"mu_bar": jnp.asarray(mu_bar),
            "lam": inverse_softplus(jnp.full((N, Q), 1.0 / init_var))}

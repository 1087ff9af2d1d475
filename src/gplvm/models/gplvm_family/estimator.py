"""What every estimator of the GPLVM family shares: validation, initial values, and the verbs.

:class:`AbstractGPLVM` is abstract (STYLE.md 4): the final estimators (``BayesianGPLVM``,
``DPGPLVM``, ...) subclass it, store their own constructor arguments, and supply four hooks on
their fitted value — :meth:`_infer_new` (q(x*) of standardised rows, each row alone),
:meth:`_predict_fitted`, :meth:`_expected_y` and :meth:`_sample_y`.  The verbs of
docs/contract.md (``transform``, ``score``, ``predict``, ``inverse_transform``, ``impute``,
``sample``) are written once here, so each family member differs only where its model does.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from gplvm._params import POSITIVE_INT, RANDOM_STATE, check_argument, check_params
from gplvm._random import as_key
from gplvm._validation import (
    as_2d_float, as_float_array, check_magnitude, check_n_components, check_new_values,
    column_standardisation, dropped_columns_notice, uninformative_columns, _where,
)
from gplvm.inference import sharding
from gplvm.io import SaveMixin
from gplvm.kernels import RBF
from gplvm.models._common import check_is_fitted, in_model_precision, new_rows
from gplvm.models.gplvm_family.bound import Problem
from gplvm.models.gplvm_family.columns import kept_columns, standardise_all
from gplvm.models.gplvm_family.init import (initial_inducing, initial_jitter, initial_latents,
                                            initial_variances, resolve_rule)
from gplvm.models.gplvm_family.latent import DynamicalLatent, IidLatent
from gplvm.models.gplvm_family.new_rows import nearest_training_latents
from gplvm.models.gplvm_family.route import DenseRoute
from gplvm.models.gplvm_family.sharded_route import on_devices
from gplvm.objectives import collapsed
from gplvm.priors import dynamical
from gplvm.transforms import inverse_softplus


def check_inducing(n_inducing: int, n_rows: int, what: str) -> None:
    """More inducing inputs than rows add cost and no accuracy (Z would repeat rows)."""
    if n_inducing > n_rows:
        raise ValueError(f"n_inducing={n_inducing} exceeds the {n_rows} {what}; inducing "
                         f"inputs summarise the rows, so use at most as many: pass "
                         f"n_inducing={n_rows} or fewer")


#: ``n_components='auto'``: Q = min(AUTO_COMPONENTS, columns fitted, rows − 1), ARD chooses
AUTO_COMPONENTS = 10
#: a latent dimension is active (``active_components_``) when its ARD relevance is at least
#: this fraction of the largest: a length-scale √1000 ≈ 32 times the shortest, over which the
#: function varies by about (1/32)² of its variance across the prior's ±1 sd of that dimension
RELEVANCE_ACTIVE = 1e-3


def active_dimensions(relevance) -> np.ndarray:
    """Indices of the latent dimensions whose relevance is at least :data:`RELEVANCE_ACTIVE`
    times the largest, by decreasing relevance (ties in index order)."""
    relevance = np.asarray(relevance, dtype=float)
    active = np.flatnonzero(relevance >= RELEVANCE_ACTIVE * np.max(relevance))
    return active[np.argsort(-relevance[active], kind="stable")]


def ard_relevance(kernel, n_components: int) -> np.ndarray:
    """(Q,) inverse squared length-scales of a kernel (ARD relevance per latent dimension)."""
    ell = getattr(kernel, "lengthscale", None)
    if ell is None:
        raise AttributeError("the kernel has no length-scale, so no ARD relevance")
    return np.broadcast_to(1.0 / np.asarray(ell) ** 2, (n_components,)).copy()


#: the fitted value that every member of the family holds (docs/contract.md, "The fitted
#: value"); each final estimator's ``_fitted_fields`` is this and its own.  Its two private
#: fields are not derived from the rest: ``_train_Y``, the training data in original units
#: (``impute``'s exact test for them, the starts of new rows; None after an SVI fit of data
#: read from disk), and ``_problem``, the bound's data and settings (standardised Y, column
#: groups, latent prior, kernel template, Ψ rule and its key, jitter), which
#: ``predict_times`` and ``time_kernel_`` read (None after an SVI fit)
FAMILY_FITTED = ("n_features_in_", "feature_names_in_", "times_", "groups_", "_train_Y",
                 "_problem", "fitted_", "params_", "X_mean_", "X_var_", "elbo_", "jitter_",
                 "history_", "n_iter_", "converged_", "interrupted_")
#: the family's optional fields: the data's column names, which ``gplvm fit`` gives the model
FAMILY_OPTIONAL = ("feature_names_in_",)


class AbstractGPLVM(SaveMixin, TransformerMixin, BaseEstimator):
    """Shared surface of the GPLVM family (not instantiated; see the module docstring).

    Subclasses have the constructor arguments ``n_components``, ``n_inducing``, ``kernel``,
    ``psi_rule``, ``standardize``, ``init_X_var``, ``init_noise_fraction``, ``time_kernel``,
    ``transform_max_iter``, ``random_state`` and set ``fitted_`` (with ``Z``, ``rule``,
    ``Y_mean``, ``Y_std``), ``X_mean_``, ``X_var_``, ``_train_Y`` and ``n_features_in_`` in fit.
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # ------------------------------------------------------------------ fitting helpers
    def _validate_common(self, Y, times, groups):
        """Checks every family member needs, before any computation; returns (Y, times)."""
        check_params(self)
        Y = as_2d_float(Y, "Y", allow_nan=True, min_rows=2)
        check_magnitude(Y, "Y", "rescale Y (e.g. divide it by its largest entry) or drop "
                                "the entries")
        kept = ~uninformative_columns(Y)
        self._check_kept(Y, kept)
        self._resolved_components(Y.shape[0], int(kept.sum()), int((~kept).sum()))
        if times is not None:
            times = as_float_array(times, "times", "(n_samples,)").ravel()
            if times.shape[0] != Y.shape[0] or not np.all(np.isfinite(times)):
                raise ValueError(f"times must be {Y.shape[0]} finite time stamps, one per row "
                                 f"of Y; got shape {np.shape(times)}")
            if groups is not None and np.asarray(groups).ravel().shape[0] != Y.shape[0]:
                raise ValueError("groups must give one sequence label per row of Y")
        elif groups is not None:
            raise ValueError("groups labels independent sequences of the dynamical prior; pass "
                             "times as well")
        check_inducing(self.n_inducing, Y.shape[0], "rows of Y")
        return Y, times

    def _check_kept(self, Y, kept) -> None:
        """After the columns are kept out (:func:`gplvm._validation.uninformative_columns`)
        there must be columns left, and every row needs an observed entry in them."""
        name = type(self).__name__
        if not kept.any():
            raise ValueError(f"{name}: every column of Y is constant or has no observed entry; "
                             f"there is nothing to fit a latent space to")
        empty = np.isnan(Y[:, kept]).all(axis=1)
        if empty.any():
            raise ValueError(f"{name}: Y has {int(empty.sum())} rows observed only in constant "
                             f"columns (rows {_where(empty)}), which are kept out of the fit: "
                             f"drop those rows")

    def _resolved_components(self, n_rows: int, n_cols: int, n_dropped: int = 0) -> int:
        """Q of a fit on ``n_cols`` (fitted) columns and ``n_rows`` rows: ``n_components``, or
        for ``'auto'`` min(:data:`AUTO_COMPONENTS`, n_cols, n_rows − 1) with the default ARD
        kernel; checked by the library's one rule
        (:func:`gplvm._validation.check_n_components`)."""
        name = type(self).__name__
        Q = self.n_components
        if isinstance(Q, str):          # 'auto' (the only string the parameter rule lets by)
            kernel = getattr(self, "kernel", getattr(self, "latent_kernel", None))
            if kernel is not None:
                raise ValueError(f"{name}: n_components='auto' starts from "
                                 f"min({AUTO_COMPONENTS}, columns, rows - 1) dimensions and "
                                 f"lets the default ARD kernel switch off the unused ones; "
                                 f"with a kernel of your own give n_components=<an integer> "
                                 f"matching its length-scales")
            Q = max(min(AUTO_COMPONENTS, n_cols, n_rows - 1), 1)
        check_n_components(name, Q, n_rows, n_cols, n_dropped)
        return int(Q)

    def _check_devices(self, times) -> None:
        """``devices`` (when not None) names a mesh and the fit can split its rows over it;
        checked before any computation (:func:`gplvm.inference.sharding.devices_problem`)."""
        devices = getattr(self, "devices", None)
        if devices is None:
            return
        name = type(self).__name__
        check_params(self)      # the value itself: the devices rule of gplvm._params
        unsupported = [
            "the dynamical prior (times=) couples the rows through its time GP, so its rows "
            "are not split yet: pass devices=None" if times is not None else None,
            sharding.checkpoint_devices_problem(devices, getattr(self, "checkpoint", None)),
        ]
        for why in unsupported:
            if why is not None:
                raise ValueError(f"{name}: devices={devices!r}: {why}")

    def _standardisation(self, Y):
        """Column means and standard deviations (zeros and ones with ``standardize=False``),
        the columns kept out of the fit coded in them (:mod:`.columns`: their constant and 0,
        or NaN and NaN without an observed entry), with the one-line notice naming them."""
        dropped = uninformative_columns(Y)
        if dropped.any():
            dropped_columns_notice(type(self).__name__, Y, dropped)
        return column_standardisation(Y, dropped, self.standardize)

    def _initial(self, Ys, times, groups, key):
        """The initial unconstrained parameters and the :class:`Problem` of one kernel.

        PCA latents with unit-variance columns, Z by k-means, an ARD RBF whose length-scales
        start at 1/(fraction of variance) unless a kernel is given, noise at
        ``init_noise_fraction`` of the variance, q(X) under the iid or dynamical prior.  An
        estimator with a ``devices`` argument other than None gets its rows split over that
        mesh (:func:`.sharded_route.on_devices`; iid prior only, checked in fit).
        """
        Q, M = self._resolved_components(*Ys.shape), int(self.n_inducing)
        X0, fracs = initial_latents(Ys, Q)
        Z0 = initial_inducing(X0, M, key)
        kernel = self.kernel if self.kernel is not None else RBF(
            lengthscale=jnp.asarray(1.0 / fracs), variance=1.0)
        noise0 = self.init_noise_fraction * float(np.nanvar(Ys))
        u = {"Z": jnp.asarray(Z0), "kernel": kernel.unconstrained(),
             "noise_var": inverse_softplus(jnp.asarray(noise0))}
        latent = self._latent_prior(times, groups, Ys.shape[0])
        if times is None:
            u.update(latent.initial_params(X0, initial_variances(X0.shape, self.init_X_var, key)))
        else:
            u.update(latent.initial_params(X0, 0.1 if self.init_X_var is None
                                           else self.init_X_var))
        rule, jitter = resolve_rule(self.psi_rule, key), initial_jitter(kernel, Z0)
        devices = getattr(self, "devices", None)
        if devices is not None:     # the rows split over a mesh (BayesianGPLVM(devices=...))
            return u, on_devices(Problem(None, None, latent, kernel, rule, None, jitter), Ys,
                                 devices)
        problem = Problem(jnp.asarray(np.nan_to_num(Ys)), collapsed.group_columns(Ys), latent,
                          kernel, rule, DenseRoute(), jitter)
        return u, problem

    def _latent_prior(self, times, groups, n_rows):
        if times is None:
            return IidLatent()
        span = float(np.ptp(times)) or 1.0
        time_kernel = self.time_kernel if self.time_kernel is not None else RBF(
            lengthscale=span / 10.0, variance=1.0)
        return DynamicalLatent(dynamical.sequence_layout(times, groups), time_kernel, n_rows)

    # ------------------------------------------------------------------ fitted values
    @property
    def n_components_(self) -> int:
        """Q of the fit: ``n_components``, or the dimensions ``'auto'`` started from."""
        check_is_fitted(self, "fitted_")
        return int(np.shape(self.X_mean_)[1])

    @property
    def relevance_(self):
        """Inverse squared length-scale of each latent dimension of ``kernel_`` (ARD)."""
        return ard_relevance(self.kernel_, self.n_components_)

    @property
    def active_components_(self) -> np.ndarray:
        """Indices of the latent dimensions ARD keeps: relevance at least
        :data:`RELEVANCE_ACTIVE` (10⁻³) times the largest, by decreasing relevance (with
        ``n_components='auto'``, the dimensions the data use)."""
        return active_dimensions(self.relevance_)

    @property
    def dropped_columns_(self) -> np.ndarray:
        """Indices of the columns kept out of the fit (constant, or with no observed entry);
        they come back on output as their constant (variance 0) or NaN (docs/contract.md)."""
        check_is_fitted(self, "fitted_")
        return np.flatnonzero(~kept_columns(self.fitted_.Y_std))

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

    # ------------------------------------------------------------------ new rows
    @in_model_precision
    def _standardise_new(self, Y):
        Y = new_rows(self, Y, "fitted_")
        return Y, standardise_all(Y, self.Y_mean_, self.Y_std_)

    def _start_reference(self):
        """Training rows (original units) and their latents, to start new rows from."""
        return self._train_Y, self.X_mean_

    def _start_new(self, Ys):
        """Each new row starts at the latent of its nearest training row (observed columns),
        with the median fitted variance."""
        train_Y, X_train = self._start_reference()
        train_Ys = standardise_all(train_Y, self.Y_mean_, self.Y_std_)
        return (nearest_training_latents(train_Ys, X_train, Ys),
                np.median(self.X_var_, axis=0))

    def transform(self, Y, return_var: bool = False):
        """Posterior mean (and variance) of the latents of new rows, which may contain NaN;
        each row inferred on its own with the model fixed."""
        X_mean, X_var, _ = self._infer_new(self._standardise_new(Y)[1])
        return (X_mean, X_var) if return_var else X_mean

    def fit_transform(self, Y, y=None, *, times=None, groups=None):
        return self.fit(Y, times=times, groups=groups).X_mean_

    def score(self, Y, y=None):
        """The lower bound on log p(Y*) of rows Y* with the model held fixed, in the original
        units of Y: the new-row bound at its optimum minus Σ log Y_std_d over the observed
        entries (the Jacobian of the standardisation).  Columns kept out of the fit are not
        scored (a constant has no density to score them by)."""
        _, Ys = self._standardise_new(Y)
        bound = float(np.sum(self._infer_new(Ys)[2]))
        with np.errstate(divide="ignore", invalid="ignore"):
            log_std = np.log(self.Y_std_)
        jacobian = float(np.sum(np.where(np.isnan(Ys), 0.0, log_std)))
        return bound - jacobian

    # ------------------------------------------------------------------ prediction
    @in_model_precision
    def _check_X(self, X):
        check_is_fitted(self, "fitted_")
        X = as_2d_float(X, "X")
        if X.shape[1] != self.n_components_:
            raise ValueError(f"X has {X.shape[1]} columns but the latent space has "
                             f"{self.n_components_}")
        check_new_values(X, "X")
        return X

    def predict(self, X, return_var: bool = False):
        """Predictive mean (and variance, noise included) of Y at latent points X (N*, Q)."""
        X = self._check_X(X)
        return self._predict_fitted(X, return_var)

    def inverse_transform(self, X):
        """The predictive mean of Y at latent points X."""
        return self.predict(X)

    def impute(self, Y):
        """A copy of Y with its NaN entries replaced by posterior predictive means E[y*] under
        q(x*): the fitted q(X) for the training data itself (an exact comparison; under the
        dynamical prior it carries information from neighbouring frames), q(x*) inferred with
        the model fixed (:meth:`transform`) for other rows."""
        Y, Ys = self._standardise_new(Y)
        Y = Y.copy()
        train_Y = self._train_Y     # None after an SVI fit on a memmap (never loaded whole)
        if (train_Y is not None and Y.shape == train_Y.shape
                and np.array_equal(Y, train_Y, equal_nan=True)):
            X_mean, X_var = self.X_mean_, self.X_var_
        else:
            X_mean, X_var, _ = self._infer_new(Ys)
        filled = self._expected_y(X_mean, X_var)
        missing = np.isnan(Y)
        Y[missing] = filled[missing]
        return Y

    def sample(self, n_samples: int = 1, X=None, random_state=None):
        """Draw data from the fitted generative model: X ~ N(0, I) (or the given X), then the
        model's f given X jointly over the rows, then noise.  Returns (Y, X)."""
        check_argument(type(self).__name__, "n_samples", n_samples, POSITIVE_INT)
        if random_state is not None:
            check_argument(type(self).__name__, "random_state", random_state, RANDOM_STATE, "0")
        check_is_fitted(self, "fitted_")
        key = as_key(self.random_state if random_state is None else random_state)
        kx, kf, kn = jax.random.split(jax.random.fold_in(key, 104729), 3)
        if X is None:
            X = np.asarray(jax.random.normal(kx, (int(n_samples), self.n_components_)))
        X = self._check_X(X)
        return self._sample_y(X, kf, kn), X

    # ------------------------------------------------------------------ hooks
    def _infer_new(self, Ys):
        """(X_mean, X_var, per-row bound) of standardised rows, each row alone."""
        raise NotImplementedError

    def _predict_fitted(self, X, return_var):
        raise NotImplementedError

    def _expected_y(self, X_mean, X_var):
        raise NotImplementedError

    def _sample_y(self, X, key_f, key_noise):
        raise NotImplementedError

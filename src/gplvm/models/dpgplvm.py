"""``DPGPLVM``: the DP-GP-LVM (Lawrence, Ek & Campbell 2019; seed 001).

The output columns are clustered by a Dirichlet process over per-column kernel
hyper-parameters: the columns of one cluster share a mapping (ARD weights θ_t, noise precision
β_t), the number of clusters is inferred, and each cluster's ARD weights show which latent
dimensions it uses — shared and private parts of the latent space without fixed views.

A thin estimator over the GPLVM family's core (:mod:`gplvm.models.gplvm_family`), whose
:class:`~.estimator.AbstractGPLVM` supplies validation, initial values and the verbs: per atom the
collapsed bound of :mod:`.bound` with the columns weighted by their assignment probabilities
(:mod:`.atoms`), the DP terms and their coordinate updates (:mod:`.dp`), the schedule of
gradient steps, coordinate updates and merge moves (:mod:`.dp_fit`), q(X) under the iid or the
dynamical prior (:mod:`.latent`), prediction as a mixture over atoms (:mod:`.dp_fitted`) and
new-row inference with the model fixed (:mod:`.dp_rows`).
"""

from __future__ import annotations

import warnings
from typing import Optional

import jax.numpy as jnp
import numpy as np

from gplvm._params import (GPLVM_FAMILY, NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT,
                          choice, integer, pair)
from gplvm._validation import as_2d_float
from gplvm.io.legacy import upgrade_dpgplvm
from gplvm.kernels import AbstractKernel
from gplvm.models._checkpoint import ResumableMixin
from gplvm.models.fit_state import DPFitState
from gplvm.models.gplvm_family import columns
from gplvm.models.gplvm_family.variants.dp import dp_fit, dp_fitted, dp_init
from gplvm.models.gplvm_family.variants.dp.atoms import stack_atoms
from gplvm.models.gplvm_family.variants.dp.dp_rows import infer_latents
from gplvm.models.gplvm_family.estimator import (FAMILY_FITTED, FAMILY_OPTIONAL,
                                                 AbstractGPLVM, in_model_precision)
from gplvm.models.gplvm_family.variants.dp.dp_attributes import DPFittedAttributes
from gplvm.models.gplvm_family.variants.dp.dp_starts import DPStarts
# its home before issue 33, imported from here by earlier scripts
from gplvm.models.gplvm_family.variants.dp.missing_block import (  # noqa: F401
    missing_data_log_likelihood)
from gplvm.registry import register

#: the least jitter on K_uu's diagonal, relative to its mean diagonal
JITTER_FLOOR = 1e-6


@register("gplvm.DPGPLVM", estimator=True)
class DPGPLVM(DPStarts, DPFittedAttributes, ResumableMixin, AbstractGPLVM):
    """Dirichlet-process GPLVM: output columns clustered by the latent dimensions they use.

    Args:
        n_components: Q, the latent dimension.
        n_inducing: M, the inducing inputs (one set shared by every atom).
        truncation: T, the number of atoms of the truncated stick-breaking prior.
        kernel: the kernel template of every atom; ``None`` is an ARD RBF.
        psi_rule: the Ψ-statistic rule (as :class:`~gplvm.BayesianGPLVM`).
        standardize: centre and scale the columns of Y; results are in original units.
        alpha_prior: (s1, s2), the Gamma shape and rate of the concentration α (seed 001
            eq. 44).
        kernel_prior_scale: s_θ, the standard deviation of the log of every kernel
            hyper-parameter under the log-normal base distribution (median 1).
        noise_prior: (log β0, s_β), mean and standard deviation of the log noise precision.
        max_iter: L-BFGS steps in all (warm-up and sweeps; each accepted merge adds its
            refinement steps).
        n_warmup: L-BFGS steps at the random initial assignments before the first sweep.
        steps_per_update: L-BFGS steps between two rounds of coordinate updates.
        merge_every: sweeps between two rounds of merge moves (:mod:`.dp_fit`).
        merge_steps: L-BFGS steps that refine a proposed merge before it is judged.
        max_merge_trials: merge proposals per round.
        tol: a sweep that changes the bound by less than this (relative) ends the fit.
        init: ``'columns'`` — ``n_init_steps`` L-BFGS steps with one atom per column, then the
            columns grouped by their ARD profiles (:mod:`.dp_init`; needs a kernel with
            length-scales) — or ``'random'`` (Dirichlet(1) assignments, equal atoms).
        n_init_steps: L-BFGS steps of the per-column phase (not counted in ``max_iter``).
        n_init: independent starts (inducing inputs, q(X) variances and the initial clustering
            drawn afresh); the fit with the highest bound is kept (as scikit-learn's
            ``GaussianMixture(n_init=)``).  The bound has local optima in which one function's
            columns are split over atoms that each use part of its latent dimensions; a second
            or third start usually finds a higher bound without them
            (``benchmarks/reproduce/dpgplvm_synthetic.py --n-init``).
        init_X_var: initial q(X) variances (a number, or ``None`` for U(0, 0.1) draws).
        init_noise_fraction: initial noise variance of every atom (standardised units).
        time_kernel: the kernel over time stamps for the dynamical prior (``fit(times=)``).
        transform_max_iter: L-BFGS steps per new row.
        random_state: seed (inducing inputs, initial assignments, sampling).
        progress: show a progress bar.
        checkpoint: a file path: the model is saved there (:meth:`save`) between two sweeps at
            most every ``checkpoint_interval`` seconds and when the run ends or is interrupted
            (Ctrl-C), so a killed process loses at most that much work and the sweep in
            progress; ``gplvm.load(path).resume()`` finishes the run (and the remaining
            starts of ``n_init``) with exactly the parameters, history and predictions of an
            uninterrupted one.  A run stopped in the per-column phase or the warm-up resumes
            from the beginning of that start.  A file written mid-run holds the training data
            and has ``interrupted_`` set.
        checkpoint_interval: seconds between checkpoint writes (0: at every sweep).

    Attributes:
        assignments_: (D, T) φ, q(z_d) = Cat(φ_d).
        column_groups_: (D,) each column's most probable atom, relabelled
            0 … n_column_groups_ − 1 in the order of ``atoms_``.
        n_column_groups_: the number of used atoms (the most probable atom of at least one
            column).
        times_, groups_: the time stamps and sequence labels the fit was given (None without
            them), as in every estimator of the family (docs/contract.md, "One name per
            meaning").
        atoms_: the indices (into the T atoms) of the used atoms, by decreasing mass Σ_d φ_dt.
        relevance_: (n_column_groups_, Q) ARD weights (inverse squared length-scales) of the
            used atoms.
        kernels_: the T atoms' kernels (a tuple); kernel_: those of the used atoms.
        noise_var_: (D,) each column's noise variance Σ_t φ_dt σ²_t, original units.
        dropped_columns_: the columns kept out of the fit (constant, or never observed: the
            class :class:`~gplvm.BayesianGPLVM`'s rule, docs/contract.md); their
            ``assignments_`` row is 0, ``column_groups_`` −1, ``noise_var_`` 0 (constant) or
            NaN.
        n_components_: Q of the fit; active_components_: the latent dimensions some used
            atom keeps.
        X_mean_, X_var_ (N, Q); Z_ (M, Q); dp_state_ (:class:`~.dp.DPState`); elbo_ (the
        bound, standardised units); history_ (bound per accepted L-BFGS step; of the kept
        start when ``n_init`` > 1, as ``n_iter_``, ``converged_`` and ``n_merges_``); n_iter_;
        converged_; n_merges_; jitter_ (added to K_uu's diagonal: at least 10⁻⁶ of its mean
        diagonal, see ``JITTER_FLOOR``); fitted_ (what every verb reads).
    """

    #: the fitted value, what a file holds (docs/contract.md)
    _fitted_fields = (*FAMILY_FITTED, "dp_state_", "n_merges_")
    _optional_fields = FAMILY_OPTIONAL

    #: one rule per constructor argument (:mod:`gplvm._params`)
    _parameter_constraints = {**GPLVM_FAMILY, "truncation": integer(2),
        "alpha_prior": pair("(shape s1, rate s2)", both_positive=True),
        "kernel_prior_scale": POSITIVE,
        "noise_prior": pair("(log median precision, log-scale sd)",
        both_positive=False),
        "n_warmup": NON_NEGATIVE_INT, "steps_per_update": POSITIVE_INT,
        "merge_every": POSITIVE_INT, "merge_steps": POSITIVE_INT,
        "max_merge_trials": NON_NEGATIVE_INT, "tol": NON_NEGATIVE,
        "init": choice("columns", "random"), "n_init_steps": NON_NEGATIVE_INT,
        "n_init": POSITIVE_INT}

    def __init__(self, n_components: int = 10, n_inducing: int = 25, truncation: int = 10,
                 kernel: AbstractKernel | None = None, psi_rule=None, standardize: bool = True,
                 alpha_prior=(1.0, 1.0), kernel_prior_scale: float = 3.0,
                 noise_prior=(0.0, 3.0), max_iter: int = 3000, n_warmup: int = 100,
                 steps_per_update: int = 20, merge_every: int = 20, merge_steps: int = 40,
                 max_merge_trials: int = 3, tol: float = 1e-7, init: str = "columns",
                 n_init_steps: int = 300, n_init: int = 1, init_X_var: Optional[float] = None,
                 init_noise_fraction: float = 0.01,
                 time_kernel: AbstractKernel | None = None, transform_max_iter: int = 300,
                 random_state=0, progress: bool = True, checkpoint=None,
                 checkpoint_interval: float = 60.0):
        self.n_components = n_components
        self.n_inducing = n_inducing
        self.truncation = truncation
        self.kernel = kernel
        self.psi_rule = psi_rule
        self.standardize = standardize
        self.alpha_prior = alpha_prior
        self.kernel_prior_scale = kernel_prior_scale
        self.noise_prior = noise_prior
        self.max_iter = max_iter
        self.n_warmup = n_warmup
        self.steps_per_update = steps_per_update
        self.merge_every = merge_every
        self.merge_steps = merge_steps
        self.max_merge_trials = max_merge_trials
        self.tol = tol
        self.init = init
        self.n_init_steps = n_init_steps
        self.n_init = n_init
        self.init_X_var = init_X_var
        self.init_noise_fraction = init_noise_fraction
        self.time_kernel = time_kernel
        self.transform_max_iter = transform_max_iter
        self.random_state = random_state
        self.progress = progress
        self.checkpoint = checkpoint
        self.checkpoint_interval = checkpoint_interval

    # ------------------------------------------------------------------ fit
    def fit(self, Y, y=None, *, times=None, groups=None):
        """Maximise the DP-GP-LVM bound (:mod:`gplvm.models.gplvm_family.variants.dp.dp_fit`).

        Args:
            Y: (N, D) data; NaN marks a missing entry (left out of the bound).
            y: ignored (scikit-learn's unsupervised convention).
            times: (N,) time stamps for the dynamical prior (seed 001 §E).
            groups: (N,) sequence labels: independent sequences of the dynamical prior.
        """
        del y
        Y, times = self._validate_common(Y, times, groups)
        if (self.init == "columns" and self.kernel is not None
                and not dp_init.has_ard(self.kernel)):
            warnings.warn(f"init='columns' groups the columns by their ARD length-scales, and "
                          f"{type(self.kernel).__name__} has none: the fit starts from random "
                          f"assignments instead (pass init='random' to say so, or a kernel with "
                          f"length-scales such as RBF to group by them)", UserWarning,
                          stacklevel=2)
        Y_mean, Y_std = self._standardisation(Y)
        self.times_, self.groups_ = times, groups
        self._train_Y = Y
        self.n_features_in_ = Y.shape[1]
        # what resume() needs to go on: the data, the start in progress and where it stands
        # (its last Sweep; None before the first), and the best finished start
        # (Y_mean, Y_std code the columns kept out of the fit: gplvm_family.columns)
        self._fit_state_ = DPFitState(columns.standardise_kept(Y, Y_mean, Y_std), Y_mean, Y_std)
        return self._run()

    def _initial(self, Ys, times, groups, key):
        """The family's initial values (:meth:`AbstractGPLVM._initial`) with T equal atoms and a
        jitter of at least ``JITTER_FLOOR`` × K_uu's mean diagonal."""
        u, problem = super()._initial(Ys, times, groups, key)
        T = int(self.truncation)
        u["kernel"] = stack_atoms([u["kernel"]] * T)
        u["noise_var"] = jnp.full(T, u["noise_var"])
        # Without a floor, a finite but numerically singular K_uu (many inducing inputs in few
        # active dimensions) gives a bound far above any attainable value, which the optimiser
        # then climbs.
        scale = float(jnp.mean(problem.kernel.diag(u["Z"])))
        return u, problem._replace(jitter=max(problem.jitter, JITTER_FLOOR * scale))

    def _set_fitted(self, result: dp_fit.FitResult, priors, interrupted: bool):
        u, state, problem = result.u, result.state, result.problem
        Y_mean, Y_std = self._fit_state_.Y_mean, self._fit_state_.Y_std
        kept = columns.kept_columns(Y_std)
        self.fitted_ = columns.put_back(dp_fitted.fitted_from(u, problem, state.phi,
                                                              Y_mean[kept], Y_std[kept]),
                                        Y_mean, Y_std)
        self.params_, self.dp_state_, self._problem = u, state, problem
        X_mean, X_var, _ = problem.latent.marginals(u)
        self.X_mean_, self.X_var_ = np.asarray(X_mean), np.asarray(X_var)
        self.elbo_ = dp_fit.bound(u, problem, state, priors)
        self.history_ = result.history
        self.n_iter_, self.converged_ = int(result.n_iter), bool(result.converged)
        self.interrupted_, self.n_merges_ = bool(interrupted), int(result.n_merges)
        self.jitter_ = problem.jitter

    @classmethod
    def _upgrade_fitted(cls, fitted: dict, format_version: int, params: dict | None = None) -> dict:
        """Attributes of a file of an older format, as today's (:mod:`gplvm.io.legacy`: format 4
        and below kept the sequence labels as ``sequence_groups_``, today ``groups_``)."""
        return upgrade_dpgplvm(fitted, format_version)

    # ------------------------------------------------------------------ hooks
    @in_model_precision
    def _infer_new(self, Ys):
        X_start, X_var_start = self._start_new(Ys)
        return infer_latents(self.fitted_, Ys, X_start, X_var_start, self.transform_max_iter)

    @in_model_precision
    def _predict_fitted(self, X, return_var):
        """The moments of the mixture Σ_t φ_dt N(m_dt, v_dt) over atoms."""
        return dp_fitted.predict(self.fitted_, X, return_var)

    @in_model_precision
    def _expected_y(self, X_mean, X_var):
        """E[y*] = Σ_t φ_dt ψ1(q(x*)) V_t."""
        return dp_fitted.expected_y(self.fitted_, X_mean, X_var)

    @in_model_precision
    def _sample_y(self, X, key_f, key_noise):
        """z_d ~ Cat(φ_d), each column from its atom's q(f | X) jointly over the rows, noise."""
        return dp_fitted.sample(self.fitted_, X, key_f, key_noise)

    # ------------------------------------------------------------------ prediction
    def predict_uncertain(self, X_mean, X_var):
        """Predictive mean and variance of Y under q(x*) = N(X_mean, diag X_var), e.g. from
        ``transform(Y, return_var=True)``: exact moments of each atom's sparse GP, mixed."""
        X_mean, X_var = self._check_X(X_mean), as_2d_float(X_var, "X_var")
        if X_var.shape != X_mean.shape or np.any(X_var <= 0):
            raise ValueError(f"X_var must hold positive variances of shape {X_mean.shape}")
        fitted = self.fitted_
        return dp_fitted.predict_uncertain(fitted, X_mean, X_var)

    def plot_factorisation(self, ax=None, **kwargs):
        """Columns × latent dimensions shaded by each column's ARD weights (seed 001 Fig. 6);
        see :func:`gplvm.models._dp_plot.plot_factorisation`."""
        from gplvm.models._dp_plot import plot_factorisation

        return plot_factorisation(self, ax=ax, **kwargs)

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

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from gplvm._random import as_key
from gplvm._validation import as_2d_float
from gplvm.inference.run import CheckpointTimer
from gplvm.kernels import AbstractKernel
from gplvm.models._checkpoint import ResumableMixin, holding_checkpoint
from gplvm.models._common import check_is_fitted
from gplvm.models.gplvm_family import columns, dp, dp_fit, dp_fitted, dp_init
from gplvm.models.gplvm_family.atoms import AtomPrior, atom, stack_atoms
from gplvm.models.gplvm_family.dp_rows import infer_latents
from gplvm.models.gplvm_family.estimator import (AbstractGPLVM, active_dimensions,
                                                  ard_relevance, in_model_precision)
from gplvm.models.gplvm_family.missing_block import block_log_likelihood
from gplvm.registry import register

#: the least jitter on K_uu's diagonal, relative to its mean diagonal
JITTER_FLOOR = 1e-6
#: the constructor arguments that make up the fit's :class:`~.dp_fit.Schedule`
_SCHEDULE_ARGS = ("max_iter", "n_warmup", "steps_per_update", "merge_every", "merge_steps",
                  "max_merge_trials", "tol")


@register("gplvm.DPGPLVM", estimator=True)
class DPGPLVM(ResumableMixin, AbstractGPLVM):
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
        """Maximise the DP-GP-LVM bound (:mod:`gplvm.models.gplvm_family.dp_fit`).

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
        self._resume_ = {"Ys": columns.standardise_kept(Y, Y_mean, Y_std), "Y_mean": Y_mean,
                         "Y_std": Y_std,
                         "start": 0, "at": None, "best": None}
        return self._run()

    def _priors(self) -> dp_fit.Priors:
        return dp_fit.Priors(AtomPrior(float(self.kernel_prior_scale),
                                       float(self.noise_prior[0]), float(self.noise_prior[1])),
                             dp.DPPrior(*map(float, self.alpha_prior)))

    @holding_checkpoint
    def _run(self):
        """The starts from ``_resume_`` on; keeps the one with the highest bound, sets the
        fitted attributes and saves the checkpoint."""
        priors, key = self._priors(), as_key(self.random_state)
        result = self._resume_["best"]
        best = -np.inf if result is None else dp_fit.bound(result.u, result.problem,
                                                           result.state, priors)
        interrupted = False
        for start in range(self._resume_["start"], int(self.n_init)):
            # the first start uses the key itself, so n_init=1 is the single fit
            key_start = key if start == 0 else jax.random.fold_in(key, 7919 + start)
            try:
                candidate = self._fit_once(key_start, priors)
            except KeyboardInterrupt:
                if result is None:
                    raise
                warnings.warn(f"DPGPLVM: interrupted in start {start + 1} of {self.n_init}; "
                              f"keeping the best of the {start} finished", RuntimeWarning,
                              stacklevel=3)
                interrupted = True
                break
            value = dp_fit.bound(candidate.u, candidate.problem, candidate.state, priors)
            if result is None or value > best:
                result, best = candidate, value
            if candidate.interrupted:
                interrupted = True
                break
            self._resume_ = {**self._resume_, "start": start + 1, "at": None, "best": result}
        if not (result.converged or interrupted):
            warnings.warn(f"DPGPLVM: stopped at max_iter={self.max_iter} before the bound "
                          f"converged; raise max_iter", ConvergenceWarning, stacklevel=3)
        self._set_fitted(result, priors, interrupted)
        self._end_run(interrupted)
        return self

    def _fit_once(self, key, priors) -> dp_fit.FitResult:
        """One start: initial values from ``key``, the column phase, then the sweeps; or the
        rest of the start from the :class:`~.dp_fit.Sweep` in ``_resume_``."""
        schedule = dp_fit.Schedule(**{k: getattr(self, k) for k in _SCHEDULE_ARGS})
        def write(at):
            self._set_fitted(dp_fit.FitResult(at.u, at.state, at.problem, at.history,
                                              at.n_iter, False, True, at.n_merges),
                             priors, True)
            self.save(self.checkpoint)

        timer = CheckpointTimer(None if self.checkpoint is None else write,
                                self.checkpoint_interval)

        def record(at):
            self._resume_ = {**self._resume_, "at": at}
            timer.after_step(at)

        at = self._resume_["at"]
        if at is not None:
            return dp_fit.resume(at, priors, schedule, self.progress, record)
        Ys = self._resume_["Ys"]
        u, problem = self._initial(Ys, self.times_, self.groups_, key)
        if self.init == "columns" and dp_init.has_ard(problem.kernel) and self.n_init_steps:
            seed = int(jax.random.randint(jax.random.fold_in(key, 3), (), 0, 2**31 - 1))
            u, phi0 = dp_init.initial_from_columns(u, problem, priors.atom,
                                                   int(self.n_init_steps), seed)
        else:
            phi0 = np.asarray(jax.random.dirichlet(jax.random.fold_in(key, 3),
                                                   jnp.ones(self.truncation), (Ys.shape[1],)))
        return dp_fit.maximise(u, problem, dp.initial_state(phi0, priors.dp), priors,
                               schedule, self.progress, record)

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
        Y_mean, Y_std = self._resume_["Y_mean"], self._resume_["Y_std"]
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
        """Format 4 and below kept the sequence labels as ``sequence_groups_`` (today
        ``groups_``, as in every estimator of the family; the column groups are
        ``column_groups_``)."""
        fitted = dict(fitted)
        if format_version < 5 and "sequence_groups_" in fitted:
            fitted["groups_"] = fitted.pop("sequence_groups_")
        return fitted

    # ------------------------------------------------------------------ fitted values
    @property
    def assignments_(self):
        """(D, T) φ: the probability that column d follows atom t (a row of zeros for a column
        kept out of the fit: it follows no atom)."""
        check_is_fitted(self, "fitted_")
        return np.asarray(self.fitted_.phi)

    @property
    def atoms_(self):
        """Indices of the used atoms, by decreasing mass Σ_d φ_dt."""
        phi = self.assignments_
        fitted = columns.kept_columns(self.fitted_.Y_std)
        used = np.unique(np.argmax(phi[fitted], axis=1))
        return used[np.argsort(-phi.sum(0)[used], kind="stable")]

    @property
    def n_column_groups_(self):
        return int(len(self.atoms_))

    @property
    def column_groups_(self):
        """(D,) each column's most probable atom, as an index into ``atoms_`` (−1 for a column
        kept out of the fit)."""
        order = np.full(self.truncation, -1, dtype=int)
        order[self.atoms_] = np.arange(self.n_column_groups_)
        groups = order[np.argmax(self.assignments_, axis=1)]
        return np.where(columns.kept_columns(self.fitted_.Y_std), groups, -1)

    @property
    def kernels_(self):
        check_is_fitted(self, "fitted_")
        return tuple(atom(self.fitted_.kernels, t) for t in range(self.truncation))

    @property
    def kernel_(self):
        """The kernels of the used atoms, in the order of ``atoms_``."""
        kernels = self.kernels_
        return tuple(kernels[t] for t in self.atoms_)

    @property
    def relevance_(self):
        """(n_column_groups_, Q) ARD weights (inverse squared length-scales) of the used atoms."""
        return np.array([ard_relevance(kernel, self.n_components_) for kernel in self.kernel_])

    @property
    def active_components_(self):
        """Indices of the latent dimensions some used atom keeps (relevance at least 10⁻³ of
        that atom's largest, :func:`~.estimator.active_dimensions`), by decreasing largest
        relevance over the used atoms."""
        relevance = self.relevance_
        active = np.unique(np.concatenate([active_dimensions(r) for r in relevance]))
        return active[np.argsort(-relevance.max(0)[active], kind="stable")]

    @property
    def noise_var_(self):
        """(D,) Σ_t φ_dt σ²_t in original units."""
        check_is_fitted(self, "fitted_")
        noise = np.asarray(self.fitted_.maps.noise_var)
        return self.assignments_ @ noise * self.fitted_.Y_std**2

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


def missing_data_log_likelihood(model, Y_test, Y_truth):
    """Seed 001 §G's score of a fitted DPGPLVM or BayesianGPLVM on test rows with a missing
    block: q(x*) of each row from its observed columns (``transform``, model fixed), then the
    log-likelihood of the true missing values under the predictive mean and (diagonal)
    covariance at q(x*) (:mod:`gplvm.models.gplvm_family.missing_block`).

    Args:
        model: a fitted :class:`DPGPLVM` or :class:`~gplvm.BayesianGPLVM`.
        Y_test: (N*, D) rows with NaN in the missing block.
        Y_truth: (N*, D) the same rows complete.

    Returns:
        (log-likelihood summed over the missing entries, predictive mean, predictive variance).
    """
    check_is_fitted(model, "fitted_")
    Y_test, Y_truth = as_2d_float(Y_test, "Y_test", allow_nan=True), as_2d_float(Y_truth,
                                                                                "Y_truth")
    if Y_test.shape != Y_truth.shape:
        raise ValueError(f"Y_test {Y_test.shape} and Y_truth {Y_truth.shape} must be the same "
                         f"rows")
    fitted = model.fitted_
    if not isinstance(fitted, dp_fitted.FittedDPGPLVM):
        fitted = dp_fitted.from_single(fitted)
    X_mean, X_var = model.transform(Y_test, return_var=True)
    return block_log_likelihood(fitted, X_mean, X_var, Y_test, Y_truth)


"""The DP-GP-LVM's run: ``n_init`` starts, each maximised by :mod:`.dp_fit`, the one with the
highest bound kept; checkpoints and ``resume()`` from where a start stands (issue 16, item 4;
the estimator's docstring, ``DPGPLVM``, says what a file written mid-run holds).  A mixin of
the estimator, so that its module keeps to the estimator."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from gplvm._random import as_key
from gplvm.inference.run import CheckpointTimer
from gplvm.models._checkpoint import holding_checkpoint
from gplvm.models.gplvm_family.variants.dp import dp, dp_fit, dp_init
from gplvm.models.gplvm_family.variants.dp.atoms import AtomPrior

#: the constructor arguments that make up :class:`.dp_fit.Schedule`
SCHEDULE_ARGS = ("max_iter", "n_warmup", "steps_per_update", "merge_every", "merge_steps",
                 "max_merge_trials", "tol")


class DPStarts:
    """``_run`` (the starts from ``_fit_state_`` on) and one start, ``_fit_once``, of a
    ``DPGPLVM``: it has the constructor arguments, ``_fit_state_`` (a
    :class:`~gplvm.models.fit_state.DPFitState` set by ``fit``), ``_initial``
    and ``_set_fitted``."""

    def _priors(self) -> dp_fit.Priors:
        return dp_fit.Priors(AtomPrior(float(self.kernel_prior_scale),
                                       float(self.noise_prior[0]), float(self.noise_prior[1])),
                             dp.DPPrior(*map(float, self.alpha_prior)))

    @holding_checkpoint
    def _run(self):
        """The starts from ``_fit_state_`` on; keeps the one with the highest bound, sets the
        fitted attributes and saves the checkpoint."""
        priors, key = self._priors(), as_key(self.random_state)
        result = self._fit_state_.best
        best = -np.inf if result is None else dp_fit.bound(result.u, result.problem,
                                                           result.state, priors)
        interrupted = False
        for start in range(self._fit_state_.start, int(self.n_init)):
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
            self._fit_state_ = self._fit_state_._replace(start=start + 1, at=None, best=result)
        if not (result.converged or interrupted):
            warnings.warn(f"DPGPLVM: stopped at max_iter={self.max_iter} before the bound "
                          f"converged; raise max_iter", ConvergenceWarning, stacklevel=3)
        self._set_fitted(result, priors, interrupted)
        self._end_run(interrupted)
        return self

    def _fit_once(self, key, priors) -> dp_fit.FitResult:
        """One start: initial values from ``key``, the column phase, then the sweeps; or the
        rest of the start from the :class:`~.dp_fit.Sweep` in ``_fit_state_``."""
        schedule = dp_fit.Schedule(**{k: getattr(self, k) for k in SCHEDULE_ARGS})

        def write(at):
            self._set_fitted(dp_fit.FitResult(at.u, at.state, at.problem, at.history,
                                              at.n_iter, False, True, at.n_merges),
                             priors, True)
            self.save(self.checkpoint)

        timer = CheckpointTimer(None if self.checkpoint is None else write,
                                self.checkpoint_interval)

        def record(at):
            self._fit_state_ = self._fit_state_._replace(at=at)
            timer.after_step(at)

        at = self._fit_state_.at
        if at is not None:
            return dp_fit.resume(at, priors, schedule, self.progress, record)
        Ys = self._fit_state_.Ys
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

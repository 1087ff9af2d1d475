"""The Bayesian GPLVM's collapsed fit as a run: the optimiser on the negative bound within
``max_iter`` iterations on the library's jitter ladder (:mod:`.jitter_ladder`), its
checkpoints and ``resume()`` from the optimiser's state (issue 16, item 4), and the data rows
of a fit on several devices laid out again after a checkpoint.  A mixin of
:class:`gplvm.BayesianGPLVM`, so that its module keeps to the estimator."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from gplvm.inference import minimise
from gplvm.models._checkpoint import holding_checkpoint
from gplvm.models.gplvm_family import columns
from gplvm.models.gplvm_family.bound import negative_bound, negative_bound_keyed
from gplvm.models.gplvm_family.jitter_ladder import climb
from gplvm.models.gplvm_family.sharded_route import off_mesh, on_devices, on_mesh
from gplvm.objectives import collapsed


class CollapsedRun:
    """``_run`` from ``_fit_state_`` (a :class:`~gplvm.models.fit_state.CollapsedFitState`
    set by ``fit``: the start, the histories of earlier restarts and the optimiser state), the
    checkpoints' record and the rows of a fit on devices; the estimator has ``_set_fitted``,
    ``_train_Y`` and the constructor arguments."""

    @holding_checkpoint
    def _run(self):
        """Optimise from ``_fit_state_``, set the fitted attributes and save the checkpoint."""
        run = self._fit_state_
        u, history, n_iter, converged, interrupted, problem = self._optimise(run)
        self._finish(u, problem, (run.Y_mean, run.Y_std), history, n_iter, converged,
                     interrupted)
        self._end_run(interrupted)
        return self

    def _finish(self, u, problem, Y_scale, history, n_iter, converged, interrupted):
        self._set_fitted(u, problem, *Y_scale)
        self.history_ = -history
        self.n_iter_, self.converged_, self.interrupted_ = n_iter, converged, interrupted

    def _optimise(self, run):
        """L-BFGS (or Adam) on the negative bound within ``max_iter`` iterations in all, on
        the library's jitter ladder (:func:`.gplvm_family.jitter_ladder.climb`).  ``run`` is
        ``_fit_state_``: the start (``u``, ``problem``), the histories of earlier restarts and
        the optimiser state to continue from; on Ctrl-C it is updated for :meth:`resume`.
        """
        fun = negative_bound_keyed if self.optimizer == "adam" else negative_bound

        def rung(u, problem, state, n_iter, histories):
            options = self._checkpointing(self._recorder(problem, histories), state)._replace(
                learning_rate=self.learning_rate)
            return minimise(fun, u, args=(problem,), method=self.optimizer, n_iter=n_iter,
                            progress=self.progress, desc="BayesianGPLVM", options=options)

        ladder = climb(rung, run.u, self._with_rows(run), run.state, run.earlier,
                       int(self.max_iter), "BayesianGPLVM")
        result = ladder.result
        if result.interrupted:      # Ctrl-C: keep where this run stands for resume()
            self._fit_state_ = run._replace(u=ladder.u, problem=off_mesh(ladder.problem),
                                            earlier=tuple(ladder.histories[:-1]),
                                            state=result.state)
        if (self.optimizer != "adam" and ladder.n_done >= self.max_iter
                and not result.converged and not result.interrupted):
            warnings.warn(f"BayesianGPLVM: L-BFGS stopped at max_iter={self.max_iter} before "
                          f"the bound converged; raise max_iter", ConvergenceWarning,
                          stacklevel=4)
        return (ladder.u, np.concatenate(ladder.histories), ladder.n_done,
                bool(result.converged), bool(result.interrupted), ladder.problem)

    def _with_rows(self, run):
        """The resume point's problem with its rows: a fit on devices keeps its resume point
        without them (:func:`~.sharded_route.off_mesh`, so that a checkpoint or an interrupted fit can be
        saved); they are split again over ``devices`` (one pass over the standardised data),
        or, with ``devices=None`` now, the problem is rebuilt on one device (the same fit up to
        the order of the additions)."""
        problem = run.problem
        if on_mesh(problem) or problem.Y0 is not None:
            return problem
        Ys = columns.standardise_kept(self._train_Y, run.Y_mean, run.Y_std)
        if self.devices is None:
            return problem._replace(Y0=jnp.asarray(np.nan_to_num(Ys)),
                                    groups=collapsed.group_columns(Ys))
        return on_devices(problem, Ys, self.devices)

    def _recorder(self, problem, histories):
        """``minimise``'s checkpoint (:meth:`ResumableMixin._checkpointing` saves after it): a
        model of the current iterate, flagged interrupted, that resume() continues from the
        optimiser's state."""
        earlier = tuple(histories)

        def record(state):
            self._fit_state_ = self._fit_state_._replace(problem=off_mesh(problem),
                                                         earlier=earlier, state=state)
            history = np.concatenate([*earlier, state.history])
            self._finish(state.params, problem, (self._fit_state_.Y_mean,
                                                 self._fit_state_.Y_std), history,
                         len(history), False, True)

        return record

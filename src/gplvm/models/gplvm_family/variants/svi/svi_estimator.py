"""The stochastic variational path of :class:`gplvm.BayesianGPLVM` (``inference='svi'``):
its fit from a resume point, its checkpoints, and the rows a resumed run reads.

The maths and the loop are :mod:`.svi_bound`, :mod:`.svi_init` and :mod:`.svi_fit`; this
mixin is the estimator's side of them (issue 33, "thin estimators"): it starts a run (a
:class:`~gplvm.models.fit_state.SviFitState` of :func:`.svi_fit.start_run`), runs it with the
checkpoints written (:meth:`SviMixin._run_svi`), sets the fitted attributes of its result and
finds the rows again when a run is resumed — in this process the rows it read
(:data:`_SVI_ROWS`), from a file the data passed to ``resume(Y)``, checked to be the data the
fit read.
"""

from __future__ import annotations

import weakref

import numpy as np

from gplvm._random import as_key
from gplvm.data.minibatch import RowSource, out_of_core
from gplvm.models._checkpoint import holding_checkpoint
from gplvm.models.fit_state import SviFitState
from gplvm.models.gplvm_family import columns
from gplvm.models.gplvm_family.variants.svi import svi_fit, svi_init
from gplvm.models.gplvm_family.variants.svi.svi_bound import fitted_from_svi

#: the rows each SVI fit of this process reads, so that ``resume()`` after Ctrl-C needs no data
#: argument (a file cannot hold a memmap or a backed AnnData; the entry goes with the model)
_SVI_ROWS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def forget_rows(model) -> None:
    """Drop the rows an earlier SVI fit of ``model`` read (a new fit is starting)."""
    _SVI_ROWS.pop(model, None)


class SviMixin:
    """``BayesianGPLVM(inference='svi')``'s fit, run, fitted attributes and resumed rows
    (module docstring); the estimator keeps ``resume(Y)``, which routes here."""

    def _fit_svi(self, Y, times, groups):
        """``inference='svi'``: Adam over minibatches (:mod:`.svi_fit`), from a
        resume point kept in ``_fit_state_`` (an :class:`SviFitState`) while the run is
        unfinished."""
        rows_of, train_Y, batch_size = svi_init.svi_data(self, Y, times, groups)
        vars(self).pop("_fit_state_", None)     # an earlier run's resume point goes first
        _SVI_ROWS.pop(self, None)
        N, D = rows_of.source.shape
        start = svi_fit.start_run(self, rows_of, N, batch_size, as_key(self.random_state))
        self.times_ = self.groups_ = None
        self._train_Y, self.n_features_in_ = train_Y, D
        # a memmap is not kept: new rows start from the latents of a subsample of its rows
        self._start_index = (None if train_Y is not None else
                             np.linspace(0, N - 1, min(N, svi_init.INIT_ROWS)).astype(int))
        self._start_Y = None if train_Y is not None else rows_of.source.rows(self._start_index)
        self._fit_state_ = start
        _SVI_ROWS[self] = rows_of
        return self._run_svi(rows_of)

    @holding_checkpoint
    def _run_svi(self, rows_of):
        """Run from ``_fit_state_`` to ``max_iter`` epochs, checkpointing as it goes.  The
        loop of :mod:`.svi_fit` carries the :class:`SviFitState` from step to step and hands
        each committed one to ``_fit_state_``, so that it is where the run stands however the
        run ends (each step is committed whole or not at all)."""

        def reached(state):
            self._fit_state_ = state

        def write(state):       # a checkpoint: the model of this step, flagged interrupted
            reached(state)
            self._set_svi(svi_fit.result_of(state, np.nan, True, self.devices is not None),
                          rows_of)
            self.save(self.checkpoint)

        result = svi_fit.run_svi(self, rows_of, rows_of.source.shape[0], self._fit_state_,
                                 int(self.max_iter), reached=reached,
                                 checkpoint=None if self.checkpoint is None else write)
        self._set_svi(result, rows_of)
        if not result.interrupted:              # nothing left to resume: let the rows go
            _SVI_ROWS.pop(self, None)
        self._end_run(result.interrupted)
        return self

    def _set_svi(self, result, rows_of):
        """The fitted attributes of an SVI result (:class:`svi_fit.SviResult`)."""
        kept = columns.kept_columns(rows_of.Y_std)
        fitted = fitted_from_svi(result.g, result.setup, int(kept.sum()),
                                 rows_of.Y_mean[kept], rows_of.Y_std[kept])
        self.fitted_ = columns.put_back(fitted, rows_of.Y_mean, rows_of.Y_std)
        self.params_, self._problem, self.jitter_ = result.g, None, result.setup.jitter
        self.X_mean_, self.X_var_ = np.array(result.X_mean), result.X_var
        self.elbo_, self.history_, self.n_iter_ = result.bound, result.history, result.n_epochs
        self.converged_, self.interrupted_ = False, result.interrupted

    def _check_same_rows(self, source) -> None:
        """``resume(Y)``: Y must be the data the fit read, not only of its shape -- the rows the
        fit kept (a memmap's subsample ``_start_Y``, or the in-memory data) must come back bit
        for bit, else the resumed run would continue on other data."""
        index = getattr(self, "_start_index", None)
        if index is not None and getattr(self, "_start_Y", None) is not None:
            kept, given = self._start_Y, source.rows(index)
            what = f"{len(index)} rows spread over the data"
        elif self._train_Y is not None:
            kept, given = self._train_Y, source.rows(np.arange(source.shape[0]))
            what = "the data"
        else:
            return
        if not np.array_equal(np.asarray(kept), np.asarray(given), equal_nan=True):
            raise ValueError(f"resume(Y): Y is not the data this fit read ({what} differ from "
                             f"the ones it kept); pass the same data, or fit afresh on new "
                             f"data")

    def _svi_rows(self, run: SviFitState, Y):
        """The standardised rows an unfinished SVI run reads: ``Y`` when given (checked against
        the fit's shape), else the ones this process fitted, else the in-memory data kept."""
        N, D = run.X_mean.shape[0], int(self.n_features_in_)
        if Y is None:
            known = _SVI_ROWS.get(self)
            if known is not None:
                return known
            if self._train_Y is None:
                raise ValueError("this SVI fit read its rows from disk (a memmap, an h5py "
                                 "dataset or a backed AnnData), which a checkpoint does not "
                                 "hold: pass the same data again, resume(Y)")
            source = RowSource(self._train_Y)
        else:
            source = out_of_core(Y)
            if source is None:
                source = RowSource(self._validate_common(Y, None, None)[0])
            if source.shape != (N, D):
                raise ValueError(f"resume(Y): the fit read data of shape {(N, D)}; got "
                                 f"{source.shape}: pass the same data")
            self._check_same_rows(source)
        rows_of = svi_init.Standardised(source, run.Y_mean, run.Y_std, bool(run.has_missing))
        _SVI_ROWS[self] = rows_of
        return rows_of

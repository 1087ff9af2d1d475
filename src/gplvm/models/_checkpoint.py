"""Checkpoint and resume of the estimators fitted by optimisation (issue 16, item 4).

An estimator built with ``checkpoint=path`` saves itself there (:meth:`gplvm.io.SaveMixin.save`,
written atomically) while it fits: at most every ``checkpoint_interval`` seconds and when the run
ends or is interrupted (Ctrl-C), so a killed process loses at most that much work (plus, for a
loop checkpointed between its own steps, the step in progress).  What the run needs to go on is
kept in the attribute ``_fit_state_``, the estimator's registered
:mod:`~gplvm.models.fit_state` NamedTuple, saved with the model (the file's ``fit_state``): the
start, the data and the optimiser's state at the last checkpoint.
``gplvm.load(path).resume()`` continues from it and gives the result of an uninterrupted run
with the same seed bit for bit, because the resumed run replays the same compiled steps on the
same numbers.  A finished fit drops ``_fit_state_``.

Every fit's loop is :func:`gplvm.inference.run.run` (issue 33), and every checkpoint write is
timed by its one :class:`~gplvm.inference.run.CheckpointTimer`: inside
:func:`gplvm.inference.minimise`, which hands its :class:`~gplvm.inference.optimise.OptimState`
to the callback of :meth:`ResumableMixin._checkpointing` (``BayesianGLM``, ``BayesianGPLVM``,
``StructuredGPLVM``), and between the steps of the other loops (``DPGPLVM``'s sweeps, the
minibatches of ``BayesianGPLVM(inference='svi')``, the RFLVM's blocks of sweeps).
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any, Callable

from gplvm.inference.optimise import OptimOptions, OptimState
from gplvm.models._common import check_is_fitted

_HELD: dict = {}    # resolved checkpoint path -> [lock file descriptor, depth]


class CheckpointInUseError(RuntimeError):
    """Another process is writing the same checkpoint file."""


@contextlib.contextmanager
def checkpoint_lock(path):
    """Hold the checkpoint ``path`` for this process while a fit writes it: an advisory lock
    (``fcntl.flock``) on the file ``.<name>.lock`` beside it, which the system releases when
    the process ends, however it ends.  Two fits given one ``checkpoint=`` would write it in
    turn, and a resume after a crash could continue the other one's run; the second is
    refused at once, naming the process that holds the file.  Re-entrant within a process;
    nothing to do for ``path=None`` or where ``fcntl`` does not exist.

    Raises:
        CheckpointInUseError: another process holds ``path``.
    """
    try:
        import fcntl
    except ImportError:     # pragma: no cover - not POSIX
        fcntl = None
    if path is None or fcntl is None:
        yield
        return
    key = os.path.realpath(os.fspath(path))
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    folder, base = os.path.split(key)
    os.makedirs(folder, exist_ok=True)
    fd = os.open(os.path.join(folder, f".{base}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise CheckpointInUseError(
            f"checkpoint {path} is being written by another process (pid {holder}); two fits "
            f"writing one file would each resume the other's run: give this fit its own "
            f"checkpoint= path, or wait for that process to end") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    _HELD[key] = [fd, 1]
    try:
        yield
    finally:
        del _HELD[key]
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def holding_checkpoint(run: Callable) -> Callable:
    """Decorate an estimator's ``_run``: it runs holding :func:`checkpoint_lock` of the
    estimator's ``checkpoint``."""
    @functools.wraps(run)
    def locked(self, *args, **kwargs):
        with checkpoint_lock(getattr(self, "checkpoint", None)):
            return run(self, *args, **kwargs)

    return locked


class ResumableMixin:
    """``resume()`` and the checkpoint writes of an estimator whose ``fit`` stores ``_fit_state_``
    and calls ``_run()``, which fits from ``_fit_state_`` and ends with :meth:`_end_run`.

    The estimator has the constructor arguments ``checkpoint`` (a path or None) and
    ``checkpoint_interval`` (seconds), and ``save`` (:class:`gplvm.io.SaveMixin`).
    """

    #: an attribute every fitted model has (``resume`` of an unfitted one raises NotFittedError)
    _fitted_attribute = "fitted_"

    def resume(self, Y=None):
        """Finish an interrupted (or checkpointed) fit from its stored state: the result equals
        an uninterrupted fit's bit for bit (the estimator's ``checkpoint`` argument says when
        it cannot).

        Typical use: ``gplvm.load(path).resume()`` after a run with ``checkpoint=path`` was
        killed, or ``model.resume()`` after Ctrl-C.  A finished fit is returned unchanged.

        Args:
            Y: the data again, for a fit that read them from disk and so could not keep them
                (``BayesianGPLVM(inference='svi')`` on a memmap or a backed AnnData); every
                other fit keeps its data: leave it None.  Every estimator's ``resume`` has this
                signature (docs/contract.md).
        """
        check_is_fitted(self, self._fitted_attribute)
        refuse_data(self, Y)
        return self._run() if self._resumable() else self

    def _resumable(self) -> bool:
        """Whether a run was stopped before its end (``_fit_state_`` holds where)."""
        return getattr(self, "_fit_state_", None) is not None

    def _checkpointing(self, record: Callable[[Any], None],
                       start: OptimState | None = None) -> OptimOptions:
        """The :class:`~gplvm.inference.OptimOptions` of a run of
        :func:`gplvm.inference.minimise` that continues from ``start`` (None: from its
        parameters) and checkpoints every ``checkpoint_interval`` seconds: ``record(state)``
        sets the fitted attributes of the iterate (flagged interrupted) and ``_fit_state_``, then
        the model is saved.  An estimator adds its own options with ``_replace``."""
        def write(state):
            record(state)
            self.save(self.checkpoint)

        return OptimOptions(start=start, checkpoint=None if self.checkpoint is None else write,
                            checkpoint_interval=float(self.checkpoint_interval))

    def _end_run(self, interrupted: bool) -> None:
        """After a run: a finished one keeps nothing to resume (nor the data held for it);
        either is saved to ``checkpoint``."""
        if not interrupted:
            vars(self).pop("_fit_state_", None)
        if self.checkpoint is not None:
            self.save(self.checkpoint)


def refuse_data(model, Y) -> None:
    """``resume(Y)`` with data, on a fit that keeps its own: a ValueError saying so."""
    if Y is not None:
        raise ValueError(f"{type(model).__name__}.resume(Y) takes data only for a fit that read "
                         f"them from disk (BayesianGPLVM(inference='svi') on a memmap or a "
                         f"backed AnnData); this fit keeps its data: call resume() without "
                         f"arguments")

"""The one run loop of every fit (issue 33, item 1): :func:`run` over pure steps.

A fit is a sequence of steps ``step(key, state) -> (state, info)`` (blackjax's kernels,
optax's updates): an L-BFGS iteration, a minibatch of the stochastic variational GPLVM, a
sweep of the DP-GP-LVM, a block of MCMC sweeps.  :func:`run` takes them one after another and
owns everything around them, once for all fits:

* **progress** — one tqdm bar (:class:`Progress`) with a timed "compiling" phase, the steps
  done and the step's ``info`` summarised as its postfix;
* **checkpoints** — one timer (:class:`CheckpointTimer`): ``checkpoint(state)`` after a step
  at most every ``interval`` seconds (after every step when 0), so a killed process loses at
  most that much work;
* **Ctrl-C** — one rule: a ``KeyboardInterrupt`` while a step computes discards that step
  and ends the run with the state before it, flagged ``interrupted``; one arriving while
  the step's result is being committed (:func:`atomic`) waits until the commit is whole, so
  the state is never half updated.  ``interrupt='raise'`` re-raises instead (after the
  commit), for callers that stop their own outer loop;
* **stopping** — ``stop(state, info)`` after a step ends the run early (convergence).

Keys: with ``key`` given, step i (0-based, counted from the start of the run however often it
was resumed) gets ``jax.random.fold_in(key, i)``, so the result depends on the key only, not on
where a run was interrupted and resumed (``start``); without one it gets None (deterministic
steps, or steps that carry their own key in the state).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Any, Callable, NamedTuple, Optional

import jax
from tqdm.auto import tqdm

__all__ = ["CheckpointTimer", "Hooks", "Progress", "RunResult", "atomic", "run"]


class RunResult(NamedTuple):
    """What :func:`run` returns.

    Attributes:
        state: the state after the last committed step.
        infos: the ``info`` of every committed step of this call, in order.
        n_done: steps done in all (``start`` included).
        interrupted: Ctrl-C ended the run.
        stopped: ``stop`` ended the run before ``n`` steps.
    """

    state: Any
    infos: list
    n_done: int
    interrupted: bool
    stopped: bool


class Progress:
    """One tqdm bar on stderr: a "compiling" phase timed with its elapsed seconds, then the
    steps (``initial`` of ``total`` already done), the latest summary as the postfix.  Once
    compiling took 0.05 s or more, the postfix also shows ``compiled=<seconds>``, and the
    bar's clock leaves the compiling out, so that its rate counts steps only."""

    def __init__(self, total: float, desc: str, enabled: bool = True, initial: float = 0,
                 **tqdm_kwargs):
        self.desc, self.compile_s = desc, 0.0
        self.bar = tqdm(total=total, initial=initial, desc=desc, disable=not enabled,
                        leave=False, dynamic_ncols=True, **tqdm_kwargs)

    @contextlib.contextmanager
    def compiling(self):
        """Show "<desc> (compiling)", refreshed every 0.25 s while XLA compiles; the seconds
        are added to ``compile_s``."""
        self.bar.set_description(f"{self.desc} (compiling)")
        done = threading.Event()
        ticker = threading.Thread(target=self._tick_while, args=(done,), daemon=True)
        start = time.perf_counter()
        if not self.bar.disable:
            ticker.start()
        try:
            yield
        finally:
            done.set()
            if ticker.is_alive():
                ticker.join()
            self.compile_s += time.perf_counter() - start
            self.bar.unpause()          # the step rate counts steps, not compiling
            self.bar.set_description(self.desc)
            if self._compiled():
                self.bar.set_postfix(self._compiled(), refresh=False)

    def _tick_while(self, done):
        while not done.wait(0.25):
            self.bar.refresh()

    def advance(self, n: float = 1, postfix: Optional[dict] = None) -> None:
        """``n`` more steps done; ``postfix`` (name -> value) shown beside the bar."""
        if postfix:
            self.bar.set_postfix({**postfix, **self._compiled()}, refresh=False)
        self.bar.update(n)

    def _compiled(self) -> dict:
        """``compiled=<seconds>`` for the postfix, once compiling took a noticeable time."""
        return {"compiled": f"{self.compile_s:.1f}s"} if self.compile_s >= 0.05 else {}

    def close(self) -> None:
        self.bar.close()


class CheckpointTimer:
    """Calls ``write(state)`` at most every ``interval`` seconds (every call when 0); with
    ``write=None`` it never does."""

    def __init__(self, write: Optional[Callable[[Any], None]], interval: float):
        self.write, self.interval = write, float(interval)
        self.last = time.monotonic()

    def due(self) -> bool:
        """Whether a write is due now (the clock restarts when it is)."""
        if self.write is None or time.monotonic() - self.last < self.interval:
            return False
        self.last = time.monotonic()
        return True

    def after_step(self, state: Any) -> None:
        """Write ``state`` if a write is due (``state`` may be a zero-argument callable that
        builds it, so that nothing is built when none is)."""
        if self.due():
            self.write(state() if callable(state) else state)


class _Held:
    caught = False


@contextlib.contextmanager
def atomic():
    """Hold Ctrl-C back until the block ends, so the updates inside it are made all together
    or not at all; a held one is raised as ``KeyboardInterrupt`` when the block ends.  Only
    Python's own handler (the one that raises ``KeyboardInterrupt``), in the main thread, is
    held back: an ignored SIGINT or a handler of the user's is left as it is."""
    held, previous = _Held(), None
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        previous = signal.default_int_handler

        def hold(signum, frame):
            held.caught = True

        signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if held.caught:
        raise KeyboardInterrupt


def _replace(state, new):
    return new


class Hooks(NamedTuple):
    """What :func:`run` does around each step, besides taking it.

    Attributes:
        progress: the bar to advance by one per step, with ``info`` as its postfix when it is
            a dict; None: no bar.
        checkpoint: the timer that writes the state after a step when due; None: no writes.
        stop: ``stop(state, info)`` after a committed step: True ends the run.
        commit: ``commit(state, new) -> state``, run with Ctrl-C held back (:func:`atomic`):
            for states partly kept in place (host arrays written row by row).  By default the
            step's result is the next state.
    """

    progress: Optional[Progress] = None
    checkpoint: Optional[CheckpointTimer] = None
    stop: Optional[Callable[[Any, Any], bool]] = None
    commit: Callable[[Any, Any], Any] = _replace


def run(step: Callable[[Any, Any], tuple], state: Any, n: int, *, key=None, start: int = 0,
        hooks: Hooks = Hooks(), interrupt: str = "keep") -> RunResult:
    """Steps ``start``, ..., ``n − 1`` of ``step`` from ``state`` (module docstring).

    Args:
        step: ``step(key, state) -> (new, info)``; ``new`` is what ``hooks.commit`` makes the
            next state from (by default the next state itself).
        state: the state before step ``start``.
        n: the steps of the whole run (``start`` of them done already).
        key: a ``jax.random`` key (step i gets ``fold_in(key, i)``), or None.
        start: steps done before this call (resuming).
        hooks: the bar, the checkpoint timer, the stopping test and the commit (:class:`Hooks`).
        interrupt: ``'keep'`` returns the state before the interrupted step, ``'raise'``
            re-raises ``KeyboardInterrupt`` (the state is then whole but not returned).

    Returns:
        :class:`RunResult`.
    """
    progress, checkpoint, stop, commit = hooks
    if interrupt not in ("keep", "raise"):
        raise ValueError(f"interrupt={interrupt!r}; use 'keep' or 'raise'")
    infos, i, interrupted, stopped = [], int(start), False, False
    try:
        while i < n:
            new, info = step(None if key is None else jax.random.fold_in(key, i), state)
            with atomic():
                state = commit(state, new)
                infos.append(info)
                i += 1
            if progress is not None:
                progress.advance(1, info if isinstance(info, dict) else None)
            if checkpoint is not None:
                checkpoint.after_step(state)
            if stop is not None and stop(state, info):
                stopped = True
                break
    except KeyboardInterrupt:
        if interrupt == "raise":
            raise
        interrupted = True
    return RunResult(state, infos, i, interrupted, stopped)

"""The library's jitter policy around an optimiser run: restart on the next rung.

When the collapsed bound turns non-finite (a Cholesky of Kuu failing in round-off), the run
restarts from the last finite iterate with the next jitter rung of
:func:`gplvm.linalg.escalate_jitter` on Kuu; the histories and the iteration count span every
restart.  A bound that is non-finite at the start itself (many inducing points in few latent
dimensions make Kuu singular to round-off, e.g. M = 100 in Q = 2) climbs the same ladder from
the start; only when the ladder ends without a finite bound is the start's error raised.
:func:`climb` is that loop for any estimator of the family (issue 33, "the jitter ladder
becomes a step wrapper in the GPLVM core"); the estimator supplies one rung's run.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, NamedTuple

import jax.numpy as jnp
import numpy as np

from gplvm.inference.optimise import NonFiniteObjectiveError, OptimResult
from gplvm.linalg import CholeskyError, escalate_jitter


class Ladder(NamedTuple):
    """Where :func:`climb` ended: the parameters and problem (with its last jitter), the
    history of every rung, the iterations of them all and the last rung's result."""

    u: Any
    problem: Any
    histories: list
    n_done: int
    result: OptimResult


def _kernel(u):
    """The unconstrained parameters of the kernel of K_uu in ``u`` (one kernel's)."""
    return u["kernel"]


def climb(rung: Callable[..., OptimResult], u, problem, state, histories: list,
          max_iter: int, owner: str, kernel_of: Callable[[Any], Any] = _kernel) -> Ladder:
    """Run ``rung(u, problem, state, n_iter, histories)`` (an optimiser run of at most
    ``n_iter`` iterations, continuing from ``state`` when not None, that may raise
    :class:`NonFiniteObjectiveError`), restarting on the next jitter rung while the bound turns
    non-finite, until ``max_iter`` iterations in all (those of ``histories``, earlier runs,
    included), convergence or Ctrl-C (module docstring).  A rung is relative to the mean
    diagonal of K_uu at ``u["Z"]`` under the kernel ``kernel_of(u)`` (unconstrained; by
    default ``u["kernel"]``; the DP-GP-LVM, whose atoms share one jitter, passes its first
    atom's).

    Raises:
        NonFiniteObjectiveError: no rung gave a finite bound at the start.

    Warns:
        RuntimeWarning: at every raised jitter, and when the ladder ends (the last finite
            parameters are kept).
    """
    histories = list(histories)
    n_done = sum(len(h) for h in histories)
    start_error = None      # the bound is non-finite at the start, at every jitter so far
    while True:
        try:
            result = rung(u, problem, state, max_iter - n_done, histories)
        except NonFiniteObjectiveError as err:
            if n_done == 0:         # no finite point yet: the next rung, from the start
                start_error = err
            result = err.result     # the next jitter rung from the last finite point
        else:
            start_error = None
        u, state = result.params, None
        histories.append(result.history)
        n_done += result.n_iter
        if n_done >= max_iter or result.converged or result.interrupted:
            break
        kernel = problem.kernel.from_unconstrained(kernel_of(u))
        scale = float(jnp.mean(kernel.diag(u["Z"])))
        try:
            if not np.isfinite(scale):      # no rung is finite: the ladder would not end
                raise CholeskyError(f"the kernel's variance at Z is {scale}")
            jitter = escalate_jitter(problem.jitter, scale, name="Kuu")
        except CholeskyError as err:
            if start_error is not None:     # no rung gave a finite start
                raise start_error from err
            warnings.warn(f"{owner}: the bound stayed non-finite ({err}); keeping the last "
                          f"finite parameters", RuntimeWarning, stacklevel=5)
            break
        problem = problem._replace(jitter=jitter)
        warnings.warn(f"{owner}: raising the Kuu jitter to {jitter:.1e} and continuing",
                      RuntimeWarning, stacklevel=5)
    return Ladder(u, problem, histories, n_done, result)

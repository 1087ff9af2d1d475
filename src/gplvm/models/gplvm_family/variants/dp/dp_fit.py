r"""Maximising the DP-GP-LVM bound: gradient steps interleaved with exact coordinate updates,
and merge moves.

One *sweep* is

1. the exact coordinate updates φ → (a, b) → (w1, w2) of :func:`.dp.coordinate_ascent`, with
   F_d(θ_t) from :func:`.atoms.atom_terms` at the current u;
2. L-BFGS steps (:func:`gplvm.inference.minimise`) on u — q(X), Z and the atoms (θ_t, β_t) —
   with the DP parameters fixed (the DP terms do not depend on u): ``steps_per_update`` of
   them, doubled after every sweep that left each column's most probable atom unchanged (up to
   ``max_steps_factor`` times as many) and back to ``steps_per_update`` when one changes.  Each
   run starts L-BFGS afresh, which wastes its curvature estimate; once the clustering has
   settled, longer runs let q(X) and the ARD weights converge.

Both steps raise the bound (L-BFGS keeps its best iterate).  Sweeps start after ``n_warmup``
L-BFGS steps at the initial φ, so that the atoms, which start equal, first move apart under the
random initial assignments.

*Merge moves* (Hughes & Sudderth 2013, for DP mixtures).  Coordinate ascent moves one column at
a time, so a function whose columns were split between two atoms early stays split: moving one
column lowers the bound even when moving them all raises it.  A merge proposes giving all of atom
j's mass to atom i (the atom whose kernel fits the union better by the current F), updates
q(V), q(α), refines u for ``merge_steps`` L-BFGS steps, and is accepted only if the whole bound
is then higher than before the proposal — so the bound never decreases.  Pairs are tried in the
order of their bound change before refinement; a round stops at the first accepted merge or
after ``max_merge_trials`` proposals.

*Checkpoints* (issue 16, item 4) are taken between sweeps, where the whole state of the fit is a
:class:`Sweep` (every L-BFGS run starts afresh, so no optimiser memory is lost there):
:func:`maximise` hands one to ``checkpoint`` before every sweep, and :func:`resume` continues
from one with exactly the iterates of the uninterrupted fit.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, NamedTuple

import numpy as np

from gplvm.inference import minimise
from gplvm.inference.run import Hooks, Progress
from gplvm.inference.run import run as loop
from gplvm.models.gplvm_family.bound import Problem
from gplvm.models.gplvm_family.jitter_ladder import climb
from gplvm.models.gplvm_family.variants.dp import atoms, dp
from gplvm.registry import register


class Schedule(NamedTuple):
    """How the bound is maximised (see the module docstring)."""

    max_iter: int = 3000
    n_warmup: int = 100
    steps_per_update: int = 20
    merge_every: int = 20
    merge_steps: int = 40
    max_merge_trials: int = 3
    tol: float = 1e-7
    max_steps_factor: int = 8


class Priors(NamedTuple):
    atom: atoms.AtomPrior
    dp: dp.DPPrior


@register("gplvm.state.DPFitResult")
class FitResult(NamedTuple):
    u: Any
    state: dp.DPState
    problem: Problem
    history: np.ndarray     # the bound after every accepted gradient step
    n_iter: int
    converged: bool
    interrupted: bool
    n_merges: int


@register("gplvm.state.DPSweep")
class Sweep(NamedTuple):
    """Where a fit stands before a sweep: all that :func:`resume` needs to go on."""

    u: Any
    state: dp.DPState
    problem: Problem
    history: np.ndarray     # the bound after every accepted gradient step so far
    n_iter: int
    n_merges: int
    n_steps: int            # L-BFGS steps of the next sweep
    n_sweeps: int
    last: float             # the bound after the last sweep (or the warm-up)


def bound(u, problem, state, priors: Priors) -> float:
    return float(atoms.elbo_jit(u, problem, state, priors.atom, priors.dp))


class _Run:
    """The state of one fit (a :class:`Sweep`'s fields), the priors and the schedule."""

    def __init__(self, at: Sweep, priors, schedule, progress):
        self.u, self.problem, self.state, self.priors = at.u, at.problem, at.state, priors
        self.schedule = schedule
        self.history: list[np.ndarray] = [np.asarray(at.history)] if len(at.history) else []
        self.n_iter, self.n_merges, self.n_steps = at.n_iter, at.n_merges, at.n_steps
        self.n_sweeps, self.last = at.n_sweeps, at.last
        self.interrupted = False
        self.bar = Progress(schedule.max_iter, "DPGPLVM", bool(progress), initial=at.n_iter)

    def at(self) -> Sweep:
        history = np.concatenate(self.history) if self.history else np.zeros(0)
        return Sweep(self.u, self.state, self.problem, history, int(self.n_iter),
                     int(self.n_merges), int(self.n_steps), int(self.n_sweeps),
                     float(self.last))

    def dp_constant(self, state=None):
        return float(dp.dp_terms(self.state if state is None else state, self.priors.dp))

    def steps(self, n_steps: int, u=None, state=None):
        """L-BFGS on u with the DP state fixed, ``n_steps`` iterations in all on the library's
        jitter ladder (:func:`.gplvm_family.jitter_ladder.climb`, as the Bayesian GPLVM's fit:
        a bound turned non-finite restarts from the last finite iterate with the next K_uu
        jitter, relative to atom 0's kernel; ``self.problem`` takes the jitter reached).
        Returns (u, the bound after every step of every restart, the
        :class:`~.jitter_ladder.Ladder`)."""
        u = self.u if u is None else u
        state = self.state if state is None else state

        def rung(u, problem, opt_state, n_iter, histories):
            return minimise(atoms.negative_gp_part, u,
                            args=(problem, state.phi, self.priors.atom),
                            n_iter=n_iter, progress=False, desc="DPGPLVM")

        ladder = climb(rung, u, self.problem, None, [], n_steps, "DPGPLVM", kernel_of=_atom_0)
        self.problem = ladder.problem
        return ladder.u, self.dp_constant(state) - np.concatenate(ladder.histories), ladder

    def advance(self, n_steps: int) -> bool:
        """Take up to ``n_steps`` accepted gradient steps; False when the budget is spent."""
        remaining = self.schedule.max_iter - self.n_iter
        if remaining <= 0:
            return False
        n_steps = min(n_steps, remaining)
        if n_steps <= 0:
            return True
        self.u, values, ladder = self.steps(n_steps)
        self.history.append(values)
        self.n_iter += ladder.n_done
        self.interrupted = ladder.result.interrupted
        self.bar.advance(ladder.n_done, {"bound": f"{values[-1]:.6g}"} if len(values) else None)
        return not self.interrupted

    def sweep(self):
        terms = atoms.atom_terms_jit(self.u, self.problem, self.state.phi, self.priors.atom)
        before = np.argmax(np.asarray(self.state.phi), axis=1)
        self.state = dp.coordinate_ascent(terms.per_column, self.state, self.priors.dp)
        settled = np.array_equal(before, np.argmax(np.asarray(self.state.phi), axis=1))
        base = self.schedule.steps_per_update
        self.n_steps = (min(2 * self.n_steps, self.schedule.max_steps_factor * base)
                        if settled else base)
        return self.advance(self.n_steps)

    def merge_round(self) -> bool:
        """Try merges in the order of their unrefined bound change; True if one was taken."""
        before = bound(self.u, self.problem, self.state, self.priors)
        terms = atoms.atom_terms_jit(self.u, self.problem, self.state.phi, self.priors.atom)
        for keep, drop in merge_candidates(np.asarray(terms.per_column),
                                           np.asarray(self.state.phi),
                                           self.schedule.max_merge_trials):
            state = merged_state(self.state, keep, drop, self.priors.dp)
            u, values, ladder = self.steps(self.schedule.merge_steps, state=state)
            if ladder.result.interrupted:      # Ctrl-C while refining: judge nothing, stop
                self.interrupted = True
                return False
            if bound(u, self.problem, state, self.priors) > before:
                self.u, self.state = u, state
                self.history.append(values)
                self.n_iter += ladder.n_done
                self.bar.advance(ladder.n_done)
                self.n_merges += 1
                return True
        return False


def _atom_0(u):
    """Atom 0's unconstrained kernel parameters, whose K_uu scales the shared jitter."""
    return atoms.atom(u["kernel"], 0)


def merge_candidates(F, phi, max_trials: int):
    """Pairs (keep, drop) of used atoms, best first by Σ_d (φ_di + φ_dj) F_d(θ_keep) −
    Σ_d φ_di F_d(θ_i) − Σ_d φ_dj F_d(θ_j); ``keep`` is the atom that fits the union
    better."""
    used = np.flatnonzero(phi.sum(0) > 0.5)
    scored = []
    for n, i in enumerate(used):
        for j in used[n + 1:]:
            w = phi[:, i] + phi[:, j]
            keep, drop = (i, j) if w @ F[:, i] >= w @ F[:, j] else (j, i)
            change = w @ F[:, keep] - phi[:, i] @ F[:, i] - phi[:, j] @ F[:, j]
            scored.append((change, int(keep), int(drop)))
    scored.sort(key=lambda s: -s[0])
    return [(keep, drop) for _, keep, drop in scored[:max_trials]]


def merged_state(state: dp.DPState, keep: int, drop: int, prior: dp.DPPrior) -> dp.DPState:
    """φ with atom ``drop``'s mass given to ``keep``; q(V), q(α) updated to match."""
    phi = state.phi.at[:, keep].add(state.phi[:, drop]).at[:, drop].set(0.0)
    merged = state._replace(phi=phi)
    for _ in range(3):
        merged = dp.update_alpha(dp.update_v(merged), prior)
    return merged


def maximise(u, problem: Problem, state: dp.DPState, priors: Priors, schedule: Schedule,
             progress: bool = False, checkpoint=None) -> FitResult:
    """Warm-up steps, then sweeps with a merge round every ``merge_every`` sweeps and once at
    the end; stops when the budget is spent, on Ctrl-C (keeping the parameters reached), or
    when a sweep changes the bound by less than ``tol`` (relative) and the following merge
    round takes nothing.  ``checkpoint(sweep)`` receives the :class:`Sweep` before every
    sweep."""
    start = Sweep(u, state, problem, np.zeros(0), 0, 0, schedule.steps_per_update, 0, 0.0)
    return _loop(_Run(start, priors, schedule, progress), checkpoint, warm_up=True)


def resume(at: Sweep, priors: Priors, schedule: Schedule, progress: bool = False,
           checkpoint=None) -> FitResult:
    """Continue a fit from a :class:`Sweep` handed to :func:`maximise`'s ``checkpoint``: the
    result is the uninterrupted fit's, bit for bit."""
    return _loop(_Run(at, priors, schedule, progress), checkpoint, warm_up=False)


def _sweep_step(run: _Run):
    """One sweep (and, when due, a merge round) as a step of :func:`gplvm.inference.run.run`:
    ``step(key, at) -> ((at', info), info)`` with ``at`` the :class:`Sweep` before it
    (mirrored by ``run``, which the step advances) and ``info["end"]`` None, or why the fit
    ends:
    ``'converged'``, ``'budget'`` or ``'interrupted'`` (Ctrl-C inside an L-BFGS run)."""
    schedule, priors = run.schedule, run.priors

    def step(key, at):
        going = run.sweep()
        run.n_sweeps += 1
        now = bound(run.u, run.problem, run.state, priors)
        quiet = abs(now - run.last) <= schedule.tol * max(1.0, abs(now))
        run.last = now
        if not going and run.interrupted:
            return _ends(run, "interrupted")
        if quiet or run.n_sweeps % schedule.merge_every == 0 or not going:
            merged = run.merge_round()
            if run.interrupted:
                return _ends(run, "interrupted")
            if quiet and not merged:
                return _ends(run, "converged")
            if merged:
                run.n_steps = schedule.steps_per_update
                going = run.n_iter < schedule.max_iter
                run.last = bound(run.u, run.problem, run.state, priors)
        return _ends(run, None if going else "budget")

    return step


def _ends(run: _Run, why):
    info = {"end": why}
    return (run.at(), info), info


def _loop(run: _Run, checkpoint, warm_up: bool) -> FitResult:
    """The warm-up, then :func:`_sweep_step` under :func:`gplvm.inference.run.run` until it
    says the fit ends; ``checkpoint`` gets the :class:`Sweep` before every sweep (as the step
    before it is committed).  Ctrl-C between L-BFGS runs keeps what was done, as inside one."""
    out, caught = None, False
    try:
        going = True
        if warm_up:
            going = run.advance(run.schedule.n_warmup)
            run.last = bound(run.u, run.problem, run.state, run.priors)
        if going:
            at = run.at()
            if checkpoint is not None:
                checkpoint(at)
            out = loop(_sweep_step(run), at, sys.maxsize,
                       hooks=Hooks(commit=_recording(checkpoint),
                                   stop=lambda at, info: bool(info["end"])))
            caught = out.interrupted
    except KeyboardInterrupt:       # in the warm-up or its checkpoint, between L-BFGS runs
        caught = True
    finally:
        run.bar.close()
    if caught:      # (an L-BFGS run interrupted inside has said so itself)
        run.interrupted = True
        warnings.warn(f"DPGPLVM: interrupted after {run.n_iter} iterations; keeping the "
                      f"parameters reached so far", RuntimeWarning, stacklevel=3)
    converged = bool(out is not None and out.infos and out.infos[-1]["end"] == "converged")
    history = np.concatenate(run.history) if run.history else np.zeros(0)
    return FitResult(run.u, run.state, run.problem, history, run.n_iter, converged,
                     run.interrupted, run.n_merges)


def _recording(checkpoint):
    """The commit of a step, whose result is (the :class:`Sweep` after it, its info):
    ``checkpoint`` gets the Sweep the next sweep starts from, unless the fit ends there."""
    def commit(at, new):
        after, info = new
        if checkpoint is not None and not info["end"]:
            checkpoint(after)
        return after

    return commit

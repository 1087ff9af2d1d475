"""Fitting the stochastic variational GPLVM: Adam over minibatches of rows.

The global parameters (Z, kernel, noise, the whitened q(U)) live on the device and take one
Adam step per minibatch (``optax.scale_by_adam`` then −learning_rate: ``optax.adam`` with the
rate a traced argument; Hensman, Fusi & Lawrence 2013, §3, with Adam in place of their
step-size schedule).  With complete rows q(U) takes a natural-gradient step instead
(:data:`NATURAL_STEP`; their eqs. 9–10).  The local parameters of q(x_n) and their Adam
moments live in host NumPy arrays (N × Q each): a step gathers the batch's rows, applies Adam
to each row with that row's own state (``vmap`` over rows: a row's moments and step count move
only when the row is in a batch, the "lazy" Adam of sparse updates), and writes them back.
The data are read by :class:`gplvm.data.minibatch.RowSource`, B rows per step, so data on disk
(a memmap, a backed .h5ad) are never loaded: memory is O(B·D + N·Q), time per epoch O(N).
With ``devices`` each minibatch's rows are split over a mesh (:mod:`gplvm.inference.sharding`):
the same minibatches, the same steps, their sums over rows added in another order."""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gplvm._pytree import replace
from gplvm.data.minibatch import epoch_batches
from gplvm.expectations.rules import MonteCarlo
from gplvm.inference import sharding
from gplvm.inference.optimise import restored_opt_state
from gplvm.inference.run import CheckpointTimer, Hooks, Progress
from gplvm.inference.run import run as loop
from gplvm.models.fit_state import SviFitState
from gplvm.models.gplvm_family.variants.svi.svi_bound import (SviSetup, full_bound,
                                                              minibatch_bound_and_sums)
from gplvm.models.gplvm_family.variants.svi.svi_init import Standardised, initial_state
from gplvm.objectives import svi
from gplvm.transforms import softplus

#: size of the natural-gradient step on q(U) per minibatch when no entry is missing (0: Adam
#: moves q(U) with the other parameters); benchmarks/bgplvm_svi.py --natural-step measures it
NATURAL_STEP = 0.1


class SviResult(NamedTuple):
    g: dict
    X_mean: np.ndarray
    X_var: np.ndarray       # constrained
    setup: SviSetup
    bound: float            # over all N rows at the end
    history: np.ndarray     # mean minibatch estimate per epoch
    n_epochs: int
    interrupted: bool


def _all_finite(tree):
    return jnp.all(jnp.asarray([jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(
        tree)]))


#: Adam's moment estimates (optax.adam is this followed by a step of −learning_rate)
ADAM = optax.scale_by_adam()


def _adam_step(params, grads, state, learning_rate):
    direction, state = ADAM.update(grads, state)
    return jax.tree_util.tree_map(lambda p, u: p - learning_rate * u, params, direction), state


def _negative(g, xl, Y0, observed, scale, setup, mesh):
    value, sums = minibatch_bound_and_sums(g, xl, Y0, observed, scale, setup, mesh)
    return -value, sums


def _natural_q_u(g, sums, scale, setup, step):
    """q(U) after :func:`gplvm.objectives.svi.natural_step_from_sums` on the batch (complete
    rows), from the rows' sums Ψ1ᵀY and Ψ2 the bound's evaluation computed (on one device or
    added over a mesh's)."""
    kernel = setup.kernel.from_unconstrained(g["kernel"])
    psi1_Y, psi2 = sums
    a, L = svi.natural_step_from_sums(
        svi.WhitenedQ(g["a"], svi.chol_from_raw(g["L"])), psi1_Y, psi2,
        svi.Hyper(kernel(g["Z"]), softplus(g["noise_var"]), setup.jitter), scale, step)
    return {**g, "a": a, "L": svi.raw_from_chol(L)}


class _Rates(NamedTuple):
    """The numbers of a step besides the parameters and the data: ``scale`` N/B, Adam's
    ``learning_rate`` and ``natural``, the size of the natural-gradient step on q(U) (0: none).
    Traced arguments, so every fit of the same shapes shares one compilation."""

    scale: float
    learning_rate: jax.Array
    natural: jax.Array


@partial(jax.jit, static_argnames="mesh")
def _step(g, g_state, xl, xl_state, batch, setup, rates: _Rates, mesh=None):
    """One compiled step: the minibatch bound's gradient, Adam on the global parameters and,
    row by row with each row's own state, on the batch's local parameters.  ``batch`` is
    (Y0, observed) as :class:`~.svi_init.Standardised` reads the rows (observed None for
    complete rows).  With complete rows and ``rates.natural`` > 0, q(U) instead takes a
    natural-gradient step of that size (its Adam update is discarded).  A step whose bound or
    gradient is not finite changes nothing (and is counted by the caller).  With a mesh (a
    static argument) the batch's rows are split over its devices
    (:func:`gplvm.models.gplvm_family.variants.svi.svi_bound.batch_terms`)."""
    Y0, observed = batch
    scale, learning_rate, natural = rates
    (value, sums), (dg, dxl) = jax.value_and_grad(_negative, argnums=(0, 1), has_aux=True)(
        g, xl, Y0, observed, scale, setup, mesh)
    g_new, g_state_new = _adam_step(g, dg, g_state, learning_rate)
    if observed is None:
        g_nat = _natural_q_u(g, sums, scale, setup, natural)
        g_new = {**g_new, **{k: jnp.where(natural > 0, g_nat[k], g_new[k]) for k in "aL"}}
    xl_new, xl_state_new = jax.vmap(_adam_step, in_axes=(0, 0, 0, None))(
        xl, dxl, xl_state, learning_rate)
    ok = jnp.isfinite(value) & _all_finite((dg, dxl, g_new))
    kept = jax.tree_util.tree_map(lambda a, b: jnp.where(ok, a, b),
                                  (g_new, g_state_new, xl_new, xl_state_new),
                                  (g, g_state, xl, xl_state))
    return kept, -value, ok


def _host_tree(tree, n_rows: int):
    """Host arrays with a leading axis of N for every leaf of one row's pytree."""
    return jax.tree_util.tree_map(
        lambda x: np.broadcast_to(np.asarray(x), (n_rows,) + np.shape(x)).copy(), tree)


def _gather(host, index):
    return jax.tree_util.tree_map(lambda h: jnp.asarray(h[index]), host)


def _scatter(host, index, values) -> None:
    for h, v in zip(jax.tree_util.tree_leaves(host), jax.tree_util.tree_leaves(values)):
        h[index] = np.asarray(v)


def _step_setup(setup: SviSetup, step: int) -> SviSetup:
    """Monte Carlo Ψ-statistics draw afresh at every step (an unbiased estimate per step)."""
    if isinstance(setup.rule, MonteCarlo):
        return setup._replace(rule=replace(setup.rule,
                                           key=jax.random.fold_in(setup.rule.key, step)))
    return setup


def _rng_state(rng: np.random.Generator) -> dict:
    """The generator's state with every number as a decimal string (PCG64's are 128-bit)."""
    state = rng.bit_generator.state
    return {k: v if k == "bit_generator" else
            {kk: str(vv) for kk, vv in v.items()} if isinstance(v, dict) else str(v)
            for k, v in state.items()}


def _rng_from(saved: dict) -> np.random.Generator:
    rng = np.random.default_rng(0)
    rng.bit_generator.state = {k: v if k == "bit_generator" else
                               {kk: int(vv) for kk, vv in v.items()} if isinstance(v, dict)
                               else int(v) for k, v in saved.items()}
    return rng


def start_run(est, rows_of: Standardised, n_rows: int, batch_size: int, key) -> SviFitState:
    """The resume point of a new fit: the starting values (:func:`initial_state`), fresh Adam
    states and the generator of the minibatches, before the first step.

    Its fields hold only what a gplvm file can (arrays, numbers, strings and registered types):
    the optax states as their leaves, rebuilt on use from ``ADAM.init`` (the globals' by
    :mod:`gplvm.inference.optimise`'s own restore, as for ``OptimState``), the generator as its
    state.  They are
    ``g``, ``g_state`` (leaves), ``X_mean``, ``X_var_raw`` (N, Q host arrays, updated in place
    by the run), ``local_state`` (leaves, (N, ...) host arrays, likewise), ``setup``,
    ``batch_size``, ``rng`` (the state at the start of the current epoch), ``step_in_epoch``
    (steps of that epoch done), ``epoch_values``/``epoch_ok`` (their minibatch bounds),
    ``history``, ``n_step``, ``n_bad``, ``Y_mean``, ``Y_std``, ``has_missing``."""
    start = initial_state(est, rows_of, n_rows, key)
    Q = start.X_mean.shape[1]
    local_state = _host_tree(ADAM.init(_local_zeros(Q)), n_rows)
    rng = np.random.default_rng(int(jax.random.randint(jax.random.fold_in(key, 4), (), 0,
                                                       2**31 - 1)))
    return SviFitState(g=start.g, g_state=jax.tree_util.tree_leaves(ADAM.init(start.g)),
                       X_mean=np.array(start.X_mean), X_var_raw=np.array(start.X_var_raw),
                       local_state=jax.tree_util.tree_leaves(local_state), setup=start.setup,
                       batch_size=int(batch_size), rng=_rng_state(rng), step_in_epoch=0,
                       epoch_values=[], epoch_ok=[], history=[], n_step=0, n_bad=0,
                       Y_mean=np.asarray(rows_of.Y_mean), Y_std=np.asarray(rows_of.Y_std),
                       has_missing=bool(rows_of.has_missing))


def _local_zeros(Q: int) -> dict:
    """One row's local parameters (zeros): the tree of q(x_n) that its Adam state mirrors."""
    return {"X_mean": jnp.zeros(Q), "X_var": jnp.zeros(Q)}


class _Taken(NamedTuple):
    """What one step computed, before :meth:`_Minibatches.commit` writes it into the state:
    the batch's rows ``index``, the new global parameters ``g`` and their Adam state
    ``g_state`` (a tree, on the device), the rows' new local parameters ``xl`` and Adam states
    ``xl_state`` (host), the minibatch bound ``value`` and ``ok`` (the step was finite)."""

    index: np.ndarray
    g: dict
    g_state: Any
    xl: dict
    xl_state: Any
    value: float
    ok: bool


class _Minibatches:
    """The step of :func:`run_svi` over the run's :class:`SviFitState`: ``step(key, state) ->
    (taken, info)`` computes one minibatch from the state without changing it, and
    ``commit(state, taken) -> state`` writes the step into it all together or not at all
    (:func:`gplvm.inference.run.atomic`): the batch's rows into its host arrays in place (so
    that a step costs O(B), not O(N)), its bound onto the epoch's lists, the rest by
    ``_replace``.  Besides the state it keeps only constants (the rows, the rates, the mesh,
    the trees the state's leaves are of) and the current epoch's minibatches, drawn from the
    state's generator."""

    def __init__(self, rows_of, n_rows, state: SviFitState, rates: _Rates, mesh):
        self.rows_of, self.n_rows, self.rates, self.mesh = rows_of, n_rows, rates, mesh
        self.local_def = jax.tree_util.tree_structure(ADAM.init(
            _local_zeros(state.X_mean.shape[1])))
        self.g_def = jax.tree_util.tree_structure(ADAM.init(state.g))
        self.epoch, self.batches, self.rng = None, None, None

    def start(self, state: SviFitState) -> SviFitState:
        """``state`` with its global parameters and their Adam state on the device (each
        leaf of its template's dtype), replicated on the mesh when there is one: one
        compilation for every step."""
        g = jax.tree_util.tree_map(jnp.asarray, state.g)
        g_state = restored_opt_state(ADAM.init(g), state.g_state)
        if self.mesh is not None:
            g, g_state = sharding.replicate((g, g_state), self.mesh)
        return state._replace(g=g, g_state=jax.tree_util.tree_leaves(g_state))

    def _local(self, state: SviFitState):
        """The state's host arrays as the trees of the step: q(x_n) and its Adam states."""
        return ({"X_mean": state.X_mean, "X_var": state.X_var_raw},
                self.local_def.unflatten(list(state.local_state)))

    def _batches(self, state: SviFitState):
        """The current epoch's minibatches, drawn from the generator's state at its start."""
        if self.epoch != len(state.history):
            self.epoch = len(state.history)
            self.rng = _rng_from(state.rng)
            self.batches = epoch_batches(self.rng, self.n_rows, int(state.batch_size))
        return self.batches

    def step(self, key, state: SviFitState):
        index = self._batches(state)[state.step_in_epoch]
        local, local_state = self._local(state)
        (g, g_state, xl, xl_state), value, ok = _step(
            state.g, self.g_def.unflatten(state.g_state), _gather(local, index),
            _gather(local_state, index), self.rows_of(index),
            _step_setup(state.setup, state.n_step), self.rates, self.mesh)
        xl, xl_state = jax.device_get((xl, xl_state))
        taken = _Taken(index, g, g_state, xl, xl_state, float(value), bool(ok))
        epoch_ends = state.step_in_epoch + 1 == len(self.batches)
        return taken, ({"bound": f"{_epoch_mean(state, value, ok):.4g}"} if epoch_ends else {})

    def commit(self, state: SviFitState, taken: _Taken) -> SviFitState:
        local, local_state = self._local(state)
        _scatter(local, taken.index, taken.xl)
        _scatter(local_state, taken.index, taken.xl_state)
        state.epoch_values.append(taken.value)
        state.epoch_ok.append(taken.ok)
        state = state._replace(g=taken.g, g_state=jax.tree_util.tree_leaves(taken.g_state),
                               step_in_epoch=state.step_in_epoch + 1, n_step=state.n_step + 1)
        if state.step_in_epoch == len(self.batches):       # the epoch is done
            state.history.append(_epoch_mean(state))
            state = state._replace(n_bad=state.n_bad + int(np.sum(~np.asarray(state.epoch_ok))),
                                   rng=_rng_state(self.rng), step_in_epoch=0, epoch_values=[],
                                   epoch_ok=[])
        return state


def _epoch_mean(state: SviFitState, *last) -> float:
    """The mean of the epoch's finite minibatch bounds (with ``last`` = (value, ok) of a step
    not yet committed); NaN when none was finite."""
    values = np.asarray([*state.epoch_values, *last[:1]], dtype=float)
    ok = np.asarray([*state.epoch_ok, *(bool(x) for x in last[1:])], dtype=bool)
    return float(np.mean(values[ok])) if ok.any() else np.nan


def run_svi(est, rows_of: Standardised, n_rows: int, state: SviFitState, n_epochs: int,
            checkpoint: Optional[Callable[[SviFitState], None]] = None,
            reached: Optional[Callable[[SviFitState], None]] = None) -> SviResult:
    """Adam over minibatches from the resume point ``state`` (:func:`start_run`, or one a
    checkpoint saved) until ``n_epochs`` epochs are done.

    The minibatches are the steps of :func:`gplvm.inference.run.run`, which carries the
    :class:`SviFitState` from step to step (:class:`_Minibatches`: each step committed with
    Ctrl-C held back, its host arrays written in place), so after Ctrl-C or at a checkpoint
    the state is exactly where the next step starts: continuing from it replays the steps of
    an uninterrupted run on the same numbers (the same minibatches, from the generator's state
    at the epoch's start and the steps of that epoch already done), and gives its result bit
    for bit.  ``checkpoint(state)``, when given, is called after a step at most every
    ``est.checkpoint_interval`` seconds (:class:`gplvm.inference.run.CheckpointTimer`);
    ``reached(state)``, when given, after every step (before any checkpoint), so that the
    caller holds where the run stands whatever ends it (the host arrays of ``state`` move
    with the run).  The progress bar counts minibatches and shows each epoch's mean bound.

    Args:
        est: the estimator (its constructor arguments: learning_rate, progress, devices:
            None, or the devices whose mesh splits each minibatch's rows).
        rows_of: standardised rows by index (:class:`Standardised`); n_rows: N.
    """
    devices = getattr(est, "devices", None)
    mesh = None if devices is None else sharding.make_mesh(devices)
    batch_size = int(state.batch_size)
    steps = _Minibatches(rows_of, n_rows, state,
                         _Rates(n_rows / batch_size, jnp.asarray(float(est.learning_rate)),
                                jnp.asarray(float(NATURAL_STEP))), mesh)
    per_epoch = n_rows // batch_size
    total, done = n_epochs * per_epoch, len(state.history) * per_epoch + state.step_in_epoch
    bar = Progress(total, "BayesianGPLVM (svi)", bool(est.progress), initial=done)

    def commit(state, taken):
        state = steps.commit(state, taken)
        if reached is not None:
            reached(state)
        return state

    try:
        timer = CheckpointTimer(checkpoint, float(getattr(est, "checkpoint_interval", 0.0)))
        out = loop(steps.step, steps.start(state), total, start=done,
                   hooks=Hooks(progress=bar, checkpoint=timer, commit=commit))
    finally:
        bar.close()
    state = out.state
    if state.n_bad:
        warnings.warn(f"BayesianGPLVM (svi): {state.n_bad} of {state.n_step} minibatch steps "
                      f"had a non-finite bound or gradient and were skipped; lower "
                      f"learning_rate", RuntimeWarning, stacklevel=3)
    bound = full_bound(state.g, state.X_mean, state.X_var_raw, rows_of, n_rows, state.setup,
                       batch_size, mesh)
    return result_of(state, bound, out.interrupted, mesh is not None)


def result_of(state: SviFitState, bound: float, interrupted: bool,
              on_mesh: bool = False) -> SviResult:
    """The :class:`SviResult` of the resume point ``state``; ``on_mesh``: its ``g`` is on a
    mesh and is copied to the default device, as a collapsed fit's fitted values."""
    g = sharding.to_default_device(state.g) if on_mesh else state.g
    X_var = np.asarray(softplus(jnp.asarray(state.X_var_raw)))
    return SviResult(g, state.X_mean, X_var, state.setup, bound,
                     np.asarray(state.history, dtype=float), len(state.history), interrupted)

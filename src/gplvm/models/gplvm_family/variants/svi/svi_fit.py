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
from typing import Callable, NamedTuple, Optional

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


def start_run(est, rows_of: Standardised, n_rows: int, batch_size: int, key) -> dict:
    """The resume point of a new fit: the starting values (:func:`initial_state`), fresh Adam
    states and the generator of the minibatches, before the first step.

    The dict holds only what a gplvm file can (arrays, numbers, strings and registered types):
    the optax states as their leaves, rebuilt on use from ``ADAM.init`` (the globals' by
    :mod:`gplvm.inference.optimise`'s own restore, as for ``OptimState``), the generator as its
    state.  Keys:
    ``g``, ``g_state`` (leaves), ``X_mean``, ``X_var_raw`` (N, Q host arrays, updated in place
    by the run), ``local_state`` (leaves, (N, ...) host arrays, likewise), ``setup``,
    ``batch_size``, ``rng`` (the state at the start of the current epoch), ``step_in_epoch``
    (steps of that epoch done), ``epoch_values``/``epoch_ok`` (their minibatch bounds),
    ``history``, ``n_step``, ``n_bad``, ``Y_mean``, ``Y_std``, ``has_missing``."""
    start = initial_state(est, rows_of, n_rows, key)
    Q = start.X_mean.shape[1]
    local_state = _host_tree(ADAM.init({"X_mean": jnp.zeros(Q), "X_var": jnp.zeros(Q)}), n_rows)
    rng = np.random.default_rng(int(jax.random.randint(jax.random.fold_in(key, 4), (), 0,
                                                       2**31 - 1)))
    return {"g": start.g, "g_state": jax.tree_util.tree_leaves(ADAM.init(start.g)),
            "X_mean": np.array(start.X_mean), "X_var_raw": np.array(start.X_var_raw),
            "local_state": jax.tree_util.tree_leaves(local_state), "setup": start.setup,
            "batch_size": int(batch_size), "rng": _rng_state(rng), "step_in_epoch": 0,
            "epoch_values": [], "epoch_ok": [], "history": [], "n_step": 0, "n_bad": 0,
            "Y_mean": np.asarray(rows_of.Y_mean), "Y_std": np.asarray(rows_of.Y_std),
            "has_missing": bool(rows_of.has_missing)}


class _Minibatches:
    """The step of :func:`run_svi`: one minibatch, ``step(key, run) -> (pending, info)``, and
    its commit, which writes the step's results into the resume point ``run`` (its host arrays
    in place) all together or not at all (:func:`gplvm.inference.run.atomic`)."""

    def __init__(self, rows_of, n_rows, run, local, local_state, rates: _Rates, mesh):
        self.rows_of, self.n_rows, self.local, self.local_state = rows_of, n_rows, local, \
            local_state
        self.rates, self.mesh = rates, mesh
        self.g = jax.tree_util.tree_map(jnp.asarray, run["g"])
        self.g_state = restored_opt_state(ADAM.init(self.g), run["g_state"])
        if self.mesh is not None:  # replicated on the mesh from the start: one compilation
            self.g, self.g_state = sharding.replicate((self.g, self.g_state), self.mesh)
        self.epoch, self.batches = None, None

    def _batches(self, run):
        """The current epoch's minibatches, drawn from the generator's state at its start."""
        if self.epoch != len(run["history"]):
            self.epoch = len(run["history"])
            self.rng = _rng_from(run["rng"])
            self.batches = epoch_batches(self.rng, self.n_rows, int(run["batch_size"]))
        return self.batches

    def step(self, key, run):
        index = self._batches(run)[run["step_in_epoch"]]
        (g, g_state, xl, xl_state), value, ok = _step(
            self.g, self.g_state, _gather(self.local, index), _gather(self.local_state, index),
            self.rows_of(index), _step_setup(run["setup"], run["n_step"]), self.rates,
            self.mesh)
        xl, xl_state = jax.device_get((xl, xl_state))
        pending = (index, g, g_state, xl, xl_state, float(value), bool(ok))
        epoch_ends = run["step_in_epoch"] + 1 == len(self.batches)
        return pending, ({"bound": f"{_epoch_mean(run, value, ok):.4g}"} if epoch_ends else {})

    def commit(self, run, pending):
        index, g, g_state, xl, xl_state, value, ok = pending
        self.g, self.g_state = g, g_state
        _scatter(self.local, index, xl)
        _scatter(self.local_state, index, xl_state)
        run["epoch_values"].append(value)
        run["epoch_ok"].append(ok)
        run.update(g=g, g_state=jax.tree_util.tree_leaves(g_state),
                   step_in_epoch=run["step_in_epoch"] + 1, n_step=run["n_step"] + 1)
        if run["step_in_epoch"] == len(self.batches):       # the epoch is done
            run["history"].append(_epoch_mean(run))
            run.update(n_bad=run["n_bad"] + int(np.sum(~np.asarray(run["epoch_ok"]))),
                       rng=_rng_state(self.rng), step_in_epoch=0, epoch_values=[],
                       epoch_ok=[])
        return run


def _epoch_mean(run: dict, *last) -> float:
    """The mean of the epoch's finite minibatch bounds (with ``last`` = (value, ok) of a step
    not yet committed); NaN when none was finite."""
    values = np.asarray([*run["epoch_values"], *last[:1]], dtype=float)
    ok = np.asarray([*run["epoch_ok"], *(bool(x) for x in last[1:])], dtype=bool)
    return float(np.mean(values[ok])) if ok.any() else np.nan


def run_svi(est, rows_of: Standardised, n_rows: int, run: dict, n_epochs: int,
            checkpoint: Optional[Callable[[dict], None]] = None) -> SviResult:
    """Adam over minibatches from the resume point ``run`` (:func:`start_run`, or one a
    checkpoint saved) until ``n_epochs`` epochs are done.

    The minibatches are the steps of :func:`gplvm.inference.run.run`: ``run`` is brought up
    to date after every step (its host arrays in place, Ctrl-C held back while it is), so after
    Ctrl-C or at a checkpoint it is exactly where the next step starts: continuing from it
    replays the steps of an uninterrupted run on the same numbers (the same minibatches, from
    the generator's state at the epoch's start and the steps of that epoch already done), and
    gives its result bit for bit.  ``checkpoint(run)``, when given, is called after a step at
    most every ``est.checkpoint_interval`` seconds (:class:`gplvm.inference.run.CheckpointTimer`).
    The progress bar counts minibatches and shows each epoch's mean bound.

    Args:
        est: the estimator (its constructor arguments: learning_rate, progress, devices:
            None, or the devices whose mesh splits each minibatch's rows).
        rows_of: standardised rows by index (:class:`Standardised`); n_rows: N.
    """
    devices = getattr(est, "devices", None)
    mesh = None if devices is None else sharding.make_mesh(devices)
    setup, batch_size = run["setup"], int(run["batch_size"])
    Q = run["X_mean"].shape[1]
    local = {"X_mean": run["X_mean"], "X_var": run["X_var_raw"]}
    # the rows' Adam states stay the host arrays of ``run`` (updated in place by each step)
    local_state = jax.tree_util.tree_structure(ADAM.init(
        {"X_mean": jnp.zeros(Q), "X_var": jnp.zeros(Q)})).unflatten(list(run["local_state"]))
    steps = _Minibatches(rows_of, n_rows, run, local, local_state,
                         _Rates(n_rows / batch_size, jnp.asarray(float(est.learning_rate)),
                                jnp.asarray(float(NATURAL_STEP))), mesh)
    per_epoch = n_rows // batch_size
    total, done = n_epochs * per_epoch, len(run["history"]) * per_epoch + run["step_in_epoch"]
    bar = Progress(total, "BayesianGPLVM (svi)", bool(est.progress), initial=done)
    try:
        timer = CheckpointTimer(checkpoint, float(getattr(est, "checkpoint_interval", 0.0)))
        out = loop(steps.step, run, total, start=done,
                   hooks=Hooks(progress=bar, checkpoint=timer, commit=steps.commit))
    finally:
        bar.close()
    if run["n_bad"]:
        warnings.warn(f"BayesianGPLVM (svi): {run['n_bad']} of {run['n_step']} minibatch steps "
                      f"had a non-finite bound or gradient and were skipped; lower "
                      f"learning_rate", RuntimeWarning, stacklevel=3)
    bound = full_bound(steps.g, local["X_mean"], local["X_var"], rows_of, n_rows, setup,
                       batch_size, mesh)
    return result_of(run, bound, out.interrupted, mesh is not None)


def result_of(run: dict, bound: float, interrupted: bool, on_mesh: bool = False) -> SviResult:
    """The :class:`SviResult` of the resume point ``run``; ``on_mesh``: its ``g`` is on a mesh
    and is copied to the default device, as a collapsed fit's fitted values."""
    g = sharding.to_default_device(run["g"]) if on_mesh else run["g"]
    X_var = np.asarray(softplus(jnp.asarray(run["X_var_raw"])))
    return SviResult(g, run["X_mean"], X_var, run["setup"], bound,
                     np.asarray(run["history"], dtype=float), len(run["history"]), interrupted)

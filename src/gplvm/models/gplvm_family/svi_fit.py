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
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from gplvm._pytree import replace
from gplvm.data.minibatch import epoch_batches
from gplvm.expectations import psi_statistics
from gplvm.expectations.rules import MonteCarlo
from gplvm.inference import sharding
from gplvm.models.gplvm_family.svi_bound import SviSetup, full_bound, minibatch_bound
from gplvm.models.gplvm_family.svi_init import Standardised, initial_state
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
    return -minibatch_bound(g, xl, Y0, observed, scale, setup, mesh)


def _natural_q_u(g, xl, Y0, scale, setup, step, mesh):
    """q(U) after :func:`gplvm.objectives.svi.natural_step` on the batch (complete rows; with
    a mesh, from the rows' sums over its devices)."""
    kernel = setup.kernel.from_unconstrained(g["kernel"])
    X_var = softplus(xl["X_var"])
    args = (kernel(g["Z"]), softplus(g["noise_var"]), scale, step, setup.jitter)
    if mesh is None:
        _, psi1, psi2 = psi_statistics(kernel, g["Z"], xl["X_mean"], X_var, rule=setup.rule)
        a, L = svi.natural_step(g["a"], svi.chol_from_raw(g["L"]), psi1, psi2, args[0], Y0,
                                *args[1:])
    else:
        sums = sharding.svi_row_sums(kernel, g["Z"], xl["X_mean"], X_var, Y0, None, mesh,
                                     setup.rule)
        a, L = svi.natural_step_from_sums(g["a"], svi.chol_from_raw(g["L"]), sums.psi1_Y,
                                          sums.psi2[0], *args)
    return {**g, "a": a, "L": svi.raw_from_chol(L)}


@partial(jax.jit, static_argnames="mesh")
def _step(g, g_state, xl, xl_state, Y0, observed, scale, setup, learning_rate, natural,
          mesh=None):
    """One compiled step: the minibatch bound's gradient, Adam on the global parameters and,
    row by row with each row's own state, on the batch's local parameters.  With complete
    rows and ``natural`` > 0, q(U) instead takes a natural-gradient step of that size (its
    Adam update is discarded).  The learning rate and step are arguments, so every fit of the
    same shapes shares one compilation.  A step whose bound or gradient is not finite changes
    nothing (and is counted by the caller).  With a mesh the batch's rows are split over its
    devices (:func:`gplvm.models.gplvm_family.svi_bound.batch_terms`)."""
    value, (dg, dxl) = jax.value_and_grad(_negative, argnums=(0, 1))(
        g, xl, Y0, observed, scale, setup, mesh)
    g_new, g_state_new = _adam_step(g, dg, g_state, learning_rate)
    if observed is None:
        g_nat = _natural_q_u(g, xl, Y0, scale, setup, natural, mesh)
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


def fit_svi(est, rows_of: Standardised, n_rows: int, batch_size: int, n_epochs: int,
            key) -> SviResult:
    """Maximise the stochastic bound by Adam over ``n_epochs`` passes of minibatches.

    Args:
        est: the estimator (its constructor arguments: n_components, n_inducing, kernel,
            psi_rule, init_X_var, init_noise_fraction, learning_rate, progress, devices:
            None, or the devices whose mesh splits each minibatch's rows).
        rows_of: standardised rows by index (:class:`Standardised`).
        n_rows: N; batch_size: B ≤ N; n_epochs: passes over the rows.
        key: the fit's PRNG key (starting values, the order of the rows).
    """
    start = initial_state(est, rows_of, n_rows, key)
    devices = getattr(est, "devices", None)
    mesh = None if devices is None else sharding.make_mesh(devices)
    g, setup = start.g, start.setup
    learning_rate = jnp.asarray(float(est.learning_rate))
    natural = jnp.asarray(float(NATURAL_STEP))
    g_state = ADAM.init(g)
    if mesh is not None:    # replicated on the mesh from the start: one compilation of _step
        g, g_state = sharding.replicate((g, g_state), mesh)
    Q = start.X_mean.shape[1]
    local = {"X_mean": np.array(start.X_mean), "X_var": np.array(start.X_var_raw)}
    local_state = _host_tree(ADAM.init({"X_mean": jnp.zeros(Q), "X_var": jnp.zeros(Q)}), n_rows)
    rng = np.random.default_rng(int(jax.random.randint(jax.random.fold_in(key, 4), (), 0,
                                                       2**31 - 1)))
    scale = n_rows / batch_size
    history, n_step, n_bad, interrupted = [], 0, 0, False
    bar = tqdm(total=n_epochs, desc="BayesianGPLVM (svi)", disable=not est.progress,
               leave=False)
    try:
        for _ in range(n_epochs):
            values = []
            for index in epoch_batches(rng, n_rows, batch_size):
                Y0, observed = rows_of(index)
                (g, g_state, xl, xl_state), value, ok = _step(
                    g, g_state, _gather(local, index), _gather(local_state, index), Y0,
                    observed, scale, _step_setup(setup, n_step), learning_rate, natural, mesh)
                _scatter(local, index, xl)
                _scatter(local_state, index, xl_state)
                values.append((value, ok))
                n_step += 1
            value, ok = (np.asarray(v) for v in zip(*values))
            n_bad += int(np.sum(~ok))
            history.append(float(np.mean(value[ok])) if ok.any() else np.nan)
            bar.update()
            bar.set_postfix(bound=f"{history[-1]:.4g}")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    if n_bad:
        warnings.warn(f"BayesianGPLVM (svi): {n_bad} of {n_step} minibatch steps had a "
                      f"non-finite bound or gradient and were skipped; lower learning_rate",
                      RuntimeWarning, stacklevel=3)
    bound = full_bound(g, local["X_mean"], local["X_var"], rows_of, n_rows, setup, batch_size,
                       mesh)
    if mesh is not None:    # the fitted values back on the default device, as a collapsed fit's
        g = sharding.to_default_device(g)
    X_var = np.asarray(softplus(jnp.asarray(local["X_var"])))
    return SviResult(g, local["X_mean"], X_var, setup, bound, np.asarray(history),
                     len(history), interrupted)

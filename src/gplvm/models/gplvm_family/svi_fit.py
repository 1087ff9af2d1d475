"""Fitting the stochastic variational GPLVM: initial values, and Adam over minibatches of rows.

The global parameters (Z, kernel, noise, the whitened q(U)) live on the device and take one
``optax.adam`` step per minibatch (Hensman, Fusi & Lawrence 2013, §3, with Adam in place of
their step-size schedule).  The local parameters of q(x_n) and their Adam moments live in host
NumPy arrays (N × Q each): a step gathers the batch's rows, applies ``optax.adam`` to each row
with that row's own state (``vmap`` over rows: a row's moments and step count move only when
the row is in a batch, the "lazy" Adam of sparse updates), and writes them back.  The data are
read by :class:`gplvm.data.minibatch.RowSource`, B rows per step, so a memmap is never loaded:
memory is O(B·D + N·Q), time per epoch O(N).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from gplvm._pytree import replace
from gplvm.data.minibatch import ColumnScan, RowSource, epoch_batches, scan_columns
from gplvm.expectations import psi_statistics
from gplvm.expectations.rules import MonteCarlo
from gplvm.kernels import RBF
from gplvm._params import check_batch_size, check_params
from gplvm.models.gplvm_family.estimator import check_inducing
from gplvm.models.gplvm_family.init import (initial_inducing, initial_jitter, initial_latents,
                                            initial_variances, resolve_rule)
from gplvm.models.gplvm_family.svi_bound import SviSetup, full_bound, minibatch_bound
from gplvm.objectives import svi
from gplvm.transforms import inverse_softplus, softplus

#: rows used for the starting values (PCA, k-means of Z, q(U)); all rows below this many
INIT_ROWS = 5000
#: B when ``batch_size=None``: this many rows, or all of them when there are fewer
DEFAULT_BATCH = 256
#: size of the natural-gradient step on q(U) per minibatch when no entry is missing (0: Adam
#: moves q(U) with the other parameters); benchmarks/bgplvm_svi.py --natural-step measures it
NATURAL_STEP = 0.1


class Standardised:
    """Rows of a :class:`RowSource` standardised, with missing entries zeroed and their mask
    (None when the data have no missing entry, so the bound takes its complete-data route)."""

    def __init__(self, source: RowSource, Y_mean, Y_std, has_missing: bool):
        self.source, self.Y_mean, self.Y_std = source, Y_mean, Y_std
        self.has_missing = has_missing

    def __call__(self, index):
        Ys = (self.source.rows(index) - self.Y_mean) / self.Y_std
        observed = None
        if self.has_missing:
            observed = jnp.asarray(~np.isnan(Ys), dtype=float)
        return jnp.asarray(np.nan_to_num(Ys)), observed


def svi_data(est, Y, times, groups):
    """Validate the data of an SVI fit (before any computation) and wrap it for reading.

    An in-memory array gets the collapsed model's checks; a ``np.memmap`` is checked one chunk
    at a time (:func:`gplvm.data.minibatch.scan_columns`), never loaded whole.

    Returns:
        (:class:`Standardised` rows, the in-memory Y or None for a memmap, batch size B).
    """
    check_params(est)
    if times is not None or groups is not None:
        raise ValueError("inference='svi' has the iid latent prior only; fit without times= "
                         "and groups=, or use inference='collapsed' for the dynamical prior")
    if est.checkpoint is not None:
        raise ValueError("checkpoint= is not available with inference='svi' yet; pass "
                         "checkpoint=None, or use inference='collapsed'")
    if isinstance(Y, np.memmap):
        source, train_Y = RowSource(Y), None
        if Y.ndim != 2 or Y.shape[0] < max(est.n_components + 1, 3):
            raise ValueError(f"Y must be a 2-D memmap with at least "
                             f"{max(est.n_components + 1, 3)} rows; got shape {Y.shape}")
        check_inducing(est.n_inducing, Y.shape[0], "rows of Y")
        scan = scan_columns(source)
        constant = ~(scan.std > 0)
        if est.standardize and constant.any():
            raise ValueError(f"Y has {int(constant.sum())} constant columns (columns "
                             f"{np.flatnonzero(constant)[:5].tolist()}); drop them, they carry "
                             f"no information and cannot be standardised")
    else:
        train_Y, _ = est._validate_common(Y, None, None)
        source = RowSource(train_Y)
        scan = ColumnScan(*est._standardisation(train_Y), bool(np.isnan(train_Y).any()))
    N = source.shape[0]
    check_batch_size(est.batch_size, N)
    mean, std = (scan.mean, scan.std) if est.standardize else (np.zeros(source.shape[1]), np.ones(source.shape[1]))
    B = min(N, DEFAULT_BATCH) if est.batch_size is None else int(est.batch_size)
    return Standardised(source, mean, std, scan.has_missing), train_Y, B


class SviStart(NamedTuple):
    g: dict
    X_mean: np.ndarray      # (N, Q) host
    X_var_raw: np.ndarray   # (N, Q) host, unconstrained
    setup: SviSetup


def _pca_start(rows_of, n_rows: int, Q: int, rng: np.random.Generator):
    """PCA latents of every row and the subsample the other starting values use.

    Up to :data:`INIT_ROWS` rows this is :func:`initial_latents` (as the collapsed model);
    above, the principal directions of a random subsample of that many rows, with every row
    projected on them one chunk at a time."""
    if n_rows <= INIT_ROWS:
        index = np.arange(n_rows)
        Y0 = np.asarray(rows_of(index)[0])
        X0, fracs = initial_latents(Y0, Q)     # missing entries are 0 there as here
        return X0, fracs, index
    index = np.sort(rng.choice(n_rows, INIT_ROWS, replace=False))
    Y_sub = np.asarray(rows_of(index)[0])
    centre = Y_sub.mean(0)
    _, s, Vt = np.linalg.svd(Y_sub - centre, full_matrices=False)
    k = min(Q, len(s))
    scale = s[:k] / np.sqrt(INIT_ROWS)
    X0 = np.empty((n_rows, Q))
    for start in range(0, n_rows, INIT_ROWS):
        chunk = np.arange(start, min(start + INIT_ROWS, n_rows))
        X0[chunk, :k] = (np.asarray(rows_of(chunk)[0]) - centre) @ Vt[:k].T / scale
    ev = s[:k] ** 2
    if k < Q:   # more latent dimensions than the data's rank, as initial_latents
        X0[:, k:] = rng.normal(size=(n_rows, Q - k))
        ev = np.concatenate([ev, np.full(Q - k, ev[-1] * 1e-3 if k else 1.0)])
    return X0, np.maximum(ev / ev[0], 1e-3), index


@jax.jit
def _start_q_u(kernel, Z, X_mean, X_var, rule, Y0, noise_var, scale, jitter):
    _, psi1, psi2 = psi_statistics(kernel, Z, X_mean, X_var, rule=rule)
    return svi.optimal_whitened_q_u(psi1, psi2, kernel(Z), Y0, noise_var, scale, jitter)


def initial_state(est, rows_of, n_rows: int, key) -> SviStart:
    """Starting values: PCA latents, Z by k-means, an ARD RBF at 1/(fraction of variance), the
    noise at ``init_noise_fraction``, GPy's q(X) variances (all as the collapsed model, from a
    subsample above :data:`INIT_ROWS` rows), and q(U) at its optimum given these values on the
    subsample scaled by N/n (:func:`gplvm.objectives.svi.optimal_whitened_q_u`)."""
    Q, M = int(est.n_components), int(est.n_inducing)
    rng = np.random.default_rng(int(jax.random.randint(jax.random.fold_in(key, 3), (), 0,
                                                       2**31 - 1)))
    X0, fracs, sub = _pca_start(rows_of, n_rows, Q, rng)
    Z0 = initial_inducing(X0[sub], M, key)
    kernel = est.kernel if est.kernel is not None else RBF(
        lengthscale=jnp.asarray(1.0 / fracs), variance=1.0)
    Y_sub, observed = rows_of(sub)
    values = np.asarray(Y_sub)[np.asarray(observed) > 0] if observed is not None else Y_sub
    noise0 = est.init_noise_fraction * float(np.var(values))
    X_var0 = initial_variances((n_rows, Q), est.init_X_var, key)
    setup = SviSetup(kernel, resolve_rule(est.psi_rule, key), initial_jitter(kernel, Z0))
    a, L = _start_q_u(kernel, jnp.asarray(Z0), jnp.asarray(X0[sub]), jnp.asarray(X_var0[sub]),
                      setup.rule, Y_sub, noise0, n_rows / len(sub), setup.jitter)
    g = {"Z": jnp.asarray(Z0), "kernel": kernel.unconstrained(),
         "noise_var": inverse_softplus(jnp.asarray(noise0)), "a": a,
         "L": svi.raw_from_chol(L)}
    return SviStart(g, X0, np.asarray(inverse_softplus(jnp.asarray(X_var0))), setup)


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


def _negative(g, xl, Y0, observed, scale, setup):
    return -minibatch_bound(g, xl, Y0, observed, scale, setup)


def _natural_q_u(g, xl, Y0, scale, setup, step):
    """q(U) after :func:`gplvm.objectives.svi.natural_step` on the batch (complete rows)."""
    kernel = setup.kernel.from_unconstrained(g["kernel"])
    _, psi1, psi2 = psi_statistics(kernel, g["Z"], xl["X_mean"], softplus(xl["X_var"]),
                                   rule=setup.rule)
    a, L = svi.natural_step(g["a"], svi.chol_from_raw(g["L"]), psi1, psi2, kernel(g["Z"]), Y0,
                            softplus(g["noise_var"]), scale, step, setup.jitter)
    return {**g, "a": a, "L": svi.raw_from_chol(L)}


@jax.jit
def _step(g, g_state, xl, xl_state, Y0, observed, scale, setup, learning_rate, natural):
    """One compiled step: the minibatch bound's gradient, Adam on the global parameters and,
    row by row with each row's own state, on the batch's local parameters.  With complete
    rows and ``natural`` > 0, q(U) instead takes a natural-gradient step of that size (its
    Adam update is discarded).  The learning rate and step are arguments, so every fit of the
    same shapes shares one compilation.  A step whose bound or gradient is not finite changes
    nothing (and is counted by the caller)."""
    value, (dg, dxl) = jax.value_and_grad(_negative, argnums=(0, 1))(
        g, xl, Y0, observed, scale, setup)
    g_new, g_state_new = _adam_step(g, dg, g_state, learning_rate)
    if observed is None:
        g_nat = _natural_q_u(g, xl, Y0, scale, setup, natural)
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
            psi_rule, init_X_var, init_noise_fraction, learning_rate, progress).
        rows_of: standardised rows by index (:class:`Standardised`).
        n_rows: N; batch_size: B ≤ N; n_epochs: passes over the rows.
        key: the fit's PRNG key (starting values, the order of the rows).
    """
    start = initial_state(est, rows_of, n_rows, key)
    g, setup = start.g, start.setup
    learning_rate = jnp.asarray(float(est.learning_rate))
    natural = jnp.asarray(float(NATURAL_STEP))
    g_state = ADAM.init(g)
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
                    observed, scale, _step_setup(setup, n_step), learning_rate, natural)
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
    bound = full_bound(g, local["X_mean"], local["X_var"], rows_of, n_rows, setup, batch_size)
    X_var = np.asarray(softplus(jnp.asarray(local["X_var"])))
    return SviResult(g, local["X_mean"], X_var, setup, bound, np.asarray(history),
                     len(history), interrupted)

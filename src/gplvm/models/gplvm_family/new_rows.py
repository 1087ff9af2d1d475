r"""Latents of new rows with the fitted model held fixed (seed 003 eqs. 36–37, corrected in
:mod:`gplvm.objectives.new_rows`).

Given the fitted map, the new-row bound is a sum of independent per-row terms, so each row's
q(x*) is optimised on its own: one L-BFGS run per row, the rows visited by ``lax.map`` (a
compiled loop running the same unbatched program for every row).  A row's result therefore
depends on that row and the fitted model only, bit for bit, never on which other rows share the
call (API.md; issue 11).  Optimising the summed bound jointly couples the rows through the shared
line search and stopping rule; a ``vmap`` over rows decouples them only up to the round-off of
batched arithmetic, which 300 L-BFGS steps on a flat bound amplify to ~1e-8.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gplvm.expectations import psi_statistics
from gplvm.models.gplvm_family.fitted import FittedGPLVM
from gplvm.objectives import new_rows
from gplvm.objectives.collapsed import kl_standard_normal
from gplvm.transforms import inverse_softplus, softplus


def row_objective(u: dict, fitted: FittedGPLVM, y0, observed, R):
    """The negative new-row bound of one row (y0: (D,) with missing entries 0; observed: (D,)
    0/1; R: (M, M) from :func:`gplvm.objectives.new_rows.row_matrices`)."""
    X_mean, X_var = u["X_mean"][None], softplus(u["X_var"])[None]
    psi0, psi1, psi2 = psi_statistics(fitted.kernel, fitted.Z, X_mean, X_var, rule=fitted.rule,
                                      weights=jnp.eye(1))
    ell = new_rows.expected_log_likelihood(fitted.map, y0[None], observed[None], R[None],
                                           psi0, psi1, psi2)
    return -(ell - kl_standard_normal(X_mean, X_var))


def _tree_where(pred, a, b):
    return jax.tree_util.tree_map(lambda x, y: jnp.where(pred, x, y), a, b)


def _solve_row(fun, u0, n_iter: int, dtype):
    """L-BFGS on one row's objective ``fun`` for ``n_iter`` steps; the best finite iterate and
    its value (a non-finite step never replaces a finite one)."""
    optimizer = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(fun)

    def step(carry, _):
        u, state, best_u, best_value = carry
        value, grad = value_and_grad(u, state=state)
        better = jnp.isfinite(value) & (value <= best_value)
        best_u = _tree_where(better, u, best_u)
        best_value = jnp.where(better, value, best_value)
        updates, state = optimizer.update(grad, state, u, value=value, grad=grad,
                                          value_fn=fun)
        return (optax.apply_updates(u, updates), state, best_u, best_value), None

    carry = (u0, optimizer.init(u0), u0, jnp.asarray(jnp.inf, dtype=dtype))
    (u, _, best_u, best_value), _ = jax.lax.scan(step, carry, None, length=n_iter)
    last = fun(u)
    better = jnp.isfinite(last) & (last <= best_value)
    return _tree_where(better, u, best_u), jnp.where(better, last, best_value)


@partial(jax.jit, static_argnames=("objective", "n_iter"))
def solve_rows(objective, u0, fixed, rows, n_iter: int):
    """Minimise ``objective(u_n, fixed, *rows[n])`` over each row's parameters ``u_n`` alone.

    The rows are visited by ``lax.map``, one unbatched L-BFGS run each, so a row's result does
    not depend on the other rows (see the module docstring).  Any model whose new-row bound is a
    sum over rows uses this: the Bayesian GPLVM (:func:`row_objective`) and the DP-GP-LVM.

    Args:
        objective: a module-level function (hashable; it is a static argument).
        u0: pytree of per-row starting parameters, leading axis N*.
        fixed: the fitted model's values shared by every row.
        rows: tuple of per-row arrays, leading axis N*.
        n_iter: L-BFGS steps per row.

    Returns:
        Each row's best parameters and its objective value.
    """
    dtype = jax.tree_util.tree_leaves(u0)[0].dtype

    def one(args):
        u, row = args
        return _solve_row(lambda v: objective(v, fixed, *row), u, n_iter, dtype)

    return jax.lax.map(one, (u0, rows))


_row_matrices_jit = jax.jit(new_rows.row_matrices)


def nearest_training_latents(train_Ys, X_train, Ys) -> np.ndarray:
    """Each new row's start: the training latent whose standardised data is closest on the
    columns observed in both rows (squared distance averaged per shared column)."""
    train_obs = ~np.isnan(train_Ys)
    train = np.where(train_obs, train_Ys, 0.0)
    obs = ~np.isnan(Ys)
    Y0 = np.where(obs, Ys, 0.0)
    both = obs.astype(float) @ train_obs.T.astype(float)
    d2 = (Y0**2) @ train_obs.T + obs.astype(float) @ (train**2).T - 2 * Y0 @ train.T
    d2 = d2 / np.maximum(both, 1.0)
    d2[both == 0] = np.inf
    return X_train[np.argmin(d2, axis=1)]


def infer_rows(objective, fixed, Ys, X_start, X_var_start, n_iter: int, row_extras=None):
    """Optimise q(x*) of each standardised row of ``Ys`` (NaN = missing) on its own, for any
    model whose new-row bound is ``-objective(u, fixed, y0, observed, *extras)`` summed over rows.

    Args:
        objective: module-level negative new-row bound of one row (see :func:`solve_rows`).
        fixed: the fitted model's values shared by every row.
        Ys: (N*, D) standardised rows.
        X_start: (N*, Q) starting means; X_var_start: (Q,) or (N*, Q) starting variances.
        n_iter: L-BFGS steps per row.
        row_extras: optional function of the (N*, D) observed mask giving further per-row
            arrays (leading axis N*) passed to ``objective`` after ``observed``.

    Returns:
        X_mean (N*, Q), X_var (N*, Q), and the new-row bound of each row (N*,).
    """
    n_rows = Ys.shape[0]
    if n_rows == 1:
        # XLA compiles a loop of one trip differently from longer ones (fused straight-line
        # code), which changes the round-off; a padded copy keeps one row's result equal, bit
        # for bit, to the same row's result in any batch
        Ys, X_start = np.concatenate([Ys, Ys]), np.concatenate([X_start, X_start])
        X_var_start = (np.concatenate([X_var_start, X_var_start])
                       if np.ndim(X_var_start) == 2 else X_var_start)
    observed = jnp.asarray(~np.isnan(Ys), dtype=float)
    rows = (jnp.asarray(np.nan_to_num(Ys)), observed)
    if row_extras is not None:
        rows = rows + tuple(row_extras(observed))
    X_start = jnp.asarray(X_start)
    u0 = {"X_mean": X_start,
          "X_var": inverse_softplus(jnp.broadcast_to(jnp.asarray(X_var_start), X_start.shape))}
    u, value = solve_rows(objective, u0, fixed, rows, int(n_iter))
    return (np.asarray(u["X_mean"])[:n_rows], np.asarray(softplus(u["X_var"]))[:n_rows],
            -np.asarray(value)[:n_rows])


def infer_latents(fitted: FittedGPLVM, Ys, X_start, X_var_start, n_iter: int):
    """:func:`infer_rows` with the Bayesian GPLVM's row objective (:func:`row_objective`)."""
    return infer_rows(row_objective, fitted, Ys, X_start, X_var_start, n_iter,
                      lambda observed: (_row_matrices_jit(fitted.map, observed),))

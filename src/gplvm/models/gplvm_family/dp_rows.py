r"""Latents of new rows under a fitted DP-GP-LVM, each row on its own (seed 003 eqs. 36–37 as
corrected in :mod:`gplvm.objectives.new_rows`, summed over atoms).

With the model fixed, the bound of a new row :math:`y_*` with observed columns O is

.. math:: \mathcal L_* = \sum_t \sum_{d \in O} \phi_{dt}\,\ell_d(\theta_t)
          - \mathrm{KL}(q(x_*)\,\|\,N(0, I)),

:math:`\ell_d(\theta_t)` being the per-column term of
:func:`gplvm.objectives.new_rows.expected_log_likelihood` under atom t.  That function is linear
in the observed mask and in y₀ except for its :math:`-\frac\beta2\sum_d y_d^2` term, so with
weights :math:`w_d = o_d\phi_{dt}` it is called with mask w and data w·y₀, and
:math:`-\frac\beta2\sum_d (w_d - w_d^2)\,y_d^2` (constant in x*) is added back.

# TODO(core): move to gplvm_family.new_rows — its ``_solve_row``/``_solve_rows``/
# ``infer_latents`` with the row objective as an argument; the solver below is theirs with
# ``row_objective`` replaced by this model's.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gplvm.expectations import psi_statistics
from gplvm.models.gplvm_family.dp_fitted import FittedDPGPLVM
from gplvm.objectives import new_rows
from gplvm.objectives.collapsed import kl_standard_normal
from gplvm.transforms import inverse_softplus, softplus


def _atom_term(kernel, fmap, w, y0, Z, rule, X_mean, X_var):
    psi0, psi1, psi2 = psi_statistics(kernel, Z, X_mean, X_var, rule=rule, weights=jnp.eye(1))
    R = new_rows.row_matrices(fmap, w[None])
    ell = new_rows.expected_log_likelihood(fmap, (w * y0)[None], w[None], R, psi0, psi1, psi2)
    return ell - 0.5 / fmap.noise_var * jnp.sum((w - w**2) * y0**2)


def row_objective(u: dict, fitted: FittedDPGPLVM, y0, observed):
    """The negative bound of one row (y0: (D,) with missing entries 0; observed: (D,) 0/1)."""
    X_mean, X_var = u["X_mean"][None], softplus(u["X_var"])[None]
    weights = observed[None, :] * fitted.phi.T                        # (T, D)
    terms = jax.vmap(_atom_term, in_axes=(0, 0, 0, None, None, None, None, None))(
        fitted.kernels, fitted.maps, weights, y0, fitted.Z, fitted.rule, X_mean, X_var)
    return -(jnp.sum(terms) - kl_standard_normal(X_mean, X_var))


def _tree_where(pred, a, b):
    return jax.tree_util.tree_map(lambda x, y: jnp.where(pred, x, y), a, b)


def _solve_row(u0, fitted, y0, observed, n_iter: int):
    """L-BFGS on one row's objective for ``n_iter`` steps; the best finite iterate and value."""
    optimizer = optax.lbfgs()

    def fun(u):
        return row_objective(u, fitted, y0, observed)

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

    carry = (u0, optimizer.init(u0), u0, jnp.asarray(jnp.inf, dtype=y0.dtype))
    (u, _, best_u, best_value), _ = jax.lax.scan(step, carry, None, length=n_iter)
    last = fun(u)
    better = jnp.isfinite(last) & (last <= best_value)
    return _tree_where(better, u, best_u), jnp.where(better, last, best_value)


@partial(jax.jit, static_argnames="n_iter")
def _solve_rows(u0, fitted, Y0, observed, n_iter: int):
    def one(row):
        u, y0, obs = row
        return _solve_row(u, fitted, y0, obs, n_iter)

    return jax.lax.map(one, (u0, Y0, observed))


def infer_latents(fitted: FittedDPGPLVM, Ys, X_start, X_var_start, n_iter: int):
    """Optimise q(x*) of each standardised row of ``Ys`` (NaN = missing) on its own; as
    :func:`gplvm.models.gplvm_family.new_rows.infer_latents`.

    Returns:
        X_mean (N*, Q), X_var (N*, Q), and the new-row bound of each row (N*,).
    """
    n_rows = Ys.shape[0]
    if n_rows == 1:   # one-trip loops compile differently; see new_rows.infer_latents
        Ys, X_start = np.concatenate([Ys, Ys]), np.concatenate([X_start, X_start])
        X_var_start = (np.concatenate([X_var_start, X_var_start])
                       if np.ndim(X_var_start) == 2 else X_var_start)
    observed = jnp.asarray(~np.isnan(Ys), dtype=float)
    X_start = jnp.asarray(X_start)
    u0 = {"X_mean": X_start,
          "X_var": inverse_softplus(jnp.broadcast_to(jnp.asarray(X_var_start), X_start.shape))}
    u, value = _solve_rows(u0, fitted, jnp.asarray(np.nan_to_num(Ys)), observed, int(n_iter))
    return (np.asarray(u["X_mean"])[:n_rows], np.asarray(softplus(u["X_var"]))[:n_rows],
            -np.asarray(value)[:n_rows])

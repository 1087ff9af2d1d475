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

Each row is solved on its own by the family's solver, :func:`.new_rows.infer_rows`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gplvm.expectations import psi_statistics
from gplvm.models.gplvm_family.variants.dp.dp_fitted import FittedDPGPLVM
from gplvm.models.gplvm_family.new_rows import infer_rows
from gplvm.objectives import new_rows
from gplvm.objectives.collapsed import kl_standard_normal
from gplvm.transforms import softplus


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


def infer_latents(fitted: FittedDPGPLVM, Ys, X_start, X_var_start, n_iter: int):
    """Optimise q(x*) of each standardised row of ``Ys`` (NaN = missing) on its own
    (:func:`.new_rows.infer_rows` with :func:`row_objective`).

    Returns:
        X_mean (N*, Q), X_var (N*, Q), and the new-row bound of each row (N*,).
    """
    return infer_rows(row_objective, fitted, Ys, X_start, X_var_start, n_iter)

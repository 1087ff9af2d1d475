r"""The bound for new rows with the model held fixed (seed 003 eqs. 36–37, corrected).

With q(U) at its optimum for the training data, :math:`q(u_d) = N(\bar u_d, \Sigma_{u,g(d)})`,
the uncollapsed bound (seed 003 eq. 9) for a new row :math:`y_*` with observed columns O is

.. math::
    \mathcal{L}_* = \sum_{d\in O}\Big[-\tfrac12\log(2\pi\sigma^2) - \tfrac{\beta}{2}\big(y_{*d}^2
      - 2 y_{*d}\,\psi_{1*} v_d + \mathrm{tr}(\Psi_{2*}(v_d v_d^\top + H_{g(d)}))\big)
      - \tfrac{\beta}{2}\big(\psi_{0*} - \mathrm{tr}(K_{uu}^{-1}\Psi_{2*})\big)\Big]
      - \mathrm{KL}(q(x_*)\,\|\,p(x_*)),

with :math:`v_d = K_{uu}^{-1}\bar u_d` and :math:`H_g = K_{uu}^{-1}\Sigma_{u,g}K_{uu}^{-1}`.  It is
the expectation of :math:`\log N(y \mid f, \sigma^2)` under :math:`q(f_* \mid u)q(u)q(x_*)`:
:math:`E[(y - k_{*u}K_{uu}^{-1}u)^2] = y^2 - 2y\psi_1 v + \mathrm{tr}(\Psi_2 K_{uu}^{-1}
(\bar u\bar u^\top + \Sigma_u)K_{uu}^{-1})` plus the conditional variance
:math:`\psi_0 - \mathrm{tr}(K_{uu}^{-1}\Psi_2)`.  This is what seed 003 eq. 37 should read: the
printed version has :math:`-\frac{\beta d_y}{2}\mathrm{Tr}(Y_*Y_*^\top)` (the :math:`d_y` is
spurious), :math:`\Psi_{1*}K_{uu}\bar U` (it is :math:`K_{uu}^{-1}`) and :math:`\Sigma_u` alone
(it is :math:`\bar U\bar U^\top + d_y\Sigma_u`).  Summed over the training rows at the optimal
q(U), :math:`\sum_n \mathcal{L}_n - \mathrm{KL}(q(U)\|p(U))` equals the collapsed bound, which
the tests check.

All rows are independent given the model, so the per-row terms are summed and optimised jointly.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp

from gplvm.registry import register


@register("gplvm.state.FittedMap")
class FittedMap(NamedTuple):
    """The map of a fitted collapsed model at its optimal q(U) (standardised units): what the
    new-row bound and the predictions need."""

    V: jnp.ndarray        # (M, D) K_uu⁻¹ Ū
    H: jnp.ndarray        # (G, M, M) K_uu⁻¹ Σ_u,g K_uu⁻¹
    Kuu_inv: jnp.ndarray  # (M, M)
    column_group: jnp.ndarray  # (D,)
    noise_var: jnp.ndarray


def fitted_map(U_mean, Sigma_u, Kuu_inv, column_group, noise_var) -> FittedMap:
    """V = K_uu⁻¹ Ū and H_g = K_uu⁻¹ Σ_u,g K_uu⁻¹ from the optimal q(U) (seed 003 eq. 11)."""
    H = jnp.einsum("mk,gkl,ln->gmn", Kuu_inv, Sigma_u, Kuu_inv)
    return FittedMap(Kuu_inv @ U_mean, H, Kuu_inv, column_group, jnp.asarray(noise_var))


def row_matrices(model: FittedMap, observed):
    """R_n = V diag(o_n) Vᵀ + Σ_d o_nd H_g(d) − |O_n| K_uu⁻¹ for each row (N*, M, M)."""
    counts = observed @ jnp.eye(model.H.shape[0])[model.column_group]   # (N*, G)
    R = jnp.einsum("md,nd,kd->nmk", model.V, observed, model.V)
    R = R + jnp.einsum("ng,gmk->nmk", counts, model.H)
    return R - jnp.sum(observed, axis=1)[:, None, None] * model.Kuu_inv


def expected_log_likelihood(model: FittedMap, Y0, observed, R, psi0, psi1, psi2):
    """Σ_n of the data part of the module's bound.

    Args:
        Y0: (N*, D) new rows with missing entries set to 0; observed: (N*, D) 0/1 mask.
        R: from :func:`row_matrices`; psi0 (N*,), psi1 (N*, M), psi2 (N*, M, M) per row.
    """
    beta = 1.0 / model.noise_var
    n_obs = jnp.sum(observed, axis=1)
    cross = jnp.sum(Y0 * (psi1 @ model.V), axis=1)
    quad = jnp.einsum("nmk,nmk->n", psi2, R)
    per_row = (-0.5 * n_obs * math.log(2 * math.pi) - 0.5 * n_obs * jnp.log(model.noise_var)
               - 0.5 * beta * jnp.sum(Y0**2, axis=1) + beta * cross - 0.5 * beta * quad
               - 0.5 * beta * n_obs * psi0)
    return jnp.sum(per_row)

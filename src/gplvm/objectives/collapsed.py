r"""The collapsed variational bound of the Bayesian GPLVM (Titsias & Lawrence 2010), in the
numerically stable form of seed 001 §B (eqs. 14–31), extended to missing data.

For output columns that share the set of observed rows (a *group* g with observed-row weights
:math:`w_g \in \{0,1\}^N`, :math:`N_g = \sum_n w_{gn}`), with β = 1/σ² and
:math:`K_{uu} = L_u L_u^\top`, :math:`A_g = \beta L_u^{-1}\Psi_{2,g} L_u^{-\top} + I_M = L_{A,g}
L_{A,g}^\top`, each column d of group g contributes (seed 001 eqs. 26–29)

.. math::
    F_d = -\frac{N_g}{2}\log 2\pi + \frac{N_g}{2}\log\beta - \log|L_{A,g}|
          - \frac{\beta}{2}\psi_{0,g} + \frac{\beta}{2}\mathrm{tr}(L_u^{-1}\Psi_{2,g}L_u^{-\top})
          - \frac{\beta}{2} y_d^\top y_d + \frac{\beta^2}{2}\|L_{A,g}^{-1} L_u^{-1}\Psi_1^\top y_d\|^2,

where :math:`y_d` has its missing entries set to 0 (so the rows it does not observe drop out of
:math:`\Psi_1^\top y_d`), and :math:`\psi_{0,g}`, :math:`\Psi_{2,g}` sum over the group's observed
rows only.  The bound is :math:`\sum_d F_d - \mathrm{KL}(q(X)\,\|\,p(X))` (seed 001 eq. 32).

*On the misprint of seed 004 eq. 1.*  Since :math:`|\beta\Psi_2 + K_{uu}| = |K_{uu}||A|`, the
log-determinant part of :math:`F_d` is :math:`\frac{N}{2}\log\beta - \frac12\log|A|`; written with
:math:`W = \sigma^2 K_{uu} + \Psi_2` it is :math:`\frac12[\ln|K_{uu}| - n\ln 2\pi - (n-m)\ln\sigma^2
- \ln|W|]`, which keeps the :math:`m\ln\sigma^2` term that eq. 1 as printed drops.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gplvm.linalg import solve_triangular


class MissingGroups(NamedTuple):
    """Columns grouped by their pattern of observed rows (computed once, outside jit)."""

    weights: jnp.ndarray       # (G, N) 1.0 where the group's columns are observed
    column_group: jnp.ndarray  # (D,) the group of each column
    n_obs: jnp.ndarray         # (G,) observed rows per group


def group_columns(Y) -> MissingGroups:
    """Group the columns of Y (NaN = missing) by identical missingness patterns."""
    import numpy as np

    observed = ~np.isnan(np.asarray(Y))
    patterns, column_group = np.unique(observed.T, axis=0, return_inverse=True)
    weights = patterns.astype(float)
    return MissingGroups(jnp.asarray(weights), jnp.asarray(column_group.ravel()),
                         jnp.asarray(weights.sum(1)))


def kl_standard_normal(X_mean, X_var):
    """KL(q(X) ‖ Π N(0, I)) for diagonal q (seed 001 eq. 32)."""
    return 0.5 * jnp.sum(X_mean**2 + X_var - jnp.log(X_var) - 1.0)


class BoundParts(NamedTuple):
    """Per-group quantities shared by the bound and the optimal q(U)."""

    Lu: jnp.ndarray        # (M, M)
    LA: jnp.ndarray        # (G, M, M)
    P: jnp.ndarray         # (M, D) L_u⁻¹ Ψ1ᵀ Y0


def data_term(psi0, psi1, psi2, Kuu, Y0, groups: MissingGroups, noise_var, jitter=0.0):
    """Σ_d F_d of the module docstring, and the factors reused for q(U).

    Args:
        psi0: (G,) ψ0 summed over each group's observed rows.
        psi1: (N, M).
        psi2: (G, M, M) Ψ2 summed over each group's observed rows.
        Kuu: (M, M) inducing covariance.
        Y0: (N, D) data with missing entries set to 0.
        groups: from :func:`group_columns`.
        noise_var: σ² (scalar).
        jitter: added to Kuu's diagonal (chosen outside jit by the jitter policy).
    """
    beta = 1.0 / noise_var
    M = Kuu.shape[0]
    Lu = jnp.linalg.cholesky(Kuu + jitter * jnp.eye(M))
    # L_u⁻¹ Ψ2_g L_u⁻ᵀ for every group
    Lu_inv_psi2 = jax.vmap(lambda S: solve_triangular(Lu, solve_triangular(Lu, S).T))(psi2)
    A = beta * Lu_inv_psi2 + jnp.eye(M)
    LA = jnp.linalg.cholesky(A)                                        # (G, M, M)
    P = solve_triangular(Lu, psi1.T @ Y0)                              # (M, D)
    LA_col = LA[groups.column_group]                                   # (D, M, M)
    c = jax.vmap(solve_triangular)(LA_col, P.T)                        # (D, M)
    n_col = groups.n_obs[groups.column_group]
    logdet_LA = jnp.sum(jnp.log(jnp.diagonal(LA, axis1=1, axis2=2)), axis=1)   # (G,)
    tr = jnp.trace(Lu_inv_psi2, axis1=1, axis2=2)                              # (G,)
    g = groups.column_group
    per_column = (-0.5 * n_col * math.log(2 * math.pi) + 0.5 * n_col * jnp.log(beta)
                  - logdet_LA[g] - 0.5 * beta * psi0[g] + 0.5 * beta * tr[g]
                  + 0.5 * beta**2 * jnp.sum(c**2, axis=1))
    value = jnp.sum(per_column) - 0.5 * beta * jnp.sum(Y0**2)
    return value, BoundParts(Lu, LA, P)


def optimal_q_u(parts: BoundParts, groups: MissingGroups, noise_var):
    """The optimal q(u_d) = N(ū_d, Σ_u,g) given q(X) (seed 003 eq. 11, Titsias 2009).

    With A_g as above, :math:`\\bar u_d = \\beta L_u L_{A,g}^{-\\top} L_{A,g}^{-1} L_u^{-1}
    \\Psi_1^\\top y_d` and :math:`\\Sigma_{u,g} = L_u A_g^{-1} L_u^\\top`.

    Returns:
        U_mean (M, D) and Sigma_u (G, M, M).
    """
    beta = 1.0 / noise_var
    LA_col = parts.LA[groups.column_group]
    v = jax.vmap(lambda L, p: solve_triangular(L, solve_triangular(L, p), trans=True))(
        LA_col, parts.P.T)                                             # (D, M) A_g⁻¹ P
    U_mean = beta * parts.Lu @ v.T
    LA_inv_LuT = jax.vmap(lambda L: solve_triangular(L, parts.Lu.T))(parts.LA)
    Sigma_u = jnp.einsum("gkm,gkn->gmn", LA_inv_LuT, LA_inv_LuT)
    return U_mean, Sigma_u

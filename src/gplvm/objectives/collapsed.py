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
from gplvm.registry import register


@register("gplvm.state.MissingGroups")
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
    """Per-group quantities shared by the bound and the optimal q(U), and each column's term."""

    Lu: jnp.ndarray          # (M, M)
    LA: jnp.ndarray          # (G, M, M)
    P: jnp.ndarray           # (M, D) L_u⁻¹ Ψ1ᵀ Y0
    per_column: jnp.ndarray  # (D,) F_d of the module docstring, −β/2 ‖y_d‖² included


def _group_factors(Lu, psi2_g, beta):
    """One group's L_u⁻¹Ψ2_g L_u⁻ᵀ, the Cholesky factor L_A of A_g and its inverse L_A⁻¹.

    A dependent chain of unbatched LAPACK calls (one matrix each): jaxlib's CPU kernels split a
    *batched* potrf/trsm over XLA's intra-op thread pool and block the calling pool thread until
    the pieces finish, so as many batched calls in flight as the pool has threads (two on a
    2-core machine) deadlock the process at 0% CPU.  With scattered missing entries G is close
    to D, which is enough work to trigger the split.  The groups are therefore visited by
    ``lax.map`` (a loop), never ``vmap``.  A_g ⪰ I, so L_A⁻¹ is well conditioned and
    multiplying by it is as accurate as a triangular solve.
    """
    M = Lu.shape[0]
    B = solve_triangular(Lu, solve_triangular(Lu, psi2_g).T)          # Ψ2_g symmetric
    LA = jnp.linalg.cholesky(beta * B + jnp.eye(M, dtype=B.dtype))
    LA_inv = solve_triangular(LA, jnp.eye(M, dtype=B.dtype))
    return LA, LA_inv, jnp.trace(B)


class RowSums(NamedTuple):
    """The bound's sums over rows: everything it reads from the N rows (seed 001 eqs. 26–29).

    Each field is a sum over n, so rows may be split across devices or processes and the parts
    added (:mod:`gplvm.models.gplvm_family.sharded_bound`); the rest of the bound is M × M
    algebra.
    """

    psi0: jnp.ndarray        # (G,) ψ0 summed over each group's observed rows
    psi1_Y: jnp.ndarray      # (M, D) Ψ1ᵀ Y0
    psi2: jnp.ndarray        # (G, M, M) Ψ2 summed over each group's observed rows
    y_sq: jnp.ndarray        # (D,) Σ_n y_nd² per column (missing entries 0)
    y_sq_total: jnp.ndarray  # () Σ_nd y_nd², its own sum: the order the bound is added in


def row_sums(psi0, psi1, psi2, Y0) -> RowSums:
    """:class:`RowSums` of all rows from their Ψ-statistics and the data (missing = 0)."""
    return RowSums(psi0, psi1.T @ Y0, psi2, jnp.sum(Y0**2, axis=0), jnp.sum(Y0**2))


def data_term(psi, Kuu, Y0, groups: MissingGroups, noise_var, jitter=0.0,
              column_weights=None):
    """Σ_d w_d F_d of the module docstring, and the factors reused for q(U).

    With ``column_weights`` None every w_d is 1 (the Bayesian GPLVM); the DP-GP-LVM weights
    column d by its assignment probability to the atom whose kernel built the Ψ-statistics
    (seed 001 §A: the data term is Σ_t Σ_d φ_dt F_d(θ_t)).  Each F_d is returned in
    ``parts.per_column`` either way.  The sums over rows are :func:`row_sums`; the rest is
    :func:`data_term_from_sums`.

    Args:
        psi: (ψ0, Ψ1, Ψ2) as :func:`gplvm.expectations.psi_statistics` returns them with the
            groups' weights: ψ0 (G,) and Ψ2 (G, M, M) summed over each group's observed rows,
            Ψ1 (N, M).
        Kuu: (M, M) inducing covariance.
        Y0: (N, D) data with missing entries set to 0.
        groups: from :func:`group_columns`.
        noise_var: σ² (scalar).
        jitter: added to Kuu's diagonal (chosen outside jit by the jitter policy).
        column_weights: (D,) non-negative weights w_d, or None for all ones.

    Returns:
        The weighted sum, and :class:`BoundParts`.
    """
    return data_term_from_sums(row_sums(*psi, Y0), Kuu, groups, noise_var, jitter,
                               column_weights)


def data_term_from_sums(sums: RowSums, Kuu, groups: MissingGroups, noise_var, jitter=0.0,
                        column_weights=None):
    """:func:`data_term` given the sums over rows: M × M algebra only, no N-sized array.

    Only unbatched LAPACK calls are made (one matrix per call; see :func:`_group_factors`):
    the groups are factorised one at a time and each column's :math:`L_{A,g}^{-1} P_d` is a
    matrix product with its group's :math:`L_{A,g}^{-1}`.

    Args:
        sums: :class:`RowSums` (from :func:`row_sums`, or added up over shards of rows).
        Kuu, groups, noise_var, jitter, column_weights: as in :func:`data_term`.

    Returns:
        The weighted sum, and :class:`BoundParts`.
    """
    beta = 1.0 / noise_var
    M = Kuu.shape[0]
    Lu = jnp.linalg.cholesky(Kuu + jitter * jnp.eye(M))
    LA, LA_inv, tr = jax.lax.map(lambda S: _group_factors(Lu, S, beta),
                                 sums.psi2)                            # (G, M, M) ×2, (G,)
    P = solve_triangular(Lu, sums.psi1_Y)                              # (M, D)
    g = groups.column_group
    c = jnp.einsum("dmk,kd->dm", LA_inv[g], P)                         # (D, M) L_A,g⁻¹ P_d
    n_col = groups.n_obs[g]
    logdet_LA = jnp.sum(jnp.log(jnp.diagonal(LA, axis1=1, axis2=2)), axis=1)   # (G,)
    per_column = (-0.5 * n_col * math.log(2 * math.pi) + 0.5 * n_col * jnp.log(beta)
                  - logdet_LA[g] - 0.5 * beta * sums.psi0[g] + 0.5 * beta * tr[g]
                  + 0.5 * beta**2 * jnp.sum(c**2, axis=1))
    yy = 0.5 * beta * sums.y_sq                                        # (D,)
    if column_weights is None:
        # summed as one array and one scalar, the order the bound has always been added in
        value = jnp.sum(per_column) - 0.5 * beta * sums.y_sq_total
    else:
        value = jnp.sum(column_weights * (per_column - yy))
    return value, BoundParts(Lu, LA, P, per_column - yy)


def optimal_q_u(parts: BoundParts, groups: MissingGroups, noise_var):
    """The optimal q(u_d) = N(ū_d, Σ_u,g) given q(X) (seed 003 eq. 11, Titsias 2009).

    With A_g as above, :math:`\\bar u_d = \\beta L_u L_{A,g}^{-\\top} L_{A,g}^{-1} L_u^{-1}
    \\Psi_1^\\top y_d` and :math:`\\Sigma_{u,g} = L_u A_g^{-1} L_u^\\top`.  One group per
    (unbatched) LAPACK call, as in :func:`data_term`.

    Returns:
        U_mean (M, D) and Sigma_u (G, M, M).
    """
    beta = 1.0 / noise_var
    M = parts.Lu.shape[0]

    def one_group(LA):
        LA_inv = solve_triangular(LA, jnp.eye(M, dtype=LA.dtype))
        LA_inv_LuT = solve_triangular(LA, parts.Lu.T)
        return LA_inv, LA_inv_LuT.T @ LA_inv_LuT

    LA_inv, Sigma_u = jax.lax.map(one_group, parts.LA)
    LA_inv_col = LA_inv[groups.column_group]                           # (D, M, M)
    c = jnp.einsum("dmk,kd->dm", LA_inv_col, parts.P)                  # L_A⁻¹ P_d
    v = jnp.einsum("dkm,dk->dm", LA_inv_col, c)                        # (D, M) A_g⁻¹ P_d
    U_mean = beta * parts.Lu @ v.T
    return U_mean, Sigma_u

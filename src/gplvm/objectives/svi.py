r"""The uncollapsed (stochastic variational) bound of the Bayesian GPLVM.

Hensman, Fusi & Lawrence (2013, "Gaussian processes for big data") keep q(U) explicit so that
the bound is a sum over rows (their eq. 4 with eqs. 6–7); with uncertain inputs x_n
(Titsias & Lawrence 2010, eq. 15) the expectation over q(x_n) enters only through the
Ψ-statistics, so the bound of one output column d with q(u_d) = N(m_d, S) is

.. math::
    \mathcal L = \sum_d \sum_{n \in O_d} E_{q(x_n)q(f_{nd})}[\log N(y_{nd} | f_{nd}, \sigma^2)]
      - \sum_d \mathrm{KL}(q(u_d)\|p(u_d)) - \sum_n \mathrm{KL}(q(x_n)\|p(x_n)),

with, for each column d (observed rows O_d, :math:`v_d = K_{uu}^{-1} m_d`,
:math:`H = K_{uu}^{-1} S K_{uu}^{-1}`, Ψ-statistics summed over O_d),

.. math::
    \sum_{n\in O_d} E[\log N] = -\tfrac{|O_d|}{2}\log 2\pi\sigma^2 - \tfrac{\beta}{2}\Big(
      y_d^\top y_d - 2 y_d^\top \Psi_1 v_d + v_d^\top\Psi_{2,d} v_d
      + \mathrm{tr}(\Psi_{2,d} H) + \psi_{0,d} - \mathrm{tr}(K_{uu}^{-1}\Psi_{2,d})\Big)

(the expectation of Hensman et al. eq. 6 under q(x_n): :math:`E[K_{nu}] = \Psi_1`,
:math:`E[K_{un}K_{nu}] = \Psi_2`, :math:`E[k_{nn}] = \psi_0`).  Every term is a sum over rows,
so a minibatch of B rows scaled by N/B estimates it without bias (Hensman et al. §3).

*Whitening.*  q(U) is held as q(v_d) = N(a_d, L Lᵀ) with u_d = L_u v_d (K_uu = L_u L_uᵀ), so
m_d = L_u a_d and S = L_u L Lᵀ L_uᵀ: the same Gaussian family, with the prior N(0, I), whose
KL needs no K_uu solve and whose parameters keep their meaning while Z and the kernel move.
L is lower triangular with a softplus diagonal (:func:`chol_from_raw`), shared by the columns.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp

from gplvm.linalg import solve_triangular
from gplvm.transforms import inverse_softplus, softplus


class ColumnWeights(NamedTuple):
    """How the batch's Ψ-statistics are shared by the columns.

    ``weights`` (G, B) weights the rows for ψ0 and Ψ2: one row of ones (G = 1) when nothing
    is missing, the observed mask's transpose (G = D) otherwise; ``column_group`` (D,) the
    weighting of each column; ``n_obs`` (D,) observed rows per column.
    """

    weights: jnp.ndarray
    column_group: jnp.ndarray
    n_obs: jnp.ndarray


def column_weights(observed, n_cols: int, n_rows: int) -> ColumnWeights:
    """:class:`ColumnWeights` of a batch; ``observed`` (B, D) 0/1, or None for complete rows."""
    if observed is None:
        return ColumnWeights(jnp.ones((1, n_rows)), jnp.zeros(n_cols, dtype=int),
                             jnp.full(n_cols, float(n_rows)))
    return ColumnWeights(observed.T, jnp.arange(n_cols), jnp.sum(observed, axis=0))


def chol_from_raw(raw):
    """Lower-triangular L with a positive (softplus) diagonal from an unconstrained (M, M)."""
    return jnp.tril(raw, -1) + jnp.diag(softplus(jnp.diagonal(raw)))


def raw_from_chol(L):
    """The inverse of :func:`chol_from_raw` (L lower triangular, positive diagonal)."""
    return jnp.tril(L, -1) + jnp.diag(inverse_softplus(jnp.diagonal(L)))


def kl_q_u(a, L):
    r""":math:`\sum_d \mathrm{KL}(N(a_d, LL^\top)\,\|\,N(0, I))` (Hensman et al. 2013, eq. 7
    in whitened form): :math:`\tfrac12[D\,\mathrm{tr}(LL^\top) + \|A\|_F^2 - DM -
    2D\sum_m \log L_{mm}]` with A = (a_1 … a_D) (M × D)."""
    M, D = a.shape
    return 0.5 * (D * jnp.sum(L**2) + jnp.sum(a**2) - D * M
                  - 2.0 * D * jnp.sum(jnp.log(jnp.diagonal(L))))


class RowSums(NamedTuple):
    """The sums over a batch's rows that :func:`expected_log_lik` reads, and the rows' KL.

    When the rows are split over devices
    (:func:`gplvm.models.gplvm_family.sharded_bound.svi_row_sums`) each device sums its own
    rows and the blocks are added: ``psi0`` (G,), ``psi1_Y`` (M, D) Ψ1ᵀY, ``psi2`` (G, M, M),
    ``yy`` (D,) Σ_n y_nd², ``n_obs`` (D,) observed rows per column and
    ``kl`` Σ_n KL(q(x_n) ‖ N(0, I)).
    """

    psi0: jnp.ndarray
    psi1_Y: jnp.ndarray
    psi2: jnp.ndarray
    yy: jnp.ndarray
    n_obs: jnp.ndarray
    kl: jnp.ndarray


class Hyper(NamedTuple):
    """The values besides q(U) and the Ψ-statistics that the bound's algebra reads.

    ``Kuu`` (M, M) the kernel at the inducing inputs, ``noise_var`` σ² and ``jitter`` the
    value added to K_uu's diagonal (chosen outside jit by the jitter policy).
    """

    Kuu: jnp.ndarray
    noise_var: jnp.ndarray
    jitter: float = 0.0


class WhitenedQ(NamedTuple):
    """The whitened q(U) of the module docstring: ``a`` (M, D) the means a_d of q(v_d) and ``L``
    (M, M) the lower-triangular factor of their shared covariance L Lᵀ."""

    a: jnp.ndarray
    L: jnp.ndarray


def expected_log_lik(psi0, psi1, psi2, Y0, cols: ColumnWeights, hyper: Hyper, q: WhitenedQ):
    """Σ_d Σ_{n∈O_d} E[log N(y_nd | f_nd, σ²)] of the module docstring, for the rows given.

    Only unbatched LAPACK calls (one matrix each, see :mod:`gplvm.objectives.collapsed`): the
    per-column Ψ2 enter through matrix products with K_uu⁻¹, V = L_u⁻ᵀ A and L_u⁻ᵀ L.

    Args:
        psi0: (G,) ψ0 per row weighting; psi1: (B, M); psi2: (G, M, M).
        Y0: (B, D) rows with missing entries 0; cols: :func:`column_weights`.
        hyper: K_uu, σ² and the jitter (:class:`Hyper`).
        q: the whitened q(U) (:class:`WhitenedQ`).
    """
    return _expected_log_lik(psi0, psi2, lambda V: jnp.sum(Y0 * (psi1 @ V), axis=0),
                             jnp.sum(Y0**2, axis=0), cols, hyper, q)


def expected_log_lik_from_sums(sums: RowSums, hyper: Hyper, q: WhitenedQ):
    """:func:`expected_log_lik` from the rows' sums (:class:`RowSums`): y_dᵀΨ1 v_d as the
    d-th column of (Ψ1ᵀY) ∘ V summed (the same number, its additions in another order).
    G = 1 (complete rows) or G = D (a weighting per column)."""
    column_group = jnp.arange(sums.yy.shape[0]) if sums.psi2.shape[0] > 1 else jnp.zeros(
        sums.yy.shape[0], dtype=int)
    return _expected_log_lik(sums.psi0, sums.psi2, lambda V: jnp.sum(sums.psi1_Y * V, axis=0),
                             sums.yy, ColumnWeights(None, column_group, sums.n_obs), hyper, q)


def _expected_log_lik(psi0, psi2, cross_of, yy, cols: ColumnWeights, hyper: Hyper,
                      q: WhitenedQ):
    """The algebra of :func:`expected_log_lik`; ``cross_of(V)`` gives (D,) y_dᵀ Ψ1 v_d, ``cols``
    the columns' groups and observed counts (its ``weights`` are not read)."""
    Kuu, noise_var, jitter = hyper
    a, L = q
    beta = 1.0 / noise_var
    M = Kuu.shape[0]
    Lu = jnp.linalg.cholesky(Kuu + jitter * jnp.eye(M))
    V = solve_triangular(Lu, a, trans=True)                               # (M, D) K_uu⁻¹ m_d
    B = solve_triangular(Lu, L, trans=True)                               # L_u⁻ᵀ L
    Lu_inv = solve_triangular(Lu, jnp.eye(M))
    H_minus_Kinv = B @ B.T - Lu_inv.T @ Lu_inv                         # H − K_uu⁻¹
    trace_g = jnp.einsum("gmk,mk->g", psi2, H_minus_Kinv)              # (G,)
    if psi2.shape[0] == 1:      # complete rows: one Ψ2 for every column
        quad = jnp.sum(V * (psi2[0] @ V), axis=0)                      # (D,) v_dᵀ Ψ2 v_d
    else:
        quad = jnp.einsum("md,dmk,kd->d", V, psi2[cols.column_group], V)
    g = cols.column_group
    cross = cross_of(V)                                                # (D,) y_dᵀ Ψ1 v_d
    per_column = (-0.5 * cols.n_obs * jnp.log(2 * math.pi * noise_var)
                  - 0.5 * beta * (yy - 2.0 * cross + quad + trace_g[g] + psi0[g]))
    return jnp.sum(per_column)


def optimal_whitened_q_u(psi1, psi2, Kuu, Y0, noise_var, scale=1.0, jitter=0.0):
    r"""The optimal q(v_d) = N(a_d, Σ) given q(X) when every row is observed (Titsias 2009;
    Hensman et al. 2013, eqs. 9–10 with all rows): with :math:`\tilde\Psi_2 = L_u^{-1}\Psi_2
    L_u^{-\top}`, :math:`\Sigma = (I + c\beta\tilde\Psi_2)^{-1}` and
    :math:`a_d = c\beta\,\Sigma L_u^{-1}\Psi_1^\top y_d` — in u,
    :math:`S = K_{uu}(K_{uu} + c\beta\Psi_2)^{-1}K_{uu}` and
    :math:`m_d = c\beta K_{uu}(K_{uu} + c\beta\Psi_2)^{-1}\Psi_1^\top y_d`.

    ``scale`` c = N/n stands the n rows given in for all N (a starting value from a subsample).

    Returns:
        a (M, D) and L (M, M), the Cholesky factor of Σ.
    """
    return _moments(*_natural_target(psi1.T @ Y0, psi2, Kuu, scale / noise_var, jitter))


def _natural_target(psi1_Y, psi2, Kuu, beta, jitter):
    """The optimum's natural parameters for the rows given: Λ = I + cβ Ψ̃2 and
    η = cβ L_u⁻¹ Ψ1ᵀ Y (``beta`` is cβ, ``psi1_Y`` is Ψ1ᵀY)."""
    M = Kuu.shape[0]
    Lu = jnp.linalg.cholesky(Kuu + jitter * jnp.eye(M))
    Lam = jnp.eye(M) + beta * solve_triangular(Lu, solve_triangular(Lu, psi2).T)
    return Lam, beta * solve_triangular(Lu, psi1_Y)


def _moments(Lam, eta):
    """a = Λ⁻¹ η and the Cholesky factor of Σ = Λ⁻¹."""
    M = Lam.shape[0]
    LA = jnp.linalg.cholesky(0.5 * (Lam + Lam.T))
    LA_inv = solve_triangular(LA, jnp.eye(M))
    Sigma = LA_inv.T @ LA_inv
    return Sigma @ eta, jnp.linalg.cholesky(0.5 * (Sigma + Sigma.T))


def natural_step(q: WhitenedQ, psi1, psi2, Y0, hyper: Hyper, scale, step):
    r"""One natural-gradient step of size ρ on the whitened q(U) (complete rows; Hensman, Fusi
    & Lawrence 2013, eqs. 9–10).

    With the Gaussian likelihood the bound is quadratic in u, so in the natural parameters
    (Λ = Σ⁻¹, η_d = Λ a_d) the natural gradient points at the optimum for the rows given and
    the step is a convex combination:
    :math:`\Lambda \leftarrow (1-\rho)\Lambda + \rho(I + c\beta\tilde\Psi_2)`,
    :math:`\eta_d \leftarrow (1-\rho)\eta_d + \rho\, c\beta L_u^{-1}\Psi_1^\top y_d`, with
    c = N/B the minibatch scale (ρ = 1 and c = 1 on all rows give
    :func:`optimal_whitened_q_u`).

    Args:
        q: the current whitened q(U) (:class:`WhitenedQ`).
        psi1: (B, M); psi2: (M, M) summed over the rows; Y0: (B, D) complete rows.
        hyper: K_uu, σ² and the jitter (:class:`Hyper`).
        scale: c = N/B; step: ρ.

    Returns:
        The new a (M, D) and L (M, M).
    """
    return natural_step_from_sums(q, psi1.T @ Y0, psi2, hyper, scale, step)


def natural_step_from_sums(q: WhitenedQ, psi1_Y, psi2, hyper: Hyper, scale, step):
    """:func:`natural_step` given the rows' sums Ψ1ᵀY (M, D) and Ψ2 (M, M) (for rows split
    over devices, :func:`gplvm.models.gplvm_family.sharded_bound.svi_row_sums`)."""
    a, L = q
    Kuu, noise_var, jitter = hyper
    L_inv = solve_triangular(L, jnp.eye(L.shape[0]))
    Lam = L_inv.T @ L_inv
    Lam_target, eta_target = _natural_target(psi1_Y, psi2, Kuu, scale / noise_var, jitter)
    return _moments((1.0 - step) * Lam + step * Lam_target,
                    (1.0 - step) * (Lam @ a) + step * eta_target)

r"""Updates of the RFLVM weights β and of the Gaussian noise (seed 000, §3.1, eqs. 20, 26–28).

**Gaussian, weights integrated out.**  With B0 = σ_j² s0 I (the conjugate form; seed 000,
Appendix A: "B0 = σ² S0") the columns are independent a priori and

.. math:: y_j \mid X, W, \sigma_j^2 \sim N(0, \sigma_j^2 (I + s_0 \Phi\Phi^\top)).

With :math:`A = \Phi^\top\Phi + I/s_0 = LL^\top`, :math:`p_j = \Phi^\top y_j` and
:math:`v_j = L^{-1} p_j`, Woodbury and the determinant lemma give

.. math:: \log p(y_j) = -\tfrac N2 \log(2\pi\sigma_j^2) - \tfrac12(\log|A| + M\log s_0)
          - \frac{y_j^\top y_j - \|v_j\|^2}{2\sigma_j^2},

at O(NM² + M³ + M²D) for all columns together.  The inverse-gamma prior IG(a0, b0) is then
conjugate for σ_j² with β integrated out: σ_j² | y_j ~ IG(a0 + N/2, b0 + (y_jᵀy_j − ‖v_j‖²)/2),
and β_j | σ_j², y_j ~ N(A⁻¹p_j, σ_j² A⁻¹).

**Logistic family (Pólya-gamma, eq. 28).**  With p(y | ψ) ∝ (e^ψ)^a/(1 + e^ψ)^b, ψ = o + Φβ,
and ω ~ PG(b, ψ), the weights of column j are Gaussian:

.. math:: V_j^{-1} = \Phi^\top\Omega_j\Phi + B_0^{-1}, \qquad
          m_j = V_j(\Phi^\top(\kappa_j - \Omega_j o_j) + B_0^{-1}\beta_0),

κ = a − b/2 (the offset o — row offsets, or the multinomial's ξ of eq. 36 — enters through
−Ω o).  Unobserved entries have ω = κ = 0 and drop out.

**Poisson and negative binomial.**  No augmentation: β_j by elliptical slice sampling
(:mod:`gplvm.models.rflvm.weights_ess`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import solve_triangular


Array = jax.Array


# --- Gaussian: β integrated out ---------------------------------------------------------------

class CollapsedTerms(NamedTuple):
    """Factorised pieces of the collapsed Gaussian marginal (see the module docstring)."""

    L: Array        # (M, M) Cholesky factor of A = ΦᵀΦ + I/s0
    v: Array        # (M, D) L⁻¹ Φᵀ Y
    logdet_A: Array  # ()


def collapsed_terms(G: Array, P: Array, s0: float) -> CollapsedTerms:
    """From G = ΦᵀΦ and P = ΦᵀY."""
    A = G + jnp.eye(G.shape[0], dtype=G.dtype) / s0
    L = jnp.linalg.cholesky(A)
    v = solve_triangular(L, P, lower=True)
    return CollapsedTerms(L, v, 2.0 * jnp.sum(jnp.log(jnp.diag(L))))


def collapsed_log_marginal(terms: CollapsedTerms, yy: Array, noise_var: Array, n_rows: int,
                           s0: float) -> Array:
    """Σ_j log N(y_j | 0, σ_j²(I + s0 ΦΦᵀ)) (module docstring); ``yy`` = (y_jᵀy_j)_j."""
    M = terms.L.shape[0]
    quad = jnp.sum(terms.v**2, axis=0)
    per_col = (-0.5 * n_rows * jnp.log(2.0 * jnp.pi * noise_var)
               - 0.5 * (terms.logdet_A + M * jnp.log(s0))
               - 0.5 * (yy - quad) / noise_var)
    return jnp.sum(per_col)


def sample_noise_var(key: Array, terms: CollapsedTerms, yy: Array, n_rows: int,
                     prior: tuple) -> Array:
    """σ_j² | y_j, X, W ~ IG(a0 + N/2, b0 + (y_jᵀy_j − ‖v_j‖²)/2), β integrated out."""
    a0, b0 = prior
    resid = jnp.maximum(yy - jnp.sum(terms.v**2, axis=0), 0.0)
    shape = a0 + 0.5 * n_rows
    rate = b0 + 0.5 * resid
    return rate / jax.random.gamma(key, shape, yy.shape, dtype=yy.dtype)


def sample_beta_gaussian(key: Array, terms: CollapsedTerms, noise_var: Array) -> Array:
    """β_j | σ_j², y_j ~ N(A⁻¹Φᵀy_j, σ_j² A⁻¹), all columns: (M, D)."""
    eps = jax.random.normal(key, terms.v.shape, dtype=terms.v.dtype)
    # A⁻¹p = L⁻ᵀ v; a draw of N(0, A⁻¹) is L⁻ᵀ ε.
    return solve_triangular(terms.L.T, terms.v + jnp.sqrt(noise_var) * eps, lower=False)


# --- Pólya-gamma Gibbs (eq. 28) ---------------------------------------------------------------

def sample_beta_pg(key: Array, Phi: Array, omega: Array, kappa: Array, offset: Array,
                   prior_mean: Array, prior_prec: Array) -> Array:
    """β_j | ω_j ~ N(m_j, V_j) for every column (eq. 28 with an offset).

    The D precision matrices come from one product (:func:`column_grams`); columns are then
    visited by ``lax.map`` with one factorisation and its solves per call:
    jaxlib's CPU LAPACK kernels fan a *batched* call out to XLA's thread pool and block the
    calling pool thread, and two such calls at once deadlock a 2-thread pool (see
    :mod:`gplvm.priors.dynamical`).  Per column, β = L⁻ᵀ(L⁻¹ rhs + ε) with V⁻¹ = LLᵀ gives the
    mean V rhs plus noise L⁻ᵀε ~ N(0, V) in two dependent triangular solves.

    Args:
        Phi: (N, P) design.  omega, kappa, offset: (N, D) (zeros where unobserved).
        prior_mean: (P, D).  prior_prec: (P,) diagonal of B0⁻¹.

    Returns:
        (P, D) draw.
    """
    rhs = Phi.T @ (kappa - omega * offset) + prior_prec[:, None] * prior_mean   # (P, D)
    eps = jax.random.normal(key, rhs.shape, dtype=rhs.dtype)
    P = Phi.shape[1]
    upper = column_grams(Phi, omega)                                            # (D, P(P+1)/2)

    def column(args):
        upper_j, rhs_j, eps_j = args
        prec = _symmetric(upper_j, P) + jnp.diag(prior_prec)
        L = jnp.linalg.cholesky(prec)
        v = solve_triangular(L, rhs_j, lower=True)
        return solve_triangular(L.T, v + eps_j, lower=False)

    return lax.map(column, (upper, rhs.T, eps.T)).T


def column_grams(Phi: Array, omega: Array) -> Array:
    """Upper triangles of Φᵀdiag(ω_j)Φ for every column j, as one product: (D, P(P+1)/2).

    With Z = (φ_a φ_b)_{a ≤ b} (N × P(P+1)/2), entry (a, b) of column j's matrix is
    Σ_n Z_n,ab ω_nj: one (P(P+1)/2 × N)(N × D) product with half the multiply-adds of D
    separate P × P squares, in one large GEMM instead of D small ones (issue 14).
    """
    rows, cols = np.triu_indices(Phi.shape[1])
    Z = Phi[:, rows] * Phi[:, cols]
    return (Z.T @ omega).T


def _symmetric(upper: Array, P: int) -> Array:
    """The symmetric P × P matrix with upper triangle ``upper`` (row-major, as np.triu_indices)."""
    rows, cols = np.triu_indices(P)
    A = jnp.zeros((P, P), upper.dtype).at[rows, cols].set(upper)
    return A + jnp.triu(A, 1).T


def sample_beta_pg_column(key: Array, Phi: Array, omega: Array, kappa: Array, offset: Array,
                          prior_mean: Array, prior_prec: Array) -> Array:
    """One column's β_j | ω_j (the multinomial updates columns in turn, eq. 35): (P,)."""
    prec = (Phi * omega[:, None]).T @ Phi + jnp.diag(prior_prec)
    rhs = Phi.T @ (kappa - omega * offset) + prior_prec * prior_mean
    L = jnp.linalg.cholesky(prec)
    eps = jax.random.normal(key, rhs.shape, dtype=rhs.dtype)
    return solve_triangular(L.T, solve_triangular(L, rhs, lower=True) + eps, lower=False)

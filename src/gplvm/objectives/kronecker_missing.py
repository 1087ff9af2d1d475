r"""Missing pixels in the structured GPLVM's training images, keeping the Kronecker algebra.

Seed 003 fits complete image grids; dropping the missing (image, pixel) rows would break the
Kronecker structure of eq. 17 (Ψ2 becomes a sum of n_ξ Kronecker products).  Instead each missing
value y_i gets a variational Gaussian q(y_i) = N(m_i, s_i).  Since the collapsed bound F(y) of
:func:`gplvm.objectives.kronecker.data_term` lower-bounds log p(y) for every completion y,

.. math:: \log p(y_o) \ge \mathbb E_{q(y_m)}[F(y_o, y_m)] + H[q(y_m)].

F is quadratic in y: F = c − (β/2)yᵀy + (β²/2)yᵀHy per channel, with H = R̃ᵀ diag(ω/d) R̃ and
R̃ = ⊗Q_pᵀP_p (module docstring of :mod:`~gplvm.objectives.kronecker`), so

.. math:: \mathbb E_q[F] + H[q] = F(y_o, m) + \sum_{i\,\mathrm{missing}}
          \Big[-\tfrac{s_i}{2}\,\beta(1 - \beta H_{ii}) + \tfrac12\log(2\pi e\, s_i)\Big],

maximised over s_i in closed form at s_i = 1/(β(1 − βH_ii)) (the conditional variance of y_i
under the bound's Gaussian), which leaves Σ_missing ½ log(2π s_i).  The means m stay free
parameters of the fit (at the optimum: the conditional means).  This is the mean-field
completion: below the bound of the observed rows alone by ½β Σ_missing Var q(f_i) at the optimum,
and equal to the complete-data bound when nothing is missing.

**The diagonal H_ii**, for image i and pixel j, without eigenvectors of the latent factor (whose
eigenvalues repeat when latent dimensions switch off, where autodiff through ``eigh`` fails): with
the spatial eigenpairs (λ_b, q_b) of ⊗S_p, weights w_b = ⊗λ_p^{e_p}, r_b = (⊗Q_pᵀP_p)ᵀ row b,

.. math:: H_{ij} = \sum_b w_b\, r_{bj}^2\; p_i^\top (I + \beta\lambda_b C_\xi)^{-1} p_i,

p_i = L_ξ⁻¹ψ1_i the latent factor's projection of image i: one Cholesky of m_ξ × m_ξ per spatial
eigenvalue, and one :func:`~gplvm.linalg.kron_apply` with the squared r's.  The spatial factors
are eigendecomposed with ``jnp.linalg.eigh`` (differentiable away from repeated eigenvalues: a
spatial kernel whose Gram matrix has repeated eigenvalues, such as
:class:`~gplvm.kernels.Coincidence`, is refused by the estimator for incomplete training data).
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import jax.numpy as jnp

from gplvm.linalg import kron_apply
from gplvm.objectives.kronecker import _kron_vec


def quadratic_diagonal(factors: Sequence, noise_var):
    """H_ij of the module docstring for every (image i, pixel j): (n_ξ, n_s).

    Args:
        factors: the :class:`~gplvm.objectives.kronecker.KronFactor`\\ s, latent first.
        noise_var: σ².
    """
    beta = 1.0 / noise_var
    latent, spatial = factors[0], list(factors[1:])
    pairs = [jnp.linalg.eigh(f.S) for f in spatial]
    lam = [jnp.maximum(w, 0.0) for w, _ in pairs]        # PSD factors: round-off negatives → 0
    weights = _kron_vec([w if f.P is None else jnp.ones_like(w) for f, w in zip(spatial, lam)])
    r2 = [(V.T if f.P is None else V.T @ f.P) ** 2 for f, (_, V) in zip(spatial, pairs)]
    C, P = latent.S, latent.P                            # C_ξ (m_ξ, m_ξ); L_ξ⁻¹Ψ1ᵀ (m_ξ, n_ξ)
    eye = jnp.eye(C.shape[0], dtype=C.dtype)

    def per_eigenvalue(lam_b):                           # p_iᵀ(I + βλ_b C)⁻¹p_i for every i
        L = jnp.linalg.cholesky(eye + beta * lam_b * C)
        A = jax.scipy.linalg.solve_triangular(L, P, lower=True)
        return jnp.sum(A**2, axis=0)

    h = jax.lax.map(per_eigenvalue, _kron_vec(lam))      # (Π m_p, n_ξ)
    H = kron_apply([r.T for r in r2], [r.shape[0] for r in r2], weights[:, None] * h)
    return H.T


def missing_term(factors: Sequence, counts, noise_var):
    """Σ over missing entries of ½ log(2π s_ij), s_ij = 1/(β(1 − βH_ij)) (module docstring).

    Args:
        factors: as :func:`quadratic_diagonal`.
        counts: (n_ξ, n_s) number of missing channels of each (image, pixel).
        noise_var: σ².
    """
    beta = 1.0 / noise_var
    H = quadratic_diagonal(factors, noise_var)
    gap = jnp.clip(1.0 - beta * H, 1e-12, None)
    per_entry = 0.5 * math.log(2 * math.pi) - 0.5 * jnp.log(beta) - 0.5 * jnp.log(gap)
    return jnp.sum(counts * per_entry)

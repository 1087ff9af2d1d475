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
are eigendecomposed with ``jnp.linalg.eigh``; the gradient with respect to them is a custom VJP
with the divided differences in closed form (resolvent identity), so it stays finite where
spatial eigenvalues repeat — a factor σ²I, as when a length-scale falls far below the pixel
spacing — as :func:`gplvm.linalg.kron_spectral_terms` does for the complete-data bound.
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp

from gplvm.linalg import _outer_except, kron_apply, psd_eigh
from gplvm.objectives.kronecker import _kron_vec


def _projections(Q, P_list):
    """T_p = Q_pᵀP_p (Q_pᵀ at the pixels): the spatial eigenbasis against each pixel."""
    return [V.T if P is None else V.T @ P for V, P in zip(Q, P_list)]


def _resolvents(lam, C, P_xi, beta, keep: bool):
    """h_bi = p_iᵀ(I + βλ_b C)⁻¹p_i for every spatial eigenvalue product λ_b, (Π m_p, n_ξ),
    and with ``keep`` also Y_b = (I + βλ_b C)⁻¹P_ξ, (Π m_p, m_ξ, n_ξ): one Cholesky each."""
    eye = jnp.eye(C.shape[0], dtype=C.dtype)

    def per_eigenvalue(lam_b):
        L = jnp.linalg.cholesky(eye + beta * lam_b * C)
        A = jax.scipy.linalg.solve_triangular(L, P_xi, lower=True)
        h = jnp.sum(A**2, axis=0)
        if not keep:
            return h
        return h, jax.scipy.linalg.solve_triangular(L.T, A, lower=False)

    return jax.lax.map(per_eigenvalue, _kron_vec(lam))


def _combine(weighted, lam, Q, P_list, h):
    """H (n_ξ, n_s) = Σ_b w_b r_bj² h_bi (module docstring): linear in h."""
    weights = _kron_vec([w if e else jnp.ones_like(w) for w, e in zip(lam, weighted)])
    r2 = [T**2 for T in _projections(Q, P_list)]
    H = kron_apply([r.T for r in r2], [r.shape[0] for r in r2], weights[:, None] * h)
    return H.T


class _Residuals(NamedTuple):
    """What the forward pass of :func:`_diagonal` keeps for its backward pass: the spatial
    eigenpairs (``lam``, ``Q``), the pixel projections ``P_list``, the latent factor's ``C`` and
    ``P_xi``, β, and the resolvents ``h`` (Π m_p, n_ξ) and ``Y`` = R(λ_b)P_ξ
    (Π m_p, m_ξ, n_ξ) of :func:`_resolvents`."""

    lam: list
    Q: list
    P_list: list
    C: jnp.ndarray
    P_xi: jnp.ndarray
    beta: jnp.ndarray
    h: jnp.ndarray
    Y: jnp.ndarray


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def _diagonal(weighted, S_list, P_list, C, P_xi, beta):
    lam, Q = psd_eigh(S_list)
    return _combine(weighted, lam, Q, P_list, _resolvents(lam, C, P_xi, beta, keep=False))


def _diagonal_fwd(weighted, S_list, P_list, C, P_xi, beta):
    lam, Q = psd_eigh(S_list)
    h, Y = _resolvents(lam, C, P_xi, beta, keep=True)
    return _combine(weighted, lam, Q, P_list, h), _Residuals(lam, Q, P_list, C, P_xi, beta, h,
                                                             Y)


def _others(vectors, p):
    """Π_{q≠p} v_q over the joint index without factor p, flattened in Kronecker order."""
    return _outer_except(vectors, p).reshape(-1)


def _spectral_cotangents(weighted, res: _Residuals, G):
    r"""∂/∂S_p of Σ_ij G_ij H_ij by Daleckii–Krein, without dividing by eigenvalue gaps.

    At fixed eigenpairs of the other factors (product α and weight ω_o of their eigenvalues),
    H is a matrix function of S_p with scalar function φ_i(x) = x^{e_p} ω_o g_i(αx),
    g_i(v) = p_iᵀR(v)p_i, R(v) = (I + βvC)⁻¹.  The resolvent identity gives its divided
    differences in closed form, with y_a = R(αλ_a)p_i:

    .. math:: \frac{φ_i(λ_a) - φ_i(λ_c)}{λ_a - λ_c} = ω_o\, y_a^\top y_c \;(e_p = 1),\qquad
              -βαω_o\, y_a^\top C y_c \;(e_p = 0),

    smooth through λ_a = λ_c (the derivative there).  The cotangent is Q_p(Σ F ∘ M)Q_pᵀ with
    M_ac = Σ_j G_ij T_p[a, j_p] T_p[c, j_p] Π_{q≠p} T_q[b_q, j_q]² (T_p = Q_pᵀP_p); ``Y`` the
    forward pass's R(λ_b)P_ξ (:func:`_resolvents`), from the :class:`_Residuals` ``res``.
    """
    lam, Q, P_list, C, P_xi, beta, Y = res.lam, res.Q, res.P_list, res.C, res.P_xi, res.beta, \
        res.Y
    sizes = [w.shape[0] for w in lam]
    Y = Y.reshape(*sizes, *P_xi.shape)
    CY = jnp.einsum("kl,...ln->...kn", C, Y)
    T = _projections(Q, P_list)
    n_xi = G.shape[0]
    Gt = G.reshape(n_xi, *[t.shape[1] for t in T])
    ones = [jnp.ones_like(w) for w in lam]
    grads = []
    for p in range(len(lam)):
        Gp = Gt                                          # other pixel axes → their eigenbasis
        for q in range(len(lam)):
            if q != p:
                Gp = jnp.moveaxis(jnp.tensordot(T[q]**2, Gp, axes=([1], [q + 1])), 0, q + 1)
        Gp = jnp.moveaxis(Gp, p + 1, -1).reshape(n_xi, -1, T[p].shape[1])   # (n_ξ, rest, j_p)
        omega_o = _others([w if e else o for w, o, e in zip(lam, ones, weighted)], p)
        coeff = omega_o if weighted[p] else -beta * _others(lam, p) * omega_o
        K_Y = Y if weighted[p] else CY
        Yp = jnp.moveaxis(Y, p, 0).reshape(sizes[p], -1, *P_xi.shape)        # (n_p, rest, m, n)
        KYp = jnp.moveaxis(K_Y, p, 0).reshape(sizes[p], -1, *P_xi.shape)

        def row(args, Gp=Gp, KYp=KYp, Tp=T[p], coeff=coeff):   # row a of Σ F ∘ M
            Y_a, T_a = args
            F = jnp.einsum("rmi,crmi->cri", Y_a, KYp)
            M = jnp.einsum("irj,j,cj->cri", Gp, T_a, Tp)
            return jnp.einsum("cri,r->c", F * M, coeff)

        X = jax.lax.map(row, (Yp, T[p]))
        grads.append(Q[p] @ (0.5 * (X + X.T)) @ Q[p].T)
    return grads


def _diagonal_bwd(weighted, res, G):
    r"""Cotangents from the forward pass's resolvents, no Cholesky again: with
    y_bi = R(λ_b)p_i and Ḡ_bi the cotangent of h_bi (:func:`_combine` is linear in h),

    .. math:: \bar p_i = 2\sum_b Ḡ_{bi} y_{bi},\quad
              \bar C = -β\sum_{bi} λ_b Ḡ_{bi}\, y_{bi} y_{bi}^\top,\quad
              \bar β = -\sum_{bi} λ_b Ḡ_{bi}\, y_{bi}^\top C y_{bi},

    from dR = −R dA R; the spatial factors by :func:`_spectral_cotangents`; the pixel
    projections P_p by autodiff of :func:`_combine` at fixed h."""
    lam, Q, P_list, C, P_xi, beta, h, Y = res
    _, vjp = jax.vjp(partial(_combine, weighted, lam, Q), P_list, h)
    g_P, G_h = vjp(G)
    lam_b = _kron_vec(lam)
    weighted_Y = Y * G_h[:, None, :]                                  # Ḡ_bi y_bi
    g_P_xi = 2.0 * jnp.sum(weighted_Y, axis=0)
    g_C = -beta * jnp.einsum("b,bki,bli->kl", lam_b, weighted_Y, Y)
    g_beta = -jnp.einsum("b,bki,kl,bli->", lam_b, weighted_Y, C, Y)
    g_S = _spectral_cotangents(weighted, res, G)
    return g_S, g_P, g_C, g_P_xi, g_beta


_diagonal.defvjp(_diagonal_fwd, _diagonal_bwd)


def quadratic_diagonal(factors: Sequence, noise_var):
    """H_ij of the module docstring for every (image i, pixel j): (n_ξ, n_s).

    The gradient is a custom VJP (:func:`_spectral_cotangents`): autodiff through the spatial
    ``eigh`` divides by eigenvalue gaps and is NaN when two coincide, as they do when a
    spatial length-scale falls far below the pixel spacing (the factor becomes σ²I; issue 32,
    digits with missing pixels), although H is a smooth function of the spatial factors there.
    Reverse mode only.

    Args:
        factors: the :class:`~gplvm.objectives.kronecker.KronFactor`\\ s, latent first.
        noise_var: σ².
    """
    latent, spatial = factors[0], list(factors[1:])
    weighted = tuple(f.P is None for f in spatial)
    return _diagonal(weighted, [f.S for f in spatial], [f.P for f in spatial], latent.S,
                     latent.P, 1.0 / noise_var)


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

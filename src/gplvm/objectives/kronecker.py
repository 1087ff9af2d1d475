r"""The collapsed bound of the structured GPLVM (seed 003, §2.2, eqs. 9–34) by Kronecker algebra.

**Data.**  ``Y`` holds n_ξ images of n_s pixels and D channels, shape (n_ξ, n_s) or
(n_ξ, n_s, D).  Its rows are ordered *image-major*: the row of (image i, pixel j) is i·n_s + j,
so the kernel over rows is K = K_ξ ⊗ K_s (seed 003 eq. 17 holds only in this order).  On a
product grid X⁽ˢ⁾ = X⁽ˢ'¹⁾ × X⁽ˢ'²⁾ the pixels are numbered row-major (axis 1 major), so
K_s = K_1 ⊗ K_2 and every spatial statement below holds factor by factor.

**Factors.**  The bound is built from P ≥ 2 :class:`KronFactor`\ s, the latent one first.  Each
holds a symmetric S_p whose spectrum enters, a projection P_p of the data and K_uu's Cholesky
factor L_p:

* latent (:func:`latent_factor`): S = C_ξ = L_ξ⁻¹Ψ2_ξL_ξ⁻ᵀ, P = L_ξ⁻¹Ψ1_ξᵀ (eqs. 15, 17);
* spatial with fixed inducing inputs Z_s (:func:`spatial_factor`): S = C_s = V Vᵀ with
  V = L_s⁻¹K_{us}, P = V (eqs. 15, 17; Ψ_s are plain kernel matrices, the pixels being known);
* spatial with the inducing inputs at the pixels (m_s = n_s, ``Z_s=None``): then K_us = K_uu =
  K_s, C_s = L_sᵀL_s has the spectrum of K_s, and every product L_s⁻¹K_s = L_sᵀ cancels
  (push-through: (I⊗L_s)(I + βC_ξ⊗L_sᵀL_s)⁻¹(I⊗L_sᵀ) = (I⊗K_s)(I + βC_ξ⊗K_s)⁻¹).  The factor
  keeps S = K_s itself with P = identity and a *weight* e_p = 1 on its eigenvalues, and needs
  neither a Cholesky factor of K_s nor a solve with it: the stable form for a spatial Gram
  matrix that is close to singular.  A ``jitter`` here is a nugget of the spatial kernel
  (added to K_s everywhere, tr K_ff included), so the model stays exact in space.

**Bound** (eq. 13 with eqs. 18–28; per channel).  With β = 1/σ², n = n_ξ n_s,
A = I + β ⊗S_p = (⊗Q_p)diag(d)(⊗Q_p)ᵀ, d = 1 + β⊗λ_p in Kronecker order (unsorted),
ω = ⊗λ_p^{e_p} and B = (⊗Q_pᵀP_p) y,

.. math::
    F = -\frac{n}{2}\log 2\pi + \frac{n}{2}\log\beta - \frac12\sum_i \log d_i
        - \frac{\beta}{2}(\psi_0 - \mathrm{tr}\,C) - \frac{\beta}{2}y^\top y
        + \frac{\beta^2}{2}\sum_i \omega_i b_i^2 / d_i,

ψ0 = ψ0_ξ Π_p tr K_ff,p and tr C = Π_p tr S_p (eq. 17).  This is seed 001's stable form of the
collapsed bound (``collapsed.data_term``): the paper's (n − m)log β − log|β⁻¹I + C| is
n log β − log|I + βC|.  No inverse is formed; the only factorisations are Choleskys of the
K_uu factors (jitter chosen outside jit by :mod:`gplvm.linalg`'s policy) and eigendecompositions
of the S_p, whose gradients are a closed-form custom VJP (:func:`gplvm.linalg.kron_spectral_terms`)
that stays finite at repeated eigenvalues.

**Which spatial kernels factorise over axes.**  The product-grid path needs
k_s(x, x') = Π_a k_a(x_a, x'_a).  An ARD RBF does (exp of a sum; give the variance to one axis),
so does :class:`~gplvm.kernels.Coincidence`; a Matérn (or RBF-free stationary) kernel of the
*distance* over 2-D coordinates does not.  The product path therefore uses the *separable*
kernel the caller passes per axis — e.g. a product of 1-D Matérn 3/2 kernels, which is not the
paper's ARD Matérn 3/2 over 2-D coordinates (use the general path, one spatial factor over the
(n_s, 2) coordinates, for that).

**Missing pixels.**  :func:`data_term` needs every (image, pixel) row (:func:`check_complete`
raises on NaN); missing training pixels are completed by variational Gaussians whose expected
bound keeps the Kronecker structure (:mod:`gplvm.objectives.kronecker_missing`).

New images, which may be partially observed, are handled by :func:`new_image_term` (ℒ* of
eq. 37 over their observed pixels), which needs no complete grid.

**Seed 003 as printed.**  Eq. 9 lacks −(βd_y/2)(ψ0 − Tr K_uu⁻¹Ψ2), which eq. 13 has; eq. 37
is corrected in :func:`new_image_term`; the predictive variance the paper calls intractable has
the closed form of :func:`predict_uncertain`.

**Functions.**  Bound: :func:`latent_factor`, :func:`spatial_factor(s) <spatial_factors>`,
:func:`data_term`, :func:`bound`.  Posterior (no gradients needed): :func:`posterior`,
:func:`optimal_q_u`, :func:`predict_points` (eqs. 32–33), :func:`predict_uncertain` (eq. 34 and
the exact variance), :func:`new_image_term` (eq. 37); for many new images and many evaluations
(the per-image optimisation of q(x*)), :func:`new_image_statistics` and
:func:`new_image_term_from_statistics` give the same ℒ* with the pixel sums done once.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional, Sequence

import jax.numpy as jnp
import numpy as np

from gplvm.linalg import cholesky, kron_apply, kron_spectral_terms, solve_triangular
from gplvm.objectives.collapsed import kl_standard_normal
from gplvm.registry import register


@register("gplvm.state.KronFactor")
class KronFactor(NamedTuple):
    """One Kronecker factor of the bound (module docstring, "Factors").

    Attributes:
        S: (m_p, m_p) symmetric: C_p, or K_s itself at the pixels.
        P: (m_p, n_p) projection of the data (L_p⁻¹Ψ1ᵀ or L_p⁻¹K_uf), or None (identity, the
            inducing inputs at the pixels; the factor's eigenvalues are then weights, e_p = 1).
        L: (m_p, m_p) Cholesky factor of K_uu,p, or None at the pixels.
        trace_Kff: ψ0_ξ for the latent factor, tr K_ff,p for a spatial one.
    """

    S: jnp.ndarray
    P: Optional[jnp.ndarray]
    L: Optional[jnp.ndarray]
    trace_Kff: jnp.ndarray


def latent_factor(psi0, psi1, psi2, Kuu, jitter=0.0) -> KronFactor:
    """The latent factor from q(X⁽ξ⁾)'s Ψ-statistics (eqs. 10, 15, 17).

    Args:
        psi0: scalar ψ0_ξ.  psi1: (n_ξ, m_ξ).  psi2: (m_ξ, m_ξ).  Kuu: (m_ξ, m_ξ).
        jitter: added to Kuu's diagonal (chosen outside jit by :func:`gplvm.linalg.safe_cholesky`).
    """
    L = cholesky(Kuu, jitter)
    C = solve_triangular(L, solve_triangular(L, psi2).T)               # L⁻¹Ψ2L⁻ᵀ, Ψ2 symmetric
    return KronFactor(C, solve_triangular(L, psi1.T), L, psi0)


def spatial_factor(kernel, X_s, Z_s=None, jitter=0.0) -> KronFactor:
    """A spatial factor over pixel coordinates ``X_s`` (n_s, d_s) or one axis (n_a,).

    Args:
        kernel: the spatial kernel of this factor.
        X_s: the pixel coordinates (all of them, or one axis of a product grid).
        Z_s: fixed spatial inducing inputs (m_s, d_s), or None for the pixels themselves.
        jitter: at the pixels a nugget of the kernel (module docstring); else Kuu's jitter.
    """
    if Z_s is None:
        K = kernel(X_s)
        K = K + jitter * jnp.eye(K.shape[0], dtype=K.dtype)
        return KronFactor(K, None, None, jnp.trace(K))
    L = cholesky(kernel(Z_s), jitter)
    V = solve_triangular(L, kernel(Z_s, X_s))                          # L_s⁻¹K_us
    return KronFactor(V @ V.T, V, L, jnp.sum(kernel.diag(X_s)))


def spatial_factors(kernels: Sequence, coords: Sequence, inducing: Sequence | None = None,
                    jitter: float = 0.0) -> list[KronFactor]:
    """One spatial factor per grid axis (product path) or one for all pixels (general path).

    Args:
        kernels: one kernel per factor (a product grid: one 1-D kernel per axis).
        coords: the coordinates of each factor: ``[X_s]`` with X_s (n_s, d_s), or the axes.
        inducing: per factor Z or None (at the pixels); None means at the pixels for all.
        jitter: as :func:`spatial_factor`, the same for every factor.
    """
    inducing = [None] * len(coords) if inducing is None else inducing
    return [spatial_factor(k, X, Z, jitter) for k, X, Z in zip(kernels, coords, inducing)]


def _flat(Y, factors):
    """Y (n_ξ, n_s[, D]) as (Π n_p, D) in image-major order, and the sizes n_p."""
    sizes = [f.P.shape[1] if f.P is not None else f.S.shape[0] for f in factors]
    Y = Y if Y.ndim == 3 else Y[..., None]
    return Y.reshape(math.prod(sizes), Y.shape[-1]), sizes


def _trace_gap(factors):
    """ψ0 − tr C = Π a_p − Π b_p as Σ_p (Π_{q<p} b_q)(a_p − b_p)(Π_{q>p} a_q): a sum of
    non-negative gaps, without the cancellation of two large products."""
    a = [f.trace_Kff for f in factors]
    b = [jnp.trace(f.S) for f in factors]
    total = 0.0
    for p in range(len(factors)):
        total = total + math.prod(b[:p]) * (a[p] - b[p]) * math.prod(a[p + 1:])
    return total


def data_term(factors: Sequence[KronFactor], Y, noise_var):
    """Σ over channels of F (module docstring; seed 003 eq. 13 without the KL).

    Args:
        factors: the latent factor, then the spatial factor(s).
        Y: (n_ξ, n_s) or (n_ξ, n_s, D), complete (no NaN), image-major.
        noise_var: σ².

    Returns:
        The data term (scalar).
    """
    beta = 1.0 / noise_var
    Yf, sizes = _flat(Y, factors)
    n, D = Yf.shape
    R = kron_apply([f.P for f in factors], sizes, Yf)                  # L⁻¹Ψ1ᵀY (eq. 26)
    logdet, quad = kron_spectral_terms([f.S for f in factors], R, beta,
                                       [f.P is None for f in factors])
    return (-0.5 * n * D * math.log(2 * math.pi) + 0.5 * n * D * jnp.log(beta)
            - 0.5 * D * logdet - 0.5 * beta * D * _trace_gap(factors)
            - 0.5 * beta * jnp.sum(Yf**2) + 0.5 * beta**2 * quad)


def bound(psi, Kuu, X_mean, X_var, spatial: Sequence[KronFactor], Y, noise_var, jitter=0.0):
    """The collapsed bound of seed 003 eq. 13 under the iid prior p(X⁽ξ⁾) = N(0, I).

    Args:
        psi: (ψ0, Ψ1, Ψ2) of the latent kernel under q(X⁽ξ⁾), from
            :func:`gplvm.expectations.psi_statistics` (Ψ2 summed over the images).
        Kuu: the latent kernel at its inducing inputs (m_ξ, m_ξ).
        X_mean, X_var: q(X⁽ξ⁾)'s means and variances (n_ξ, Q), for the KL.
        spatial: the spatial factors, ``spatial_factors(kernels, coords, inducing, jitter)``
            (:func:`spatial_factors`).
        Y, noise_var: :func:`data_term`.  jitter: K_uu,ξ's jitter.
    """
    factors = [latent_factor(*psi, Kuu, jitter)] + list(spatial)
    return data_term(factors, Y, noise_var) - kl_standard_normal(X_mean, X_var)


def check_complete(Y) -> None:
    """Raise a ValueError naming the fix when Y has missing entries (call outside jit)."""
    missing = int(np.isnan(np.asarray(Y)).sum())
    if missing:
        raise ValueError(f"Y has {missing} missing (NaN) entries; the Kronecker bound needs "
                         f"every pixel of every image observed (remove the incomplete images, "
                         f"or fill the missing pixels before calling it)")


# ------------------------------------------------------------------- q(U) and predictions

@register("gplvm.state.KronPosterior")
class KronPosterior(NamedTuple):
    """The eigendecompositions behind q(U) and the predictions (eqs. 11, 20–25, 29–34).

    Attributes:
        factors: the :class:`KronFactor`\\ s.
        lam, Q: per factor, the eigenvalues and eigenvectors of S_p.
        coef: (Π m_p, D) βB/d in the joint eigenbasis (module docstring).
        omega: (Π m_p,) ω = ⊗λ_p^{e_p}.
        d: (Π m_p,) 1 + β⊗λ_p.
        var_weight: (Π m_p,) β⊗λ_p^{1−e_p}/d, the weights of the variance reduction.
    """

    factors: list
    lam: list
    Q: list
    coef: jnp.ndarray
    omega: jnp.ndarray
    d: jnp.ndarray
    var_weight: jnp.ndarray


def _kron_vec(vectors):
    out = vectors[0]
    for v in vectors[1:]:
        out = jnp.kron(out, v)
    return out


def posterior(factors: Sequence[KronFactor], Y, noise_var) -> KronPosterior:
    """Eigendecompose the S_p and project the data once, for :func:`optimal_q_u` and the
    predictions (not for gradients: autodiff through ``eigh`` fails at repeated eigenvalues;
    the bound itself goes through :func:`gplvm.linalg.kron_spectral_terms`)."""
    beta = 1.0 / noise_var
    pairs = [jnp.linalg.eigh(f.S) for f in factors]
    lam = [w for w, _ in pairs]
    Q = [V for _, V in pairs]
    Yf, sizes = _flat(Y, factors)
    T = [V.T if f.P is None else V.T @ f.P for f, V in zip(factors, Q)]      # Q_pᵀP_p
    B = kron_apply(T, sizes, Yf)                                            # eq. 26
    d = 1.0 + beta * _kron_vec(lam)
    ones = [jnp.ones_like(w) for w in lam]
    omega = _kron_vec([w if f.P is None else o for f, w, o in zip(factors, lam, ones)])
    rest = _kron_vec([o if f.P is None else w for f, w, o in zip(factors, lam, ones)])
    return KronPosterior(list(factors), lam, Q, beta * B / d[:, None], omega, d,
                         beta * rest / d)


def optimal_q_u(post: KronPosterior):
    """The optimal q(U) of seed 003 eq. 11: Ū = K_uu K_ψ⁻¹Ψ1ᵀY, Σ_u = β⁻¹K_uu K_ψ⁻¹K_uu.

    With K_ψ = β⁻¹L A Lᵀ (eq. 24) and M_p = L_pQ_p, Ū = (⊗M_p) βB/d and
    Σ_u = (⊗M_p) diag(1/d) (⊗M_p)ᵀ.  At the pixels L_sQ_s = U_sΛ_s^{1/2} (U_s the eigenvectors
    of K_s) and B carries another Λ_s^{1/2}, so M_s = U_s and the diagonals take ω.

    Returns:
        ``U_mean`` (Π m_p, D), rows in the Kronecker order of the inducing inputs, and Σ_u
        factored as ``(maps, diag)``: dense Σ_u = kron(maps) diag(diag) kron(maps)ᵀ.
    """
    maps = [V if f.L is None else f.L @ V for f, V in zip(post.factors, post.Q)]
    U_mean = kron_apply(maps, [V.shape[1] for V in maps], post.omega[:, None] * post.coef)
    return U_mean, (maps, post.omega / post.d)


def new_input_map(post: KronPosterior, p: int, K_new_u):
    """Factor p's map of new inputs into the joint eigenbasis: (L_p⁻¹K_u*)ᵀQ_p, or K_*s U_s at
    the pixels (where the Λ_s^{∓1/2} of L_s⁻ᵀQ_s and of B cancel in eqs. 32–33).

    Args:
        K_new_u: (n*, m_p) cross-covariance of the new inputs with factor p's inducing inputs
            (the training pixels at the pixels), or Ψ1* for uncertain latent inputs (eq. 34).
    """
    f, V = post.factors[p], post.Q[p]
    if f.L is None:
        return K_new_u @ V
    return solve_triangular(f.L, K_new_u.T).T @ V


def predict_points(post: KronPosterior, K_new_u: Sequence, K_new_diag: Sequence):
    """Predictive mean and variance of f at new (image, pixel) inputs (seed 003 eqs. 29–33).

    The new inputs form a product like the training rows: n*_ξ latent points (deterministic)
    times n*_s new pixel locations (any resolution), per factor.

    Args:
        K_new_u: per factor, (n*_p, m_p) cross-covariances with the inducing inputs.
        K_new_diag: per factor, (n*_p,) prior variances k_p(x*, x*).

    Returns:
        mean (Π n*_p, D) and variance (Π n*_p,) of f (add σ² for y), image-major.
    """
    maps = [new_input_map(post, p, K) for p, K in enumerate(K_new_u)]
    sizes = [V.shape[1] for V in maps]
    mean = kron_apply(maps, sizes, post.coef)                                 # eq. 32
    reduction = kron_apply([V**2 for V in maps], sizes, post.var_weight[:, None])[:, 0]
    return mean, _kron_vec(list(K_new_diag)) - reduction                     # eq. 33


def predict_uncertain(post: KronPosterior, psi0_new, psi1_new, psi2_new, K_new_u: Sequence,
                      K_new_diag: Sequence):
    r"""Predictive mean and exact marginal variance of f at new images with Gaussian latents.

    Seed 003 eq. 34 gives the mean Ψ1*K_ψ⁻¹Ψ1ᵀY; the variance the paper calls intractable is,
    per pixel s and channel (law of total variance, with a = K_ψ⁻¹Ψ1ᵀy and
    Ψ2*(x*) = E[k_ξ k_ξᵀ] of the one new point),

    .. math:: \mathrm{Var} f = \psi_0^* k_s(s, s)
              - \mathrm{tr}[(\Psi_2^*\otimes k_s k_s^\top)(K_{uu}^{-1} - \beta^{-1}K_\psi^{-1})]
              + a^\top(\Psi_2^*\otimes k_s k_s^\top)a - (\Psi_1^* \otimes k_s^\top\, a)^2,

    each term a Kronecker contraction (no mixture of Gaussians needed for the marginals).

    Args:
        psi0_new: (n*,) ψ0 of each new point.  psi1_new: (n*, m_ξ).  psi2_new: (n*, m_ξ, m_ξ)
            per point (``psi_statistics(..., weights=jnp.eye(n*))``).
        K_new_u, K_new_diag: the spatial factors' entries, as :func:`predict_points`.

    Returns:
        mean and variance of f, both (n*, Π n*_s, D).
    """
    maps_s = [new_input_map(post, p + 1, K) for p, K in enumerate(K_new_u)]
    sizes = [post.Q[0].shape[1]] + [V.shape[1] for V in maps_s]
    E = solve_triangular(post.factors[0].L, post.Q[0], trans=True)          # L_ξ⁻ᵀQ_ξ
    n_new, n_s = psi1_new.shape[0], math.prod(V.shape[0] for V in maps_s)
    Cs = kron_apply([E] + maps_s, sizes, post.coef).reshape(E.shape[0], n_s, -1)
    mean = jnp.einsum("na,asd->nsd", psi1_new, Cs)                          # eq. 34
    second = jnp.einsum("asd,nab,bsd->nsd", Cs, psi2_new, Cs)               # E_x[mean(x)²]
    G = jnp.einsum("ak,nab,bk->nk", E, psi2_new, E)                         # diag EᵀΨ2*E
    reduction = kron_apply([G] + [V**2 for V in maps_s], sizes, post.var_weight[:, None])
    prior = psi0_new[:, None] * _kron_vec(list(K_new_diag))[None, :]
    var = prior - reduction.reshape(n_new, n_s)
    return mean, var[..., None] + second - mean**2


def new_image_term(post: KronPosterior, psi0_new, psi1_new, psi2_new, K_new_u: Sequence,
                   K_new_diag: Sequence, Y_new, noise_var):
    r"""Seed 003's ℒ* (eq. 37, corrected) for new, partially observed images, without the KL.

    ℒ* is E_{q(x*) q(U) p(f|U)}[log p(y*|f)] at the training q(U) (eq. 11), summed over the
    observed pixels and channels.  Since E[(y − f)²] = (y − E f)² + Var f, it is

    .. math:: \mathcal L^* = \sum_{\text{observed } s, d}
              -\tfrac12\log(2\pi\sigma^2) - \frac{(y_{sd} - \bar\mu_{sd})^2 + v_{sd}}{2\sigma^2}

    with the exact moments of :func:`predict_uncertain`.  Written out, this is eq. 37 with
    −(β/2)Tr(Y*Y*ᵀ) (not βd_y/2), Ψ1*K_uu⁻¹Ū (not K_uu Ū) and (ŪŪᵀ + d_yΣ_u) (issue 13).

    Args:
        psi0_new, psi1_new, psi2_new, K_new_u, K_new_diag: as :func:`predict_uncertain`.
        Y_new: (n*, Π n*_s[, D]); NaN marks an unobserved pixel.
        noise_var: σ².

    Returns:
        (n*,) ℒ* per new image.
    """
    mean, var = predict_uncertain(post, psi0_new, psi1_new, psi2_new, K_new_u, K_new_diag)
    Y_new = Y_new if Y_new.ndim == 3 else Y_new[..., None]
    observed = ~jnp.isnan(Y_new)
    resid = jnp.where(observed, Y_new, 0.0) - mean
    per_entry = -0.5 * jnp.log(2 * jnp.pi * noise_var) - 0.5 * (resid**2 + var) / noise_var
    return jnp.sum(jnp.where(observed, per_entry, 0.0), axis=(1, 2))


# --------------------------------------------------- ℒ* with the pixel sums done once per image

def latent_coefficients(post: KronPosterior, K_new_u: Sequence):
    """C (m_ξ, Π n*_s, D) with E[f(x*, s)] = Σ_a ψ1*_a C_as under q(x*) (eq. 34), and
    E = L_ξ⁻ᵀQ_ξ: what :func:`predict_uncertain` contracts with the latent Ψ-statistics.

    Args:
        K_new_u: per spatial factor, (n*_p, m_p) cross-covariances (as :func:`predict_points`).
    """
    maps_s = [new_input_map(post, p + 1, K) for p, K in enumerate(K_new_u)]
    sizes = [post.Q[0].shape[1]] + [V.shape[1] for V in maps_s]
    E = solve_triangular(post.factors[0].L, post.Q[0], trans=True)
    n_s = math.prod(V.shape[0] for V in maps_s)
    C = kron_apply([E] + maps_s, sizes, post.coef).reshape(E.shape[0], n_s, -1)
    return C, E, maps_s


class NewImageStatistics(NamedTuple):
    """Per new image, the sums over its observed pixels that ℒ* needs (see
    :func:`new_image_statistics`); leading axis n*."""

    n_obs: jnp.ndarray   # (n*,) observed (pixel, channel) entries
    yy: jnp.ndarray      # (n*,) Σ y²
    b: jnp.ndarray       # (n*, m_ξ) Σ_{s,d} C_{·sd} y_sd
    R: jnp.ndarray       # (n*, m_ξ, m_ξ) Σ_{s,d} C_{·sd}C_{·sd}ᵀ − E diag(h) Eᵀ
    k_sum: jnp.ndarray   # (n*,) Σ_{s,d} k_s(s, s)


def new_image_statistics(post: KronPosterior, K_new_u: Sequence, K_new_diag: Sequence,
                         Y0, observed) -> NewImageStatistics:
    r"""The pixel sums of ℒ* (eq. 37 corrected; :func:`new_image_term`), once per image.

    Summed over observed entries, (y − μ̄)² + Var f = y² − 2yμ̄ + E_x[mean(x)²] + E_x[var(x)],
    and every term is linear in ψ0*, ψ1* or Ψ2* (:func:`predict_uncertain`):

    .. math:: \sum_{s,d\in O}\big[(y_{sd}-\bar\mu_{sd})^2 + v_{sd}\big] = y^\top y
              - 2\psi_1^* b + \mathrm{tr}(\Psi_2^* R) + \psi_0^* \textstyle\sum_{s\in O} k_s(s,s),

    b = Σ_O C_{·sd} y_sd, R = Σ_O C_{·sd}C_{·sd}ᵀ − E diag(h) Eᵀ with
    h_k = Σ_j w_kj Σ_{s∈O}(⊗V_p²)_{sj} (w the posterior's ``var_weight``).  So b, R and the sums
    are computed once per image, and each evaluation of ℒ* during the optimisation of q(x*)
    costs O(m_ξ²) instead of a pass over the pixels.

    Args:
        K_new_u, K_new_diag: the spatial factors at the images' pixels (:func:`predict_points`).
        Y0: (n*, Π n*_s, D) with unobserved entries 0.  observed: the same shape, 0/1.
    """
    C, E, maps_s = latent_coefficients(post, K_new_u)
    m_xi = E.shape[0]
    Y0, observed = jnp.asarray(Y0), jnp.asarray(observed, dtype=C.dtype)
    b = jnp.einsum("asd,nsd->na", C, Y0 * observed)
    R = jnp.einsum("asd,nsd,bsd->nab", C, observed, C)
    weight = jnp.sum(observed, axis=2)                     # (n*, Π n*_s) channels observed
    sizes_s = [V.shape[0] for V in maps_s]
    hs = kron_apply([(V**2).T for V in maps_s], sizes_s, weight.T)           # (m_s, n*)
    h = post.var_weight.reshape(m_xi, -1) @ hs                               # (m_ξ, n*)
    R = R - jnp.einsum("ak,kn,bk->nab", E, h, E)
    k_diag = _kron_vec(list(K_new_diag))
    return NewImageStatistics(jnp.sum(observed, axis=(1, 2)), jnp.sum((Y0 * observed)**2,
                                                                      axis=(1, 2)),
                              b, R, weight @ k_diag)


def new_image_term_from_statistics(stats: NewImageStatistics, psi0, psi1, psi2, noise_var):
    """ℒ* per image from :func:`new_image_statistics` and the latent Ψ-statistics of q(x*)
    (ψ0 (n*,), Ψ1 (n*, m_ξ), Ψ2 (n*, m_ξ, m_ξ) per image): equal to :func:`new_image_term`."""
    sq = (stats.yy - 2.0 * jnp.sum(psi1 * stats.b, axis=1)
          + jnp.einsum("nab,nab->n", psi2, stats.R) + psi0 * stats.k_sum)
    return -0.5 * stats.n_obs * jnp.log(2 * jnp.pi * noise_var) - 0.5 * sq / noise_var

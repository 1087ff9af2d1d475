r"""Numerically safe linear algebra (DESIGN.md, "Numbers and numerics"; issue 2, item 5).

**Jitter policy.**  :func:`safe_cholesky` first tries the matrix as it is (in float32 with the
least jitter of :func:`jitter_floor`).  If the factor has a
non-finite entry (JAX's Cholesky returns NaN instead of raising), it adds
``jitter = sqrt(eps) · mean(diag(A))`` to the diagonal (eps of the precision computed in:
1.5e-8 in float64, 3.5e-4 in float32, :mod:`gplvm.config`; a smaller jitter would be lost in
the diagonal's round-off) and multiplies the jitter by 10 until the
factorisation succeeds or the jitter exceeds ``max_jitter · mean(diag(A))``.  The decision is
made *outside* ``jit`` on concrete arrays, because a traced function can neither warn nor raise;
models call it once (for instance on the initial Kuu), record the jitter in
:class:`CholeskyResult`, and pass that number into their jitted objective, where
:func:`cholesky` adds it unconditionally.  A success with jitter warns once per call site; a
failure raises :class:`CholeskyError`, which names the knob (``max_jitter``).

**Kronecker algebra** (for the structured GPLVM, seed 003): for
:math:`K = K_1 \otimes \cdots \otimes K_P`, matrix–vector products use the "vec trick"
:math:`(A \otimes B)\,\mathrm{vec}(V) = \mathrm{vec}(A V B^\top)` (row-major vec), so no
Kronecker product is formed; eigendecompositions factor as :math:`K = (\otimes Q_p)(\otimes
\Lambda_p)(\otimes Q_p)^\top`, which makes :math:`(K + s I)^{-1} v` and :math:`\log|K + sI|`
cost :math:`O(n \sum_p n_p)` after the per-factor eigendecompositions.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np


class CholeskyError(ValueError):
    """Raised when a matrix cannot be factorised even with the largest allowed jitter."""


class CholeskyResult(NamedTuple):
    """A lower-triangular factor and the jitter that was added to the diagonal to get it."""

    L: jnp.ndarray
    jitter: float


def cholesky(A, jitter: float = 0.0) -> jnp.ndarray:
    """The lower Cholesky factor of ``A + jitter·I`` (jit-safe; no checks).

    Use inside jitted objectives with a jitter chosen beforehand by :func:`safe_cholesky`.
    """
    A = jnp.asarray(A)
    return jnp.linalg.cholesky(A + jitter * jnp.eye(A.shape[-1], dtype=A.dtype))


_cholesky_jit = jax.jit(cholesky)


def safe_cholesky(A, max_jitter: float = 1e-2, name: str = "matrix") -> CholeskyResult:
    """Cholesky with the escalating jitter policy; call it outside ``jit``.

    Args:
        A: a symmetric (N, N) matrix, concrete (not traced).
        max_jitter: the largest jitter tried, relative to the mean diagonal of ``A``.
        name: what the matrix is (e.g. ``"Kuu"``), used in the warning and the error.

    Returns:
        ``CholeskyResult(L, jitter)`` with ``L @ L.T == A + jitter·I``; ``jitter`` is 0.0 when
        none was needed (float64; float32's least is :func:`jitter_floor`).

    Raises:
        CholeskyError: when even ``max_jitter · mean(diag(A))`` is not enough, or ``A`` has
            non-finite entries.
    """
    if isinstance(A, jax.core.Tracer):
        raise TypeError("safe_cholesky decides the jitter on concrete values; call it outside "
                        "jit and pass the returned jitter to gplvm.linalg.cholesky inside")
    A = jnp.asarray(A)
    if not bool(jnp.all(jnp.isfinite(A))):
        raise CholeskyError(f"{name} has non-finite entries; check the inputs and "
                            f"hyper-parameters that built it")
    scale = float(jnp.mean(jnp.abs(jnp.diag(A)))) or 1.0
    jitter = jitter_floor(scale, A.dtype)
    L = _cholesky_jit(A, jitter)
    if bool(jnp.all(jnp.isfinite(L))):
        return CholeskyResult(L, jitter)
    while True:
        jitter = escalate_jitter(jitter, scale, max_jitter, name, dtype=A.dtype)
        L = _cholesky_jit(A, jitter)
        if bool(jnp.all(jnp.isfinite(L))):
            warnings.warn(f"{name} was not numerically positive definite; added jitter "
                          f"{jitter:.3g} to its diagonal ({jitter / scale:.1e} × its mean "
                          f"diagonal)", RuntimeWarning, stacklevel=2)
            return CholeskyResult(L, jitter)


def jitter_floor(scale: float, dtype=None) -> float:
    """The least jitter of the policy: none in float64, sqrt(eps)·scale (3.5e-4 of the mean
    diagonal) in float32 (``dtype``: by default that of the precision computed in).

    Why a floor in float32 only: a model decides its jitter once, on the initial K_uu, and keeps
    it while the optimisation moves the inducing inputs, which can raise K_uu's condition
    number by orders of magnitude (10⁹–10¹⁰ on a 40-point toy problem in float64).  float32's
    Cholesky fails once cond · eps ≈ 1 (cond ≈ 10⁷) and loses every digit before; with the
    floor, cond ≤ M / sqrt(eps) ≈ 3·10³·M, so solves keep about four digits at M ≈ 30.
    """
    eps = np.finfo(jnp.result_type(float) if dtype is None else dtype).eps
    return float(np.sqrt(eps)) * scale if eps > np.finfo(np.float64).eps else 0.0


def escalate_jitter(jitter: float, scale: float, max_jitter: float = 1e-2,
                    name: str = "matrix", dtype=None) -> float:
    """The policy's next rung after ``jitter``: sqrt(eps)·scale first, then ×10 each time.

    The one escalation rule of the library: :func:`safe_cholesky` climbs it on a concrete
    matrix, and an optimisation whose jitted objective turned non-finite climbs it between
    restarts (``scale`` is the mean diagonal of the matrix the jitter is added to).  ``eps``
    is that of ``dtype``, by default of the precision computed in (:mod:`gplvm.config`).

    Raises:
        CholeskyError: the next rung would exceed ``max_jitter · scale``.
    """
    scale = scale if scale > 0 else 1.0
    eps = np.finfo(jnp.result_type(float) if dtype is None else dtype).eps
    rung = float(np.sqrt(eps)) * scale if jitter <= 0 else 10.0 * jitter
    if rung > max_jitter * scale * (1 + 1e-12):
        raise CholeskyError(
            f"{name} is not positive definite even with jitter {max_jitter:.1e} × its mean "
            f"diagonal ({max_jitter * scale:.3g}); raise `max_jitter`, or fix its cause: "
            f"duplicated inducing inputs, a length-scale far larger than the data's spread, or "
            f"a variance that underflowed")
    return rung


def solve_triangular(L, B, lower: bool = True, trans: bool = False):
    """Solve ``L X = B`` (or ``Lᵀ X = B`` with ``trans=True``) for triangular ``L``."""
    return jsl.solve_triangular(L, B, lower=lower, trans=1 if trans else 0)


def cho_solve(L, B):
    """Solve ``(L Lᵀ) X = B`` given the lower Cholesky factor ``L``."""
    return jsl.cho_solve((L, True), B)


def logdet_from_cholesky(L):
    """log|A| = 2 Σ log L_ii for ``A = L Lᵀ``."""
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1)


def inv_from_cholesky(L):
    """A⁻¹ from the lower factor of A (only where the inverse itself is needed)."""
    eye = jnp.eye(L.shape[-1], dtype=L.dtype)
    return cho_solve(L, eye)


# ------------------------------------------------------------------------------------ Kronecker

def kron(factors: Sequence[jnp.ndarray]) -> jnp.ndarray:
    """The dense Kronecker product (for tests and small problems only)."""
    out = factors[0]
    for A in factors[1:]:
        out = jnp.kron(out, A)
    return out


def kron_diag(factors: Sequence[jnp.ndarray]) -> jnp.ndarray:
    """diag(⊗ A_p) = ⊗ diag(A_p)."""
    out = jnp.diagonal(factors[0])
    for A in factors[1:]:
        out = jnp.kron(out, jnp.diagonal(A))
    return out


def kron_mvp(factors: Sequence[jnp.ndarray], V: jnp.ndarray) -> jnp.ndarray:
    """(A_1 ⊗ ... ⊗ A_P) V without forming the product.

    ``V`` has shape (Π n_p,) or (Π n_p, K).  Each factor is applied along its own axis of V
    reshaped to (n_1, ..., n_P, K) — the multi-factor form of vec(A V Bᵀ) = (A ⊗ B) vec(V) —
    at cost O(Π n_p · Σ n_p · K).
    """
    V = jnp.asarray(V)
    vector = V.ndim == 1
    if vector:
        V = V[:, None]
    shape_in = [A.shape[1] for A in factors]
    K = V.shape[1]
    T = V.reshape(*shape_in, K)
    for p, A in enumerate(factors):
        T = jnp.moveaxis(jnp.tensordot(A, T, axes=([1], [p])), 0, p)
    out = T.reshape(-1, K)
    return out[:, 0] if vector else out


class KronEigh(NamedTuple):
    """Eigendecomposition of ⊗ K_p: per-factor eigenvalues and eigenvectors."""

    eigenvalues: Sequence[jnp.ndarray]
    eigenvectors: Sequence[jnp.ndarray]

    def values(self) -> jnp.ndarray:
        """All Π n_p eigenvalues of the Kronecker product, in Kronecker order."""
        out = self.eigenvalues[0]
        for lam in self.eigenvalues[1:]:
            out = jnp.kron(out, lam)
        return out


def kron_eigh(factors: Sequence[jnp.ndarray]) -> KronEigh:
    """Eigendecompose each symmetric factor: ⊗K_p = (⊗Q_p) diag(⊗λ_p) (⊗Q_p)ᵀ."""
    pairs = [jnp.linalg.eigh(A) for A in factors]
    return KronEigh([lam for lam, _ in pairs], [Q for _, Q in pairs])


def kron_solve_shifted(eig: KronEigh, shift, V):
    """(⊗K_p + shift·I)⁻¹ V through the Kronecker eigendecomposition."""
    Qs = eig.eigenvectors
    QtV = kron_mvp([Q.T for Q in Qs], V)
    denom = eig.values() + shift
    scaled = QtV / (denom if QtV.ndim == 1 else denom[:, None])
    return kron_mvp(Qs, scaled)


def kron_logdet_shifted(eig: KronEigh, shift):
    """log|⊗K_p + shift·I| = Σ log(λ + shift) over the Kronecker eigenvalues."""
    return jnp.sum(jnp.log(eig.values() + shift))


def kron_apply(factors: Sequence[jnp.ndarray | None], sizes: Sequence[int],
               V: jnp.ndarray) -> jnp.ndarray:
    """(A_1 ⊗ ... ⊗ A_P) V for rectangular factors, ``None`` standing for an identity.

    As :func:`kron_mvp`: one factor at a time along its own axis of V reshaped to
    (n_1, ..., n_P, K), so the product is never formed.

    Args:
        factors: P matrices A_p of shape (m_p, n_p), or ``None`` (the identity, m_p = n_p).
        sizes: the input sizes (n_1, ..., n_P) (``None`` factors need them).
        V: (Π n_p, K).

    Returns:
        (Π m_p, K).
    """
    K = V.shape[-1]
    T = V.reshape(*sizes, K)
    for p, A in enumerate(factors):
        if A is not None:
            T = jnp.moveaxis(jnp.tensordot(A, T, axes=([1], [p])), 0, p)
    return T.reshape(-1, K)


def _outer_except(vectors: Sequence[jnp.ndarray], p: int) -> jnp.ndarray:
    """Π_{q≠p} v_q as a tensor of shape (n_1, ..., n_P) with axis p of size 1."""
    P = len(vectors)
    out = jnp.ones((1,) * P, dtype=vectors[0].dtype)
    for q, v in enumerate(vectors):
        if q != p:
            out = out * v.reshape([-1 if r == q else 1 for r in range(P)])
    return out


def psd_eigh(S_list):
    """(eigenvalues, eigenvectors) of each PSD factor, the eigenvalues clipped at 0: round-off
    can leave eigenvalues of order −eps·‖S‖, and a product of two such across factors times
    β can push 1 + βv through zero."""
    pairs = [jnp.linalg.eigh(S) for S in S_list]
    return [jnp.maximum(w, 0.0) for w, _ in pairs], [V for _, V in pairs]


def _spectral_forward(weighted, S_list, R, beta):
    lam, Q = psd_eigh(S_list)
    sizes = [w.shape[0] for w in lam]
    v = _outer_except(lam, -1)                                      # ⊗λ_p, (n_1, ..., n_P)
    omega = _outer_except([w if e else jnp.ones_like(w) for w, e in zip(lam, weighted)], -1)
    d = 1.0 + beta * v
    B = kron_apply([V.T for V in Q], sizes, R).reshape(*sizes, -1)  # (⊗Q_p)ᵀ R
    logdet = jnp.sum(jnp.log(d))
    quad = jnp.sum((omega / d)[..., None] * B**2)
    return (logdet, quad), (lam, Q, B, d, beta)


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def _spectral(weighted, S_list, R, beta):
    return _spectral_forward(weighted, S_list, R, beta)[0]


def _spectral_bwd(weighted, res, cotangent):
    """Closed-form cotangents: Daleckii–Krein with the divided differences written out.

    In the eigenbasis of S_p, d/dS_p of a function of the eigenvalues and eigenvectors is
    Q_p (F ∘ Q_pᵀ dS_p Q_p) Q_pᵀ with F the divided differences of the scalar function
    (φ(x) − φ(y)) / (x − y).  For φ = ω/(1 + βax) (unweighted factor) that is
    −ωβa / ((1 + βax)(1 + βay)), for φ = ωx/(1 + βax) (weighted) ω / ((1 + βax)(1 + βay)):
    no eigenvalue gap is ever divided by, so equal or nearly equal eigenvalues are harmless.
    """
    lam, Q, B, d, beta = res
    g_ld, g_q = cotangent
    P = len(lam)
    sizes = [w.shape[0] for w in lam]
    ones = [jnp.ones_like(w) for w in lam]
    v = _outer_except(lam, -1)
    omega = _outer_except([w if e else o for w, o, e in zip(lam, ones, weighted)], -1)
    W = B / d[..., None]                                   # eigen-coordinates of (I + βK)⁻¹R
    grad_R = 2.0 * g_q * kron_apply(Q, sizes, (omega[..., None] * W).reshape(-1, B.shape[-1]))
    grad_beta = g_ld * jnp.sum(v / d) - g_q * jnp.sum((omega * v)[..., None] * W**2)
    grads_S = []
    for p in range(P):
        a = _outer_except(lam, p)                          # Π_{q≠p} λ_q
        omega_o = _outer_except([w if e else o for w, o, e in zip(lam, ones, weighted)], p)
        others = tuple(r for r in range(P) if r != p)
        diag_ld = jnp.sum(jnp.broadcast_to(beta * a / d, d.shape), axis=others)
        coeff = omega_o if weighted[p] else -beta * a * omega_o
        n_p = sizes[p]
        Xp = jnp.moveaxis(coeff[..., None] * W, p, 0).reshape(n_p, -1)
        H = Xp @ jnp.moveaxis(W, p, 0).reshape(n_p, -1).T
        inner = g_ld * jnp.diag(diag_ld) + g_q * H
        grads_S.append(Q[p] @ inner @ Q[p].T)
    return grads_S, grad_R, grad_beta


_spectral.defvjp(lambda w, S, R, b: _spectral_forward(w, S, R, b), _spectral_bwd)


def kron_spectral_terms(S_list: Sequence[jnp.ndarray], R: jnp.ndarray, beta,
                        weighted: Sequence[bool]):
    r"""log|I + β K| and tr(Rᵀ W (I + βK)⁻¹ R) for K = ⊗S_p, W = ⊗S_p^{e_p} (seed 003 eqs. 20–28).

    Through the per-factor eigendecompositions S_p = Q_p Λ_p Q_pᵀ: with v = ⊗λ_p (Kronecker
    order, unsorted), ω = ⊗λ_p^{e_p}, d = 1 + βv and B = (⊗Q_p)ᵀ R,

    .. math:: \log|I + \beta K| = \sum_i \log d_i, \qquad
              \mathrm{tr}(R^\top W (I + \beta K)^{-1} R) = \sum_{i,j} \omega_i B_{ij}^2 / d_i.

    The gradient is a custom VJP in closed form (see ``_spectral_bwd``): autodiff through
    ``eigh`` divides by eigenvalue gaps and returns NaN when two eigenvalues coincide (as they do
    for a spatial kernel σ²·1[x = x'], whose Gram matrix is σ²I), although these functions of
    the spectrum are smooth there.  Reverse mode only (no ``jax.jvp``/``jacfwd``).

    Args:
        S_list: P symmetric (n_p, n_p) matrices (symmetrised by ``eigh``); PSD in the bound.
        R: (Π n_p, D), rows in Kronecker (row-major) order.
        beta: positive scalar.
        weighted: P static booleans e_p.

    Returns:
        ``(logdet, quad)``, two scalars.
    """
    return _spectral(tuple(bool(e) for e in weighted), list(S_list), R, beta)

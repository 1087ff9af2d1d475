r"""Numerically safe linear algebra (DESIGN.md, "Numbers and numerics"; issue 2, item 5).

**Jitter policy.**  :func:`safe_cholesky` first tries the matrix as it is.  If the factor has a
non-finite entry (JAX's Cholesky returns NaN instead of raising), it adds
``jitter = sqrt(eps) · mean(diag(A))`` to the diagonal and multiplies the jitter by 10 until the
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
        none was needed.

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
    L = _cholesky_jit(A, 0.0)
    if bool(jnp.all(jnp.isfinite(L))):
        return CholeskyResult(L, 0.0)
    scale = float(jnp.mean(jnp.abs(jnp.diag(A)))) or 1.0
    jitter = 0.0
    while True:
        jitter = escalate_jitter(jitter, scale, max_jitter, name)
        L = _cholesky_jit(A, jitter)
        if bool(jnp.all(jnp.isfinite(L))):
            warnings.warn(f"{name} was not numerically positive definite; added jitter "
                          f"{jitter:.3g} to its diagonal ({jitter / scale:.1e} × its mean "
                          f"diagonal)", RuntimeWarning, stacklevel=2)
            return CholeskyResult(L, jitter)


def escalate_jitter(jitter: float, scale: float, max_jitter: float = 1e-2,
                    name: str = "matrix") -> float:
    """The policy's next rung after ``jitter``: sqrt(eps)·scale first, then ×10 each time.

    The one escalation rule of the library: :func:`safe_cholesky` climbs it on a concrete
    matrix, and an optimisation whose jitted objective turned non-finite climbs it between
    restarts (``scale`` is the mean diagonal of the matrix the jitter is added to).

    Raises:
        CholeskyError: the next rung would exceed ``max_jitter · scale``.
    """
    scale = scale if scale > 0 else 1.0
    rung = float(np.sqrt(np.finfo(np.float64).eps)) * scale if jitter <= 0 else 10.0 * jitter
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

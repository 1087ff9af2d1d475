r"""Metropolis–Hastings on the frequencies W with the prior as proposal (seed 000, eq. 22).

For m = 1..M/2 in turn, propose :math:`w_m^\star` from its prior — the DP component
N(μ_{z_m}, Σ_{z_m}) under kernel learning, or the fixed kernel's spectral density — and accept
with probability min{1, p(Y | X, w_m^⋆, ·)/p(Y | X, w_m, ·)} (the prior terms cancel against
the proposal): the Metropolis–Hastings kernel of :mod:`gplvm.inference.mcmc`, given the m-th of
M/2 uniforms drawn at the start of the pass.  Frequency m owns the two columns (m, m + M/2) of Φ, so a proposal changes Φ
by a rank-2 term and every ratio is evaluated by an update, not from scratch:

* count likelihoods, β given: ψ ← ψ + (φ⋆ − φ)β_{(m, m+M/2)}, O(ND) per proposal;
* Gaussian, β integrated out: the two new columns' inner products with Φ and Y (O(NM + ND))
  and block (Schur-complement) updates of A⁻¹ = (ΦᵀΦ + I/s0)⁻¹, A⁻¹ΦᵀY and log|A|
  (O(M² + MD)) give the collapsed marginal of :mod:`.weights`, instead of a fresh O(M³ + M²D)
  factorisation per proposal.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.linalg import solve_triangular

from gplvm.inference.mcmc import MHState, mh_accept_reject
from gplvm.models._rflvm.features import design, feature_pair, pair_index
from gplvm.models._rflvm.loglik import total_log_lik

Array = jax.Array


def _proposals(key: Array, W_star: Array):
    return jnp.log(jax.random.uniform(key, (W_star.shape[0],), dtype=W_star.dtype))


def update_frequencies_given_beta(key: Array, W_star: Array, X: Array, W: Array, beta: Array,
                                  kind: str, data, noise_var: Array, dispersion: Array,
                                  Phi: Array, psi: Array):
    """One MH pass over the M/2 frequencies with β held fixed (count likelihoods).

    Args:
        Phi: the current design [φ_W(X), 1] (N, P); psi: Φβ without the offset (N, D) — both
            already formed by the sweep's weight update, so not recomputed here.

    Returns:
        (W, number of accepted proposals).
    """
    n_freq = W.shape[0]
    log_u = _proposals(key, W_star)

    def ll(psi_):
        return total_log_lik(kind, data.Y, psi_ + data.offset, data.observed, data.trials,
                             noise_var, dispersion)

    def body(m, carry):
        state, n_acc = carry
        W, Phi, psi = state.position
        idx = pair_index(m, n_freq)
        new = feature_pair(X, W_star[m], n_freq)              # (N, 2)
        psi_new = psi + (new - Phi[:, idx]) @ beta[idx, :]
        proposal = (W.at[m].set(W_star[m]), Phi.at[:, idx].set(new), psi_new)
        state, info = mh_accept_reject(log_u[m], state, proposal, ll(psi_new))
        return state, n_acc + info.accepted

    init = (MHState((W, Phi, psi), ll(psi)), jnp.zeros((), jnp.int32))
    state, n_acc = lax.fori_loop(0, n_freq, body, init)
    return state.position[0], n_acc


class _Collapsed(NamedTuple):
    """Running quantities of the collapsed pass: A⁻¹, U = A⁻¹P, log|A| (A = ΦᵀΦ + I/s0)."""

    Phi: Array
    P: Array
    Ainv: Array
    U: Array
    logdet: Array


def _inv_logdet_2x2(A: Array):
    """Inverse and log-determinant of a symmetric positive-definite 2 × 2 matrix in closed
    form (no LAPACK call: see :func:`update_frequencies_collapsed`)."""
    det = A[0, 0] * A[1, 1] - A[0, 1] * A[1, 0]
    inv = jnp.array([[A[1, 1], -A[0, 1]], [-A[1, 0], A[0, 0]]]) / det
    return inv, jnp.log(det)


def _block_terms(c: _Collapsed, idx: Array, new: Array, Y: Array, s0: float):
    r"""Pieces of A, P after replacing the two columns ``idx`` of Φ by ``new``.

    Write 1 for the other indices and 2 for ``idx``.  A₁₁ does not change, and its inverse
    follows from the current inverse: :math:`A_{11}^{-1} = (A^{-1})_{11} -
    (A^{-1})_{12}(A^{-1})_{22}^{-1}(A^{-1})_{21}` (kept as a full matrix with zero rows and
    columns at ``idx``).  With the new off-diagonal block a₁₂ and T = A₁₁⁻¹a₁₂, the Schur
    complement S = a₂₂ − a₁₂ᵀT gives

    * log|A'| = log|A₁₁| + log|S| and log|A₁₁| = log|A| + log|(A⁻¹)₂₂|;
    * p'ᵀA'⁻¹p' = p₁ᵀA₁₁⁻¹p₁ + rᵀS⁻¹r with r = p₂' − Tᵀp₁, for every column of P at once;

    all in O(M² + MD) instead of a fresh O(M³ + M²D) factorisation.
    """
    M = c.Ainv.shape[0]
    B = c.Ainv[:, idx]                                          # (M, 2)
    C = B[idx, :]                                               # (2, 2) = (A⁻¹)₂₂
    C_inv, logdet_C = _inv_logdet_2x2(C)
    keep = jnp.ones(M, c.Phi.dtype).at[idx].set(0.0)            # indicator of set 1
    a12 = (c.Phi.T @ new) * keep[:, None]                       # (M, 2)
    a22 = new.T @ new + jnp.eye(2, dtype=new.dtype) / s0
    AinvA12 = c.Ainv @ a12
    T = AinvA12 - B @ (C_inv @ AinvA12[idx, :])                 # A₁₁⁻¹ a₁₂, zero at idx
    S = a22 - a12.T @ T
    p2 = new.T @ Y                                              # (2, D)
    p1 = c.P * keep[:, None]
    V = c.U - B @ c.P[idx, :]                                   # A⁻¹ p₁
    W1 = V - B @ (C_inv @ V[idx, :])                            # A₁₁⁻¹ p₁
    r = p2 - T.T @ p1
    S_inv, logdet_S = _inv_logdet_2x2(S)
    quad = jnp.sum(p1 * W1, axis=0) + jnp.sum(r * (S_inv @ r), axis=0)
    logdet = c.logdet + logdet_C + logdet_S
    return B, C_inv, T, S_inv, p2, W1, r, quad, logdet


def _accept(c: _Collapsed, idx, new, terms) -> _Collapsed:
    """A'⁻¹ = A₁₁⁻¹ + T̃S⁻¹T̃ᵀ with T̃ = T − E_idx, and A'⁻¹P' = A₁₁⁻¹p₁ − T̃S⁻¹r."""
    B, C_inv, T, S_inv, p2, W1, r, _, logdet = terms
    M = c.Ainv.shape[0]
    T_tilde = T - jnp.eye(M, dtype=T.dtype)[:, idx]
    Ainv = c.Ainv - B @ C_inv @ B.T + T_tilde @ S_inv @ T_tilde.T
    U = W1 - T_tilde @ (S_inv @ r)
    return _Collapsed(Phi=c.Phi.at[:, idx].set(new), P=c.P.at[idx, :].set(p2), Ainv=Ainv,
                      U=U, logdet=logdet)


def update_frequencies_collapsed(key: Array, W_star: Array, X: Array, W: Array, Y: Array,
                                 noise_var: Array, s0: float):
    """One MH pass over the frequencies under the Gaussian marginal with β integrated out.

    The W-dependent part of the collapsed log-marginal (:mod:`.weights`) is
    −(D/2) log|A| + Σ_j ‖L⁻¹p_j‖²/(2σ_j²) = −(D/2) log|A| + Σ_j p_jᵀA⁻¹p_j/(2σ_j²); each
    proposal evaluates it by the block updates of :func:`_block_terms`.  A⁻¹ is formed afresh
    at the start of every pass, so rounding cannot accumulate across sweeps.
    """
    n_freq = W.shape[0]
    D = Y.shape[1]
    log_u = _proposals(key, W_star)
    Phi = design(X, W, False)
    P = Phi.T @ Y
    # One Cholesky and one triangular solve, in sequence: jaxlib's CPU LAPACK kernels can
    # deadlock a 2-thread pool when two batched calls (chains under vmap) run at once.
    L = jnp.linalg.cholesky(Phi.T @ Phi + jnp.eye(Phi.shape[1], dtype=Phi.dtype) / s0)
    L_inv = solve_triangular(L, jnp.eye(L.shape[0], dtype=Phi.dtype), lower=True)
    Ainv = L_inv.T @ L_inv
    c0 = _Collapsed(Phi=Phi, P=P, Ainv=Ainv, U=Ainv @ P,
                    logdet=2.0 * jnp.sum(jnp.log(jnp.diag(L))))

    def score(quad, logdet):
        return -0.5 * D * logdet + 0.5 * jnp.sum(quad / noise_var)

    def body(m, carry):
        state, n_acc = carry
        c, W = state.position
        idx = pair_index(m, n_freq)
        new = feature_pair(X, W_star[m], n_freq)
        terms = _block_terms(c, idx, new, Y, s0)
        # the rank-2 update of A⁻¹ is formed only if the move is accepted
        state, info = mh_accept_reject(
            log_u[m], state, lambda: (_accept(c, idx, new, terms), W.at[m].set(W_star[m])),
            score(terms[7], terms[8]))
        return state, n_acc + info.accepted

    cur0 = score(jnp.sum(P * c0.U, axis=0), c0.logdet)
    init = (MHState((c0, W), cur0), jnp.zeros((), jnp.int32))
    state, n_acc = lax.fori_loop(0, n_freq, body, init)
    return state.position[1], n_acc

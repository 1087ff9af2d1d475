r"""The dynamical latent prior with the reparameterised q(X) of Damianou et al. (2016)
(seed 001 §E, eqs. 48–50; seed 003 §2.2.1).

Each latent dimension q is a GP over time: :math:`p(x_q) = N(0, K_t)` (eq. 49), block-diagonal
over independent sequences (``groups``).  The optimal Gaussian q(x_q) has the form

.. math:: S_q = (K_t^{-1} + \Lambda_q)^{-1}, \qquad \mu_q = K_t \bar\mu_q,

with free parameters :math:`\bar\mu_q \in R^N` and a positive diagonal :math:`\Lambda_q` — 2NQ
numbers instead of a full covariance per dimension.  Everything follows from one Cholesky of
:math:`B_q = I + \Lambda_q^{1/2} K_t \Lambda_q^{1/2} = L L^\top` (no inverse of K_t is needed):

* :math:`\mathrm{diag}\,S_q = \mathrm{diag}\,K_t - \mathrm{colsum}(V^2)` with
  :math:`V = L^{-1}\Lambda_q^{1/2} K_t` (Woodbury);
* :math:`\mathrm{tr}(K_t^{-1}S_q) = \mathrm{tr}(B_q^{-1})`, since
  :math:`K^{-1}S = I - \Lambda^{1/2}B^{-1}\Lambda^{1/2}K` and
  :math:`\mathrm{tr}(B^{-1}\Lambda^{1/2}K\Lambda^{1/2}) = N - \mathrm{tr}(B^{-1})`, and
  :math:`\mathrm{tr}(B^{-1}) = \|L^{-1}\|_F^2` with :math:`L^{-1} = L^\top - V\Lambda^{1/2}`
  (as :math:`V\Lambda^{1/2} = L^{-1}(B - I)`), so V is the only triangular solve;
* :math:`\log|K_t| - \log|S_q| = \log|B_q|`;
* :math:`\mu_q^\top K_t^{-1}\mu_q = \bar\mu_q^\top K_t \bar\mu_q`;

so :math:`\mathrm{KL}(q(x_q)\|p(x_q)) = \frac12[\mathrm{tr}(B_q^{-1}) + \bar\mu_q^\top K_t\bar\mu_q
- N + \log|B_q|]`.  Sequences are padded to a common length T; padded rows have Λ = 0 and an
identity K block, which contribute exactly :math:`\mathrm{tr}(I) = T_{pad}` to tr(B⁻¹) and
nothing else, and are subtracted.  The (sequence, latent dimension) blocks are factorised one
per LAPACK call, never as a batch (see :func:`_one_block`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.linalg import solve_triangular
from gplvm.registry import register


@register("gplvm.state.SequenceLayout")
class SequenceLayout(NamedTuple):
    """Rows of each sequence padded to a common length (built once, outside jit)."""

    index: jnp.ndarray   # (S, T) row index into the N rows (0 where padded)
    mask: jnp.ndarray    # (S, T) 1.0 for real rows
    times: jnp.ndarray   # (S, T) time stamps (padded with distinct dummy values)


def sequence_layout(times, groups=None) -> SequenceLayout:
    """Lay the rows out as padded sequences; ``groups`` labels independent sequences."""
    times = np.asarray(times, dtype=float).ravel()
    groups = np.zeros(len(times), dtype=int) if groups is None else np.asarray(groups).ravel()
    labels = list(dict.fromkeys(groups.tolist()))
    rows = [np.flatnonzero(groups == g) for g in labels]
    T = max(len(r) for r in rows)
    index = np.zeros((len(rows), T), dtype=int)
    mask = np.zeros((len(rows), T))
    padded_t = np.zeros((len(rows), T))
    for s, r in enumerate(rows):
        index[s, : len(r)] = r
        mask[s, : len(r)] = 1.0
        padded_t[s, : len(r)] = times[r]
        padded_t[s, len(r):] = np.arange(T - len(r))  # unused: their K block is replaced by I
    return SequenceLayout(jnp.asarray(index), jnp.asarray(mask), jnp.asarray(padded_t))


def _block_kernel(time_kernel, t, mask, jitter):
    """K_t of one padded sequence, with the identity on padded rows/columns."""
    K = time_kernel(t[:, None]) + jitter * jnp.eye(t.shape[0])
    outer = mask[:, None] * mask[None, :]
    return K * outer + jnp.diag(1.0 - mask)


def _one_block(K, mask, mb, sl):
    """Marginals and KL of all latent dimensions of one padded sequence.

    Args:
        K: (T, T) K_t of the sequence (identity on padded rows).
        mask: (T,) 1.0 for real rows.
        mb: (T, Q) μ̄ (0 on padded rows).
        sl: (T, Q) Λ^{1/2} (0 on padded rows).

    The latent dimensions are a Python loop, not a ``vmap``: every Cholesky and triangular solve
    is then an *unbatched* LAPACK call.  jaxlib's CPU LAPACK kernels split a batched call over
    the XLA intra-op thread pool and block the calling pool thread until the pieces finish; when
    as many batched calls as the pool has threads run at once (two on a 2-core machine, e.g.
    the solves of two latent dimensions inside L-BFGS's line-search loop) every pool thread
    waits and nothing runs the pieces — ``fit(times=...)`` deadlocked with the process idle.
    An unbatched call always runs inline on its own thread.  The sequences go through
    ``lax.map`` (a loop) for the same reason.
    """
    T, Q = mb.shape
    eye = jnp.eye(T)
    means, variances, kl = [], [], 0.0
    for q in range(Q):
        mb_q, sl_q = mb[:, q], sl[:, q]
        L = jnp.linalg.cholesky(eye + sl_q[:, None] * K * sl_q[None, :])
        V = solve_triangular(L, sl_q[:, None] * K)
        Linv = L.T - V * sl_q[None, :]          # V Λ^{1/2} = L⁻¹(B − I) = Lᵀ − L⁻¹
        mean = K @ mb_q
        means.append(mean)
        variances.append(jnp.diag(K) - jnp.sum(V**2, axis=0))
        kl = kl + 0.5 * (jnp.sum(Linv**2) - jnp.sum(1.0 - mask) + mb_q @ mean
                         - jnp.sum(mask) + 2.0 * jnp.sum(jnp.log(jnp.diag(L))))
    return jnp.stack(means, axis=1), jnp.stack(variances, axis=1), kl


def q_x_and_kl(time_kernel, layout: SequenceLayout, mu_bar, lam, n_rows: int,
               jitter: float = 1e-6):
    """Marginals of q(X) and KL(q(X) ‖ p(X)) under the dynamical prior.

    Args:
        time_kernel: a kernel on time stamps (1-D inputs).
        layout: from :func:`sequence_layout`.
        mu_bar: (N, Q) free means μ̄.
        lam: (N, Q) positive Λ diagonals.
        n_rows: N.
        jitter: added to each K_t block's diagonal (relative to a unit-variance time kernel).

    Returns:
        X_mean (N, Q), X_var (N, Q), KL (scalar).
    """
    mask = layout.mask
    Ks = jax.vmap(lambda t, m: _block_kernel(time_kernel, t, m, jitter))(layout.times, mask)
    mb = mu_bar[layout.index] * mask[..., None]                       # (S, T, Q)
    # masked after the square root: sqrt(λ·0) would have an infinite derivative, and 0 · ∞
    # makes the gradient of the padded rows' source row (index 0) NaN
    sl = jnp.sqrt(lam[layout.index]) * mask[..., None]               # (S, T, Q)
    # one sequence at a time (lax.map, not vmap: see _one_block on batched LAPACK calls)
    means, variances, kls = jax.lax.map(lambda a: _one_block(*a), (Ks, mask, mb, sl))
    flat_idx = layout.index.ravel()
    keep = mask.ravel()[:, None]
    Q = mu_bar.shape[1]
    X_mean = jnp.zeros((n_rows, Q)).at[flat_idx].add(means.reshape(-1, Q) * keep)
    X_var = jnp.zeros((n_rows, Q)).at[flat_idx].add(variances.reshape(-1, Q) * keep)
    return X_mean, X_var, jnp.sum(kls)


def predict_q_x(time_kernel, layout: SequenceLayout, mu_bar, lam, t_new, sequence: int = 0,
                jitter: float = 1e-6):
    """q(x*) at new times of one sequence (seed 003 eq. 35): mean K_*t μ̄ and variance
    k** − K_*t (K_t + Λ⁻¹)⁻¹ K_t*, computed as k** − ‖L⁻¹ Λ^{1/2} K_t*‖²."""
    idx, mask, t = layout.index[sequence], layout.mask[sequence], layout.times[sequence]
    K = _block_kernel(time_kernel, t, mask, jitter)
    t_new = jnp.asarray(t_new, dtype=float).reshape(-1, 1)
    Ks = time_kernel(t_new, t[:, None]) * mask[None, :]                # (T*, T)
    kss = time_kernel.diag(t_new)
    mb = mu_bar[idx] * mask[:, None]
    sl = jnp.sqrt(lam[idx]) * mask[:, None]
    means, variances = [], []
    for q in range(mb.shape[1]):  # unbatched LAPACK calls, as in _one_block
        sl_q = sl[:, q]
        L = jnp.linalg.cholesky(jnp.eye(K.shape[0]) + sl_q[:, None] * K * sl_q[None, :])
        V = solve_triangular(L, sl_q[:, None] * Ks.T)
        means.append(Ks @ mb[:, q])
        variances.append(kss - jnp.sum(V**2, axis=0))
    return jnp.stack(means, axis=1), jnp.stack(variances, axis=1)

r"""The NUTS block's (X, W) taken modulo rotations (issue 30).

The features cos(XWᵀ), sin(XWᵀ) (seed 000, eq. 4) depend on X and W only through XWᵀ, and
neither X's N(0, I) prior nor the spectral density of a stationary kernel with one
length-scale, p(w) = f(‖w‖), changes when both are multiplied by an orthogonal O: the
posterior is constant along every orbit {(XO, WO) : O ∈ O(Q)}.  With W in the NUTS position
(:mod:`.joint`), trajectories drift along that flat direction until the tree's depth limit
stops them — 255 leapfrog steps per draw on the Poisson S-curve, against 127 with W held fixed
(``benchmarks/rflvm_convergence.py``, issue 30's note).

The block therefore moves the orbit's canonical point instead: the first Q rows of W
lower-triangular with a positive diagonal (the LQ decomposition W₁:Q = L O), X' = X Oᵀ,
W' = W Oᵀ.  Its position holds log l_ii, the l_ij (i > j) and the other M/2 − Q rows of W'
(:func:`pack`); by the Jacobian of the QR decomposition (Muirhead 1982, *Aspects of
Multivariate Statistical Theory*, Thm 2.1.13, for A = W₁:Qᵀ = Oᵀ Lᵀ),
dW₁:Q = ∏_i l_ii^{Q−i} dL (dO) with (dO) Haar measure, so the canonical point's density is
the posterior's at (X', W') times ∏_i l_ii^{Q−i+1} (one power more for log l_ii):
:func:`log_jacobian`.  After each transition a Haar-distributed O is drawn and
(X', W') ↦ (X'O, W'O) (:func:`rotate`): an exact Gibbs step along the orbit, so X and W
keep the whole posterior as their target.

It applies (:func:`applies`) to ``sampler='nuts'`` with W in the position under a fixed,
isotropic kernel and the iid latent prior, and under the DP mixture when its components are
integrated out of the block's target (``dp_components='integrated'``): the NIW base measure
(μ0 = 0, Ψ0 = I) makes p(W | z) = Π_k ∫ Π_{m: z_m = k} N(w_m | μ, Σ) dNIW(μ, Σ) invariant
under W ↦ WO (substitute μ ↦ Oμ, Σ ↦ OΣOᵀ, of unit Jacobian).  The DP components as drawn
(full covariances, fixed during the block), an ARD kernel and the dynamic prior are not
rotation invariant and keep W as it is.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gplvm.kernels.stationary import AbstractStationary

Array = jax.Array


def applies(spec, data) -> bool:
    """Whether the NUTS block samples (X, W) modulo rotations: ``sampler='nuts'``, W sampled, the
    fixed kernel (no DP mixture) stationary with one length-scale, the iid latent prior and
    at least Q frequencies.  Static (the spec, the kernel's type and its length-scale's
    shape)."""
    kernel = data.kernel
    if spec.sampler != "nuts" or spec.frequencies != "sampled" or spec.dynamic:
        return False
    if spec.n_freq < spec.n_components:
        return False
    if spec.learn_kernel:        # the DP components integrated out under an isotropic base
        return spec.integrates_components
    return isinstance(kernel, AbstractStationary) and jnp.ndim(kernel.lengthscale) == 0


def n_coords(n_freq: int, Q: int) -> int:
    """Coordinates of W' in the position: (M/2)Q less the Q(Q − 1)/2 zeros above L's
    diagonal."""
    return n_freq * Q - Q * (Q - 1) // 2


def canonical(X: Array, W: Array) -> tuple[Array, Array]:
    """(X Oᵀ, W Oᵀ) with W₁:Q = L O its LQ decomposition, diag L > 0 (module docstring)."""
    Q = W.shape[1]
    q, r = jnp.linalg.qr(W[:Q].T)                # W₁:Q = rᵀ qᵀ
    sign = jnp.where(jnp.diagonal(r) < 0, -1.0, 1.0).astype(W.dtype)
    q = q * sign[None, :]                        # rows of r flipped with it: diag > 0
    return X @ q, W @ q


def pack(W: Array) -> Array:
    """Canonical W' as a flat vector: log diag L, L's entries below the diagonal (row by row),
    the other rows of W'."""
    Q = W.shape[1]
    rows, cols = jnp.tril_indices(Q, -1)
    return jnp.concatenate([jnp.log(jnp.diagonal(W[:Q])), W[:Q][rows, cols],
                            W[Q:].ravel()])


def unpack(flat: Array, n_freq: int, Q: int) -> Array:
    """W' from :func:`pack`'s vector."""
    rows, cols = jnp.tril_indices(Q, -1)
    n_low = rows.shape[0]
    L = jnp.diag(jnp.exp(flat[:Q])).at[rows, cols].set(flat[Q:Q + n_low])
    return jnp.concatenate([L, flat[Q + n_low:].reshape(n_freq - Q, Q)])


def log_jacobian(W: Array) -> Array:
    """Σ_i (Q − i + 1) log l_ii (i from 1) at canonical W': the density of the position
    relative to the posterior's at (X', W') (module docstring)."""
    Q = W.shape[1]
    powers = jnp.arange(Q, 0, -1, dtype=W.dtype)
    return jnp.sum(powers * jnp.log(jnp.diagonal(W[:Q])))


def rotate(key: Array, X: Array, W: Array) -> tuple[Array, Array]:
    """(XO, WO) for a Haar-distributed O ∈ O(Q) (``jax.random.orthogonal``)."""
    O = jax.random.orthogonal(key, W.shape[1], dtype=W.dtype)
    return X @ O, W @ O

r"""Orthogonal alignment of latent draws (orthogonal Procrustes, generalised Procrustes).

The RFLVM posterior over X is invariant to X → X R for every orthogonal Q × Q matrix R
(rotations and reflections): the prior N(0, I) on the rows (or the GP prior over time, shared
by the Q columns) is, and a stationary isotropic kernel depends on X only through distances
(seed 000, §3).  It is *not* invariant to shifts (the prior pins the origin) nor to scaling, so
draws are aligned with an orthogonal R only.  For ``X`` and a ``reference`` (both N × Q) the
minimiser of :math:`\|X R - \mathrm{ref}\|_F` over orthogonal R is

.. math:: R = U V^\top, \qquad X^\top \mathrm{ref} = U S V^\top \text{ (SVD)}

(Schönemann 1966): :math:`\|XR - \mathrm{ref}\|_F^2 = \mathrm{const} - 2\,\mathrm{tr}(R^\top
X^\top \mathrm{ref})` and the trace is maximal at :math:`R = UV^\top`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gplvm._pytree import to_device

Array = jax.Array


@jax.jit
def procrustes_rotation(X: Array, reference: Array) -> Array:
    """The orthogonal R (``Float[Array, "Q Q"]``) minimising ``||X R - reference||_F``.

    Args:
        X: ``Float[Array, "N Q"]``.
        reference: ``Float[Array, "N Q"]``.

    Returns:
        R with ``R Rᵀ = I`` (a rotation or a reflection; no scaling, no translation).
    """
    U, _, Vt = jnp.linalg.svd(X.T @ reference, full_matrices=False)
    return U @ Vt


@jax.jit
def _align(X_samples: Array, reference: Array) -> tuple[Array, Array]:
    R = jax.vmap(jax.vmap(procrustes_rotation, (0, None)), (0, None))(X_samples, reference)
    return jnp.einsum("csnq,csqr->csnr", X_samples, R), R


def align_samples(X_samples: Array, reference: Array) -> tuple[Array, Array]:
    """Rotate/reflect every draw onto ``reference``.

    Args:
        X_samples: ``Float[Array, "C S N Q"]`` (chains, draws, rows, latent dimensions).
        reference: ``Float[Array, "N Q"]``.

    Returns:
        ``(aligned, rotations)``: ``Float[Array, "C S N Q"]`` with ``aligned[c, s] =
        X_samples[c, s] @ rotations[c, s]``, and ``Float[Array, "C S Q Q"]``.
    """
    X_samples = to_device(X_samples)
    if X_samples.ndim != 4:
        raise ValueError(f"X_samples has shape {X_samples.shape}; expected (chains, draws, N, Q)"
                         f" — add a chain axis with X[None] for a single chain")
    return _align(X_samples, to_device(np.asarray(reference, X_samples.dtype)))


def generalised_procrustes(X_samples: Array, n_iter: int = 10, tol: float = 1e-12
                           ) -> tuple[Array, Array]:
    """Align all draws to their own mean (generalised Procrustes analysis).

    Start from the last draw of chain 0, align every draw to the reference, take the mean of
    the aligned draws as the new reference, and repeat until the reference changes by less than
    ``tol`` (relative Frobenius norm) or ``n_iter`` rounds.  The result is defined up to one
    global orthogonal transform (that of the starting draw).

    Args:
        X_samples: ``Float[Array, "C S N Q"]``.
        n_iter: the most alignment rounds.
        tol: relative change of the reference at which to stop.

    Returns:
        ``(aligned, mean)``: ``Float[Array, "C S N Q"]`` and ``Float[Array, "N Q"]``.
    """
    X_host = np.asarray(X_samples)
    if X_host.ndim != 4:
        raise ValueError(f"X_samples has shape {X_host.shape}; expected (chains, draws, N, Q)")
    # the start is taken on the host and each round is one program: op by op, every round's
    # slicing, mean and norms were programs of their own, lowered again in every new process
    X_samples, reference = to_device((X_host, X_host[0, -1]))
    aligned = X_samples
    for _ in range(max(1, n_iter)):
        aligned, mean, change = _gpa_round(X_samples, reference)
        reference = mean
        if float(change) < tol:
            break
    return aligned, reference


@jax.jit
def _gpa_round(X_samples: Array, reference: Array):
    """One round of :func:`generalised_procrustes`: the draws aligned to ``reference``, their
    mean, and its relative change."""
    aligned, _ = _align(X_samples, reference)
    mean = aligned.mean(axis=(0, 1))
    change = jnp.linalg.norm(mean - reference) / jnp.maximum(jnp.linalg.norm(mean), 1e-300)
    return aligned, mean, change


def posterior_mean_aligned(X_samples: Array, n_iter: int = 10, tol: float = 1e-12) -> Array:
    """The posterior mean of X after generalised-Procrustes alignment (``Float[Array, "N Q"]``).

    A plain average of unaligned draws would shrink towards the origin as the chains wander
    over rotations; see :func:`generalised_procrustes`.
    """
    return generalised_procrustes(X_samples, n_iter, tol)[1]

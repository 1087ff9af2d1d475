r"""Metropolis–Hastings accept/reject as a kernel: ``init`` / ``step`` with ``MHState`` /
``MHInfo`` (STYLE.md 1; Metropolis et al. 1953, Hastings 1970).

The caller proposes; the kernel decides.  With target density :math:`\pi` and proposal
:math:`q`, a proposal :math:`x^\star` is accepted with probability

.. math:: \rho = \min\Big\{1,\; \frac{\pi(x^\star)\, q(x \mid x^\star)}
                               {\pi(x)\, q(x^\star \mid x)}\Big\}.

With the prior as proposal (seed 000, eq. 22: the frequencies W) the prior ratio cancels the
proposal ratio and :math:`\rho = \min\{1, p(Y \mid x^\star) / p(Y \mid x)\}`: the state's
``log_density`` is then the log-likelihood.  For a symmetric proposal it is the log target.
Any other proposal passes ``log_proposal_ratio`` = :math:`\log q(x \mid x^\star) - \log
q(x^\star \mid x)`.

``log_density`` may hold one value per independent block (shape ``(B,)``): each block is then
accepted or rejected on its own, with its own uniform.

**Preconditioned random walk** (the frequencies W, issue 14): :func:`gaussian_walk` proposes
:math:`x^\star = x + s\,L^{-\top}\varepsilon`, :math:`LL^\top = H`, a draw from
:math:`N(x, s^2 H^{-1})` with H a local precision (curvature) of the target.  When H does not
depend on x the proposal is symmetric and no ``log_proposal_ratio`` is needed.  The scale
:math:`s = 2.38/\sqrt d` is optimal for a d-dimensional Gaussian target whose precision H is
(Roberts, Gelman & Gilks 1997; Roberts & Rosenthal 2001, §3).  The d × d factorisation is
written out in plain array operations: d is the latent dimension (2–10), far below what a
LAPACK call pays off for, and batched LAPACK calls of several chains under ``vmap`` inside a
loop can deadlock jaxlib's CPU thread pool.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array

__all__ = ["MHInfo", "MHState", "accept_reject", "gaussian_walk", "init", "optimal_walk_scale",
           "small_cholesky", "step"]


class MHState(NamedTuple):
    """Current position and the log density the acceptance ratio compares.

    Attributes:
        position: any pytree; with B blocks its leaves have leading shape ``(B,)``.
        log_density: ``Float[Array, "..."]``: log target, or log-likelihood for prior
            proposals (scalar, or one per block).
    """

    position: Any
    log_density: Array


class MHInfo(NamedTuple):
    """Diagnostics of one accept/reject.

    Attributes:
        accepted: ``Bool[Array, "..."]``, shape of ``log_density``.
        acceptance_probability: ``Float[Array, "..."]``, min(1, ρ) (0 for a NaN proposal).
    """

    accepted: Array
    acceptance_probability: Array


def init(position: Any, log_density_fn: Callable[[Any], Array]) -> MHState:
    """The state at ``position``: ``MHState(position, log_density_fn(position))``."""
    return MHState(position, jnp.asarray(log_density_fn(position)))


def _select(accepted: Array, proposal: Any, current: Any) -> Any:
    """Per block, the proposal where accepted, else the current value.

    A zero-argument callable ``proposal`` (scalar decision only) is evaluated under
    ``lax.cond`` only when accepted: a proposal that is costly to form (the collapsed frequency
    step's rank-2 update of A⁻¹) costs nothing when it is rejected.
    """
    if callable(proposal):
        if accepted.ndim:
            raise ValueError("a callable proposal needs a scalar log density (one decision); "
                             "pass the proposal itself for blocks")
        return lax.cond(accepted, proposal, lambda: current)

    def choose(p, c):
        a = accepted.reshape(accepted.shape + (1,) * (jnp.ndim(c) - accepted.ndim))
        return jnp.where(a, p, c)

    return jax.tree_util.tree_map(choose, proposal, current)


def accept_reject(log_u: Array, state: MHState, proposal: Any, proposal_log_density: Array,
                  log_proposal_ratio: Optional[Array] = None) -> tuple[MHState, MHInfo]:
    """The accept rule given log u, u ~ U(0, 1) (module docstring).

    :func:`step` draws u itself; a sequential pass over components (one MH move per frequency
    w_m, each changing what the next one sees) draws all its uniforms at once and gives the
    m-th to move m.

    Args:
        log_u: ``Float[Array, "..."]`` log of U(0, 1) draws, shape of ``state.log_density``.
        state: the current :class:`MHState`.
        proposal: a pytree like ``state.position``, or (scalar decision) a zero-argument
            callable that returns it, evaluated only when the proposal is accepted.
        proposal_log_density: the log density at the proposal, shape of ``state.log_density``.
        log_proposal_ratio: log q(x | x⋆) − log q(x⋆ | x); None for prior or symmetric
            proposals.

    Returns:
        ``(MHState, MHInfo)``.  A NaN ratio is rejected.
    """
    proposal_log_density = jnp.asarray(proposal_log_density)
    log_ratio = proposal_log_density - state.log_density
    if log_proposal_ratio is not None:
        log_ratio = log_ratio + log_proposal_ratio
    # accept with probability min(1, ρ): log u < log ρ; log u < NaN is False
    accepted = log_u < log_ratio
    position = _select(accepted, proposal, state.position)
    log_density = jnp.where(accepted, proposal_log_density, state.log_density)
    probability = jnp.where(jnp.isnan(log_ratio), 0.0, jnp.exp(jnp.minimum(log_ratio, 0.0)))
    return MHState(position, log_density), MHInfo(accepted, probability)


def step(key: Array, state: MHState, proposal: Any, proposal_log_density: Array,
         log_proposal_ratio: Optional[Array] = None) -> tuple[MHState, MHInfo]:
    """One Metropolis–Hastings transition for a proposal made by the caller.

    Args:
        key: a ``jax.random`` key (one uniform per block).
        Other arguments as in :func:`accept_reject`.
    """
    log_density = jnp.asarray(state.log_density)
    log_u = jnp.log(jax.random.uniform(key, log_density.shape, log_density.dtype))
    return accept_reject(log_u, state._replace(log_density=log_density), proposal,
                         proposal_log_density, log_proposal_ratio)


# --- preconditioned Gaussian random walk ------------------------------------------------------

def optimal_walk_scale(dim: int) -> float:
    """s = 2.38/√d: the random-walk scale, relative to the target's standard deviations, that
    maximises the efficiency of a d-dimensional Gaussian target (Roberts & Rosenthal 2001)."""
    return 2.38 / float(dim) ** 0.5


def small_cholesky(H: Array) -> Array:
    """Lower Cholesky factor of a small symmetric positive-definite d × d matrix, one column at
    a time in array operations (module docstring: no LAPACK call)."""
    d = H.shape[-1]
    rows = jnp.arange(d)
    L = jnp.zeros_like(H)
    for j in range(d):
        Lj = L[j]                                   # columns ≥ j of L are still zero
        diag = jnp.sqrt(H[j, j] - Lj @ Lj)
        col = (H[:, j] - L @ Lj) / diag
        L = L.at[:, j].set(jnp.where(rows > j, col, 0.0).at[j].set(diag))
    return L


def _solve_upper(L: Array, eps: Array) -> Array:
    """v with Lᵀv = ε (back substitution, L lower triangular)."""
    d = L.shape[-1]
    v = jnp.zeros_like(eps)
    for i in reversed(range(d)):
        v = v.at[i].set((eps[i] - L[:, i] @ v) / L[i, i])    # v_k = 0 for k ≤ i so far
    return v


def gaussian_walk(eps: Array, x: Array, precision: Array, scale: float) -> Array:
    """x⋆ = x + s L⁻ᵀε with LLᵀ = ``precision``: a draw from N(x, s² H⁻¹) given ε ~ N(0, I).

    Args:
        eps: ``Float[Array, "d"]`` standard normal draws.
        x: ``Float[Array, "d"]`` the current position.
        precision: ``Float[Array, "d d"]`` H, symmetric positive definite.
        scale: s (e.g. :func:`optimal_walk_scale`).
    """
    return x + scale * _solve_upper(small_cholesky(precision), eps)

r"""Batched elliptical slice sampling (Murray, Adams & MacKay 2010, Fig. 2; seed 000, §3.1).

For a variable with Gaussian prior :math:`f \sim \mathcal N(\mu, \Sigma)` and any likelihood
:math:`L(f)`, one transition draws an auxiliary prior point :math:`\nu \sim \mathcal N(\mu,
\Sigma)`, a slice height :math:`\log y = \log L(f) + \log u`, and then slice-samples the angle
:math:`\theta` of the ellipse

.. math:: f'(\theta) = \mu + (f - \mu)\cos\theta + (\nu - \mu)\sin\theta,

shrinking the bracket towards :math:`\theta = 0` (the current state, which is always on the
slice) until :math:`\log L(f') > \log y`.  The transition leaves the posterior invariant and has
no step size to tune.

Here ``f`` holds B *independent* blocks (the N rows of X given everything else, the D columns
of β, …): block b's log-likelihood depends on ``f[b]`` only, so each block runs its own slice.
The blocks shrink in rounds: a block that has accepted keeps its value while the others
shrink, and round k draws the angles of every block from one ``uniform(fold_in(key, k), (B,))``,
so block b's random numbers depend on (b, k) only.

**Compaction** (issue 14).  A single loop over all B blocks evaluates the vectorised
``log_lik_fn`` on the whole batch in every round until the *slowest* block accepts: ~20 rounds
where blocks need ~6 points on average (rows of X on congress109).  Given ``log_lik_on`` (the
log-likelihood of a subset of blocks, by index), the rounds run instead in stages over buffers
of halving size B, ⌈B/2⌉, ⌈B/4⌉, … (while at least :data:`MIN_BUFFER` blocks): once the blocks still
shrinking fit in the next buffer they are gathered into it, and only they are evaluated, so a
round costs at most twice the work of the blocks it moves (the smallest buffer excepted).
Every block runs exactly the slice of Fig. 2 with the same random numbers, so the draws are
those of the single loop (up to the rounding of a log-likelihood evaluated in a smaller batch).
Each stage is a loop of its own (vmap-safe: a ``lax.switch`` between sizes would run every
branch under vmap), compiled separately: ~0.3 s of compilation per stage, once per shape.

The kernel never sees the prior covariance: the caller draws ``nu`` from the prior, so the same
code serves an N(0, I) prior on the rows of X, a GP prior over time on the columns of X and an
N(0, s0 I) prior on β.  :func:`elliptical_slice_gaussian` draws ``nu`` from N(mean, L Lᵀ).

:func:`init` / :func:`step` wrap the kernel in the ``State``/``Info`` form of the other samplers
(STYLE.md 1); loops over sweeps and chains live in :func:`gplvm.inference.mcmc.run_chains`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array
LogLikOn = Callable[[Array], Callable[[Array], Array]]

__all__ = ["ESSInfo", "ESSState", "elliptical_slice", "elliptical_slice_gaussian", "init", "step"]

MIN_BUFFER = 32   # the smallest buffer of the compaction


class ESSState(NamedTuple):
    """Position of B independent blocks and their log-likelihoods.

    Attributes:
        position: ``Float[Array, "B ..."]``.
        log_lik: ``Float[Array, "B"]``, block b's log-likelihood at ``position[b]``.
    """

    position: Array
    log_lik: Array


class ESSInfo(NamedTuple):
    """Per-block diagnostics of one transition.

    Attributes:
        n_proposals: ``Int[Array, "B"]``, points evaluated on the ellipse (1 = first accepted).
        accepted: ``Bool[Array, "B"]``; False where the block hit ``max_shrinks`` and kept its
            current value.
        theta: ``Float[Array, "B"]``, the accepted angle (the last one tried when not accepted).
    """

    n_proposals: Array
    accepted: Array
    theta: Array


class _Blocks(NamedTuple):
    """Per-block loop state (for all B blocks, or for the ones gathered into a buffer).  The
    point f'(θ) is not carried: it is a function of θ, recomputed where needed, so a round
    moves no block-sized array but the one it evaluates."""

    theta: Array
    theta_min: Array
    theta_max: Array
    log_lik_prop: Array
    accepted: Array
    n_proposals: Array


class _Ellipse(NamedTuple):
    """What a round needs besides the loop state: the ellipse, the slice and the blocks' ids."""

    mean: Array
    f_c: Array        # f − mean
    nu_c: Array       # ν − mean
    log_y: Array
    index: Optional[Array]  # the blocks' indices in 0..B−1; None for all of them in order


def _per_block(x: Array, ndim: int) -> Array:
    """Reshape a (B,) vector to broadcast against a (B, ...) array of rank ``ndim``."""
    return x.reshape(x.shape + (1,) * (ndim - 1))


def _on_ellipse(e: _Ellipse, theta: Array) -> Array:
    # 4. f' = ν sin θ + f cos θ, about the prior mean
    t = _per_block(theta, e.f_c.ndim)
    return e.mean + e.f_c * jnp.cos(t) + e.nu_c * jnp.sin(t)


def _shrink(c: _Blocks, e: _Ellipse, fn, key_round: Array, n_blocks: int) -> _Blocks:
    """One round: every block not yet accepted shrinks its bracket and tries a new angle."""
    active = ~c.accepted
    # 6. shrink the bracket towards θ = 0 (the current state, always on the slice)
    theta_min = jnp.where(active & (c.theta < 0), c.theta, c.theta_min)
    theta_max = jnp.where(active & (c.theta >= 0), c.theta, c.theta_max)
    # 7. redraw θ ~ U(θ_min, θ_max) and go back to 4.  The uniforms of all B blocks are drawn
    #    and the buffer's taken, so a block's numbers do not depend on the buffer it is in (the
    #    scaling is jax.random.uniform's with minval, maxval = θ_min, θ_max).
    u = jax.random.uniform(key_round, (n_blocks,), c.theta.dtype)
    u = u if e.index is None else u[e.index]
    theta = jnp.where(active, jnp.maximum(theta_min, u * (theta_max - theta_min) + theta_min),
                      c.theta)
    log_lik_new = fn(_on_ellipse(e, theta))
    # 5. accept f' if log L(f') > log y (accepted blocks keep their value)
    return _Blocks(theta, theta_min, theta_max, jnp.where(active, log_lik_new, c.log_lik_prop),
                   c.accepted | (active & (log_lik_new > e.log_y)),
                   c.n_proposals + active.astype(jnp.int32))


def _run(c: _Blocks, n_shrinks: Array, e: _Ellipse, fn, key_loop: Array, n_blocks: int,
         max_shrinks: int, leave_at: int) -> tuple[_Blocks, Array]:
    """Rounds until at most ``leave_at`` blocks are still shrinking (or ``max_shrinks``)."""
    def not_done(carry):
        c, n = carry
        return (n < max_shrinks) & (jnp.sum(~c.accepted) > leave_at)

    def body(carry):
        c, n = carry
        return _shrink(c, e, fn, jax.random.fold_in(key_loop, n), n_blocks), n + 1

    return lax.while_loop(not_done, body, (c, n_shrinks))


def _buffer_sizes(n_blocks: int, min_buffer: int) -> list[int]:
    """B, ⌈B/2⌉, ⌈B/4⌉, … while not below ``min_buffer``: the sizes of the stages' buffers.

    Each stage compiles its own loop, and below a few dozen blocks a round costs little more
    than its fixed overhead, so halving stops there."""
    sizes = [n_blocks]
    while -(-sizes[-1] // 2) >= min_buffer:
        sizes.append(-(-sizes[-1] // 2))
    return sizes


def _pack(c: _Blocks, log_y: Array) -> Array:
    """The per-block scalars as one (B, 7) array: one gather and one scatter per stage instead
    of seven (each gather or scatter compiles to a loop of its own)."""
    dtype = c.theta.dtype
    return jnp.stack([c.theta, c.theta_min, c.theta_max, c.log_lik_prop,
                      c.accepted.astype(dtype), c.n_proposals.astype(dtype), log_y], axis=1)


def _unpack(packed: Array) -> tuple[_Blocks, Array]:
    theta, theta_min, theta_max, log_lik_prop, accepted, n_proposals, log_y = packed.T
    return _Blocks(theta, theta_min, theta_max, log_lik_prop, accepted > 0,
                   n_proposals.astype(jnp.int32)), log_y


def _compacted(c: _Blocks, n_shrinks: Array, e: _Ellipse, log_lik_on: LogLikOn, key_loop,
               max_shrinks: int, size: int, leave_at: int) -> tuple[_Blocks, Array]:
    """Gather the blocks still shrinking into a buffer of ``size``, run rounds on it alone,
    scatter the buffer back.  The buffer is the first ``size`` blocks in the order "still
    shrinking first" (a stable sort: one op, where ``jnp.nonzero`` compiles to a scan); its
    other slots hold accepted blocks, which no round changes."""
    n_blocks = c.accepted.shape[0]
    index = jnp.argsort(c.accepted, stable=True)[:size]
    packed = _pack(c, e.log_y)
    local, log_y = _unpack(packed[index])
    per_block_mean = e.mean.ndim == e.f_c.ndim and e.mean.shape[0] == n_blocks > 1
    e_local = _Ellipse(e.mean[index] if per_block_mean else e.mean, e.f_c[index],
                       e.nu_c[index], log_y, index)
    local, n_shrinks = _run(local, n_shrinks, e_local, log_lik_on(index), key_loop, n_blocks,
                            max_shrinks, leave_at)
    c, _ = _unpack(packed.at[index].set(_pack(local, log_y), unique_indices=True))
    return c, n_shrinks


def elliptical_slice(key: Array, f: Array, log_lik: Array, log_lik_fn: Callable[[Array], Array],
                     nu: Array, mean=0.0, max_shrinks: int = 200,
                     log_lik_on: Optional[LogLikOn] = None) -> tuple[Array, Array, ESSInfo]:
    """One elliptical slice transition for each of B independent blocks.

    Args:
        key: a ``jax.random`` key.
        f: ``Float[Array, "B ..."]`` current values, one block per leading index.
        log_lik: ``Float[Array, "B"]``, ``log_lik_fn(f)`` (passed in so it is not recomputed).
        log_lik_fn: ``f -> Float[Array, "B"]``, vectorised over blocks; block b's value may
            depend on ``f[b]`` only.  NaN counts as "not on the slice".
        nu: ``Float[Array, "B ..."]``, one draw from the prior N(mean, Σ) per block, made by the
            caller (Fig. 2, step 1).
        mean: the prior mean, broadcastable to ``f`` (scalar, per coordinate, or per block).
        max_shrinks: the most bracket shrinkages per block.  A block that has not accepted after
            ``max_shrinks`` shrinks (a likelihood that is NaN or -inf around ``f``, or a
            discontinuity exactly at ``f``) keeps its current value and log-likelihood — still a
            valid, if lazy, transition — and reports ``accepted=False``.
        log_lik_on: optional ``index -> (g -> Float[Array, "C"])``: for block indices
            ``index`` (``Int[Array, "C"]``), the log-likelihood of those blocks at their values
            ``g`` (``Float[Array, "C ..."]``), i.e. ``log_lik_fn`` restricted to them.  Given,
            the rounds run over compacted buffers (module docstring, down to
            :data:`MIN_BUFFER` blocks); the result is the same.

    Returns:
        ``(f_new, log_lik_new, info)`` with the shapes of ``(f, log_lik)`` and an
        :class:`ESSInfo`.

    Jit- and vmap-compatible (vmap over a leading chain axis runs each loop until the slowest
    chain's slowest block in it accepts).
    """
    f = jnp.asarray(f)
    dtype, B = f.dtype, f.shape[0]
    mean = jnp.asarray(mean, dtype)        # broadcast where used: a shared mean is not gathered
    key_u, key_theta, key_loop = jax.random.split(key, 3)
    # 1. the ellipse: ν ~ N(mean, Σ) was drawn by the caller
    # 2. the slice: log y = log L(f) + log u, u ~ U(0, 1)
    e = _Ellipse(mean, f - mean, jnp.asarray(nu, dtype) - mean,
                 log_lik + jnp.log(jax.random.uniform(key_u, (B,), dtype)), None)
    # 3. the first angle θ ~ U(0, 2π) and the bracket [θ - 2π, θ]
    theta = jax.random.uniform(key_theta, (B,), dtype, 0.0, 2.0 * jnp.pi)
    log_lik_prop = log_lik_fn(_on_ellipse(e, theta))
    c = _Blocks(theta, theta - 2.0 * jnp.pi, theta, log_lik_prop, log_lik_prop > e.log_y,
                jnp.ones((B,), jnp.int32))
    sizes = [B] if log_lik_on is None else _buffer_sizes(B, MIN_BUFFER)
    leave = sizes[1:] + [0]
    c, n = _run(c, jnp.zeros((), jnp.int32), e, log_lik_fn, key_loop, B, max_shrinks, leave[0])
    for size, leave_at in zip(sizes[1:], leave[1:]):
        c, n = _compacted(c, n, e, log_lik_on, key_loop, max_shrinks, size, leave_at)
    f_new = jnp.where(_per_block(c.accepted, f.ndim), _on_ellipse(e, c.theta), f)
    log_lik_new = jnp.where(c.accepted, c.log_lik_prop, log_lik)
    return f_new, log_lik_new, ESSInfo(c.n_proposals, c.accepted, c.theta)


def prior_draw(key: Array, shape: tuple, dtype, prior_chol: Optional[Array] = None,
               mean=0.0) -> Array:
    """``B`` draws from N(mean, L Lᵀ) of shape ``(B, d)``; ``L`` is shared ``(d, d)``,
    per block ``(B, d, d)``, or None (identity)."""
    z = jax.random.normal(key, shape, dtype)
    if prior_chol is not None:
        L = jnp.asarray(prior_chol, dtype)
        z = jnp.einsum("ij,bj->bi" if L.ndim == 2 else "bij,bj->bi", L, z)
    return jnp.asarray(mean, dtype) + z


def elliptical_slice_gaussian(key: Array, f: Array, log_lik: Array,
                              log_lik_fn: Callable[[Array], Array],
                              prior_chol: Optional[Array] = None, mean=0.0,
                              max_shrinks: int = 200) -> tuple[Array, Array, ESSInfo]:
    """:func:`elliptical_slice` with ν drawn from N(mean, L Lᵀ) for every block.

    Args:
        f: ``Float[Array, "B d"]``.
        prior_chol: ``Float[Array, "d d"]`` lower Cholesky factor shared by all blocks (e.g.
            of K_T for the columns of X under a GP prior over time), ``Float[Array, "B d d"]``
            one per block, or None for the identity (the N(0, I) rows of X).
        Other arguments as in :func:`elliptical_slice`.
    """
    f = jnp.asarray(f)
    key_nu, key_slice = jax.random.split(key)
    nu = prior_draw(key_nu, f.shape, f.dtype, prior_chol, mean)
    return elliptical_slice(key_slice, f, log_lik, log_lik_fn, nu, mean, max_shrinks)


def init(position: Array, log_lik_fn: Callable[[Array], Array]) -> ESSState:
    """The sampler state at ``position`` (``Float[Array, "B ..."]``)."""
    position = jnp.asarray(position)
    return ESSState(position, log_lik_fn(position))


def step(key: Array, state: ESSState, log_lik_fn: Callable[[Array], Array], nu: Array,
         mean=0.0, max_shrinks: int = 200, log_lik_on: Optional[LogLikOn] = None
         ) -> tuple[ESSState, ESSInfo]:
    """:func:`elliptical_slice` on an :class:`ESSState`."""
    f, log_lik, info = elliptical_slice(key, state.position, state.log_lik, log_lik_fn, nu,
                                        mean, max_shrinks, log_lik_on)
    return ESSState(f, log_lik), info

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
All blocks share one ``lax.while_loop``; a block that has accepted keeps its value while the
others shrink, and every round evaluates the vectorised ``log_lik_fn`` once on the whole batch.

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

__all__ = ["ESSInfo", "ESSState", "elliptical_slice", "elliptical_slice_gaussian", "init", "step"]


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


class _Loop(NamedTuple):
    n_shrinks: Array
    theta: Array
    theta_min: Array
    theta_max: Array
    f_prop: Array
    log_lik_prop: Array
    accepted: Array
    n_proposals: Array


def _per_block(x: Array, ndim: int) -> Array:
    """Reshape a (B,) vector to broadcast against a (B, ...) array of rank ``ndim``."""
    return x.reshape(x.shape + (1,) * (ndim - 1))


def elliptical_slice(key: Array, f: Array, log_lik: Array, log_lik_fn: Callable[[Array], Array],
                     nu: Array, mean=0.0, max_shrinks: int = 200
                     ) -> tuple[Array, Array, ESSInfo]:
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

    Returns:
        ``(f_new, log_lik_new, info)`` with the shapes of ``(f, log_lik)`` and an
        :class:`ESSInfo`.

    Jit- and vmap-compatible (vmap over a leading chain axis runs the loop until the slowest
    chain's slowest block accepts).
    """
    f = jnp.asarray(f)
    dtype, B, ndim = f.dtype, f.shape[0], f.ndim
    mean = jnp.broadcast_to(jnp.asarray(mean, dtype), f.shape)
    f_c, nu_c = f - mean, jnp.asarray(nu, dtype) - mean
    key_u, key_theta, key_loop = jax.random.split(key, 3)

    def on_ellipse(theta):
        # 4. f' = ν sin θ + f cos θ, about the prior mean
        t = _per_block(theta, ndim)
        return mean + f_c * jnp.cos(t) + nu_c * jnp.sin(t)

    # 1. the ellipse: ν ~ N(mean, Σ) was drawn by the caller
    # 2. the slice: log y = log L(f) + log u, u ~ U(0, 1)
    log_y = log_lik + jnp.log(jax.random.uniform(key_u, (B,), dtype))
    # 3. the first angle θ ~ U(0, 2π) and the bracket [θ - 2π, θ]
    theta = jax.random.uniform(key_theta, (B,), dtype, 0.0, 2.0 * jnp.pi)
    f_prop = on_ellipse(theta)
    log_lik_prop = log_lik_fn(f_prop)
    # 5. accept f' if log L(f') > log y
    start = _Loop(jnp.zeros((), jnp.int32), theta, theta - 2.0 * jnp.pi, theta, f_prop,
                  log_lik_prop, log_lik_prop > log_y, jnp.ones((B,), jnp.int32))

    def not_done(c: _Loop):
        return (c.n_shrinks < max_shrinks) & ~jnp.all(c.accepted)

    def shrink(c: _Loop) -> _Loop:
        active = ~c.accepted
        # 6. shrink the bracket towards θ = 0 (the current state, always on the slice)
        theta_min = jnp.where(active & (c.theta < 0), c.theta, c.theta_min)
        theta_max = jnp.where(active & (c.theta >= 0), c.theta, c.theta_max)
        # 7. redraw θ ~ U(θ_min, θ_max) and go back to 4 (accepted blocks keep their value)
        draw = jax.random.uniform(jax.random.fold_in(key_loop, c.n_shrinks), (B,), dtype,
                                  theta_min, theta_max)
        theta = jnp.where(active, draw, c.theta)
        f_prop = jnp.where(_per_block(active, ndim), on_ellipse(theta), c.f_prop)
        log_lik_new = log_lik_fn(f_prop)
        log_lik_prop = jnp.where(active, log_lik_new, c.log_lik_prop)
        accepted = c.accepted | (active & (log_lik_new > log_y))
        return _Loop(c.n_shrinks + 1, theta, theta_min, theta_max, f_prop, log_lik_prop,
                     accepted, c.n_proposals + active.astype(jnp.int32))

    out = lax.while_loop(not_done, shrink, start)
    f_new = jnp.where(_per_block(out.accepted, ndim), out.f_prop, f)
    log_lik_new = jnp.where(out.accepted, out.log_lik_prop, log_lik)
    return f_new, log_lik_new, ESSInfo(out.n_proposals, out.accepted, out.theta)


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
         mean=0.0, max_shrinks: int = 200) -> tuple[ESSState, ESSInfo]:
    """:func:`elliptical_slice` on an :class:`ESSState`."""
    f, log_lik, info = elliptical_slice(key, state.position, state.log_lik, log_lik_fn, nu,
                                        mean, max_shrinks)
    return ESSState(f, log_lik), info

"""Memory-bounded loops over the points of q(X).

psi2 sums N per-point M × M (or, for quadrature, S × M) blocks.  Building them all at once costs
O(N M²) memory, and reverse-mode autodiff would store them again for the backward pass.  Here the
points are cut into chunks of ``chunk`` rows, a ``lax.scan`` accumulates the sum, and the body is
wrapped in ``jax.checkpoint`` so that the backward pass recomputes each chunk's intermediates
instead of keeping all of them: peak memory is one chunk's intermediates, forward or backward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

#: float64 elements one chunk's largest intermediates may hold (2**22 ≈ 32 MiB).
CHUNK_BUDGET = 2**22


def choose_chunk(n_points: int, elements_per_point: int, requested: int | None = None) -> int:
    """Points per chunk: ``requested`` if given, else as many as fit :data:`CHUNK_BUDGET`."""
    if requested is not None:
        if int(requested) < 1:
            raise ValueError(f"chunk_size must be a positive integer; got {requested}")
        return max(1, min(int(requested), n_points))
    return int(max(1, min(n_points, CHUNK_BUDGET // max(1, int(elements_per_point)))))


def map_reduce_points(body: Callable, per_point: Sequence[jax.Array],
                      fills: Sequence[float | int], chunk: int) -> tuple[Any, Any]:
    """Apply ``body`` to chunks of points; sum its first output, stack its second.

    Args:
        body: ``body(chunk_arrays) -> (increment, per_point_out)``; ``increment`` is a pytree
            summed over chunks, ``per_point_out`` a pytree of arrays with leading axis C.
        per_point: arrays whose leading axis indexes the N points.
        fills: the value each array is padded with up to a multiple of ``chunk``.  Padding rows
            must give a finite body and contribute nothing to ``increment`` (zero weight).
        chunk: points per chunk.

    Returns:
        ``(sum of increments, per_point_out with leading axis N)``.
    """
    n = per_point[0].shape[0]
    if chunk >= n:
        return body(tuple(per_point))
    n_chunks = -(-n // chunk)
    pad = n_chunks * chunk - n

    def split(a, fill):
        a = jnp.concatenate([a, jnp.full((pad,) + a.shape[1:], fill, a.dtype)]) if pad else a
        return a.reshape((n_chunks, chunk) + a.shape[1:])

    xs = tuple(split(a, f) for a, f in zip(per_point, fills))
    # recompute each chunk in the backward pass rather than storing N/C chunks of residuals
    checkpointed = jax.checkpoint(body)
    inc_shape, _ = jax.eval_shape(body, tuple(x[0] for x in xs))
    acc0 = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), inc_shape)

    def step(acc, x):
        inc, out = checkpointed(x)
        return jax.tree_util.tree_map(jnp.add, acc, inc), out

    acc, outs = jax.lax.scan(step, acc0, xs)
    outs = jax.tree_util.tree_map(lambda o: o.reshape((n_chunks * chunk,) + o.shape[2:])[:n], outs)
    return acc, outs

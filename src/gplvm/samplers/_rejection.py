"""Rejection sampling over a flat batch with static shapes: the loop the samplers here share.

A rejection sampler repeats an *attempt* (propose, then accept or reject) until it accepts.
Vectorised naively (``vmap`` of a ``while_loop``) every round costs the whole batch and the
number of rounds is that of the unluckiest element: with acceptance 0.75 and 10^6 elements,
about 50 full passes for the work of 1.3.  :func:`until_accepted` instead keeps a list of the
pending elements and works through it in chunks of static size C:

1. The list starts as all n elements.
2. A pass attempts the list chunk by chunk; each chunk writes its still-rejected elements,
   compacted, back into the list behind the chunks still to be read.
3. At the end of a pass the rejected ones form the list of the next pass, until it is empty.

So the work is the expected number of attempts plus at most one partly filled chunk per pass,
and the attempt appears once in the compiled program, in a single ``while_loop`` (compile time
matters: on CPU XLA compiles every loop body and every copy of the attempt separately).

Randomness: chunk number ``r`` (counted over all passes) uses ``fold_in(key, r)``; each slot
of a chunk feeds at most one element and which element it feeds depends only on earlier
chunks, so every attempt of every element sees fresh independent uniforms and elements remain
independent.  The same key gives the same draws.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

#: ``attempt(key, params) -> (accepted, value)``: one proposal per element of the 1-D arrays
#: in the tuple ``params``; it must return ``accepted=True`` for elements it can never accept
#: (invalid parameters, value NaN), or the loop would not end.
Attempt = Callable[[jax.Array, tuple], tuple[jax.Array, jax.Array]]


def _compact(idx: jax.Array, keep: jax.Array, fill: int) -> jax.Array:
    """The entries of ``idx`` where ``keep`` holds, moved to the front, the rest ``fill``.

    A prefix sum gives each kept entry its slot; a scatter puts it there (on CPU this is 2-3
    times faster than ``jnp.nonzero(size=...)``).
    """
    slot = jnp.cumsum(keep.astype(jnp.int32)) - 1
    slot = jnp.where(keep, slot, idx.shape[0])
    return jnp.full(idx.shape, fill, idx.dtype).at[slot].set(idx, mode="drop")


def chunk_size(n: int) -> int:
    """About n/16, within [256, 65536]: small enough that the partly filled chunk of each pass
    wastes little and that a chunk's temporaries stay in cache, large enough that the loop
    overhead per chunk (tens of microseconds on CPU) is small."""
    return min(n, max(256, min(65536, -(-n // 16))))


def until_accepted(key: jax.Array, attempt: Attempt, params: tuple,
                   n_active: jax.Array | int | None = None) -> jax.Array:
    """Run ``attempt`` until every element has accepted; return the accepted values.

    Args:
        key: a ``jax.random`` key.
        attempt: the proposal-and-test step (see :data:`Attempt`).
        params: tuple of arrays of shape (n,), the per-element parameters.
        n_active: only the first ``n_active`` elements are drawn (may be traced; default n);
            the work is proportional to it, not to n.

    Returns:
        Array of shape (n,), one accepted value per element (0 past ``n_active``).
    """
    n = params[0].shape[0]
    size = chunk_size(n)
    offsets = jnp.arange(size, dtype=jnp.int32)

    def chunk(state):
        r, first, read, end, write, buf = state
        # The first pass reads 0..n-1 directly; later ones the list.  Entries past the end of
        # the pass are stale: they become the padding index n, which reads the last element
        # (mode="clip") and whose results are dropped.
        listed = lax.dynamic_slice(buf, (n + read,), (size,)).astype(jnp.int32)
        idx = jnp.where(read + offsets < end, jnp.where(first, read + offsets, listed), n)
        acc, val = attempt(jax.random.fold_in(key, r),
                           tuple(p.at[idx].get(mode="clip") for p in params))
        again = ~acc & (idx < n)
        # Step 2, as one scatter into one buffer (two in-place updates of two loop-carried
        # buffers make XLA copy them on every iteration): the values go to buf[idx], the
        # rejected indices, compacted, to the list at the write position, which never passes
        # the read position, so no unread entry is overwritten.
        pos = jnp.concatenate([jnp.where(idx < n, idx, 2 * n + size), n + write + offsets])
        new = jnp.concatenate([val, _compact(idx, again, n).astype(buf.dtype)])
        buf = buf.at[pos].set(new, mode="drop")
        read, write = read + size, write + jnp.sum(again, dtype=jnp.int32)
        # Step 3: at the end of a pass, the rejected ones form the next pass's list.
        done = read >= end
        return (r + 1, first & ~done, jnp.where(done, 0, read), jnp.where(done, write, end),
                jnp.where(done, 0, write), buf)

    # Layout of buf: [values (n) | list of pending indices (n + one chunk of room)].  Indices
    # are stored as float64, exact below 2^53.
    zero = jnp.asarray(0, jnp.int32)
    end = jnp.asarray(n if n_active is None else n_active, jnp.int32)
    state = (jnp.asarray(0, jnp.uint32), jnp.asarray(True), zero, end, zero,
             jnp.zeros(2 * n + size, dtype=jnp.float64))
    return lax.while_loop(lambda s: s[3] > 0, chunk, state)[5][:n]


def open_uniforms(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Float64 uniforms strictly inside (0, 1), so that logs and ``ndtri`` stay finite.

    ``jax.random.uniform`` returns multiples of 2^-52 on [0, 1); adding 2^-53 moves them to the
    midpoints of that grid, symmetric about 1/2.
    """
    return jax.random.uniform(key, shape, dtype=jnp.float64) + 2.0 ** -53

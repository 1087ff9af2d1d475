"""Rejection sampling over a flat batch with static shapes: the loop the samplers here share.

A rejection sampler repeats an *attempt* (propose, then accept or reject) until it accepts.
Vectorised naively (``vmap`` of a ``while_loop``) every round costs the whole batch and the
number of rounds is that of the unluckiest element: with acceptance 0.75 and 10^6 elements,
about 50 full passes for the work of 1.3.  :func:`until_accepted` instead keeps a list of the
pending elements and works through it in chunks of static size C:

1. The first attempt of every element runs on the whole batch at once, without the list (no
   gather, no scatter); the rejected ones, compacted, form the list.
2. A pass attempts the list chunk by chunk; each chunk writes its still-rejected elements,
   compacted, back into the list behind the chunks still to be read.
3. At the end of a pass the rejected ones form the list of the next pass, until it is empty.

So the work is the expected number of attempts plus at most one partly filled chunk per pass.
Step 1 matters because the list's bookkeeping (gather the parameters, scatter the values and
the compacted indices) cost about 20 ns an element on CPU against 45 ns for a gamma attempt,
and most elements accept at once (the gamma sampler's acceptance is above 0.95).  The attempt
appears twice in the compiled program, once in step 1 and once in the single ``while_loop``
(compile time matters: on CPU XLA compiles every loop body and every copy of the attempt
separately, so nothing else is duplicated).

Randomness: step 1 uses ``fold_in(key, 0)``, one slot per element; chunk number ``r`` of the
loop (counted over all passes from 1) uses ``fold_in(key, r)``; each slot of a chunk feeds at
most one element and which element it feeds depends only on earlier chunks, so every attempt
of every element sees fresh independent uniforms and elements remain independent.  The same
key gives the same draws.
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


def _slots(keep: jax.Array) -> jax.Array:
    """A numbering 0, 1, ... of the entries where ``keep`` holds, in column-major order of a
    (rows, n/rows) view (any fixed order will do for a list of pending elements).

    The prefix sum runs down the rows, as a ``scan`` adding whole rows, which XLA vectorises
    (2 ns an entry on CPU against 7 for ``cumsum`` along the entries), then along the column
    totals.
    """
    n = keep.shape[0]
    rows = max(1, min(128, n // 32))
    cols = -(-n // rows)
    view = jnp.pad(keep.astype(jnp.int32), (0, rows * cols - n)).reshape(rows, cols)
    down = lax.scan(lambda total, row: (total + row, total + row), view[0] * 0, view)[1]
    before = jnp.cumsum(down[-1]) - down[-1]
    return (down - view + before).ravel()[:n]


def _compact(idx: jax.Array, keep: jax.Array, fill: int) -> jax.Array:
    """The entries of ``idx`` where ``keep`` holds, moved to the front (in the order of
    :func:`_slots`), the rest ``fill``.  A scatter puts each kept entry in its slot (on CPU this
    is 2-3 times faster than ``jnp.nonzero(size=...)``)."""
    slot = jnp.where(keep, _slots(keep), idx.shape[0])
    return jnp.full(idx.shape, fill, idx.dtype).at[slot].set(idx, mode="drop")


def chunk_size(n: int) -> int:
    """About n/64, within [256, 16384]: after the first attempt of all n elements (step 1)
    the list holds the rejected ones only (5% of n for the gamma sampler, up to 28% for
    Devroye's), so chunks must be small for the partly filled chunk of each pass to waste
    little, yet large enough that the loop overhead per chunk (tens of microseconds on CPU)
    is small."""
    return min(n, max(256, min(16384, -(-n // 64))))


def until_accepted(key: jax.Array, attempt: Attempt, params: tuple,
                   n_active: jax.Array | int | None = None) -> jax.Array:
    """Run ``attempt`` until every element has accepted; return the accepted values.

    Args:
        key: a ``jax.random`` key.
        attempt: the proposal-and-test step (see :data:`Attempt`).
        params: tuple of arrays of shape (n,), the per-element parameters.
        n_active: only the first ``n_active`` elements are drawn (may be traced; default n);
            the first attempt (step 1) costs n, the later ones are proportional to n_active.

    Returns:
        Array of shape (n,), one accepted value per element (0 past ``n_active``).
    """
    n = params[0].shape[0]
    size = chunk_size(n)
    offsets = jnp.arange(size, dtype=jnp.int32)
    everyone = jnp.arange(n, dtype=jnp.int32)
    end = jnp.asarray(n if n_active is None else n_active, jnp.int32)

    # Step 1: every element's first attempt, on the whole batch.
    acc, val = attempt(jax.random.fold_in(key, 0), params)
    active = everyone < end
    again = ~acc & active
    pending = _compact(everyone, again, n)

    def chunk(state):
        r, read, end, write, buf = state
        # Entries of the list past the end of the pass are stale: they become the padding
        # index n, which reads the last element (mode="clip") and whose results are dropped.
        listed = lax.dynamic_slice(buf, (n + read,), (size,)).astype(jnp.int32)
        idx = jnp.where(read + offsets < end, listed, n)
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
        return (r + 1, jnp.where(done, 0, read), jnp.where(done, write, end),
                jnp.where(done, 0, write), buf)

    # Layout of buf: [values (n) | list of pending indices (n + one chunk of room)].  Indices
    # are stored as float64, exact below 2^53.
    zero = jnp.asarray(0, jnp.int32)
    buf = jnp.concatenate([jnp.where(active, val, 0.0).astype(jnp.float64),
                           pending.astype(jnp.float64), jnp.zeros(size, jnp.float64)])
    state = (jnp.asarray(1, jnp.uint32), zero, jnp.sum(again, dtype=jnp.int32), zero, buf)
    return lax.while_loop(lambda s: s[2] > 0, chunk, state)[4][:n]


def open_uniforms(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Float64 uniforms strictly inside (0, 1), so that logs and ``ndtri`` stay finite.

    ``jax.random.uniform`` returns multiples of 2^-52 on [0, 1); adding 2^-53 moves them to the
    midpoints of that grid, symmetric about 1/2.
    """
    return jax.random.uniform(key, shape, dtype=jnp.float64) + 2.0 ** -53

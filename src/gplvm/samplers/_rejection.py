"""Rejection sampling over a flat batch with static shapes: the loop the samplers here share.

A rejection sampler repeats an *attempt* (propose, then accept or reject) until it accepts.
Vectorised naively (``vmap`` of a ``while_loop``) every round costs the whole batch and the
number of rounds is that of the unluckiest element: with acceptance 0.75 and 10^6 elements,
about 50 full passes for the work of 1.3.  :func:`until_accepted` instead keeps a list of the
pending elements and works through it in chunks of static size C:

1. The list starts as all n elements.
2. A pass attempts the list chunk by chunk; each chunk writes its still-rejected elements,
   compacted, to the list of the next pass.
3. At the end of a pass the rejected ones form the list of the next pass, until it is empty.

So the work is the expected number of attempts plus at most one partly filled chunk per pass,
and the attempt appears once in the compiled program, in a single ``while_loop`` (compile time
matters: on CPU XLA compiles every loop body and every copy of the attempt separately).  The
first pass, which holds most of the work (acceptance is above 0.95 for the gamma sampler, 0.72
for Devroye's), reads and writes whole chunks in place (``dynamic_update_slice``) instead of
scattering single elements, and the lists are written the same way, two of them taking turns
(the one being read is never written): scatters cost about 5 ns an element on CPU against 35
to 45 for an attempt.

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
    """About n/32, within [256, 16384]: small enough that the partly filled chunk of each pass
    wastes little (a gamma draw takes about four passes), large enough that the loop overhead
    per chunk (microseconds on CPU) is small; n/16 to n/64 measured within 10% of each other."""
    return min(n, max(256, min(16384, -(-n // 32))))


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
    region = n + size           # layout of buf: [values | list 0 | list 1], each of this length

    def chunk(state):
        r, first, parity, read, end, write, buf = state
        # The first pass reads 0..n-1 directly; later ones the list of this pass.  Entries
        # past the end of the pass are stale: they become the padding index n, which reads the
        # last element (mode="clip") and whose results are dropped.
        listed = lax.dynamic_slice(buf, ((1 + parity) * region + read,), (size,))
        idx = jnp.where(read + offsets < end, jnp.where(first, read + offsets, listed.astype(
            jnp.int32)), n)
        acc, val = attempt(jax.random.fold_in(key, r),
                           tuple(p.at[idx].get(mode="clip") for p in params))
        again = ~acc & (idx < n)
        # Step 2.  The values go to buf[idx]: in the first pass a contiguous block (padding
        # writes 0, the value of elements past n_active), later by a scatter.
        buf = lax.cond(first,
                       lambda: lax.dynamic_update_slice(buf, jnp.where(idx < n, val, 0.0),
                                                        (read,)),
                       lambda: buf.at[jnp.where(idx < n, idx, 3 * region)].set(val,
                                                                                 mode="drop"))
        # The rejected indices, compacted, go to the other list at the write position; what
        # follows them there is overwritten by the next chunk or never read.
        buf = lax.dynamic_update_slice(buf, _compact(idx, again, n).astype(buf.dtype),
                                       ((2 - parity) * region + write,))
        read, write = read + size, write + jnp.sum(again, dtype=jnp.int32)
        # Step 3: at the end of a pass, the rejected ones form the next pass's list.
        done = read >= end
        return (r + 1, first & ~done, jnp.where(done, 1 - parity, parity),
                jnp.where(done, 0, read), jnp.where(done, write, end), jnp.where(done, 0, write),
                buf)

    # Indices are stored as float64, exact below 2^53.
    zero = jnp.asarray(0, jnp.int32)
    end = jnp.asarray(n if n_active is None else n_active, jnp.int32)
    state = (jnp.asarray(0, jnp.uint32), jnp.asarray(True), zero, zero, end, zero,
             jnp.zeros(3 * region, dtype=jnp.float64))
    return lax.while_loop(lambda s: s[4] > 0, chunk, state)[6][:n]


def open_uniforms(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Float64 uniforms strictly inside (0, 1), so that logs and ``ndtri`` stay finite.

    ``jax.random.uniform`` returns multiples of 2^-52 on [0, 1); adding 2^-53 moves them to the
    midpoints of that grid, symmetric about 1/2.
    """
    return jax.random.uniform(key, shape, dtype=jnp.float64) + 2.0 ** -53

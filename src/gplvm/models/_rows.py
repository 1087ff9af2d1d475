"""Row-by-row evaluation that makes each row's output independent of the other rows of a call.

API.md's contract: a row's prediction depends only on that row and the fitted model.  A jitted
function of the whole (N*, D) query is not enough for that, bit for bit: XLA picks its blocking
of matrix products and triangular solves by shape, so the same row summed in another order gives
another last bit when N* changes.  :func:`map_rows` therefore evaluates one compiled function on
blocks of a fixed number of rows (the last block padded with copies of its last row), so that
every row goes through the same executable, whatever the size of the call.  It also compiles
once per feature count instead of once per query size.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

#: Rows per block: large enough that the Python loop over blocks costs little, small enough that
#: a one-row call does little wasted work.
ROWS_PER_BLOCK = 128


def map_rows(fn: Callable, rows, *args, block: int = ROWS_PER_BLOCK):
    """``fn(rows_block, *args)`` on blocks of ``block`` rows, concatenated along rows.

    Args:
        fn: a jitted function whose outputs (one array or a tuple of arrays) have the rows of
            its first argument along their first axis, each row computed from its own input
            row only.
        rows: the query X, (N*, D) with N* ≥ 1, or a tuple of arrays with N* rows each (X and
            the targets y, say); ``fn`` then gets a tuple of blocks.
        *args: the other (fixed) arguments of ``fn``.
        block: rows per block.

    Returns:
        What ``fn`` returns, as NumPy arrays with N* rows.
    """
    arrays = rows if isinstance(rows, tuple) else (rows,)
    n = arrays[0].shape[0]
    padded = [np.pad(a, ((0, -n % block),) + ((0, 0),) * (a.ndim - 1), mode="edge")
              for a in arrays]
    outputs = []
    for start in range(0, padded[0].shape[0], block):
        blocks = tuple(jnp.asarray(a[start:start + block]) for a in padded)
        outputs.append(fn(blocks if isinstance(rows, tuple) else blocks[0], *args))
    return jax.tree_util.tree_map(lambda *parts: np.concatenate(parts)[:n], *outputs)

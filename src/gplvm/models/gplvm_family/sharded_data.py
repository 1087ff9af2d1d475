"""The collapsed bound's data split by rows over a mesh (issue 18): :class:`ShardedData`.

:func:`shard_data` reads Y a chunk of rows at a time to check it and group its columns by
missingness pattern (:func:`scan_rows`, numbered as
:func:`gplvm.objectives.collapsed.group_columns` numbers them), then builds each device's rows
on their own (:func:`gplvm.inference.sharding.shard_rows`), so no (N, D) data array is ever
whole on one device.  Rows are padded to a multiple of the device count with y = 0, weight 0
and mask 0.  :mod:`.sharded_bound` computes the bound's sums over these rows and
:class:`~.sharded_route.ShardedRoute` carries them in a fit's
:class:`~.bound.Problem`.
"""

from __future__ import annotations

from typing import Optional

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from gplvm._pytree import pytree_dataclass, static_field
from gplvm._validation import as_2d_float, check_magnitude, check_observed_columns
from gplvm.inference import sharding
from gplvm.objectives import collapsed


@pytree_dataclass
class ShardedData:
    """The data of the collapsed bound, split by rows over a mesh (:func:`shard_data`).

    Attributes:
        Y0: (N_pad, D) data with missing entries (and padded rows) set to 0.
        weights_T: (N_pad, G) 1.0 where row n is observed in column group g, 0 on padded rows.
        mask: (N_pad,) 1.0 on real rows, 0 on padded rows.
        column_group: (D,) the group of each column (replicated).
        n_obs: (G,) observed rows per group (replicated).
        mesh: the mesh the rows are split over.
        n_rows: N, the real rows.
    """

    Y0: jax.Array
    weights_T: jax.Array
    mask: jax.Array
    column_group: jax.Array
    n_obs: jax.Array
    mesh: Mesh = static_field()
    n_rows: int = static_field()

    @property
    def groups(self) -> collapsed.MissingGroups:
        """The column groups the M × M algebra reads (their (G, N) weights are sharded here)."""
        return collapsed.MissingGroups(None, self.column_group, self.n_obs)


def shard_data(Y, mesh: Optional[Mesh] = None) -> ShardedData:
    """Split ``Y`` (N, D; NaN = missing; an array or a memmap) by rows over ``mesh``.

    One pass over row chunks (:func:`scan_rows`) checks the entries and finds the column groups
    (missingness patterns, numbered as :func:`gplvm.objectives.collapsed.group_columns` numbers
    them) without holding more than a chunk of ``Y``; each device's block of rows is then read
    and built on its own (:func:`~gplvm.inference.sharding.shard_rows`), so no device holds
    more than its rows.

    Raises:
        ValueError: when ``Y`` is not 2-D, has no rows or columns, has an infinite entry or one
            whose square overflows, or a column with no observed entry.
    """
    if getattr(Y, "ndim", None) != 2 or Y.shape[0] == 0 or Y.shape[1] == 0:
        raise ValueError(f"Y must be a 2-D (N, D) array with N, D ≥ 1; got shape "
                         f"{getattr(Y, 'shape', None)} (use Y.reshape(-1, 1) for one column)")
    column_group, n_obs = scan_rows(Y)
    mesh = sharding.make_mesh() if mesh is None else mesh
    replicated = NamedSharding(mesh, PartitionSpec())
    return ShardedData(Y0=sharding.shard_rows(_RowsWithoutNaN(Y), mesh),
                       weights_T=sharding.shard_rows(_RowWeights(Y, column_group), mesh),
                       mask=sharding.shard_rows(np.ones(Y.shape[0]), mesh),
                       column_group=jax.device_put(column_group, replicated),
                       n_obs=jax.device_put(n_obs, replicated),
                       mesh=mesh, n_rows=int(Y.shape[0]))


def scan_rows(Y, chunk_rows: Optional[int] = None):
    """Check ``Y`` and group its columns by missingness pattern, one chunk of rows at a time.

    The groups are refined chunk by chunk: two columns share a group when they shared one
    over the earlier rows and have the same pattern in this chunk.  Ranking the pairs (earlier
    group, this chunk's pattern) lexicographically keeps the groups in the lexicographic order
    of their whole patterns, the order of ``np.unique`` in
    :func:`gplvm.objectives.collapsed.group_columns`, so the numbering is the same.

    Returns:
        column_group (D,) ints and n_obs (G,) observed rows per group (NumPy).

    Raises:
        ValueError: on an infinite or overflowing entry (naming its row and column) or a
            column with no observed entry (:mod:`gplvm._validation`).
    """
    N, D = Y.shape
    chunk_rows = chunk_rows or max(1, 2**22 // D)
    column_group, counts = np.zeros(D, dtype=np.int64), np.zeros(D, dtype=np.int64)
    for start in range(0, N, chunk_rows):
        block = _checked_block(Y, start, min(start + chunk_rows, N))
        observed = ~np.isnan(block)
        counts += observed.sum(axis=0)
        keys = np.concatenate([column_group[:, None], observed.T.astype(np.int64)], axis=1)
        column_group = np.unique(keys, axis=0, return_inverse=True)[1].ravel()
    if not counts.all():
        check_observed_columns(np.where(counts > 0, 0.0, np.nan)[None, :])
    return column_group, counts[_first_columns(column_group)].astype(float)


def _first_columns(column_group: np.ndarray) -> np.ndarray:
    """(G,) the first column of each group (all of a group's columns share its pattern)."""
    return np.array([np.flatnonzero(column_group == g)[0]
                     for g in range(column_group.max() + 1)])


def _checked_block(Y, start: int, stop: int) -> np.ndarray:
    """Rows start..stop of Y as floats, checked by :func:`gplvm._validation.as_2d_float` and
    :func:`~gplvm._validation.check_magnitude`; the message gives rows of the whole of Y."""
    try:
        block = as_2d_float(Y[start:stop], "Y", allow_nan=True)
        check_magnitude(block, "Y", "rescale Y (e.g. divide it by its largest entry)")
    except ValueError as err:
        if start == 0:
            raise
        raise ValueError(f"{err} (in rows {start} to {stop - 1} of Y; the row numbers above "
                         f"count from row {start})") from None
    return block


class _RowsWithoutNaN:
    """Row slices of Y with NaN set to 0, read lazily (a memmap stays on disk)."""

    def __init__(self, Y):
        self.Y, self.shape = Y, Y.shape

    def __getitem__(self, rows):
        return np.nan_to_num(np.asarray(self.Y[rows], dtype=float), nan=0.0)


class _RowWeights:
    """Row slices of the (N, G) group weights: w_ng = 1 when row n is observed in group g."""

    def __init__(self, Y, column_group: np.ndarray):
        self.Y = Y
        self.first = _first_columns(column_group)
        self.shape = (Y.shape[0], len(self.first))

    def __getitem__(self, rows):
        return (~np.isnan(np.asarray(self.Y[rows], dtype=float)[:, self.first])).astype(float)

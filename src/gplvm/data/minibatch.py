"""Rows of a data matrix read a minibatch at a time (stochastic variational inference).

:class:`RowSource` wraps an in-memory array or a NumPy memmap (``np.load(path,
mmap_mode='r')``); :meth:`RowSource.rows` reads only the rows asked for, so a fit that visits
the data by minibatches holds B rows at a time, never all N.  :func:`scan_columns` validates the
data and computes the column moments in one pass over fixed-size chunks, and
:func:`epoch_batches` draws the minibatches of an epoch (Hensman, Fusi & Lawrence 2013, §3:
uniformly random subsets of rows, so the scaled minibatch bound is unbiased).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from gplvm._validation import as_2d_float, check_magnitude

#: rows read at once by :func:`scan_columns` (bounds the memory of a pass over a memmap)
CHUNK_ROWS = 8192


class RowSource:
    """N × D data read by rows; a memmap is never read whole.

    Args:
        Y: a 2-D array or ``np.memmap`` (any real dtype; rows are returned as float64).
    """

    def __init__(self, Y):
        self.data = Y
        self.is_memmap = isinstance(Y, np.memmap)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.data.shape)

    def rows(self, index) -> np.ndarray:
        """The rows ``index`` (sorted for sequential reads of a memmap) as float64."""
        return np.asarray(self.data[np.asarray(index)], dtype=float)

    def chunks(self, size: int = CHUNK_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, rows) of consecutive chunks of ``size`` rows."""
        for start in range(0, self.shape[0], size):
            yield start, np.asarray(self.data[start:start + size], dtype=float)


class ColumnScan(NamedTuple):
    """What one pass over the data gives: column means and standard deviations of the observed
    entries, and whether any entry is missing."""

    mean: np.ndarray
    std: np.ndarray
    has_missing: bool


def scan_columns(source: RowSource, name: str = "Y") -> ColumnScan:
    """Validate ``source`` chunk by chunk and return its column moments (:class:`ColumnScan`).

    Each chunk gets the checks of an in-memory fit (:func:`gplvm._validation.as_2d_float`:
    no infinite entries, no row without an observed entry; magnitudes whose squares overflow),
    with the row numbers of the whole data; then columns with no observed entry are refused.
    The moments are accumulated in float64 around a first-chunk shift (Chan et al.'s update
    would add nothing at these precisions for data of sane magnitude).
    """
    N, D = source.shape
    count, total, squares = np.zeros(D), np.zeros(D), np.zeros(D)
    shift, has_missing = None, False
    for start, Yc in source.chunks():
        try:
            as_2d_float(Yc, name, allow_nan=True)
            check_magnitude(Yc, name, "rescale Y (e.g. divide it by its largest entry) or "
                                      "drop the entries")
        except ValueError as err:
            raise ValueError(f"{err} (rows counted from {start}, the chunk's first row)") \
                from err
        observed = ~np.isnan(Yc)
        has_missing = has_missing or not observed.all()
        if shift is None:
            shift = np.nanmean(np.where(observed.any(0), Yc, 0.0), axis=0)
        centred = np.where(observed, Yc - shift, 0.0)
        count += observed.sum(0)
        total += centred.sum(0)
        squares += (centred**2).sum(0)
    empty = count == 0
    if empty.any():
        raise ValueError(f"{name} has {int(empty.sum())} columns with no observed entry "
                         f"(columns {np.flatnonzero(empty)[:5].tolist()}); drop them before "
                         f"fitting")
    mean_c = total / count
    var = np.maximum(squares / count - mean_c**2, 0.0)
    return ColumnScan(shift + mean_c, np.sqrt(var), bool(has_missing))


def epoch_batches(rng: np.random.Generator, n_rows: int, batch_size: int) -> np.ndarray:
    """(N // B, B) row indices of one epoch: a random permutation cut into batches of B, each
    sorted (for sequential reads).  Each batch is a uniformly random B-subset of the rows; the
    N mod B rows left over in this epoch are in the next epoch's permutation."""
    order = rng.permutation(n_rows)[: (n_rows // batch_size) * batch_size]
    return np.sort(order.reshape(-1, batch_size), axis=1)

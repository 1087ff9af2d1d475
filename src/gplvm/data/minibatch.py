"""Rows of a data matrix read a minibatch at a time (stochastic variational inference).

:class:`RowSource` wraps an in-memory array, a NumPy memmap (``np.load(path, mmap_mode='r')``),
an h5py dataset, or the ``X`` of an AnnData opened with ``anndata.read_h5ad(path, backed='r')``
(dense, or CSR sparse densified a batch at a time); :meth:`RowSource.rows` reads only the rows
asked for, so a fit that visits the data by minibatches holds B rows at a time, never all N.
:func:`out_of_core` recognises the sources that must not be loaded whole.  :func:`scan_columns`
validates the data and computes the column moments in one pass over fixed-size chunks, and
:func:`epoch_batches` draws the minibatches of an epoch (Hensman, Fusi & Lawrence 2013, §3:
uniformly random subsets of rows, so the scaled minibatch bound is unbiased).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from gplvm._validation import as_2d_float, check_magnitude

#: rows read at once by :func:`scan_columns` (bounds the memory of a pass over a memmap)
CHUNK_ROWS = 8192

INSTALL = 'pip install "gplvm[anndata]"'


def _backed_types() -> tuple:
    """The on-disk matrix types of h5py and anndata, for those of the two already imported
    (an object of theirs cannot exist otherwise, so neither is imported here)."""
    types = []
    if "h5py" in sys.modules:
        types.append(sys.modules["h5py"].Dataset)
    if "anndata" in sys.modules:
        types += list(_anndata_sparse_types())
    return tuple(types)


def _anndata_sparse_types() -> tuple:
    """anndata's backed (CSR, CSC) dataset classes: ``anndata.abc`` from 0.11,
    ``anndata.experimental`` in 0.10."""
    try:
        from anndata.abc import CSCDataset, CSRDataset
    except ImportError:
        from anndata.experimental import CSCDataset, CSRDataset
    return CSRDataset, CSCDataset


def _is_anndata(Y) -> bool:
    return "anndata" in sys.modules and isinstance(Y, sys.modules["anndata"].AnnData)


def out_of_core(Y) -> RowSource | None:
    """A :class:`RowSource` for data that stay on disk (a memmap, an h5py dataset, a backed
    AnnData or its ``X``), None for anything else (an array to validate in memory).

    Raises:
        ValueError: an AnnData that is not backed (give its ``X`` instead), or a backed CSC
            matrix (stored by columns: every batch of rows would read the whole file).
    """
    if _is_anndata(Y):
        if not Y.isbacked:
            raise ValueError("Y is an in-memory AnnData; give its matrix (adata.X), or open the "
                             "file with anndata.read_h5ad(path, backed='r') to read it by rows")
        Y = Y.X
    if isinstance(Y, np.memmap) or isinstance(Y, _backed_types()):
        return RowSource(Y)
    return None


class RowSource:
    """N × D data read by rows; a source on disk is never read whole.

    Args:
        Y: a 2-D array, ``np.memmap``, h5py ``Dataset`` or anndata backed CSR matrix (any real
            dtype; rows are returned as dense float64).
    """

    def __init__(self, Y):
        if "anndata" in sys.modules and isinstance(Y, _anndata_sparse_types()[1]):
            raise ValueError("Y is a backed CSC (column-compressed) matrix: reading rows from it "
                             "reads whole columns; write X as CSR (adata.X = adata.X.tocsr() "
                             "before write_h5ad) or load it in memory")
        if len(getattr(Y, "shape", ())) != 2:
            raise ValueError(f"Y must be 2-D (rows x columns); got shape "
                             f"{getattr(Y, 'shape', None)}")
        if np.dtype(getattr(Y, "dtype", float)).kind not in "biuf":
            raise ValueError(f"Y holds {Y.dtype} values; give numbers (NaN marks a missing "
                             f"entry)")
        self.data = Y
        self.is_memmap = isinstance(Y, np.memmap)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(int(n) for n in self.data.shape)

    def _dense(self, block) -> np.ndarray:
        if hasattr(block, "toarray"):     # a CSR batch: absent entries are zeros, not missing
            block = block.toarray()
        return np.asarray(block, dtype=float)

    def rows(self, index) -> np.ndarray:
        """The rows ``index`` (any order, repeats allowed) as float64, read in increasing
        order without repeats (as h5py requires; sequential reads of a memmap)."""
        index = np.asarray(index)
        unique, inverse = np.unique(index, return_inverse=True)
        return self._dense(self.data[unique])[inverse.reshape(index.shape)]

    def chunks(self, size: int = CHUNK_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, rows) of consecutive chunks of ``size`` rows."""
        for start in range(0, self.shape[0], size):
            yield start, self._dense(self.data[start:start + size])


class ColumnScan(NamedTuple):
    """What one pass over the data gives: column means and standard deviations of the observed
    entries, and whether any entry is missing."""

    mean: np.ndarray
    std: np.ndarray
    has_missing: bool


def scan_columns(source: RowSource, name: str = "Y", chunk_rows: int = CHUNK_ROWS) -> ColumnScan:
    """Validate ``source`` chunk by chunk and return its column moments (:class:`ColumnScan`).

    Each chunk gets the checks of an in-memory fit (:func:`gplvm._validation.as_2d_float`:
    no infinite entries, no row without an observed entry; magnitudes whose squares overflow),
    with the row numbers of the whole data; then columns with no observed entry are refused.
    The moments are accumulated in float64 around a first-chunk shift (Chan et al.'s update
    would add nothing at these precisions for data of sane magnitude).  ``chunk_rows`` rows are
    read at a time.
    """
    N, D = source.shape
    count, total, squares = np.zeros(D), np.zeros(D), np.zeros(D)
    shift, has_missing = None, False
    for start, Yc in source.chunks(chunk_rows):
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

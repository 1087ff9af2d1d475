"""What the data readers return (:class:`Table`) and raise (:class:`DataFileError`).

Shared by :mod:`gplvm.io.readers` and :mod:`gplvm.io.h5ad`, which both import it and not each
other's definitions (the readers dispatch ``.h5ad`` files to :mod:`gplvm.io.h5ad`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["DataFileError", "Table"]


class DataFileError(ValueError):
    """A data file that cannot be read as a numeric table; the message is one line."""


@dataclass(frozen=True)
class Table:
    """A data matrix read from a file.

    Attributes:
        Y: (N, D) float64, NaN marks a missing entry ((N, H, W) for an array of images).
        row_ids: N strings (the index column, AnnData's ``obs_names``, or ``0 … N-1``).
        columns: D strings (the header, AnnData's ``var_names``, or ``0 … D-1``).
        obs: per-row annotations by name, each an (N,) array (strings or numbers).
        path: the file read.
    """

    Y: np.ndarray
    row_ids: list[str]
    columns: list[str]
    obs: dict[str, np.ndarray] = field(default_factory=dict)
    path: str = ""

    @property
    def missing_fraction(self) -> float:
        return float(np.mean(np.isnan(self.Y))) if self.Y.size else 0.0

"""Where a kernel's length-scale starts: the median heuristic.

:func:`median_distance` is the median pairwise Euclidean distance of the inputs, the usual first
guess for an RBF length-scale (the kernel then varies on the scale at which typical pairs of
points differ).  The estimators' default random-feature maps start there
(:func:`gplvm.models._common.default_features`).  It is imported from this module, not from
:mod:`gplvm.kernels`, whose names are the kernels themselves.
"""

from __future__ import annotations

import numpy as np


def median_distance(X: np.ndarray, max_points: int = 1000, seed: int = 0) -> float:
    """Median pairwise Euclidean distance (the usual length-scale initialisation).

    Args:
        X: (N, Q) inputs.
        max_points: above this many rows, the median of a random subset of this many rows
            (the N² distances would not fit in memory for large N).
        seed: the seed of that subset.

    Returns:
        The median distance; 1.0 when it is 0 or there is no pair (a length-scale must be
        positive).
    """
    if len(X) > max_points:
        X = X[np.random.default_rng(seed).choice(len(X), max_points, replace=False)]
    sq = np.sum(X**2, 1)
    # |x - y|^2 = |x|^2 + |y|^2 - 2 x.y, clipped at 0 against round-off
    D2 = np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0)
    d = np.sqrt(D2[np.triu_indices(len(X), 1)])
    med = float(np.median(d)) if d.size else 1.0
    return med if med > 0 else 1.0

"""Data sets of the DP-GP-LVM experiments (seed 001, Figure 6 and §G), exported from
:mod:`gplvm.data` (this module was ``gplvm.models._dp_data`` before issue 33).

* :func:`make_factorised`: columns drawn from a few mapping functions of one latent space, each
  function using its own subset of shared and private latent dimensions (Figure 6).
* :func:`walk_ambiguity`: a walk concatenated with a copy whose leg channels are shifted half
  a gait cycle relative to the upper body (§G, "Resolving ambiguities").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gplvm.data.synthetic import rbf_gram

#: Figure 6's four functions of a Q = 6 latent space: dimensions 0, 1, 2 are shared by function
#: 0 with functions 1, 2, 3 respectively, and 3, 4, 5 are private to functions 1, 2, 3.
FIGURE6_DIMENSIONS = ((0, 1, 2), (0, 3), (1, 4), (2, 5))


class FactorisedData(NamedTuple):
    """Y (N, D); X (N, Q) the latent points; labels (D,) the function of each column;
    active (n_functions, Q) boolean, the latent dimensions each function uses."""

    Y: np.ndarray
    X: np.ndarray
    labels: np.ndarray
    active: np.ndarray


def make_factorised(n_samples: int = 200, columns_per_function: int = 15,
                    dimensions=FIGURE6_DIMENSIONS, n_components: int = 6,
                    lengthscale: float = 1.0, noise_var: float = 0.1, n_draws: int = 3,
                    random_state: int = 0) -> FactorisedData:
    """Each function is ``n_draws`` independent GP draws (RBF, unit variance, ``lengthscale``)
    on its latent dimensions, mixed into its columns by random weights and each column scaled to
    unit variance (a GP with that function's kernel, all columns at one signal-to-noise
    ratio); plus Gaussian noise of variance ``noise_var``.

    Args:
        n_samples: N.
        columns_per_function: the columns of each function.
        dimensions: for each function, the latent dimensions it uses.
        n_components: Q; X ~ N(0, I_Q).
        lengthscale: the kernels' length-scale on every dimension they use.
        noise_var: the noise variance (the signal variance is 1).
        n_draws: GP draws per function.
        random_state: seed.
    """
    rng = np.random.default_rng(random_state)
    X = rng.normal(size=(n_samples, n_components))
    active = np.zeros((len(dimensions), n_components), dtype=bool)
    blocks, labels = [], []
    for g, dims in enumerate(dimensions):
        active[g, list(dims)] = True
        K = rbf_gram(X[:, list(dims)] / lengthscale)
        L = np.linalg.cholesky(K + 1e-8 * np.eye(n_samples))
        H = L @ rng.normal(size=(n_samples, n_draws))
        mixing = rng.normal(size=(n_draws, columns_per_function)) / np.sqrt(n_draws)
        F = H @ mixing
        blocks.append((F - F.mean(0)) / F.std(0))       # every column at unit signal variance
        labels += [g] * columns_per_function
    F = np.hstack(blocks)
    Y = F + np.sqrt(noise_var) * rng.normal(size=F.shape)
    return FactorisedData(Y, X, np.asarray(labels), active)


#: GPmat's channel order for CMU subject 35 (the ASF's): root 0–5, then femur, tibia, foot and
#: toes of the left (6–12) and right (13–19) leg
CMU35_LEG_CHANNELS = np.arange(6, 20)


def gait_period(signal: np.ndarray) -> int:
    """Frames per cycle of a periodic signal: the highest autocorrelation after its first
    trough, within half the signal's length."""
    x = np.asarray(signal, dtype=float) - np.mean(signal)
    ac = np.correlate(x, x, mode="full")[len(x) - 1:]
    trough = int(np.argmax(np.diff(ac) > 0))
    return trough + int(np.argmax(ac[trough:trough + len(x) // 2]))


class WalkAmbiguity(NamedTuple):
    """Y (2n, D): the walk, then the walk with its leg channels shifted; legs (D,) boolean;
    times (2n,) and groups (2n,) (two sequences)."""

    Y: np.ndarray
    legs: np.ndarray
    times: np.ndarray
    groups: np.ndarray


def walk_ambiguity(Y_walk: np.ndarray, legs: np.ndarray, shift: int,
                   fps: float = 30.0) -> WalkAmbiguity:
    """The unshifted walk (frames ``shift`` … n − 1) and a copy whose leg channels are taken
    ``shift`` frames earlier (half a gait cycle), so each upper-body pose appears with two leg
    configurations (seed 001 §G)."""
    Y_walk = np.asarray(Y_walk, dtype=float)
    legs = np.asarray(legs, dtype=bool)
    n = Y_walk.shape[0] - shift
    plain = Y_walk[shift:]
    shifted = plain.copy()
    shifted[:, legs] = Y_walk[:n][:, legs]
    times = np.concatenate([np.arange(n), np.arange(n)]) / fps
    groups = np.repeat([0, 1], n)
    return WalkAmbiguity(np.vstack([plain, shifted]), legs, times, groups)

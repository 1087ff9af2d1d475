"""Synthetic data sets with a known latent truth (seed 000, §4 and §4.2).

Two generators, both rebuilt from the RFLVM reference code (``datasets/loader.py`` of
michaelzhang01/bayesian-rflvm, functions ``gen_s_curve`` and ``load_lorenz``) with every random
draw taken from one ``numpy.random.Generator`` seeded by ``random_state``:

* :func:`make_s_curve` -- a 1-D S-shaped curve in a 2-D latent space, mapped through ``J``
  functions drawn from a GP with an RBF kernel and then through one of the six likelihoods of
  seed 000 (§3 and §4: "the parameters and data simulated from the prior generating process of a
  GPLVM with an RBF covariance kernel", N = 500, J = 100, D = 2).
* :func:`make_lorenz` -- an Euler-integrated Lorenz attractor (Q = 3) mapped to J = 50 outputs by
  ``10 tanh(X A)`` plus unit Gaussian noise (seed 000, §4.2, Table 3 "Lorenz").

Both return a :class:`SyntheticData`, whose ``X``, ``F`` and ``times`` are the truth to compare a
fitted model against (``gplvm.metrics.affine_r2`` for ``X``, an MSE for ``F``).
"""

from __future__ import annotations

from types import MappingProxyType
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy.special import expit, softmax

from gplvm.typing import Float, Real, ScalarLike

#: A count checked by ``_check_int`` (a Python or NumPy integer; the check gives the ValueError).
Count = int | np.integer

__all__ = ["SyntheticData", "MapPrior", "LIKELIHOODS", "make_s_curve", "make_lorenz",
           "lorenz_trajectory", "rbf_gram"]

LIKELIHOODS = ("gaussian", "poisson", "bernoulli", "binomial", "negative_binomial",
               "multinomial")


class SyntheticData(NamedTuple):
    """A simulated data set and the truth that generated it.

    Attributes:
        Y: observations, shape (N, J); float64 for every likelihood (counts are whole numbers).
        X: true latent points, shape (N, Q).
        F: true noiseless function values, shape (N, J): the latent GP values *before* the
            inverse link for the S-curve (``E[y] = g(F)``), the noiseless mean for Lorenz.
        times: time stamp of each row, shape (N,), increasing.
        likelihood: the emission model's name, one of :data:`LIKELIHOODS`.
        params: other generating parameters (``noise_std``, ``n_trials``, ``r``, ``total_count``,
            ``A`` ...), read-only.
    """

    Y: Float[np.ndarray, "N J"]
    X: Float[np.ndarray, "N Q"]
    F: Float[np.ndarray, "N J"]
    times: Float[np.ndarray, " N"]
    likelihood: str
    params: Mapping[str, Any]


class MapPrior(NamedTuple):
    """The GP prior of the S-curve's maps f_j (:func:`make_s_curve`, step 2).

    Attributes:
        lengthscale: RBF length-scale (1 in seed 000).
        variance: RBF signal variance (1 in seed 000).
        jitter: relative diagonal jitter for the Cholesky factor of the Gram matrix.
    """

    lengthscale: float = 1.0
    variance: float = 1.0
    jitter: float = 1e-8


def _check_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _check_positive(value: ScalarLike, name: str) -> float:
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number; got {value!r}")
    return float(value)


def _standardise(A: Float[np.ndarray, "N K"]) -> Float[np.ndarray, "N K"]:
    """Centre every column and scale it to unit (population) standard deviation."""
    A = A - A.mean(axis=0)
    return A / A.std(axis=0)


def rbf_gram(X: Float[np.ndarray, "N Q"], lengthscale: float = 1.0, variance: float = 1.0
             ) -> Float[np.ndarray, "N N"]:
    """The RBF Gram matrix ``K[n, m] = variance * exp(-|x_n - x_m|^2 / (2 lengthscale^2))``.

    This is GPy's ``kern.RBF`` that the reference code uses; it is computed here in NumPy so
    that the generator does not depend on the (JAX) kernel module it is used to test.

    Args:
        X: points, shape (N, Q).
        lengthscale: the shared length-scale.
        variance: the signal variance.

    Returns:
        K, shape (N, N), symmetric positive semi-definite.
    """
    sq = np.sum(X**2, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0)
    return variance * np.exp(-0.5 * d2 / lengthscale**2)


def _s_curve_latent(rng: np.random.Generator, n_samples: int
                    ) -> tuple[Float[np.ndarray, "N 2"], Float[np.ndarray, " N"]]:
    """scikit-learn's S-curve without its width axis, standardised and sorted by ``t``.

    ``sklearn.datasets.make_s_curve`` draws ``t ~ U(-3pi/2, 3pi/2)`` and returns the points
    ``(sin t, 2 u, sign(t)(cos t - 1))``; the middle coordinate is an independent uniform width,
    which the reference code deletes (``np.delete(X, obj=1, axis=1)``).  Only the two curve
    coordinates are computed here, so no draw is wasted on the width.
    """
    t = np.sort(3.0 * np.pi * (rng.uniform(size=n_samples) - 0.5))
    X = np.column_stack([np.sin(t), np.sign(t) * (np.cos(t) - 1.0)])
    # The reference divides by the standard deviation only; both coordinates are odd functions
    # of a symmetric t, so their means are already ~0 and centring changes little.
    return _standardise(X), t


def _draw_gp(rng: np.random.Generator, X: Float[np.ndarray, "N Q"], n_outputs: int,
             lengthscale: float, variance: float, jitter: float) -> Float[np.ndarray, "N J"]:
    """Draw ``n_outputs`` independent columns ``f_j ~ N(0, K)`` as ``F = L @ Z``.

    The Gram matrix of 500 points on a smooth curve is numerically singular, so ``jitter *
    variance`` is added to the diagonal before the Cholesky factorisation (a variance 1e-8 of
    the signal's is far below any noise level used here); Cholesky rather than an
    eigendecomposition keeps the draw unique (eigenvector signs vary between LAPACK builds).
    """
    K = rbf_gram(X, lengthscale, variance)
    try:
        L = np.linalg.cholesky(K + jitter * variance * np.eye(len(X)))
    except np.linalg.LinAlgError as err:
        raise ValueError(f"the RBF Gram matrix of the S-curve is not positive definite with "
                         f"jitter={jitter}; pass a larger jitter (e.g. {jitter * 100:g})") from err
    return L @ rng.standard_normal((len(X), n_outputs))


def _emit(rng: np.random.Generator, F: Float[np.ndarray, "N J"], likelihood: str,
          noise_std: float, n_trials: Count, total_count: Count
          ) -> tuple[Float[np.ndarray, "N J"], dict]:
    """Draw Y given F under one of the six likelihoods of seed 000 (§2-3)."""
    J = F.shape[1]
    if likelihood == "gaussian":
        return F + noise_std * rng.standard_normal(F.shape), {"noise_std": noise_std}
    if likelihood == "poisson":
        return rng.poisson(np.exp(F)).astype(float), {}
    if likelihood == "bernoulli":
        return rng.binomial(1, expit(F)).astype(float), {}
    if likelihood == "binomial":
        return rng.binomial(n_trials, expit(F)).astype(float), {"n_trials": n_trials}
    if likelihood == "negative_binomial":
        # Seed 000 writes y_ij ~ NB(r_j, sigmoid(F_ij)) with p(y) ∝ sigmoid(F)^y (1-sigmoid(F))^r,
        # mean r exp(F).  NumPy's negative_binomial(n, p) counts failures before n successes of
        # probability p, i.e. p(y) ∝ (1-p)^y p^n, so p = 1 - sigmoid(F) (= scipy's nbinom).
        r = np.arange(1, J + 1, dtype=float)
        return rng.negative_binomial(r, 1.0 - expit(F)).astype(float), {"r": r}
    # multinomial: each row is total_count draws over the J columns, pi_n = softmax(F_n).
    Y = rng.multinomial(total_count, softmax(F, axis=1)).astype(float)
    return Y, {"total_count": total_count}


def make_s_curve(likelihood: str = "gaussian", n_samples: Count = 500, n_outputs: Count = 100,
                 random_state: int | None = 0, *, noise_std: float = 0.5,
                 n_trials: Count = 10, total_count: Count = 100,
                 prior: MapPrior = MapPrior()) -> SyntheticData:
    """The S-curve GPLVM data set of seed 000, §4 (and Figs. 1, 2, 6).

    Generating process (reference code ``gen_s_curve``):

    1. ``t ~ U(-3pi/2, 3pi/2)``, sorted; ``X = standardise([sin t, sign(t)(cos t - 1)])``.
    2. ``f_j ~ GP(0, k)`` with ``k`` RBF(``prior.lengthscale``, ``prior.variance``),
       j = 1..J, evaluated at X: ``F`` has shape (N, J).
    3. Emissions, elementwise unless stated:

       ======================  ============================================  ==============
       likelihood              ``y_nj``                                      values
       ======================  ============================================  ==============
       ``gaussian``            ``F + noise_std * eps``                       real
       ``poisson``             ``Poisson(exp F)``                            0, 1, 2, ...
       ``bernoulli``           ``Bernoulli(sigmoid F)``                      {0, 1}
       ``binomial``            ``Binomial(n_trials, sigmoid F)``             0..n_trials
       ``negative_binomial``   ``NB(r_j = j, sigmoid F)``, mean ``j exp F``  0, 1, 2, ...
       ``multinomial``         row n ~ ``Mult(total_count, softmax(F_n))``   rows sum to
                                                                             total_count
       ======================  ============================================  ==============

    Args:
        likelihood: one of :data:`LIKELIHOODS`.
        n_samples: N, the number of rows (>= 2).
        n_outputs: J, the number of columns (>= 1; >= 2 for ``multinomial``).
        random_state: seed of the ``numpy.random.Generator`` behind every draw.
        noise_std: Gaussian noise standard deviation (0.5 in the reference code).
        n_trials: trials per entry for ``binomial``.
        total_count: counts per row for ``multinomial`` (100 in the reference code).
        prior: the maps' GP prior (:class:`MapPrior`: RBF length-scale and variance, 1 and 1
            in seed 000, and the Cholesky jitter), e.g. ``prior=MapPrior(lengthscale=0.5)``.

    Returns:
        :class:`SyntheticData` with ``Y`` (N, J), ``X`` (N, 2) with standardised columns,
        ``F`` (N, J) and ``times`` = the sorted curve parameter ``t`` (N,), in
        [-3pi/2, 3pi/2]. ``params`` holds the generating parameters (``r`` for NB).
    """
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"unknown likelihood {likelihood!r}; choose one of {LIKELIHOODS}")
    N = _check_int(n_samples, "n_samples", 2)
    J = _check_int(n_outputs, "n_outputs", 2 if likelihood == "multinomial" else 1)
    n_trials = _check_int(n_trials, "n_trials", 1)
    total_count = _check_int(total_count, "total_count", 1)
    lengthscale, variance, jitter = prior
    for value, name in ((lengthscale, "lengthscale"), (variance, "variance"),
                        (noise_std, "noise_std"), (jitter, "jitter")):
        _check_positive(value, name)
    rng = np.random.default_rng(random_state)
    X, t = _s_curve_latent(rng, N)
    F = _draw_gp(rng, X, J, lengthscale, variance, jitter)
    Y, extra = _emit(rng, F, likelihood, noise_std, n_trials, total_count)
    params = {"lengthscale": lengthscale, "variance": variance, **extra}
    return SyntheticData(Y, X, F, t, likelihood, MappingProxyType(params))


def lorenz_trajectory(n_steps: Count, dt: float = 0.01,
                      x0: Sequence[float] | Real[np.ndarray, "3"] = (0.0, 1.0, 1.05),
                      sigma: float = 10.0, rho: float = 28.0, beta: float = 8.0 / 3.0
                      ) -> Float[np.ndarray, "n_steps 3"]:
    """Forward-Euler integration of the Lorenz system.

    .. math::
        \\dot x = \\sigma (y - x), \\quad \\dot y = x(\\rho - z) - y, \\quad
        \\dot z = x y - \\beta z, \\qquad s_{i+1} = s_i + dt\\, \\dot s(s_i).

    Args:
        n_steps: number of states returned, starting with ``x0`` (>= 1).
        dt: Euler step.
        x0: initial state (the reference code's ``(0, 1, 1.05)``).
        sigma, rho, beta: Lorenz parameters (the reference code rounds beta to 2.667).

    Returns:
        states, shape (n_steps, 3): row i is the state after i steps.
    """
    n_steps = _check_int(n_steps, "n_steps", 1)
    _check_positive(dt, "dt")
    S = np.empty((n_steps, 3))
    S[0] = np.asarray(x0, dtype=float)
    for i in range(n_steps - 1):
        x, y, z = S[i]
        S[i + 1] = S[i] + dt * np.array([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])
    return S


def make_lorenz(n_samples: Count = 500, n_outputs: Count = 50, random_state: int | None = 0, *,
                dt: float = 0.01, scale: float = 10.0, noise_std: float = 1.0) -> SyntheticData:
    """The Lorenz-attractor data set of seed 000, §4.2 (Table 3), as the reference builds it.

    1. ``S = lorenz_trajectory(N, dt)`` from ``(0, 1, 1.05)`` with sigma=10, rho=28, beta=8/3.
    2. ``X``: each column of S centred and divided by its largest absolute value, so that every
       coordinate lies in [-1, 1] with its extreme at +-1 (the reference's ``ord=np.inf``
       normalisation; O(1) inputs keep ``tanh`` away from saturation).
    3. ``A``: a (3, J) matrix with iid N(0, 1) entries; ``F = standardise(scale * tanh(X A))``
       column by column (zero mean, unit standard deviation).
    4. ``Y = F + noise_std * eps``, eps iid N(0, 1), so the signal-to-noise ratio is 1.

    Args:
        n_samples: N, the number of time steps (>= 2).
        n_outputs: J, the number of observed channels (>= 1).
        random_state: seed of the ``numpy.random.Generator`` drawing A and the noise (the
            trajectory itself is deterministic).
        dt: Euler step (0.01).
        scale: the factor before ``tanh`` (10); it is undone by the standardisation of F except
            through the sign of the columns, and is kept to mirror the reference.
        noise_std: standard deviation of the observation noise.

    Returns:
        :class:`SyntheticData` with ``Y`` (N, J), ``X`` (N, 3) in [-1, 1], ``F`` (N, J) with
        standardised columns, ``times`` = ``linspace(-1, 1, N)`` as in the reference code (the
        physical time of row i is ``i * dt``), likelihood ``"gaussian"``; ``params`` holds
        ``A``, ``dt`` and ``noise_std``.
    """
    N = _check_int(n_samples, "n_samples", 2)
    J = _check_int(n_outputs, "n_outputs", 1)
    _check_positive(scale, "scale")
    _check_positive(noise_std, "noise_std")
    rng = np.random.default_rng(random_state)
    S = lorenz_trajectory(N, dt)
    X = S - S.mean(axis=0)
    X = X / np.abs(X).max(axis=0)
    A = rng.standard_normal((3, J))
    F = _standardise(scale * np.tanh(X @ A))
    Y = F + noise_std * rng.standard_normal(F.shape)
    times = np.linspace(-1.0, 1.0, N)
    params = {"A": A, "dt": dt, "noise_std": noise_std, "scale": scale}
    return SyntheticData(Y, X, F, times, "gaussian", MappingProxyType(params))

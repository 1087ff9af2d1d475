"""The linear dynamical model of the Table 3 benchmark (benchmarks/reproduce/_ldm.py).

Truths: the Kalman filter's log-likelihood is the Gaussian log-density of the stacked
observations, whose mean and covariance the test builds densely from the state-space recursion
(with missing entries, the marginal of the observed ones: rows and columns dropped); EM never
lowers the observed-data log-likelihood; on data simulated from a slowly rotating LDS with noisy
outputs the smoother's imputations beat PPCA's, which ignores time.
"""

import sys

from _paths import REPO

import numpy as np
import pytest
import scipy.stats

sys.path.insert(0, str(REPO / "benchmarks" / "reproduce"))
from _ldm import LDSParams, LinearDynamicalModel, log_likelihood  # noqa: E402

from gplvm.baselines import PPCA  # noqa: E402


def _params(rng, K=2, J=3):
    theta = 0.3
    A = 0.95 * np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    B = rng.normal(size=(K, K))
    return LDSParams(A=A, Q_r=0.2 * np.eye(K) + 0.05 * B @ B.T, C=rng.normal(size=(J, K)),
                     d=rng.normal(size=J), rho=rng.uniform(0.1, 0.5, size=J),
                     mu0=rng.normal(size=K), V0=np.diag([0.7, 1.3]))


def _dense_moments(p, T):
    """Mean and covariance of vec(Y) (T*J,) from x_t = A x_t-1 + r_t, y_t = C x_t + d + s_t."""
    K, J = p.A.shape[0], p.C.shape[0]
    means, covs = [p.mu0], [p.V0]
    for _ in range(T - 1):
        means.append(p.A @ means[-1])
        covs.append(p.A @ covs[-1] @ p.A.T + p.Q_r)
    Sx = np.zeros((T * K, T * K))
    for s in range(T):
        for t in range(s, T):        # Cov(x_t, x_s) = A^(t-s) Cov(x_s)
            block = np.linalg.matrix_power(p.A, t - s) @ covs[s]
            Sx[t * K:(t + 1) * K, s * K:(s + 1) * K] = block
            Sx[s * K:(s + 1) * K, t * K:(t + 1) * K] = block.T
    Cbig = np.kron(np.eye(T), p.C)
    mean = np.concatenate([p.C @ m + p.d for m in means])
    cov = Cbig @ Sx @ Cbig.T + np.diag(np.tile(p.rho, T))
    return mean, cov


@pytest.mark.parametrize("missing", [False, True])
def test_filter_loglik_is_the_dense_gaussian_density(missing):
    rng = np.random.default_rng(0)
    p, T = _params(rng), 6
    mean, cov = _dense_moments(p, T)
    y = rng.multivariate_normal(mean, cov)
    Y = y.reshape(T, -1).copy()
    keep = np.ones(y.size, bool)
    if missing:
        keep[[1, 5, 9, 10, 11, 16]] = False            # row 3 entirely missing among others
        Y.ravel()[~keep] = np.nan
    expected = scipy.stats.multivariate_normal(mean[keep], cov[np.ix_(keep, keep)]).logpdf(
        y[keep])
    assert log_likelihood(p, Y) == pytest.approx(expected, rel=1e-10)


def _simulate(rng, T=150, J=8, noise=1.0):
    theta = 0.1
    A = 0.99 * np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    x = np.zeros((T, 2))
    x[0] = [3.0, 0.0]
    for t in range(1, T):
        x[t] = A @ x[t - 1] + 0.3 * rng.normal(size=2)
    C = rng.normal(size=(J, 2))
    return x @ C.T + noise * rng.normal(size=(T, J))


def test_em_never_lowers_the_likelihood_and_beats_ppca_at_imputing():
    rng = np.random.default_rng(1)
    Y = _simulate(rng)
    mask = rng.random(Y.shape) < 0.2
    Y_obs = np.where(mask, np.nan, Y)
    ldm = LinearDynamicalModel(2, max_iter=30, tol=0.0).fit(Y_obs)
    steps = np.diff(ldm.history_)
    assert np.all(steps >= -1e-8 * np.abs(ldm.history_[1:])), steps.min()
    assert ldm.history_[-1] > ldm.history_[0]
    mse_ldm = np.mean((ldm.impute(Y_obs)[mask] - Y[mask]) ** 2)
    mse_ppca = np.mean((PPCA(2).fit(Y_obs).impute(Y_obs)[mask] - Y[mask]) ** 2)
    # the noise variance (1.0) is the floor for any imputer; smoothing over time gets closer.
    assert mse_ldm < 0.8 * mse_ppca, (mse_ldm, mse_ppca)


def test_bad_input_is_refused():
    Y = np.ones((10, 3))
    Y[:, 1] = np.nan
    with pytest.raises(ValueError, match="no observed entry"):
        LinearDynamicalModel().fit(Y)
    with pytest.raises(ValueError, match="T >= 3"):
        LinearDynamicalModel().fit(np.ones((2, 3)))

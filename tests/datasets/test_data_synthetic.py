"""Synthetic generators (seed 000, §4): shapes, supports, exact construction, determinism."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from scipy.special import expit, softmax
from sklearn.datasets import make_s_curve as sk_make_s_curve

from gplvm.data import LIKELIHOODS, MapPrior, lorenz_trajectory, make_lorenz, make_s_curve

N, J = 200, 30  # smaller than the paper's 500 x 100 to keep the tests fast


@pytest.fixture(scope="module", params=LIKELIHOODS)
def s_curve(request):
    return make_s_curve(request.param, n_samples=N, n_outputs=J, random_state=1)


def test_s_curve_shapes_and_fields(s_curve):
    assert s_curve.Y.shape == (N, J) and s_curve.F.shape == (N, J)
    assert s_curve.X.shape == (N, 2) and s_curve.times.shape == (N,)
    assert s_curve.Y.dtype == np.float64 and np.all(np.isfinite(s_curve.Y))
    assert s_curve.likelihood in LIKELIHOODS


def test_s_curve_supports(s_curve):
    Y, lik = s_curve.Y, s_curve.likelihood
    if lik != "gaussian":
        assert np.all(Y >= 0) and np.all(Y == np.round(Y))
    if lik == "bernoulli":
        assert set(np.unique(Y)) <= {0.0, 1.0}
    if lik == "binomial":
        assert Y.max() <= s_curve.params["n_trials"] == 10
    if lik == "multinomial":
        np.testing.assert_array_equal(Y.sum(axis=1), 100)
    if lik == "negative_binomial":
        np.testing.assert_array_equal(s_curve.params["r"], np.arange(1, J + 1))


def _conditional_moments(d):
    """E[y | F] and Var[y | F] of each entry under the stated emission model."""
    F, lik = d.F, d.likelihood
    if lik == "gaussian":
        return F, np.full_like(F, 0.25)
    if lik == "poisson":
        return np.exp(F), np.exp(F)
    if lik == "bernoulli":
        return expit(F), expit(F) * (1 - expit(F))
    if lik == "binomial":
        return 10 * expit(F), 10 * expit(F) * (1 - expit(F))
    if lik == "negative_binomial":  # mean r e^F, variance mean (1 + e^F)
        mean = d.params["r"] * np.exp(F)
        return mean, mean * (1 + np.exp(F))
    pi = softmax(F, axis=1)
    return 100 * pi, 100 * pi * (1 - pi)


def test_s_curve_emissions_have_the_stated_conditional_mean(s_curve):
    # z = sum(y - E[y|F]) / sqrt(sum Var[y|F]) is ~N(0, 1) given F (entries independent;
    # multinomial entries are negatively correlated, which only shrinks z); |z| < 4 fails
    # with probability < 1e-4 for a correct generator.
    mean, var = _conditional_moments(s_curve)
    z = np.sum(s_curve.Y - mean) / np.sqrt(np.sum(var))
    assert abs(z) < 4


def test_gaussian_noise_sd_is_half():
    d = make_s_curve("gaussian", n_samples=N, n_outputs=J, random_state=3)
    # 6000 iid N(0, 0.25) residuals: the sample sd has standard error 0.5/sqrt(2*6000) = 0.005.
    assert abs(np.std(d.Y - d.F) - 0.5) < 0.02


def test_s_curve_latent_is_sklearns_curve_without_width_standardised_and_sorted():
    d = make_s_curve("poisson", n_samples=N, n_outputs=J, random_state=4)
    t = d.times
    assert np.all(np.diff(t) >= 0) and t.min() >= -1.5 * np.pi and t.max() <= 1.5 * np.pi
    raw = np.column_stack([np.sin(t), np.sign(t) * (np.cos(t) - 1)])
    np.testing.assert_allclose(d.X, (raw - raw.mean(0)) / raw.std(0), atol=1e-12)
    # The same two coordinates are what scikit-learn's make_s_curve puts in columns 0 and 2.
    Xs, ts = sk_make_s_curve(50, random_state=0)
    np.testing.assert_allclose(Xs[:, [0, 2]], np.column_stack([np.sin(ts),
                                                                np.sign(ts) * (np.cos(ts) - 1)]))


def test_s_curve_F_is_a_draw_from_the_rbf_gp():
    d = make_s_curve("gaussian", n_samples=N, n_outputs=100, random_state=5)
    K = np.exp(-0.5 * cdist(d.X, d.X, "sqeuclidean")) + 1e-8 * np.eye(N)
    Z = np.linalg.solve(np.linalg.cholesky(K), d.F)  # whitened: iid N(0, 1) if F ~ N(0, K)
    # 20000 iid N(0, 1): mean has sd 0.007, variance has sd 0.01.
    assert abs(Z.mean()) < 0.04 and abs(Z.var() - 1) < 0.05


def test_s_curve_is_deterministic_given_the_seed():
    a = make_s_curve("poisson", n_samples=50, n_outputs=5, random_state=7)
    b = make_s_curve("poisson", n_samples=50, n_outputs=5, random_state=7)
    c = make_s_curve("poisson", n_samples=50, n_outputs=5, random_state=8)
    for field in ("Y", "X", "F", "times"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.F, c.F)


@pytest.mark.parametrize("kwargs, match", [
    ({"likelihood": "gamma"}, "unknown likelihood"),
    ({"n_samples": 1}, "n_samples"),
    ({"likelihood": "multinomial", "n_outputs": 1}, "n_outputs"),
    ({"noise_std": -1.0}, "noise_std"),
    ({"n_trials": 0}, "n_trials"),
    ({"prior": MapPrior(lengthscale=-1.0)}, "lengthscale"),
    ({"prior": MapPrior(jitter=0.0)}, "jitter"),
])
def test_s_curve_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_s_curve(**kwargs)


def test_lorenz_trajectory_matches_hand_and_independent_euler():
    S = lorenz_trajectory(300)
    # One step by hand from (0, 1, 1.05): (0 + .01*10*1, 1 + .01*(0 - 1), 1.05 - .01*(8/3)*1.05).
    np.testing.assert_allclose(S[1], [0.1, 0.99, 1.022], atol=1e-15)
    x, y, z = 0.0, 1.0, 1.05
    for i in range(299):
        x, y, z = (x + 0.01 * 10 * (y - x), y + 0.01 * (28 * x - y - x * z),
                   z + 0.01 * (x * y - 8 / 3 * z))
        np.testing.assert_allclose(S[i + 1], [x, y, z], rtol=1e-12, atol=1e-12)


def test_make_lorenz_construction():
    d = make_lorenz(random_state=0)
    assert d.Y.shape == (500, 50) and d.X.shape == (500, 3) and d.F.shape == (500, 50)
    S = lorenz_trajectory(500)
    Xc = S - S.mean(0)
    np.testing.assert_allclose(d.X, Xc / np.abs(Xc).max(0), atol=1e-12)
    np.testing.assert_allclose(np.abs(d.X).max(0), 1.0)
    G = 10 * np.tanh(d.X @ d.params["A"])
    np.testing.assert_allclose(d.F, (G - G.mean(0)) / G.std(0), atol=1e-10)
    np.testing.assert_allclose(d.times, np.linspace(-1, 1, 500))
    assert abs(np.std(d.Y - d.F) - 1) < 0.03  # 25000 iid N(0, 1): sd error ~0.005
    assert d.likelihood == "gaussian"


def test_make_lorenz_is_deterministic_given_the_seed():
    a, b, c = make_lorenz(random_state=3), make_lorenz(random_state=3), make_lorenz(random_state=4)
    np.testing.assert_array_equal(a.Y, b.Y)
    np.testing.assert_array_equal(a.X, c.X)  # the trajectory itself is not random
    assert not np.array_equal(a.Y, c.Y)

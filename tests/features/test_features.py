"""Random feature maps: the 1/sqrt(M) error rate, unbiasedness, Fastfood, composition, grads."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.linalg import hadamard

from gplvm.features import (
    ALaCarteFeatures, Bias, ColumnSubset, Concat, FastfoodFeatures, RandomFourierFeatures, fwht,
)
from gplvm.kernels import RBF, STATIONARY_KERNELS, Linear, Matern32

MS = (100, 1000, 10000)


def _errors(make_map, kernel, dim, seeds=10, n=300):
    """Median over seeds of max|Phi Phi^T - K| for each M in MS."""
    out = []
    for M in MS:
        errs = []
        for s in range(seeds):
            X = np.random.default_rng(100 + s).normal(size=(n, dim))
            P = make_map(kernel, M, dim, jax.random.PRNGKey(s))(X)
            errs.append(float(jnp.max(jnp.abs(P @ P.T - kernel(X)))))
        out.append(np.median(errs))
    return np.array(out)


def _slope(errs):
    return np.polyfit(np.log(MS), np.log(errs), 1)[0]


@pytest.mark.parametrize("cls", STATIONARY_KERNELS)
@pytest.mark.parametrize("dim", [2, 5])
def test_rff_error_falls_like_inverse_sqrt_m(cls, dim):
    kernel = cls(lengthscale=1.0, variance=1.0)
    errs = _errors(RandomFourierFeatures.create, kernel, dim)
    assert -0.6 <= _slope(errs) <= -0.4, errs


@pytest.mark.parametrize("dim", [2, 5])
def test_fastfood_within_twice_plain_random_features(dim):
    kernel = RBF(lengthscale=1.0)
    plain = _errors(RandomFourierFeatures.create, kernel, dim, seeds=5)
    fast = _errors(FastfoodFeatures.create, kernel, dim, seeds=5)
    assert np.all(fast <= 2 * plain), (fast, plain)
    assert -0.6 <= _slope(fast) <= -0.4


def test_rff_is_unbiased():
    """The average of Phi Phi^T over independent draws converges to K (Monte Carlo, 5 SE)."""
    kernel = Matern32(lengthscale=0.8, variance=1.5)
    X = np.random.default_rng(0).normal(size=(20, 2))
    draws = np.stack([np.asarray((lambda P: P @ P.T)(
        RandomFourierFeatures.create(kernel, 20, 2, jax.random.PRNGKey(s))(X)))
        for s in range(2000)])
    mean, se = draws.mean(0), draws.std(0) / np.sqrt(len(draws))
    assert np.all(np.abs(mean - np.asarray(kernel(X))) < 5 * se + 1e-12)


def test_fwht_matches_hadamard_matrix():
    x = np.random.default_rng(1).normal(size=(3, 16))
    np.testing.assert_allclose(fwht(jnp.asarray(x)), x @ hadamard(16).T, rtol=1e-12)


def test_fastfood_rows_have_gaussian_norms_for_rbf():
    """Rows of V have the chi_d length law of Gaussian frequencies (KS test)."""
    from scipy import stats
    f = FastfoodFeatures.create(RBF(1.0), 4000, 8, jax.random.PRNGKey(3))
    W = f.projections(np.eye(8))  # (8, M/2): column i is row i of V
    norms = np.linalg.norm(np.asarray(W), axis=0)
    assert stats.kstest(norms, stats.chi(df=8).cdf).pvalue > 1e-3


def _fd(f, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("make", [
    lambda k: RandomFourierFeatures.create(k, 40, 3, jax.random.PRNGKey(0)),
    lambda k: FastfoodFeatures.create(k, 40, 3, jax.random.PRNGKey(0)),
])
def test_features_differentiable_in_inputs_and_lengthscales(make):
    fmap = make(RBF(lengthscale=jnp.array([0.7, 1.1, 1.9]), variance=1.2))
    X = np.random.default_rng(2).normal(size=(6, 3))
    R = np.random.default_rng(3).normal(size=(6, 40))

    def value(u, X):
        return jnp.sum(R * fmap.from_unconstrained(u)(X))

    u = fmap.unconstrained()
    g = jax.grad(value)(u, X)
    fd = _fd(lambda v: float(value({**u, "lengthscale": jnp.asarray(v)}, X)), u["lengthscale"])
    np.testing.assert_allclose(g["lengthscale"], fd, rtol=1e-6, atol=1e-9)
    gx = jax.grad(value, argnums=1)(u, X)
    np.testing.assert_allclose(gx, _fd(lambda x: float(value(u, x)), X), rtol=1e-6, atol=1e-9)


def test_concat_and_column_subset_compose_kernels():
    key1, key2 = jax.random.split(jax.random.PRNGKey(4))
    X = np.random.default_rng(5).normal(size=(50, 3))
    a = RandomFourierFeatures.create(RBF(1.0), 200, 3, key1)
    b = ColumnSubset.of(RandomFourierFeatures.create(Matern32(0.5), 100, 1, key2), [2], 3)
    c = Concat.of([a, b, Bias(3)])
    P = c(X)
    assert P.shape == (50, 301) and c.blocks == (200, 100, 1)
    Pa, Pb = a(X), b(X)
    np.testing.assert_allclose(P @ P.T, Pa @ Pa.T + Pb @ Pb.T + 1.0, rtol=1e-12)
    np.testing.assert_allclose(Pb, b.inner(X[:, [2]]), rtol=1e-14)
    back = c.from_unconstrained(c.unconstrained())
    np.testing.assert_allclose(back(X), P, rtol=1e-10)


def test_alacarte_frequencies_are_trainable():
    f = ALaCarteFeatures.create(30, 2, jax.random.PRNGKey(0))
    X = np.random.default_rng(6).normal(size=(8, 2))
    P = f(X)
    K = np.sum(np.cos((X[:, None, :] - X[None, :, :]) @ np.asarray(f.W).T), -1) / 15.0
    np.testing.assert_allclose(P @ P.T, K, rtol=1e-10, atol=1e-12)
    g = jax.grad(lambda u: jnp.sum(f.from_unconstrained(u)(X) ** 2 * X[:, :1]))(f.unconstrained())
    assert g["W"].shape == (15, 2) and np.all(np.isfinite(g["W"]))


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="even"):
        RandomFourierFeatures.create(RBF(), 11, 2, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="stationary"):
        RandomFourierFeatures.create(Linear(), 10, 2, jax.random.PRNGKey(0))
    f = RandomFourierFeatures.create(RBF(), 10, 2, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="input columns"):
        f(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="ARD"):
        RandomFourierFeatures.create(RBF(jnp.ones(3)), 10, 2, jax.random.PRNGKey(0))

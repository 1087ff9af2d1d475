"""Kernels against independent closed forms (scikit-learn, scipy Bessel functions), finite
differences, and Monte Carlo checks of their spectral densities."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sps
import scipy.stats as st
from sklearn.gaussian_process import kernels as skk

from gplvm.kernels import (
    RBF, STATIONARY_KERNELS, Constant, Linear, Matern12, Matern32, Matern52, RationalQuadratic,
    Sum, Product, White,
)

rng = np.random.default_rng(0)
X1 = rng.normal(size=(7, 3))
X2 = rng.normal(size=(5, 3))
ELL = np.array([0.7, 1.3, 2.1])


def matern_general(r, nu):
    """The Matérn correlation from its Bessel-function definition (r = scaled distance)."""
    s = np.sqrt(2 * nu) * np.maximum(r, 1e-300)
    return 2 ** (1 - nu) / sps.gamma(nu) * s**nu * sps.kv(nu, s)


def scaled_dist(A, B, ell):
    return np.sqrt((((A[:, None, :] - B[None, :, :]) / ell) ** 2).sum(-1))


@pytest.mark.parametrize("ell", [1.6, ELL])
def test_rbf_matches_sklearn(ell):
    ours = np.asarray(RBF(lengthscale=jnp.asarray(ell), variance=2.5)(X1, X2))
    ref = 2.5 * skk.RBF(length_scale=ell)(X1, X2)
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("cls,nu", [(Matern12, 0.5), (Matern32, 1.5), (Matern52, 2.5)])
@pytest.mark.parametrize("ell", [0.9, ELL])
def test_matern_matches_bessel_form_and_sklearn(cls, nu, ell):
    ours = np.asarray(cls(lengthscale=jnp.asarray(ell), variance=1.7)(X1, X2))
    ref = 1.7 * matern_general(scaled_dist(X1, X2, ell), nu)
    np.testing.assert_allclose(ours, ref, rtol=1e-10)
    np.testing.assert_allclose(ours, 1.7 * skk.Matern(length_scale=ell, nu=nu)(X1, X2),
                               rtol=1e-10)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 3.0])
def test_rational_quadratic_matches_sklearn(alpha):
    ours = np.asarray(RationalQuadratic(lengthscale=1.4, variance=0.8, alpha=alpha)(X1, X2))
    ref = 0.8 * skk.RationalQuadratic(length_scale=1.4, alpha=alpha)(X1, X2)
    np.testing.assert_allclose(ours, ref, rtol=1e-12)


def test_rq_alpha_one_is_seed002_cauchy_after_sqrt2_rescaling():
    # seed 002 Table 1: Cauchy k = 1 / (1 + ||tau||^2 / l_c^2); RQ(alpha=1) with l = l_c / sqrt(2)
    lc = 1.3
    r = scaled_dist(X1, X2, 1.0)
    cauchy = 1.0 / (1.0 + r**2 / lc**2)
    ours = RationalQuadratic(lengthscale=lc / np.sqrt(2), alpha=1.0)(X1, X2)
    np.testing.assert_allclose(np.asarray(ours), cauchy, rtol=1e-12)


def test_linear_white_constant_closed_forms():
    v = np.array([0.5, 2.0, 1.5])
    np.testing.assert_allclose(Linear(variance=jnp.asarray(v))(X1, X2), (X1 * v) @ X2.T,
                               rtol=1e-12)
    np.testing.assert_allclose(White(0.3)(X1), 0.3 * np.eye(7))
    np.testing.assert_allclose(White(0.3)(X1, X2), np.zeros((7, 5)))
    np.testing.assert_allclose(Constant(1.1)(X1, X2), np.full((7, 5), 1.1))


def test_algebra_sum_and_product():
    k1, k2 = RBF(1.2, 0.7), Linear(0.4)
    assert isinstance(k1 + k2, Sum) and isinstance(k1 * k2, Product)
    np.testing.assert_allclose((k1 + k2)(X1, X2), k1(X1, X2) + k2(X1, X2), rtol=1e-13)
    np.testing.assert_allclose((k1 * k2)(X1, X2), k1(X1, X2) * k2(X1, X2), rtol=1e-13)
    k = k1 + White(0.1)
    np.testing.assert_allclose(k(X1), k1(X1) + 0.1 * np.eye(7), rtol=1e-13)
    np.testing.assert_allclose(k.diag(X1), np.diag(np.asarray(k(X1))), rtol=1e-13)


@pytest.mark.parametrize("cls", STATIONARY_KERNELS)
def test_gram_is_symmetric_psd_with_exact_diagonal(cls):
    k = cls(lengthscale=jnp.asarray(ELL), variance=1.3)
    K = np.asarray(k(X1))
    np.testing.assert_allclose(K, K.T, rtol=0, atol=1e-14)
    np.testing.assert_allclose(np.diag(K), 1.3, rtol=1e-14)
    np.testing.assert_allclose(k.diag(X1), 1.3)
    assert np.linalg.eigvalsh(K).min() > -1e-12


def _fd(f, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("cls", [*STATIONARY_KERNELS, Linear])
def test_gradients_match_finite_differences(cls):
    W = rng.normal(size=(7, 5))  # a random linear functional of K

    def value(params, X):
        k = cls(**params)
        return jnp.sum(W * k(X, X2))

    params = ({"lengthscale": jnp.asarray(ELL), "variance": jnp.asarray(1.3)}
              if cls is not Linear else {"variance": jnp.asarray([0.5, 2.0, 1.5])})
    g = jax.grad(value)(params, X1)
    for name, p in params.items():
        fd = _fd(lambda v: float(value({**params, name: jnp.asarray(v)}, X1)), p)
        np.testing.assert_allclose(g[name], fd, rtol=1e-6, atol=1e-8)
    gx = jax.grad(value, argnums=1)(params, X1)
    np.testing.assert_allclose(gx, _fd(lambda x: float(value(params, x)), X1), rtol=1e-6,
                               atol=1e-8)


@pytest.mark.parametrize("cls", STATIONARY_KERNELS)
@pytest.mark.parametrize("dim", [1, 3])
def test_spectral_draws_reproduce_kernel(cls, dim):
    """E[cos(w·tau)] = k(tau)/sigma^2 (Bochner), Monte Carlo within 5 standard errors."""
    ell = ELL[:dim]
    k = cls(lengthscale=jnp.asarray(ell), variance=2.0)
    n = 200_000
    W = np.asarray(k.sample_frequencies(jax.random.PRNGKey(1), n, dim))
    taus = np.random.default_rng(2).normal(size=(6, dim)) * ell
    cosines = np.cos(W @ taus.T)  # (n, 6)
    est, se = cosines.mean(0), cosines.std(0) / np.sqrt(n)
    exact = np.asarray(k(taus, np.zeros((1, dim))))[:, 0] / 2.0
    assert np.all(np.abs(est - exact) < 5 * se + 1e-12), (est, exact, se)


@pytest.mark.parametrize("cls,dof", [(Matern12, 1), (Matern32, 3), (Matern52, 5)])
def test_matern_spectral_density_is_multivariate_t(cls, dof):
    ell = ELL
    k = cls(lengthscale=jnp.asarray(ell))
    W = rng.normal(size=(10, 3))
    ref = st.multivariate_t(loc=np.zeros(3), shape=np.diag(ell**-2.0), df=dof).logpdf(W)
    np.testing.assert_allclose(k.log_spectral_density(W), ref, rtol=1e-10)


def test_rbf_spectral_density_is_gaussian_with_inverse_squared_lengthscales():
    k = RBF(lengthscale=jnp.asarray(ELL))
    W = rng.normal(size=(10, 3))
    ref = st.multivariate_normal(np.zeros(3), np.diag(ELL**-2.0)).logpdf(W)
    np.testing.assert_allclose(k.log_spectral_density(W), ref, rtol=1e-10)


def test_unconstrained_round_trip_and_positivity():
    k = RBF(jnp.asarray(ELL), 0.3) + Matern32(2.0, 1e-4)
    u = k.unconstrained()
    back = type(k).from_unconstrained(u)
    np.testing.assert_allclose(back(X1, X2), k(X1, X2), rtol=1e-10)
    shifted = jax.tree_util.tree_map(lambda x: x - 50.0, u)  # far negative stays positive
    assert all(float(jnp.min(v)) > 0 for v in jax.tree_util.tree_leaves(
        type(k).from_unconstrained(shifted)))


def test_kernel_jits_and_vmaps():
    k = Matern52(jnp.asarray(ELL), 1.0)
    K = jax.jit(lambda kk, A, B: kk(A, B))(k, X1, X2)
    np.testing.assert_allclose(K, k(X1, X2), rtol=1e-13)
    ells = jnp.stack([jnp.asarray(ELL), 2 * jnp.asarray(ELL)])
    Ks = jax.vmap(lambda e: Matern52(e, 1.0)(X1, X2))(ells)
    assert Ks.shape == (2, 7, 5)


def test_block_average_is_the_averaged_covariance():
    """BlockAverage(k) at block centres is A K Aᵀ for the averaging matrix A of the fine points
    (1-D: 2 per block; 2-D: the 2 × 2 product), its point-to-block covariance K Aᵀ, its point
    variance k's own; and it round-trips through the unconstrained parametrisation."""
    from gplvm.kernels import BlockAverage
    k = Matern32(lengthscale=1.7, variance=1.3)
    block = BlockAverage(k)
    fine, centres = np.arange(8.0), 2.0 * np.arange(4) + 0.5
    A = np.kron(np.eye(4), [[0.5, 0.5]])
    K = np.asarray(k(fine))
    np.testing.assert_allclose(block(centres), A @ K @ A.T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(block.diag(centres), np.diag(A @ K @ A.T), rtol=1e-12)
    np.testing.assert_allclose(block.point_cross(fine, centres), K @ A.T, rtol=1e-12)
    np.testing.assert_allclose(block.point_diag(fine), np.diag(K), rtol=1e-12)
    grid = np.stack(np.meshgrid(fine[:4], fine[:4], indexing="ij"), -1).reshape(-1, 2)
    cgrid = np.stack(np.meshgrid(centres[:2], centres[:2], indexing="ij"), -1).reshape(-1, 2)
    A2 = np.kron(A[:2, :4], A[:2, :4])               # row-major 2-D averaging
    K2 = np.asarray(RBF(lengthscale=1.1)(grid))
    np.testing.assert_allclose(BlockAverage(RBF(lengthscale=1.1))(cgrid), A2 @ K2 @ A2.T,
                               rtol=1e-12, atol=1e-14)
    back = block.from_unconstrained(block.unconstrained())
    np.testing.assert_allclose(back(centres), block(centres), rtol=1e-12)

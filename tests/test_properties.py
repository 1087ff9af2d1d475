"""Property tests (``hypothesis``) on the building blocks (issue 16 item 5).

Each property is a mathematical truth checked on inputs hypothesis draws (derandomised, so CI
sees the same examples every run; array shapes are fixed so that JAX compiles once):

* every kernel of :mod:`gplvm.kernels` gives a positive semi-definite Gram matrix;
* the Ψ-statistics are moments: Ψ2 − Σ_n w_n ψ1_n ψ1_nᵀ = Σ_n w_n Cov[k(Z, x_n)] ⪰ 0 for weights
  w_n ≥ 0 (the analytic RBF forms and the unscented rule, whose weights are positive), and they
  agree with Monte Carlo estimates from draws of q(X);
* every likelihood's density sums (integrates) to 1 over its support;
* the positivity transform and the kernels' and likelihoods' unconstrained views invert;
* ``save`` then ``load`` gives back every estimator, fitted, with exactly the same state.
"""

from __future__ import annotations

import copy
import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

import gplvm
from gplvm import kernels as K
from gplvm import likelihoods as L
from gplvm.expectations import psi_statistics
from gplvm.registry import estimators
from gplvm.transforms import (
    POSITIVE_FLOOR,
    inverse_softplus,
    softplus,
    to_constrained_positive,
    to_unconstrained_positive,
)
from _same import assert_same

PROPERTY = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def floats(lo, hi):
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


def matrix(shape, lo=-3.0, hi=3.0):
    return arrays(np.float64, shape, elements=floats(lo, hi))


positive = floats(0.1, 5.0)
ard = matrix((2,), 0.2, 5.0)


def _min_eig_ok(A, scale=None):
    """Smallest eigenvalue of the symmetric part ≥ −1e-8 · trace (round-off allowance)."""
    A = np.asarray(A, dtype=float)
    A = 0.5 * (A + A.T)
    scale = np.trace(A) if scale is None else scale
    return np.linalg.eigvalsh(A).min() >= -1e-8 * max(scale, 1e-300)


# --------------------------------------------------------------------------- kernels are PSD
KERNELS = {
    "RBF": lambda ell, var, a: K.RBF(lengthscale=ell, variance=var),
    "Matern12": lambda ell, var, a: K.Matern12(lengthscale=ell, variance=var),
    "Matern32": lambda ell, var, a: K.Matern32(lengthscale=ell, variance=var),
    "Matern52": lambda ell, var, a: K.Matern52(lengthscale=ell, variance=var),
    "RationalQuadratic": lambda ell, var, a: K.RationalQuadratic(lengthscale=ell, variance=var,
                                                                 alpha=a),
    "Linear": lambda ell, var, a: K.Linear(variance=ell),
    "White": lambda ell, var, a: K.White(variance=var),
    "Constant": lambda ell, var, a: K.Constant(variance=var),
    "Coincidence": lambda ell, var, a: K.Coincidence(variance=var),
    "BlockAverage": lambda ell, var, a: K.BlockAverage(K.Matern32(lengthscale=ell,
                                                                  variance=var)),
    "Sum": lambda ell, var, a: K.RBF(lengthscale=ell, variance=var) + K.Linear(variance=a),
    "Product": lambda ell, var, a: K.Matern52(lengthscale=ell) * K.Linear(variance=var),
}


def test_every_public_kernel_is_covered():
    public = {n for n in K.__all__ if not n.startswith("Abstract") and n != "STATIONARY_KERNELS"}
    assert public == set(KERNELS)


@pytest.mark.parametrize("name", sorted(KERNELS))
@settings(PROPERTY, max_examples=15)
@given(X=matrix((8, 2)), duplicate=st.booleans(), ell=ard, var=positive, a=positive)
def test_kernels_are_positive_semidefinite(name, X, duplicate, ell, var, a):
    if duplicate:                       # repeated inputs: the Gram matrix is singular
        X = np.concatenate([X[:5], X[:3]])
    Kxx = np.asarray(KERNELS[name](ell, var, a)(jnp.asarray(X)))
    assert np.allclose(Kxx, Kxx.T, rtol=1e-12, atol=1e-12)
    assert _min_eig_ok(Kxx)


# --------------------------------------------------------------------------- Ψ-statistics
N_MC = 20_000


def _monte_carlo_psi(kernel, Z, mu, S, w, key):
    """ψ1 (N, M) and the weighted Ψ2 (M, M) from N_MC draws of each x_n ~ N(μ_n, S_n), with
    the standard errors of each entry."""
    eps = np.asarray(jax.random.normal(key, (N_MC,) + mu.shape))
    x = mu[None] + np.sqrt(S)[None] * eps
    Kx = np.asarray(kernel(jnp.asarray(x.reshape(-1, mu.shape[1])), jnp.asarray(Z)))
    Kx = Kx.reshape(N_MC, mu.shape[0], Z.shape[0])
    outer = np.einsum("n,tnm,tnl->tml", w, Kx, Kx)
    se = lambda draws: draws.std(0) / np.sqrt(N_MC)  # noqa: E731
    return Kx.mean(0), se(Kx), outer.mean(0), se(outer)


PSI_CASES = {
    # the closed forms (seed 001 §C): only Monte Carlo noise separates them from the truth
    "analytic RBF": (lambda ell, var: K.RBF(lengthscale=ell, variance=var), "analytic", 0.0),
    # the unscented rule (seed 004 §B) integrates cubics exactly; for S ≤ 0.05 and ℓ ≥ 0.5
    # what is left, O(S²/ℓ⁴) times the kernel's fourth derivative, is below 1 % of σ²
    "unscented Matern52": (lambda ell, var: K.Matern52(lengthscale=ell, variance=var),
                           "unscented", 0.01),
}


@pytest.mark.parametrize("case", sorted(PSI_CASES))
@settings(max_examples=8, deadline=None, derandomize=True, database=None)
@given(Z=matrix((4, 2), -2, 2), mu=matrix((5, 2), -2, 2), S=matrix((5, 2), 1e-3, 0.05),
       w=matrix((5,), 0.0, 2.0), ell=matrix((2,), 0.5, 3.0), var=floats(0.5, 2.0))
def test_psi_statistics_are_moments(case, Z, mu, S, w, ell, var):
    make, rule, bias = PSI_CASES[case]
    kernel = make(ell, var)
    psi0, psi1, psi2 = (np.asarray(a) for a in psi_statistics(kernel, Z, mu, S, rule=rule,
                                                               weights=w))
    # Ψ2 − Σ_n w_n ψ1_n ψ1_nᵀ is a weighted sum of covariance matrices
    assert _min_eig_ok(psi2 - (psi1 * w[:, None]).T @ psi1, scale=np.trace(psi2))
    np.testing.assert_allclose(psi0, var * w.sum(), rtol=1e-12)     # k(x, x) = σ² here
    mc1, se1, mc2, se2 = _monte_carlo_psi(kernel, Z, mu, S, w, jax.random.PRNGKey(0))
    # five standard errors (plus the rule's own bias): a false alarm has odds below 1e-6
    assert np.all(np.abs(psi1 - mc1) <= 5 * se1 + bias * var + 1e-12)
    assert np.all(np.abs(psi2 - mc2) <= 5 * se2 + bias * var**2 * w.sum() + 1e-12)


# --------------------------------------------------------------------------- likelihoods
def _total(lik, Y, f):
    """Σ_y exp log p(y | f) over the rows of ``Y`` (each row one point of the support)."""
    F = jnp.full((Y.shape[0], lik.latent_dim(Y.shape[1])), f)
    return float(np.sum(np.exp(np.asarray(lik.log_prob(jnp.asarray(Y), F), dtype=float))))


COUNTS = np.arange(6000.0)[:, None]       # NB with r ≥ 0.5, ψ ≤ 3: P(y ≥ 6000) < 1e-100
MULTINOMIAL_ROWS = np.array([c for c in itertools.product(range(6), repeat=3) if sum(c) == 5],
                            dtype=float)                                  # every 5-count row


@PROPERTY
@given(f=floats(-3.0, 3.0), noise=floats(0.05, 4.0), r=floats(0.5, 10.0),
       n=st.sampled_from([1, 4, 20]), f2=matrix((2,), -3.0, 3.0))
def test_likelihoods_normalise(f, noise, r, n, f2):
    assert set(L.LIKELIHOODS) == {"gaussian", "bernoulli", "binomial", "poisson",
                                  "negative_binomial", "multinomial"}
    # Gaussian: the trapezoid rule on f ± 12σ (the tails beyond hold < 1e-30)
    sd = np.sqrt(noise)
    y = np.linspace(f - 12 * sd, f + 12 * sd, 4001)[:, None]
    density = np.exp(np.asarray(L.Gaussian(noise_var=noise).log_prob(
        jnp.asarray(y), jnp.full_like(jnp.asarray(y), f))))[:, 0]
    assert abs(np.trapezoid(density, y[:, 0]) - 1.0) < 1e-9
    assert abs(_total(L.Bernoulli(), np.array([[0.0], [1.0]]), f) - 1.0) < 1e-12
    trials = np.arange(n + 1.0)[:, None]
    assert abs(_total(L.Binomial(n_trials=n), trials, f) - 1.0) < 1e-12
    assert abs(_total(L.Poisson(), COUNTS[:200], f) - 1.0) < 1e-12   # mean ≤ e³ ≈ 20
    assert abs(_total(L.NegativeBinomial(dispersion=r), COUNTS, f) - 1.0) < 1e-10
    # multinomial with J = 3 categories, 5 trials: every composition of 5 into 3 counts
    F = jnp.broadcast_to(jnp.asarray(f2), (MULTINOMIAL_ROWS.shape[0], 2))
    total = np.exp(np.asarray(L.Multinomial().log_prob(jnp.asarray(MULTINOMIAL_ROWS), F)))
    assert abs(total.sum() - 1.0) < 1e-12


# --------------------------------------------------------------------------- transforms invert
@PROPERTY
@given(u=floats(-30.0, 40.0), theta=floats(1e-9, 1e9))
def test_positivity_transform_inverts(u, theta):
    """softplus ∘ softplus⁻¹ = id on (floor, ∞) and softplus⁻¹ ∘ softplus = id on ℝ, to a few
    ulps: both are well conditioned there (d softplus⁻¹/dθ = 1/(1 − e^{−θ}) meets the θ-relative
    error of a small θ with an absolute one)."""
    assert float(softplus(u)) > POSITIVE_FLOOR / 2
    assert abs(float(inverse_softplus(softplus(u))) - u) <= 1e-13 * (1.0 + abs(u))
    assert abs(float(softplus(inverse_softplus(theta))) - theta) <= 1e-13 * theta
    tree = {"a": jnp.asarray([theta, 1.0]), "b": (jnp.asarray(theta),)}
    back = to_constrained_positive(to_unconstrained_positive(tree))
    for x, y in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(tree)):
        np.testing.assert_allclose(x, y, rtol=1e-13)


@PROPERTY
@given(ell=ard, var=positive, a=positive)
def test_unconstrained_views_invert(ell, var, a):
    for name, make in KERNELS.items():
        kernel = make(ell, var, a)
        back = type(kernel).from_unconstrained(kernel.unconstrained())
        for x, y in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(kernel)):
            np.testing.assert_allclose(x, y, rtol=1e-12, err_msg=name)
    for lik in (L.Gaussian(noise_var=var), L.NegativeBinomial(dispersion=a)):
        back = lik.from_unconstrained(lik.unconstrained())
        for x, y in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(lik)):
            np.testing.assert_allclose(x, y, rtol=1e-12)


# --------------------------------------------------------------------------- save/load exactly
def _fit_bgplvm(Y, seed):
    return gplvm.BayesianGPLVM(n_components=2, n_inducing=4, max_iter=3, random_state=seed,
                               transform_max_iter=2, progress=False).fit(Y)


def _fit_dpgplvm(Y, seed):
    return gplvm.DPGPLVM(n_components=2, n_inducing=4, truncation=2, max_iter=2, n_warmup=1,
                         steps_per_update=1, merge_steps=1, init="random", random_state=seed,
                         progress=False).fit(Y)


def _fit_structured(Y, seed):
    grid = np.stack(np.meshgrid(np.arange(2.0), np.arange(3.0), indexing="ij"), -1)
    return gplvm.StructuredGPLVM(n_components=1, n_inducing=3, grid=grid.reshape(-1, 2),
                                 max_iter=3, random_state=seed, progress=False).fit(Y)


def _fit_rflvm(Y, seed):
    # a fixed kernel (the DP mixture's state round-trips in test_io)
    return gplvm.RFLVM(likelihood="poisson", sampler="gibbs", n_features=6, n_iter=4, burn_in=2,
                       n_chains=1, block_size=4, transform_steps=2, learn_kernel=False, progress=False,
                       random_state=seed).fit(np.round(np.abs(Y) * 3))


def _fit_blr(Y, seed):
    return gplvm.BayesianLinearRegression(n_features=6, n_restarts=0, max_iter=3,
                                          random_state=seed).fit(Y[:, :2], Y[:, 2])


def _fit_glm(Y, seed):
    return gplvm.BayesianGLM(n_features=6, n_mixture=2, n_iter=3, n_predict_samples=4,
                             random_state=seed, progress=False).fit(Y[:, :2], Y[:, 2])


FITS = {"BayesianGPLVM": _fit_bgplvm, "DPGPLVM": _fit_dpgplvm,
        "StructuredGPLVM": _fit_structured, "RFLVM": _fit_rflvm,
        "BayesianLinearRegression": _fit_blr, "BayesianGLM": _fit_glm}


def test_every_estimator_is_round_tripped():
    assert {cls.__name__ for cls in estimators()} == set(FITS)


@pytest.mark.parametrize("name", sorted(FITS))
@settings(max_examples=2, deadline=None, derandomize=True, database=None)
@given(Y=matrix((12, 6), -2.0, 2.0), seed=st.integers(0, 2**31 - 1))
def test_save_load_round_trips_exactly(name, Y, seed, tmp_path_factory):
    Y = Y + np.linspace(0.0, 1.0, 12)[:, None] * np.arange(1.0, 7.0)   # no constant column
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # a few iterations: not converged
        model = FITS[name](Y, seed)
    path = tmp_path_factory.mktemp("roundtrip") / "model.gplvm"
    model.save(path)
    loaded = gplvm.load(path)
    assert type(loaded) is type(model)
    assert sorted(vars(loaded)) == sorted(vars(model))
    for key in vars(model):
        assert_same(getattr(model, key), getattr(loaded, key), f"{name}.{key}")


DTYPES = [np.float64, np.float32, np.int64, np.int32, np.uint32, np.bool_, np.complex128]
_arrays = st.sampled_from(DTYPES).flatmap(lambda dtype: arrays(dtype, array_shapes(
    min_dims=0, max_dims=3, min_side=0, max_side=3)))    # NaN, ±inf, −0.0, subnormals included
_leaves = st.one_of(_arrays, _arrays.map(jnp.asarray), st.floats(), st.booleans(), st.none(),
                    st.integers(-2**62, 2**62), st.text(max_size=4))
STORED = st.recursive(_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.one_of(st.text(max_size=3), st.integers(-3, 3)), inner, max_size=3)),
    max_leaves=8)


@pytest.fixture(scope="module")
def small_model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gplvm.BayesianLinearRegression(n_features=6, n_restarts=0, max_iter=3).fit(
            X, X[:, 0])


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(value=STORED)
def test_any_stored_value_round_trips_bit_for_bit(small_model, value, tmp_path_factory):
    """Whatever a fitted attribute holds — arrays of any dtype and shape (NaN payloads, −0.0,
    subnormals), JAX arrays, nested tuples, lists and dicts with non-string keys — comes back
    with the same types and the same bits."""
    model = copy.copy(small_model)
    model.history_ = value      # a declared field (a file holds the declared fitted value only)
    path = tmp_path_factory.mktemp("value") / "model.gplvm"
    model.save(path)
    assert_same(value, gplvm.load(path).history_, "history_")

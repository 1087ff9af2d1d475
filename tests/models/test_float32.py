"""The float32 mode (issue 16, item 6): ``gplvm.config.set_precision`` / ``precision(...)``.

Every tolerance below is float32's round-off, eps = 2⁻²³ ≈ 1.2e-7, times a condition or size
factor stated where it is used; float64's own error is smaller by 2⁻²⁹ and is neglected.  Each
test restores float64 in ``finally`` (the ``float64_after`` fixture), so a failure cannot leave
the other tests of the process in float32.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplvm
from gplvm.random import as_key
from gplvm.features import RandomFourierFeatures
from gplvm.inference.optimise import _jitted
from gplvm.kernels import RBF
from gplvm.linalg import jitter_floor
from gplvm.models.gplvm_family.bound import negative_bound

EPS32 = float(np.finfo(np.float32).eps)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(autouse=True)
def float64_after():
    try:
        yield
    finally:
        gplvm.config.set_precision("float64")


def _float32(tree):
    """The same numbers in float32 mode's dtypes: floating leaves as float32, integer arrays
    (index sets) as int32."""
    def cast(leaf):
        arr = np.asarray(leaf)
        if arr.dtype.kind == "f":
            return jnp.asarray(arr, jnp.float32)
        return jnp.asarray(arr, jnp.int32) if arr.dtype.kind in "iu" else leaf
    return jax.tree_util.tree_map(cast, tree)


def _flat(tree):
    return np.concatenate([np.ravel(np.asarray(x, float)) for x in jax.tree_util.tree_leaves(
        tree)])


def _planted(noise=0.3, n=40, d=6, seed=0):
    """Y = tanh(X) W + noise: a 2-D latent structure well above the noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return np.tanh(X) @ rng.normal(size=(2, d)) + noise * rng.normal(size=(n, d))


def test_switching_precision_compiles_again_and_restores_float64_bit_for_bit():
    """JAX keys its jit caches on ``jax_enable_x64``: the float64 program is not reused in
    float32 (the result is float32 and rounded as float32), and float64 comes back exact."""
    f = jax.jit(lambda x: x / 3.0 + jnp.exp(-x))
    x = np.linspace(0.1, 2.0, 7)
    before = np.asarray(f(x))
    assert before.dtype == np.float64 and gplvm.config.get_precision() == "float64"
    with gplvm.config.precision("float32"):
        assert gplvm.config.get_precision() == "float32"
        low = np.asarray(f(x))
        assert jnp.zeros(1).dtype == jnp.float32
    assert low.dtype == np.float32 and not np.array_equal(low, before)
    # each of the 3 operations rounds once (and x is rounded on the way in): 4 eps
    np.testing.assert_allclose(low, before, rtol=4 * EPS32)
    np.testing.assert_array_equal(np.asarray(f(x)), before)
    with pytest.raises(RuntimeError), gplvm.config.precision("float32"):
        raise RuntimeError("a failing fit")
    assert gplvm.config.get_precision() == "float64"      # restored on the way out
    with pytest.raises(ValueError, match="'float32'"):
        gplvm.config.set_precision("half")
    assert jitter_floor(1.0, np.float64) == 0.0           # float64's jitter policy unchanged


def _bgplvm_start(Y, M):
    """The Bayesian GPLVM's initial parameters and problem (float64), with the float32 jitter
    floor in K_uu so that both precisions evaluate the same function."""
    model = gplvm.BayesianGPLVM(n_components=2, n_inducing=M, init_X_var=0.1, progress=False)
    Yv, _ = model._validate_common(Y, None, None)
    mean, std = model._standardisation(Yv)
    u, problem = model._initial((Yv - mean) / std, None, None, as_key(0))
    return u, problem._replace(jitter=jitter_floor(1.0, np.float32))


def test_bgplvm_bound_and_gradient_in_float32_match_float64():
    """The collapsed bound and its gradient at the same parameters.

    Tolerance: the bound's log-determinant and quadratic form go through the Cholesky factor of
    A = I + β L⁻¹Ψ2L⁻ᵀ, whose condition number is at most 1 + β·tr(L⁻¹Ψ2L⁻ᵀ) ≤ 1 + β N σ_f²
    (each row adds at most k(x, x) = σ_f² to the trace); float32 solves and log-determinants
    carry a relative error of eps times that condition number (≈ 4.8e-4 here)."""
    Y = _planted()
    u, problem = _bgplvm_start(Y, M=6)
    # the same compiled value-and-gradient as the L-BFGS-B fits of the next test
    value_and_grad = _jitted(negative_bound, "lbfgsb", None, None)[0]
    v64, g64 = value_and_grad(u, (problem,))
    beta = 1.0 / float(jax.nn.softplus(u["noise_var"]))
    sigma_f2 = float(problem.kernel.from_unconstrained(u["kernel"]).variance)
    rtol = EPS32 * (1.0 + beta * Y.shape[0] * sigma_f2)
    with gplvm.config.precision("float32"):
        v32, g32 = value_and_grad(_float32(u), (_float32(problem),))
    assert v32.dtype == jnp.float32 and all(g.dtype == jnp.float32 for g in
                                            jax.tree_util.tree_leaves(g32))
    assert abs(float(v32) - float(v64)) <= rtol * abs(float(v64))
    G32, G64 = _flat(g32), _flat(g64)
    assert np.linalg.norm(G32 - G64) <= rtol * np.linalg.norm(G64)
    v64_again, g64_again = value_and_grad(u, (problem,))      # float64 restored exactly
    assert float(v64_again) == float(v64)
    np.testing.assert_array_equal(_flat(g64_again), G64)


def test_bgplvm_fit_in_float32_reaches_the_float64_bound():
    """A short L-BFGS-B fit in each precision; the float32 model is float32 throughout and its
    bound, re-evaluated in float64 at its own parameters, is within 0.5% of the float64 fit's.

    Tolerance: float32's objective carries round-off of about eps·(1 + βNσ_f²) ≈ 5e-4 relative
    (previous test), so the optimiser cannot tell apart parameters whose bounds differ by less,
    and the jitter floor (3.5e-4 of K_uu's diagonal) changes the bound by a relative amount of
    the same order; 0.5% is ten times their sum."""
    Y = _planted()
    kw = dict(n_components=2, n_inducing=6, init_X_var=0.1, optimizer="lbfgsb", max_iter=60,
              progress=False)
    full = gplvm.BayesianGPLVM(**kw).fit(Y)
    with gplvm.config.precision("float32"):
        low = gplvm.BayesianGPLVM(**kw).fit(Y)
    assert low.X_mean_.dtype == low.X_var_.dtype == np.float32
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree_util.tree_leaves(low.params_))
    assert np.all(np.isfinite(low.X_mean_)) and low.jitter_ == jitter_floor(1.0, np.float32)
    u64 = jax.tree_util.tree_map(lambda a: jnp.asarray(np.asarray(a, float)), low.params_)
    value_and_grad = _jitted(negative_bound, "lbfgsb", None, None)[0]
    reached = -float(value_and_grad(u64, (full._problem._replace(jitter=low.jitter_),))[0])
    assert abs(reached - full.elbo_) <= 5e-3 * abs(full.elbo_)


def test_bayesian_linear_regression_predicts_the_same_in_float32():
    """Fixed hyper-parameters and the same random features: the posterior mean and standard
    deviation of the predictions.

    Tolerance: the weights solve A w = Φᵀy/σ² with A = ΦᵀΦ/σ² + I/s²; float32's solution carries
    a relative error of eps·cond(A) (computed here in float64), and the features themselves
    (cosines of float32 products) one of a few eps; 10·eps·cond(A) covers both."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(50, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=50)
    features = RandomFourierFeatures.create(RBF(lengthscale=0.7), 20, 1, jax.random.PRNGKey(3))
    kw = dict(noise_var=0.01, prior_var=1.0, optimize=False, standardize=False)
    full = gplvm.BayesianLinearRegression(features=features, **kw).fit(X, y)
    Phi = np.asarray(features(jnp.asarray(X)))
    A = Phi.T @ Phi / 0.01 + np.eye(Phi.shape[1]) / 1.0
    tol = 10 * EPS32 * np.linalg.cond(A)
    X_new = np.linspace(-2, 2, 9)[:, None]
    mean64, std64 = full.predict(X_new, return_std=True)
    with gplvm.config.precision("float32"):
        low = gplvm.BayesianLinearRegression(features=_float32(features), **kw).fit(X, y)
        mean32, std32 = low.predict(X_new, return_std=True)
    assert mean32.dtype == std32.dtype == np.float32
    np.testing.assert_allclose(mean32, mean64, atol=tol * np.max(np.abs(mean64)))
    np.testing.assert_allclose(std32, std64, rtol=tol)


def test_rflvm_gaussian_runs_in_float32():
    """A few Gibbs sweeps of the Gaussian RFLVM in float32: every sample finite and float32,
    and the posterior mean prediction recovers the planted signal F = sin(2x) w.

    Statistical tolerance (no float64 chain to compare with: float32 and float64 draw different
    random numbers, and a second chain would double the test's compilation): a model that has
    learned F predicts it with a mean squared error of the order of the noise variance σ² =
    0.01 (the posterior mean averages the noise of each entry over its neighbours); 0.25·Var(F)
    (≈ 0.045 here, 4.5 σ²; seeds 0–3 gave 0.009–0.015) fails when the structure is lost —
    predicting the column means gives Var(F) — and leaves room for the Monte Carlo error of 4
    kept sweeps.  The kernel is fixed (``learn_kernel=False``), which halves the compilation."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 1))
    F = np.sin(2 * X) @ rng.normal(size=(1, 4))
    Y = F + 0.1 * rng.normal(size=F.shape)
    kw = dict(n_components=1, likelihood="gaussian", n_features=8, n_iter=8, burn_in=4,
              n_chains=1, sampler="gibbs", map_sweeps=0, learn_kernel=False, progress=False, random_state=0)
    with gplvm.config.precision("float32"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # the R-hat of so short a chain
        model = gplvm.RFLVM(**kw).fit(Y)
        F_hat = model.predict(model.X_mean_)
    for name in ("X_samples_", "W_samples_", "beta_samples_", "X_mean_", "noise_var_"):
        value = getattr(model, name)
        assert value.dtype == np.float32 and np.all(np.isfinite(value)), name
    assert F_hat.dtype == np.float32
    assert np.mean((F_hat - F) ** 2) < 0.25 * np.mean(np.var(F, axis=0))


def test_count_samplers_refuse_float32_instead_of_drawing_wrong_numbers():
    """The Pólya-gamma sampler packs per-class counts into 64-bit integers (six 10-bit fields),
    which JAX's float32 mode would silently truncate to 32 bits: the samplers and the RFLVM
    likelihoods that use them raise a ValueError naming the fix, before any computation (the
    Gaussian RFLVM, which draws none, runs in float32 in the test above)."""
    from gplvm.samplers import (chinese_restaurant_table, polya_gamma, polya_gamma_one,
                                sample_nb_dispersion)

    Y = np.arange(24.0).reshape(8, 3) % 4
    key = jax.random.PRNGKey(0)
    with gplvm.config.precision("float32"):
        for draw in (lambda: polya_gamma(key, 1.0, 0.5), lambda: polya_gamma_one(key, 0.5),
                     lambda: chinese_restaurant_table(key, 3.0, 2.0),
                     lambda: sample_nb_dispersion(key, Y, np.zeros((8, 3)), np.ones(3), 1.0, 1.0)):
            with pytest.raises(ValueError, match="float64 only.*precision"):
                draw()
        for likelihood in ("negative_binomial", "bernoulli", "binomial", "multinomial"):
            with pytest.raises(ValueError, match="float64 only"):
                gplvm.RFLVM(likelihood=likelihood, progress=False).fit(np.minimum(Y, 1.0))


def test_every_estimator_computes_in_its_fitted_precision():
    """Precision follows the model (issue 31): the methods through which a fitted model
    computes (new rows, predictions, expectations, draws) are wrapped by
    ``in_model_precision`` in every estimator, so none of them mixes a float32 model with
    float64 inputs or the reverse.  That the wrapping gives the fit's numbers exactly, both
    ways and after load, is checked on the Bayesian GPLVM, the RFLVM and both supervised
    models by tests/project/test_robustness_audit.py (``unclear_precision_follows_the_model``)."""
    family = ("_standardise_new", "_check_X", "_infer_new", "_predict_fitted", "_expected_y",
              "_sample_y")
    methods = {gplvm.BayesianGPLVM: family, gplvm.DPGPLVM: family, gplvm.StructuredGPLVM: family,
               gplvm.RFLVM: ("transform", "predict", "impute", "score", "sample"),
               gplvm.BayesianLinearRegression: ("predict", "predict_quantile",
                                                "predict_interval", "weights_posterior"),
               gplvm.BayesianGLM: ("predict", "predict_proba", "predict_quantile",
                                   "predict_interval", "score", "log_predictive_density")}
    for cls, names in methods.items():
        assert isinstance(getattr(cls, "_precision_attribute", "X_mean_"), str)
        for name in names:
            method = getattr(cls, name)
            assert getattr(method, "__wrapped__", None) is not None, (cls.__name__, name)
            assert method.__qualname__.endswith(name)

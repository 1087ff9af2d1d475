"""BayesianLinearRegression (revrand's StandardLinearModel, seed 002 §1.2).

Exact identities (dense Gaussian marginal likelihood from SciPy, finite differences, the closed
posterior), agreement with exact GP regression as M grows (scikit-learn's
GaussianProcessRegressor), planted noise level and calibrated intervals, a fit that does not
depend on y's units, rows independent of the other rows of a call (bit for bit), the
ConvergenceWarning, input validation and the scikit-learn contract.

scikit-learn's estimator checks (``parametrize_with_checks``) run on a model with 10 features and
``optimize=False`` (exact conditioning, no L-BFGS: its compiled step takes seconds per data shape
and the checks use a dozen shapes).  One check does not apply to that setting, and is marked as
an expected failure: ``check_non_transformer_estimators_n_iter`` asks a model with a ``max_iter``
parameter for ``n_iter_ >= 1``, but ``optimize=False`` runs no iteration, so ``n_iter_`` is 0 by
design; :func:`test_max_iter_warning_and_n_iter` runs that check on an optimising model, where it
passes.

``check_array_api_input`` is left out: the models compute with JAX, not through the
array-API namespace of their input, so passing CuPy or PyTorch arrays does not apply (scikit-learn
itself skips the check unless SCIPY_ARRAY_API=1).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal, norm
from sklearn.base import clone
from sklearn.datasets import load_diabetes, load_iris
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ConstantKernel
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import (
    check_non_transformer_estimators_n_iter, parametrize_with_checks,
)

from gplvm import BayesianLinearRegression
from gplvm.features import Bias, Concat, RandomFourierFeatures
from gplvm.kernels import RBF, Matern32
from gplvm.objectives import linear_model as lm


def _composite_map(key, input_dim=2):
    """RBF (ARD) + Matérn-3/2 random features + a bias column: three blocks."""
    k1, k2 = jax.random.split(key)
    return Concat.of([
        RandomFourierFeatures.create(RBF(lengthscale=jnp.array([0.7, 1.3]), variance=1.0), 20,
                                     input_dim, k1),
        RandomFourierFeatures.create(Matern32(lengthscale=0.9, variance=1.0), 10, input_dim, k2),
        Bias(in_dim=input_dim),
    ])


@pytest.fixture(scope="module", params=[40, 20], ids=["primal", "dual"])
def small_problem(request):
    """M = 31 features; N = 40 takes the primal (M × M) route, N = 20 the dual (N × N) one."""
    n = request.param
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)
    fmap = _composite_map(jax.random.PRNGKey(3))
    prior = np.repeat([0.8, 0.3, 2.0], fmap.blocks)
    return X, y, fmap, prior, 0.05


def _dense_lml(Phi, y, prior, noise):
    cov = (Phi * prior) @ Phi.T + noise * np.eye(len(y))
    return multivariate_normal(mean=np.zeros(len(y)), cov=cov).logpdf(y)


def test_log_marginal_likelihood_equals_dense_gaussian(small_problem):
    X, y, fmap, prior, noise = small_problem
    Phi = np.asarray(fmap(X))
    woodbury = float(jax.jit(lm.log_marginal_likelihood)(Phi, y, prior, noise))
    assert abs(woodbury - _dense_lml(Phi, y, prior, noise)) < 1e-8
    # the estimator reports the same number at given hyper-parameters (no optimisation)
    model = BayesianLinearRegression(features=fmap, noise_var=noise, prior_var=[0.8, 0.3, 2.0],
                                     optimize=False, standardize=False).fit(X, y)
    assert abs(model.log_marginal_likelihood_ - _dense_lml(Phi, y, prior, noise)) < 1e-8


def test_log_marginal_likelihood_in_original_units_when_standardising(small_problem):
    # standardised fit: LML of the centred y in y's units = LML(ys) − N log sd(y)
    X, y, fmap, prior, noise = small_problem
    model = BayesianLinearRegression(features=fmap, noise_var=noise, prior_var=[0.8, 0.3, 2.0],
                                     optimize=False, standardize=True).fit(X, y)
    Phi = np.asarray(fmap(X))
    assert abs(model.log_marginal_likelihood_ - _dense_lml(Phi, y - y.mean(), prior, noise)) \
        < 1e-8


def test_log_marginal_likelihood_gradients_match_finite_differences(small_problem):
    """d(eq. 14)/d log θ for σ², the three prior variances and the three length-scales."""
    X, y, fmap, _, _ = small_problem
    rbf, mat, bias = fmap.maps

    def lml(log_theta):
        noise, p1, p2, p3, l1, l2, l3 = jnp.exp(log_theta)
        maps = (RandomFourierFeatures(kernel=RBF(lengthscale=jnp.stack([l1, l2]), variance=1.0),
                                      eps=rbf.eps),
                RandomFourierFeatures(kernel=Matern32(lengthscale=l3, variance=1.0), eps=mat.eps),
                bias)
        prior = jnp.repeat(jnp.stack([p1, p2, p3]), jnp.asarray(fmap.blocks),
                           total_repeat_length=fmap.n_features)
        return lm.log_marginal_likelihood(Concat(maps=maps)(X), jnp.asarray(y), prior, noise)

    theta = jnp.log(jnp.array([0.05, 0.8, 0.3, 2.0, 0.7, 1.3, 0.9]))
    grad = np.asarray(jax.jit(jax.grad(lml))(theta))
    value = jax.jit(lml)
    h = 1e-5
    fd = np.array([(float(value(theta.at[i].add(h))) - float(value(theta.at[i].add(-h)))) / (2 * h)
                   for i in range(theta.size)])
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)


def test_posterior_and_predictive_match_closed_forms(small_problem):
    """m, C below eq. 14 and the predictive moments of eqs. 16–17, by dense linear algebra."""
    X, y, fmap, prior, noise = small_problem
    Phi = np.asarray(fmap(X))
    C = np.linalg.inv(np.diag(1 / prior) + Phi.T @ Phi / noise)
    m = C @ Phi.T @ y / noise
    model = BayesianLinearRegression(features=fmap, noise_var=noise, prior_var=[0.8, 0.3, 2.0],
                                     optimize=False, standardize=False).fit(X, y)
    m_fit, C_fit = model.weights_posterior()
    np.testing.assert_allclose(m_fit, m, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(C_fit, C, rtol=1e-8, atol=1e-10)
    Xs = np.random.default_rng(1).normal(size=(7, 2))
    Phis = np.asarray(fmap(Xs))
    mean, sd = model.predict(Xs, return_std=True)
    np.testing.assert_allclose(mean, Phis @ m, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(sd**2, noise + np.einsum("ij,jk,ik->i", Phis, C, Phis), rtol=1e-8)
    # Gaussian quantiles (eq. 15): mean + sd Φ⁻¹(q)
    q = model.predict_quantile(Xs, [0.05, 0.5, 0.975])
    np.testing.assert_allclose(q, mean[:, None] + sd[:, None] * norm.ppf([0.05, 0.5, 0.975]),
                               rtol=1e-12)


def _synthetic_1d(seed=0, n=200):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 1))
    return X, np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=n)


def _gp_agreement(X_train, y_train, X_test, amplitude, lengthscale, noise, seed):
    """RMS and max |mean difference| between M = 2000 features and the exact GP, in sd(y)."""
    kernel = ConstantKernel(amplitude, "fixed") * SkRBF(lengthscale, "fixed")
    gp = GaussianProcessRegressor(kernel, alpha=noise, optimizer=None).fit(X_train, y_train)
    fmap = RandomFourierFeatures.create(RBF(lengthscale=lengthscale, variance=1.0), 2000,
                                        X_train.shape[1], jax.random.PRNGKey(seed))
    blr = BayesianLinearRegression(features=fmap, prior_var=amplitude, noise_var=noise,
                                   optimize=False, standardize=False).fit(X_train, y_train)
    diff = (blr.predict(X_test) - gp.predict(X_test)) / np.std(y_train)
    return np.sqrt(np.mean(diff**2)), np.max(np.abs(diff))


@pytest.mark.parametrize("dataset", ["synthetic_1d", "diabetes"])
def test_predictive_mean_agrees_with_exact_gp(dataset):
    """Same kernel amplitude·RBF(ℓ) + noise: random features (M = 2000) ≈ exact GP regression.

    Hyper-parameters: for the 1-D set the generating noise (0.3²) and a length-scale that fits
    sin(2x); for diabetes (centred, scaled y) values near scikit-learn's own type-II ML estimate
    (1.12² · RBF(0.3) + 0.47).  Both models use the same ones.
    """
    if dataset == "synthetic_1d":
        X, y = _synthetic_1d()
        X_train, y_train, X_test = X, y, np.linspace(-3, 3, 101)[:, None]
        hyper = dict(amplitude=1.0, lengthscale=0.5, noise=0.09)
    else:
        X, y = load_diabetes(return_X_y=True)
        y = (y - y.mean()) / y.std()
        X_train, y_train, X_test = X[:300], y[:300], X[300:]
        hyper = dict(amplitude=1.25, lengthscale=0.3, noise=0.47)
    results = np.array([_gp_agreement(X_train, y_train, X_test, seed=s, **hyper)
                        for s in range(5)])
    rms, largest = np.median(results, axis=0)
    assert rms <= 0.05 and largest <= 0.15, (rms, largest)


@pytest.fixture(scope="module")
def gaussian_data():
    """y = sin(2x) + x/2 + N(0, 0.2²): 1000 training and 1000 held-out points."""
    rng = np.random.default_rng(42)
    X = rng.uniform(-3, 3, size=(2000, 1))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 0] + 0.2 * rng.normal(size=2000)
    return X[:1000], y[:1000], X[1000:], y[1000:]


def _fit(X, y):
    """The optimised fit of these tests; L-BFGS converges within max_iter, so no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return BayesianLinearRegression(n_features=100, n_restarts=1, max_iter=200,
                                        random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def fitted(gaussian_data):
    X, y, _, _ = gaussian_data
    return _fit(X, y)


def test_type_ii_ml_recovers_noise_and_improves_evidence(gaussian_data, fitted):
    X, y, _, _ = gaussian_data
    # planted noise variance 0.04; its ML estimate has relative sd ≈ sqrt(2/N) ≈ 4.5%
    assert abs(fitted.noise_var_ / 0.04 - 1) < 0.2
    assert fitted.converged_
    start = BayesianLinearRegression(n_features=100, optimize=False, random_state=0).fit(X, y)
    assert fitted.log_marginal_likelihood_ > start.log_marginal_likelihood_
    assert fitted.n_iter_ > 0 and fitted.history_.shape == (fitted.n_iter_,)


def test_interval_coverage_on_held_out_gaussian_data(gaussian_data, fitted):
    """The true model's 90% interval covers exactly 0.9; ours within 3 binomial sd of it."""
    _, _, X_test, y_test = gaussian_data
    lo, hi = fitted.predict_interval(X_test, coverage=0.9)
    covered = np.mean((y_test >= lo) & (y_test <= hi))
    assert abs(covered - 0.9) <= 3 * np.sqrt(0.9 * 0.1 / len(y_test)), covered


def test_same_random_state_same_result(gaussian_data, fitted):
    X, y, X_test, _ = gaussian_data
    again = BayesianLinearRegression(n_features=100, n_restarts=1, max_iter=200,
                                     random_state=0).fit(X, y)
    np.testing.assert_array_equal(again.predict(X_test), fitted.predict(X_test))
    other = BayesianLinearRegression(n_features=100, optimize=False, random_state=1).fit(X, y)
    same_seed = BayesianLinearRegression(n_features=100, optimize=False, random_state=0).fit(X, y)
    assert not np.array_equal(other.features_.eps, same_seed.features_.eps)


def test_sklearn_contract(gaussian_data, fitted):
    X, y, X_test, y_test = gaussian_data
    model = BayesianLinearRegression(n_features=50, noise_var=0.1, random_state=3)
    params = model.get_params()
    assert params["n_features"] == 50 and params["noise_var"] == 0.1
    copy = clone(model)
    assert copy.get_params() == params and not hasattr(copy, "posterior_")
    with pytest.raises(NotFittedError):
        model.predict(X_test)
    assert fitted.score(X_test, y_test) > 0.9    # R² (RegressorMixin); sd(noise)/sd(y) ≈ 0.2
    with pytest.raises(ValueError, match="X has 2 features, but BayesianLinearRegression is "
                                         "expecting 1"):
        fitted.predict(np.zeros((3, 2)))
    tags = get_tags(model)
    assert tags.estimator_type == "regressor" and not tags.input_tags.allow_nan
    assert BayesianLinearRegression().random_state == 0


@pytest.mark.parametrize("scale, shift", [(1.0, 5000.0), (1000.0, 0.0)])
def test_fit_does_not_depend_on_the_units_of_y(gaussian_data, fitted, scale, shift):
    """``standardize=True`` (the default): on a·y + b the standardised targets and the initial
    values (fractions of Var(y)) equal those of y to rounding, so L-BFGS takes the same path;
    held-out R² agrees to 1e-6 and predictions, noise and evidence move with y's units (the
    evidence by −N log a, the Jacobian)."""
    X, y, X_test, y_test = gaussian_data
    model = _fit(X, scale * y + shift)
    assert model.score(X_test, scale * y_test + shift) == pytest.approx(
        fitted.score(X_test, y_test), abs=1e-6)
    mean, sd = fitted.predict(X_test, return_std=True)
    mean_t, sd_t = model.predict(X_test, return_std=True)
    np.testing.assert_allclose(mean_t, scale * mean + shift, rtol=0, atol=1e-6 * scale)
    np.testing.assert_allclose(sd_t, scale * sd, rtol=1e-6)
    assert model.noise_var_ == pytest.approx(scale**2 * fitted.noise_var_, rel=1e-6)
    assert model.log_marginal_likelihood_ == pytest.approx(
        fitted.log_marginal_likelihood_ - len(y) * np.log(scale), abs=1e-6)


def test_each_row_depends_only_on_itself(gaussian_data, fitted):
    """A row's prediction equals, bit for bit, that of the row alone and of the rows reversed
    (300 rows: rows of every block of the evaluation, and the last one padded)."""
    X = gaussian_data[2][:300]
    mean, sd = fitted.predict(X, return_std=True)
    q = fitted.predict_quantile(X, [0.05, 0.95])
    for i in (0, 127, 128, 200, 299):
        m1, s1 = fitted.predict(X[i:i + 1], return_std=True)
        assert (m1[0], s1[0]) == (mean[i], sd[i])
        np.testing.assert_array_equal(fitted.predict_quantile(X[i:i + 1], [0.05, 0.95])[0], q[i])
    reversed_mean, reversed_sd = fitted.predict(X[::-1], return_std=True)
    np.testing.assert_array_equal(reversed_mean, mean[::-1])
    np.testing.assert_array_equal(reversed_sd, sd[::-1])


def test_max_iter_warning_and_n_iter():
    """Three L-BFGS iterations cannot meet the convergence test (10 quiet iterations): a
    ConvergenceWarning naming max_iter, converged_ False; and scikit-learn's n_iter_ check."""
    X, y = load_iris(return_X_y=True)
    model = BayesianLinearRegression(n_features=10, max_iter=3, n_restarts=0)
    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        model.fit(X, y)
    assert model.n_iter_ == 3 and not model.converged_
    with pytest.warns(ConvergenceWarning):
        check_non_transformer_estimators_n_iter("BayesianLinearRegression", model)


#: checks that do not apply, and why (left out of the parametrisation, not expected to fail)
NOT_APPLICABLE = {
    "check_array_api_input": "the models compute with JAX (see the module docstring)",
    "check_non_transformer_estimators_n_iter":
        "optimize=False runs no iteration (n_iter_ = 0 by design); the check runs on an "
        "optimising model in test_max_iter_warning_and_n_iter",
}


def _estimator_checks(estimators):
    """``parametrize_with_checks`` less the checks of ``NOT_APPLICABLE``."""
    mark = parametrize_with_checks(estimators)

    def name(param):
        check = (param.values if hasattr(param, "values") else param)[1]
        return getattr(check, "func", check).__name__

    keep = [param for param in mark.args[1] if name(param) not in NOT_APPLICABLE]
    return pytest.mark.parametrize(mark.args[0], keep, **mark.kwargs)


@_estimator_checks([BayesianLinearRegression(n_features=10, optimize=False)])
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("case", ["nan_X", "inf_y", "nan_y", "lengths", "1d_X", "neg_noise",
                                  "bad_prior_blocks", "one_sample", "constant_y"])
def test_bad_input_raises_before_computation(case, forbid_computation):
    import gplvm.models._blr_fit as core
    import gplvm.models.linear_regression as module

    forbid_computation(module, "default_features")
    forbid_computation(core, "minimise")
    X, y = np.zeros((10, 2)), np.arange(10.0)
    kwargs = {}
    if case == "nan_X":
        X[3, 1] = np.nan
    elif case == "inf_y":
        y[2] = np.inf
    elif case == "nan_y":
        y[0] = np.nan
    elif case == "lengths":
        y = y[:-1]
    elif case == "1d_X":
        X = X[:, 0]
    elif case == "neg_noise":
        kwargs = dict(noise_var=-1.0, features=Bias(in_dim=2))
    elif case == "bad_prior_blocks":
        kwargs = dict(prior_var=[1.0, 2.0], features=Bias(in_dim=2))
    elif case == "one_sample":
        X, y = X[:1], y[:1]
    else:
        y = np.full(10, 3.0)
    with pytest.raises(ValueError):
        BayesianLinearRegression(**kwargs).fit(X, y)

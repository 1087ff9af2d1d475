"""Bayesian GPLVM estimator: identities, planted structure, missing data, new rows, contract."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from sklearn.exceptions import NotFittedError

from gplvm import BayesianGPLVM
from gplvm.baselines import ColumnMeanImputer
from gplvm.expectations import psi_statistics
from gplvm.metrics import affine_r2
from gplvm.models import bgplvm as bgplvm_module
from gplvm.models._bgplvm_init import initial_variances
from gplvm.objectives import collapsed, new_rows


def planted(n=80, d=12, noise=0.05, seed=0):
    """Y = f(t) for a 1-D latent t through smooth random functions (an S-shaped curve)."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(-2, 2, n))
    freqs, phases = rng.normal(size=d), rng.uniform(0, 2 * np.pi, d)
    Y = np.sin(np.outer(t, freqs) + phases) + noise * rng.normal(size=(n, d))
    return Y, t


@pytest.fixture(scope="module")
def fitted():
    Y, t = planted()
    model = BayesianGPLVM(n_components=2, n_inducing=12, max_iter=300, random_state=0,
                          progress=False).fit(Y)
    return model, Y, t


def test_recovers_planted_one_dimensional_latent(fitted):
    model, Y, t = fitted
    rel = model.relevance_
    main = int(np.argmax(rel))
    # a smooth 1-D curve: the dominant latent dimension is an (approximately monotone) map of t
    r2 = affine_r2(model.X_mean_[:, [main]], np.column_stack([t, t**2, t**3]), "variance_weighted")
    assert abs(np.corrcoef(model.X_mean_[:, main], t)[0, 1]) > 0.9 or r2 > 0.9
    recon = model.predict(model.X_mean_)
    assert np.sqrt(np.mean((recon - Y) ** 2)) < 0.2


def test_new_row_bound_at_optimal_q_u_equals_collapsed_bound(fitted):
    """Σ_n L_n − KL(q(U) ‖ p(U)) − KL(q(X)) at the optimal q(U) is the collapsed bound."""
    model, Y, _ = fitted
    static = model._static
    X_mean, X_var = jnp.asarray(model.X_mean_), jnp.asarray(model.X_var_)
    Z, kern = jnp.asarray(model.Z_), model.kernel_
    fixed = model._fixed
    N = X_mean.shape[0]
    observed = jnp.ones_like(static.Y0)
    R = new_rows.row_matrices(fixed, observed)
    psi0, psi1, psi2 = psi_statistics(kern, Z, X_mean, X_var, rule=model.rule_,
                                      weights=jnp.eye(N))
    ell = new_rows.expected_log_likelihood(fixed, static.Y0, observed, R, psi0, psi1, psi2)
    Kuu = np.asarray(kern(Z)) + model.jitter_ * np.eye(Z.shape[0])
    U_mean = np.asarray(Kuu @ fixed.V)
    Sigma_u = np.asarray(Kuu @ fixed.H[0] @ Kuu)
    M, D = U_mean.shape
    Kinv = np.linalg.inv(Kuu)
    kl_u = 0.5 * (D * np.trace(Kinv @ Sigma_u) + np.sum(U_mean * (Kinv @ U_mean)) - D * M
                  + D * (np.linalg.slogdet(Kuu)[1] - np.linalg.slogdet(Sigma_u)[1]))
    kl_x = float(collapsed.kl_standard_normal(X_mean, X_var))
    np.testing.assert_allclose(float(ell) - kl_u - kl_x, model.elbo_, rtol=1e-8)


def test_transform_of_training_rows_finds_their_latents(fitted):
    model, Y, _ = fitted
    X_new = model.transform(Y[:15])
    scale = np.ptp(model.X_mean_, axis=0).max()
    assert np.max(np.abs(X_new - model.X_mean_[:15])) < 0.05 * scale


def test_impute_beats_column_means_on_missing_entries():
    Y, _ = planted(n=90, seed=3)
    rng = np.random.default_rng(4)
    mask = rng.random(Y.shape) < 0.2
    Y_missing = np.where(mask, np.nan, Y)
    model = BayesianGPLVM(n_components=2, n_inducing=12, max_iter=300, random_state=0,
                          progress=False).fit(Y_missing)
    err_model = np.sqrt(np.mean((model.impute(Y_missing)[mask] - Y[mask]) ** 2))
    err_mean = np.sqrt(np.mean((ColumnMeanImputer().fit(Y_missing).impute(Y_missing)[mask]
                                - Y[mask]) ** 2))
    assert err_model < 0.5 * err_mean


def test_same_random_state_same_result():
    Y, _ = planted(n=40, d=6)
    a = BayesianGPLVM(n_components=2, n_inducing=6, max_iter=30, random_state=3,
                      progress=False).fit(Y)
    b = BayesianGPLVM(n_components=2, n_inducing=6, max_iter=30, random_state=3,
                      progress=False).fit(Y)
    np.testing.assert_array_equal(a.X_mean_, b.X_mean_)
    np.testing.assert_array_equal(a.sample(5)[0], b.sample(5)[0])


def test_sample_and_predict_shapes_and_units(fitted):
    model, Y, _ = fitted
    Ys, Xs = model.sample(7)
    assert Ys.shape == (7, Y.shape[1]) and Xs.shape == (7, 2)
    mean, var = model.predict(model.X_mean_[:5], return_var=True)
    assert mean.shape == var.shape == (5, Y.shape[1]) and np.all(var > 0)
    # noise variance reported in original units: the standardised value times the column variance
    np.testing.assert_allclose(model.noise_var_, model.noise_var_std_ * Y.std(0) ** 2)


@pytest.mark.parametrize("bad,match", [
    (np.full((10, 3), np.inf), "infinite"),
    (np.ones(10), "1-D"),
    (np.column_stack([np.ones(10), np.arange(10.0)]), "constant"),
    (np.arange(4.0).reshape(2, 2), "rows"),
])
def test_bad_input_raises_before_computation(bad, match):
    with pytest.raises(ValueError, match=match):
        BayesianGPLVM(n_components=2, progress=False).fit(bad)


@pytest.mark.parametrize("value", [0.0, -0.1, np.nan])
def test_bad_initial_variance_raises_before_computation(value, forbid_computation):
    Y = np.random.default_rng(0).normal(size=(10, 3))
    forbid_computation(bgplvm_module, "initial_latents", "minimise")
    with pytest.raises(ValueError, match="init_X_var"):
        BayesianGPLVM(init_X_var=value, progress=False).fit(Y)


def test_initial_variances_gpy_draws_and_constant():
    """Default: independent U(0, 0.1) draws (GPy's); a number gives that constant."""
    key = jax.random.PRNGKey(0)
    draws = initial_variances((200, 10), None, key)
    # a KS test against U(0, 0.1) (the 1e-6 floor moves at most 1e-5 of the mass)
    assert stats.kstest(draws.ravel(), stats.uniform(0, 0.1).cdf).pvalue > 1e-3
    assert draws.min() >= 1e-6
    np.testing.assert_array_equal(draws, initial_variances((200, 10), None, key))
    np.testing.assert_array_equal(initial_variances((3, 2), 0.25, key), np.full((3, 2), 0.25))


def test_all_missing_row_and_unfitted_use():
    Y = np.random.default_rng(0).normal(size=(10, 3))
    Y[2] = np.nan
    with pytest.raises(ValueError, match="no observed entry"):
        BayesianGPLVM(progress=False).fit(Y)
    with pytest.raises(NotFittedError):
        BayesianGPLVM().transform(Y)

"""Bayesian GPLVM estimator: identities, planted structure, missing data, new rows, contract."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from sklearn.exceptions import ConvergenceWarning, NotFittedError

import gplvm
from gplvm import BayesianGPLVM
from gplvm import DroppedColumnsWarning
from gplvm.baselines import ColumnMeanImputer
from gplvm.expectations import psi_statistics
from gplvm.inference import OptimOptions, minimise
from gplvm.metrics import affine_r2
from gplvm.models.gplvm_family import collapsed_run as bgplvm_module  # its optimiser runs
from gplvm.models.gplvm_family.init import initial_variances
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
    Y0 = model._problem.Y0
    X_mean, X_var = jnp.asarray(model.X_mean_), jnp.asarray(model.X_var_)
    Z, kern = jnp.asarray(model.Z_), model.kernel_
    fmap = model.fitted_.map
    N = X_mean.shape[0]
    observed = jnp.ones_like(Y0)
    R = new_rows.row_matrices(fmap, observed)
    psi0, psi1, psi2 = psi_statistics(kern, Z, X_mean, X_var, rule=model.fitted_.rule,
                                      weights=jnp.eye(N))
    ell = new_rows.expected_log_likelihood(fmap, Y0, observed, R, psi0, psi1, psi2)
    Kuu = np.asarray(kern(Z)) + model.jitter_ * np.eye(Z.shape[0])
    U_mean = np.asarray(Kuu @ fmap.V)
    Sigma_u = np.asarray(Kuu @ fmap.H[0] @ Kuu)
    M, D = U_mean.shape
    Kinv = np.linalg.inv(Kuu)
    kl_u = 0.5 * (D * np.trace(Kinv @ Sigma_u) + np.sum(U_mean * (Kinv @ U_mean)) - D * M
                  + D * (np.linalg.slogdet(Kuu)[1] - np.linalg.slogdet(Sigma_u)[1]))
    kl_x = float(collapsed.kl_standard_normal(X_mean, X_var))
    np.testing.assert_allclose(float(ell) - kl_u - kl_x, model.elbo_, rtol=1e-8)


def test_transform_of_a_row_does_not_depend_on_the_other_rows(fitted):
    """Rows are independent given the fitted model (API.md): a batch call and one-row calls
    give the same latents and the same per-row bounds, bit for bit."""
    model, Y, _ = fitted
    Y_new = Y[:6].copy()
    Y_new[1, :4] = np.nan
    X_batch, V_batch = model.transform(Y_new, return_var=True)
    for i in (0, 1, 5):     # equal up to the rounding of a program compiled for 1 row, not 6
        X_one, V_one = model.transform(Y_new[i:i + 1], return_var=True)
        np.testing.assert_allclose(X_one[0], X_batch[i], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(V_one[0], V_batch[i], rtol=1e-13, atol=1e-15)
    total = sum(model.score(Y_new[i:i + 1]) for i in range(6))
    np.testing.assert_allclose(model.score(Y_new), total, rtol=1e-10)


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


def test_sample_moments_match_the_predictive_distribution(fitted):
    """Draws of ``sample`` at fixed latent points have the predictive mean and variance (noise
    included) of ``predict``: 400 independent draws, each moment within 4.5 standard errors."""
    model, Y, _ = fitted
    X = model.X_mean_[[0, 20, 40, 60]]
    draws = np.stack([model.sample(X=X, random_state=s)[0] for s in range(400)])
    mean, var = model.predict(X, return_var=True)
    se_mean = np.sqrt(var / 400)
    assert np.all(np.abs(draws.mean(0) - mean) < 4.5 * se_mean)
    se_var = var * np.sqrt(2 / 399)                  # sd of a Gaussian sample variance
    assert np.all(np.abs(draws.var(0, ddof=1) - var) < 4.5 * se_var)
    Ys, Xs = model.sample(7)
    assert Ys.shape == (7, Y.shape[1]) and Xs.shape == (7, 2)


def test_results_are_reported_in_original_units():
    """Standardisation makes the fit of a·Y + b the fit of Y: the noise variance scales by a²,
    predictions map by y → a·y + b, and the score shifts by −Σ log a over observed entries."""
    Y, _ = planted(n=40, d=6)
    Y[3, 2] = np.nan
    kw = dict(n_components=2, n_inducing=6, max_iter=40, random_state=0, progress=False)
    a, b = 7.0, -300.0
    m1 = BayesianGPLVM(**kw).fit(Y)
    m2 = BayesianGPLVM(**kw).fit(a * Y + b)
    np.testing.assert_allclose(m2.noise_var_, a**2 * m1.noise_var_, rtol=1e-7)
    X = m1.X_mean_[:3]
    np.testing.assert_allclose(m2.predict(X), a * m1.predict(X) + b, rtol=1e-7, atol=1e-6)
    n_obs = np.sum(~np.isnan(Y[:5]))
    np.testing.assert_allclose(m2.score(a * Y[:5] + b), m1.score(Y[:5]) - n_obs * np.log(a),
                               rtol=1e-6)


def test_restarts_after_a_non_finite_bound_climb_the_jitter_policy(monkeypatch):
    """A run stopped by a non-finite bound restarts with the next rung of the one jitter policy
    (sqrt(eps)·mean diag Kuu); history_ and n_iter_ span both runs."""
    Y, _ = planted(n=30, d=5)
    real = bgplvm_module.minimise
    calls = []

    def first_stops_early(fun, params, **kw):
        result = real(fun, params, **{**kw, "n_iter": 3 if not calls else kw["n_iter"]})
        calls.append(result.n_iter)
        return result

    monkeypatch.setattr(bgplvm_module, "minimise", first_stops_early)
    with pytest.warns(RuntimeWarning, match="jitter"):
        model = BayesianGPLVM(n_components=2, n_inducing=6, max_iter=20, random_state=0,
                              progress=False).fit(Y)
    assert calls == [3, 17] and model.n_iter_ == 20 and len(model.history_) == 20
    kernel, Z = model.kernel_, model.Z_
    scale = float(np.mean(np.asarray(kernel.diag(jnp.asarray(Z)))))
    # the rung is computed at the restart's parameters; after 3 more steps Z and σ² moved a bit
    assert 0.5 * np.sqrt(np.finfo(float).eps) * scale < model.jitter_ < 2 * np.sqrt(
        np.finfo(float).eps) * scale


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
    from gplvm.models.gplvm_family import estimator

    forbid_computation(estimator, "initial_latents")
    forbid_computation(bgplvm_module, "minimise")
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


# ------------------------------------------------------------------ the optimiser of fit
def _rosenbrock(p, a):
    """Rosenbrock's function; its minimum is 0 at (x, y) = (a, a²)."""
    return (a - p["x"]) ** 2 + 100.0 * (p["y"] - p["x"] ** 2) ** 2


ROSENBROCK_START = {"x": jnp.asarray(-1.2), "y": jnp.asarray(1.0)}


def test_lbfgsb_is_scipys_l_bfgs_b_and_finds_the_minimum():
    """``minimise(method='lbfgsb')`` drives SciPy's L-BFGS-B: its first three iterates are
    SciPy's own on the same function (numpy gradient written here), and it converges to the
    closed-form minimum (a, a²)."""
    from scipy.optimize import minimize

    def f_and_grad(z):
        x, y = z
        return ((1.5 - x) ** 2 + 100 * (y - x**2) ** 2,
                np.array([-2 * (1.5 - x) - 400 * x * (y - x**2), 200 * (y - x**2)]))

    path = []
    minimize(f_and_grad, [-1.2, 1.0], jac=True, method="L-BFGS-B", options={"maxiter": 3},
             callback=lambda xk: path.append(xk.copy()))
    ours = []
    minimise(_rosenbrock, ROSENBROCK_START, args=(1.5,), method="lbfgsb", n_iter=3,
             progress=False,
             options=OptimOptions(callback=lambda i, p, v: ours.append([p["x"], p["y"]])))
    np.testing.assert_allclose(np.array(ours, dtype=float), np.array(path), rtol=1e-10)
    res = minimise(_rosenbrock, ROSENBROCK_START, method="lbfgsb", n_iter=500, progress=False,
                   args=(1.5,))
    assert res.converged and not res.interrupted and res.n_iter == len(res.history) < 500
    np.testing.assert_allclose([res.params["x"], res.params["y"]], [1.5, 2.25], atol=1e-4)


def test_lbfgsb_interrupt_keeps_the_iterations_done():
    """Ctrl-C (a KeyboardInterrupt from the callback after iteration 6) returns 7 iterations:
    the history of an uninterrupted run's first 7 and its 7th iterate, flagged interrupted."""
    full = minimise(_rosenbrock, ROSENBROCK_START, method="lbfgsb", n_iter=12,
                    progress=False, args=(1.0,))

    def ctrl_c(i, params, value):
        if i == 6:
            raise KeyboardInterrupt

    with pytest.warns(RuntimeWarning, match="interrupted after 7"):
        part = minimise(_rosenbrock, ROSENBROCK_START, args=(1.0,), method="lbfgsb", n_iter=12,
                        progress=False, options=OptimOptions(callback=ctrl_c))
    assert part.interrupted and part.n_iter == 7
    np.testing.assert_array_equal(part.history, full.history[:7])
    np.testing.assert_allclose(float(_rosenbrock(part.params, 1.0)), full.history[7],
                               rtol=1e-12)


FLAT_BELOW = 1e-2


def _flat_bottomed_rosenbrock(p):
    """1 + Rosenbrock's function g (minimum at (1, 1)), except that the value is the constant
    1 + FLAT_BELOW wherever g ≤ FLAT_BELOW, while the gradient reported there is still g's.

    Exact by construction, on every CPU: inside that valley every point has the same value
    (``maximum(g, FLAT_BELOW)`` is FLAT_BELOW whatever the last bits of g) and every point outside
    it a larger one, so from a point inside, no step of any length passes a sufficient-decrease
    test, while the gradient still points at the minimum.  (It stands for an objective noisier
    than the decrease the gradient promises, as the collapsed bound near coincident inducing
    inputs is; the test before this one used ``1e-6 sin(1e9 (x + y))``, whose values depend on
    how a CPU rounds the argument and evaluates sin, and did not stall on an AMD EPYC.)
    """
    g = _rosenbrock(p, 1.0)
    return 1.0 + g + jax.lax.stop_gradient(jnp.maximum(g, FLAT_BELOW) - g)


def test_lbfgsb_stalled_line_search_continues_with_optax(monkeypatch):
    """When SciPy's line search can find no decrease at a point, even with a fresh memory
    (``ABNORMAL_TERMINATION_IN_LNSRCH``, or "relative reduction of f <= 0" after a step its
    line search took on a warning), the run goes on with optax's L-BFGS, whose approximate Wolfe
    conditions accept steps on equal values, instead of stopping there; it reaches the minimum
    (1, 1), which SciPy's last point, inside the flat valley, is not.  Removing the fallback to
    optax fails this test (the run ends at SciPy's point)."""
    import scipy.optimize

    real, calls = scipy.optimize.minimize, []

    def spy(*a, **k):
        result = real(*a, **k)
        calls.append(result)
        return result

    monkeypatch.setattr(scipy.optimize, "minimize", spy)
    res = minimise(_flat_bottomed_rosenbrock, ROSENBROCK_START, method="lbfgsb", n_iter=100,
                   progress=False, options=OptimOptions(patience=20))
    assert len(calls) >= 2
    for result in calls:   # every SciPy run ended on a failed line search, none converged
        assert result.status == 2 or "RELATIVE REDUCTION" in str(result.message).upper()
        assert np.any(result.jac != 0)
    stalled_at = {"x": calls[-1].x[0], "y": calls[-1].x[1]}
    assert float(_rosenbrock(stalled_at, 1.0)) <= FLAT_BELOW
    assert res.converged and res.n_iter > sum(result.nit for result in calls)
    np.testing.assert_allclose([res.params["x"], res.params["y"]], [1.0, 1.0], atol=1e-6)
    assert np.hypot(calls[-1].x[0] - 1.0, calls[-1].x[1] - 1.0) > 1e-6


def _nan_beyond_half(p):
    """(x − 10)², undefined (NaN) for x > 0.5: L-BFGS-B's first trial step lands there."""
    return jnp.where(p["x"] > 0.5, jnp.nan, (p["x"] - 10.0) ** 2)


def test_lbfgsb_stops_at_a_non_finite_objective_with_the_last_finite_point():
    with pytest.warns(RuntimeWarning, match="non-finite"):
        res = minimise(_nan_beyond_half, {"x": jnp.asarray(0.0)}, method="lbfgsb",
                       n_iter=20, progress=False)
    assert float(res.params["x"]) <= 0.5 and np.all(np.isfinite(res.history))


def test_progress_bar_shows_compilation_as_its_own_phase(capsys):
    """The bar says "fit (compiling)" before it counts iterations as "fit", and a second fit
    of the same shapes compiles nothing (the objective is traced once)."""
    traced = []

    def quadratic(p):
        traced.append(1)
        return jnp.sum((p["x"] - 3.0) ** 2)

    for _ in range(2):
        minimise(quadratic, {"x": jnp.zeros(3)}, method="lbfgsb", n_iter=5, progress=True)
    err = capsys.readouterr().err
    assert "fit (compiling)" in err and err.index("fit (compiling)") < err.rindex("fit:")
    assert len(traced) == 1


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_interrupted_fit_keeps_its_iterations_and_is_usable(monkeypatch):
    """Ctrl-C during ``fit`` (raised from the optimiser's callback after iteration 4) leaves a
    fitted model whose history is the first 5 entries of the uninterrupted fit's."""
    Y, _ = planted(n=30, d=5)
    kw = dict(n_components=2, n_inducing=6, max_iter=12, random_state=0, progress=False)
    full = BayesianGPLVM(**kw).fit(Y)
    real = bgplvm_module.minimise

    def ctrl_c(i, params, value):
        if i == 4:
            raise KeyboardInterrupt

    monkeypatch.setattr(bgplvm_module, "minimise", lambda fun, params, *, options, **k: real(
        fun, params, options=options._replace(callback=ctrl_c), **k))
    with pytest.warns(RuntimeWarning, match="interrupted after 5"):
        part = BayesianGPLVM(**kw).fit(Y)
    assert part.interrupted_ and part.n_iter_ == 5
    np.testing.assert_array_equal(part.history_, full.history_[:5])
    assert np.all(np.isfinite(part.predict(part.X_mean_[:3])))


def test_tiny_but_varying_columns_are_not_called_constant():
    """Columns near 1e-300 vary like any others relative to their size; their squares
    underflow, so an absolute test would call them constant (issue 31).  Their spread is
    taken relative to each column's size (``gplvm._validation.column_std``, tested in
    tests/test_validation.py): the fit of 1e-300·Y equals the fit of Y scaled back (the
    standardised data are the same), and a truly constant column is kept out of the fit."""
    Y, _ = planted(n=20, d=4)
    kw = dict(n_components=2, n_inducing=5, max_iter=5, random_state=0, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tiny = BayesianGPLVM(**kw).fit(1e-300 * Y)
        plain = BayesianGPLVM(**kw).fit(Y)
    np.testing.assert_allclose(tiny.X_mean_, plain.X_mean_, rtol=1e-6, atol=1e-9)
    constant = Y.copy()
    constant[:, 2] = 1e-300
    with pytest.warns(DroppedColumnsWarning, match=r"1 constant \(columns 2\)"):
        kept_out = BayesianGPLVM(**kw).fit(constant)
    assert kept_out.dropped_columns_.tolist() == [2]


# ------------------------------------------------------------------ issue 32: columns and Q
def _with_uninformative_columns(Y):
    """Y (N, 5) with a constant column (3.7) at 1, a constant 0.1 at 3 and a never-observed
    column at 6: (N, 8), and the positions of Y's own columns."""
    kept = [0, 2, 4, 5, 7]
    full = np.empty((Y.shape[0], 8))
    full[:, kept] = Y
    full[:, 1], full[:, 3], full[:, 6] = 3.7, 0.1, np.nan
    return full, kept


@pytest.mark.parametrize("inference", ["collapsed", "svi"])
def test_constant_and_empty_columns_are_kept_out_and_put_back(inference):
    """The fit on Y with uninformative columns inserted *is* the fit on Y: it reads the same
    standardised array (C order, as Y alone), so its attributes are equal bit for bit.  New-row
    verbs see the dropped columns as missing, a different but equal sum (exact zeros added over
    8 instead of 5 columns), which L-BFGS on a flat per-row bound amplifies to ~1e-8
    (gplvm_family/new_rows.py).  The dropped columns come back exactly: their constant with
    variance 0 and noise 0, or NaN for the column never observed."""
    Y, _ = planted(n=24, d=5)
    full, kept = _with_uninformative_columns(Y)
    kw = dict(n_components=2, n_inducing=6, max_iter=15, progress=False, random_state=0,
              inference=inference, batch_size=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        alone = BayesianGPLVM(**kw).fit(Y)
        with pytest.warns(DroppedColumnsWarning,
                          match=r"2 constant \(columns 1, 3\) and 1 with no observed entry"):
            model = BayesianGPLVM(**kw).fit(full)
    np.testing.assert_array_equal(model.X_mean_, alone.X_mean_)
    assert model.dropped_columns_.tolist() == [1, 3, 6] and model.n_features_in_ == 8
    X = model.X_mean_[:4]
    mean, var = model.predict(X, return_var=True)
    mean0, var0 = alone.predict(X, return_var=True)
    np.testing.assert_array_equal(mean[:, kept], mean0)
    np.testing.assert_array_equal(var[:, kept], var0)
    np.testing.assert_array_equal(mean[:, [1, 3]], np.tile([3.7, 0.1], (4, 1)))
    np.testing.assert_array_equal(var[:, [1, 3]], 0.0)
    assert np.isnan(mean[:, 6]).all() and np.isnan(var[:, 6]).all()
    noise = model.noise_var_
    np.testing.assert_array_equal(noise[kept], alone.noise_var_)
    assert noise[1] == noise[3] == 0.0 and np.isnan(noise[6])
    drawn, _ = model.sample(3, random_state=1)
    np.testing.assert_array_equal(drawn[:, [1, 3]], np.tile([3.7, 0.1], (3, 1)))
    holes = full[:5].copy()
    holes[0, 0] = holes[1, 1] = holes[2, 7] = np.nan
    filled = model.impute(holes)
    np.testing.assert_allclose(filled[:, kept], alone.impute(holes[:, kept]), rtol=0,
                               atol=1e-8)
    assert filled[1, 1] == 3.7 and np.isnan(filled[:, 6]).all()
    np.testing.assert_allclose(model.transform(full[:4]), alone.transform(Y[:4]), atol=1e-8)
    np.testing.assert_allclose(model.score(full[:4]), alone.score(Y[:4]), rtol=1e-9)


def test_digits_fit_without_dropping_constant_pixels_by_hand():
    """Flattened digits have pixels that are 0 in every image: the model keeps exactly those
    out, and predicts them as 0."""
    from sklearn.datasets import load_digits

    Y = load_digits().data[:60]
    constant = np.flatnonzero(Y.max(0) == Y.min(0))
    assert len(constant) > 0
    with pytest.warns(DroppedColumnsWarning, match=f"{len(constant)} constant"):
        model = BayesianGPLVM(n_components=2, n_inducing=5, max_iter=3, progress=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(Y)
    np.testing.assert_array_equal(model.dropped_columns_, constant)
    out = model.inverse_transform(model.X_mean_[:2])
    assert out.shape == (2, 64)
    np.testing.assert_array_equal(out[:, constant], Y[:2, constant])


def test_n_components_rule_and_auto():
    """Q above the columns (or at or above the rows) is refused before any computation, naming
    both numbers; 'auto' starts from min(10, D, N − 1) and reports the dimensions ARD keeps
    (relevance at least 1e-3 of the largest, by decreasing relevance)."""
    from gplvm.models.gplvm_family.estimator import active_dimensions

    Y, _ = planted(n=12, d=3)
    with pytest.raises(ValueError, match=r"n_components=4 exceeds the 3 column\(s\) of Y.*"
                                         r"n_components=3 or fewer"):
        BayesianGPLVM(n_components=4, n_inducing=5).fit(Y)
    full = np.column_stack([Y, np.ones(12)])
    with pytest.raises(ValueError, match=r"n_components=4 exceeds the 3 column\(s\) of Y left "
                                         r"to fit \(1 constant or empty"):
        BayesianGPLVM(n_components=4, n_inducing=5).fit(full)
    with pytest.raises(ValueError, match="Y has 3 rows; a 3-dimensional latent space needs at "
                                         "least 4"):
        BayesianGPLVM(n_components=3, n_inducing=3).fit(Y[:3])
    with pytest.raises(ValueError, match="'auto'.*kernel of your own"):
        BayesianGPLVM(n_components="auto", kernel=gplvm.kernels.RBF()).fit(Y)
    np.testing.assert_array_equal(active_dimensions([0.5, 1e-4, 2.0, 2e-3, 2.0]), [2, 4, 0, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = BayesianGPLVM(n_components="auto", n_inducing=5, max_iter=3,
                              progress=False).fit(Y)
    assert model.n_components_ == 3 and model.X_mean_.shape == (12, 3)
    np.testing.assert_array_equal(model.active_components_,
                                  active_dimensions(model.relevance_))
    assert model.sample(2)[1].shape == (2, 3)

"""The RFLVM estimator (seed 000): recovery of planted latent structure, the scikit-learn
surface and API.md's contract, moments of ``sample`` against the generating model,
reproducibility, missing data and input validation.

Sizes are reduced from the paper's (N = 500, J = 100, 2000 sweeps) so the file runs in a few
minutes; the full-size figures are in ``benchmarks/``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import gplvm
from gplvm.data import make_s_curve
from gplvm.metrics import procrustes_r2

N, J = 150, 40
SWEEPS = dict(sampler="gibbs", n_iter=150, burn_in=75, n_chains=2, block_size=25,
              progress=False)
# API runs with a fixed kernel (the DP mixture over W doubles the compile time; it has its own
# tests, and the recovery and resume tests run it)
SMALL = dict(sampler="gibbs", n_features=10, n_iter=16, burn_in=8, n_chains=1, block_size=8,
             learn_kernel=False, progress=False)

# Short test runs are not expected to pass the R-hat check.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def poisson_fit():
    d = make_s_curve("poisson", n_samples=N, n_outputs=J, random_state=1)
    Y = d.Y.copy()
    rng = np.random.default_rng(0)
    hidden = rng.random(Y.shape) < 0.1
    Y[hidden] = np.nan
    model = gplvm.RFLVM(likelihood="poisson", n_features=50, random_state=0, **SWEEPS).fit(Y)
    return d, Y, hidden, model


@pytest.fixture(scope="module")
def gaussian_fit():
    # More columns and less noise than the count fit: with N = 150 the Gaussian posterior
    # has folded modes of similar likelihood unless the data pin the manifold down.
    d = make_s_curve("gaussian", n_samples=N, n_outputs=100, random_state=2, noise_std=0.3)
    model = gplvm.RFLVM(likelihood="gaussian", n_features=50, random_state=0, **SWEEPS).fit(d.Y)
    return d, model


def test_poisson_recovers_the_s_curve_with_missing_entries(poisson_fit):
    d, Y, hidden, model = poisson_fit
    # Planted structure: the posterior mean latent is an orthogonal transform of the true
    # 2-D S-curve coordinates up to noise (PCA of log counts reaches about 0.5 here).
    assert procrustes_r2(d.X, model.X_mean_) > 0.8
    imputed = model.impute(Y)
    assert np.all(np.isfinite(imputed)) and np.array_equal(imputed[~hidden], d.Y[~hidden])
    # The posterior expected counts beat the column means on the hidden entries.
    col_mean = np.nanmean(Y, axis=0)[None].repeat(N, 0)
    err_model = np.mean((imputed[hidden] - d.Y[hidden]) ** 2)
    err_mean = np.mean((col_mean[hidden] - d.Y[hidden]) ** 2)
    assert err_model < 0.7 * err_mean


def test_gaussian_recovers_the_s_curve(gaussian_fit):
    d, model = gaussian_fit
    assert procrustes_r2(d.X, model.X_mean_) > 0.8
    # Noise variances in original units: the generator adds N(0, 0.3²) noise to every column.
    assert model.noise_var_.shape == (100,)
    assert 0.3**2 / 2 < np.median(model.noise_var_) < 2 * 0.3**2


def test_fitted_attributes_and_shapes(poisson_fit):
    d, Y, _, model = poisson_fit
    n_kept = SWEEPS["n_iter"] - SWEEPS["burn_in"]
    assert model.X_samples_.shape == (2, n_kept, N, 2)
    assert model.X_mean_.shape == (N, 2) and model.X_var_.shape == (N, 2)
    assert model.history_.shape == (2, SWEEPS["n_iter"])
    assert model.W_samples_.shape[1:] == (25, 2)
    assert model.W_samples_.shape[0] <= 200
    assert model.beta_samples_.shape[1:] == (51, J)
    assert model.relevance_.shape == (2,)
    assert model.n_features_in_ == J
    assert model.n_iter_ == SWEEPS["n_iter"] and not model.interrupted_
    # The aligned draws share one frame and each recovers the planted S-curve on its own (the
    # posterior mean reaches 0.8, see above; a single draw carries its own noise)...
    draws = model.X_samples_[:, ::15].reshape(-1, N, 2)
    assert np.median([procrustes_r2(d.X, x) for x in draws]) > 0.7
    # ...and they agree: the posterior sd of a latent coordinate is well below the prior's 1.
    # Draws left in different rotations would spread over the whole configuration (sd about
    # 1, the scale of the N(0, I) prior and of the unit-variance start).
    assert np.median(np.sqrt(model.X_var_)) < 0.5


def test_sampler_info_is_kept_per_chain_and_sweep(poisson_fit):
    *_, model = poisson_fit
    info = model.sampler_info_
    assert set(info) == {"accept_W", "n_proposals_X", "n_proposals_beta"}
    assert all(v.shape == (2, SWEEPS["n_iter"]) for v in info.values())
    assert np.all((info["accept_W"] >= 0) & (info["accept_W"] <= 1))
    assert model.accept_rate_ == pytest.approx(info["accept_W"].mean(), rel=1e-12)
    # X climbs its conditional (no slice) during the first burn_in // 2 sweeps ('auto')
    warm = SWEEPS["burn_in"] // 2
    assert np.all(np.isnan(info["n_proposals_X"][:, :warm]))
    assert np.all(info["n_proposals_X"][:, warm:] >= 1)
    assert np.all(info["n_proposals_beta"] >= 1)            # Poisson β: one slice per column
    stats = model.to_arviz().sample_stats
    assert stats["accept_W"].shape == (2, SWEEPS["n_iter"] - SWEEPS["burn_in"])
    np.testing.assert_array_equal(stats["n_proposals_X"].values,
                                  info["n_proposals_X"][:, SWEEPS["burn_in"]:])


def test_same_random_state_same_result():
    d = make_s_curve("poisson", n_samples=40, n_outputs=10, random_state=3)
    kw = dict(likelihood="poisson", n_features=10, n_iter=20, burn_in=10, n_chains=2,
              sampler="gibbs", block_size=10, learn_kernel=False, progress=False)   # the DP path: test_rflvm_resume
    a = gplvm.RFLVM(random_state=5, **kw).fit(d.Y)
    b = gplvm.RFLVM(random_state=5, **kw).fit(d.Y)
    c = gplvm.RFLVM(random_state=6, **kw).fit(d.Y)
    np.testing.assert_array_equal(a.X_samples_, b.X_samples_)
    assert not np.array_equal(a.X_samples_, c.X_samples_)


def test_transform_score_sample_and_arviz(poisson_fit):
    d, Y, _, model = poisson_fit
    Z = model.transform(d.Y[:20])
    assert Z.shape == (20, 2)
    # New-row latents (map fixed) land near the training posterior means of the same rows.
    dist = np.linalg.norm(Z - model.X_mean_[:20], axis=1)
    spread = np.linalg.norm(model.X_mean_ - model.X_mean_.mean(0), axis=1).mean()
    assert np.median(dist) < 0.5 * spread
    # The log predictive density of real rows beats that of the same rows shuffled across
    # columns (which breaks the learned map).
    rng = np.random.default_rng(1)
    shuffled = np.array([rng.permutation(row) for row in d.Y[:20]])
    assert model.score(d.Y[:20]) > model.score(shuffled)
    S, X = model.sample(30, random_state=0)
    assert S.shape == (30, J) and np.all(S >= 0) and np.all(S == np.round(S))
    assert X.shape == (30, 2)
    idata = model.to_arviz()
    assert "log_lik" in idata.posterior and "latent_distance" in idata.posterior
    assert idata.posterior["log_lik"].shape[:2] == (2, SWEEPS["n_iter"] - SWEEPS["burn_in"])


def test_transform_of_a_row_does_not_depend_on_the_other_rows(poisson_fit):
    """API.md: each row's output depends only on that row and the fitted model.  Rows carry
    NaN here (the fit's hidden entries), and a duplicated row gets the same latent.

    Each row's chains use that row's own key, so the draws are the same whatever the other
    rows; but a call with N* rows is its own compiled program (vmapped over N*), which may
    round differently from the one-row program (another vector width, a fused multiply-add).
    The slice decisions compare a log-likelihood with a uniform threshold, which such
    round-off changes only with probability ~1e-15, so the latents agree to round-off carried
    through the elliptical-slice updates: 1e-9 here, far below the spread of the latents
    (order 1) that any dependence on other rows would produce."""
    _, Y, _, model = poisson_fit
    rows = np.concatenate([Y[:6], Y[2:3]])
    batch = model.transform(rows)
    one_by_one = np.concatenate([model.transform(rows[i:i + 1]) for i in range(len(rows))])
    np.testing.assert_allclose(batch, one_by_one, rtol=0, atol=1e-9)
    np.testing.assert_allclose(batch[2], batch[6], rtol=0, atol=1e-9)
    np.testing.assert_allclose(model.transform(rows[::-1]), batch[::-1], rtol=0, atol=1e-9)


def _z_moments(draws, mean, var):
    """z-scores of the sample mean and variance of iid ``draws`` (n, J) against ``mean`` and
    ``var``: the mean's SE is sqrt(var/n); the sample variance's is sqrt((m4 - var²)/n) with
    the fourth central moment m4 estimated from the draws."""
    n = draws.shape[0]
    z_mean = (draws.mean(0) - mean) / np.sqrt(var / n)
    m4 = np.mean((draws - draws.mean(0)) ** 4, axis=0)
    z_var = (draws.var(0, ddof=1) - var) / np.sqrt(np.maximum(m4 - var**2, 1e-300) / n)
    return z_mean, z_var


def test_gaussian_sample_has_the_moments_of_the_predictive(gaussian_fit):
    # At a fixed x, sample draws a stored map s uniformly and y = φ(x)β_s + N(0, σ_s²):
    # E[y] = mean_s ψ_s = predict(x) and Var[y] = var_s ψ_s + mean_s σ_s² = predict's variance
    # + noise_var_ (original units).  3000 draws at each of two points; 2 × 100 columns, so
    # |z| < 4.5 per column (two-sided 7e-6 each) bounds the false-alarm rate by 0.3%.
    _, model = gaussian_fit
    n = 3000
    for x in model.X_mean_[[10, 120]]:
        Ys, Xs = model.sample(n, X=np.repeat(x[None], n, 0), random_state=1)
        np.testing.assert_array_equal(Xs, np.repeat(x[None], n, 0))
        mean, var = model.predict(x[None], return_var=True)
        z_mean, z_var = _z_moments(Ys, mean[0], var[0] + model.noise_var_)
        assert np.max(np.abs(z_mean)) < 4.5, z_mean
        assert np.max(np.abs(z_var)) < 4.5, z_var


def test_poisson_sample_has_the_moments_of_the_predictive(poisson_fit):
    # y | s ~ Poisson(λ_s(x)) with s uniform over the stored draws: E[y] = mean_s λ_s =
    # predict(x) and Var[y] = E[λ] + Var_s λ_s = predict(x) + predict's variance.
    *_, model = poisson_fit
    n = 4000
    for x in model.X_mean_[[5, 100]]:
        Ys, _ = model.sample(n, X=np.repeat(x[None], n, 0), random_state=2)
        mean, var = model.predict(x[None], return_var=True)
        z_mean, z_var = _z_moments(Ys, mean[0], mean[0] + var[0])
        assert np.max(np.abs(z_mean)) < 4.5, z_mean
        assert np.max(np.abs(z_var)) < 4.5, z_var
    # Latents drawn by sample itself come from the N(0, I) prior.
    _, X = model.sample(4000, random_state=3)
    assert np.max(np.abs(X.mean(0))) < 4.5 / np.sqrt(4000)
    assert np.max(np.abs(X.var(0) - 1)) < 4.5 * np.sqrt(2 / 4000)


def test_predict_checks_the_latent_dimension(poisson_fit):
    *_, model = poisson_fit
    for method in (model.predict, model.inverse_transform):
        with pytest.raises(ValueError, match="n_components=2"):
            method(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="n_components=2"):
        model.sample(3, X=np.zeros((3, 1)))
    with pytest.raises(ValueError, match="columns"):
        model.transform(np.zeros((2, J + 1)))


def test_gaussian_score_is_in_the_units_of_the_data(gaussian_fit):
    # The same fitted model carried to units a + cY (mean a + c·mean_, scale c·scale_) sees
    # the same standardised data, so its log density of a + cY is that of Y minus the
    # Jacobian n_obs·log c.  transform_steps=0 keeps every new-row latent at the prior mean,
    # so both scores use the same latents and agree to rounding.
    import copy
    d, model = gaussian_fit
    base = copy.deepcopy(model)
    base.transform_steps = 0
    moved = copy.deepcopy(base)
    a, c = 5000.0, 1000.0
    moved.Y_mean_, moved.Y_std_ = a + c * model.Y_mean_, c * model.Y_std_
    Y = d.Y[:20].copy()
    Y[0, :10] = np.nan                                  # missing entries carry no Jacobian
    n_obs = np.sum(~np.isnan(Y))
    assert moved.score(a + c * Y) == pytest.approx(base.score(Y) - n_obs * np.log(c),
                                                   rel=1e-9)


def test_impute_recognises_the_training_data_exactly(gaussian_fit):
    d, model = gaussian_fit
    Y = d.Y.copy()
    assert model._is_training_data(*model._prepare_new(Y))
    Y[3, 7] = np.nextafter(Y[3, 7], np.inf)            # one ulp away: other data
    assert not model._is_training_data(*model._prepare_new(Y))


def test_likelihood_by_name_in_any_case_or_by_object():
    from gplvm.likelihoods import Binomial, Gaussian, Poisson
    rng = np.random.default_rng(9)
    Y = rng.poisson(3.0, (30, 6)).astype(float)
    ref = gplvm.RFLVM(likelihood="poisson", random_state=0, **SMALL).fit(Y)
    for lik in ("Poisson", " POISSON ", Poisson()):
        other = gplvm.RFLVM(likelihood=lik, random_state=0, **SMALL).fit(Y)
        np.testing.assert_array_equal(other.X_samples_, ref.X_samples_)
    # The binomial's trials come from the object or from fit(n_trials=...), the same either
    # way (test_rflvm_recovery fits the binomial with fit(n_trials=...)).
    from gplvm.models.rflvm.checks import resolve_likelihood
    for lik, n_trials in [("binomial", 5), ("Binomial", np.full(6, 5)),
                          (Binomial(n_trials=5), None)]:
        assert np.all(np.asarray(resolve_likelihood(lik, n_trials).n_trials) == 5)
    Yb = rng.integers(0, 6, (30, 6)).astype(float)
    with pytest.raises(ValueError, match="samples the noise variance"):
        gplvm.RFLVM(likelihood=Gaussian(noise_var=0.5), **SMALL).fit(Y)
    with pytest.raises(ValueError, match="give it once"):
        gplvm.RFLVM(likelihood=Binomial(n_trials=5), **SMALL).fit(Yb, n_trials=5)
    with pytest.raises(ValueError, match="unknown likelihood"):
        gplvm.RFLVM(likelihood="tweedie", **SMALL).fit(Y)


def test_fit_follows_the_estimator_contract():
    # scikit-learn's second positional argument is the ignored y: labels passed there are not
    # taken as time stamps; times= and the other options are keyword-only.
    Y = np.random.default_rng(10).poisson(3.0, (30, 6)).astype(float)
    labels = np.repeat([0.0, 1.0, 2.0], 10)
    a = gplvm.RFLVM(random_state=0, **SMALL).fit(Y, labels)
    b = gplvm.RFLVM(random_state=0, **SMALL).fit(Y)
    np.testing.assert_array_equal(a.X_samples_, b.X_samples_)
    assert not a._spec_.dynamic
    with pytest.raises(TypeError):
        gplvm.RFLVM(**SMALL).fit(Y, None, labels)
    assert gplvm.RFLVM().__sklearn_tags__().input_tags.allow_nan


def test_convergence_warning_follows_split_rhat():
    # Split R-hat (Gelman et al. 2013) of the kept log-likelihood trace: chains around the same
    # level give about 1; chains 10 sds apart give far more than 1.1.
    rng = np.random.default_rng(11)
    model = gplvm.RFLVM(n_iter=205, burn_in=5)    # a fixed length: the 1.1 rule
    model.history_ = rng.normal(size=(3, 205))
    model.X_samples_ = rng.normal(size=(3, 200, 6, 2))     # the kept draws (convergence_)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model._check_convergence(quiet=False)
    assert model.converged_
    model.history_[1] += 10.0
    with pytest.warns(ConvergenceWarning, match="R-hat"):
        model._check_convergence(quiet=False)
    assert not model.converged_
    model.history_ = model.history_[:, :7]                 # 2 kept sweeps: no R-hat at all
    model.X_samples_ = model.X_samples_[:, :2]
    with pytest.warns(ConvergenceWarning, match="too few"):
        model._check_convergence(quiet=False)
    assert not model.converged_


def test_count_likelihoods_run_and_keep_their_parameters():
    rng = np.random.default_rng(4)
    kw = SMALL
    # (the binomial, Bernoulli and multinomial fits -- the multinomial's J − 1 weight columns
    # included: the recovery tests of test_rflvm_recovery; trials from a likelihood object
    # resolve as from fit(n_trials=...): test_likelihood_by_name_in_any_case_or_by_object)
    Y = rng.poisson(3.0, (30, 6)).astype(float)
    # two NB chains: one per device where there are two (every leaf of the chain state, the
    # CRT layout's included, must be placed by chain; a zero-size one was not)
    model = gplvm.RFLVM(likelihood="negative_binomial", random_state=0,
                        **{**kw, "n_chains": 2}).fit(Y)
    assert np.all(np.isfinite(model.history_)) and np.all(np.isfinite(model.X_mean_))
    assert model.dispersion_.shape == (6,) and np.all(model.dispersion_ > 0)
    # a fit saved before the CRT layout was by (column, rank) carries the earlier one (one
    # entry per count and rank: four arrays); resume() lays it out again and goes on
    y = Y[Y > 0]
    old = (np.zeros(int(y.sum()), np.int32), np.ones(int(y.sum())), np.array([1024.0]),
           np.zeros(1, np.int32))
    chains = model._result_.state
    model._data_ = model._data_._replace(customers=old)
    model._result_ = model._result_._replace(state=(chains[0], chains[1]._replace(
        customers=tuple(np.stack([a, a]) for a in old)), *chains[2:]))
    model.set_params(n_iter=SMALL["n_iter"] + 4).resume()
    assert model.n_iter_ == SMALL["n_iter"] + 4 and np.all(np.isfinite(model.history_))
    assert len(model._data_.customers) == len(model._result_.state[1].customers) == 5


def test_negative_binomial_dispersion_starts_large_and_is_held_during_the_x_warm_up():
    # r_j starts at spec.initial_dispersion; the prior is on the log-mean c_j + log r_j,
    # centred at log ȳ_j, so the intercepts start at log(ȳ_j / r0) (ψ = log(mean / r) under
    # the logit link); r_j is not resampled while X warms up
    # the model's spec and data as fit() builds them, without a fit (one compiled sweep here)
    import jax
    from gplvm.kernels import RBF
    from gplvm.models.rflvm.columns import standardise_fit
    from gplvm.models.rflvm.init import init_state, prepare_data
    from gplvm.models.rflvm.sweep import sweep as rflvm_sweep
    rng = np.random.default_rng(5)
    Y = rng.poisson(20.0, (30, 6)).astype(float)
    model = gplvm.RFLVM(likelihood="negative_binomial", random_state=0, **SMALL)
    spec = model._spec("negative_binomial", 6, False)
    _, _, Ys = standardise_fit(Y, "negative_binomial", model.standardize)
    data = prepare_data(spec, Ys, None, None, RBF(lengthscale=1.0), None)
    r0 = spec.initial_dispersion
    assert r0 >= 10 and spec.map_sweeps == 4
    np.testing.assert_allclose(data.beta_prior_mean[-1], np.log(Y.mean(0)), rtol=1e-12)
    state = init_state(jax.random.PRNGKey(0), spec, data, rng.normal(size=(30, 2)), 0.0, 5)
    np.testing.assert_array_equal(state.dispersion, np.full(6, r0))
    np.testing.assert_allclose(state.beta[-1], np.log(Y.mean(0) / r0), rtol=1e-12)
    one = jax.jit(lambda key, st: rflvm_sweep(key, st, spec, data, None))
    held = one(jax.random.PRNGKey(1), state._replace(n_sweeps=spec.map_sweeps - 1))
    np.testing.assert_array_equal(held.dispersion, state.dispersion)
    moved = one(jax.random.PRNGKey(1), state._replace(n_sweeps=spec.map_sweeps))
    assert np.all(np.asarray(moved.dispersion) != r0)


@pytest.mark.filterwarnings("ignore:.*interrupted after:RuntimeWarning")
def test_interrupted_during_burn_in_leaves_a_usable_model(monkeypatch):
    # Ctrl-C (a KeyboardInterrupt between blocks) during burn-in: the chains' last states stand
    # in for draws, with a warning, and the model still transforms, scores and samples
    import gplvm.models.rflvm.run as module
    from gplvm.inference.run import CheckpointTimer
    real = module.run_chains

    def interrupt(partial):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "run_chains", lambda *a, **kw: real(
        *a, **{**kw, "checkpoint": CheckpointTimer(interrupt, 0)}))   # at the first block end
    Y = np.random.default_rng(6).poisson(3.0, (30, 6)).astype(float)
    model = gplvm.RFLVM(likelihood="poisson", n_features=10, n_iter=16, burn_in=8,
                        sampler="gibbs", n_chains=2, block_size=4, learn_kernel=False,
                        progress=False, random_state=0)
    with pytest.warns(RuntimeWarning, match="during burn-in"):
        model.fit(Y)
    assert model.interrupted_ and model.n_iter_ == 4 and not model.converged_
    assert model.X_samples_.shape == (2, 1, 30, 2) and model.W_samples_.shape[0] == 2
    assert np.all(np.isfinite(model.transform(Y[:3])))
    assert np.isfinite(model.score(Y[:3]))
    assert model.sample(5, random_state=0)[0].shape == (5, 6)


@pytest.mark.parametrize("kwargs, Y, match", [
    ({"likelihood": "poisson"}, [[1.0, -2.0], [0.0, 1.0], [2.0, 3.0]], "negative"),
    ({"likelihood": "poisson"}, [[1.5, 2.0], [0.0, 1.0], [2.0, 3.0]], "non-integer"),
    ({"likelihood": "gaussian"}, [[1.0, np.inf], [0.0, 1.0], [2.0, 3.0]], "infinite"),
    # a constant column is kept out of the fit, leaving fewer columns than Q
    ({"likelihood": "gaussian"}, [[1.0, 1.0], [0.0, 1.0], [2.0, 1.0]],
     r"n_components=2 exceeds the 1 column\(s\) of Y left to fit \(1 constant or empty"),
    ({"likelihood": "gaussian"}, [[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]], "nothing to fit"),
    ({"likelihood": "gaussian"}, [[1.0, 2.0]], "rows"),
    ({"likelihood": "gaussian"}, [1.0, 2.0, 3.0], "1-D"),
    ({"likelihood": "poisson", "n_features": 7}, [[1.0, 2.0], [0.0, 1.0], [2.0, 3.0]], "even"),
    ({"likelihood": "tweedie"}, [[1.0, 2.0], [0.0, 1.0], [2.0, 3.0]], "likelihood"),
    ({"likelihood": "poisson", "burn_in": 50, "n_iter": 50}, [[1.0, 2.0], [0.0, 1.0],
                                                               [2.0, 3.0]], "burn_in"),
    ({"likelihood": "multinomial"}, [[np.nan, 2.0, 1.0], [np.nan, 1.0, 2.0], [np.nan, 3.0, 1.0]],
     r"no observed entry \(columns 0\).*multinomial"),
])
def test_bad_input_raises_before_sampling(kwargs, Y, match, forbid_computation):
    import gplvm.models.rflvm.run as mod

    forbid_computation(mod, "run_chains")
    with pytest.raises(ValueError, match=match):
        gplvm.RFLVM(progress=False, **kwargs).fit(np.asarray(Y, dtype=float))


def test_bad_times_and_offsets_raise():
    Y = np.random.default_rng(0).poisson(2.0, (10, 3)).astype(float)
    with pytest.raises(ValueError, match="one time stamp per row"):
        gplvm.RFLVM(progress=False).fit(Y, times=np.arange(9.0))
    with pytest.raises(ValueError, match="one offset per row"):
        gplvm.RFLVM(progress=False).fit(Y, offset=np.zeros(4))
    with pytest.raises(ValueError, match="offset"):
        gplvm.RFLVM(likelihood="gaussian", progress=False).fit(Y + np.arange(30).reshape(10, 3),
                                                               offset=np.zeros(10))


def test_unfitted_use_raises():
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        gplvm.RFLVM().transform(np.ones((3, 2)))


# ------------------------------------------------------------------ issue 32: columns and Q
def test_gaussian_constant_and_empty_columns_are_kept_out_and_put_back(tmp_path):
    """The fit on Y with a constant and a never-observed column inserted *is* the fit on Y: the
    sampler reads the same standardised array (the kept columns in C order, their means and
    sds computed on them alone) with the same key, so every output on Y's own columns is equal
    bit for bit (new rows too: their random numbers are keyed by the kept columns' values).
    The dropped columns come back as 0 · scale_ + mean_: the constant exactly with variance 0
    and noise 0, or NaN; a saved and loaded model gives the same."""
    from gplvm import DroppedColumnsWarning

    Y = np.random.default_rng(12).normal(size=(12, 4))
    Y[1, 2] = np.nan
    own = [0, 1, 3, 5]
    full = np.empty((12, 6))
    full[:, own], full[:, 2], full[:, 4] = Y, 3.7, np.nan
    kw = dict(likelihood="gaussian", random_state=0, **SMALL)
    alone = gplvm.RFLVM(**kw).fit(Y)
    with pytest.warns(DroppedColumnsWarning,
                      match=r"1 constant \(columns 2\) and 1 with no observed entry \(columns 4\)"):
        model = gplvm.RFLVM(**kw).fit(full)
    assert model.dropped_columns_.tolist() == [2, 4] and model.n_features_in_ == 6
    np.testing.assert_array_equal(model.X_samples_, alone.X_samples_)
    X = alone.X_mean_[:3]
    mean, var = model.predict(X, return_var=True)
    mean0, var0 = alone.predict(X, return_var=True)
    np.testing.assert_array_equal(mean[:, own], mean0)
    np.testing.assert_array_equal(var[:, own], var0)
    assert np.all(mean[:, 2] == 3.7) and np.all(var[:, 2] == 0.0)
    assert np.isnan(mean[:, 4]).all() and np.isnan(var[:, 4]).all()
    np.testing.assert_array_equal(model.noise_var_[own], alone.noise_var_)
    assert model.noise_var_[2] == 0.0 and np.isnan(model.noise_var_[4])
    holes = full[:4].copy()
    holes[0, 0] = holes[1, 2] = np.nan
    filled = model.impute(holes)
    np.testing.assert_array_equal(filled[:, own], alone.impute(holes[:, own]))
    assert filled[1, 2] == 3.7 and np.isnan(filled[:, 4]).all()
    np.testing.assert_array_equal(model.impute(full)[:, own], alone.impute(Y))
    np.testing.assert_array_equal(model.transform(full[:3]), alone.transform(Y[:3]))
    assert model.score(full[:3]) == alone.score(Y[:3])
    drawn, _ = model.sample(3, random_state=1)
    np.testing.assert_array_equal(drawn[:, own], alone.sample(3, random_state=1)[0])
    assert np.all(drawn[:, 2] == 3.7) and np.isnan(drawn[:, 4]).all()
    model.save(tmp_path / "model.gplvm")
    loaded = gplvm.load(tmp_path / "model.gplvm")
    np.testing.assert_array_equal(loaded.predict(X), mean)
    np.testing.assert_array_equal(loaded.dropped_columns_, [2, 4])


def test_count_columns_all_zero_stay_in_the_fit_and_never_observed_come_back_nan():
    """Counts: an all-zero column is data (it pins its intercept) and is fitted; a column with
    no observed entry is kept out, so the fit is that of the other columns bit for bit, and
    it predicts NaN there."""
    from gplvm import DroppedColumnsWarning

    Y = np.random.default_rng(13).poisson(3.0, (12, 4)).astype(float)
    Y[:, 1] = 0.0
    full = np.insert(Y, 2, np.nan, axis=1)
    kw = dict(likelihood="poisson", random_state=0, **SMALL)
    alone = gplvm.RFLVM(**kw).fit(Y)
    with pytest.warns(DroppedColumnsWarning, match=r"1 with no observed entry \(columns 2\)"):
        model = gplvm.RFLVM(**kw).fit(full)
    assert model.dropped_columns_.tolist() == [2] and alone.dropped_columns_.tolist() == []
    np.testing.assert_array_equal(model.X_samples_, alone.X_samples_)
    mean = model.predict(alone.X_mean_[:3])
    np.testing.assert_array_equal(mean[:, [0, 1, 3, 4]], alone.predict(alone.X_mean_[:3]))
    assert np.isnan(mean[:, 2]).all()


def test_n_components_follows_the_family_rule(forbid_computation):
    """Q above the columns entering the fit, or at or above the rows, is refused before any
    computation with the family's message (gplvm._validation.check_n_components)."""
    import gplvm.models.rflvm.estimator as mod
    import gplvm.models.rflvm.run as run_mod

    forbid_computation(mod, "prepare_data")
    forbid_computation(run_mod, "run_chains")
    Y = np.random.default_rng(14).normal(size=(12, 3))
    with pytest.raises(ValueError, match=r"RFLVM: n_components=4 exceeds the 3 column\(s\) of "
                                         r"Y; .*pass n_components=3 or fewer"):
        gplvm.RFLVM(n_components=4, likelihood="gaussian", init="random").fit(Y)
    with pytest.raises(ValueError, match=r"exceeds the 3 column\(s\) of Y left to fit \(1 "
                                         r"constant or empty"):
        gplvm.RFLVM(n_components=4, likelihood="gaussian").fit(np.column_stack([Y, np.ones(12)]))
    with pytest.raises(ValueError, match="Y has 3 rows; a 3-dimensional latent space needs at "
                                         "least 4"):
        gplvm.RFLVM(n_components=3, likelihood="gaussian").fit(Y[:3])

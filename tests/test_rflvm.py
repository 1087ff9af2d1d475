"""The RFLVM estimator (seed 000): recovery of planted latent structure, the scikit-learn
surface, reproducibility, missing data and input validation.

Sizes are reduced from the paper's (N = 500, J = 100, 2000 sweeps) so the file runs in a few
minutes; the full-size figures are in ``benchmarks/``.
"""

from __future__ import annotations

import numpy as np
import pytest

import gplvm
from gplvm.data import make_s_curve
from gplvm.metrics import procrustes_r2

N, J = 150, 40
SWEEPS = dict(n_iter=150, burn_in=75, n_chains=2, block_size=25, progress=False)


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
    _, Y, _, model = poisson_fit
    n_kept = SWEEPS["n_iter"] - SWEEPS["burn_in"]
    assert model.X_samples_.shape == (2, n_kept, N, 2)
    assert model.X_mean_.shape == (N, 2) and model.X_var_.shape == (N, 2)
    assert model.history_.shape == (2, SWEEPS["n_iter"])
    assert model.W_samples_.shape[1:] == (25, 2)
    assert model.W_samples_.shape[0] <= 200
    assert model.beta_samples_.shape[1:] == (51, J)
    assert model.relevance_.shape == (2,)
    assert model.n_iter_ == SWEEPS["n_iter"] and not model.interrupted_
    # Aligned draws average to the reported mean.
    np.testing.assert_allclose(model.X_samples_.mean((0, 1)), model.X_mean_, atol=1e-8)


def test_same_random_state_same_result():
    d = make_s_curve("poisson", n_samples=40, n_outputs=10, random_state=3)
    kw = dict(likelihood="poisson", n_features=10, n_iter=20, burn_in=10, n_chains=2,
              block_size=10, progress=False)
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
    S = model.sample(30, random_state=0)
    assert S.shape == (30, J) and np.all(S >= 0) and np.all(S == np.round(S))
    idata = model.to_arviz()
    assert "log_lik" in idata.posterior and "latent_distance" in idata.posterior
    assert idata.posterior["log_lik"].shape[:2] == (2, SWEEPS["n_iter"] - SWEEPS["burn_in"])


def test_count_likelihoods_run_and_keep_their_parameters():
    rng = np.random.default_rng(4)
    kw = dict(n_features=10, n_iter=16, burn_in=8, n_chains=1, block_size=8, progress=False)
    # (Bernoulli runs the binomial code path with one trial; its recovery is in benchmarks.)
    for kind, extra in [("negative_binomial", {}), ("binomial", {"n_trials": 5}),
                        ("multinomial", {})]:
        if kind == "binomial":
            Y = rng.integers(0, 6, (30, 6)).astype(float)
        else:
            Y = rng.poisson(3.0, (30, 6)).astype(float)
        model = gplvm.RFLVM(likelihood=kind, random_state=0, **kw).fit(Y, **extra)
        assert np.all(np.isfinite(model.history_)), kind
        assert np.all(np.isfinite(model.X_mean_)), kind
        if kind == "negative_binomial":
            assert model.dispersion_.shape == (6,) and np.all(model.dispersion_ > 0)
        if kind == "multinomial":
            assert model.beta_samples_.shape[-1] == 5        # J − 1 latent columns


def test_negative_binomial_dispersion_starts_large_and_is_held_during_the_x_warm_up():
    # r_j starts at spec.initial_dispersion; the prior is on the log-mean c_j + log r_j,
    # centred at log ȳ_j, so the intercepts start at log(ȳ_j / r0) (ψ = log(mean / r) under
    # the logit link); r_j is not resampled while X warms up
    import jax
    from gplvm.models._rflvm.init import init_state
    from gplvm.models._rflvm.sweep import sweep as rflvm_sweep
    Y = np.random.default_rng(5).poisson(20.0, (30, 6)).astype(float)
    model = gplvm.RFLVM(likelihood="negative_binomial", n_features=10, n_iter=16, burn_in=8,
                        n_chains=1, block_size=8, progress=False, random_state=0).fit(Y)
    spec, data = model._spec_, model._data_
    r0 = spec.initial_dispersion
    assert r0 >= 10 and spec.map_sweeps == 4
    np.testing.assert_allclose(data.beta_prior_mean[-1], np.log(Y.mean(0)), rtol=1e-12)
    state = init_state(jax.random.PRNGKey(0), spec, data, model.X_mean_, 0.0, 5)
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
    import gplvm.models.rflvm as module
    real = module.run_chains

    def interrupt(n_done, state):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "run_chains",
                        lambda *a, **kw: real(*a, **{**kw, "callback": interrupt}))
    Y = np.random.default_rng(6).poisson(3.0, (30, 6)).astype(float)
    model = gplvm.RFLVM(likelihood="poisson", n_features=10, n_iter=16, burn_in=8,
                        n_chains=2, block_size=4, progress=False, random_state=0)
    with pytest.warns(RuntimeWarning, match="during burn-in"):
        model.fit(Y)
    assert model.interrupted_ and model.n_iter_ == 4 and not model.converged_
    assert model.X_samples_.shape == (2, 1, 30, 2) and model.W_samples_.shape[0] == 2
    assert np.all(np.isfinite(model.transform(Y[:3])))
    assert np.isfinite(model.score(Y[:3]))
    assert model.sample(5, random_state=0).shape == (5, 6)


@pytest.mark.parametrize("kwargs, Y, match", [
    ({"likelihood": "poisson"}, [[1.0, -2.0], [0.0, 1.0], [2.0, 3.0]], "negative"),
    ({"likelihood": "poisson"}, [[1.5, 2.0], [0.0, 1.0], [2.0, 3.0]], "non-integer"),
    ({"likelihood": "gaussian"}, [[1.0, np.inf], [0.0, 1.0], [2.0, 3.0]], "infinite"),
    ({"likelihood": "gaussian"}, [[1.0, 1.0], [0.0, 1.0], [2.0, 1.0]], "constant"),
    ({"likelihood": "gaussian"}, [[1.0, 2.0]], "rows"),
    ({"likelihood": "gaussian"}, [1.0, 2.0, 3.0], "1-D"),
    ({"likelihood": "poisson", "n_features": 7}, [[1.0, 2.0], [0.0, 1.0], [2.0, 3.0]], "even"),
    ({"likelihood": "tweedie"}, [[1.0, 2.0], [0.0, 1.0], [2.0, 3.0]], "likelihood"),
    ({"likelihood": "poisson", "burn_in": 50, "n_iter": 50}, [[1.0, 2.0], [0.0, 1.0],
                                                               [2.0, 3.0]], "burn_in"),
    ({"likelihood": "poisson"}, [[np.nan, 2.0], [np.nan, 1.0], [np.nan, 3.0]], "no observed"),
])
def test_bad_input_raises_before_sampling(kwargs, Y, match, forbid_computation):
    import gplvm.models.rflvm as mod

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

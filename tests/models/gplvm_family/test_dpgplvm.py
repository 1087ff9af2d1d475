"""DPGPLVM estimator: planted factorisation, prediction and new-row identities, the missing-data
protocol of seed 001 §G, validation.

What each test asserts is justified outside the code: the planted column clustering and active
latent dimensions of :func:`make_factorised`; the new-row bound of a hard assignment equals the
Bayesian GPLVM's per-atom new-row bound, and a soft one is the φ-weighted sum of single-column
bounds; the predictive moments under an uncertain input agree with Monte Carlo over x* and tend
to the fixed-input moments as the input variance vanishes; a bound maximised by steps that each
raise it never decreases.
"""

from __future__ import annotations

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from gplvm import BayesianGPLVM, DPGPLVM
from gplvm.models import dpgplvm as dpgplvm_module
from gplvm.data import make_factorised
from gplvm.models.gplvm_family.variants.dp.missing_block import missing_data_log_likelihood
from gplvm.models.gplvm_family.variants.dp import dp_fitted, dp_rows
from gplvm.models.gplvm_family import estimator as family_estimator
from gplvm.models.gplvm_family import new_rows as core_rows
from gplvm.models.gplvm_family.variants.dp.dp_fitted import FittedDPGPLVM
from gplvm.models.gplvm_family.variants.dp.missing_block import missing_block_split
from gplvm.objectives import new_rows
from gplvm.objectives.collapsed import kl_standard_normal
from gplvm.plot import column_relevance
from gplvm.transforms import inverse_softplus

#: three functions of a 3-D latent space, each pair sharing one dimension (each function
#: leaves out one dimension: the ARD weights must find which).  At this size (80 training rows,
#: 24 columns) the fit is not always right: over data seeds 0-4 (model seed = data seed) the
#: clustering had ARI 0.54, 1, 1, 0.48, 1 and the active sets matched for seeds 2 and 4 (seed
#: 1's third group kept 7.7% of its largest ARD weight on its unused dimension); the
#: 60-column benchmark (benchmarks/reproduce/dpgplvm_synthetic.py) is the measured claim.
#: This test uses seed 2.
DIMENSIONS = ((0, 1), (1, 2), (0, 2))


@pytest.fixture(scope="module")
def planted():
    """The fast version of seed 001's Figure 6, fitted on the training rows of §G's split."""
    data = make_factorised(n_samples=92, columns_per_function=8, dimensions=DIMENSIONS,
                           n_components=3, lengthscale=1.5, noise_var=0.01, n_draws=4,
                           random_state=2)
    split = missing_block_split(data.Y, n_test=12, n_missing=8, random_state=0, pair=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DPGPLVM(n_components=3, n_inducing=15, truncation=5, max_iter=1000,
                        random_state=2, progress=False).fit(split.Y_train)
    return model, data, split


def test_recovers_the_planted_column_groups_and_their_latent_dimensions(planted):
    model, data, _ = planted
    assert adjusted_rand_score(data.labels, model.column_groups_) >= 0.9
    # each recovered group's active dimensions (ARD weight > 5% of its largest) are its
    # function's, up to one permutation of the latent axes
    assert model.n_column_groups_ == len(DIMENSIONS)
    learned = model.relevance_ / model.relevance_.max(axis=1, keepdims=True) > 0.05
    truth = {tuple(row) for row in data.active}
    found = [learned[model.column_groups_[data.labels == g][0]] for g in range(len(DIMENSIONS))]
    assert any({tuple(row[list(p)]) for row in found} == truth
               for p in itertools.permutations(range(3)))


def test_fitted_attributes_are_consistent(planted):
    model, data, _ = planted
    D, T, Q = data.Y.shape[1], model.truncation, model.n_components
    phi = model.assignments_
    assert phi.shape == (D, T) and np.allclose(phi.sum(1), 1.0) and np.all(phi >= 0)
    assert model.relevance_.shape == (model.n_column_groups_, Q)
    assert set(np.unique(model.column_groups_)) == set(range(model.n_column_groups_))
    assert model.noise_var_.shape == (D,) and np.all(model.noise_var_ > 0)
    assert len(model.kernels_) == T and len(model.kernel_) == model.n_column_groups_
    shade = column_relevance(model)
    assert shade.shape == (D, Q) and np.allclose(shade.max(1), 1.0)


def test_bound_never_decreases_over_the_fit(planted):
    """L-BFGS steps (Armijo line search), exact coordinate updates and merges accepted only when
    they raise the bound: every recorded value is at least the one before it."""
    model, _, _ = planted
    h = model.history_
    assert np.all(np.diff(h) >= -1e-8 * np.abs(h[1:]))
    assert h[-1] <= model.elbo_ + 1e-8 * abs(model.elbo_)


# ------------------------------------------------------------------ new rows
def _single_column_terms(fitted: FittedDPGPLVM, t, u, y0):
    """ℓ_d(θ_t) for every column d, each from the core's new-row bound with only d observed."""
    fam = dp_fitted.atom_model(fitted, t, standardised=True)
    X_mean, X_var = u["X_mean"][None], jax.nn.softplus(u["X_var"])[None]
    out = []
    for d in range(fitted.phi.shape[0]):
        mask = jnp.zeros(fitted.phi.shape[0]).at[d].set(1.0)
        R = new_rows.row_matrices(fam.map, mask[None])[0]
        value = -core_rows.row_objective(u, fam, y0 * mask, mask, R)
        out.append(float(value + kl_standard_normal(X_mean, X_var)))
    return np.array(out)


def test_new_row_bound_is_the_assignment_weighted_sum_of_column_bounds(planted):
    model, data, _ = planted
    fitted = model.fitted_
    rng = np.random.default_rng(0)
    D, T = fitted.phi.shape
    soft = fitted._replace(phi=jnp.asarray(rng.dirichlet(np.ones(T), size=D)))
    y0 = jnp.asarray((data.Y[3] - model.Y_mean_) / model.Y_std_)
    observed = jnp.asarray(rng.random(D) < 0.7, dtype=float)
    u = {"X_mean": jnp.asarray(rng.normal(size=3)),
         "X_var": inverse_softplus(jnp.asarray(rng.uniform(0.1, 0.5, 3)))}
    ours = -float(dp_rows.row_objective(u, soft, y0 * observed, observed))
    kl = float(kl_standard_normal(u["X_mean"][None], jax.nn.softplus(u["X_var"])[None]))
    reference = sum(np.asarray(soft.phi[:, t] * observed) @ _single_column_terms(soft, t, u, y0)
                    for t in range(T)) - kl
    assert abs(ours - reference) <= 1e-9 * abs(reference)


# ------------------------------------------------------------------ prediction
def test_uncertain_input_moments_against_monte_carlo_and_the_fixed_input_limit(planted):
    model, _, _ = planted
    rng = np.random.default_rng(1)
    x, s = model.X_mean_[:2], np.full((2, 3), 0.05)
    mean, var = model.predict_uncertain(x, s)
    tiny_mean, tiny_var = model.predict_uncertain(x, np.full((2, 3), 1e-10))
    fixed_mean, fixed_var = model.predict(x, return_var=True)
    np.testing.assert_allclose(tiny_mean, fixed_mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tiny_var, fixed_var, rtol=1e-5)
    S = 4000
    draws = x[:, None, :] + np.sqrt(s)[:, None, :] * rng.normal(size=(2, S, 3))
    m, v = model.predict(draws.reshape(-1, 3), return_var=True)
    m, v = m.reshape(2, S, -1), v.reshape(2, S, -1)
    mc_mean, mc_var = m.mean(1), v.mean(1) + m.var(1)
    se_mean = np.sqrt(mc_var / S)
    assert np.all(np.abs(mean - mc_mean) <= 5 * se_mean)
    np.testing.assert_allclose(var, mc_var, rtol=0.05)


def test_sample_draws_each_column_from_its_atom(planted):
    """With the data's own latents, sampled columns have the fitted predictive spread: the
    standardised residual (y − mean)/sd has variance near 1 (f and noise drawn)."""
    model, _, _ = planted
    X = np.repeat(model.X_mean_[:5], 400, axis=0)
    Y, X_out = model.sample(X=X, random_state=3)
    np.testing.assert_array_equal(X_out, X)
    mean, var = model.predict(X, return_var=True)
    z = (Y - mean) / np.sqrt(var)
    assert abs(z.var() - 1.0) < 0.05


# ------------------------------------------------------------------ missing-data protocol
def test_missing_block_split_keeps_pairs_and_removes_one_block():
    Y = np.arange(40 * 8, dtype=float).reshape(40, 8)
    split = missing_block_split(Y, n_test=10, n_missing=2, random_state=0, pair=2)
    assert split.Y_train.shape == (30, 8) and split.Y_test.shape == (10, 8)
    assert split.missing.sum() == 4
    pairs = split.missing.reshape(4, 2)
    assert np.all(pairs[:, 0] == pairs[:, 1])                 # (x, y) pairs removed together
    assert np.all(np.isnan(split.Y_test[:, split.missing]))
    assert not np.isnan(split.Y_test[:, ~split.missing]).any()
    np.testing.assert_array_equal(split.Y_test[:, ~split.missing],
                                  split.Y_truth[:, ~split.missing])
    rows = {tuple(r) for r in np.vstack([split.Y_train, split.Y_truth])}
    assert rows == {tuple(r) for r in Y}


def test_missing_data_log_likelihood_beats_the_column_marginals(planted):
    """Inferring x* from the observed columns must predict the missing block better than each
    column's own Gaussian fitted to the training rows (no latent structure) — for the DP-GP-LVM
    and, through the same code path, the Bayesian GPLVM."""
    model, _, split = planted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bgplvm = BayesianGPLVM(n_components=3, n_inducing=15, max_iter=300,
                               progress=False).fit(split.Y_train)
    from scipy.stats import norm
    mu, sd = split.Y_train.mean(0), split.Y_train.std(0)
    miss = np.isnan(split.Y_test)
    baseline = norm.logpdf(split.Y_truth, mu, sd)[miss].sum()
    for m in (model, bgplvm):
        value, mean, var = missing_data_log_likelihood(m, split.Y_test, split.Y_truth)
        assert np.isfinite(value) and value > baseline
        assert mean.shape == var.shape == split.Y_test.shape and np.all(var > 0)
        np.testing.assert_allclose(value, norm.logpdf(split.Y_truth, mean,
                                                      np.sqrt(var))[miss].sum(), rtol=1e-12)


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize("kwargs, match", [
    ({"truncation": 1}, "truncation"),
    ({"alpha_prior": (1.0, -1.0)}, "alpha_prior"),
    ({"noise_prior": (0.0,)}, "noise_prior"),
    ({"kernel_prior_scale": 0.0}, "kernel_prior_scale"),
    ({"steps_per_update": 0}, "steps_per_update"),
    ({"n_warmup": -1}, "n_warmup"),
    ({"n_init": 0}, "n_init"),
])
def test_bad_settings_raise_before_computation(kwargs, match, forbid_computation):
    forbid_computation(family_estimator, "initial_latents")
    forbid_computation(dpgplvm_module.dp_fit, "maximise")
    with pytest.raises(ValueError, match=match):
        DPGPLVM(n_components=2, **kwargs).fit(np.random.default_rng(0).normal(size=(10, 4)))


def test_several_starts_keep_the_one_with_the_highest_bound(monkeypatch):
    """n_init=3 keeps the start whose bound is highest; its first start is the n_init=1 fit."""
    rng = np.random.default_rng(1)
    Y = np.tanh(rng.normal(size=(30, 2)) @ rng.normal(size=(2, 6))) + 0.05 * rng.normal(
        size=(30, 6))
    kw = dict(n_components=2, n_inducing=6, truncation=3, max_iter=15, n_warmup=5,
              steps_per_update=5, merge_steps=5, n_init_steps=10, progress=False)
    bounds = []
    fit_once = DPGPLVM._fit_once

    def recording(self, *args):
        result = fit_once(self, *args)
        bounds.append(dpgplvm_module.dp_fit.bound(result.u, result.problem, result.state,
                                                  args[-1]))
        return result

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        single = DPGPLVM(**kw).fit(Y)
        monkeypatch.setattr(DPGPLVM, "_fit_once", recording)
        several = DPGPLVM(n_init=3, **kw).fit(Y)
    assert len(bounds) == 3 and len(set(bounds)) == 3      # the starts differ
    assert bounds[0] == single.elbo_
    assert several.elbo_ == max(bounds)


def test_times_select_the_dynamical_prior():
    rng = np.random.default_rng(0)
    t = np.linspace(0, 4, 30)
    Y = np.column_stack([np.sin(t), np.cos(t), np.sin(2 * t), t]) + 0.05 * rng.normal(
        size=(30, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DPGPLVM(n_components=2, n_inducing=6, truncation=2, max_iter=10, n_warmup=5,
                        steps_per_update=5, init="random", merge_steps=5,
                        progress=False).fit(Y, times=t)
    assert type(model._problem.latent).__name__ == "DynamicalLatent"
    assert model.X_mean_.shape == (30, 2) and np.all(np.isfinite(model.history_))
    # the time stamps and sequence labels are times_ and groups_, as in every estimator of
    # the family (one name per meaning; the column groups are column_groups_)
    np.testing.assert_array_equal(model.times_, t)
    assert model.groups_ is None
    assert model.column_groups_.shape == (4,)
    with pytest.raises(ValueError, match="times"):
        DPGPLVM(n_components=2).fit(Y, times=t[:5])


def test_a_format_4_file_has_its_sequence_labels_read_as_groups_(tmp_path):
    # format 4 and below kept them as sequence_groups_ (docs/contract.md, format 5)
    import json

    import gplvm
    from gplvm import io as gio
    rng = np.random.default_rng(0)
    t = np.tile(np.linspace(0, 2, 10), 2)
    labels = np.repeat([0, 1], 10)
    Y = np.column_stack([np.sin(t), np.cos(t), t]) + 0.05 * rng.normal(size=(20, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DPGPLVM(n_components=1, n_inducing=4, truncation=2, max_iter=6, n_warmup=3,
                        steps_per_update=3, init="random", merge_steps=3,
                        progress=False).fit(Y, times=t, groups=labels)
    path = tmp_path / "dp.gplvm"
    model.save(path)
    with np.load(path, allow_pickle=False) as archive:
        entries = {name: archive[name] for name in archive.files}
    document = json.loads(entries["__gplvm__"].tobytes().decode("utf-8"))
    document["format_version"] = 4
    document["fitted"]["sequence_groups_"] = document["fitted"].pop("groups_")
    document["document_sha256"] = gio.document_sha256(document)
    entries["__gplvm__"] = np.frombuffer(json.dumps(document).encode(), dtype=np.uint8)
    with open(path, "wb") as file:
        np.savez(file, **entries)
    loaded = gplvm.load(path)
    np.testing.assert_array_equal(loaded.groups_, labels)
    assert not hasattr(loaded, "sequence_groups_") and loaded._upgraded_from_format_ == 4
    np.testing.assert_array_equal(loaded.transform(Y), model.transform(Y))


def test_factorisation_plot_shades_each_column_by_its_ard_weights(planted):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model, data, _ = planted
    truth = data.active[data.labels].astype(float)
    axes = model.plot_factorisation(truth=truth)
    image = axes[1].get_images()[0].get_array()
    np.testing.assert_allclose(image, column_relevance(model))
    np.testing.assert_array_equal(axes[0].get_images()[0].get_array(), truth)
    plt.close("all")


def test_init_columns_with_a_kernel_without_length_scales_says_what_it_does():
    """init='columns' groups columns by ARD length-scales; a Linear kernel has none, so the
    fit starts from random assignments -- said in a warning, not silently (issue 31)."""
    from gplvm.kernels import Linear

    Y = np.random.default_rng(0).normal(size=(20, 4))
    kw = dict(n_components=2, n_inducing=4, truncation=3, max_iter=2, n_init_steps=2,
              random_state=0, progress=False)
    with pytest.warns(UserWarning, match="Linear has none: the fit starts from random"):
        DPGPLVM(init="columns", kernel=Linear(), **kw).fit(Y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DPGPLVM(init="random", kernel=Linear(), **kw).fit(Y)
    assert not any("length-scales" in str(w.message) for w in caught)


def test_constant_and_empty_columns_are_kept_out_and_put_back():
    """Issue 32: the DP-GP-LVM fitted on Y with a constant and a never-observed column inserted
    is the fit on Y (the same standardised array, so equal bit for bit); the inserted columns
    follow no atom (φ row 0, group −1) and come back as 1.5 with variance 0, and as NaN."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(16, 2))
    Y = np.tanh(X @ rng.normal(size=(2, 4))) + 0.05 * rng.normal(size=(16, 4))
    full = np.column_stack([Y[:, :2], np.full(16, 1.5), Y[:, 2:], np.full(16, np.nan)])
    kept = [0, 1, 3, 4]
    kw = dict(n_components=2, n_inducing=5, truncation=2, max_iter=6, n_warmup=2,
              n_init_steps=3, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone, model = DPGPLVM(**kw).fit(Y), DPGPLVM(**kw).fit(full)
    np.testing.assert_array_equal(model.X_mean_, alone.X_mean_)
    np.testing.assert_array_equal(model.assignments_[kept], alone.assignments_)
    np.testing.assert_array_equal(model.assignments_[[2, 5]], 0.0)
    assert model.column_groups_[2] == model.column_groups_[5] == -1
    np.testing.assert_array_equal(model.column_groups_[kept], alone.column_groups_)
    mean, var = model.predict(model.X_mean_[:3], return_var=True)
    mean0, var0 = alone.predict(alone.X_mean_[:3], return_var=True)
    np.testing.assert_array_equal(mean[:, kept], mean0)
    np.testing.assert_array_equal(var[:, kept], var0)
    assert (mean[:, 2] == 1.5).all() and (var[:, 2] == 0).all()
    assert np.isnan(mean[:, 5]).all() and np.isnan(model.noise_var_[5])
    assert model.noise_var_[2] == 0.0


def _gp_part_with_flag(u, flag, problem, phi, prior):
    """The DP-GP-LVM's negative GP part plus ``flag`` (module level: compiled once)."""
    from gplvm.models.gplvm_family.variants.dp import atoms
    return atoms.negative_gp_part(u, problem, phi, prior) + flag


def test_a_non_finite_bound_restarts_on_the_family_jitter_ladder(monkeypatch):
    """The DP-GP-LVM's L-BFGS runs restart on the family's one jitter policy
    (:func:`gplvm.models.gplvm_family.jitter_ladder.climb`): a bound that turns NaN at warm-up
    iteration k (and is finite again at the larger jitter) restarts from the last finite
    iterate at a larger K_uu jitter, warned, and the history keeps the steps of the run before
    the restart (the clean fit's first k + 1 values, iterate k included: optax's line search
    evaluated it before the fault) and counts them in ``n_iter_``."""
    from gplvm.inference.optimise import OptimOptions
    dp_fit = dpgplvm_module.dp_fit
    rng = np.random.default_rng(1)
    Y = np.tanh(rng.normal(size=(20, 2)) @ rng.normal(size=(2, 5))) + 0.05 * rng.normal(
        size=(20, 5))
    kw = dict(n_components=2, n_inducing=5, truncation=2, max_iter=12, n_warmup=8,
              steps_per_update=4, n_init_steps=3, random_state=0, progress=False)
    real, k = dp_fit.minimise, 3

    def with_flag(fault: bool):
        flag, calls = np.zeros(()), []

        def fake(fun, params, *, args, **rest):
            flag[...] = 0.0                     # every run after the faulty one is clean
            first = not calls
            calls.append(1)

            def callback(i, p, value):
                if fault and first and i == k - 1:
                    flag[...] = np.nan

            return real(_gp_part_with_flag, params, args=(flag, *args),
                        options=OptimOptions(callback=callback), **rest)
        return fake

    fits = {}
    for fault in (False, True):
        monkeypatch.setattr(dp_fit, "minimise", with_flag(fault))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fits[fault] = DPGPLVM(**kw).fit(Y)
    clean, faulty = fits[False], fits[True]
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any(f"at iteration {k} " in m for m in messages), messages
    assert any("DPGPLVM: raising the Kuu jitter" in m for m in messages), messages
    assert faulty.jitter_ > clean.jitter_
    np.testing.assert_array_equal(faulty.history_[:k + 1], clean.history_[:k + 1])
    assert faulty.n_iter_ == len(faulty.history_) and np.all(np.isfinite(faulty.history_))

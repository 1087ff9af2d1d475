"""The NUTS block of the RFLVM (issue 30): its adaptation, and the estimator's ``sampler='nuts'``.

That the block leaves the posterior invariant is tested by the Geweke test of the whole sweep
(tests/models/rflvm/test_rflvm_geweke.py, the ``-nuts`` cases).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import gplvm
from gplvm.inference.mcmc.nuts import adapt, nuts_transition, tuning_init
from gplvm.models.rflvm.checks import warn_short_adaptation


def test_adaptation_learns_each_coordinates_variance_and_the_target_acceptance():
    """On N(0, diag(s²)) with s = (0.1, 1, 10), the adapted inverse mass matrix is the target's
    variance (Welford over the second window, 250 draws: the relative standard error of a
    variance estimate from n draws of autocorrelated NUTS output is ~sqrt(2/n_eff); 35%
    allows n_eff ≥ 17 per coordinate), and the step size fixed at the end of burn-in gives a
    mean acceptance statistic near the 0.8 target (dual averaging; ±0.15 over 500 draws)."""
    scales = jnp.array([0.1, 1.0, 10.0])

    def logdensity(x):
        return -0.5 * jnp.sum((x / scales) ** 2)

    burn_in = 500

    def step(carry, inputs):
        x, t = carry
        key, sweep = inputs
        x, _, accept, _, _ = nuts_transition(key, x, logdensity, t, 8)
        return (x, adapt(t, x, accept, sweep)), (accept, t.step_size)

    t0 = tuning_init(3, 0.1, jnp.float64, burn_in)
    n = burn_in + 500
    keys = jax.random.split(jax.random.PRNGKey(3), n)
    (x, t), (accept, step_sizes) = jax.jit(lambda: jax.lax.scan(
        step, (jnp.ones(3), t0), (keys, jnp.arange(n))))()
    np.testing.assert_allclose(t.inverse_mass, scales**2, rtol=0.35)
    assert abs(float(np.mean(accept[burn_in:])) - 0.8) < 0.15
    assert np.all(np.asarray(step_sizes[burn_in + 1:]) == float(step_sizes[burn_in + 1]))


def test_without_burn_in_the_kernel_does_not_change():
    """B = 0: the step size and the mass matrix stay as started (the fixed kernel that the
    Geweke test checks)."""
    t = tuning_init(2, 0.3, jnp.float64, 0)
    for sweep in range(3):
        t2 = adapt(t, jnp.ones(2) * sweep, jnp.asarray(0.1), jnp.asarray(sweep))
        assert float(t2.step_size) == 0.3
        np.testing.assert_array_equal(t2.inverse_mass, np.ones(2))


@pytest.mark.parametrize("likelihood", ["negative_binomial", "gaussian"])
def test_estimator_samples_with_nuts_and_reports_its_diagnostics(likelihood):
    """A small fit: finite draws, the dispersion moved from its start (NB), per-sweep NUTS
    diagnostics in ``sampler_info_`` with the step size constant after burn-in."""
    rng = np.random.default_rng(0)
    t = np.linspace(-2, 2, 40)
    F = np.stack([np.sin(t + j) for j in range(6)], axis=1)
    if likelihood == "gaussian":
        Y = F + 0.1 * rng.standard_normal(F.shape)
    else:
        Y = rng.negative_binomial(5.0, 1.0 / (1.0 + np.exp(F + 1.0))).astype(float)
    Y[3, 2] = np.nan
    model = gplvm.RFLVM(likelihood=likelihood, n_components=1, n_features=10, n_iter=40,
                        burn_in=20, n_chains=2, sampler="nuts", progress=False,
                        learn_kernel=False, block_size=20).fit(Y)
    assert np.all(np.isfinite(model.X_samples_))
    info = model.sampler_info_
    assert set(info) >= {"accept_nuts", "n_leapfrog", "step_size", "accept_W"}
    assert np.all((info["accept_nuts"] >= 0) & (info["accept_nuts"] <= 1))
    assert np.all(info["n_leapfrog"] >= 1)
    kept = info["step_size"][:, 20:]
    np.testing.assert_array_equal(kept, kept[:, :1] * np.ones_like(kept))
    if likelihood == "negative_binomial":
        assert not np.allclose(model.dispersion_, 1000.0)   # r started at 1000


def test_nuts_refuses_the_dynamic_prior_naming_the_fix():
    Y = np.random.default_rng(0).poisson(2.0, (10, 3)).astype(float)
    with pytest.raises(ValueError, match="sampler='gibbs'"):
        gplvm.RFLVM(sampler="nuts", progress=False).fit(Y, times=np.arange(10.0))


def _small_counts(seed=0, n=30):
    rng = np.random.default_rng(seed)
    t = np.linspace(-2, 2, n)
    return rng.poisson(np.exp(np.stack([np.sin(t + j) for j in range(5)], axis=1))).astype(
        float)


def test_auto_stops_at_the_first_round_whose_figures_converge(monkeypatch):
    """``n_iter='auto'``: rounds of max(burn_in, 100) sweeps after burn-in, each followed by
    the convergence check, stopping at the first that passes (the rule is made to pass at
    its second call here: the rule itself is tested in tests/inference/mcmc/test_mcmc_convergence.py and
    below); the stored figures are those of the stored draws."""
    from gplvm.models.rflvm import run as module
    from gplvm.models.rflvm.convergence import convergence_figures

    calls = []

    def second_time(figures, target):
        calls.append(figures["n_draws"])
        return len(calls) >= 2

    monkeypatch.setattr(module, "has_converged", second_time)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)     # a converged run does not warn
        model = gplvm.RFLVM(n_components=1, n_features=10, n_iter="auto", burn_in=60,
                            max_iter=3000, n_chains=2, sampler="nuts", progress=False,
                            learn_kernel=False, block_size=50).fit(_small_counts())
    assert calls == [100, 200] and model.n_iter_ == 260 and model.converged_
    assert model.convergence_ == convergence_figures(model.history_[:, 60:], model.X_samples_)


def test_convergence_rule_needs_every_rhat_and_every_ess():
    """R-hat ≤ 1.01 and ESS ≥ the target for the log-likelihood and the distances, NaN
    failing."""
    from gplvm.models.rflvm.convergence import has_converged

    good = {"rhat_log_lik": 1.005, "ess_log_lik": 500.0, "rhat_distances": 1.01,
            "ess_distances": 400.0, "n_draws": 1000}
    assert has_converged(good, 400)
    for key, bad in (("rhat_log_lik", 1.02), ("rhat_distances", 1.011),
                     ("ess_log_lik", 399.0), ("ess_distances", 10.0),
                     ("rhat_distances", float("nan")), ("ess_log_lik", float("nan"))):
        assert not has_converged({**good, key: bad}, 400), key


def test_the_projection_scales_the_kept_sweeps_by_the_missing_ess():
    """ESS of stationary chains grows in proportion to the kept sweeps: ESS 100 after 250 kept
    sweeps needs 1,000 for ESS 400, 750 more, 1,500 s at 2 s a sweep; the smaller of the two
    ESS decides; no figure once ESS is reached (R-hat alone is short), without either ESS
    (too few draws), or with the chains in separate modes; no time before a pace is known."""
    from gplvm.models.rflvm.convergence import describe_pace, duration, sweeps_to_target

    figures = {"rhat_log_lik": 1.05, "ess_log_lik": 100.0, "rhat_distances": 1.2,
               "ess_distances": 250.0, "n_draws": 250, "n_modes": 1.0}
    assert sweeps_to_target(figures, 400) == 1000
    assert describe_pace(figures, 400, 2.0) == "ESS 400 in ~750 more sweeps, ~25 min"
    assert describe_pace(figures, 400, None) == "ESS 400 in ~750 more sweeps"   # no pace yet
    assert sweeps_to_target({**figures, "ess_distances": 50.0}, 400) == 2000
    for changed in ({"ess_log_lik": 400.0, "ess_distances": 500.0},
                    {"ess_log_lik": float("nan")}, {"ess_distances": float("nan")},
                    {"ess_distances": 0.0}, {"n_modes": 2.0}):
        assert sweeps_to_target({**figures, **changed}, 400) is None, changed
        assert describe_pace({**figures, **changed}, 400, 2.0) == ""
    assert [duration(s) for s in (40.0, 720.0, 3.1 * 3600)] == ["40 s", "12 min", "3.1 h"]


def test_auto_stops_at_max_iter_with_a_warning_that_gives_the_figures():
    """The default inference (NUTS from the mode, ``n_iter='auto'``; issue 30) with an ESS
    target no run of this length can reach: the run ends at max_iter with a
    ConvergenceWarning that names the figures and the setting to raise; resume() of the
    finished run returns it unchanged."""
    with pytest.warns(ConvergenceWarning, match=r"max_iter=130 .*R-hat .* ESS .*raise max_iter"
                      ) as caught:
        model = gplvm.RFLVM(n_components=1, n_features=10, burn_in=20, ess_target=10**6,
                            max_iter=130, n_chains=2, progress=False, learn_kernel=False,
                            block_size=50).fit(_small_counts(1))
    # the projection: ESS grows in proportion to the 110 kept sweeps
    ess = min(model.convergence_["ess_log_lik"], model.convergence_["ess_distances"])
    more = int(np.ceil(110 * 10**6 / ess)) - 110
    assert f"at the current rate, ESS 1,000,000 in ~{more:,} more sweeps" in str(
        caught[-1].message)
    assert "log_density" in model.mode_start_         # NUTS started from the block's mode
    assert model.n_iter_ == 130 and not model.converged_
    assert model.history_.shape == (2, 130)
    before = model.history_.copy()
    assert model.resume() is model
    np.testing.assert_array_equal(model.history_, before)


def test_auto_rounds_give_the_chains_of_one_fixed_length_run():
    """The rounds continue the chains as resume() does, so an 'auto' run that stopped after
    n sweeps holds the same draws as ``n_iter=n`` with the same seed."""
    kw = dict(n_components=1, n_features=10, burn_in=20, n_chains=2, sampler="nuts",
              progress=False, learn_kernel=False, block_size=50, random_state=3)
    Y = _small_counts(2)
    with pytest.warns(ConvergenceWarning):
        auto = gplvm.RFLVM(n_iter="auto", ess_target=10**6, max_iter=220, **kw).fit(Y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)    # whether it warns is not the point
        fixed = gplvm.RFLVM(n_iter=220, **kw).fit(Y)
    np.testing.assert_array_equal(auto.history_, fixed.history_)
    np.testing.assert_array_equal(auto.X_samples_, fixed.X_samples_)


def test_a_saved_nuts_fit_resumes_to_the_whole_runs_draws(tmp_path):
    """A NUTS fit's chain states (the adaptation's among them) go through a file: the loaded
    fit, resumed to more sweeps, holds the draws of one uninterrupted run."""
    kw = dict(n_components=1, n_features=10, burn_in=10, n_chains=2, progress=False,
              learn_kernel=False, block_size=10, random_state=4)
    Y = _small_counts(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)    # so short a run: not the point
        whole = gplvm.RFLVM(n_iter=40, **kw).fit(Y)
        gplvm.RFLVM(n_iter=20, **kw).fit(Y).save(tmp_path / "nuts.gplvm")
        loaded = gplvm.load(tmp_path / "nuts.gplvm")
        loaded.set_params(n_iter=40).resume()
    np.testing.assert_array_equal(loaded.history_, whole.history_)
    np.testing.assert_array_equal(loaded.X_samples_, whole.X_samples_)


def test_the_default_sampler_refuses_the_dynamic_prior_naming_the_fix():
    with pytest.raises(ValueError, match=r"sampler='nuts' \(the default\).*pass "
                                         r"sampler='gibbs' for the dynamic RFLVM"):
        gplvm.RFLVM(progress=False).fit(_small_counts(), times=np.arange(30.0))


def test_a_burn_in_too_short_to_adapt_in_warns_naming_the_fix():
    """Stan estimates no mass matrix from fewer than 20 warm-up iterations; with B sweeps the
    library fixes the step size after B − ⌊8B/10⌋ sweeps of dual averaging past the last mass
    window (:mod:`gplvm.inference.mcmc.nuts`), 2 at B = 10.  B = 0 (no adaptation) and B ≥ 20
    are silent; a fit with B = 5 warns before it samples."""
    with pytest.warns(UserWarning, match=r"burn_in=10\).*after 2 sweeps.*burn_in >= 20"):
        warn_short_adaptation(10)
    for burn_in in (0, 20, 200):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warn_short_adaptation(burn_in)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)    # so short a run: not the point
        with pytest.warns(UserWarning, match=r"sampler='nuts', burn_in=5\)"):
            gplvm.RFLVM(n_components=1, n_features=10, burn_in=5, n_iter=7, n_chains=1,
                        learn_kernel=False, progress=False, block_size=7).fit(_small_counts())

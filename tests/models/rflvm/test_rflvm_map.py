"""The RFLVM's MAP fit, ``RFLVM(inference='map')`` (issue 30, item 2;
:mod:`gplvm.models.rflvm.map_fit`): each chain's state the mode of the joint density."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import gplvm
from _rflvm_tiny import tiny_rflvm
from gplvm.summary import model_summary
from gplvm.models.rflvm.features import design
from gplvm.models.rflvm.joint import log_density, to_position
from gplvm.models.rflvm.map_fit import SCALED_TOLERANCE, mode_state
from gplvm.models.rflvm.map_start import GRADIENT_TOLERANCE
from gplvm.models.rflvm.sweep import prior_W


def _problem(kind: str, seed: int = 0):
    """A tiny RFLVM (N = 9, Q = 2, 3 frequencies, J = 4, one entry missing), one chain; its
    spec the Gibbs sweep's, whose block density is the posterior's own in plain coordinates
    (the MAP fit's: :func:`mode_state` takes W modulo rotations for NUTS only)."""
    spec, data, state, Y = tiny_rflvm(kind, seed, n_rows=9)
    return dataclasses.replace(spec, sampler="gibbs"), data, state, Y


def _density(spec, data, state):
    """The block's log-density given the state's σ², h (and filled Y for the Gaussian)."""
    log_prior_W = prior_W(jax.random.PRNGKey(3), spec, data, state).total
    Y = state.Y_fill if spec.likelihood == "gaussian" else None
    return log_density(spec, data, state.W, state.noise_var, state.dispersion_rate, Y,
                       log_prior_W)


@pytest.mark.parametrize("kind", ["poisson", "negative_binomial"])
def test_the_counts_mode_is_a_local_maximum_and_its_log_likelihood_is_scipys(kind):
    """At the state returned, the gradient of the joint density (jax.grad, independent of the
    search's own figure) is within the search's tolerance (plus the round trip through the
    state, 1e-6), 50 random moves of size 1e-2 all lower the density, and the state's
    log-likelihood is the sum of scipy.stats' log-pmfs over the observed entries."""
    spec, data, state, Y = _problem(kind)
    hat, found, scaled = mode_state(spec, data, state)
    fn = _density(spec, data, state)
    position = to_position(spec, data, hat)
    assert float(jnp.max(jnp.abs(jax.grad(fn)(position)))) <= GRADIENT_TOLERANCE + 1e-6
    assert float(found.max_gradient) <= GRADIENT_TOLERANCE and float(scaled) <= SCALED_TOLERANCE
    moves = 1e-2 * jax.random.normal(jax.random.PRNGKey(5), (50, position.shape[0]))
    assert bool(jnp.all(jax.vmap(fn)(position + moves) < fn(position)))
    assert float(fn(position)) > float(fn(to_position(spec, data, state)))

    psi = np.asarray(design(hat.X, hat.W, True) @ hat.beta)
    seen = ~np.isnan(Y)
    if kind == "poisson":
        expected = stats.poisson.logpmf(Y[seen], np.exp(psi[seen])).sum()
    else:
        r = np.broadcast_to(np.asarray(hat.dispersion), Y.shape)[seen]
        p_success = 1.0 / (1.0 + np.exp(psi[seen]))          # mean r·e^ψ
        expected = stats.nbinom.logpmf(Y[seen], r, p_success).sum()
    np.testing.assert_allclose(float(hat.log_lik), expected, rtol=1e-10)


def test_the_negative_binomials_block_density_needs_no_layout_of_the_counts():
    """The NB block reads Σ log Γ(y + r) − log Γ(r) from the entries with y > 0 laid out once
    (``data.nonzero``); a data object without that layout (a file saved before it existed)
    gives the same density from every observed entry (a zero count adds log Γ(r) − log Γ(r)
    = 0), at the start and at random positions around it, with the same gradient."""
    spec, data, state, _ = _problem("negative_binomial")
    assert data.nonzero is not None
    laid_out = _density(spec, data, state)
    dense = _density(spec, data._replace(nonzero=None), state)
    position = to_position(spec, data, state)
    for p in position + 0.1 * jax.random.normal(jax.random.PRNGKey(7), (4, position.shape[0])):
        np.testing.assert_allclose(float(dense(p)), float(laid_out(p)), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(jax.grad(dense)(p)),
                                   np.asarray(jax.grad(laid_out)(p)), rtol=1e-9, atol=1e-9)


def test_the_gaussian_mode_holds_the_closed_form_conditional_modes():
    """Gaussian (β integrated out in the block): at the state returned, each column's β is the
    ridge fit on its observed rows, (Φ_oᵀΦ_o + I/s0)⁻¹Φ_oᵀy_o (the fixed point of β and the
    missing entries' conditional mean), the missing entry is Φβ, and σ_j² the inverse-gamma
    conditional's mode (b0 + RSS_j/2)/(a0 + N/2 + 1) given the filled column — written out in
    NumPy; the search raised the block's density and ends at a stationary point of it given the
    final σ² (within the scaled tolerance)."""
    spec, data, state, Y = _problem("gaussian")
    hat, _, scaled = mode_state(spec, data, state)
    Phi = np.asarray(design(hat.X, hat.W, False))
    Yf = np.asarray(hat.Y_fill)
    seen = ~np.isnan(Y)
    np.testing.assert_array_equal(Yf[seen], Y[seen])
    ridge = np.eye(Phi.shape[1]) / spec.beta_prior_var
    beta = np.stack([np.linalg.solve(Phi[seen[:, j]].T @ Phi[seen[:, j]] + ridge,
                                     Phi[seen[:, j]].T @ Y[seen[:, j], j])
                     for j in range(Y.shape[1])], axis=1)
    np.testing.assert_allclose(np.asarray(hat.beta), beta, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(Yf[2, 1], (Phi @ beta)[2, 1], rtol=1e-6)
    a0, b0 = spec.noise_prior
    rss = np.sum(Yf**2, axis=0) - np.sum(Yf * (Phi @ beta), axis=0)
    np.testing.assert_allclose(np.asarray(hat.noise_var),
                               (b0 + rss / 2) / (a0 + Y.shape[0] / 2 + 1), rtol=1e-6)
    fn = _density(spec, data, hat)
    assert float(fn(to_position(spec, data, hat))) > float(fn(to_position(spec, data, state)))
    assert float(scaled) <= SCALED_TOLERANCE       # the alternation ran until σ² settled


def _two_groups(seed: int = 0):
    """30 rows in two planted groups with very different Poisson rates over 12 columns."""
    rng = np.random.default_rng(seed)
    labels = np.repeat([0, 1], 15)
    rates = np.where(labels[:, None] == 0, np.linspace(1, 12, 12), np.linspace(12, 1, 12))
    return rng.poisson(rates).astype(float), labels


def test_map_fit_separates_planted_groups_and_works_as_a_fitted_model(tmp_path):
    """The estimator with the default DP kernel: every chain's mode is its one draw, the two
    planted groups are each other's strangers (1-NN accuracy 1 in the mean latents), the
    verbs run on the modes, resume() has nothing to do, and a saved fit loads equal."""
    Y, labels = _two_groups()
    model = gplvm.RFLVM(inference="map", n_features=20, n_chains=2, progress=False,
                        random_state=1).fit(Y)
    assert model.converged_ and model.n_iter_ == 0
    assert model.X_samples_.shape == (2, 1, 30, 2) and model.history_.shape == (2, 1)
    assert np.all(model.mode_start_["max_scaled_gradient"] <= SCALED_TOLERANCE)
    np.testing.assert_allclose(model.history_[:, 0], model._result_.state[0].log_lik)
    distances = np.linalg.norm(model.X_mean_[:, None] - model.X_mean_[None], axis=-1)
    np.fill_diagonal(distances, np.inf)
    assert np.all(labels[np.argmin(distances, axis=1)] == labels)
    assert np.isfinite(model.transform(Y[:4])).all()
    assert np.isfinite(model.score(Y))
    summary = model_summary(model)                       # what gplvm info shows
    assert "rhat" not in summary and "convergence" not in summary
    assert len(summary["modes"]["log_density"]) == 2
    assert summary["log_likelihood"] == pytest.approx(float(np.mean(model.history_)))
    before = model.X_mean_.copy()
    assert model.resume() is model and np.array_equal(model.X_mean_, before)
    model.save(tmp_path / "map.gplvm")
    loaded = gplvm.load(tmp_path / "map.gplvm")
    assert loaded.inference == "map" and np.array_equal(loaded.X_mean_, before)
    # a Gibbs refit of the same estimator found no modes: it keeps none of the MAP fit's
    model.set_params(inference="mcmc", sampler="gibbs", n_iter=4, burn_in=2).fit(Y)
    assert not hasattr(model, "mode_start_") and "modes" not in model_summary(model)


def test_map_refuses_the_dynamic_prior():
    Y, _ = _two_groups()
    with pytest.raises(ValueError, match="inference='map'.*times"):
        gplvm.RFLVM(inference="map", progress=False).fit(Y, times=np.arange(30.0))

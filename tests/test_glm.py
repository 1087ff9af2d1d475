"""BayesianGLM (revrand's GeneralizedLinearModel, seed 002 §1.3).

Exact identities (the entropy bound's closed forms, an unbiased bound against its Gaussian closed
form, quantiles against SciPy's CDFs), planted Poisson weights, calibrated intervals against the
true model's exact coverage, digits 3 vs 5, input validation and the scikit-learn contract.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import NotFittedError
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedShuffleSplit

from gplvm import BayesianGLM
from gplvm._pytree import pytree_dataclass, static_field
from gplvm.features import AbstractFeatureMap, Bias, Concat
from gplvm.likelihoods import Bernoulli, Binomial, Gaussian, NegativeBinomial, Poisson
from gplvm.models import _quantiles
from gplvm.models.glm import _neg_elbo
from gplvm.objectives import glm as glm_objective


@pytree_dataclass
class Identity(AbstractFeatureMap):
    """φ(x) = x: known features, so the GLM's weights are the planted regression weights."""

    in_dim: int = static_field(default=1)

    @property
    def n_features(self) -> int:
        return self.in_dim

    @property
    def input_dim(self) -> int:
        return self.in_dim

    def __call__(self, X):
        return self._check_input(X)

    def unconstrained(self):
        return {}

    def from_unconstrained(self, u):
        return self


# ------------------------------------------------------------------------- the bound (eq. 27)

def test_entropy_bound_closed_forms():
    rng = np.random.default_rng(0)
    psi = rng.uniform(0.1, 2.0, size=(1, 6))
    m = rng.normal(size=(1, 6))
    # K = 1: −log N(m | m, 2Ψ) = ½ Σ log(4πψ), below the exact entropy ½ Σ log(2πeψ)
    bound = float(glm_objective.entropy_lower_bound(m, psi))
    assert bound == pytest.approx(0.5 * np.sum(np.log(4 * np.pi * psi)), rel=1e-12)
    assert bound < 0.5 * np.sum(np.log(2 * np.pi * np.e * psi))
    # K far-apart components: the cross terms vanish, leaving log K + the K = 1 terms' mean
    psi3 = rng.uniform(0.1, 2.0, size=(3, 6))
    m3 = np.array([0.0, 1e3, 2e3])[:, None] + rng.normal(size=(3, 6))
    expected = math.log(3) + np.mean(0.5 * np.sum(np.log(4 * np.pi * psi3), axis=1))
    assert float(glm_objective.entropy_lower_bound(m3, psi3)) == pytest.approx(expected,
                                                                               rel=1e-12)


def _gaussian_elbo_closed_form(Phi, y, m, psi, prior, noise):
    """Eq. 27 with the expected Gaussian log-likelihood in closed form (no sampling)."""
    mu, var = Phi @ m.T, (Phi**2) @ psi.T                                    # (N, K)
    ell = -0.5 * (np.log(2 * np.pi * noise) + ((y[:, None] - mu) ** 2 + var) / noise)
    log_prior = np.mean(-0.5 * np.sum(np.log(2 * np.pi * prior) + m**2 / prior + psi / prior,
                                      axis=1))
    return np.sum(np.mean(ell, axis=1)) + log_prior + float(
        glm_objective.entropy_lower_bound(m, psi))


def test_stochastic_bound_is_unbiased_with_minibatches():
    """The average of the minibatch (N/B-boosted, eqs. 5–6) reparameterised bound over many
    draws equals the closed-form full-data bound, within 4 Monte Carlo standard errors."""
    rng = np.random.default_rng(1)
    N, M, K = 30, 5, 3
    Phi, y = rng.normal(size=(N, M)), rng.normal(size=N)
    m, psi = rng.normal(size=(K, M)), rng.uniform(0.05, 0.5, size=(K, M))
    prior, noise = np.full(M, 1.5), 0.7
    u = {"features": {}, "likelihood": Gaussian(noise_var=noise).unconstrained(),
         "prior_var": jnp.log(jnp.expm1(jnp.array([1.5]))), "m": jnp.asarray(m),
         "psi": jnp.log(jnp.expm1(jnp.asarray(psi)))}
    objective = _neg_elbo(10, 2)   # B = 10 of N = 30, L = 2 draws
    keys = jax.random.split(jax.random.PRNGKey(0), 20000)
    values = -np.asarray(jax.jit(jax.vmap(objective, in_axes=(None, 0, None, None, None, None)))(
        u, keys, Identity(in_dim=M), Gaussian(noise_var=noise), jnp.asarray(Phi), jnp.asarray(y)))
    exact = _gaussian_elbo_closed_form(Phi, y, m, psi, prior, noise)
    assert abs(values.mean() - exact) < 4 * values.std() / np.sqrt(values.size)


# ------------------------------------------------------------------------- quantiles (eqs. 30–31)

_SCIPY = {
    "gaussian": (Gaussian(noise_var=0.3), lambda f: stats.norm(f, np.sqrt(0.3))),
    "bernoulli": (Bernoulli(), lambda f: stats.bernoulli(1 / (1 + np.exp(-f)))),
    "binomial": (Binomial(n_trials=12), lambda f: stats.binom(12, 1 / (1 + np.exp(-f)))),
    "poisson": (Poisson(), lambda f: stats.poisson(np.exp(f))),
    "negative_binomial": (NegativeBinomial(dispersion=2.5),
                          lambda f: stats.nbinom(2.5, 1 / (1 + np.exp(f)))),
}


@pytest.mark.parametrize("name", sorted(_SCIPY))
def test_quantiles_solve_the_monte_carlo_cdf(name):
    """At the returned α: the mixture CDF (from SciPy) equals p (continuous), or α is the least
    integer with CDF(α) ≥ p (counts)."""
    lik, dist = _SCIPY[name]
    F = np.random.default_rng(2).normal(1.0, 0.8, size=(6, 40))
    levels = np.array([0.05, 0.5, 0.95])
    Q = np.asarray(_quantiles.quantiles(lik, jnp.asarray(F), jnp.asarray(levels)))
    assert Q.shape == (6, 3)
    for n in range(6):
        for j, p in enumerate(levels):
            cdf = np.mean(dist(F[n]).cdf(Q[n, j]))
            if lik.is_count:
                assert Q[n, j] == np.round(Q[n, j])
                assert cdf >= p - 1e-12 and np.mean(dist(F[n]).cdf(Q[n, j] - 1)) < p
            else:
                assert cdf == pytest.approx(p, abs=1e-10)


# ------------------------------------------------------------------------- planted structure

def test_poisson_glm_recovers_planted_weights():
    """log λ = 0.5 + x·(0.4, −0.3, 0.2) on known features [x, 1]: the posterior mean lies within
    4 standard errors (from the Fisher information at the truth) of the planted weights."""
    rng = np.random.default_rng(3)
    N = 2000
    X = rng.normal(size=(N, 3))
    w = np.array([0.4, -0.3, 0.2, 0.5])
    Phi = np.column_stack([X, np.ones(N)])
    y = rng.poisson(np.exp(Phi @ w)).astype(float)
    features = Concat.of([Identity(in_dim=3), Bias(in_dim=3)])
    model = BayesianGLM("poisson", features=features,
                        progress=False, random_state=0).fit(X, y)
    mean = model.weights_mean_.mean(axis=0)
    se = np.sqrt(np.diag(np.linalg.inv(Phi.T @ (np.exp(Phi @ w)[:, None] * Phi))))
    assert np.all(np.abs(mean - w) < 4 * se), (mean, w, se)


def _coverage_band(c):
    """Expected coverage of the true intervals and 3 standard errors of a coverage fraction."""
    return np.mean(c), 3 * np.sqrt(np.sum(c * (1 - c))) / len(c)


@pytest.fixture(scope="module")
def sine_inputs():
    rng = np.random.default_rng(4)
    return rng.uniform(-3, 3, size=(1500, 1)), rng


def test_gaussian_interval_coverage(sine_inputs):
    X, rng = sine_inputs
    f = np.sin(2 * X[:, 0])
    y = f + 0.3 * rng.normal(size=len(f))
    model = BayesianGLM("gaussian", n_features=100,
                        progress=False, random_state=0).fit(X[:500], y[:500])
    lo, hi = model.predict_interval(X[500:], coverage=0.9)
    covered = np.mean((y[500:] >= lo) & (y[500:] <= hi))
    expected, band = _coverage_band(np.full(1000, 0.9))
    assert abs(covered - expected) <= band, covered


def test_poisson_interval_coverage(sine_inputs):
    """Counts: the true model's interval [min{y: F(y) ≥ .05}, min{y: F(y) ≥ .95}] covers
    F(hi) − F(lo − 1), computed exactly from the Poisson CDF at the true rates."""
    X, rng = sine_inputs
    rate = np.exp(1.0 + np.sin(2 * X[:, 0]))
    y = rng.poisson(rate).astype(float)
    model = BayesianGLM("poisson", n_features=100,
                        progress=False, random_state=0).fit(X[:500], y[:500])
    lo, hi = model.predict_interval(X[500:], coverage=0.9)
    covered = np.mean((y[500:] >= lo) & (y[500:] <= hi))
    true = stats.poisson(rate[500:])
    t_lo, t_hi = true.ppf(0.05), true.ppf(0.95)
    expected, band = _coverage_band(true.cdf(t_hi) - true.cdf(t_lo - 1))
    assert abs(covered - expected) <= band, (covered, expected)
    # the predictive mean tracks the true rate
    assert np.sqrt(np.mean((model.predict(X[500:]) - rate[500:]) ** 2)) < 0.25 * rate.std()


# ------------------------------------------------------------------------- digits 3 vs 5

def test_digits_three_vs_five():
    """Held-out 30%, stratified; mean over the first 3 of the benchmark's 10 splits here (the
    benchmark reports all 10).  Targets: error ≤ 2.5% and log-loss ≤ 0.12 (revrand's report:
    2.07% and 0.114)."""
    digits = load_digits()
    keep = (digits.target == 3) | (digits.target == 5)
    X, y = digits.data[keep], (digits.target[keep] == 5).astype(float)
    errors, losses = [], []
    splits = StratifiedShuffleSplit(n_splits=10, test_size=0.3, random_state=0).split(X, y)
    for i, (train, test) in zip(range(3), splits):
        model = BayesianGLM("bernoulli", progress=False, random_state=i).fit(X[train], y[train])
        p = model.predict_proba(X[test])[:, 1]
        errors.append(np.mean((p > 0.5) != y[test]))
        losses.append(log_loss(y[test], p))
    assert np.mean(errors) <= 0.025 and np.mean(losses) <= 0.12, (errors, losses)


# ------------------------------------------------------------------------- contract

@pytest.fixture(scope="module")
def small_counts():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 2))
    y = rng.binomial(5, 1 / (1 + np.exp(-X[:, 0]))).astype(float)
    return X, y


@pytest.mark.parametrize("likelihood", ["binomial", "negative_binomial"])
def test_other_likelihoods_fit_and_predict(likelihood, small_counts):
    X, y = small_counts
    lik = Binomial(n_trials=5) if likelihood == "binomial" else likelihood
    model = BayesianGLM(lik, n_features=20, n_mixture=2, n_iter=60, progress=False).fit(X, y)
    mean, sd = model.predict(X[:7], return_std=True)
    lo, hi = model.predict_interval(X[:7])
    assert mean.shape == sd.shape == lo.shape == (7,)
    assert np.all(np.isfinite(mean)) and np.all(sd > 0) and np.all(lo <= hi)
    assert np.all(lo == np.round(lo)) and np.all(lo >= 0)
    if likelihood == "binomial":
        proba = model.predict_proba(X[:7])
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        np.testing.assert_allclose(mean, 5 * proba[:, 1], rtol=1e-12)   # E[y] = n E[σ(f)]
        assert np.all(hi <= 5)
    else:
        assert model.likelihood_.dispersion > 0
        with pytest.raises(ValueError, match="predict_proba"):
            model.predict_proba(X[:7])


def test_same_random_state_same_result(small_counts):
    X, y = small_counts
    y = (y > 2).astype(float)
    fit = lambda seed: BayesianGLM("bernoulli", n_features=20, n_mixture=2, n_iter=50,
                                   progress=False, random_state=seed).fit(X, y)
    a, b, c = fit(0), fit(0), fit(1)
    np.testing.assert_array_equal(a.weights_mean_, b.weights_mean_)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert not np.array_equal(a.weights_mean_, c.weights_mean_)


def test_sklearn_contract(small_counts):
    X, y = small_counts
    model = BayesianGLM("poisson", n_mixture=3, n_iter=10, random_state=2)
    params = model.get_params()
    assert params["likelihood"] == "poisson" and params["n_mixture"] == 3
    copy = clone(model)
    assert copy.get_params() == params
    for verb in (model.predict, model.predict_proba, lambda X: model.predict_quantile(X, 0.5)):
        with pytest.raises(NotFittedError):
            verb(X)


@pytest.mark.parametrize("case", ["nan_X", "inf_X", "nan_y", "lengths", "fractional_counts",
                                  "negative_counts", "non_binary", "unknown_likelihood",
                                  "multinomial", "bad_n_iter", "binomial_over_trials"])
def test_bad_input_raises_before_computation(case, forbid_computation):
    import gplvm.models.glm as module

    forbid_computation(module, "default_features", "minimise")
    X, y = np.zeros((10, 2)), np.arange(10.0)
    kwargs = {"likelihood": "poisson"}
    if case == "nan_X":
        X[3, 1] = np.nan
    elif case == "inf_X":
        X[0, 0] = -np.inf
    elif case == "nan_y":
        y[4] = np.nan
    elif case == "lengths":
        X = X[:-2]
    elif case == "fractional_counts":
        y[5] = 2.5
    elif case == "negative_counts":
        y[1] = -1.0
    elif case == "non_binary":
        kwargs = {"likelihood": "bernoulli"}
    elif case == "unknown_likelihood":
        kwargs = {"likelihood": "zebra"}
    elif case == "multinomial":
        kwargs = {"likelihood": "multinomial"}
    elif case == "bad_n_iter":
        kwargs["n_iter"] = 0
    else:
        kwargs = {"likelihood": Binomial(n_trials=4)}
    with pytest.raises(ValueError):
        BayesianGLM(progress=False, **kwargs).fit(X, y)

"""The dynamic RFLVM's GP prior over time (seed 000, §3.1): the inducing-point prior's density
and draws against dense linear algebra, the time-kernel update against the exact posterior,
and a fit with time stamps."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

import gplvm
from gplvm.baselines import PPCA
from gplvm.data import make_s_curve
from gplvm.metrics import imputation_mse
from gplvm.models._rflvm.latents import (time_prior_draw, time_prior_factors,
                                         time_prior_log_density)


def _dense_cov(t, u, ell, var):
    k = lambda a, b: var * np.exp(-0.5 * (a[:, None] - b[None]) ** 2 / ell**2)
    Kuu = k(u, u) + 1e-8 * var * np.eye(len(u))
    Q = k(t, u) @ np.linalg.solve(Kuu, k(u, t))
    return Q + np.diag(np.maximum(var - np.diag(Q), 1e-6 * var))


def test_inducing_time_prior_density_and_draws_match_dense():
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 10, 40))
    u = np.linspace(0, 10, 8)
    params = jnp.log(jnp.array([1.5, 0.7]))
    C = _dense_cov(t, u, 1.5, 0.7)
    B, d = time_prior_factors(jnp.asarray(t), jnp.asarray(u), params)
    np.testing.assert_allclose(np.asarray(B @ B.T + jnp.diag(d)), C, atol=1e-10)
    X = rng.normal(size=(40, 3))
    want = sum(stats.multivariate_normal(np.zeros(40), C).logpdf(X[:, q]) for q in range(3))
    got = float(time_prior_log_density(jnp.asarray(X), B, d))
    assert abs(got - want) < 1e-8 * abs(want)
    draws = np.asarray(time_prior_draw(jax.random.PRNGKey(0), B, d, 40000))
    # Sample covariance entries within 5 standard errors (SE² = (C_ij² + C_ii C_jj)/n).
    emp = np.cov(draws.T)
    se = np.sqrt((C**2 + np.outer(np.diag(C), np.diag(C))) / len(draws))
    assert np.max(np.abs(emp - C) / se) < 5


def test_dynamic_fit_imputes_better_than_ppca():
    d = make_s_curve("gaussian", n_samples=120, n_outputs=40, random_state=0, noise_std=0.3)
    rng = np.random.default_rng(0)
    mask = rng.random(d.Y.shape) < 0.2
    Y = d.Y.copy()
    Y[mask] = np.nan
    model = gplvm.RFLVM(likelihood="gaussian", n_features=40, n_iter=120, burn_in=60,
                        n_chains=1, block_size=30, progress=False, random_state=0)
    model.fit(Y, times=d.times)
    err = imputation_mse(d.Y, model.impute(Y), mask)
    err_ppca = imputation_mse(d.Y, PPCA(2).fit(Y).impute(Y), mask)
    assert np.all(np.isfinite(model.X_mean_))
    assert err < err_ppca

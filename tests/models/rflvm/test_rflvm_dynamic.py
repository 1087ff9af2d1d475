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
from gplvm.models.rflvm.latents import (time_prior_draw, time_prior_factors,
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
                        sampler="gibbs", n_chains=1, block_size=30, learn_kernel=False, progress=False,
                        random_state=0)     # the time prior is the subject, not the DP kernel
    model.fit(Y, times=d.times)
    err = imputation_mse(d.Y, model.impute(Y), mask)
    err_ppca = imputation_mse(d.Y, PPCA(2).fit(Y).impute(Y), mask)
    assert np.all(np.isfinite(model.X_mean_))
    assert err < err_ppca


def test_time_kernel_metropolis_matches_grid_posterior():
    # Fixed latents X; the random-walk Metropolis step on (log ℓ/span, log σ²) targets
    # p(X | θ) p(θ) with N(log 0.1, 1) and N(0, 1) priors: compare both marginals with a grid.
    from gplvm.models.rflvm.latents import TIME_PRIOR_MEAN, TIME_PRIOR_SD, update_time_params
    rng = np.random.default_rng(1)
    t = np.linspace(0.0, 4.0, 15)
    u = np.linspace(0.0, 4.0, 6)
    X = np.stack([np.sin(2 * t), np.cos(1.5 * t)], 1) + 0.1 * rng.normal(size=(15, 2))
    tj, uj, Xj = jnp.asarray(t), jnp.asarray(u), jnp.asarray(X)

    @jax.jit
    def run(key):
        def chain(key):
            def step(p, key):
                k1, k2 = jax.random.split(key)
                return update_time_params(k1, k2, Xj, p, tj, uj), None
            p, _ = jax.lax.scan(step, jnp.array([jnp.log(0.4), 0.0]),
                                jax.random.split(key, 300))
            return p
        return jax.vmap(chain)(jax.random.split(key, 2000))

    draws = np.asarray(run(jax.random.PRNGKey(0)))
    span = 4.0
    g0 = np.linspace(-3.0, -0.5, 251)         # log(ℓ / span)
    g1 = np.linspace(-2.5, 2.5, 251)          # log σ²
    A, Bg = np.meshgrid(g0, g1, indexing="ij")

    @jax.jit
    def density(params):
        return jax.lax.map(lambda p: time_prior_log_density(Xj, *time_prior_factors(tj, uj, p)),
                           params)

    params = jnp.stack([A.ravel() + np.log(span), Bg.ravel()], 1)
    lp = np.asarray(density(params)).reshape(A.shape)
    lp = (lp - 0.5 * ((A - float(TIME_PRIOR_MEAN[0])) / float(TIME_PRIOR_SD[0])) ** 2
          - 0.5 * ((Bg - float(TIME_PRIOR_MEAN[1])) / float(TIME_PRIOR_SD[1])) ** 2)
    post = np.exp(lp - lp.max())
    for k, (grid, marg) in enumerate([(g0, post.sum(1)), (g1, post.sum(0))]):
        x = draws[:, k] - (np.log(span) if k == 0 else 0.0)
        cdf = np.cumsum(marg) / marg.sum()
        mean = np.sum(grid * marg) / marg.sum()
        sd = np.sqrt(np.sum((grid - mean) ** 2 * marg) / marg.sum())
        assert stats.kstest(x, lambda v: np.interp(v, grid, cdf)).pvalue > 1e-3
        assert abs(x.mean() - mean) < 5 * sd / np.sqrt(len(x))

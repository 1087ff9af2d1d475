"""Elliptical slice sampling and Metropolis–Hastings kernels against exact posteriors.

Monte Carlo design: C independent chains, each run for T transitions from a fixed start, and
only the LAST state of each chain is used, so the C values are independent draws from the
T-step distribution; T is far beyond the mixing time of these small problems, so they are iid
posterior draws up to a negligible bias.  Tolerances are then stated in standard errors of iid
sample moments: a mean within 4.5 SE (a two-sided tail of 7e-6 per component), a covariance
entry within 5 SE, and a Kolmogorov–Smirnov distance below 1.95/sqrt(C) (α ≈ 0.001).
Every test uses a fixed key, so it is deterministic; the tolerances say why the fixed outcome
is not a lucky one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import log_expit

from gplvm.inference.mcmc import (ESSInfo, MHState, elliptical_slice,
                                  elliptical_slice_gaussian, mh_accept_reject, mh_init, mh_step)
from gplvm.inference.mcmc.elliptical_slice import init, step

Z_MEAN, Z_COV, KS_COEF = 4.5, 5.0, 1.95


def _last_states(transition, f0, n_chains, n_steps, seed):
    """Run ``transition(key, f, ll) -> (f, ll)`` for n_steps in n_chains vmapped chains from f0;
    return each chain's last state (NumPy, leading chain axis)."""

    def chain(key):
        def body(carry, k):
            return transition(k, *carry), None

        (f, _), _ = jax.lax.scan(body, f0, jax.random.split(key, n_steps))
        return f

    keys = jax.random.split(jax.random.PRNGKey(seed), n_chains)
    return np.asarray(jax.jit(jax.vmap(chain))(keys))


def _check_moments(draws, mean, cov):
    """Per block: sample mean within Z_MEAN SE, sample covariance entries within Z_COV SE."""
    C = draws.shape[0]
    for b in range(mean.shape[0]):
        x = draws[:, b]
        sd = np.sqrt(np.diag(cov[b]))
        z = (x.mean(0) - mean[b]) / (sd / np.sqrt(C))
        assert np.max(np.abs(z)) < Z_MEAN, (b, z)
        # var(sample cov_ij) ≈ (Σ_ii Σ_jj + Σ_ij²) / C for Gaussian draws
        se = np.sqrt((np.outer(sd**2, sd**2) + cov[b] ** 2) / C)
        zc = (np.cov(x, rowvar=False) - cov[b]) / se
        assert np.max(np.abs(zc)) < Z_COV, (b, zc)


@pytest.mark.parametrize("nonzero_mean", [False, True])
def test_ess_gaussian_conjugate_matches_exact_posterior(nonzero_mean):
    """B = 4 independent blocks, prior N(μ_b, Σ), likelihood N(y_b | A_b f, s² I): the chains'
    last states match the closed-form posterior mean and covariance of every block."""
    rng = np.random.default_rng(0)
    B, d, n_obs, s2 = 4, 3, 2, 0.5
    G = rng.normal(size=(d, d))
    Sigma = G @ G.T / d + 0.5 * np.eye(d)
    A = rng.normal(size=(B, n_obs, d))
    y = rng.normal(size=(B, n_obs)) * 2.0
    mu = rng.normal(size=(B, d)) * 1.5 if nonzero_mean else np.zeros((B, d))
    # exact: P = Σ⁻¹ + AᵀA/s², m = P⁻¹(Σ⁻¹μ + Aᵀy/s²)
    Si = np.linalg.inv(Sigma)
    post_cov = np.linalg.inv(Si + np.einsum("boi,boj->bij", A, A) / s2)
    post_mean = np.einsum("bij,bj->bi", post_cov,
                          mu @ Si + np.einsum("boi,bo->bi", A, y) / s2)

    A_j, y_j, mu_j = jnp.asarray(A), jnp.asarray(y), jnp.asarray(mu)
    L = jnp.linalg.cholesky(jnp.asarray(Sigma))

    def log_lik_fn(f):
        r = y_j - jnp.einsum("boi,bi->bo", A_j, f)
        return -0.5 * jnp.sum(r**2, axis=-1) / s2

    def transition(key, f, ll):
        f, ll, _ = elliptical_slice_gaussian(key, f, ll, log_lik_fn, prior_chol=L, mean=mu_j)
        return f, ll

    # Start at the prior mean, far from block 0's posterior.  Measured with 40000 chains, the
    # bias of block 0's mean is 24 SE (of 2000 chains) after 30 steps, 1.4 SE after 60 and
    # below 0.3 SE (the noise of that check) after 120: 150 steps make it negligible.
    f0 = mu_j
    draws = _last_states(transition, (f0, log_lik_fn(f0)), n_chains=2000, n_steps=150,
                         seed=1 + nonzero_mean)
    _check_moments(draws, post_mean, post_cov)


def _grid_posterior(log_post, lo=-12.0, hi=12.0, n=48001):
    x = np.linspace(lo, hi, n)
    lp = log_post(x)
    w = np.exp(lp - lp.max())
    w /= np.trapezoid(w, x)
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (w[1:] + w[:-1]) * np.diff(x))])
    mean = np.trapezoid(x * w, x)
    var = np.trapezoid((x - mean) ** 2 * w, x)
    return x, cdf, mean, var


def test_ess_non_gaussian_likelihoods_match_quadrature():
    """Two 1-D blocks with N(0, 1) priors: block 0 Poisson(y=3 | e^f), block 1 logistic with
    y = (1, 1, 1, 0) at slope 3.  Last states vs grid quadrature: mean within 4.5 SE and
    Kolmogorov–Smirnov distance below 1.95/sqrt(C)."""
    y_bern = np.array([1.0, 1.0, 1.0, 0.0])
    sign = 2 * y_bern - 1

    def log_lik_fn(f):
        poisson = 3.0 * f[0, 0] - jnp.exp(f[0, 0])
        logistic = jnp.sum(jax.nn.log_sigmoid(3.0 * jnp.asarray(sign) * f[1, 0]))
        return jnp.stack([poisson, logistic])

    refs = [
        _grid_posterior(lambda x: -0.5 * x**2 + 3.0 * x - np.exp(x)),
        _grid_posterior(lambda x: -0.5 * x**2
                        + np.sum(log_expit(3.0 * sign[:, None] * x[None]), axis=0)),
    ]

    def transition(key, f, ll):
        f, ll, _ = elliptical_slice_gaussian(key, f, ll, log_lik_fn)
        return f, ll

    f0 = jnp.zeros((2, 1))
    C = 4000
    draws = _last_states(transition, (f0, log_lik_fn(f0)), n_chains=C, n_steps=40, seed=3)
    for b, (x, cdf, mean, var) in enumerate(refs):
        s = np.sort(draws[:, b, 0])
        z = (s.mean() - mean) / np.sqrt(var / C)
        assert abs(z) < Z_MEAN, (b, z)
        F = np.interp(s, x, cdf)
        ks = max(np.max(np.arange(1, C + 1) / C - F), np.max(F - np.arange(C) / C))
        assert ks < KS_COEF / np.sqrt(C), (b, ks)


def test_ess_contract_shapes_jit_vmap_and_trailing_dims():
    """Blocks may carry any trailing shape; results keep shapes and dtype, are finite, and the
    kernel jits and vmaps over a chain axis (different keys → different chains)."""
    f = jnp.zeros((5, 3, 2))

    def log_lik_fn(f):
        return -0.5 * jnp.sum((f - 1.0) ** 2, axis=(1, 2))

    nu = jax.random.normal(jax.random.PRNGKey(0), f.shape)
    run = jax.jit(jax.vmap(lambda k: elliptical_slice(k, f, log_lik_fn(f), log_lik_fn, nu)))
    f_new, ll_new, info = run(jax.random.split(jax.random.PRNGKey(1), 4))
    assert f_new.shape == (4, 5, 3, 2) and f_new.dtype == jnp.float64
    assert ll_new.shape == (4, 5) and isinstance(info, ESSInfo)
    assert info.n_proposals.shape == (4, 5) and bool(jnp.all(info.accepted))
    np.testing.assert_allclose(ll_new, jax.vmap(log_lik_fn)(f_new), rtol=1e-12)
    assert not np.allclose(f_new[0], f_new[1])
    # every accepted point lies on the ellipse through f = 0 and ν: f' = ν sin θ
    np.testing.assert_allclose(f_new, jnp.sin(info.theta)[..., None, None] * nu, atol=1e-12)
    # init/step wrap the same kernel
    state, info2 = step(jax.random.PRNGKey(2), init(f, log_lik_fn), log_lik_fn, nu)
    f3, _, _ = elliptical_slice(jax.random.PRNGKey(2), f, log_lik_fn(f), log_lik_fn, nu)
    np.testing.assert_array_equal(state.position, f3)


def test_ess_block_stuck_at_max_shrinks_keeps_current_value():
    """Block 0 has likelihood -inf everywhere but at its current value, block 1 NaN away from
    it: both keep f and log L after exactly max_shrinks + 1 proposals with accepted=False;
    block 2 (a proper likelihood) still moves."""
    f = jnp.array([[0.3, -0.2], [1.0, 2.0], [0.0, 0.0]])

    def log_lik_fn(g):
        at_start = jnp.all(g == f, axis=1)
        ll0 = jnp.where(at_start[0], 0.0, -jnp.inf)
        ll1 = jnp.where(at_start[1], -1.0, jnp.nan)
        ll2 = -0.5 * jnp.sum(g[2] ** 2)
        return jnp.stack([ll0, ll1, ll2])

    nu = jnp.ones_like(f)
    f_new, ll_new, info = elliptical_slice(jax.random.PRNGKey(0), f, log_lik_fn(f), log_lik_fn,
                                           nu, max_shrinks=25)
    np.testing.assert_array_equal(f_new[:2], f[:2])
    np.testing.assert_array_equal(ll_new[:2], [0.0, -1.0])
    np.testing.assert_array_equal(info.n_proposals[:2], [26, 26])
    np.testing.assert_array_equal(info.accepted, [False, False, True])
    assert not np.allclose(f_new[2], 0.0)


def _check_normal_draws(draws, mean, var):
    """Mean within 4.5 SE, variance within 5 SE, KS < 1.95/sqrt(C) per block (module doc)."""
    from scipy.stats import kstest, norm
    C = draws.shape[0]
    z = (draws.mean(0) - mean) / np.sqrt(var / C)
    assert np.max(np.abs(z)) < Z_MEAN, z
    zv = (draws.var(0) - var) / (var * np.sqrt(2 / C))
    assert np.max(np.abs(zv)) < Z_COV, zv
    for b in range(draws.shape[1]):
        ks = kstest(draws[:, b], norm(mean[b], np.sqrt(var)).cdf).statistic
        assert ks < KS_COEF / np.sqrt(C), (b, ks)


def test_mh_prior_proposal_matches_exact_posterior():
    """Three independent 1-D targets, prior N(0, 1), likelihood N(y_b | f, 1/2): the exact
    posterior is N(2y/3, 1/3).  Independence MH with prior proposals (eq. 22; the state's log
    density is the log-likelihood), last states of 4000 chains × 60 steps."""
    y = jnp.array([1.0, -2.0, 0.5])

    def log_lik(f):
        return -((y - f) ** 2)  # -(y - f)² / (2 · 1/2)

    def transition(key, f, ll):
        proposal = jax.random.normal(jax.random.fold_in(key, 0), f.shape)
        state, _ = mh_step(jax.random.fold_in(key, 1), MHState(f, ll), proposal,
                           log_lik(proposal))
        return state.position, state.log_density

    f0 = jnp.zeros(3)
    draws = _last_states(transition, (f0, log_lik(f0)), n_chains=4000, n_steps=60, seed=4)
    _check_normal_draws(draws, 2 * np.asarray(y) / 3, 1 / 3)


def test_mh_asymmetric_proposal_with_its_correction_matches_the_target():
    """Independence proposals from q = N(1, 2²) for the target N(m_b, 1/2): only with the
    Hastings correction log q(x) − log q(x⋆) is the chain's stationary law the target (it
    would be π·q otherwise, whose mean is pulled towards 1)."""
    m = jnp.array([-1.0, 0.0, 2.0])

    def log_target(f):
        return -((f - m) ** 2)

    def log_q(f):
        return -0.125 * (f - 1.0) ** 2

    def transition(key, f, lp):
        proposal = 1.0 + 2.0 * jax.random.normal(jax.random.fold_in(key, 0), f.shape)
        state, _ = mh_step(jax.random.fold_in(key, 1), MHState(f, lp), proposal,
                           log_target(proposal), log_proposal_ratio=log_q(f) - log_q(proposal))
        return state.position, state.log_density

    f0 = jnp.zeros(3)
    draws = _last_states(transition, (f0, log_target(f0)), n_chains=4000, n_steps=60, seed=5)
    _check_normal_draws(draws, np.asarray(m), 0.5)


def test_mh_accept_reject_rule_on_pytrees():
    """A +inf log-ratio always accepts, -inf and NaN always reject; acceptance is per block and
    applies to every leaf of a pytree with leading block axis; the info's acceptance
    probability is min(1, e^r) (0 for NaN); a finite ratio r is accepted with probability e^r
    (here 0.25, checked over 20000 blocks within 5 SE)."""
    current = {"w": jnp.zeros((3, 2)), "z": jnp.zeros(3)}
    proposal = {"w": jnp.ones((3, 2)), "z": jnp.ones(3)}
    state = mh_init(current, lambda _: jnp.zeros(3))
    new, info = mh_step(jax.random.PRNGKey(0), state, proposal,
                        jnp.array([jnp.inf, -jnp.inf, jnp.nan]))
    np.testing.assert_array_equal(info.accepted, [True, False, False])
    np.testing.assert_array_equal(info.acceptance_probability, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(new.position["w"], [[1, 1], [0, 0], [0, 0]])
    np.testing.assert_array_equal(new.position["z"], [1, 0, 0])
    np.testing.assert_array_equal(new.log_density, [np.inf, 0.0, 0.0])
    n = 20000
    _, info = mh_step(jax.random.PRNGKey(1), MHState(jnp.zeros(n), jnp.zeros(n)), jnp.ones(n),
                      jnp.full(n, np.log(0.25)))
    np.testing.assert_allclose(info.acceptance_probability, 0.25, rtol=1e-15)
    rate = float(info.accepted.mean())
    assert abs(rate - 0.25) < 5 * np.sqrt(0.25 * 0.75 / n), rate


def test_mh_given_uniform_and_lazy_proposal():
    """accept_reject with a given log u accepts exactly when log u < log ratio; a callable
    proposal (one decision) gives what the proposal itself gives, and is refused for blocks."""
    state = MHState(jnp.zeros(2), jnp.asarray(-1.0))
    for log_u, accepted in [(-0.6, True), (-0.4, False)]:          # log ratio = -0.5
        eager, info = mh_accept_reject(jnp.asarray(log_u), state, jnp.ones(2), -1.5)
        lazy, info_lazy = jax.jit(lambda lu: mh_accept_reject(lu, state, lambda: jnp.ones(2),
                                                              -1.5))(jnp.asarray(log_u))
        assert bool(info.accepted) is accepted and bool(info_lazy.accepted) is accepted
        np.testing.assert_array_equal(lazy.position, eager.position)
        np.testing.assert_array_equal(eager.position, np.full(2, float(accepted)))
        np.testing.assert_array_equal(lazy.log_density, -1.5 if accepted else -1.0)
    with pytest.raises(ValueError, match="scalar log density"):
        mh_accept_reject(jnp.zeros(2), MHState(jnp.zeros(2), jnp.zeros(2)),
                         lambda: jnp.ones(2), jnp.zeros(2))

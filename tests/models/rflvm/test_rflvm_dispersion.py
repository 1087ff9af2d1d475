"""Negative-binomial dispersion kernels of the RFLVM (gplvm.models.rflvm.dispersion) against the
exact posterior of (r, c) computed by 2-D grid quadrature.

Model: y_n ~ NB(r, p = σ(c)) for n = 1..N (one column, the intercept c only), the log-mean
m = c + log r ~ N(m0, 1/prec) and r ~ Ga(a0, rate h) with h ~ Ga(b0, rate g0).  Integrating h
out, p(r) ∝ r^(a0−1) (g0 + r)^−(a0+b0), so the posterior on (log r, c) is a 2-D density that
quadrature evaluates exactly.  The chain runs the library's CRT step (with its log-mean
correction and the h step) and the mean-preserving moves, plus a test-side random-walk
Metropolis step on c (the library updates c by Pólya-gamma Gibbs, tested elsewhere) to make
the chain move off the ridge the moves follow.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from scipy.special import gammaln, logsumexp

import gplvm  # noqa: F401  (float64)
from scipy.special import digamma

from gplvm.models.rflvm.dispersion import (NBParams, column_tables, crt_layout,
                                            log_gamma_ratio, mean_preserving_moves,
                                            nb_column_log_lik, update_dispersion_crt)
from gplvm.models.rflvm.spec import RFLVMData

A0, B0, G0 = 1.0, 1.0, 1.0
M0, PREC = 2.0, 4.0


def _data():
    rng = np.random.default_rng(0)
    r_true, mean = 4.0, 15.0
    y = rng.negative_binomial(r_true, r_true / (r_true + mean), size=40).astype(float)
    return y


def _counts(Y, nonzero=None, customers=None):
    """The fields of RFLVMData that the dispersion steps read (Y, observed, nonzero,
    customers); the others are not used."""
    return RFLVMData(Y=Y, observed=jnp.ones_like(Y), offset=None, trials=None,
                     beta_prior_mean=None, beta_prior_prec=None, kernel=None, time=None,
                     nonzero=nonzero, customers=customers)


def _grid_posterior(y):
    log_r = np.linspace(-3.0, 6.0, 721)
    c = np.linspace(-6.0, 8.0, 1121)
    LR, C = np.meshgrid(log_r, c, indexing="ij")
    R = np.exp(LR)
    ll = sum(gammaln(v + R) - gammaln(R) + v * C - (v + R) * np.logaddexp(C, 0.0) for v in y)
    log_prior_r = (A0 - 1) * LR - (A0 + B0) * np.log(G0 + R) + LR      # + log r: Jacobian
    log_prior_m = -0.5 * PREC * (C + LR - M0) ** 2
    logp = ll + log_prior_r + log_prior_m
    w = np.exp(logp - logsumexp(logp))
    assert w[0].sum() + w[-1].sum() + w[:, 0].sum() + w[:, -1].sum() < 1e-8   # grid covers it
    moments = {}
    for name, v in (("log_r", LR), ("c", C)):
        mean = float(np.sum(w * v))
        moments[name] = (mean, float(np.sqrt(np.sum(w * (v - mean) ** 2))))
    return moments


def _run(y, n_chains=8, n_iter=6000, use_crt=True, use_moves=True, layout=False):
    Y = jnp.asarray(y)[:, None]
    obs = jnp.ones_like(Y)
    # the CRT tables from the sweep's precomputed layout, or laid out by the sampler
    customers = crt_layout(y[y > 0], np.zeros(int(np.sum(y > 0)), np.int32)) if layout else None
    # the moves evaluate their log-gamma terms on the nonzero counts only, as in the sweep
    nonzero = (jnp.asarray(y[y > 0]), jnp.zeros(int(np.sum(y > 0)), jnp.int32))
    data = _counts(Y, nonzero, customers)

    def step(carry, key):
        r, c, h = carry
        k_c, k_u, k_crt, k_mv = jax.random.split(key, 4)
        # test-side random-walk Metropolis on c given r (exact for the target)
        def log_target_c(c):
            psi = jnp.broadcast_to(c, Y.shape)
            return nb_column_log_lik(Y, obs, psi, r) - 0.5 * PREC * (c + jnp.log(r) - M0) ** 2
        c_new = c + 0.3 * jax.random.normal(k_c, c.shape)
        acc = jnp.log(jax.random.uniform(k_u, c.shape)) < log_target_c(c_new) - log_target_c(c)
        c = jnp.where(acc, c_new, c)
        psi = jnp.broadcast_to(c, Y.shape)
        if use_crt:
            r, h = update_dispersion_crt(k_crt, data, psi, NBParams(r, h, c), (A0, B0, G0),
                                         (jnp.full(1, M0), PREC))
        else:   # h | r alone, the conjugate step
            h = jax.random.gamma(k_crt, B0 + A0) / (G0 + jnp.sum(r))
        if use_moves:
            r, c, psi, _ = mean_preserving_moves(k_mv, data, psi, NBParams(r, h, c), A0)
        return (r, c, h), (jnp.log(r[0]), c[0])

    def chain(key):
        init = (jnp.full(1, 30.0), jnp.full(1, M0 - np.log(30.0)), jnp.ones(()))
        _, (lr, c) = lax.scan(step, init, jax.random.split(key, n_iter))
        return lr[n_iter // 5:], c[n_iter // 5:]

    lr, c = jax.jit(jax.vmap(chain))(jax.random.split(jax.random.PRNGKey(1), n_chains))
    return np.asarray(lr), np.asarray(c)


def _check(draws, exact, name):
    per_chain = draws.mean(axis=1)
    se = per_chain.std(ddof=1) / np.sqrt(len(per_chain))        # between-chain standard error
    mean, sd = exact
    assert abs(draws.mean() - mean) < 4 * se + 0.02 * sd, (name, draws.mean(), mean, se)
    assert abs(draws.std() / sd - 1) < 0.1, (name, draws.std(), sd)


@pytest.mark.parametrize("run", [dict(layout=False), dict(layout=True), dict(use_crt=False)],
                         ids=["sampler-layout", "sweep-layout", "moves-alone"])
def test_crt_step_and_mean_preserving_moves_sample_the_exact_posterior(run):
    """The CRT step with the mean-preserving moves (the CRT tables laid out by the sampler or
    by the sweep), and the moves alone without the CRT step (with the test's c step and
    h | r), sample the grid posterior of (log r, c)."""
    y = _data()
    exact = _grid_posterior(y)
    lr, c = _run(y, **run)
    _check(lr, exact["log_r"], "log r")
    _check(c, exact["c"], "c")


def test_moves_leave_the_mean_unchanged():
    rng = np.random.default_rng(3)
    Y = jnp.asarray(rng.poisson(50.0, (30, 4)).astype(float))
    psi = jnp.asarray(rng.normal(0.0, 0.3, (30, 4)))
    r, c = jnp.full(4, 100.0), jnp.zeros(4)
    r2, c2, psi2, n_acc = mean_preserving_moves(jax.random.PRNGKey(0), _counts(Y), psi,
                                                NBParams(r, 0.01, c), 1.0)
    assert int(n_acc.sum()) > 0
    np.testing.assert_allclose(r2 * jnp.exp(psi2), r * jnp.exp(psi), rtol=1e-12)
    np.testing.assert_allclose(psi2 - psi, jnp.broadcast_to(c2 - c, psi.shape), atol=1e-12)


def test_log_gamma_ratio_on_the_nonzero_counts_equals_the_dense_sum():
    rng = np.random.default_rng(4)
    Y = rng.negative_binomial(2.0, 0.6, (25, 3)).astype(float)
    obs = (rng.random(Y.shape) > 0.2).astype(float)
    r = np.array([0.7, 3.0, 250.0])
    dense = np.sum(obs * (gammaln(Y + r) - gammaln(r)), axis=0)        # scipy, every entry
    rows, cols = np.nonzero((obs > 0) & (Y > 0))
    assert (Y == 0).mean() > 0.2                                       # zeros to skip
    got = log_gamma_ratio(jnp.asarray(Y), jnp.asarray(obs), jnp.asarray(r),
                          (jnp.asarray(Y[rows, cols]), jnp.asarray(cols, jnp.int32)))
    np.testing.assert_allclose(got, dense, rtol=1e-12)
    np.testing.assert_allclose(log_gamma_ratio(jnp.asarray(Y), jnp.asarray(obs), jnp.asarray(r)),
                               dense, rtol=1e-12)


def test_crt_layout_counts_the_entries_of_every_column_at_every_rank():
    y = np.array([3.0, 1.0, 2.0, 5.0])
    col, rank, count, y_tail, col_tail = crt_layout(y, np.array([0, 1, 0, 2]), exact_terms=4)
    # c_jt = #{n : y_nj >= t} for t = 1..min(max_n y_nj, T0); each list ends with an entry
    # that adds nothing (no array of the chain state may be empty)
    np.testing.assert_array_equal(col, [0, 0, 0, 1, 2, 2, 2, 2, 0])
    np.testing.assert_array_equal(rank, [1, 2, 3, 1, 1, 2, 3, 4, np.inf])
    np.testing.assert_array_equal(count, [2, 2, 1, 1, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(y_tail, [5.0, 4.0])
    np.testing.assert_array_equal(col_tail, [2, 0])


def test_crt_layout_agrees_with_counting_by_hand_on_random_counts():
    rng = np.random.default_rng(3)
    y = rng.negative_binomial(0.5, 0.01, size=400).astype(float) + 1.0   # 1 .. thousands
    c = rng.integers(0, 7, size=400)
    col, rank, count, _, _ = (np.asarray(a) for a in crt_layout(y, c, exact_terms=300))
    got = {(int(j), int(t)): k for j, t, k in zip(col[:-1], rank[:-1], count[:-1])}
    want = {(j, t): float(np.sum(y[c == j] >= t)) for j in range(7)
            for t in range(1, int(min(y[c == j].max(), 300)) + 1)}
    assert got == want
    assert all(k > 0 for k in got.values())


def test_column_tables_have_the_exact_crt_mean_and_variance():
    # Σ_n L_nj with L ~ CRT(y, r): mean Σ_n r(ψ(r + y_n) − ψ(r)), variance Σ_n Σ_t p_t(1 − p_t)
    # with p_t = r/(r + t − 1); one count above T0 = 1024 exercises the Poisson tail, whose mean
    # is exact and whose variance exceeds the CRT's by Σ_{t>T0} p_t² (module doc of
    # gplvm.samplers.crt).  20000 draws: means within 5 standard errors, variances within 6%.
    y = np.array([1.0, 7.0, 40.0, 3.0, 250.0, 1500.0, 12.0])
    col = np.array([0, 0, 1, 1, 1, 2, 2], np.int32)
    r = np.array([0.7, 3.0, 40.0])
    customers = crt_layout(y, col)
    draws = np.asarray(jax.jit(jax.vmap(lambda k: column_tables(k, customers, jnp.asarray(r))))(
        jax.random.split(jax.random.PRNGKey(0), 20000)))
    for j in range(3):
        ys, rj = y[col == j], r[j]
        mean = float(np.sum(rj * (digamma(rj + ys) - digamma(rj))))
        p = [rj / (rj + np.arange(int(v))) for v in ys]
        var = float(sum(np.sum(q * (1 - q)) for q in p))
        excess = float(sum(np.sum(q[1024:] ** 2) for q in p))
        se = np.sqrt((var + excess) / len(draws))
        assert abs(draws[:, j].mean() - mean) < 5 * se, (j, draws[:, j].mean(), mean, se)
        assert abs(draws[:, j].var() / (var + excess) - 1) < 0.06, (j, draws[:, j].var(), var)

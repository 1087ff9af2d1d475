r"""Tests for gplvm.samplers.crt: CRT(y, r) draws and the negative-binomial dispersion update
(seed 000, eqs. 29–31).

References are independent of the code: the exact CRT pmf from unsigned Stirling numbers of
the first kind (integer recurrence), P(L = l) = Γ(r)/Γ(y + r) |s(y, l)| r^l; the exact mean
and variance of a sum of independent Bernoulli(r/(r + t − 1)) summed term by term in NumPy
(and checked against the digamma forms); and, for the dispersion update, quadrature of
p(r | y, ψ) ∝ Ga(r; a0, h) Π_n NB(y_n | r, σ(ψ_n)) on a grid.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st
from jax import lax
from scipy import integrate
from scipy.special import digamma, expit, gammaln, polygamma

import gplvm  # noqa: F401  (float64)
from gplvm.samplers import chinese_restaurant_table, sample_nb_dispersion
from gplvm.samplers.crt import tail_tv_bound, tail_variance_excess

Z_TOL = 4.5
P_MIN = 1e-3


def key(seed: int) -> jax.Array:
    return jax.random.PRNGKey(seed)


# ----------------------------------------------------------------------------- references

def stirling_first_unsigned(n: int) -> list[int]:
    """|s(n, l)| for l = 0..n, by |s(m+1, l)| = m |s(m, l)| + |s(m, l-1)| (exact integers)."""
    row = [1]
    for m in range(n):
        row = [(m * (row[l] if l < len(row) else 0)) + (row[l - 1] if l >= 1 else 0)
               for l in range(m + 2)]
    return row


def crt_pmf(y: int, r: float) -> np.ndarray:
    s = stirling_first_unsigned(y)
    log_p = [math.log(s[l]) + l * math.log(r) + math.lgamma(r) - math.lgamma(y + r)
             if s[l] > 0 else -math.inf for l in range(y + 1)]
    return np.exp(log_p)


def bernoulli_sum_moments(y: int, r: float, start: int = 1) -> tuple[float, float, float]:
    """(Σ p_t, Σ p_t(1 − p_t), Σ p_t²) over t = start..y, p_t = r/(r + t − 1), term by term."""
    t = np.arange(start, y + 1, dtype=float)
    p = r / (r + t - 1)
    return p.sum(), (p * (1 - p)).sum(), (p * p).sum()


def chi2_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    """Pearson test; cells expecting fewer than 5 are pooled (into the smallest kept cell
    when the pool itself expects fewer than 5)."""
    n = counts.sum()
    exp = n * probs
    keep = exp >= 5
    obs_k, exp_k = list(counts[keep]), list(exp[keep])
    if (~keep).any():
        if exp[~keep].sum() >= 5:
            obs_k.append(counts[~keep].sum())
            exp_k.append(exp[~keep].sum())
        else:
            i = int(np.argmin(exp_k))
            obs_k[i] += counts[~keep].sum()
            exp_k[i] += exp[~keep].sum()
    return st.chisquare(obs_k, exp_k).pvalue


def test_references_agree():
    """The Stirling pmf sums to one and has the digamma mean r(ψ(r + y) − ψ(r)) and the
    Bernoulli-sum variance; the term-by-term sums match the digamma/trigamma forms."""
    for y, r in [(1, 0.7), (9, 2.5), (30, 0.3)]:
        pmf = crt_pmf(y, r)
        l = np.arange(y + 1)
        mean, var, _ = bernoulli_sum_moments(y, r)
        assert pmf.sum() == pytest.approx(1.0, rel=1e-12)
        assert (l * pmf).sum() == pytest.approx(mean, rel=1e-12)
        assert (l**2 * pmf).sum() - mean**2 == pytest.approx(var, rel=1e-10)
        assert mean == pytest.approx(r * (digamma(r + y) - digamma(r)), rel=1e-12)
        assert var == pytest.approx(mean - r**2 * (polygamma(1, r) - polygamma(1, r + y)),
                                    rel=1e-10)


# ----------------------------------------------------------------------------- CRT draws

SMALL_CASES = [(1, 0.7), (2, 5.0), (4, 0.3), (7, 2.5), (12, 1.0), (20, 9.0), (40, 0.05)]


def test_crt_pmf_small_counts():
    """40 000 draws per (y, r), all in one call, against the exact Stirling pmf."""
    n = 40_000
    y = np.repeat([c[0] for c in SMALL_CASES], n).astype(float)
    r = np.repeat([c[1] for c in SMALL_CASES], n)
    L = np.asarray(chinese_restaurant_table(key(0), y, r)).reshape(len(SMALL_CASES), n)
    assert np.all(L == np.round(L))
    for (yc, rc), draws in zip(SMALL_CASES, L):
        assert draws.min() >= 1 and draws.max() <= yc
        counts = np.bincount(draws.astype(int), minlength=yc + 1)
        if yc == 1:                                  # one customer, one table
            assert counts[1] == n
            continue
        assert chi2_pvalue(counts[1:], crt_pmf(yc, rc)[1:]) > P_MIN, (yc, rc)


@pytest.mark.parametrize("r", [0.5, 3.0, 50.0])
def test_crt_moments_large_count(r):
    """y = 5000 with the default T0 = 1024: the mean is exact and the variance exceeds the
    exact one by Σ_{t>T0} p_t² (1.9e-4, 7.0e-3, 1.83), both within 4.5 SE (20 000 draws)."""
    n, y = 20_000, 5000
    L = np.asarray(chinese_restaurant_table(key(100 + int(r)), np.full(n, float(y)), r))
    mean, var, _ = bernoulli_sum_moments(y, r)
    _, _, excess = bernoulli_sum_moments(y, r, start=1025)
    assert float(tail_variance_excess(y, r)) == pytest.approx(excess, rel=1e-9)
    c = L - L.mean()
    var_hat = (c**2).mean()
    se_var = np.sqrt(((c**4).mean() - var_hat**2) / n)
    assert abs(L.mean() - mean) < Z_TOL * np.sqrt(var_hat / n)
    assert abs(var_hat - (var + excess)) < Z_TOL * se_var


def test_crt_exact_when_exact_terms_cover_the_count():
    """exact_terms ≥ y: every term exact, so the variance is the exact one (3 × 3000 draws)."""
    n, y = 3000, 5000
    rs = np.repeat([0.5, 3.0, 50.0], n)
    L = np.asarray(chinese_restaurant_table(key(2), np.full(3 * n, float(y)), rs,
                                            exact_terms=y)).reshape(3, n)
    for r, draws in zip([0.5, 3.0, 50.0], L):
        mean, var, _ = bernoulli_sum_moments(y, r)
        c = draws - draws.mean()
        var_hat = (c**2).mean()
        se_var = np.sqrt(((c**4).mean() - var_hat**2) / n)
        assert abs(draws.mean() - mean) < Z_TOL * np.sqrt(var / n)
        assert abs(var_hat - var) < Z_TOL * se_var


def test_crt_poisson_tail_is_as_documented():
    """T0 = 8 on y = 60, r = 3, so that the approximation is visible: the mean stays exact,
    the variance is exact + Σ_{t>8} p_t² (0.71, about 20 SE away from the exact 6.23), and the
    total-variation distance to the exact pmf is within Barbour & Hall's bound (0.13)."""
    n, y, r, T0 = 100_000, 60, 3.0, 8
    L = np.asarray(chinese_restaurant_table(key(3), np.full(n, float(y)), r, exact_terms=T0))
    mean, var, _ = bernoulli_sum_moments(y, r)
    mu_tail, _, excess = bernoulli_sum_moments(y, r, start=T0 + 1)
    bound = (1 - math.exp(-mu_tail)) / mu_tail * excess
    assert float(tail_tv_bound(y, r, T0)) == pytest.approx(bound, rel=1e-9)
    c = L - L.mean()
    var_hat = (c**2).mean()
    se_var = np.sqrt(((c**4).mean() - var_hat**2) / n)
    assert abs(L.mean() - mean) < Z_TOL * np.sqrt(var / n)
    assert abs(var_hat - (var + excess)) < Z_TOL * se_var
    assert abs(var_hat - var) > 10 * se_var
    counts = np.bincount(L.astype(int), minlength=y + 1)[: y + 1]
    tv_hat = 0.5 * np.abs(counts / n - crt_pmf(y, r)).sum()
    assert tv_hat < bound + 0.03          # empirical TV noise with 1e5 draws is about 0.01


def test_crt_edge_cases_shapes_and_validation():
    Y = np.array([[0.0, 1.0, np.nan], [2.0, 3.0, 1500.0]])
    r = np.array([0.4, 2.0, 7.0])
    L = np.asarray(chinese_restaurant_table(key(4), Y, r))       # r broadcasts over rows
    assert L.shape == (2, 3) and L.dtype == np.float64
    assert L[0, 0] == 0 and L[0, 1] == 1 and L[0, 2] == 0        # y = 0, y = 1, missing
    assert 1 <= L[1, 0] <= 2 and 1 <= L[1, 1] <= 3 and 1 <= L[1, 2] <= 1500
    assert np.asarray(chinese_restaurant_table(key(4), np.zeros((0, 3)), r)).shape == (0, 3)
    with pytest.raises(ValueError, match="non-negative integers"):
        chinese_restaurant_table(key(0), np.array([1.0, -2.0]), 1.0)
    with pytest.raises(ValueError, match="non-negative integers"):
        chinese_restaurant_table(key(0), np.array([1.5]), 1.0)
    with pytest.raises(ValueError, match="r > 0"):
        chinese_restaurant_table(key(0), np.array([3.0]), 0.0)
    # −log(1 − σ(ψ)) = softplus(ψ) stays finite where 1 − σ(ψ) underflows (ψ = 800).
    r_new = sample_nb_dispersion(key(1), np.array([[3.0], [np.nan]]), np.array([[800.0], [0.0]]),
                                 np.array([1.0]), 1.0, 1.0)
    assert np.all(np.isfinite(r_new)) and np.all(np.asarray(r_new) > 0)


def test_crt_jit_vmap_and_keys():
    y = jnp.array([0.0, 3.0, 17.0, 2000.0, jnp.nan])
    f = jax.jit(lambda k, y, r: chinese_restaurant_table(k, y, r))
    a = f(key(5), y, 1.3)
    np.testing.assert_array_equal(a, f(key(5), y, 1.3))                       # same key
    # eager = jit: integer counts, each a sum of Bernoulli draws u < r / (r + i); another
    # compiled program could differ only if a uniform fell within an ulp of its bound
    np.testing.assert_array_equal(a, chinese_restaurant_table(key(5), y, 1.3))
    chains = jax.jit(jax.vmap(lambda k, r: chinese_restaurant_table(k, y, r)))(
        jax.random.split(key(6), 8), jnp.linspace(0.5, 4.0, 8))
    assert chains.shape == (8, 5)
    assert len({tuple(row) for row in np.asarray(chains)}) > 1


# ----------------------------------------------------------------------------- dispersion

def _nb_problem():
    rng = np.random.default_rng(0)
    N, J = 40, 2
    psi = rng.normal(1.0, 0.5, (N, J))
    # NumPy's negative_binomial(n, q) counts failures before n successes of probability q:
    # P(y) ∝ (1 − q)^y q^n, i.e. NB(r = n, p = 1 − q) in the convention p^y (1 − p)^r.
    Y = rng.negative_binomial([1.5, 6.0], 1.0 - expit(psi)).astype(float)
    Y[3, 0] = np.nan
    Y[17, 1] = np.nan
    psi[3, 0] = np.nan                # never read: the entry is missing
    return Y, psi


def _grid_posterior(y, psi, a0, h):
    grid = np.linspace(1e-6, 40.0, 200_001)
    log_q = -np.logaddexp(0.0, psi)                  # log(1 − σ(ψ))
    log_d = ((a0 - 1) * np.log(grid) - h * grid
             + np.sum(gammaln(y[:, None] + grid) - gammaln(grid) + grid * log_q[:, None], 0))
    dens = np.exp(log_d - log_d.max())
    cdf = integrate.cumulative_trapezoid(dens, grid, initial=0.0)
    mean = integrate.trapezoid(grid * dens, grid) / cdf[-1]
    return grid, cdf / cdf[-1], mean


def test_nb_dispersion_gibbs_matches_grid_posterior():
    """The CRT–Gamma pair, 10 updates from r = 1 in each of 4000 chains (ψ fixed, one
    missing entry per column): r_j follows p(r | y, ψ) ∝ Ga(r; 1.5, rate 0.5) Π NB(y | r, ψ)
    (KS and mean within 4.5 SE, per column)."""
    Y, psi = _nb_problem()
    a0, h, n_chains = 1.5, 0.5, 4000

    @jax.jit
    def run(keys):
        def chain(k):
            step = lambda r, kk: (sample_nb_dispersion(kk, Y, psi, r, a0, h), None)
            return lax.scan(step, jnp.ones(2), jax.random.split(k, 10))[0]

        return jax.vmap(chain)(keys)

    r = np.asarray(run(jax.random.split(key(7), n_chains)))
    obs = ~np.isnan(Y)
    for j in range(2):
        grid, cdf, mean = _grid_posterior(Y[obs[:, j], j], psi[obs[:, j], j], a0, h)
        assert abs(r[:, j].mean() - mean) < Z_TOL * r[:, j].std() / np.sqrt(n_chains)
        assert st.kstest(r[:, j], lambda x: np.interp(x, grid, cdf)).pvalue > P_MIN


def test_nb_dispersion_conditional_moments():
    """One update from fixed r: E[r'] = E[(a0 + Σ L)/(h + Σ softplus ψ)] with E ΣL from the
    exact CRT means (missing entries skipped), within 4.5 SE of 10 000 draws."""
    Y, psi = _nb_problem()
    a0, h, r0, n = 1.5, 0.5, np.array([2.0, 5.0]), 10_000
    draws = np.asarray(jax.jit(jax.vmap(lambda k: sample_nb_dispersion(k, Y, psi, r0, a0, h)))(
        jax.random.split(key(8), n)))
    np.testing.assert_array_equal(sample_nb_dispersion(key(9), Y, psi, r0, a0, h),
                                  sample_nb_dispersion(key(9), Y, psi, r0, a0, h))  # same key
    obs = ~np.isnan(Y)
    for j in range(2):
        y = Y[obs[:, j], j].astype(int)
        rate = h + np.logaddexp(0.0, psi[obs[:, j], j]).sum()
        mean_L = sum(bernoulli_sum_moments(int(v), r0[j])[0] for v in y)
        assert abs(draws[:, j].mean() - (a0 + mean_L) / rate) < \
            Z_TOL * draws[:, j].std() / np.sqrt(n)

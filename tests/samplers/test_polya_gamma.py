r"""Tests for gplvm.samplers.polya_gamma: exact identities, moments, cumulants, distributions,
and the contract (jit, vmap, keys, shapes, validation).

Reference values never come from the code under test.  The exact cumulants of PG(b, c) are
taken from eq. 27 of seed 000: the g_k are independent Gamma(b, 1), whose m-th cumulant is
b (m-1)!, so

.. math:: \kappa_m = b\,(m-1)!\,(2\pi^2)^{-m} \sum_{k \ge 1} d_k^{-m},
          \qquad d_k = (k - 1/2)^2 + c^2/(4\pi^2),

summed here by brute force in NumPy; a test checks these sums against derivatives of the
cumulant generating function and against the closed-form mean and variance.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st
from scipy.special import log_ndtr

import gplvm  # noqa: F401  (float64)
from gplvm.samplers import polya_gamma, polya_gamma_one
from gplvm.samplers._gamma import gamma
from gplvm.samplers._tail_sums import tail_power_sums
from gplvm.samplers.polya_gamma import _chunk_size, _layout, _N_CLASSES
from gplvm.samplers.polya_gamma_series import HEAD_TERMS, head_class, radau_rest

B_VALUES = (0.3, 1.0, 2.5, 7.3, 40.0, 1000.0, 2500.7)
C_VALUES = (0.0, 0.5, 2.0, 10.0, 50.0, 200.0)
N_MOMENT = 100_000
K_BRUTE = 1_000_000


# ----------------------------------------------------------------------------- references

def power_sums(c: float, orders) -> dict[int, float]:
    """sum_k d_k^{-m} for m in ``orders``; m = 1 in closed form, pi tanh(pi a) / (2a)."""
    a = abs(c) / (2.0 * math.pi)
    d = (np.arange(1, K_BRUTE + 1) - 0.5) ** 2 + a * a
    out = {}
    for m in orders:
        if m == 1:
            out[m] = math.pi ** 2 / 2.0 if a == 0 else math.pi * math.tanh(math.pi * a) / (2 * a)
        else:
            # Terms beyond K_BRUTE add less than K_BRUTE^(1-2m)/(2m-1) <= 3e-19: negligible.
            out[m] = float(np.sum(d ** -m))
    return out


def cumulants(b: float, c: float, orders=(1, 2, 3, 4, 6)) -> dict[int, float]:
    """Exact kappa_m of PG(b, c) from eq. 27 (module docstring)."""
    sums = power_sums(c, orders)
    return {m: b * math.factorial(m - 1) * sums[m] / (2 * math.pi ** 2) ** m for m in orders}


def mean_var_closed_form(b: float, c: float) -> tuple[float, float]:
    """E = b/(2c) tanh(c/2), Var = b (sinh c - c) / (4 c^3 cosh^2(c/2)), the latter written as
    b (2 tanh(c/2) - c sech^2(c/2)) / (4 c^3) so that large c does not overflow; Taylor series
    in c^2 near 0, where the closed forms lose digits to cancellation (from log cosh sqrt(s) =
    s/2 - s^2/12 + s^3/45 - ..., with s = c^2/4)."""
    if abs(c) < 1e-2:
        return (b * (0.25 - c * c / 48.0 + c ** 4 / 480.0),
                b * (1.0 / 24.0 - c * c / 120.0 + 17.0 * c ** 4 / 13440.0))
    return (b * math.tanh(c / 2.0) / (2.0 * c),
            b * (2.0 * math.tanh(c / 2.0) - c * sech(c / 2.0) ** 2) / (4.0 * c ** 3))


def sech(x: float) -> float:
    e = math.exp(-abs(x))
    return 2.0 * e / (1.0 + e * e)


def pg1_cdf(omega: np.ndarray, c: float) -> np.ndarray:
    r"""Exact CDF of PG(1, c) = J*(1, |c|/2)/4 (Polson, Scott & Windle 2013, §4).

    The density of J*(1, z) is cosh(z) e^{-z^2 x/2} sum_n (-1)^n a_n(x).  Left of x = 1 each
    a_n^L term tilted by e^{-z^2 x/2} is 2 e^{-(2n+1) z} times an inverse-Gaussian density with
    mean (2n+1)/z and shape (2n+1)^2, whose CDF is closed form in Phi; right of 1 the a_n^R
    terms integrate to exponentials.  Twelve terms of either series are exact in float64.
    """
    x = 4.0 * np.asarray(omega, dtype=float)
    z = abs(c) / 2.0
    left = x <= 1.0
    xl = np.where(left, np.maximum(x, 1e-300), 1.0)
    xr = np.where(left, 2.0, x)
    cdf = np.zeros_like(x)
    log_cosh = z + np.log1p(np.exp(-2.0 * z)) - math.log(2.0)
    for n in range(12):
        k = 2 * n + 1
        plus = z * np.sqrt(xl) + k / np.sqrt(xl)
        minus = z * np.sqrt(xl) - k / np.sqrt(xl)
        # cosh(z) 2 e^{-kz} [Phi(minus) + e^{2kz} Phi(-plus)], expanded so nothing overflows.
        lp = log_ndtr(-plus)
        term = ((np.exp(-2 * n * z) + np.exp(-(2 * n + 2) * z)) * np.exp(log_ndtr(minus))
                + np.exp((2 * n + 2) * z + lp) + np.exp(2 * n * z + lp))
        rate = (n + 0.5) ** 2 * math.pi ** 2 / 2.0 + z * z / 2.0
        tail = math.pi * (n + 0.5) * np.exp(log_cosh - rate * xr) / rate
        cdf += (-1) ** n * np.where(left, term, -tail)
    return np.where(left, cdf, 1.0 + cdf)


def series_reference(rng, b: float, c: float, n: int, terms: int = 1000) -> np.ndarray:
    """Eq. 27 truncated after ``terms`` gammas, plus the exact mean of the dropped tail (its
    variance is below 1e-4 of Var(omega) for |c| <= 200, invisible to a KS test of 2e4 draws)."""
    a = abs(c) / (2.0 * math.pi)
    d = (np.arange(1, terms + 1) - 0.5) ** 2 + a * a
    head = rng.standard_gamma(b, size=(n, terms)) @ (1.0 / d)
    tail_mean = b * (power_sums(c, (1,))[1] - np.sum(1.0 / d))
    return (head + tail_mean) / (2.0 * math.pi ** 2)


def sample_k3(x: np.ndarray) -> float:
    """Unbiased third k-statistic."""
    n = x.size
    return n * np.sum((x - x.mean()) ** 3) / ((n - 1) * (n - 2))


def se_k3(k: dict[int, float], n: int) -> float:
    """Standard error of the k-statistic k3.  By the delta method the third sample central
    moment has variance (mu6 - mu3^2 - 6 mu4 mu2 + 9 mu2^3)/n + O(1/n^2); with mu4 = k4 + 3 k2^2
    and mu6 = k6 + 15 k4 k2 + 10 k3^2 + 15 k2^3 that is (k6 + 9 k2 k4 + 9 k3^2 + 6 k2^3)/n, and
    k3 differs from that moment by a factor 1 + O(1/n): relative corrections of 1e-5 here."""
    return math.sqrt((k[6] + 9 * k[2] * k[4] + 9 * k[3] ** 2 + 6 * k[2] ** 3) / n)


def k3_zscore(x: np.ndarray, k: dict[int, float]) -> float:
    return (sample_k3(x) - k[3]) / se_k3(k, x.size)


# ------------------------------------------------------------------ exact identities

def test_batched_gamma_matches_scipy():
    """The Marsaglia-Tsang sampler behind the series (boosted below shape 1): one-sample KS;
    shapes that are not positive and finite give NaN (and end: a boosted -0.8 would be a
    shape -1/3 + 0.2 < 0 that no attempt accepts)."""
    invalid = [0.0, -0.5, -0.8, -3.0, np.nan, np.inf]
    alpha = jnp.concatenate([jnp.repeat(jnp.asarray([0.01, 0.3, 1.0, 2.5, 2500.7]), 20_000),
                             jnp.asarray(invalid)])
    draws = np.asarray(jax.jit(gamma)(jax.random.key(5), alpha))
    assert np.all(np.isnan(draws[-len(invalid):]))
    for a, x in zip([0.01, 0.3, 1.0, 2.5, 2500.7], draws[:-len(invalid)].reshape(5, -1)):
        assert st.kstest(x, st.gamma(a).cdf).pvalue > 1e-3, a


@pytest.mark.parametrize("c", [0.5, 2.0, 10.0, 50.0])
def test_cumulant_reference_matches_cgf_derivatives(c):
    """The brute-force sums reproduce (-1)^m K^(m)(0) for the Laplace-transform CGF
    K(t) = b log cosh(c/2) - b log cosh(sqrt(c^2/4 + t/2)), by float64 autodiff."""
    b = 1.7

    def K(t):
        return b * jnp.log(jnp.cosh(c / 2.0)) - b * jnp.log(jnp.cosh(jnp.sqrt(c * c / 4 + t / 2)))

    ref = cumulants(b, c, orders=(1, 2, 3, 4))
    deriv = K
    for m in (1, 2, 3, 4):
        deriv = jax.grad(deriv)
        np.testing.assert_allclose((-1) ** m * deriv(0.0), ref[m], rtol=1e-9)


@pytest.mark.parametrize("c", C_VALUES + (1e-3,))
def test_cumulant_reference_matches_closed_forms(c):
    k = cumulants(2.5, c, orders=(1, 2))
    mean, var = mean_var_closed_form(2.5, c)
    np.testing.assert_allclose([k[1], k[2]], [mean, var], rtol=1e-10)


def test_cumulants_at_zero():
    """kappa_1..4 of PG(1, 0) are 1/4, 1/24, 1/60, 17/1680 (Taylor series of log cosh)."""
    k = cumulants(1.0, 0.0, orders=(1, 2, 3, 4))
    np.testing.assert_allclose([k[1], k[2], k[3], k[4]], [1 / 4, 1 / 24, 1 / 60, 17 / 1680],
                               rtol=1e-10)


@pytest.mark.parametrize("y0", [8, 12, 41, 473, 12137])
def test_tail_power_sums_match_brute_force(y0):
    a = np.array([0.0, 1e-3, 0.3, 1.99, 2.01, 3.9, 4.1, 31.8, 100.0])
    got = np.stack([np.asarray(s) for s in tail_power_sums(jnp.asarray(a), y0, orders=5)])
    k = np.arange(y0 + 1, 1_000_001)[:, None] - 0.5
    for m in range(1, 6):
        # Terms past Y = 1e6 add the integral from Y, Y^(1-2m)/(2m-1), up to a relative
        # O(a^2/Y^2 + 1/Y^2) of themselves: below 1e-12 of the sum.
        ref = np.sum((k * k + a * a) ** -m, axis=0) + 1e6 ** (1 - 2 * m) / (2 * m - 1)
        np.testing.assert_allclose(got[m - 1], ref, rtol=1e-9 if m <= 3 else 1e-7)


@pytest.mark.parametrize("head", HEAD_TERMS)
def test_series_rule_cumulants(head):
    """The series regime's omega is exactly `head` exact terms + a shift + two gammas, so its
    cumulants are computable: kappa_1..5 must equal the exact ones, kappa_6 within the
    documented 0.8%; scales, shapes and shift must be positive (non-negative for the shift)."""
    b = 1.0
    c = np.array([0.0, 2.0, 10.0, 8 * math.pi, 50.0, 200.0, 2000.0])
    a = np.abs(c) / (2.0 * math.pi)
    theta, alpha, shift = (np.asarray(x) for x in radau_rest(jnp.asarray(a), head))
    assert np.all(theta > 0) and np.all(alpha > 0) and np.all(shift >= 0)
    scale = 2.0 * math.pi ** 2
    for i, ci in enumerate(c):
        w = 1.0 / ((np.arange(1, head + 1) - 0.5) ** 2 + a[i] ** 2)
        exact = cumulants(b, ci, orders=(1, 2, 3, 4, 5, 6))
        for m in range(1, 7):
            total = b * (np.sum(w ** m) + np.sum(alpha[:, i] * theta[:, i] ** m)
                         + (shift[i] if m == 1 else 0.0))
            rel = abs(math.factorial(m - 1) * total / scale ** m / exact[m] - 1.0)
            assert rel < (1e-9 if m <= 5 else 8e-3), (head, ci, m, rel)


def test_head_terms_follow_the_rule():
    """K = 0 from b = 1 on; below, the smallest class with K b >= 1/2 (16 below 1/32)."""
    b = np.array([0.01, 0.03, 0.0625, 0.1, 0.125, 0.2, 0.25, 0.3, 0.5, 0.7, 0.999, 1.0, 2.5,
                  1e4])
    K = np.asarray(HEAD_TERMS)[np.asarray(head_class(jnp.asarray(b)))]
    want = [16 if x < 1 / 32 else 0 if x >= 1 else
            min(k for k in HEAD_TERMS[1:] if k * x >= 0.5) for x in b]
    np.testing.assert_array_equal(K, want)


def test_layout_gives_each_class_whole_chunks():
    """Every valid entry gets its own slot, and the chunk a slot falls in holds one class."""
    n = 3000                                   # 12 chunks of 256, several per class
    cls = np.random.default_rng(0).integers(0, _N_CLASSES + 1, n)   # _N_CLASSES: invalid
    size = _chunk_size(n)
    pos, ends = (np.asarray(x) for x in _layout(jnp.asarray(cls, dtype=jnp.int32), size))
    valid = cls < _N_CLASSES
    assert len(np.unique(pos[valid])) == valid.sum()
    assert np.all(pos[~valid] >= ends[-1] * size)
    np.testing.assert_array_equal(np.searchsorted(ends, pos[valid] // size, "right"),
                                  cls[valid])


# --------------------------------------------------------- moments of 10^5 draws, 42 cases

@pytest.fixture(scope="module")
def moment_draws():
    """10^5 draws for each (b, c) in B_VALUES x C_VALUES, one jitted call per c."""
    b = jnp.asarray(B_VALUES)[:, None]
    draw = jax.jit(lambda key, c: polya_gamma(key, b, c, shape=(len(B_VALUES), N_MOMENT)))
    return {c: np.asarray(draw(jax.random.key(100 + i), c)) for i, c in enumerate(C_VALUES)}


@pytest.mark.parametrize("c", C_VALUES)
def test_mean_and_variance(moment_draws, c):
    """Sample mean and variance within 4 standard errors of the closed forms.

    SE(mean) = sqrt(k2/n).  SE(variance) = sqrt((k4 + 2 k2^2)/n): the unbiased sample variance
    has variance k4/n + 2 k2^2/(n-1) exactly (Fisher's k-statistic k2), with k4 from eq. 27.
    A 4-SE band leaves each of the 84 checks a 6e-5 chance of failing by luck (the seeds are
    fixed, so a pass is reproducible).
    """
    for b, x in zip(B_VALUES, moment_draws[c]):
        mean, var = mean_var_closed_form(b, c)
        k4 = cumulants(b, c, orders=(4,))[4]
        z_mean = (x.mean() - mean) / math.sqrt(var / x.size)
        z_var = (x.var(ddof=1) - var) / math.sqrt((k4 + 2 * var * var) / x.size)
        assert abs(z_mean) < 4 and abs(z_var) < 4, (b, c, z_mean, z_var)


@pytest.mark.parametrize("c", C_VALUES)
def test_third_cumulant(moment_draws, c):
    """Sample k3 within 4 standard errors of kappa_3 (see ``se_k3``)."""
    for b, x in zip(B_VALUES, moment_draws[c]):
        z = k3_zscore(x, cumulants(b, c))
        assert abs(z) < 4, (b, c, z)


def test_third_cumulant_check_rejects_moment_matching(moment_draws):
    """The same check fails for approximations that match only two moments: a normal at
    b = 1000, c = 0 (kappa_3 = 16.7 is 8 standard errors) and a gamma with the right mean and
    variance at b = 1, c = 0 (its kappa_3 = 2 k2^2/k1 = 1/72 against 1/60: 7 standard errors)."""
    rng = np.random.default_rng(7)
    k = cumulants(1000.0, 0.0)
    normal = rng.normal(k[1], math.sqrt(k[2]), size=N_MOMENT)
    assert abs(k3_zscore(normal, k)) > 4
    k = cumulants(1.0, 0.0)
    shape, scale = k[1] ** 2 / k[2], k[2] / k[1]
    gamma2 = rng.gamma(shape, scale, size=N_MOMENT)
    assert abs(k3_zscore(gamma2, k)) > 4
    ours = moment_draws[0.0][B_VALUES.index(1.0)]
    assert abs(k3_zscore(ours, k)) < 4


# ------------------------------------------------------------------ whole distributions

N_KS = 20_000


def draw(key, b, c):
    """N_KS draws; b and c always as arrays of shape (N_KS,), so that every test here reuses
    one compiled program (polya_gamma jits its core per input shape)."""
    full = lambda v: jnp.broadcast_to(jnp.asarray(v, dtype=jnp.float64), (N_KS,))
    return np.asarray(polya_gamma(key, full(b), full(c)))


_exact_rows = jax.jit(lambda key, c: polya_gamma_one(key, jnp.full((40, N_KS), c)))


@pytest.mark.parametrize("c", [0.0, 0.5, 2.0, 3.0, 10.0, 50.0, 200.0])
def test_devroye_matches_exact_cdf(c):
    """One-sample KS of 10^5 exact PG(1, c) draws against the closed-form CDF (``pg1_cdf``)."""
    x = np.asarray(_exact_rows(jax.random.key(11), c))[:5].ravel()
    assert x.size == N_MOMENT
    assert st.kstest(x, lambda w: pg1_cdf(w, c)).pvalue > 1e-3


def test_reference_cdf_is_a_cdf():
    for c in (0.0, 3.0, 200.0):
        mean, _ = mean_var_closed_form(1.0, c)
        w = np.linspace(0, 20 * mean, 4001)
        F = pg1_cdf(w, c)
        assert np.all(np.diff(F) >= -1e-15) and F[1] < 1e-6 and abs(F[-1] - 1.0) < 1e-9
        np.testing.assert_allclose(np.trapezoid(1.0 - F, w), mean, rtol=1e-5)   # E = int (1-F)


def sum_of_exact(key, b: int, c: float) -> np.ndarray:
    """Sum of b exact PG(1, c) draws for each of N_KS elements, 40 rows per jitted call."""
    total = np.zeros(N_KS)
    for i in range(-(-b // 40)):
        rows = np.asarray(_exact_rows(jax.random.fold_in(key, i), c))
        total += rows[: min(40, b - 40 * i)].sum(axis=0)
    return total


@pytest.mark.parametrize("b, c", [(2, 0.0), (2, 10.0), (40, 0.0), (40, 2.0), (40, 50.0),
                                  (1000, 0.5), (1000, 200.0)])
def test_integer_b_matches_sum_of_exact_draws(b, c):
    """Two-sample KS against sums of b Devroye draws (b = 40 and 1000 use the series)."""
    x = draw(jax.random.key(21), b, c)
    ref = sum_of_exact(jax.random.key(22), b, c)
    assert st.ks_2samp(x, ref).pvalue > 1e-3


@pytest.mark.parametrize("b, c", [(0.05, 1.0), (0.1, 0.0), (0.3, 0.0), (0.3, 200.0),
                                  (0.7, 2.0), (2.5, 50.0), (7.3, 10.0), (7.3, 200.0),
                                  (2500.7, 0.0), (2500.7, 50.0)])
def test_noninteger_b_matches_long_series(b, c):
    """Two-sample KS against 1000 terms of eq. 27 drawn with NumPy (b = 0.05, 0.1, 0.3 and
    0.7 use 16, 8, 2 and 1 exact terms, the others none)."""
    x = draw(jax.random.key(31), b, c)
    ref = series_reference(np.random.default_rng(32), b, c, N_KS)
    assert st.ks_2samp(x, ref).pvalue > 1e-3


def test_extreme_parameters_have_the_right_mean():
    """b from 1e-3 to 1e5 and |c| up to 1e100 (beyond 1e12 the series b use the normal limit):
    finite, non-negative, mean within 5 SE, or within 4 ulp where 5 SE is below the float64
    resolution of the mean (|c| = 1e100: SE 1e-152 against a mean of 1.5e-100, whose sample
    mean is only computed to ~1e-116)."""
    for b, c in [(1e-3, 0.0), (1e-3, 30.0), (0.05, 1e4), (1e5, 0.0), (3.0, -1e4), (1e5, 500.0),
                 (2.5, 1e11), (2.5, 1e13), (0.5, -1e15), (3.0, 1e100), (1.0, 1e100)]:
        x = draw(jax.random.key(41), b, c)
        mean, var = mean_var_closed_form(b, c)
        assert np.all(np.isfinite(x)) and np.all(x >= 0)
        tol = max(5 * math.sqrt(var / N_KS), 4 * np.spacing(mean))
        assert abs(x.mean() - mean) < tol, (b, c)


def test_mixed_parameters_in_one_call():
    """Entries of every class, interleaved in one call (b = 1, 2, 0.05 .. 2500.7 and |c| past
    the normal limit, plus invalid ones), each get the law of their own (b, c): per-(b, c)
    sample means within 4 SE of the closed form, NaN exactly where the parameters are
    invalid.  A mix-up between the sorted layout and the entries would move some mean."""
    pairs = [(1.0, 0.0), (1.0, 50.0), (2.0, 3.0), (0.05, 0.0), (0.2, 5.0), (0.7, 1.0),
             (2.5, 200.0), (3.0, 0.0), (2500.7, 2.0), (2.5, 1e13)]
    rng = np.random.default_rng(5)
    which = rng.permutation(np.arange(N_KS) % (len(pairs) + 1))     # last label: invalid
    b = np.array([p[0] for p in pairs] + [0.0])[which]
    c = np.array([p[1] for p in pairs] + [1.0])[which]
    x = np.asarray(_jitted(jax.random.key(8), jnp.asarray(b), jnp.asarray(c)))
    assert np.all(np.isnan(x[which == len(pairs)]))
    for label, (bi, ci) in enumerate(pairs):
        xs = x[which == label]
        mean, var = mean_var_closed_form(bi, ci)
        assert np.all(np.isfinite(xs)) and np.all(xs >= 0)
        assert abs(xs.mean() - mean) < 4 * math.sqrt(var / xs.size), (bi, ci)


# ------------------------------------------------------------------------ the contract

_jitted = jax.jit(polya_gamma)


def test_jit_vmap_and_keys():
    key = jax.random.key(0)
    b = jnp.linspace(0.5, 12.5, N_KS).at[:4].set([1.0, 2.0, 3.0, 8.0])    # both regimes
    c = jnp.linspace(-40.0, 40.0, N_KS)
    eager = draw(key, b, c)
    # jax.jit around the sampler is another compiled program than the sampler's own: the same
    # draws up to round-off (an accept/reject flip would need a uniform within an ulp of its
    # bound); the same program with the same key is the same bit for bit
    np.testing.assert_allclose(eager, _jitted(key, b, c), rtol=1e-12)
    np.testing.assert_array_equal(eager, draw(key, b, c))              # same key, same draws
    assert not np.array_equal(eager, draw(jax.random.key(1), b, c))
    # raw uint32 keys are traced too (eval_shape: the same trace, without a second compile)
    assert jax.eval_shape(lambda k: polya_gamma(k, b, c), jax.random.PRNGKey(0)).shape == (N_KS,)
    keys = jax.random.split(key, 3)
    batched = jax.vmap(lambda k, ci: polya_gamma(k, b[:5], ci))(keys, jnp.asarray([0.0, 1.0, 30.0]))
    assert batched.shape == (3, 5) and np.all(np.isfinite(batched)) and np.all(batched > 0)


def test_symmetric_in_c():
    key = jax.random.key(3)
    np.testing.assert_array_equal(draw(key, 2.5, 3.0), draw(key, 2.5, -3.0))


def test_shapes_broadcast():
    key = jax.random.key(0)
    shape_of = lambda *args, **kw: jax.eval_shape(lambda k: polya_gamma(k, *args, **kw), key)
    assert shape_of(1.0, 0.0).shape == ()
    assert shape_of(jnp.ones((3, 1)), jnp.zeros(4)).shape == (3, 4)
    assert shape_of(2.0, jnp.zeros(4), shape=(2, 4)).shape == (2, 4)
    assert shape_of(np.float32(1.5), np.float32(1.0)).dtype == jnp.float64
    assert polya_gamma(key, 1.0, jnp.zeros((0, 2))).shape == (0, 2)


def test_invalid_b_raises_outside_jit_and_gives_nan_inside():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="b has 2 entries .* positions 1, 2"):
        polya_gamma(key, np.array([1.0, 0.0, -2.0]), 0.0)
    with pytest.raises(ValueError, match="b has 1 entry that"):
        polya_gamma(key, np.nan, 0.0)
    with pytest.raises(ValueError, match="c has 1 non-finite entry "):
        polya_gamma(key, 1.0, np.array([0.0, np.inf]))
    b = jnp.ones(N_KS).at[1].set(0.0).at[3].set(-1.0)
    inside = np.asarray(_jitted(key, b, jnp.zeros(N_KS)))
    assert np.isnan(inside[[1, 3]]).all() and np.isfinite(np.delete(inside, [1, 3])).all()

"""Tests for gplvm.likelihoods: exact identities against SciPy, sampling moments, missing data,
the Pólya-gamma parametrisation (seed 000, eq. 26), validation and trainable parameters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st
from scipy.special import expit, gammaln, log_expit, softmax

import gplvm  # noqa: F401  (float64)
from gplvm.likelihoods import (
    LIKELIHOODS, AbstractLikelihood, Bernoulli, Binomial, Gaussian, Multinomial,
    NegativeBinomial, Poisson, get_likelihood, logsumexp_others,
)

N, D, J = 60, 4, 5
TOL = dict(rtol=1e-10, atol=1e-10)


def extreme_F(rng, shape):
    """Latent values spanning |f| up to 30, including the end points exactly."""
    F = rng.uniform(-30.0, 30.0, size=shape)
    F.flat[:4] = [-30.0, 30.0, 0.0, -1e-3]
    return F


def random_case(lik, rng, shape=(N, D)):
    """(Y, F) of valid data for ``lik`` with extreme F (Y drawn independently of F)."""
    if isinstance(lik, Multinomial):
        F = extreme_F(rng, (shape[0], J - 1))
        Y = rng.multinomial(rng.integers(0, 30, size=shape[0]), np.full(J, 1.0 / J)).astype(float)
        return Y, F
    F = extreme_F(rng, shape)
    if isinstance(lik, Gaussian):
        Y = rng.normal(scale=10.0, size=shape)
    elif isinstance(lik, Bernoulli):
        Y = rng.integers(0, 2, size=shape).astype(float)
    elif isinstance(lik, Binomial):
        Y = rng.integers(0, np.broadcast_to(lik.n_trials, shape) + 1).astype(float)
    else:
        Y = rng.integers(0, 40, size=shape).astype(float)
    return Y, F


ALL = [Gaussian(noise_var=np.array([0.3, 1.0, 2.5, 7.0])), Bernoulli(),
       Binomial(n_trials=np.arange(1, N * D + 1).reshape(N, D) % 23 + 1), Poisson(),
       NegativeBinomial(dispersion=np.array([0.4, 1.0, 3.7, 25.0])), Multinomial()]
IDS = [lik.name for lik in ALL]
PG = [lik for lik in ALL if lik.supports_polya_gamma]


# --- exact identities against SciPy --------------------------------------------------------


def scipy_log_prob(lik, Y, F):
    """Reference log-densities from scipy.stats, fed its best-conditioned parametrisation.

    For Bernoulli/binomial, p = σ(f) rounds to 1 for f ≫ 0 and log(1 − p) then loses all
    digits *inside SciPy*; the identity Bin(y | n, p) = Bin(n − y | n, 1 − p) lets SciPy work
    with the tiny, accurately represented σ(−f) instead.
    """
    if isinstance(lik, Gaussian):
        return st.norm.logpdf(Y, loc=F, scale=np.sqrt(lik.noise_var))
    if isinstance(lik, Bernoulli):
        return np.where(F < 0, st.bernoulli.logpmf(Y, expit(F)),
                        st.bernoulli.logpmf(1 - Y, expit(-F)))
    if isinstance(lik, Binomial):
        n = lik.n_trials
        return np.where(F < 0, st.binom.logpmf(Y, n, expit(F)),
                        st.binom.logpmf(n - Y, n, expit(-F)))
    if isinstance(lik, Poisson):
        return st.poisson.logpmf(Y, np.exp(F))
    if isinstance(lik, NegativeBinomial):
        return st.nbinom.logpmf(Y, lik.dispersion, expit(-F))  # = 1 − σ(ψ), exactly
    return st.multinomial.logpmf(Y, Y.sum(axis=1), softmax(np.c_[F, np.zeros(len(F))], axis=1))


@pytest.mark.parametrize("lik", ALL, ids=IDS)
def test_log_prob_matches_scipy(lik):
    rng = np.random.default_rng(0)
    Y, F = random_case(lik, rng)
    ours = np.asarray(lik.log_prob(Y, F))
    ref = scipy_log_prob(lik, Y, F)
    assert ours.shape == ((N,) if isinstance(lik, Multinomial) else (N, D))
    if isinstance(lik, NegativeBinomial):
        # SciPy's p = σ(−ψ) carries a rounding error ≤ eps, and SciPy evaluates
        # y·log1p(−p): for ψ ≪ 0, p ≈ 1 and that error is amplified to y·eps/σ(ψ) in the
        # *reference*.  Allow exactly that (4× margin) on top of 1e-10; the exact check
        # over the whole range is test_negative_binomial_extreme below.
        extra = 4.0 * Y * np.finfo(float).eps / expit(F)
        assert np.all(np.abs(ours - ref) <= 1e-10 + 1e-10 * np.abs(ref) + extra)
        well = F > -10.0
        np.testing.assert_allclose(ours[well], ref[well], **TOL)
    else:
        np.testing.assert_allclose(ours, ref, **TOL)
    np.testing.assert_allclose(lik.log_likelihood(Y, F), ours.sum(), rtol=1e-12)


def test_negative_binomial_extreme():
    """NB(r, σ(ψ)) = Γ(y+r)/(Γ(r) y!) σ(ψ)^y σ(−ψ)^r with SciPy's accurate log_expit."""
    rng = np.random.default_rng(1)
    lik = ALL[4]
    Y, F = random_case(lik, rng)
    r = lik.dispersion
    ref = (gammaln(Y + r) - gammaln(r) - gammaln(Y + 1) + Y * log_expit(F) + r * log_expit(-F))
    np.testing.assert_allclose(lik.log_prob(Y, F), ref, **TOL)


@pytest.mark.parametrize("lik", ALL, ids=IDS)
def test_moments_match_scipy(lik):
    """inverse_link and conditional_variance are the mean and variance of p(y | f)."""
    rng = np.random.default_rng(2)
    F = rng.uniform(-4.0, 4.0, size=(N, J - 1 if isinstance(lik, Multinomial) else D))
    mean, var = lik.predictive_mean_var(F)
    ref_mean, ref_var = reference_moments(lik, F)[:2]
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(var, ref_var, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(lik.inverse_link(F), mean)
    np.testing.assert_allclose(lik.conditional_variance(F), var)


def reference_moments(lik, F):
    """(mean, variance, excess kurtosis) of y | f from scipy.stats."""
    if isinstance(lik, Gaussian):
        dist = st.norm(F, np.sqrt(lik.noise_var))
    elif isinstance(lik, Bernoulli):
        dist = st.bernoulli(expit(F))
    elif isinstance(lik, Binomial):
        dist = st.binom(lik.n_trials, expit(F))
    elif isinstance(lik, Poisson):
        dist = st.poisson(np.exp(F))
    elif isinstance(lik, NegativeBinomial):
        dist = st.nbinom(lik.dispersion, expit(-F))
    else:  # multinomial marginals are binomial
        n = 1 if lik.n_trials is None else lik.n_trials
        dist = st.binom(n, softmax(np.c_[F, np.zeros(len(F))], axis=1))
    mean, var, kurt = dist.stats(moments="mvk")
    return np.broadcast_to(mean, var.shape), var, kurt


# --- sampling -------------------------------------------------------------------------------

SAMPLED = [Gaussian(noise_var=np.array([0.5, 2.0, 1.0, 1.0, 3.0])), Bernoulli(),
           Binomial(n_trials=np.array([1, 4, 10, 7, 30])), Poisson(),
           NegativeBinomial(dispersion=np.array([0.5, 1.0, 2.0, 5.0, 20.0])),
           Multinomial(n_trials=7)]


def sampling_F(lik, n_draws=100_000):
    row = [-1.0, 0.5, 1.5, 0.0] if isinstance(lik, Multinomial) else [-2.0, -0.5, 0.3, 1.0, 2.0]
    return np.broadcast_to(np.array(row), (n_draws, len(row)))


@pytest.mark.parametrize("lik", SAMPLED, ids=[lik.name for lik in SAMPLED])
def test_sample_moments(lik):
    """Sample means and variances of 10^5 draws agree with the formulas within 4 s.e.

    Mean: s.e. = sqrt(Var[y] / n).  Variance: for large n the sample variance is asymptotically
    normal with Var[s²] = (μ₄ − σ⁴)/n = σ⁴ (κ + 2)/n (κ = excess kurtosis, taken exactly from
    scipy.stats), so s.e.(s²) = σ² sqrt((κ + 2)/n).  With 56 comparisons at 4 s.e. a false
    alarm has probability ≈ 56 × 6.3e-5 ≈ 4e-3, and the keys are fixed.
    """
    F = sampling_F(lik)
    n_draws = F.shape[0]
    draws = np.asarray(lik.sample(jax.random.key(3), F))
    mean, var, kurt = (np.asarray(m)[0] for m in reference_moments(lik, F[:1]))
    if isinstance(lik, Multinomial):
        assert draws.shape == (n_draws, F.shape[1] + 1)
        np.testing.assert_array_equal(draws.sum(axis=1), 7.0)
    se_mean = np.sqrt(var / n_draws)
    se_var = var * np.sqrt((kurt + 2.0) / n_draws)
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * se_mean)
    assert np.all(np.abs(draws.var(axis=0, ddof=1) - var) < 4 * se_var)
    assert draws.dtype == np.float64
    lik.validate(draws)     # counts are non-negative integers, binomial draws ≤ n_trials, ...


def test_sample_reproducible():
    """Same key, same draws (same shapes as above, so the compiled sampler is reused)."""
    lik = SAMPLED[3]
    F = sampling_F(lik)
    a, b = lik.sample(jax.random.key(5), F), lik.sample(jax.random.key(5), F)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, lik.sample(jax.random.key(6), F))


# --- missing data ---------------------------------------------------------------------------


@pytest.mark.parametrize("lik", ALL, ids=IDS)
def test_nan_contributes_zero_and_gradient_finite(lik):
    rng = np.random.default_rng(4)
    Y, F = random_case(lik, rng)
    Y_nan = Y.copy()
    Y_nan[rng.random(Y.shape) < 0.2] = np.nan
    lp = np.asarray(lik.log_prob(Y_nan, F))
    missing = np.isnan(Y_nan).any(axis=1) if isinstance(lik, Multinomial) else np.isnan(Y_nan)
    assert missing.any() and (~missing).any()
    assert np.all(lp[missing] == 0.0)
    np.testing.assert_array_equal(lp[~missing], np.asarray(lik.log_prob(Y, F))[~missing])
    grad = np.asarray(jax.grad(lik.log_likelihood, argnums=1)(Y_nan, F))
    assert np.all(np.isfinite(grad))
    assert np.all(grad[missing] == 0.0)
    jitted = jax.jit(lambda lk, y, f: lk.log_likelihood(y, f))
    np.testing.assert_allclose(jitted(lik, Y_nan, F), lp.sum(), rtol=1e-12)


@pytest.mark.parametrize("lik", ALL, ids=IDS)
def test_gradient_matches_finite_differences(lik):
    rng = np.random.default_rng(5)
    Y, F = random_case(lik, rng)
    F = rng.uniform(-3.0, 3.0, size=F.shape)
    grad = np.asarray(jax.grad(lik.log_likelihood, argnums=1)(Y, F))
    h = 1e-6
    for idx in [(0, 0), (3, 1), (5, 2)]:
        E = np.zeros_like(F)
        E[idx] = h
        # Difference only the row that changes: the full sum's round-off would swamp h.
        fd = (lik.log_prob(Y, F + E)[idx[0]].sum() - lik.log_prob(Y, F - E)[idx[0]].sum()) / (2 * h)
        np.testing.assert_allclose(grad[idx], fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("lik", ALL, ids=IDS)
def test_closed_form_score_and_curvature_are_the_derivatives_of_the_log_density(lik):
    """grad_log_prob and curvature (closed forms, issue 30) equal jax.grad and minus the
    diagonal of jax.hessian of log_likelihood (whose values test_log_prob_matches_scipy ties
    to SciPy), with 20% of Y missing and |f| up to 30: to 1e-10 relative to 1 + |value|
    (round-off of two routes to one number; a wrong sign, factor or missing term is O(1)).
    Missing entries (rows, for the multinomial) give 0; the curvature is ≥ 0."""
    rng = np.random.default_rng(8)
    Y, F = random_case(lik, rng)
    Y[rng.random(Y.shape) < 0.2] = np.nan
    missing = np.isnan(Y).any(axis=1) if isinstance(lik, Multinomial) else np.isnan(Y)
    score, curvature = np.asarray(lik.grad_log_prob(Y, F)), np.asarray(lik.curvature(Y, F))
    assert score.shape == curvature.shape == F.shape
    want_score = np.asarray(jax.grad(lik.log_likelihood, argnums=1)(Y, F))
    hessian = np.asarray(jax.hessian(lik.log_likelihood, argnums=1)(Y, F)).reshape(F.size,
                                                                                 F.size)
    want_curvature = -np.diag(hessian).reshape(F.shape)
    for got, want in ((score, want_score), (curvature, want_curvature)):
        assert np.all(np.abs(got - want) <= 1e-10 * (1.0 + np.abs(want)))
        assert np.all(got[missing] == 0.0)
    assert np.all(curvature >= 0.0)


# --- Pólya-gamma parametrisation (seed 000, eq. 26) ------------------------------------------


@pytest.mark.parametrize("lik", [p for p in PG if not isinstance(p, Multinomial)],
                         ids=lambda lik: lik.name)
def test_polya_gamma_reproduces_log_prob(lik):
    """log p(y | ψ) − [aψ − b log(1 + e^ψ)] = log c(y) does not depend on ψ."""
    rng = np.random.default_rng(6)
    Y, _ = random_case(lik, rng)
    a, b, kappa = (np.asarray(t) for t in lik.polya_gamma_params(Y))
    # κ = a − b/2 (the negative binomial's in the form (y − r)/2, with one rounding less)
    np.testing.assert_allclose(kappa, a - b / 2, rtol=1e-15, atol=1e-15)
    np.testing.assert_array_equal(a, Y)
    consts = [np.asarray(lik.log_prob(Y, np.full(Y.shape, psi)))
              - (a * psi - b * np.logaddexp(psi, 0.0)) for psi in np.linspace(-30, 30, 9)]
    spread = np.ptp(np.stack(consts), axis=0)
    assert np.all(spread <= 1e-10 * (1 + np.abs(consts[0]) + b * 30))


def test_polya_gamma_b_per_likelihood():
    Y = np.array([[0.0, 3.0], [2.0, np.nan]])
    b = NegativeBinomial(dispersion=np.array([1.5, 4.0])).polya_gamma_params(Y)[1]
    np.testing.assert_array_equal(b, [[1.5, 7.0], [3.5, 0.0]])
    b = Binomial(n_trials=5).polya_gamma_params(Y)[1]
    np.testing.assert_array_equal(b, [[5.0, 5.0], [5.0, 0.0]])
    a, b, k = Bernoulli().polya_gamma_params(np.array([[0.0, 1.0, np.nan]]))
    np.testing.assert_array_equal(np.c_[a, b, k], [[0, 1, 0, 1, 1, 0, -0.5, 0.5, 0]])
    for lik in (Gaussian(), Poisson()):
        assert not lik.supports_polya_gamma
        with pytest.raises(NotImplementedError, match="no Pólya-gamma"):
            lik.polya_gamma_params(Y)


def test_multinomial_polya_gamma_holmes_held():
    """For each j < J, as a function of f_ij alone: a = y_ij, b = N_i, ψ = f_ij − ξ_ij."""
    rng = np.random.default_rng(7)
    lik = Multinomial()
    Y, F = random_case(lik, rng)
    Y[3] = np.nan
    a, b, kappa = (np.asarray(t) for t in lik.polya_gamma_params(Y))
    totals = np.nansum(Y, axis=1)
    assert a.shape == b.shape == (N, J - 1)
    np.testing.assert_array_equal(a[3], 0.0)
    np.testing.assert_array_equal(b[3], 0.0)
    keep = np.arange(N) != 3
    np.testing.assert_array_equal(a[keep], Y[keep, :-1])
    np.testing.assert_array_equal(b[keep], np.broadcast_to(totals[keep, None], (N - 1, J - 1)))
    np.testing.assert_array_equal(kappa, a - b / 2)
    for j in range(J - 1):
        consts = []
        for value in np.linspace(-30, 30, 7):
            Fj = F.copy()
            Fj[:, j] = value
            psi = Fj[:, j] - np.asarray(lik.polya_gamma_offset(Fj))[:, j]
            consts.append(np.asarray(lik.log_prob(Y, Fj))
                          - (a[:, j] * psi - b[:, j] * np.logaddexp(psi, 0.0)))
        spread = np.ptp(np.stack(consts), axis=0)
        assert np.all(spread <= 1e-10 * (1 + np.abs(consts[0]) + b[:, j] * 60))


def test_logsumexp_others_is_exact_and_differentiable():
    rng = np.random.default_rng(8)
    L = np.c_[extreme_F(rng, (50, 6)) * 2, np.zeros(50)]
    L[0, :3] = 700.0    # ties at the maximum, far beyond exp overflow
    brute = np.stack([np.logaddexp.reduce(np.delete(L, j, axis=1), axis=1)
                      for j in range(L.shape[1])], axis=1)
    np.testing.assert_allclose(logsumexp_others(L), brute, rtol=1e-13, atol=1e-13)
    grad = jax.jit(jax.grad(lambda x: jnp.sum(logsumexp_others(x))))(L)
    assert np.all(np.isfinite(np.asarray(grad)))


# --- quadrature -----------------------------------------------------------------------------


def test_quadrature_matches_closed_forms():
    """The generic Gauss–Hermite rule reproduces the Poisson/Gaussian closed forms."""
    rng = np.random.default_rng(9)
    m = rng.uniform(-2, 2, size=(7, 3))
    v = rng.uniform(0.01, 0.5, size=(7, 3))
    Y = rng.integers(0, 10, size=(7, 3)).astype(float)
    Y[0, 0] = np.nan
    for lik in (Poisson(), Gaussian(noise_var=np.array([0.2, 1.0, 3.0]))):
        closed = lik.predictive_mean_var(m, v)
        generic = jax.jit(AbstractLikelihood._predictive_mean_var, static_argnums=3)(
            lik, jnp.asarray(m), jnp.asarray(v), 40)
        np.testing.assert_allclose(generic, closed, rtol=1e-9)
        closed = lik.expected_log_prob(Y, m, v)
        generic = jax.jit(AbstractLikelihood._expected_log_prob, static_argnums=4)(
            lik, jnp.asarray(Y), jnp.asarray(m), jnp.asarray(v), 40)
        np.testing.assert_allclose(generic, closed, rtol=1e-9, atol=1e-12)
        assert closed[0, 0] == 0.0
    lik = NegativeBinomial(dispersion=np.array([1.0, 2.0, 3.0]))   # per-column broadcast
    mean, var = lik.predictive_mean_var(m, 1e-12 * np.ones_like(m))
    np.testing.assert_allclose(mean, lik.inverse_link(m), rtol=1e-9)
    np.testing.assert_allclose(var, lik.conditional_variance(m), rtol=1e-9)
    with pytest.raises(NotImplementedError):
        Multinomial().predictive_mean_var(m, v)


# --- validation -----------------------------------------------------------------------------

BAD = [
    (Poisson(), [[1.0, -2.0]], "negative entries"),
    (Poisson(), [[1.5, 2.0]], "non-integer"),
    (Poisson(), [[np.inf, 2.0]], "infinite"),
    (Poisson(), [1.0, 2.0], "1-D"),
    (Gaussian(), [[np.inf, 0.2]], "infinite"),
    (Gaussian(noise_var=-1.0), [[0.1, 0.2]], "noise_var must be positive"),
    (Gaussian(noise_var=np.ones(3)), [[0.1, 0.2]], "noise_var has shape"),
    (Bernoulli(), [[0.0, 2.0]], r"outside \{0, 1\}"),
    (Bernoulli(), [[0.0, 0.5]], r"outside \{0, 1\}"),
    (Binomial(n_trials=3), [[4.0, 2.0]], "above the number of trials"),
    (Binomial(n_trials=3), [[-1.0, 2.0]], "negative entries"),
    (Binomial(n_trials=np.array([3, 4, 5])), [[1.0, 2.0]], "does not broadcast"),
    (Binomial(n_trials=2.5), [[1.0, 2.0]], "non-negative integers"),
    (NegativeBinomial(), [[0.0, 1.2]], "non-integer"),
    (NegativeBinomial(dispersion=0.0), [[0.0, 1.0]], "dispersion must be positive"),
    (NegativeBinomial(dispersion=np.ones(3)), [[0.0, 1.0]], "dispersion has shape"),
    (Multinomial(n_trials=3), [[1.0, 1.0, 1.0], [2.0, 0.0, 0.0]], "do not sum to n_trials"),
    (Multinomial(n_trials=np.array([3, 3])), [[1.0, 1.0, 1.0], [2.0, 0.0, 2.0]], "rows 1"),
    (Multinomial(), [[1.0, np.nan, 1.0], [2.0, 0.0, 0.0]], "some but not all"),
    (Multinomial(), [[1.0], [2.0]], "at least 2 categories"),
    (Multinomial(), [[1.0, -1.0, 3.0]], "negative entries"),
]


@pytest.mark.parametrize("lik, Y, match", BAD, ids=[f"{b[0].name}-{b[2]}" for b in BAD])
def test_validate_rejects_bad_data(lik, Y, match):
    with pytest.raises(ValueError, match=match):
        lik.validate(np.asarray(Y, dtype=float))


@pytest.mark.parametrize("lik", ALL, ids=IDS)
def test_validate_accepts_valid_data_with_nan(lik):
    Y, _ = random_case(lik, np.random.default_rng(10))
    if not isinstance(lik, Multinomial):   # multinomial rows are missing only as a whole
        Y[2, 1] = np.nan
    out = lik.validate(Y)
    assert out.dtype == np.float64 and out.shape == Y.shape
    Multinomial(n_trials=np.array([3, 3])).validate(np.array([[2.0, 1.0, 0.0], [0, 0, 3]]))
    # Library policy (gplvm._validation.as_2d_float): a row with no observed entry carries no
    # information and is rejected with a hint, for the multinomial too.
    with pytest.raises(ValueError, match="no observed entry"):
        lik.validate(np.where(np.arange(len(Y))[:, None] == 2, np.nan, Y))


# --- trainable parameters, factory, contract ------------------------------------------------


@pytest.mark.parametrize("lik", ALL, ids=IDS)
def test_unconstrained_round_trip(lik):
    u = lik.unconstrained()
    back = lik.from_unconstrained(u)
    assert type(back) is type(lik)
    for field in ("noise_var", "dispersion"):
        if hasattr(lik, field):
            assert set(u) == {field}
            np.testing.assert_allclose(getattr(back, field), getattr(lik, field), rtol=1e-12)
            shifted = lik.from_unconstrained({field: u[field] - 50.0})
            assert np.all(np.asarray(getattr(shifted, field)) > 0)
    if not u:
        assert back is lik


def test_gradient_through_unconstrained_parameters():
    rng = np.random.default_rng(11)
    for lik in (Gaussian(noise_var=np.array([0.5, 2.0])), NegativeBinomial(np.array([0.7, 3.0]))):
        Y, F = random_case(lik, rng, shape=(20, 2))
        F = F / 10.0
        u = lik.unconstrained()

        @jax.jit
        def objective(uu):
            return lik.from_unconstrained(uu).log_likelihood(Y, F)

        (key,) = u
        grad = np.asarray(jax.grad(objective)(u)[key])
        h = 1e-6
        for c in range(2):
            e = np.zeros(2)
            e[c] = h
            fd = (objective({key: u[key] + e}) - objective({key: u[key] - e})) / (2 * h)
            np.testing.assert_allclose(grad[c], fd, rtol=1e-6)


def test_get_likelihood():
    for name, cls in LIKELIHOODS.items():
        assert isinstance(get_likelihood(name), cls) and cls.name == name
    assert set(LIKELIHOODS) == {"gaussian", "bernoulli", "binomial", "poisson",
                                "negative_binomial", "multinomial"}
    assert get_likelihood("Negative-Binomial", dispersion=3.0).dispersion == 3.0
    assert isinstance(get_likelihood("nb"), NegativeBinomial)
    assert get_likelihood("binomial", n_trials=4).n_trials == 4
    lik = Poisson()
    assert get_likelihood(lik) is lik
    with pytest.raises(ValueError, match="unknown likelihood 'gamma'"):
        get_likelihood("gamma")
    with pytest.raises(ValueError, match="does not take"):
        get_likelihood("poisson", dispersion=2.0)
    with pytest.raises(ValueError, match="set them on the object"):
        get_likelihood(Gaussian(), noise_var=2.0)


@pytest.mark.parametrize("lik", ALL, ids=IDS)
def test_contract(lik):
    """Shapes, flags, pytree/jit behaviour and finiteness at extreme F for every likelihood."""
    rng = np.random.default_rng(12)
    Y, F = random_case(lik, rng)
    assert lik.latent_dim(Y.shape[1]) == F.shape[1]
    assert lik.is_count == (not isinstance(lik, Gaussian))
    leaves, tree = jax.tree_util.tree_flatten(lik)
    assert type(jax.tree_util.tree_unflatten(tree, leaves)) is type(lik)
    out_shape = Y.shape
    mean, var = jax.jit(lambda lk, f: lk.predictive_mean_var(f))(lik, F)
    assert mean.shape == var.shape == out_shape
    assert np.all(np.isfinite(mean)) and np.all(np.asarray(var) >= 0)
    assert np.all(np.isfinite(np.asarray(lik.log_prob(Y, F))))
    F32 = jnp.asarray(F, jnp.float32)
    assert lik.log_prob(Y, F32).dtype == jnp.float32
    if isinstance(lik, Multinomial):
        with pytest.raises(ValueError, match="takes J − 1"):
            lik.log_prob(Y, np.c_[F, F[:, :1]])     # J latent columns instead of J − 1
    offset = np.asarray(lik.polya_gamma_offset(F))
    assert offset.shape == F.shape
    if not isinstance(lik, Multinomial):
        assert np.all(offset == 0.0)

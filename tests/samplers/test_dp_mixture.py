r"""Tests for gplvm.samplers.dp_mixture and ._niw (seed 000, eqs. 22–25).

References never come from the code under test: inverse-Wishart moments are closed forms
(Press 1982; the diagonal is inverse-gamma), NIW posteriors and marginal likelihoods are
recomputed here in NumPy from their textbook formulas (Murphy 2007, §9), the prior predictive
is checked against scipy.stats.multivariate_t and against a Monte Carlo integral over SciPy's
own NIW draws, the concentration update against quadrature of Antoniak's p(α | K), and a whole
Gibbs sweep against the exact posterior over the 15 partitions of 4 items.

Every Monte Carlo check uses independent chains (a vmap over keys) and a tolerance stated in
standard errors or as a p-value; the compiled samplers are built once per module.
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
from scipy.special import gammaln, multigammaln, polygamma

import gplvm  # noqa: F401  (float64)
from gplvm.samplers import (DPMixtureState, NIWPrior, default_niw_prior, dp_init, dp_update,
                            log_prior_frequencies, n_clusters, propose_frequencies,
                            sample_cluster_params, sample_concentration)
from gplvm.samplers._niw import log_prior_predictive, niw_log_marginal, sample_inverse_wishart

Z_TOL = 4.5          # standard errors allowed on a moment
P_MIN = 1e-3         # smallest p-value accepted by a KS or chi-square test


def key(seed: int) -> jax.Array:
    return jax.random.PRNGKey(seed)


# ----------------------------------------------------------------------------- references

def iw_mean(Psi, nu):
    return Psi / (nu - Psi.shape[0] - 1)


def iw_var(Psi, nu):
    """Elementwise Var(Σ_ij) of W⁻¹(Ψ, ν) (Press 1982, eq. 5.2.12)."""
    p = Psi.shape[0]
    d = np.diag(Psi)
    num = (nu - p + 1) * Psi**2 + (nu - p - 1) * np.outer(d, d)
    return num / ((nu - p) * (nu - p - 1) ** 2 * (nu - p - 3))


def niw_posterior_np(W, mu0, lam0, nu0, Psi0):
    """The NIW posterior given the rows of W (Murphy 2007, eqs. 251–254), written out."""
    n = W.shape[0]
    if n == 0:
        return mu0, lam0, nu0, Psi0
    wbar = W.mean(axis=0)
    S = sum(np.outer(w - wbar, w - wbar) for w in W)
    lam, nu = lam0 + n, nu0 + n
    m = (lam0 * mu0 + n * wbar) / lam
    Psi = Psi0 + S + lam0 * n / lam * np.outer(wbar - mu0, wbar - mu0)
    return m, lam, nu, Psi


def log_marginal_np(W, mu0, lam0, nu0, Psi0):
    """log ∫ Π_m N(w_m | μ, Σ) dNIW(μ, Σ) (Murphy 2007, eq. 266)."""
    n, d = W.shape
    _, lam, nu, Psi = niw_posterior_np(W, mu0, lam0, nu0, Psi0)
    return (-0.5 * n * d * np.log(np.pi) + multigammaln(nu / 2, d) - multigammaln(nu0 / 2, d)
            + 0.5 * nu0 * np.linalg.slogdet(Psi0)[1] - 0.5 * nu * np.linalg.slogdet(Psi)[1]
            + 0.5 * d * np.log(lam0 / lam))


def set_partitions(n: int) -> list[tuple[int, ...]]:
    """All partitions of n items as restricted growth strings (Bell(4) = 15)."""
    out = []

    def grow(prefix, top):
        if len(prefix) == n:
            out.append(tuple(prefix))
            return
        for k in range(top + 2):
            grow(prefix + [k], max(top, k))

    grow([0], 0)
    return out


def canonical(z: np.ndarray) -> list[tuple[int, ...]]:
    """Relabel each row of slot labels by order of first appearance."""
    rows = []
    for row in z:
        seen: dict[int, int] = {}
        rows.append(tuple(seen.setdefault(int(k), len(seen)) for k in row))
    return rows


def partition_posterior(W, prior_np, log_crp):
    """p(partition | W) ∝ exp(log_crp(K)) Π_k Γ(n_k) p(W_k), the CRP prior of the partition
    being α^K Γ(α)/Γ(α + n) Π_k Γ(n_k) (with α integrated out inside ``log_crp``)."""
    parts = set_partitions(W.shape[0])
    logp = []
    for part in parts:
        part = np.array(part)
        K = part.max() + 1
        logp.append(log_crp(K) + sum(gammaln(np.sum(part == k))
                                     + log_marginal_np(W[part == k], *prior_np)
                                     for k in range(K)))
    logp = np.array(logp)
    p = np.exp(logp - logp.max())
    return parts, p / p.sum()


def antoniak_log_density(alpha, K, n, a, b):
    """log of Ga(α; a, rate b) α^K Γ(α)/Γ(α + n), unnormalised."""
    return (a - 1) * np.log(alpha) - b * alpha + K * np.log(alpha) + gammaln(alpha) \
        - gammaln(alpha + n)


def antoniak_log_evidence(K, n, a, b):
    """log ∫ Ga(α; a, b) α^K Γ(α)/Γ(α + n) dα, the α-marginal CRP factor of a K-partition."""
    f = lambda al: np.exp(antoniak_log_density(al, K, n, a, b) + a * np.log(b) - gammaln(a))
    return np.log(integrate.quad(f, 0, np.inf, limit=400)[0])


def test_references_agree_with_scipy():
    """The NumPy references above: one-item marginal = SciPy's Student-t predictive, and the
    CRP partition prior sums to one over all partitions."""
    mu0, lam0, nu0 = np.array([0.3, -0.2]), 0.5, 4.0
    Psi0 = np.array([[1.0, 0.3], [0.3, 0.8]])
    w = np.array([[0.7, -1.1]])
    dof = nu0 - 2 + 1
    t = st.multivariate_t(loc=mu0, shape=Psi0 * (lam0 + 1) / (lam0 * dof), df=dof)
    assert log_marginal_np(w, mu0, lam0, nu0, Psi0) == pytest.approx(t.logpdf(w[0]), rel=1e-12)
    alpha, n = 1.7, 5
    total = 0.0
    for part in set_partitions(n):
        part = np.array(part)
        K = part.max() + 1
        total += math.exp(K * np.log(alpha) + gammaln(alpha) - gammaln(alpha + n)
                          + sum(gammaln(np.sum(part == k)) for k in range(K)))
    assert total == pytest.approx(1.0, rel=1e-12)


# ----------------------------------------------------------------------------- NIW pieces

def test_default_prior_is_the_papers():
    prior = default_niw_prior(3)
    np.testing.assert_array_equal(prior.mu0, np.zeros(3))
    np.testing.assert_array_equal(prior.Psi0, np.eye(3))
    assert float(prior.lambda0) == 3.0 and float(prior.nu0) == 4.0


def test_inverse_wishart_moments_and_marginal():
    Q, nu, n = 3, 15.0, 40_000
    Psi = np.array([[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]])
    draw = jax.jit(jax.vmap(sample_inverse_wishart, in_axes=(0, None, None)))
    S = np.asarray(draw(jax.random.split(key(0), n), jnp.asarray(Psi), nu)[0])
    np.testing.assert_allclose(st.invwishart(df=nu, scale=Psi).mean(), iw_mean(Psi, nu))
    # Mean: SE from the closed-form variance.
    z_mean = (S.mean(0) - iw_mean(Psi, nu)) / np.sqrt(iw_var(Psi, nu) / n)
    assert np.abs(z_mean).max() < Z_TOL, z_mean
    # Variance: SE of a sample variance, sqrt((m4 - s^4)/n), from the draws.
    c = S - S.mean(0)
    var_hat = (c**2).mean(0)
    se_var = np.sqrt(((c**4).mean(0) - var_hat**2) / n)
    z_var = (var_hat - iw_var(Psi, nu)) / se_var
    assert np.abs(z_var).max() < Z_TOL, z_var
    # Σ_11 ~ inverse-gamma((ν − Q + 1)/2, scale Ψ_11/2), the whole marginal law.
    ks = st.kstest(S[:, 0, 0], st.invgamma(a=(nu - Q + 1) / 2, scale=Psi[0, 0] / 2).cdf)
    assert ks.pvalue > P_MIN
    # Whole-matrix laws: E log|Σ| = log|Ψ| − Q log 2 − Σ_i ψ((ν − i + 1)/2), Var from ψ';
    # E Σ⁻¹ = ν Ψ⁻¹ with Var = ν (V_ij² + V_ii V_jj), V = Ψ⁻¹ (Wishart moments).
    half = (nu - np.arange(Q)) / 2
    logdet = np.linalg.slogdet(S)[1]
    mean_ld = np.linalg.slogdet(Psi)[1] - Q * np.log(2) - polygamma(0, half).sum()
    assert abs(logdet.mean() - mean_ld) < Z_TOL * np.sqrt(polygamma(1, half).sum() / n)
    V = np.linalg.inv(Psi)
    prec = np.linalg.inv(S)
    se_prec = np.sqrt(nu * (V**2 + np.outer(np.diag(V), np.diag(V))) / n)
    assert np.abs((prec.mean(0) - nu * V) / se_prec).max() < Z_TOL


def test_niw_posterior_draws_match_conjugate_update():
    """Slots 0–2 hold 3, 2 and 1 items, slots 3–5 are empty (prior).  A version that put
    the items w_m instead of their mean w̄ in the shrinkage term of eq. 24 moves E[Σ_0] by
    λ0 n/(λ0 + n) S_0/(ν − Q − 1), over 50 standard errors here."""
    Q, n_draws = 2, 20_000
    mu0, lam0, nu0 = np.array([1.0, -2.0]), 0.7, 8.0
    Psi0 = np.array([[1.5, 0.4], [0.4, 0.9]])
    prior = NIWPrior(jnp.asarray(mu0), jnp.asarray(lam0), jnp.asarray(nu0), jnp.asarray(Psi0))
    W = np.array([[3.0, 1.0], [4.2, 0.1], [2.5, -0.7], [-1.0, -3.0], [-2.2, -2.5], [0.4, 0.9]])
    z = np.array([0, 0, 0, 1, 1, 2], dtype=np.int32)
    state = DPMixtureState(z=jnp.asarray(z), mu=jnp.zeros((6, Q)), Sigma=jnp.zeros((6, Q, Q)),
                           alpha=jnp.asarray(1.0))
    draw = jax.jit(jax.vmap(lambda k: sample_cluster_params(k, jnp.asarray(W), state, prior)))
    out = draw(jax.random.split(key(1), n_draws))
    mu, Sigma = np.asarray(out.mu), np.asarray(out.Sigma)
    for k in range(6):
        m, lam, nu, Psi = niw_posterior_np(W[z == k], mu0, lam0, nu0, Psi0)
        E_Sigma = iw_mean(Psi, nu)
        z_mu = (mu[:, k].mean(0) - m) / np.sqrt(np.diag(E_Sigma) / lam / n_draws)
        z_Sigma = (Sigma[:, k].mean(0) - E_Sigma) / np.sqrt(iw_var(Psi, nu) / n_draws)
        assert np.abs(z_mu).max() < Z_TOL, (k, z_mu)
        assert np.abs(z_Sigma).max() < Z_TOL, (k, z_Sigma)


def test_prior_predictive_is_the_niw_marginal():
    prior = NIWPrior(jnp.array([0.3, -0.2]), jnp.asarray(0.5), jnp.asarray(4.0),
                     jnp.array([[1.0, 0.3], [0.3, 0.8]]))
    W = np.array([[0.0, 0.0], [0.3, -0.2], [2.0, 1.0], [-5.0, 7.0], [40.0, -3.0]])
    got = np.asarray(log_prior_predictive(jnp.asarray(W), prior))
    dof = 4.0 - 2 + 1
    t = st.multivariate_t(loc=[0.3, -0.2], shape=np.asarray(prior.Psi0) * 1.5 / (0.5 * dof),
                          df=dof)
    np.testing.assert_allclose(got, t.logpdf(W), rtol=1e-12)
    # Monte Carlo over SciPy's NIW draws: E_H[N(w | μ, Σ)] = t(w), within 4.5 SE.
    rng = np.random.default_rng(0)
    n = 200_000
    Sig = st.invwishart(df=4.0, scale=np.asarray(prior.Psi0)).rvs(n, random_state=rng)
    mus = np.array([0.3, -0.2]) + np.einsum("nij,nj->ni", np.linalg.cholesky(Sig / 0.5),
                                            rng.standard_normal((n, 2)))
    for w, logt in zip(W[:4], got[:4]):
        d = w - mus
        maha = np.einsum("ni,ni->n", d, np.linalg.solve(Sig, d[:, :, None])[:, :, 0])
        dens = np.exp(-np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(Sig)[1] - 0.5 * maha)
        assert abs(dens.mean() - np.exp(logt)) < Z_TOL * dens.std() / np.sqrt(n)


# ----------------------------------------------------------------------------- concentration

N_ITEMS_EW, A_EW, B_EW = 50, 2.0, 0.5


@jax.jit
def _escobar_west_chains(keys, z):
    def chain(k):
        state = DPMixtureState(z=z, mu=jnp.zeros((N_ITEMS_EW, 1)),
                               Sigma=jnp.zeros((N_ITEMS_EW, 1, 1)), alpha=jnp.asarray(1.0))

        def step(s, kk):
            return sample_concentration(kk, s, A_EW, B_EW), None

        return lax.scan(step, state, jax.random.split(k, 30))[0].alpha

    return jax.vmap(chain)(keys)


@pytest.mark.parametrize("K", [1, 6])
def test_escobar_west_leaves_antoniak_posterior_invariant(K):
    """30 updates of α from α = 1 with K and n = 50 fixed: the draws follow
    p(α | K, n) ∝ Ga(α; 2, rate 0.5) α^K Γ(α)/Γ(α + n) (grid quadrature: KS and mean)."""
    n_chains = 20_000
    z = jnp.asarray(np.arange(N_ITEMS_EW) % K, dtype=jnp.int32)
    alpha = np.asarray(_escobar_west_chains(jax.random.split(key(10 + K), n_chains), z))
    grid = np.linspace(1e-9, 60.0, 400_001)
    log_d = antoniak_log_density(grid, K, N_ITEMS_EW, A_EW, B_EW)
    dens = np.exp(log_d - log_d.max())
    cdf = integrate.cumulative_trapezoid(dens, grid, initial=0.0)
    norm = cdf[-1]
    mean = integrate.trapezoid(grid * dens, grid) / norm
    sd = np.sqrt(integrate.trapezoid(grid**2 * dens, grid) / norm - mean**2)
    assert abs(alpha.mean() - mean) < Z_TOL * sd / np.sqrt(n_chains)
    assert st.kstest(alpha, lambda x: np.interp(x, grid, cdf / norm)).pvalue > P_MIN


# ----------------------------------------------------------------------------- full sweep

MU0 = np.array([0.3, -0.2])
LAM0, NU0 = 0.5, 4.0
PSI0 = np.array([[1.0, 0.3], [0.3, 0.8]])
PRIOR = NIWPrior(jnp.asarray(MU0), jnp.asarray(LAM0), jnp.asarray(NU0), jnp.asarray(PSI0))
W_FOUR = np.array([[-1.0, 0.0], [-0.6, 0.3], [1.0, 0.8], [1.4, 0.5]])


@jax.jit
def _sweep_chains(keys, W, a_alpha, b_alpha):
    """From dp_init (random partition into up to 4 clusters), 8 sweeps per chain."""
    def chain(k):
        k_init, k_run = jax.random.split(k)
        state = dp_init(k_init, W, PRIOR, n_clusters=4, alpha=a_alpha / b_alpha)

        def step(s, kk):
            return dp_update(kk, W, s, PRIOR, a_alpha, b_alpha), None

        return lax.scan(step, state, jax.random.split(k_run, 8))[0]

    return jax.vmap(chain)(keys)


def _partition_frequencies(z: np.ndarray) -> tuple[list, np.ndarray]:
    parts = set_partitions(z.shape[1])
    index = {p: i for i, p in enumerate(parts)}
    idx = np.array([index[p] for p in canonical(z)])
    return parts, np.bincount(idx, minlength=len(parts))


N_SWEEP_CHAINS = 20_000
ALPHA_CASES = {"alpha_pinned_2.5": (2.5e8, 1e8), "alpha_gamma_2_2": (2.0, 2.0)}


@pytest.fixture(scope="module")
def sweeps():
    """20 000 independent chains per case, shared by the tests below (one compilation)."""
    return {name: _sweep_chains(jax.random.split(key(3), N_SWEEP_CHAINS), jnp.asarray(W_FOUR),
                                a, b) for name, (a, b) in ALPHA_CASES.items()}


@pytest.mark.parametrize("case", list(ALPHA_CASES))
def test_sweep_matches_exact_partition_posterior(sweeps, case):
    """Four items in Q = 2 under a non-default NIW prior; after 8 sweeps from a random
    start, 20 000 independent chains' partitions match the exact posterior over the 15
    partitions, each scored with the collapsed NIW marginal (chi-square, p > 1e-3).

    Case 1 pins α at 2.5 (prior Ga(2.5e8, rate 1e8), sd 1.6e-4); case 2 lets α move under
    Ga(2, rate 2), whose effect on the partition is integrated out by quadrature, and also
    checks E[α | W].  Broken samplers fail it (chi-square on 14 dof, pinned / Gamma case;
    the 0.999 quantile is 36): Ψ_k with the items' outer products in the shrinkage term of
    eq. 24 (74 / 157); a Gaussian plug-in for the Student-t new-cluster weight (1247 / 883);
    the Student-t with ν0 instead of ν0 − Q + 1 degrees of freedom (96 / 140); the new-cluster
    weight without α (11747 / 704); item m not removed before it is reassigned (1331 / 434)."""
    a_alpha, b_alpha = ALPHA_CASES[case]
    out = sweeps[case]
    n_items = W_FOUR.shape[0]
    if a_alpha > 1e6:
        alpha = a_alpha / b_alpha
        log_crp = lambda K: K * np.log(alpha) + gammaln(alpha) - gammaln(alpha + n_items)
    else:
        log_crp = lambda K: antoniak_log_evidence(K, n_items, a_alpha, b_alpha)
    parts, p = partition_posterior(W_FOUR, (MU0, LAM0, NU0, PSI0), log_crp)
    _, counts = _partition_frequencies(np.asarray(out.z))
    expected = N_SWEEP_CHAINS * p
    chi2 = np.sum((counts - expected) ** 2 / expected)
    assert st.chi2.sf(chi2, len(parts) - 1) > P_MIN, (chi2, counts / N_SWEEP_CHAINS, p)
    if a_alpha < 1e6:
        # E[α | W] = Σ_K P(K | W) E[α | K], the inner mean by quadrature.
        def mean_given(K):
            log_z = antoniak_log_evidence(K, n_items, a_alpha, b_alpha)
            f = lambda al: al * np.exp(antoniak_log_density(al, K, n_items, a_alpha, b_alpha)
                                       + a_alpha * np.log(b_alpha) - gammaln(a_alpha) - log_z)
            return integrate.quad(f, 0, np.inf, limit=400)[0]

        expect = sum(p_i * mean_given(max(part) + 1) for part, p_i in zip(parts, p))
        alpha = np.asarray(out.alpha)
        assert abs(alpha.mean() - expect) < Z_TOL * alpha.std() / np.sqrt(N_SWEEP_CHAINS)


def test_sweep_contract_shapes_determinism_and_invariants(sweeps):
    a = sweeps["alpha_gamma_2_2"]
    C = N_SWEEP_CHAINS
    assert a.z.shape == (C, 4) and a.z.dtype == jnp.int32
    assert a.mu.shape == (C, 4, 2) and a.Sigma.shape == (C, 4, 2, 2) and a.alpha.shape == (C,)
    assert np.all((np.asarray(a.z) >= 0) & (np.asarray(a.z) < 4))
    assert np.all(np.isfinite(np.asarray(a.mu)))
    assert np.all(np.linalg.eigvalsh(np.asarray(a.Sigma)) > 0)
    assert np.all(np.asarray(a.alpha) > 0)
    K = np.asarray(jax.vmap(n_clusters)(a))
    np.testing.assert_array_equal(K, [len(set(row)) for row in np.asarray(a.z)])
    # Same key, same draws; the pinned case shares the keys but not the draws.
    b = _sweep_chains(jax.random.split(key(3), C), jnp.asarray(W_FOUR), *ALPHA_CASES[
        "alpha_gamma_2_2"])
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(np.asarray(a.mu), np.asarray(sweeps["alpha_pinned_2.5"].mu))


# ----------------------------------------------------------------------------- proposal

def _hand_state():
    mu = jnp.array([[0.0, 1.0], [5.0, -5.0], [9.0, 9.0]])
    Sigma = jnp.array([[[1.0, 0.5], [0.5, 2.0]], [[0.2, 0.0], [0.0, 0.1]],
                       [[1.0, 0.0], [0.0, 1.0]]])
    return DPMixtureState(z=jnp.array([1, 0, 1], jnp.int32), mu=mu, Sigma=Sigma,
                          alpha=jnp.asarray(1.0))


def test_log_prior_frequencies_matches_scipy():
    state = _hand_state()
    W = np.array([[4.5, -5.2], [0.3, 0.0], [6.0, -4.0]])
    got = np.asarray(log_prior_frequencies(jnp.asarray(W), state))
    want = [st.multivariate_normal(np.asarray(state.mu[k]), np.asarray(state.Sigma[k])).logpdf(w)
            for w, k in zip(W, np.asarray(state.z))]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert int(n_clusters(state)) == 2


def _chain_rule_log_marginal(W, mu0, lam0, nu0, Psi0):
    """log p(w_1..n) as Σ_i log p(w_i | w_<i), each factor SciPy's Student-t posterior
    predictive (Murphy 2007, eq. 258) — another route than eq. 266's closed form."""
    total, d = 0.0, W.shape[1]
    for i in range(W.shape[0]):
        m, lam, nu, Psi = niw_posterior_np(W[:i], mu0, lam0, nu0, Psi0)
        dof = nu - d + 1
        t = st.multivariate_t(loc=m, shape=Psi * (lam + 1) / (lam * dof), df=dof)
        total += t.logpdf(W[i])
    return total


@pytest.mark.parametrize("Q", [1, 2, 3])
def test_niw_log_marginal_is_the_product_of_predictives(Q):
    """Σ over slots of the collapsed log p(W_k): equal to the chain rule of SciPy's Student-t
    predictives per cluster, empty slots contributing 0; unchanged by W ↦ WO under μ0 = 0,
    Ψ0 = I; its gradient equal to central differences."""
    rng = np.random.default_rng(3)
    W = rng.normal(size=(7, Q)) * np.array([2.0, 0.5, 1.0])[:Q]
    z = np.array([0, 2, 0, 0, 2, 4, 0])                    # slots 1, 3, 5, 6 empty
    Psi0 = (np.array([[1.0, 0.3, 0.1], [0.3, 0.8, 0.2], [0.1, 0.2, 1.2]]))[:Q, :Q]
    prior = NIWPrior(mu0=jnp.array([0.3, -0.2, 0.1])[:Q], lambda0=jnp.asarray(0.5),
                     nu0=jnp.asarray(Q + 2.0), Psi0=jnp.asarray(Psi0))
    prior_np = (np.asarray(prior.mu0), 0.5, Q + 2.0, Psi0)
    want = sum(_chain_rule_log_marginal(W[z == k], *prior_np) for k in (0, 2, 4))
    got = float(niw_log_marginal(jnp.asarray(W), jnp.asarray(z), prior, 7))
    assert got == pytest.approx(want, rel=1e-10)
    iso = default_niw_prior(Q)
    O = np.linalg.qr(rng.normal(size=(Q, Q)))[0]
    assert float(niw_log_marginal(jnp.asarray(W @ O), jnp.asarray(z), iso, 7)) == pytest.approx(
        float(niw_log_marginal(jnp.asarray(W), jnp.asarray(z), iso, 7)), rel=1e-12)
    grad = np.asarray(jax.grad(niw_log_marginal)(jnp.asarray(W), jnp.asarray(z), prior, 7))
    h = 1e-6
    for m, q in [(0, 0), (1, Q - 1), (5, 0), (6, Q - 1)]:
        step = np.zeros_like(W)
        step[m, q] = h
        f = lambda V: float(niw_log_marginal(jnp.asarray(V), jnp.asarray(z), prior, 7))
        assert grad[m, q] == pytest.approx((f(W + step) - f(W - step)) / (2 * h), rel=1e-6,
                                           abs=1e-8)


def test_propose_frequencies_draws_from_the_assigned_component():
    state = _hand_state()
    n = 40_000
    draws = np.asarray(jax.jit(jax.vmap(lambda k: propose_frequencies(k, state)))(
        jax.random.split(key(6), n)))
    for m, k in enumerate(np.asarray(state.z)):
        mean, cov = np.asarray(state.mu[k]), np.asarray(state.Sigma[k])
        z = (draws[:, m].mean(0) - mean) / np.sqrt(np.diag(cov) / n)
        assert np.abs(z).max() < Z_TOL
        emp = np.cov(draws[:, m].T)
        se = np.sqrt((cov**2 + np.outer(np.diag(cov), np.diag(cov))) / n)   # Wishart var
        assert np.abs((emp - cov) / se).max() < Z_TOL
    np.testing.assert_array_equal(propose_frequencies(key(7), state),
                                  propose_frequencies(key(7), state))


# ----------------------------------------------------------------------------- init

def test_dp_init_eager():
    """Eager (unjitted) call; more initial clusters than items is clipped to M2."""
    W = jnp.asarray(np.random.default_rng(8).standard_normal((5, 3)))
    state = dp_init(key(9), W, default_niw_prior(3), n_clusters=50, alpha=0.5)
    assert state.z.shape == (5,) and state.mu.shape == (5, 3) and state.Sigma.shape == (5, 3, 3)
    assert np.all((np.asarray(state.z) >= 0) & (np.asarray(state.z) < 5))
    assert float(state.alpha) == 0.5
    assert np.all(np.linalg.eigvalsh(np.asarray(state.Sigma)) > 0)
    two = dp_init(key(9), W, default_niw_prior(3), n_clusters=2)
    assert set(np.asarray(two.z).tolist()) <= {0, 1}


def test_validation_names_the_fix():
    W = jnp.zeros((5, 2))
    with pytest.raises(ValueError, match="default_niw_prior\\(2\\)"):
        dp_init(key(0), W, default_niw_prior(3))
    bad = default_niw_prior(2)._replace(nu0=jnp.asarray(0.5))
    with pytest.raises(ValueError, match="nu0"):
        dp_init(key(0), W, bad)
    with pytest.raises(ValueError, match="2-D"):
        dp_init(key(0), jnp.zeros(5), default_niw_prior(1))

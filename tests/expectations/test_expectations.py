"""Psi-statistics (gplvm.expectations): closed forms against Monte Carlo with per-entry standard
errors and against an N × M × M × Q transcription of seed 001 eq. 40–41; quadrature rules against
closed forms and a Monte Carlo reference; weights, chunking, jit and finite-difference gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gplvm.expectations import (
    Analytic, GaussHermite, MonteCarlo, Unscented, gauss_hermite_nodes, has_analytic,
    psi_statistics, resolve_rule, unscented_nodes,
)
from gplvm.kernels import (
    RBF, Constant, Linear, Matern12, Matern32, Matern52, Product, RationalQuadratic, White,
)

ELL3 = jnp.array([0.8, 1.4, 0.6])


def problem(N=5, M=4, Q=3, seed=0, var_scale=(0.05, 0.5)):
    rng = np.random.default_rng(seed)
    return (jnp.asarray(rng.normal(size=(M, Q))), jnp.asarray(rng.normal(size=(N, Q))),
            jnp.asarray(rng.uniform(*var_scale, size=(N, Q))))


def mc_reference(kernel, Z, mu, S, n_draws, key, chunk=50_000):
    """Monte Carlo psi-statistics and their per-entry standard errors.

    Independent of the library's quadrature code: per point, draws x ~ N(μ_n, S_n) in chunks
    and accumulates the first and second moments of k(x, x), k(x, z_j) and k(x, z_j) k(x, z_j');
    the SE of a sum over n adds the per-point variances (the points are independent).
    """
    n_chunks, Q, M = n_draws // chunk, mu.shape[1], Z.shape[0]

    @jax.jit
    def moments(kernel, Z, mu, S, key):
        def one_point(args):
            m, s, kp = args

            def body(acc, kc):
                X = m + jnp.sqrt(s) * jax.random.normal(kc, (chunk, Q))
                K, d = kernel(X, Z), kernel.diag(X)
                K2 = K * K
                inc = (d.sum(), (d * d).sum(), K.sum(0), K2.sum(0), K.T @ K, K2.T @ K2)
                return jax.tree_util.tree_map(jnp.add, acc, inc), None

            acc0 = (0.0, 0.0, jnp.zeros(M), jnp.zeros(M), jnp.zeros((M, M)), jnp.zeros((M, M)))
            acc, _ = jax.lax.scan(body, acc0, jax.random.split(kp, n_chunks))
            return jax.tree_util.tree_map(lambda a: a / (n_chunks * chunk), acc)

        return jax.lax.map(one_point, (mu, S, jax.random.split(key, mu.shape[0])))

    T = n_chunks * chunk
    d1, d2, k1, k2, kk, kk2 = (np.asarray(a) for a in moments(kernel, Z, mu, S, key))
    est = (d1.sum(), k1, kk.sum(0))
    se = (np.sqrt(max(np.sum(d2 - d1**2), 0.0) / T), np.sqrt(np.maximum(k2 - k1**2, 0) / T),
          np.sqrt(np.maximum(kk2 - kk**2, 0).sum(0) / T))
    return est, se


def max_z(values, est, se):
    """Largest |value − MC| / SE over entries with SE > 0; entries with SE = 0 must agree."""
    zs = []
    for v, e, s in zip(values, est, se):
        v, e, s = np.asarray(v), np.asarray(e), np.asarray(s)
        exact = s == 0
        np.testing.assert_allclose(v[exact], e[exact], rtol=1e-12, atol=1e-12)
        zs.append(np.max(np.abs(v - e)[~exact] / s[~exact], initial=0.0))
    return max(zs)


# ---------------------------------------------------------------- closed forms vs Monte Carlo

CLOSED_FORM = {
    "rbf_ard": RBF(lengthscale=ELL3, variance=1.3),
    "linear_ard": Linear(variance=jnp.array([0.5, 2.0, 1.1])),
    "sum": (RBF(lengthscale=ELL3, variance=0.9) + Linear(variance=jnp.array([0.5, 2.0, 1.1]))
            + RBF(lengthscale=1.7, variance=0.6) + Constant(0.7) + White(0.3)),
}


@pytest.mark.parametrize("name", sorted(CLOSED_FORM))
def test_analytic_agrees_with_monte_carlo_within_5_standard_errors(name):
    kernel = CLOSED_FORM[name]
    Z, mu, S = problem()
    stats = psi_statistics(kernel, Z, mu, S, rule="analytic")
    est, se = mc_reference(kernel, Z, mu, S, 10**6, jax.random.PRNGKey(11))
    assert max_z(stats, est, se) < 5.0


def seed001_eq40_41(ell, var, Z, mu, S):
    """Seed 001 eqs. 40–41 transcribed term by term (N × M × M × Q), sum over n outside exp."""
    g = 1.0 / np.asarray(ell) ** 2
    zbar = 0.5 * (Z[:, None, :] + Z[None, :, :])                               # (M, M, Q)
    a = (g / (2 * g * S + 1))[:, None, None, :]                                # (N, 1, 1, Q)
    log_n = (2 * np.log(var) - 0.5 * np.log(2 * g * S + 1).sum(1)[:, None, None]
             - 0.25 * (g * (Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1)[None]
             - (a * (mu[:, None, None, :] - zbar[None]) ** 2).sum(-1))
    return np.exp(log_n).sum(0)


def test_rbf_psi2_matches_seed001_eq40_with_the_sum_outside_the_exponential():
    Z, mu, S = (np.asarray(a) for a in problem(N=7, M=5, seed=3))
    kernel = RBF(lengthscale=ELL3, variance=1.7)
    _, psi1, psi2 = psi_statistics(kernel, Z, mu, S, rule=Analytic())
    np.testing.assert_allclose(psi2, seed001_eq40_41(ELL3, 1.7, Z, mu, S), rtol=1e-12)
    g = 1.0 / np.asarray(ELL3) ** 2   # eq. 36 directly
    ref1 = 1.7 * np.exp(-0.5 * (g * (mu[:, None] - Z[None]) ** 2 / (g * S + 1)[:, None]).sum(-1)
                        ) / np.sqrt(np.prod(g * S + 1, axis=1))[:, None]
    np.testing.assert_allclose(psi1, ref1, rtol=1e-12)


def test_single_rbf_psi2_as_matrix_products_equals_the_difference_form_with_gradients():
    # rbf_psi2 (one kernel: triangle of pairs, matrix products) against rbf_rbf_psi2 (any two
    # RBF kernels: per-point differences), with group weights, chunking and reverse-mode gradients
    from gplvm.expectations.analytic import rbf_psi2, rbf_rbf_psi2
    Z, mu, S = problem(N=23, M=6, seed=11)
    Wg = jnp.asarray(np.random.default_rng(2).uniform(0, 1, size=(3, 23)))
    k = RBF(lengthscale=ELL3, variance=0.7)

    def total(f, Z, mu, S):
        return jnp.sum(jnp.sin(f(Z, mu, S)))

    fast = lambda Z, mu, S: rbf_psi2(k, Z, mu, S, Wg, chunk_size=5)
    slow = lambda Z, mu, S: rbf_rbf_psi2(k, k, Z, mu, S, Wg)
    np.testing.assert_allclose(fast(Z, mu, S), slow(Z, mu, S), rtol=1e-12)
    g_fast = jax.grad(lambda *a: total(fast, *a), argnums=(0, 1, 2))(Z, mu, S)
    g_slow = jax.grad(lambda *a: total(slow, *a), argnums=(0, 1, 2))(Z, mu, S)
    for a, b in zip(g_fast, g_slow):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


def test_rbf_is_translation_invariant_far_from_the_origin():
    # the psi2 exponent is written in differences μ − z, so a shift by 1e4 length-scales is exact
    Z, mu, S = problem(seed=4)
    kernel = RBF(lengthscale=ELL3, variance=1.1)
    near = psi_statistics(kernel, Z, mu, S)
    far = psi_statistics(kernel, Z + 1e4, mu + 1e4, S)
    np.testing.assert_allclose(far[2], near[2], rtol=1e-9, atol=1e-14)


# ---------------------------------------------------------------- quadrature rules

def test_gauss_hermite_weights_sum_to_one_and_match_gaussian_moments():
    for H, Q in [(1, 1), (3, 2), (7, 3)]:
        eps, w = gauss_hermite_nodes(H, Q)
        assert eps.shape == (H**Q, Q)
        np.testing.assert_allclose(w.sum(), 1.0, rtol=1e-14)
        np.testing.assert_allclose(w @ eps, np.zeros(Q), atol=1e-14)
        if H >= 2:
            np.testing.assert_allclose((eps * w[:, None]).T @ eps, np.eye(Q), atol=1e-13)
        if H >= 3:   # exact to degree 2H − 1: the fourth moment of a standard normal is 3
            np.testing.assert_allclose(w @ eps**4, np.full(Q, 3.0), rtol=1e-12)
    eps, w = unscented_nodes(4)
    np.testing.assert_allclose(w.sum(), 1.0)
    np.testing.assert_allclose((eps * w[:, None]).T @ eps, np.eye(4), atol=1e-14)


def test_gauss_hermite_grid_limit_names_the_fix():
    with pytest.raises(ValueError, match="Unscented"):
        gauss_hermite_nodes(20, 6)


@pytest.mark.parametrize("name", sorted(CLOSED_FORM))
def test_gauss_hermite_converges_to_the_closed_form(name):
    kernel = CLOSED_FORM[name]
    Z, mu, S = problem(N=4, M=3, Q=3, seed=5)
    exact = psi_statistics(kernel, Z, mu, S, rule=Analytic())
    gh = psi_statistics(kernel, Z, mu, S, rule=GaussHermite(n_points=24))
    for a, b in zip(exact, gh):
        np.testing.assert_allclose(b, a, rtol=1e-8, atol=1e-10)


def test_unscented_is_exact_for_the_linear_kernel():
    # psi1 is linear and psi0, psi2 quadratic in x: symmetric sigma points with the right
    # covariance integrate them exactly (seed 004 §B.1)
    kernel = Linear(variance=jnp.array([0.5, 2.0, 1.1])) + Constant(0.4)
    Z, mu, S = problem(N=9, M=6, seed=6)
    for a, b in zip(psi_statistics(kernel, Z, mu, S, rule=Analytic()),
                    psi_statistics(kernel, Z, mu, S, rule=Unscented())):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_unscented_matern32_acceptance_against_monte_carlo():
    """Issue 4 acceptance: μ, Z ~ N(0, I), S ~ U(0.01, 0.25)·ℓ², N = 40, M = 20, Q = 5.

    The reference uses 2·10⁵ draws per point (10⁶ takes ~35 s on 2 cores; see
    benchmarks/psi_statistics_vs_gpy.py for that).  Its own relative Frobenius standard error is
    asserted below 0.5 % (measured ≈ 0.1 % for psi1, 0.05 % for psi2), so the 5 % bound tests
    the unscented rule, not the reference.  Measured unscented errors: ≈ 1.2 % (psi1), 1.5 % (psi2).
    """
    rng = np.random.default_rng(0)
    N, M, Q = 40, 20, 5
    ell = np.ones(Q)
    mu, Z = jnp.asarray(rng.normal(size=(N, Q))), jnp.asarray(rng.normal(size=(M, Q)))
    S = jnp.asarray(rng.uniform(0.01, 0.25, size=(N, Q)) * ell**2)
    kernel = Matern32(lengthscale=jnp.asarray(ell))
    _, psi1, psi2 = psi_statistics(kernel, Z, mu, S)   # default: unscented for Matérn
    (_, ref1, ref2), (_, se1, se2) = mc_reference(kernel, Z, mu, S, 2 * 10**5,
                                                  jax.random.PRNGKey(0))
    assert np.linalg.norm(se1) / np.linalg.norm(ref1) < 0.005
    assert np.linalg.norm(se2) / np.linalg.norm(ref2) < 0.005
    assert np.linalg.norm(psi1 - ref1) / np.linalg.norm(ref1) < 0.05
    assert np.linalg.norm(psi2 - ref2) / np.linalg.norm(ref2) < 0.05


def test_monte_carlo_rule_is_reproducible_and_independent_of_chunking():
    Z, mu, S = problem(N=7)
    kernel = Matern52(lengthscale=ELL3)
    a = psi_statistics(kernel, Z, mu, S, MonteCarlo(n_samples=64, key=jax.random.PRNGKey(3)))
    b = psi_statistics(kernel, Z, mu, S,
                       MonteCarlo(n_samples=64, key=jax.random.PRNGKey(3), chunk_size=3))
    c = psi_statistics(kernel, Z, mu, S, MonteCarlo(n_samples=64, key=jax.random.PRNGKey(4)))
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-13)
    assert not np.allclose(a[1], c[1])


def test_quadrature_rules_agree_for_a_kernel_without_closed_form():
    Z, mu, S = problem(N=4, M=4, Q=2, seed=8)
    kernel = Matern52(lengthscale=jnp.array([1.1, 0.7]), variance=1.4)
    gh = psi_statistics(kernel, Z, mu, S, GaussHermite(n_points=40))
    (e0, e1, e2), (s0, s1, s2) = mc_reference(kernel, Z, mu, S, 2 * 10**5, jax.random.PRNGKey(9))
    assert max_z(gh[1:], (e1, e2), (s1, s2)) < 5.0


# ---------------------------------------------------------------- weights, sums, dispatch

def test_group_weights_equal_per_group_sums():
    Z, mu, S = problem(N=8, seed=10)
    rng = np.random.default_rng(10)
    W = jnp.asarray(rng.uniform(size=(3, 8)) * (rng.uniform(size=(3, 8)) > 0.3))
    for rule in [Analytic(), GaussHermite(n_points=3, chunk_size=3)]:
        kernel = CLOSED_FORM["sum"]
        psi0, psi1, psi2 = psi_statistics(kernel, Z, mu, S, rule=rule, weights=W)
        assert psi0.shape == (3,) and psi1.shape == (8, 4) and psi2.shape == (3, 4, 4)
        for g in range(3):
            p0, p1, p2 = psi_statistics(kernel, Z, mu, S, rule=rule, weights=W[g])
            np.testing.assert_allclose(psi0[g], p0, rtol=1e-12)
            np.testing.assert_allclose(psi2[g], p2, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(psi1, p1, rtol=1e-12)
        # 0/1 weights are the statistics of the selected rows
        rows = np.asarray(W[0]) > 0
        q0, _, q2 = psi_statistics(kernel, Z, mu[rows], S[rows], rule=rule)
        b0, _, b2 = psi_statistics(kernel, Z, mu, S, rule=rule, weights=jnp.asarray(rows * 1.0))
        np.testing.assert_allclose(b0, q0, rtol=1e-12)
        np.testing.assert_allclose(b2, q2, rtol=1e-12, atol=1e-14)


def test_white_noise_enters_psi0_only():
    Z, mu, S = problem()
    base = RBF(lengthscale=ELL3)
    with_white = base + White(0.25)
    for rule in [Analytic(), Unscented()]:
        a, b = psi_statistics(base, Z, mu, S, rule), psi_statistics(with_white, Z, mu, S, rule)
        np.testing.assert_allclose(b[0], a[0] + 0.25 * mu.shape[0], rtol=1e-12)
        np.testing.assert_allclose(b[1], a[1], rtol=1e-12)
        np.testing.assert_allclose(b[2], a[2], rtol=1e-12)


def test_dispatch_and_rule_names():
    assert has_analytic(CLOSED_FORM["sum"])
    assert not has_analytic(Matern32()) and not has_analytic(RBF() * RBF())
    assert not has_analytic(RBF() + Matern12())
    assert isinstance(resolve_rule("gauss_hermite"), GaussHermite)
    assert isinstance(resolve_rule("monte_carlo"), MonteCarlo)
    with pytest.raises(ValueError, match="unknown psi-statistic rule"):
        resolve_rule("laplace")
    Z, mu, S = problem()
    with pytest.raises(ValueError, match="Unscented"):
        psi_statistics(Matern32(), Z, mu, S, rule="analytic")
    # rule=None: closed form for RBF, unscented for Matérn
    np.testing.assert_array_equal(psi_statistics(Matern32(), Z, mu, S)[2],
                                  psi_statistics(Matern32(), Z, mu, S, "unscented")[2])
    with pytest.raises(ValueError, match="X_var"):
        psi_statistics(RBF(), Z, mu, S[:, :2])
    with pytest.raises(ValueError, match="weights"):
        psi_statistics(RBF(), Z, mu, S, weights=jnp.ones(3))


# ---------------------------------------------------------------- contract: shapes, jit, finite

KERNELS = {
    "rbf": RBF(lengthscale=ELL3), "matern12": Matern12(lengthscale=1.2),
    "matern32": Matern32(lengthscale=ELL3), "matern52": Matern52(),
    "rq": RationalQuadratic(alpha=2.0), "linear": Linear(variance=jnp.ones(3)),
    "white": White(0.1), "constant": Constant(0.5), "sum": CLOSED_FORM["sum"],
    "product": Product(RBF(lengthscale=ELL3), Linear()),
}
RULES = {"analytic": Analytic(chunk_size=2), "unscented": Unscented(),
         "gauss_hermite": GaussHermite(n_points=3),
         "monte_carlo": MonteCarlo(n_samples=16, key=jax.random.PRNGKey(0), chunk_size=2)}


def _check_contract(kernel, rule):
    Z, mu, S = problem()
    W = jnp.ones((2, 5))
    f = jax.jit(lambda k, Z, mu, S, rule, W: psi_statistics(k, Z, mu, S, rule, W))
    psi0, psi1, psi2 = f(kernel, Z, mu, S, rule, W)
    assert psi0.shape == (2,) and psi1.shape == (5, 4) and psi2.shape == (2, 4, 4)
    assert all(np.all(np.isfinite(a)) for a in (psi0, psi1, psi2))
    np.testing.assert_array_equal(psi2, np.swapaxes(psi2, 1, 2))
    # a second weighting equal to the first gives the same statistics
    np.testing.assert_allclose(psi2[1], psi2[0], rtol=1e-14)


@pytest.mark.parametrize("kernel_name", sorted(KERNELS))
def test_contract_every_kernel_with_the_default_rule(kernel_name):
    _check_contract(KERNELS[kernel_name], None)


@pytest.mark.parametrize("rule_name", sorted(RULES))
def test_contract_every_rule_as_a_jit_argument(rule_name):
    _check_contract(RBF(lengthscale=ELL3) + Linear() + White(0.1), RULES[rule_name])


# ---------------------------------------------------------------- gradients

def _objective(rule, R1, R2):
    def f(params, Z, mu, S):
        kernel = RBF(lengthscale=params["ell"], variance=params["var"])
        psi0, psi1, psi2 = psi_statistics(kernel, Z, mu, S, rule=rule)
        return psi0 + jnp.sum(R1 * psi1) + jnp.sum(R2 * psi2)
    return f


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_analytic_rbf_gradients_match_finite_differences(chunk_size):
    Z, mu, S = problem(N=5, M=4, seed=12)
    rng = np.random.default_rng(12)
    R1, R2 = jnp.asarray(rng.normal(size=(5, 4))), jnp.asarray(rng.normal(size=(4, 4)))
    f = _objective(Analytic(chunk_size=chunk_size), R1, R2)
    args = ({"ell": ELL3, "var": jnp.asarray(1.3)}, Z, mu, S)
    grads = jax.jit(jax.grad(f, argnums=(0, 1, 2, 3)))(*args)
    h = 1e-6
    for i, (arg, grad) in enumerate(zip(args, grads)):
        leaves, treedef = jax.tree_util.tree_flatten(arg)
        dirs = [jnp.asarray(rng.normal(size=np.shape(leaf))) for leaf in leaves]
        plus = jax.tree_util.tree_unflatten(treedef, [a + h * d for a, d in zip(leaves, dirs)])
        minus = jax.tree_util.tree_unflatten(treedef, [a - h * d for a, d in zip(leaves, dirs)])
        shifted = lambda a: f(*[a if j == i else x for j, x in enumerate(args)])  # noqa: E731
        fd = (shifted(plus) - shifted(minus)) / (2 * h)
        ad = sum(jnp.sum(g * d) for g, d in zip(jax.tree_util.tree_leaves(grad), dirs))
        np.testing.assert_allclose(ad, fd, rtol=1e-7, atol=1e-9)


def test_quadrature_gradients_are_finite_and_chunking_invariant():
    Z, mu, S = problem(N=7, Q=3, seed=13)
    R1, R2 = jnp.ones((7, 4)), jnp.eye(4)

    def f(rule):
        def obj(ell, Z, mu, S):
            psi0, psi1, psi2 = psi_statistics(Matern32(lengthscale=ell), Z, mu, S, rule)
            return psi0 + jnp.sum(R1 * psi1) + jnp.sum(R2 * psi2)
        return jax.grad(obj, argnums=(0, 1, 2, 3))(ELL3, Z, mu, S)

    whole, chunked = f(Unscented()), f(Unscented(chunk_size=3))
    for a, b in zip(whole, chunked):
        assert np.all(np.isfinite(a))
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)

"""The collapsed bound against a naive dense implementation derived independently.

Reference (Titsias & Lawrence 2010, with the log-determinant written as issue 4 derives it):
for each column d, using only the rows n where y_nd is observed,

    F_d = ½[ln|Kuu| − n ln 2π − (n − m) ln σ² − ln|σ²Kuu + Ψ2|] − ½ y_dᵀ W y_d − ½ β ψ0
          + ½ β tr(Kuu⁻¹ Ψ2),  W = β I − β² Ψ1 (βΨ2 + Kuu)⁻¹ Ψ1ᵀ,

which (since |βΨ2 + Kuu| = β^m |Ψ2 + σ²Kuu|) is the same as
    F_d = ½ n ln β + ½ ln|Kuu| − ½ n ln 2π − ½ ln|β Ψ2 + Kuu| − ½ y_dᵀ (β I − β² Ψ1 (βΨ2 + Kuu)⁻¹ Ψ1ᵀ) y_d
          − ½ β ψ0 + ½ β tr(Kuu⁻¹ Ψ2),
and the bound is Σ_d F_d − KL(q(X) ‖ p(X)).  Psi-statistics are computed here by explicit loops
over the closed forms of the RBF expectations (seed 001 eqs. 36 and 40 with the sum outside).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gplvm.kernels import RBF
from gplvm.objectives import collapsed


def naive_rbf_psi(var, ell, Z, mu, S):
    N, Q = mu.shape
    M = Z.shape[0]
    g = 1.0 / ell**2
    psi0 = np.full(N, var)
    psi1 = np.zeros((N, M))
    psi2 = np.zeros((N, M, M))
    for n in range(N):
        for j in range(M):
            psi1[n, j] = var * np.prod((g * S[n] + 1) ** -0.5 *
                                       np.exp(-g * (mu[n] - Z[j]) ** 2 / (2 * (g * S[n] + 1))))
            for k in range(M):
                zbar = 0.5 * (Z[j] + Z[k])
                psi2[n, j, k] = var**2 * np.prod(
                    (2 * g * S[n] + 1) ** -0.5 * np.exp(-g * (Z[j] - Z[k]) ** 2 / 4
                                                        - g * (mu[n] - zbar) ** 2 / (2 * g * S[n] + 1)))
    return psi0, psi1, psi2


def naive_bound(Y, mu, S, Z, var, ell, noise_var):
    beta = 1.0 / noise_var
    diff = Z[:, None, :] - Z[None, :, :]
    Kuu = var * np.exp(-0.5 * np.sum(diff**2 / ell**2, -1))
    psi0, psi1, psi2 = naive_rbf_psi(var, ell, Z, mu, S)
    total = 0.0
    for d in range(Y.shape[1]):
        rows = ~np.isnan(Y[:, d])
        n = rows.sum()
        y = Y[rows, d]
        P1, P2, p0 = psi1[rows], psi2[rows].sum(0), psi0[rows].sum()
        Amat = beta * P2 + Kuu
        W = beta * np.eye(n) - beta**2 * P1 @ np.linalg.solve(Amat, P1.T)
        total += (0.5 * n * np.log(beta) + 0.5 * np.linalg.slogdet(Kuu)[1]
                  - 0.5 * n * np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(Amat)[1]
                  - 0.5 * y @ W @ y - 0.5 * beta * p0
                  + 0.5 * beta * np.trace(np.linalg.solve(Kuu, P2)))
    kl = 0.5 * np.sum(mu**2 + S - np.log(S) - 1)
    return total - kl


def ours(Y, mu, S, Z, var, ell, noise_var):
    from gplvm.expectations import psi_statistics

    groups = collapsed.group_columns(Y)
    k = RBF(lengthscale=jnp.asarray(ell), variance=var)
    psi = psi_statistics(k, jnp.asarray(Z), jnp.asarray(mu), jnp.asarray(S),
                         rule="analytic", weights=groups.weights)
    value, _ = collapsed.data_term(psi, k(jnp.asarray(Z)),
                                   jnp.asarray(np.nan_to_num(Y)), groups, noise_var, 0.0)
    return float(value - collapsed.kl_standard_normal(jnp.asarray(mu), jnp.asarray(S)))


def _problem(missing: float, seed=0):
    rng = np.random.default_rng(seed)
    N, D, Q, M = 12, 5, 2, 4
    Y = rng.normal(size=(N, D))
    if missing:
        Y[rng.random((N, D)) < missing] = np.nan
        Y[np.isnan(Y).all(1), 0] = 0.3
    return (Y, rng.normal(size=(N, Q)), rng.uniform(0.05, 0.5, (N, Q)), rng.normal(size=(M, Q)),
            1.3, np.array([0.8, 1.5]), 0.2)


@pytest.mark.parametrize("missing", [0.0, 0.3])
def test_bound_equals_naive_dense_implementation(missing):
    args = _problem(missing)
    ref = naive_bound(*args)
    np.testing.assert_allclose(ours(*args), ref, rtol=1e-9)


def test_bound_gradients_match_finite_differences():
    from gplvm.expectations import psi_statistics

    Y, mu, S, Z, var, ell, noise = _problem(0.2, seed=1)
    groups = collapsed.group_columns(Y)
    Y0 = jnp.asarray(np.nan_to_num(Y))

    def f(p):
        k = RBF(lengthscale=p["ell"], variance=p["var"])
        psi = psi_statistics(k, p["Z"], p["mu"], p["S"], rule="analytic",
                             weights=groups.weights)
        v, _ = collapsed.data_term(psi, k(p["Z"]), Y0, groups, p["noise"], 0.0)
        return v - collapsed.kl_standard_normal(p["mu"], p["S"])

    p = {"ell": jnp.asarray(ell), "var": jnp.asarray(var), "Z": jnp.asarray(Z),
         "mu": jnp.asarray(mu), "S": jnp.asarray(S), "noise": jnp.asarray(noise)}
    g = jax.grad(f)(p)
    h = 1e-6
    for name in p:
        x = np.asarray(p[name], dtype=float)
        for idx in list(np.ndindex(x.shape))[:4]:
            e = np.zeros_like(x)
            e[idx] = h
            up = float(f({**p, name: jnp.asarray(x + e)}))
            dn = float(f({**p, name: jnp.asarray(x - e)}))
            np.testing.assert_allclose(np.asarray(g[name])[idx], (up - dn) / (2 * h),
                                       rtol=1e-5, atol=1e-7)


def _lapack_calls(fun, *args):
    """(name, number of batch dimensions) of every LAPACK custom call in ``jit(fun)``."""
    text = jax.jit(fun).lower(*args).as_text()
    return re.findall(r'custom_call @(lapack_\w+)\(.*?num_batch_dims = "(\d+)"', text)


def test_bound_with_missing_data_makes_only_unbatched_lapack_calls():
    """jaxlib's CPU LAPACK kernels split a *batched* call over the XLA intra-op thread pool and
    block the calling pool thread until the pieces are done; as many such calls in flight as the
    pool has threads (2 on a 2-core machine) deadlock the process.  With scattered missing
    entries nearly every column is its own group, so the bound factorises one group per call
    (``lax.map``), for the value, the gradient and the optimal q(U) alike."""
    from gplvm.expectations import psi_statistics

    Y, mu, S, Z, var, ell, noise = _problem(0.3, seed=2)
    groups = collapsed.group_columns(Y)
    assert groups.weights.shape[0] >= 3
    Y0 = jnp.asarray(np.nan_to_num(Y))

    def psi(p):
        k = RBF(lengthscale=p["ell"], variance=p["var"])
        return k, psi_statistics(k, p["Z"], p["mu"], p["S"], rule="analytic",
                                 weights=groups.weights)

    def f(p):
        k, stats = psi(p)
        v, _ = collapsed.data_term(stats, k(p["Z"]), Y0, groups, p["noise"], 1e-8)
        return v - collapsed.kl_standard_normal(p["mu"], p["S"])

    def q_u(p):
        k, stats = psi(p)
        _, parts = collapsed.data_term(stats, k(p["Z"]), Y0, groups, p["noise"], 1e-8)
        return collapsed.optimal_q_u(parts, groups, p["noise"])

    p = {"ell": jnp.asarray(ell), "var": jnp.asarray(var), "Z": jnp.asarray(Z),
         "mu": jnp.asarray(mu), "S": jnp.asarray(S), "noise": jnp.asarray(noise)}
    calls = _lapack_calls(jax.value_and_grad(f), p) + _lapack_calls(q_u, p)
    assert {"lapack_dpotrf_ffi", "lapack_dtrsm_ffi"} <= {name for name, _ in calls}
    assert all(n_batch == "0" for _, n_batch in calls), calls

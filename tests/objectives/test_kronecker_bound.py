"""The structured GPLVM's Kronecker bound, q(U) and predictions (seed 003 eqs. 9–34; issue 13).

Every reference here is dense and written in this file with NumPy: RBF Ψ-statistics in closed
form, Ψ2 summed row by row over all (image, pixel) pairs (so eq. 17's Kronecker form is not
assumed), the textbook collapsed bound (Titsias & Lawrence 2010) with ``slogdet``/``solve``, and
the exact posterior of the sparse model.  Small grids: 6 images of 4 × 5 pixels, Q = 2.
"""

from __future__ import annotations

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest

from gplvm.expectations import psi_statistics
from gplvm.kernels import RBF, Coincidence, Matern32
from gplvm.linalg import kron, kron_spectral_terms
from gplvm.objectives import collapsed, kronecker

N_XI, ROWS, COLS, Q, M_XI, D = 6, 4, 5, 2, 4, 2
RTOL = 1e-9


# ----------------------------------------------------------------- independent dense reference

def np_psi_rbf(ell, var, Z, mu, S):
    """Per-point RBF Ψ-statistics in closed form (Titsias & Lawrence 2010, eqs. 14–15)."""
    ell2 = np.asarray(ell, float) ** 2
    psi1 = var * np.prod((1 + S[:, None, :] / ell2) ** -0.5 * np.exp(
        -0.5 * (mu[:, None, :] - Z[None]) ** 2 / (ell2 + S[:, None, :])), axis=-1)
    zbar = 0.5 * (Z[:, None, :] + Z[None, :, :])
    dz2 = (Z[:, None, :] - Z[None, :, :]) ** 2
    psi2 = var**2 * np.prod(
        (1 + 2 * S[:, None, None, :] / ell2) ** -0.5
        * np.exp(-dz2[None] / (4 * ell2) - (mu[:, None, None, :] - zbar[None]) ** 2
                 / (ell2 + 2 * S[:, None, None, :])), axis=-1)
    return np.full(mu.shape[0], var), psi1, psi2                  # (n,), (n, m), (n, m, m)


def np_rbf(ell, var, A, B):
    return var * np.exp(-0.5 * (((A[:, None] - B[None]) / ell) ** 2).sum(-1))


def dense_bound(psi_xi, Kuu_xi, Kss_diag, Kus, Kuu_s, Y, noise_var):
    """Σ_channels of the collapsed bound over all n_ξ n_s rows, minus nothing (no KL)."""
    psi0_n, psi1_xi, psi2_n = psi_xi
    n_xi, n_s = psi1_xi.shape[0], Kus.shape[1]
    beta = 1.0 / noise_var
    rows = [(i, j) for i in range(n_xi) for j in range(n_s)]            # image-major
    psi0 = sum(psi0_n[i] * Kss_diag[j] for i, j in rows)
    psi1 = np.stack([np.kron(psi1_xi[i], Kus[:, j]) for i, j in rows])  # (n, m)
    psi2 = sum(np.kron(psi2_n[i], np.outer(Kus[:, j], Kus[:, j])) for i, j in rows)
    Kuu = np.kron(Kuu_xi, Kuu_s)
    y = Y.reshape(n_xi * n_s, -1)
    n, Dy = y.shape
    Kpsi = Kuu + beta * psi2
    P = psi1.T @ y
    return (-0.5 * n * Dy * np.log(2 * np.pi) + 0.5 * n * Dy * np.log(beta)
            - 0.5 * Dy * np.linalg.slogdet(Kpsi)[1] + 0.5 * Dy * np.linalg.slogdet(Kuu)[1]
            - 0.5 * beta * np.sum(y**2) + 0.5 * beta**2 * np.trace(P.T @ np.linalg.solve(Kpsi, P))
            - 0.5 * beta * Dy * psi0 + 0.5 * beta * Dy * np.trace(np.linalg.solve(Kuu, psi2)))


def np_kl(mu, S):
    return 0.5 * np.sum(mu**2 + S - np.log(S) - 1)


# ------------------------------------------------------------------------------ the set-up

@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(13)
    X_mean = rng.normal(size=(N_XI, Q))
    X_var = rng.uniform(0.05, 0.3, size=(N_XI, Q))
    Z = rng.normal(size=(M_XI, Q))
    Y = rng.normal(size=(N_XI, ROWS * COLS, D))
    rows, cols = np.arange(ROWS, dtype=float), np.arange(COLS, dtype=float)
    X_s = np.stack(np.meshgrid(rows, cols, indexing="ij"), -1).reshape(-1, 2)   # row-major
    Zr, Zc = np.array([0.5, 2.5]), np.array([0.3, 2.0, 3.7])
    Z_s = np.stack(np.meshgrid(Zr, Zc, indexing="ij"), -1).reshape(-1, 2)
    latent = RBF(lengthscale=jnp.array([1.3, 0.8]), variance=1.7)
    return dict(X_mean=X_mean, X_var=X_var, Z=Z, Y=Y, X_s=X_s, Z_s=Z_s, axes=(rows, cols),
                Z_axes=(Zr, Zc), latent=latent, noise_var=0.3)


def np_latent(s):
    k = s["latent"]
    ell, var = np.asarray(k.lengthscale), float(k.variance)
    return np_psi_rbf(ell, var, s["Z"], s["X_mean"], s["X_var"]), np_rbf(ell, var, s["Z"], s["Z"])


def kron_bound(s, spatial_kernels, coords, inducing):
    k = s["latent"]
    psi = psi_statistics(k, s["Z"], s["X_mean"], s["X_var"])
    spatial = kronecker.spatial_factors(spatial_kernels, coords, inducing)
    return float(kronecker.bound(psi, k(s["Z"]), s["X_mean"], s["X_var"], spatial,
                                 jnp.asarray(s["Y"]), s["noise_var"]))


# -------------------------------------------------------------------------------- the bound

@pytest.mark.parametrize("at_pixels", [True, False])
def test_bound_equals_dense_rbf_spatial(setup, at_pixels):
    """General path (one spatial factor over 2-D coordinates), both inducing options."""
    s = setup
    ell_s, var_s = np.array([1.5, 0.9]), 0.8
    Zs = s["X_s"] if at_pixels else s["Z_s"]
    Kus = np_rbf(ell_s, var_s, Zs, s["X_s"])
    psi_xi, Kuu_xi = np_latent(s)
    ref = dense_bound(psi_xi, Kuu_xi, np.full(ROWS * COLS, var_s), Kus,
                      np_rbf(ell_s, var_s, Zs, Zs), s["Y"], s["noise_var"])
    ref -= np_kl(s["X_mean"], s["X_var"])
    got = kron_bound(s, [RBF(lengthscale=jnp.asarray(ell_s), variance=var_s)], [s["X_s"]],
                     None if at_pixels else [s["Z_s"]])
    assert got == pytest.approx(ref, rel=RTOL)


@pytest.mark.parametrize("at_pixels", [True, False])
def test_product_grid_equals_dense_and_general_path(setup, at_pixels):
    """Product path with separable 1-D Matérn 3/2 factors against the dense bound (spatial
    matrices as NumPy Kronecker products of per-axis matrices), and with an ARD RBF (which
    factorises) against the general path over the 2-D coordinates."""
    s = setup
    rows, cols = s["axes"]
    k1, k2 = Matern32(lengthscale=1.4, variance=0.9), Matern32(lengthscale=2.1, variance=1.0)
    Z1, Z2 = (rows, cols) if at_pixels else s["Z_axes"]
    Kus = np.kron(np.asarray(k1(Z1, rows)), np.asarray(k2(Z2, cols)))
    Kuu_s = np.kron(np.asarray(k1(Z1)), np.asarray(k2(Z2)))
    psi_xi, Kuu_xi = np_latent(s)
    ref = dense_bound(psi_xi, Kuu_xi, np.full(ROWS * COLS, 0.9), Kus, Kuu_s, s["Y"],
                      s["noise_var"]) - np_kl(s["X_mean"], s["X_var"])
    inducing = None if at_pixels else list(s["Z_axes"])
    assert kron_bound(s, [k1, k2], [rows, cols], inducing) == pytest.approx(ref, rel=RTOL)

    ell = np.array([1.5, 0.9])
    general = kron_bound(s, [RBF(lengthscale=jnp.asarray(ell), variance=0.8)], [s["X_s"]],
                         None if at_pixels else [s["Z_s"]])
    product = kron_bound(s, [RBF(lengthscale=ell[0], variance=0.8), RBF(lengthscale=ell[1])],
                         [rows, cols], inducing)
    assert product == pytest.approx(general, rel=RTOL)


@pytest.mark.parametrize("var_c", [1.0, 2.5])
def test_coincidence_kernel_is_the_bayesian_gplvm(setup, var_c):
    """K_s = σ_c² I at the pixels: the Bayesian GPLVM bound (objectives.collapsed) on the
    flattened images (n_ξ × n_s·D) with the latent kernel's variance times σ_c²."""
    s = setup
    got = kron_bound(s, [Coincidence(variance=var_c)], [s["X_s"]], None)
    Y_flat = jnp.asarray(s["Y"].reshape(N_XI, -1))
    groups = collapsed.group_columns(Y_flat)
    k = RBF(lengthscale=s["latent"].lengthscale, variance=s["latent"].variance * var_c)
    psi = psi_statistics(k, s["Z"], s["X_mean"], s["X_var"], weights=groups.weights)
    value, _ = collapsed.data_term(psi, k(s["Z"]), Y_flat, groups, s["noise_var"])
    ref = float(value - collapsed.kl_standard_normal(s["X_mean"], s["X_var"]))
    assert got == pytest.approx(ref, rel=RTOL)


# ---------------------------------------------------------------------------------- gradients

def _params(s, spatial):
    return dict(ell=jnp.log(jnp.asarray(s["latent"].lengthscale)),
                var=jnp.log(jnp.asarray(s["latent"].variance)), mu=jnp.asarray(s["X_mean"]),
                S=jnp.log(jnp.asarray(s["X_var"])), Z=jnp.asarray(s["Z"]),
                noise=jnp.log(s["noise_var"]), spatial=spatial)


def _objective(s, make_kernels, coords, inducing):
    def f(u):
        latent = RBF(lengthscale=jnp.exp(u["ell"]), variance=jnp.exp(u["var"]))
        psi = psi_statistics(latent, u["Z"], u["mu"], jnp.exp(u["S"]))
        spatial = kronecker.spatial_factors(make_kernels(u["spatial"]), coords, inducing)
        return kronecker.bound(psi, latent(u["Z"]), u["mu"], jnp.exp(u["S"]), spatial,
                               jnp.asarray(s["Y"]), jnp.exp(u["noise"]))
    return f


CASES = {
    "rbf_at_pixels": (lambda u: [RBF(lengthscale=jnp.exp(u[:2]), variance=jnp.exp(u[2]))],
                      jnp.log(jnp.array([1.5, 0.9, 0.8])), "X_s", None),
    "rbf_inducing": (lambda u: [RBF(lengthscale=jnp.exp(u[:2]), variance=jnp.exp(u[2]))],
                     jnp.log(jnp.array([1.5, 0.9, 0.8])), "X_s", "Z_s"),
    "matern_axes_at_pixels": (lambda u: [Matern32(lengthscale=jnp.exp(u[0]),
                                                  variance=jnp.exp(u[2])),
                                         Matern32(lengthscale=jnp.exp(u[1]))],
                              jnp.log(jnp.array([1.4, 2.1, 0.9])), "axes", None),
    "coincidence": (lambda u: [Coincidence(variance=jnp.exp(u[0]))],
                    jnp.log(jnp.array([1.3])), "X_s", None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradient_matches_finite_differences(setup, case):
    """Directional derivatives of the bound along 3 random directions in every parameter:
    autodiff (custom VJP through the eigendecompositions) against central differences,
    h = 1e-5 (truncation O(h²) ~ 1e-10, round-off ~ 1e-16 |F| / h ~ 1e-10), relative 1e-6.
    The coincidence kernel has K_s = σ²I, every spatial eigenvalue equal: autodiff through
    ``eigh`` would return NaN there."""
    s = setup
    make, spatial0, coord_key, inducing_key = CASES[case]
    coords = list(s["axes"]) if coord_key == "axes" else [s[coord_key]]
    inducing = None if inducing_key is None else [s[inducing_key]]
    check_directional_derivatives(jax.jit(_objective(s, make, coords, inducing)),
                                  _params(s, spatial0), np.random.default_rng(0))


def check_directional_derivatives(f, u0, rng, n_directions=3, h=1e-5):
    """Autodiff of f at u0 along random unit directions against central differences (relative
    1e-6); the gradient must be finite."""
    flat_u, unravel = jax.flatten_util.ravel_pytree(u0)
    flat_g = jax.flatten_util.ravel_pytree(jax.grad(f)(u0))[0]
    assert np.all(np.isfinite(flat_g))
    for _ in range(n_directions):
        v = rng.normal(size=flat_u.shape)
        v /= np.linalg.norm(v)
        fd = (f(unravel(flat_u + h * v)) - f(unravel(flat_u - h * v))) / (2 * h)
        assert float(flat_g @ v) == pytest.approx(float(fd), rel=1e-6, abs=1e-7)


def test_spectral_terms_gradient_at_repeated_eigenvalues():
    """log|I + βK| and the quadratic term with S_2 = 2·I (all eigenvalues equal): the custom
    VJP against autodiff of the dense formula (which has no eigendecomposition)."""
    rng = np.random.default_rng(1)
    A = rng.normal(size=(3, 3))
    S = [jnp.asarray(A @ A.T / 3), 2.0 * jnp.eye(4)]
    R = jnp.asarray(rng.normal(size=(12, 2)))
    for weighted in [(False, False), (False, True)]:
        def dense(S, R, beta):
            W = kron([s if e else jnp.eye(s.shape[0]) for s, e in zip(S, weighted)])
            M = jnp.eye(12) + beta * kron(S)
            return jnp.linalg.slogdet(M)[1] + 0.7 * jnp.trace(R.T @ W @ jnp.linalg.solve(M, R))

        def fast(S, R, beta):
            logdet, quad = kron_spectral_terms(S, R, beta, weighted)
            return logdet + 0.7 * quad

        assert float(fast(S, R, 1.7)) == pytest.approx(float(dense(S, R, 1.7)), rel=1e-12)
        g_fast = jax.grad(fast, argnums=(0, 1, 2))(S, R, 1.7)
        g_dense = jax.grad(dense, argnums=(0, 1, 2))(S, R, 1.7)
        for a, b in zip(g_fast[0], g_dense[0]):               # symmetric part: S is symmetric
            np.testing.assert_allclose(a, 0.5 * (b + b.T), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(g_fast[1], g_dense[1], rtol=1e-10, atol=1e-12)
        assert float(g_fast[2]) == pytest.approx(float(g_dense[2]), rel=1e-10)


# ------------------------------------------------------------------------ q(U) and predictions

def _dense_posterior(s, Kus, Kuu_s):
    psi_xi, Kuu_xi = np_latent(s)
    psi0_n, psi1_xi, psi2_n = psi_xi
    beta = 1.0 / s["noise_var"]
    n_s = Kus.shape[1]
    rows = [(i, j) for i in range(N_XI) for j in range(n_s)]
    psi1 = np.stack([np.kron(psi1_xi[i], Kus[:, j]) for i, j in rows])
    psi2 = sum(np.kron(psi2_n[i], np.outer(Kus[:, j], Kus[:, j])) for i, j in rows)
    Kuu = np.kron(Kuu_xi, Kuu_s)
    Kpsi = Kuu / beta + psi2                                               # eq. 12
    a = np.linalg.solve(Kpsi, psi1.T @ s["Y"].reshape(N_XI * n_s, D))       # K_ψ⁻¹Ψ1ᵀY
    middle = np.linalg.inv(Kuu) - np.linalg.inv(Kpsi) / beta               # eq. 31
    return Kuu, Kpsi, a, middle, beta


def _factors(s, at_pixels):
    k = s["latent"]
    psi0, psi1, psi2 = psi_statistics(k, s["Z"], s["X_mean"], s["X_var"])
    spatial = RBF(lengthscale=jnp.array([1.5, 0.9]), variance=0.8)
    Zs = s["X_s"] if at_pixels else s["Z_s"]
    factors = [kronecker.latent_factor(psi0, psi1, psi2, k(s["Z"])),
               kronecker.spatial_factor(spatial, s["X_s"], None if at_pixels else Zs)]
    return factors, spatial, Zs


@pytest.mark.parametrize("at_pixels", [True, False])
def test_optimal_q_u_equals_dense(setup, at_pixels):
    """Ū = K_uu K_ψ⁻¹Ψ1ᵀY and Σ_u = β⁻¹K_uu K_ψ⁻¹K_uu (seed 003 eq. 11), densely."""
    s = setup
    factors, spatial, Zs = _factors(s, at_pixels)
    Kuu, Kpsi, a, _, beta = _dense_posterior(s, np.asarray(spatial(Zs, s["X_s"])),
                                             np.asarray(spatial(Zs)))
    post = kronecker.posterior(factors, jnp.asarray(s["Y"]), s["noise_var"])
    U_mean, (maps, diag) = kronecker.optimal_q_u(post)
    np.testing.assert_allclose(U_mean, Kuu @ a, rtol=1e-8, atol=1e-10)
    Sigma = np.asarray(kron(maps)) @ np.diag(diag) @ np.asarray(kron(maps)).T
    np.testing.assert_allclose(Sigma, Kuu @ np.linalg.solve(Kpsi, Kuu) / beta, rtol=1e-8,
                               atol=1e-10)


def _new_inputs(s):
    rng = np.random.default_rng(7)
    X_new = rng.normal(size=(3, Q))
    fine_r, fine_c = np.linspace(-0.5, 3.5, 5), np.linspace(-0.25, 4.25, 7)   # off the grid
    X_s_new = np.stack(np.meshgrid(fine_r, fine_c, indexing="ij"), -1).reshape(-1, 2)
    return X_new, X_s_new


@pytest.mark.parametrize("at_pixels", [True, False])
def test_predict_points_equals_dense(setup, at_pixels):
    """Mean K*u K_ψ⁻¹Ψ1ᵀY and variance diag K** − diag K*u(K_uu⁻¹ − β⁻¹K_ψ⁻¹)K_u* (eqs. 30–31)
    at 3 new latent points × 35 new pixel locations (a finer, shifted grid)."""
    s = setup
    factors, spatial, Zs = _factors(s, at_pixels)
    _, _, a, middle, _ = _dense_posterior(s, np.asarray(spatial(Zs, s["X_s"])),
                                          np.asarray(spatial(Zs)))
    X_new, X_s_new = _new_inputs(s)
    k = s["latent"]
    K_star_u = np.kron(np.asarray(k(X_new, s["Z"])), np.asarray(spatial(X_s_new, Zs)))
    K_star_diag = np.kron(np.asarray(k.diag(X_new)), np.asarray(spatial.diag(X_s_new)))
    post = kronecker.posterior(factors, jnp.asarray(s["Y"]), s["noise_var"])
    mean, var = kronecker.predict_points(post, [k(X_new, s["Z"]), spatial(X_s_new, Zs)],
                                         [k.diag(X_new), spatial.diag(X_s_new)])
    np.testing.assert_allclose(mean, K_star_u @ a, rtol=1e-8, atol=1e-10)
    ref_var = K_star_diag - np.einsum("ij,jk,ik->i", K_star_u, middle, K_star_u)
    np.testing.assert_allclose(var, ref_var, rtol=1e-8, atol=1e-10)


def test_predict_uncertain_equals_quadrature(setup):
    """Under q(x*) = N(μ*, diag S*) the mean (eq. 34) and the exact marginal variance equal the
    law of total variance over the dense deterministic predictive (eqs. 30–31), integrated by a
    40 × 40 Gauss–Hermite rule (the integrands are smooth: products of Gaussians in x*)."""
    s = setup
    factors, spatial, Zs = _factors(s, at_pixels=False)
    _, _, a, middle, _ = _dense_posterior(s, np.asarray(spatial(Zs, s["X_s"])),
                                          np.asarray(spatial(Zs)))
    X_new, X_s_new = _new_inputs(s)
    S_new = np.array([[0.2, 0.1], [0.05, 0.4], [0.3, 0.3]])
    k = s["latent"]
    psi0, psi1, psi2 = psi_statistics(k, s["Z"], X_new, S_new, weights=jnp.eye(3))
    post = kronecker.posterior(factors, jnp.asarray(s["Y"]), s["noise_var"])
    mean, var = kronecker.predict_uncertain(post, psi0, psi1, psi2, [spatial(X_s_new, Zs)],
                                            [spatial.diag(X_s_new)])
    t, w = np.polynomial.hermite_e.hermegauss(40)
    w = w / w.sum()
    K_s_new = np.asarray(spatial(X_s_new, Zs))
    for n in range(3):
        nodes = np.stack(np.meshgrid(t, t, indexing="ij"), -1).reshape(-1, 2)
        x = X_new[n] + nodes * np.sqrt(S_new[n])
        weights = np.outer(w, w).ravel()
        Kx = np.asarray(k(x, s["Z"]))                                     # (nodes, m_ξ)
        Ks = np.einsum("ga,sb->gsab", Kx, K_s_new).reshape(len(x), len(X_s_new), -1)
        mu = np.einsum("gsm,md->gsd", Ks, a)
        v = float(k.variance) * np.asarray(spatial.diag(X_s_new))[None] - np.einsum(
            "gsm,mk,gsk->gs", Ks, middle, Ks)
        m1 = np.einsum("g,gsd->sd", weights, mu)
        m2 = np.einsum("g,gsd->sd", weights, mu**2 + v[..., None])
        np.testing.assert_allclose(mean[n], m1, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(var[n], m2 - m1**2, rtol=1e-8, atol=1e-10)


def test_check_complete_names_the_fix():
    Y = np.zeros((2, 3))
    Y[1, 2] = np.nan
    with pytest.raises(ValueError, match="1 missing"):
        kronecker.check_complete(Y)



def _dense_new_image_term(s, Kus, Kuu_s, Kss_diag, X_new, S_new, Y_new):
    """Eq. 37 corrected, densely: −(n*D/2)log(2π/β) − (β/2)‖y*‖² + β tr(Y*ᵀΨ1*K_uu⁻¹Ū)
    − (β/2)tr(K_uu⁻¹Ψ2*K_uu⁻¹(ŪŪᵀ + DΣ_u)) − (βD/2)(ψ0* − tr K_uu⁻¹Ψ2*), one image at a time
    over its observed pixels."""
    Kuu, Kpsi, a, _, beta = _dense_posterior(s, Kus, Kuu_s)
    U = Kuu @ a
    Sigma_u = Kuu @ np.linalg.solve(Kpsi, Kuu) / beta
    k = s["latent"]
    psi0_n, psi1_n, psi2_n = np_psi_rbf(np.asarray(k.lengthscale), float(k.variance), s["Z"],
                                        X_new, S_new)
    out = []
    for i in range(len(X_new)):
        obs = ~np.isnan(Y_new[i, :, 0])
        y, Ko = Y_new[i][obs], Kus[:, obs]
        psi0 = psi0_n[i] * Kss_diag[obs].sum()
        psi1 = np.kron(psi1_n[i][None], Ko.T)                             # (n_obs, m)
        psi2 = np.kron(psi2_n[i], Ko @ Ko.T)
        Kip2 = np.linalg.solve(Kuu, psi2)
        out.append(-0.5 * y.shape[0] * D * np.log(2 * np.pi / beta) - 0.5 * beta * np.sum(y**2)
                   + beta * np.trace(y.T @ psi1 @ np.linalg.solve(Kuu, U))
                   - 0.5 * beta * np.trace(Kip2 @ np.linalg.solve(Kuu, U @ U.T + D * Sigma_u))
                   - 0.5 * beta * D * (psi0 - np.trace(Kip2)))
    return np.array(out)


def _new_image_terms(s, at_pixels, X_new, S_new, Y_new):
    factors, spatial, Zs = _factors(s, at_pixels)
    post = kronecker.posterior(factors, jnp.asarray(s["Y"]), s["noise_var"])
    k = s["latent"]
    psi = psi_statistics(k, s["Z"], X_new, S_new, weights=jnp.eye(len(X_new)))
    got = kronecker.new_image_term(post, *psi, [spatial(s["X_s"], Zs)], [spatial.diag(s["X_s"])],
                                   jnp.asarray(Y_new), s["noise_var"])
    ref = _dense_new_image_term(s, np.asarray(spatial(Zs, s["X_s"])), np.asarray(spatial(Zs)),
                                np.asarray(spatial.diag(s["X_s"])), X_new, S_new, Y_new)
    return np.asarray(got), ref, post


@pytest.mark.parametrize("at_pixels", [True, False])
def test_new_image_term_equals_dense_eq37(setup, at_pixels):
    """ℒ* of 3 new images with half their pixels missing (NaN) against eq. 37 as corrected in
    issue 13, computed densely over each image's observed pixels."""
    s = setup
    rng = np.random.default_rng(3)
    X_new, S_new = rng.normal(size=(3, Q)), rng.uniform(0.05, 0.5, size=(3, Q))
    Y_new = rng.normal(size=(3, ROWS * COLS, D))
    for i in range(3):
        Y_new[i, rng.permutation(ROWS * COLS)[:10]] = np.nan
    got, ref, _ = _new_image_terms(s, at_pixels, X_new, S_new, Y_new)
    np.testing.assert_allclose(got, ref, rtol=1e-9)


@pytest.mark.parametrize("at_pixels", [True, False])
def test_uncollapsed_bound_at_optimal_q_u_is_the_collapsed_bound(setup, at_pixels):
    """Eq. 9 at the optimal q(U) of eq. 11 equals eq. 13: Σ_i ℒ*(training image i, q(x_i))
    − D·KL(q(u_d) ‖ p(u_d)) (KL densely) is the Kronecker data term."""
    s = setup
    got, _, post = _new_image_terms(s, at_pixels, s["X_mean"], s["X_var"], s["Y"])
    factors, _, _ = _factors(s, at_pixels)
    U_mean, (maps, diag) = kronecker.optimal_q_u(post)
    Kuu = np.asarray(kron([f.L @ f.L.T if f.L is not None else f.S for f in factors]))
    Sigma = np.asarray(kron(maps)) @ np.diag(diag) @ np.asarray(kron(maps)).T
    U = np.asarray(U_mean)
    m = Kuu.shape[0]
    kl = 0.5 * (D * (np.trace(np.linalg.solve(Kuu, Sigma)) - m + np.linalg.slogdet(Kuu)[1]
                     - np.linalg.slogdet(Sigma)[1]) + np.trace(U.T @ np.linalg.solve(Kuu, U)))
    collapsed_value = float(kronecker.data_term(factors, jnp.asarray(s["Y"]), s["noise_var"]))
    assert float(got.sum() - kl) == pytest.approx(collapsed_value, rel=1e-9)


def test_spectral_terms_treat_round_off_negative_eigenvalues_of_psd_factors_as_zero():
    """PSD factors computed in floating point can carry eigenvalues of order -eps·‖S‖; a
    product of one with a large eigenvalue of the other factor, times a large β, would put
    1 + βv below zero (log of a negative number).  The terms must equal those of the PSD matrix
    the factor approximates (the negative eigenvalue set to 0), value and gradient finite."""
    rng = np.random.default_rng(3)
    Q1, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    S1 = Q1 @ np.diag([-1e-9, 0.5, 1.0]) @ Q1.T
    S1_psd = Q1 @ np.diag([0.0, 0.5, 1.0]) @ Q1.T
    S2 = np.diag([2.0, 1.0])
    R = rng.normal(size=(6, 2))
    beta = 1e9                      # β·(−1e-9)·2 = −2: 1 + βv would be −1
    for weighted in [(False, False), (True, False)]:
        got = kron_spectral_terms([jnp.asarray(S1), jnp.asarray(S2)], jnp.asarray(R), beta,
                                  weighted)
        want = kron_spectral_terms([jnp.asarray(S1_psd), jnp.asarray(S2)], jnp.asarray(R), beta,
                                   weighted)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
        grad = jax.grad(lambda S: sum(kron_spectral_terms([S, jnp.asarray(S2)],
                                                          jnp.asarray(R), beta, weighted)))(
            jnp.asarray(S1))
        assert np.all(np.isfinite(np.asarray(grad)))


# ------------------------------------------------------------ missing pixels in training images

def _dense_pieces(s, at_pixels):
    """Dense Ψ1 (n, m), K_ψ = K_uu + βΨ2 and the bound over all rows (RBF spatial kernel)."""
    ell_s, var_s = np.array([1.5, 0.9]), 0.8
    Zs = s["X_s"] if at_pixels else s["Z_s"]
    Kus = np_rbf(ell_s, var_s, Zs, s["X_s"])
    (psi0_n, psi1_xi, psi2_n), Kuu_xi = np_latent(s)
    n_s = Kus.shape[1]
    psi1 = np.stack([np.kron(psi1_xi[i], Kus[:, j]) for i in range(N_XI) for j in range(n_s)])
    psi2 = sum(np.kron(psi2_n[i], np.outer(Kus[:, j], Kus[:, j]))
               for i in range(N_XI) for j in range(n_s))
    beta = 1.0 / s["noise_var"]
    Kpsi = np.kron(Kuu_xi, np_rbf(ell_s, var_s, Zs, Zs)) + beta * psi2
    full = lambda Y: dense_bound((psi0_n, psi1_xi, psi2_n), Kuu_xi, np.full(n_s, var_s),  # noqa
                                 Kus, np_rbf(ell_s, var_s, Zs, Zs), Y, s["noise_var"])
    kernel = RBF(lengthscale=jnp.asarray(ell_s), variance=var_s)
    return psi1, Kpsi, beta, full, kernel, Zs


def _route_value(s, kernel, at_pixels, missing_idx, fill):
    """The KroneckerRoute's data term with missing entries (flat indices into Y0)."""
    from gplvm.models.gplvm_family.bound import Problem
    from gplvm.models.gplvm_family.kron_route import KroneckerRoute
    k = s["latent"]
    psi0, psi1, psi2 = psi_statistics(k, s["Z"], s["X_mean"], s["X_var"])
    route = KroneckerRoute((kernel,), (jnp.asarray(s["X_s"]),),
                           (None if at_pixels else jnp.asarray(s["Z_s"]),), 0.0, D,
                           jnp.asarray(missing_idx))
    Y0 = np.where(np.isin(np.arange(s["Y"].size), missing_idx).reshape(N_XI, -1), np.nan,
                  s["Y"].reshape(N_XI, -1))
    problem = Problem(jnp.asarray(np.nan_to_num(Y0)), None, None, k, None, route, 0.0)
    value, _ = route.data_term((psi0[None], psi1, psi2[None]), k(s["Z"]), s["noise_var"],
                               problem, (kernel.unconstrained(), jnp.asarray(fill)))
    return float(value)


@pytest.mark.parametrize("at_pixels", [True, False])
def test_missing_pixels_term_is_the_expected_dense_bound(setup, at_pixels):
    """With q(y_m) = N(m, s): E_q[F] + H[q] = F(y_o, m) + ½Σ s_i F''_ii + ½Σ log(2πe s_i) exactly
    (F is quadratic in y), maximised at s_i = −1/F''_ii, where F''_ii = −β + β²(Ψ1K_ψ⁻¹Ψ1ᵀ)_ii
    is the dense bound's curvature; so the route's value must be F_dense(y_o, m) +
    Σ ½log(2π s_i) (per channel; a quarter of the entries missing, at random means m)."""
    s = setup
    psi1, Kpsi, beta, full, kernel, _ = _dense_pieces(s, at_pixels)
    rng = np.random.default_rng(5)
    idx = np.sort(rng.choice(s["Y"].size, s["Y"].size // 4, replace=False))
    fill = rng.normal(size=idx.size)
    Y = s["Y"].reshape(-1).copy()
    Y[idx] = fill
    curvature = -beta + beta**2 * np.einsum("nm,nm->n", psi1, np.linalg.solve(Kpsi, psi1.T).T)
    rows = idx // D                                  # (image, pixel) row of each entry
    ref = full(Y.reshape(s["Y"].shape)) + np.sum(0.5 * np.log(2 * np.pi / -curvature[rows]))
    got = _route_value(s, kernel, at_pixels, idx, fill)
    assert got == pytest.approx(ref, rel=RTOL)


def test_missing_pixels_bound_is_below_the_observed_rows_bound(setup):
    """log p(y_o) ≥ the collapsed bound of the observed rows alone ≥ the mean-field bound, for
    every completion m; the mean-field bound is largest at the conditional means of the dense
    bound's Gaussian (its maximiser in m, solved here densely), which beat random means."""
    s = setup
    psi1, Kpsi, beta, _, kernel, _ = _dense_pieces(s, True)
    rng = np.random.default_rng(6)
    idx = np.sort(rng.choice(s["Y"].size, s["Y"].size // 4, replace=False))
    y = s["Y"].reshape(-1, D)
    missing = np.zeros(y.shape, bool)
    missing.reshape(-1)[idx] = True
    k = s["latent"]
    (psi0_n, psi1_xi, psi2_n), Kuu_xi = np_latent(s)
    Kus = np.asarray(kernel(s["X_s"]))
    Kuu = np.kron(Kuu_xi, Kus)
    obs_bound, cond = 0.0, np.zeros(y.shape)
    H = psi1 @ np.linalg.solve(Kpsi, psi1.T)
    for c in range(D):                               # the observed rows of each channel
        o = ~missing[:, c]
        p1 = psi1[o]
        p2 = sum(np.kron(psi2_n[i], np.outer(Kus[:, j], Kus[:, j]))
                 for r, (i, j) in enumerate((i, j) for i in range(N_XI)
                                            for j in range(Kus.shape[0])) if o[r])
        Kp = Kuu + beta * p2
        yo = y[o, c]
        obs_bound += (-0.5 * o.sum() * np.log(2 * np.pi / beta)
                      - 0.5 * np.linalg.slogdet(Kp)[1] + 0.5 * np.linalg.slogdet(Kuu)[1]
                      - 0.5 * beta * yo @ yo
                      + 0.5 * beta**2 * (p1.T @ yo) @ np.linalg.solve(Kp, p1.T @ yo)
                      - 0.5 * beta * o.sum() * 0.8 * float(k.variance)
                      + 0.5 * beta * np.trace(np.linalg.solve(Kuu, p2)))
        # the maximiser of (−β/2)yᵀy + (β²/2)yᵀHy over the missing coordinates
        m = ~o
        A = beta * np.eye(m.sum()) - beta**2 * H[np.ix_(m, m)]
        cond[m, c] = np.linalg.solve(A, beta**2 * H[np.ix_(m, o)] @ yo)
    best = _route_value(s, kernel, True, idx, cond.reshape(-1)[idx])
    random = _route_value(s, kernel, True, idx, rng.normal(size=idx.size))
    assert best > random
    assert best < obs_bound


def test_missing_pixels_term_gradient_matches_finite_differences(setup):
    """Autodiff of the missing-pixel term (spatial ``eigh`` and one Cholesky per spatial
    eigenvalue) against central differences in the latent kernel, the spatial length-scales,
    the noise and the fill means; h = 1e-5, relative 1e-6."""
    from gplvm.objectives.kronecker_missing import missing_term
    s = setup
    rng = np.random.default_rng(7)
    counts = jnp.asarray(rng.integers(0, D + 1, size=(N_XI, ROWS * COLS)).astype(float))

    def f(u):
        latent = RBF(lengthscale=jnp.exp(u["ell"]), variance=1.3)
        psi0, psi1, psi2 = psi_statistics(latent, s["Z"], s["X_mean"], s["X_var"])
        factors = [kronecker.latent_factor(psi0, psi1, psi2, latent(s["Z"]))]
        factors += kronecker.spatial_factors(
            [Matern32(lengthscale=jnp.exp(u["sp"][0])), Matern32(lengthscale=jnp.exp(u["sp"][1]))],
            list(s["axes"]))
        return missing_term(factors, counts, jnp.exp(u["noise"]))

    u0 = dict(ell=jnp.log(jnp.array([1.3, 0.8])), sp=jnp.log(jnp.array([1.4, 2.1])),
              noise=jnp.log(0.3))
    check_directional_derivatives(jax.jit(f), u0, rng)


def test_missing_pixels_diagonal_vjp_equals_autodiff_where_eigenvalues_are_distinct():
    """The hand-written VJP of the missing-pixel diagonal H (cotangents from the forward
    pass's resolvents, Daleckii–Krein for the spatial factors) against plain autodiff of the
    same formula through ``eigh`` and one Cholesky per eigenvalue, at random PSD factors with
    distinct eigenvalues (where autodiff is exact), one axis at the pixels and one with
    projections P (an inducing grid): every argument, relative 1e-9."""
    from gplvm.linalg import psd_eigh
    from gplvm.objectives import kronecker_missing as km

    rng = np.random.default_rng(3)

    def psd(n):
        A = rng.normal(size=(n, n))
        return jnp.asarray(A @ A.T / n + 0.1 * np.eye(n))

    S_list = [psd(4), psd(3)]
    P_list = [None, jnp.asarray(rng.normal(size=(3, 5)))]
    C, P_xi, beta = psd(5), jnp.asarray(rng.normal(size=(5, 6))), 1.7
    weighted = (True, False)
    G = jnp.asarray(rng.normal(size=(6, 4 * 5)))

    def plain(S_list, P_list, C, P_xi, beta):
        lam, Q = psd_eigh(S_list)
        h = km._resolvents(lam, C, P_xi, beta, keep=False)
        return jnp.sum(G * km._combine(weighted, lam, Q, P_list, h))

    def custom(S_list, P_list, C, P_xi, beta):
        return jnp.sum(G * km._diagonal(weighted, S_list, P_list, C, P_xi, beta))

    args = (S_list, P_list, C, P_xi, beta)
    np.testing.assert_allclose(custom(*args), plain(*args), rtol=1e-14)
    want = jax.grad(plain, argnums=(0, 1, 2, 3, 4))(*args)
    got = jax.grad(custom, argnums=(0, 1, 2, 3, 4))(*args)
    for w, g in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got)):
        w = np.asarray(w)
        if w.ndim == 2 and w.shape[0] == w.shape[1]:
            w = 0.5 * (w + w.T)        # symmetric matrices: only the symmetric part acts
            g = 0.5 * (np.asarray(g) + np.asarray(g).T)
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9 * np.abs(w).max())

"""Where the RFLVM's NUTS chains start (issue 30, item 2): the block's mode by L-BFGS and the
exact diagonal of its curvature there (:mod:`gplvm.models.rflvm.map_start`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplvm
from _rflvm_tiny import tiny_rflvm
from gplvm.models.rflvm.joint import _feature_means, from_position, log_density, to_position
from gplvm.models.rflvm.map_start import (GRADIENT_TOLERANCE, _floors, curvature_diagonal,
                                           find_mode, gaussian_row_density)
from gplvm.models.rflvm.sweep import prior_W


def _problem(kind: str, seed: int = 0):
    """A tiny RFLVM (N = 7, Q = 2, 3 frequencies, J = 4) and one chain's start."""
    spec, data, state, _ = tiny_rflvm(kind, seed)
    Y_fill = state.Y_fill if kind == "gaussian" else None
    log_prior_W = prior_W(jax.random.PRNGKey(1), spec, data, state).total
    fn = log_density(spec, data, state.W, state.noise_var, state.dispersion_rate, Y_fill,
                     log_prior_W)
    return spec, data, state, fn, log_prior_W


@pytest.mark.parametrize("kind", ["poisson", "negative_binomial", "bernoulli"])
def test_curvature_diagonal_is_the_exact_diagonal_of_the_hessian(kind):
    """Q + (M/2)Q + P (+ 1) Hessian-vector products give the diagonal of −∇² of the block's
    density (X, W, z, log r) with the intercept centred at a fixed m exactly (rows of X,
    columns of β and of log r are then conditionally independent), checked against the dense
    ``jax.hessian`` (floored as the function floors it) at the start and at the mode; at the
    point whose m it uses, that density equals the block's."""
    spec, data, state, fn, log_prior_W = _problem(kind)
    start = to_position(spec, data, state)
    # W modulo rotations: (M/2)Q − Q(Q − 1)/2 coordinates (:mod:`gplvm.models.rflvm.gauge`)
    assert start.shape[0] == 7 * 2 + 3 * 2 - 1 + 7 * 4 + (4 if kind == "negative_binomial" else 0)
    for position in (start, find_mode(fn, start).position):
        X, W, _, _ = from_position(spec, data, position)
        fixed = log_density(spec, data, state.W, state.noise_var, state.dispersion_rate,
                            None, log_prior_W, _feature_means(spec, X, W))
        np.testing.assert_allclose(fixed(position), fn(position), rtol=1e-12)
        dense = -jnp.diag(jax.hessian(fixed)(position))
        got = curvature_diagonal(spec, data, fixed, position)
        floor = _floors(spec, data, position.dtype)
        np.testing.assert_allclose(got, np.maximum(dense, floor), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["poisson", "negative_binomial"])
def test_block_density_is_the_posterior_written_from_scipy(kind):
    """The block's log-density, in its whitened and centred coordinates, differs from
    log p(Y | X, W, β, r) + log p(X) + log p(W) + log p(β | r) + log p(log r) written with
    scipy.stats, plus the rotation quotient's log-Jacobian Σ_i (Q − i + 1) log |r_ii| of
    numpy's QR of W₁:Qᵀ (Muirhead 1982, Thm 2.1.13, and log l_ii), by one constant (the
    other coordinates are an affine map and a shear of unit Jacobian): checked at three
    states; and from_position inverts to_position up to the rotation, which it removes
    (W₁:Q lower-triangular, positive diagonal, XWᵀ unchanged)."""
    from scipy import stats

    spec, data, state, fn, _ = _problem(kind)
    rng = np.random.default_rng(4)
    Y, obs = np.asarray(data.Y), np.asarray(data.observed) > 0
    mean0, prec = np.asarray(data.beta_prior_mean), np.asarray(data.beta_prior_prec)
    gaps = []
    for _ in range(3):
        st = state._replace(X=state.X + 0.3 * rng.standard_normal(state.X.shape),
                            W=state.W + 0.2 * rng.standard_normal(state.W.shape),
                            beta=state.beta + 0.2 * rng.standard_normal(state.beta.shape),
                            dispersion=jnp.asarray(rng.uniform(0.5, 5.0, 4)))
        position = to_position(spec, data, st)
        X, W, beta, log_r = from_position(spec, data, position)
        np.testing.assert_allclose(X @ W.T, st.X @ st.W.T, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(X @ X.T, st.X @ st.X.T, rtol=1e-12, atol=1e-12)   # X O
        assert W[0, 1] == 0 and W[0, 0] > 0 and W[1, 1] > 0
        np.testing.assert_allclose(beta, st.beta, rtol=1e-10, atol=1e-12)
        X, W, beta = (np.asarray(a) for a in (st.X, st.W, st.beta))
        r_diag = np.abs(np.diag(np.linalg.qr(W[:2].T)[1]))
        XW = X @ W.T
        Phi = np.hstack([np.sin(XW), np.cos(XW), np.ones((7, 1))]) / np.r_[
            np.full(6, np.sqrt(3.0)), 1.0]
        psi = Phi @ beta
        r = np.asarray(st.dispersion)
        if kind == "poisson":
            lik = stats.poisson.logpmf(Y, np.exp(psi))
            mean = mean0
        else:
            lik = stats.nbinom.logpmf(Y, r, 1.0 / (1.0 + np.exp(psi)))
            mean = mean0.copy()
            mean[-1] -= np.log(r)
        a0 = spec.dispersion_prior[0]
        value = (np.sum(lik[obs]) + np.sum(stats.norm.logpdf(X)) + np.sum(stats.norm.logpdf(W))
                 + np.sum(stats.norm.logpdf(beta, mean, prec[:, None] ** -0.5))
                 + 2 * np.log(r_diag[0]) + np.log(r_diag[1]))
        if kind == "negative_binomial":      # Ga(a0, rate h) on r, with the Jacobian of log r
            h = float(state.dispersion_rate)
            value += np.sum(stats.gamma.logpdf(r, a0, scale=1.0 / h) + np.log(r))
        gaps.append(float(fn(position)) - value)
    np.testing.assert_allclose(gaps, gaps[0], rtol=0, atol=1e-8 * abs(gaps[0]) + 1e-8)


def test_gaussian_curvature_is_that_of_the_uncollapsed_row_density():
    """The Gaussian's stand-in density (β at its conditional mean) factorises over rows given
    W, so Q + (M/2)Q Hessian-vector products give its exact diagonal."""
    spec, data, state, fn, log_prior_W = _problem("gaussian")
    mode = find_mode(fn, to_position(spec, data, state)).position
    rows = gaussian_row_density(spec, data, state.W, state.noise_var, state.Y_fill, mode,
                                log_prior_W)
    dense = -jnp.diag(jax.hessian(rows)(mode))
    np.testing.assert_allclose(curvature_diagonal(spec, data, rows, mode),
                               np.maximum(dense, _floors(spec, data, mode.dtype)),
                               rtol=1e-9, atol=1e-12)


def test_find_mode_reaches_the_maximum_of_a_concave_quadratic():
    """log p = −½(x − m)ᵀA(x − m), A SPD with condition number 10²: the search stops with
    every gradient coordinate under the tolerance, so ‖x − m‖ = ‖A⁻¹g‖ ≤ √12·tol / λ_min."""
    rng = np.random.default_rng(1)
    U, _ = np.linalg.qr(rng.standard_normal((12, 12)))
    eig = np.logspace(-1, 1, 12)
    A = jnp.asarray(U @ np.diag(eig) @ U.T)
    m = jnp.asarray(rng.standard_normal(12))
    search = find_mode(lambda x: -0.5 * (x - m) @ A @ (x - m), jnp.zeros(12))
    assert float(search.max_gradient) <= GRADIENT_TOLERANCE
    bound = np.sqrt(12) * GRADIENT_TOLERANCE / eig[0]
    assert float(jnp.linalg.norm(search.position - m)) <= bound


@pytest.mark.parametrize("kind", ["poisson", "negative_binomial", "gaussian"])
def test_mode_search_climbs_to_a_stationary_point(kind):
    """From the chain's start, L-BFGS ends at a higher log-density with every gradient
    coordinate under the tolerance (a stationary point of the block given W)."""
    spec, data, state, fn, _ = _problem(kind)
    start = to_position(spec, data, state)
    search = find_mode(fn, start)
    assert float(search.log_density) > float(fn(start))
    assert float(search.max_gradient) <= GRADIENT_TOLERANCE
    grad = jax.grad(fn)(search.position)
    assert float(jnp.max(jnp.abs(grad))) <= GRADIENT_TOLERANCE


def test_estimator_reports_the_mode_start():
    """``sampler='nuts'`` records each chain's mode search; chains start apart (over-dispersed
    draws) and the first log-likelihoods are finite."""
    rng = np.random.default_rng(2)
    t = np.linspace(-2, 2, 30)
    Y = rng.poisson(np.exp(np.stack([np.sin(t + j) for j in range(5)], axis=1))).astype(float)
    model = gplvm.RFLVM(n_components=1, n_features=10, n_iter=6, burn_in=4, n_chains=2,
                        sampler="nuts", progress=False, learn_kernel=False, block_size=6).fit(Y)
    info = model.mode_start_
    assert set(info) == {"log_density", "n_iterations", "max_gradient"}
    assert info["n_iterations"].shape == (2,) and np.all(info["n_iterations"] >= 1)
    assert np.all(np.isfinite(info["log_density"]))
    assert np.all(np.isfinite(model.history_))


def test_find_mode_refuses_zero_iterations():
    """find_mode returns its last iteration's own value and gradient, so it needs one."""
    with pytest.raises(ValueError, match="max_iterations >= 1"):
        find_mode(lambda p: -jnp.sum(p**2), jnp.ones(2), 0)
    search = find_mode(lambda p: -jnp.sum((p - 1.0)**2), jnp.zeros(2), 50)
    np.testing.assert_allclose(search.position, 1.0, atol=1e-6)
    np.testing.assert_allclose(search.log_density, -jnp.sum((search.position - 1.0)**2))


def test_a_scaled_search_reports_the_callers_position_and_gradient():
    """find_mode with ``scale``: on −½ Σ a_i (p_i − m_i)², curvatures a_i from 1e-4 to 1e4, the
    search in u = (p − p0)/scale with scale = a^(-1/2)(1 + ½ sin i) (a quadratic in u whose
    curvatures differ by at most 9×) ends at m within the tolerance, in p's coordinates, and the
    gradient it reports is the closed form's in p, max |a (p − m)|, not the one in u (which
    is smaller by the scale: the search stops when p's, not u's, is within the tolerance)."""
    from gplvm.models.rflvm.map_start import GRADIENT_TOLERANCE, find_mode
    a = jnp.logspace(-4.0, 4.0, 9)
    m = jnp.linspace(-2.0, 2.0, 9)

    def fn(p):
        return -0.5 * jnp.sum(a * (p - m) ** 2)

    p0 = jnp.zeros(9)
    scale = (1.0 + 0.5 * jnp.sin(jnp.arange(9.0))) / jnp.sqrt(a)
    found = find_mode(fn, p0, 50, scale=scale)
    gradient = np.abs(np.asarray(a * (found.position - m)))
    assert float(found.max_gradient) <= GRADIENT_TOLERANCE
    np.testing.assert_allclose(float(found.max_gradient), gradient.max(), rtol=1e-8)
    assert gradient.max() > 3 * np.max(gradient * np.asarray(scale))    # p's and u's differ
    np.testing.assert_allclose(np.asarray(found.position), np.asarray(m),
                               atol=GRADIENT_TOLERANCE / float(a.min()))
    np.testing.assert_allclose(float(found.log_density), float(fn(found.position)), rtol=1e-10)

"""The reparameterised dynamical q(X) (Damianou et al. 2016) against dense linear algebra."""

import re

import jax
import jax.numpy as jnp
import numpy as np

from gplvm import BayesianGPLVM
from gplvm.data import make_lorenz
from gplvm.kernels import RBF
from gplvm.priors import dynamical


def dense_reference(kernel, times, groups, mu_bar, lam, jitter):
    N, Q = mu_bar.shape
    K = np.zeros((N, N))
    for g in np.unique(groups):
        r = np.flatnonzero(groups == g)
        K[np.ix_(r, r)] = np.asarray(kernel(times[r, None])) + jitter * np.eye(len(r))
    means, variances, kl = np.zeros((N, Q)), np.zeros((N, Q)), 0.0
    for q in range(Q):
        S = np.linalg.inv(np.linalg.inv(K) + np.diag(lam[:, q]))
        mu = K @ mu_bar[:, q]
        means[:, q], variances[:, q] = mu, np.diag(S)
        # KL(N(mu, S) || N(0, K)), the textbook formula
        kl += 0.5 * (np.trace(np.linalg.solve(K, S)) + mu @ np.linalg.solve(K, mu) - N
                     + np.linalg.slogdet(K)[1] - np.linalg.slogdet(S)[1])
    return means, variances, kl


def test_marginals_and_kl_match_dense_with_unequal_sequences():
    rng = np.random.default_rng(0)
    groups = np.array([0] * 7 + [1] * 4 + [2] * 9)
    times = np.concatenate([np.linspace(0, 1, 7), np.linspace(0, 2, 4), np.linspace(0, 3, 9)])
    perm = rng.permutation(len(times))        # rows need not be sorted by sequence
    groups, times = groups[perm], times[perm]
    N, Q = len(times), 3
    mu_bar = rng.normal(size=(N, Q))
    lam = rng.uniform(0.1, 5.0, size=(N, Q))
    kernel = RBF(lengthscale=0.7, variance=1.3)
    layout = dynamical.sequence_layout(times, groups)
    X_mean, X_var, kl = dynamical.q_x_and_kl(kernel, layout, jnp.asarray(mu_bar),
                                             jnp.asarray(lam), N, jitter=1e-6)
    ref_mean, ref_var, ref_kl = dense_reference(kernel, times, groups, mu_bar, lam, 1e-6)
    np.testing.assert_allclose(X_mean, ref_mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(X_var, ref_var, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(kl, ref_kl, rtol=1e-8)


def test_gradient_matches_dense_with_unequal_sequences():
    """Padding the shorter sequences must not leak into the gradient (masking inside the square
    root of Λ once made the gradient of the row the padding points at NaN)."""
    rng = np.random.default_rng(2)
    groups = np.array([0] * 6 + [1] * 3 + [2] * 8)
    times = np.concatenate([np.linspace(0, 1, 6), np.linspace(0, 2, 3), np.linspace(0, 3, 8)])
    N, Q = len(times), 2
    kernel = RBF(lengthscale=0.7, variance=1.3)
    layout = dynamical.sequence_layout(times, groups)
    w_mean, w_var = jnp.asarray(rng.normal(size=(N, Q))), jnp.asarray(rng.normal(size=(N, Q)))
    same = jnp.asarray(groups[:, None] == groups[None, :], dtype=float)

    def packed(mu_bar, lam):
        X_mean, X_var, kl = dynamical.q_x_and_kl(kernel, layout, mu_bar, lam, N, jitter=1e-6)
        return kl + jnp.sum(w_mean * X_mean) + jnp.sum(w_var * X_var)

    def dense(mu_bar, lam):
        K = kernel(jnp.asarray(times)[:, None]) * same + 1e-6 * jnp.eye(N)
        total = 0.0
        for q in range(Q):
            S = jnp.linalg.inv(jnp.linalg.inv(K) + jnp.diag(lam[:, q]))
            mu = K @ mu_bar[:, q]
            kl = 0.5 * (jnp.trace(jnp.linalg.solve(K, S)) + mu @ jnp.linalg.solve(K, mu) - N
                        + jnp.linalg.slogdet(K)[1] - jnp.linalg.slogdet(S)[1])
            total = total + kl + w_mean[:, q] @ mu + w_var[:, q] @ jnp.diag(S)
        return total

    mu_bar = jnp.asarray(rng.normal(size=(N, Q)))
    lam = jnp.asarray(rng.uniform(0.1, 5.0, size=(N, Q)))
    got = jax.jit(jax.grad(packed, argnums=(0, 1)))(mu_bar, lam)
    want = jax.jit(jax.grad(dense, argnums=(0, 1)))(mu_bar, lam)
    for g, w in zip(got, want):
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-8)


def test_prediction_at_training_times_reproduces_marginals():
    rng = np.random.default_rng(1)
    times = np.linspace(0, 4, 15)
    mu_bar, lam = rng.normal(size=(15, 2)), rng.uniform(0.5, 2.0, size=(15, 2))
    kernel = RBF(lengthscale=1.1, variance=0.9)
    layout = dynamical.sequence_layout(times)
    X_mean, X_var, _ = dynamical.q_x_and_kl(kernel, layout, jnp.asarray(mu_bar),
                                            jnp.asarray(lam), 15, jitter=0.0)
    m, v = dynamical.predict_q_x(kernel, layout, jnp.asarray(mu_bar), jnp.asarray(lam), times,
                                 jitter=0.0)
    np.testing.assert_allclose(m, X_mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(v, X_var, rtol=1e-6, atol=1e-8)


def _lapack_calls(fun, *args):
    """(name, number of batch dimensions) of every LAPACK custom call in ``jit(fun)``."""
    text = jax.jit(fun).lower(*args).as_text()
    return re.findall(r'custom_call @(lapack_\w+)\(.*?num_batch_dims = "(\d+)"', text)


def test_dynamical_prior_makes_only_unbatched_lapack_calls():
    """jaxlib's CPU LAPACK kernels split a *batched* call over the XLA intra-op thread pool and
    block the calling pool thread until the pieces are done; two such calls in flight at once
    on a 2-thread pool (the independent solves of the prior, inside L-BFGS's line search) leave
    no thread to run the pieces and ``fit(times=...)`` deadlocked.  The prior therefore factorises
    one (sequence, latent dimension) block per call, for the value and the gradient alike."""
    groups = np.array([0] * 30 + [1] * 20)
    times = np.concatenate([np.linspace(0, 1, 30), np.linspace(0, 2, 20)])
    layout = dynamical.sequence_layout(times, groups)
    mu_bar, lam = jnp.ones((50, 3)), jnp.ones((50, 3))

    def kl(mu_bar, lam, kernel):
        return dynamical.q_x_and_kl(kernel, layout, mu_bar, lam, 50)[2]

    calls = _lapack_calls(jax.value_and_grad(kl, argnums=(0, 1, 2)), mu_bar, lam,
                          RBF(lengthscale=0.3, variance=1.0))
    assert {"lapack_dpotrf_ffi", "lapack_dtrsm_ffi"} <= {name for name, _ in calls}
    assert all(n_batch == "0" for _, n_batch in calls), calls


def test_fit_with_times_increases_the_bound_and_gives_a_smooth_trajectory():
    data = make_lorenz(n_samples=60, n_outputs=10, random_state=0)
    model = BayesianGPLVM(n_components=3, n_inducing=10, max_iter=15, random_state=0,
                          progress=False).fit(data.Y, times=data.times)
    assert model.n_iter_ >= 2 and np.all(np.isfinite(model.history_))
    assert model.history_[-1] > model.history_[0]
    X = model.X_mean_
    assert np.all(np.isfinite(X)) and np.all(model.X_var_ > 0)
    # the posterior mean K_t μ̄ is a GP-smoothed curve: squared steps are a small fraction of the
    # spread (white noise would give a ratio near 2)
    roughness = np.sum(np.diff(X, axis=0) ** 2, axis=0) / np.sum((X - X.mean(0)) ** 2, axis=0)
    assert np.all(roughness < 0.1)
    # the latent trajectory at the training times is the fitted q(X) (seed 003 eq. 35), up to
    # the 1e-6 jitter on K_t's diagonal, which the cross-covariance K_*t does not carry
    X_t, _, _ = model.predict_times(data.times)
    mu_bar = np.asarray(model.params_["mu_bar"])
    np.testing.assert_allclose(X_t, X, rtol=0, atol=2e-6 * np.abs(mu_bar).max())

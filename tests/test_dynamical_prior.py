"""The reparameterised dynamical q(X) (Damianou et al. 2016) against dense linear algebra."""

import jax.numpy as jnp
import numpy as np

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

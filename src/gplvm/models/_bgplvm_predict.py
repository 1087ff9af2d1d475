"""Predictions of a fitted Bayesian GPLVM (seed 003 eqs. 29–35).

With q(u_d) = N(ū_d, Σ_u,g), V = K_uu⁻¹ Ū and H_g = K_uu⁻¹ Σ_u,g K_uu⁻¹ (stored in
``model._fixed``), the predictive distribution of f at a point x* is Gaussian with

    mean  k_*u V,        variance  k** − k_*u K_uu⁻¹ k_u* + k_*u H_g k_u*,

and at an uncertain x* ~ q(x*) its mean is ψ1(x*) V.  Y adds the noise variance.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gplvm._random import as_key
from gplvm._validation import as_2d_float
from gplvm.expectations import psi_statistics
from gplvm.linalg import safe_cholesky
from gplvm.models._common import check_is_fitted


def _check_X(model, X):
    check_is_fitted(model, "kernel_")
    X = as_2d_float(X, "X")
    if X.shape[1] != model.n_components:
        raise ValueError(f"X has {X.shape[1]} columns but the latent space has "
                         f"{model.n_components}")
    return X


@jax.jit
def _mean_var(kernel, Z, fixed, X):
    Ksu = kernel(X, Z)
    mean = Ksu @ fixed.V
    base = kernel.diag(X) - jnp.sum((Ksu @ fixed.Kuu_inv) * Ksu, axis=1)
    extra = jnp.einsum("nm,gmk,nk->ng", Ksu, fixed.H, Ksu)[:, fixed.column_group]
    return mean, base[:, None] + extra + fixed.noise_var


def predict_at(model, X, return_var=False):
    X = _check_X(model, X)
    mean, var = _mean_var(model.kernel_, jnp.asarray(model.Z_), model._fixed, jnp.asarray(X))
    mean = np.asarray(mean) * model.Y_std_ + model.Y_mean_
    if not return_var:
        return mean
    return mean, np.asarray(var) * model.Y_std_**2


_psi_jit = jax.jit(psi_statistics)


def expected_f(model, X_mean, X_var):
    """E[f*] = ψ1(q(x*)) V under uncertain inputs (standardised units)."""
    _, psi1, _ = _psi_jit(model.kernel_, jnp.asarray(model.Z_),
                                         jnp.asarray(X_mean), jnp.asarray(X_var), model.rule_)
    return np.asarray(psi1 @ model._fixed.V)


def sample_from(model, n_samples, X=None, random_state=None):
    check_is_fitted(model, "kernel_")
    key = as_key(model.random_state if random_state is None else random_state)
    kx, kf, kn = jax.random.split(jax.random.fold_in(key, 104729), 3)
    if X is None:
        X = np.asarray(jax.random.normal(kx, (int(n_samples), model.n_components)))
    X = _check_X(model, X)
    kernel, Z, fixed = model.kernel_, jnp.asarray(model.Z_), model._fixed
    Xj = jnp.asarray(X)
    Ksu = kernel(Xj, Z)
    mean = np.asarray(Ksu @ fixed.V)
    F = np.empty_like(mean)
    base = np.asarray(kernel(Xj) - Ksu @ fixed.Kuu_inv @ Ksu.T)
    keys = jax.random.split(kf, fixed.H.shape[0])
    col_group = np.asarray(fixed.column_group)
    for g in range(fixed.H.shape[0]):
        cov = base + np.asarray(Ksu @ fixed.H[g] @ Ksu.T)
        L = np.asarray(safe_cholesky(0.5 * (cov + cov.T), name="predictive covariance").L)
        cols = np.flatnonzero(col_group == g)
        eps = np.asarray(jax.random.normal(keys[g], (len(X), len(cols))))
        F[:, cols] = mean[:, cols] + L @ eps
    noise = np.asarray(jax.random.normal(kn, F.shape)) * np.sqrt(float(fixed.noise_var))
    return (F + noise) * model.Y_std_ + model.Y_mean_, X


def predict_at_times(model, t_new, sequence=0, return_var=False):
    """Latent trajectory at new times (seed 003 eq. 35), then Y through uncertain inputs."""
    from gplvm.priors.dynamical import predict_q_x
    from gplvm.transforms import softplus

    check_is_fitted(model, "kernel_")
    if model.time_kernel_ is None:
        raise ValueError("predict_times needs a model fitted with times= (dynamical prior)")
    u = model.params_
    X_mean, X_var = predict_q_x(model.time_kernel_, model._static.layout, u["mu_bar"],
                                softplus(u["lam"]), t_new, sequence)
    Y_mean = expected_f(model, X_mean, X_var) * model.Y_std_ + model.Y_mean_
    out = (np.asarray(X_mean), np.asarray(X_var), Y_mean)
    if return_var:
        _, var = predict_at(model, np.asarray(X_mean), return_var=True)
        out = out + (var,)
    return out

"""Posterior-predictive computations from retained RFLVM draws (seed 000, §4.2, Figs. 4–5).

A retained draw s is (X_s, W_s, β_s, θ_s).  Predictions average over draws:

* E[y_ij | Y_obs] ≈ (1/S) Σ_s E[y | ψ_ij^{(s)}] — the posterior expected value the paper uses
  to impute held-out entries (§4.2);
* for new rows, the latents are drawn per draw with the map (W_s, β_s, θ_s) held fixed, by
  elliptical slice sampling of x* under N(0, I) given the new row's observed entries.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import logsumexp

from gplvm.inference.mcmc import elliptical_slice
from gplvm.models._rflvm.features import design
from gplvm.models._rflvm.loglik import full_log_lik, likelihood_object, row_log_lik

Array = jax.Array


def linear_predictor(X, W, beta, offset, intercept: bool) -> Array:
    return design(X, W, intercept) @ beta + offset


def expected_y(kind: str, psi: Array, trials: Array, noise_var: Array, dispersion: Array):
    """E[y | ψ] per entry, in the data's columns ((N, J) for the multinomial)."""
    if kind == "gaussian":
        return psi
    lik = likelihood_object(kind, trials, noise_var, dispersion)
    return lik._inverse_link(psi)


@partial(jax.jit, static_argnames=("kind", "intercept"))
def expected_y_per_draw(kind, intercept, X, W, beta, noise_var, dispersion, offset, trials):
    """E[y | ψ_s] for every stored draw s: X (S, N, Q), W (S, M/2, Q), beta (S, P, D), ...;
    returns (S, N, J).  Averaging over s gives the posterior expected value."""
    def one(X, W, beta, noise_var, dispersion):
        psi = linear_predictor(X, W, beta, offset, intercept)
        return expected_y(kind, psi, trials, noise_var, dispersion)
    return jax.vmap(one)(X, W, beta, noise_var, dispersion)


@partial(jax.jit, static_argnames=("kind", "intercept", "n_steps"))
def infer_new_latents(key, kind, intercept, n_steps, Y, observed, offset, trials,
                      W, beta, noise_var, dispersion):
    """x* for new rows under each draw's map: returns (S, N*, Q), the last of ``n_steps``
    elliptical-slice updates started at 0, and the per-draw row log-likelihoods (S, N*)."""
    S = W.shape[0]
    N, Q = Y.shape[0], W.shape[-1]

    def per_draw(key, W, beta, noise_var, dispersion):
        def fn(X):
            psi = linear_predictor(X, W, beta, offset, intercept)
            return row_log_lik(kind, Y, psi, observed, trials, noise_var, dispersion)

        def step(X, key):
            key_nu, key_ess = jax.random.split(key)
            nu = jax.random.normal(key_nu, X.shape, X.dtype)
            X, _, _ = elliptical_slice(key_ess, X, fn(X), fn, nu)
            return X, None

        X, _ = lax.scan(step, jnp.zeros((N, Q)), jax.random.split(key, n_steps))
        return X

    keys = jax.random.split(key, S)
    return jax.vmap(per_draw)(keys, W, beta, noise_var, dispersion)


@partial(jax.jit, static_argnames=("kind", "intercept"))
def log_predictive_rows(kind, intercept, X, W, beta, noise_var, dispersion, Y, observed,
                        offset, trials):
    """Σ_i log (1/S) Σ_s p(y_i,obs | x_i^{(s)}, θ_s): the log pointwise predictive density."""
    def one(X, W, beta, noise_var, dispersion):
        psi = linear_predictor(X, W, beta, offset, intercept)
        return jnp.sum(full_log_lik(kind, Y, psi, observed, trials, noise_var, dispersion),
                       axis=-1)
    per_draw = jax.vmap(one)(X, W, beta, noise_var, dispersion)      # (S, N)
    return jnp.sum(logsumexp(per_draw, axis=0) - jnp.log(per_draw.shape[0]))

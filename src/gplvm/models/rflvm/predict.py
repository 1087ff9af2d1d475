"""Posterior-predictive computations from retained RFLVM draws (seed 000, §4.2, Figs. 4–5).

A retained draw s is (X_s, W_s, β_s, θ_s).  Predictions average over draws:

* E[y_ij | Y_obs] ≈ (1/S) Σ_s E[y | ψ_ij^{(s)}] — the posterior expected value the paper uses
  to impute held-out entries (§4.2);
* for new rows, the latents are drawn per draw with the map (W_s, β_s, θ_s) held fixed, by
  elliptical slice sampling of x* under N(0, I) given the new row's observed entries, each
  row with random numbers of its own (:func:`row_keys`).
"""

from __future__ import annotations

import hashlib
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import logsumexp

from gplvm.inference.mcmc import ess_init, ess_step
from gplvm.models.rflvm.features import design
from gplvm.models.rflvm.loglik import full_log_lik, likelihood_object, row_log_lik
from gplvm.models.rflvm.spec import MapParams

Array = jax.Array


def linear_predictor(X, W, beta, offset, intercept: bool) -> Array:
    return design(X, W, intercept) @ beta + offset


def linear_predictor_per_row(X, s, W, beta, intercept: bool) -> Array:
    """ψ_n = φ_{W_{s_n}}(x_n) β_{s_n}: row n under its own stored draw s_n of the map, (N, D).

    Rows go in batches: a (rows, P, D) gather of β for all rows at once can be gigabytes.
    """
    def row(args):
        x, s = args
        return design(x[None], W[s], intercept)[0] @ beta[s]

    return lax.map(row, (X, s), batch_size=256)


def expected_y(kind: str, psi: Array, trials: Array, noise_var: Array, dispersion: Array):
    """E[y | ψ] per entry, in the data's columns ((N, J) for the multinomial): the
    likelihood's inverse link."""
    lik = likelihood_object(kind, trials, noise_var, dispersion)
    return lik._inverse_link(psi)


class Rows(NamedTuple):
    """Rows of data as p(y | ψ) reads them: the fields of :class:`.spec.RFLVMData` of the same
    names, without those that depend on the values of the counts (``nonzero``, ``customers``:
    their lengths vary from call to call, and each length would compile the predictions
    again).

    Attributes:
        Y: (N, J) observations, 0 where missing.
        observed: (N, D) 1.0 where observed.
        offset: (N, 1) row offsets.
        trials: (N, D) binomial trials / multinomial row totals (ones otherwise).
    """

    Y: Array
    observed: Array
    offset: Array
    trials: Array

    @classmethod
    def of(cls, data) -> "Rows":
        """The rows of an :class:`.spec.RFLVMData`."""
        return cls(data.Y, data.observed, data.offset, data.trials)


@partial(jax.jit, static_argnames=("kind", "intercept"))
def expected_y_per_draw(kind, intercept, X, draws: MapParams, offset, trials):
    """E[y | ψ_s] for every stored draw s: X (S, N, Q) and the draws of the map (W (S, M/2, Q),
    beta (S, P, D), ...); returns (S, N, J).  Averaging over s gives the posterior expected
    value.  ``kind`` (the likelihood's name) and ``intercept`` are static."""
    def one(X, theta):
        psi = linear_predictor(X, theta.W, theta.beta, offset, intercept)
        return expected_y(kind, psi, trials, theta.noise_var, theta.dispersion)
    return jax.vmap(one)(X, draws)


def row_keys(key: Array, Y: np.ndarray, offset: np.ndarray) -> Array:
    """One ``jax.random`` key per row, ``fold_in(key, h)`` with h a hash of the row's values
    (and its offset): a row's random numbers depend on the row alone, never on the other rows
    of the call or their number (API.md: rows are independent given the fitted model).

    NaN is hashed as one bit pattern and −0.0 as 0.0, so equal rows get equal keys.
    """
    rows = np.concatenate([np.asarray(Y, np.float64), np.asarray(offset, np.float64)], axis=1)
    rows = np.where(np.isnan(rows), np.nan, rows + 0.0)
    hashes = [int.from_bytes(hashlib.sha256(np.ascontiguousarray(r).tobytes()).digest()[:4],
                             "little") for r in rows]
    return jax.vmap(lambda h: jax.random.fold_in(key, h))(jnp.asarray(hashes, jnp.uint32))


@partial(jax.jit, static_argnames=("kind", "intercept", "n_steps"))
def infer_new_latents(keys, kind, intercept, n_steps, rows: Rows, draws: MapParams):
    """x* for new rows under each draw's map: (S, N*, Q), the last of ``n_steps``
    elliptical-slice updates started at 0 (the prior mean).

    Row i uses ``keys[i]`` (:func:`row_keys`) and its own data only (``rows``, each field
    with N* rows): each row runs its own chains (one per stored draw of ``draws``, S on the
    leading axis), so its latent does not depend on the other rows of the call.
    """
    S, Q = draws.W.shape[0], draws.W.shape[-1]

    def per_row(key, row):
        y, obs, off, tr = row

        def per_draw(key, theta):
            def fn(x):                                    # (1, Q) -> (1,)
                psi = linear_predictor(x, theta.W, theta.beta, off[None], intercept)
                return row_log_lik(kind, y[None], psi, obs[None], tr[None], theta.noise_var,
                                   theta.dispersion)

            def step(x, key):
                key_nu, key_ess = jax.random.split(key)
                nu = jax.random.normal(key_nu, x.shape, x.dtype)
                state, _ = ess_step(key_ess, ess_init(x, fn), fn, nu)
                return state.position, None

            x, _ = lax.scan(step, jnp.zeros((1, Q)), jax.random.split(key, n_steps))
            return x[0]

        return jax.vmap(per_draw)(jax.random.split(key, S), draws)

    X = jax.vmap(per_row)(keys, rows)                                 # (N*, S, Q)
    return jnp.swapaxes(X, 0, 1)


@partial(jax.jit, static_argnames=("kind", "intercept"))
def log_predictive_rows(kind, intercept, X, draws: MapParams, rows: Rows):
    """Σ_i log (1/S) Σ_s p(y_i,obs | x_i^{(s)}, θ_s): the log pointwise predictive density of
    ``rows``, with X (S, N, Q) and the S stored draws of the map stacked in ``draws``."""
    def one(X, theta):
        psi = linear_predictor(X, theta.W, theta.beta, rows.offset, intercept)
        return jnp.sum(full_log_lik(kind, rows.Y, psi, rows.observed, rows.trials,
                                    theta.noise_var, theta.dispersion), axis=-1)
    per_draw = jax.vmap(one)(X, draws)                                # (S, N)
    return jnp.sum(logsumexp(per_draw, axis=0) - jnp.log(per_draw.shape[0]))

"""The joint move of a frequency and its features' weights (:mod:`gplvm.models.rflvm.
frequency_weights`) leaves the posterior invariant, by an exact check with much more power
than a whole-sweep Geweke test: if (θ, Y) is an exact draw of the joint p(θ) p(Y | θ) and a
kernel leaves p(θ | Y) invariant, then (θ', Y) after one application is again an exact draw
of the joint, so E f(θ', Y) = E f(θ, Y) for every f.  Each replicate draws (X, W, β, Y) from
the model, applies one pass of the move, and the paired differences f(θ', Y) − f(θ, Y) of
20,000 independent replicates must have mean zero within a Bonferroni-corrected z-test.

Injected bugs (the Laplace proposal's density ratio left out, the frequency's prior ratio
left out of walk steps, β's prior variance wrong in the target) must make the same check fail.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import gplvm.models.rflvm.frequency_weights as FW
from gplvm.models.rflvm.features import design
from gplvm.models.rflvm.frequencies import FrequencyPrior

N, D, Q, N_FREQ = 8, 3, 1, 3
P = 2 * N_FREQ + 1
S0, INTERCEPT_MEAN, INTERCEPT_PREC = 1.0, 0.5, 4.0
N_REPLICATES = 20_000
ALPHA = 0.01


class _Data(NamedTuple):
    Y: jax.Array
    offset: jax.Array
    observed: jax.Array
    trials: jax.Array


def _replicate(key, kind: str, dispersion: float):
    """One exact draw (X, W, β, Y) of the model and one pass of the move; the functions of
    θ before and after."""
    k_x, k_w, k_b, k_y, k_prior, k_move = jax.random.split(key, 6)
    X = jax.random.normal(k_x, (N, Q))
    W = jax.random.normal(k_w, (N_FREQ, Q))            # the RBF's spectral density, ℓ = 1
    prec = jnp.concatenate([jnp.full(2 * N_FREQ, 1.0 / S0), jnp.array([INTERCEPT_PREC])])
    mean = jnp.zeros((P, D)).at[-1].set(INTERCEPT_MEAN)
    beta = mean + jax.random.normal(k_b, (P, D)) / jnp.sqrt(prec)[:, None]
    Phi = design(X, W, True)
    psi = Phi @ beta
    r = jnp.full((D,), dispersion)
    if kind == "poisson":
        Y = jax.random.poisson(k_y, jnp.exp(psi)).astype(jnp.float64)
    else:                                                # NB(r, p = σ(ψ)): gamma–Poisson
        k_g, k_p = jax.random.split(k_y)
        rate = jax.random.gamma(k_g, r, (N, D)) * jnp.exp(psi)
        Y = jax.random.poisson(k_p, rate).astype(jnp.float64)
    data = _Data(Y, jnp.zeros((N, 1)), jnp.ones((N, D)), jnp.ones((N, D)))
    prior = FrequencyPrior(lambda m, w: -0.5 * jnp.sum(w**2), jnp.ones((N_FREQ, Q, Q)),
                           jax.random.normal(k_prior, (N_FREQ, Q)))
    W_new, beta_new, n_acc = FW.update_frequency_weights(
        k_move, prior, X, W, kind, data, FW.Weights(beta, mean, prec, Phi, psi),
        jnp.ones((D,)), r)
    return _functions(W, beta, Y), _functions(W_new, beta_new, Y), n_acc


def _functions(W, beta, Y):
    """Functions of (θ, Y) whose expectations the move must keep."""
    feats = beta[:-1]
    ys = jnp.log1p(Y).sum(axis=0)                        # (D,)
    return jnp.stack([
        W[:, 0].mean(), (W[:, 0] ** 2).mean(), jnp.abs(W[:, 0]).mean(),
        feats.mean(), (feats**2).mean(), jnp.abs(feats).mean(),
        (feats[:N_FREQ] * feats[N_FREQ:]).mean(),
        (W[:, 0, None] ** 2 * (feats[:N_FREQ] ** 2 + feats[N_FREQ:] ** 2)).mean(),
        (feats[:N_FREQ] ** 2 * ys).mean() / 10.0,
        (W[:, 0] ** 2).mean() * ys.mean() / 10.0,
        jnp.cos(W[:, 0]).mean(),
    ])


def paired_z(kind: str = "poisson", dispersion: float = 5.0, seed: int = 0):
    """z of the mean paired difference per function, and the acceptance rate."""
    keys = jax.random.split(jax.random.PRNGKey(seed), N_REPLICATES)
    before, after, n_acc = jax.jit(jax.vmap(lambda k: _replicate(k, kind, dispersion)))(keys)
    diff = np.asarray(after - before)
    z = diff.mean(0) / (diff.std(0, ddof=1) / np.sqrt(diff.shape[0]))
    return z, float(np.mean(n_acc)) / N_FREQ


def critical_value(n_functions: int) -> float:
    return stats.norm.ppf(1 - ALPHA / (2 * n_functions))


@pytest.mark.parametrize("kind", ["poisson", "negative_binomial"])
def test_the_move_keeps_exact_draws_of_the_joint_exact(kind):
    z, accept = paired_z(kind)
    assert 0.05 < accept < 0.95, accept           # the move moves, and is not a no-op
    assert np.all(np.abs(z) < critical_value(z.size)), np.round(z, 2)


def _without_proposal_ratio(monkeypatch):
    monkeypatch.setattr(FW, "_log_normal", lambda b, centre, H: jnp.zeros(()))


def _without_walk_prior_ratio(monkeypatch):
    original = FW.update_frequency_weights

    def flat_prior(key, prior, *args, **kwargs):
        return original(key, prior._replace(log_density=lambda m, w: jnp.zeros(())),
                        *args, **kwargs)

    monkeypatch.setattr(FW, "PRIOR_FRACTION", 0.0)
    return flat_prior


@pytest.mark.parametrize("bug", ["no_proposal_ratio", "no_walk_prior_ratio",
                                 "beta_prior_variance"])
def test_an_injected_bug_fails_the_check(bug, monkeypatch):
    """Each bug breaks the invariance; the check above must see it."""
    if bug == "no_proposal_ratio":
        _without_proposal_ratio(monkeypatch)
    elif bug == "no_walk_prior_ratio":
        monkeypatch.setattr(FW, "update_frequency_weights", _without_walk_prior_ratio(
            monkeypatch))
    else:   # the target's β prior twice as wide as the model's (the proposal unchanged)
        original = FW.update_frequency_weights

        def wider(key, prior, X, W, kind, data, weights, *rest):
            return original(key, prior, X, W, kind, data,
                            weights._replace(precision=weights.precision / 2.0), *rest)

        monkeypatch.setattr(FW, "update_frequency_weights", wider)
    z, _ = paired_z("poisson")
    assert np.max(np.abs(z)) > critical_value(z.size), np.round(z, 2)

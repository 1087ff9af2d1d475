"""Log-likelihoods of the RFLVM as functions of the linear predictor ψ = offset + Φβ.

Two versions per likelihood:

* :func:`psi_log_lik` keeps only the terms that depend on ψ.  Every Metropolis–Hastings ratio
  and slice level in the sampler compares two values of ψ with everything else fixed, so the
  dropped terms (log-factorials, NB's Γ(y + r)/Γ(r)) cancel; leaving them out saves an lgamma
  per entry per proposal, the dominant cost of a frequency sweep on large count matrices.
* :func:`full_log_lik` is the normalised log p(y | ψ), from :mod:`gplvm.likelihoods` (tested
  against scipy.stats there), for traces and predictive densities.

Missing entries carry ``observed = 0`` and contribute exactly zero.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln, logsumexp

from gplvm.likelihoods import (Bernoulli, Binomial, Gaussian, Multinomial, NegativeBinomial,
                               Poisson)

Array = jax.Array


def softplus(x: Array) -> Array:
    """log(1 + e^x) as max(x, 0) + log1p(e^{−|x|}): the value ``jnp.logaddexp(x, 0)`` computes
    for finite x, without its NaN/inf branches and custom derivative, which measured ~4× slower
    inside the N × D sums of every proposal (issue 14)."""
    return jnp.maximum(x, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


def psi_log_lik(kind: str, Y: Array, psi: Array, trials: Array, noise_var: Array,
                dispersion: Array) -> Array:
    """ψ-dependent part of log p(y | ψ), elementwise (N, D); (N, 1) for the multinomial."""
    if kind == "gaussian":
        return -0.5 * (Y - psi) ** 2 / noise_var
    if kind == "poisson":
        return Y * psi - jnp.exp(psi)
    if kind in ("bernoulli", "binomial"):
        return Y * psi - trials * softplus(psi)
    if kind == "negative_binomial":
        return Y * psi - (Y + dispersion) * softplus(psi)
    if kind == "multinomial":
        L = jnp.concatenate([psi, jnp.zeros(psi.shape[:-1] + (1,), psi.dtype)], axis=-1)
        total = trials[..., :1]
        return (jnp.sum(Y[..., :-1] * psi, axis=-1, keepdims=True)
                - total * logsumexp(L, axis=-1, keepdims=True))
    raise ValueError(f"unknown likelihood {kind!r}")


def masked(kind: str, values: Array, observed: Array) -> Array:
    """Zero the unobserved entries (the multinomial's values are per row)."""
    if kind == "multinomial":
        return values * observed[..., :1]
    return values * observed


def row_log_lik(kind, Y, psi, observed, trials, noise_var, dispersion) -> Array:
    """Σ_j over observed entries of each row: (N,)."""
    vals = psi_log_lik(kind, Y, psi, trials, noise_var, dispersion)
    return jnp.sum(masked(kind, vals, observed), axis=-1)


def total_log_lik(kind, Y, psi, observed, trials, noise_var, dispersion) -> Array:
    """Σ over all observed entries of the ψ-dependent log-likelihood: a scalar."""
    return jnp.sum(row_log_lik(kind, Y, psi, observed, trials, noise_var, dispersion))


def log_lik_constant(kind: str, data, noise_var: Array, dispersion: Array):
    """Σ over observed entries of log p(y | ψ) − :func:`psi_log_lik`: the terms free of ψ, so
    that a ψ-dependent total already at hand (the X step's) becomes the normalised
    log-likelihood of :func:`full_log_lik` for the trace without a fresh N × D pass.

    Gaussian: −½ log(2πσ_j²) per observed entry.  Poisson and negative binomial: −log y!
    (summed once, ``data.log_factorial``) and (NB) log Γ(y + r_j) − log Γ(r_j), which vanish
    at y = 0, so only the entries with y > 0 (``data.nonzero``) are visited.  None where no
    such shortcut applies (other likelihoods, or data without those layouts): the caller then
    evaluates :func:`full_log_lik`.
    """
    if kind == "gaussian":
        n_obs = jnp.sum(data.observed, axis=0)
        return -0.5 * jnp.sum(n_obs * jnp.log(2.0 * jnp.pi * noise_var))
    if (kind not in ("poisson", "negative_binomial") or data.nonzero is None
            or data.log_factorial is None):
        return None
    if kind == "poisson":
        return -data.log_factorial
    y, col = data.nonzero
    r = dispersion[col]
    return jnp.sum(gammaln(y + r) - gammaln(r)) - data.log_factorial


def likelihood_object(kind: str, trials: Array, noise_var: Array, dispersion: Array):
    """The :mod:`gplvm.likelihoods` object for this state (for normalised densities, draws)."""
    if kind == "gaussian":
        return Gaussian(noise_var=noise_var)
    if kind == "poisson":
        return Poisson()
    if kind == "bernoulli":
        return Bernoulli()
    if kind == "binomial":
        return Binomial(n_trials=trials)
    if kind == "negative_binomial":
        return NegativeBinomial(dispersion=dispersion)
    if kind == "multinomial":
        return Multinomial(n_trials=trials[:, :1])
    raise ValueError(f"unknown likelihood {kind!r}")


def full_log_lik(kind, Y, psi, observed, trials, noise_var, dispersion) -> Array:
    """Normalised log p(y_ij | ψ_ij) per entry (N, D) (per row, (N, 1), for the multinomial),
    zero where unobserved."""
    lik = likelihood_object(kind, trials, noise_var, dispersion)
    vals = lik._log_prob(Y, psi)
    if kind == "multinomial":
        vals = vals[:, None]
    return masked(kind, vals, observed)

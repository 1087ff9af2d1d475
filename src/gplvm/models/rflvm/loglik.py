"""Log-likelihoods of the RFLVM as functions of the linear predictor ψ = offset + Φβ.

Two versions per likelihood, each the likelihood object's own (:mod:`gplvm.likelihoods`:
``_psi_log_prob``, ``_log_prob``), so that nothing here is written per likelihood:

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

from gplvm.likelihoods import likelihood_class

Array = jax.Array


def likelihood_object(kind: str, trials: Array, noise_var: Array, dispersion: Array):
    """The :mod:`gplvm.likelihoods` object of name ``kind`` at this state (its
    :meth:`~gplvm.likelihoods.AbstractLikelihood.from_state`): for densities and draws."""
    return likelihood_class(kind).from_state(trials, noise_var, dispersion)


def psi_log_lik(kind: str, Y: Array, psi: Array, trials: Array, noise_var: Array,
                dispersion: Array) -> Array:
    """ψ-dependent part of log p(y | ψ), elementwise (N, D); (N, 1) for a likelihood with one
    density per row (the multinomial): the likelihood's ``_psi_log_prob``."""
    return likelihood_object(kind, trials, noise_var, dispersion)._psi_log_prob(Y, psi)


def masked(values: Array, observed: Array) -> Array:
    """Zero the unobserved entries (values per row, (N, 1), take the row's mask)."""
    return values * observed[..., :values.shape[-1]]


def row_log_lik(kind, Y, psi, observed, trials, noise_var, dispersion) -> Array:
    """Σ_j over observed entries of each row: (N,)."""
    vals = psi_log_lik(kind, Y, psi, trials, noise_var, dispersion)
    return jnp.sum(masked(vals, observed), axis=-1)


def total_log_lik(kind, Y, psi, observed, trials, noise_var, dispersion) -> Array:
    """Σ over all observed entries of the ψ-dependent log-likelihood: a scalar."""
    return jnp.sum(row_log_lik(kind, Y, psi, observed, trials, noise_var, dispersion))


def log_lik_constant(kind: str, data, noise_var: Array, dispersion: Array):
    """Σ over observed entries of log p(y | ψ) − :func:`psi_log_lik`: the terms free of ψ, so
    that a ψ-dependent total already at hand (the X step's) becomes the normalised
    log-likelihood of :func:`full_log_lik` for the trace without a fresh N × D pass.

    The likelihood's ``_psi_free_total`` (Gaussian: −½ log(2πσ_j²) per observed entry;
    Poisson and negative binomial: −log y!, summed once, ``data.log_factorial``, and (NB)
    log Γ(y + r_j) − log Γ(r_j) over the entries with y > 0, ``data.nonzero``).  None where no
    such shortcut applies (other likelihoods, or data without those layouts): the caller then
    evaluates :func:`full_log_lik`.
    """
    return likelihood_object(kind, data.trials, noise_var, dispersion)._psi_free_total(data)


def full_log_lik(kind, Y, psi, observed, trials, noise_var, dispersion) -> Array:
    """Normalised log p(y_ij | ψ_ij) per entry (N, D) (per row, (N, 1), for a likelihood with
    one density per row), zero where unobserved."""
    lik = likelihood_object(kind, trials, noise_var, dispersion)
    vals = lik._log_prob(Y, psi)
    if vals.ndim < psi.ndim:
        vals = vals[..., None]
    return masked(vals, observed)

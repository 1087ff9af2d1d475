r"""The RFLVM's gradient-based block: (X, β, log r) jointly by NUTS given W (issue 30).

The Gibbs sweep of seed 000 moves X given β and β given X.  The two are coupled through
ψ = Φ(X)β (a rotation of a row's features can be undone by the weights), so one block at a
time crawls along that ridge: integrated autocorrelation times of ~400 sweeps for the
log-likelihood and ~1000 for latent distances on a 300-row Poisson S-curve (issue 30).  This
block moves them together, by one NUTS transition (:mod:`gplvm.inference.mcmc.nuts`) per sweep
on a well-scaled parametrisation; W (and the DP mixture over it) keep their own steps.

**Count likelihoods** — the position is (X, z, log r):

.. math::
    \beta_{pj} = \mu_{pj}(r) + z_{pj} / \sqrt{\lambda_p}, \qquad
    \mu_{pj}(r) = \bar c_j - \log r_j \ \text{(intercept row, NB)}, \text{else } \bar\beta_{pj},

a non-centred (whitened) β: z ~ N(0, I) a priori, λ_p the prior precision of row p
(:class:`.spec.RFLVMData`), c̄_j the intercept's empirical centre.  Under the negative binomial
the intercept's prior is on the log-mean c_j + log r_j (:func:`.init.nb_prior_mean`), so a move
of log r_j at fixed z leaves the mean r e^ψ unchanged and changes only the dispersion — the
direction the mean-preserving Metropolis moves of :mod:`.dispersion` were written for.  The
log-density is

.. math::
    \sum_{nj} \log p(y_{nj} \mid \psi_{nj}) - \tfrac12\|X\|^2 - \tfrac12\|z\|^2
    + \sum_j \big(a_0 \log r_j - h r_j\big),

the last term the Ga(a0, rate h) prior of r_j with the Jacobian of log r (NB only; h keeps its
conjugate step).  The ψ-dependent terms come from :func:`.loglik.psi_log_lik`; the NB's
log Γ(y + r) − log Γ(r), which depend on r, are summed over the positive counts only.

**Gaussian** — β is integrated out (seed 000, App. A: y_j | X, W, σ_j² ~ N(0, σ_j²(I + s0ΦΦᵀ)),
:mod:`.weights`), so the position is X alone and its log-density the collapsed marginal
(:func:`.weights.collapsed_log_marginal`) plus −½‖X‖²; β is drawn from its conjugate
conditional right after.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from gplvm.inference.mcmc.nuts import NUTSTuning, adapt, nuts_transition, tuning_init
from gplvm.models._rflvm.features import design
from gplvm.models._rflvm.loglik import total_log_lik
from gplvm.models._rflvm.spec import RFLVMData, RFLVMSpec, RFLVMState
from gplvm.models._rflvm.weights import collapsed_log_marginal, collapsed_terms

Array = jax.Array

#: the first step size before dual averaging has seen a transition
INITIAL_STEP_SIZE = 0.1


def n_position(spec: RFLVMSpec, n_rows: int) -> int:
    """Length of the flat position: NQ (+ PD for β, + D for log r)."""
    n = n_rows * spec.n_components
    if spec.likelihood == "gaussian":
        return n
    n += spec.n_weights * spec.n_outputs
    return n + (spec.n_outputs if spec.likelihood == "negative_binomial" else 0)


def init_tuning(spec: RFLVMSpec, n_rows: int, dtype, burn_in: int = 0) -> NUTSTuning:
    """Unit mass and the initial step size (:func:`gplvm.inference.mcmc.nuts.tuning_init`),
    adapted over ``burn_in`` sweeps (0: a fixed kernel)."""
    return tuning_init(n_position(spec, n_rows), INITIAL_STEP_SIZE, dtype, burn_in)


def _beta_mean(spec: RFLVMSpec, data: RFLVMData, log_r: Array | None) -> Array:
    if log_r is None:
        return data.beta_prior_mean
    return data.beta_prior_mean.at[-1].add(-log_r)


def to_position(spec: RFLVMSpec, data: RFLVMData, state: RFLVMState) -> Array:
    """The chain's (X, z, log r) as one flat vector."""
    parts = [state.X.ravel()]
    if spec.likelihood != "gaussian":
        log_r = jnp.log(state.dispersion) if spec.likelihood == "negative_binomial" else None
        z = (state.beta - _beta_mean(spec, data, log_r)) * jnp.sqrt(data.beta_prior_prec)[:, None]
        parts.append(z.ravel())
        if log_r is not None:
            parts.append(log_r)
    return jnp.concatenate(parts)


def from_position(spec: RFLVMSpec, data: RFLVMData, position: Array):
    """(X, β, log r or None) from the flat vector of :func:`to_position`."""
    N, Q = data.Y.shape[0], spec.n_components
    X = position[:N * Q].reshape(N, Q)
    if spec.likelihood == "gaussian":
        return X, None, None
    P, D = spec.n_weights, spec.n_outputs
    z = position[N * Q:N * Q + P * D].reshape(P, D)
    log_r = position[N * Q + P * D:] if spec.likelihood == "negative_binomial" else None
    beta = _beta_mean(spec, data, log_r) + z / jnp.sqrt(data.beta_prior_prec)[:, None]
    return X, beta, log_r


def log_density(spec: RFLVMSpec, data: RFLVMData, W: Array, noise_var: Array,
                dispersion_rate: Array, Y: Array | None = None) -> Callable[[Array], Array]:
    """The log-density of the block's position given W (and σ², h), up to a constant;
    ``Y`` the Gaussian's data with its missing entries filled (``RFLVMState.Y_fill``)."""
    kind = spec.likelihood

    if kind == "gaussian":
        yy = jnp.sum(Y**2, axis=0)
        s0 = spec.beta_prior_var

        def gaussian(position):
            X, _, _ = from_position(spec, data, position)
            Phi = design(X, W, False)
            terms = collapsed_terms(Phi.T @ Phi, Phi.T @ Y, s0)
            return (collapsed_log_marginal(terms, yy, noise_var, X.shape[0], s0)
                    - 0.5 * jnp.sum(X**2))
        return gaussian

    a0 = spec.dispersion_prior[0]

    def counts(position):
        X, beta, log_r = from_position(spec, data, position)
        psi = design(X, W, spec.intercept) @ beta + data.offset
        r = None if log_r is None else jnp.exp(log_r)
        value = total_log_lik(kind, data.Y, psi, data.observed, data.trials, noise_var,
                              jnp.ones_like(noise_var) if r is None else r)
        n_x = X.size
        value = value - 0.5 * jnp.sum(X**2) - 0.5 * jnp.sum(position[n_x:n_x + beta.size]**2)
        if r is not None:
            y, col = data.nonzero
            value = (value + jnp.sum(gammaln(y + r[col]) - gammaln(r[col]))
                     + jnp.sum(a0 * log_r - dispersion_rate * r))
        return value
    return counts


def update_joint(key: Array, spec: RFLVMSpec, data: RFLVMData, state: RFLVMState,
                 tuning: NUTSTuning, Y: Array | None = None):
    """One NUTS transition of the block, then the tuning's adaptation for this sweep.

    Args:
        Y: the Gaussian's data with missing entries filled (ignored for counts).

    Returns:
        (X, β (None for the Gaussian), r (None unless NB), new tuning).
    """
    fn = log_density(spec, data, state.W, state.noise_var, state.dispersion_rate, Y)
    position = to_position(spec, data, state)
    new, _, accept, n_steps, _ = nuts_transition(key, position, fn, tuning,
                                                 spec.max_doublings)
    tuning = adapt(tuning, new, accept, state.n_sweeps)
    tuning = tuning._replace(accept=accept, n_steps=n_steps)
    X, beta, log_r = from_position(spec, data, new)
    return X, beta, None if log_r is None else jnp.exp(log_r), tuning

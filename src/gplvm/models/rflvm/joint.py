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
(:class:`.spec.RFLVMData`), c̄_j the intercept's empirical centre — except that the intercept
row of z whitens the *centred* intercept c_j = β_0j + m(X)ᵀβ_rest,j, m(X) the mean over rows
of the other features.  The cosine features have a non-zero mean, so under large counts the
intercept and every weight trade off along a narrow ridge (the intercept's posterior sd is
~1/√(Σ_n y_nj)); the shear (X, β_rest, β_0) ↦ (X, β_rest, c) removes it, has unit Jacobian,
and needs β's prior written in β itself, −½ Σ_p λ_p ‖β_p − μ_p‖², in place of −½‖z‖².  Under the negative binomial
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

**The frequencies** join the position whenever their prior has a density (the DP mixture's
component of each w_m, or a kernel with a closed-form spectral density: :func:`has_frequencies`):
the features depend on X and W only through XWᵀ, so the latents and the frequencies are
coupled as strongly as the latents and the weights, and a Metropolis step on W given (X, β)
left the log-likelihood with an integrated autocorrelation time of hundreds of sweeps even
with this block mixing well given W (issue 30's note).  The position is then (X, W, z, log r)
and the log-density gains Σ_m log p(w_m) (:class:`.frequencies.FrequencyPrior`); the DP
mixture over W keeps its own step, and W's Metropolis step stays in the sweep as well (its
independence proposals from the prior are cheap and can jump where gradients cannot).  Under
a fixed kernel with one length-scale the posterior does not change along (XO, WO), O
orthogonal, and the position holds the orbit's canonical point instead, followed by a Haar
rotation (:mod:`.gauge`).

**Gaussian** — β is integrated out (seed 000, App. A: y_j | X, W, σ_j² ~ N(0, σ_j²(I + s0ΦΦᵀ)),
:mod:`.weights`), so the position is X alone and its log-density the collapsed marginal
(:func:`.weights.collapsed_log_marginal`) plus −½‖X‖²; β is drawn from its conjugate
conditional right after.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from gplvm.inference.mcmc.nuts import NUTSTuning, adapt, nuts_transition, tuning_init
from gplvm.models.rflvm import gauge
from gplvm.models.rflvm.dispersion import log_gamma_ratio
from gplvm.models.rflvm.features import design
from gplvm.models.rflvm.loglik import total_log_lik
from gplvm.models.rflvm.spec import RFLVMData, RFLVMSpec, RFLVMState
from gplvm.models.rflvm.weights import collapsed_log_marginal, collapsed_terms

Array = jax.Array

#: the first step size before dual averaging has seen a transition
INITIAL_STEP_SIZE = 0.1


def has_frequencies(spec: RFLVMSpec, data: RFLVMData) -> bool:
    """Whether W is part of the position: its prior has a density (the DP mixture's components,
    or the fixed kernel's closed-form spectral density).  Static: decided by the spec and the
    kernel's type."""
    if spec.frequencies == "fixed":
        return False
    if spec.learn_kernel:
        return True
    try:
        data.kernel.log_spectral_density(jnp.zeros((1, spec.n_components)))
    except NotImplementedError:
        return False
    return True


def n_frequency_coords(spec: RFLVMSpec, data: RFLVMData) -> int:
    """W's coordinates in the position: (M/2)Q, less Q(Q − 1)/2 when the block moves (X, W)
    modulo rotations (:mod:`.gauge`); 0 when W is not in it."""
    if not has_frequencies(spec, data):
        return 0
    if gauge.applies(spec, data):
        return gauge.n_coords(spec.n_freq, spec.n_components)
    return spec.n_freq * spec.n_components


def n_position(spec: RFLVMSpec, data: RFLVMData) -> int:
    """Length of the flat position: NQ (+ W's coordinates, + PD for β, + D for log r)."""
    n = data.Y.shape[0] * spec.n_components + n_frequency_coords(spec, data)
    if spec.collapsed:
        return n
    n += spec.n_weights * spec.n_outputs
    return n + (spec.n_outputs if spec.dispersed else 0)


def init_tuning(spec: RFLVMSpec, data: RFLVMData, dtype, burn_in: int = 0) -> NUTSTuning:
    """Unit mass and the initial step size (:func:`gplvm.inference.mcmc.nuts.tuning_init`),
    adapted over ``burn_in`` sweeps (0: a fixed kernel)."""
    return tuning_init(n_position(spec, data), INITIAL_STEP_SIZE, dtype, burn_in)


def _beta_mean(spec: RFLVMSpec, data: RFLVMData, log_r: Array | None) -> Array:
    if log_r is None:
        return data.beta_prior_mean
    return data.beta_prior_mean.at[-1].add(-log_r)


def _feature_means(spec: RFLVMSpec, X: Array, W: Array) -> Array:
    """m(X): (P − 1,) the mean over rows of each feature but the intercept."""
    return jnp.mean(design(X, W, False), axis=0)


def to_position(spec: RFLVMSpec, data: RFLVMData, state: RFLVMState) -> Array:
    """The chain's (X, W, z, log r) as one flat vector (W only if :func:`has_frequencies`);
    the intercept row of z is that of the centred intercept c = β_0 + m(X)ᵀβ_rest (module
    docstring)."""
    X, W = state.X, state.W
    turned = gauge.applies(spec, data)
    if turned:                           # the orbit's canonical point (:mod:`.gauge`)
        X, W = gauge.canonical(X, W)
    parts = [X.ravel()]
    if has_frequencies(spec, data):
        parts.append(gauge.pack(W) if turned else W.ravel())
    if not spec.collapsed:
        log_r = jnp.log(state.dispersion) if spec.dispersed else None
        beta = state.beta
        if spec.intercept:
            centred = beta[-1] + _feature_means(spec, X, W) @ beta[:-1]
            beta = beta.at[-1].set(centred)
        z = (beta - _beta_mean(spec, data, log_r)) * jnp.sqrt(data.beta_prior_prec)[:, None]
        parts.append(z.ravel())
        if log_r is not None:
            parts.append(log_r)
    return jnp.concatenate(parts)


def from_position(spec: RFLVMSpec, data: RFLVMData, position: Array, W_given=None,
                  centre=None):
    """(X, W or None, β or None, log r or None) from the flat vector of :func:`to_position`;
    ``W_given`` the frequencies when they are not in the position (they centre the
    intercept); ``centre`` a fixed m in place of m(X) (for :mod:`.map_start`'s curvature)."""
    N, Q = data.Y.shape[0], spec.n_components
    X = position[:N * Q].reshape(N, Q)
    start = N * Q
    W = None
    n_w = n_frequency_coords(spec, data)
    if gauge.applies(spec, data):
        W = gauge.unpack(position[start:start + n_w], spec.n_freq, Q)
    elif n_w:
        W = position[start:start + n_w].reshape(spec.n_freq, Q)
    start += n_w
    if spec.collapsed:
        return X, W, None, None
    P, D = spec.n_weights, spec.n_outputs
    z = position[start:start + P * D].reshape(P, D)
    log_r = position[start + P * D:] if spec.dispersed else None
    beta = _beta_mean(spec, data, log_r) + z / jnp.sqrt(data.beta_prior_prec)[:, None]
    if spec.intercept:
        means = (_feature_means(spec, X, W_given if W is None else W) if centre is None
                 else centre)
        beta = beta.at[-1].add(-means @ beta[:-1])
    return X, W, beta, log_r


def state_at(spec: RFLVMSpec, data: RFLVMData, state: RFLVMState,
             position: Array) -> RFLVMState:
    """``state`` with X, and W, β, r where they are in the position, read from ``position``
    (:func:`from_position`)."""
    X, W, beta, log_r = from_position(spec, data, position, state.W)
    state = state._replace(X=X)
    if W is not None:
        state = state._replace(W=W)
    if beta is not None:
        state = state._replace(beta=beta)
    if log_r is not None:
        state = state._replace(dispersion=jnp.exp(log_r))
    return state


def log_density(spec: RFLVMSpec, data: RFLVMData, W: Array, noise_var: Array,
                dispersion_rate: Array, Y: Array | None = None,
                log_prior_W=None, centre=None) -> Callable[[Array], Array]:
    """The log-density of the block's position given (W unless it is in the position), σ²
    and h, up to a constant; ``Y`` the Gaussian's data with its missing entries filled
    (``RFLVMState.Y_fill``); ``log_prior_W`` the frequencies' prior W ↦ log p(W)
    (``FrequencyPrior.total``), needed when W is in the position; ``centre`` a
    fixed m in place of m(X) in the intercept's centring (:func:`from_position`): another
    density, whose rows of X are independent again (:mod:`.map_start` takes its curvature)."""
    kind = spec.likelihood
    fixed_W = W

    def frequencies(W_pos):
        if W_pos is None:
            return fixed_W, 0.0
        log_prior = log_prior_W(W_pos)
        if gauge.applies(spec, data):      # the canonical point's density (:mod:`.gauge`)
            log_prior = log_prior + gauge.log_jacobian(W_pos)
        return W_pos, log_prior

    if spec.collapsed:
        yy = jnp.sum(Y**2, axis=0)
        s0 = spec.beta_prior_var

        def gaussian(position):
            X, W_pos, _, _ = from_position(spec, data, position, fixed_W)
            W, log_prior = frequencies(W_pos)
            Phi = design(X, W, False)
            terms = collapsed_terms(Phi.T @ Phi, Phi.T @ Y, s0)
            return (collapsed_log_marginal(terms, yy, noise_var, X.shape[0], s0)
                    - 0.5 * jnp.sum(X**2) + log_prior)
        return gaussian

    a0 = spec.dispersion_prior[0]

    def counts(position):
        X, W_pos, beta, log_r = from_position(spec, data, position, fixed_W, centre)
        W, log_prior = frequencies(W_pos)
        psi = design(X, W, spec.intercept) @ beta + data.offset
        r = None if log_r is None else jnp.exp(log_r)
        value = total_log_lik(kind, data.Y, psi, data.observed, data.trials, noise_var,
                              jnp.ones_like(noise_var) if r is None else r)
        # β's prior in β itself (the centred intercept is a shear of unit Jacobian)
        dev = beta - _beta_mean(spec, data, log_r)
        value = (value - 0.5 * jnp.sum(X**2) + log_prior
                 - 0.5 * jnp.sum(data.beta_prior_prec[:, None] * dev**2))
        if r is not None:       # Σ log Γ(y + r) − log Γ(r), from the positive counts' layout
            value = (value + jnp.sum(log_gamma_ratio(data.Y, data.observed, r, data.nonzero))
                     + jnp.sum(a0 * log_r - dispersion_rate * r))
        return value
    return counts


def update_joint(key: Array, spec: RFLVMSpec, data: RFLVMData, state: RFLVMState,
                 Y: Array | None = None, log_prior_W=None) -> RFLVMState:
    """One NUTS transition of the block from ``state`` (its ``tuning``), then the tuning's
    adaptation for this sweep.

    Args:
        Y: the Gaussian's data with missing entries filled (ignored for counts).
        log_prior_W: the frequencies' prior (:func:`log_density`).

    Returns:
        the state with the block's new X, W, β, r (:func:`state_at`) and the new tuning.
    """
    fn = log_density(spec, data, state.W, state.noise_var, state.dispersion_rate, Y,
                     log_prior_W)
    position = to_position(spec, data, state)
    turned = gauge.applies(spec, data)
    if turned:
        key, key_rotation = jax.random.split(key)
    new, _, accept, n_steps, _ = nuts_transition(key, position, fn, state.tuning,
                                                 spec.max_doublings)
    tuning = adapt(state.tuning, new, accept, state.n_sweeps)
    tuning = tuning._replace(accept=accept, n_steps=n_steps)
    state = state_at(spec, data, state, new)._replace(tuning=tuning)
    if turned:      # a uniform point of the orbit: the Gibbs step along it (:mod:`.gauge`)
        X, W = gauge.rotate(key_rotation, state.X, state.W)
        state = state._replace(X=X, W=W)
    return state

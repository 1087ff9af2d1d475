r"""One Gibbs sweep of the RFLVM (seed 000, §3.1), for one chain.

Order of the blocks (each is an exact conditional update, so the composition leaves the joint
posterior invariant; the Gaussian model is a partially collapsed Gibbs sampler in the sense of
van Dyk & Park (2008): the W and σ² steps integrate β out and β is drawn right after them,
before any step that conditions on it):

* Gaussian: W | X, σ², Y (β out, eq. 22) → σ² | X, W, Y (β out) → β | X, W, σ², Y →
  X | β, W, σ², Y_obs (missing entries out) → missing y | β, X, W, σ².
* Pólya-gamma family: ω | β (PG(b, ψ), eq. 28) → β | ω (eq. 28 / eqs. 35–36 column by column
  for the multinomial) → W | β, X (eq. 22) → X | β, W.
* Poisson and negative binomial: β | X, W, r (elliptical slice, :mod:`.weights_ess`; the
  paper's ω | β → β | ω for the NB with ``spec.nb_beta = 'polya_gamma'``) → NB: r_j by CRT
  (eqs. 30–31, corrected) and its prior rate h, then mean-preserving Metropolis moves of
  (r_j, intercept_j) (:mod:`.dispersion`) → W | β, X (eq. 22) → X | β, W.
* any other likelihood (one the library does not ship, docs/contract.md "Adding a
  likelihood"): β | X, W by an elliptical slice per column under a working Gaussian from the
  likelihood's own gradient and curvature (:func:`.weights_ess.sample_beta_slice`) →
  W | β, X → X | β, W.

The blocks ask the likelihood object (:mod:`gplvm.likelihoods`) for its ψ-dependent density,
curvature and Pólya-gamma parameters, and choose among these steps by its declared traits
(``conjugate_normal``, ``supports_polya_gamma``, ``log_rate_slice``, ``sampled_parameter``,
``row_density``), never by its name.

then, under kernel learning, the DP mixture on W (eqs. 23–25).

With ``spec.sampler = 'nuts'`` (issue 30) the β and X steps are one NUTS transition of
(X, β, log r) given W (:mod:`.joint`):

* Gaussian: W | X, σ², Y (β out) → σ² | X, W, Y (β out) → X | W, σ², Y (β out, NUTS) →
  (X, W) ↦ (cX, W/c) → β | X, W, σ², Y → missing y | β, X, W, σ².
* counts: (X, β, log r) | W, h (NUTS) → NB: h | r → W | β, X → (X, W) ↦ (cX, W/c).

With ``spec.dp_components = 'integrated'`` (DP kernel) the NUTS block and the scale move
target the frequencies' prior with every DP component (μ_k, Σ_k) integrated out given the
assignments (:func:`gplvm.samplers._niw.niw_log_marginal`), and the components are drawn
from their NIW posteriors right after (:func:`_block_integrated`), before W's Metropolis
pass and the DP sweep read them:

* Gaussian: … → X, W | σ², Y, z (β and (μ, Σ) out, NUTS) → (X, W) ↦ (cX, W/c) | z →
  (μ, Σ) | W, z → β | … .
* counts: (X, W, β, log r) | h, z (NUTS) → (X, W) ↦ (cX, W/c) | z → (μ, Σ) | W, z →
  NB: h | r → W | β, X, μ, Σ.

The scale moves (:mod:`.scale`) leave Φ unchanged and move the direction that the blocks
given each other cannot: the kernel's length-scale against the latents' spread.

X, β (Poisson, NB) and W are moved by the kernels of :mod:`gplvm.inference.mcmc` (elliptical
slice, Metropolis–Hastings); the state after the sweep carries their ``Info`` summarised:
``accept_W``, ``n_proposals_X``, ``n_proposals_beta`` (:class:`.spec.RFLVMState`).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax

from gplvm.models.rflvm.dispersion import (NBParams, mean_preserving_moves,
                                            update_dispersion_crt)
from gplvm.models.rflvm.features import design
from gplvm.models.rflvm.init import nb_prior_mean
from gplvm.models.rflvm.joint import update_joint
from gplvm.models.rflvm.frequencies import (FrequencyPrior, GivenBeta, frequency_prior,
                                             update_frequencies_collapsed,
                                             update_frequencies_given_beta)
from gplvm.models.rflvm.latents import (_row_ll_fn, map_x_dynamic, map_x_static,
                                          update_time_params, update_x_dynamic,
                                          update_x_static)
from gplvm.models.rflvm.loglik import full_log_lik, likelihood_object, log_lik_constant
from gplvm.models.rflvm.scale import scale_moves
from gplvm.models.rflvm.spec import MapParams, RFLVMData, RFLVMSpec, RFLVMState
from gplvm.models.rflvm.weights import (collapsed_terms, sample_beta_pg,
                                         sample_beta_pg_column, sample_noise_var,
                                         sample_beta_gaussian)
from gplvm.models.rflvm.weights_ess import BetaPrior, sample_beta_ess, sample_beta_slice
from gplvm.samplers import polya_gamma
from gplvm.samplers._niw import niw_log_marginal
from gplvm.samplers.dp_mixture import default_niw_prior, dp_update, sample_cluster_params

Array = jax.Array


def prior_W(key: Array, spec: RFLVMSpec, data: RFLVMData, state: RFLVMState) -> FrequencyPrior:
    """The prior of every w_m: its DP component, or the fixed kernel's spectral density; its
    ``total`` the DP components integrated out given the assignments where
    ``spec.integrates_components`` (:func:`_integrated_prior`)."""
    prior = frequency_prior(key, state.dp if spec.learn_kernel else None, data.kernel,
                            spec.n_freq, spec.n_components, state.W.dtype)
    if spec.integrates_components:
        prior = prior._replace(total=_integrated_prior(spec, state))
    return prior


def _integrated_prior(spec: RFLVMSpec, state: RFLVMState) -> Callable[[Array], Array]:
    """W ↦ log p(W | z), every DP component integrated out under the NIW base."""
    base, z = default_niw_prior(spec.n_components), state.dp.z
    return lambda W: niw_log_marginal(W, z, base, spec.n_freq)


def _block_integrated(key: Array, spec: RFLVMSpec, data: RFLVMData, state: RFLVMState,
                      Y: Array | None = None) -> RFLVMState:
    """The NUTS block and the scale move with the DP components integrated out of their
    target, then every (μ_k, Σ_k) drawn from its NIW posterior given the members' new W: the
    marginal-then-conditional block, which leaves p(X, W, β, μ, Σ | z) invariant."""
    k_joint, k_scale, k_components = jax.random.split(key, 3)
    total = _integrated_prior(spec, state)
    state = update_joint(k_joint, spec, data, state, Y, total)
    X, W, _ = scale_moves(k_scale, state.X, state.W, total)
    dp = sample_cluster_params(k_components, W, state.dp, default_niw_prior(spec.n_components))
    return state._replace(X=X, W=W, dp=dp)


def _fraction(n_acc: Array | None, n_freq: int, dtype) -> Array:
    """Accepted fraction in the state's float dtype (an int32 count divided by a Python int is
    float32, which would change the state's type after the first sweep); NaN when W was not
    moved (``frequencies='fixed'``: no proposals)."""
    if n_acc is None:
        return jnp.full((), jnp.nan, dtype)
    return n_acc.astype(dtype) / n_freq


def _frequencies_given_beta(key: Array, spec: RFLVMSpec, prior: FrequencyPrior, X: Array,
                            W: Array, data: RFLVMData, given: Callable[[], GivenBeta]):
    """(W, accepted count) of W's Metropolis pass given β (:func:`.frequencies.
    update_frequencies_given_beta`, count likelihoods); with ``frequencies='fixed'`` W as it
    is and None (``given``, which forms Φ and Φβ, is then not called)."""
    if spec.frequencies == "fixed":
        return W, None
    return update_frequencies_given_beta(key, prior, X, W, spec.likelihood, data, given())


def _moves_scale(spec: RFLVMSpec, prior: FrequencyPrior) -> bool:
    """Whether the sweep makes the joint scale move (:mod:`.scale`): W is sampled and its
    prior has a density."""
    return spec.frequencies == "sampled" and prior.log_density is not None


def _pg_params(spec: RFLVMSpec, data: RFLVMData, state: RFLVMState):
    """(b, κ) of eq. 26 per entry, the likelihood's ``polya_gamma_params`` (binomial: b = n,
    κ = y − n/2; NB: b = y + r, κ = (y − r)/2; multinomial: b = N_i, κ = y_ij − N_i/2,
    eqs. 36–37); b = 1 and κ = 0 where unobserved (ω is zeroed there)."""
    _, b, kappa = _likelihood(spec, data, state).polya_gamma_params(data.Y)
    return jnp.where(data.observed > 0, b, 1.0), kappa * data.observed


def _likelihood(spec: RFLVMSpec, data: RFLVMData, state: RFLVMState):
    """The likelihood object at the chain's state (:func:`.loglik.likelihood_object`)."""
    return likelihood_object(spec.likelihood, data.trials, state.noise_var, state.dispersion)


def _update_weights_pg(key, spec, data, state, Phi):
    key_omega, key_beta = jax.random.split(key)
    b, kappa = _pg_params(spec, data, state)
    if spec.family.row_density:       # columns coupled: each given the others (eq. 35)
        return _update_weights_multinomial(key, data, state, Phi, b, kappa)
    psi = Phi @ state.beta + data.offset
    omega = polya_gamma(key_omega, b, psi) * data.observed
    offset = jnp.broadcast_to(data.offset, psi.shape)
    return sample_beta_pg(key_beta, Phi, omega, kappa, offset,
                          nb_prior_mean(spec, data, state.dispersion), data.beta_prior_prec)


def _update_weights_multinomial(key, data, state, Phi, b, kappa):
    """Columns j = 1..J−1 in turn: ω_j | β, then β_j | ω_j with ξ_j from the others (eq. 35)."""
    D = state.beta.shape[1]

    def body(carry, inputs):
        beta, F = carry
        j, key = inputs
        key_omega, key_beta = jax.random.split(key)
        L = jnp.concatenate([F, jnp.zeros((F.shape[0], 1), F.dtype)], axis=1)
        # ξ_ij = log Σ_{k≠j} e^{f_ik}, the reference category's e^0 included (eq. 32).
        others = jax.scipy.special.logsumexp(jnp.where(jnp.arange(D + 1) == j, -jnp.inf, L),
                                             axis=1)
        psi = F[:, j] - others
        omega = polya_gamma(key_omega, b[:, j], psi) * data.observed[:, j]
        beta_j = sample_beta_pg_column(key_beta, Phi, omega, kappa[:, j], -others,
                                       data.beta_prior_mean[:, j], data.beta_prior_prec)
        beta = beta.at[:, j].set(beta_j)
        return (beta, F.at[:, j].set(Phi @ beta_j)), None

    F = Phi @ state.beta
    (beta, _), _ = lax.scan(body, (state.beta, F), (jnp.arange(D), jax.random.split(key, D)))
    return beta


def _sweep_gaussian(key, spec, data, state, inducing_times):
    k_w, k_prop, k_s2, k_beta, k_fill, k_x = jax.random.split(key, 6)
    s0 = spec.beta_prior_var
    Y = state.Y_fill
    N = Y.shape[0]
    prior = prior_W(k_prop, spec, data, state)
    if spec.frequencies == "fixed":
        Phi = design(state.X, state.W, False)
        W, n_acc, gram, PtY = state.W, None, Phi.T @ Phi, Phi.T @ Y
    else:
        W, n_acc, (gram, PtY) = update_frequencies_collapsed(k_w, prior, state.X, state.W, Y,
                                                             state.noise_var, s0)
    terms = collapsed_terms(gram, PtY, s0)
    yy = jnp.sum(Y**2, axis=0)
    noise_var = sample_noise_var(k_s2, terms, yy, N, spec.noise_prior)
    beta = sample_beta_gaussian(k_beta, terms, noise_var)
    state = state._replace(W=W, beta=beta, noise_var=noise_var,
                           accept_W=_fraction(n_acc, spec.n_freq, Y.dtype),
                           n_proposals_beta=jnp.full((), jnp.nan, Y.dtype))
    if spec.sampler == "nuts":
        # X given the filled data with β integrated out, then β given the new X
        k_joint, k_beta_new, k_scale = jax.random.split(k_x, 3)
        if spec.integrates_components:
            state = _block_integrated(k_joint, spec, data, state, Y)
            X, W = state.X, state.W
        else:
            state = update_joint(k_joint, spec, data, state, Y, prior.total)
            X, W = state.X, state.W
            if _moves_scale(spec, prior):       # (X, W) -> (cX, W/c): Φ, β unchanged
                X, W, _ = scale_moves(k_scale, X, W, prior.total)
        Phi = design(X, W, False)
        terms = collapsed_terms(Phi.T @ Phi, Phi.T @ Y, s0)
        beta = sample_beta_gaussian(k_beta_new, terms, noise_var)
        state = state._replace(X=X, W=W, beta=beta)
        log_lik = None
    else:
        # X given the observed entries only (the missing ones integrated out), then the
        # missing entries redrawn at the new X: a partially collapsed step followed by the
        # draw it needs.
        state, log_lik = _update_latents(k_x, spec, data, state, inducing_times)
    beta = state.beta

    def fill():
        F = design(state.X, W, False) @ beta
        draw = F + jnp.sqrt(noise_var) * jax.random.normal(k_fill, F.shape, F.dtype)
        return jnp.where(data.observed > 0, data.Y, draw)

    # with nothing missing the draw would be discarded entry by entry: skip it (an N × M × D
    # product and N × D normal draws; Y_fill is then data.Y either way)
    Y_fill = lax.cond(jnp.all(data.observed > 0), lambda: data.Y, fill)
    return state._replace(Y_fill=Y_fill), log_lik


def _sweep_counts_nuts(key, spec, data, state):
    """(X, W, β, log r) | h, DP by NUTS (W given, where its prior has no density) → NB:
    h | r (eq. 29's hierarchy) → W | β, X by Metropolis → (X, W) ↦ (cX, W/c)."""
    k_joint, k_h, k_w, k_prop, k_scale = jax.random.split(key, 5)
    if spec.integrates_components:      # W's Metropolis pass then reads the fresh components
        state = _block_integrated(k_joint, spec, data, state)
        prior = prior_W(k_prop, spec, data, state)
    else:
        prior = prior_W(k_prop, spec, data, state)
        state = update_joint(k_joint, spec, data, state, log_prior_W=prior.total)
    X, beta = state.X, state.beta
    if spec.dispersed:                          # h | r
        r = state.dispersion
        _, b0, g0 = spec.dispersion_prior
        shape = b0 + r.shape[0] * spec.dispersion_prior[0]
        h = jax.random.gamma(k_h, shape, dtype=r.dtype) / (g0 + jnp.sum(r))
        state = state._replace(dispersion_rate=h)

    def given():                                # Φ and Φβ at the block's new X
        Phi = design(X, state.W, spec.intercept)
        return GivenBeta(beta, state.noise_var, state.dispersion, Phi, Phi @ beta)

    W, n_acc = _frequencies_given_beta(k_w, spec, prior, X, state.W, data, given)
    if _moves_scale(spec, prior) and not spec.integrates_components:   # (cX, W/c): Φ unchanged
        X, W, _ = scale_moves(k_scale, X, W, prior.total)
    return state._replace(X=X, W=W, accept_W=_fraction(n_acc, spec.n_freq, X.dtype)), None


def _sweep_counts(key, spec, data, state, inducing_times):
    if spec.sampler == "nuts":
        return _sweep_counts_nuts(key, spec, data, state)
    k_beta, k_r, k_w, k_prop, k_x, k_move = jax.random.split(key, 6)
    Phi = design(state.X, state.W, spec.intercept)
    if spec.polya_gamma:
        beta = _update_weights_pg(k_beta, spec, data, state, Phi)
        n_proposals = jnp.full((), jnp.nan, Phi.dtype)       # exact conditional draw
        F = Phi @ beta                               # ψ without the offset, shared below
    elif spec.family.log_rate_slice:   # the slice carries Φβ along with β: F comes with it
        prior = BetaPrior(nb_prior_mean(spec, data, state.dispersion), data.beta_prior_prec)
        beta, n_proposals, F = sample_beta_ess(k_beta, Phi, state.beta, data, prior,
                                               state.dispersion if spec.dispersed else None)
    else:   # any other likelihood: elliptical slice under β's prior
        prior = BetaPrior(data.beta_prior_mean, data.beta_prior_prec)
        beta, n_proposals, F = sample_beta_slice(k_beta, Phi, state.beta, data, prior,
                                                 _likelihood(spec, data, state))
    state = state._replace(beta=beta, n_proposals_beta=n_proposals)
    if spec.dispersed:
        def update():
            psi = F + data.offset
            r, h = update_dispersion_crt(
                k_r, data, psi, NBParams(state.dispersion, state.dispersion_rate, beta[-1]),
                spec.dispersion_prior, (data.beta_prior_mean[-1], data.beta_prior_prec[-1]))
            r, c, psi, _ = mean_preserving_moves(k_move, data, psi, NBParams(r, h, beta[-1]),
                                                 spec.dispersion_prior[0])
            return r, h, beta.at[-1].set(c), psi - data.offset

        def hold():                      # X warm-up: r stays at its start (spec docstring)
            return state.dispersion, state.dispersion_rate, beta, F

        if spec.map_sweeps > 0:
            r, h, beta, F = lax.cond(state.n_sweeps < spec.map_sweeps, hold, update)
        else:
            r, h, beta, F = update()
        state = state._replace(beta=beta, dispersion=r, dispersion_rate=h)
    W, n_acc = _frequencies_given_beta(
        k_w, spec, prior_W(k_prop, spec, data, state), state.X, state.W, data,
        lambda: GivenBeta(beta, state.noise_var, state.dispersion, Phi, F))
    state = state._replace(W=W, accept_W=_fraction(n_acc, spec.n_freq, Phi.dtype))
    return _update_latents(k_x, spec, data, state, inducing_times)


def _update_latents(key, spec, data, state, inducing_times):
    """X given the map θ = (W, β, σ², r) and the observed entries of ``data``, by elliptical
    slice (or, in the first ``spec.map_sweeps`` sweeps, uphill), with the mean number of
    ellipse points per block (NaN in a MAP sweep).

    Returns:
        (state, Σ over observed entries of :func:`.loglik.psi_log_lik` at the new X, or None
        for the dynamic model, whose slices move columns and keep no per-row values).
    """
    theta = MapParams.of(state)
    no_proposals = jnp.full((), jnp.nan, state.X.dtype)
    if spec.dynamic:
        def sample():
            return update_x_dynamic(key, state.X, state.time_params, spec, data, theta,
                                    inducing_times)

        def climb():
            X = map_x_dynamic(state.X, state.time_params, spec, data, theta, inducing_times)
            # The time kernel still moves (by its Metropolis step) during the warm-up.
            k1, k2 = jax.random.split(key)
            return X, update_time_params(k1, k2, X, state.time_params, data.time,
                                         inducing_times), no_proposals

        if spec.map_sweeps > 0:
            X, time_params, n_proposals = lax.cond(state.n_sweeps < spec.map_sweeps, climb,
                                                   sample)
        else:
            X, time_params, n_proposals = sample()
        return state._replace(X=X, time_params=time_params, n_proposals_X=n_proposals), None

    def sample():
        return update_x_static(key, state.X, spec, data, theta)

    def climb():
        X = map_x_static(state.X, spec, data, theta)
        return X, no_proposals, jnp.sum(_row_ll_fn(spec, data, theta)(X))

    if spec.map_sweeps > 0:
        X, n_proposals, log_lik = lax.cond(state.n_sweeps < spec.map_sweeps, climb, sample)
    else:
        X, n_proposals, log_lik = sample()
    return state._replace(X=X, n_proposals_X=n_proposals), log_lik


def current_log_lik(spec: RFLVMSpec, data: RFLVMData, state: RFLVMState,
                    psi_part=None) -> Array:
    """log p(Y_obs | X, W, β, θ), normalised (the per-sweep trace; comparable across sweeps
    even when θ — σ², r — changes).

    ``psi_part``, when given, is the sum of :func:`.loglik.psi_log_lik` at this state (the X
    step's own values): the ψ-free terms are then added (:func:`.loglik.log_lik_constant`)
    instead of forming Φβ and every entry's density again (issue 14: 16 ms of a Poisson
    sweep on congress109, 35 ms of a negative-binomial one).
    """
    if psi_part is not None:
        constant = log_lik_constant(spec.likelihood, data, state.noise_var, state.dispersion)
        if constant is not None:
            return psi_part + constant
    psi = design(state.X, state.W, spec.intercept) @ state.beta + data.offset
    return jnp.sum(full_log_lik(spec.likelihood, data.Y, psi, data.observed, data.trials,
                                state.noise_var, state.dispersion))


def sweep(key: Array, state: RFLVMState, spec: RFLVMSpec, data: RFLVMData,
          inducing_times: Array) -> RFLVMState:
    """One full sweep for one chain (see the module docstring for the order)."""
    key_model, key_dp = jax.random.split(key)
    if spec.collapsed:
        state, psi_part = _sweep_gaussian(key_model, spec, data, state, inducing_times)
    else:
        state, psi_part = _sweep_counts(key_model, spec, data, state, inducing_times)
    if spec.learn_kernel:
        a_alpha, b_alpha = spec.alpha_prior
        prior = default_niw_prior(spec.n_components)
        state = state._replace(dp=dp_update(key_dp, state.W, state.dp, prior, a_alpha, b_alpha))
    return state._replace(log_lik=current_log_lik(spec, data, state, psi_part),
                          n_sweeps=state.n_sweeps + 1)

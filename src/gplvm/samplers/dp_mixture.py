r"""Dirichlet-process mixture of Gaussians on the random frequencies (seed 000, eqs. 21–25).

Each of the M/2 frequencies :math:`w_m` (the rows of ``W``) belongs to cluster :math:`z_m`,
:math:`w_m \sim N(\mu_{z_m}, \Sigma_{z_m})`, with a Chinese-restaurant prior of concentration α
on the partition and the normal-inverse-Wishart base measure of :mod:`._niw` on
:math:`(\mu_k, \Sigma_k)`.  One Gibbs sweep (:func:`dp_update`) is

1. the assignments z, one item at a time (eq. 23; Neal 2000, Algorithm 2),
2. every cluster's (μ_k, Σ_k) from its NIW posterior (eq. 24, corrected in :mod:`._niw`),
3. the concentration α by Escobar & West's (1995) auxiliary variable (eq. 25),

and :func:`propose_frequencies` draws the prior proposal :math:`w^\star_m \sim N(\mu_{z_m},
\Sigma_{z_m})` of the Metropolis–Hastings step on W (eq. 22).

Shapes are static, as ``jit``, ``vmap`` over chains and ``lax.scan`` over sweeps need: there
are K_max = M/2 cluster *slots* (never more clusters than items); a slot with no items is empty
and its (μ, Σ) is a draw from the base measure, which nothing reads.  Every function is pure and
takes an explicit key; the same key gives the same draws.

Cost: the assignment loop is sequential over the M2 items and scores every slot, O(M2² Q²)
per sweep; about 15 ms at M2 = 500 (Q = 2 or 5) on the 2-core development CPU.  Compiling
:func:`dp_update` costs ~2.5 CPU s at M2 = 50, Q = 2 (~4.4 when each step drew its own
gammas; see :func:`dp_update`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from gplvm.registry import register
from gplvm.samplers._gamma import gamma_small
from gplvm.samplers._niw import (NIWPrior, cluster_statistics, default_niw_prior,
                                 gaussian_logpdf, gaussian_logpdf_whitened,
                                 log_prior_predictive, niw_centre, niw_from, niw_posterior,
                                 sample_niw_slots, whitener)
from gplvm.typing import Array, ArrayLike, Float, Int, PRNGKeyArray, Real, ScalarLike

__all__ = ["DPMixtureState", "NIWPrior", "default_niw_prior", "dp_init", "dp_update",
           "log_prior_frequencies", "n_clusters", "propose_frequencies", "sample_assignments",
           "sample_cluster_params", "sample_concentration"]


@register("gplvm.state.DPMixtureState")
class DPMixtureState(NamedTuple):
    """One chain's DP-mixture position; K_max = M2 slots.

    Attributes:
        z: ``Int32[Array, "M2"]`` cluster slot of each frequency.
        mu: ``Float[Array, "K_max Q"]`` cluster means (prior draws in empty slots).
        Sigma: ``Float[Array, "K_max Q Q"]`` cluster covariances (prior draws in empty slots).
        alpha: ``Float[Array, ""]`` DP concentration.
    """

    z: Int[Array, " M2"]
    mu: Float[Array, "K_max Q"]
    Sigma: Float[Array, "K_max Q Q"]
    alpha: Float[Array, ""]


def _check(W, prior: NIWPrior) -> None:
    """Shape checks always (shapes are static); value checks when the prior is concrete."""
    if W.ndim != 2:
        raise ValueError(f"W must be 2-D (M2 frequencies, Q dimensions); got shape {W.shape}")
    Q = W.shape[1]
    if prior.mu0.shape != (Q,) or prior.Psi0.shape != (Q, Q):
        raise ValueError(f"the NIW prior is for Q = {prior.mu0.shape[-1]} dimensions "
                         f"(mu0 {prior.mu0.shape}, Psi0 {prior.Psi0.shape}) but W has Q = "
                         f"{Q} columns; build it with default_niw_prior({Q})")
    try:
        lam, nu, Psi = (np.asarray(prior.lambda0, float), np.asarray(prior.nu0, float),
                        np.asarray(prior.Psi0, float))
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return
    if not lam > 0:
        raise ValueError(f"lambda0 = {float(lam)}; the NIW prior needs lambda0 > 0")
    if not nu > Q - 1:
        raise ValueError(f"nu0 = {float(nu)}; the inverse-Wishart needs nu0 > Q - 1 = {Q - 1} "
                         f"(the default is Q + 1 = {Q + 1})")
    if not (np.allclose(Psi, Psi.T) and np.all(np.linalg.eigvalsh(Psi) > 0)):
        raise ValueError("Psi0 must be symmetric positive definite (e.g. the identity)")


def n_clusters(state: DPMixtureState) -> Int[Array, ""]:
    """K, the number of occupied clusters (``Int[Array, ""]``)."""
    counts = jnp.zeros(state.mu.shape[0], jnp.int32).at[state.z].add(1)
    return jnp.sum(counts > 0)


def dp_init(key: PRNGKeyArray, W: Real[ArrayLike, "..."], prior: NIWPrior, n_clusters: int = 20,
            alpha: ScalarLike = 1.0, draw_params: bool = True) -> DPMixtureState:
    """Assign the frequencies uniformly at random to min(n_clusters, M2) clusters, then draw
    every slot's (μ, Σ) from its NIW posterior given its members (the prior when empty), or,
    with ``draw_params=False``, put it at that posterior's centre (:func:`._niw.niw_centre`:
    no random draw, so a chain's start compiles to a small program; the first
    :func:`dp_update` draws every slot afresh).

    Args:
        key: a ``jax.random`` key.
        W: ``Float[Array, "M2 Q"]`` current frequencies (shape checked here against the prior,
            with a ValueError).
        prior: the NIW base measure.
        n_clusters: number of initial clusters (static).
        alpha: initial concentration.
        draw_params: draw the slots' (μ, Σ) (True) or start them at the posterior's centre.
    """
    W = jnp.asarray(W)
    if not jnp.issubdtype(W.dtype, jnp.floating):
        W = W.astype(jnp.float64)
    _check(W, prior)
    M2, Q = W.shape
    k_z, k_params = jax.random.split(key)
    z = jax.random.randint(k_z, (M2,), 0, max(1, min(int(n_clusters), M2)), dtype=jnp.int32)
    state = DPMixtureState(z=z, mu=jnp.zeros((M2, Q), W.dtype),
                           Sigma=jnp.zeros((M2, Q, Q), W.dtype),
                           alpha=jnp.asarray(alpha, dtype=W.dtype))
    if not draw_params:
        mu, Sigma = niw_centre(niw_posterior(prior, *cluster_statistics(W, z, M2)))
        return state._replace(mu=mu, Sigma=Sigma)
    return sample_cluster_params(k_params, W, state, prior)


def sample_cluster_params(key: PRNGKeyArray, W: Float[Array, "M2 Q"], state: DPMixtureState,
                          prior: NIWPrior) -> DPMixtureState:
    r"""Step 2: (μ_k, Σ_k) ~ NIW posterior given the members of slot k (seed 000, eq. 24).

    Σ_k ~ W⁻¹(Ψ_k, ν_k) and μ_k | Σ_k ~ N(m_k, Σ_k/λ_k) with the corrected Ψ_k of
    :mod:`._niw` (scatter about the cluster mean plus the shrinkage term in w̄_k − μ0).  The
    Bartlett χ² variates of every slot come from one call of :func:`._gamma.gamma_small`
    (compiled small, as in :func:`dp_update`): the RFLVM draws the components with it after
    each move of W that had them integrated out (``dp_components='integrated'``).
    """
    K, Q = state.mu.shape
    dtype = W.dtype
    post = niw_posterior(prior, *cluster_statistics(W, state.z, K))
    k_gamma, k_normal = jax.random.split(key)
    dof = post.nu[:, None] - jnp.arange(Q, dtype=dtype)[None, :]      # ν_k − i + 1
    chi2 = 2.0 * gamma_small(k_gamma, (0.5 * dof).ravel()).astype(dtype).reshape(K, Q)
    normals = jax.random.normal(k_normal, (K, Q * Q + Q), dtype)
    lower, eps = normals[:, :Q * Q].reshape(K, Q, Q), normals[:, Q * Q:]
    mu, Sigma = jax.vmap(niw_from)(post, chi2, lower, eps)
    return state._replace(mu=mu, Sigma=Sigma)


def _categorical(u: Array, logits: Array) -> Array:
    """Index drawn with probabilities ∝ exp(logits) by inverting the cumulative sum with
    one uniform u ∈ [0, 1): a zero-probability index is never returned (its cumulative sum
    equals its predecessor's, so the first sum above u lies past it)."""
    cum = jnp.cumsum(jnp.exp(logits - jnp.max(logits)))
    return jnp.minimum(jnp.searchsorted(cum, u * cum[-1], side="right"), logits.shape[0] - 1)


def sample_assignments(key: PRNGKeyArray, W: Float[Array, "M2 Q"], state: DPMixtureState,
                       prior: NIWPrior) -> DPMixtureState:
    r"""Step 1: z_m for m = 1..M2 in turn (seed 000, eq. 23; Neal 2000, Algorithm 2).

    With item m removed, and its slot emptied (its parameters discarded) when it was alone,

    .. math::
        P(z_m = k) \propto n_k^{-m}\, N(w_m \mid \mu_k, \Sigma_k) \ (n_k^{-m} > 0), \qquad
        P(z_m = \text{new}) \propto \alpha \int N(w_m \mid \mu, \Sigma)\, dH(\mu, \Sigma),

    the integral being the Student-t prior predictive.  A new cluster takes the first empty
    slot (one exists: at most M2 − 1 other items) and draws its (μ, Σ) from the NIW posterior
    given w_m alone, so the sweep leaves p(z, μ, Σ | W, α) invariant.  The weights stay in
    log space until the largest is subtracted; the draw then inverts their cumulative sum
    with one uniform (cheaper, inside the sequential loop, than K + 1 Gumbel variates).
    """
    M2, Q = W.shape
    k_loop, k_new = jax.random.split(key)
    # Each item's would-be new cluster, (μ, Σ) from the NIW posterior given w_m alone (Neal's
    # H_i), is drawn for all items at once before the loop: it does not depend on the state,
    # and one batched draw is far cheaper than M2 small ones inside the sequential loop.
    new_mu, new_Sigma = sample_niw_slots(k_new, _singleton_posteriors(W, prior))
    u = jax.random.uniform(k_loop, (M2,), dtype=W.dtype)
    return _assign(W, state, prior, u, new_mu, new_Sigma)


def _singleton_posteriors(W: Array, prior: NIWPrior):
    """The NIW posterior given each item alone (the parameters a new cluster of it draws)."""
    M2, Q = W.shape
    return niw_posterior(prior, jnp.ones(M2, W.dtype), W, jnp.zeros((M2, Q, Q), W.dtype))


def _assign(W: Array, state: DPMixtureState, prior: NIWPrior, u: Array, new_mu: Array,
            new_Sigma: Array) -> DPMixtureState:
    """:func:`sample_assignments` given its variates: one uniform per item (``u``) and each
    item's would-be new cluster's (μ, Σ), drawn from :func:`_singleton_posteriors`."""
    M2, Q = W.shape
    K = state.mu.shape[0]
    log_new = jnp.log(state.alpha) + log_prior_predictive(W, prior)   # α · prior predictive
    new_white = whitener(new_Sigma)
    counts = jnp.zeros(K, jnp.int32).at[state.z].add(1)

    def body(m, carry):
        z, counts, mu, Sigma, L_inv, log_det = carry
        w = W[m]
        # 1a. Remove item m; a singleton's slot drops to count 0 and is free again.
        counts = counts.at[z[m]].add(-1)
        occupied = counts > 0
        log_old = jnp.where(occupied, jnp.log(jnp.maximum(counts, 1).astype(W.dtype))
                            + gaussian_logpdf_whitened(w, mu, L_inv, log_det), -jnp.inf)
        # 1b. Choose among the occupied clusters and one new one (index K).
        choice = _categorical(u[m], jnp.append(log_old, log_new[m]))
        is_new = choice == K
        slot = jnp.where(is_new, jnp.argmin(occupied), choice)      # argmin: first empty slot
        # 1c. A new cluster takes item m's pre-drawn parameters.
        put = lambda old, new: old.at[slot].set(jnp.where(is_new, new[m], old[slot]))
        mu, Sigma = put(mu, new_mu), put(Sigma, new_Sigma)
        L_inv, log_det = put(L_inv, new_white[0]), put(log_det, new_white[1])
        return z.at[m].set(slot.astype(jnp.int32)), counts.at[slot].add(1), mu, Sigma, L_inv, \
            log_det

    init = (state.z, counts, state.mu, state.Sigma) + whitener(state.Sigma)
    z, _, mu, Sigma, _, _ = lax.fori_loop(0, M2, body, init)
    return state._replace(z=z, mu=mu, Sigma=Sigma)


def sample_concentration(key: PRNGKeyArray, state: DPMixtureState, a_alpha: ScalarLike = 1.0,
                         b_alpha: ScalarLike = 1.0) -> DPMixtureState:
    r"""Step 3: α | K ~ the Escobar & West (1995) mixture (seed 000, eq. 25), n = M2 items.

    Prior α ~ Ga(a, rate b).  Draw η ~ Beta(α + 1, n), then

    .. math::
        \alpha \sim \pi\, \mathrm{Ga}(a + K, b - \log\eta)
                   + (1 - \pi)\, \mathrm{Ga}(a + K - 1, b - \log\eta), \qquad
        \frac{\pi}{1 - \pi} = \frac{a + K - 1}{n (b - \log\eta)},

    which leaves :math:`p(\alpha \mid K) \propto \mathrm{Ga}(\alpha; a, b)\,\alpha^K
    \Gamma(\alpha)/\Gamma(\alpha + n)` (Antoniak 1974) invariant.  (Seed 000 prints log h
    for log η in the first rate.)
    """
    n = state.z.shape[0]
    k_eta, k_mix, k_gamma = jax.random.split(key, 3)
    eta = jax.random.beta(k_eta, state.alpha + 1.0, jnp.asarray(n, state.alpha.dtype))
    u_mix = jax.random.uniform(k_mix, dtype=state.alpha.dtype)
    extra, rate = _concentration_mixture(state, eta, u_mix, a_alpha, b_alpha)
    shape = a_alpha + extra.astype(state.alpha.dtype)
    alpha = jax.random.gamma(k_gamma, shape, dtype=state.alpha.dtype) / rate
    return state._replace(alpha=alpha)


def _concentration_mixture(state: DPMixtureState, eta: Array, u_mix: Array, a_alpha,
                           b_alpha) -> tuple[Array, Array]:
    """The component of :func:`sample_concentration`'s mixture chosen with the uniform
    ``u_mix``: α ~ Ga(a + ``extra``, ``rate``), ``extra`` = K or K − 1 (an integer)."""
    n = state.z.shape[0]
    K = n_clusters(state)
    rate = b_alpha - jnp.log(eta)
    odds = (a_alpha + K.astype(state.alpha.dtype) - 1.0) / (n * rate)
    first = u_mix * (1.0 + odds) < odds
    return K - jnp.where(first, 0, 1), rate


def dp_update(key: PRNGKeyArray, W: Float[Array, "M2 _Q"], state: DPMixtureState,
              prior: NIWPrior, a_alpha: ScalarLike = 1.0, b_alpha: ScalarLike = 1.0
              ) -> DPMixtureState:
    r"""One Gibbs sweep: assignments (eq. 23), cluster parameters (eq. 24), α (eq. 25).

    The three steps of :func:`sample_assignments`, :func:`sample_cluster_params` and
    :func:`sample_concentration`, with every gamma variate of the sweep drawn in ONE call
    before it, by :func:`._gamma.gamma_small` (each call of a gamma sampler compiles its own
    rejection loop, ~1 s of CPU for ``jax.random.gamma``; the sweep had five: issue 30,
    item 4).  That needs shapes known before the assignments, which the additivity of gamma
    variates gives:

    * step 2's Bartlett variates χ²_{ν0 + n_k − i + 1} = χ²_{ν0 − i + 1} + Σ_{m: z_m = k} ε²_{mi}
      with ε_{mi} ~ N(0, 1), one per item and dimension (the slots' item sets are disjoint, so
      the sums are independent χ²_{n_k});
    * step 3's Ga(a + K − δ) = Ga(a) + Σ_{j ≤ K − δ} E_j, E_j ~ Exp(1) (K − δ ≤ M2), and
      η ~ Beta(α + 1, n) as G₁/(G₁ + G₂), G₁ ~ Ga(α + 1), G₂ ~ Ga(n) (α before the sweep).

    Same distribution as the three functions in turn; other draws.

    Args:
        key: a ``jax.random`` key.
        W: ``Float[Array, "M2 Q"]`` the frequencies (held fixed by this sweep).
        state: the current :class:`DPMixtureState`.
        prior: the NIW base measure.
        a_alpha, b_alpha: shape and rate of the Gamma prior on α.

    Returns:
        The new state.
    """
    _check(W, prior)
    M2, Q = W.shape
    K = state.mu.shape[0]
    dtype = W.dtype
    k_gamma, k_normal, k_uniform = jax.random.split(key, 3)
    dof = jnp.asarray(prior.nu0, dtype) - jnp.arange(Q, dtype=dtype)   # ν0 − i + 1, i = 1..Q
    shapes = jnp.concatenate([jnp.broadcast_to(0.5 * (dof + 1.0), (M2, Q)).ravel(),  # new: ν0 + 1
                              jnp.broadcast_to(0.5 * dof, (K, Q)).ravel(),           # slots' base
                              jnp.stack([state.alpha + 1.0, jnp.asarray(M2, dtype),
                                         jnp.asarray(a_alpha, dtype)])])
    g = gamma_small(k_gamma, shapes).astype(dtype)
    g_new, g_base = g[:M2 * Q].reshape(M2, Q), g[M2 * Q:(M2 + K) * Q].reshape(K, Q)
    g_eta, g_n, g_a = g[-3], g[-2], g[-1]
    sizes = (M2 * Q * Q, M2 * Q, K * Q * Q, K * Q, M2 * Q)
    parts = jnp.split(jax.random.normal(k_normal, (sum(sizes),), dtype),
                      np.cumsum(sizes)[:-1].tolist())
    lower_new, eps_new = parts[0].reshape(M2, Q, Q), parts[1].reshape(M2, Q)
    lower_slots, eps_slots, eps_items = (parts[2].reshape(K, Q, Q), parts[3].reshape(K, Q),
                                         parts[4].reshape(M2, Q))
    u = jax.random.uniform(k_uniform, (2 * M2 + 1,), dtype=dtype)
    # 1. assignments
    new_mu, new_Sigma = jax.vmap(niw_from)(_singleton_posteriors(W, prior), 2.0 * g_new,
                                           lower_new, eps_new)
    state = _assign(W, state, prior, u[:M2], new_mu, new_Sigma)
    # 2. every slot's (μ, Σ)
    post = niw_posterior(prior, *cluster_statistics(W, state.z, K))
    chi2 = 2.0 * g_base + jax.ops.segment_sum(eps_items**2, state.z, num_segments=K)
    mu, Sigma = jax.vmap(niw_from)(post, chi2, lower_slots, eps_slots)
    state = state._replace(mu=mu, Sigma=Sigma)
    # 3. α
    extra, rate = _concentration_mixture(state, g_eta / (g_eta + g_n), u[M2], a_alpha, b_alpha)
    exponentials = -jnp.log1p(-u[M2 + 1:])
    alpha = (g_a + jnp.sum(jnp.where(jnp.arange(M2) < extra, exponentials, 0.0))) / rate
    return state._replace(alpha=alpha.astype(state.alpha.dtype))


def propose_frequencies(key: PRNGKeyArray, state: DPMixtureState) -> Float[Array, "M2 Q"]:
    r"""The prior proposal of the MH step on W (seed 000, eq. 22):
    :math:`w^\star_m \sim N(\mu_{z_m}, \Sigma_{z_m})` independently, ``Float[Array, "M2 Q"]``."""
    chol = jnp.linalg.cholesky(state.Sigma)[state.z]
    eps = jax.random.normal(key, state.mu[state.z].shape, dtype=state.mu.dtype)
    return state.mu[state.z] + jnp.einsum("mij,mj->mi", chol, eps)


def log_prior_frequencies(W: Float[Array, "M2 Q"], state: DPMixtureState
                          ) -> Float[Array, " M2"]:
    """log N(w_m | μ_{z_m}, Σ_{z_m}) for every row of W, ``Float[Array, "M2"]``."""
    chol = jnp.linalg.cholesky(state.Sigma)[state.z]
    return gaussian_logpdf(W, state.mu[state.z], chol)

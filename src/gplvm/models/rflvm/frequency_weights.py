r"""A frequency and its features' weights moved together (issue 30, item 1: "a move of its own
along that ridge").

At the block's mode the flattest directions of the RFLVM posterior are trade-offs between a
frequency w_m and the weights β_m = β_{(m, m+M/2), ·} of its two features (benchmarks/README,
"(X, W) modulo rotations"): a frequency moved with its weights held is pulled back by them,
and a feature whose weights are small leaves its frequency free under the prior, which the
joint NUTS block crosses only in long trajectories.  This Metropolis–Hastings move proposes
both at once, for one frequency at a time, with everything else held:

1. w⋆: a draw of the frequency's prior p(w_m) (its DP component, or the fixed kernel's
   spectral density), or a random-walk step w + s L^{-T}ε with LL^T = H, H the prior's
   precision plus a Fisher metric that does not involve (w_m, β_m) (so the walk is
   symmetric): Σ_n x_n x_nᵀ Σ_j h_nj(ψ₋ₘ) s0 / (M/2), h the likelihood's Fisher weight at
   ψ₋ₘ = ψ − φ_m β_m, the linear predictor without frequency m, and s0 the weights' prior
   variance in place of β_m²;
2. β_m⋆ | w⋆: per output column j, the Laplace approximation N(b̂_j, H_j⁻¹) of
   p(β_mj | w⋆, ψ₋ₘ, y_j) (two coordinates), b̂ after a few Newton steps from the prior mean
   with the likelihood's gradient and Fisher weight in ψ (:mod:`gplvm.likelihoods`);
3. accepted with probability

   .. math:: \min\Big\{1, \frac{p(Y\mid ψ₋ₘ + φ_{w⋆}β⋆)\,p(β⋆)\,p(w⋆)\;q(β_m \mid w_m)\,q(w_m \mid w⋆)}
                                {p(Y\mid ψ)\,p(β_m)\,p(w_m)\;q(β⋆ \mid w⋆)\,q(w⋆ \mid w_m)}\Big\},

   q(β | w) the Laplace density at w computed the same way (it depends on w and ψ₋ₘ only,
   which the move does not change), the frequency's prior ratio cancelling its proposal
   ratio for a prior draw and the walk's proposal ratio being 1.

Each step is an exact MH step for p(w_m, β_m | rest): how good the Laplace approximation is
changes the acceptance rate, never the invariant distribution (the Geweke cases of
``tests/models/rflvm/test_rflvm_geweke.py``).  Count likelihoods whose output columns are
independent given ψ (not the multinomial); O(N D) per move.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from gplvm.inference.mcmc._metropolis import optimal_walk_scale
from gplvm.models.rflvm.features import feature_pair, pair_index
from gplvm.models.rflvm.frequencies import FrequencyPrior
from gplvm.models.rflvm.loglik import likelihood_object, total_log_lik

Array = jax.Array

#: Newton steps of each Laplace approximation (from the prior mean)
NEWTON_STEPS = 4
#: share of the moves whose frequency is a prior draw (the rest are walk steps)
PRIOR_FRACTION = 0.5


class Weights(NamedTuple):
    """What the pass holds besides X and W: β (P, D), its prior mean (P, D) and precision
    (P,), Φ (N, P) at the current W and ψ = Φβ (N, D), without the offset."""

    beta: Array
    mean: Array
    precision: Array
    Phi: Array
    psi: Array


def _laplace(lik, data, psi_out: Array, phi: Array, mean: Array, prec: Array):
    """Newton's b̂ (2, D) and the precisions H_j (D, 2, 2) at b̂ of p(β_mj | w, ψ₋ₘ, y_j)
    for every column j, from the prior mean ``mean`` (2, D), prior precisions ``prec`` (2,)."""
    Y, offset, observed = data.Y, data.offset, data.observed

    def terms(b):
        psi = psi_out + phi @ b + offset
        g = lik._grad_log_prob(Y, psi) * observed
        h = lik._fisher_weight(Y, psi) * observed
        grad = phi.T @ g - prec[:, None] * (b - mean)                       # (2, D)
        H = jnp.einsum("na,nd,nb->dab", phi, h, phi) + jnp.diag(prec)      # (D, 2, 2)
        return grad, H

    def newton(_, b):
        grad, H = terms(b)
        return b + _solve2(H, grad.T).T

    b = lax.fori_loop(0, NEWTON_STEPS, newton, mean)
    return b, terms(b)[1]


def _solve2(H: Array, g: Array) -> Array:
    """H_j⁻¹ g_j for (D, 2, 2) and (D, 2), in closed form."""
    det = H[:, 0, 0] * H[:, 1, 1] - H[:, 0, 1] * H[:, 1, 0]
    x0 = (H[:, 1, 1] * g[:, 0] - H[:, 0, 1] * g[:, 1]) / det
    x1 = (H[:, 0, 0] * g[:, 1] - H[:, 1, 0] * g[:, 0]) / det
    return jnp.stack([x0, x1], axis=-1)


def _chol2(H: Array) -> Array:
    """Lower Cholesky factors of (D, 2, 2) symmetric positive-definite matrices."""
    l00 = jnp.sqrt(H[:, 0, 0])
    l10 = H[:, 1, 0] / l00
    l11 = jnp.sqrt(H[:, 1, 1] - l10**2)
    zero = jnp.zeros_like(l00)
    return jnp.stack([jnp.stack([l00, zero], -1), jnp.stack([l10, l11], -1)], -2)


def _log_normal(b: Array, centre: Array, H: Array) -> Array:
    """Σ_j log N(b_j | centre_j, H_j⁻¹) up to −D log 2π (which cancels): b, centre (2, D)."""
    d = (b - centre).T                                                      # (D, 2)
    L = _chol2(H)
    u = jnp.einsum("dba,db->da", L, d)                                      # Lᵀd
    return jnp.sum(jnp.log(L[:, 0, 0]) + jnp.log(L[:, 1, 1]) - 0.5 * jnp.sum(u**2, -1))


def _draw(key: Array, centre: Array, H: Array) -> Array:
    """centre + L⁻ᵀε per column: a draw of N(centre_j, H_j⁻¹), (2, D)."""
    L = _chol2(H)
    eps = jax.random.normal(key, (H.shape[0], 2), centre.dtype)
    # solve Lᵀ x = ε for the upper-triangular Lᵀ = [[l00, l10], [0, l11]]
    x1 = eps[:, 1] / L[:, 1, 1]
    x0 = (eps[:, 0] - L[:, 1, 0] * x1) / L[:, 0, 0]
    return centre + jnp.stack([x0, x1], axis=0)


def _walk_metric(X: Array, h: Array, prior_precision: Array, s0: Array,
                 n_freq: int) -> Array:
    """H = P_m + Σ_n x_n x_nᵀ Σ_j h_nj s0 / (M/2): the walk's metric, free of (w_m, β_m)."""
    c = jnp.sum(h, axis=1) * s0 / n_freq
    return prior_precision + jnp.einsum("n,nq,nr->qr", c, X, X)


def update_frequency_weights(key: Array, prior: FrequencyPrior, X: Array, W: Array,
                             kind: str, data, weights: Weights, noise_var: Array,
                             dispersion: Array):
    """One pass of the joint move over the M/2 frequencies in turn (module docstring).

    Args:
        prior: the frequencies' prior (:func:`.frequencies.frequency_prior`), with a density.
        kind: the likelihood's name; data: Y, offset, trials, observed mask
            (:class:`.spec.RFLVMData`).
        weights: β, its prior, Φ and ψ (:class:`Weights`).
        noise_var, dispersion: (D,) as the likelihood reads them.

    Returns:
        (W, β, number of accepted moves).
    """
    n_freq, Q = W.shape
    lik = likelihood_object(kind, data.trials, noise_var, dispersion)
    k_u, k_eps, k_mix, k_b = jax.random.split(key, 4)
    log_u = jnp.log(jax.random.uniform(k_u, (n_freq,), dtype=W.dtype))
    eps = jax.random.normal(k_eps, W.shape, W.dtype)
    from_prior = jax.random.uniform(k_mix, (n_freq,)) < PRIOR_FRACTION
    keys_b = jax.random.split(k_b, n_freq)
    scale = optimal_walk_scale(Q)

    def ll(psi):
        return total_log_lik(kind, data.Y, psi + data.offset, data.observed, data.trials,
                             noise_var, dispersion)

    def body(m, carry):
        W, beta, Phi, psi, ll_cur, n_acc = carry
        idx = pair_index(m, n_freq)
        phi, b = Phi[:, idx], beta[idx]                                    # (N, 2), (2, D)
        mean, prec = weights.mean[idx], weights.precision[idx]
        psi_out = psi - phi @ b
        h = lik._fisher_weight(data.Y, psi_out + data.offset) * data.observed
        H = _walk_metric(X, h, prior.precision[m], 1.0 / prec[0], n_freq)
        L = jnp.linalg.cholesky(H)
        w = W[m]
        w_walk = w + scale * jax.scipy.linalg.solve_triangular(L.T, eps[m], lower=False)
        w_new = jnp.where(from_prior[m], prior.draws[m], w_walk)
        log_prior_w = jnp.where(from_prior[m], 0.0,
                                prior.log_density(m, w_new) - prior.log_density(m, w))
        phi_new = feature_pair(X, w_new, n_freq)
        centre_new, H_new = _laplace(lik, data, psi_out, phi_new, mean, prec)
        b_new = _draw(keys_b[m], centre_new, H_new)
        centre, H_cur = _laplace(lik, data, psi_out, phi, mean, prec)
        psi_new = psi_out + phi_new @ b_new
        ll_new = ll(psi_new)

        def log_prior_b(v):
            return -0.5 * jnp.sum(prec[:, None] * (v - mean) ** 2)

        log_alpha = (ll_new - ll_cur + log_prior_b(b_new) - log_prior_b(b) + log_prior_w
                     + _log_normal(b, centre, H_cur) - _log_normal(b_new, centre_new, H_new))
        accept = jnp.isfinite(log_alpha) & (log_u[m] < log_alpha)
        W = jnp.where(accept, W.at[m].set(w_new), W)
        beta = jnp.where(accept, beta.at[idx].set(b_new), beta)
        Phi = jnp.where(accept, Phi.at[:, idx].set(phi_new), Phi)
        psi = jnp.where(accept, psi_new, psi)
        ll_cur = jnp.where(accept, ll_new, ll_cur)
        return W, beta, Phi, psi, ll_cur, n_acc + accept.astype(jnp.int32)

    init = (W, weights.beta, weights.Phi, weights.psi, ll(weights.psi),
            jnp.zeros((), jnp.int32))
    W, beta, _, _, _, n_acc = lax.fori_loop(0, n_freq, body, init)
    return W, beta, n_acc

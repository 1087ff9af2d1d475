"""The functional core of ``BayesianGLM``: the fitted objective, the optimiser, the predictive.

Module-level and jitted so that every fit and prediction with the same shapes reuses one
compilation (eager op-by-op code compiles each primitive separately).  The estimator in
:mod:`gplvm.models.glm` validates, chooses, and stores; the numbers are made here.
"""

from __future__ import annotations

import functools
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gplvm.models import _quantiles
from gplvm.models._common import block_expand, freeze_feature_variance
from gplvm.objectives import glm as glm_objective
from gplvm.transforms import inverse_softplus, softplus

# ---------------------------------------------------------------------- fitting (eqs. 5–6, 27)


@functools.lru_cache(maxsize=None)
def neg_elbo(batch_size: int, n_samples: int):
    """−eq. 27 on a random minibatch, as ``f(u, key, fmap, lik, X, y)``; one function (hence one
    compiled step) per (B, L), the data passed as traced arguments."""
    def objective(u, key, fmap, lik, X, y):
        N = X.shape[0]
        k_batch, k_mc = jax.random.split(key)
        if batch_size < N:   # eqs. 5–6: a minibatch without replacement, boosted by N/B
            idx = jax.random.choice(k_batch, N, (batch_size,), replace=False)
            X, y = X[idx], y[idx]
        fm, lk, prior = unpack(u, fmap, lik)
        return -glm_objective.elbo(k_mc, fm(X), y, N,
                                   glm_objective.Mixture(u["m"], softplus(u["psi"])), prior, lk,
                                   n_samples)

    return objective


_HYPER = ("features", "likelihood", "prior_var")


def _relative_steps() -> optax.GradientTransformation:
    """Scale the updates of the hyper-parameters by max(1, |u₀|), u₀ their initial values.

    Adam moves every unconstrained coordinate by about the learning rate per step.  For the
    weights that is the right scale, but a positive hyper-parameter θ = softplus(u) with θ ≫ 1
    (a length-scale of 30 on unscaled pixels, say) has u ≈ θ, so a step of 0.01 would change it
    by 0.01/θ relative and the fit would take thousands of steps to move it.  With the scale the
    steps are relative (about the learning rate times θ).  The scales are fixed at ``init``.
    """
    def init(params):
        return {name: jax.tree_util.tree_map(
            (lambda x: jnp.maximum(1.0, jnp.abs(x))) if name in _HYPER else jnp.ones_like, leaf)
            for name, leaf in params.items()}

    def update(updates, scales, params=None):
        return jax.tree_util.tree_map(jnp.multiply, updates, scales), scales

    return optax.GradientTransformation(init, update)


@functools.lru_cache(maxsize=None)
def optimizer(learning_rate: float, n_iter: int) -> optax.GradientTransformation:
    """Adam with relative hyper-parameter steps and a cosine-decaying step size.

    The decay (to 1/20 of the initial rate over ``n_iter`` steps) lets the last iterates settle
    instead of jittering with the gradient noise.  Cached, so that fits with the same settings
    share one optimiser object and hence one compiled step.
    """
    schedule = optax.cosine_decay_schedule(learning_rate, n_iter, alpha=0.05)
    return optax.chain(optax.scale_by_adam(), _relative_steps(),
                       optax.scale_by_learning_rate(schedule))


def unpack(u, fmap, lik):
    """The feature map, the likelihood and Λ's diagonal (M,) at unconstrained values ``u``."""
    fm = fmap.from_unconstrained(freeze_feature_variance(u["features"]))
    lk = lik.from_unconstrained(u["likelihood"])
    return fm, lk, block_expand(softplus(u["prior_var"]), fm.blocks)


@partial(jax.jit, static_argnums=(5, 6))
def initial_params(key, fmap, lik, X, y, prior_var: float, n_mixture: int):
    r"""Unconstrained initial values: q(w) starts at a diagonal Laplace approximation at w = 0.

    Ψ_k starts at the inverse of the diagonal of the Hessian of the negative log joint at w = 0,

    .. math:: \Psi_{0,j} = \big(1/\lambda + \textstyle\sum_n \phi_{nj}^2 h_n\big)^{-1},
              \qquad h_n = -\partial_f^2 \log p(y_n \mid f)\big|_{f=0},

    so a weight the data barely constrain starts near its prior variance (a start far below it
    drags the learned prior variance down with it) and a tightly constrained one starts near
    its posterior variance (a wide start makes, for instance, the Poisson gradients through
    e^f very noisy).  The means m_k start at 0.1·sqrt(Ψ₀)·N(0, 1): distinct, so that the K
    components can separate, and small.
    """
    curvature = -jax.vmap(jax.grad(jax.grad(
        lambda f, yn: lik._log_prob(yn, f))))(jnp.zeros_like(y), y)
    Phi = fmap(X)
    psi0 = 1.0 / (1.0 / prior_var + jnp.maximum(curvature, 0.0) @ (Phi * Phi))      # (M,)
    return {
        "features": fmap.unconstrained(),
        "likelihood": lik.unconstrained(),
        "prior_var": inverse_softplus(jnp.full(len(fmap.blocks), prior_var)),
        "m": 0.1 * jnp.sqrt(psi0) * jax.random.normal(key, (n_mixture, Phi.shape[1])),
        "psi": inverse_softplus(jnp.broadcast_to(psi0, (n_mixture, Phi.shape[1]))),
    }


def bound_settled(history: np.ndarray, n_samples: int, tol: float = 1e-3) -> bool:
    """Whether Adam's run ended where the bound no longer rises: the convergence test.

    Adam runs all its steps and the bound it sees is a noisy minibatch estimate, so "the
    objective stopped changing" is judged on window means: the run has settled when the mean of
    the (negative) bound over the last tenth of the run lies below its mean over the tenth
    before by at most two standard errors of that difference (the spread of the estimates within
    each tenth), or by at most ``tol`` nats per sample (a rise in the third decimal of the
    average log-likelihood, which moves no prediction; stochastic variational fits keep creeping
    up by such amounts long after the predictions stopped changing).  A run shorter than 20
    steps is never judged settled.

    Args:
        history: the negative bound at each step.
        n_samples: N, the number of training samples the bound sums over.
        tol: the rise per sample that counts as settled.
    """
    w = len(history) // 10
    if w < 2:
        return False
    before, last = np.asarray(history[-2 * w:-w]), np.asarray(history[-w:])
    drop = before.mean() - last.mean()
    se = np.sqrt((np.var(before, ddof=1) + np.var(last, ddof=1)) / w)
    return bool(drop <= max(2.0 * se, tol * n_samples))


# ---------------------------------------------------------------------- predictive (eqs. 28–31)


class Predictive(NamedTuple):
    r"""What the predictive needs: f* = offset + φ(x*)ᵀw, w ~ q(w) (in y's units).

    Under component k, f* is exactly N(offset + φ*ᵀm_k, (φ*⊙φ*)ᵀΨ_k); its draws are
    offset + φ*ᵀm_k + sqrt((φ*⊙φ*)ᵀΨ_k)·ε_ks with one fixed array ε (K, S/K) for every query
    point, so that a row's draws, and everything computed from them, depend on that row only
    (stratified over the K components, S/K each, which removes the component-choice noise).
    """

    fmap: Any
    m: jax.Array        # (K, M)
    psi: jax.Array      # (K, M)
    offset: jax.Array   # () the mean of y removed by standardisation (0 otherwise)
    eps: jax.Array      # (K, S/K) standard normal draws


def predictive(key, fmap, m, psi, offset, n_draws: int) -> Predictive:
    """The :class:`Predictive` with S = ``n_draws`` rounded up to a multiple of K."""
    m, psi = jnp.asarray(m), jnp.asarray(psi)
    eps = jax.random.normal(key, (m.shape[0], -(-n_draws // m.shape[0])), dtype=m.dtype)
    return Predictive(fmap, m, psi, jnp.asarray(offset, m.dtype), eps)


def latent_draws(pred: Predictive, X) -> jax.Array:
    """The S draws of f* at each row of X: (N*, S)."""
    F_mean, F_var = glm_objective.latent_moments(pred.fmap(X), pred.m, pred.psi)   # (N*, K)
    F = pred.offset + F_mean[..., None] + jnp.sqrt(F_var)[..., None] * pred.eps[None]
    return F.reshape(F.shape[0], -1)


@jax.jit
def moments(X, pred, lik):
    """E[y*] (eq. 29) and Var[y*] (law of total variance over the draws) at each row."""
    F = latent_draws(pred, X)
    mu = lik._inverse_link(F)
    return jnp.mean(mu, axis=1), jnp.mean(lik._conditional_variance(F), axis=1) \
        + jnp.var(mu, axis=1)


@jax.jit
def success_probability(X, pred):
    """E[σ(f*)], the probability of a success in one trial, at each row."""
    return jnp.mean(jax.nn.sigmoid(latent_draws(pred, X)), axis=1)


@jax.jit
def quantiles(X, pred, lik, levels):
    """Predictive quantiles (eqs. 30–31) at each row and level: (N*, P)."""
    return _quantiles.quantiles(lik, latent_draws(pred, X), levels)


@jax.jit
def log_density(rows, pred, lik):
    """log p(y* | x*) by the Monte Carlo predictive, log (1/S) Σ_s p(y* | f_s), per row."""
    X, y = rows
    F = latent_draws(pred, X)
    lp = lik._masked_log_prob(jnp.broadcast_to(y[:, None], F.shape), F)
    return jax.scipy.special.logsumexp(lp, axis=1) - jnp.log(F.shape[1])

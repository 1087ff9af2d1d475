r"""Updates of the latent points X (seed 000, §3.1).

**Static prior** x_n ~ N(0, I).  Given W and β the rows of X are conditionally independent
(the likelihood factorises over rows), so every row gets its own elliptical slice (Murray,
Adams & MacKay 2010) in one batched call: N slices of dimension Q instead of one of
dimension NQ, which would have to shrink to the width of the narrowest row posterior.  Each
proposal for row n evaluates row n's likelihood only (O(M·D)): once few rows are still
shrinking, the kernel gathers them and evaluates just those (issue 14).

**Dynamic prior** (the dynamic RFLVM, §3.1): each latent dimension x_q is a GP over the time
stamps t, approximated with inducing times u (Snelson & Ghahramani 2005):

.. math:: x_q \sim N(0, C), \qquad C = K_{tu}K_{uu}^{-1}K_{ut} + \mathrm{diag}(K_{tt} -
          K_{tu}K_{uu}^{-1}K_{ut}),

which costs O(N M_u²) to draw from and to evaluate.  The columns of X are updated in turn by an
elliptical slice with a draw from this prior (each slice is one block of N numbers, and the
GP-smooth proposals keep it from having to shrink as far as an iid one would), and the time
kernel's log length-scale and log variance by a random-walk Metropolis step on
p(X | θ_t) p(θ_t) with log-normal priors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import solve_triangular

from gplvm.inference.mcmc import ess_init, ess_step, mh_init, mh_step
from gplvm.linalg import jitter_floor
from gplvm.models.rflvm.features import design
from gplvm.models.rflvm.loglik import row_log_lik
from gplvm.models.rflvm.spec import MapParams, RFLVMData, RFLVMSpec

Array = jax.Array

# log(length-scale / time span) ~ N(log 0.1, 1), log var ~ N(0, 1); NumPy, not JAX, arrays:
# a JAX array made at import would start JAX's backend before jax.distributed can join processes
TIME_PRIOR_MEAN = np.array([-2.3, 0.0])
TIME_PRIOR_SD = np.array([1.0, 1.0])


def _row_ll_on(spec: RFLVMSpec, data: RFLVMData, theta: MapParams):
    """``rows -> (X_rows -> log p(y_n | x_n, θ) for those rows)``; ``rows`` None for all.

    A row's log-likelihood needs its own data only (O(M·D) per row), so the slice sampler can
    evaluate just the rows still shrinking (:func:`gplvm.inference.mcmc.elliptical_slice`).

    Args:
        spec: the likelihood (``spec.likelihood``) and whether β has an intercept row.
        data: the rows' ``Y``, ``observed``, ``offset`` and ``trials`` (the sweep passes its
            :class:`.spec.RFLVMData`, so X is conditioned on the observed entries only).
        theta: the map (W, β, σ², r) that X is conditioned on.
    """
    def on(rows):
        take = (lambda a: a) if rows is None else (lambda a: a[rows])
        Y_r, obs_r, offset_r, trials_r = map(take, (data.Y, data.observed, data.offset,
                                                    data.trials))

        def fn(X):
            psi = design(X, theta.W, spec.intercept) @ theta.beta + offset_r
            return row_log_lik(spec.likelihood, Y_r, psi, obs_r, trials_r, theta.noise_var,
                               theta.dispersion)
        return fn
    return on


def _row_ll_fn(spec: RFLVMSpec, data: RFLVMData, theta: MapParams):
    return _row_ll_on(spec, data, theta)(None)


def update_x_static(key: Array, X: Array, spec: RFLVMSpec, data: RFLVMData,
                    theta: MapParams) -> tuple[Array, Array]:
    """``spec.n_x_steps`` elliptical-slice updates of every row of X under N(0, I), given the
    map ``theta`` (``spec``, ``data``: as :func:`_row_ll_on` reads them).

    Returns:
        (X, mean number of points evaluated on the ellipse per row and step, Σ_n log p(y_n |
        x_n, ·) at the new X in :func:`.loglik.psi_log_lik`'s terms — the slice's own
        values, which the sweep's trace reuses).
    """
    on = _row_ll_on(spec, data, theta)
    fn = on(None)

    def step(carry, key):
        X, _ = carry
        key_nu, key_ess = jax.random.split(key)
        # 1. ν ~ N(0, I) per row, the ellipse of Murray et al. (2010, Fig. 2); the kernel
        #    does steps 2-7, evaluating only the rows still shrinking (``log_lik_on``)
        nu = jax.random.normal(key_nu, X.shape, X.dtype)
        state, info = ess_step(key_ess, ess_init(X, fn), fn, nu, log_lik_on=on)
        return ((state.position, jnp.sum(state.log_lik)),
                jnp.mean(info.n_proposals.astype(X.dtype)))

    (X, log_lik), n_proposals = lax.scan(step, (X, jnp.zeros((), X.dtype)),
                                         jax.random.split(key, spec.n_x_steps))
    return X, jnp.mean(n_proposals), log_lik


def map_x_static(X: Array, spec: RFLVMSpec, data: RFLVMData, theta: MapParams) -> Array:
    """Move every row of X uphill on log p(y_n | x_n, θ) + log N(x_n | 0, I), by
    ``spec.map_steps`` steps.

    Each step goes along the row's gradient g (capped at unit length) by the best of the step
    sizes 4^0 .. 4^-5, or stays put if none improves: a per-row backtracking line search done
    as one batched evaluation, so no step size needs tuning.  Used only during burn-in.
    """
    fn = _row_ll_fn(spec, data, theta)

    def log_post(X):
        return fn(X) - 0.5 * jnp.sum(X**2, axis=1)

    grad = jax.grad(lambda X: jnp.sum(log_post(X)))
    sizes = 4.0 ** -jnp.arange(6)

    def step(X, _):
        g = grad(X)
        d = g / jnp.maximum(1.0, jnp.linalg.norm(g, axis=1, keepdims=True))
        cands = X[None] + sizes[:, None, None] * d[None]              # (K, N, Q)
        vals = jax.vmap(log_post)(cands)                               # (K, N)
        best = jnp.argmax(vals, axis=0)
        rows = jnp.arange(X.shape[0])
        better = vals[best, rows] > log_post(X)
        return jnp.where(better[:, None], cands[best, rows], X), None

    X, _ = lax.scan(step, X, None, length=spec.map_steps)
    return X


# --- dynamic prior ----------------------------------------------------------------------------

def _rbf(a: Array, b: Array, lengthscale, variance) -> Array:
    return variance * jnp.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / lengthscale**2)


def time_prior_factors(t: Array, u: Array, log_params: Array):
    """(B, d): C = BBᵀ + diag(d) for the inducing-point time prior above.

    B = K_tu L_uu⁻ᵀ (N × M_u) and d = diag K_tt − rowsum(B²) ≥ 0 (clipped at a tiny floor so the
    covariance stays positive definite).
    """
    lengthscale, variance = jnp.exp(log_params[0]), jnp.exp(log_params[1])
    # 1e-8 relative jitter, raised to gplvm.linalg's floor in float32 (1e-8 is below its eps)
    rel = max(1e-8, jitter_floor(1.0, jnp.result_type(u)))
    Kuu = _rbf(u, u, lengthscale, variance) + rel * variance * jnp.eye(u.shape[0])
    Luu = jnp.linalg.cholesky(Kuu)
    B = solve_triangular(Luu, _rbf(u, t, lengthscale, variance), lower=True).T
    d = jnp.maximum(variance - jnp.sum(B**2, axis=1), 1e-6 * variance)
    return B, d


def time_prior_draw(key: Array, B: Array, d: Array, n: int) -> Array:
    """n independent draws of N(0, BBᵀ + diag d), shape (n, N)."""
    k1, k2 = jax.random.split(key)
    e1 = jax.random.normal(k1, (n, B.shape[1]), B.dtype)
    e2 = jax.random.normal(k2, (n, B.shape[0]), B.dtype)
    return e1 @ B.T + e2 * jnp.sqrt(d)


def time_prior_whitener(B: Array, d: Array):
    """(G, logdet) with C⁻¹ = diag(1/d) − GᵀG and log|C|, for C = BBᵀ + diag d (Woodbury:
    S = I + Bᵀdiag(1/d)B = LLᵀ, G = L⁻¹Bᵀdiag(1/d); determinant lemma: log|C| = Σ log d +
    log|S|).  Computed once per θ_t, so that densities at many X make no LAPACK call."""
    Mu = B.shape[1]
    Bd = B / d[:, None]
    Ls = jnp.linalg.cholesky(jnp.eye(Mu, dtype=B.dtype) + B.T @ Bd)
    G = solve_triangular(Ls, Bd.T, lower=True)                   # (Mu, N)
    return G, jnp.sum(jnp.log(d)) + 2.0 * jnp.sum(jnp.log(jnp.diag(Ls)))


def time_prior_log_density(X: Array, B: Array, d: Array, whitener=None) -> Array:
    """Σ_q log N(x_q | 0, BBᵀ + diag d), by Woodbury and the determinant lemma, O(N M_u²)."""
    N = B.shape[0]
    G, logdet = time_prior_whitener(B, d) if whitener is None else whitener
    r = G @ X                                                    # (Mu, Q)
    quad = jnp.sum(X**2 / d[:, None], axis=0) - jnp.sum(r**2, axis=0)
    return jnp.sum(-0.5 * (N * jnp.log(2 * jnp.pi) + logdet + quad))


def update_x_dynamic(key: Array, X: Array, time_params: Array, spec: RFLVMSpec,
                     data: RFLVMData, theta: MapParams, inducing_times: Array):
    """Elliptical slice on each column of X under the GP time prior (time stamps
    ``data.time``, inducing times ``inducing_times``), then the time kernel, ``spec.n_x_steps``
    times, given the map ``theta`` (``spec``, ``data``: as :func:`_row_ll_on` reads them).

    Returns:
        (X, time_params, mean number of points evaluated on the ellipse per column and step).
    """
    t = data.time
    fn_rows = _row_ll_fn(spec, data, theta)

    def column_step(carry, inputs):
        X, B, d = carry
        q, key = inputs
        key_nu, key_ess = jax.random.split(key)
        nu = time_prior_draw(key_nu, B, d, 1)                      # (1, N)

        def fn(f):
            return jnp.sum(fn_rows(X.at[:, q].set(f[0])))[None]

        state, info = ess_step(key_ess, ess_init(X[:, q][None], fn), fn, nu)
        return (X.at[:, q].set(state.position[0]), B, d), info.n_proposals[0].astype(X.dtype)

    def sweep(carry, key):
        X, params = carry
        key_cols, key_rw, key_u = jax.random.split(key, 3)
        B, d = time_prior_factors(t, inducing_times, params)
        Q = X.shape[1]
        (X, _, _), n_proposals = lax.scan(column_step, (X, B, d),
                                          (jnp.arange(Q), jax.random.split(key_cols, Q)))
        params = update_time_params(key_rw, key_u, X, params, t, inducing_times)
        return (X, params), jnp.mean(n_proposals)

    (X, time_params), n_proposals = lax.scan(sweep, (X, time_params),
                                             jax.random.split(key, spec.n_x_steps))
    return X, time_params, jnp.mean(n_proposals)


def map_x_dynamic(X: Array, time_params: Array, spec: RFLVMSpec, data: RFLVMData,
                  theta: MapParams, inducing_times: Array) -> Array:
    """Move X uphill on log p(Y | X, θ) + Σ_q log N(x_q | 0, C) by ``spec.map_steps`` steps
    (the burn-in warm-up of the dynamic model; the rows are coupled by the time prior, so one
    step size for all of X is chosen by the same batched backtracking as
    :func:`map_x_static`)."""
    fn_rows = _row_ll_fn(spec, data, theta)
    B, d = time_prior_factors(data.time, inducing_times, time_params)
    whitener = time_prior_whitener(B, d)

    def log_post(X):
        return jnp.sum(fn_rows(X)) + time_prior_log_density(X, B, d, whitener)

    grad = jax.grad(log_post)
    sizes = 4.0 ** -jnp.arange(8)
    n = jnp.sqrt(X.size)

    def step(X, _):
        g = grad(X)
        direction = g * jnp.minimum(1.0, n / (jnp.linalg.norm(g) + 1e-300))
        cands = X[None] + sizes[:, None, None] * direction[None]
        vals = jax.vmap(log_post)(cands)
        best = jnp.argmax(vals)
        return jnp.where(vals[best] > log_post(X), cands[best], X), None

    X, _ = lax.scan(step, X, None, length=spec.map_steps)
    return X


def _log_target(rel, shift, X, t, u):
    """log p(X | θ_t) + log p(θ_t), with the prior on ``rel`` = (log(ℓ/span), log σ²)."""
    B, d = time_prior_factors(t, u, rel + shift)
    prior = -0.5 * jnp.sum(((rel - TIME_PRIOR_MEAN) / TIME_PRIOR_SD) ** 2)
    return time_prior_log_density(X, B, d) + prior


def update_time_params(key_rw, key_u, X, params, t, u, step_size: float = 0.2):
    """Random-walk Metropolis on (log ℓ_t, log σ_t²) targeting p(X | θ_t) p(θ_t) (a symmetric
    proposal: the kernel compares the log targets only)."""
    span = jnp.maximum(jnp.max(t) - jnp.min(t), 1e-12)
    # The prior is on the length-scale as a fraction of the time span.
    shift = jnp.array([jnp.log(span), 0.0])
    cur = params - shift
    prop = cur + step_size * jax.random.normal(key_rw, cur.shape, cur.dtype)
    # lax.map, not two independent calls: the two targets' factorisations then run one after
    # the other (concurrent batched LAPACK calls can deadlock jaxlib's CPU pool).
    vals = lax.map(lambda p: _log_target(p, shift, X, t, u), jnp.stack([prop, cur]))
    state, _ = mh_step(key_u, mh_init(cur, lambda _: vals[1]), prop, vals[0])
    return state.position + shift

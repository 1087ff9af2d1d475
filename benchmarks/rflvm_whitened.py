"""Does whitening the weights by their conditional curvature shorten the RFLVM's NUTS trees? (issue 30)

Run (single-threaded XLA and OpenBLAS, set when unset and printed):

    .venv/bin/python benchmarks/rflvm_whitened.py [--datasets bridges] [--draws 300]
        [--iterations 1000] [--features 100] [--seed 0] [--variants prior,curvature,mode-frame]

The NUTS block of :mod:`gplvm.models.rflvm.joint` whitens the weights by their *prior*
(z = √λ (β − μ), intercept centred).  `rflvm_curvature.py` found its flattest directions to be
trade-offs between the frequencies, the latents and the weights.  This script tries the
parametrisation a generic PPL cannot write, one that follows the weights' conditional
posterior as (X, W) move: per output column j,

    β_j = β̂_j(X, W) + L_j(X, W)⁻ᵀ z_j,   L_j L_jᵀ = Φᵀ diag(Λ_j) Φ + diag(λ),
    β̂_j = (L_j L_jᵀ)⁻¹ (Φᵀ diag(Λ_j) ỹ_j + diag(λ) μ_j),

the Gaussian (IRLS) approximation of the Poisson log-likelihood at the saturated fit,
ỹ_nj = log(y_nj + ½) − offset_n with weights Λ_nj = y_nj + ½ (0 where missing).  The map
(X, W, z) ↦ (X, W, β) is block-triangular, so its log-Jacobian is −Σ_j log det L_j and the
density of (X, W, z) is the block's (in β) plus that term: the same posterior.

``--variants fixed-w`` samples the library's block with W held at the mode's (X and z
only): how much of the trees' length the frequencies' coupling makes (issue 30's
"W out of the NUTS position" question).

``--variants mode-frame`` is a third parametrisation: the weights whitened, per column, by the
block's own curvature at the mode, held fixed — z_j = ẑ_j + H_j^{-1/2} u_j with H_j the
(X, W)-fixed P × P block of the negative Hessian in z at the mode (eigenvalues floored at
0.01).  A linear map of constant Jacobian, so the density is the block's: a block-dense mass
matrix for the weights at ~10% more cost per gradient.

For each data set: chain 0's block of a 4-chain ``RFLVM(likelihood='poisson',
sampler='nuts', learn_kernel=False)`` (its mode searched by L-BFGS, ``--iterations``), then
one blackjax NUTS chain (window adaptation over ``--draws`` steps, then ``--draws`` draws, at
most 255 leapfrog steps) on each of the two densities from the same point.  The table gives
the adapted step size, leapfrog steps per draw, CPU seconds (adaptation and compilation
included) and the bulk ESS of the log-likelihood.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from gplvm.models.rflvm import gauge, joint  # noqa: E402
from gplvm.models.rflvm.features import design  # noqa: E402
from gplvm.models.rflvm.loglik import total_log_lik  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rflvm_curvature import (block_arguments, blocks_at_mode, nuts_draws,  # noqa: E402
                             settings, window_adapt)


def whitened(spec, data, log_prior_W):
    """(log-density of (X, W, z), map (X, W, β) ↦ (X, W, z), map (X, W, z) ↦ (X, W, β)),
    positions flat as in :func:`joint.to_position` (W's canonical coordinates)."""
    N, Q = data.Y.shape[0], spec.n_components
    P, D = spec.n_weights, spec.n_outputs
    n_w = joint.n_frequency_coords(spec, data)
    weight = data.observed * (data.Y + 0.5)                              # Λ (N, D)
    target = (jnp.log(data.Y + 0.5) - data.offset) * data.observed       # ỹ (N, D)
    lam, mu = data.beta_prior_prec, data.beta_prior_mean

    def frame(X, W):
        """(L (D, P, P), β̂ (D, P)) of every column."""
        Phi = design(X, W, spec.intercept)
        A = jax.vmap(lambda w: (Phi * w[:, None]).T @ Phi)(weight.T) + jnp.diag(lam)
        L = jnp.linalg.cholesky(A)
        b = (Phi.T @ (weight * target)).T + (lam[:, None] * mu).T
        return L, jax.vmap(lambda l, v: jax.scipy.linalg.cho_solve((l, True), v))(L, b)

    def split(position):
        X = position[:N * Q].reshape(N, Q)
        return X, position[N * Q:N * Q + n_w], position[N * Q + n_w:].reshape(P, D)

    def to_beta(position):
        X, packed, z = split(position)
        W = gauge.unpack(packed, spec.n_freq, Q)
        L, centre = frame(X, W)
        dev = jax.vmap(lambda l, v: jax.scipy.linalg.solve_triangular(l.T, v, lower=False))(
            L, z.T)
        log_det = jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)))
        return X, W, (centre + dev).T, log_det

    def to_z(X, packed, beta):
        L, centre = frame(X, gauge.unpack(packed, spec.n_freq, Q))
        z = jnp.einsum("jpq,jp->jq", L, beta.T - centre)                 # Lᵀ(β − β̂)
        return jnp.concatenate([X.ravel(), packed, z.T.ravel()])

    def log_density(position):
        X, W, beta, log_det = to_beta(position)
        psi = design(X, W, spec.intercept) @ beta + data.offset
        value = total_log_lik("poisson", data.Y, psi, data.observed, data.trials, None, None)
        prior_w = log_prior_W(W) + gauge.log_jacobian(W)
        return (value - 0.5 * jnp.sum(X**2) - 0.5 * jnp.sum(lam[:, None] * (beta - mu)**2)
                + prior_w - log_det)

    return log_density, to_z, lambda position: to_beta(position)[:3]


def mode_frame(fn, position, n_head: int, P: int, D: int, floor: float = 1e-2):
    """(log-density of (X, W, u), map (X, W, u) ↦ position) with z_j = ẑ_j + A_j u_j,
    A_j = H_j^{-1/2} from the z-block of the negative Hessian at the mode ``position`` (the
    columns are independent given (X, W), so P Hessian-vector products give every column's
    P × P block: the tangent e_p in every column), its eigenvalues floored at ``floor``.  A
    fixed linear map (a constant Jacobian): a block-dense mass matrix for the weights."""
    def column(p):                                          # row q, column j: −H_j[q, p]
        tangent = jnp.zeros((P, D)).at[p].set(1.0)
        v = jnp.concatenate([jnp.zeros(n_head), tangent.ravel()])
        return -jax.jvp(jax.grad(fn), (position,), (v,))[1][n_head:].reshape(P, D)

    cols = jax.jit(lambda: jax.lax.map(column, jnp.arange(P)))()    # (P(p), P(q), D)
    H = cols.transpose(2, 1, 0)                              # (D, P(q), P(p))
    H = 0.5 * (H + jnp.swapaxes(H, -1, -2))
    e, V = jnp.linalg.eigh(H)
    A = jnp.einsum("jqk,jk,jpk->jqp", V, 1.0 / jnp.sqrt(jnp.maximum(e, floor)), V)
    z_hat = position[n_head:].reshape(P, D)

    def to_position(u_position):
        u = u_position[n_head:].reshape(P, D)
        z = z_hat + jnp.einsum("jqp,pj->qj", A, u)
        return jnp.concatenate([u_position[:n_head], z.ravel()])

    start = jnp.concatenate([position[:n_head], jnp.zeros(P * D)])
    return (lambda u_position: fn(to_position(u_position))), to_position, start


def fixed_frequencies(fn, position, n_x: int, n_w: int):
    """(log-density of (X, z) with W held at ``position``'s, map (X, z) ↦ position, start):
    the block given W, the model NumPyro's fixed-W peer samples (issue 30's comparison)."""
    packed = position[n_x:n_x + n_w]

    def to_position(short):
        return jnp.concatenate([short[:n_x], packed, short[n_x:]])

    start = jnp.concatenate([position[:n_x], position[n_x + n_w:]])
    return (lambda short: fn(to_position(short))), to_position, start


def run_nuts(fn, start, loglik, key, n: int):
    """(step size, leapfrogs per draw, CPU s, ESS of the log-likelihood) of one chain."""
    import arviz as az

    t0 = time.process_time()
    state, params = window_adapt(fn, start, key, n)
    trace, steps = jax.jit(lambda s, keys: nuts_draws(fn, params, s, keys, loglik))(
        state, jax.random.split(key, n))
    cpu = time.process_time() - t0
    return (float(params["step_size"]), float(np.mean(steps)), cpu,
            float(az.ess(np.asarray(trace)[None], method="bulk")))


def main(argv=None):
    parser = block_arguments(argparse.ArgumentParser(description=__doc__.split("\n")[0]),
                             "bridges", 1000)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--variants", default="prior,curvature",
                        help="prior, curvature, mode-frame, fixed-w (comma-separated)")
    args = parser.parse_args(argv)
    print(f"{settings(args)}, {args.draws} adaptation steps + {args.draws} draws, one chain")
    print("| data | weights whitened by | step size | leapfrogs per draw | CPU s | "
          "ESS log-lik | ESS/CPU-s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for description, (spec, data, search, fn, state, log_prior_W) in blocks_at_mode(args):
        N, Q = data.Y.shape[0], spec.n_components
        n_w = joint.n_frequency_coords(spec, data)
        X, _, beta, _ = joint.from_position(spec, data, search.position, state.W)
        fn_white, to_z, white_beta = whitened(spec, data, log_prior_W)
        start_white = to_z(X, search.position[N * Q:N * Q + n_w], beta)
        prior_beta = lambda p: joint.from_position(spec, data, p, state.W)[:3]  # noqa: E731

        def loglik_of(to_beta):
            def loglik(position):
                X, W, beta = to_beta(position)
                psi = design(X, W, spec.intercept) @ beta + data.offset
                return total_log_lik("poisson", data.Y, psi, data.observed, data.trials,
                                     None, None)
            return loglik

        fn_frame, frame_to_position, start_frame = mode_frame(
            fn, search.position, N * Q + n_w, spec.n_weights, spec.n_outputs)
        fn_fixed, fixed_to_position, start_fixed = fixed_frequencies(
            fn, search.position, N * Q, n_w)
        key = jax.random.PRNGKey(args.seed)
        variants = {
            "fixed-w": ("prior, W fixed at the mode's (X and z only)", fn_fixed, start_fixed,
                        lambda s: prior_beta(fixed_to_position(s))),
            "prior": ("prior (the library's block)", fn, search.position, prior_beta),
            "curvature": ("conditional curvature", fn_white, start_white, white_beta),
            "mode-frame": ("the block's curvature at the mode, fixed", fn_frame, start_frame,
                           lambda u: prior_beta(frame_to_position(u)))}
        for name in args.variants.split(","):
            label, density, start, to_beta = variants[name]
            step, steps, cpu, ess = run_nuts(density, start, loglik_of(to_beta), key,
                                             args.draws)
            print(f"| {description} | {label} | {step:.4g} | {steps:.0f} | {cpu:.1f} | "
                  f"{ess:.0f} | {ess / cpu:.2f} |", flush=True)


if __name__ == "__main__":
    main()

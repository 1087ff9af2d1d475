"""Does a low-rank mass matrix learnt from draws shorten the RFLVM's NUTS trees? (issue 30)

Run (single-threaded XLA and OpenBLAS, set when unset and printed):

    .venv/bin/python benchmarks/rflvm_lowrank.py [--datasets scurve] [--warmup 300]
        [--draws 300] [--rank 20] [--iterations 1000] [--features 100] [--seed 0]

`rflvm_curvature.py` found the block's flattest directions to be trade-offs of the frequencies,
the latents and the weights together, which a diagonal mass matrix cannot follow, and
`rflvm_whitened.py` found fixed frames taken from the mode's curvature no help (the directions
move with W).  nutpie-style low-rank adaptation takes them instead from the draws themselves:
this script runs one chain of blackjax NUTS (window adaptation, diagonal mass; ``--warmup``
steps, then ``--draws`` draws: phase 1), takes the ``--rank`` leading principal directions V
of those draws in the diagonal mass's coordinates, z = (x − x̄)/s, with variances σ² > 1, and
samples the block again in coordinates u with

    x = x̄ + s ⊙ (u + V (σ − 1) Vᵀ u),

a fixed linear map (its Jacobian constant): the diagonal mass plus a rank-k correction, O(nk)
per leapfrog step (phase 2: window adaptation of a diagonal mass in u, ``--warmup`` steps from
phase 1's last draw, then ``--draws`` draws).  For each phase: the step size, leapfrog steps per
draw, CPU seconds of the draws alone (compiled ahead, adaptation not counted), and the bulk
ESS (and ESS per CPU-second) of the log-likelihood and of the smallest over 20 row-pair
distances (:func:`gplvm.models.rflvm.convergence.convergence_figures`, one chain).  The block
is chain 0's of a 4-chain ``RFLVM(likelihood='poisson', sampler='nuts', learn_kernel=False)``
at its L-BFGS mode (``--iterations``), as in `rflvm_whitened.py`.
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

from gplvm.models.rflvm import joint  # noqa: E402
from gplvm.models.rflvm.convergence import convergence_figures  # noqa: E402
from gplvm.models.rflvm.features import design  # noqa: E402
from gplvm.models.rflvm.loglik import total_log_lik  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rflvm_curvature import (block_arguments, blocks_at_mode, nuts_draws,  # noqa: E402
                             settings, window_adapt)

def adapt_and_draw(fn, start, key, n_warm: int, n_draws: int):
    """(step size, inverse mass, draws (S, n), leapfrogs (S,), CPU s of the draws)."""
    k_warm, k_draw = jax.random.split(key)
    state, params = jax.jit(lambda k, s: window_adapt(fn, s, k, n_warm))(k_warm, start)
    keys = jax.random.split(k_draw, n_draws)
    program = jax.jit(lambda s, k: nuts_draws(fn, params, s, k, lambda x: x)).lower(
        state, keys).compile()
    t0 = time.process_time()
    positions, steps = jax.block_until_ready(program(state, keys))
    return (float(params["step_size"]), params["inverse_mass_matrix"], positions, steps,
            time.process_time() - t0)


def main(argv=None):
    parser = block_arguments(argparse.ArgumentParser(description=__doc__.split("\n")[0]),
                             "scurve", 1000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--rank", type=int, default=20)
    args = parser.parse_args(argv)
    print(f"{settings(args)}, one chain, {args.warmup} adaptation steps + {args.draws} draws "
          f"per phase, rank {args.rank}; machine load {os.getloadavg()[0]:.2f}")
    print("| data | mass matrix | step size | leapfrogs per draw | CPU s (draws) | "
          "ESS log-lik | ESS dist (min) | ESS/CPU-s log-lik | ESS/CPU-s dist |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for description, (spec, data, search, fn, state, _) in blocks_at_mode(args):
        def figures(positions):
            def observe(x):
                X, W, beta, _ = joint.from_position(spec, data, x, state.W)
                psi = design(X, W, spec.intercept) @ beta + data.offset
                return total_log_lik("poisson", data.Y, psi, data.observed, data.trials,
                                     None, None), X
            ll, X = jax.jit(jax.vmap(observe))(positions)
            return convergence_figures(np.asarray(ll)[None], np.asarray(X)[None])

        def row(label, step, steps, cpu, positions):
            f = figures(positions)
            print(f"| {description} | {label} | {step:.4g} | {float(np.mean(steps)):.0f} | "
                  f"{cpu:.1f} | {f['ess_log_lik']:.0f} | {f['ess_distances']:.0f} | "
                  f"{f['ess_log_lik'] / cpu:.2f} | {f['ess_distances'] / cpu:.2f} |",
                  flush=True)

        key = jax.random.PRNGKey(args.seed)
        step, inv_mass, draws, steps, cpu = adapt_and_draw(fn, search.position, key,
                                                           args.warmup, args.draws)
        row("diagonal (window adaptation)", step, steps, cpu, draws)
        s = jnp.sqrt(inv_mass)
        centre = jnp.mean(draws, axis=0)
        z = (draws - centre) / s
        _, sv, vt = jnp.linalg.svd(z - jnp.mean(z, axis=0), full_matrices=False)
        var = sv**2 / (draws.shape[0] - 1)
        keep = min(args.rank, int(jnp.sum(var > 1.0)))
        V, a = vt[:keep].T, jnp.sqrt(var[:keep])
        print(f"# {description}: the draws' leading variances in the diagonal mass's "
              f"coordinates {np.array2string(np.asarray(var[:8]), precision=1)} ...; "
              f"{keep} directions kept", flush=True)

        def to_x(u):
            return centre + s * (u + V @ ((a - 1.0) * (V.T @ u)))

        def to_u(x):
            zz = (x - centre) / s
            return zz + V @ ((1.0 / a - 1.0) * (V.T @ zz))

        step2, _, draws_u, steps2, cpu2 = adapt_and_draw(
            lambda u: fn(to_x(u)), to_u(draws[-1]), jax.random.fold_in(key, 2),
            args.warmup, args.draws)
        row(f"diagonal + rank {keep} from phase 1's draws", step2, steps2, cpu2,
            jax.vmap(to_x)(draws_u))


if __name__ == "__main__":
    main()

"""ChEES-HMC against NUTS on the RFLVM's block, several chains from the mode (issue 30).

Run (single-threaded XLA and OpenBLAS, set when unset and printed):

    .venv/bin/python benchmarks/rflvm_chees.py [--datasets scurve] [--chains 4]
        [--warmup 300] [--draws 300] [--iterations 1000] [--features 100] [--seed 0]
        [--variants nuts,chees] [--learning-rate 0.025]

Issue 30 names blackjax's multi-chain adaptations ("ChEES or MEADS, which suit many short
chains") beside NUTS.  ChEES (Hoffman, Radul & Sountsov 2021) adapts one step size and one
trajectory length for all chains from the ensemble, and jitters the length by a Halton
sequence shared by the chains, so every chain takes the same number of leapfrog steps: under
``vmap`` no chain waits for another's tree, where NUTS's chains, run together, wait for the
deepest.

For each data set: chain 0's NUTS block of a 4-chain ``RFLVM(likelihood='poisson',
sampler='nuts', learn_kernel=False)`` (:mod:`gplvm.models.rflvm.joint`: X, W modulo
rotations, whitened β), its mode searched by L-BFGS (``--iterations``), and the Laplace
precisions there (:func:`gplvm.models.rflvm.map_start.laplace_precision`), which scale the
position once for both samplers (the library's first mass matrix).  ``--chains`` chains start
from the library's over-dispersed draws around the mode.  Then

* ``nuts``: blackjax window adaptation (``--warmup`` steps, diagonal mass, at most 255 leapfrog
  steps) and ``--draws`` NUTS draws, the chains one after the other (``lax.map``, as the
  library runs them);
* ``chees``: ``blackjax.chees_adaptation`` (``--warmup`` steps, Adam at ``--learning-rate``,
  target acceptance 0.651, the paper's) and ``--draws`` jittered-HMC draws, the chains under
  ``vmap``.

The table gives the adapted step size, mean leapfrog steps per draw, CPU seconds (compilation,
adaptation and draws), split R-hat and bulk ESS over the chains (ArviZ) of the log-likelihood
and of the distances between 20 fixed row pairs (the library's own figures,
:func:`gplvm.models.rflvm.convergence.convergence_figures`: the largest R-hat and smallest ESS
over the pairs), and ESS per CPU-second.
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

from gplvm.models.rflvm import joint, map_start  # noqa: E402
from gplvm.models.rflvm.convergence import convergence_figures  # noqa: E402
from gplvm.models.rflvm.features import design  # noqa: E402
from gplvm.models.rflvm.loglik import total_log_lik  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rflvm_curvature import (block_arguments, blocks_at_mode, nuts_draws,  # noqa: E402
                             settings, window_adapt)

def run_nuts(fn, starts, n_warm: int, n_draws: int, key, observe):
    """blackjax NUTS after window adaptation, chain by chain (``lax.map``)."""
    def one(args):
        key, start = args
        k_warm, k_draw = jax.random.split(key)
        state, params = window_adapt(fn, start, k_warm, n_warm)
        seen, steps = nuts_draws(fn, params, state, jax.random.split(k_draw, n_draws), observe)
        return seen, steps, params["step_size"]

    keys = jax.random.split(key, starts.shape[0])
    return jax.jit(lambda k, s: jax.lax.map(one, (k, s)))(keys, starts)


def run_chees(fn, starts, n_warm: int, n_draws: int, key, observe, learning_rate: float):
    """blackjax ChEES adaptation, then jittered dynamic HMC, the chains under ``vmap``."""
    import blackjax
    import optax

    def go(key, starts):
        k_warm, k_draw = jax.random.split(key)
        warm = blackjax.chees_adaptation(fn, starts.shape[0])
        (states, params), _ = warm.run(k_warm, starts, 0.1, optax.adam(learning_rate),
                                       n_warm, max_sampling_steps=n_draws)
        step = blackjax.dynamic_hmc(fn, **params).step

        def body(s, k):
            s, info = jax.vmap(step)(jax.random.split(k, starts.shape[0]), s)
            return s, (jax.vmap(observe)(s.position), info.num_integration_steps)

        _, (seen, steps) = jax.lax.scan(body, states, jax.random.split(k_draw, n_draws))
        seen = jax.tree_util.tree_map(lambda a: jnp.swapaxes(a, 0, 1), seen)
        return seen, steps.T, params["step_size"] * jnp.ones(starts.shape[0])

    return jax.jit(go)(key, starts)


def main(argv=None):
    parser = block_arguments(argparse.ArgumentParser(description=__doc__.split("\n")[0]),
                             "scurve", 1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--variants", default="nuts,chees")
    parser.add_argument("--learning-rate", type=float, default=0.025)
    args = parser.parse_args(argv)
    print(f"{settings(args)}, {args.chains} chains, {args.warmup} adaptation steps + "
          f"{args.draws} draws each; machine load {os.getloadavg()[0]:.2f}")
    print("| data | sampler | step size | leapfrogs per draw | CPU s | R-hat log-lik | "
          "R-hat dist (max) | ESS log-lik | ESS dist (min) | ESS/CPU-s log-lik | "
          "ESS/CPU-s dist |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for description, (spec, data, search, fn, state, log_prior_W) in blocks_at_mode(args):
        precision = map_start.laplace_precision(spec, data, state, log_prior_W,
                                                search.position)
        sd = 1.0 / jnp.sqrt(precision)
        scaled = lambda u: fn(search.position + sd * u)  # noqa: E731
        def observe(u):
            X, W, beta, _ = joint.from_position(spec, data, search.position + sd * u, state.W)
            psi = design(X, W, spec.intercept) @ beta + data.offset
            ll = total_log_lik("poisson", data.Y, psi, data.observed, data.trials, None, None)
            return ll, X

        key = jax.random.PRNGKey(args.seed)
        starts = map_start.OVERDISPERSION * jax.random.normal(
            jax.random.fold_in(key, 1), (args.chains, search.position.shape[0]))
        for name in args.variants.split(","):
            t0 = time.process_time()
            if name == "nuts":
                seen, steps, step = run_nuts(scaled, starts, args.warmup, args.draws, key,
                                             observe)
            else:
                seen, steps, step = run_chees(scaled, starts, args.warmup, args.draws, key,
                                              observe, args.learning_rate)
            jax.block_until_ready(seen)
            cpu = time.process_time() - t0
            f = convergence_figures(np.asarray(seen[0]), np.asarray(seen[1]))
            r_ll, e_ll, r_d, e_d = (f["rhat_log_lik"], f["ess_log_lik"], f["rhat_distances"],
                                    f["ess_distances"])
            print(f"| {description} | {name} | {float(np.mean(step)):.4g} | "
                  f"{float(np.mean(steps)):.0f} | {cpu:.1f} | {r_ll:.3f} | {r_d:.3f} | "
                  f"{e_ll:.0f} | {e_d:.0f} | {e_ll / cpu:.2f} | {e_d / cpu:.2f} |", flush=True)


if __name__ == "__main__":
    main()

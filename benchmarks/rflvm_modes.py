"""Separate modes or a slow climb: how far each chain's start search gets (issue 30).

The NUTS chains start from the mode of the block's density that L-BFGS finds from each
chain's jittered PCA start (:func:`gplvm.models.rflvm.map_start.start_at_mode`, at most
:data:`~gplvm.models.rflvm.map_start.MAX_ITERATIONS` iterations).  This script replaces that
search, for one fit, by ``--rounds`` rounds of ``--iterations`` L-BFGS iterations, each round
in coordinates scaled by the Laplace precisions where it starts
(:func:`~gplvm.models.rflvm.map_start.laplace_precision`: a diagonal preconditioner renewed
every round; ``--rounds 0`` is the library's own search, which the script runs through the
same code to measure its gradient the same way), then runs the library's NUTS
sweeps from there and prints, per chain, the block's log-density at the mode found and its
largest |gradient| coordinate in Laplace standard deviations (|g_i| / √d_i, the Newton step
of a diagonal quadratic, as ``RFLVM(inference='map')``'s ``converged_`` reads it), and the
fit's split R-hat and bulk ESS
(:func:`gplvm.models.rflvm.convergence.convergence_figures`).

If the modes of the chains are near-stationary (small gradients) yet hundreds of nats apart,
the posterior has separate local modes, which more sweeps of a local sampler will not join;
if they meet, the chains' disagreement was transit from poor starts.

    .venv/bin/python benchmarks/rflvm_modes.py --dataset bridges --rounds 0
    .venv/bin/python benchmarks/rflvm_modes.py --dataset bridges --rounds 3 --iterations 1000
    .venv/bin/python benchmarks/rflvm_modes.py --dataset bridges --rounds 3 --iterations 1000 --sweeps 800

Cold compiles (the start program's size depends on ``--iterations``, which the persistent
cache's key does not see): the script sets ``GPLVM_COMPILATION_CACHE=0``.  Single-threaded
XLA and OpenBLAS (set when unset, printed).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ["GPLVM_COMPILATION_CACHE"] = "0"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import gplvm  # noqa: E402
import gplvm.models.rflvm.map_start as start  # noqa: E402
from gplvm.models.rflvm.joint import log_density, state_at, to_position  # noqa: E402
from gplvm.models.rflvm.sweep import prior_W  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rflvm_convergence import LIKELIHOODS, load  # noqa: E402


def preconditioned_start(rounds: int, iterations: int):
    """:func:`~gplvm.models.rflvm.map_start.start_at_mode` with its search replaced by
    ``rounds`` rounds of L-BFGS, each in coordinates u = √d (p − p_r), d the Laplace
    precisions at the round's start p_r (:func:`~gplvm.models.rflvm.map_start.find_mode`'s
    ``scale``; unlike ``RFLVM(inference='map')``, whose first round is plain); the rest (the over-dispersed draw, the inverse
    mass) as the library's."""
    def start_at_mode(key, spec, data, state):
        k_prior, k_noise = jax.random.split(key)
        log_prior_W = prior_W(k_prior, spec, data, state).total
        Y = state.Y_fill if spec.collapsed else None
        fn = log_density(spec, data, state.W, state.noise_var, state.dispersion_rate, Y,
                         log_prior_W)

        def one_round(_, carry):
            p, _ = carry
            scale = 1.0 / jnp.sqrt(start.laplace_precision(spec, data, state, log_prior_W, p))
            found = start.find_mode(fn, p, iterations, scale)
            return found.position, found

        p0 = to_position(spec, data, state)
        if rounds == 0:
            found = start.find_mode(fn, p0)
            p = found.position
        else:
            first = start.ModeSearch(p0, jnp.full((), -jnp.inf, p0.dtype),   # replaced by
                                     jnp.zeros((), jnp.int32),               # round 1
                                     jnp.full((), jnp.inf, p0.dtype))
            p, found = jax.lax.fori_loop(0, rounds, one_round, (p0, first))
        precision = start.laplace_precision(spec, data, state, log_prior_W, p)
        # the Newton step of a diagonal quadratic, in Laplace sds: |g_i| / √d_i
        scaled = jnp.max(jnp.abs(jax.grad(fn)(p)) / jnp.sqrt(precision))
        noise = jax.random.normal(k_noise, p.shape, p.dtype)
        moved = state_at(spec, data, state, p + start.OVERDISPERSION * noise / jnp.sqrt(precision))
        return (moved._replace(tuning=moved.tuning._replace(inverse_mass=1.0 / precision)),
                found._replace(position=p, log_density=fn(p), max_gradient=scaled))
    return start_at_mode


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="bridges",
                        help="scurve, bridges, bridges-nb, congress109, scurve784")
    parser.add_argument("--rounds", type=int, default=3,
                        help="preconditioned rounds of L-BFGS (0: the library's own search)")
    parser.add_argument("--iterations", type=int, default=1000, help="per round")
    parser.add_argument("--sweeps", type=int, default=20,
                        help="NUTS sweeps after the start (half of them burn-in)")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = load(args.dataset)
    if data is None:
        return
    print(f"# OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']} GPLVM_COMPILATION_CACHE=0; {data.description}; "
          f"RFLVM() defaults, {args.chains} chains, seed {args.seed}; start: "
          + ("the library's search" if args.rounds == 0 else
             f"{args.rounds} preconditioned rounds x {args.iterations} L-BFGS iterations"),
          flush=True)
    start.start_at_mode = preconditioned_start(args.rounds, args.iterations)
    model = gplvm.RFLVM(likelihood=LIKELIHOODS.get(args.dataset, "poisson"),
                        n_iter=args.sweeps, burn_in=args.sweeps // 2, n_chains=args.chains,
                        random_state=args.seed, progress=False)
    cpu = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(data.Y, offset=data.offset)
    cpu = time.process_time() - cpu
    found = {k: np.asarray(v) for k, v in model.mode_start_.items()}
    best = found["log_density"].max()
    print("| chain | log-density at the mode | minus the best chain's | largest \\|gradient\\| "
          "/ √(Laplace precision) | L-BFGS iterations (last round) |")
    print("| --- | --- | --- | --- | --- |")
    for c in range(args.chains):
        print(f"| {c} | {found['log_density'][c]:.1f} | {found['log_density'][c] - best:.1f} | {found['max_gradient'][c]:.3g} "
              f"| {int(found['n_iterations'][c])} |")
    figures = model.convergence_
    print(f"\n{args.sweeps} x {args.chains} sweeps (burn-in {args.sweeps // 2}), {cpu:.1f} CPU s "
          f"(compilation, start and sweeps): split R-hat log-lik {figures['rhat_log_lik']:.3f}, "
          f"latent distances (max) {figures['rhat_distances']:.3f}; bulk ESS "
          f"{figures['ess_log_lik']:.0f} / {figures['ess_distances']:.0f} (min)")


if __name__ == "__main__":
    main()

"""How many leapfrog steps per draw issue 30's 5-minute budget allows, per data set (issue 30).

Issue 30 asks every data set (the Poisson S-curve at 300 × 50, bridges, congress109 and a
1000 × 784 count matrix) to reach split R-hat ≤ 1.01 and bulk ESS ≥ 400 with 4 chains in 5
minutes of this 2-core machine, i.e. 600 CPU seconds.  A gradient-based sampler pays one
gradient of the block's log-density per leapfrog step, so the budget bounds the leapfrog
steps per draw whatever the sampler's other costs:

    L_max = budget / (chains × (burn-in + ESS target / chains) × t_grad),

counting the fewest draws that can give the ESS target (ESS per draw 1, more than any run in
benchmarks/README.md reached: the fixed-W model's converged run, 0.3-0.5) and the default's
burn-in (and, in a column of its own, no burn-in at all).  The script times t_grad, the
gradient of the NUTS block's log-density (:func:`gplvm.models.rflvm.joint.log_density`: X, W
modulo rotations, whitened β, the fixed RBF's prior on W; the DP kernel's integrated prior
adds a term of O(M Q²)), jitted, single-threaded, for one chain and for two chains batched
by ``vmap`` (the library runs 4 chains as two per device on two devices), each call a
``lax.scan`` of 10 gradients, median of ``--repeats`` calls after compilation, and
prints L_max beside the leapfrog steps per draw the library's NUTS has been measured to take
(benchmarks/README.md: 127 on the S-curve with W fixed, 255 with W sampled; 255–1023 on
bridges; NumPyro 494 on the 1000 × 784 set during its warm-up).  A leapfrog step costs a
gradient and a little more (the momentum, the tree's bookkeeping).  At the two small sets a
gradient takes about a millisecond and the timing is noisy at that scale; at the two large
ones the gradient's three matrix products of size N × P × J (ψ = Φβ and its two adjoints,
~1 GFLOP at 1000 × 784) take nearly all of it.

    .venv/bin/python benchmarks/rflvm_cost_floor.py
        [--datasets scurve,bridges,congress109,scurve784] [--budget 600] [--burn-in 200]
        [--ess 400] [--chains 4] [--repeats 20]

Single-threaded XLA and OpenBLAS (set when unset, printed with the machine).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import argparse  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

from gplvm.models.rflvm import joint  # noqa: E402
from gplvm.models.rflvm.sweep import prior_W  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rflvm_convergence import chain_starts, load  # noqa: E402


#: gradient evaluations per timed call (a ``lax.scan``, so a call's dispatch is shared)
STEPS = 10


def seconds_per_call(f, x, repeats: int) -> float:
    """Median process-CPU seconds of ``f(x)`` after one call that compiles it."""
    jax.block_until_ready(f(x))
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        jax.block_until_ready(f(x))
        times.append(time.process_time() - t0)
    return float(np.median(times))


def gradient_seconds(Y, offset, args) -> tuple:
    """(position size, CPU s per gradient of one chain alone, CPU s per chain-gradient of the
    two chains batched by ``vmap`` on one device, as the library runs 4 chains on 2 devices)
    of the NUTS block at the chains' starts, each a ``lax.scan`` of :data:`STEPS` tiny
    gradient steps (the position moves, so no evaluation repeats another)."""
    spec, data, states = chain_starts(np.asarray(Y, dtype=float), args, args.chains, offset)

    def steps(state):
        log_prior_W = prior_W(jax.random.PRNGKey(1), spec, data, state).total
        grad = jax.grad(joint.log_density(spec, data, state.W, state.noise_var,
                                          state.dispersion_rate, None, log_prior_W))

        def body(position, _):
            return position + 1e-8 * grad(position), None
        return jax.lax.scan(body, joint.to_position(spec, data, state), None, STEPS)[0]

    one = jax.tree_util.tree_map(lambda a: a[0], states)
    n_position = int(joint.to_position(spec, data, one).size)
    single = seconds_per_call(jax.jit(steps), one, args.repeats) / STEPS
    pair = jax.tree_util.tree_map(lambda a: a[:2], states)
    batched = seconds_per_call(jax.jit(jax.vmap(steps)), pair, args.repeats)
    return n_position, single, batched / (STEPS * 2)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default="scurve,bridges,congress109,scurve784")
    p.add_argument("--budget", type=float, default=600.0,
                   help="CPU seconds (5 minutes of the 2 cores)")
    p.add_argument("--burn-in", type=int, default=200, help="the default's burn-in sweeps")
    p.add_argument("--ess", type=int, default=400, help="the auto rule's ESS target")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=os.path.dirname(os.path.abspath(__file__))).stdout
    print(f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']}  {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, jax {jax.__version__}, commit {commit.strip()}")
    draws = args.burn_in + -(-args.ess // args.chains)
    print(f"budget {args.budget:.0f} CPU s; {args.chains} chains × ({args.burn_in} burn-in + "
          f"{draws - args.burn_in} draws) = {args.chains * draws} chain-sweeps at the least\n")
    print("| data | position size | gradient, one chain (ms) | gradient, chains batched "
          "(ms per chain) | L_max (leapfrogs per draw the budget allows) | L_max without burn-in | "
          "CPU s at 127 / 255 leapfrogs per draw |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.datasets.split(","):
        loaded = load(name)
        if loaded is None:
            continue
        n, single, batched = gradient_seconds(loaded.Y, loaded.offset, args)
        t = min(single, batched)
        l_max = args.budget / (args.chains * draws * t)
        l_free = args.budget / (args.chains * (draws - args.burn_in) * t)
        cost = [args.chains * draws * L * t for L in (127, 255)]
        print(f"| {loaded.description} | {n:,} | {1e3 * single:.2f} | {1e3 * batched:.2f} | "
              f"{l_max:.0f} | {l_free:.0f} | {cost[0]:,.0f} / {cost[1]:,.0f} |", flush=True)


if __name__ == "__main__":
    main()

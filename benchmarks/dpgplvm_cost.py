"""Cost of one DP-GP-LVM bound-plus-gradient against the Bayesian GPLVM's (issue 12).

Each atom has its own ARD weights, so its Ψ-statistics are its own and the cost grows with the
truncation T; the acceptance is a ratio of at most 1.5·T to the Bayesian GPLVM's bound and
gradient on the same data (oil flow, N = 1000, D = 12, Q = 10, M = 30).  Both are compiled
once, then timed as the median over repeats of a blocking call (CPU process time and wall
time); the DP-GP-LVM's is the gradient of its whole objective (Σ_t data terms − KL + atom
priors) with φ soft and every atom's kernel different.

Run single-threaded:
    OPENBLAS_NUM_THREADS=1 XLA_FLAGS=--xla_cpu_multi_thread_eigen=false \\
        .venv/bin/python benchmarks/dpgplvm_cost.py
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np


def _timed(calls, repeats):
    """Median wall and CPU time of each (fn, args), measured in interleaved rounds so that a
    change in the machine's load falls on every configuration alike."""
    for fn, args in calls:
        jax.block_until_ready(fn(*args))                               # compile
    wall, cpu = np.zeros((repeats, len(calls))), np.zeros((repeats, len(calls)))
    for r in range(repeats):
        for i, (fn, args) in enumerate(calls):
            w0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(fn(*args))
            wall[r, i] = time.perf_counter() - w0
            cpu[r, i] = time.process_time() - c0
    return np.median(wall, axis=0), np.median(cpu, axis=0)


def main():
    from gplvm.data.loaders import load_oil_flow
    from gplvm.expectations import Analytic
    from gplvm.kernels import RBF
    from gplvm.models.gplvm_family.variants.dp import atoms
    from gplvm.models.gplvm_family.bound import Problem, negative_bound
    from gplvm.models.gplvm_family.latent import IidLatent
    from gplvm.models.gplvm_family.route import DenseRoute
    from gplvm.objectives import collapsed
    from gplvm.transforms import inverse_softplus

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--truncations", type=int, nargs="+", default=[1, 4, 10])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(f"threads: OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')} "
          f"XLA_FLAGS={os.environ.get('XLA_FLAGS')} jax devices={jax.devices()}")
    Y = load_oil_flow().Y
    Ys = (Y - Y.mean(0)) / Y.std(0)
    N, D = Ys.shape
    Q, M = 10, 30
    rng = np.random.default_rng(0)
    kernel = RBF(lengthscale=jnp.ones(Q), variance=1.0)
    problem = Problem(jnp.asarray(Ys), collapsed.group_columns(Ys), IidLatent(), kernel,
                      Analytic(), DenseRoute(), 1e-6)
    shared = {"Z": jnp.asarray(rng.normal(size=(M, Q))),
              "X_mean": jnp.asarray(rng.normal(size=(N, Q))),
              "X_var": inverse_softplus(jnp.asarray(rng.uniform(0.05, 0.2, (N, Q))))}
    u1 = dict(shared, kernel=kernel.unconstrained(), noise_var=inverse_softplus(0.1))
    base_fn = jax.jit(jax.value_and_grad(negative_bound))
    calls = [(base_fn, (u1, problem))]
    prior = atoms.AtomPrior()
    dp_fn = jax.jit(jax.value_and_grad(atoms.negative_gp_part))
    for T in args.truncations:
        kernels = [RBF(lengthscale=jnp.asarray(rng.uniform(0.5, 3.0, Q)),
                       variance=float(rng.uniform(0.5, 2.0))).unconstrained()
                   for _ in range(T)]
        u = dict(shared, kernel=atoms.stack_atoms(kernels),
                 noise_var=inverse_softplus(jnp.asarray(rng.uniform(0.05, 0.3, T))))
        phi = jnp.asarray(rng.dirichlet(np.ones(T), size=D))
        calls.append((dp_fn, (u, problem, phi, prior)))
    wall, cpu = _timed(calls, args.repeats)
    print(f"N={N} D={D} Q={Q} M={M}; repeats={args.repeats} (median, interleaved rounds)")
    print(f"BayesianGPLVM bound+gradient: wall {1e3 * wall[0]:.2f} ms  cpu "
          f"{1e3 * cpu[0]:.2f} ms")
    for i, T in enumerate(args.truncations, start=1):
        ratio = cpu[i] / cpu[0]
        print(f"DPGPLVM T={T:2d}: wall {1e3 * wall[i]:.2f} ms  cpu {1e3 * cpu[i]:.2f} ms  "
              f"cpu ratio {ratio:.2f} (limit 1.5·T = {1.5 * T:.1f}) "
              f"{'ok' if ratio <= 1.5 * T else 'OVER'}")


if __name__ == "__main__":
    main()

"""Seconds per RFLVM Gibbs sweep after compilation, for each likelihood at the paper's sizes.

Run: ``.venv/bin/python benchmarks/rflvm_speed.py [--sweeps 20] [--likelihoods ...]``.

* S-curve (seed 000 §4): N = 500, J = 100, M = 100, Q = 2, every likelihood;
* congress109 (Table 1): 529 × 1000 counts, M = 100, Q = 2, Poisson and negative binomial
  (read from ``../shared/data``; skipped with a message when absent).

One chain, a whole sweep jitted (the estimator's compiled unit), timed over ``--sweeps`` sweeps
after a burn-in of ``--warm`` sweeps (the first sweeps from a PCA start are slower: the slice
samplers shrink further while the chain moves towards the posterior).  The issue's reference
figures (the authors' NumPy/autograd implementation, measured on this machine when the issue was
written; not re-run here, its Pólya-gamma dependency no longer builds) are printed beside ours.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import gplvm  # noqa: F401
from gplvm.data import make_s_curve
from gplvm.kernels import RBF
from gplvm.models._rflvm import sweep as sw
from gplvm.models._rflvm.init import init_state, prepare_data
from gplvm.models._rflvm.spec import RFLVMSpec

REFERENCE = {("S-curve", "gaussian"): "0.390 s/sweep", ("congress109", "poisson"): "10.6 s/sweep"}


def _pca(Z, Q=2):
    Z = Z - Z.mean(0)
    U, s, _ = np.linalg.svd(Z, full_matrices=False)
    X0 = U[:, :Q] * s[:Q]
    return X0 / X0.std(0)


def time_sweeps(kind, Y, n_sweeps, n_warm, n_trials=None):
    N, J = Y.shape
    D = J - 1 if kind == "multinomial" else J
    if kind == "gaussian":
        Y = (Y - Y.mean(0)) / Y.std(0)
    spec = RFLVMSpec(likelihood=kind, n_components=2, n_freq=50, n_outputs=D,
                     intercept=kind != "gaussian")
    data = prepare_data(spec, Y, None, n_trials, RBF(lengthscale=1.0), None)
    X0 = jnp.asarray(_pca(Y if kind == "gaussian" else np.log1p(Y)))
    state = init_state(jax.random.PRNGKey(0), spec, data, X0, 0.1, 20)
    step = jax.jit(lambda k, s, d: sw.sweep(k, s, spec, d, jnp.zeros(1)))
    start = time.perf_counter()
    state = jax.block_until_ready(step(jax.random.PRNGKey(0), state, data))
    compile_s = time.perf_counter() - start
    for i in range(n_warm):
        state = step(jax.random.PRNGKey(1000 + i), state, data)
    jax.block_until_ready(state)
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(n_sweeps):
        state = step(jax.random.PRNGKey(i + 1), state, data)
    jax.block_until_ready(state)
    return (compile_s, (time.perf_counter() - start) / n_sweeps,
            (time.process_time() - cpu) / n_sweeps)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweeps", type=int, default=20)
    p.add_argument("--warm", type=int, default=20)
    p.add_argument("--likelihoods", default="gaussian,poisson,negative_binomial,bernoulli,"
                                            "binomial,multinomial")
    p.add_argument("--no-congress", action="store_true")
    args = p.parse_args()
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '(unset)')} "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')} "
          f"cores={len(os.sched_getaffinity(0))} jax={jax.__version__} "
          f"devices={jax.devices()} load={os.getloadavg()}")
    print(f"{'data':>12} {'likelihood':>18} {'compile s':>10} {'s/sweep':>9} {'CPU s/sweep':>12} "
          f"{'reference':>15}")
    cases = []
    for kind in args.likelihoods.split(","):
        d = make_s_curve(kind, n_samples=500, n_outputs=100, random_state=0)
        cases.append(("S-curve", kind, d.Y, 10 if kind == "binomial" else None))
    if not args.no_congress:
        try:
            from gplvm.data import load_congress109
            Yc = load_congress109().Y
            cases += [("congress109", k, Yc, None) for k in ("poisson", "negative_binomial")]
        except (FileNotFoundError, OSError) as err:
            print(f"congress109 not found ({err}); pass --no-congress or set GPLVM_DATA_DIR")
    for name, kind, Y, n_trials in cases:
        c, s, cpu = time_sweeps(kind, Y, args.sweeps, args.warm, n_trials)
        ref = REFERENCE.get((name, kind), "")
        print(f"{name:>12} {kind:>18} {c:>10.1f} {s:>9.3f} {cpu:>12.3f} {ref:>15}", flush=True)


if __name__ == "__main__":
    main()

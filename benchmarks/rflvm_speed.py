"""Seconds per RFLVM Gibbs sweep after compilation, for each likelihood at the paper's sizes,
and the wall time per sweep of 1, 2 and 4 chains on one core and on every core.

Run: ``.venv/bin/python benchmarks/rflvm_speed.py [--sweeps 20] [--likelihoods ...]``;
``--chains-only`` runs the second table alone, ``--no-chains`` the first;
``--default-fit [--fit-iter N]`` times the issue's 1000 × 784 Poisson fit at the defaults.

* S-curve (seed 000 §4): N = 500, J = 100, M = 100, Q = 2, every likelihood;
* congress109 (Table 1): 529 × 1000 counts, M = 100, Q = 2, Poisson and negative binomial
  (read from ``../shared/data``; skipped with a message when absent).

First table: one chain, a whole sweep jitted, timed over ``--sweeps`` sweeps after a burn-in of
``--warm`` sweeps (the first sweeps from a PCA start are slower: the slice samplers shrink further
while the chain moves towards the posterior).  The issue's reference figures (the authors'
NumPy/autograd implementation, measured on this machine when the issue was written; not re-run
here, its Pólya-gamma dependency no longer builds) are printed beside ours.

Second table (issue 14, "chains on cores"): ``RFLVM.fit`` itself with ``n_chains`` = 1, 2, 4, in
a fresh process with one CPU device (``GPLVM_CPU_DEVICES=1``: the chains one after the other)
and with the default one device per core (the chains one per device, ``d`` at a time, see
``gplvm.inference.mcmc._devices``).  Wall and process-CPU seconds per sweep of all chains are
taken from the driver's per-call timings after ``--warm`` sweeps; with C chains on d free cores
the wall time should approach (one chain's) × ceil(C / d).  The thread settings are printed:
XLA runs each device's part of a program on its own thread of the CPU client's pool, and inside
one device's program uses its intra-op (Eigen) pool unless ``--xla_cpu_multi_thread_eigen=false``.
On a loaded machine the kernel's autogroup scheduling gives a process a fixed share of the CPUs
whatever its thread count, so the parallel speed-up only shows when cores are free: the load
average is printed with each row.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import gplvm
from gplvm.data import make_s_curve
from gplvm.kernels import RBF
from gplvm.models.rflvm import sweep as sw
from gplvm.models.rflvm.init import init_state, prepare_data
from gplvm.models.rflvm.spec import RFLVMSpec

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _hooks import driver_timings  # noqa: E402

REFERENCE = {("S-curve", "gaussian"): "0.390 s/sweep", ("congress109", "poisson"): "10.6 s/sweep"}
PAPER_SWEEPS = 2000     # seed 000's protocol, the RFLVM's default n_iter until issue 30


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


def chains_worker(kind: str, n_chains: int, n_sweeps: int, n_warm: int) -> dict:
    """One ``RFLVM.fit`` with ``n_chains`` chains; the driver's timings after ``n_warm`` sweeps."""
    Y = _chains_data(kind)
    start = time.perf_counter()
    with driver_timings() as timings:
        gplvm.RFLVM(likelihood=kind, n_chains=n_chains, n_iter=n_warm + n_sweeps,
                    burn_in=n_warm, map_sweeps=0, block_size=n_warm + n_sweeps, progress=False,
                    sampler="gibbs", random_state=0).fit(Y)
    done, counted, wall, cpu = 0, 0, 0.0, 0.0
    for n, w, c in timings["calls"]:   # the calls that start after the warm-up sweeps
        if done >= n_warm:
            counted, wall, cpu = counted + n, wall + w, cpu + c
        done += n
    from gplvm.inference.mcmc import placement
    return dict(chains=n_chains, devices=len(jax.devices()), wall=wall / counted,
                cpu=cpu / counted, compile=timings["compile_s"],
                fit=time.perf_counter() - start, layout=placement(n_chains).describe(),
                load=os.getloadavg()[0])


def _chains_data(kind: str):
    try:
        from gplvm.data import load_congress109
        return load_congress109().Y
    except (FileNotFoundError, OSError):
        return make_s_curve(kind, n_samples=500, n_outputs=100, random_state=0).Y


def chains_table(kind: str, n_sweeps: int, n_warm: int, chain_counts) -> None:
    """Per sweep of all chains: one CPU device against one per core, fresh processes."""
    print(f"\nchains on cores ({kind}, congress109 if present else S-curve; "
          f"{n_sweeps} sweeps after {n_warm}):")
    print(f"{'chains':>6} {'devices':>7} {'wall s/sweep':>12} {'CPU s/sweep':>11} "
          f"{'x 1 chain':>9} {'compile s':>9} {'load':>5}  layout")
    one_chain = {}
    for c in chain_counts:
        for devices in ("1", ""):       # one CPU device; one per core (the default)
            env = {**os.environ, "GPLVM_CPU_DEVICES": devices}
            out = subprocess.run([sys.executable, __file__, "--chains-worker", kind, str(c),
                                  str(n_sweeps), str(n_warm)], env=env, capture_output=True,
                                 text=True, check=True).stdout.strip().splitlines()[-1]
            r = json.loads(out)
            one_chain.setdefault(devices, r["wall"])
            ratio = r["wall"] / one_chain[devices]
            print(f"{c:>6} {r['devices']:>7} {r['wall']:>12.3f} {r['cpu']:>11.3f} "
                  f"{ratio:>9.2f} {r['compile']:>9.1f} {r['load']:>5.1f}  {r['layout']}",
                  flush=True)


def default_fit(n_iter) -> None:
    """Issue 14's "Poisson fit on 1000 × 784 counts with the default settings" as they were
    then: ``RFLVM(likelihood='poisson', sampler='gibbs', n_iter=2000, burn_in=1000)`` (the
    paper's protocol; the default is NUTS until converged since issue 30, whose figures are
    ``rflvm_convergence.py``'s), 4 chains, the default devices and threads, on an S-curve of
    1000 × 784 Poisson counts.
    ``--fit-iter`` runs fewer sweeps (burn-in half of them) and projects the default's wall
    time from the measured seconds per sweep of all chains after the compile, which is printed
    as a projection."""
    Y = make_s_curve("poisson", n_samples=1000, n_outputs=784, random_state=0).Y
    default_iter = PAPER_SWEEPS
    n_iter = default_iter if n_iter is None else n_iter
    model = gplvm.RFLVM(likelihood="poisson", sampler="gibbs", n_iter=n_iter,
                        burn_in=n_iter // 2, random_state=0)
    start = time.perf_counter()
    with driver_timings() as timings:
        model.fit(Y)
    wall = time.perf_counter() - start
    per_sweep = timings["sweep_s"]        # wall per sweep of all chains, compile excluded
    print(f"\ndefault Poisson fit, 1000 x 784 counts: n_iter {model.n_iter}, {model.n_chains} "
          f"chains, {len(jax.devices())} devices")
    print(f"  wall {wall:.1f} s (compile {timings['compile_s']:.1f} s); "
          f"{per_sweep:.3f} s per sweep of all chains")
    if model.n_iter != default_iter:
        projected = wall + (default_iter - model.n_iter) * per_sweep
        print(f"  projected for the default n_iter = {default_iter}: {projected:.0f} s "
              f"({projected / 60:.1f} min; issue 14 target 5 min)")
    else:
        print(f"  ({wall / 60:.1f} min; issue 14 target 5 min)")


def settings() -> str:
    flags = os.environ.get("XLA_FLAGS", "")
    eigen = "off" if "xla_cpu_multi_thread_eigen=false" in flags else "on"
    return (f"XLA_FLAGS={flags or '(unset)'} (intra-op Eigen threads {eigen}) "
            f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')} "
            f"cores={len(os.sched_getaffinity(0))} jax={jax.__version__} "
            f"devices={len(jax.devices())} x {jax.devices()[0].platform} "
            f"load={os.getloadavg()}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--chains-worker":
        kind, c, n, w = sys.argv[2], *map(int, sys.argv[3:6])
        print(json.dumps(chains_worker(kind, c, n, w)))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweeps", type=int, default=20)
    p.add_argument("--warm", type=int, default=20)
    p.add_argument("--likelihoods", default="gaussian,poisson,negative_binomial,bernoulli,"
                                            "binomial,multinomial")
    p.add_argument("--no-congress", action="store_true")
    p.add_argument("--chains", default="1,2,4", help="chain counts of the second table")
    p.add_argument("--chains-likelihood", default="poisson")
    p.add_argument("--chains-only", action="store_true")
    p.add_argument("--no-chains", action="store_true")
    p.add_argument("--default-fit", action="store_true",
                   help="only the default Poisson fit on 1000 x 784 counts (issue 14)")
    p.add_argument("--fit-iter", type=int, default=None,
                   help="sweeps of --default-fit (default: the estimator's), projected")
    args = p.parse_args()
    print(settings())
    if args.default_fit:
        default_fit(args.fit_iter)
        return
    if not args.chains_only:
        sweep_table(args)
    if not args.no_chains:
        chains_table(args.chains_likelihood, args.sweeps, args.warm,
                     [int(c) for c in args.chains.split(",")])


def sweep_table(args) -> None:
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

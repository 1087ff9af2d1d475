"""Where the RFLVM's first fit spends its compile time (issue 30, item 4 "Compile once, small").

One short fit (``n_iter=4, burn_in=2, block_size=2``) per sampler, single-threaded, with the
persistent compilation cache off (so every program is compiled cold, and the exported-block
files of :mod:`gplvm.inference.mcmc._exported`, which live in that cache's folder, are neither
read nor written).  JAX's compile-phase timers (those behind ``jax_log_compiles``) give, per jitted function, the seconds
spent tracing it, lowering it to StableHLO and compiling it with XLA, measured here in process
CPU seconds (JAX's timer patched; XLA's own threads count too); the table sums them by function
name.  The fit's total wall and process CPU
seconds and its peak resident memory are printed below the table.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/rflvm_compile.py
    .venv/bin/python benchmarks/rflvm_compile.py --samplers nuts --likelihoods negative_binomial
    .venv/bin/python benchmarks/rflvm_compile.py --n-samples 1000 --n-outputs 1000
    .venv/bin/python benchmarks/rflvm_compile.py --learn-kernel   # the DP mixture on W
    .venv/bin/python benchmarks/rflvm_compile.py --emitters off   # the faster-compiling opt-in
    .venv/bin/python benchmarks/rflvm_compile.py --without lbfgs  # what the mode start's parts cost

``--without lbfgs`` replaces the NUTS start's L-BFGS search (:func:`gplvm.models.rflvm.
map_start.find_mode`) by "stay where you are", ``--without curvature`` its Hessian-vector
products (:func:`~gplvm.models.rflvm.map_start.curvature_diagonal`) by ones: an ablation, to
see what each part of the ``start`` program costs to compile (the fit is then not the
library's).

Each (likelihood, sampler) runs in its own subprocess, so that nothing compiled for one is
reused by the next.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ["GPLVM_COMPILATION_CACHE"] = "0"     # cold compiles: no persistent cache
os.environ.setdefault("GPLVM_CPU_DEVICES", "1")  # one device: one program per block

import re          # noqa: E402
import resource    # noqa: E402
import time        # noqa: E402
import logging     # noqa: E402
from collections import defaultdict  # noqa: E402

PATTERNS = {
    "trace": re.compile(r"Finished tracing (\S+) for jit in ([0-9.]+) sec"),
    "lower": re.compile(r"Finished jaxpr to MLIR module conversion (\S+) in ([0-9.]+) sec"),
    "compile": re.compile(r"Finished XLA compilation of (\S+) in ([0-9.]+) sec"),
}


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.rows = defaultdict(lambda: defaultdict(float))
        self.counts = defaultdict(int)

    def emit(self, record):
        msg = record.getMessage()
        for phase, pat in PATTERNS.items():
            m = pat.search(msg)
            if m:
                name, secs = m.group(1), float(m.group(2))
                self.rows[name][phase] += secs
                if phase == "compile":
                    self.counts[name] += 1


def _cpu_timed_logs(collect) -> None:
    """JAX's compile-phase timers, measuring process CPU seconds instead of wall seconds (the
    machine may be shared; XLA's own threads count too), reported to ``collect``."""
    from jax._src import dispatch

    class CPUElapsed:
        def __init__(self, fmt, fun_name, event=None):
            self.fmt, self.fun_name = fmt, fun_name

        def __enter__(self):
            self.start = time.process_time()

        def __exit__(self, *exc):
            collect.emit(logging.makeLogRecord({"msg": self.fmt.format(
                fun_name=self.fun_name, elapsed_time=time.process_time() - self.start)}))

    dispatch.log_elapsed_time = CPUElapsed


def _ablate(parts) -> None:
    """``--without``: parts of the NUTS start patched out (module docstring)."""
    import jax.numpy as jnp
    import gplvm.models.rflvm.map_start as start
    if "lbfgs" in parts:
        start.find_mode = lambda fn, position, max_iterations=0: start.ModeSearch(
            position, fn(position), jnp.zeros((), jnp.int32), jnp.zeros((), position.dtype))
    if "curvature" in parts:
        start.curvature_diagonal = lambda spec, data, fn, position: jnp.ones_like(position)


def _row(label: str, n: int, r) -> str:
    return (f"{label[:44]:<44} {n:>3} {r['trace']:>8.2f} {r['lower']:>8.2f} "
            f"{r['compile']:>8.2f} {sum(r[p] for p in PATTERNS):>8.2f}")


def one(args, likelihood: str, sampler: str) -> None:
    """One fit of ``likelihood`` × ``sampler`` in this process, and its table."""
    import gplvm
    from gplvm.config import disable_compilation_cache, set_cpu_fusion_emitters

    disable_compilation_cache()
    set_cpu_fusion_emitters(args.emitters == "on")
    _ablate(args.without)
    collect = _Collect()
    _cpu_timed_logs(collect)

    n_trials = 10                      # make_s_curve's default for the binomial
    Y = gplvm.data.make_s_curve(likelihood, n_samples=args.n_samples,
                                n_outputs=args.n_outputs, random_state=0).Y
    model = gplvm.RFLVM(likelihood=likelihood, sampler=sampler, n_iter=args.n_iter,
                        burn_in=args.n_iter // 2, block_size=args.block_size, progress=False,
                        random_state=0, learn_kernel=args.learn_kernel, n_chains=args.chains,
                        dp_components=args.dp_components)
    wall, cpu = time.perf_counter(), time.process_time()
    model.fit(Y, n_trials=n_trials if likelihood == "binomial" else None)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu

    rows = sorted(collect.rows.items(), key=lambda kv: -sum(kv[1].values()))
    print(f"\n== RFLVM(likelihood={likelihood!r}, sampler={sampler!r}) on {args.n_samples} x "
          f"{args.n_outputs}, n_iter={args.n_iter}, learn_kernel={args.learn_kernel}, "
          f"dp_components={args.dp_components!r}, "
          f"n_chains={args.chains}, CPU fusion emitters {args.emitters}"
          + (f", without {' and '.join(args.without)}" if args.without else "") + " ==")
    print(f"{'function':<44} {'n':>3} {'trace':>8} {'lower':>8} {'XLA':>8} {'total':>8}  (CPU s)")
    for name, r in rows[:args.top]:
        print(_row(name, collect.counts[name], r))
    rest = rows[args.top:]
    if rest:
        print(_row(f"({len(rest)} others)", sum(collect.counts[name] for name, _ in rest),
                   {p: sum(r[p] for _, r in rest) for p in PATTERNS}))
    print(_row("TOTAL", sum(collect.counts.values()),
               {p: sum(r[p] for _, r in rows) for p in PATTERNS}))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20     # KiB on Linux
    print(f"fit: {wall:.2f} s wall, {cpu:.2f} s CPU (process), peak resident {peak:.2f} GiB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--likelihoods", nargs="+", default=["poisson"])
    p.add_argument("--samplers", nargs="+", default=["nuts", "gibbs"])
    p.add_argument("--n-samples", type=int, default=300)
    p.add_argument("--n-outputs", type=int, default=50)
    p.add_argument("--n-iter", type=int, default=4)
    p.add_argument("--learn-kernel", action="store_true",
                   help="the DP mixture on the frequencies (default: the fixed RBF's prior, "
                        "as in rflvm_convergence.py)")
    p.add_argument("--dp-components", choices=("drawn", "integrated"), default="drawn",
                   help="RFLVM(dp_components=...): the NUTS block's DP components as drawn "
                        "or integrated out (with --learn-kernel)")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--block-size", type=int, default=2,
                   help="rflvm_convergence.py's first ('compile') fit is --n-iter 100 "
                        "--block-size 50: 100 sweeps, not only compiling")
    p.add_argument("--top", type=int, default=15, help="functions listed by name")
    p.add_argument("--emitters", choices=("off", "on"), default="on",
                   help="XLA's CPU fusion emitters for the MCMC blocks (gplvm.config."
                        "set_cpu_fusion_emitters): on is XLA's and gplvm's default, off the "
                        "opt-in that compiles faster")
    p.add_argument("--without", nargs="*", default=[], choices=("lbfgs", "curvature"),
                   help="patch a part of the NUTS start out (an ablation; module docstring)")
    p.add_argument("--one", nargs=2, metavar=("LIKELIHOOD", "SAMPLER"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        one(a, *a.one)
        return
    print(f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']} GPLVM_COMPILATION_CACHE=0 "
          f"GPLVM_CPU_DEVICES={os.environ['GPLVM_CPU_DEVICES']}", flush=True)
    for lik in a.likelihoods:
        for sampler in a.samplers:
            cmd = [sys.executable, __file__, "--one", lik, sampler, "--n-samples",
                   str(a.n_samples), "--n-outputs", str(a.n_outputs), "--n-iter",
                   str(a.n_iter), "--top", str(a.top), "--chains", str(a.chains),
                   "--block-size", str(a.block_size), "--emitters", a.emitters,
                   "--dp-components", a.dp_components, "--without", *a.without]
            cmd += ["--learn-kernel"] if a.learn_kernel else []
            done = subprocess.run(cmd)
            if done.returncode:     # e.g. killed for memory: say so, go on with the next
                print(f"\n== {lik} × {sampler}: the fit's process ended with status "
                      f"{done.returncode} (a negative status is the signal that killed it) ==",
                      flush=True)


if __name__ == "__main__":
    main()

"""XLA's CPU fusion emitters on and off for the RFLVM's blocks: the sweeps' CPU seconds side by
side in one process (issue 30, item 4; the compile, cold and per program, is
``rflvm_compile.py --emitters off`` against ``--emitters on``).

``gplvm.config.set_cpu_fusion_emitters(False)`` compiles the MCMC blocks for CPU with
``xla_cpu_use_fusion_emitters=False`` (an opt-in: the default is XLA's setting, which keeps draws
bit for bit across block sizes and device counts).  This script measures its sweeps against
XLA's default: for each (likelihood, sampler), one fit of ``--n-iter`` sweeps per
setting to compile (cold: the persistent cache is off; not timed: the second setting reuses
the first's tracing), then ``--repeats`` rounds in which the two settings' fits of
``--n-iter`` sweeps alternate (the programs compiled, so these time the sweeps; alternating
spreads a busy machine's load over both).  Process CPU seconds, single-threaded; the table
gives the median timed fit's CPU seconds divided by its sweeps: a whole fit's, so the initial
states and, for NUTS, the mode search are in it too (the same for both settings).  The two settings' draws differ in their last bits (rounding), not in
distribution.

    .venv/bin/python benchmarks/cpu_emitters.py
    .venv/bin/python benchmarks/cpu_emitters.py --likelihoods poisson,negative_binomial \\
        --samplers gibbs,nuts --n-samples 300 --n-outputs 50 --n-iter 40 --repeats 3
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ["GPLVM_COMPILATION_CACHE"] = "0"     # cold compiles, no exported blocks
os.environ.setdefault("GPLVM_CPU_DEVICES", "1")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

import gplvm  # noqa: E402
from gplvm.data import make_s_curve  # noqa: E402
from gplvm.config import set_cpu_fusion_emitters  # noqa: E402  (the setting under test)

#: setting name -> fusion emitters on?
SETTINGS = {"emitters off (opt-in)": False, "XLA default (emitters on)": True}


def fit(Y, likelihood: str, sampler: str, n_iter: int, emitters: bool, seed: int) -> float:
    """Process CPU seconds of one fit, its blocks compiled with the fusion emitters on or off."""
    set_cpu_fusion_emitters(emitters)
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gplvm.RFLVM(likelihood=likelihood, sampler=sampler, n_iter=n_iter, burn_in=n_iter // 2,
                    n_chains=1, learn_kernel=False, block_size=n_iter, progress=False,
                    random_state=seed).fit(Y)
    return time.process_time() - t0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--likelihoods", default="poisson,negative_binomial,gaussian")
    parser.add_argument("--samplers", default="gibbs,nuts")
    parser.add_argument("--n-samples", type=int, default=300)
    parser.add_argument("--n-outputs", type=int, default=50)
    parser.add_argument("--n-iter", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"# OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']}; one chain, fixed RBF, M = 100; "
          f"{args.n_samples} x {args.n_outputs} S-curve; load average "
          f"{os.getloadavg()[0]:.1f} at the start")
    print("| likelihood | sampler | setting | fit CPU ms / sweeps (median) |")
    print("| --- | --- | --- | --- |")
    try:
        _compare(args)
    finally:
        set_cpu_fusion_emitters(True)


def _compare(args) -> None:
    for likelihood in args.likelihoods.split(","):
        Y = make_s_curve(likelihood, n_samples=args.n_samples, n_outputs=args.n_outputs,
                         random_state=0).Y
        for sampler in args.samplers.split(","):
            for emitters in SETTINGS.values():              # compiles
                fit(Y, likelihood, sampler, args.n_iter, emitters, 0)
            timed = {name: [] for name in SETTINGS}
            for r in range(args.repeats):
                for name, emitters in SETTINGS.items():
                    timed[name].append(fit(Y, likelihood, sampler, args.n_iter, emitters, r + 1))
            for name in SETTINGS:
                per_sweep = 1000 * float(np.median(timed[name])) / args.n_iter
                print(f"| {likelihood} | {sampler} | {name} | {per_sweep:.1f} |", flush=True)


if __name__ == "__main__":
    main()

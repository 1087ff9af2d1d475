"""How good is ``n_iter='auto'``'s projection of the sweeps ESS still needs? (issue 30, item 3)

After each round the progress bar, and a run that stops short the ``ConvergenceWarning``,
say how many more sweeps the smaller bulk ESS (log-likelihood or worst latent distance) would
need to reach ``ess_target`` at its rate so far
(:func:`gplvm.models.rflvm.convergence.sweeps_to_target`: ESS of stationary chains grows in
proportion to the kept sweeps).  This script fits one fixed-length run (an ``'auto'`` run's
rounds give the same chains: tests/models/rflvm/test_rflvm_nuts.py), forms the figures the
rule would see at the end of each round from the run's prefixes, and prints, per round, the
projected number of kept sweeps at which ESS reaches the target against the first round at
which it did.

    .venv/bin/python benchmarks/rflvm_projection.py                       # W fixed, NUTS
    .venv/bin/python benchmarks/rflvm_projection.py --model default --kept 2000
    .venv/bin/python benchmarks/rflvm_projection.py --sampler gibbs --burn-in 1000 --kept 8000

Poisson S-curve (N = 300, J = 50, M = 100), 4 chains; single-threaded XLA and OpenBLAS (set
when unset, printed).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

import gplvm  # noqa: E402
from gplvm.data import make_s_curve  # noqa: E402
from gplvm.models.rflvm.convergence import convergence_figures, sweeps_to_target  # noqa: E402
from gplvm.models.rflvm.run import AUTO_ROUND  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("fixed-w", "default"), default="fixed-w",
                        help="W fixed (frequencies='fixed', learn_kernel=False) or the "
                        "default's DP kernel")
    parser.add_argument("--sampler", choices=("nuts", "gibbs"), default="nuts")
    parser.add_argument("--burn-in", type=int, default=200)
    parser.add_argument("--kept", type=int, default=1000, help="sweeps after the burn-in")
    parser.add_argument("--ess-target", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']}")
    Y = make_s_curve("poisson", n_samples=300, n_outputs=50, random_state=0).Y
    fixed = args.model == "fixed-w"
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = gplvm.RFLVM(likelihood="poisson", sampler=args.sampler,
                            n_iter=args.burn_in + args.kept, burn_in=args.burn_in, n_chains=4,
                            n_features=100, learn_kernel=not fixed,
                            frequencies="fixed" if fixed else "sampled",
                            random_state=args.seed, progress=False, block_size=50).fit(Y)
    cpu = time.process_time() - t0
    round_length = max(args.burn_in, AUTO_ROUND)        # the rounds of n_iter='auto'
    kept_log_lik = model.history_[:, args.burn_in:]
    rows, reached = [], None
    for k in range(round_length, args.kept + 1, round_length):
        figures = convergence_figures(kept_log_lik[:, :k], model.X_samples_[:, :k])
        if reached is None and all(figures[e] >= args.ess_target      # NaN: not reached
                                   for e in ("ess_log_lik", "ess_distances")):
            reached = k
        rows.append((k, figures, sweeps_to_target(figures, args.ess_target)))
    print(f"\nPoisson S-curve, N = 300, J = 50, M = 100, {args.model}, {args.sampler}, "
          f"burn-in {args.burn_in}, {args.kept} kept sweeps × 4 chains, seed {args.seed}: "
          f"{cpu:.0f} CPU s; ESS {args.ess_target} first reached at "
          f"{reached if reached is not None else f'> {args.kept}'} kept sweeps")
    print("| kept sweeps | R-hat log-lik / dist | ESS log-lik / dist | projected kept sweeps "
          "to the ESS target | projected / reached |")
    print("| --- | --- | --- | --- | --- |")
    for k, f, projected in rows:
        ratio = (f"{projected / reached:.2f}" if projected is not None and reached is not None
                 else "")
        print(f"| {k} | {f['rhat_log_lik']:.3f} / {f['rhat_distances']:.3f} | "
              f"{f['ess_log_lik']:.0f} / {f['ess_distances']:.0f} | "
              f"{projected if projected is not None else '(reached)'} | {ratio} |")


if __name__ == "__main__":
    main()

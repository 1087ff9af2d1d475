"""Do the Gibbs sweep and the NUTS default sample the same posterior at full size? (issue 30)

Split R-hat compares chains of one sampler, so it cannot see a bias that all of them share.
On the Poisson S-curve with the DP kernel the Gibbs chains have been seen to settle ~30 nats
of log-likelihood below the NUTS chains (benchmarks/README.md, "the default against the DP
Gibbs sweep").  Two explanations predict different things when each sampler is continued
from the other's final states:

* the Gibbs chains are still climbing (in transit, slow): Gibbs started from the NUTS states
  stays at the NUTS level, and NUTS started from the Gibbs states climbs to it;
* the samplers target different distributions (a bug in one): Gibbs started from the NUTS
  states falls back to its own level, and NUTS started from the Gibbs states climbs.

The script fits ``RFLVM(sampler='nuts')`` and ``RFLVM(sampler='gibbs')`` (the same model: DP
kernel, 4 chains, one seed) for fixed numbers of sweeps, then continues each sampler's
compiled sweep from the other's final chain states (NUTS at its adapted step size and mass
matrix, which no longer change after burn-in; a fresh random key) and prints, per run, the
chains' mean log-likelihood over windows of the run and the same for the level of the latent
distances (each draw's median over 20 fixed row pairs), which no rotation of X changes but
the kernel's length-scale against the latents' spread does.

    .venv/bin/python benchmarks/rflvm_cross_check.py
    .venv/bin/python benchmarks/rflvm_cross_check.py --nuts 500,200 --gibbs 8000,1000 \
        --cross-gibbs 4000 --cross-nuts 200 --seed 0
    .venv/bin/python benchmarks/rflvm_cross_check.py --more-nuts 400 --cross-gibbs 8000
    .venv/bin/python benchmarks/rflvm_cross_check.py --fixed-w --more-nuts 400

``--fixed-w`` runs the same check on the model with W fixed at chain 0's draw
(``RFLVM(frequencies='fixed', learn_kernel=False)``), on which the NUTS chains converge by
the library's rule in minutes and the Gibbs chains were seen 130 nats below them after 20,000
sweeps: a sharper test of the Gibbs sweep than the default model, whose NUTS chains mix
slowly themselves.

``--more-nuts K`` continues the NUTS chains from their own final states as well: Gibbs and
NUTS then both sample from the same (stationary) states, and the second table's ESS per
CPU-second compares the samplers without the Gibbs chains' transit from their start, which
the fits' own figures include (issue 30 asks for 20× the Gibbs sampler's ESS per CPU-second).

Single-threaded XLA and OpenBLAS (set when unset, printed).  CPU seconds per phase are the
process's.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import gplvm  # noqa: E402
from gplvm.data import make_s_curve  # noqa: E402
from gplvm.inference.mcmc import pairwise_distance_summary, split_rhat  # noqa: E402
from gplvm.inference.mcmc.convergence import bulk_ess  # noqa: E402
from gplvm.models.rflvm.convergence import figures_of  # noqa: E402

#: windows of a continued run whose chain means are printed
N_WINDOWS = 5


def fit(Y, sampler: str, n_iter: int, burn_in: int, args) -> tuple:
    """One fit of the default model (DP kernel) with ``sampler``, or with ``--fixed-w`` of the
    model with W fixed at chain 0's draw from the fixed RBF; (model, CPU s)."""
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = gplvm.RFLVM(likelihood="poisson", sampler=sampler, n_iter=n_iter,
                            burn_in=burn_in, n_chains=args.chains, n_features=args.features,
                            learn_kernel=not args.fixed_w, random_state=args.seed,
                            frequencies="fixed" if args.fixed_w else "sampled",
                            progress=False, block_size=50).fit(Y)
    return model, time.process_time() - t0


def continue_from(model, states, n_iter: int, seed: int) -> tuple:
    """``model``'s compiled sweep run ``n_iter`` sweeps from ``states`` (its own data in the
    carry, a fresh key, nothing discarded); (log-likelihood trace (chains, n_iter), latent
    distances (:func:`distances`), CPU s).  ``model`` is changed (its fitted attributes are
    the continued run's)."""
    carry = model._result_.state
    init = (states, *carry[1:])
    model._key_run_ = jax.random.PRNGKey(seed)
    model.burn_in = 0
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model._run(init, start=0, earlier=None, n_iter=n_iter, quiet=True)
    cpu = time.process_time() - t0
    return model.history_, distances(model.X_samples_), cpu


def distances(X_samples) -> np.ndarray:
    """(chains, draws, 20): the distances of 20 fixed row pairs in each draw."""
    return np.asarray(pairwise_distance_summary(X_samples, n_pairs=20))


def _windows(values: np.ndarray, fmt: str) -> str:
    """Means over chains in :data:`N_WINDOWS` consecutive windows of the draws."""
    parts = np.array_split(np.arange(values.shape[1]), N_WINDOWS)
    return " / ".join(format(values[:, w].mean(), fmt) for w in parts)


def rows(name: str, trace: np.ndarray, dist: np.ndarray, cpu: float) -> list:
    """Two table rows (log-likelihood, distance level: each draw's median over the pairs):
    per-window means over chains, the last half's per-chain means and split R-hat."""
    C, S = trace.shape
    lines = []
    for what, values, fmt in (("log-lik", trace, ".1f"),
                              ("distance level", np.median(dist, axis=2), ".3f")):
        last = values[:, values.shape[1] // 2:]
        chains = ", ".join(format(m, fmt) for m in last.mean(axis=1))
        rhat = split_rhat(last) if last.shape[1] >= 4 else float("nan")
        lines.append(f"| {name} | {what} | {S} × {C} | {cpu:.0f} | {_windows(values, fmt)} | "
                     f"{chains} | {rhat:.3f} |")
    return lines


def ess_row(name: str, trace: np.ndarray, dist: np.ndarray, cpu: float) -> str:
    """A row of the second table: the library's convergence figures over the whole run
    (:func:`gplvm.models.rflvm.convergence.figures_of`: rank-normalised split R-hat and bulk
    ESS, Vehtari et al. 2021, of the log-likelihood and of the distances, largest R-hat and
    least ESS), the distances' median ESS, and ESS per CPU-second."""
    f = figures_of(trace, dist)
    median = float(np.median([bulk_ess(dist[:, :, p]) for p in range(dist.shape[2])]))
    ess_ll, ess_d = f["ess_log_lik"], f["ess_distances"]
    return (f"| {name} | {trace.shape[1]} × {trace.shape[0]} | {cpu:.0f} | "
            f"{f['rhat_log_lik']:.3f} / {f['rhat_distances']:.3f} | {ess_ll:.0f} / "
            f"{ess_d:.0f}; {median:.0f} | {ess_ll / cpu:.3f} / {ess_d / cpu:.3f}; "
            f"{median / cpu:.3f} |")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nuts", default="500,200", help="sweeps,burn-in of the NUTS fit")
    parser.add_argument("--gibbs", default="8000,1000", help="sweeps,burn-in of the Gibbs fit")
    parser.add_argument("--cross-gibbs", type=int, default=4000,
                        help="Gibbs sweeps from the NUTS fit's final states")
    parser.add_argument("--cross-nuts", type=int, default=200,
                        help="NUTS sweeps from the Gibbs fit's final states")
    parser.add_argument("--more-nuts", type=int, default=0,
                        help="NUTS sweeps from the NUTS fit's own final states (0: none): "
                        "with the Gibbs sweeps from the same states, both samplers from "
                        "one stationary start, for ESS per CPU-second")
    parser.add_argument("--fixed-w", action="store_true",
                        help="the model with W fixed (RFLVM(frequencies='fixed', "
                        "learn_kernel=False)), on which NUTS converges in minutes")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']}")
    Y = make_s_curve("poisson", n_samples=300, n_outputs=50, random_state=0).Y

    n_nuts, burn_nuts = (int(v) for v in args.nuts.split(","))
    n_gibbs, burn_gibbs = (int(v) for v in args.gibbs.split(","))
    nuts, cpu_nuts = fit(Y, "nuts", n_nuts, burn_nuts, args)
    gibbs, cpu_gibbs = fit(Y, "gibbs", n_gibbs, burn_gibbs, args)
    nuts_name = "NUTS, W fixed" if args.fixed_w else "NUTS (default)"
    lines = (rows(f"{nuts_name}, after burn-in", nuts.history_[:, burn_nuts:],
                  distances(nuts.X_samples_), cpu_nuts)
             + rows("Gibbs, after burn-in", gibbs.history_[:, burn_gibbs:],
                    distances(gibbs.X_samples_), cpu_gibbs))

    nuts_end = nuts._result_.state[0]
    gibbs_end = gibbs._result_.state[0]
    if args.fixed_w:        # one model: both samplers hold the same W
        np.testing.assert_array_equal(np.asarray(nuts_end.W), np.asarray(gibbs_end.W))
    # Gibbs from the NUTS states: the same fields, no NUTS adaptation; its MAP warm-up over
    sweeps = np.maximum(nuts_end.n_sweeps, gibbs_end.n_sweeps)          # (n_sweeps below)
    from_nuts = nuts_end._replace(tuning=None, n_sweeps=sweeps)
    # NUTS from the Gibbs states: the NUTS chains' adapted (now fixed) tuning, sweep counts
    # past the burn-in so that nothing adapts
    from_gibbs = gibbs_end._replace(tuning=nuts_end.tuning, n_sweeps=sweeps,
                                    n_proposals_X=nuts_end.n_proposals_X,
                                    n_proposals_beta=nuts_end.n_proposals_beta)
    trace, dist, cpu = continue_from(gibbs, from_nuts, args.cross_gibbs, args.seed + 1000)
    lines += rows("Gibbs from the NUTS fit's final states", trace, dist, cpu)
    ess_lines = [ess_row("Gibbs from the NUTS fit's final states", trace, dist, cpu)]
    trace, dist, cpu = continue_from(nuts, from_gibbs, args.cross_nuts, args.seed + 2000)
    lines += rows("NUTS from the Gibbs fit's final states", trace, dist, cpu)
    ess_lines.append(ess_row("NUTS from the Gibbs fit's final states", trace, dist, cpu))
    if args.more_nuts > 0:
        trace, dist, cpu = continue_from(nuts, nuts_end, args.more_nuts, args.seed + 3000)
        lines += rows("NUTS from its own final states", trace, dist, cpu)
        ess_lines.append(ess_row("NUTS from its own final states", trace, dist, cpu))

    model = "W fixed (chain 0's draw from the RBF)" if args.fixed_w else "DP kernel"
    print(f"\nPoisson S-curve, N = 300, J = 50, M = {args.features}, {model}, seed {args.seed}, "
          f"{args.chains} chains")
    print(f"| run | statistic | sweeps × chains | CPU s | mean over chains, {N_WINDOWS} windows "
          f"| per chain (last half) | split R-hat (last half) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for line in lines:
        print(line)
    print("\nThe continued runs, every sweep (no burn-in), CPU seconds of the sampling alone:")
    print("| run | sweeps × chains | CPU s | R-hat log-lik / dist (max) | ESS log-lik / dist "
          "(min; median) | ESS/CPU-s log-lik / dist (min; median) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for line in ess_lines:
        print(line)


if __name__ == "__main__":
    main()

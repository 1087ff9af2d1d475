"""Which sweeps ``n_iter='auto'`` should judge: the draws after a fixed burn-in, or the last
half of the run (issue 30, item 3).

Reads traces saved by ``rflvm_convergence.py --trace-out DIR`` (each library row's
log-likelihood trace, burn-in included, and the kept draws' distances between 20 row pairs)
and replays the library's rule (:func:`gplvm.models.rflvm.convergence.figures_of` and
:func:`~gplvm.models.rflvm.convergence.has_converged`: split
R-hat ≤ 1.01 and bulk ESS ≥ 400 for the log-likelihood and every distance) at the end of
every round (burn-in + k · round), on two windows:

* ``fixed``: every sweep after the burn-in (what the library judges now);
* ``half``: the last half of all sweeps, but never a sweep of the burn-in (Gelman et al.
  2013, §11.4's discard-the-first-half): chains still in transit after the burn-in leave
  the window as the run grows, at the price of half the draws.

For each window it prints, per round end, the figures and whether the rule holds, and the
first round end at which it does, with each chain's own split R-hat of the log-likelihood
(its halves against each other: above ~1.1 a chain still drifts).

    .venv/bin/python benchmarks/rflvm_kept_window.py /tmp/traces/scurve_nuts-auto+dp.npz [--round 200]
"""

from __future__ import annotations

import argparse

import numpy as np

from gplvm.models.rflvm.convergence import figures_of, has_converged, own_rhats


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--round", type=int, default=200,
                        help="sweeps per round after the burn-in (the library's: "
                        "max(burn_in, 100))")
    parser.add_argument("--ess-target", type=float, default=400.0)
    args = parser.parse_args(argv)
    for path in args.traces:
        saved = np.load(path)
        log_lik, burn_in, dist = saved["log_lik"], int(saved["burn_in"]), saved["distances"]
        n_total = log_lik.shape[1]
        print(f"## {path}: {log_lik.shape[0]} chains, {n_total} sweeps, burn-in {burn_in}, "
              f"rounds of {args.round}")
        print("| sweeps | window | kept | R-hat log-lik | R-hat dist (max) | ESS log-lik | "
              "ESS dist (min) | rule holds | each chain's own R-hat (log-lik) |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        first = {}
        for end in range(burn_in + args.round, n_total + 1, args.round):
            for window, start in (("fixed", burn_in), ("half", max(burn_in, end // 2))):
                ll = log_lik[:, start:end]
                d = dist[:, start - burn_in:end - burn_in]
                f = figures_of(ll, d)
                ok = has_converged(f, args.ess_target)
                if ok:
                    first.setdefault(window, end)
                own = " ".join(f"{r:.2f}" for r in own_rhats(ll))
                print(f"| {end} | {window} | {end - start} | {f['rhat_log_lik']:.3f} | "
                      f"{f['rhat_distances']:.3f} | {f['ess_log_lik']:.0f} | "
                      f"{f['ess_distances']:.0f} | {'yes' if ok else 'no'} | {own} |")
        for window in ("fixed", "half"):
            print(f"# {window}: the rule first holds at "
                  f"{first.get(window, 'no round end')} sweeps")


if __name__ == "__main__":
    main()

"""Dynamical versus iid latent prior for the Bayesian GPLVM (issue 4, "Dynamics").

Frames with half of their columns held out are reconstructed from the rest of the data; the
dynamical prior (each latent dimension a GP over time, block-diagonal over sequences) lets a
frame borrow from its neighbours in time, which the iid prior cannot.  Prints the held-out MSE
(standardised units) under both priors, on the Lorenz generator and on CMU mocap subject 35
(31 walk/jog trials as independent sequences).

    .venv/bin/python benchmarks/bgplvm_dynamics.py [--max-iter 1000] [--seed 0] [--skip-cmu]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import gplvm
from gplvm.data import make_lorenz
from gplvm.data.loaders import load_cmu_mocap_walkjog


def hold_out_half_columns(Y, frac_frames, rng):
    """NaN out a random half of the columns in a random ``frac_frames`` of the rows."""
    Y_missing = Y.copy()
    rows = rng.choice(len(Y), int(frac_frames * len(Y)), replace=False)
    for r in rows:
        cols = rng.choice(Y.shape[1], Y.shape[1] // 2, replace=False)
        Y_missing[r, cols] = np.nan
    return Y_missing, np.isnan(Y_missing)


def run(name, Y, times, groups, Q, M, max_iter, seed, frac_frames=0.2):
    rng = np.random.default_rng(seed)
    keep = Y.std(0) > 1e-8
    Y = Y[:, keep]
    Y = (Y - Y.mean(0)) / Y.std(0)
    Y_missing, mask = hold_out_half_columns(Y, frac_frames, rng)
    results = {}
    for prior in ("iid", "dynamical"):
        model = gplvm.BayesianGPLVM(n_components=Q, n_inducing=M, max_iter=max_iter,
                                    random_state=seed, progress=False)
        start = time.perf_counter()
        if prior == "iid":
            model.fit(Y_missing)
        else:
            model.fit(Y_missing, times=times, groups=groups)
        seconds = time.perf_counter() - start
        filled = model.impute(Y_missing)
        results[prior] = (float(np.mean((filled[mask] - Y[mask]) ** 2)), seconds, model.elbo_)
    print(f"{name:<10} N={Y.shape[0]:<5} D={Y.shape[1]:<3} Q={Q} M={M} held-out entries "
          f"{int(mask.sum())}")
    for prior, (mse, seconds, elbo) in results.items():
        print(f"  {prior:<10} held-out MSE {mse:8.4f}   bound {elbo:12.2f}   fit {seconds:6.1f} s")
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-iter", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-cmu", action="store_true")
    args = parser.parse_args()
    print("threads:", {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "XLA_FLAGS",
                                                     "OPENBLAS_NUM_THREADS")})
    lorenz = make_lorenz(random_state=args.seed)
    run("lorenz", lorenz.Y, lorenz.times, None, 3, 30, args.max_iter, args.seed)
    if not args.skip_cmu:
        cmu = load_cmu_mocap_walkjog()
        run("cmu35", cmu.Y, cmu.times, cmu.groups, 6, 40, args.max_iter, args.seed)


if __name__ == "__main__":
    main()

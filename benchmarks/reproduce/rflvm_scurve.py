"""RFLVM on the S-curve generator (seed 000, §4, Fig. 2): Procrustes R² of the posterior mean
latent against the true X, for every likelihood, beside PCA.

Run: ``.venv/bin/python benchmarks/reproduce/rflvm_scurve.py [--n-iter 500] [--chains 1]
[--likelihoods gaussian,poisson,...]``.  N = 500, J = 100, M = 100, Q = 2 (the paper's sizes).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from sklearn.decomposition import PCA

import gplvm
from gplvm.data import make_s_curve
from gplvm.metrics import procrustes_r2

ALL = ("gaussian", "poisson", "negative_binomial", "bernoulli", "binomial", "multinomial")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-iter", type=int, default=500)
    p.add_argument("--chains", type=int, default=1)
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--likelihoods", default=",".join(ALL))
    args = p.parse_args()
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '(unset)')} "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')} "
          f"cores={len(os.sched_getaffinity(0))} load={os.getloadavg()}")
    print(f"N=500 J=100 M=100 Q=2 sweeps={args.n_iter} burn-in={args.n_iter // 2} "
          f"chains={args.chains}")
    print(f"{'likelihood':>18} {'seed':>4} {'RFLVM R2':>9} {'PCA R2':>7} {'fit s':>7}")
    for kind in args.likelihoods.split(","):
        for seed in range(args.seeds):
            d = make_s_curve(kind, n_samples=500, n_outputs=100, random_state=seed)
            extra = {"n_trials": 10} if kind == "binomial" else {}
            start = time.perf_counter()
            model = gplvm.RFLVM(likelihood=kind, n_features=100, n_iter=args.n_iter,
                                burn_in=args.n_iter // 2, n_chains=args.chains,
                                random_state=seed, progress=False).fit(d.Y, **extra)
            wall = time.perf_counter() - start
            Z = d.Y if kind == "gaussian" else np.log1p(d.Y)
            pca = PCA(2).fit_transform(Z)
            print(f"{kind:>18} {seed:>4} {procrustes_r2(d.X, model.X_mean_):>9.3f} "
                  f"{procrustes_r2(d.X, pca):>7.3f} {wall:>7.1f}", flush=True)


if __name__ == "__main__":
    main()

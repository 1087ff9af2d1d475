"""Issue 4 acceptance figures on the oil-flow data (../shared/data/oil_flow, DataTrn 1000 x 12).

Parts (choose with --parts, default all):

* ``nn``      Q = 10, M = 30, ARD RBF, the library's defaults, up to --max-iter L-BFGS steps:
              leave-one-out 1-NN errors in the two most relevant latent dimensions and the number
              of dimensions whose relevance exceeds 5% of the largest, per seed and the median;
              then the same with a Matérn 3/2 kernel and the unscented rule.
* ``impute``  20% of the entries removed at random: imputation RMSE (original units) of the
              Bayesian GPLVM beside column means and PPCA (EM with missing data).
* ``new``     fit on 900 rows; ``transform`` the other 100 with half of each row's columns
              missing; 1-NN accuracy of their latents against the training latents and labels.

    .venv/bin/python benchmarks/reproduce/bgplvm_oil.py [--seeds 0 1 2 3 4] [--max-iter 2000]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from sklearn.neighbors import KNeighborsClassifier

import gplvm
from gplvm.baselines import PPCA, ColumnMeanImputer
from gplvm.data.loaders import load_oil_flow
from gplvm.kernels import Matern32
from gplvm.metrics import loo_1nn_errors


def nn_part(Y, labels, seeds, max_iter):
    for name, kwargs in (("ARD RBF (analytic)", {}),
                         ("Matern 3/2 (unscented)",
                          {"kernel": Matern32(lengthscale=np.ones(10)), "psi_rule": "unscented"})):
        errors, active = [], []
        for seed in seeds:
            start = time.perf_counter()
            model = gplvm.BayesianGPLVM(n_components=10, n_inducing=30, max_iter=max_iter,
                                        random_state=seed, progress=False, **kwargs).fit(Y)
            rel = model.relevance_
            top = np.argsort(-rel)[:2]
            errors.append(loo_1nn_errors(model.X_mean_[:, top], labels))
            active.append(int(np.sum(rel > 0.05 * rel.max())))
            print(f"  {name:<24} seed {seed}: 1-NN errors {errors[-1]:3d}/1000, active dims "
                  f"{active[-1]}, bound {model.elbo_:10.2f}, {model.n_iter_} iterations, "
                  f"{time.perf_counter() - start:6.1f} s", flush=True)
        print(f"{name:<26} median 1-NN errors {np.median(errors):.1f} (per seed {errors}); "
              f"active dims {active}", flush=True)


def impute_part(Y, seed, max_iter):
    rng = np.random.default_rng(seed)
    mask = rng.random(Y.shape) < 0.2
    mask[mask.all(1), 0] = False
    Y_missing = np.where(mask, np.nan, Y)
    rmse = {}
    model = gplvm.BayesianGPLVM(n_components=10, n_inducing=30, max_iter=max_iter,
                                random_state=seed, progress=False).fit(Y_missing)
    rmse["Bayesian GPLVM"] = model.impute(Y_missing)
    rmse["PPCA (Q=5, EM)"] = PPCA(n_components=5).fit(Y_missing).impute(Y_missing)
    rmse["column mean"] = ColumnMeanImputer().fit(Y_missing).impute(Y_missing)
    print(f"imputation, 20% of entries missing ({int(mask.sum())} entries), RMSE in original "
          f"units:")
    for name, filled in rmse.items():
        print(f"  {name:<20} {np.sqrt(np.mean((filled[mask] - Y[mask]) ** 2)):.4f}")


def new_rows_part(Y, labels, seed, max_iter):
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(Y))
    train, test = order[:900], order[900:]
    model = gplvm.BayesianGPLVM(n_components=10, n_inducing=30, max_iter=max_iter,
                                random_state=seed, progress=False).fit(Y[train])
    Y_test = Y[test].copy()
    for row in Y_test:
        row[rng.choice(Y.shape[1], Y.shape[1] // 2, replace=False)] = np.nan
    X_test = model.transform(Y_test)
    clf = KNeighborsClassifier(1).fit(model.X_mean_, labels[train])
    acc = float(np.mean(clf.predict(X_test) == labels[test]))
    print(f"new rows: 100 held-out rows with half their columns missing, 1-NN accuracy "
          f"against the 900 training latents: {acc:.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--max-iter", type=int, default=2000)
    parser.add_argument("--parts", nargs="+", default=["nn", "impute", "new"])
    args = parser.parse_args()
    print("threads:", {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "XLA_FLAGS")},
          "cpus:", os.cpu_count(), "gplvm", gplvm.__version__)
    data = load_oil_flow()
    Y, labels = data.Y, np.asarray(data.labels)
    if "nn" in args.parts:
        nn_part(Y, labels, args.seeds, args.max_iter)
    if "impute" in args.parts:
        impute_part(Y, args.seeds[0], args.max_iter)
    if "new" in args.parts:
        new_rows_part(Y, labels, args.seeds[0], args.max_iter)


if __name__ == "__main__":
    main()

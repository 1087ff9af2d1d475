"""Dynamical versus iid latent prior for the Bayesian GPLVM (issue 4, "Dynamics").

Two kinds of held-out data, on the Lorenz generator and on CMU mocap subject 35 (31 walk/jog
trials, each an independent sequence: ``groups=``):

* partial frames: a random 20% of the training frames lose half of their columns, which
  ``impute`` fills in.  Both priors see the rest of the frame; the dynamical prior also lets the
  frame borrow from its neighbours in time.
* whole frames at new times: a random 10% of the frames are removed before fitting; the
  dynamical model predicts them from their time stamps alone (latent trajectory at new times,
  seed 003 eq. 35, then Y through uncertain inputs: ``predict_times``).  The iid prior has no
  notion of time, so it can only predict the column means.

Reference: per column, linear interpolation in time (within the sequence) between the frames
where that column is observed.  Errors are mean squared errors in standardised units (each
column of the full data scaled to unit variance); for Lorenz also against the noise-free signal
F (the data are F plus unit noise, so about 0.5 of the error against Y is irreducible noise).

    .venv/bin/python benchmarks/bgplvm_dynamics.py [--max-iter 150] [--seed 0] [--skip-cmu]

OpenBLAS's own threads are set to 1 unless the environment says otherwise: jaxlib's CPU LAPACK
kernels call OpenBLAS from inside XLA's thread pool, and nested threading on a small shared
machine made a 200 x 200 Cholesky 10 to 1000 times slower.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import gplvm  # noqa: E402
from gplvm.data import make_lorenz  # noqa: E402
from gplvm.data.loaders import load_cmu_mocap_walkjog  # noqa: E402


def split(N, D, rng, frac_new=0.1, frac_partial=0.2):
    """Rows removed (whole frames at new times) and a mask of hidden entries in the rest."""
    new = np.zeros(N, dtype=bool)
    new[rng.choice(N, int(frac_new * N), replace=False)] = True
    hidden = np.zeros((N, D), dtype=bool)
    rows = rng.choice(np.flatnonzero(~new), int(frac_partial * N), replace=False)
    for r in rows:
        hidden[r, rng.choice(D, D // 2, replace=False)] = True
    return new, hidden


def interpolate_in_time(Y_obs, times, groups, target_rows):
    """Per column and sequence, linear interpolation of the observed entries at target rows."""
    out = np.full((len(target_rows), Y_obs.shape[1]), np.nan)
    for g in np.unique(groups):
        in_g = groups == g
        targets = np.flatnonzero(in_g[target_rows])
        for d in range(Y_obs.shape[1]):
            obs = in_g & ~np.isnan(Y_obs[:, d])
            order = np.argsort(times[obs])
            out[targets, d] = np.interp(times[target_rows][targets], times[obs][order],
                                        Y_obs[obs, d][order])
    return out


def run(name, Y, times, groups, Q, M, max_iter, seed, F=None):
    keep = Y.std(0) > 1e-8
    mean, std = Y[:, keep].mean(0), Y[:, keep].std(0)
    Y = (Y[:, keep] - mean) / std
    F = None if F is None else (F[:, keep] - mean) / std
    groups = np.zeros(len(Y), dtype=int) if groups is None else np.asarray(groups)
    rng = np.random.default_rng(seed)
    new, hidden = split(*Y.shape, rng)
    train = ~new
    Y_train = np.where(hidden, np.nan, Y)[train]
    t_train, g_train, hidden_train = times[train], groups[train], hidden[train]
    new_rows = np.flatnonzero(new)

    def errors(partial_fill, new_pred):
        out = [np.mean((partial_fill[hidden_train] - Y[train][hidden_train]) ** 2),
               np.mean((new_pred - Y[new]) ** 2)]
        if F is not None:
            out += [np.mean((partial_fill[hidden_train] - F[train][hidden_train]) ** 2),
                    np.mean((new_pred - F[new]) ** 2)]
        return out

    rows = {}
    # reference: linear interpolation in time within each sequence
    Y_obs_all = np.where(hidden, np.nan, Y)
    Y_obs_all[new] = np.nan
    fill = Y_train.copy()
    part = interpolate_in_time(Y_obs_all, times, groups, np.flatnonzero(train))
    fill[hidden_train] = part[hidden_train]
    rows["time-interp"] = errors(fill, interpolate_in_time(Y_obs_all, times, groups, new_rows))
    for prior in ("iid", "dynamical"):
        model = gplvm.BayesianGPLVM(n_components=Q, n_inducing=M, max_iter=max_iter,
                                    random_state=seed, progress=False)
        start = time.perf_counter()
        if prior == "iid":
            model.fit(Y_train)
            new_pred = np.broadcast_to(model.Y_mean_, (len(new_rows), Y.shape[1]))
        else:
            model.fit(Y_train, times=t_train, groups=g_train)
        seconds = time.perf_counter() - start
        if prior == "dynamical":
            labels = list(dict.fromkeys(g_train.tolist()))   # sequence order of the fit
            new_pred = np.empty((len(new_rows), Y.shape[1]))
            for s, g in enumerate(labels):
                at = groups[new_rows] == g
                if at.any():
                    new_pred[at] = model.predict_times(times[new_rows][at], sequence=s)[2]
        fill = model.impute(Y_train)
        info = f"{model.n_iter_} it" + (" conv" if model.converged_ else "")
        time_kernel = ("" if model.time_kernel_ is None else
                       f"time length-scale {float(model.time_kernel_.lengthscale):.3g}")
        rows[prior] = errors(fill, new_pred) + [model.elbo_, seconds, info, time_kernel]

    print(f"\n{name}: N={Y.shape[0]} D={Y.shape[1]} sequences={len(np.unique(groups))} Q={Q} "
          f"M={M}; {int(hidden_train.sum())} hidden entries in {int(hidden_train.any(1).sum())} "
          f"partial frames, {int(new.sum())} whole frames at new times")
    head = f"  {'':<12}{'partial MSE':>12}{'new-time MSE':>13}"
    if F is not None:
        head += f"{'partial vs F':>13}{'new vs F':>10}"
    print(head + f"{'bound':>13}{'fit s':>8}  iterations / time kernel")
    k = 4 if F is not None else 2
    for prior, r in rows.items():
        line = f"  {prior:<12}" + "".join(f"{e:{w}.4f}" for e, w in zip(r[:k], (12, 13, 13, 10)))
        if prior != "time-interp":
            bound, seconds, info, time_kernel = r[k:]
            line += f"{bound:13.1f}{seconds:8.1f}  {info} {time_kernel}"
        if prior == "iid":
            line += "(new times: column means)"
        print(line)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-iter", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-cmu", action="store_true")
    args = parser.parse_args()
    print("threads:", {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "XLA_FLAGS",
                                                     "OPENBLAS_NUM_THREADS")},
          "cpus:", len(os.sched_getaffinity(0)), "max_iter:", args.max_iter)
    start = time.perf_counter()
    lorenz = make_lorenz(random_state=args.seed)
    run("lorenz", lorenz.Y, lorenz.times, None, 3, 30, args.max_iter, args.seed, F=lorenz.F)
    if not args.skip_cmu:
        cmu = load_cmu_mocap_walkjog()
        run("cmu35", cmu.Y, cmu.times, cmu.groups, 6, 40, args.max_iter, args.seed)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()

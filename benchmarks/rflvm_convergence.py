"""How fast the RFLVM's chains converge: split R-hat, bulk ESS and ESS per CPU-second (issue 30).

Run (single-threaded XLA and OpenBLAS; the script sets both when they are unset and prints the
settings with the table):

    .venv/bin/python benchmarks/rflvm_convergence.py [--datasets scurve,bridges]
        [--samplers gibbs,nuts] [--sweeps gibbs=2000,nuts=400] [--chains 4] [--seed 0]
        [--learn-kernel] [--features 100]

For each data set and sampler, one fit of ``RFLVM(sampler=...)`` with ``--chains`` chains
(half the sweeps burn-in) from the same PCA start, then, over the kept sweeps, ArviZ's
rank-normalised split R-hat and bulk ESS (Vehtari et al. 2021) of

* the log-likelihood trace (every kept sweep), and
* distances between 20 fixed pairs of rows (:func:`gplvm.inference.mcmc.
  pairwise_distance_summary`): statistics of X that no rotation changes, so a sampler cannot
  look converged by mixing over the rotation alone (max R-hat and median ESS over the pairs).

CPU seconds are the process's (all threads) for the fit, compilation excluded: a first fit of
the same shapes and sampler with a few sweeps compiles the programs, and the timed fit reuses
them (the compile seconds are printed beside).  ESS per CPU-second divides the bulk ESS by
those seconds.  ``scurve``: the Poisson S-curve of seed 000 §4 (N = 300, J = 50);
``bridges``: the Poisson bridges counts from ``../shared/data`` (skipped with a message when
absent).  The frequencies are fixed (``learn_kernel=False``) unless ``--learn-kernel``: the
issue's comparison holds W's prior fixed so that the blocks that differ are the ones compared.
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
from gplvm.inference.mcmc import pairwise_distance_summary  # noqa: E402


def load(name: str):
    """(Y, description) or None when the data set is not available here."""
    if name == "scurve":
        from gplvm.data import make_s_curve
        return make_s_curve("poisson", n_samples=300, n_outputs=50, random_state=0).Y, \
            "Poisson S-curve, N = 300, J = 50"
    if name == "bridges":
        from gplvm.data import load_bridges
        try:
            data = load_bridges()
        except (FileNotFoundError, OSError) as err:
            print(f"[skip] bridges: {err}")
            return None
        return data.Y, f"bridges, Poisson, N = {data.Y.shape[0]}, J = {data.Y.shape[1]}"
    raise SystemExit(f"unknown data set {name!r} (scurve, bridges)")


def diagnostics(model) -> dict:
    """Split R-hat and bulk ESS of the log-likelihood and of 20 latent distances."""
    import arviz as az

    kept = model.history_[:, model.burn_in:]
    ll = az.convert_to_dataset(kept[:, :, None])
    dist = np.asarray(pairwise_distance_summary(model.X_samples_, n_pairs=20))
    dd = az.convert_to_dataset(dist)
    rhat_ll = float(az.rhat(ll, method="rank").to_array().values.max())
    ess_ll = float(az.ess(ll, method="bulk").to_array().values.min())
    rhat_d = az.rhat(dd, method="rank").to_array().values.ravel()
    ess_d = az.ess(dd, method="bulk").to_array().values.ravel()
    return {"rhat_ll": rhat_ll, "ess_ll": ess_ll, "rhat_dist": float(np.max(rhat_d)),
            "ess_dist": float(np.median(ess_d))}


def fit(Y, sampler: str, n_iter: int, args) -> tuple:
    kwargs = dict(likelihood="poisson", n_features=args.features, n_chains=args.chains,
                  learn_kernel=args.learn_kernel, sampler=sampler, progress=False,
                  random_state=args.seed, block_size=min(50, n_iter // 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.process_time()
        gplvm.RFLVM(n_iter=2 * kwargs["block_size"], burn_in=kwargs["block_size"],
                    **kwargs).fit(Y)                               # compiles the blocks
        compile_cpu = time.process_time() - t0
        t0, w0 = time.process_time(), time.perf_counter()
        model = gplvm.RFLVM(n_iter=n_iter, burn_in=n_iter // 2, **kwargs).fit(Y)
        cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    return model, cpu, wall, compile_cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="scurve")
    parser.add_argument("--samplers", default="gibbs,nuts")
    parser.add_argument("--sweeps", default="gibbs=2000,nuts=400",
                        help="sweeps per chain per sampler, half of them burn-in")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learn-kernel", action="store_true")
    args = parser.parse_args(argv)
    sweeps = dict((k, int(v)) for k, v in (s.split("=") for s in args.sweeps.split(",")))
    print(f"# OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']}; {os.cpu_count()} CPUs; "
          f"gplvm {gplvm.__version__}; {args.chains} chains, M = {args.features}, "
          f"{'DP kernel' if args.learn_kernel else 'frequencies from a fixed RBF'}")
    header = ("| data | sampler | sweeps × chains | CPU s (compile) | wall s | R-hat log-lik | "
              "R-hat dist (max) | ESS log-lik | ESS dist (median) | ESS/CPU-s log-lik | "
              "ESS/CPU-s dist |")
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for name in args.datasets.split(","):
        loaded = load(name)
        if loaded is None:
            continue
        Y, description = loaded
        for sampler in args.samplers.split(","):
            n_iter = sweeps[sampler]
            model, cpu, wall, compile_cpu = fit(Y, sampler, n_iter, args)
            d = diagnostics(model)
            print(f"| {description} | {sampler} | {n_iter} × {args.chains} | {cpu:.1f} "
                  f"({compile_cpu:.1f}) | {wall:.1f} | {d['rhat_ll']:.3f} | {d['rhat_dist']:.3f} "
                  f"| {d['ess_ll']:.0f} | {d['ess_dist']:.0f} | {d['ess_ll'] / cpu:.2f} | "
                  f"{d['ess_dist'] / cpu:.2f} |", flush=True)


if __name__ == "__main__":
    main()

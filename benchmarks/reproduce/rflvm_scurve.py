"""RFLVM on the S-curve generator (seed 000, §4, Fig. 2): Procrustes R² of the posterior mean
latent against the true X, for every likelihood, beside PCA, through the results store
(``_cells.py``: one JSON file per (likelihood, method, seed); re-running resumes).

Run: ``.venv/bin/python benchmarks/reproduce/rflvm_scurve.py [--n-iter 500] [--chains 1]
[--seeds 1] [--likelihoods gaussian,poisson,...] [--jobs 1] [--smoke]``.  N = 500, J = 100,
M = 100, Q = 2 (the paper's sizes).  PCA sees Y (Gaussian) or log(1 + Y) (counts).  The paper's
Fig. 2 is a picture (no number), so the page's paper column is empty.

``--smoke`` runs the code path on N = 30, J = 8, M = 10, 4 sweeps, one seed, the Poisson
likelihood unless ``--likelihoods`` says otherwise, into ``--root`` (a temporary folder by
default), for the test.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cells import Cell, RESULTS, add_store_args, run_cells, store_root, write_row  # noqa: E402

ALL = ("gaussian", "poisson", "negative_binomial", "bernoulli", "binomial", "multinomial")
PAPER, TABLE, DATASET = "000", "Fig2", "S-curve"
SCRIPT = "benchmarks/reproduce/rflvm_scurve.py"
FULL = {"n_samples": 500, "n_outputs": 100, "n_features": 100}
SMOKE = {"n_samples": 30, "n_outputs": 8, "n_features": 10}


def _data(kind: str, seed: int, sizes: dict):
    from gplvm.data import make_s_curve
    return make_s_curve(kind, n_samples=sizes["n_samples"], n_outputs=sizes["n_outputs"],
                        random_state=seed)


def pca_r2(kind: str, d) -> float:
    from sklearn.decomposition import PCA

    from gplvm.metrics import procrustes_r2
    Z = d.Y if kind == "gaussian" else np.log1p(d.Y)
    return float(procrustes_r2(d.X, PCA(2).fit_transform(Z)))


def compute(cell: Cell):
    """One cell: ``RFLVM <kind>`` fits and prints the legacy line; ``PCA <kind>`` is PCA."""
    import gplvm
    from gplvm.metrics import procrustes_r2
    method, kind = cell.method.split(" ", 1)
    sizes = SMOKE if cell.config.get("smoke") else FULL
    d = _data(kind, cell.seed, sizes)
    if method == "PCA":
        return pca_r2(kind, d), {}
    n_iter = cell.config["sweeps"]
    extra = {"n_trials": 10} if kind == "binomial" else {}
    start, cpu = time.perf_counter(), time.process_time()
    model = gplvm.RFLVM(likelihood=kind, n_features=sizes["n_features"], n_iter=n_iter,
                        burn_in=n_iter // 2, n_chains=cell.config["chains"], sampler="gibbs",
                        random_state=cell.seed, progress=False).fit(d.Y, **extra)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    r2, pca = float(procrustes_r2(d.X, model.X_mean_)), pca_r2(kind, d)
    print(f"{kind:>18} {cell.seed:>4} {r2:>9.3f} {pca:>7.3f} {wall:>7.1f}", flush=True)
    return r2, {"fit_s": wall, "cpu_s": cpu, "pca_r2": pca, **sizes}


def make_cells(likelihoods, seeds, n_iter, chains, smoke=False):
    config = {"sweeps": n_iter, "burn_in": n_iter // 2, "chains": chains,
              **({"smoke": True} if smoke else {})}
    return [Cell(PAPER, TABLE, DATASET, f"{method} {kind}", seed,
                 config if method == "RFLVM" else ({"smoke": True} if smoke else {}))
            for kind in likelihoods for seed in range(seeds) for method in ("RFLVM", "PCA")]


def write_rows(root: Path = RESULTS) -> None:
    for kind in ALL:
        for method in ("RFLVM", "PCA"):
            write_row(PAPER, TABLE, DATASET, f"{method} {kind}",
                      command=f".venv/bin/python {SCRIPT} --likelihoods {kind}",
                      metric="Procrustes R² of the latent against the true X",
                      note="N = 500, J = 100, M = 100, Q = 2; one chain, half burn-in.  The "
                           "paper's Fig. 2 shows the latents (Poisson emissions) without a "
                           "number; R² here is ours alone.", root=root)


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-iter", type=int, default=500)
    p.add_argument("--chains", type=int, default=1)
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--likelihoods", default=None, help=f"comma-separated (default all: {ALL})")
    add_store_args(p)
    args = p.parse_args(argv)
    kinds = (args.likelihoods or ("poisson" if args.smoke else ",".join(ALL))).split(",")
    for kind in kinds:
        if kind not in ALL:
            raise ValueError(f"--likelihoods: unknown {kind!r}; choose from {ALL}")
    if args.smoke:
        root = store_root(args, "scurve-smoke-")
        seeds, n_iter, sizes = 1, 4, SMOKE
    else:
        root = store_root(args)
        seeds, n_iter, sizes = args.seeds, args.n_iter, FULL
        write_rows(root)
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '(unset)')} "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')} "
          f"cores={len(os.sched_getaffinity(0))} load={os.getloadavg()} root={root}")
    print(f"N={sizes['n_samples']} J={sizes['n_outputs']} M={sizes['n_features']} Q=2 "
          f"sweeps={n_iter} burn-in={n_iter // 2} chains={args.chains}")
    print(f"{'likelihood':>18} {'seed':>4} {'RFLVM R2':>9} {'PCA R2':>7} {'fit s':>7}")
    cells = make_cells(kinds, seeds, n_iter, args.chains, smoke=args.smoke)
    return run_cells(compute, cells, jobs=args.jobs, root=root,
                     log=lambda line: print(line, flush=True))


if __name__ == "__main__":
    main()

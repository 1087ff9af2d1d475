"""Seed 004 (the Bayesian GPLVM with the unscented transform): 1-NN accuracy of the latent
space on oil-100 and a USPS subset, non-RBF kernels with the unscented rule beside the analytic
RBF (part ``nn``); and its Appendix C Figure 1(a), the L1 error of Ψ1 for a Matérn 3/2 kernel
against an MC(10000) estimate over the input dimension (part ``psi``).  One JSON file per cell
(``_cells.py``).

Run: ``.venv/bin/python benchmarks/reproduce/unscented_seed004.py [--parts nn,psi]
[--seeds 3] [--psi-seeds 5] [--max-iter 1000] [--jobs 1] [--smoke]``; then
``.venv/bin/python benchmarks/results_page.py``.

**Our copy of seed 004 is its supplement** (appendices A-C): the main paper's oil-100 and USPS
table is not in it, so those rows have no paper figure.

Part ``nn`` (table ``1NN``): ``gplvm.BayesianGPLVM`` with Q = 5 latent dimensions, M = 20
inducing inputs, ``--max-iter`` L-BFGS steps, the library's defaults otherwise (standardised
columns, GPy-style initial variances), and four (kernel, rule) pairs: ARD RBF with the analytic
psi-statistics, ARD RBF with the unscented rule (the same model, only the rule differs: the
cost of the approximation alone), and ARD Matérn 3/2 and 5/2 with the unscented rule (no closed
form exists for them).  The score is the leave-one-out 1-NN accuracy of the posterior-mean
latent ``X_mean_`` (all Q dimensions; the accuracy in the two most relevant dimensions is in the
cell's details).  Data (``../shared/data``):

* ``oil-100`` -- 100 rows of ``DataTrn`` (1000 x 12) drawn once (NumPy seed 0); the data set's
  README: "oil100 = random 100-point subset" (GPmat draws its own with MATLAB's generator, which
  we cannot replay).  Labels the three flow regimes.
* ``USPS-300`` -- 300 images of the USPS test set (``load_usps``, 16 x 16, all ten digits)
  drawn once (NumPy seed 0); labels the digits.  ``usps_twos_gpmat``'s ``twos.mat`` holds only
  the digit 2 and has no labels to score a 1-NN classifier with, so the labelled
  ``usps_test.mat`` of the same folder is used.

Part ``psi`` (table ``C1a``): seed 004 Appendix C: "we computed Ψ1 for a Matérn 3/2 kernel using
each approximation on random data (N = 40, M = 20) of varying dimensions", compared with "an MC
approximation that uses 10,000 samples".  Random data per seed: μ_n, z_m ~ N(0, I_D),
S_nd ~ U(0.1, 1); the kernel's length-scale is √D (so that k(μ_n, z_m) does not vanish as D
grows; the paper does not give its settings) and variance 1.  Methods, all through
:func:`gplvm.expectations.psi_statistics`: ``Unscented()`` (2D points), ``GaussHermite(2)``
(2^D), ``MonteCarlo`` with 2D, 2^D and 200 samples; reference ``MonteCarlo(10000)`` with an
independent key.  The number is Σ_nm |Ψ1 − Ψ1_ref| (the L1 norm of the difference).

``--smoke`` runs part ``nn`` on 30 rows x 6 columns of each data set with 3 L-BFGS steps and
part ``psi`` at D = 1 with a 200-sample reference (it shares MC(200)'s compiled code), into
``--root`` (a temporary folder by default), for the test.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cells import Cell, add_store_args, run_cells, store_root, write_row  # noqa: E402

PAPER = "004"
SCRIPT = "benchmarks/reproduce/unscented_seed004.py"
DATASETS = ("oil-100", "USPS-300")
FITS = {"rbf_analytic": ("RBF", "analytic"), "rbf_unscented": ("RBF", "unscented"),
        "matern32_unscented": ("Matern32", "unscented"),
        "matern52_unscented": ("Matern52", "unscented")}
FIT_LABELS = {"rbf_analytic": "ARD RBF, analytic Ψ", "rbf_unscented": "ARD RBF, unscented",
              "matern32_unscented": "ARD Matérn 3/2, unscented",
              "matern52_unscented": "ARD Matérn 5/2, unscented"}
Q, M_INDUCING = 5, 20
PSI_METHODS = ("UT", "GH(2^D)", "MC(2D)", "MC(2^D)", "MC(200)")
DIMS = (1, 2, 3, 4, 5, 6, 8, 10)
N_PSI, M_PSI, T_REF = 40, 20, 10000


# ----------------------------------------------------------------------------- part nn


@functools.lru_cache(maxsize=None)
def load(name: str, smoke: bool = False):
    """Y and labels of a data set (module docstring), cut to 30 x 6 with ``smoke``."""
    from gplvm.data.loaders import load_oil_flow, load_usps
    if name == "oil-100":
        d, n = load_oil_flow(), 100
    elif name == "USPS-300":
        d, n = load_usps(), 300
    else:
        raise ValueError(f"unknown data set {name!r}; choose from {DATASETS}")
    rows = np.sort(np.random.default_rng(0).choice(len(d.Y), n, replace=False))
    Y, labels = d.Y[rows], np.asarray(d.labels)[rows]
    if smoke:
        Y, labels = Y[:30, :6], labels[:30]
    return Y, labels


def fit_latent(method: str, Y, seed: int, max_iter: int):
    """The fitted Bayesian GPLVM of ``method`` (a key of :data:`FITS`)."""
    import gplvm
    from gplvm import kernels
    kernel_name, rule = FITS[method]
    kernel = getattr(kernels, kernel_name)(lengthscale=np.ones(Q))
    return gplvm.BayesianGPLVM(n_components=Q, n_inducing=M_INDUCING, kernel=kernel,
                               psi_rule=rule, max_iter=max_iter, random_state=seed,
                               progress=False).fit(Y)


def compute_nn(cell: Cell):
    """One part-``nn`` cell: LOO 1-NN accuracy of ``X_mean_``."""
    from gplvm.metrics import loo_1nn_errors
    Y, labels = load(cell.dataset, bool(cell.config.get("smoke", False)))
    start = time.process_time()
    model = fit_latent(cell.method, Y, cell.seed, int(cell.config["max_iter"]))
    cpu_s = time.process_time() - start
    X = np.asarray(model.X_mean_)
    top2 = np.argsort(-np.asarray(model.relevance_))[:2]
    errors = loo_1nn_errors(X, labels)
    return 1.0 - errors / len(Y), {
        "errors": int(errors), "n": int(len(Y)), "cpu_s": cpu_s,
        "accuracy_top2": 1.0 - loo_1nn_errors(X[:, top2], labels) / len(Y),
        "elbo": float(model.elbo_), "n_iter": int(model.n_iter_)}


# ----------------------------------------------------------------------------- part psi


def psi_data(D: int, seed: int):
    """Seed 004 App. C random data: Z (M, D), μ (N, D), S (N, D)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((M_PSI, D)), rng.standard_normal((N_PSI, D)),
            rng.uniform(0.1, 1.0, (N_PSI, D)))


def psi_rule(method: str, D: int, seed: int):
    """The rule object of a part-``psi`` method (MC keys independent of the reference's)."""
    import jax
    from gplvm.expectations import GaussHermite, MonteCarlo, Unscented
    key = jax.random.PRNGKey(seed)
    return {"UT": lambda: Unscented(), "GH(2^D)": lambda: GaussHermite(n_points=2),
            "MC(2D)": lambda: MonteCarlo(n_samples=2 * D, key=key),
            "MC(2^D)": lambda: MonteCarlo(n_samples=2 ** D, key=key),
            "MC(200)": lambda: MonteCarlo(n_samples=200, key=key)}[method]()


@functools.lru_cache(maxsize=None)
def psi1(method: str, D: int, seed: int, n_ref: int = T_REF):
    """Ψ1 (N, M) of ``method`` (or ``"ref"``: MC(``n_ref``)) on the data of (D, seed)."""
    import jax
    from gplvm.expectations import MonteCarlo, psi_statistics
    from gplvm.kernels import Matern32
    Z, mu, S = psi_data(D, seed)
    rule = (MonteCarlo(n_samples=n_ref, key=jax.random.PRNGKey(1_000_003 + seed))
            if method == "ref" else psi_rule(method, D, seed))
    kernel = Matern32(lengthscale=np.sqrt(D), variance=1.0)
    return np.asarray(psi_statistics(kernel, Z, mu, S, rule=rule)[1])


def compute_psi(cell: Cell):
    """One part-``psi`` cell: Σ |Ψ1 − Ψ1_ref| for (method, D, seed)."""
    D, n_ref = int(cell.config["D"]), int(cell.config["reference_samples"])
    ref = psi1("ref", D, cell.seed, n_ref)
    diff = np.abs(psi1(cell.method, D, cell.seed) - ref)
    return float(diff.sum()), {"max_abs": float(diff.max()), "ref_l1": float(np.abs(ref).sum())}


def compute(cell: Cell):
    """The function :func:`run_cells` calls: by table."""
    return compute_psi(cell) if cell.table == "C1a" else compute_nn(cell)


# ----------------------------------------------------------------------------- cells, rows


def make_cells(parts, seeds, psi_seeds, max_iter, smoke=False):
    cells = []
    flag = {"smoke": True} if smoke else {}
    if "nn" in parts:
        for name in DATASETS:
            for method in FITS:
                cells += [Cell(PAPER, "1NN", name, method, s, {"max_iter": max_iter, **flag})
                          for s in range(seeds)]
    if "psi" in parts:
        for D in ((1,) if smoke else DIMS):
            config = {"D": D, "reference_samples": 200 if smoke else T_REF, **flag}
            for method in PSI_METHODS:
                cells += [Cell(PAPER, "C1a", f"D={D}", method, s, config)
                          for s in range(psi_seeds)]
    return cells


def write_rows(root: Path) -> None:
    """The page's rows: no paper figure for either table (module docstring)."""
    run = f".venv/bin/python {SCRIPT}"
    nn_note = ("our copy of seed 004 is its supplement; the main paper's oil-100 / USPS table "
               "is not in it (no paper figure). Q = 5, M = 20, LOO 1-NN accuracy of X_mean_ "
               "(all 5 dimensions); the subsets are drawn once (NumPy seed 0), see the script.  "
               "Ours (3 seeds): on oil-100 the four fits are within one error of each other "
               "(96-98 of 100); on USPS-300 the Matérn fits score 0.76 (3/2) and 0.78 (5/2) "
               "against the RBF's 0.80; the unscented RBF equals the analytic RBF in 5 of the "
               "6 fits (one oil-100 fit: 96 against 97), so the rule costs no accuracy.")
    for name in DATASETS:
        for method in FITS:
            write_row(PAPER, "1NN", name, method, label=FIT_LABELS[method],
                      command=f"{run} --parts nn", note=nn_note,
                      metric="leave-one-out 1-NN accuracy", root=root)
    psi_note = ("Appendix C Fig. 1(a) is a plot without numbers in our copy. The paper: \"UT "
                "maintains a steady accuracy as dimensions increase. Other methods with "
                "comparable performance require many more samples\", and MC(2D), the only "
                "method with as many points as the UT, is worse. Random data N = 40, M = 20, "
                "Matérn 3/2 with length-scale √D; the value is Σ|Ψ1 − Ψ1_MC(10000)|, whose "
                "own Monte Carlo error is part of every entry.  Ours agrees for D >= 2: the UT "
                "has the smallest error of the five at every D from 2 to 10 (5 seeds; D = 10: "
                "UT 0.73, GH(2^D) 1.35 with 1024 points, MC(200) 3.35, MC(2D) 10.9), and MC(2D) "
                "is the worst at every D (at D <= 2 it is the same rule as MC(2^D)).  At "
                "D = 1 the UT is the 2-point Gauss-Hermite rule (same points, same weights) and "
                "MC(200) beats both.  The UT's error falls with "
                "D here partly because the length-scale √D makes the kernel smoother relative "
                "to q(x)'s variance as D grows.")
    for D in DIMS:
        for method in PSI_METHODS:
            write_row(PAPER, "C1a", f"D={D}", method, command=f"{run} --parts psi",
                      note=psi_note, metric="L1 error of Ψ1", extra={"pivot": "dataset"},
                      root=root)


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", default="nn,psi")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--psi-seeds", type=int, default=5)
    p.add_argument("--max-iter", type=int, default=1000)
    add_store_args(p)
    args = p.parse_args(argv)
    parts = args.parts.split(",")
    for part in parts:
        if part not in ("nn", "psi"):
            raise ValueError(f"--parts: unknown {part!r}; choose from nn, psi")
    if args.smoke:
        root = store_root(args, "seed004-smoke-")
        seeds, psi_seeds, max_iter = 1, 1, 3
    else:
        root = store_root(args)
        seeds, psi_seeds, max_iter = args.seeds, args.psi_seeds, args.max_iter
        write_rows(root)
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')} "
          f"XLA_FLAGS={os.environ.get('XLA_FLAGS')} load={os.getloadavg()} root={root}",
          flush=True)
    cells = make_cells(parts, seeds, psi_seeds, max_iter, smoke=args.smoke)
    return run_cells(compute, cells, jobs=args.jobs, root=root,
                     log=lambda line: print(line, flush=True))


if __name__ == "__main__":
    main()

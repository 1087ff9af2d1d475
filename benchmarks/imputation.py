"""Held-out-cell imputation on real tables, images and counts (issue 32, item 3).

Run (single-threaded: the script sets the thread variables when unset and prints them):

    .venv/bin/python benchmarks/imputation.py [--datasets oil,wine,digits,frey,congress,bridges]
        [--rates 0.1,0.3,0.5] [--seeds 0] [--methods mean knn iterative ppca bgplvm sgplvm
        rflvm-poisson rflvm-nb] [--quick] [--rows digits=500,frey=300] [--save FILE.json]

**Protocol ("fitted rows").**  For each data set, missing rate r and seed s, every cell of Y is
hidden independently with probability r (missing completely at random; generator
``numpy.random.default_rng(crc32("dataset|rate|seed"))``, so each cell of the table has its own
fixed mask whatever else runs; a row left with no observed cell gets one back, chosen at
random).  Every method is fitted on all rows of the masked Y and imputes the hidden cells of
those same rows (the rows it was fitted on): the one protocol every method here supports.
Scores are over the hidden cells only:

* **RMSE** of z-scores: truth and imputation both standardised with the *observed* cells'
  column mean and standard deviation (so 1.0 is roughly what the column mean scores);
* **NLPD**: mean negative log predictive density of the hidden z-scores (continuous data) for
  the methods with a predictive variance, ``—`` for the others.  On count data every NLPD is
  of the count itself (a probability mass, unit-free): the count models' mixture over their
  stored draws, a Gaussian method's mass on [y − ½, y + ½) (its Gaussian discretised).  The
  column mean's NLPD uses N(observed mean, observed variance) per column, a reference line.

**Constant columns.**  A column whose observed cells are all equal (digits' border pixels) is
given to every method as it is (the GPLVM estimators keep such columns out of the fit
themselves since commit 7f1b424), its hidden cells are overwritten with that constant for every
method, and they are not scored (the z-score is undefined).  ``--drop-constant`` instead keeps
those columns out of every method's input (except the structured model's, whose pixel grid
cannot lose pixels), as the benchmark had to before 7f1b424.  The footer counts them.

**Methods** (all with their defaults unless ``name[key=value,...]`` overrides constructor
arguments, e.g. ``"bgplvm[n_components=5,n_inducing=50]"``):

* ``mean`` — :class:`ColumnMeanImputer`;
* ``knn`` — scikit-learn ``KNNImputer(n_neighbors=5)``;
* ``iterative`` — scikit-learn ``IterativeImputer()`` (BayesianRidge, 10 rounds, random_state=s);
* ``ppca`` — :class:`PPCA` (EM with missing entries; Q = 2 by default); its
  predictive variance is ``w_dᵀ Σ_n w_d + σ²`` under the row's posterior;
* ``bgplvm`` — :class:`gplvm.BayesianGPLVM` (Q = 2, M = 30, 2000 L-BFGS iterations,
  standardised columns); ``impute`` of the training matrix (E[y] under the fitted q(X));
  NLPD of the mixture over 32 draws x ~ q(x_n) of the Gaussian ``predict(x, return_var=True)``;
* ``sgplvm`` (images only) — :class:`gplvm.StructuredGPLVM` (Q = 30, M = 100, separable Matérn
  3/2 spatial kernel, 1000 iterations) on the images; the hidden pixels imputed by the joint
  predictive at the fitted latent means conditioned on each image's observed pixels
  (``predict(X_mean_, given=Y, return_var=True)``, seed 003 §2.2.2);
* ``rflvm-poisson``, ``rflvm-nb`` (counts only) — :class:`gplvm.RFLVM` with that likelihood
  and ``inference='map'`` (4 restarts; imputation the mean over their modes); NLPD from the
  stored draws' likelihood (read through the model's private draws: no public verb gives the
  log density of hidden cells of the fitted rows).

**Data** (read from ``../shared/data`` by path, never copied):  ``oil`` 1000 × 12 (DataTrn);
``wine`` scikit-learn's 178 × 13; ``digits`` scikit-learn's 8 × 8 images (``--rows``: a fixed
random subset of rows, default 500); ``frey`` Frey faces 28 × 20 (default 300 random frames);
``congress`` congress109, all 529 members × the 50 most frequent phrases (counts); ``bridges``
214 × 4 bicycle counts.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
import zlib  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import NamedTuple, Optional  # noqa: E402

import numpy as np  # noqa: E402
from scipy.special import logsumexp  # noqa: E402
from scipy.stats import norm  # noqa: E402

import gplvm  # noqa: E402
from gplvm.baselines import PPCA, ColumnMeanImputer  # noqa: E402
from gplvm.data import load_bridges, load_congress109, load_digits, load_frey_faces, load_oil_flow  # noqa: E402,E501

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
N_DRAWS = 32      # draws of x ~ q(x_n) for the Bayesian GPLVM's predictive mixture


# ------------------------------------------------------------------------------------ data
class Data(NamedTuple):
    Y: np.ndarray                  # (N, D) float, complete
    kind: str                      # "table", "image" or "counts"
    image_shape: Optional[tuple]   # (h, w) for images
    text: str


def _subsample(Y: np.ndarray, n: Optional[int], seed: int = 0) -> np.ndarray:
    if n is None or n >= len(Y):
        return Y
    rows = np.sort(np.random.default_rng(seed).choice(len(Y), n, replace=False))
    return Y[rows]


def load(name: str, rows: Optional[int], quick: bool) -> Data:
    """The complete matrix of one data set (rows: a fixed random subset, None for all)."""
    if name == "oil":
        Y = load_oil_flow(DATA / "oil_flow").Y
        Y = _subsample(Y, 120 if quick else rows)
        return Data(Y, "table", None, f"oil flow, {Y.shape[0]} × {Y.shape[1]}")
    if name == "wine":
        from sklearn.datasets import load_wine
        Y = _subsample(load_wine().data.astype(float), 60 if quick else rows)
        return Data(Y, "table", None, f"wine (sklearn), {Y.shape[0]} × {Y.shape[1]}")
    if name == "digits":
        Y = _subsample(load_digits().Y, 60 if quick else (rows or 500))
        return Data(Y, "image", (8, 8), f"digits 8×8, {Y.shape[0]} images")
    if name == "frey":
        Y = _subsample(load_frey_faces(DATA / "frey_faces").Y,
                       40 if quick else (rows or 300))
        return Data(Y, "image", (28, 20), f"Frey faces 28×20, {Y.shape[0]} frames")
    if name == "congress":
        Y = load_congress109(DATA / "congress109").Y
        top = np.sort(np.argsort(-Y.sum(0), kind="stable")[:10 if quick else 50])
        Y = _subsample(Y[:, top], 60 if quick else rows)
        return Data(Y, "counts", None, f"congress109 counts, {Y.shape[0]} × {Y.shape[1]} "
                                       f"(most frequent phrases)")
    if name == "bridges":
        Y = _subsample(load_bridges(DATA / "rflvm_bridges").Y, 60 if quick else rows)
        return Data(Y, "counts", None, f"bridges counts, {Y.shape[0]} × {Y.shape[1]}")
    raise SystemExit(f"unknown data set {name!r} (oil, wine, digits, frey, congress, bridges)")


def make_mask(shape: tuple, name: str, rate: float, seed: int) -> np.ndarray:
    """True where a cell is hidden: MCAR with probability ``rate``, seeded per table cell."""
    rng = np.random.default_rng(zlib.crc32(f"{name}|{rate:g}|{seed}".encode()))
    hidden = rng.random(shape) < rate
    for n in np.flatnonzero(hidden.all(axis=1)):      # every row keeps an observed cell
        hidden[n, rng.integers(shape[1])] = False
    return hidden


# ------------------------------------------------------------------------------- methods
class Cell(NamedTuple):
    data: Data
    seed: int
    truth: np.ndarray              # the complete Y of the columns a method sees (scoring only)
    full_Ym: np.ndarray            # the masked Y with every column (the images' grid)


class Imputation(NamedTuple):
    mean: np.ndarray               # (N, D') imputed matrix in original units
    var: Optional[np.ndarray]      # predictive variance (original units) or None
    log_pmf: Optional[np.ndarray]  # counts: log predictive mass per cell (count models)
    info: str = ""                 # how the fit stopped


def _stopped(m) -> str:
    return f"{m.n_iter_} iterations, converged_={m.converged_}"


def _parse_method(spec: str) -> tuple[str, dict]:
    m = re.fullmatch(r"([\w-]+)(?:\[(.*)\])?", spec)
    if m is None:
        raise SystemExit(f"cannot read method {spec!r}; write name or name[key=value,...]")
    kwargs = {}
    for item in filter(None, (m.group(2) or "").split(",")):
        key, value = item.split("=")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return m.group(1), kwargs


def fit_mean(Ym, cell, kw):
    imp = ColumnMeanImputer().fit(Ym)
    var = np.broadcast_to(np.nanvar(Ym, axis=0), Ym.shape)
    return Imputation(imp.impute(Ym), var, None)


def fit_knn(Ym, cell, kw):
    from sklearn.impute import KNNImputer
    return Imputation(KNNImputer(**{"n_neighbors": 5, **kw}).fit_transform(Ym), None, None)


def fit_iterative(Ym, cell, kw):
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # "[IterativeImputer] Early stopping ..."
        out = IterativeImputer(**{"random_state": cell.seed, **kw}).fit_transform(Ym)
    return Imputation(out, None, None)


def fit_ppca(Ym, cell, kw):
    m = PPCA(**kw).fit(Ym)
    W = m.components_
    var = np.einsum("dq,nqr,dr->nd", W, m.X_cov_, W) + m.noise_var_
    return Imputation(m.impute(Ym), var, None)


def fit_bgplvm(Ym, cell, kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = gplvm.BayesianGPLVM(**{"progress": False, "random_state": cell.seed, **kw}).fit(Ym)
    filled = m.impute(Ym)
    # mixture over x ~ q(x_n) of the Gaussian predictive at x (the predictive density of the
    # hidden cells under the fitted q(X)), moment-matched: E[var] + Var[mean]
    rng = np.random.default_rng(cell.seed)
    eps = rng.standard_normal((N_DRAWS,) + m.X_mean_.shape)
    X = m.X_mean_ + np.sqrt(m.X_var_) * eps
    mean, var = m.predict(X.reshape(-1, X.shape[-1]), return_var=True)
    mean = mean.reshape((N_DRAWS,) + Ym.shape)
    var = var.reshape((N_DRAWS,) + Ym.shape)
    return Imputation(filled, var.mean(0) + mean.var(0), None, _stopped(m))


def fit_sgplvm(Ym, cell, kw):
    if cell.data.kind != "image":
        return None
    full_Ym = cell.full_Ym
    Yimg = full_Ym.reshape((-1,) + cell.data.image_shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = gplvm.StructuredGPLVM(**{"progress": False, "random_state": cell.seed,
                                     **kw}).fit(Yimg)
    mean, var = m.predict(m.X_mean_, given=Yimg, return_var=True)
    mean, var = mean.reshape(len(Yimg), -1), var.reshape(len(Yimg), -1)
    return Imputation(np.where(np.isnan(full_Ym), mean, full_Ym), var, None, _stopped(m))


def _fit_rflvm(likelihood):
    def fit(Ym, cell, kw):
        if cell.data.kind != "counts":
            return None
        import jax.numpy as jnp
        from gplvm.models.rflvm import predict as pred
        from gplvm.models.rflvm.loglik import full_log_lik
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = gplvm.RFLVM(**{"likelihood": likelihood, "inference": "map", "progress": False,
                               "random_state": cell.seed, **kw}).fit(Ym)
        filled = m.impute(Ym)
        spec, d = m._spec_, m._data_
        W, beta, nv, disp = m._map_draws()
        truth = jnp.asarray(cell.truth)
        hidden = jnp.asarray(np.isnan(Ym))

        def one(X, W, beta, nv, disp):
            psi = pred.linear_predictor(X, W, beta, d.offset, spec.intercept)
            return full_log_lik(spec.likelihood, truth, psi, hidden, d.trials, nv, disp)
        import jax
        per_draw = np.asarray(jax.vmap(one)(jnp.asarray(m._draws_["X"]), W, beta, nv, disp))
        log_pmf = logsumexp(per_draw, axis=0) - np.log(per_draw.shape[0])
        return Imputation(filled, None, log_pmf, f"converged_={m.converged_}")
    return fit


METHODS = {"mean": fit_mean, "knn": fit_knn, "iterative": fit_iterative, "ppca": fit_ppca,
           "bgplvm": fit_bgplvm, "sgplvm": fit_sgplvm,
           "rflvm-poisson": _fit_rflvm("poisson"), "rflvm-nb": _fit_rflvm("negative_binomial")}
QUICK = {"bgplvm": {"max_iter": 30}, "sgplvm": {"max_iter": 20, "n_components": 5,
                                                 "n_inducing": 10},
         "ppca": {"max_iter": 50}, "rflvm-poisson": {"n_chains": 2},
         "rflvm-nb": {"n_chains": 2}}


# ------------------------------------------------------------------------------- scoring
def score(Y, hidden, scored_cols, kind, mu, sd, imp: Imputation) -> tuple[float, float]:
    """(RMSE of z-scores, NLPD) over the hidden cells of the scored columns."""
    cells = hidden & scored_cols[None, :]
    z_true = ((Y - mu) / sd)[cells]
    z_hat = ((imp.mean - mu) / sd)[cells]
    rmse = float(np.sqrt(np.mean((z_true - z_hat) ** 2)))
    if imp.log_pmf is not None:
        return rmse, float(-np.mean(imp.log_pmf[cells]))
    if imp.var is None:
        return rmse, float("nan")
    var = np.maximum(np.broadcast_to(imp.var, Y.shape)[cells], 1e-300)
    if kind == "counts":       # the Gaussian's mass on [y - 1/2, y + 1/2)
        s, m, y = np.sqrt(var), imp.mean[cells], Y[cells]
        a, b = (y - 0.5 - m) / s, (y + 0.5 - m) / s
        # log(Phi(b) - Phi(a)) on the side of the mean where it does not cancel
        upper = a > 0
        hi = np.where(upper, norm.logsf(a), norm.logcdf(b))
        lo = np.where(upper, norm.logsf(b), norm.logcdf(a))
        return rmse, float(-np.mean(hi + np.log1p(-np.exp(lo - hi))))
    z_var = var / np.broadcast_to(sd, Y.shape)[cells] ** 2
    return rmse, float(np.mean(0.5 * (np.log(2 * np.pi * z_var) + (z_true - z_hat) ** 2 / z_var)))


def run_cell(name: str, data: Data, rate: float, seed: int, methods: list, quick: bool,
             drop_constant: bool):
    Y = data.Y
    hidden = make_mask(Y.shape, name, rate, seed)
    Ym = np.where(hidden, np.nan, Y)
    mu, sd = np.nanmean(Ym, axis=0), np.nanstd(Ym, axis=0)
    constant = ~(sd > 0)
    scored = ~constant
    keep = scored if drop_constant else np.ones_like(scored)
    Yk = Ym[:, keep]
    out = {"constant_cols": int(constant.sum()),
           "scored_cells": int((hidden & scored[None, :]).sum())}
    for spec in methods:
        base, kw = _parse_method(spec)
        if quick:
            kw = {**QUICK.get(base, {}), **kw}
        fit = METHODS[base]
        t0, c0 = time.perf_counter(), time.process_time()
        imp = fit(Yk, Cell(data, seed, Y[:, keep], Ym), kw)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if imp is None:
            continue
        const_fill = np.where(np.isnan(Ym), mu, Ym)
        if base == "sgplvm" or not drop_constant:   # saw every column; fill constants alike
            imp = imp._replace(mean=np.where(constant[None, :], const_fill, imp.mean))
        else:                    # put the dropped columns back, as their observed constant
            full = const_fill.copy()
            full[:, keep] = imp.mean
            var = None
            if imp.var is not None:
                var = np.zeros(Y.shape)
                var[:, keep] = np.broadcast_to(imp.var, Yk.shape)
            log_pmf = None
            if imp.log_pmf is not None:
                log_pmf = np.zeros(Y.shape)
                log_pmf[:, keep] = imp.log_pmf
            imp = Imputation(full, var, log_pmf, imp.info)
        rmse, nlpd = score(Y, hidden, scored, data.kind, mu, np.where(scored, sd, 1.0), imp)
        out[spec] = {"rmse": rmse, "nlpd": nlpd, "wall_s": wall, "cpu_s": cpu, "info": imp.info}
        print(f"  {name} rate={rate:g} seed={seed} {spec}: RMSE {rmse:.4f} NLPD {nlpd:.4f} "
              f"({wall:.1f} s wall, {cpu:.1f} s CPU) {imp.info}", flush=True)
    return out


# ------------------------------------------------------------------------------- output
def _fmt(values: list, best: bool, digits: int = 3) -> str:
    if not values or np.all(np.isnan(values)):
        return "—"
    text = f"{np.mean(values):.{digits}f}"
    if len(values) > 1:
        text += f" ± {np.std(values, ddof=1) / np.sqrt(len(values)):.{digits}f}"
    return f"**{text}**" if best else text


def table(results: dict, methods: list, metric: str, digits: int = 3) -> str:
    lines = ["| data | missing | " + " | ".join(methods) + " |",
             "| --- | --- |" + " --- |" * len(methods)]
    for (text, rate), cells in results.items():
        per = {m: [c[m][metric] for c in cells if m in c] for m in methods}
        means = {m: np.mean(v) for m, v in per.items() if v and not np.all(np.isnan(v))}
        top = min(means.values()) if means else None
        row = [_fmt(per[m], m in means and np.isclose(means[m], top, rtol=0, atol=5e-4),
                    digits)
               if per[m] else "" for m in methods]
        lines.append(f"| {text} | {rate:.0%} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def header(argv: list) -> str:
    import jax
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], capture_output=True,
                           text=True, cwd=Path(__file__).resolve().parents[1]).stdout.split()
    return "\n".join([
        "# command: .venv/bin/python benchmarks/imputation.py " + " ".join(argv),
        f"# OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
        f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} "
        f"XLA_FLAGS={os.environ['XLA_FLAGS']!r}",
        f"# machine: {platform.machine()}, {os.cpu_count()} logical CPUs, python "
        f"{platform.python_version()}, jax {jax.__version__}, gplvm {gplvm.__version__}, "
        f"load average {os.getloadavg()[0]:.1f}",
        f"# commit: {commit}" + (f"; uncommitted under src/: {' '.join(dirty[1::2])}"
                                 if dirty else "")])


def main(argv=None):
    import sys
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default="oil,wine,digits,frey,congress")
    p.add_argument("--rates", default="0.3")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--methods", nargs="+",
                   default=["mean", "knn", "iterative", "ppca", "bgplvm", "sgplvm",
                            "rflvm-poisson", "rflvm-nb"])
    p.add_argument("--rows", default="", help="rows per data set, e.g. digits=500,frey=300")
    p.add_argument("--quick", action="store_true", help="tiny sizes and budgets (smoke run)")
    p.add_argument("--drop-constant", action="store_true",
                   help="keep constant-in-observed columns out of every method's input (the "
                        "GPLVM estimators before 7f1b424 refused them)")
    p.add_argument("--save", help="write every cell's figures to this JSON file")
    args = p.parse_args(argv)
    for spec in args.methods:
        if _parse_method(spec)[0] not in METHODS:
            raise SystemExit(f"unknown method {spec!r}; choose from {', '.join(METHODS)}")
    rows = {k: int(v) for k, v in (i.split("=") for i in filter(None, args.rows.split(",")))}
    print(header(argv), flush=True)
    results, started = {}, time.perf_counter()
    for name in args.datasets.split(","):
        data = load(name, rows.get(name), args.quick)
        for rate in (float(r) for r in args.rates.split(",")):
            cells = [run_cell(name, data, rate, s, args.methods, args.quick, args.drop_constant)
                     for s in args.seeds]
            results[(data.text, rate)] = cells
    print(f"\n# total {time.perf_counter() - started:.0f} s wall; protocol: fitted rows, MCAR "
          f"cells, seeds {args.seeds}; RMSE of z-scores (observed columns' mean/sd)\n")
    print("RMSE (column-standardised; best in bold)\n")
    print(table(results, args.methods, "rmse"))
    print("\nNLPD (z-scores; counts: of the count, nats per cell; — without a predictive "
          "variance)\n")
    print(table(results, args.methods, "nlpd"))
    print("\nFit + impute wall seconds\n")
    print(table(results, args.methods, "wall_s", 1).replace("**", ""))
    notes = [f"{text} {rate:.0%}: {cells[0]['constant_cols']} constant-in-observed columns "
             f"({'dropped from every input, ' if args.drop_constant else 'given to every method, '}"
             f"filled with their constant, not scored); {cells[0]['scored_cells']} cells scored"
             for (text, rate), cells in results.items()]
    print("\n" + "\n".join("# " + n for n in notes))
    if args.save:
        Path(args.save).write_text(json.dumps(
            [{"data": t, "rate": r, "cells": c} for (t, r), c in results.items()], indent=1))


if __name__ == "__main__":
    main()

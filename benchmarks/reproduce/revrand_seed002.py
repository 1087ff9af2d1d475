"""Seed 002 (the revrand technical report), §2.1 regression and §2.2 handwritten-digit
classification, through the results store (``_cells.py``): one JSON file per (metric, model,
split).

Run: ``.venv/bin/python benchmarks/reproduce/revrand_seed002.py [--splits 10]
[--revrand-splits K] [--tasks regression,classification] [--jobs 1] [--no-revrand]
[--smoke]``; then
``.venv/bin/python benchmarks/results_page.py`` rebuilds ``benchmarks/RESULTS.md``.  A stored
cell is not recomputed: re-running the command resumes it.

**Data and protocol** are those of ``benchmarks/revrand_models.py`` (its splits, models and
settings, imported from it), because the report's own sets are not here:

* regression: scikit-learn's diabetes data (442 x 10, y standardised), 10 random 70/30 splits.
  The report's §2.1 uses Boston housing, which scikit-learn removed in 1.2 and which is not in
  ``../shared/data``.  Scores (the report's): R² and the mean standardised log loss (MSLL,
  Rasmussen & Williams 2006 eq. 2.34): the held-out mean negative log predictive density minus
  that of a Gaussian with the training targets' mean and variance.
* classification: scikit-learn's 8 x 8 digits, 3 against 5 (binary, as our ``BayesianGLM`` with
  a Bernoulli likelihood is), 10 stratified 70/30 splits.  The report's §2.2 names no data set
  beyond "handwritten digits" and gives no spread.  Scores: log-loss and error in per cent.

Models: ours (``BayesianLinearRegression`` for the report's SLM, ``BayesianGLM`` for its GLM,
library defaults), scikit-learn's ``GaussianProcessRegressor`` / ``GaussianProcessClassifier``
/ ``LogisticRegression`` for the report's GP / GPC / Logistic rows, and revrand 1.0.0's
``StandardLinearModel`` / ``GeneralizedLinearModel`` (``RandomRBF``, 200 bases) from the peer
venv ``benchmarks/.venvs/revrand`` (made by ``revrand_models.py``), run in a subprocess on the
same split; each revrand cell's worker sees its split alone, so its random basis is drawn with
``random_state=0`` on every split (``revrand_models.py`` draws it with the split's index).

``--smoke`` runs our two models on split 0 cut to 80 training and 40 test rows, with 20
features and 20 optimiser steps, into ``--root`` (a temporary folder by default), for the
test; revrand and scikit-learn's GPs are left out.
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
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _cells import Cell, add_store_args, run_cells, store_root, write_row  # noqa: E402

PAPER = "002"
SCRIPT = "benchmarks/reproduce/revrand_seed002.py"
DATASETS = {"regression": "diabetes", "classification": "digits 3 vs 5"}
METRICS = {"regression": ("R2", "MSLL"), "classification": ("log-loss", "error %")}
TABLES = {"R2": "2.1-R2", "MSLL": "2.1-MSLL", "log-loss": "2.2-logloss", "error %": "2.2-error"}
# our model -> the report's row (Tables of §2.1 and §2.2)
OURS = {"regression": {"gplvm BayesianLinearRegression": "SLM",
                       "gplvm BayesianGLM (gaussian)": "GLM",
                       "sklearn GaussianProcessRegressor": "GP"},
        "classification": {"gplvm BayesianGLM (bernoulli)": "GLM",
                           "sklearn LogisticRegression (pixels)": "Logistic",
                           "sklearn GaussianProcessClassifier": "GPC"}}
REVRAND = {"regression": {"revrand StandardLinearModel": "SLM",
                          "revrand GeneralizedLinearModel (gaussian)": "GLM"},
           "classification": {"revrand GeneralizedLinearModel (bernoulli)": "GLM"}}
SMOKE_METHODS = ("gplvm BayesianLinearRegression", "gplvm BayesianGLM (gaussian)",
                 "gplvm BayesianGLM (bernoulli)")
# The report's figures, mean (sd) over its folds; classification has no spread.
PAPER_FIGURES = {"R2": {"SLM": (0.8524, 0.0885), "GLM": (0.8340, 0.0491), "GP": (0.9064, 0.0134)},
                 "MSLL": {"SLM": (-1.0492, 0.2400), "GLM": (-0.8763, 0.1242),
                          "GP": (-1.1821, 0.1633)},
                 "log-loss": {"GLM": (0.1138, None), "Logistic": (0.1734, None),
                              "GPC": (0.1405, None)},
                 "error %": {"GLM": (2.07, None), "Logistic": (3.62, None),
                             "GPC": (2.59, None)}}


# ------------------------------------------------------------------------------------ data


@functools.lru_cache(maxsize=None)
def task_data(task: str, split: int, smoke: bool = False):
    """(X_train, y_train, X_test, y_test) of ``revrand_models.py``'s split ``split``."""
    import revrand_models as rm
    X, y, splits = rm._tasks(split + 1)[task]
    train, test = splits[split]
    if smoke:
        train, test = train[:80], test[:40]
    return X[train], y[train], X[test], y[test]


def msll(y_test, nlpd: float, y_train) -> float:
    """MSLL: the mean NLPD minus that of N(mean(y_train), var(y_train)) (R&W eq. 2.34)."""
    from scipy.stats import norm
    trivial = -np.mean(norm.logpdf(y_test, y_train.mean(), y_train.std()))
    return float(nlpd - trivial)


def _scores(task: str, raw: dict, y_train, y_test) -> dict:
    if task == "regression":
        return {"R2": raw["r2"], "MSLL": msll(y_test, raw["nlpd"], y_train),
                "nlpd": raw["nlpd"]}
    return {"log-loss": raw["log_loss"], "error %": 100.0 * raw["error"]}


# --------------------------------------------------------------------------------- methods


@functools.lru_cache(maxsize=None)
def fit_ours(task: str, method: str, split: int, smoke: bool = False) -> dict:
    """Fit one of our (or scikit-learn's) models on the split; its scores and fit seconds."""
    import revrand_models as rm
    Xtr, ytr, Xte, yte = task_data(task, split, smoke)
    factories = rm._regressors(Xtr) if task == "regression" else rm._classifiers(Xtr)
    model = factories[method](split)
    if smoke:                       # the code path only: few features, few steps
        model.set_params(n_features=20, **({"n_iter": 20} if "GLM" in method else
                                          {"max_iter": 20, "n_restarts": 0}))
    start = time.perf_counter()
    model.fit(Xtr, ytr)
    fit_s = time.perf_counter() - start
    if task == "regression":
        raw = rm._regression_scores(yte, *model.predict(Xte, return_std=True))
    else:
        raw = rm._classification_scores(yte, model.predict_proba(Xte)[:, 1])
    return {**_scores(task, raw, ytr, yte), "fit_s": fit_s}


def revrand_python():
    """The revrand venv's interpreter when it exists and imports revrand, else None (this
    script never installs it: ``revrand_models.py`` does, on first use)."""
    import subprocess

    import revrand_models as rm
    python = rm.REVRAND_VENV / "bin" / "python"
    probe = "import numpy as np; np.asscalar = getattr(np, 'asscalar', None); import revrand"
    if python.exists() and subprocess.run([python, "-c", probe],
                                          capture_output=True).returncode == 0:
        return python
    return None


@functools.lru_cache(maxsize=None)
def fit_revrand(task: str, split: int) -> dict:
    """revrand 1.0.0's models of the task on one split (one worker process): name -> scores."""
    import revrand_models as rm
    python = revrand_python()
    if python is None:
        raise RuntimeError(f"no revrand venv at {rm.REVRAND_VENV}; run "
                           ".venv/bin/python benchmarks/revrand_models.py once to make it")
    Xtr, ytr, Xte, yte = task_data(task, split)
    X, y = np.vstack([Xtr, Xte]), np.concatenate([ytr, yte])
    idx = (np.arange(len(ytr)), np.arange(len(ytr), len(y)))
    rows, how = rm._run_revrand(python, task, X, y, [idx])
    if not rows:
        raise RuntimeError(f"revrand worker: {how}")
    out = {}
    for name, r in rows.items():
        raw = {k: r[k] for k in ("r2", "nlpd", "error", "log_loss") if k in r}
        out[name] = {**_scores(task, raw, ytr, yte), "fit_s": r["first_s"]}
    return out


def compute(cell: Cell):
    """One cell: the metric of the table, for the method on the split ``cell.seed``."""
    task = cell.config["task"]
    metric = next(m for m, t in TABLES.items() if t == cell.table)
    if cell.method in REVRAND[task]:
        scores = fit_revrand(task, cell.seed)[cell.method]
    else:
        scores = fit_ours(task, cell.method, cell.seed, bool(cell.config.get("smoke")))
    return scores[metric], {**scores, "n_train": len(task_data(task, cell.seed,
                                                                bool(cell.config.get("smoke")))[1])}


def make_cells(tasks, splits, revrand_splits: int, smoke: bool = False):
    cells = []
    for task in tasks:
        config = {"task": task, **({"smoke": True} if smoke else {})}
        # split-major order: a split's models share one process's cached fits and data
        for split in range(splits):
            methods = list(OURS[task]) + (list(REVRAND[task]) if split < revrand_splits else [])
            if smoke:
                methods = [m for m in methods if m in SMOKE_METHODS]
            for method in methods:
                for metric in METRICS[task]:
                    cells.append(Cell(PAPER, TABLES[metric], DATASETS[task], method, split,
                                      config))
    return cells


# ------------------------------------------------------------------------------------ rows


def write_rows(root: Path, revrand_reason: str | None) -> None:
    """The page's rows: the report's figure (classification), commands, notes, reasons."""
    notes = {"regression": "stand-in for the report's Boston housing (removed from scikit-learn "
                           "1.2, not in ../shared/data): diabetes, y standardised, random 70/30 "
                           "splits (revrand_models.py's; --splits 10 for its ten); the report's "
                           "Boston figures (R² SLM 0.8524 (0.0885), GLM 0.8340 (0.0491), GP "
                           "0.9064 (0.0134); MSLL -1.0492, -0.8763, -1.1821) are not comparable "
                           "with diabetes and are left out of the paper column.",
             "classification": "digits 3 vs 5 of scikit-learn's 8 x 8 digits, stratified 70/30 "
                               "splits (revrand_models.py's); the report names only "
                               "'handwritten digits' (its task and data set are not stated), "
                               "so its figures, which have no spread, are shown for "
                               "orientation only."}
    notes = {k: v + "  revrand 1.0.0's GLM fits take minutes each here (SGD): "
                    "--revrand-splits K runs revrand on the first K splits alone."
             for k, v in notes.items()}
    for task in DATASETS:
        command = f".venv/bin/python {SCRIPT} --tasks {task}"
        for metric in METRICS[task]:
            for method, row in {**OURS[task], **REVRAND[task]}.items():
                fig = PAPER_FIGURES[metric].get(row) if task == "classification" else None
                reason = revrand_reason if method in REVRAND[task] else None
                write_row(PAPER, TABLES[metric], DATASETS[task], method,
                          paper_figure=None if fig is None else
                          {"mean": fig[0], "sd": fig[1], "spread": "sd"},
                          command=command, reason=reason, note=notes[task],
                          metric=f"{metric} (the report's {row} row)", root=root)


# ------------------------------------------------------------------------------------ main


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--splits", type=int, default=10)
    p.add_argument("--tasks", default="regression,classification")
    add_store_args(p)
    p.add_argument("--revrand-splits", type=int, default=None,
                   help="revrand on the first K splits only (default all; its GLM fits take "
                        "minutes each)")
    p.add_argument("--no-revrand", action="store_true", help="leave revrand 1.0.0 out")
    args = p.parse_args(argv)
    tasks = args.tasks.split(",")
    for t in tasks:
        if t not in DATASETS:
            raise ValueError(f"--tasks: unknown {t!r}; choose from {tuple(DATASETS)}")
    if args.smoke:
        root = store_root(args, "seed002-smoke-")
        splits, revrand = 1, False
    else:
        root = store_root(args)
        splits = args.splits
        present = revrand_python() is not None
        revrand = present and not args.no_revrand
        write_rows(root, None if present else "revrand 1.0.0's venv (benchmarks/.venvs/revrand) "
                   "is absent: run .venv/bin/python benchmarks/revrand_models.py once to make "
                   "it, then this command")
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')} "
          f"XLA_FLAGS={os.environ.get('XLA_FLAGS')} cores={len(os.sched_getaffinity(0))} "
          f"load={os.getloadavg()} revrand={'yes' if revrand else 'no'} root={root}", flush=True)
    revrand_splits = 0 if not revrand else \
        splits if args.revrand_splits is None else args.revrand_splits
    cells = make_cells(tasks, splits, revrand_splits, smoke=args.smoke)
    return run_cells(compute, cells, jobs=args.jobs, root=root,
                     log=lambda line: print(line, flush=True))


if __name__ == "__main__":
    main()

"""The data and the checks of ``scripts/new_user_trial.sh`` (issue 15, acceptance 1;
issue 32, acceptance 1 and 3).

``python scripts/new_user_trial.py make-data DIR`` writes, from the real datasets read by
:mod:`gplvm.data` (``$GPLVM_DATA_DIR``):

* ``oil.csv`` — oil flow (Bishop & James 1993), 150 samples x 12 beams: a header, an index
  column of sample ids, a ``regime`` label column and 10% empty cells;
* ``counts.npy`` — 80 rows x 15 Poisson counts from the S-curve generator, each row thinned to
  a library size between 1/4 and all of its counts, 5% missing;
* ``mesc.h5ad`` — the mouse-embryo qPCR data (Guo et al. 2010, 429 cells x 48 genes) as an
  AnnData file, the cell stage in ``obs["stage"]``;

and, in the same formats, ``*_new.*`` files of other rows with 10% empty cells, for
``gplvm transform`` / ``gplvm impute`` on the saved models.  ``arrays.npz`` keeps every matrix
as written, so the checks compare with the Python API without gplvm's readers.

``python scripts/new_user_trial.py check WORK`` checks each ``gplvm fit`` folder under WORK: every
output of ``gplvm fit`` is there (``imputed.csv`` and ``imputation.png`` exactly when the data
had missing entries), ``embedding.csv`` and ``imputed.csv`` are the saved model's
``X_mean_``/``X_var_`` and ``impute``, and the CSVs of ``gplvm transform`` / ``gplvm impute``
on the new rows equal ``model.transform(Y, return_var=True)`` / ``model.impute(Y)`` (with
library-size offsets ``log(s_n / s̄)``, s̄ the mean row total of the fit's rows, for the count
model).  It prints the largest absolute difference of each and exits 1 unless all are 0.

``make-issue32-data DIR`` and ``check-issue32 WORK`` replay issue 32's steps as a new user met
them (digits and wine from scikit-learn): (1) ``gplvm fit digits.csv`` with the default model
succeeds and names the constant pixel columns it keeps out; (2) ``gplvm fit wine.csv
--components 20`` on 13 columns fails at once, exit 2, naming both numbers; (3) ``--labels
Cultivar`` for a column ``cultivar`` lists the columns and suggests ``cultivar``; (4) the
digits through ``BayesianGPLVM`` in Python with no columns dropped by hand; (5) ``gplvm
--version`` under 1 s wall (median of 5 fresh processes, printed); (6) ``embedding.csv`` read
with ``float()`` is ``X_mean_``/``X_var_`` bit for bit.  Exit status 1 unless all hold.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np

#: fit folder -> (data name, file suffix, fitted with library-size offsets)
CASES = {"oil-bgplvm": ("oil", ".csv", False),
         "counts-rflvm": ("counts", ".npy", True),
         "mesc-bgplvm": ("mesc", ".h5ad", False)}
PLOTS = ("latent.png", "relevance.png", "trace.png")


def _holes(Y, fraction, seed):
    """A copy of Y with ``fraction`` of its cells missing (NaN)."""
    rng = np.random.default_rng(seed)
    Y = np.array(Y, dtype=float)
    Y[rng.random(Y.shape) < fraction] = np.nan
    return Y


def _write_table(path, ids, columns, Y, labels):
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(["sample", *columns, "regime"])
        for row_id, row, label in zip(ids, Y, labels):
            writer.writerow([row_id, *("" if np.isnan(v) else repr(float(v)) for v in row),
                             label])


def _write_h5ad(path, Y, stages, genes, first_id):
    import anndata
    import pandas as pd

    obs = pd.DataFrame({"stage": pd.Categorical(stages)},
                       index=[f"cell{first_id + i:03d}" for i in range(len(Y))])
    anndata.AnnData(Y, obs=obs, var=pd.DataFrame(index=list(genes))).write_h5ad(path)


def make_data(folder: Path) -> None:
    from gplvm.data import load_mesc, load_oil_flow, make_s_curve

    folder.mkdir(parents=True, exist_ok=True)
    arrays = {}
    oil = load_oil_flow()
    names = np.asarray(oil.label_names)
    beams = [f"beam{j + 1}" for j in range(oil.Y.shape[1])]
    for name, rows, seed in (("oil", slice(0, 150), 0), ("oil_new", slice(150, 170), 1)):
        arrays[name] = _holes(oil.Y[rows], 0.10, seed)
        _write_table(folder / f"{name}.csv", [f"s{i:04d}" for i in range(1000)][rows], beams,
                     arrays[name], names[oil.labels[rows]])
    curve = make_s_curve("poisson", n_samples=100, n_outputs=15, random_state=0)
    rng = np.random.default_rng(2)
    keep = rng.uniform(0.25, 1.0, size=(100, 1))               # library sizes varying 4x
    counts = rng.binomial(curve.Y.astype(np.int64), keep).astype(float)
    counts = counts[counts.sum(axis=1) > 0]                     # a library size needs a count
    arrays["counts"] = _holes(counts[:80], 0.05, 5)
    arrays["counts_new"] = _holes(counts[80:], 0.10, 6)
    for name in ("counts", "counts_new"):
        np.save(folder / f"{name}.npy", arrays[name])
    mesc = load_mesc()
    stages = np.asarray(mesc.label_names)[mesc.labels]
    arrays["mesc"] = mesc.Y[:400]
    arrays["mesc_new"] = _holes(mesc.Y[400:], 0.10, 7)
    _write_h5ad(folder / "mesc.h5ad", arrays["mesc"], stages[:400], mesc.feature_names, 0)
    _write_h5ad(folder / "mesc_new.h5ad", arrays["mesc_new"], stages[400:],
                mesc.feature_names, 400)
    np.savez(folder / "arrays.npz", **arrays)
    ids = {"oil": [f"s{i:04d}" for i in range(150)],
           "oil_new": [f"s{i:04d}" for i in range(150, 170)],
           "counts": [str(i) for i in range(80)],
           "counts_new": [str(i) for i in range(len(arrays["counts_new"]))],
           "mesc": [f"cell{i:03d}" for i in range(400)],
           "mesc_new": [f"cell{i:03d}" for i in range(400, 429)]}
    (folder / "ids.json").write_text(json.dumps(ids))
    for name, Y in arrays.items():
        print(f"  {name}: {Y.shape[0]} x {Y.shape[1]}, {np.isnan(Y).mean():.1%} missing")


def _read_csv(path):
    """(header, row ids, values) of a CSV written by the command line."""
    with open(path, newline="") as stream:
        rows = list(csv.reader(stream))
    return rows[0], [r[0] for r in rows[1:]], np.array([[float(v) for v in r[1:]]
                                                        for r in rows[1:]])


class Checks:
    """Each check prints one line; ``failed`` lists those that did not hold."""

    def __init__(self):
        self.failed = []

    def true(self, what: str, ok: bool, detail: str = "") -> None:
        print(f"    {'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}")
        if not ok:
            self.failed.append(what)

    def equal(self, what: str, cli, api) -> None:
        """CLI numbers against the API's: same shape, NaN in the same places, max |difference|
        exactly 0."""
        cli, api = np.asarray(cli, dtype=float), np.asarray(api, dtype=float)
        if cli.shape != api.shape:
            self.true(what, False, f"shape {cli.shape} != {api.shape}")
            return
        same_nan = np.array_equal(np.isnan(cli), np.isnan(api))
        diff = float(np.max(np.abs(np.nan_to_num(cli) - np.nan_to_num(api)), initial=0.0))
        self.true(what, same_nan and diff == 0.0, f"max abs difference {diff:.3g}")


def check(work: Path) -> int:
    import gplvm

    arrays = np.load(work / "data" / "arrays.npz")
    ids = json.loads((work / "data" / "ids.json").read_text())
    checks = Checks()
    for folder, (name, suffix, libsize) in CASES.items():
        out = work / folder
        Y, Y_new = arrays[name], arrays[f"{name}_new"]
        print(f"{folder}/ (gplvm fit data/{name}{suffix}):")
        summary = json.loads((out / "summary.json").read_text())
        missing = bool(np.isnan(Y).any())
        expected = {"embedding.csv", "model.npz", "summary.json", *PLOTS,
                    *(("imputed.csv", "imputation.png") if missing else ())}
        written = {p.name for p in out.iterdir()} - {"new_embedding.csv", "new_imputed.csv"}
        checks.true("every output of gplvm fit, no other", written == expected ==
                    set(summary["outputs"]), ", ".join(sorted(written)))
        objective = ("bound", summary.get("bound")) if "bound" in summary else (
            "mean log-likelihood", summary.get("log_likelihood"))
        print(f"    summary: {summary['class']}, {summary['data']['n_rows']} x "
              f"{summary['data']['n_columns']}, {summary['data']['missing_fraction']:.1%} "
              f"missing, {objective[0]} {objective[1]:.6g}, {summary['n_iter']} iterations, "
              f"converged {summary['converged']}"
              f"{', R-hat %.3f' % summary['rhat'] if summary.get('rhat') else ''}, "
              f"{summary['wall_time_s']:.1f} s, offset {summary.get('offset')}")
        model = gplvm.load(out / "model.npz")
        fit_kw, new_kw = {}, {}
        if libsize:                      # log(s_n / s̄), s̄ the mean total of the fit's rows
            mean_total = np.nansum(Y, axis=1).mean()
            fit_kw = {"offset": np.log(np.nansum(Y, axis=1) / mean_total)}
            new_kw = {"offset": np.log(np.nansum(Y_new, axis=1) / mean_total)}
        spread = np.sqrt if getattr(model, "X_samples_", None) is not None else np.asarray
        _, row_ids, embedding = _read_csv(out / "embedding.csv")
        checks.true("embedding.csv keeps the row ids", row_ids == ids[name])
        checks.equal("embedding.csv = model.X_mean_, X_var_ (or sd)", embedding,
                     np.column_stack([model.X_mean_, spread(model.X_var_)]))
        if missing:
            checks.equal("imputed.csv = model.impute(Y)", _read_csv(out / "imputed.csv")[2],
                         model.impute(Y, **fit_kw))
        mean, var = model.transform(Y_new, return_var=True, **new_kw)
        _, row_ids, transformed = _read_csv(out / "new_embedding.csv")
        checks.true("gplvm transform keeps the row ids", row_ids == ids[f"{name}_new"])
        checks.equal("gplvm transform = model.transform(Y_new, return_var=True)", transformed,
                     np.column_stack([mean, spread(var)]))
        checks.equal("gplvm impute = model.impute(Y_new)",
                     _read_csv(out / "new_imputed.csv")[2], model.impute(Y_new, **new_kw))
    print("\nall checks passed" if not checks.failed else
          f"\nFAILED: {'; '.join(checks.failed)}")
    return 1 if checks.failed else 0


# ------------------------------------------------------------------ issue 32, as a new user met it

#: digits rows fitted (their constant pixel columns are kept out of the fit), and iterations
DIGITS_ROWS, FIT_FLAGS = 200, ("--inducing", "15", "--iterations", "30")


def make_issue32_data(folder: Path) -> None:
    """``digits.csv`` (the first 200 of scikit-learn's 8 x 8 digits as 64 pixel columns
    ``px0`` ... ``px63``, several of them constant), ``wine.csv`` (scikit-learn's wine, 13
    columns, 5% empty cells) and ``wine_cultivar.csv`` (the same with a ``cultivar`` column)."""
    from sklearn.datasets import load_digits, load_wine

    folder.mkdir(parents=True, exist_ok=True)
    digits = load_digits().data[:DIGITS_ROWS]
    _write_plain(folder / "digits.csv", [f"px{j}" for j in range(digits.shape[1])], digits)
    wine = load_wine()
    Y = _holes(wine.data, 0.05, 8)
    names = list(wine.feature_names)
    _write_plain(folder / "wine.csv", names, Y)
    _write_plain(folder / "wine_cultivar.csv", [*names, "cultivar"], Y,
                 np.asarray(wine.target_names)[wine.target])
    np.savez(folder / "issue32.npz", digits=digits, wine=Y)
    print(f"  digits: {digits.shape[0]} x {digits.shape[1]}, constant columns "
          f"{np.flatnonzero(np.ptp(digits, axis=0) == 0).tolist()}; wine: {Y.shape[0]} x "
          f"{Y.shape[1]}, {np.isnan(Y).mean():.1%} missing")


def _write_plain(path, columns, Y, labels=None):
    """A CSV with a header and no index column; empty cells for NaN; ``labels`` as a last
    column."""
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(columns)
        for i, row in enumerate(Y):
            writer.writerow([*("" if np.isnan(v) else repr(float(v)) for v in row),
                             *(() if labels is None else (labels[i],))])


def _gplvm(*arguments, cwd):
    """``gplvm ARGUMENTS`` in a fresh process, as typed: (exit status, stderr, wall seconds)."""
    import shutil
    import subprocess
    import time

    print(f"  $ gplvm {' '.join(arguments)}")
    start = time.perf_counter()
    done = subprocess.run([shutil.which("gplvm") or "gplvm", *arguments], cwd=cwd,
                          capture_output=True, text=True)
    return done.returncode, done.stderr, time.perf_counter() - start


def _lines(text: str, *needles: str) -> str:
    """The lines of ``text`` holding any of ``needles`` (a progress bar's carriage returns
    split lines too), indented, for the log."""
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines()]
    return "\n".join(f"      | {line}" for line in lines if any(n in line for n in needles))


def check_issue32(work: Path) -> int:
    """Replay issue 32's steps in ``work`` (data from ``make-issue32-data`` in work/data);
    each prints its checks; the exit status is 0 only when every check holds."""
    checks = Checks()
    arrays = np.load(work / "data" / "issue32.npz")
    steps = (_constant_columns, _too_many_components, _labels_typo, _digits_in_python,
             _version_time, _csv_round_trip)
    for number, step in enumerate(steps, 1):
        print(f"({number}) {step.__doc__.splitlines()[0]}")
        step(work, arrays, checks)
    print("\nall issue 32 checks passed" if not checks.failed else
          f"\nFAILED: {'; '.join(checks.failed)}")
    return 1 if checks.failed else 0


def _constant_columns(work, arrays, checks):
    """Constant columns: digits as a CSV through gplvm fit with the default model."""
    digits = arrays["digits"]
    constant = [f"px{j}" for j in np.flatnonzero(np.ptp(digits, axis=0) == 0)]
    status, err, seconds = _gplvm("fit", "data/digits.csv", *FIT_FLAGS, "--out",
                                  "digits-bgplvm", cwd=work)
    print(_lines(err, "DroppedColumnsWarning", "kept out", "error"))
    checks.true("gplvm fit digits.csv succeeds", status == 0, f"exit {status}, {seconds:.0f} s")
    if status != 0:
        return
    summary = json.loads((work / "digits-bgplvm" / "summary.json").read_text())
    checks.true("the warning line names the constant columns' indices",
                "DroppedColumnsWarning" in err and
                f"{len(constant)} constant (columns " in err)
    checks.true("the fit says which columns were kept out, by name",
                f"kept out of the fit: {len(constant)} constant or empty column(s) "
                f"({', '.join(constant[:10])}" in err)
    checks.true("summary.json lists them", summary.get("dropped_columns") == constant,
                ", ".join(map(str, summary.get("dropped_columns", []))))
    checks.true("Q is 'auto': min(10, columns fitted, rows - 1), the dimensions kept listed",
                summary["params"]["n_components"] == "auto" and summary["n_components"] == 10
                and 0 < len(summary.get("active_components", [])) <= 10,
                f"Q = {summary['n_components']}, kept {summary.get('active_components')}")
    embedding = _read_csv(work / "digits-bgplvm" / "embedding.csv")[2]
    checks.true("embedding.csv has a row per image", len(embedding) == len(digits))


def _too_many_components(work, arrays, checks):
    """Too many components: gplvm fit wine.csv --components 20 on 13 columns."""
    status, err, seconds = _gplvm("fit", "data/wine.csv", "--components", "20", "--quiet",
                                  cwd=work)
    print(_lines(err, "error"))
    checks.true("exit status 2", status == 2, f"exit {status}")
    checks.true("the message names 13 and 20", "n_components=20" in err and "13 column" in err)
    checks.true("it fails fast (before any fit)", seconds < 30.0, f"{seconds:.1f} s wall")
    checks.true("no output folder", not (work / "wine-bgplvm").exists())


def _labels_typo(work, arrays, checks):
    """A labels typo: --labels Cultivar on a file whose column is cultivar."""
    status, err, _ = _gplvm("fit", "data/wine_cultivar.csv", "--labels", "Cultivar", "--quiet",
                            cwd=work)
    print(_lines(err, "error"))
    checks.true("exit status 2, one line", status == 2 and len(err.splitlines()) == 1,
                f"exit {status}")
    checks.true("it says there is no column 'Cultivar'", "no column 'Cultivar'" in err)
    checks.true("it suggests 'cultivar'", "did you mean 'cultivar'?" in err)
    checks.true("it lists the columns", "its columns are: alcohol, malic_acid" in err)


def _digits_in_python(work, arrays, checks):
    """Digits through BayesianGPLVM in Python, no columns dropped by hand."""
    import warnings

    from gplvm import BayesianGPLVM

    digits = arrays["digits"]
    constant = np.flatnonzero(np.ptp(digits, axis=0) == 0)
    print("  >>> BayesianGPLVM(n_components='auto', n_inducing=15, max_iter=30).fit(digits)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = BayesianGPLVM(n_components="auto", n_inducing=15, max_iter=30,
                                  progress=False).fit(digits)
        except ValueError as err:
            checks.true("BayesianGPLVM fits the digits as they are", False, str(err))
            return
    notices = [str(w.message) for w in caught
               if w.category.__name__ == "DroppedColumnsWarning"]     # not public by name
    for notice in notices:
        print(f"      | {notice}")
    checks.true("BayesianGPLVM fits the digits as they are", True)
    checks.true("one DroppedColumnsWarning", len(notices) == 1)
    checks.true("dropped_columns_ are the constant pixels",
                model.dropped_columns_.tolist() == constant.tolist(),
                str(model.dropped_columns_.tolist()))
    holes = digits[:5].copy()
    holes[:, constant] = np.nan
    imputed = model.impute(holes)
    checks.true("impute puts their constant back exactly",
                np.array_equal(imputed[:, constant], digits[:5, constant]))
    checks.true("finite latents and relevance", bool(np.isfinite(model.X_mean_).all()
                                                     and np.isfinite(model.relevance_).all()),
                f"Q = {model.n_components_}, ARD keeps {model.active_components_.tolist()}")


def _version_time(work, arrays, checks):
    """Start-up: gplvm --version under 1 s wall (median of 5 fresh processes)."""
    times = []
    for _ in range(5):
        status, _, seconds = _gplvm("--version", cwd=work)
        times.append(seconds)
    median = float(np.median(times))
    checks.true("gplvm --version < 1 s wall", status == 0 and median < 1.0,
                f"median {median:.3f} s of {', '.join(f'{t:.3f}' for t in times)}")


def _csv_round_trip(work, arrays, checks):
    """The CSV round trip: embedding.csv through float() is X_mean_ bit for bit."""
    import gplvm

    folder = work / "digits-bgplvm"
    if not (folder / "model.npz").exists():
        checks.true("the digits fit of step 1 is there", False)
        return
    model = gplvm.load(folder / "model.npz")
    header, _, values = _read_csv(folder / "embedding.csv")
    Q = model.X_mean_.shape[1]
    same = values.shape == (len(model.X_mean_), 2 * Q) and np.array_equal(
        values.view(np.int64), np.column_stack([model.X_mean_, model.X_var_]).view(np.int64))
    checks.true("x and var columns read with float() equal X_mean_, X_var_ bit for bit", same,
                f"{values.size} numbers")


if __name__ == "__main__":
    COMMANDS = {"make-data": make_data, "check": check, "make-issue32-data": make_issue32_data,
                "check-issue32": check_issue32}
    if len(sys.argv) != 3 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: python scripts/new_user_trial.py {' | '.join(COMMANDS)} DIR")
    sys.exit(COMMANDS[sys.argv[1]](Path(sys.argv[2])))

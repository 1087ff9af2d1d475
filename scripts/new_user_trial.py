"""The data and the checks of ``scripts/new_user_trial.sh`` (issue 15, acceptance 1).

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


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make-data", "check"):
        sys.exit("usage: python scripts/new_user_trial.py make-data DIR | check WORK")
    if sys.argv[1] == "make-data":
        make_data(Path(sys.argv[2]))
    else:
        sys.exit(check(Path(sys.argv[2])))

"""The command line (issue 15, item 1), called in process (``main(argv)``) except for one run
through the installed ``gplvm`` entry point.  One tiny Bayesian GPLVM is fitted by ``gplvm fit``
on a CSV with a header, an index column, a label column and empty cells; every output is then
checked against the saved model's own attributes and verbs (the Python API), and every
malformed input against its exit status, its single stderr line and the absence of an output
folder."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

from _paths import LEGACY

import jax
import numpy as np
import pytest

import gplvm
from gplvm import plot
from gplvm.cli import _parser, main

N, D = 30, 5
COLUMNS = [f"g{j}" for j in range(D)]
IDS = [f"cell{i:02d}" for i in range(N)]


def _data():
    rng = np.random.default_rng(0)
    t = np.linspace(-2, 2, N)
    Y = np.column_stack([np.sin(t), np.cos(t), t, t**2 / 2, np.sin(2 * t)])
    Y = Y + 0.05 * rng.normal(size=Y.shape)
    Y[rng.random(Y.shape) < 0.1] = np.nan
    return Y, np.where(t > 0, "late", "early")


def _write_csv(path, Y, ids=IDS, columns=COLUMNS, stage=None):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["cell", *columns, *(["stage"] if stage is not None else [])])
        for i, row in enumerate(Y):
            cells = ["" if np.isnan(v) else repr(float(v)) for v in row]
            w.writerow([ids[i], *cells, *([stage[i]] if stage is not None else [])])


def _read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], [r[0] for r in rows[1:]], np.array([[float(v) for v in r[1:]]
                                                        for r in rows[1:]])


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    Y, stage = _data()
    _write_csv(root / "cells.csv", Y, stage=stage)
    argv = ["fit", str(root / "cells.csv"), "--out", str(root / "run"), "--labels", "stage",
            "--components", "2", "--inducing", "8", "--iterations", "20", "--quiet"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")               # 20 iterations do not converge
        assert main(argv) == 0
    return {"root": root, "out": root / "run", "Y": Y, "stage": stage, "argv": argv,
            "model": gplvm.load(root / "run" / "model.npz")}


def test_fit_writes_every_output_and_nothing_else(fitted):
    out = fitted["out"]
    summary = json.loads((out / "summary.json").read_text())
    expected = {"embedding.csv", "model.npz", "summary.json", "imputed.csv", "latent.png",
                "relevance.png", "trace.png", "imputation.png"}
    assert set(os.listdir(out)) == expected == set(summary["outputs"])
    assert sorted(os.listdir(fitted["root"])) == ["cells.csv", "run"]      # no temp folder


def test_embedding_keeps_row_ids_and_the_models_latents(fitted):
    header, ids, values = _read_csv(fitted["out"] / "embedding.csv")
    model = fitted["model"]
    assert header == ["id", "x0", "x1", "var0", "var1"] and ids == IDS
    np.testing.assert_array_equal(values, np.column_stack([model.X_mean_, model.X_var_]))


def test_summary_is_the_models_attributes_and_the_data(fitted):
    summary = json.loads((fitted["out"] / "summary.json").read_text())
    model, Y = fitted["model"], fitted["Y"]
    assert summary["class"] == "gplvm.BayesianGPLVM" and summary["model"] == "bgplvm"
    assert summary["bound"] == model.elbo_
    assert summary["n_iter"] == model.n_iter_ == 20
    assert summary["converged"] == model.converged_
    warned = any(w.startswith("ConvergenceWarning: ") for w in summary["warnings"])
    assert warned == (not model.converged_)
    assert summary["relevance"] == model.relevance_.tolist()
    assert summary["params"]["n_inducing"] == 8 and summary["params"]["max_iter"] == 20
    assert summary["data"]["n_rows"] == N and summary["data"]["n_columns"] == D
    assert summary["data"]["columns"] == COLUMNS
    assert summary["data"]["missing_fraction"] == np.isnan(Y).sum() / Y.size
    assert summary["command"] == "gplvm " + " ".join(fitted["argv"])
    assert summary["versions"]["jax"] == jax.__version__
    assert summary["versions"]["gplvm"] == gplvm.__version__
    assert summary["wall_time_s"] > 0


def test_imputed_csv_is_model_impute(fitted):
    header, ids, values = _read_csv(fitted["out"] / "imputed.csv")
    assert header == ["id", *COLUMNS] and ids == IDS
    np.testing.assert_array_equal(values, fitted["model"].impute(fitted["Y"]))
    observed = ~np.isnan(fitted["Y"])
    np.testing.assert_array_equal(values[observed], fitted["Y"][observed])


def test_latent_plot_of_the_fit_has_every_row_and_each_stage(fitted):
    ax = plot.latent(fitted["model"], labels=fitted["stage"])
    means = [c for c in ax.collections if c.get_gid() == "means"]
    assert sum(len(c.get_offsets()) for c in means) == N
    # one entry per stage, then (issue 32) the line saying what the ellipses are
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == ["early", "late"]


def test_transform_and_impute_verbs_reproduce_the_python_api(fitted, capsys):
    root, model = fitted["root"], fitted["model"]
    Y3 = fitted["Y"][:3].copy()
    Y3[0, 1] = np.nan
    _write_csv(root / "new.csv", Y3)
    order = [4, 2, 0, 1, 3]                              # same columns, another order
    _write_csv(root / "shuffled.csv", Y3[:, order], columns=[COLUMNS[j] for j in order])
    model_path = str(fitted["out"] / "model.npz")
    X_mean, X_var = model.transform(Y3, return_var=True)
    for name in ("new.csv", "shuffled.csv"):
        assert main(["transform", model_path, str(root / name), "--out",
                     str(root / f"t-{name}")]) == 0
        header, ids, values = _read_csv(root / f"t-{name}")
        assert header == ["id", "x0", "x1", "var0", "var1"] and ids == IDS[:3]
        np.testing.assert_array_equal(values, np.column_stack([X_mean, X_var]))
    assert main(["impute", model_path, str(root / "new.csv")]) == 0
    rows = list(csv.reader(capsys.readouterr().out.splitlines()))
    assert rows[0] == ["id", *COLUMNS]
    np.testing.assert_array_equal(np.array(rows[1:])[:, 1:].astype(float), model.impute(Y3))


def test_sample_and_info_verbs(fitted, capsys):
    model, model_path = fitted["model"], str(fitted["out"] / "model.npz")
    assert main(["sample", model_path, "-n", "4", "--seed", "1"]) == 0
    header, ids, values = _read_csv_text(capsys.readouterr().out)
    Y, X = model.sample(4, random_state=1)
    assert header == ["draw", *COLUMNS, "x0", "x1"] and ids == ["0", "1", "2", "3"]
    np.testing.assert_array_equal(values, np.column_stack([Y, X]))
    assert main(["info", model_path]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["class"] == "gplvm.BayesianGPLVM" and info["bound"] == model.elbo_
    assert info["n_iter"] == model.n_iter_ and info["n_features_in"] == D


def _read_csv_text(text):
    rows = list(csv.reader(text.splitlines()))
    return rows[0], [r[0] for r in rows[1:]], np.array(rows[1:])[:, 1:].astype(float)


BAD_FILES = {
    "ragged.tsv": ("1\t2\n3\n", "ragged.tsv: line 2 has 1 cells but line 1 has 2; every row "
                                  "needs the same number of cells (a ragged table)"),
    "words.csv": ("a,b\n1,2\n3,abc\n", "words.csv: line 3, column 'b' has the non-numeric "
                                       "cell 'abc'"),
    "empty.csv": ("", "empty.csv is empty"),
    "table.xlsx": ("1,2\n3,4\n", "table.xlsx: unknown extension '.xlsx'"),
}


def _one_error_line(capsys, verb):
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"gplvm {verb}: error: ")
    return err


#: Runs the installed ``gplvm`` script (argv[1]) as ``__main__`` once per case of the JSON
#: {name: arguments} in argv[2], in this one process so that the imports are paid once: prints
#: {name: [exit status, stderr]} of every case but the last as one JSON line, then runs the last
#: case uncaught, so that the process ends with that case's own exit status and stderr.
RUN_EACH = r"""
import json, os, runpy, sys, tempfile
script, cases = sys.argv[1], list(json.loads(sys.argv[2]).items())

def run(arguments):
    sys.argv = [script, *arguments]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        return stop.code
    return 0

results = {}
for name, arguments in cases[:-1]:
    with tempfile.TemporaryFile("w+") as err:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(err.fileno(), 2)              # all of fd 2, also what C libraries write
        try:
            status = run(arguments)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        results[name] = [status, err.read()]
print(json.dumps(results), flush=True)
sys.exit(run(cases[-1][1]))
"""


def test_malformed_files_through_the_installed_entry_point(fitted, tmp_path):
    """Every malformed case run by the installed ``gplvm`` script in a subprocess (one process
    for all, :data:`RUN_EACH`; the last case's status is the process's own): status 2, nothing
    on stdout, one stderr line naming the file and the problem, no output folder."""
    script = str(Path(sys.executable).with_name("gplvm"))
    for name, (text, _) in BAD_FILES.items():
        (tmp_path / name).write_text(text)
    _write_csv(tmp_path / "other.csv", fitted["Y"][:2, :4], columns=COLUMNS[:4])
    commands = {"other.csv": ["transform", str(fitted["out"] / "model.npz"), "other.csv"],
                **{name: ["fit", name, "--quiet"] for name in BAD_FILES}}
    expected = {"other.csv": "other.csv: its columns differ from the model's (missing: g4",
                **{name: needle for name, (_, needle) in BAD_FILES.items()}}
    before = sorted(os.listdir(tmp_path))
    run = subprocess.run([sys.executable, "-c", RUN_EACH, script, json.dumps(commands)],
                         capture_output=True, text=True, cwd=tmp_path)
    results = json.loads(run.stdout)          # one JSON line: nothing else reached stdout
    results["table.xlsx"] = [run.returncode, run.stderr]              # the last case
    assert list(results) == list(commands)
    for name, (status, err) in results.items():
        assert status == 2 and len(err.splitlines()) == 1, (name, status, err)
        assert err.startswith(f"gplvm {commands[name][0]}: error: ") and expected[name] in err
    assert sorted(os.listdir(tmp_path)) == before                     # no folder left


def test_wrong_columns_for_a_saved_model(fitted, tmp_path, capsys):
    model_path = str(fitted["out"] / "model.npz")
    _write_csv(tmp_path / "other.csv", fitted["Y"][:2, :4], columns=COLUMNS[:4])
    assert main(["transform", model_path, str(tmp_path / "other.csv")]) == 2
    assert "missing: g4" in _one_error_line(capsys, "transform")
    np.save(tmp_path / "narrow.npy", np.ones((2, 3)))
    assert main(["impute", model_path, str(tmp_path / "narrow.npy")]) == 2
    assert "has 3 columns but the model was fitted on 5" in _one_error_line(capsys, "impute")
    assert main(["info", str(tmp_path / "narrow.npy")]) == 2
    assert "not a gplvm model file" in _one_error_line(capsys, "info")


def test_model_errors_leave_no_folder(tmp_path, capsys):
    np.save(tmp_path / "negative.npy", -np.ones((6, 3)))
    out = str(tmp_path / "out")
    assert main(["fit", str(tmp_path / "negative.npy"), "--model", "rflvm", "--likelihood",
                 "poisson", "--out", out, "--quiet"]) == 2
    assert "negative" in _one_error_line(capsys, "fit").lower()
    assert main(["fit", str(tmp_path / "negative.npy"), "--features", "10", "--out", out,
                 "--quiet"]) == 2
    assert "--features is not a setting of bgplvm" in _one_error_line(capsys, "fit")
    assert os.listdir(tmp_path) == ["negative.npy"]


def test_offset_and_trials_reach_fit_where_it_takes_them(tmp_path, capsys, monkeypatch):
    counts = np.array([[1.0, 3.0], [0.0, 2.0], [5.0, 5.0], [np.nan, 4.0]])
    np.save(tmp_path / "counts.npy", counts)
    seen = {}

    def fake_fit(self, Y, y=None, *, times=None, offset=None, n_trials=None):  # RFLVM.fit's
        seen.update(offset=offset, n_trials=n_trials)
        raise ValueError("stopped by the test")

    monkeypatch.setattr(gplvm.RFLVM, "fit", fake_fit)
    argv = ["fit", str(tmp_path / "counts.npy"), "--model", "rflvm", "--likelihood",
            "binomial", "--trials", "5", "--offset", "libsize", "--quiet"]
    assert main(argv) == 2
    assert "stopped by the test" in _one_error_line(capsys, "fit")
    totals = np.array([4.0, 2.0, 10.0, 4.0])
    np.testing.assert_allclose(seen["offset"], np.log(totals / 5.0), rtol=1e-15)
    assert seen["n_trials"] == 5
    assert main(["fit", str(tmp_path / "counts.npy"), "--trials", "5", "--quiet"]) == 2
    assert "--trials does not apply to BayesianGPLVM" in _one_error_line(capsys, "fit")
    assert os.listdir(tmp_path) == ["counts.npy"]


#: a real fitted Poisson RFLVM (30 rows x 6 columns), saved by tests/data/legacy_v1/make_files.py
LEGACY_RFLVM = LEGACY / "rflvm.gplvm"


def test_verbs_give_new_rows_library_sizes_against_the_fits_mean_total(tmp_path, monkeypatch,
                                                                       capsys):
    """A fit with --offset libsize imputes its own rows with its offsets and keeps the mean row
    total s̄ of its rows; transform and impute then pass offsets log(s_n / s̄) of DATA's rows (not
    over DATA's own mean: a row's offset must not depend on the rows sent with it).  The fitted
    state is a real saved RFLVM's, so that ``gplvm fit`` saves and the verbs load a real model;
    its transform/impute/predict are stood in for (their numbers are the API's by
    test_transform_and_impute_verbs_reproduce_the_python_api)."""
    legacy = gplvm.load(LEGACY_RFLVM)
    seen = {}

    def fit(self, Y, y=None, *, times=None, offset=None, n_trials=None):   # RFLVM.fit's
        seen["fit"] = offset
        self.__dict__.update(legacy.__dict__)
        return self

    def transform(self, Y, return_var=False, *, offset=None):
        seen["transform"] = offset
        return np.zeros((len(Y), 2)), np.ones((len(Y), 2))

    def impute(self, Y, *, offset=None):
        seen.setdefault("impute", []).append(offset)
        return np.nan_to_num(Y)

    def predict(self, X, return_var=False):
        return np.zeros((len(X), 6)), np.ones((len(X), 6))

    for name, method in (("fit", fit), ("transform", transform), ("impute", impute),
                         ("predict", predict)):
        monkeypatch.setattr(gplvm.RFLVM, name, method)
    rng = np.random.default_rng(1)
    Y = rng.poisson(3.0, size=(30, 6)).astype(float) + np.eye(30, 6)      # every row > 0
    Y[29, 0] = np.nan
    np.save(tmp_path / "counts.npy", Y)
    np.save(tmp_path / "new.npy", 2 * Y[:4])
    out = tmp_path / "run"
    assert main(["fit", str(tmp_path / "counts.npy"), "--model", "rflvm", "--offset",
                 "libsize", "--out", str(out), "--quiet"]) == 0
    assert {"imputed.csv", "imputation.png"} <= set(os.listdir(out))
    totals = np.array([row[~np.isnan(row)].sum() for row in Y])
    mean_total = totals.sum() / 30
    np.testing.assert_allclose(seen["fit"], np.log(totals / mean_total), rtol=0, atol=1e-15)
    for offset in seen.pop("impute"):                   # imputed.csv and imputation.png
        np.testing.assert_array_equal(offset, seen["fit"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["offset"]["kind"] == "libsize"
    np.testing.assert_allclose(summary["offset"]["mean_library_size"], mean_total, rtol=1e-15)
    expected = np.log(2 * totals[:4] / mean_total)         # 2 Y: log 2 above the training rows
    model_path = str(out / "model.npz")
    for verb, extra in (("transform", []), ("impute", []), ("transform", ["--offset",
                                                                        "libsize"])):
        seen.pop(verb, None)
        assert main([verb, model_path, str(tmp_path / "new.npy"), *extra]) == 0
        offset = seen[verb][0] if verb == "impute" else seen[verb]
        np.testing.assert_allclose(offset, expected, rtol=0, atol=1e-15)
    capsys.readouterr()
    summary["offset"] = {"kind": "given", "source": "size"}        # a fit with --offset size
    (out / "summary.json").write_text(json.dumps(summary))
    assert main(["transform", model_path, str(tmp_path / "new.npy")]) == 2
    assert "fitted with offsets from 'size'" in _one_error_line(capsys, "transform")
    assert main(["transform", model_path, str(tmp_path / "new.npy"), "--offset",
                 "libsize"]) == 2
    assert "needs the mean library size" in _one_error_line(capsys, "transform")
    np.save(tmp_path / "sizes.npy", [0.5, 0.0, -0.5, 1.0])
    assert main(["impute", model_path, str(tmp_path / "new.npy"), "--offset",
                 str(tmp_path / "sizes.npy")]) == 0
    np.testing.assert_array_equal(seen["impute"][-1], [0.5, 0.0, -0.5, 1.0])


def test_offsets_for_a_model_whose_verbs_take_none(fitted, tmp_path, capsys):
    np.save(tmp_path / "sizes.npy", [0.5, 0.0, -0.5])
    _write_csv(tmp_path / "new.csv", fitted["Y"][:3])
    assert main(["transform", str(fitted["out"] / "model.npz"), str(tmp_path / "new.csv"),
                 "--offset", str(tmp_path / "sizes.npy")]) == 2
    assert "--offset does not apply to BayesianGPLVM: its transform takes no offset" in \
        _one_error_line(capsys, "transform")


def test_existing_output_folder_is_not_overwritten_without_force(fitted, capsys):
    argv = [*fitted["argv"][:2], "--out", str(fitted["out"]), "--quiet"]
    assert main(argv) == 2
    assert "--force" in _one_error_line(capsys, "fit")


def test_demo_options_unchanged():
    args = _parser().parse_args(["demo"])
    assert (args.model, args.seed, args.n_iter, args.quiet) == ("bgplvm", 0, None, False)
    assert args.out == os.environ.get("GPLVM_RESULTS", "results/demo")


def test_force_never_deletes_what_the_user_did_not_create(fitted, tmp_path, capsys):
    """``--force`` replaces a folder of gplvm fit's own outputs only: a folder that holds the
    input data, or any file the fit did not write (its summary.json lists what it wrote), is
    refused with exit status 2 before any work, and stays as it was."""
    data = tmp_path / "mydata.csv"
    _write_csv(data, fitted["Y"])
    (tmp_path / "notes.txt").write_text("mine")
    before = sorted(os.listdir(tmp_path))
    assert main(["fit", str(data), "--out", str(tmp_path), "--force", "--quiet"]) == 2
    assert "holds the input" in _one_error_line(capsys, "fit")
    assert main(["fit", str(data), "--out", str(tmp_path / ".."), "--force", "--quiet"]) == 2
    assert "holds the input" in _one_error_line(capsys, "fit")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "results.csv").write_text("1,2\n")
    assert main(["fit", str(data), "--out", str(theirs), "--force", "--quiet"]) == 2
    assert "gplvm fit did not write (results.csv)" in _one_error_line(capsys, "fit")
    assert sorted(os.listdir(tmp_path)) == before + ["theirs"]
    assert (theirs / "results.csv").read_text() == "1,2\n" and data.is_file()
    # a gplvm output folder with one file added by hand is refused too
    own = tmp_path / "own"
    own.mkdir()
    for name in os.listdir(fitted["out"]):
        (own / name).write_bytes((fitted["out"] / name).read_bytes())
    (own / "my_analysis.ipynb").write_text("{}")
    assert main(["fit", str(data), "--out", str(own), "--force", "--quiet"]) == 2
    assert "my_analysis.ipynb" in _one_error_line(capsys, "fit")


def test_force_replaces_a_folder_of_gplvms_own_outputs(fitted, tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    for name in os.listdir(fitted["out"]):
        (own / name).write_bytes((fitted["out"] / name).read_bytes())
    argv = [*fitted["argv"][:2], "--out", str(own), "--labels", "stage", "--components", "2",
            "--inducing", "8",
            "--iterations", "3", "--quiet", "--force"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(argv) == 0
    assert gplvm.load(own / "model.npz").n_iter_ == 3
    assert sorted(os.listdir(tmp_path)) == ["own"]          # no temporary or old folder left


@pytest.mark.parametrize("verb", ["transform", "impute", "sample"])
def test_verbs_never_write_over_their_inputs(fitted, tmp_path, capsys, verb):
    """``--out`` naming the model file or the data file is refused (exit 2) before anything is
    read or written: the model and the data stay byte for byte."""
    model = tmp_path / "model.npz"
    model.write_bytes((fitted["out"] / "model.npz").read_bytes())
    data = tmp_path / "new.csv"
    _write_csv(data, fitted["Y"][:3], ids=IDS[:3])
    saved = model.read_bytes(), data.read_bytes()
    inputs = [str(model)] + ([str(data)] if verb != "sample" else [])
    targets = [model, data] if verb != "sample" else [model]
    for target in targets:
        assert main([verb, *inputs, "--out", str(target)]) == 2
        assert "is the input file" in _one_error_line(capsys, verb)
    assert (model.read_bytes(), data.read_bytes()) == saved


def test_verbs_on_a_supervised_model_say_which_verbs_it_has(tmp_path, capsys):
    """``transform``/``impute``/``sample`` of a saved regression model end with exit status 2
    and one line naming the verbs it has; ``info`` describes it (issue 31)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    path = tmp_path / "blr.npz"
    gplvm.BayesianLinearRegression().fit(X, X @ [1.0, -2.0]).save(path)
    _write_csv(tmp_path / "new.csv", X[:3], ids=IDS[:3], columns=["a", "b"])
    for verb in ("transform", "impute", "sample"):
        extra = [str(tmp_path / "new.csv")] if verb != "sample" else []
        assert main([verb, str(path), *extra]) == 2
        err = _one_error_line(capsys, verb)
        assert f"has no {verb}; its verbs are predict, score" in err
    assert main(["info", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["class"] == "gplvm.BayesianLinearRegression" and info["n_features_in"] == 2


def test_cli_file_errors_are_one_line_with_exit_status_2(fitted, tmp_path, capsys):
    """A folder given as data, a bad --delimiter, a semicolon table read as CSV, a truncated
    archive, a model file whose document nests deeper than JSON can be read: one line on
    stderr naming the problem and the fix, exit status 2, nothing written."""
    (tmp_path / "cells.csv").mkdir()
    (tmp_path / "eu.csv").write_text("a;b\n1,5;2\n3;4,25\n")
    np.savez(tmp_path / "full.npz", Y=np.ones((30, 4)))
    (tmp_path / "cut.npz").write_bytes((tmp_path / "full.npz").read_bytes()[:200])
    cases = {"is a folder": [str(tmp_path / "cells.csv")],
             "--delimiter ';;': give the one character": [str(tmp_path / "full.npz"),
                                                          "--delimiter", ";;"],
             "pass --delimiter ';'": [str(tmp_path / "eu.csv")],
             "cut short": [str(tmp_path / "cut.npz")]}
    before = sorted(os.listdir(tmp_path))
    for needle, arguments in cases.items():
        assert main(["fit", *arguments, "--out", str(tmp_path / "out"), "--quiet"]) == 2
        assert needle in _one_error_line(capsys, "fit"), needle
    assert sorted(os.listdir(tmp_path)) == before
    model = tmp_path / "deep.npz"
    document = "[" * 100_000 + "]" * 100_000
    np.savez(model, __gplvm__=np.frombuffer(document.encode(), dtype=np.uint8))
    assert main(["info", str(model)]) == 2
    assert "nested deeper" in _one_error_line(capsys, "info")


def test_rflvm_map_fit_from_the_command_line(tmp_path, capsys):
    """``--inference map`` reaches RFLVM(inference='map'): summary.json reports the restarts'
    modes (not R-hat), and a bad value is one clear line naming the choices, exit 2."""
    rng = np.random.default_rng(2)
    np.save(tmp_path / "counts.npy", rng.poisson(3.0, size=(20, 5)).astype(float))
    out = tmp_path / "map"
    argv = ["fit", str(tmp_path / "counts.npy"), "--model", "rflvm", "--inference", "map",
            "--features", "10", "--chains", "2", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["modes"]["log_density"]) == 2 and "rhat" not in summary
    assert "trace.png" in summary["outputs"]
    argv = ["fit", str(tmp_path / "counts.npy"), "--model", "rflvm", "--inference", "vb",
            "--out", str(tmp_path / "bad"), "--quiet"]
    assert main(argv) == 2
    line = _one_error_line(capsys, "fit")
    assert "inference" in line and "map" in line, line


def test_csv_floats_read_back_bit_for_bit(tmp_path):
    """Issue 32, item 7: the CSVs' floats come back as the same doubles through every
    correctly rounded reader: Python's float, numpy.loadtxt and pandas'
    ``float_precision='round_trip'``.  pandas' default parser is not correctly rounded (a
    mantissa of up to 17 digits accumulated in a double, then scaled by a power of ten: a few
    roundings of 2^-53 each), so no number of digits makes it exact; but it must keep every
    digit written: within 1e-15 relative (repr's 0.000582… lost its last 3 digits there)."""
    import pandas as pd

    from gplvm.cli.output import write_csv

    rng = np.random.default_rng(3)
    awkward = [1 / 3, 2 / 3, 0.1, 1e-300, -0.0, 0.0, 1e17 + 8, 5e-324, 2.2250738585072014e-308,
               1.7976931348623157e308, -np.pi, 2.0**-1074 * 3, 123456789.12345678, 1e22,
               2.0**53 + 2]
    values = np.concatenate([awkward, rng.normal(size=1998),
                             rng.normal(size=1998) * 10.0 ** rng.integers(-300, 300, 1998)])
    values = values.reshape(-1, 3)
    write_csv(tmp_path / "x.csv", range(len(values)), ["a", "b", "c"], values)

    def same_bits(read):
        np.testing.assert_array_equal(np.asarray(read).view(np.int64), values.view(np.int64))

    same_bits(_read_csv(tmp_path / "x.csv")[2])                           # float()
    same_bits(np.loadtxt(tmp_path / "x.csv", delimiter=",", skiprows=1)[:, 1:])
    exact = pd.read_csv(tmp_path / "x.csv", index_col="id", float_precision="round_trip")
    same_bits(exact.to_numpy())
    default = pd.read_csv(tmp_path / "x.csv", index_col="id").to_numpy()
    normal = (np.abs(values) > 1e-300) & (np.abs(values) < 1e300)  # not subnormal, no overflow
    np.testing.assert_allclose(default[normal], values[normal], rtol=1e-15, atol=0)


def test_warnings_of_a_command_are_one_line_without_source_paths(monkeypatch, capsys):
    """Issue 32, item 5: a warning raised while a command runs reaches the user as
    ``warning: Category: message`` (no library path or line); Python's own display is back
    once the command returns, so the Python API's warnings are untouched."""
    from sklearn.exceptions import ConvergenceWarning

    from gplvm.cli import verbs

    def run(args):
        warnings.warn("the bound did not converge;\n raise max_iter", ConvergenceWarning)
        return 0

    monkeypatch.setattr(verbs, "run", run)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        before = warnings.showwarning
        assert main(["info", "model.npz"]) == 0
        assert warnings.showwarning is before
    assert capsys.readouterr().err == ("warning: ConvergenceWarning: the bound did not "
                                       "converge; raise max_iter\n")


def _four_columns(path, constant: bool):
    """A 20-row CSV of 4 named columns on a 1-D curve (the last one constant if asked)."""
    t = np.linspace(-2, 2, 20)
    Y = np.column_stack([np.sin(t), np.cos(t), t, np.full(20, 3.0) if constant else t**2])
    Y[:, :3] += 0.05 * np.random.default_rng(4).normal(size=(20, 3))
    _write_csv(path, Y, ids=[f"r{i}" for i in range(20)], columns=["a", "b", "c", "k"])
    return Y


def test_default_components_are_auto_and_the_summary_gives_q_and_the_kept_dimensions(
        tmp_path, capsys):
    """Issue 32, item 2: without --components the GPLVM family fits n_components='auto', Q =
    min(10, fitted columns, rows - 1) = 3 here (4 columns, one constant and kept out);
    summary.json, `gplvm info` and the stderr line report that Q, the dimensions ARD keeps and
    the kept-out column by name."""
    _four_columns(tmp_path / "four.csv", constant=True)
    out = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                # 5 iterations do not converge
        assert main(["fit", str(tmp_path / "four.csv"), "--out", str(out), "--inducing", "5",
                     "--iterations", "5"]) == 0
    err = capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    model = gplvm.load(out / "model.npz")
    assert summary["params"]["n_components"] == "auto"
    assert summary["n_components"] == model.n_components_ == model.X_mean_.shape[1] == 3
    active = summary["active_components"]
    assert active == model.active_components_.tolist() and active
    assert set(active) <= {0, 1, 2}
    assert summary["dropped_columns"] == ["k"] and model.dropped_columns_.tolist() == [3]
    assert any(w.startswith("DroppedColumnsWarning: ") for w in summary["warnings"])
    assert (f"Q = 3 (n_components='auto'); ARD keeps dimension(s) "
            f"{', '.join(map(str, active))}; kept out of the fit: 1 constant or empty "
            f"column(s) (k)") in err
    header, _, _ = _read_csv(out / "embedding.csv")
    assert header == ["id", "x0", "x1", "x2", "var0", "var1", "var2"]
    assert main(["info", str(out / "model.npz")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {k: info[k] for k in ("n_components", "active_components", "dropped_columns")} == \
        {k: summary[k] for k in ("n_components", "active_components", "dropped_columns")}


def test_components_values_the_cli_refuses(tmp_path, capsys):
    """--components: 'auto' or a positive integer (argparse, exit 2); more than the columns
    fails before the fit with both numbers; --kernel needs an integer Q; the RFLVM, without
    ARD switching dimensions off, takes no 'auto'.  No output folder is left."""
    _four_columns(tmp_path / "four.csv", constant=False)
    fit = ["fit", str(tmp_path / "four.csv"), "--out", str(tmp_path / "run"), "--quiet"]
    for bad in ("0", "two"):
        with pytest.raises(SystemExit) as stop:
            main([*fit, "--components", bad])
        assert stop.value.code == 2
        assert f"{bad!r} is neither 'auto' nor a positive integer" in capsys.readouterr().err
    cases = {("--components", "5"): ("n_components=5 exceeds the 4 column(s) of Y",),
             ("--kernel", "matern32"): ("--kernel matern32 has one length-scale per latent "
                                        "dimension", "give --components Q"),
             ("--model", "rflvm", "--components", "auto"): ("--components auto applies to "
                                                            "the GPLVM family", "integer")}
    for flags, needles in cases.items():
        assert main([*fit, *flags]) == 2
        line = _one_error_line(capsys, "fit")
        assert all(needle in line for needle in needles), line
    assert os.listdir(tmp_path) == ["four.csv"]


def test_plots_of_a_fit_name_the_label_column_and_impute_once(fitted, tmp_path, monkeypatch):
    """``gplvm fit --labels stage`` titles the latent plot with 'stage' (issue 32, item 4)
    and draws the imputation plot from the imputation written to imputed.csv, not a second
    ``model.impute``; a labels file is named by its stem."""
    from gplvm.cli import fit as cli_fit

    seen = {}
    real_latent = plot.latent

    def latent(*args, **kwargs):
        seen.update(kwargs)
        return real_latent(*args, **kwargs)

    model, Y = fitted["model"], fitted["Y"]
    filled = model.impute(Y)
    monkeypatch.setattr(plot, "latent", latent)
    monkeypatch.setattr(model, "impute", lambda *a, **k: pytest.fail("imputed a second time"))
    written = cli_fit.write_plots(tmp_path, model, Y, fitted["stage"], "stage", filled)
    assert {"latent.png", "imputation.png"} <= set(written)
    assert seen["label_name"] == "stage"
    (tmp_path / "groups.txt").write_text("a\n")
    assert cli_fit.label_name(str(tmp_path / "groups.txt")) == "groups"
    assert cli_fit.label_name("stage") == "stage" and cli_fit.label_name(None) is None

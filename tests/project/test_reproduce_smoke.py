"""The reproduction scripts' plumbing: the cell store (atomic, resumable), the results page
built from JSON alone, Spambase's recovered counts, and seed 000 Table 1's smoke mode."""

import json
import sys

from _paths import REPO

import numpy as np
import pytest

sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "benchmarks" / "reproduce"))
import _cells  # noqa: E402
import results_page  # noqa: E402
import rflvm_table1  # noqa: E402

shared = pytest.mark.shared_data


def _value_of(cell):
    return 0.5 + 0.1 * cell.seed, {"fit_s": 6.0 * (cell.seed + 1)}


def test_cells_are_stored_once_and_a_rerun_resumes(tmp_path):
    cells = [_cells.Cell("000", "1", "toy", "PCA", s, {"sweeps": 10}) for s in range(3)]
    done = _cells.run_cells(_value_of, cells[:2], root=tmp_path, log=lambda _: None)
    assert [r["seed"] for r in done] == [0, 1]
    again = _cells.run_cells(_value_of, cells, root=tmp_path, log=lambda _: None)
    assert [r["seed"] for r in again] == [2]                  # the stored two are not redone
    record = json.loads(cells[2].path(tmp_path).read_text())
    assert record["value"] == pytest.approx(0.7) and record["config"] == {"sweeps": 10}
    for key in ("wall_s", "command", "git_commit", "threads", "date"):
        assert key in record
    assert not list(tmp_path.rglob(".tmp-*"))                  # the temporary files renamed


def test_a_failed_write_leaves_no_cell(tmp_path):
    path = tmp_path / "x" / "seed0.json"
    with pytest.raises(TypeError):
        _cells.atomic_write_json(path, {"bad": object()})
    assert not path.exists() and not list(tmp_path.rglob("*.json"))


def test_page_shows_mean_sd_n_difference_and_reasons(tmp_path):
    _cells.write_row("000", "1", "toy", "poisson", label="Poisson RFLVM",
                     paper_figure={"mean": 0.80, "sd": 0.05, "spread": "sd"}, command="run it",
                     root=tmp_path)
    _cells.write_row("000", "1", "toy", "gone", paper_figure=None, reason="no data here",
                     root=tmp_path)
    _cells.write_row("000", "2", "toy", "poisson", label="Poisson RFLVM",
                     paper_figure={"mean": 1.0, "sd": 0.1, "spread": "se"},
                     extra={"derive": {"from_table": "1"}}, root=tmp_path)
    for seed, value in enumerate((0.80, 0.90)):
        cell = _cells.Cell("000", "1", "toy", "poisson", seed, {"sweeps": 200})
        record = {**_cells._record(cell, value, 130.0, {"fit_s": 120.0 * (seed + 1)})}
        _cells.atomic_write_json(cell.path(tmp_path), record)
    page = results_page.build(tmp_path)
    t1 = next(line for line in page.splitlines() if line.startswith("| toy | Poisson RFLVM")
              and "0.8000 ± 0.0500 |" in line)
    # mean 0.85, sample sd of (0.8, 0.9) = 0.0707, (0.85 - 0.80) / 0.05 = +1.0
    assert "0.8500 ± 0.0707 (n=2)" in t1 and "| +1.0 |" in t1 and "130.0" in t1
    assert "| toy | gone | — | no data here |" in page
    # Table 2: 120 s and 240 s for 200 sweeps = 1 and 2 minutes per 100 sweeps
    t2 = next(line for line in page.splitlines() if "(s.e.)" in line)
    assert "1.5000 ± 0.7071 (n=2) wall" in t2 and "| +5.0 |" in t2
    # CPU seconds, where every cell has them, replace the wall time; warm fits only
    for seed, (cpu, warm) in enumerate(((600.0, False), (60.0, True), (180.0, True))):
        cell = _cells.Cell("000", "1", "toy", "poisson", seed, {"sweeps": 200})
        record = _cells._record(cell, 0.8, 700.0, {"fit_s": 650.0, "cpu_s": cpu, "warm": warm})
        _cells.atomic_write_json(cell.path(tmp_path), record)
    t2 = next(line for line in results_page.build(tmp_path).splitlines() if "(s.e.)" in line)
    assert "1.0000 ± 0.7071 (n=2) CPU" in t2         # 0.5 and 1.5 minutes per 100 sweeps


def test_page_meets_a_mean_and_standard_error_with_ours(tmp_path):
    """A paper figure given as mean ± s.e. (seed 000 Table 3) is shown beside our s.e., and
    the difference is counted in the s.e. of the difference."""
    _cells.write_row("000", "3", "toy", "PPCA", paper_figure={"mean": 0.5, "sd": 0.03,
                                                             "spread": "se"}, root=tmp_path)
    for seed, value in enumerate((0.5, 0.6, 0.7, 0.8)):
        cell = _cells.Cell("000", "3", "toy", "PPCA", seed)
        _cells.atomic_write_json(cell.path(tmp_path), _cells._record(cell, value, 1.0, {}))
    line = next(row for row in results_page.build(tmp_path).splitlines()
                if row.startswith("| toy | PPCA"))
    # mean 0.65, sd 0.1291, s.e. 0.0645; (0.65 - 0.5) / hypot(0.03, 0.0645) = +2.1
    assert "0.6500 ± 0.0645 (n=4, s.e.)" in line and "| +2.1 |" in line


def test_spam_counts_recover_planted_word_counts():
    rng = np.random.default_rng(3)
    n, words = 50, 48
    counts = rng.poisson(0.5, size=(n, words)).astype(float)
    counts[:, 0] = 1                                    # one word occurs once in every e-mail
    totals = counts.sum(1) + rng.integers(0, 10, n)     # words outside the 48 columns
    freq = np.round(100 * counts / totals[:, None], 2)  # Spambase's per cent, 2 decimals
    capitals = rng.integers(1, 500, size=(n, 2)).astype(float)
    Y = np.hstack([freq, rng.random((n, 7)), capitals])
    Yc, near = rflvm_table1.spam_counts(Y)
    np.testing.assert_array_equal(Yc[:, :words], counts)
    np.testing.assert_array_equal(Yc[:, words:], capitals)
    assert near > 0.99


@shared
def test_table1_smoke_runs_every_data_set_and_baseline_and_resumes(tmp_path):
    args = ["--smoke", "--methods", "PCA,NMF,LDA,Isomap", "--root", str(tmp_path)]
    records = rflvm_table1.main(args)
    assert len(records) == 4 * 4                          # 4 data sets x 4 baselines, 1 seed
    for r in records:
        assert 0 <= r["value"] <= 1 and r["details"]["shape"][1] <= 8
        assert r["details"]["n_classes"] >= 2
    assert rflvm_table1.main(args) == []                  # all stored: nothing recomputed


@shared
def test_table1_smoke_fits_each_rflvm_with_the_protocol(tmp_path, monkeypatch):
    import gplvm
    calls = []

    class Recorder:                                       # stands in for the compiled sampler
        def __init__(self, **kwargs):
            calls.append(kwargs)

        def fit(self, Y):
            self.X_mean_ = Y[:, :2] + np.arange(len(Y))[:, None]
            return self

    monkeypatch.setattr(gplvm, "RFLVM", Recorder)
    records = rflvm_table1.main(["--smoke", "--datasets", "montreal,yale", "--methods",
                                 ",".join(rflvm_table1.RFLVMS), "--root", str(tmp_path)])
    assert len(records) == 2 * 4
    kinds = [c["likelihood"] for c in calls]
    assert kinds == list(rflvm_table1.RFLVMS) * 2
    for c in calls:
        assert (c["n_features"], c["n_iter"], c["burn_in"], c["n_chains"]) == (100, 4, 2, 1)
    configs = {r["config_tag"] for r in records if r["method"] == "poisson"}
    assert configs == {"burn_in=2,smoke=True,sweeps=4"}

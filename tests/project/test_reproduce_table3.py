"""Seed 000 Table 3's script (benchmarks/reproduce/rflvm_table3.py) in smoke mode: every data
set's preparation and every method's code path on a tiny subset, one cell file per (column,
method).  PPCA and the LDM run for real; the RFLVM and the Bayesian GPLVM are replaced by a
recorder that checks the protocol's arguments and imputes column means (both estimators are
tested elsewhere, and compiling them here would cost 12 s (the GPLVM's bound) to 30 s (each
RFLVM sweep) of CPU, cold)."""

import json
import sys

from _paths import REPO

import numpy as np
import pytest

sys.path.insert(0, str(REPO / "benchmarks" / "reproduce"))
import rflvm_table3  # noqa: E402

shared = pytest.mark.shared_data


def test_hold_out_takes_a_fifth_and_leaves_every_row_an_entry():
    Y = np.ones((400, 50))
    Y_obs, mask = rflvm_table3.hold_out(Y, seed=3)
    # Binomial(20000, 0.2): sd of the fraction 0.0028; 0.02 is 7 sd.
    assert abs(mask.mean() - 0.2) < 0.02
    assert np.array_equal(np.isnan(Y_obs), mask) and (~mask).any(axis=1).all()
    again = rflvm_table3.hold_out(Y, seed=3)[1]
    assert np.array_equal(mask, again)                   # same seed, same hold-out


@shared
def test_table3_smoke_writes_a_finite_cell_per_column_and_method(tmp_path, monkeypatch):
    import gplvm
    calls = []

    class Recorder:                                      # stands in for the compiled sampler
        def __init__(self, **kwargs):
            self.kwargs = kwargs

        def fit(self, Y, times=None):
            calls.append((self.kwargs, None if times is None else np.asarray(times), Y.shape))
            self.mean_ = np.nanmean(Y, axis=0)
            return self

        def impute(self, Y):
            return np.where(np.isnan(Y), self.mean_, Y)

    monkeypatch.setattr(gplvm, "RFLVM", Recorder)
    monkeypatch.setattr(gplvm, "BayesianGPLVM", Recorder)
    args = ["--smoke", "--root", str(tmp_path)]
    records = rflvm_table3.main(args)
    pairs = {(r["dataset"], r["method"]) for r in records}
    assert pairs == {(d, m) for d in rflvm_table3.DATASETS for m in rflvm_table3.METHODS}
    for r in records:
        cell = rflvm_table3.Cell(r["paper"], r["table"], r["dataset"], r["method"], r["seed"],
                                 r["config"])
        stored = json.loads(cell.path(tmp_path).read_text())
        assert np.isfinite(stored["value"]) and stored["value"] >= 0
        assert stored["details"]["shape"] == list(rflvm_table3.SMOKE_SHAPE)
        assert 0 < stored["details"]["n_held_out"] < np.prod(rflvm_table3.SMOKE_SHAPE)
    rflvm = [c for c in calls if "likelihood" in c[0]]
    assert len(rflvm) == 2 * len(rflvm_table3.DATASETS)
    for kwargs, times, shape in rflvm:
        assert (kwargs["likelihood"], kwargs["n_features"], kwargs["n_iter"],
                kwargs["burn_in"], kwargs["n_chains"]) == ("gaussian", 100, 4, 2, 1)
        assert times is None or (len(times) == shape[0] and np.all(np.diff(times) > 0))
    assert sum(times is not None for _, times, _ in rflvm) == len(rflvm_table3.DATASETS)
    bgplvm = [c for c in calls if "n_inducing" in c[0]]
    assert len(bgplvm) == len(rflvm_table3.DATASETS)
    assert all(k["n_components"] == 2 and t is None for k, t, _ in bgplvm)
    assert rflvm_table3.main(args) == []                 # all stored: nothing recomputed


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="--methods: unknown 'GPDM'"):
        rflvm_table3.main(["--smoke", "--methods", "GPDM"])

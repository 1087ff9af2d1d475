"""The reproduction scripts that write the results store (issue 17, items 6-7): a ``--smoke``
path, on a tiny subset in a temporary results root, stores its cells with finite values, and a
second run recomputes nothing (the store resumes); the MSLL of seed 002 against its definition
(Rasmussen & Williams 2006, eq. 2.34).

Only seed 002's smoke path (one small ``BayesianGLM`` fit) runs here: the other converted
scripts' smoke paths (``rflvm_scurve``, ``dpgplvm_synthetic``, ``dpgplvm_mocap``,
``sgplvm_frey``, ``bgplvm_oil``, each ``--smoke``) cost 15-60 s of compilation each, more than
the suite's budget allows; each runs by its own ``--smoke`` flag."""

import json
import sys
from pathlib import Path

from _paths import REPO

import numpy as np
import pytest
from scipy.stats import norm

sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "benchmarks" / "reproduce"))
import revrand_seed002  # noqa: E402


def _cells(root):
    return [json.loads(p.read_text()) for p in sorted(Path(root).rglob("seed*.json"))]


def _run_twice(main, root, argv=()):
    main(["--smoke", "--root", str(root), *argv])
    stored = _cells(root)
    assert stored and all(np.isfinite(c["value"]) for c in stored)
    assert all(c["config"].get("smoke") for c in stored)
    before = {p: p.stat().st_mtime_ns for p in Path(root).rglob("seed*.json")}
    main(["--smoke", "--root", str(root), *argv])                  # resumes: nothing redone
    assert {p: p.stat().st_mtime_ns for p in Path(root).rglob("seed*.json")} == before
    return {(c["table"], c["method"]) for c in stored}


def test_msll_is_zero_for_the_training_gaussian_and_negative_for_a_better_one():
    rng = np.random.default_rng(0)
    y_train, y_test = rng.normal(1.0, 2.0, 200), rng.normal(1.0, 2.0, 50)
    trivial = -np.mean(norm.logpdf(y_test, y_train.mean(), y_train.std()))
    assert revrand_seed002.msll(y_test, trivial, y_train) == pytest.approx(0.0, abs=1e-12)
    exact = -np.mean(norm.logpdf(y_test, y_test, 0.1))              # a far sharper predictor
    assert revrand_seed002.msll(y_test, exact, y_train) < -1.0


def test_seed002_smoke_stores_both_metrics_of_one_fit(tmp_path):
    kinds = _run_twice(revrand_seed002.main, tmp_path, ["--tasks", "classification"])
    assert kinds == {(t, "gplvm BayesianGLM (bernoulli)") for t in ("2.2-logloss", "2.2-error")}
    loss, error = sorted(_cells(tmp_path), key=lambda c: c["table"])[::-1]
    assert loss["details"] == error["details"]                      # one fit, two cells
    errors = [c["value"] for c in _cells(tmp_path) if c["table"] == "2.2-error"]
    assert all(0.0 <= e <= 100.0 for e in errors)                   # a percentage

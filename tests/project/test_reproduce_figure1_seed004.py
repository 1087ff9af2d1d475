"""Smoke paths of seed 000 Figure 1 (``rflvm_figure1.py``) and seed 004 (``unscented_seed004.py``):
every cell of the tiny grid is written with a finite value, the MSEs are the ones the protocol
defines (checked with stand-in models whose predictions are known), and the Ψ1 errors are
those of the library's rules against a Monte Carlo reference."""

import sys

from _paths import REPO

import numpy as np
import pytest

sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "benchmarks" / "reproduce"))
import results_page  # noqa: E402
import rflvm_figure1  # noqa: E402
import unscented_seed004  # noqa: E402


class ZeroModel:
    """Stands in for a compiled model: latent = first two columns, every prediction 0."""

    calls: list = []

    def __init__(self, **kwargs):
        ZeroModel.calls.append(kwargs)

    def fit(self, Y):
        self.Y_ = np.asarray(Y)
        self.X_mean_ = np.nan_to_num(self.Y_[:, :2]) + np.arange(len(Y))[:, None]
        self.relevance_ = np.arange(self.X_mean_.shape[1], 0, -1.0)
        self.elbo_, self.n_iter_ = 0.0, 3
        return self

    def impute(self, Y):
        return np.where(np.isnan(Y), 0.0, Y)

    def predict(self, X):
        return np.zeros((len(X), self.Y_.shape[1]))


def test_figure1_smoke_writes_a_cell_per_model_and_M_with_the_protocol_mse(tmp_path,
                                                                         monkeypatch):
    import gplvm
    from gplvm.data import make_s_curve
    ZeroModel.calls = []
    monkeypatch.setattr(gplvm, "RFLVM", ZeroModel)
    monkeypatch.setattr(gplvm, "BayesianGPLVM", ZeroModel)
    records = rflvm_figure1.main(["--smoke", "--root", str(tmp_path)])
    assert sorted((r["method"], r["config"]["M"]) for r in records) == \
        [("bgplvm", 4), ("bgplvm", 6), ("rflvm", 4), ("rflvm", 6)]
    assert sorted(c.get("n_features", c.get("n_inducing")) for c in ZeroModel.calls) == \
        [4, 4, 6, 6]
    # predictions of 0: MSE of Y* is the mean square of the held-out 20 % of the entries,
    # MSE of F the mean square of the true F, both from the generator with seed 0
    d = make_s_curve("gaussian", n_samples=40, n_outputs=8, random_state=0)
    mask = np.random.default_rng(0).random(d.Y.shape) < 0.2
    mask[mask.all(axis=1), 0] = False
    for r in records:
        assert r["value"] == pytest.approx(np.mean(d.Y[mask] ** 2), rel=1e-12)
        assert r["details"]["mse_F"] == pytest.approx(np.mean(d.F ** 2), rel=1e-12)
        assert r["details"]["n_heldout"] == mask.sum()
    assert rflvm_figure1.main(["--smoke", "--root", str(tmp_path)]) == []      # resumed
    rflvm_figure1.write_rows(tmp_path)
    page = results_page.build(tmp_path)
    f_table = page.split("MSE of F (the noiseless")[1]
    assert f"{np.mean(d.F ** 2):.4f} (n=1)" in f_table     # the derived detail, not the value
    assert page.index("M=4,") < page.index("M=6,")
    # the figure as a table: a line per model, a column per M, the F errors in the F table
    f_line = f"| {rflvm_figure1.LABELS['rflvm']} | {np.mean(d.F ** 2):.4f} (1) | "
    assert "| method | M=4 | M=6 |" in f_table and f_line in f_table
    assert sorted(["M=10", "M=5", "M=200"], key=results_page.natural_key) == \
        ["M=5", "M=10", "M=200"]


@pytest.mark.shared_data     # the smoke run reads oil flow's DataTrn.txt
def test_seed004_smoke_writes_a_cell_per_fit_and_per_method_and_dimension(tmp_path,
                                                                        monkeypatch):
    import gplvm
    from gplvm.expectations import GaussHermite, Unscented
    ZeroModel.calls = []
    monkeypatch.setattr(gplvm, "BayesianGPLVM", ZeroModel)
    records = unscented_seed004.main(["--smoke", "--root", str(tmp_path)])
    nn = [r for r in records if r["table"] == "1NN"]
    psi = [r for r in records if r["table"] == "C1a"]
    assert len(nn) == 2 * 4 and len(psi) == 5
    rules = sorted((type(c["kernel"]).__name__, c["psi_rule"]) for c in ZeroModel.calls)
    assert rules == sorted([("RBF", "analytic"), ("RBF", "unscented"),
                            ("Matern32", "unscented"), ("Matern52", "unscented")] * 2)
    for r in nn:                         # latent (y_1 + n, y_2 + n): neighbours are n +- 1
        assert 0 <= r["value"] <= 1 and r["details"]["n"] == 30
    assert {(r["dataset"], r["method"]) for r in psi} == \
        {(f"D={D}", m) for D in (1,) for m in unscented_seed004.PSI_METHODS}
    for r in psi:
        assert np.isfinite(r["value"]) and r["value"] >= 0
    by = {(r["dataset"], r["method"]): r["value"] for r in psi}
    # in one dimension the unscented points mu +- sqrt(S) are the 2-point Gauss-Hermite nodes,
    # and MC(2D) = MC(2^D) draw the same two samples
    assert by[("D=1", "UT")] == pytest.approx(by[("D=1", "GH(2^D)")], rel=1e-12)
    assert by[("D=1", "MC(2D)")] == by[("D=1", "MC(2^D)")]
    # and the UT's Psi1 is the mean of the kernel at mu +- sqrt(S) (seed 004 eq. B.1), Matern 3/2
    Z, mu, S = unscented_seed004.psi_data(1, 0)
    r = np.abs(np.stack([mu + np.sqrt(S), mu - np.sqrt(S)])[:, :, None, 0] - Z[None, None, :, 0])
    expected = ((1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r)).mean(0)
    np.testing.assert_allclose(unscented_seed004.psi1("UT", 1, 0), expected, rtol=1e-12)
    assert isinstance(unscented_seed004.psi_rule("UT", 3, 0), Unscented)
    assert isinstance(unscented_seed004.psi_rule("GH(2^D)", 3, 0), GaussHermite)

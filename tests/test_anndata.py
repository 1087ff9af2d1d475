"""gplvm.anndata: fits on a real AnnData object built here, results stored where scanpy users
look for them, equal to the same estimator fitted on the same matrix in Python."""

import sys

import anndata  # the test extra (gplvm[test]) has it
import numpy as np
import pytest
from scipy import sparse

import gplvm
from gplvm import anndata as gad

# 20 optimiser steps are enough for equality checks; the fits stop before converging
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


#: the shape of every real fit here (the oil-flow subset's): one compilation serves them all
N_CELLS, N_GENES = 30, 12


def _planted():
    """30 cells x 12 genes: non-linear functions of a 1-D curve, clipped at 0 so that about a
    third of the entries are exact zeros (a sparse matrix stores them as absent)."""
    rng = np.random.default_rng(0)
    s = np.linspace(-1, 1, N_CELLS)
    F = np.column_stack([np.sin(3 * s + p) for p in np.linspace(0, 2.5, N_GENES)])
    return np.maximum(F + 0.05 * rng.normal(size=F.shape), 0.0)


def _bgplvm():
    return gplvm.BayesianGPLVM(n_components=2, n_inducing=8, max_iter=20, random_state=3,
                               progress=False)


@pytest.fixture(scope="module")
def reference():
    Y = _planted()
    return Y, _bgplvm().fit(Y)


def test_obsm_and_uns_equal_the_python_fit(reference, tmp_path):
    Y, ref = reference
    adata = anndata.AnnData(Y.copy())
    model = gad.fit(adata, _bgplvm())
    np.testing.assert_array_equal(adata.obsm["X_gplvm"], ref.X_mean_)      # bit for bit
    np.testing.assert_array_equal(adata.obsm["X_gplvm_var"], ref.X_var_)
    assert "X_gplvm_sd" not in adata.obsm and len(adata.varm) == 0       # no per-gene results
    settings, summary = adata.uns["X_gplvm"]["settings"], adata.uns["X_gplvm"]["summary"]
    assert settings == ref.get_params(deep=False)                       # all plain values
    assert summary["bound"] == float(ref.elbo_)
    assert summary["n_iter"] == ref.n_iter_ and summary["converged"] == ref.converged_
    assert summary["relevance"] == list(ref.relevance_)
    assert model.n_features_in_ == N_GENES
    adata.write_h5ad(tmp_path / "fitted.h5ad")                           # uns is writable
    back = anndata.read_h5ad(tmp_path / "fitted.h5ad")
    np.testing.assert_array_equal(back.obsm["X_gplvm"], ref.X_mean_)
    assert back.uns["X_gplvm"]["summary"]["bound"] == float(ref.elbo_)


def test_sparse_x_and_a_layer_give_the_dense_result(reference):
    Y, ref = reference
    X = sparse.csr_matrix(Y)
    assert X.nnz < 0.8 * Y.size                                          # truly sparse
    adata = anndata.AnnData(X, layers={"raw": sparse.csc_matrix(Y)})
    gad.fit(adata, _bgplvm(), key_added="from_x")
    gad.fit(adata, _bgplvm(), layer="raw", key_added="from_layer")
    np.testing.assert_array_equal(adata.obsm["from_x"], ref.X_mean_)
    np.testing.assert_array_equal(adata.obsm["from_layer"], ref.X_mean_)


def _fake_rflvm_fit(seen):
    """Stands in for RFLVM.fit: records what it is given and sets the fitted attributes of a
    sampled model (2 chains x 3 draws), and a per-column ``assignments_``."""
    def fit(self, Y, y=None, *, times=None, offset=None, n_trials=None):
        seen.update(Y=Y, offset=offset, times=times)
        N, D = Y.shape
        self.X_samples_ = np.arange(2 * 3 * N * 2, dtype=float).reshape(2, 3, N, 2) / N
        self.X_mean_ = self.X_samples_.mean(axis=(0, 1))
        self.X_var_ = self.X_samples_.var(axis=(0, 1))
        self.history_ = np.arange(2 * 6, dtype=float).reshape(2, 6)
        self.n_iter_, self.converged_, self.n_features_in_ = 6, False, D
        self.relevance_ = np.array([2.0, 1.0])
        self.assignments_ = np.eye(D, 3)
        return self
    return fit


def test_counts_layer_libsize_offsets_and_sampled_results(monkeypatch):
    counts = np.array([[1, 3, 0], [0, 2, 2], [5, 5, 0], [4, 0, 4]], dtype=float)
    adata = anndata.AnnData(sparse.csr_matrix(np.log1p(counts)),              # normalised X
                            obs={"day": [0.0, 1.0, 2.0, 3.0]},
                            layers={"counts": sparse.csr_matrix(counts)})
    adata.obs_names = [f"cell{i}" for i in range(4)]
    seen = {}
    monkeypatch.setattr(gplvm.RFLVM, "fit", _fake_rflvm_fit(seen))
    model = gplvm.RFLVM(likelihood="poisson", burn_in=2)
    gad.fit(adata, model, layer="counts", times="day")
    np.testing.assert_array_equal(seen["Y"], counts)
    np.testing.assert_array_equal(seen["times"], [0.0, 1.0, 2.0, 3.0])
    exposure = np.exp(seen["offset"])                 # proportional to the totals, mean 1
    np.testing.assert_allclose(exposure, np.array([4, 4, 10, 8]) / 6.5, rtol=1e-14)
    assert np.array_equal(adata.obsm["X_gplvm"], model.X_mean_)
    assert np.array_equal(adata.obsm["X_gplvm_sd"], np.sqrt(model.X_var_))
    assert "X_gplvm_var" not in adata.obsm
    np.testing.assert_array_equal(adata.varm["X_gplvm_assignments"], np.eye(3, 3))
    summary = adata.uns["X_gplvm"]["summary"]
    assert summary["log_likelihood"] == np.mean(model.history_[:, 2:])    # after burn-in
    assert summary["n_iter"] == 6 and summary["converged"] is False
    assert adata.uns["X_gplvm"]["settings"]["likelihood"] == "poisson"
    assert adata.uns["X_gplvm"]["offset"] == {"kind": "libsize", "mean_library_size": 6.5}

    gad.fit(adata, gplvm.RFLVM(likelihood="bernoulli"), layer="counts", key_added="b")
    assert seen["offset"] is None                     # no library size for a non-rate model
    gad.fit(adata, gplvm.RFLVM(likelihood="poisson"), offset=None, key_added="c")
    assert seen["offset"] is None
    gad.fit(adata, gplvm.RFLVM(likelihood="poisson"), offset="day", key_added="d")
    np.testing.assert_array_equal(seen["offset"], [0.0, 1.0, 2.0, 3.0])
    assert "offset" not in adata.uns["d"]             # given offsets: nothing to keep


def test_library_size_offsets_of_new_rows_use_the_fits_mean_total():
    counts = np.array([[1.0, 3.0], [0.0, 2.0], [5.0, np.nan]])      # totals 4, 2, 5
    np.testing.assert_allclose(gad.library_size_offset(counts), np.log([12 / 11, 6 / 11, 15 / 11]),
                               rtol=0, atol=1e-15)
    # a new row among the fit's rows: its own total over the fit's mean total, 11/3
    np.testing.assert_allclose(gad.library_size_offset(counts[:1], mean_total=11 / 3),
                               np.log([12 / 11]), rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="mean_total=0.0"):
        gad.library_size_offset(counts, mean_total=0.0)


@pytest.mark.shared_data
def test_latent_plot_of_an_oil_flow_fit_shows_the_three_regimes(reference, tmp_path):
    """Oil flow (10 samples of each flow regime, Bishop & James 1993) fitted through the bridge
    with the regimes in obs, drawn by gplvm.plot.latent: the two most relevant dimensions, one
    scatter of means per regime in its own colour holding exactly that regime's latent means,
    ±2 sd ellipses in the colour of their row, and a PNG written with no display."""
    from gplvm import plot
    from gplvm.data import load_oil_flow

    oil = load_oil_flow()
    rows = np.concatenate([np.flatnonzero(oil.labels == k)[:N_CELLS // 3] for k in range(3)])
    regime = np.asarray(oil.label_names)[oil.labels[rows]]
    adata = anndata.AnnData(oil.Y[rows], obs={"regime": regime})
    model = gad.fit(adata, _bgplvm())                   # the reference's shapes: no compiling
    ax = plot.latent(model, labels=adata.obs["regime"])
    q = np.argsort(-model.relevance_)[:2]
    # the first line names the dimension (the second gives its relevance rank and value)
    assert (ax.get_xlabel().splitlines()[0], ax.get_ylabel().splitlines()[0]) == (
        f"latent dimension {q[0]}", f"latent dimension {q[1]}")
    names = sorted(set(regime))
    assert names == ["annular", "homogeneous", "stratified"]
    # one entry per regime, then (issue 32) the line saying what the ellipses are
    assert [t.get_text() for t in ax.get_legend().get_texts()][:3] == names
    means = [c for c in ax.collections if c.get_gid() == "means"]
    colour = {}
    for name, scatter in zip(names, means):
        np.testing.assert_array_equal(scatter.get_offsets(), model.X_mean_[regime == name][:, q])
        colour[name] = tuple(scatter.get_facecolor()[0])
    assert sum(len(c.get_offsets()) for c in means) == N_CELLS and len(set(colour.values())) == 3
    ellipses = [c for c in ax.collections if c.get_gid() == "uncertainty"][0]
    np.testing.assert_array_equal(ellipses.get_offsets(), model.X_mean_[:, q])
    np.testing.assert_allclose(ellipses.get_facecolor()[:, :3],
                               [colour[r][:3] for r in regime])
    ax.figure.savefig(tmp_path / "oil.png")
    assert (tmp_path / "oil.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("call, message", [
    (lambda a: gad.fit(a, _bgplvm(), layer="counts"), "no layer 'counts'"),
    (lambda a: gad.fit(a, _bgplvm(), times="age"), "'age' is not a column of adata.obs"),
    (lambda a: gad.fit(a, _bgplvm(), offset="libsize"), "offset= does not apply to Bayes"),
    (lambda a: gad.fit(a.X, _bgplvm()), "adata is a ndarray; give an anndata.AnnData"),
    (lambda a: gad.fit(anndata.AnnData(np.zeros((3, 2))), gplvm.RFLVM(likelihood="poisson")),
     "3 rows have no counts"),
])
def test_bad_input_is_refused_before_fitting(call, message, monkeypatch):
    def no_bgplvm_fit(self, Y, y=None, *, times=None, groups=None):     # the signatures
        raise AssertionError("fit ran")

    def no_rflvm_fit(self, Y, y=None, *, times=None, offset=None, n_trials=None):
        raise AssertionError("fit ran")
    monkeypatch.setattr(gplvm.BayesianGPLVM, "fit", no_bgplvm_fit)
    monkeypatch.setattr(gplvm.RFLVM, "fit", no_rflvm_fit)
    with pytest.raises(ValueError, match=message):
        call(anndata.AnnData(np.ones((4, 3))))


def test_sparse_matrix_too_large_to_densify(monkeypatch):
    monkeypatch.setattr(gad, "MAX_DENSE_ENTRIES", 11)
    adata = anndata.AnnData(sparse.csr_matrix(np.ones((4, 3))))
    with pytest.raises(ValueError, match="4 x 3 entries, too many to densify.*highly variable"):
        gad.fit(adata, _bgplvm())


def test_missing_anndata_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "anndata", None)       # import anndata raises ImportError
    with pytest.raises(ImportError, match=r'pip install "gplvm\[anndata\]"'):
        gad.fit(object(), _bgplvm())

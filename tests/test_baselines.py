"""Baselines: PPCA-EM against its closed form and planted structure; the sklearn wrappers."""

import numpy as np
import pytest
from scipy.linalg import subspace_angles
from sklearn import decomposition
from sklearn.datasets import make_s_curve as sk_make_s_curve
from sklearn.exceptions import NotFittedError

from gplvm import baselines, metrics


def _low_rank(seed=0, N=200, D=15, Q=3, noise=0.1):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((D, Q))
    Y = rng.standard_normal((N, Q)) @ W.T + 5 * rng.standard_normal(D)
    return Y + noise * rng.standard_normal((N, D)), W, rng


def _with_missing(Y, rng, frac=0.2):
    mask = rng.uniform(size=Y.shape) < frac
    return np.where(mask, np.nan, Y), mask


def test_ppca_on_complete_data_is_the_closed_form_mle():
    # Tipping & Bishop (1999), eqs. 7-8: noise_var = mean of the discarded covariance
    # eigenvalues, W W^T = U_Q (Lambda_Q - noise_var I) U_Q^T, mu = sample mean.
    Y, _, _ = _low_rank(noise=0.3)
    model = baselines.PPCA(3, tol=1e-12).fit(Y)
    lam, U = np.linalg.eigh(np.cov(Y.T, bias=True))
    lam, U = lam[::-1], U[:, ::-1]
    s2 = lam[3:].mean()
    assert model.noise_var_ == pytest.approx(s2, rel=1e-8)
    np.testing.assert_allclose(model.components_ @ model.components_.T,
                               U[:, :3] @ np.diag(lam[:3] - s2) @ U[:, :3].T, atol=1e-8)
    np.testing.assert_allclose(model.mean_, Y.mean(0), atol=1e-12)


def test_ppca_em_with_missing_entries_recovers_the_subspace_and_imputes():
    Y, W, rng = _low_rank()
    Y_missing, mask = _with_missing(Y, rng)
    model = baselines.PPCA(3).fit(Y_missing)
    assert model.X_mean_.shape == (200, 3) and model.X_cov_.shape == (200, 3, 3)
    assert np.all(np.diff(model.history_) >= -1e-8 * np.abs(model.history_[1:]))  # EM ascends
    assert np.degrees(subspace_angles(model.components_, W)).max() < 3
    assert model.noise_var_ == pytest.approx(0.01, rel=0.3)
    Y_ppca = model.impute(Y_missing)
    Y_mean = baselines.ColumnMeanImputer().fit(Y_missing).impute(Y_missing)
    np.testing.assert_array_equal(Y_ppca[~mask], Y[~mask])  # observed entries untouched
    mse_ppca = metrics.imputation_mse(Y, Y_ppca, mask)
    assert mse_ppca < 0.05 * metrics.imputation_mse(Y, Y_mean, mask)
    assert mse_ppca < 5 * 0.01  # of the order of the noise variance


def test_ppca_transforms_and_imputes_new_partial_rows():
    Y, _, rng = _low_rank(seed=1)
    model = baselines.PPCA(3).fit(Y[:150])
    Y_new, mask = _with_missing(Y[150:], rng, frac=0.3)
    assert model.transform(Y_new).shape == (50, 3)
    assert metrics.imputation_mse(Y[150:], model.impute(Y_new), mask) < 0.1


def test_column_mean_imputer_hand_case():
    Y = np.array([[1.0, np.nan], [3.0, 4.0], [np.nan, 8.0]])
    np.testing.assert_array_equal(baselines.ColumnMeanImputer().fit(Y).impute(Y),
                                  [[1.0, 6.0], [3.0, 4.0], [2.0, 8.0]])


def test_pca_matches_sklearn_and_reconstructs_rank_two_data():
    rng = np.random.default_rng(2)
    Y = rng.standard_normal((40, 2)) @ rng.standard_normal((2, 6)) + 1.0
    pca = baselines.PCA(2)
    X = pca.fit_transform(Y)
    np.testing.assert_allclose(np.abs(X), np.abs(decomposition.PCA(2).fit_transform(Y)),
                               atol=1e-10)
    np.testing.assert_allclose(pca.inverse_transform(X), Y, atol=1e-10)


def test_nmf_gives_non_negative_latents_and_rejects_negative_data():
    rng = np.random.default_rng(3)
    Y = rng.uniform(size=(30, 2)) @ rng.uniform(size=(2, 8))
    X = baselines.NMF(2).fit_transform(Y)
    assert X.shape == (30, 2) and np.all(X >= 0)
    with pytest.raises(ValueError, match="non-negative"):
        baselines.NMF(2).fit(Y - 1)


def test_isomap_unrolls_the_s_curve():
    Y, t = sk_make_s_curve(400, random_state=0)
    X = baselines.Isomap(2, n_neighbors=10).fit_transform(Y)
    assert X.shape == (400, 2)
    assert metrics.affine_r2(X, t[:, None]) > 0.9


@pytest.mark.parametrize("model", [baselines.PCA(2), baselines.NMF(2), baselines.Isomap(2)])
def test_complete_data_baselines_reject_nan(model):
    Y = np.ones((10, 4))
    Y[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.fit(Y)


def test_bad_arguments_and_unfitted_use():
    with pytest.raises(ValueError, match="n_components"):
        baselines.PPCA(10).fit(np.ones((5, 3)))
    with pytest.raises(ValueError, match="no observed entry"):
        baselines.PPCA(1).fit(np.array([[1.0, np.nan], [2.0, np.nan], [3.0, np.nan]]))
    with pytest.raises(NotFittedError):
        baselines.PPCA(2).impute(np.ones((3, 3)))
    with pytest.raises(NotFittedError):
        baselines.ColumnMeanImputer().impute(np.ones((3, 3)))

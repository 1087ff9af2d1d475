"""Metrics against hand-computed cases and reference implementations."""

import numpy as np
import pytest
from scipy.spatial import procrustes
from scipy.stats import norm
from sklearn.model_selection import KFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier

from gplvm import metrics


def _clusters(rng, n_per=30):
    centres = np.array([[0.0, 0.0], [20.0, 0.0], [0.0, 20.0]])
    X = np.vstack([c + rng.standard_normal((n_per, 2)) for c in centres])
    return X, np.repeat([0, 1, 2], n_per)


def test_knn_on_separable_clusters_is_perfect():
    X, y = _clusters(np.random.default_rng(0))
    assert metrics.knn_accuracy(X, y) == 1.0
    assert metrics.loo_1nn_errors(X, y) == 0


def test_knn_matches_sklearn_cross_validation():
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((60, 3)), rng.integers(0, 2, 60)
    expected = cross_val_score(KNeighborsClassifier(1), X, y,
                               cv=KFold(5, shuffle=True, random_state=3)).mean()
    assert metrics.knn_accuracy(X, y, random_state=3) == pytest.approx(expected)
    assert 0.2 < metrics.knn_accuracy(X, y) < 0.8  # random labels: near chance


def test_loo_1nn_errors_hand_cases():
    # Pairs (0, 1), (10, 11), ... with opposite labels: every point's neighbour is wrong.
    X = np.array([0, 1, 10, 11, 20, 21.0])[:, None]
    assert metrics.loo_1nn_errors(X, [0, 1, 0, 1, 0, 1]) == 6
    # A: 0, 1, 2, 8.9; B: 10, 11.2.  8.9 -> 10 (B, wrong); 10 -> 8.9 (A, wrong); rest right.
    X = np.array([0, 1, 2, 8.9, 10, 11.2])[:, None]
    labels = np.array([0, 0, 0, 0, 1, 1])
    assert metrics.loo_1nn_errors(X, labels) == 2
    assert metrics.loo_1nn_errors(X, labels, chunk_size=4) == 2


def test_affine_r2_is_one_for_an_affine_image_of_the_truth():
    rng = np.random.default_rng(2)
    X_true = rng.standard_normal((50, 2))
    X_est = X_true @ np.array([[2.0, 0.5], [-1.0, 3.0]]) + np.array([5.0, -7.0])
    assert metrics.affine_r2(X_est, X_true) == pytest.approx(1.0)
    extra = np.hstack([X_est, rng.standard_normal((50, 1))])  # more estimated dims: still 1
    assert metrics.affine_r2(extra, X_true) == pytest.approx(1.0)
    assert metrics.affine_r2(rng.standard_normal((50, 2)), X_true) < 0.3


def test_affine_r2_hand_case_and_averaging():
    # x = (-1, 0, 1); e = (1, -2, 1)/sqrt(3) is orthogonal to 1 and x with |e|^2 = 2 = |x|^2,
    # so regressing x on [1, x + e] leaves R^2 = |x|^2 / (|x|^2 + |e|^2) = 1/2.
    x = np.array([-1.0, 0.0, 1.0])
    e = np.array([1.0, -2.0, 1.0]) / np.sqrt(3)
    X_est = (x + e)[:, None]
    assert metrics.affine_r2(X_est, x[:, None]) == pytest.approx(0.5)
    # Columns [x + e (R^2 = 1, SST = 4), x (R^2 = 1/2, SST = 2, SSE = 1)].
    X_true = np.column_stack([x + e, x])
    assert metrics.affine_r2(X_est, X_true) == pytest.approx(0.75)
    assert metrics.affine_r2(X_est, X_true, "variance_weighted") == pytest.approx(5 / 6)
    # Procrustes in 1-D is the squared correlation: also 1/2 here.
    assert metrics.procrustes_r2(X_est, x[:, None]) == pytest.approx(0.5)


def test_procrustes_r2_matches_scipy_and_is_stricter_than_affine():
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((40, 3)), rng.standard_normal((40, 3))
    assert metrics.procrustes_r2(A, B) == pytest.approx(1 - procrustes(B, A)[2])
    theta = 0.7
    R = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    X = rng.standard_normal((40, 2))
    assert metrics.procrustes_r2(3 * X @ R + 1, X) == pytest.approx(1.0)
    stretched = X * np.array([1.0, 10.0])
    assert metrics.affine_r2(stretched, X) == pytest.approx(1.0)
    assert metrics.procrustes_r2(stretched, X) < 0.9


def test_rmse_and_imputation_mse_hand_case():
    Y = np.array([[1.0, 2.0], [3.0, 4.0]])
    Y_hat = np.array([[1.0, 0.0], [3.0, 7.0]])
    mask = np.array([[False, True], [False, True]])
    assert metrics.imputation_mse(Y, Y_hat, mask) == pytest.approx((4 + 9) / 2)
    assert metrics.rmse(Y, Y_hat) == pytest.approx(np.sqrt(13 / 4))
    assert metrics.rmse(Y, Y_hat, mask) == pytest.approx(np.sqrt(13 / 2))
    Y_nan = np.where(mask, Y_hat, np.nan)  # NaN outside the mask is ignored
    assert metrics.imputation_mse(Y, Y_nan, mask) == pytest.approx(6.5)


def test_nlpd_from_log_densities_and_from_gaussians():
    rng = np.random.default_rng(4)
    y, mean, var = rng.standard_normal(20), rng.standard_normal(20), rng.uniform(0.5, 2, 20)
    lp = norm.logpdf(y, mean, np.sqrt(var))
    np.testing.assert_allclose(metrics.gaussian_log_density(y, mean, var), lp)
    assert metrics.mean_nlpd(lp) == pytest.approx(-lp.mean())
    assert metrics.median_nlpd(lp) == pytest.approx(np.median(-lp))
    assert metrics.mean_nlpd(y=y, mean=mean, var=var) == pytest.approx(-lp.mean())
    mask = np.arange(20) < 5
    assert metrics.mean_nlpd(lp, mask=mask) == pytest.approx(-lp[:5].mean())


@pytest.mark.parametrize("call, match", [
    (lambda: metrics.knn_accuracy(np.zeros((5, 2)), [0, 1, 0]), "rows"),
    (lambda: metrics.knn_accuracy(np.zeros((5, 2)), np.eye(5)), "one-hot"),
    (lambda: metrics.knn_accuracy(np.zeros((5, 2)), np.zeros(5), n_splits=6), "n_splits"),
    (lambda: metrics.affine_r2(np.ones((4, 1)), np.ones((4, 1))), "constant"),
    (lambda: metrics.imputation_mse(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2))), "boolean"),
    (lambda: metrics.rmse(np.ones((2, 2)), np.ones((2, 3))), "shape"),
    (lambda: metrics.mean_nlpd(np.zeros(3), y=np.zeros(3), mean=np.zeros(3), var=1.0), "not both"),
    (lambda: metrics.gaussian_log_density(np.zeros(2), np.zeros(2), -1.0), "positive"),
])
def test_metrics_reject_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()

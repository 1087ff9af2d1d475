"""Evaluation metrics used by the papers' experiments.

* latent-space quality against labels: :func:`knn_accuracy` (seed 000, §4.1, Table 1) and
  :func:`loo_1nn_errors` (the oil-flow error counts of the Bayesian GPLVM papers);
* latent-space quality against a known truth: :func:`affine_r2` (the RFLVM reference code's
  ``r_squared``) and :func:`procrustes_r2`;
* prediction: :func:`rmse`, :func:`imputation_mse` (seed 000, §4.2, Table 3),
  :func:`mean_nlpd` / :func:`median_nlpd` with :func:`gaussian_log_density`.

All functions take NumPy array-likes (:data:`gplvm.typing.UserArrayLike`; the shapes are given
in each docstring), validate them first (``ValueError`` naming the fix) and return Python floats
or ints.
"""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import KFold
from sklearn.neighbors import KNeighborsClassifier

from gplvm._validation import as_2d_float, check_consistent_length
from gplvm.typing import Bool, Float, Shaped, UserArrayLike

__all__ = ["knn_accuracy", "loo_1nn_errors", "affine_r2", "procrustes_r2", "rmse",
           "imputation_mse", "gaussian_log_density", "mean_nlpd", "median_nlpd"]


def _labels(labels: UserArrayLike, X: Float[np.ndarray, "N Q"], name: str = "labels"
            ) -> Shaped[np.ndarray, " N"]:
    y = np.asarray(labels)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D of shape (n_samples,); got shape {y.shape} "
                         f"(convert one-hot labels with labels.argmax(axis=1))")
    check_consistent_length(X, y, ("X", name))
    return y


def knn_accuracy(X: UserArrayLike, labels: UserArrayLike, n_neighbors: int = 1, n_splits: int = 5,
                 random_state: int | None = 0) -> float:
    """Mean K-nearest-neighbour classification accuracy over shuffled K-fold splits.

    Seed 000, §4.1 and Table 1: "K-nearest neighbors (KNN) classification on X-hat with K = 1
    ... using 5-fold cross validation".  As in the reference code (``metrics.knn_classify``), the
    folds are plain shuffled ``KFold`` splits (not stratified), a Euclidean KNN classifier is
    fitted on four folds and scored on the fifth, and the mean accuracy over folds is returned.
    (The paper's ± is the spread over five model fits, not over folds.)

    Args:
        X: latent points, shape (N, Q).
        labels: class of each row, shape (N,).
        n_neighbors: K.
        n_splits: the number of folds (2 <= n_splits <= N).
        random_state: seed of the fold shuffle.

    Returns:
        Mean accuracy in [0, 1].
    """
    X = as_2d_float(X, "X")
    y = _labels(labels, X)
    if not 2 <= n_splits <= len(X):
        raise ValueError(f"n_splits={n_splits} must be between 2 and the number of rows "
                         f"({len(X)})")
    kf = KFold(n_splits=n_splits, shuffle=True, random_state=random_state)
    accs = []
    for train, test in kf.split(X):
        if n_neighbors > len(train):
            raise ValueError(f"n_neighbors={n_neighbors} exceeds the {len(train)} training "
                             f"rows of a fold; lower n_neighbors or n_splits")
        clf = KNeighborsClassifier(n_neighbors=n_neighbors).fit(X[train], y[train])
        accs.append(np.mean(clf.predict(X[test]) == y[test]))
    return float(np.mean(accs))


def loo_1nn_errors(X: UserArrayLike, labels: UserArrayLike, chunk_size: int = 1024) -> int:
    """Number of leave-one-out 1-nearest-neighbour classification errors.

    Each point is classified by the label of its nearest *other* point (Euclidean distance);
    this is the "nearest-neighbour errors in latent space" count reported for oil flow by
    Lawrence (2005) and Titsias & Lawrence (2010).  Ties go to the lowest row index.

    Args:
        X: latent points, shape (N, Q), N >= 2.
        labels: class of each row, shape (N,).
        chunk_size: rows per block of the distance matrix (memory is chunk_size x N).

    Returns:
        The number of misclassified points, an int in [0, N].
    """
    X = as_2d_float(X, "X", min_rows=2)
    y = _labels(labels, X)
    sq = np.sum(X**2, axis=1)
    errors = 0
    for start in range(0, len(X), chunk_size):
        rows = slice(start, min(start + chunk_size, len(X)))
        d2 = sq[rows, None] + sq[None, :] - 2.0 * X[rows] @ X.T
        d2[np.arange(d2.shape[0]), np.arange(rows.start, rows.stop)] = np.inf  # leave one out
        errors += int(np.sum(y[np.argmin(d2, axis=1)] != y[rows]))
    return errors


def _lstsq_affine(X_est: Float[np.ndarray, "N Q_est"], X_true: Float[np.ndarray, "N Q_true"]
                  ) -> Float[np.ndarray, "N Q_true"]:
    """The least-squares affine image of X_est onto X_true: ``[1, X_est] W``."""
    A = np.hstack([np.ones((len(X_est), 1)), X_est])
    W, *_ = np.linalg.lstsq(A, X_true, rcond=None)
    return A @ W


def affine_r2(X_est: UserArrayLike, X_true: UserArrayLike,
              multioutput: str = "uniform_average") -> float:
    """Coefficient of determination of X_true after the best affine map of X_est onto it.

    The latent space of a GPLVM is identified only up to such maps, so ``X_est`` is first
    aligned by least squares, ``X_hat = [1, X_est] W``, ``W = argmin ||X_true - [1, X_est] W||``,
    exactly as the RFLVM reference code's ``r_squared`` (which then calls scikit-learn's
    ``r2_score``). With ``SSE_q = sum_n (X_true - X_hat)_nq^2`` and ``SST_q`` the centred sum of
    squares of column q:

    * ``"uniform_average"`` (default, the reference's): ``mean_q (1 - SSE_q / SST_q)``;
    * ``"variance_weighted"``: ``1 - sum_q SSE_q / sum_q SST_q``.

    Args:
        X_est: estimated latent points, shape (N, Q_est).
        X_true: true latent points, shape (N, Q_true); no constant column.
        multioutput: how the per-dimension R^2 values are combined (see above).

    Returns:
        R^2 in [0, 1] (1 iff X_true is an affine function of X_est).
    """
    X_est = as_2d_float(X_est, "X_est", min_rows=2)
    X_true = as_2d_float(X_true, "X_true", min_rows=2)
    check_consistent_length(X_est, X_true, ("X_est", "X_true"))
    if multioutput not in ("uniform_average", "variance_weighted"):
        raise ValueError(f"multioutput={multioutput!r}; use 'uniform_average' or "
                         f"'variance_weighted'")
    sst = np.sum((X_true - X_true.mean(axis=0))**2, axis=0)
    if np.any(sst == 0):
        raise ValueError("X_true has a constant column; R^2 is undefined for it, drop it")
    sse = np.sum((X_true - _lstsq_affine(X_est, X_true))**2, axis=0)
    if multioutput == "uniform_average":
        return float(np.mean(1.0 - sse / sst))
    return float(1.0 - sse.sum() / sst.sum())


def procrustes_r2(X_est: UserArrayLike, X_true: UserArrayLike) -> float:
    """R^2 of X_true after the best translation, rotation/reflection and isotropic scaling of X_est.

    With both centred, ``min_{s, R: R R^T = I} ||X_true - s X_est R||_F^2
    = ||X_true||^2 - ||X_est^T X_true||_*^2 / ||X_est||^2`` (the nuclear norm ``||.||_*`` is the
    sum of singular values; Schönemann 1966), hence

    .. math::
        R^2 = \\frac{\\|X_{est}^\\top X_{true}\\|_*^2}{\\|X_{est}\\|_F^2 \\|X_{true}\\|_F^2},

    which equals ``1 - scipy.spatial.procrustes(...)[2]`` when the shapes agree; unequal
    latent dimensions are allowed (the smaller one is implicitly zero-padded). Stricter than
    :func:`affine_r2`: it does not forgive anisotropic stretching or shear.

    Args:
        X_est: estimated latent points, shape (N, Q_est).
        X_true: true latent points, shape (N, Q_true).

    Returns:
        R^2 in [0, 1].
    """
    X_est = as_2d_float(X_est, "X_est", min_rows=2)
    X_true = as_2d_float(X_true, "X_true", min_rows=2)
    check_consistent_length(X_est, X_true, ("X_est", "X_true"))
    A = X_est - X_est.mean(axis=0)
    B = X_true - X_true.mean(axis=0)
    na, nb = np.sum(A**2), np.sum(B**2)
    if na == 0 or nb == 0:
        raise ValueError("procrustes_r2 needs X_est and X_true that are not constant")
    nuclear = np.sum(np.linalg.svd(A.T @ B, compute_uv=False))
    return float(nuclear**2 / (na * nb))


def _pair(Y_true: UserArrayLike, Y_pred: UserArrayLike,
          names: tuple[str, str] = ("Y_true", "Y_pred")
          ) -> tuple[Float[np.ndarray, "*shape"], Float[np.ndarray, "*shape"]]:
    a = np.asarray(Y_true, dtype=float)
    b = np.asarray(Y_pred, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"{names[0]} has shape {a.shape} but {names[1]} has shape {b.shape}; "
                         f"they must match")
    return a, b


def _mask(mask: UserArrayLike, shape: tuple[int, ...]) -> Bool[np.ndarray, "..."]:
    m = np.asarray(mask)
    if m.dtype != bool:
        raise ValueError(f"mask must be a boolean array (True = held out); got dtype {m.dtype}")
    if m.shape != shape:
        raise ValueError(f"mask has shape {m.shape} but the data have shape {shape}")
    if not m.any():
        raise ValueError("mask selects no entries; it must mark at least one held-out entry")
    return m


def rmse(Y_true: UserArrayLike, Y_pred: UserArrayLike, mask: UserArrayLike | None = None
         ) -> float:
    """Root mean squared error ``sqrt(mean((Y_true - Y_pred)^2))`` over all or masked entries.

    Args:
        Y_true, Y_pred: arrays of one shape, finite where scored.
        mask: optional boolean array of that shape; only True entries are scored.
    """
    return float(np.sqrt(_mse(Y_true, Y_pred, mask)))


def _mse(Y_true: UserArrayLike, Y_pred: UserArrayLike, mask: UserArrayLike | None) -> float:
    a, b = _pair(Y_true, Y_pred)
    if mask is not None:
        m = _mask(mask, a.shape)
        a, b = a[m], b[m]
    if a.size == 0:
        raise ValueError("Y_true is empty; nothing to score")
    err = a - b
    if not np.all(np.isfinite(err)):
        raise ValueError(f"{int(np.sum(~np.isfinite(err)))} scored entries are NaN or infinite; "
                         f"score only imputed entries (pass mask) or fill them first")
    return float(np.mean(err**2))


def imputation_mse(Y_true: UserArrayLike, Y_imputed: UserArrayLike, mask: UserArrayLike
                   ) -> float:
    """Mean squared error over the held-out entries (seed 000, §4.2, Table 3).

    Seed 000 holds out 20% of the entries ``y_ij``, imputes them by their posterior expected
    value and reports ``mean_{(i,j) in mask} (y_ij - y_hat_ij)^2``.

    Args:
        Y_true: the complete data, shape (N, D).
        Y_imputed: the model's completion, shape (N, D) (NaN allowed outside the mask).
        mask: boolean (N, D), True where an entry was held out and imputed.
    """
    return _mse(Y_true, Y_imputed, mask)


def gaussian_log_density(y: UserArrayLike, mean: UserArrayLike, var: UserArrayLike
                         ) -> Float[np.ndarray, "..."]:
    """Elementwise ``log N(y | mean, var) = -0.5 (log(2 pi var) + (y - mean)^2 / var)``."""
    y, mean = _pair(y, mean, ("y", "mean"))
    var = np.broadcast_to(np.asarray(var, dtype=float), y.shape)
    if not np.all(var > 0):
        raise ValueError("var must be positive everywhere (a predictive variance)")
    return -0.5 * (np.log(2.0 * np.pi * var) + (y - mean)**2 / var)


def _nlpd(log_density: UserArrayLike | None, y: UserArrayLike | None, mean: UserArrayLike | None,
          var: UserArrayLike | None, mask: UserArrayLike | None) -> Float[np.ndarray, " n"]:
    if log_density is None:
        if y is None or mean is None or var is None:
            raise ValueError("pass either log_density, or all of y, mean and var (Gaussian)")
        log_density = gaussian_log_density(y, mean, var)
    elif y is not None or mean is not None or var is not None:
        raise ValueError("pass either log_density or (y, mean, var), not both")
    lp = np.asarray(log_density, dtype=float)
    if mask is not None:
        lp = lp[_mask(mask, lp.shape)]
    lp = lp.ravel()
    if lp.size == 0 or np.any(np.isnan(lp)):
        raise ValueError("log predictive densities must be non-empty and not NaN")
    return -lp


def mean_nlpd(log_density: UserArrayLike | None = None, *, y: UserArrayLike | None = None,
              mean: UserArrayLike | None = None, var: UserArrayLike | None = None,
              mask: UserArrayLike | None = None) -> float:
    """Mean negative log predictive density, ``-mean_i log p(y_i | data)``.

    Either give the per-point log predictive densities (any shape; e.g. a Monte Carlo estimate
    ``logsumexp_s log p(y_i | theta_s) - log S`` from an MCMC model), or a Gaussian predictive
    ``y``, ``mean``, ``var`` (then :func:`gaussian_log_density` is used). ``mask`` restricts it
    to held-out entries.
    """
    return float(np.mean(_nlpd(log_density, y, mean, var, mask)))


def median_nlpd(log_density: UserArrayLike | None = None, *, y: UserArrayLike | None = None,
                mean: UserArrayLike | None = None, var: UserArrayLike | None = None,
                mask: UserArrayLike | None = None) -> float:
    """Median negative log predictive density; arguments as for :func:`mean_nlpd`.

    The median is robust to the few points whose density is tiny under a heavy-tailed error.
    """
    return float(np.median(_nlpd(log_density, y, mean, var, mask)))

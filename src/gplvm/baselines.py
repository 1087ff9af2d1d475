"""Baselines that the GPLVM estimators are compared against (seed 000, Tables 1 and 3).

Every baseline stores its arguments in ``__init__`` and offers ``fit(Y) -> self`` and
``fit_transform(Y) -> latent (N, n_components)``; the imputers (:class:`PPCA`,
:class:`ColumnMeanImputer`) add ``impute(Y)``, a copy of ``Y`` with its NaN entries filled.

* :class:`PCA`, :class:`NMF`, :class:`Isomap` wrap scikit-learn (complete data only);
* :class:`PPCA` is probabilistic PCA fitted by EM *with missing entries* (Tipping & Bishop 1999,
  extended to missing values as in Ilin & Raiko 2010, JMLR 11), the "probabilistic PCA
  imputer" of seed 000, §4.2;
* :class:`ColumnMeanImputer` fills every missing entry with its column's observed mean.
"""

from __future__ import annotations

import numpy as np
from sklearn import decomposition, manifold
from sklearn.exceptions import NotFittedError

from gplvm._validation import as_2d_float
from gplvm.typing import Bool, Float, UserArrayLike

# Public methods take any array-like Y (N, D) or X (N, Q) and validate it (ValueError); they
# return float64 NumPy arrays of the annotated shapes.

__all__ = ["PCA", "NMF", "Isomap", "PPCA", "ColumnMeanImputer"]


def _check_fitted(model, attribute: str) -> None:
    if not hasattr(model, attribute):
        raise NotFittedError(f"this {type(model).__name__} is not fitted yet; call fit(Y) first")


def _check_n_components(n_components: object, Y: Float[np.ndarray, "N D"]) -> None:
    if isinstance(n_components, bool) or not isinstance(n_components, (int, np.integer)) \
            or not 1 <= n_components <= min(Y.shape):
        raise ValueError(f"n_components={n_components!r} must be an integer between 1 and "
                         f"min(n_samples, n_features) = {min(Y.shape)}")


class PCA:
    """Principal component analysis (scikit-learn's ``PCA``); latent = principal scores."""

    def __init__(self, n_components: int = 2):
        self.n_components = n_components

    def fit(self, Y: UserArrayLike) -> "PCA":
        Y = as_2d_float(Y, "Y", min_rows=2)
        _check_n_components(self.n_components, Y)
        self.estimator_ = decomposition.PCA(n_components=self.n_components).fit(Y)
        return self

    def transform(self, Y: UserArrayLike) -> Float[np.ndarray, "N Q"]:
        _check_fitted(self, "estimator_")
        return self.estimator_.transform(as_2d_float(Y, "Y"))

    def fit_transform(self, Y: UserArrayLike) -> Float[np.ndarray, "N Q"]:
        return self.fit(Y).transform(Y)

    def inverse_transform(self, X: UserArrayLike) -> Float[np.ndarray, "N D"]:
        _check_fitted(self, "estimator_")
        return self.estimator_.inverse_transform(as_2d_float(X, "X"))


class NMF:
    """Non-negative matrix factorisation ``Y ~ X H`` (scikit-learn's ``NMF``; Lee & Seung 1999).

    The latent is the non-negative score matrix X (N, n_components). Y must be non-negative.
    """

    def __init__(self, n_components: int = 2, max_iter: int = 1000, random_state: int = 0):
        self.n_components = n_components
        self.max_iter = max_iter
        self.random_state = random_state

    def fit(self, Y: UserArrayLike) -> "NMF":
        self.fit_transform(Y)
        return self

    def fit_transform(self, Y: UserArrayLike) -> Float[np.ndarray, "N Q"]:
        Y = self._validate(Y)
        _check_n_components(self.n_components, Y)
        self.estimator_ = decomposition.NMF(n_components=self.n_components, init="nndsvda",
                                            max_iter=self.max_iter,
                                            random_state=self.random_state)
        return self.estimator_.fit_transform(Y)

    def transform(self, Y: UserArrayLike) -> Float[np.ndarray, "N Q"]:
        _check_fitted(self, "estimator_")
        return self.estimator_.transform(self._validate(Y))

    def inverse_transform(self, X: UserArrayLike) -> Float[np.ndarray, "N D"]:
        _check_fitted(self, "estimator_")
        return self.estimator_.inverse_transform(as_2d_float(X, "X"))

    @staticmethod
    def _validate(Y: UserArrayLike) -> Float[np.ndarray, "N D"]:
        Y = as_2d_float(Y, "Y")
        if np.any(Y < 0):
            raise ValueError(f"Y has {int(np.sum(Y < 0))} negative entries; NMF needs "
                             f"non-negative data (counts, pixel intensities)")
        return Y


class Isomap:
    """Isomap embedding (scikit-learn's ``Isomap``; Tenenbaum et al. 2000)."""

    def __init__(self, n_components: int = 2, n_neighbors: int = 5):
        self.n_components = n_components
        self.n_neighbors = n_neighbors

    def fit(self, Y: UserArrayLike) -> "Isomap":
        self.fit_transform(Y)
        return self

    def fit_transform(self, Y: UserArrayLike) -> Float[np.ndarray, "N Q"]:
        Y = as_2d_float(Y, "Y", min_rows=2)
        _check_n_components(self.n_components, Y)
        if not 1 <= self.n_neighbors < len(Y):
            raise ValueError(f"n_neighbors={self.n_neighbors} must be between 1 and "
                             f"n_samples - 1 = {len(Y) - 1}")
        self.estimator_ = manifold.Isomap(n_neighbors=self.n_neighbors,
                                          n_components=self.n_components)
        return self.estimator_.fit_transform(Y)

    def transform(self, Y: UserArrayLike) -> Float[np.ndarray, "N Q"]:
        _check_fitted(self, "estimator_")
        return self.estimator_.transform(as_2d_float(Y, "Y"))


class ColumnMeanImputer:
    """Fill each missing entry with the mean of its column's observed entries."""

    def fit(self, Y: UserArrayLike) -> "ColumnMeanImputer":
        Y = as_2d_float(Y, "Y", allow_nan=True)
        empty = np.isnan(Y).all(axis=0)
        if empty.any():
            raise ValueError(f"Y has {int(empty.sum())} columns with no observed entry "
                             f"(columns {np.flatnonzero(empty)[:5].tolist()}); drop them")
        self.mean_ = np.nanmean(Y, axis=0)
        return self

    def impute(self, Y: UserArrayLike) -> Float[np.ndarray, "N D"]:
        _check_fitted(self, "mean_")
        Y = np.array(as_2d_float(Y, "Y", allow_nan=True))
        if Y.shape[1] != len(self.mean_):
            raise ValueError(f"Y has {Y.shape[1]} columns; the imputer was fitted on "
                             f"{len(self.mean_)}")
        return np.where(np.isnan(Y), self.mean_, Y)


class PPCA:
    """Probabilistic PCA fitted by EM with missing entries (Tipping & Bishop 1999).

    Model: ``y_n = W x_n + mu + eps_n``, ``x_n ~ N(0, I_Q)``, ``eps_n ~ N(0, noise_var I_D)``;
    only the observed entries O_n of each row enter the likelihood.  With ``W_o``, ``mu_o`` the
    rows of W, mu for O_n, the EM iteration (from the expected complete-data log-likelihood;
    Ilin & Raiko 2010 give the same updates) is

    * E-step: ``Sigma_n = noise_var (noise_var I + W_o^T W_o)^{-1}``,
      ``m_n = Sigma_n W_o^T (y_o - mu_o) / noise_var``;
    * M-step, column d over the rows O^d observing it:
      ``mu_d = mean_{n in O^d} (y_nd - w_d^T m_n)``,
      ``w_d = (sum_{O^d} m_n m_n^T + Sigma_n)^{-1} sum_{O^d} m_n (y_nd - mu_d)``,
      ``noise_var = mean_{(n,d) in O} [(y_nd - w_d^T m_n - mu_d)^2 + w_d^T Sigma_n w_d]``.

    Updating mu then W in turn makes this an ECM algorithm, so the observed-data
    log-likelihood (``history_``) never decreases.  ``impute`` fills a missing ``y_nd`` with
    ``E[y_nd | y_o] = w_d^T m_n + mu_d``, the exact conditional mean under the fitted model.

    Attributes (after ``fit``): ``X_mean_`` (N, Q) posterior means m_n, ``X_cov_`` (N, Q, Q),
    ``components_`` = W (D, Q), ``mean_`` = mu (D,), ``noise_var_``, ``history_`` (log-likelihood
    per iteration), ``n_iter_``, ``converged_``.

    Args:
        n_components: Q, the latent dimension.
        max_iter: the most EM iterations (EM converges slowly when the noise is small and many
            entries are missing; the imputations are usually settled long before).
        tol: stop when an iteration raises the log-likelihood by less than ``tol`` per observed
            entry.
        min_noise_var: floor on the noise variance (keeps the E-step well conditioned on data
            that are exactly low rank).
    """

    def __init__(self, n_components: int = 2, max_iter: int = 1000, tol: float = 1e-6,
                 min_noise_var: float = 1e-8):
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.min_noise_var = min_noise_var

    def fit(self, Y: UserArrayLike) -> "PPCA":
        Y = as_2d_float(Y, "Y", allow_nan=True, min_rows=2)
        _check_n_components(self.n_components, Y)
        obs = ~np.isnan(Y)
        if not obs.any(axis=0).all():
            raise ValueError(f"Y has columns with no observed entry (columns "
                             f"{np.flatnonzero(~obs.any(axis=0))[:5].tolist()}); drop them")
        O = obs.astype(float)
        Yz = np.where(obs, Y, 0.0)
        mu, W, s2 = self._initialise(Y, obs)
        history, converged = [], False
        for _ in range(self.max_iter):
            m, S, loglik = self._e_step(Yz, O, mu, W, s2)
            history.append(loglik)
            if len(history) > 1 and history[-1] - history[-2] <= self.tol * O.sum():
                converged = True
                break
            mu, W, s2 = self._m_step(Yz, O, m, S, W)
        self.mean_, self.components_, self.noise_var_ = mu, W, s2
        self.X_mean_, self.X_cov_, _ = self._e_step(Yz, O, mu, W, s2)
        self.history_, self.n_iter_, self.converged_ = np.array(history), len(history), converged
        return self

    def _initialise(self, Y: Float[np.ndarray, "N D"], obs: Bool[np.ndarray, "N D"]
                    ) -> tuple[Float[np.ndarray, " D"], Float[np.ndarray, "D Q"], float]:
        """Start from the closed-form maximum-likelihood PPCA of the mean-filled data.

        Tipping & Bishop (1999), eqs. 7-8: with ``lambda_1 >= ... >= lambda_D`` and ``U`` the
        eigen-pairs of the sample covariance, ``noise_var = mean(lambda_{Q+1..D})`` and
        ``W = U_Q (Lambda_Q - noise_var I)^{1/2}``; on complete data this *is* the optimum.
        """
        mu = np.nanmean(Y, axis=0)
        R = np.where(obs, Y - mu, 0.0)
        _, s, Vt = np.linalg.svd(R, full_matrices=False)
        Q, N, D = self.n_components, Y.shape[0], Y.shape[1]
        lam = s**2 / N                                          # covariance eigenvalues
        s2 = max(lam[Q:].sum() / max(D - Q, 1), self.min_noise_var, 1e-6 * lam[0])
        W = Vt[:Q].T * np.sqrt(np.maximum(lam[:Q] - s2, 0.0) + 1e-12 * lam[0])
        return mu, W, s2

    def _e_step(self, Yz: Float[np.ndarray, "N D"], O: Float[np.ndarray, "N D"],
                mu: Float[np.ndarray, " D"], W: Float[np.ndarray, "D Q"], s2: float
                ) -> tuple[Float[np.ndarray, "N Q"], Float[np.ndarray, "N Q Q"], float]:
        """Posterior of each x_n given its observed entries, and the observed log-likelihood."""
        Q = W.shape[1]
        A = s2 * np.eye(Q) + np.einsum("nd,dq,dr->nqr", O, W, W)   # noise_var I + W_o^T W_o
        L = np.linalg.cholesky(A)
        R = (Yz - mu) * O                                           # y_o - mu_o, zero elsewhere
        b = R @ W                                                   # W_o^T (y_o - mu_o)
        m = np.linalg.solve(A, b[..., None])[..., 0]
        S = s2 * np.linalg.inv(A)
        # log N(y_o | mu_o, W_o W_o^T + s2 I): by the matrix determinant lemma and Woodbury,
        # log|C| = (n_o - Q) log s2 + log|A|, r^T C^{-1} r = (r^T r - b^T A^{-1} b) / s2.
        n_o = O.sum(axis=1)
        logdet = (n_o - Q) * np.log(s2) + 2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(1)
        quad = (np.sum(R**2, axis=1) - np.sum(b * m, axis=1)) / s2
        loglik = -0.5 * np.sum(n_o * np.log(2.0 * np.pi) + logdet + quad)
        return m, S, float(loglik)

    def _m_step(self, Yz: Float[np.ndarray, "N D"], O: Float[np.ndarray, "N D"],
                m: Float[np.ndarray, "N Q"], S: Float[np.ndarray, "N Q Q"],
                W: Float[np.ndarray, "D Q"]
                ) -> tuple[Float[np.ndarray, " D"], Float[np.ndarray, "D Q"], float]:
        """Closed-form updates of mu, then W, then noise_var (ECM)."""
        n_d = O.sum(axis=0)
        mu = np.sum(O * (Yz - m @ W.T), axis=0) / n_d
        R = (Yz - mu) * O
        moments = m[:, :, None] * m[:, None, :] + S                 # E[x_n x_n^T], (N, Q, Q)
        B = np.einsum("nd,nqr->dqr", O, moments)
        W = np.linalg.solve(B, (R.T @ m)[..., None])[..., 0]
        resid = O * (Yz - m @ W.T - mu)**2
        trace = np.einsum("nd,dq,nqr,dr->", O, W, S, W)
        s2 = max((resid.sum() + trace) / O.sum(), self.min_noise_var)
        return mu, W, s2

    def transform(self, Y: UserArrayLike) -> Float[np.ndarray, "N Q"]:
        """Posterior means of the latents of (possibly partially observed) rows Y."""
        _check_fitted(self, "components_")
        Y = self._validate_new(Y)
        obs = ~np.isnan(Y)
        m, _, _ = self._e_step(np.where(obs, Y, 0.0), obs.astype(float), self.mean_,
                               self.components_, self.noise_var_)
        return m

    def fit_transform(self, Y: UserArrayLike) -> Float[np.ndarray, "N Q"]:
        return self.fit(Y).X_mean_

    def inverse_transform(self, X: UserArrayLike) -> Float[np.ndarray, "N D"]:
        """Predictive mean ``X W^T + mu`` of Y at latent points X (n, Q)."""
        _check_fitted(self, "components_")
        return as_2d_float(X, "X") @ self.components_.T + self.mean_

    def impute(self, Y: UserArrayLike) -> Float[np.ndarray, "N D"]:
        """A copy of Y whose NaN entries hold ``E[y_missing | y_observed]``."""
        Y = self._validate_new(Y)
        return np.where(np.isnan(Y), self.inverse_transform(self.transform(Y)), Y)

    def _validate_new(self, Y: UserArrayLike) -> Float[np.ndarray, "N D"]:
        _check_fitted(self, "components_")
        Y = as_2d_float(Y, "Y", allow_nan=True)
        if Y.shape[1] != len(self.mean_):
            raise ValueError(f"Y has {Y.shape[1]} columns; the model was fitted on "
                             f"{len(self.mean_)}")
        return Y

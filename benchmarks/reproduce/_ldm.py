"""A linear dynamical model with missing entries, fitted by EM: the "LDM" row of seed 000, Table 3.

Model (seed 000, eq. 11; Ghahramani & Hinton 1996):

.. math::

    x_1 \\sim N(\\mu_0, V_0), \\quad x_t = A x_{t-1} + r_t, \\; r_t \\sim N(0, Q_r), \\quad
    y_t = C x_t + d + s_t, \\; s_t \\sim N(0, \\mathrm{diag}(\\rho)).

A missing entry y_tj is dropped from the observation update: with the noise diagonal, the
likelihood of the observed entries of row t is the product over them, so the E-step (Kalman
filter in information form, Rauch-Tung-Striebel smoother) simply gives zero precision to a
missing entry, and the M-step regresses each column on the smoothed latents over the rows that
observe it.  EM on (x, y_obs) never decreases the observed-data log-likelihood.  A missing
entry is imputed by its posterior mean ``E[y_tj | Y_obs] = c_j E[x_t | Y_obs] + d_j``.

The E-step is one ``lax.scan`` per direction (one compilation per data shape); the M-step is
closed form.  This is a benchmark baseline, not part of the library.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import gplvm  # noqa: F401  (switches JAX to float64, in gplvm's one place)


class LDSParams(NamedTuple):
    A: jnp.ndarray       # (K, K) state transition
    Q_r: jnp.ndarray     # (K, K) state noise covariance
    C: jnp.ndarray       # (J, K) loadings
    d: jnp.ndarray       # (J,) output offsets
    rho: jnp.ndarray     # (J,) output noise variances
    mu0: jnp.ndarray     # (K,) initial state mean
    V0: jnp.ndarray      # (K, K) initial state covariance


def _filter(p: LDSParams, Y0, O):
    """Kalman filter; Y0 (T, J) with zeros at missing entries, O (T, J) 1 observed / 0 missing.

    Returns filtered means and covariances (T, K), (T, K, K), predicted ones, and the
    observed-data log-likelihood sum_t log N(y_t,obs; C_o m_pred + d_o, C_o P_pred C_o' + R_o).
    """
    K = p.A.shape[0]
    eye = jnp.eye(K)

    def step(carry, inputs):
        m_pred, P_pred, first = carry
        y, o = inputs
        m_pred = jnp.where(first, p.mu0, m_pred)
        P_pred = jnp.where(first, p.V0, P_pred)
        w = o / p.rho                                     # precision of each entry; 0 if missing
        e = (y - p.C @ m_pred - p.d) * o
        CtWC = p.C.T @ (w[:, None] * p.C)
        P_inv = jnp.linalg.inv(P_pred)
        Lam = P_inv + CtWC                                # posterior precision (information form)
        P_f = jnp.linalg.inv(Lam)
        P_f = 0.5 * (P_f + P_f.T)
        b = p.C.T @ (w * e)
        m_f = m_pred + P_f @ b
        # log N(e; 0, S), S = C_o P C_o' + R_o: determinant lemma and Woodbury on the K x K Lam.
        logdet = (jnp.sum(o * jnp.log(p.rho)) + jnp.linalg.slogdet(P_pred)[1]
                  + jnp.linalg.slogdet(Lam)[1])
        quad = jnp.sum(w * e * e) - b @ P_f @ b
        ll = -0.5 * (jnp.sum(o) * jnp.log(2 * jnp.pi) + logdet + quad)
        m_next = p.A @ m_f
        P_next = p.A @ P_f @ p.A.T + p.Q_r
        return (m_next, 0.5 * (P_next + P_next.T), False), (m_f, P_f, m_pred, P_pred, ll)

    init = (jnp.zeros(K), eye, True)
    _, (m_f, P_f, m_p, P_p, ll) = jax.lax.scan(step, init, (Y0, O))
    return m_f, P_f, m_p, P_p, jnp.sum(ll)


def _smoother(p: LDSParams, m_f, P_f, m_p, P_p):
    """RTS smoother: smoothed means, covariances and lag-one cross-covariances Cov(x_t, x_t-1)."""

    def step(carry, inputs):
        m_s_next, P_s_next = carry
        mf, Pf, mp_next, Pp_next = inputs
        G = Pf @ p.A.T @ jnp.linalg.inv(Pp_next)           # smoother gain J_t
        m_s = mf + G @ (m_s_next - mp_next)
        P_s = Pf + G @ (P_s_next - Pp_next) @ G.T
        cross = P_s_next @ G.T                             # Cov(x_t+1, x_t | all)
        return (m_s, 0.5 * (P_s + P_s.T)), (m_s, P_s, cross)

    last = (m_f[-1], P_f[-1])
    _, (m_s, P_s, cross) = jax.lax.scan(step, last, (m_f[:-1], P_f[:-1], m_p[1:], P_p[1:]),
                                        reverse=True)
    m_s = jnp.concatenate([m_s, m_f[-1:]])
    P_s = jnp.concatenate([P_s, P_f[-1:]])
    return m_s, P_s, cross


def _m_step(m_s, P_s, cross, Y0, O, min_var):
    """Closed-form maximisers of the expected complete-data log-likelihood (G&H 1996, §3)."""
    T, K = m_s.shape
    Exx = P_s + m_s[:, :, None] * m_s[:, None, :]                       # E[x_t x_t']
    Exx1 = cross + m_s[1:, :, None] * m_s[:-1, None, :]                 # E[x_t x_t-1']
    S_prev, S_cross = Exx[:-1].sum(0), Exx1.sum(0)
    A = jnp.linalg.solve(S_prev.T, S_cross.T).T
    Q_r = (Exx[1:].sum(0) - A @ S_cross.T) / (T - 1)
    Q_r = 0.5 * (Q_r + Q_r.T) + min_var * jnp.eye(K)
    # per column j over the rows that observe it: regress y_tj on [x_t; 1].
    xt = jnp.concatenate([m_s, jnp.ones((T, 1))], axis=1)                # (T, K+1)
    Exx_t = jnp.zeros((T, K + 1, K + 1)).at[:, :K, :K].set(Exx)
    Exx_t = Exx_t.at[:, :K, K].set(m_s).at[:, K, :K].set(m_s).at[:, K, K].set(1.0)
    G = jnp.einsum("tj,tab->jab", O, Exx_t)                              # (J, K+1, K+1)
    h = jnp.einsum("tj,ta->ja", O * Y0, xt)                              # (J, K+1)
    Ct = jnp.linalg.solve(G, h[:, :, None])[:, :, 0]                     # (J, K+1)
    n_obs = O.sum(0)
    resid = (jnp.sum(O * Y0 ** 2, 0) - 2 * jnp.sum(h * Ct, 1)
             + jnp.einsum("ja,jab,jb->j", Ct, G, Ct))
    rho = jnp.maximum(resid / n_obs, min_var)
    V0 = P_s[0] + min_var * jnp.eye(K)
    return LDSParams(A, Q_r, Ct[:, :K], Ct[:, K], rho, m_s[0], V0)


@jax.jit
def _em_step(p: LDSParams, Y0, O, min_var):
    """One EM iteration: the M-step's new parameters, and the log-likelihood and smoothed
    state means under the old ``p``."""
    m_f, P_f, m_p, P_p, ll = _filter(p, Y0, O)
    m_s, P_s, cross = _smoother(p, m_f, P_f, m_p, P_p)
    return _m_step(m_s, P_s, cross, Y0, O, min_var), ll, m_s


def log_likelihood(params: LDSParams, Y) -> float:
    """Observed-data log-likelihood of Y (T, J; NaN = missing) under ``params``."""
    Y = np.asarray(Y, float)
    O = (~np.isnan(Y)).astype(float)
    return float(_filter(params, jnp.asarray(np.nan_to_num(Y)), jnp.asarray(O))[-1])


class LinearDynamicalModel:
    """Linear-Gaussian state-space model fitted by EM with missing entries (see module doc).

    Args:
        n_components: K, the state dimension (seed 000 uses D = 2 latent dimensions).
        max_iter: the most EM iterations.
        tol: stop when an iteration raises the log-likelihood by less than ``tol`` per
            observed entry.
        min_var: floor on the noise variances (keeps the filter well conditioned).

    Attributes (after ``fit``): ``params_`` (:class:`LDSParams`), ``X_mean_`` (T, K) smoothed
    state means, ``history_`` (log-likelihood before each M-step, and after the last), ``n_iter_``.
    """

    def __init__(self, n_components: int = 2, max_iter: int = 200, tol: float = 1e-6,
                 min_var: float = 1e-6):
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.min_var = min_var

    def _initial(self, Y, O) -> LDSParams:
        """Start from PCA of the mean-filled data: C the leading components, x_t their scores,
        A the least-squares AR(1) fit of the scores, noise variances the residuals'."""
        K = self.n_components
        mean = np.nanmean(Y, axis=0)
        Yc = np.where(O > 0, Y, mean) - mean
        U, s, Vt = np.linalg.svd(Yc, full_matrices=False)
        X = U[:, :K] * s[:K] / np.sqrt(len(Y))
        C = Vt[:K].T * np.sqrt(len(Y))
        A = np.linalg.lstsq(X[:-1], X[1:], rcond=None)[0].T
        resid = X[1:] - X[:-1] @ A.T
        Q_r = np.cov(resid.T).reshape(K, K) + self.min_var * np.eye(K)
        rho = np.maximum(np.mean((Yc - X @ C.T) ** 2, axis=0), self.min_var)
        return LDSParams(*(jnp.asarray(a, float) for a in
                           (A, Q_r, C, mean, rho, X[0], np.eye(K))))

    def fit(self, Y) -> "LinearDynamicalModel":
        """Fit by EM to the rows of Y (T, J) in time order; NaN marks a missing entry."""
        Y = np.asarray(Y, float)
        if Y.ndim != 2 or len(Y) < 3:
            raise ValueError(f"Y must be a (T, J) array with T >= 3 time steps; got shape "
                             f"{Y.shape}")
        O = (~np.isnan(Y)).astype(float)
        if not O.any(axis=0).all():
            raise ValueError(f"Y has columns with no observed entry (columns "
                             f"{np.flatnonzero(~O.any(axis=0))[:5].tolist()}); drop them")
        p = self._initial(Y, O)
        Y0, Oj = jnp.asarray(np.nan_to_num(Y)), jnp.asarray(O)
        history = []
        for it in range(self.max_iter):
            p_new, ll, _ = _em_step(p, Y0, Oj, self.min_var)
            history.append(float(ll))
            p = p_new
            if it > 0 and history[-1] - history[-2] < self.tol * O.sum():
                break
        _, ll, m_s = _em_step(p, Y0, Oj, self.min_var)     # the smoother under the final p
        history.append(float(ll))
        self.params_, self.X_mean_ = p, np.asarray(m_s)
        self.history_, self.n_iter_ = np.array(history), it + 1
        self._train_Y_ = Y
        return self

    def impute(self, Y):
        """The training Y with each NaN replaced by ``c_j E[x_t | Y_obs] + d_j``."""
        Y = np.asarray(Y, float)
        if not np.array_equal(Y, self._train_Y_, equal_nan=True):
            raise ValueError("impute takes the Y the model was fitted on (a smoother needs "
                             "the whole sequence); fit on the new sequence instead")
        mean = self.X_mean_ @ np.asarray(self.params_.C).T + np.asarray(self.params_.d)
        return np.where(np.isnan(Y), mean, Y)

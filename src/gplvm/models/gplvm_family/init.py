"""Initial values of the GPLVM family (defaults of issue 4, following GPy's conventions)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.cluster import KMeans

from gplvm._pytree import replace
from gplvm.expectations import resolve_rule as _resolve
from gplvm.expectations.rules import MonteCarlo
from gplvm.linalg import CholeskyError, safe_cholesky


def initial_latents(Ys: np.ndarray, Q: int):
    """PCA means of the (mean-imputed) standardised data, each latent column scaled to unit
    variance, and the fraction of variance per component relative to the first (used to start
    the ARD length-scales at 1/fraction, so weak directions start nearly switched off)."""
    Yf = np.where(np.isnan(Ys), 0.0, Ys)            # standardised: column means are 0
    Yc = Yf - Yf.mean(0)
    U, s, Vt = np.linalg.svd(Yc, full_matrices=False)
    k = min(Q, len(s))
    X = U[:, :k] * s[:k]
    ev = s[:k] ** 2
    if k < Q:  # more latent dimensions than the data's rank: small random extra directions
        rng = np.random.default_rng(0)
        X = np.hstack([X, 1e-2 * rng.normal(size=(X.shape[0], Q - k))])
        ev = np.concatenate([ev, np.full(Q - k, ev[-1] * 1e-3 if k else 1.0)])
    X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    fracs = np.maximum(ev / ev[0], 1e-3)
    return X, fracs


def initial_inducing(X0: np.ndarray, M: int, key) -> np.ndarray:
    """Z by k-means of the initial latent means (distinct centres, so Kuu starts well posed)."""
    seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    if M >= len(X0):
        return X0[:M].copy()
    km = KMeans(n_clusters=M, n_init=3, random_state=seed).fit(X0)
    Z = km.cluster_centers_
    rng = np.random.default_rng(seed)
    return Z + 1e-6 * rng.normal(size=Z.shape)


#: GPy's q(X) variances are uniform on (0, GPY_MAX_VAR); draws below the floor are raised to it
GPY_MAX_VAR, VAR_FLOOR = 0.1, 1e-6


def initial_variances(shape, init_X_var, key) -> np.ndarray:
    """q(X) variances: the constant ``init_X_var``, or with ``None`` independent U(0, 0.1) draws
    (GPy's ``BayesianGPLVM`` default, floored at 1e-6 so the softplus inverse stays finite).

    On oil flow (Q = 10, M = 30, 2000 L-BFGS steps) the constant 0.1 led both this library and
    GPy, from the same starting points, to optima with 5 leave-one-out 1-NN errors (median of 5
    seeds); the draws led to 2 (benchmarks/README.md, issue 4).
    """
    if init_X_var is not None:
        return np.full(shape, float(init_X_var))
    draw = jax.random.uniform(jax.random.fold_in(key, 2), shape, maxval=GPY_MAX_VAR)
    return np.maximum(np.asarray(draw, dtype=float), VAR_FLOOR)


def resolve_rule(psi_rule, key):
    """The Ψ-statistic rule object; a Monte Carlo rule without a key gets the model's."""
    rule = _resolve(psi_rule)
    if isinstance(rule, MonteCarlo) and rule.key is None:
        rule = replace(rule, key=jax.random.fold_in(key, 1))
    return rule


def initial_jitter(kernel, Z0) -> float:
    """The jitter policy applied to the initial Kuu (0.0 unless it is needed)."""
    try:
        return float(safe_cholesky(np.asarray(kernel(jnp.asarray(Z0))), name="Kuu").jitter)
    except CholeskyError as err:
        raise ValueError(f"the initial inducing covariance cannot be factorised ({err}); "
                         f"check the kernel's hyper-parameters") from err

"""Initial values of the Bayesian GPLVM (defaults of issue 4, following GPy's conventions)."""

from __future__ import annotations

import jax
import numpy as np
from sklearn.cluster import KMeans


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

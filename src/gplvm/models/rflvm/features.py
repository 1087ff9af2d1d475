"""The design matrix of the RFLVM: [φ_W(X), 1] (seed 000, eq. 18, plus an intercept column).

.. math:: \\varphi_W(x) = \\sqrt{2/M}\\,[\\sin(w_1^\\top x), \\ldots, \\sin(w_{M/2}^\\top x),
          \\cos(w_1^\\top x), \\ldots, \\cos(w_{M/2}^\\top x)]

so that φ(x)·φ(x') = (1/(M/2)) Σ_m cos(w_m·(x − x')), an unbiased estimate of a unit-variance
stationary kernel whose spectral density the w_m are drawn from.  (The paper interleaves sin and
cos; the order of the columns does not matter.)  Frequency m owns columns m and m + M/2.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def feature_pair(X: Array, w: Array, n_freq: int) -> Array:
    """The two columns [sin(X w), cos(X w)]·sqrt(1/(M/2)) of one frequency ``w`` (Q,), (N, 2)."""
    xw = X @ w
    return jnp.stack([jnp.sin(xw), jnp.cos(xw)], axis=-1) / jnp.sqrt(n_freq)


def design(X: Array, W: Array, intercept: bool) -> Array:
    """Φ = [φ_W(X), 1]: (N, M) or (N, M + 1) with the intercept column last."""
    XW = X @ W.T
    cols = [jnp.sin(XW), jnp.cos(XW)]
    Phi = jnp.concatenate(cols, axis=-1) / jnp.sqrt(W.shape[0])
    if intercept:
        Phi = jnp.concatenate([Phi, jnp.ones((X.shape[0], 1), Phi.dtype)], axis=-1)
    return Phi


def pair_index(m, n_freq: int) -> Array:
    """Columns (m, m + M/2) of Φ (and rows of β) that belong to frequency m."""
    return jnp.stack([m, m + n_freq])

"""Starting an SVI fit of the GPLVM family: the data checked and wrapped for reading by rows,
and the initial values (as the collapsed model's, from a subsample of rows when N is large).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gplvm._params import check_batch_size, check_params
from gplvm._validation import DroppedColumnsWarning
from gplvm.data.minibatch import ColumnScan, RowSource, out_of_core, scan_columns
from gplvm.expectations import psi_statistics
from gplvm.kernels import RBF
from gplvm.models.gplvm_family.columns import kept_columns, standardise_kept
from gplvm.models.gplvm_family.estimator import check_inducing
from gplvm.models.gplvm_family.init import (initial_inducing, initial_jitter, initial_latents,
                                            initial_variances, resolve_rule)
from gplvm.models.gplvm_family.variants.svi.svi_bound import SviSetup
from gplvm.objectives import svi
from gplvm.transforms import inverse_softplus

#: rows used for the starting values (PCA, k-means of Z, q(U)); all rows below this many
INIT_ROWS = 5000
#: B when ``batch_size=None``: this many rows, or all of them when there are fewer
DEFAULT_BATCH = 256

class Standardised:
    """Rows of a :class:`RowSource` standardised, with missing entries zeroed and their mask
    (None when the data have no missing entry, so the bound takes its complete-data route).
    ``Y_mean``, ``Y_std`` are (D,) and code the columns kept out of the fit (:mod:`.columns`);
    the rows read have the fitted columns only."""

    def __init__(self, source: RowSource, Y_mean, Y_std, has_missing: bool):
        self.source, self.Y_mean, self.Y_std = source, Y_mean, Y_std
        self.has_missing = has_missing

    def __call__(self, index):
        Ys = standardise_kept(self.source.rows(index), self.Y_mean, self.Y_std)
        observed = None
        if self.has_missing:
            observed = jnp.asarray(~np.isnan(Ys), dtype=float)
        return jnp.asarray(np.nan_to_num(Ys)), observed


def svi_data(est, Y, times, groups):
    """Validate the data of an SVI fit (before any computation) and wrap it for reading.

    An in-memory array gets the collapsed model's checks; data on disk (a ``np.memmap``, an h5py
    dataset, a backed AnnData or its ``X``: :func:`gplvm.data.minibatch.out_of_core`) are
    checked one chunk at a time (:func:`gplvm.data.minibatch.scan_columns`), never loaded whole.

    Returns:
        (:class:`Standardised` rows, the in-memory Y or None for data on disk, batch size B).
    """
    check_params(est)
    if times is not None or groups is not None:
        raise ValueError("inference='svi' has the iid latent prior only; fit without times= "
                         "and groups=, or use inference='collapsed' for the dynamical prior")
    source = out_of_core(Y)
    if source is not None:
        train_Y, (n_rows, n_cols) = None, source.shape
        est._resolved_components(n_rows, n_cols)    # before a pass over the whole file
        check_inducing(est.n_inducing, n_rows, "rows of Y")
        check_batch_size(est.batch_size, n_rows)  # before a pass over the whole file
        scan = _kept_out(est, scan_columns(source))
        est._resolved_components(n_rows, int(kept_columns(scan.std).sum()))
    else:
        train_Y, _ = est._validate_common(Y, None, None)
        source = RowSource(train_Y)
        mean, std = est._standardisation(train_Y)
        scan = ColumnScan(mean, std, bool(np.isnan(train_Y[:, kept_columns(std)]).any()))
    N = source.shape[0]
    check_batch_size(est.batch_size, N)
    B = min(N, DEFAULT_BATCH) if est.batch_size is None else int(est.batch_size)
    return Standardised(source, scan.mean, scan.std, scan.has_missing), train_Y, B


def _kept_out(est, scan: ColumnScan) -> ColumnScan:
    """The moments of data on disk as the estimator's standardisation (:mod:`.columns`): a
    column of zero spread is kept out of the fit, coded by its mean (its constant up to the
    round-off of the one-pass mean) and 0; the scan refuses columns with no observed entry.
    Q is checked against the columns left (:func:`gplvm._validation.check_n_components`)."""
    dropped = ~(scan.std > 0)
    if dropped.all():
        raise ValueError(f"{type(est).__name__}: every column of Y is constant; there is "
                         f"nothing to fit a latent space to")
    mean = scan.mean if est.standardize else np.zeros_like(scan.mean)
    std = scan.std if est.standardize else np.ones_like(scan.std)
    if dropped.any():
        mean, std = mean.copy(), std.copy()
        mean[dropped], std[dropped] = scan.mean[dropped], 0.0
        warnings.warn(f"{type(est).__name__}: {int(dropped.sum())} constant columns (columns "
                      f"{np.flatnonzero(dropped)[:5].tolist()}) of Y kept out of the fit; they "
                      f"come back on output as their constant (variance 0)",
                      DroppedColumnsWarning, stacklevel=5)
    return ColumnScan(mean, std, scan.has_missing)


class SviStart(NamedTuple):
    g: dict
    X_mean: np.ndarray      # (N, Q) host
    X_var_raw: np.ndarray   # (N, Q) host, unconstrained
    setup: SviSetup


def _pca_start(rows_of, n_rows: int, Q: int, rng: np.random.Generator):
    """PCA latents of every row and the subsample the other starting values use.

    Up to :data:`INIT_ROWS` rows this is :func:`initial_latents` (as the collapsed model);
    above, the principal directions of a random subsample of that many rows, with every row
    projected on them one chunk at a time."""
    if n_rows <= INIT_ROWS:
        index = np.arange(n_rows)
        Y0 = np.asarray(rows_of(index)[0])
        X0, fracs = initial_latents(Y0, Q)     # missing entries are 0 there as here
        return X0, fracs, index
    index = np.sort(rng.choice(n_rows, INIT_ROWS, replace=False))
    Y_sub = np.asarray(rows_of(index)[0])
    centre = Y_sub.mean(0)
    _, s, Vt = np.linalg.svd(Y_sub - centre, full_matrices=False)
    k = min(Q, len(s))
    scale = s[:k] / np.sqrt(INIT_ROWS)
    X0 = np.empty((n_rows, Q))
    for start in range(0, n_rows, INIT_ROWS):
        chunk = np.arange(start, min(start + INIT_ROWS, n_rows))
        X0[chunk, :k] = (np.asarray(rows_of(chunk)[0]) - centre) @ Vt[:k].T / scale
    ev = s[:k] ** 2
    if k < Q:   # more latent dimensions than the data's rank, as initial_latents
        X0[:, k:] = rng.normal(size=(n_rows, Q - k))
        ev = np.concatenate([ev, np.full(Q - k, ev[-1] * 1e-3 if k else 1.0)])
    return X0, np.maximum(ev / ev[0], 1e-3), index


@jax.jit
def _start_q_u(setup: SviSetup, Z, X_mean, X_var, Y0, noise_var, scale):
    """The optimal whitened q(U) given q(X) on the rows Y0, scaled by ``scale`` = N/n; the
    kernel (constrained), rule and jitter are ``setup``'s."""
    _, psi1, psi2 = psi_statistics(setup.kernel, Z, X_mean, X_var, rule=setup.rule)
    return svi.optimal_whitened_q_u(psi1, psi2, setup.kernel(Z), Y0, noise_var, scale,
                                    setup.jitter)


def initial_state(est, rows_of, n_rows: int, key) -> SviStart:
    """Starting values: PCA latents, Z by k-means, an ARD RBF at 1/(fraction of variance), the
    noise at ``init_noise_fraction``, GPy's q(X) variances (all as the collapsed model, from a
    subsample above :data:`INIT_ROWS` rows), and q(U) at its optimum given these values on the
    subsample scaled by N/n (:func:`gplvm.objectives.svi.optimal_whitened_q_u`)."""
    Q = est._resolved_components(n_rows, int(kept_columns(rows_of.Y_std).sum()))
    M = int(est.n_inducing)
    rng = np.random.default_rng(int(jax.random.randint(jax.random.fold_in(key, 3), (), 0,
                                                       2**31 - 1)))
    X0, fracs, sub = _pca_start(rows_of, n_rows, Q, rng)
    Z0 = initial_inducing(X0[sub], M, key)
    kernel = est.kernel if est.kernel is not None else RBF(
        lengthscale=jnp.asarray(1.0 / fracs), variance=1.0)
    Y_sub, observed = rows_of(sub)
    values = np.asarray(Y_sub)[np.asarray(observed) > 0] if observed is not None else Y_sub
    noise0 = est.init_noise_fraction * float(np.var(values))
    X_var0 = initial_variances((n_rows, Q), est.init_X_var, key)
    setup = SviSetup(kernel, resolve_rule(est.psi_rule, key), initial_jitter(kernel, Z0))
    a, L = _start_q_u(setup, jnp.asarray(Z0), jnp.asarray(X0[sub]), jnp.asarray(X_var0[sub]),
                      Y_sub, noise0, n_rows / len(sub))
    g = {"Z": jnp.asarray(Z0), "kernel": kernel.unconstrained(),
         "noise_var": inverse_softplus(jnp.asarray(noise0)), "a": a,
         "L": svi.raw_from_chol(L)}
    return SviStart(g, X0, np.asarray(inverse_softplus(jnp.asarray(X_var0))), setup)

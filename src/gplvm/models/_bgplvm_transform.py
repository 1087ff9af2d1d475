"""Latents of new rows with the fitted Bayesian GPLVM held fixed (seed 003 eqs. 36–37)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.expectations import psi_statistics
from gplvm.inference import minimise
from gplvm.objectives import collapsed, new_rows
from gplvm.transforms import inverse_softplus, softplus


def _objective(u, kernel, Z, rule, fixed, Y0, observed, R):
    X_mean, X_var = u["X_mean"], softplus(u["X_var"])
    n = X_mean.shape[0]
    psi0, psi1, psi2 = psi_statistics(kernel, Z, X_mean, X_var, rule=rule, weights=jnp.eye(n))
    ell = new_rows.expected_log_likelihood(fixed, Y0, observed, R, psi0, psi1, psi2)
    return -(ell - collapsed.kl_standard_normal(X_mean, X_var))


_objective_jit = jax.jit(_objective)
_row_matrices_jit = jax.jit(new_rows.row_matrices)


def nearest_training_latents(model, Ys):
    """Start each new row at the training latent whose standardised data is closest on the
    new row's observed columns."""
    train = np.asarray(model._static.Y0)
    train_obs = np.asarray(model._static.groups.weights)[np.asarray(
        model._static.groups.column_group)].T > 0                     # (N, D)
    obs = ~np.isnan(Ys)
    Y0 = np.where(obs, Ys, 0.0)
    # squared distance over the columns observed in both rows, averaged per shared column
    both = obs.astype(float) @ train_obs.T.astype(float)
    d2 = (Y0**2) @ train_obs.T + obs.astype(float) @ (train**2).T - 2 * Y0 @ train.T
    d2 = d2 / np.maximum(both, 1.0)
    d2[both == 0] = np.inf
    return model.X_mean_[np.argmin(d2, axis=1)]


def infer_new_rows(model, Ys):
    """Optimise q(X*) (means and variances) for standardised rows Ys with NaN = missing.

    Returns X_mean (N*, Q), X_var (N*, Q) and the new-row bound at the optimum.
    """
    observed = jnp.asarray(~np.isnan(Ys), dtype=float)
    Y0 = jnp.asarray(np.nan_to_num(Ys))
    R = _row_matrices_jit(model._fixed, observed)
    u0 = {"X_mean": jnp.asarray(nearest_training_latents(model, Ys)),
          "X_var": inverse_softplus(jnp.asarray(np.median(model.X_var_, axis=0)) *
                                    jnp.ones((Ys.shape[0], model.n_components)))}
    Z = jnp.asarray(model.Z_)

    res = minimise(_objective, u0, method="lbfgs", n_iter=model.transform_max_iter,
                   progress=model.progress, desc="BayesianGPLVM.transform",
                   args=(model.kernel_, Z, model.rule_, model._fixed, Y0, observed, R))
    u = res.params
    value = -float(_objective_jit(u, model.kernel_, Z, model.rule_, model._fixed, Y0, observed, R))
    return np.asarray(u["X_mean"]), np.asarray(softplus(u["X_var"])), value

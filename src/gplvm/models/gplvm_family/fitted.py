r"""The fitted-model value of the GPLVM family, and what is computed from it (seed 003
eqs. 29–35).

:class:`FittedGPLVM` is everything prediction, sampling, imputation and new-row inference need:
the kernel, the inducing inputs, the map at its optimal q(U) (:class:`FittedMap`: V = K_uu⁻¹Ū,
H_g = K_uu⁻¹Σ_u,g K_uu⁻¹), the Ψ-statistic rule and the standardisation of Y.  With it the
predictive distribution of f at a point x* is Gaussian with

    mean  k_*u V,        variance  k** − k_*u K_uu⁻¹ k_u* + k_*u H_g k_u*,

and at an uncertain x* ~ q(x*) its mean is ψ1(x*) V.  Y adds the noise variance.  Every
function here takes the value, never an estimator.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.expectations import psi_statistics
from gplvm.linalg import inv_from_cholesky, safe_cholesky
from gplvm.models._rows import map_rows
from gplvm.models.gplvm_family.bound import Problem, bound_and_parts_jit
from gplvm.objectives.new_rows import FittedMap, fitted_map
from gplvm.registry import register


@register("gplvm.state.FittedGPLVM")
class FittedGPLVM(NamedTuple):
    """A fitted collapsed GPLVM (predictions in original units via Y_mean, Y_std).

    Attributes:
        kernel: the fitted kernel.
        Z: (M, Q) inducing inputs.
        map: :class:`FittedMap` (standardised units).
        rule: the Ψ-statistic rule.
        Y_mean, Y_std: (D,) the standardisation of Y's columns.
    """

    kernel: Any
    Z: jnp.ndarray
    map: FittedMap
    rule: Any
    Y_mean: np.ndarray
    Y_std: np.ndarray


class FitSummary(NamedTuple):
    """The fitted value with the bound and q(X) at the fitted parameters."""

    fitted: FittedGPLVM
    bound: float
    X_mean: np.ndarray
    X_var: np.ndarray
    noise_var: float


def fitted_from(u: dict, problem: Problem, Y_mean, Y_std) -> FitSummary:
    """Evaluate the bound at ``u`` and build the fitted value from the optimal q(U)."""
    value, parts, unpacked = bound_and_parts_jit(u, problem)
    U_mean, Sigma_u = _optimal_q_u_jit(problem.route, parts, problem.groups, unpacked.noise_var)
    Kuu_inv = inv_from_cholesky(parts.Lu)
    fmap = fitted_map(U_mean, Sigma_u, Kuu_inv, problem.groups.column_group, unpacked.noise_var)
    fitted = FittedGPLVM(unpacked.kernel, u["Z"], fmap, problem.rule, np.asarray(Y_mean),
                         np.asarray(Y_std))
    return FitSummary(fitted, float(value), np.asarray(unpacked.X_mean),
                      np.asarray(unpacked.X_var), float(unpacked.noise_var))


@jax.jit
def _optimal_q_u_jit(route, parts, groups, noise_var):
    return route.optimal_q_u(parts, groups, noise_var)


@jax.jit
def _mean_var(kernel, Z, fmap: FittedMap, X):
    Ksu = kernel(X, Z)
    mean = Ksu @ fmap.V
    base = kernel.diag(X) - jnp.sum((Ksu @ fmap.Kuu_inv) * Ksu, axis=1)
    extra = jnp.einsum("nm,gmk,nk->ng", Ksu, fmap.H, Ksu)[:, fmap.column_group]
    return mean, base[:, None] + extra + fmap.noise_var


@jax.jit
def _mean_var_rows(X, kernel, Z, fmap: FittedMap):
    return _mean_var(kernel, Z, fmap, X)


def predict(fitted: FittedGPLVM, X, return_var: bool = False):
    """Predictive mean (and variance, noise included) of Y at latent points X, original units.

    Evaluated in fixed blocks of rows (:func:`gplvm.models._rows.map_rows`), so a row's output
    is bit-identical whatever else is in the call."""
    mean, var = map_rows(_mean_var_rows, np.asarray(X, dtype=float), fitted.kernel, fitted.Z,
                         fitted.map)
    mean = np.asarray(mean) * fitted.Y_std + fitted.Y_mean
    if not return_var:
        return mean
    return mean, np.asarray(var) * fitted.Y_std**2


@jax.jit
def _expected_f_rows(rows, kernel, Z, rule, V):
    X_mean, X_var = rows
    _, psi1, _ = psi_statistics(kernel, Z, X_mean, X_var, rule)
    return psi1 @ V


def expected_f(fitted: FittedGPLVM, X_mean, X_var) -> np.ndarray:
    """E[f*] = ψ1(q(x*)) V under uncertain inputs (standardised units), in fixed blocks of rows
    as :func:`predict`."""
    rows = (np.asarray(X_mean, dtype=float), np.asarray(X_var, dtype=float))
    return map_rows(_expected_f_rows, rows, fitted.kernel, fitted.Z, fitted.rule, fitted.map.V)


def expected_y(fitted: FittedGPLVM, X_mean, X_var) -> np.ndarray:
    """E[y*] under q(x*), original units."""
    return expected_f(fitted, X_mean, X_var) * fitted.Y_std + fitted.Y_mean


def sample(fitted: FittedGPLVM, X, key_f, key_noise) -> np.ndarray:
    """Y drawn at latent points X: f ~ q(f | X) jointly over the rows (one column group at a
    time, key ``key_f``), then Gaussian noise (``key_noise``); original units."""
    kf, kn = key_f, key_noise
    kernel, Z, fmap = fitted.kernel, fitted.Z, fitted.map
    Xj = jnp.asarray(X)
    Ksu = kernel(Xj, Z)
    mean = np.asarray(Ksu @ fmap.V)
    F = np.empty_like(mean)
    base = np.asarray(kernel(Xj) - Ksu @ fmap.Kuu_inv @ Ksu.T)
    keys = jax.random.split(kf, fmap.H.shape[0])
    col_group = np.asarray(fmap.column_group)
    for g in range(fmap.H.shape[0]):
        cov = base + np.asarray(Ksu @ fmap.H[g] @ Ksu.T)
        L = np.asarray(safe_cholesky(0.5 * (cov + cov.T), name="predictive covariance").L)
        cols = np.flatnonzero(col_group == g)
        eps = np.asarray(jax.random.normal(keys[g], (len(X), len(cols))))
        F[:, cols] = mean[:, cols] + L @ eps
    noise = np.asarray(jax.random.normal(kn, F.shape)) * np.sqrt(float(fmap.noise_var))
    return (F + noise) * fitted.Y_std + fitted.Y_mean

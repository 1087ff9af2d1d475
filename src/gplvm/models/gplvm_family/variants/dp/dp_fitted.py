r"""The fitted DP-GP-LVM and what is computed from it.

Each atom t is a fitted collapsed GPLVM over the shared q(X) and Z (:class:`.fitted.FittedGPLVM`
with its own kernel θ_t, noise β_t⁻¹ and map at its optimal q(U | z_d = t)); column d follows
atom t with probability φ_dt.  So the predictive distribution of y_d at a latent point is the
mixture :math:`\sum_t \phi_{dt}\, N(m_{dt}, v_{dt})`, reported by its mean and variance

.. math:: m_d = \sum_t\phi_{dt} m_{dt}, \qquad
          v_d = \sum_t\phi_{dt}\,[v_{dt} + (m_{dt} - m_d)^2]

(the second form avoids the cancellation of :math:`E[y^2] - m^2`).  Under an uncertain input
:math:`x_* \sim N(\mu, \mathrm{diag}\,s)` the atom moments are the exact moments of the sparse
GP's prediction (Girard et al. 2003; seed 003 eq. 35 for the mean):

.. math:: m = \psi_1 v_d, \qquad E[f^2] = v_d^\top\Psi_2 v_d + \mathrm{tr}(H_g\Psi_2)
          + \psi_0 - \mathrm{tr}(K_{uu}^{-1}\Psi_2),

with :math:`v_d = K_{uu}^{-1}\bar u_d`, :math:`H_g = K_{uu}^{-1}\Sigma_{u,g}K_{uu}^{-1}` and the
Ψ-statistics of the single row.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.expectations import psi_statistics
from gplvm.models.gplvm_family import columns
from gplvm.models.gplvm_family import fitted as fam
from gplvm.models.gplvm_family.variants.dp.atoms import atom, stack_atoms
from gplvm.models.gplvm_family.bound import Problem
from gplvm.objectives.new_rows import FittedMap
from gplvm.registry import register


@register("gplvm.state.FittedDPGPLVM")
class FittedDPGPLVM(NamedTuple):
    """A fitted DP-GP-LVM (standardised units inside; Y_mean, Y_std give the original ones).

    Attributes:
        kernels: the T atoms' kernels, stacked (a leading atom axis on every leaf).
        maps: the T atoms' :class:`FittedMap`, stacked.
        phi: (D, T) q(z_d) = Cat(φ_d).
        Z: (M, Q) inducing inputs; rule: the Ψ-statistic rule; Y_mean, Y_std: (D,).
    """

    kernels: Any
    maps: FittedMap
    phi: jnp.ndarray
    Z: jnp.ndarray
    rule: Any
    Y_mean: np.ndarray
    Y_std: np.ndarray

    @property
    def n_atoms(self) -> int:
        return int(self.phi.shape[1])

    def widened(self, kept: np.ndarray, Y_mean, Y_std) -> "FittedDPGPLVM":
        """This value of the ``kept`` columns widened to all D columns
        (:func:`.gplvm_family.columns.put_back`): every atom's map with zero columns and φ
        with zero rows (no atom) at the dropped ones, and the full standardisation."""
        return self._replace(maps=columns.widen_map(self.maps, kept),
                             phi=columns.widen(jnp.asarray(self.phi).T, kept).T,
                             Y_mean=Y_mean, Y_std=Y_std)


def fitted_from(u: dict, problem: Problem, phi, Y_mean, Y_std) -> FittedDPGPLVM:
    """Each atom's optimal q(U) at ``u`` (:func:`.fitted.fitted_from` on the atom's parameters)
    stacked into one value."""
    shared = {k: v for k, v in u.items() if k not in ("kernel", "noise_var")}
    kernels, maps = [], []
    for t in range(phi.shape[1]):
        u_t = dict(shared, kernel=atom(u["kernel"], t), noise_var=u["noise_var"][t])
        summary = fam.fitted_from(u_t, problem, Y_mean, Y_std)
        kernels.append(summary.fitted.kernel)
        maps.append(summary.fitted.map)
    return FittedDPGPLVM(stack_atoms(kernels), stack_atoms(maps), jnp.asarray(phi), u["Z"],
                         problem.rule, np.asarray(Y_mean), np.asarray(Y_std))


def atom_model(fitted: FittedDPGPLVM, t: int, standardised: bool = False) -> fam.FittedGPLVM:
    """Atom t as a :class:`FittedGPLVM` (in standardised units with ``standardised``)."""
    D = fitted.phi.shape[0]
    Y_mean, Y_std = (np.zeros(D), np.ones(D)) if standardised else (fitted.Y_mean, fitted.Y_std)
    return fam.FittedGPLVM(atom(fitted.kernels, t), fitted.Z, atom(fitted.maps, t),
                           fitted.rule, Y_mean, Y_std)


def from_single(fitted: fam.FittedGPLVM) -> FittedDPGPLVM:
    """A one-atom value from a Bayesian GPLVM's (every column on the one atom), so that one
    code path serves both models in comparisons (the missing-data protocol of §G)."""
    D = fitted.map.V.shape[1]
    return FittedDPGPLVM(stack_atoms([fitted.kernel]), stack_atoms([fitted.map]),
                         jnp.ones((D, 1)), fitted.Z, fitted.rule, fitted.Y_mean, fitted.Y_std)


def _mixture(phi, means, variances):
    """Mixture mean and variance per column from per-atom (T, N, D) moments."""
    phi = np.asarray(phi).T[:, None, :]                               # (T, 1, D)
    mean = np.sum(phi * means, axis=0)
    var = np.sum(phi * (variances + (means - mean[None]) ** 2), axis=0)
    return mean, var


def _to_original(fitted, mean, var):
    return mean * fitted.Y_std + fitted.Y_mean, var * fitted.Y_std**2


def predict(fitted: FittedDPGPLVM, X, return_var: bool = False):
    """Predictive mean (and variance, noise included) of Y at latent points X, original units."""
    moments = [fam.predict(atom_model(fitted, t, standardised=True), X, return_var=True)
               for t in range(fitted.n_atoms)]
    mean, var = _mixture(fitted.phi, np.stack([m for m, _ in moments]),
                         np.stack([v for _, v in moments]))
    mean, var = _to_original(fitted, mean, var)
    return (mean, var) if return_var else mean


@jax.jit
def _uncertain_moments(kernel, Z, fmap: FittedMap, rule, X_mean, X_var):
    """One atom's predictive mean and variance of y (noise included) under q(x*), per row."""
    N = X_mean.shape[0]
    psi0, psi1, psi2 = psi_statistics(kernel, Z, X_mean, X_var, rule=rule,
                                      weights=jnp.eye(N, dtype=X_mean.dtype))
    mean = psi1 @ fmap.V                                               # (N, D)
    quad = jnp.einsum("md,nmk,kd->nd", fmap.V, psi2, fmap.V)          # v_dᵀ Ψ2_n v_d
    trace_H = jnp.einsum("gmk,nkm->ng", fmap.H, psi2)[:, fmap.column_group]
    trace_K = jnp.einsum("mk,nkm->n", fmap.Kuu_inv, psi2)
    second = quad + trace_H + (psi0 - trace_K)[:, None]
    return mean, second - mean**2 + fmap.noise_var


def predict_uncertain(fitted: FittedDPGPLVM, X_mean, X_var):
    """Predictive mean and variance of Y under q(x*) = N(X_mean, diag X_var), original units.

    # TODO(core): move the per-atom moments to gplvm_family.fitted (an ``expected_y`` that
    # also returns the variance)
    """
    X_mean, X_var = jnp.asarray(X_mean), jnp.asarray(X_var)
    moments = [_uncertain_moments(atom(fitted.kernels, t), fitted.Z, atom(fitted.maps, t),
                                  fitted.rule, X_mean, X_var) for t in range(fitted.n_atoms)]
    mean, var = _mixture(fitted.phi, np.stack([np.asarray(m) for m, _ in moments]),
                         np.stack([np.asarray(v) for _, v in moments]))
    return _to_original(fitted, mean, var)


def expected_y(fitted: FittedDPGPLVM, X_mean, X_var) -> np.ndarray:
    """E[y*] under q(x*), original units: Σ_t φ_dt ψ1 V_t."""
    means = np.stack([fam.expected_f(atom_model(fitted, t), X_mean, X_var)
                      for t in range(fitted.n_atoms)])
    mean = np.sum(np.asarray(fitted.phi).T[:, None, :] * means, axis=0)
    return mean * fitted.Y_std + fitted.Y_mean


def sample(fitted: FittedDPGPLVM, X, key_f, key_noise) -> np.ndarray:
    """Y drawn at latent points X: z_d ~ Cat(φ_d) per column, then each column from its atom's
    q(f | X) jointly over the rows (``key_f`` draws z and f), plus its noise (``key_noise``);
    original units."""
    kz, kf = jax.random.split(key_f)
    kn = key_noise
    z = np.asarray(jax.random.categorical(kz, jnp.log(fitted.phi), axis=1))
    Y = np.empty((np.shape(X)[0], fitted.phi.shape[0]))
    for t in np.unique(z):
        draw = fam.sample(atom_model(fitted, int(t)), X, jax.random.fold_in(kf, int(t)),
                          jax.random.fold_in(kn, int(t)))
        Y[:, z == t] = draw[:, z == t]
    return Y

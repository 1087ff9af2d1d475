r"""The stochastic variational bound of the GPLVM family as a function of parameter pytrees.

The bound of :mod:`gplvm.objectives.svi` (Hensman, Fusi & Lawrence 2013, eqs. 4–7, with the
uncertain inputs of Titsias & Lawrence 2010) is split into the global parameters ``g`` (Z, the
kernel, the noise variance and the whitened q(U): ``a`` (M, D) and ``L`` raw (M, M)) and the
local parameters of the rows in a minibatch ``xl`` (``X_mean``, ``X_var`` raw, leading axis B).
For a minibatch b of B of the N rows

.. math::
    \hat{\mathcal L}_b = \frac{N}{B}\sum_{n \in b}\Big(E_{q(x_n)}[\log p(y_n | f_n)]
        - \mathrm{KL}(q(x_n)\|p(x_n))\Big) - \mathrm{KL}(q(U)\|p(U)),

whose expectation over uniformly random B-subsets is the bound (each row is in b with
probability B/N).  The Ψ-statistics come from :func:`gplvm.expectations.psi_statistics` with
any rule (analytic, unscented, Gauss–Hermite, Monte Carlo), exactly as in the collapsed bound.
With a mesh (``BayesianGPLVM(devices=...)``) the minibatch's rows are split over its devices
and their sums over rows added (:func:`gplvm.models.gplvm_family.sharded_bound.svi_row_sums`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.expectations import psi_statistics
from gplvm.linalg import inv_from_cholesky
from gplvm.models.gplvm_family import sharded_bound
from gplvm.models.gplvm_family.fitted import FittedGPLVM
from gplvm.objectives import svi
from gplvm.objectives.collapsed import kl_standard_normal
from gplvm.objectives.new_rows import fitted_map
from gplvm.registry import register
from gplvm.transforms import softplus


@register("gplvm.state.SviSetup")   # saved in an SVI checkpoint's resume point
class SviSetup(NamedTuple):
    """What the stochastic bound reads besides the parameters: the kernel's structure (its
    values come from ``g["kernel"]``), the Ψ-statistic rule and the K_uu jitter."""

    kernel: Any
    rule: Any
    jitter: float


def batch_terms(g: dict, xl: dict, Y0, observed, setup: SviSetup, mesh=None):
    """(Σ_{n∈b} E[log p(y_n|f_n)] − KL(q(x_n)‖p(x_n)), KL(q(U)‖p(U))) for the rows ``Y0``
    (:func:`batch_terms_and_sums` without its sums)."""
    rows, kl_u, _ = batch_terms_and_sums(g, xl, Y0, observed, setup, mesh)
    return rows, kl_u


def batch_terms_and_sums(g: dict, xl: dict, Y0, observed, setup: SviSetup, mesh=None):
    """:func:`batch_terms` and, for complete rows, the rows' sums (Ψ1ᵀY (M, D), Ψ2 (M, M))
    that the natural-gradient step on q(U) reads (None with missing entries), so that a step
    computes the Ψ-statistics once (issue 18: the natural step used to compute them again).

    Args:
        g: global parameters; xl: the rows' local parameters.
        Y0: (B, D) standardised rows, missing entries 0.
        observed: (B, D) 0/1 mask, or None when the data have no missing entry.
        setup: :class:`SviSetup`.
        mesh: None, or a :class:`jax.sharding.Mesh` whose devices split the B rows: the sums
            over rows are then computed per device and added
            (:func:`gplvm.models.gplvm_family.sharded_bound.svi_row_sums`), the same terms up
            to the order of the additions.
    """
    kernel = setup.kernel.from_unconstrained(g["kernel"])
    noise_var = softplus(g["noise_var"])
    X_mean, X_var = xl["X_mean"], softplus(xl["X_var"])
    L = svi.chol_from_raw(g["L"])
    q = svi.WhitenedQ(g["a"], L)
    # K_uu after the Ψ-statistics, in this order: XLA's CPU backend orders (and so rounds) the
    # gradient's sums by the program's order, and moving it changes the fit's last digits
    if mesh is not None:
        sums = sharded_bound.svi_row_sums(kernel, g["Z"], X_mean, X_var, Y0, observed, mesh,
                                          setup.rule)
        ell = svi.expected_log_lik_from_sums(
            sums, svi.Hyper(kernel(g["Z"]), noise_var, setup.jitter), q)
        natural = None if observed is not None else (sums.psi1_Y, sums.psi2[0])
        return ell - sums.kl, svi.kl_q_u(g["a"], L), natural
    cols = svi.column_weights(observed, Y0.shape[1], Y0.shape[0])
    psi0, psi1, psi2 = psi_statistics(kernel, g["Z"], X_mean, X_var, rule=setup.rule,
                                      weights=cols.weights)
    ell = svi.expected_log_lik(psi0, psi1, psi2, Y0, cols,
                               svi.Hyper(kernel(g["Z"]), noise_var, setup.jitter), q)
    natural = None if observed is not None else (psi1.T @ Y0, psi2[0])
    return ell - kl_standard_normal(X_mean, X_var), svi.kl_q_u(g["a"], L), natural


def minibatch_bound(g: dict, xl: dict, Y0, observed, scale, setup: SviSetup, mesh=None):
    """The unbiased estimate N/B · (rows' terms) − KL(q(U)‖p(U)) (module docstring)."""
    return minibatch_bound_and_sums(g, xl, Y0, observed, scale, setup, mesh)[0]


def minibatch_bound_and_sums(g: dict, xl: dict, Y0, observed, scale, setup: SviSetup,
                             mesh=None):
    """(:func:`minibatch_bound`, the rows' sums of :func:`batch_terms_and_sums`)."""
    rows, kl_u, sums = batch_terms_and_sums(g, xl, Y0, observed, setup, mesh)
    return scale * rows - kl_u, sums


_batch_terms_jit = jax.jit(batch_terms, static_argnames="mesh")


def full_bound(g: dict, X_mean, X_var_raw, rows_of, n_rows: int, setup: SviSetup,
               chunk: int, mesh=None) -> float:
    """The bound over all N rows, summed a chunk of rows at a time.

    Args:
        rows_of: function of a row index array giving (Y0, observed or None) for those rows.
        X_mean, X_var_raw: (N, Q) host arrays of the local parameters.
        chunk: rows per evaluation (the last chunk may be shorter).
        mesh: None, or the mesh whose devices split each chunk's rows (:func:`batch_terms`).
    """
    total, kl_u = 0.0, 0.0
    for start in range(0, n_rows, chunk):
        index = np.arange(start, min(start + chunk, n_rows))
        Y0, observed = rows_of(index)
        xl = {"X_mean": jnp.asarray(X_mean[index]), "X_var": jnp.asarray(X_var_raw[index])}
        rows, kl_u = _batch_terms_jit(g, xl, Y0, observed, setup, mesh)
        total += float(rows)
    return total - float(kl_u)


def fitted_from_svi(g: dict, setup: SviSetup, n_cols: int, Y_mean, Y_std) -> FittedGPLVM:
    """The fitted value every verb reads, from the learnt q(U) (one shared covariance, so one
    column group): V = K_uu⁻¹ m_d = L_u⁻ᵀ a_d and H = K_uu⁻¹ S K_uu⁻¹ = L_u⁻ᵀ L Lᵀ L_u⁻¹."""
    kernel = setup.kernel.from_unconstrained(g["kernel"])
    Z = g["Z"]
    M = Z.shape[0]
    Lu = jnp.linalg.cholesky(kernel(Z) + setup.jitter * jnp.eye(M))
    L = svi.chol_from_raw(g["L"])
    LuL = Lu @ L
    fmap = fitted_map(Lu @ g["a"], (LuL @ LuL.T)[None], inv_from_cholesky(Lu),
                      jnp.zeros(n_cols, dtype=int), softplus(g["noise_var"]))
    return FittedGPLVM(kernel, Z, fmap, setup.rule, np.asarray(Y_mean), np.asarray(Y_std))

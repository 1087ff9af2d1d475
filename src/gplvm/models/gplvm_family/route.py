"""The linear-algebra route of the collapsed bound, behind one interface (STYLE.md 5).

A route turns q(X)'s marginals, the kernel and the data into the bound's data term and the
optimal q(U).  The bound (:func:`~.bound.bound_and_parts`) asks it for
``terms(kernel, noise_var, Z, marginals, problem, route_u=None)`` (:class:`RouteTerms`) and
the fitted value for ``optimal_q_u(parts, groups, noise_var)``; a route reads the data, the
column groups and weights, the Ψ-statistic rule and the K_uu jitter from the bound's
:class:`~.bound.Problem`.  ``route_u`` carries a route's own trainable values (``u["route"]``).

* :class:`DenseRoute` factorises M × M matrices (:mod:`gplvm.objectives.collapsed`, seed 001
  §B) of the Ψ-statistics of every row;
* :class:`~.kron_route.KroneckerRoute` (the structured GPLVM, seed 003 eqs. 18–28) does the
  Kronecker algebra from the same Ψ-statistics;
* :class:`~.sharded_route.ShardedRoute` (``BayesianGPLVM(devices=...)``) computes the sums
  over rows on the devices of a mesh and then the dense M × M algebra.

The first two share :class:`PsiRoute`: the Ψ-statistics of the problem's rows, then the
route's ``data_term(psi, Kuu, noise_var, problem, route_u=None)``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gplvm._pytree import pytree_dataclass
from gplvm.expectations import psi_statistics
from gplvm.objectives import collapsed
from gplvm.registry import register


class RouteTerms(NamedTuple):
    """What a route gives the bound.

    Attributes:
        value: the data term Σ_d w_d F_d.
        parts: the route's factors for q(U) (:meth:`optimal_q_u` reads them).
        psi1: (N, M) Ψ1 of the rows (for prediction).
        kl: KL(q(X) ‖ p(X)): the one in ``marginals``, or the route's own sum of it over rows.
    """

    value: Any
    parts: Any
    psi1: Any
    kl: Any


class PsiRoute:
    """A route fed the Ψ-statistics of every row of ``problem.Y0`` (dense and Kronecker)."""

    def terms(self, kernel, noise_var, Z, marginals, problem, route_u=None) -> RouteTerms:
        """(1) The Ψ-statistics per column group (seed 001 §C / seed 004); (2) the data term
        by the route's ``data_term`` (seed 001 eqs. 26–31).  The KL of ``marginals``
        ((X_mean, X_var, KL) from the latent prior) is passed on."""
        X_mean, X_var, kl = marginals
        psi = psi_statistics(kernel, Z, X_mean, X_var, rule=problem.rule,
                             weights=problem.groups.weights)                      # (1)
        Kuu = kernel(Z)
        value, parts = self.data_term(psi, Kuu, noise_var, problem, route_u)       # (2)
        return RouteTerms(value, parts, psi[1], kl)


@register("gplvm.state.DenseRoute")
@pytree_dataclass
class DenseRoute(PsiRoute):
    """Dense Cholesky factors of K_uu and of A_g = β L_u⁻¹ Ψ2_g L_u⁻ᵀ + I per column group."""

    def data_term(self, psi, Kuu, noise_var, problem, route_u=None):
        """Σ_d w_d F_d and the factors for q(U) (:func:`collapsed.data_term`).

        Args:
            psi: (ψ0, Ψ1, Ψ2) weighted by ``problem.groups``.
            Kuu: (M, M); noise_var: σ².
            problem: the :class:`~.bound.Problem` (its ``Y0``, ``groups``, ``jitter`` and
                ``column_weights`` are read).
            route_u: the route's own values (none here).
        """
        del route_u
        return collapsed.data_term(psi, Kuu, problem.Y0, problem.groups, noise_var,
                                   problem.jitter, problem.column_weights)

    def optimal_q_u(self, parts, groups, noise_var):
        """(Ū, Σ_u per group) at the optimum given q(X) (:func:`collapsed.optimal_q_u`)."""
        return collapsed.optimal_q_u(parts, groups, noise_var)

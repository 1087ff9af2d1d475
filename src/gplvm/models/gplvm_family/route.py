"""The linear-algebra route of the collapsed bound, behind one interface (STYLE.md 5).

A route turns Ψ-statistics, K_uu and the data into the bound's data term and the optimal q(U):
``data_term(psi, Kuu, noise_var, problem, route_u=None)`` reads the data, the column groups and
weights and the K_uu jitter from the bound's :class:`~.bound.Problem`.
:class:`DenseRoute` factorises M × M matrices (:mod:`gplvm.objectives.collapsed`, seed 001 §B);
the structured GPLVM's Kronecker route (seed 003 eqs. 18–28,
:class:`~.kron_route.KroneckerRoute`) implements the same two methods.  ``route_u`` carries a
route's own trainable values (``u["route"]``), which the dense route does not have.
"""

from __future__ import annotations

from gplvm._pytree import pytree_dataclass
from gplvm.objectives import collapsed
from gplvm.registry import register


@register("gplvm.state.DenseRoute")
@pytree_dataclass
class DenseRoute:
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

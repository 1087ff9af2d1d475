"""The collapsed bound's route with its rows split over the devices of a mesh (issue 18).

:class:`ShardedRoute` is the family's third route (:mod:`.route`), the one
``BayesianGPLVM(devices=...)`` chooses: the sums over rows — ψ0, Ψ1ᵀY, Ψ2 per column group,
Σ y² and the KL of the iid q(X) under N(0, I) — are computed block by block on the devices of
the mesh and added (:func:`.sharded_bound.row_statistics`), then every device does the dense
route's M × M algebra (:func:`gplvm.objectives.collapsed.data_term_from_sums`).  Its
:class:`~.bound.Problem` has no ``Y0`` (the rows live on the mesh, :class:`ShardedData`) and
column groups without (G, N) weights.  It serves the iid prior only (the dynamical prior
couples the rows; the estimator refuses ``times=`` with ``devices=``).

A mesh belongs to its process, so a saved model or checkpoint holds the problem without the
route's rows (:func:`off_mesh`); :func:`on_devices` splits them again.
"""

from __future__ import annotations

from gplvm._pytree import pytree_dataclass
from gplvm.inference import sharding
from gplvm.models.gplvm_family.route import DenseRoute, RouteTerms
from gplvm.models.gplvm_family.sharded_bound import row_statistics
from gplvm.models.gplvm_family.sharded_data import ShardedData, shard_data
from gplvm.objectives import collapsed


@pytree_dataclass
class ShardedRoute:
    """The dense route's algebra over sums computed on a mesh (not saved: see :func:`off_mesh`).

    Attributes:
        data: the rows split over the mesh (:func:`.sharded_data.shard_data`).
    """

    data: ShardedData

    def terms(self, kernel, noise_var, Z, marginals, problem, route_u=None) -> RouteTerms:
        """(1) The sums over rows and the KL of q(X) under N(0, I) on every device, added
        (:func:`.sharded_bound.row_statistics`; it stands in for the KL in ``marginals``, the
        same sum in another order); (2) the M × M algebra of the unsharded bound.  Ψ1 loses the
        padded rows.  Arguments as :meth:`.route.PsiRoute.terms` (no ``route_u`` here)."""
        del route_u
        X_mean, X_var, _ = marginals
        data = self.data
        sums, kl, psi1 = row_statistics(kernel, Z, X_mean, X_var, data, problem.rule)  # (1)
        value, parts = collapsed.data_term_from_sums(sums, kernel(Z), data.groups, noise_var,
                                                     problem.jitter,
                                                     problem.column_weights)          # (2)
        return RouteTerms(value, parts, psi1[:X_mean.shape[0]], kl)

    #: (Ū, Σ_u per group): the dense route's (the M × M algebra is the same)
    optimal_q_u = DenseRoute.optimal_q_u


def on_mesh(problem) -> bool:
    """Whether ``problem``'s rows are split over a mesh (its route a :class:`ShardedRoute`)."""
    return isinstance(problem.route, ShardedRoute)


def on_devices(problem, Ys, devices):
    """``problem`` with the standardised rows ``Ys`` (N, D; NaN = missing) split over the mesh
    of ``devices`` (:func:`gplvm.inference.sharding.make_mesh`): no ``Y0``, the column groups of
    :func:`.sharded_data.shard_data` and a :class:`ShardedRoute`."""
    data = shard_data(Ys, sharding.make_mesh(devices))
    return problem._replace(Y0=None, groups=data.groups, route=ShardedRoute(data))


def off_mesh(problem):
    """``problem`` without rows on a mesh (a file cannot hold a mesh) and with its arrays on
    the default device: the dense route, still without ``Y0`` (:func:`on_devices`, or the rows
    on one device, restore them).  Any other problem is returned as is."""
    if not on_mesh(problem):
        return problem
    return sharding.to_default_device(problem._replace(route=DenseRoute()))

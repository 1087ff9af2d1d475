r"""The collapsed bound of the GPLVM family as a function of an unconstrained parameter pytree.

.. math:: \mathcal L(u) = \sum_d w_d F_d(\theta, \sigma^2, q(X), Z) - \mathrm{KL}(q(X)\|p(X))

(seed 001 eq. 32 with the column weights of §A).  A :class:`Problem` holds everything the bound
reads besides ``u``: the data, the column groups (missing-data patterns) and weights, q(X)'s
prior (:mod:`.latent`), the kernel's structure, the Ψ-statistic rule, the linear-algebra route
(:mod:`.route`) and the Kuu jitter.  It is a pytree, so one compiled step serves every fit of the
same shapes.  Estimators choose the pieces; the functions here do not know which estimator asked.

With ``sharded`` set (``BayesianGPLVM(devices=...)``) the sums over rows — ψ0, Ψ1ᵀY, Ψ2, Σ y²
and the KL of the iid q(X) — are computed block by block on the devices of a mesh and added
(:func:`sharded_data_term`); the M × M algebra is the same.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from gplvm.expectations import psi_statistics
from gplvm.inference import sharding
from gplvm.objectives.collapsed import BoundParts, MissingGroups, data_term_from_sums
from gplvm.registry import register
from gplvm.transforms import softplus


@register("gplvm.state.GPLVMProblem")
class Problem(NamedTuple):
    """What the collapsed bound reads besides the parameters ``u``.

    Attributes:
        Y0: (N, D) standardised data with missing entries set to 0.
        groups: the columns grouped by missingness pattern.
        latent: :class:`~.latent.IidLatent` or :class:`~.latent.DynamicalLatent`.
        kernel: the kernel whose structure is used; its values come from ``u["kernel"]``.
        rule: the Ψ-statistic rule (:mod:`gplvm.expectations`).
        route: the linear-algebra route (:class:`~.route.DenseRoute`).
        jitter: added to K_uu's diagonal (:func:`gplvm.linalg.escalate_jitter`).
        column_weights: (D,) weights w_d, or None for all ones.
        sharded: None, or the rows split over a mesh
            (:class:`~gplvm.inference.sharding.ShardedData`; iid q(X) and the dense route
            only); ``Y0`` is then None and ``groups.weights`` None (they live on the mesh).
    """

    Y0: jnp.ndarray
    groups: MissingGroups
    latent: Any
    kernel: Any
    rule: Any
    route: Any
    jitter: float
    column_weights: Optional[jnp.ndarray] = None
    sharded: Optional[sharding.ShardedData] = None


class Unpacked(NamedTuple):
    """The constrained values behind ``u``, and Ψ1 (for prediction)."""

    kernel: Any
    noise_var: jnp.ndarray
    X_mean: jnp.ndarray
    X_var: jnp.ndarray
    psi1: jnp.ndarray


def data_term(kernel_u, noise_u, Z, X_mean, X_var, problem: Problem, route_u=None):
    """Σ_d w_d F_d for one kernel and noise variance given q(X)'s marginals.

    ``route_u`` holds the route's own trainable values (``u["route"]``: the structured GPLVM's
    spatial kernels); the dense route has none.

    The DP-GP-LVM calls it once per atom (its own kernel and noise, the columns weighted by
    their assignment probabilities) over one q(X); the Bayesian GPLVM once.

    Steps: (1) constrained kernel and noise variance from their unconstrained values;
    (2) Ψ-statistics per column group (seed 001 §C / seed 004); (3) the data term by the route
    (seed 001 eqs. 26–31).

    Returns:
        The data term, the route's factors for q(U), and the unpacked values.
    """
    kernel = problem.kernel.from_unconstrained(kernel_u)                          # (1)
    noise_var = softplus(noise_u)
    psi = psi_statistics(kernel, Z, X_mean, X_var, rule=problem.rule,
                         weights=problem.groups.weights)                          # (2)
    Kuu = kernel(Z)
    value, parts = problem.route.data_term(psi, Kuu, noise_var, problem, route_u)  # (3)
    return value, parts, Unpacked(kernel, noise_var, X_mean, X_var, psi[1])


def sharded_data_term(kernel_u, noise_u, Z, X_mean, X_var, problem: Problem):
    """:func:`data_term` with the sums over rows split over ``problem.sharded``'s mesh, and
    the KL of q(X) under N(0, I) added over the mesh too: (1) the sums on every device, added
    (:func:`gplvm.inference.sharding.row_statistics`); (2) the M × M algebra of the unsharded
    bound (:func:`gplvm.objectives.collapsed.data_term_from_sums`).  Ψ1 loses the padded
    rows."""
    kernel = problem.kernel.from_unconstrained(kernel_u)
    noise_var = softplus(noise_u)
    data = problem.sharded
    sums, kl, psi1 = sharding.row_statistics(kernel, Z, X_mean, X_var, data,
                                             problem.rule)                        # (1)
    value, parts = data_term_from_sums(sums, kernel(Z), data.groups, noise_var,
                                       problem.jitter, problem.column_weights)    # (2)
    return value, parts, Unpacked(kernel, noise_var, X_mean, X_var,
                                  psi1[:X_mean.shape[0]]), kl


def bound_and_parts(u: dict, problem: Problem) -> tuple[jnp.ndarray, BoundParts, Unpacked]:
    """The collapsed bound (to maximise), the route's factors for q(U), and the unpacked values:
    q(X)'s marginals and KL under its prior, then :func:`data_term` − KL (seed 001 eq. 32);
    with ``problem.sharded`` both by :func:`sharded_data_term`."""
    X_mean, X_var, kl = problem.latent.marginals(u)
    if problem.sharded is not None:
        value, parts, unpacked, kl = sharded_data_term(u["kernel"], u["noise_var"], u["Z"],
                                                       X_mean, X_var, problem)
    else:
        value, parts, unpacked = data_term(u["kernel"], u["noise_var"], u["Z"], X_mean, X_var,
                                           problem, u.get("route"))
    return value - kl, parts, unpacked


def negative_bound(u: dict, problem: Problem):
    """The objective L-BFGS minimises (module level, so its compiled step is reused)."""
    return -bound_and_parts(u, problem)[0]


def negative_bound_keyed(u: dict, key, problem: Problem):
    """The same objective in the signature Adam's stochastic driver expects."""
    del key
    return negative_bound(u, problem)


negative_bound_jit = jax.jit(negative_bound)
bound_and_parts_jit = jax.jit(bound_and_parts)

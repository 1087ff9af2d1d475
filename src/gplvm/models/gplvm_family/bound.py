r"""The collapsed bound of the GPLVM family as a function of an unconstrained parameter pytree.

.. math:: \mathcal L(u) = \sum_d w_d F_d(\theta, \sigma^2, q(X), Z) - \mathrm{KL}(q(X)\|p(X))

(seed 001 eq. 32 with the column weights of §A).  A :class:`Problem` holds everything the bound
reads besides ``u``: the data, the column groups (missing-data patterns) and weights, q(X)'s
prior (:mod:`.latent`), the kernel's structure, the Ψ-statistic rule, the linear-algebra route
(:mod:`.route`) and the Kuu jitter.  It is a pytree, so one compiled step serves every fit of the
same shapes.  Estimators choose the pieces; the functions here do not know which estimator asked,
nor which route: the dense, the Kronecker (:mod:`.kron_route`) and the sharded one
(:mod:`.sharded_route`, ``BayesianGPLVM(devices=...)``: the sums over rows on the devices of a
mesh) all give the data term from q(X)'s marginals (:meth:`.route.PsiRoute.terms`).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from gplvm.objectives.collapsed import BoundParts, MissingGroups
from gplvm.registry import register
from gplvm.transforms import softplus


@register("gplvm.state.GPLVMProblem")
class Problem(NamedTuple):
    """What the collapsed bound reads besides the parameters ``u``.

    Attributes:
        Y0: (N, D) standardised data with missing entries set to 0; None when the rows live
            on a mesh (:class:`~.sharded_route.ShardedRoute`) or were left out of a saved fit.
        groups: the columns grouped by missingness pattern (without (G, N) weights when the
            rows live on a mesh).
        latent: :class:`~.latent.IidLatent` or :class:`~.latent.DynamicalLatent`.
        kernel: the kernel whose structure is used; its values come from ``u["kernel"]``.
        rule: the Ψ-statistic rule (:mod:`gplvm.expectations`).
        route: the linear-algebra route (:class:`~.route.DenseRoute`,
            :class:`~.kron_route.KroneckerRoute` or :class:`~.sharded_route.ShardedRoute`).
        jitter: added to K_uu's diagonal (:func:`gplvm.linalg.escalate_jitter`).
        column_weights: (D,) weights w_d, or None for all ones.

    Files written before the sharded route hold one more field, ``sharded`` (always None):
    :func:`gplvm.io.legacy.object_fields` drops it.
    """

    Y0: Optional[jnp.ndarray]
    groups: MissingGroups
    latent: Any
    kernel: Any
    rule: Any
    route: Any
    jitter: float
    column_weights: Optional[jnp.ndarray] = None


class Unpacked(NamedTuple):
    """The constrained values behind ``u``, and Ψ1 (for prediction)."""

    kernel: Any
    noise_var: jnp.ndarray
    X_mean: jnp.ndarray
    X_var: jnp.ndarray
    psi1: jnp.ndarray


def _terms(kernel_u, noise_u, Z, marginals, problem: Problem, route_u):
    """(1) The constrained kernel and noise variance from their unconstrained values; (2) the
    route's data term, factors for q(U), Ψ1 and KL given ``marginals`` (X_mean, X_var, KL)."""
    kernel = problem.kernel.from_unconstrained(kernel_u)                          # (1)
    noise_var = softplus(noise_u)
    terms = problem.route.terms(kernel, noise_var, Z, marginals, problem, route_u)  # (2)
    X_mean, X_var, _ = marginals
    return terms, Unpacked(kernel, noise_var, X_mean, X_var, terms.psi1)


def data_term(kernel_u, noise_u, Z, X_mean, X_var, problem: Problem, route_u=None):
    """Σ_d w_d F_d for one kernel and noise variance given q(X)'s marginals.

    ``route_u`` holds the route's own trainable values (``u["route"]``: the structured GPLVM's
    spatial kernels); the dense route has none.

    The DP-GP-LVM calls it once per atom (its own kernel and noise, the columns weighted by
    their assignment probabilities) over one q(X); the Bayesian GPLVM once, through
    :func:`bound_and_parts`.  The route computes the Ψ-statistics per column group (seed 001
    §C / seed 004) and the data term (seed 001 eqs. 26–31): :meth:`.route.PsiRoute.terms`.

    Returns:
        The data term, the route's factors for q(U), and the unpacked values.
    """
    terms, unpacked = _terms(kernel_u, noise_u, Z, (X_mean, X_var, None), problem, route_u)
    return terms.value, terms.parts, unpacked


def bound_and_parts(u: dict, problem: Problem) -> tuple[jnp.ndarray, BoundParts, Unpacked]:
    """The collapsed bound (to maximise), the route's factors for q(U), and the unpacked values:
    q(X)'s marginals and KL under its prior, then the route's data term − KL (seed 001 eq. 32;
    a route that sums the rows itself, :class:`~.sharded_route.ShardedRoute`, gives the KL
    too)."""
    terms, unpacked = _terms(u["kernel"], u["noise_var"], u["Z"], problem.latent.marginals(u),
                             problem, u.get("route"))
    return terms.value - terms.kl, terms.parts, unpacked


def negative_bound(u: dict, problem: Problem):
    """The objective L-BFGS minimises (module level, so its compiled step is reused)."""
    return -bound_and_parts(u, problem)[0]


def negative_bound_keyed(u: dict, key, problem: Problem):
    """The same objective in the signature Adam's stochastic driver expects."""
    del key
    return negative_bound(u, problem)


negative_bound_jit = jax.jit(negative_bound)
bound_and_parts_jit = jax.jit(bound_and_parts)

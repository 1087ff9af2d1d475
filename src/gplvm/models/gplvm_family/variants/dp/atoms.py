r"""The DP-GP-LVM bound: T atoms (θ_t, β_t) over one q(X) and one set of inducing inputs.

.. math::
    \mathcal L = \sum_{t=1}^T \sum_d \phi_{dt} F_d(\theta_t, \beta_t)
      - \mathrm{KL}(q(X)\,\|\,p(X)) + \sum_t \log p(\theta_t, \beta_t) + \mathcal L_{DP}

(seed 001 eq. 13, with the data term written per atom as §A's soft assignments require, and
:math:`\mathcal L_{DP}` the terms of :mod:`.dp`).  Each atom's :math:`\sum_d \phi_{dt}F_d` is
:func:`gplvm.models.gplvm_family.bound.data_term` with column weights :math:`\phi_{\cdot t}`, so
the cost is T collapsed bounds over the same q(X) and Z (each atom has its own ARD weights, so
its Ψ-statistics are its own).  The atoms are visited by ``lax.map`` (one unbatched program per
atom; see :func:`gplvm.objectives.collapsed._group_factors` for why LAPACK calls are never
batched).

The parameter pytree ``u`` is the Bayesian GPLVM's with the kernel and noise entries stacked
over atoms: ``u["kernel"]`` has a leading axis T on every leaf, ``u["noise_var"]`` is (T,).

*Base distribution.*  The atoms are point estimates under a log-normal base distribution
(:class:`AtomPrior`): every positive kernel hyper-parameter θ (length-scales, signal variance)
has :math:`\log\theta \sim N(0, s_\theta^2)` — median 1, the scale of standardised data and of
the N(0, I) latent prior; on an ARD weight :math:`\gamma_q = \ell_q^{-2}` this is
:math:`\log\gamma_q \sim N(0, 4s_\theta^2)` — and the noise precision has
:math:`\log\beta \sim N(\log\beta_0, s_\beta^2)`.  The point estimate maximises the density of
the log values, so an atom that no column uses (φ_{·t} = 0) has no data term and sits exactly at
the prior median, a well-posed kernel whose K_uu factorises.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.stats import norm

from gplvm.models.gplvm_family.bound import Problem, data_term
from gplvm.models.gplvm_family.variants.dp.dp import DPPrior, DPState, dp_terms
from gplvm.registry import register
from gplvm.transforms import softplus


@register("gplvm.state.AtomPrior")
class AtomPrior(NamedTuple):
    """Log-normal base distribution of the atoms (module docstring).

    Attributes:
        kernel_log_scale: s_θ, the standard deviation of log θ for every kernel
            hyper-parameter (median 1).
        noise_log_median: log β0, the log of the median noise precision.
        noise_log_scale: s_β, the standard deviation of log β.
    """

    kernel_log_scale: float = 3.0
    noise_log_median: float = 0.0
    noise_log_scale: float = 3.0


def log_prior(kernel_u, noise_u, problem: Problem, prior: AtomPrior):
    """log p(θ_t, β_t) of one atom: the log-normal densities of the log values."""
    kernel = problem.kernel.from_unconstrained(kernel_u)
    logs = jnp.concatenate([jnp.log(jnp.ravel(leaf)) for leaf in jax.tree_util.tree_leaves(kernel)])
    log_beta = -jnp.log(softplus(noise_u))
    return (jnp.sum(norm.logpdf(logs, 0.0, prior.kernel_log_scale))
            + norm.logpdf(log_beta, prior.noise_log_median, prior.noise_log_scale))


def stack_atoms(trees):
    """One pytree with a leading atom axis from a sequence of equally shaped pytrees."""
    return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *trees)


def atom(tree, t: int):
    """Atom ``t`` of a stacked pytree."""
    return jax.tree_util.tree_map(lambda leaf: leaf[t], tree)


class AtomTerms(NamedTuple):
    """What the gradient step and the coordinate updates read from one evaluation."""

    values: jnp.ndarray       # (T,) Σ_d φ_dt F_d(θ_t)
    per_column: jnp.ndarray   # (D, T) F_d(θ_t), −β_t/2 ‖y_d‖² included
    log_priors: jnp.ndarray   # (T,) log p(θ_t, β_t)
    kl: jnp.ndarray           # KL(q(X) ‖ p(X))


def atom_terms(u: dict, problem: Problem, phi, prior: AtomPrior) -> AtomTerms:
    """Every atom's weighted data term over one q(X): (1) q(X)'s marginals and KL, once;
    (2) per atom, :func:`data_term` with column weights φ_{·t} and the atom's log prior."""
    X_mean, X_var, kl = problem.latent.marginals(u)                               # (1)

    def one(args):                                                                # (2)
        kernel_u, noise_u, weights = args
        value, parts, _ = data_term(kernel_u, noise_u, u["Z"], X_mean, X_var,
                                    problem._replace(column_weights=weights))
        return value, parts.per_column, log_prior(kernel_u, noise_u, problem, prior)

    values, per_column, log_priors = jax.lax.map(one, (u["kernel"], u["noise_var"], phi.T))
    return AtomTerms(values, per_column.T, log_priors, kl)


def gp_part(u: dict, problem: Problem, phi, prior: AtomPrior):
    """The part of the bound that depends on u:
    Σ_t Σ_d φ_dt F_d(θ_t) − KL + Σ_t log p(θ_t, β_t)."""
    terms = atom_terms(u, problem, phi, prior)
    return jnp.sum(terms.values) - terms.kl + jnp.sum(terms.log_priors)


def negative_gp_part(u: dict, problem: Problem, phi, prior: AtomPrior):
    """What the gradient steps minimise (module level, so its compiled step is reused)."""
    return -gp_part(u, problem, phi, prior)


def elbo(u: dict, problem: Problem, state: DPState, atom_prior: AtomPrior, dp_prior: DPPrior):
    """The whole DP-GP-LVM bound (module docstring)."""
    return gp_part(u, problem, state.phi, atom_prior) + dp_terms(state, dp_prior)


atom_terms_jit = jax.jit(atom_terms)
elbo_jit = jax.jit(elbo)

"""Functional core of the Bayesian GPLVM: parameter packing and the bound as a function of an
unconstrained parameter pytree (kept apart from the estimator; STYLE.md 10)."""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from gplvm.expectations import psi_statistics
from gplvm.objectives import collapsed
from gplvm.priors import dynamical
from gplvm.transforms import softplus


class Static(NamedTuple):
    """Data and configuration closed over by the jitted bound (not optimised)."""

    Y0: jnp.ndarray                       # (N, D) standardised, NaN -> 0
    groups: collapsed.MissingGroups
    layout: Optional[dynamical.SequenceLayout]
    jitter: float


def latent_marginals(u, kernel_cls_time, static: Static):
    """q(X) means, variances and KL for either prior."""
    if static.layout is None:
        X_mean, X_var = u["X_mean"], softplus(u["X_var"])
        return X_mean, X_var, collapsed.kl_standard_normal(X_mean, X_var)
    time_kernel = kernel_cls_time.from_unconstrained(u["time_kernel"])
    return dynamical.q_x_and_kl(time_kernel, static.layout, u["mu_bar"], softplus(u["lam"]),
                                static.Y0.shape[0])


def bound_and_parts(u, kernel_template, time_template, rule, static: Static):
    """The collapsed bound (to maximise) and the factors for q(U)."""
    kernel = kernel_template.from_unconstrained(u["kernel"])
    noise_var = softplus(u["noise_var"])
    X_mean, X_var, kl = latent_marginals(u, time_template, static)
    psi0, psi1, psi2 = psi_statistics(kernel, u["Z"], X_mean, X_var, rule=rule,
                                      weights=static.groups.weights)
    Kuu = kernel(u["Z"])
    value, parts = collapsed.data_term(psi0, psi1, psi2, Kuu, static.Y0, static.groups,
                                       noise_var, static.jitter)
    return value - kl, parts, (kernel, noise_var, X_mean, X_var, psi1)


def negative_bound(u, kernel_template, time_template, rule, static: Static):
    """The objective L-BFGS minimises (module level, so its compiled step is reused)."""
    return -bound_and_parts(u, kernel_template, time_template, rule, static)[0]


def negative_bound_keyed(u, key, kernel_template, time_template, rule, static: Static):
    """The same objective in the signature Adam's stochastic driver expects."""
    del key
    return negative_bound(u, kernel_template, time_template, rule, static)


negative_bound_jit = jax.jit(negative_bound)
bound_and_parts_jit = jax.jit(bound_and_parts)
optimal_q_u_jit = jax.jit(collapsed.optimal_q_u)

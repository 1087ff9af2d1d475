"""The one place where positivity is enforced (STYLE.md 3; issue 2, "positivity by a transform").

Every positive hyper-parameter (length-scale, variance, noise variance, dispersion, ...) is
optimised on the real line through ``positive = softplus``:

.. math:: \\theta = \\log(1 + e^{u}), \\qquad u = \\log(e^{\\theta} - 1).

Softplus is preferred to ``exp`` because it is linear for large ``u`` (no overflow when an
optimiser overshoots) and its inverse is well conditioned for the O(1) values of a standardised
problem.  Objects with trainable state expose ``unconstrained()`` -> pytree and
``from_unconstrained(u)`` -> object, both built from the two functions below.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


#: smallest value a positive parameter can take; keeps e.g. a noise variance from underflowing to
#: exactly 0 (β = ∞) when an optimiser's line search probes far along a steep direction.
POSITIVE_FLOOR = 1e-12


def softplus(u):
    """log(1 + exp(u)) + POSITIVE_FLOOR, computed without overflow."""
    return jnp.logaddexp(u, 0.0) + POSITIVE_FLOOR


def inverse_softplus(theta):
    """The inverse of :func:`softplus`: with t = θ − floor, log(exp(t) − 1) = t + log(1 − e^{−t}).

    The second form avoids overflow for large theta and keeps full precision for small theta
    through ``log(-expm1(-theta))``.
    """
    theta = jnp.asarray(theta, dtype=float) - POSITIVE_FLOOR
    return theta + jnp.log(-jnp.expm1(-theta))


def to_unconstrained_positive(tree):
    """Map every leaf of a pytree of positive values to the real line."""
    return jax.tree_util.tree_map(inverse_softplus, tree)


def to_constrained_positive(tree):
    """Map every leaf of an unconstrained pytree back to positive values."""
    return jax.tree_util.tree_map(softplus, tree)

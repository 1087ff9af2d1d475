"""A likelihood the library does not ship, written as a user would: the proof that adding a
likelihood to the RFLVM needs one likelihood module and nothing else (issue 33's acceptance;
docs/contract.md, "Adding a likelihood").  Used by tests/models/rflvm/test_rflvm_new_likelihood.py.

Geometric counts with a log link: y | f ~ Geometric with mean μ = e^f on {0, 1, 2, ...},

.. math:: p(y \\mid f) = \\frac{\\mu^y}{(1 + \\mu)^{y + 1}}, \\qquad
          \\log p = y f - (y + 1) \\log(1 + e^f),

SciPy's ``nbinom(1, 1/(1 + μ))``, variance μ(1 + μ).  Only the hooks every likelihood defines
are written here; the gradient and the curvature in f come from the base class by autodiff,
the sampler's hooks (``from_state``, ``_psi_log_prob``, ``intercept_centre``, ...) keep their
defaults, so the RFLVM draws its weights by the generic elliptical slice (no augmentation).
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.likelihoods import AbstractLikelihood, check_counts, register_likelihood, softplus
from gplvm.pytree import pytree_dataclass


@register_likelihood
@pytree_dataclass
class Geometric(AbstractLikelihood):
    """y | f ~ Geometric(mean e^f) on {0, 1, 2, ...} (module docstring)."""

    name: ClassVar[str] = "geometric"

    def _log_prob(self, Y, F):
        return Y * F - (Y + 1.0) * softplus(F)

    def _inverse_link(self, F):
        return jnp.exp(F)

    def _conditional_variance(self, F):
        return jnp.exp(F) * (1.0 + jnp.exp(F))

    def _sample(self, key, F):
        # failures before the first success, success probability 1/(1 + μ) = σ(−f)
        u = jax.random.uniform(key, F.shape, F.dtype, minval=jnp.finfo(F.dtype).tiny)
        return jnp.floor(jnp.log(u) / -softplus(-F))      # log(1 − q) = log σ(f)

    def _check(self, Y: np.ndarray) -> None:
        check_counts(Y, what="geometric")

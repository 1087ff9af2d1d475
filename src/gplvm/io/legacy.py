"""Value types that only format-1 files hold: readers for state the Bayesian GPLVM no longer keeps.

Before issue 11, ``BayesianGPLVM`` kept two private NamedTuples in its fitted state and format-1
files named them by module path: ``gplvm.models._bgplvm_core.Static`` (attribute ``_static``)
and ``gplvm.objectives.new_rows.FixedModel`` (attribute ``_fixed``).  The reshaped estimator
keeps neither type, so the two are redefined here, field for field, under the registered names
that :data:`gplvm.registry.FORMAT1_NAMES` maps the old paths to.  :func:`gplvm.load` decodes an
old file's ``_static``/``_fixed`` into these, and ``BayesianGPLVM._upgrade_fitted`` converts
them into today's fitted state.  No current code writes them: they are read-only history.

The field types are those the old code stored (JAX arrays; ``groups`` a
``gplvm.state.MissingGroups``, ``layout`` a ``gplvm.state.SequenceLayout`` or ``None``).
This module imports nothing from gplvm but the registry, so :mod:`gplvm.io.model_file` may
import it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gplvm.registry import register

__all__ = ["BayesianGPLVMFixed", "BayesianGPLVMStatic"]


@register("gplvm.format1.BayesianGPLVMStatic")
class BayesianGPLVMStatic(NamedTuple):
    """Format 1's ``_static``: data and configuration closed over by the old jitted bound."""

    Y0: Any         # (N, D) standardised Y, NaN replaced by 0
    groups: Any     # gplvm.state.MissingGroups: columns grouped by missingness pattern
    layout: Any     # gplvm.state.SequenceLayout (dynamical prior) or None (iid prior)
    jitter: Any     # float added to the diagonal of Kuu


@register("gplvm.format1.BayesianGPLVMFixed")
class BayesianGPLVMFixed(NamedTuple):
    """Format 1's ``_fixed``: what the old new-row bound needed (standardised units)."""

    V: Any             # (M, D) Kuu⁻¹ Ū, the mean of q(U) premultiplied by Kuu⁻¹
    H: Any             # (G, M, M) Kuu⁻¹ Σ_u,g Kuu⁻¹ per missingness group g
    Kuu_inv: Any       # (M, M)
    column_group: Any  # (D,) the group of each column
    noise_var: Any     # Gaussian noise variance (standardised units)

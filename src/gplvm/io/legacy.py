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

from gplvm.registry import lookup, register

__all__ = ["BayesianGPLVMFixed", "BayesianGPLVMStatic", "typed_fit_state"]

#: the registered FitState (:mod:`gplvm.models.fit_state`) that each estimator's ``_resume_``
#: dict of a file of format 5 and below becomes; a ``BayesianGPLVM`` dict with the key
#: ``"svi"`` holds an SVI run (:data:`SVI_FIT_STATE`)
FIT_STATES = {"gplvm.BayesianGPLVM": "gplvm.state.CollapsedFitState",
              "gplvm.StructuredGPLVM": "gplvm.state.StructuredFitState",
              "gplvm.DPGPLVM": "gplvm.state.DPFitState",
              "gplvm.BayesianGLM": "gplvm.state.GLMFitState"}
SVI_FIT_STATE = "gplvm.state.SviFitState"


def typed_fit_state(fitted: dict, estimator: str) -> tuple[dict, Any]:
    """``(fitted without "_resume_", its FitState)`` of a file of format 5 and below, whose
    estimator (registered name ``estimator``) kept its run state as a dict ``_resume_`` of the
    FitState's fields (absent: None, a finished run).  Fields the dict lacks take the type's
    defaults (``earlier=()``: restarts' histories, kept since issue 16).

    Raises:
        ValueError: the dict is not the run state of that estimator.
    """
    fitted = dict(fitted)
    run = fitted.pop("_resume_", None)
    if run is None:
        return fitted, None
    if not isinstance(run, dict) or estimator not in FIT_STATES:
        raise ValueError(f"damaged file: a {estimator} with a run state {type(run).__name__}")
    if estimator == "gplvm.BayesianGPLVM" and "svi" in run:
        name, run = SVI_FIT_STATE, run["svi"]
    else:
        name = FIT_STATES[estimator]
    try:
        return fitted, lookup(name)(**run)
    except TypeError as err:
        raise ValueError(f"damaged file: its run state is not a {name} ({err})") from err


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

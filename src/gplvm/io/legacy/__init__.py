"""Files written by earlier versions of gplvm, brought up to date: every upgrade of an old file
is here (issue 33: one legacy module; formerly ``io/legacy.py``, ``gplvm_family/format1.py``,
``models/rflvm/legacy.py`` and ``registry.FORMAT1_NAMES``).

:func:`gplvm.load` reads a file of an older format version in four steps, all of them here:

1. class names: format 1 (gplvm before issue 11) named classes by ``module.QualName``;
   :func:`registered_class` reads every class name of a file (the estimator's, in
   :func:`gplvm.io.load`, and each object's, in :class:`gplvm.io.codec.Decoder`), a format-1
   one through :func:`format1_name` and :data:`FORMAT1_NAMES`;
2. the run state: files of format 5 and below kept it as a dict attribute ``_resume_``, which
   :func:`typed_fit_state` turns into the estimator's registered FitState
   (:mod:`gplvm.models.fit_state`; format 6 keeps it in the document's ``fit_state``);
3. the fitted attributes: each estimator's ``_upgrade_fitted`` classmethod is a thin hook
   calling the upgrade of its model here (:func:`upgrade_bgplvm`, :func:`upgrade_dpgplvm`,
   :func:`upgrade_glm`, :mod:`.rflvm`'s :func:`upgrade_rflvm` and :func:`current_layouts`);
4. the fitted value: files of format 6 and below held every instance attribute, caches
   included (the RFLVM's ``_light_``, rebuilt from its chains today); :func:`declared_only`
   keeps the ones the estimator declares (its ``_fitted_fields``, docs/contract.md) and drops
   the rest (format 7 holds the declared fields only).

Format 1's two private Bayesian GPLVM types, which no current code writes, live on here as
:class:`BayesianGPLVMStatic` and :class:`BayesianGPLVMFixed` so that old files decode.

This package imports no model when it is imported (:mod:`gplvm.io` reaches none,
tests/project/test_import_structure.py): today's classes are found through
:func:`gplvm.registry.lookup` by their registered names, and the RFLVM's helpers are imported inside the functions that use
them, which run only while an old file is loaded.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gplvm.io.legacy.gplvm_family import upgrade_bgplvm, upgrade_dpgplvm, upgrade_glm
from gplvm.io.legacy.rflvm import current_layouts, upgrade_rflvm
from gplvm.registry import lookup, register

__all__ = ["FORMAT1_NAMES", "BayesianGPLVMFixed", "BayesianGPLVMStatic", "current_layouts",
           "declared_only", "format1_name", "registered_class", "typed_fit_state",
           "upgrade_bgplvm", "upgrade_dpgplvm", "upgrade_glm", "upgrade_rflvm"]

#: Every name a format-1 file can hold (``module.QualName``), mapped to the registered name that
#: reads it today.
FORMAT1_NAMES: dict[str, str] = {
    "gplvm.models.bgplvm.BayesianGPLVM": "gplvm.BayesianGPLVM",
    "gplvm.models.rflvm.RFLVM": "gplvm.RFLVM",
    "gplvm.models.linear_regression.BayesianLinearRegression": "gplvm.BayesianLinearRegression",
    "gplvm.models.glm.BayesianGLM": "gplvm.BayesianGLM",
    **{f"gplvm.kernels.stationary.{k}": f"gplvm.kernels.{k}" for k in (
        "RBF", "Matern12", "Matern32", "Matern52", "RationalQuadratic")},
    **{f"gplvm.kernels.dot.{k}": f"gplvm.kernels.{k}" for k in ("Linear", "White", "Constant")},
    "gplvm.kernels.base.Sum": "gplvm.kernels.Sum",
    "gplvm.kernels.base.Product": "gplvm.kernels.Product",
    "gplvm.features.fourier.RandomFourierFeatures": "gplvm.features.RandomFourierFeatures",
    "gplvm.features.fastfood.FastfoodFeatures": "gplvm.features.FastfoodFeatures",
    "gplvm.features.alacarte.ALaCarteFeatures": "gplvm.features.ALaCarteFeatures",
    **{f"gplvm.features.compose.{k}": f"gplvm.features.{k}" for k in (
        "Concat", "ColumnSubset", "Bias")},
    "gplvm.likelihoods.gaussian.Gaussian": "gplvm.likelihoods.Gaussian",
    "gplvm.likelihoods.binomial.Bernoulli": "gplvm.likelihoods.Bernoulli",
    "gplvm.likelihoods.binomial.Binomial": "gplvm.likelihoods.Binomial",
    "gplvm.likelihoods.poisson.Poisson": "gplvm.likelihoods.Poisson",
    "gplvm.likelihoods.negative_binomial.NegativeBinomial": "gplvm.likelihoods.NegativeBinomial",
    "gplvm.likelihoods.multinomial.Multinomial": "gplvm.likelihoods.Multinomial",
    **{f"gplvm.expectations.rules.{k}": f"gplvm.expectations.{k}" for k in (
        "Analytic", "Unscented", "GaussHermite", "MonteCarlo")},
    "gplvm.models._bgplvm_core.Static": "gplvm.format1.BayesianGPLVMStatic",
    "gplvm.objectives.new_rows.FixedModel": "gplvm.format1.BayesianGPLVMFixed",
    "gplvm.objectives.collapsed.MissingGroups": "gplvm.state.MissingGroups",
    "gplvm.priors.dynamical.SequenceLayout": "gplvm.state.SequenceLayout",
    "gplvm.objectives.linear_model.LinearPosterior": "gplvm.state.LinearPosterior",
    "gplvm.objectives.linear_model.DualLinearPosterior": "gplvm.state.DualLinearPosterior",
    "gplvm.models._rflvm.spec.RFLVMSpec": "gplvm.state.RFLVMSpec",
    "gplvm.models._rflvm.spec.RFLVMData": "gplvm.state.RFLVMData",
    "gplvm.models._rflvm.spec.RFLVMState": "gplvm.state.RFLVMState",
    "gplvm.samplers.dp_mixture.DPMixtureState": "gplvm.state.DPMixtureState",
    "gplvm.samplers._niw.NIWPrior": "gplvm.state.NIWPrior",
    "gplvm.inference.mcmc.driver.ChainResult": "gplvm.state.ChainResult",
}


def format1_name(name: object) -> object:
    """The registered name that reads the format-1 class name ``name`` (itself when it is not
    one of :data:`FORMAT1_NAMES`: the lookup then refuses it)."""
    return FORMAT1_NAMES.get(name, name) if isinstance(name, str) else name


def registered_class(name: object, format_version: int) -> type:
    """The class that reads the class name ``name`` of a file of ``format_version``: a format-1
    name translated by :func:`format1_name` first, then looked up in :mod:`gplvm.registry`.

    Raises:
        ValueError: no class is registered under that name.
    """
    return lookup(format1_name(name) if format_version == 1 else name)


def object_fields(name: object, fields: dict) -> dict:
    """The stored fields of an object of registered name ``name`` as today's class takes them.
    A ``gplvm.state.GPLVMProblem`` written before the sharded route (formats 2 to 6) has one
    more field, ``sharded``, always None in a file (rows on a mesh were never saved): it is
    dropped; any other value is a damaged file."""
    if name == "gplvm.state.GPLVMProblem" and "sharded" in fields:
        fields = dict(fields)
        if fields.pop("sharded") is not None:
            raise ValueError("damaged file: a GPLVMProblem holds rows on a mesh (field "
                             "'sharded'), which no gplvm file ever held")
    return fields


@register("gplvm.format1.BayesianGPLVMStatic")
class BayesianGPLVMStatic(NamedTuple):
    """Format 1's ``_static`` (``gplvm.models._bgplvm_core.Static``): data and configuration
    closed over by the old jitted bound."""

    Y0: Any         # (N, D) standardised Y, NaN replaced by 0
    groups: Any     # gplvm.state.MissingGroups: columns grouped by missingness pattern
    layout: Any     # gplvm.state.SequenceLayout (dynamical prior) or None (iid prior)
    jitter: Any     # float added to the diagonal of Kuu


@register("gplvm.format1.BayesianGPLVMFixed")
class BayesianGPLVMFixed(NamedTuple):
    """Format 1's ``_fixed`` (``gplvm.objectives.new_rows.FixedModel``): what the old new-row
    bound needed (standardised units)."""

    V: Any             # (M, D) Kuu⁻¹ Ū, the mean of q(U) premultiplied by Kuu⁻¹
    H: Any             # (G, M, M) Kuu⁻¹ Σ_u,g Kuu⁻¹ per missingness group g
    Kuu_inv: Any       # (M, M)
    column_group: Any  # (D,) the group of each column
    noise_var: Any     # Gaussian noise variance (standardised units)


#: the registered FitState that each estimator's ``_resume_`` dict (format 5 and below)
#: becomes; a ``BayesianGPLVM`` dict with the key ``"svi"`` holds an SVI run instead
FIT_STATES = {"gplvm.BayesianGPLVM": "gplvm.state.CollapsedFitState",
              "gplvm.StructuredGPLVM": "gplvm.state.StructuredFitState",
              "gplvm.DPGPLVM": "gplvm.state.DPFitState",
              "gplvm.BayesianGLM": "gplvm.state.GLMFitState"}
SVI_FIT_STATE = "gplvm.state.SviFitState"


def typed_fit_state(fitted: dict, estimator: str) -> tuple[dict, Any]:
    """``(fitted without "_resume_", its FitState)`` of a file of format 5 and below, whose
    estimator (registered name ``estimator``) kept its run state as a dict ``_resume_`` of the
    FitState's fields (absent: None, a finished run).  Fields the dict lacks take the type's
    defaults (``earlier=()``).

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


def declared_only(fitted: dict, declared: tuple[str, ...]) -> dict:
    """The attributes of a file of format 6 and below, upgraded to today's names, that are part
    of the estimator's fitted value (``declared``: its ``_fitted_fields`` and
    ``_upgraded_from_format_``).  Those files held every instance attribute, so the others
    (caches such as the RFLVM's ``_light_``, which the model rebuilds when it needs it, or an
    attribute set on the model by hand) are dropped."""
    return {k: v for k, v in fitted.items() if k in declared}

"""The classes :func:`gplvm.load` may rebuild: an explicit whitelist (API.md, ``save``/``load``).

A saved file names each object's class by its qualified name (``module.QualName``).  Loading
looks the name up in this table and nothing else: it never imports a module named in the file
and never evaluates text from it, so a tampered file can at worst fail to load.  A class that is
not listed here cannot be saved either (saving refuses it rather than writing a file that will
not load).  Add a class here when an estimator starts to keep one in its fitted state.
"""

from __future__ import annotations

import functools


def qualified_name(cls: type) -> str:
    """``module.QualName`` of a class, the key of the registry."""
    return f"{cls.__module__}.{cls.__qualname__}"


def _classes() -> tuple[type, ...]:
    # Imported here, not at module level: the estimators import gplvm.io, so gplvm.io must not
    # import the estimators when it is first loaded.
    from gplvm import expectations, features, kernels, likelihoods, models
    from gplvm.inference.mcmc.driver import ChainResult
    from gplvm.models._bgplvm_core import Static
    from gplvm.models._rflvm.spec import RFLVMData, RFLVMSpec, RFLVMState
    from gplvm.objectives.collapsed import MissingGroups
    from gplvm.objectives.linear_model import DualLinearPosterior, LinearPosterior
    from gplvm.objectives.new_rows import FixedModel
    from gplvm.priors.dynamical import SequenceLayout
    from gplvm.samplers._niw import NIWPrior
    from gplvm.samplers.dp_mixture import DPMixtureState

    return (
        # estimators
        models.BayesianGPLVM, models.RFLVM, models.BayesianLinearRegression, models.BayesianGLM,
        # kernels
        kernels.RBF, kernels.Matern12, kernels.Matern32, kernels.Matern52,
        kernels.RationalQuadratic, kernels.Linear, kernels.White, kernels.Constant,
        kernels.Sum, kernels.Product,
        # feature maps
        features.RandomFourierFeatures, features.FastfoodFeatures, features.ALaCarteFeatures,
        features.Concat, features.ColumnSubset, features.Bias,
        # likelihoods
        likelihoods.Gaussian, likelihoods.Bernoulli, likelihoods.Binomial, likelihoods.Poisson,
        likelihoods.NegativeBinomial, likelihoods.Multinomial,
        # psi-statistic rules
        expectations.Analytic, expectations.Unscented, expectations.GaussHermite,
        expectations.MonteCarlo,
        # fitted state of the estimators
        Static, MissingGroups, SequenceLayout, FixedModel, LinearPosterior, DualLinearPosterior,
        RFLVMSpec, RFLVMData, RFLVMState, DPMixtureState, NIWPrior, ChainResult,
    )


@functools.cache
def registry() -> dict[str, type]:
    """Qualified name → class, for every class a saved file may name."""
    return {qualified_name(cls): cls for cls in _classes()}


@functools.cache
def estimators() -> frozenset[type]:
    """The classes a file may hold at its top level."""
    from gplvm import models

    return frozenset({models.BayesianGPLVM, models.RFLVM, models.BayesianLinearRegression,
                      models.BayesianGLM})


def lookup(name: object) -> type:
    """The whitelisted class called ``name``; ValueError for any other name."""
    cls = registry().get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"the file names the class {name!r}, which is not one gplvm.load may "
                         f"rebuild; only gplvm's own estimators, kernels, feature maps, "
                         f"likelihoods and fitted-state types are allowed (the file is damaged, "
                         f"was tampered with, or was written by another version of gplvm)")
    return cls

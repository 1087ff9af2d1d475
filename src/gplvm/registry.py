"""Stable names for the classes a saved file may hold (API.md: ``save``/``load``; issue 11).

A class that an estimator keeps in its fitted state registers itself where it is defined::

    @register("gplvm.kernels.RBF")
    @pytree_dataclass
    class RBF(AbstractStationary): ...

    @register("gplvm.BayesianGPLVM", estimator=True)
    class BayesianGPLVM(...): ...

A saved file names each object by this *registered* name, never by the module that happens to
define it, so that moving or renaming a module does not break files users already saved.
Loading looks a name up here and nothing else: it never imports a module named in a file and
never evaluates text from it.  This module imports nothing from gplvm; :mod:`gplvm.io` reads it,
and the classes fill it when their modules are imported (:func:`lookup` imports gplvm's
estimators, and with them every registered class, before it reports a name unknown).

Files of format version 1 (gplvm before issue 11) named classes by their qualified Python name;
:data:`FORMAT1_NAMES` maps each of those to today's registered name.
"""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T", bound=type)

__all__ = ["FORMAT1_NAMES", "estimators", "lookup", "name_of", "register"]

_CLASSES: dict[str, type] = {}
_NAMES: dict[type, str] = {}
_ESTIMATORS: set[type] = set()


def register(name: str, *, estimator: bool = False) -> Callable[[T], T]:
    """Class decorator: file the class under ``name`` (``estimator``: a file's top level).

    Raises:
        ValueError: ``name`` is already taken by another class.
    """
    def decorate(cls: T) -> T:
        taken = _CLASSES.get(name)
        if taken is not None and taken.__qualname__ != cls.__qualname__:
            raise ValueError(f"the registered name {name!r} is taken by {taken.__qualname__}")
        _CLASSES[name] = cls
        _NAMES[cls] = name
        if estimator:
            _ESTIMATORS.add(cls)
        return cls

    return decorate


def name_of(cls: type) -> str:
    """The registered name of ``cls``.

    Raises:
        TypeError: the class is not registered, so files cannot hold it.
    """
    try:
        return _NAMES[cls]
    except KeyError:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} is not registered with "
                        f"gplvm.registry.register, so gplvm files cannot hold it") from None


def lookup(name: object, format_version: int | None = None) -> type:
    """The class registered as ``name`` (a format-1 name is translated first).

    Raises:
        ValueError: no class is registered under that name.
    """
    if format_version == 1 and isinstance(name, str):
        name = FORMAT1_NAMES.get(name, name)
    if isinstance(name, str) and name not in _CLASSES:
        _import_registered()
    cls = _CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"the file names the class {name!r}, which is not one gplvm.load may "
                         f"rebuild; only gplvm's own estimators, kernels, feature maps, "
                         f"likelihoods and fitted-state types are allowed (the file is damaged, "
                         f"was tampered with, or was written by another version of gplvm)")
    return cls


def estimators() -> frozenset[type]:
    """The classes a file may hold at its top level."""
    _import_registered()
    return frozenset(_ESTIMATORS)


def _import_registered() -> None:
    """Import the modules whose imports register every class: ``import gplvm`` imports them on
    the first use of a public name only (issue 32), and a file may be read before that."""
    import gplvm.io.legacy  # noqa: F401
    import gplvm.models  # noqa: F401
    import gplvm.models.structured  # noqa: F401


#: Format-1 files (gplvm before issue 11) named classes by ``module.QualName``; this is every
#: name such a file can hold, mapped to the registered name that reads it today.
FORMAT1_NAMES: dict[str, str] = {
    "gplvm.models.bgplvm.BayesianGPLVM": "gplvm.BayesianGPLVM",
    "gplvm.models.rflvm.RFLVM": "gplvm.RFLVM",
    "gplvm.models.linear_regression.BayesianLinearRegression": "gplvm.BayesianLinearRegression",
    "gplvm.models.glm.BayesianGLM": "gplvm.BayesianGLM",
    "gplvm.kernels.stationary.RBF": "gplvm.kernels.RBF",
    "gplvm.kernels.stationary.Matern12": "gplvm.kernels.Matern12",
    "gplvm.kernels.stationary.Matern32": "gplvm.kernels.Matern32",
    "gplvm.kernels.stationary.Matern52": "gplvm.kernels.Matern52",
    "gplvm.kernels.stationary.RationalQuadratic": "gplvm.kernels.RationalQuadratic",
    "gplvm.kernels.dot.Linear": "gplvm.kernels.Linear",
    "gplvm.kernels.dot.White": "gplvm.kernels.White",
    "gplvm.kernels.dot.Constant": "gplvm.kernels.Constant",
    "gplvm.kernels.base.Sum": "gplvm.kernels.Sum",
    "gplvm.kernels.base.Product": "gplvm.kernels.Product",
    "gplvm.features.fourier.RandomFourierFeatures": "gplvm.features.RandomFourierFeatures",
    "gplvm.features.fastfood.FastfoodFeatures": "gplvm.features.FastfoodFeatures",
    "gplvm.features.alacarte.ALaCarteFeatures": "gplvm.features.ALaCarteFeatures",
    "gplvm.features.compose.Concat": "gplvm.features.Concat",
    "gplvm.features.compose.ColumnSubset": "gplvm.features.ColumnSubset",
    "gplvm.features.compose.Bias": "gplvm.features.Bias",
    "gplvm.likelihoods.gaussian.Gaussian": "gplvm.likelihoods.Gaussian",
    "gplvm.likelihoods.binomial.Bernoulli": "gplvm.likelihoods.Bernoulli",
    "gplvm.likelihoods.binomial.Binomial": "gplvm.likelihoods.Binomial",
    "gplvm.likelihoods.poisson.Poisson": "gplvm.likelihoods.Poisson",
    "gplvm.likelihoods.negative_binomial.NegativeBinomial": "gplvm.likelihoods.NegativeBinomial",
    "gplvm.likelihoods.multinomial.Multinomial": "gplvm.likelihoods.Multinomial",
    "gplvm.expectations.rules.Analytic": "gplvm.expectations.Analytic",
    "gplvm.expectations.rules.Unscented": "gplvm.expectations.Unscented",
    "gplvm.expectations.rules.GaussHermite": "gplvm.expectations.GaussHermite",
    "gplvm.expectations.rules.MonteCarlo": "gplvm.expectations.MonteCarlo",
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

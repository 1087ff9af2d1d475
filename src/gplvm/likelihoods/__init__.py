"""Observation models p(y | f): Gaussian, Bernoulli, binomial, Poisson, negative binomial, multinomial.

Every likelihood is an immutable pytree dataclass with the interface of
:class:`AbstractLikelihood`: ``log_prob`` / ``log_likelihood`` (NaN = missing contributes 0),
``inverse_link``, ``conditional_variance``, ``predictive_mean_var``, ``expected_log_prob``,
``sample``, ``validate``, ``latent_dim``, ``polya_gamma_params`` / ``polya_gamma_offset``
(seed 000, eq. 26) and ``unconstrained`` / ``from_unconstrained`` for trainable parameters.
Models name them by string through :func:`get_likelihood`; a new likelihood class joins the
names with :func:`register_likelihood` (docs/contract.md, "Adding a likelihood"), written with
:func:`gplvm.pytree.pytree_dataclass` and the helpers :func:`softplus` and :func:`check_counts`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gplvm._validation import check_counts
from gplvm.likelihoods._common import gauss_hermite, log_sigmoid, softplus
from gplvm.likelihoods.base import AbstractLikelihood
from gplvm.likelihoods.binomial import Bernoulli, Binomial
from gplvm.likelihoods.gaussian import Gaussian
from gplvm.likelihoods.multinomial import Multinomial, logsumexp_others
from gplvm.likelihoods.negative_binomial import NegativeBinomial
from gplvm.likelihoods.poisson import Poisson

LIKELIHOODS: dict[str, type[AbstractLikelihood]] = {
    cls.name: cls for cls in (Gaussian, Bernoulli, Binomial, Poisson, NegativeBinomial, Multinomial)
}



def register_likelihood(cls: type[AbstractLikelihood]) -> type[AbstractLikelihood]:
    """Class decorator: make ``cls`` known by its ``name`` to :func:`get_likelihood` and to the
    models that look a likelihood up by name (the RFLVM's spec stores the name).

    Raises:
        ValueError: ``cls`` defines no ``name``, or another class has it.
    """
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{cls.__name__} needs a class attribute name: ClassVar[str] = ...")
    held = LIKELIHOODS.get(name)
    if held is not None and ((held.__module__, held.__qualname__)
                             != (cls.__module__, cls.__qualname__)):
        raise ValueError(f"the likelihood name {name!r} is taken by {held.__name__}; choose "
                         f"another name for {cls.__name__}")
    LIKELIHOODS[name] = cls
    return cls


def likelihood_class(name: str) -> type[AbstractLikelihood]:
    """The class registered under ``name`` (a likelihood's ``name``, as a model stores it)."""
    try:
        return LIKELIHOODS[name]
    except KeyError:
        raise ValueError(f"unknown likelihood {name!r}; choose one of {sorted(LIKELIHOODS)} "
                         f"or register a class with gplvm.likelihoods.register_likelihood"
                         ) from None


_ALIASES = {"normal": "gaussian", "nb": "negative_binomial", "negbin": "negative_binomial",
            "negative_binomial": "negative_binomial", "binary": "bernoulli",
            "categorical": "multinomial"}


def get_likelihood(name_or_object: object, **kwargs: Any) -> AbstractLikelihood:
    """A likelihood from its name (``"poisson"``, ``"negative_binomial"``, ...) or as given.

    Args:
        name_or_object: one of ``LIKELIHOODS`` (case-insensitive; "-" or " " may replace "_";
            aliases "normal", "nb", "binary", "categorical"), or a likelihood object, which is
            returned unchanged.  Annotated ``object``: anything else is refused here with a
            ValueError (a boundary function, :mod:`gplvm.typing`).
        **kwargs: constructor arguments when a name is given, e.g. ``dispersion=2.0``.

    Raises:
        ValueError: not a name or likelihood object, unknown name, unknown argument, or
        arguments given with an object.
    """
    if isinstance(name_or_object, AbstractLikelihood):
        if kwargs:
            raise ValueError(f"arguments {sorted(kwargs)} were given with a likelihood object; "
                             f"set them on the object instead, e.g. "
                             f"{type(name_or_object).__name__}({', '.join(kwargs)}=...)")
        return name_or_object
    if not isinstance(name_or_object, str):
        raise ValueError(f"likelihood must be a name or a gplvm.likelihoods object; got "
                         f"{type(name_or_object).__name__}")
    key = name_or_object.strip().lower().replace("-", "_").replace(" ", "_")
    key = _ALIASES.get(key, key)
    if key not in LIKELIHOODS:
        raise ValueError(f"unknown likelihood {name_or_object!r}; choose one of "
                         f"{sorted(LIKELIHOODS)} or pass a gplvm.likelihoods object")
    cls = LIKELIHOODS[key]
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ValueError(f"the {key} likelihood does not take {unknown}; its parameters are "
                         f"{allowed or 'none'}")
    return cls(**kwargs)


__all__ = [
    "AbstractLikelihood", "Gaussian", "Bernoulli", "Binomial", "Poisson", "NegativeBinomial",
    "Multinomial", "LIKELIHOODS", "get_likelihood", "gauss_hermite", "likelihood_class",
    "log_sigmoid", "logsumexp_others", "register_likelihood", "softplus", "check_counts",
]

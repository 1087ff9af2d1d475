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
:data:`gplvm.io.legacy.FORMAT1_NAMES` maps each of those to today's registered name, before
:func:`lookup` is asked.
"""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T", bound=type)

__all__ = ["estimators", "lookup", "name_of", "register"]

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


def lookup(name: object) -> type:
    """The class registered as ``name``.

    Raises:
        ValueError: no class is registered under that name.
    """
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


"""Saving and loading fitted estimators: API.md's ``save(path)`` / ``gplvm.load(path)``, "a
versioned file that loading never executes (no pickle)".

A file is one ``.npz`` archive (``numpy.savez``, read back with ``allow_pickle=False``).  Its
entry ``__gplvm__`` is a UTF-8 JSON document stored as a uint8 array; the other entries
``a0``, ``a1``, ... are the arrays the document refers to.  The document (format version 2)::

    {"format": "gplvm-estimator", "format_version": 2, "gplvm_version": "0.1.0",
     "class": "gplvm.RFLVM",
     "params": {...},     # the constructor arguments, get_params(deep=False)
     "fitted": {...}}     # every other instance attribute

``fitted`` holds the public fitted attributes (trailing underscore) and the private state that
``transform``/``predict``/``score``/``impute``/``sample`` use, each encoded by
:mod:`gplvm._io_codec`.  Every class in a file (the estimator at the top, kernels, feature maps,
likelihoods and fitted-state types inside) is named by the stable name it registered with
:func:`gplvm.registry.register`, never by the module defining it, so moving code does not break
saved files.  Classes are rebuilt only from that registry; nothing named in a file is imported
or evaluated.  This module imports no estimator: the estimators import it (for
:class:`SaveMixin`) and register themselves, and ``import gplvm`` imports them all.

Versions.  Format 1 (gplvm before issue 11) named classes by ``module.QualName``; such names
are translated through :data:`gplvm.registry.FORMAT1_NAMES`, and the two private Bayesian GPLVM
types they held live on in :mod:`gplvm._io_format1`.  When a file's version is below
:data:`FORMAT_VERSION`, :func:`load` hands the decoded fitted attributes to the estimator's
classmethod ``_upgrade_fitted(fitted, format_version)``, which returns today's attributes (the
default, :meth:`SaveMixin._upgrade_fitted`, returns them unchanged); likewise its constructor
arguments to ``_upgrade_params(params, format_version)``.  The model then records the file's
version in ``_upgraded_from_format_`` (:data:`UPGRADED_FROM`), its only attribute that a model
fitted today lacks.  A file of a version above :data:`FORMAT_VERSION` was written by a newer
gplvm and is refused with a message saying so.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from gplvm import _io_format1  # noqa: F401  (registers the format-1 types old files hold)
from gplvm._io_codec import Decoder, Encoder
from gplvm._version import __version__
from gplvm.registry import estimators, lookup, name_of

__all__ = ["FORMAT", "FORMAT_VERSION", "UPGRADED_FROM", "SaveMixin", "load", "save"]

FORMAT = "gplvm-estimator"
FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
#: the attribute :func:`load` gives a model read from an older format: that format's version
UPGRADED_FROM = "_upgraded_from_format_"
_DOCUMENT = "__gplvm__"


class SaveMixin:
    """Gives an estimator API.md's ``save(path)``; :func:`gplvm.load` reads the file back."""

    def save(self, path: str | os.PathLike) -> None:
        """Write this fitted estimator to ``path`` (a ``.npz`` archive, no pickle).

        Raises:
            NotFittedError: the estimator has not been fitted.
            TypeError: its state holds a value of a type files cannot hold.
        """
        save(self, path)

    @classmethod
    def _upgrade_fitted(cls, fitted: dict[str, Any], format_version: int) -> dict[str, Any]:
        """Today's fitted attributes from those of a file of an older format version.

        :func:`gplvm.load` calls this, for files whose ``format_version`` is below
        :data:`FORMAT_VERSION`, with the decoded instance attributes (everything but the
        constructor parameters); the model is given what it returns.  An estimator whose
        fitted state changed since that version overrides this to convert the old state
        (rename, rebuild, add what older versions did not keep, drop what is no longer
        kept), so that the model holds exactly the attributes a model fitted today holds;
        :func:`gplvm.load` then adds ``_upgraded_from_format_`` = ``format_version``.  The
        default keeps the attributes as they are.

        Args:
            fitted: attribute name → decoded value, as the old version stored them.
            format_version: the file's format version (1 ≤ it < :data:`FORMAT_VERSION`).

        Returns:
            attribute name → value, as a model fitted by this version of gplvm holds them.
        """
        return fitted

    @classmethod
    def _upgrade_params(cls, params: dict[str, Any], format_version: int) -> dict[str, Any]:
        """Today's constructor arguments from those of a file of an older format version.

        Called by :func:`gplvm.load` like :meth:`_upgrade_fitted`, before the estimator is
        constructed from what it returns; an estimator that renamed or removed a constructor
        parameter since that version overrides this.  The default keeps the arguments.
        """
        return params


def save(model: Any, path: str | os.PathLike) -> None:
    """Write a fitted gplvm estimator to ``path``, exactly that name (no suffix is added)."""
    check_is_fitted(model)
    if type(model) not in estimators():
        raise TypeError(f"gplvm files hold gplvm's estimators; got {type(model).__name__}")
    encoder = Encoder()
    params = model.get_params(deep=False)
    document = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "gplvm_version": __version__,
        "class": name_of(type(model)),
        "params": {k: encoder.encode(v, f"parameter {k}") for k, v in params.items()},
        "fitted": {k: encoder.encode(v, f"attribute {k}") for k, v in vars(model).items()
                   if k not in params},
    }
    text = np.frombuffer(json.dumps(document).encode("utf-8"), dtype=np.uint8)
    with open(os.fspath(path), "wb") as file:      # np.savez(name) would append ".npz"
        np.savez(file, **{_DOCUMENT: text}, **encoder.arrays)


def load(path: str | os.PathLike) -> Any:
    """Read a fitted estimator written by ``save``; nothing in the file is executed.

    Raises:
        ValueError: the file is not a gplvm file, has a format version this gplvm cannot
            read (a newer one: upgrade gplvm), names a class that is not registered, or is
            damaged.
    """
    archive = np.load(os.fspath(path), allow_pickle=False)
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{os.fspath(path)!r} is not a gplvm file (not an .npz archive); "
                         f"write one with model.save(path)")
    with archive:
        if _DOCUMENT not in archive.files:
            raise ValueError(f"{os.fspath(path)!r} is not a gplvm file (it has no "
                             f"{_DOCUMENT!r} entry); write one with model.save(path)")
        document = _read_document(archive[_DOCUMENT])
        version = _check_format(document)
        cls = lookup(document.get("class"), format_version=version)
        if cls not in estimators():
            raise ValueError(f"the file's top-level class {document['class']!r} is not a gplvm "
                             f"estimator")
        try:
            return _rebuild(cls, document, Decoder(archive, version), version)
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"damaged file: the document does not describe a "
                             f"{cls.__name__} ({type(err).__name__}: {err})") from err


def _rebuild(cls: type, document: dict, decoder: Decoder, version: int) -> Any:
    """The estimator: constructed from its parameters, then given its fitted state (brought
    up to date by ``cls._upgrade_fitted`` when the file is of an older format version)."""
    params = {k: decoder.decode(v) for k, v in document["params"].items()}
    fitted = {k: decoder.decode(v) for k, v in document["fitted"].items()}
    _check_attribute_names(fitted)
    if version < FORMAT_VERSION:
        params = cls._upgrade_params(params, version)
        fitted = cls._upgrade_fitted(fitted, version)
        _check_attribute_names(fitted)
        fitted.setdefault(UPGRADED_FROM, version)       # provenance, kept if saved again
    model = cls(**params)
    vars(model).update(fitted)
    return model


def _check_attribute_names(fitted: dict) -> None:
    if not all(isinstance(k, str) and k.isidentifier() and not k.startswith("__")
               for k in fitted):
        raise ValueError("damaged file: an attribute name is not a plain identifier")


def _read_document(raw: np.ndarray) -> dict:
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ValueError(f"damaged file: the {_DOCUMENT!r} entry is not UTF-8 text")
    try:
        document = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"damaged file: the {_DOCUMENT!r} entry is not valid JSON ({err})"
                         ) from err
    if not isinstance(document, dict):
        raise ValueError(f"damaged file: the {_DOCUMENT!r} entry is not a JSON object")
    return document


def _check_format(document: dict) -> int:
    """The file's format version, once the document is known to be one gplvm can read."""
    if document.get("format") != FORMAT:
        raise ValueError(f"the file's format is {document.get('format')!r}, not {FORMAT!r}; "
                         f"it was not written by gplvm's save")
    version = document.get("format_version")
    wrote = document.get("gplvm_version", "unknown")
    if type(version) is int and version > FORMAT_VERSION:
        raise ValueError(f"the file has format version {version}, written by a newer gplvm "
                         f"({wrote}) than this one ({__version__}, which reads format "
                         f"versions up to {FORMAT_VERSION}); upgrade gplvm to load it")
    if type(version) is not int or version not in _READABLE_VERSIONS:
        raise ValueError(f"the file has format version {version!r}, which no gplvm writes "
                         f"(gplvm {__version__} reads format versions "
                         f"{', '.join(map(str, _READABLE_VERSIONS))}); the file is damaged")
    for key in ("params", "fitted"):
        if not isinstance(document.get(key), dict):
            raise ValueError(f"damaged file: the document has no {key!r} object")
    return version

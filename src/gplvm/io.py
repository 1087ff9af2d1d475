"""Saving and loading fitted estimators: API.md's ``save(path)`` / ``gplvm.load(path)``, "a
versioned file that loading never executes (no pickle)".

A file is one ``.npz`` archive (``numpy.savez``, read back with ``allow_pickle=False``).  Its
entry ``__gplvm__`` is a UTF-8 JSON document stored as a uint8 array; the other entries
``a0``, ``a1``, ... are the arrays the document refers to.  The document::

    {"format": "gplvm-estimator", "format_version": 1, "gplvm_version": "0.1.0",
     "class": "gplvm.models.rflvm.RFLVM",
     "params": {...},     # the constructor arguments, get_params(deep=False)
     "fitted": {...}}     # every other instance attribute

``fitted`` holds the public fitted attributes (trailing underscore) and the private state that
``transform``/``predict``/``score``/``impute``/``sample`` use (e.g. RFLVM's ``_spec_``,
``_data_``, ``_draws_``; BayesianGPLVM's ``_static``, ``_fixed``, ``_train_Y``), each encoded
by :mod:`gplvm._io_codec`.  Classes are rebuilt only from the whitelist of
:mod:`gplvm._io_registry`, looked up by qualified name; nothing named in a file is imported
or evaluated.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from gplvm._io_codec import Decoder, Encoder
from gplvm._io_registry import estimators, lookup, qualified_name
from gplvm._version import __version__

__all__ = ["FORMAT", "FORMAT_VERSION", "SaveMixin", "load", "save"]

FORMAT = "gplvm-estimator"
FORMAT_VERSION = 1
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
        "class": qualified_name(type(model)),
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
            read, names a class outside the whitelist, or is damaged.
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
        _check_format(document)
        cls = lookup(document.get("class"))
        if cls not in estimators():
            raise ValueError(f"the file's top-level class {document['class']!r} is not a gplvm "
                             f"estimator")
        try:
            return _rebuild(cls, document, Decoder(archive))
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"damaged file: the document does not describe a "
                             f"{cls.__name__} ({type(err).__name__}: {err})") from err


def _rebuild(cls: type, document: dict, decoder: Decoder) -> Any:
    """The estimator: constructed from its parameters, then given its fitted state."""
    model = cls(**{k: decoder.decode(v) for k, v in document["params"].items()})
    fitted = {k: decoder.decode(v) for k, v in document["fitted"].items()}
    if not all(k.isidentifier() and not k.startswith("__") for k in fitted):
        raise ValueError("damaged file: an attribute name is not a plain identifier")
    vars(model).update(fitted)
    return model


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


def _check_format(document: dict) -> None:
    if document.get("format") != FORMAT:
        raise ValueError(f"the file's format is {document.get('format')!r}, not {FORMAT!r}; "
                         f"it was not written by gplvm's save")
    version = document.get("format_version")
    if version != FORMAT_VERSION or isinstance(version, bool):
        raise ValueError(f"the file has format version {version!r} but gplvm {__version__} "
                         f"reads version {FORMAT_VERSION}; load it with the gplvm version "
                         f"that wrote it ({document.get('gplvm_version', 'unknown')})")
    for key in ("params", "fitted"):
        if not isinstance(document.get(key), dict):
            raise ValueError(f"damaged file: the document has no {key!r} object")

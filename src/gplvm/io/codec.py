"""Values ↔ JSON plus named arrays: the recursive codec behind :mod:`gplvm.io`.

Every value becomes JSON; every array becomes a reference ``{"$": "numpy", "ref": "a3"}`` to an
entry of the ``.npz`` file.  Python's ``None``, ``bool``, ``int``, ``float`` and ``str`` are
stored as themselves; anything else is a tagged object, so that a tuple comes back a tuple, a
NumPy array a NumPy array and a JAX array a JAX array:

=============  =====================================================================
``$``          value
=============  =====================================================================
numpy          ``np.ndarray`` (``ref``)
numpy_scalar   ``np.float64``, ``np.bool_``, ... (``ref`` to a 0-d array)
str_array      an object-dtype ``np.ndarray`` of ``str`` (scikit-learn's ``feature_names_in_``,
               string ``classes_``): ``shape`` and ``items`` in JSON
jax            ``jax.Array`` (``ref``; ``weak`` when JAX's weak type is to be kept)
jax_key        a typed ``jax.random`` key (``ref`` to its key data, ``impl``)
tuple, list    ``items``
dict           ``keys`` and ``values`` (keys need not be strings)
namedtuple     ``class`` (a registered name) and ``fields``
dataclass      ``class`` (a registered name) and ``fields``
=============  =====================================================================

Format 2 names a class by the stable name it is registered under with
:func:`gplvm.registry.register` (``"gplvm.kernels.RBF"``, ``"gplvm.state.MissingGroups"``);
format 1 named it by its Python path (``"gplvm.kernels.stationary.RBF"``), which the
:class:`Decoder` of a format-1 file translates through :data:`gplvm.io.legacy.FORMAT1_NAMES`
(:func:`gplvm.io.legacy.registered_class`, which reads the estimator's name too).
Classes are rebuilt through :func:`gplvm.registry.lookup` only, so the registry is the
whitelist: nothing named in a file is imported or evaluated, and nothing is unpickled
(API.md: loading never executes).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.io.legacy import object_fields, registered_class
from gplvm.registry import lookup, name_of

_SCALARS = (type(None), bool, int, float, str)


class Encoder:
    """Turns values into JSON, collecting their arrays in ``self.arrays`` (name → array)."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        # id of an array already stored → (its name, the array, held so the id stays unique)
        self._refs: dict[int, tuple[str, Any]] = {}

    def encode(self, value: Any, where: str) -> Any:
        """The JSON form of ``value``; ``where`` names it in error messages."""
        if isinstance(value, np.generic):       # before the scalars: np.float64 is a float
            return {"$": "numpy_scalar", "ref": self._store(np.asarray(value), where)}
        if type(value) in _SCALARS:
            return value
        if isinstance(value, os.PathLike):      # e.g. a checkpoint path: kept as its string
            return os.fspath(value)
        if isinstance(value, np.ndarray) and value.dtype == object and all(
                type(v) is str for v in value.flat):
            return {"$": "str_array", "shape": list(value.shape), "items": value.ravel().tolist()}
        if isinstance(value, np.ndarray):
            return {"$": "numpy", "ref": self._store(value, where, value)}
        if isinstance(value, jax.Array):
            return self._encode_jax(value, where)
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):
            return self._encode_object("namedtuple", value, value._asdict(), where)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._encode_object("dataclass", value, _dataclass_fields(value, where),
                                       where)
        if isinstance(value, (tuple, list)):
            return {"$": type(value).__name__,
                    "items": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, dict):
            return {"$": "dict", "keys": [self.encode(k, f"{where} key") for k in value],
                    "values": [self.encode(v, f"{where}[{k!r}]") for k, v in value.items()]}
        raise TypeError(f"cannot save {where}: a {type(value).__name__} is none of the types "
                        f"gplvm files hold (scalars, strings, arrays, tuples, lists, dicts and "
                        f"gplvm's own classes)")

    def _encode_jax(self, value: jax.Array, where: str) -> dict:
        if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            return {"$": "jax_key", "impl": str(jax.random.key_impl(value)),
                    "ref": self._store(np.asarray(jax.random.key_data(value)), where)}
        return {"$": "jax", "ref": self._store(np.asarray(value), where, value),
                "weak": bool(value.weak_type)}

    def _encode_object(self, kind: str, value: Any, fields: dict, where: str) -> dict:
        try:
            name = name_of(type(value))
        except TypeError as err:
            raise TypeError(f"cannot save {where}: {err}") from None
        if lookup(name) is not type(value):     # two classes claimed one name: refuse both
            raise TypeError(f"cannot save {where}: the registered name {name!r} now names "
                            f"another class, so the file would not load")
        return {"$": kind, "class": name,
                "fields": {k: self.encode(v, f"{where}.{k}") for k, v in fields.items()}}

    def _store(self, array: np.ndarray, where: str, source: Any = None) -> str:
        """The name of ``array`` in the archive.  An array object met twice (RFLVM's
        ``W_samples_`` is ``_draws_["W"]``) is stored once, and comes back as one object."""
        if source is not None and id(source) in self._refs:
            return self._refs[id(source)][0]
        if array.dtype.hasobject:
            raise TypeError(f"cannot save {where}: an array of Python objects would need pickle")
        name = f"a{len(self.arrays)}"
        self.arrays[name] = array
        if source is not None:
            self._refs[id(source)] = (name, source)
        return name


def _dataclass_fields(value: Any, where: str) -> dict:
    fields = dataclasses.fields(value)
    if any(not f.init for f in fields):
        raise TypeError(f"cannot save {where}: {type(value).__name__} has fields its "
                        f"constructor does not take, so it cannot be rebuilt")
    return {f.name: getattr(value, f.name) for f in fields}


class Decoder:
    """Rebuilds values from their JSON form and the arrays of an open ``.npz`` file.

    Args:
        arrays: the open ``.npz`` archive (name → array).
        format_version: the file's format version; class names of a version-1 file are
            translated through :data:`gplvm.io.legacy.FORMAT1_NAMES`.

    A document of the wrong shape may also raise KeyError, TypeError or AttributeError;
    :func:`gplvm.io.load` reports those as a damaged file.
    """

    def __init__(self, arrays, format_version: int) -> None:
        self.arrays = arrays
        self.format_version = format_version        # the file's; steers class-name lookup
        self._built: dict[tuple[str, str], Any] = {}   # (tag, name) → the array rebuilt

    def decode(self, doc: Any) -> Any:
        if isinstance(doc, _SCALARS):
            return doc
        if not isinstance(doc, dict):
            raise ValueError(f"damaged file: unexpected {type(doc).__name__} in the document")
        kind = doc.get("$")
        if kind == "numpy":
            return self._shared(doc, lambda a: a)
        if kind == "numpy_scalar":
            return self._array(doc)[()]
        if kind == "str_array":
            items = doc["items"]
            if not all(isinstance(v, str) for v in items):
                raise ValueError("damaged file: a string array holds a non-string")
            return np.array(items, dtype=object).reshape(tuple(int(n) for n in doc["shape"]))
        if kind == "jax":
            return self._shared(doc, lambda a: _as_jax(a, bool(doc.get("weak", False))))
        if kind == "jax_key":
            return jax.random.wrap_key_data(jnp.asarray(self._array(doc)), impl=str(doc["impl"]))
        if kind in ("tuple", "list"):
            items = [self.decode(v) for v in doc["items"]]
            return tuple(items) if kind == "tuple" else items
        if kind == "dict":
            return {self.decode(k): self.decode(v)
                    for k, v in zip(doc["keys"], doc["values"], strict=True)}
        if kind in ("namedtuple", "dataclass"):
            return self._object(kind, doc)
        raise ValueError(f"damaged file: unknown value tag {kind!r}")

    def _shared(self, doc: dict, build) -> Any:
        """One object per stored array and tag, so arrays shared when saved are shared again."""
        key = (doc["$"], str(doc.get("ref")))
        if key not in self._built:
            self._built[key] = build(self._array(doc))
        return self._built[key]

    def _array(self, doc: dict) -> np.ndarray:
        ref = doc.get("ref")
        if not isinstance(ref, str) or ref not in self.arrays:
            raise ValueError(f"damaged file: the array {ref!r} it refers to is missing")
        return self.arrays[ref]

    def _object(self, kind: str, doc: dict) -> Any:
        name = doc.get("class")
        cls = registered_class(name, self.format_version)
        is_namedtuple = issubclass(cls, tuple) and hasattr(cls, "_fields")
        if is_namedtuple != (kind == "namedtuple") or (
                kind == "dataclass" and not dataclasses.is_dataclass(cls)):
            raise ValueError(f"damaged file: {doc['class']} is stored as a {kind}, which it "
                             f"is not")
        fields = object_fields(name, {k: self.decode(v) for k, v in doc["fields"].items()})
        try:
            return cls(**fields)
        except TypeError as err:
            raise ValueError(f"damaged file: cannot rebuild {doc['class']} from its stored "
                             f"fields ({err})") from err


def _as_jax(array: np.ndarray, weak: bool) -> jax.Array:
    """A JAX array with the saved dtype (float64 stays float64: gplvm enables x64).

    JAX's weak type (an array born of a Python scalar) only steers dtype promotion; it is kept
    for 0-d arrays, where a Python scalar recreates it exactly.
    """
    if weak and array.ndim == 0:
        scalar = jnp.asarray(array.item())
        if scalar.dtype == array.dtype:
            return scalar
    return jnp.asarray(array)

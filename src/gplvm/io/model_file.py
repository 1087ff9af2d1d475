"""Saving and loading fitted estimators: API.md's ``save(path)`` / ``gplvm.load(path)``, "a
versioned file that loading never executes (no pickle)".

A file is one ``.npz`` archive (``numpy.savez``, read back with ``allow_pickle=False``).  Its
entry ``__gplvm__`` is a UTF-8 JSON document stored as a uint8 array; the other entries
``a0``, ``a1``, ... are the arrays the document refers to.  The document (format version 7)::

    {"format": "gplvm-estimator", "format_version": 7, "gplvm_version": "0.1.0",
     "class": "gplvm.RFLVM",
     "payload_sha256": "9f2c...",   # SHA-256 of the arrays (their names, dtypes, shapes, bytes)
     "document_sha256": "41ab...",  # SHA-256 of the rest of this document, canonical JSON
     "params": {...},     # the constructor arguments, get_params(deep=False)
     "fitted": {...},     # the fitted value: the estimator's declared fields
     "fit_state": {...}}  # the run in progress: a registered FitState, or null

``fitted`` holds the estimator's fitted value and nothing else: the attributes its class
declares in ``_fitted_fields`` (docs/contract.md, "The fitted value": the public fitted
attributes and the private state that ``transform``/``predict``/``score``/``impute``/
``sample``/``resume`` read) that the model has, and ``_upgraded_from_format_`` when it has
that, each encoded by :mod:`gplvm.io.codec`.  Any other instance attribute stays out of the
file: :data:`TRANSIENT` (scikit-learn's per-instance settings) and anything else set on the
model (a cache the model rebuilds, an attribute set by hand).  ``fit_state`` holds the
estimator's typed run state (attribute ``_fit_state_``, :mod:`gplvm.models.fit_state`) while a
run is unfinished (a checkpoint, an interrupted fit), which ``resume()`` continues from, and
null once the run has ended.  Every
class in a file (the estimator at the top, kernels, feature maps, likelihoods and fitted-state
types inside) is named by the stable name it registered with
:func:`gplvm.registry.register`, never by the module defining it, so moving code does not break
saved files.  Classes are rebuilt only from that registry; nothing named in a file is imported
or evaluated.  This module imports no estimator: the estimators import it (for
:class:`SaveMixin`) and register themselves, and ``import gplvm`` imports them all.

Files that outlive a crash.  :func:`save` writes a temporary file beside ``path``, flushes it
to disk (``fsync``) and only then renames it onto ``path`` (``os.replace``, atomic on POSIX and
Windows), so a process killed while saving leaves the previous file whole
(``tests/io/test_io_atomic.py`` kills savers mid-write).  :func:`load` refuses, with a
``ValueError`` naming the path, anything that is not (or no longer) a complete file: an empty or
text file, a truncated or damaged archive, arrays whose checksum differs from the one recorded.

Versions.  Every upgrade of an older file is :mod:`gplvm.io.legacy`'s.  Format 1 (gplvm before
issue 11) named classes by ``module.QualName``; such names are translated through
:data:`gplvm.io.legacy.FORMAT1_NAMES` (:func:`gplvm.io.legacy.registered_class`), and the two
private Bayesian GPLVM types they held live on in :mod:`gplvm.io.legacy`.  When a file's
version is below
:data:`FORMAT_VERSION`, :func:`load` hands the decoded fitted attributes to the estimator's
classmethod ``_upgrade_fitted(fitted, format_version)``, which returns today's attributes (the
default, :meth:`SaveMixin._upgrade_fitted`, returns them unchanged); likewise its constructor
arguments to ``_upgrade_params(params, format_version)``.  The model then records the file's
version in ``_upgraded_from_format_`` (:data:`UPGRADED_FROM`), its only attribute that a model
fitted today lacks.  Format 3 (issue 16) adds ``payload_sha256`` and changes nothing else: files
of formats 1 and 2 carry no checksum and load unchecked.  Format 4 (issue 31) adds
``document_sha256``, so that an edited parameter, fitted value or setting is refused as well as
an edited array; a file stating an older format than the checksums it carries is refused too
(lowering ``format_version`` would otherwise turn the checks off).  Format 5 (issue 33)
changes no structure: it marks the renaming of fitted attributes whose names meant two things
(docs/contract.md, "One name per meaning"), which the estimators' ``_upgrade_fitted`` undo for
files of format 4 and below.  Format 6 (issue 33, "typed state") moves the run state out of the
fitted attributes into the document's own ``fit_state`` entry, a registered NamedTuple per
estimator; files of format 5 and below kept it as a dict attribute ``_resume_``, which
:func:`gplvm.io.legacy.typed_fit_state` turns into today's type.  Format 7 (issue 33, "the
fitted value is declared") writes the declared fields only: files of format 6 and below held
every instance attribute, of which :func:`gplvm.io.legacy.declared_only` keeps the declared
ones once ``_upgrade_fitted`` has run, and a format-7 file whose ``fitted`` holds an attribute
its estimator does not declare is refused as damaged, naming it.  A file of a version above
:data:`FORMAT_VERSION` was written by a newer gplvm and is refused with a message saying so.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import zipfile
import zlib
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from gplvm._config import get_precision, precision
from gplvm._version import __version__
from gplvm.io import legacy     # the upgrades of older files (and the format-1 types they hold)
from gplvm.io.codec import Decoder, Encoder
from gplvm.registry import estimators, name_of

__all__ = ["FORMAT", "FORMAT_VERSION", "TRANSIENT", "UPGRADED_FROM", "SaveMixin",
           "document_sha256", "fitted_fields", "load", "payload_sha256", "save", "write_atomic"]

FORMAT = "gplvm-estimator"
FORMAT_VERSION = 7
_READABLE_VERSIONS = (1, 2, 3, 4, 5, 6, 7)
_CHECKSUMMED_FROM = 3       # the first format version whose files carry ``payload_sha256``
_SEALED_FROM = 4            # the first whose files carry ``document_sha256``
_TYPED_STATE_FROM = 6       # the first whose files carry ``fit_state``
_DECLARED_FROM = 7          # the first whose ``fitted`` holds the declared fields only
#: the attribute holding an estimator's run state while a run is unfinished (the file's
#: ``fit_state``; :mod:`gplvm.models.fit_state`)
FIT_STATE = "_fit_state_"
#: the attribute :func:`load` gives a model read from an older format: that format's version
UPGRADED_FROM = "_upgraded_from_format_"
#: instance attributes that are neither parameters nor part of the fitted value and that files
#: never hold: scikit-learn's per-instance settings (``set_output``, ``set_*_request``), which
#: belong to the running process as ``devices`` do
TRANSIENT = ("_sklearn_output_config", "_metadata_request")
_DOCUMENT = "__gplvm__"
_CHECKSUM = "payload_sha256"
_SEAL = "document_sha256"
_ZIP_MAGIC = b"PK\x03\x04"       # every .npz archive (a zip file) starts with these bytes


class SaveMixin:
    """Gives an estimator API.md's ``save(path)``; :func:`gplvm.load` reads the file back.

    The estimator declares its fitted value, what a file holds besides the constructor
    arguments and the run state (docs/contract.md, "The fitted value"): ``_fitted_fields``,
    the names of those attributes, and, where some fits leave some of them unset,
    ``_optional_fields``, those names (a file holds them when set).  This mixin defines
    neither, so that a declaration on a mixin after it in the estimator's bases is found.
    """

    def save(self, path: str | os.PathLike) -> None:
        """Write this fitted estimator to ``path`` (a ``.npz`` archive, no pickle).

        Raises:
            NotFittedError: the estimator has not been fitted.
            TypeError: its state holds a value of a type files cannot hold.
        """
        save(self, path)

    @classmethod
    def _upgrade_fitted(cls, fitted: dict[str, Any], format_version: int,
                        params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Today's fitted attributes from those of a file of an older format version.

        :func:`gplvm.load` calls this, for files whose ``format_version`` is below
        :data:`FORMAT_VERSION`, with the file's decoded fitted attributes (before format 7
        every instance attribute but the constructor parameters); the model is given the
        declared ones among what it returns (:func:`gplvm.io.legacy.declared_only`).  An
        estimator whose fitted state changed since that version overrides this to convert
        the old state (rename, rebuild, add what older versions did not keep), so that the
        model holds exactly the attributes a model fitted today holds; :func:`gplvm.load`
        then adds ``_upgraded_from_format_`` = ``format_version``.  The default keeps the
        attributes as they are.

        Args:
            fitted: attribute name → decoded value, as the old version stored them.
            format_version: the file's format version (1 ≤ it < :data:`FORMAT_VERSION`).
            params: the constructor arguments the model will be built with (already
                upgraded), for state that depends on a setting (e.g. the RFLVM's burn-in).

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
    """Write a fitted gplvm estimator to ``path``, exactly that name (no suffix is added).

    The file appears whole or not at all: it is written beside ``path`` under a temporary name
    and renamed onto ``path`` once it is on disk, so a crash mid-write keeps the previous file.
    """
    write_atomic(path, _entries(model))


def fitted_fields(cls: type) -> tuple[str, ...]:
    """The names of the attributes that make up a ``cls`` model's fitted value: its declared
    ``_fitted_fields`` (docs/contract.md) and ``_upgraded_from_format_``.

    Raises:
        TypeError: ``cls`` declares no fitted value.
    """
    declared = getattr(cls, "_fitted_fields", None)
    if not isinstance(declared, tuple) or not declared:
        raise TypeError(f"{cls.__name__} declares no fitted value: give the class a tuple "
                        f"_fitted_fields of the attributes a file holds (docs/contract.md, "
                        f"'The fitted value')")
    return (*declared, UPGRADED_FROM)


def _entries(model: Any) -> dict[str, np.ndarray]:
    """The archive's entries for ``model``: the JSON document and the arrays it refers to."""
    check_is_fitted(model)
    if type(model) not in estimators():
        raise TypeError(f"gplvm files hold gplvm's estimators; got {type(model).__name__}")
    state = vars(model)
    encoder = Encoder()
    params = model.get_params(deep=False)
    devices = params.get("devices")
    if devices is not None and not isinstance(devices, (int, np.integer)):
        raise TypeError(f"{type(model).__name__}(devices=...) holds {type(devices).__name__} "
                        f"of jax devices, which a file cannot hold (they belong to this "
                        f"process); set_params(devices=None) or devices=<a count> before "
                        f"saving: the fitted values are on one device already")
    document = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "gplvm_version": __version__,
        "class": name_of(type(model)),
        "params": {k: encoder.encode(v, f"parameter {k}") for k, v in params.items()},
        "fitted": {k: encoder.encode(state[k], f"attribute {k}")
                   for k in fitted_fields(type(model)) if k in state},
        "fit_state": encoder.encode(state.get(FIT_STATE), "the fit state"),
    }
    document[_CHECKSUM] = payload_sha256(encoder.arrays)
    document[_SEAL] = document_sha256(document)
    text = np.frombuffer(json.dumps(document).encode("utf-8"), dtype=np.uint8)
    return {_DOCUMENT: text, **encoder.arrays}


def payload_sha256(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 (hex) of named arrays: each name, dtype, shape and C-order bytes, by name."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.asarray(arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape};".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def document_sha256(document: dict) -> str:
    """SHA-256 (hex) of the JSON document without its own ``document_sha256`` entry, in one
    canonical form (sorted keys, no spaces), so that it covers every parameter, fitted value
    and setting, and through ``payload_sha256`` every array."""
    rest = {k: v for k, v in document.items() if k != _SEAL}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def write_atomic(path: str | os.PathLike, entries: dict[str, np.ndarray]) -> None:
    """Write ``entries`` as an ``.npz`` archive to ``path`` atomically.

    The archive goes to a new hidden file in ``path``'s folder (created with the user's umask,
    like ``open``), is flushed and ``fsync``-ed, then renamed onto ``path`` with
    :func:`os.replace`; a failure (or a kill) before the rename leaves ``path`` as it was.
    """
    path = os.path.abspath(os.fspath(path))
    folder, base = os.path.split(path)
    remove_stale_temporaries(folder, base)
    temp = os.path.join(folder, f".{base}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                     0o666)
    except OSError as err:      # name the user's path, not the temporary one
        raise OSError(err.errno, f"cannot write {path}: {err.strerror} (in {folder})"
                      ) from None
    try:
        with os.fdopen(fd, "wb") as file:
            np.savez(file, **entries)       # np.savez(name) would append ".npz"
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _fsync_folder(folder)


def remove_stale_temporaries(folder: str, base: str) -> list[str]:
    """Remove the temporary files that savers of ``base`` killed mid-write left in ``folder``
    (``.<base>.<pid>-<hex>.tmp`` of a process that no longer exists); a live writer's is
    kept.  Returns the names removed."""
    removed = []
    prefix = f".{base}."
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            name = entry.name
            if not (name.startswith(prefix) and name.endswith(".tmp")):
                continue
            pid = name[len(prefix):-len(".tmp")].partition("-")[0]
            if pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's counts as alive)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (POSIX); where folders cannot be opened, skip it."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def load(path: str | os.PathLike) -> Any:
    """Read a fitted estimator written by ``save``; nothing in the file is executed.

    Raises:
        FileNotFoundError: there is no file at ``path``.
        ValueError: naming ``path``: the file is not (or no longer) a complete gplvm model
            file (empty, text, truncated, damaged, checksum mismatch), has a format version
            this gplvm cannot read (a newer one: upgrade gplvm), or names a class that is not
            registered.
    """
    name = os.fspath(path)
    try:
        return _load(name)
    except ValueError as err:
        if repr(name) in str(err):
            raise
        raise ValueError(f"cannot load {name!r}: {err}") from err


def _load(name: str) -> Any:
    entries = _read_archive(name)
    if _DOCUMENT not in entries:
        raise ValueError(f"{name!r} is not a gplvm model file (it has no {_DOCUMENT!r} "
                         f"entry); write one with model.save(path)")
    document = _read_document(entries.pop(_DOCUMENT))
    version = _check_format(document)
    _check_checksums(name, document, entries, version)
    cls = legacy.registered_class(document.get("class"), version)
    if cls not in estimators():
        raise ValueError(f"the file's top-level class {document['class']!r} is not a gplvm "
                         f"estimator")
    try:
        with precision(_precision_of(entries)):    # a float64 model stays float64 in a
            return _rebuild(cls, document, Decoder(entries, version), version)  # float32 run
    except (KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"damaged file: the document does not describe a "
                         f"{cls.__name__} ({type(err).__name__}: {err})") from err


def _precision_of(arrays: dict[str, np.ndarray]) -> str:
    """The precision a model was fitted in, read from its arrays: JAX arrays are rebuilt in it
    whatever the loading process's precision (else a float64 model loaded in a float32
    process would be rounded to float32)."""
    kinds = {np.asarray(a).dtype for a in arrays.values()}
    if np.dtype(np.float64) in kinds:
        return "float64"
    return "float32" if np.dtype(np.float32) in kinds else get_precision()


def _incomplete(name: str, reason: str) -> ValueError:
    return ValueError(f"{name!r} is not (or no longer) a complete gplvm model file: {reason}; "
                      f"gplvm model files are written by model.save(path)")


def _read_archive(name: str) -> dict[str, np.ndarray]:
    """Every entry of the ``.npz`` archive at ``name``, read in full (so that a truncated or
    damaged entry is found here, before anything is rebuilt)."""
    with open(name, "rb") as file:
        head = file.read(len(_ZIP_MAGIC))
    if head != _ZIP_MAGIC:
        kind = ("it is empty" if not head else "it is a single NumPy array (.npy)"
                if head == b"\x93NUM" else "it is not a zip (.npz) archive")
        raise _incomplete(name, kind)
    try:
        with np.load(name, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError,
            NotImplementedError) as err:
        raise _incomplete(name, f"the archive is truncated or damaged ({type(err).__name__}: "
                                f"{err}); it was cut short or altered after saving") from err


def _check_checksums(name: str, document: dict, arrays: dict[str, np.ndarray],
                     version: int) -> None:
    """The checksums the file's format carries: ``payload_sha256`` from format 3,
    ``document_sha256`` from format 4.  A file that states an older format than its
    checksums show was edited (setting ``format_version`` lower would turn the checks off)."""
    for key, since in ((_SEAL, _SEALED_FROM), (_CHECKSUM, _CHECKSUMMED_FROM)):
        if version < since and key in document:
            raise _incomplete(name, f"it states format version {version} but carries "
                                    f"{key!r}, which format {since} introduced; its document "
                                    f"was changed after it was written")
    checks = ((_SEAL, _SEALED_FROM, lambda: document_sha256(document),
               "the checksum of its document (parameters, fitted values, settings) differs "
               "from the one recorded when it was saved; the file was changed after it was "
               "written"),
              (_CHECKSUM, _CHECKSUMMED_FROM, lambda: payload_sha256(arrays),
               "the checksum of its arrays differs from the one recorded when it was saved; "
               "it was damaged or altered after saving"))
    for key, since, checksum, mismatch in checks:
        if version < since:
            continue
        recorded = document.get(key)
        if not isinstance(recorded, str):
            raise _incomplete(name, f"its document has no {key!r} entry")
        if checksum() != recorded:
            raise _incomplete(name, mismatch)


def _rebuild(cls: type, document: dict, decoder: Decoder, version: int) -> Any:
    """The estimator: constructed from its parameters, then given its fitted value (brought
    up to date by ``cls._upgrade_fitted`` and :func:`gplvm.io.legacy.declared_only` when the
    file is of an older format version)."""
    params = {k: decoder.decode(v) for k, v in document["params"].items()}
    fitted = {k: decoder.decode(v) for k, v in document["fitted"].items()}
    _check_attribute_names(fitted)
    if FIT_STATE in fitted:
        raise ValueError(f"damaged file: its fitted attributes hold {FIT_STATE!r}, which "
                         f"files keep apart")
    declared = fitted_fields(cls)
    if version >= _DECLARED_FROM:
        _check_declared(cls, fitted, declared)
    if version >= _TYPED_STATE_FROM:
        state = decoder.decode(document["fit_state"])
    else:       # a dict ``_resume_`` among the fitted attributes
        fitted, state = legacy.typed_fit_state(fitted, name_of(cls))
    if state is not None and not (isinstance(state, tuple) and hasattr(state, "_fields")):
        raise ValueError(f"damaged file: its fit state is a {type(state).__name__}, not a "
                         f"registered FitState")
    if version < FORMAT_VERSION:
        params = cls._upgrade_params(params, version)
        fitted = cls._upgrade_fitted(fitted, version, params)
        _check_attribute_names(fitted)
        fitted = legacy.declared_only(fitted, declared)
        fitted.setdefault(UPGRADED_FROM, version)       # provenance, kept if saved again
    if state is not None:
        fitted[FIT_STATE] = state
    model = cls(**params)
    vars(model).update(fitted)
    return model


def _check_declared(cls: type, fitted: dict, declared: tuple[str, ...]) -> None:
    """A file of format 7 holds the declared fitted value only (the module docstring)."""
    extra = sorted(k for k in fitted if k not in declared)
    if extra:
        raise ValueError(f"damaged file: its fitted value holds {', '.join(map(repr, extra))}, "
                         f"which {name_of(cls)} does not declare ({cls.__name__}."
                         f"_fitted_fields); gplvm's save writes the declared fields only")


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
    except RecursionError:
        raise ValueError(f"damaged file: the {_DOCUMENT!r} entry is nested deeper than any "
                         f"gplvm writes") from None
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
    if version >= _TYPED_STATE_FROM and "fit_state" not in document:
        raise ValueError("damaged file: the document has no 'fit_state' entry")
    return version

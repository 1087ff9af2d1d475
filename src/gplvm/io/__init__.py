"""Files in and out: saved models (``model.save(path)`` / ``gplvm.load(path)``) and data files.

- :mod:`gplvm.io.model_file`: the saved-model file (a versioned ``.npz`` with a JSON document,
  no pickle), :func:`save`, :func:`load`, :class:`SaveMixin`;
- :mod:`gplvm.io.codec`: values ↔ JSON plus named arrays, the codec behind it;
- :mod:`gplvm.io.legacy`: every upgrade of a file written by an earlier gplvm (format-1 class
  names and types, the untyped run state of format 5 and below, each model's old attributes);
- :mod:`gplvm.io.readers`: data files (CSV/TSV/TXT, ``.npy``, ``.npz``) read by ``gplvm fit``,
  :mod:`gplvm.io.h5ad` the AnnData ``.h5ad`` ones, :mod:`gplvm.io.table` the :class:`Table`
  they return.

The names below are :mod:`gplvm.io.model_file`'s, imported on first use (PEP 562's module
``__getattr__``, as :mod:`gplvm` does): the readers, which the command line imports for its
``--help``, then load neither JAX nor scikit-learn, which the model file needs.
"""

import importlib

__all__ = ["FORMAT", "FORMAT_VERSION", "UPGRADED_FROM", "SaveMixin", "document_sha256", "load",
           "payload_sha256", "save", "write_atomic"]


def __getattr__(name):
    if name not in __all__:
        raise AttributeError(f"module 'gplvm.io' has no attribute {name!r}")
    value = getattr(importlib.import_module("gplvm.io.model_file"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *__all__})

"""AnnData ``.h5ad`` files read with h5py, following AnnData's on-disk format (anndata ≥ 0.8,
"encoding-type" attributes; https://anndata.readthedocs.io/en/latest/fileformat-prose.html).

``X`` or a layer, dense or sparse (``csr_matrix``/``csc_matrix``), becomes ``Y``; ``obs_names``
the row ids, ``var_names`` the column names, and every ``obs`` column (numeric, string or
categorical) a per-row annotation usable as labels or time stamps.  h5py comes with the
optional extra ``pip install "gplvm[anndata]"`` (anndata depends on it); anndata itself is not
needed to read a file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gplvm.io.table import DataFileError, Table

INSTALL = 'pip install "gplvm[anndata]"'


def _h5py():
    try:
        import h5py
    except ImportError:
        raise DataFileError(f"reading .h5ad files needs h5py, which comes with AnnData: "
                            f"{INSTALL}") from None
    return h5py


def read_h5ad(path: Path, layer=None) -> Table:
    """``X`` (or ``layers/<layer>``), ``obs_names``, ``var_names`` and ``obs`` of an .h5ad."""
    h5py = _h5py()
    try:
        f = h5py.File(path, "r")
    except OSError:
        raise DataFileError(f"{path.name} is not an HDF5 (.h5ad) file") from None
    with f:
        if "X" not in f or "obs" not in f or "var" not in f:
            raise DataFileError(f"{path.name} is not an AnnData file: it lacks X, obs or var")
        if layer is None:
            node = f["X"]
        elif "layers" in f and layer in f["layers"]:
            node = f["layers"][layer]
        else:
            names = ", ".join(f["layers"]) if "layers" in f else "none"
            raise DataFileError(f"{path.name} has no layer {layer!r}; its layers: {names}")
        Y = _matrix(path, node, h5py)
        obs_names, obs = _dataframe(path, f["obs"], h5py)
        var_names, _ = _dataframe(path, f["var"], h5py)
    if Y.ndim != 2 or Y.shape != (len(obs_names), len(var_names)):
        raise DataFileError(f"{path.name}: X has shape {Y.shape} but obs has "
                            f"{len(obs_names)} rows and var {len(var_names)}")
    if Y.size == 0:
        raise DataFileError(f"{path.name} is empty: X has shape {Y.shape}")
    return Table(Y, obs_names, var_names, obs, str(path))


def _encoding(node) -> str:
    value = node.attrs.get("encoding-type", "")
    return value.decode() if isinstance(value, bytes) else str(value)


def _matrix(path: Path, node, h5py) -> np.ndarray:
    """A dense dataset, or a CSR/CSC group densified (absent entries of a sparse matrix are
    zeros, e.g. zero counts, not missing values)."""
    if isinstance(node, h5py.Dataset):
        values = node[()]
    elif _encoding(node) in ("csr_matrix", "csc_matrix"):
        from scipy import sparse

        shape = tuple(int(s) for s in node.attrs["shape"])
        kind = sparse.csr_matrix if _encoding(node) == "csr_matrix" else sparse.csc_matrix
        values = np.ascontiguousarray(   # C order: a CSC matrix densifies column-major
            kind((node["data"][()], node["indices"][()], node["indptr"][()]),
                 shape=shape).toarray())
    else:
        raise DataFileError(f"{path.name}: X has the unsupported encoding "
                            f"{_encoding(node)!r}; save X dense or as CSR/CSC")
    if values.dtype.kind not in "biuf":
        raise DataFileError(f"{path.name}: X holds {values.dtype} values; give numbers")
    return np.asarray(values, dtype=float)


def _dataframe(path: Path, group, h5py) -> tuple[list[str], dict[str, np.ndarray]]:
    """(index, columns) of an AnnData dataframe group."""
    if _encoding(group) != "dataframe":
        raise DataFileError(f"{path.name}: {group.name} is not written in AnnData's format "
                            f"(anndata ≥ 0.8); re-save the file with a recent anndata")
    index = [str(v) for v in _column(group[group.attrs["_index"]], h5py)]
    order = group.attrs.get("column-order", [])
    columns = {str(name): _column(group[str(name)], h5py) for name in np.atleast_1d(order)}
    return index, {name: values for name, values in columns.items() if values is not None}


def _column(node, h5py) -> np.ndarray | None:
    """A numeric or string dataset, or a categorical group (codes into categories; code −1 is
    a missing value, read as an empty string)."""
    if isinstance(node, h5py.Dataset):
        if h5py.check_string_dtype(node.dtype) is not None:
            return np.array(node.asstr()[()], dtype=object)
        return node[()]
    if _encoding(node) == "categorical":
        categories = _column(node["categories"], h5py)
        codes = node["codes"][()]
        labels = np.array(list(categories) + [""], dtype=object)
        return labels[np.where(codes < 0, len(categories), codes)]
    if _encoding(node) in ("nullable-integer", "nullable-boolean"):
        values = node["values"][()].astype(float)
        return np.where(node["mask"][()], np.nan, values)
    return None                   # an encoding this reader does not know: the column is left out

"""Fit any gplvm estimator to an AnnData object and store the results in it.

``gplvm.anndata.fit(adata, model)`` fits ``model`` to ``adata.X`` (or a layer), with the
annotations of ``adata.obs`` as time stamps where asked, and writes what scanpy users look for:

- ``adata.obsm[key_added]``: the (N, Q) latent means ``model.X_mean_``;
- ``adata.obsm[key_added + "_var"]``: their variances (variational models), or
  ``adata.obsm[key_added + "_sd"]``: posterior standard deviations (sampled models, those with
  ``X_samples_``), as the command line's ``embedding.csv`` does;
- ``adata.uns[key_added]``: ``{"settings": model.get_params() made JSON-safe, "summary": bound
  or log-likelihood, iterations, convergence, R-hat, relevance}`` (the command line's
  ``summary.json`` fields, :func:`gplvm.summary.model_summary`), and with library-size
  offsets ``"offset": {"kind": "libsize", "mean_library_size": s̄}``, the mean total that new
  cells' offsets are taken against (:func:`library_size_offset`);
- ``adata.varm[key_added + "_assignments"]``: per-column results where a model has them (the
  DP-GP-LVM's (D, T) column-to-atom probabilities ``assignments_``).  No model of the library
  has linear loadings (its maps are non-linear), so nothing else goes to ``varm``.

Count likelihoods (Poisson, negative binomial) model raw counts: pass ``layer="counts"`` when
``X`` holds normalised values.  Their fits take library-size offsets
``log(total_n / mean total)`` (the command line's ``--offset libsize``), given by default where the
model's ``fit`` accepts ``offset=``.  The estimators work on the model only through the common
attributes of ``docs/contract.md``, so every model plugs in without special cases.

An AnnData opened with ``anndata.read_h5ad(path, backed="r")`` is fitted without loading ``X``
by a model that reads minibatches of rows (``BayesianGPLVM(inference="svi")``); other models
load it.

AnnData is optional: ``pip install "gplvm[anndata]"``.
"""

from __future__ import annotations

import inspect

import numpy as np

from gplvm.summary import latent_columns, model_summary

INSTALL = 'pip install "gplvm[anndata]"'

#: largest Y densified from a sparse matrix (entries; float64: 8 bytes each, 2 GB)
MAX_DENSE_ENTRIES = 250_000_000

#: likelihoods of counts with a per-row rate, for which a library size is an exposure
RATE_LIKELIHOODS = ("poisson", "negative_binomial")


def _require_anndata():
    """The ``anndata`` module, imported only when needed (an optional dependency)."""
    try:
        import anndata
    except ImportError:
        raise ImportError(f"gplvm.anndata needs the anndata package: {INSTALL}") from None
    return anndata


def fit(adata, model, layer=None, key_added: str = "X_gplvm", *, times=None, offset="auto",
        **fit_params):
    """Fit ``model`` to the cells x genes matrix of ``adata`` and store the results in ``adata``.

    Args:
        adata: an ``anndata.AnnData``; its ``X`` (or ``layers[layer]``), dense or scipy sparse,
            is the (N, D) data ``Y``.  Sparse entries that are absent are zeros, not missing.
        model: an unfitted gplvm estimator (``BayesianGPLVM``, ``RFLVM``, ``DPGPLVM``, ...).
        layer: the layer to fit instead of ``X`` (e.g. ``"counts"`` for count likelihoods).
        key_added: the key of the results in ``obsm``, ``uns`` and ``varm``.
        times: time stamps of the cells for a dynamical prior: an ``obs`` column name or an
            (N,) array.
        offset: per-row offsets of the linear predictor for models whose ``fit`` takes them:
            ``"auto"`` (library sizes for Poisson / negative-binomial likelihoods, none
            otherwise), ``"libsize"``, an ``obs`` column name, an (N,) array, or ``None``.
        **fit_params: further keyword arguments of ``model.fit`` (e.g. ``n_trials``).

    Returns:
        The fitted ``model`` (``adata`` is changed in place).

    Raises:
        ImportError: anndata is not installed.
        ValueError: not an AnnData object, an unknown layer or ``obs`` column, a sparse matrix
            too large to densify, or an argument the model's ``fit`` does not take; all before
            any computation.
    """
    anndata = _require_anndata()
    if not isinstance(adata, anndata.AnnData):
        raise ValueError(f"adata is a {type(adata).__name__}; give an anndata.AnnData "
                         f"(anndata.read_h5ad(path) reads a file)")
    Y = _matrix(adata, layer, _reads_rows(model))
    offset = _offset_kind(model, offset)
    libsize = isinstance(offset, str) and offset == "libsize"
    offsets = library_size_offset(Y) if libsize else _obs_values(adata, offset, "offset")
    extras = {"times": _obs_values(adata, times, "times"), "offset": offsets, **fit_params}
    model.fit(Y, **_fit_arguments(model, extras))
    store(adata, model, key_added)
    if libsize:                                  # new cells' offsets need the mean total
        adata.uns[key_added]["offset"] = library_size_record(Y)
    return model


def store(adata, model, key_added: str = "X_gplvm") -> None:
    """Write a fitted model's latents, settings, summary and per-column results into
    ``adata`` (see the module docstring), as :func:`fit` does."""
    X_mean = np.asarray(model.X_mean_)
    if X_mean.shape[0] != adata.n_obs:
        raise ValueError(f"the model has {X_mean.shape[0]} latent rows but adata has "
                         f"{adata.n_obs} cells; fit it on this adata")
    names, values = latent_columns(model, X_mean, np.asarray(model.X_var_))
    Q = X_mean.shape[1]
    adata.obsm[key_added] = X_mean
    adata.obsm[f"{key_added}_{names[Q][:-1]}"] = values[:, Q:]     # "_var" or "_sd"
    summary = model_summary(model)
    adata.uns[key_added] = {"settings": summary.pop("params"), "summary": summary}
    assignments = getattr(model, "assignments_", None)
    if assignments is not None:
        adata.varm[f"{key_added}_assignments"] = np.asarray(assignments)


def _reads_rows(model) -> bool:
    """Whether ``model`` reads its data by minibatches of rows (``inference='svi'``), so that a
    backed AnnData's matrix is passed on unread (:func:`gplvm.data.minibatch.out_of_core`)."""
    return getattr(model, "inference", None) == "svi"


def _matrix(adata, layer, by_rows: bool = False):
    """``X`` or ``layers[layer]`` as a dense float array (sparse matrices densified); with
    ``by_rows``, a backed AnnData's ``X`` as it is on disk (read a minibatch at a time)."""
    if by_rows and adata.isbacked and layer is None:
        return adata.X
    if layer is None:
        values = adata.X
    elif layer in adata.layers:
        values = adata.layers[layer]
    else:
        raise ValueError(f"adata has no layer {layer!r}; its layers: "
                         f"{', '.join(adata.layers) or 'none'}")
    if values is None:
        raise ValueError("adata.X is empty (None); give layer= or set adata.X")
    if hasattr(values, "toarray"):                                   # scipy sparse
        entries = int(np.prod(values.shape))
        if entries > MAX_DENSE_ENTRIES:
            raise ValueError(f"the sparse matrix has {values.shape[0]} x {values.shape[1]} "
                             f"entries, too many to densify for a GP model (at most "
                             f"{MAX_DENSE_ENTRIES:,}); keep fewer genes first, e.g. the highly "
                             f"variable ones (adata[:, adata.var.highly_variable])")
        values = values.toarray()
    # C order: a CSC matrix densifies column-major, and a column-major Y takes other BLAS
    # paths, so the fit would differ from the same matrix's in rounding (1e-11)
    return np.ascontiguousarray(values, dtype=float)


def _obs_values(adata, value, what: str):
    """An ``obs`` column by name, or the values given (one per cell)."""
    if value is None or not isinstance(value, str):
        return value
    if value not in adata.obs.columns:
        raise ValueError(f"{what}={value!r} is not a column of adata.obs; its columns: "
                         f"{', '.join(map(str, adata.obs.columns)) or 'none'}")
    return np.asarray(adata.obs[value], dtype=float)


def _offset_kind(model, offset):
    """``offset`` with ``"auto"`` resolved: ``"libsize"`` for a rate likelihood of a model
    whose ``fit`` takes offsets, else None."""
    if not (isinstance(offset, str) and offset == "auto"):
        return offset
    takes = "offset" in inspect.signature(model.fit).parameters
    return "libsize" if takes and _likelihood_name(model) in RATE_LIKELIHOODS else None


def _likelihood_name(model) -> str | None:
    from gplvm.likelihoods import get_likelihood

    likelihood = getattr(model, "likelihood", None)
    return None if likelihood is None else get_likelihood(likelihood).name


def library_sizes(Y) -> np.ndarray:
    r"""Each row's total count :math:`s_n = \sum_d y_{nd}` (missing entries left out).

    Raises:
        ValueError: a row has no counts (its log library size would be -inf).
    """
    totals = np.nansum(np.asarray(Y, dtype=float).reshape(len(Y), -1), axis=1)
    empty = np.flatnonzero(totals <= 0)
    if empty.size:
        raise ValueError(f"{empty.size} rows have no counts (rows {', '.join(map(str, empty[:5]))}"
                         f"{', ...' if empty.size > 5 else ''}); a library-size offset needs "
                         f"a positive total: drop them first")
    return totals


def library_size_offset(Y, mean_total=None) -> np.ndarray:
    r"""Library-size offsets of count rows: the exposure of a rate model whose counts have the
    per-row rate :math:`\exp(o_n + f_{nd})` (the command line's ``--offset libsize``):

    .. math:: o_n = \log\bigl(s_n / \bar s\bigr), \quad s_n = \textstyle\sum_d y_{nd},

    missing entries left out of the totals (:func:`library_sizes`); dividing by the mean total
    :math:`\bar s` keeps the offsets near 0, so the model's intercepts stay on the scale of a
    typical row.  The command line and :func:`fit` both compute offsets here.

    Args:
        Y: (N, D) counts (NaN for a missing entry).
        mean_total: :math:`\bar s`; default the mean of Y's own totals (the rows being
            fitted).  New rows of a fitted model take the mean total of the fit's rows
            (``mean_library_size`` in ``uns`` or ``summary.json``), so that a row gets the
            offset it would have had among the training rows.

    Raises:
        ValueError: a row has no counts, or ``mean_total`` is not positive.
    """
    totals = library_sizes(Y)
    if mean_total is None:
        mean_total = totals.mean()
    elif not float(mean_total) > 0:
        raise ValueError(f"mean_total={mean_total!r}; give the (positive) mean row total of "
                         f"the rows the model was fitted on")
    return np.log(totals / mean_total)


def library_size_record(Y) -> dict:
    """What a fit with library-size offsets keeps so that new rows get theirs:
    ``{"kind": "libsize", "mean_library_size": s̄}``, s̄ the mean total of Y's rows (the
    ``mean_total`` of :func:`library_size_offset` for new rows)."""
    return {"kind": "libsize", "mean_library_size": float(library_sizes(Y).mean())}


def _fit_arguments(model, extras: dict) -> dict:
    """The extras given (not None), each checked against ``model.fit``'s signature."""
    accepted = inspect.signature(model.fit).parameters
    given = {k: v for k, v in extras.items() if v is not None}
    for key in given:
        if key not in accepted:
            raise ValueError(f"{key}= does not apply to {type(model).__name__}: its fit takes "
                             f"{', '.join(p for p in accepted if p not in ('Y', 'y')) or 'no '}"
                             f" arguments")
    return given

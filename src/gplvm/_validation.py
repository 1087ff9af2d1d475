"""Input validation shared by every estimator and building block (STYLE.md 9).

Every check runs on NumPy arrays *before* any JAX computation and raises ``ValueError`` whose
message names the problem, where it is, and how to fix it.
"""

from __future__ import annotations

import warnings

import numpy as np


def _where(mask: np.ndarray, limit: int = 5) -> str:
    idx = np.argwhere(mask)
    shown = ", ".join(str(tuple(int(i) for i in row)) if len(row) > 1 else str(int(row[0]))
                      for row in idx[:limit])
    more = f" and {len(idx) - limit} more" if len(idx) > limit else ""
    return f"{shown}{more}"


def as_float_array(Y, name: str = "Y", shape: str = "(n_samples, n_features)") -> np.ndarray:
    """Convert array-like input of any shape to float64, refusing what cannot be data.

    Sparse matrices, complex numbers, strings and ragged lists get a ``ValueError`` (entries
    of a type that is no number, e.g. dicts, a ``TypeError``) naming ``name`` and the fix (an
    array of the expected ``shape``), instead of NumPy's or SciPy's own message.
    """
    if hasattr(Y, "toarray") or type(Y).__module__.startswith("scipy.sparse"):
        raise ValueError(f"{name} is a sparse matrix; sparse input is not supported here, pass "
                         f"a dense array ({name}.toarray())")
    if Y is None:
        raise ValueError(f"{name} is None; pass a numeric array of shape {shape}")
    try:
        arr = np.asarray(Y)
        complex_entries = np.iscomplexobj(arr)
        if not complex_entries:
            arr = arr.astype(float, copy=False)
    except (TypeError, ValueError) as err:
        # the same class as NumPy's: entries of a wrong type (a dict) are scikit-learn's
        # TypeError (check_dtype_object), malformed arrays (strings, ragged lists) ValueError
        raise type(err)(f"{name} could not be converted to a float array ({err}); pass a "
                        f"numeric array of shape {shape}") from err
    if complex_entries:
        raise ValueError(f"{name} has complex entries (Complex data not supported); pass real "
                         f"numbers (e.g. {name}.real or abs({name}), whichever your data mean)")
    return arr


def as_2d_float(Y, name: str = "Y", allow_nan: bool = False, min_rows: int = 1) -> np.ndarray:
    """Convert to a float64 (N, D) array and check finiteness.

    Args:
        Y: array-like of shape (N, D); a 1-D array is rejected with a hint to reshape.
        name: the argument name used in error messages.
        allow_nan: whether NaN marks missing entries (inf is never allowed).
        min_rows: the fewest rows the caller can work with.
    """
    arr = as_float_array(Y, name)
    if arr.ndim == 1:
        raise ValueError(f"{name} is 1-D with shape {arr.shape}; Reshape your data to a 2-D "
                         f"array of shape (n_samples, n_features), e.g. {name}.reshape(-1, 1) "
                         f"for one column or {name}.reshape(1, -1) for one sample")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {arr.shape}")
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} has {arr.shape[0]} sample(s) (rows; n_samples = "
                         f"{arr.shape[0]}); at least {min_rows} are needed")
    if arr.shape[1] < 1:
        raise ValueError(f"{name} has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is "
                         f"required; pass at least one column")
    inf = np.isinf(arr)
    if inf.any():
        raise ValueError(f"{name} contains {int(inf.sum())} infinite entries at (row, column) "
                         f"{_where(inf)}; replace them with finite values"
                         + (" or NaN to mark them missing" if allow_nan else ""))
    nan = np.isnan(arr)
    if nan.any() and not allow_nan:
        raise ValueError(f"{name} contains {int(nan.sum())} NaN entries at (row, column) "
                         f"{_where(nan)}; this input must be complete (impute or drop them)")
    if allow_nan:
        empty_rows = nan.all(axis=1)
        if empty_rows.any():
            raise ValueError(f"{name} has {int(empty_rows.sum())} rows with no observed entry "
                             f"(rows {_where(empty_rows)}); drop them")
    return arr


def as_1d_float(y, name: str = "y", allow_nan: bool = False) -> np.ndarray:
    """Convert a target vector to float64 and check it is finite (a column vector is accepted)."""
    arr = as_1d(as_float_array(y, name, "(n_samples,)"), name)
    as_2d_float(arr[:, None], name=name, allow_nan=allow_nan)
    return arr


def as_1d(y, name: str = "y", hint: str = "") -> np.ndarray:
    """A vector of any dtype (class labels too) as a 1-D array; one column is accepted."""
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D of shape (n_samples,); got shape {arr.shape}"
                         + (f" ({hint})" if hint else ""))
    return arr


#: the largest magnitude accepted in data: squares stay below 1e300, so sums of squares of up
#: to 10^8 entries (variances, distances, Gram matrices) stay below float64's 1.8e308
LARGEST_MAGNITUDE = 1e150


def check_magnitude(arr: np.ndarray, name: str, fix: str) -> None:
    """Reject entries so large that their squares overflow float64 (NaN would follow silently).

    Args:
        arr: a float array (NaN entries are ignored).
        name: the argument name used in the message.
        fix: what the user should do, e.g. ``"standardise X (StandardScaler)"``.
    """
    with np.errstate(invalid="ignore"):
        big = np.abs(arr) > LARGEST_MAGNITUDE
    if big.any():
        largest = float(np.nanmax(np.abs(arr)))
        raise ValueError(f"{name} has {int(big.sum())} entries larger than "
                         f"{LARGEST_MAGNITUDE:.0e} in magnitude (the largest {largest:.3g}, at "
                         f"{_where(big)}); their squares overflow float64 and the results "
                         f"would be NaN: {fix}")


def check_new_values(arr: np.ndarray, name: str) -> None:
    """The fit's magnitude rule (:func:`check_magnitude`, the same limit and message) for what
    a fitted model is given afterwards: new rows, latent points, pixel coordinates."""
    check_magnitude(np.asarray(arr, dtype=float), name,
                    f"give {name} on the scale of the data the model was fitted on")


def check_consistent_length(X, y, names=("X", "y")) -> None:
    if len(X) != len(y):
        raise ValueError(f"{names[0]} has {len(X)} rows but {names[1]} has {len(y)}; "
                         f"they must describe the same samples")


def check_observed_columns(Y: np.ndarray, name: str = "Y") -> None:
    """Reject training columns with no observed entry (nothing to fit them to)."""
    empty = np.isnan(Y).all(axis=0)
    if empty.any():
        raise ValueError(f"{name} has {int(empty.sum())} columns with no observed entry "
                         f"(columns {_where(empty)}); drop them before fitting")


def column_std(Y: np.ndarray, axis=0) -> np.ndarray:
    """``np.nanstd(Y, axis)`` computed relative to each column's largest magnitude, so that
    data of any scale get their spread: squares of entries near 1e-300 underflow to 0, and a
    column of tiny but different values would otherwise look constant (issue 31)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.nanmax(np.abs(Y), axis=axis, keepdims=True)
        # only where squares could underflow or overflow: ordinary data as np.nanstd has it
        scale = np.where((scale > 0) & np.isfinite(scale)
                         & ((scale < 1e-100) | (scale > 1e100)), scale, 1.0)
        return np.squeeze(np.nanstd(Y / scale, axis=axis, keepdims=True) * scale, axis=axis)


class DroppedColumnsWarning(UserWarning):
    """A fit kept some columns of Y out (constant, or with no observed entry) and puts them
    back on output (:func:`uninformative_columns`)."""


def uninformative_columns(Y: np.ndarray) -> np.ndarray:
    """(D,) True for the columns a fit of the GPLVM family keeps out: those whose observed
    entries are all equal (``nanmax == nanmin``, exact at any scale; a single observed entry
    counts as constant) and those with no observed entry.

    Such a column carries no information about the latent points (its likelihood does not
    depend on X), and standardising it would divide by 0.  The estimators fit the other
    columns and put these back on output: a constant column predicts its constant with
    variance 0, a column with no observed entry predicts NaN (nothing is known of its location
    or scale).  See docs/contract.md, "Columns kept out of the fit"."""
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # all-NaN slices: NaN, kept out
        spread = np.nanmax(Y, axis=0) - np.nanmin(Y, axis=0)
    return ~(spread > 0)


def column_constants(Y: np.ndarray, dropped: np.ndarray) -> np.ndarray:
    """(D,) each dropped column's constant (its first observed entry, so it comes back exactly;
    NaN when it has none), NaN for the other columns."""
    values = np.full(Y.shape[1], np.nan)
    for d in np.flatnonzero(dropped):
        seen = Y[~np.isnan(Y[:, d]), d]
        if len(seen):
            values[d] = seen[0]
    return values


def kept_columns(scale) -> np.ndarray:
    """(D,) True for the columns that entered a fit: ``scale > 0`` in the standardisation of
    :func:`column_standardisation` (0 or NaN: kept out; every column of a model fitted or
    saved before issue 32)."""
    return np.asarray(scale) > 0


def column_standardisation(Y: np.ndarray, dropped: np.ndarray, standardize: bool):
    """``(mean, scale)`` of all D columns in the model's precision, the columns kept out of
    the fit coded in them (issue 32; docs/contract.md): the kept columns' means and standard
    deviations (:func:`column_std`; zeros and ones when not ``standardize``), a dropped
    constant column c as (c, 0), a dropped column without an observed entry as (NaN, NaN).
    The kept columns' figures are those of ``Y[:, kept]`` given alone, in C order (NumPy's
    reductions round differently on the Fortran-ordered copy that advanced indexing makes)."""
    from gplvm._config import float_dtype

    dtype = float_dtype()
    if not dropped.any():
        if standardize:
            return np.nanmean(Y, axis=0).astype(dtype), column_std(Y).astype(dtype)
        return np.zeros(Y.shape[1], dtype), np.ones(Y.shape[1], dtype)
    kept = ~dropped
    mean, scale = np.zeros(Y.shape[1], dtype), np.ones(Y.shape[1], dtype)
    if standardize:
        Y_kept = np.ascontiguousarray(Y[:, kept])
        mean[kept], scale[kept] = np.nanmean(Y_kept, axis=0), column_std(Y_kept)
    constants = column_constants(Y, dropped)
    mean[dropped] = constants[dropped]
    scale[dropped] = np.where(np.isnan(constants[dropped]), np.nan, 0.0)
    return mean, scale


def standardise_kept(Y: np.ndarray, mean, scale) -> np.ndarray:
    """The kept columns of Y standardised, (N, D_kept): what a fit reads (values of new rows
    in the dropped columns are ignored)."""
    kept = kept_columns(scale)
    if kept.all():
        return (Y - mean) / scale
    return (np.ascontiguousarray(Y[:, kept]) - mean[kept]) / scale[kept]


def dropped_columns_notice(owner: str, Y: np.ndarray, dropped: np.ndarray) -> None:
    """The one-line :class:`DroppedColumnsWarning` naming the columns kept out of a fit."""
    empty = dropped & np.isnan(Y).all(axis=0)
    constant = dropped & ~empty
    parts = [f"{int(m.sum())} {what} (columns {_where(m)})" for m, what in
             ((constant, "constant"), (empty, "with no observed entry")) if m.any()]
    warnings.warn(f"{owner}: {' and '.join(parts)} of Y kept out of the fit; they come back "
                  f"on output as their constant (variance 0) or NaN", DroppedColumnsWarning,
                  stacklevel=4)


def check_n_components(owner: str, Q, n_rows: int, n_cols: int, n_dropped: int = 0) -> None:
    """The one rule of every latent-variable estimator (issue 32): Q latent dimensions need at
    most as many columns and more rows than Q (and 3 rows at least), checked before any
    computation.

    Q > D cannot be identified from the data: D columns span at most a D-dimensional manifold
    (and ARD switches the dimensions beyond it off, at the cost of the fit); Q >= N leaves
    fewer rows than latent coordinates per dimension plus one.  ``n_dropped`` columns kept
    out of the fit (:func:`uninformative_columns`) are not among the ``n_cols``.
    """
    Q = int(Q)
    if Q > n_cols:
        what = (f"the {n_cols} column(s) of Y" if not n_dropped else
                f"the {n_cols} column(s) of Y left to fit ({n_dropped} constant or empty ones "
                f"are kept out)")
        raise ValueError(f"{owner}: n_components={Q} exceeds {what}; the "
                         f"latent dimension can be at most the number of columns: pass "
                         f"n_components={n_cols} or fewer (or n_components='auto' where the "
                         f"model has it, to let ARD choose)")
    if n_rows < max(Q + 1, 3):
        raise ValueError(f"{owner}: Y has {n_rows} rows; a {Q}-dimensional latent space needs "
                         f"at least {max(Q + 1, 3)}: pass n_components={max(n_rows - 1, 1)} "
                         f"or fewer, or give more rows")


def check_counts(Y: np.ndarray, name: str = "Y", upper=None, what: str = "count") -> None:
    """Observed entries must be non-negative integers (and at most ``upper`` if given)."""
    obs = ~np.isnan(Y)
    neg = obs & (Y < 0)
    if neg.any():
        raise ValueError(f"{name} has {int(neg.sum())} negative entries at (row, column) "
                         f"{_where(neg)}; the {what} likelihood needs non-negative integers")
    frac = obs & (np.abs(Y - np.round(np.where(obs, Y, 0))) > 1e-8)
    if frac.any():
        raise ValueError(f"{name} has {int(frac.sum())} non-integer entries at (row, column) "
                         f"{_where(frac)}; the {what} likelihood needs integer counts "
                         f"(round them, or use likelihood='gaussian' for continuous data)")
    if upper is not None:
        over = obs & (Y > np.asarray(upper))
        if over.any():
            raise ValueError(f"{name} has {int(over.sum())} entries above the number of trials "
                             f"at (row, column) {_where(over)}; the {what} likelihood needs "
                             f"0 <= y <= n_trials")


def require_float64(what: str) -> None:
    """Raise a ValueError in gplvm's float32 mode (:mod:`gplvm.config`), for computations that
    run in float64 only: the Pólya-gamma sampler packs class counts into 64-bit integers and its
    rejection steps use uniforms offset by 2⁻⁵³; the CRT sampler sums digamma tails."""
    import jax

    if not jax.config.jax_enable_x64:
        raise ValueError(f"{what} are computed in float64 only, and gplvm is in float32 mode; "
                         f"compute this outside gplvm.config.precision('float32') (or call "
                         f"gplvm.config.set_precision('float64') first)")

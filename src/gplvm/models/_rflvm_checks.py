"""Input validation for :class:`gplvm.RFLVM`, run before any computation (STYLE.md 9)."""

from __future__ import annotations

import numpy as np

from gplvm._validation import as_1d_float, as_2d_float, check_no_constant_columns
from gplvm.likelihoods import get_likelihood
from gplvm.models._rflvm.spec import LIKELIHOODS


def _check_hyper(model) -> None:
    if model.likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood={model.likelihood!r} is not one of {LIKELIHOODS}")
    M = model.n_features
    if not isinstance(M, (int, np.integer)) or M < 2 or M % 2:
        raise ValueError(f"n_features={M!r}: random Fourier features come in [sin, cos] pairs, "
                         f"so n_features must be an even integer >= 2 (paper: 100)")
    if not isinstance(model.n_components, (int, np.integer)) or model.n_components < 1:
        raise ValueError(f"n_components={model.n_components!r} must be a positive integer")
    if model.n_chains < 1:
        raise ValueError(f"n_chains={model.n_chains} must be at least 1")
    if not 0 <= model.burn_in < model.n_iter:
        raise ValueError(f"burn_in={model.burn_in} must be in [0, n_iter={model.n_iter}); "
                         f"keep some sweeps after burn-in (paper: n_iter=2000, burn_in=1000)")
    if model.thin < 1 or model.max_stored < 1 or model.block_size < 1:
        raise ValueError("thin, max_stored and block_size must be positive integers")
    if model.init not in ("pca", "random"):
        raise ValueError(f"init={model.init!r} must be 'pca' or 'random'")


def check_fit_inputs(model, Y, times, offset, n_trials):
    """Validate ``fit``'s arguments; returns (Y, times, offset) as NumPy arrays or None."""
    _check_hyper(model)
    Y = as_2d_float(Y, "Y", allow_nan=True, min_rows=3)
    N, J = Y.shape
    if model.n_components >= N:
        raise ValueError(f"n_components={model.n_components} must be smaller than the number "
                         f"of rows ({N})")
    kw = {}
    if model.likelihood == "binomial":
        kw["n_trials"] = 1 if n_trials is None else n_trials
    elif n_trials is not None:
        raise ValueError(f"n_trials is only used by the binomial likelihood, not "
                         f"{model.likelihood!r}")
    get_likelihood(model.likelihood, **kw).validate(Y)
    if model.likelihood == "multinomial" and J < 2:
        raise ValueError("the multinomial likelihood needs at least 2 categories (columns)")
    if model.likelihood == "gaussian":
        check_no_constant_columns(Y)
    empty = np.all(np.isnan(Y), axis=0)
    if empty.any():
        raise ValueError(f"Y has {int(empty.sum())} columns with no observed entry (columns "
                         f"{np.flatnonzero(empty)[:5].tolist()}); drop them before fitting")
    if times is not None:
        times = as_1d_float(times, "times")
        if times.shape[0] != N:
            raise ValueError(f"times has {times.shape[0]} entries but Y has {N} rows; pass one "
                             f"time stamp per row")
        if np.ptp(times) == 0:
            raise ValueError("all time stamps are equal; the GP prior over time needs distinct "
                             "times (or pass times=None for the iid prior)")
    if offset is not None:
        if model.likelihood in ("gaussian", "multinomial"):
            raise ValueError(f"offset= is for the count likelihoods with a per-row rate "
                             f"(poisson, negative_binomial, binomial, bernoulli), not "
                             f"{model.likelihood!r}")
        offset = as_1d_float(offset, "offset")
        if offset.shape[0] != N:
            raise ValueError(f"offset has {offset.shape[0]} entries but Y has {N} rows; pass "
                             f"one offset per row (e.g. log size factors)")
    return Y, times, offset

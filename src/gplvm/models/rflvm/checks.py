"""Input validation for :class:`gplvm.RFLVM`, run before any computation (STYLE.md 9)."""

from __future__ import annotations

import numpy as np

from gplvm._validation import (_where, as_1d_float, as_2d_float, check_magnitude,
                               check_n_components, check_new_values)
from gplvm.inference.sharding import checkpoint_devices_problem
from gplvm.likelihoods import AbstractLikelihood, Binomial, get_likelihood
from gplvm.models.rflvm.columns import dropped_columns

#: parameters the sampler draws itself (seed 000: σ² ~ IG, eq. 29's r ~ Ga), so an object's
#: value for them could only be ignored
_SAMPLED = {"gaussian": ("noise_var", "the noise variance (inverse-gamma prior)"),
            "negative_binomial": ("dispersion", "the dispersion (eq. 29's gamma prior)")}


def resolve_likelihood(likelihood, n_trials=None) -> AbstractLikelihood:
    """The likelihood object for ``likelihood`` (a name, any case, or a gplvm.likelihoods
    object), with the binomial's numbers of trials from ``fit(n_trials=...)`` or the object.

    Raises:
        ValueError: unknown name; an object of another kind; a value for a parameter the
            sampler draws; ``n_trials`` given twice or for a likelihood without trials.
    """
    lik = get_likelihood(likelihood)
    kind = lik.name
    if kind in _SAMPLED:
        field, what = _SAMPLED[kind]
        if not np.all(np.asarray(getattr(lik, field)) == 1.0):
            raise ValueError(f"the RFLVM samples {what}, so {type(lik).__name__}({field}=...) "
                             f"would be ignored; pass {type(lik).__name__}() or {kind!r}")
    if kind == "binomial":
        given_twice = n_trials is not None and isinstance(likelihood, AbstractLikelihood) and \
            not np.all(np.asarray(lik.n_trials) == 1)
        if given_twice:
            raise ValueError("n_trials was given both to fit and on the Binomial object; "
                             "give it once")
        return lik if n_trials is None else Binomial(n_trials=n_trials)
    if n_trials is not None:
        raise ValueError(f"n_trials is only used by the binomial likelihood, not {kind!r}")
    return lik


def check_fit_inputs(model, Y, times, offset, n_trials):
    """Validate ``fit``'s arguments.

    Returns:
        (likelihood object, Y, times, offset, dropped), the next three NumPy arrays or None,
        ``dropped`` (D,) True for the columns kept out of the fit (:mod:`.columns`).
    """
    lik = resolve_likelihood(model.likelihood, n_trials)
    kind = lik.name
    Y = as_2d_float(Y, "Y", allow_nan=True, min_rows=3)
    dropped = check_columns(Y, kind)   # before the likelihood's own checks name anything else
    N = Y.shape[0]
    check_n_components("RFLVM", model.n_components, N, int((~dropped).sum()),
                       int(dropped.sum()))
    lik.validate(Y)                    # (the multinomial's: at least 2 categories)
    if times is not None and model.sampler == "nuts":
        raise ValueError("sampler='nuts' samples the iid N(0, I) latent prior only; pass "
                         "sampler='gibbs' for the dynamic RFLVM (times=...)")
    if times is not None and model.inference == "map":
        raise ValueError("inference='map' finds the mode under the iid N(0, I) latent prior "
                         "only; pass inference='mcmc' (sampler='gibbs') for the dynamic RFLVM "
                         "(times=...)")
    if times is not None:
        times = as_1d_float(times, "times")
        if times.shape[0] != N:
            raise ValueError(f"times has {times.shape[0]} entries but Y has {N} rows; pass one "
                             f"time stamp per row")
        if np.ptp(times) == 0:
            raise ValueError("all time stamps are equal; the GP prior over time needs distinct "
                             "times (or pass times=None for the iid prior)")
    if offset is not None:
        if kind in ("gaussian", "multinomial"):
            raise ValueError(f"offset= is for the count likelihoods with a per-row rate "
                             f"(poisson, negative_binomial, binomial, bernoulli), not {kind!r}")
        offset = as_1d_float(offset, "offset")
        if offset.shape[0] != N:
            raise ValueError(f"offset has {offset.shape[0]} entries but Y has {N} rows; pass "
                             f"one offset per row (e.g. log size factors)")
    return lik, Y, times, offset, dropped


def check_data(Y: np.ndarray, kind: str) -> None:
    """What the sampler needs of the data beyond its likelihood's support."""
    check_magnitude(Y, "Y", "rescale Y (counts this large cannot be modelled exactly "
                            "either)" if kind != "gaussian" else "rescale Y (e.g. divide "
                            "it by its largest entry)")
    if kind == "multinomial":
        empty = np.nansum(Y, axis=1) == 0
        if empty.any():
            raise ValueError(f"Y has {int(empty.sum())} rows with no counts (rows "
                             f"{np.flatnonzero(empty)[:5].tolist()}); the multinomial "
                             f"likelihood models how a row's total is split over the "
                             f"categories, so a row of zeros says nothing: drop those rows")


def check_devices(devices, checkpoint) -> None:
    """``devices`` with ``checkpoint``: the rule the Bayesian GPLVM applies too
    (:func:`gplvm.inference.sharding.checkpoint_devices_problem`)."""
    why = checkpoint_devices_problem(devices, checkpoint)
    if why is not None:
        raise ValueError(f"RFLVM: devices={devices!r}: {why}")


def check_columns(Y: np.ndarray, kind: str) -> np.ndarray:
    """(D,) True for the columns of ``Y`` kept out of the fit (:mod:`.columns`), after checking
    that the fit has columns left and every row an observed entry in them; a multinomial
    category never observed is refused."""
    empty = np.isnan(Y).all(axis=0)
    if kind == "multinomial" and empty.any():
        raise ValueError(f"Y has {int(empty.sum())} categories (columns) with no observed entry "
                         f"(columns {_where(empty)}); the multinomial likelihood models how a "
                         f"row's total splits over all categories and leaves out a row with a "
                         f"missing category, so no row would be left: drop those columns")
    dropped = dropped_columns(kind, Y)
    if dropped.all():
        what = "constant or has no observed entry" if kind == "gaussian" else \
            "has no observed entry"
        raise ValueError(f"RFLVM: every column of Y {what}; there is nothing to fit a latent "
                         f"space to")
    rows = np.isnan(Y[:, ~dropped]).all(axis=1)
    if rows.any():
        raise ValueError(f"RFLVM: Y has {int(rows.sum())} rows observed only in constant "
                         f"columns (rows {_where(rows)}), which are kept out of the fit: drop "
                         f"those rows")
    return dropped


def check_latent_points(X, n_components: int) -> np.ndarray:
    """X as an (N, Q) float array whose Q matches the model's latent dimension."""
    X = as_2d_float(X, "X")
    check_new_values(X, "X")
    if X.shape[1] != n_components:
        raise ValueError(f"X has {X.shape[1]} columns but the model has n_components="
                         f"{n_components} latent dimensions; pass latent points of shape "
                         f"(n, {n_components})")
    return X

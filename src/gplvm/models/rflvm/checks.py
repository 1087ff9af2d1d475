"""Input validation for :class:`gplvm.RFLVM`, run before any computation (STYLE.md 9)."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from gplvm._validation import (_where, as_1d_float, as_2d_float, check_magnitude,
                               check_n_components, check_new_values)
from gplvm.inference.sharding import checkpoint_devices_problem
from gplvm.likelihoods import AbstractLikelihood, get_likelihood
from gplvm.models.rflvm.columns import dropped_columns


#: the fewest burn-in sweeps NUTS's adaptation needs (Stan estimates no mass matrix below 20)
MIN_NUTS_BURN_IN = 20


def warn_short_adaptation(burn_in: int) -> None:
    """Warn when ``sampler='nuts'`` is given a burn-in too short to adapt in: with B sweeps
    the mass matrix comes from B/2 draws and the step size is fixed after the last B/5 sweeps
    (:mod:`gplvm.inference.mcmc.nuts`), 5 and 2 at B = 10, and the chains may then accept no
    proposal (``benchmarks/rflvm_short_burn_in.py``).  B = 0 (no adaptation: NUTS at its
    initial step size and unit mass) is a choice, not a mistake."""
    if 0 < burn_in < MIN_NUTS_BURN_IN:
        last = burn_in - 8 * burn_in // 10
        warnings.warn(f"RFLVM(sampler='nuts', burn_in={burn_in}): NUTS adapts its step size "
                      f"and mass matrix over the burn-in, and {burn_in} sweeps are too few "
                      f"(the step size is fixed after {last} sweep{'s' * (last != 1)} of "
                      f"adaptation past the last mass window): the chains may accept nothing. "
                      f"Use burn_in >= {MIN_NUTS_BURN_IN} (default 200)", UserWarning,
                      stacklevel=4)


def resolve_likelihood(likelihood, n_trials=None) -> AbstractLikelihood:
    """The likelihood object for ``likelihood`` (a name, any case, or a gplvm.likelihoods
    object), with the binomial's numbers of trials from ``fit(n_trials=...)`` or the object.

    Raises:
        ValueError: unknown name; an object of another kind; a value for a parameter the
            sampler draws; ``n_trials`` given twice or for a likelihood without trials.
    """
    lik = get_likelihood(likelihood)
    kind = lik.name
    # a parameter the sampler draws itself (seed 000: σ² ~ IG, eq. 29's r ~ Ga): an object's
    # value for it could only be ignored
    if lik.sampled_parameter is not None:
        field, what = lik.sampled_parameter
        if not np.all(np.asarray(getattr(lik, field)) == 1.0):
            raise ValueError(f"the RFLVM samples {what}, so {type(lik).__name__}({field}=...) "
                             f"would be ignored; pass {type(lik).__name__}() or {kind!r}")
    _refuse_fixed_parameters(lik)
    if lik.takes_trials:
        given_twice = n_trials is not None and isinstance(likelihood, AbstractLikelihood) and \
            not np.all(np.asarray(lik.n_trials) == 1)
        if given_twice:
            raise ValueError(f"n_trials was given both to fit and on the {type(lik).__name__} "
                             f"object; give it once")
        return lik if n_trials is None else type(lik)(n_trials=n_trials)
    if n_trials is not None:
        raise ValueError(f"n_trials is only used by the binomial likelihood, not {kind!r}")
    return lik


def _refuse_fixed_parameters(lik: AbstractLikelihood) -> None:
    """The sampler builds the likelihood from its state (``from_state``: the numbers of trials
    from the data, the drawn σ² or r): a value set on the object for any other parameter would
    be ignored, so it is refused rather than dropped."""
    try:
        default = type(lik)()
    except TypeError:        # no defaults to compare with: from_state will say what it needs
        return
    sampled = lik.sampled_parameter[0] if lik.sampled_parameter is not None else None
    for field in dataclasses.fields(lik):
        if field.name in (sampled, "n_trials"):
            continue
        if not np.array_equal(np.asarray(getattr(lik, field.name)),
                              np.asarray(getattr(default, field.name))):
            raise ValueError(f"the RFLVM fits {type(lik).__name__} at its defaults apart from "
                             f"the parameters it draws or reads from the data, so "
                             f"{field.name}=... would be ignored; pass "
                             f"{type(lik).__name__}() or give the class that default")


def check_fit_inputs(model, Y, times, offset, n_trials):
    """Validate ``fit``'s arguments.

    Returns:
        (likelihood object, Y, times, offset, dropped), the next three NumPy arrays or None,
        ``dropped`` (D,) True for the columns kept out of the fit (:mod:`.columns`).
    """
    lik = resolve_likelihood(model.likelihood, n_trials)
    kind = lik.name
    Y = as_2d_float(Y, "Y", allow_nan=True, min_rows=3)
    dropped = check_columns(Y, lik)    # before the likelihood's own checks name anything else
    N = Y.shape[0]
    check_n_components("RFLVM", model.n_components, N, int((~dropped).sum()),
                       int(dropped.sum()))
    lik.validate(Y)                    # (the multinomial's: at least 2 categories)
    if times is not None:
        times = as_1d_float(times, "times")
        if times.shape[0] != N:
            raise ValueError(f"times has {times.shape[0]} entries but Y has {N} rows; pass one "
                             f"time stamp per row")
        if np.ptp(times) == 0:
            raise ValueError("all time stamps are equal; the GP prior over time needs distinct "
                             "times (or pass times=None for the iid prior)")
        if model.inference == "map":
            raise ValueError("inference='map' finds the mode under the iid N(0, I) latent "
                             "prior only; pass inference='mcmc', sampler='gibbs' for the "
                             "dynamic RFLVM (times=...)")
        if model.sampler == "nuts":
            raise ValueError("sampler='nuts' (the default) samples the iid N(0, I) latent "
                             "prior only; pass sampler='gibbs' for the dynamic RFLVM "
                             "(times=...)")
    if offset is not None:
        if not lik.takes_offset:
            raise ValueError(f"offset= is for the count likelihoods with a per-row rate "
                             f"(poisson, negative_binomial, binomial, bernoulli), not {kind!r}")
        offset = as_1d_float(offset, "offset")
        if offset.shape[0] != N:
            raise ValueError(f"offset has {offset.shape[0]} entries but Y has {N} rows; pass "
                             f"one offset per row (e.g. log size factors)")
    return lik, Y, times, offset, dropped


def check_data(Y: np.ndarray, lik: AbstractLikelihood) -> None:
    """What the sampler needs of the data beyond its likelihood's support."""
    check_magnitude(Y, "Y", "rescale Y (counts this large cannot be modelled exactly "
                            "either)" if lik.is_count else "rescale Y (e.g. divide "
                            "it by its largest entry)")
    lik.check_model_data(Y)      # e.g. the multinomial's rows with no counts


def check_devices(devices, checkpoint) -> None:
    """``devices`` with ``checkpoint``: the rule the Bayesian GPLVM applies too
    (:func:`gplvm.inference.sharding.checkpoint_devices_problem`)."""
    why = checkpoint_devices_problem(devices, checkpoint)
    if why is not None:
        raise ValueError(f"RFLVM: devices={devices!r}: {why}")


def check_columns(Y: np.ndarray, lik: AbstractLikelihood) -> np.ndarray:
    """(D,) True for the columns of ``Y`` kept out of the fit (:mod:`.columns`), after checking
    that the fit has columns left and every row an observed entry in them; a column never
    observed is refused under a likelihood with one density per row (the multinomial's
    categories)."""
    empty = np.isnan(Y).all(axis=0)
    if lik.row_density and empty.any():
        raise ValueError(f"Y has {int(empty.sum())} categories (columns) with no observed entry "
                         f"(columns {_where(empty)}); the {lik.name} likelihood models how a "
                         f"row's total splits over all categories and leaves out a row with a "
                         f"missing category, so no row would be left: drop those columns")
    dropped = dropped_columns(lik.name, Y)
    if dropped.all():
        what = "constant or has no observed entry" if lik.conjugate_normal else \
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

"""Fitted RFLVMs saved by earlier versions of gplvm, brought to today's attributes
(:mod:`gplvm.io.legacy`).

:func:`gplvm.load` passes the decoded instance attributes of an old file to
``RFLVM._upgrade_fitted``, which calls :func:`upgrade_rflvm`.  Format 1 (before issue 11)
lacked:

* the samplers' diagnostics beyond the frequency acceptance (``n_proposals_X``,
  ``n_proposals_beta``): filled with NaN — in ``sampler_info_``, in the per-sweep trace and in
  the chain states, so that ``resume()`` still runs (:func:`gplvm.load` records the file's
  format version in ``_upgraded_from_format_``);
* ``n_features_in_``: the number of columns of the training data;
* ``_train_Y_``, the training data in original units (for the exact "is this the training
  data?" test of ``impute``): rebuilt from the standardised copy ``_train_values_`` as
  ``Ys · scale + mean``, exact for the count likelihoods (mean 0, scale 1); for a Gaussian model
  a value that does not round-trip makes ``impute`` treat the training rows as new rows.

Files saved before ``sampler`` existed (issue 30; formats 5 and below) were sampled by the
Gibbs sweep, which was the default until the default became NUTS: :func:`upgrade_params` gives
them ``sampler='gibbs'``, so that ``resume()`` continues the run they hold.

Files of any format saved before a count layout of :class:`.spec.RFLVMData` existed
(``nonzero``, ``customers``, ``log_factorial``: issue 14) get it laid out from the data they
hold, in ``_data_`` and in the chains' carry, so that a loaded model and a fresh one run the
same sweep (the sweep also runs without them, more slowly); a ``customers`` layout of the
earlier kind (one entry per count and rank, four arrays, before the rank-by-column layout of
:func:`.dispersion.crt_layout`) is laid out again, whatever the file's format, by
:func:`current_layouts`, which :meth:`gplvm.RFLVM.resume` calls.  Files saved before issue 30 get
``convergence_`` (R-hat and bulk ESS of the log-likelihood and of latent distances) computed from
the trace and latent draws they hold.  Files of format 4 and below name the columns'
standardisation ``mean_`` and ``scale_``: today ``Y_mean_`` and ``Y_std_``, as in every
latent-variable model (docs/contract.md, "One name per meaning").

The RFLVM's own helpers (its count layouts, its convergence figures) are imported inside the
functions that use them, which run only while a file is loaded or a model resumed, and its
types are looked up by their registered names, so that :mod:`gplvm.io` imports no model.
"""

from __future__ import annotations

import jax
import numpy as np

from gplvm._pytree import to_device
from gplvm.registry import lookup

NEW_INFO = ("n_proposals_X", "n_proposals_beta")


def upgrade_params(params: dict) -> dict:
    """The constructor arguments of an older file, with those it predates at the value they
    had when it was written (module docstring)."""
    return {"sampler": "gibbs", **params}


def _fill_state(carry):
    """The chain states with NaN for the diagnostics they predate (one per chain)."""
    state, *rest = carry
    if (not isinstance(state, lookup("gplvm.state.RFLVMState"))
            or state.n_proposals_X is not None):
        return carry
    nan = np.full(np.shape(state.log_lik), np.nan)
    return (state._replace(n_proposals_X=nan, n_proposals_beta=nan.copy()), *rest)


def _fill_trace(trace: dict) -> dict:
    shape = np.shape(trace["log_lik"])
    return {**trace, **{k: np.full(shape, np.nan) for k in NEW_INFO if k not in trace}}


def _complete_data(data, kind: str):
    """``data`` with the count layouts it predates filled in (module docstring); the chains'
    copies carry a leading chain axis, and every chain holds the same data."""
    from gplvm.models.rflvm.init import count_layouts, layout_fields

    if not isinstance(data, lookup("gplvm.state.RFLVMData")):
        return data
    layouts = [k for k in layout_fields(kind)
               if getattr(data, k) is None or (k == "customers" and len(data.customers) == 4)]
    if not layouts:
        return data
    Y, observed = np.asarray(data.Y), np.asarray(data.observed) > 0
    lead = Y.shape[:-2]
    first = (0,) * len(lead)
    made = count_layouts(kind, Y[first], observed[first])
    # leaves of the kind the data's other leaves are (device arrays or host arrays)
    as_kind = to_device if isinstance(data.Y, jax.Array) else np.array
    return data._replace(**{k: jax.tree_util.tree_map(
        lambda x: as_kind(np.broadcast_to(np.asarray(x), lead + np.shape(x))), made[k])
        for k in layouts})


def current_layouts(fitted: dict) -> dict:
    """``fitted``'s ``_data_`` and chain carry with every count layout present and of today's
    kind (module docstring); unchanged when they are."""
    spec = fitted.get("_spec_")
    if spec is None:
        return fitted
    kind = spec.likelihood
    if "_data_" in fitted:
        fitted["_data_"] = _complete_data(fitted["_data_"], kind)
    if "_result_" in fitted and isinstance(fitted["_result_"].state, tuple):
        state, data, *rest = fitted["_result_"].state
        fitted["_result_"] = fitted["_result_"]._replace(
            state=(state, _complete_data(data, kind), *rest))
    return fitted


def _complete_convergence(fitted: dict, burn_in: int) -> dict:
    """``convergence_`` (issue 30) computed from the stored trace and latent draws, as a fit
    by today's code computes it (the sweeps after ``burn_in``)."""
    if "convergence_" in fitted or not {"history_", "X_samples_"} <= fitted.keys():
        return fitted
    from gplvm.models.rflvm.convergence import convergence_figures

    kept = np.asarray(fitted["history_"])[:, int(burn_in):]
    fitted["convergence_"] = convergence_figures(kept, np.asarray(fitted["X_samples_"]))
    return fitted


def upgrade_rflvm(fitted: dict, format_version: int, burn_in: int) -> dict:
    """Today's attributes from those of a file of ``format_version`` whose model was built
    with ``burn_in`` (module docstring)."""
    fitted = _complete_convergence(current_layouts(dict(fitted)), burn_in)
    if format_version < 5:      # before issue 33: the standardisation's names of this model
        for old, new in (("mean_", "Y_mean_"), ("scale_", "Y_std_")):
            if old in fitted:
                fitted[new] = fitted.pop(old)
    if format_version >= 2 or "_result_" not in fitted:
        return fitted
    result = fitted["_result_"]
    fitted["_result_"] = result._replace(state=_fill_state(result.state),
                                         trace=_fill_trace(result.trace))
    trace = fitted["_result_"].trace
    fitted["sampler_info_"] = {k: np.asarray(trace[k]) for k in ("accept_W", *NEW_INFO)}
    if "_train_values_" in fitted:
        Ys = fitted.pop("_train_values_")
        fitted.pop("_train_pattern_", None)
        fitted["_train_Y_"] = Ys * fitted["Y_std_"] + fitted["Y_mean_"]
        fitted["n_features_in_"] = int(Ys.shape[1])
    return fitted


class RFLVMFiles:
    """The RFLVM's hooks for :func:`gplvm.load` (a base class of :class:`gplvm.RFLVM`, before
    :class:`gplvm.io.SaveMixin`): files of an older format brought to today's."""

    @classmethod
    def _upgrade_fitted(cls, fitted: dict, format_version: int, params: dict | None = None) -> dict:
        """Attributes of an older file; its ``burn_in`` (every file has one; 1000 was the
        default until issue 30) decides the draws its convergence figures are of."""
        return upgrade_rflvm(fitted, format_version, (params or {}).get("burn_in", 1000))

    @classmethod
    def _upgrade_params(cls, params: dict, format_version: int) -> dict:
        """Constructor arguments of an older file (:func:`upgrade_params`)."""
        return upgrade_params(params)

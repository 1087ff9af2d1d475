"""What a fitted model's summary holds, for the command line and AnnData alike.

:func:`model_summary` gives the common attributes of a fitted model (class, settings, objective,
iterations, convergence, relevance) made JSON-safe, and :func:`latent_columns` its latent means
with their spread (variances, or posterior standard deviations of a sampled model).  ``gplvm
fit`` writes them to ``summary.json`` and ``embedding.csv`` (:mod:`gplvm.cli`), and
:func:`gplvm.anndata.store` to ``adata.uns`` and ``adata.obsm``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["column_names", "json_value", "latent_columns", "latent_dimensions", "model_summary"]


def latent_columns(model, X_mean, X_var):
    """(header, values) of latent means and their spread: variances for variational models,
    posterior standard deviations for sampled ones (a model with ``X_samples_``)."""
    Q = X_mean.shape[1]
    sampled = getattr(model, "X_samples_", None) is not None
    spread = np.sqrt(X_var) if sampled else X_var
    names = [f"x{q}" for q in range(Q)] + [f"{'sd' if sampled else 'var'}{q}" for q in range(Q)]
    return names, np.column_stack([X_mean, spread])


def json_value(value):
    """A JSON-safe form of a constructor argument or fitted value (objects by ``repr``)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return repr(value)


def model_summary(model) -> dict:
    """The fitted model's common attributes: class, settings, objective, iterations,
    convergence (with the split R-hat of sampled models) and relevance."""
    from gplvm.plot._diagnostics import is_map_fit, kept_trace, split_rhat_of
    from gplvm.registry import name_of

    out = {"class": name_of(type(model)),
           "params": {k: json_value(v) for k, v in model.get_params(deep=False).items()},
           "n_features_in": int(model.n_features_in_)}
    if getattr(model, "n_components", None) is not None:      # latent-variable models
        out.update(latent_dimensions(model))
    dropped = getattr(model, "dropped_columns_", None)
    if dropped is not None:
        out["dropped_columns"] = column_names(model, dropped)
    if getattr(model, "elbo_", None) is not None:
        out["bound"] = float(model.elbo_)
    kept = kept_trace(model)
    if kept is not None:
        out["log_likelihood"] = float(np.mean(kept)) if kept.size else float("nan")
        rhat = split_rhat_of(model)
        if rhat is not None:
            out["rhat"] = rhat
    for key, attribute, kind in (("n_iter", "n_iter_", int), ("converged", "converged_", bool),
                                 ("interrupted", "interrupted_", bool)):
        if getattr(model, attribute, None) is not None:
            out[key] = kind(getattr(model, attribute))
    if is_map_fit(model):          # the RFLVM's MAP restarts, in place of chain diagnostics
        out["modes"] = {k: np.asarray(v, dtype=float).tolist()
                        for k, v in model.mode_start_.items()}
    elif getattr(model, "convergence_", None) is not None:     # the RFLVM's R-hat and ESS
        out["convergence"] = {k: float(v) for k, v in model.convergence_.items()}
    if getattr(model, "relevance_", None) is not None:
        out["relevance"] = np.asarray(model.relevance_, dtype=float).tolist()
    return out


def latent_dimensions(model) -> dict:
    """``n_components``, the Q of the fit (``n_components_``: ``'auto'`` resolved), and
    ``active_components``, the dimensions ARD keeps by decreasing relevance, where the model
    says (``active_components_``)."""
    out = {"n_components": int(getattr(model, "n_components_", None) or model.n_components)}
    active = getattr(model, "active_components_", None)
    if active is not None:
        out["active_components"] = [int(q) for q in active]
    return out


def column_names(model, indices) -> list:
    """The names of the data columns ``indices`` (``feature_names_in_``, which ``gplvm fit``
    stores in the model file), or the indices themselves for a model without names."""
    names = getattr(model, "feature_names_in_", None)
    return [str(names[j]) if names is not None else int(j) for j in np.asarray(indices)]

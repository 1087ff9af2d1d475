"""ArviZ export of a fitted :class:`gplvm.RFLVM` (chains × draws, rotation-invariant summaries).

The latent posterior is identified only up to an orthogonal transform, so R-hat and effective
sample sizes are computed on quantities that do not depend on it: the log-likelihood at every
kept draw, distances between a fixed random set of pairs of latent points, and the DP
concentration α.  ``sample_stats`` holds the samplers' diagnostics at the same draws
(:attr:`gplvm.RFLVM.sampler_info_`): the frequency acceptance rate and the mean number of
elliptical-slice proposals for X (and β where it is slice-sampled).
"""

from __future__ import annotations

import jax
import numpy as np

from gplvm.inference.mcmc import pairwise_distance_summary, to_inference_data
from gplvm.inference.mcmc.driver import n_kept
from gplvm.models.rflvm.fitted import last_states, record_light


def kept_sweeps(model) -> np.ndarray:
    """Indices into the per-sweep traces (``history_``, ``sampler_info_``) of the draws in
    ``X_samples_``: sweep i (0-based) gives the state after i + 1 sweeps, kept when
    i + 1 − burn_in is a positive multiple of ``thin``.  A fit interrupted before its first
    kept draw holds the chains' last states: the last sweep done."""
    thin = max(int(model.thin), 1)
    n_draws = n_kept(int(model.n_iter_), int(model.burn_in), thin)
    if n_draws == 0:
        return np.array([int(model.n_iter_) - 1])
    return int(model.burn_in) + thin * np.arange(1, n_draws + 1) - 1


def concentration_draws(result) -> np.ndarray | None:
    """(chains, draws) DP concentration α at the kept draws of a run's ``result`` (its
    ``ChainResult``), or None without a DP prior.  A run interrupted before its first kept draw
    gives each chain's last α, as ``X_samples_`` holds the chains' last states then."""
    if "alpha" not in result.draws:
        return None
    alpha = np.asarray(result.draws["alpha"])
    if alpha.shape[1] == 0:
        alpha = last_states(record_light, result.state)["alpha"]
    return alpha


def inference_data(model, n_pairs: int = 20):
    """``arviz.InferenceData`` of a fitted RFLVM (module docstring)."""
    kept = kept_sweeps(model)
    posterior = {"log_lik": model.history_[:, kept],
                 "latent_distance": np.asarray(pairwise_distance_summary(
                     model.X_samples_, n_pairs=n_pairs, key=jax.random.PRNGKey(0)))}
    alpha = concentration_draws(model._result_)
    if alpha is not None:
        posterior["alpha"] = alpha
    stats = {name: values[:, kept] for name, values in model.sampler_info_.items()}
    stats = {name: v for name, v in stats.items() if not np.all(np.isnan(v))}
    return to_inference_data(posterior, sample_stats=stats or None)

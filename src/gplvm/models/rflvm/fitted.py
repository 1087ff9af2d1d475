"""From the chains to the fitted RFLVM: what the driver keeps of each sweep, and the draws
aligned to one frame.

:func:`gplvm.inference.mcmc.run_chains` calls :func:`record_light` at every kept sweep,
:func:`record_heavy` at every ``thin_heavy``-th and :func:`trace` at every sweep, each on one
chain's carry ``(RFLVMState, RFLVMData, inducing times)``.
"""

from __future__ import annotations

import jax
import numpy as np

from gplvm.inference.mcmc import align_samples, generalised_procrustes

#: the samplers' per-sweep diagnostics kept in the trace (:class:`.spec.RFLVMState`)
SAMPLER_INFO = ("accept_W", "n_proposals_X", "n_proposals_beta")
#: and the NUTS block's (``sampler='nuts'``; :class:`gplvm.inference.mcmc.nuts.NUTSTuning`):
#: mean acceptance statistic, leapfrog steps and step size of each sweep's transition
NUTS_INFO = {"accept_nuts": "accept", "n_leapfrog": "n_steps", "step_size": "step_size"}


def record_light(carry) -> dict:
    """The latents, the log-likelihood and the DP concentration α of a kept sweep."""
    state = carry[0]
    rec = {"X": state.X, "log_lik": state.log_lik}
    if state.dp is not None:
        rec["alpha"] = state.dp.alpha
    return rec


def record_heavy(carry) -> dict:
    """The map's draw (W, β, noise variances, dispersions) and its latents."""
    state = carry[0]
    return {"X": state.X, "W": state.W, "beta": state.beta, "noise_var": state.noise_var,
            "dispersion": state.dispersion}


def last_states(record, state) -> dict:
    """``record`` of each chain's last state (``state``: the chains' carry), as one kept draw
    per chain (chains, 1, ...): what stands in for the draws of a run interrupted before its
    first kept sweep."""
    return {k: np.asarray(v)[:, None] for k, v in jax.vmap(record)(state).items()}


def trace(carry) -> dict:
    """Every sweep's log-likelihood and the samplers' diagnostics."""
    state = carry[0]
    out = {"log_lik": state.log_lik, **{k: getattr(state, k) for k in SAMPLER_INFO}}
    if state.tuning is not None:
        out.update({k: getattr(state.tuning, f) for k, f in NUTS_INFO.items()})
    return out


def aligned_draws(light: dict, heavy: dict):
    """Draws in one frame: generalised Procrustes of the latent draws (chains, S, N, Q), then
    each heavy draw's latents and frequencies rotated onto the resulting mean (φ depends on
    X Wᵀ only, so (X R, W R) is the same map).

    Returns:
        (X_samples (C, S, N, Q), X_mean (N, Q), heavy draws flattened over chains).
    """
    X = np.asarray(light["X"])
    aligned, reference = generalised_procrustes(X)
    flat = {k: np.asarray(v).reshape(-1, *np.asarray(v).shape[2:]) for k, v in heavy.items()}
    Xh, R = align_samples(flat["X"][None], reference)
    flat["X"] = np.asarray(Xh)[0]         # indexed on the host (no slicing program)
    flat["W"] = np.einsum("smq,sqr->smr", flat["W"], np.asarray(R)[0])
    return np.asarray(aligned), np.asarray(reference), flat

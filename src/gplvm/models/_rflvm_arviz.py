"""ArviZ export of a fitted :class:`gplvm.RFLVM` (chains × draws, rotation-invariant summaries).

The latent posterior is identified only up to an orthogonal transform, so R-hat and effective
sample sizes are computed on quantities that do not depend on it: the log-likelihood of every
sweep after burn-in, distances between a fixed random set of pairs of latent points, and the
scalar parameters (the DP concentration α, the mean noise variance or dispersion).
"""

from __future__ import annotations

import jax
import numpy as np

from gplvm.inference.mcmc import pairwise_distance_summary, to_inference_data


def inference_data(model, n_pairs: int = 20):
    X = model.X_samples_                                      # (C, S, N, Q)
    C, S = X.shape[:2]
    burn = model.burn_in
    log_lik = model.history_[:, burn:]
    posterior = {"log_lik": log_lik,
                 "latent_distance": np.asarray(pairwise_distance_summary(
                     X, n_pairs=n_pairs, key=jax.random.PRNGKey(0)))}
    if "alpha" in model._light_:
        posterior["alpha"] = model._light_["alpha"]
    return to_inference_data(posterior)

"""When the RFLVM's chains have converged: the figures ``n_iter='auto'`` stops on (issue 30,
item 3).

Two kinds of statistic, each over the kept sweeps of every chain: the log-likelihood trace, and
the distances between a fixed set of row pairs of X (:func:`gplvm.inference.mcmc.
pairwise_distance_summary`), which no rotation or shift of the latent space changes, so that
chains cannot look converged by mixing over the rotation alone nor look unconverged because
they sit in different rotations.  For each, the rank-normalised split R-hat and the bulk ESS
(:mod:`gplvm.inference.mcmc.convergence`, Vehtari et al. 2021); the run has converged when
every R-hat is at most :data:`RHAT_TARGET` and every ESS at least the target (``ess_target``,
400 by default: Vehtari et al. 2021 §4.3 ask for 100 per chain over 4 chains).
"""

from __future__ import annotations

import numpy as np

from gplvm.inference.mcmc import pairwise_distance_summary
from gplvm.inference.mcmc.convergence import bulk_ess, rank_rhat

#: the R-hat every statistic must reach (Vehtari et al. 2021, §4.3: 1.01)
RHAT_TARGET = 1.01
#: row pairs whose distances are followed
N_PAIRS = 20


def convergence_figures(log_lik, X_draws) -> dict:
    """R-hat and ESS of the kept log-likelihood (chains, S) and of the distances of
    :data:`N_PAIRS` fixed row pairs in the kept latent draws (chains, S, N, Q).

    Returns:
        dict of floats: ``rhat_log_lik``, ``ess_log_lik``, ``rhat_distances`` (the largest over
        the pairs), ``ess_distances`` (the smallest), ``n_draws`` (kept draws per chain); NaN
        where too few draws define a figure.
    """
    log_lik = np.asarray(log_lik, dtype=float)
    X_draws = np.asarray(X_draws)
    n_pairs = min(N_PAIRS, X_draws.shape[2] * (X_draws.shape[2] - 1) // 2)
    rhat_d, ess_d = [], []
    if n_pairs > 0:
        dist = np.asarray(pairwise_distance_summary(X_draws, n_pairs=n_pairs))
        rhat_d = [rank_rhat(dist[:, :, p]) for p in range(n_pairs)]
        ess_d = [bulk_ess(dist[:, :, p]) for p in range(n_pairs)]
    return {"rhat_log_lik": rank_rhat(log_lik), "ess_log_lik": bulk_ess(log_lik),
            "rhat_distances": float(np.max(rhat_d)) if rhat_d else float("nan"),
            "ess_distances": float(np.min(ess_d)) if ess_d else float("nan"),
            "n_draws": int(log_lik.shape[1])}


def has_converged(figures: dict, ess_target: int) -> bool:
    """Every R-hat at most :data:`RHAT_TARGET` and every ESS at least ``ess_target`` (a NaN
    figure is not converged)."""
    rhats = (figures["rhat_log_lik"], figures["rhat_distances"])
    ess = (figures["ess_log_lik"], figures["ess_distances"])
    return all(r <= RHAT_TARGET for r in rhats) and all(e >= ess_target for e in ess)


def describe(figures: dict) -> str:
    """'R-hat 1.004 / 1.008, ESS 512 / 431' (log-likelihood / worst distance)."""
    return (f"R-hat {figures['rhat_log_lik']:.3f} / {figures['rhat_distances']:.3f}, "
            f"ESS {figures['ess_log_lik']:.0f} / {figures['ess_distances']:.0f}")

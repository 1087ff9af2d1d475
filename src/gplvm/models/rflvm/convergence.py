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

A large R-hat has two causes that call for different remedies: chains still in transit (a
chain drifts: more sweeps help) and chains stuck in separate modes (each chain is stationary on
its own, but they disagree: more sweeps do not help, and pooling them is not the posterior;
issue 30, item 1).  :func:`separate_modes` and :func:`describe_transit` tell them apart, so the
warning can say which (bridges' chains, 450 nats apart after 1,000 sweeps, are in transit:
each still climbs; benchmarks/README.md, "stuck modes or chains in transit").
"""

from __future__ import annotations

import numpy as np

from gplvm.inference.mcmc import pairwise_distance_summary
from gplvm.inference.mcmc.convergence import bulk_ess, rank_rhat

#: the R-hat every statistic must reach (Vehtari et al. 2021, §4.3: 1.01)
RHAT_TARGET = 1.01
#: row pairs whose distances are followed
N_PAIRS = 20
#: a chain is stationary on its own when the split R-hat of its two halves is at most this
#: (Gelman et al. 2013, §11.4's 1.1: the test of one chain against itself is coarser than the
#: pooled one, so it gets the classic threshold, not :data:`RHAT_TARGET`)
WITHIN_RHAT = 1.1
#: two chains' log-likelihoods are in separate modes when their means are further apart than
#: this many within-chain standard deviations (their draws then hardly overlap: for normal
#: draws, 3 sds apart put less than 7% of either beyond the midpoint)
MODE_GAP_SDS = 3.0


def convergence_figures(log_lik, X_draws) -> dict:
    """R-hat and ESS of the kept log-likelihood (chains, S) and of the distances of
    :data:`N_PAIRS` fixed row pairs in the kept latent draws (chains, S, N, Q).

    Returns:
        dict of floats: ``rhat_log_lik``, ``ess_log_lik``, ``rhat_distances`` (the largest over
        the pairs), ``ess_distances`` (the smallest), ``n_draws`` (sweeps per chain after burn-in),
        ``n_modes`` (:func:`separate_modes`); NaN where too few draws define a figure.
    """
    X_draws = np.asarray(X_draws)
    n_pairs = min(N_PAIRS, X_draws.shape[2] * (X_draws.shape[2] - 1) // 2)
    dist = (np.asarray(pairwise_distance_summary(X_draws, n_pairs=n_pairs)) if n_pairs > 0
            else np.zeros(X_draws.shape[:2] + (0,)))
    return figures_of(log_lik, dist)


def figures_of(log_lik, distances) -> dict:
    """:func:`convergence_figures` from the latent distances already formed, (chains, S, P)
    (P = 0: the distances' figures are NaN)."""
    log_lik, distances = np.asarray(log_lik, dtype=float), np.asarray(distances, dtype=float)
    P = distances.shape[2]
    rhat_d = [rank_rhat(distances[:, :, p]) for p in range(P)]
    ess_d = [bulk_ess(distances[:, :, p]) for p in range(P)]
    modes = separate_modes(log_lik)
    return {"rhat_log_lik": rank_rhat(log_lik), "ess_log_lik": bulk_ess(log_lik),
            "rhat_distances": float(np.max(rhat_d)) if rhat_d else float("nan"),
            "ess_distances": float(np.min(ess_d)) if ess_d else float("nan"),
            "n_draws": int(log_lik.shape[1]),
            "n_modes": float(len(modes)) if modes else 1.0}


def _usable(log_lik) -> np.ndarray | None:
    """(chains, draws) floats with at least 8 finite draws per chain, else None (too little to
    judge a chain against itself)."""
    log_lik = np.asarray(log_lik, dtype=float)
    if log_lik.ndim != 2 or log_lik.shape[1] < 8 or not np.all(np.isfinite(log_lik)):
        return None
    return log_lik


def separate_modes(log_lik) -> list | None:
    """The chains' groups when they sit in separate modes: every chain stationary on its own
    (the split R-hat of its halves at most :data:`WITHIN_RHAT`) and, ordered by their mean
    log-likelihood, neighbours further apart than :data:`MODE_GAP_SDS` within-chain standard
    deviations; ``None`` when the chains agree, when one of them still drifts (then more
    sweeps are the remedy, not more chains) or when there are too few draws to tell.

    Args:
        log_lik: kept log-likelihoods, (chains, draws).

    Returns:
        list of lists of chain indices, ordered from the highest mean log-likelihood, or None.
    """
    log_lik = _usable(log_lik)
    if log_lik is None or log_lik.shape[0] < 2:
        return None
    if not np.all(own_rhats(log_lik) <= WITHIN_RHAT):
        return None                       # NaN (a constant chain) counts as undecided too
    means, sds = log_lik.mean(axis=1), log_lik.std(axis=1, ddof=1)
    order = np.argsort(-means)
    groups = [[int(order[0])]]
    for a, b in zip(order[:-1], order[1:]):
        spread = np.sqrt(0.5 * (sds[a] ** 2 + sds[b] ** 2))
        if means[a] - means[b] > MODE_GAP_SDS * spread:
            groups.append([])
        groups[-1].append(int(b))
    return groups if len(groups) > 1 else None


def own_rhats(log_lik) -> np.ndarray:
    """Each chain's split R-hat of its own two halves (chains,): above :data:`WITHIN_RHAT` the
    chain still drifts; NaN where undefined (:func:`.rank_rhat`)."""
    return np.array([rank_rhat(chain[None]) for chain in np.asarray(log_lik, dtype=float)])


def describe_transit(log_lik) -> str:
    """'; the chains are still in transit: ...' when some chain's own halves disagree (its
    split R-hat above :data:`WITHIN_RHAT`: more sweeps are the remedy), else ''."""
    log_lik = _usable(log_lik)
    if log_lik is None:
        return ""
    own = own_rhats(log_lik)
    if not np.nanmax(own, initial=-np.inf) > WITHIN_RHAT:
        return ""
    return (f"; the chains are still in transit: the log-likelihood of "
            f"{int(np.sum(own > WITHIN_RHAT))} of {own.size} chains drifts within the kept "
            f"sweeps (the split R-hat of a chain's own halves up to {np.nanmax(own):.3g})")


def describe_modes(log_lik) -> str:
    """'' when :func:`separate_modes` finds none, else a sentence for a warning that names the
    modes' mean log-likelihoods and what to do."""
    groups = separate_modes(log_lik)
    if not groups:
        return ""
    log_lik = np.asarray(log_lik, dtype=float)
    means = ", ".join(f"{np.mean(log_lik[g]):.6g} (chain{'s' if len(g) > 1 else ''} "
                      f"{', '.join(str(c) for c in g)})" for g in groups)
    worst_sd = float(np.max(log_lik.std(axis=1, ddof=1)))
    return (f"; the chains sit in {len(groups)} separate modes: each chain's log-likelihood is "
            f"stationary on its own, but their means are {means}, more than "
            f"{MODE_GAP_SDS:g} within-chain sds (at most {worst_sd:.3g}) apart, so the draws "
            f"are a mixture of stuck chains, not the posterior, and more sweeps will not mix "
            f"them: run more chains (n_chains) to see how many modes there are and how often "
            f"each is found, and compare the modes' fits (history_ holds each chain's "
            f"log-likelihood)")


def has_converged(figures: dict, ess_target: int) -> bool:
    """Every R-hat at most :data:`RHAT_TARGET` and every ESS at least ``ess_target`` (a NaN
    figure is not converged)."""
    rhats = (figures["rhat_log_lik"], figures["rhat_distances"])
    ess = (figures["ess_log_lik"], figures["ess_distances"])
    return all(r <= RHAT_TARGET for r in rhats) and all(e >= ess_target for e in ess)


def describe(figures: dict) -> str:
    """'R-hat 1.004 / 1.008, ESS 512 / 431' (log-likelihood / worst distance), with ', 3
    modes' when the chains sit in separate modes (:func:`separate_modes`)."""
    modes = int(figures.get("n_modes", 1.0))
    return (f"R-hat {figures['rhat_log_lik']:.3f} / {figures['rhat_distances']:.3f}, "
            f"ESS {figures['ess_log_lik']:.0f} / {figures['ess_distances']:.0f}"
            + (f", {modes} modes" if modes > 1 else ""))


def sweeps_to_target(figures: dict, ess_target: int) -> int | None:
    """The sweeps per chain after burn-in that would bring the smaller bulk ESS (log-likelihood
    or worst distance) to ``ess_target`` at its current rate, or None when it is there already
    (then only R-hat is short, which no rate predicts), undefined, or the chains sit in
    separate modes (more sweeps do not help: :func:`describe_modes`).

    For stationary chains ESS = chains · n / τ grows in proportion to the kept sweeps n (τ the
    integrated autocorrelation time; Gelman et al. 2013, §11.5), so the target is reached at
    n · ``ess_target`` / ESS.  Chains still in transit make the figure a guess."""
    ess = np.array([figures["ess_log_lik"], figures["ess_distances"]], dtype=float).min()
    n_kept = figures["n_draws"]          # numpy's min is NaN when either is (Python's is not)
    if int(figures.get("n_modes", 1.0)) > 1 or not (0 < ess < ess_target) or not n_kept > 0:
        return None
    return int(np.ceil(n_kept * ess_target / ess))


def describe_pace(figures: dict, ess_target: int, seconds_per_sweep: float | None) -> str:
    """'ESS 400 in ~1,900 more sweeps, ~1.2 h': the sweeps of :func:`sweeps_to_target` beyond
    those run after burn-in, and their wall time at ``seconds_per_sweep`` (the run's pace,
    every chain; None: no time given); '' when there is no such figure."""
    needed = sweeps_to_target(figures, ess_target)
    if needed is None:
        return ""
    more = needed - int(figures["n_draws"])
    text = f"ESS {ess_target:,} in ~{more:,} more sweeps"
    return text if seconds_per_sweep is None else f"{text}, ~{duration(more * seconds_per_sweep)}"


def describe_shortfall(figures: dict, log_lik, ess_target: int,
                       seconds_per_sweep: float | None) -> str:
    """What a not-converged warning adds to the figures: the chains' separate modes
    (:func:`describe_modes`) or their transit (:func:`describe_transit`) in the kept
    log-likelihood (chains, S), then the sweeps ESS still needs (:func:`describe_pace`)."""
    projected = describe_pace(figures, ess_target, seconds_per_sweep)
    return ((describe_modes(log_lik) or describe_transit(log_lik))
            + (f"; at the current rate, {projected}" if projected else ""))


def duration(seconds: float) -> str:
    """'40 s', '12 min' or '3.1 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"

r"""Rank-normalised split R-hat and bulk effective sample size without ArviZ (an optional
extra), for samplers that stop when their chains have converged (issue 30, item 3).

Both follow Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), "Rank-normalization,
folding, and localization: an improved R-hat for assessing convergence of MCMC", Bayesian
Analysis 16(2):

* each chain is split in halves (the first and the last ⌊S/2⌋ draws), so that a chain still
  drifting looks like two chains that disagree;
* the pooled draws are replaced by their normal scores z = Φ⁻¹((r − 3/8)/(S_total + 1/4)),
  r the average rank (§4.1, eq. 14), which makes both statistics well defined for heavy tails;
* R-hat (§4.2) is the larger of that of the normal scores ("bulk") and that of the normal
  scores of |x − median(x)| ("tail", the folded draws);
* bulk ESS (§3.2, eqs. 10–11) is S_total / τ̂ of the split, rank-normalised chains, τ̂ from the
  chains' autocovariances (FFT) summed by Geyer's initial positive sequence and made monotone
  (Geyer 1992), floored at 1/log₁₀(S_total) as Stan and ArviZ do.

The arithmetic is ArviZ's (``arviz.stats.diagnostics``, which implements the same paper), so
the figures equal ``arviz.rhat(method='rank')`` and ``arviz.ess(method='bulk')``; the tests
check them against ArviZ and against AR(1) chains of known ESS.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.fft import next_fast_len

from gplvm.inference.mcmc.diagnostics import split_rhat


def _split(chains: np.ndarray) -> np.ndarray:
    half = chains.shape[1] // 2
    return np.vstack((chains[:, :half], chains[:, -half:]))


def _without_middle(chains: np.ndarray) -> np.ndarray:
    """The draws :func:`_split` keeps, in order: an odd chain loses its middle draw, so that
    :func:`.diagnostics.split_rhat` (which halves at S // 2) splits as ArviZ does."""
    S = chains.shape[1]
    return np.delete(chains, S // 2, axis=1) if S % 2 else chains


def _z_scale(chains: np.ndarray) -> np.ndarray:
    """Normal scores of the pooled ranks (eq. 14, c = 3/8)."""
    ranks = stats.rankdata(chains, method="average").reshape(chains.shape)
    return stats.norm.ppf((ranks - 0.375) / (chains.size + 0.25))


def _autocovariance(chains: np.ndarray) -> np.ndarray:
    """Each chain's autocovariance at lags 0 … S−1 (biased, divided by S), by FFT."""
    n = chains.shape[1]
    m = next_fast_len(2 * n)
    centred = chains - chains.mean(axis=1, keepdims=True)
    f = np.fft.rfft(centred, n=m, axis=1)
    return np.fft.irfft(f * np.conjugate(f), n=m, axis=1)[:, :n] / n


def _ess(chains: np.ndarray) -> float:
    """ESS of (C, S) chains (eqs. 10–11, Geyer's initial monotone sequence)."""
    n_chains, n = chains.shape
    acov = _autocovariance(chains)
    mean_var = np.mean(acov[:, 0]) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if n_chains > 1:
        var_plus += np.var(np.mean(chains, axis=1), ddof=1)
    rho = np.zeros(n)
    rho[0] = rho_even = 1.0
    rho[1] = rho_odd = 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    t = 1
    while t < n - 3 and rho_even + rho_odd > 0.0:        # Geyer's initial positive sequence
        rho_even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        rho_odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if rho_even + rho_odd >= 0:
            rho[t + 1], rho[t + 2] = rho_even, rho_odd
        t += 2
    max_t = t - 2
    if rho_even > 0:
        rho[max_t + 1] = rho_even
    t = 1
    while t <= max_t - 2:                                 # ... made monotone
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2.0
        t += 2
    total = n_chains * n
    tau = -1.0 + 2.0 * np.sum(rho[:max_t + 1]) + np.sum(rho[max_t + 1:max_t + 2])
    tau = max(tau, 1.0 / np.log10(total))
    return float("nan") if np.isnan(rho).any() else total / tau


def _checked(chains) -> np.ndarray | None:
    """(C, S) floats, or None when there are too few draws (fewer than 4 per chain) or the
    draws are constant or not finite (no statistic is defined)."""
    chains = np.asarray(chains, dtype=float)
    if chains.ndim != 2:
        raise ValueError(f"chains has shape {chains.shape}; expected (chains, draws)")
    if chains.shape[1] < 4 or not np.all(np.isfinite(chains)) or np.ptp(chains) == 0:
        return None
    return chains


def rank_rhat(chains) -> float:
    """Rank-normalised split R-hat (max of bulk and tail) of (chains, draws); NaN when
    undefined (fewer than 4 draws per chain, constant or non-finite draws)."""
    chains = _checked(chains)
    if chains is None:
        return float("nan")
    # ranks are pooled, so normal scores of the kept draws, split afterwards, are those of
    # the split chains
    bulk = split_rhat(_z_scale(_without_middle(chains)))
    tail = split_rhat(_z_scale(_without_middle(np.abs(chains - np.median(chains)))))
    return max(bulk, tail)


def bulk_ess(chains) -> float:
    """Bulk effective sample size of (chains, draws), over all chains together; NaN when
    undefined (as :func:`rank_rhat`)."""
    chains = _checked(chains)
    if chains is None:
        return float("nan")
    return _ess(_z_scale(_split(chains)))

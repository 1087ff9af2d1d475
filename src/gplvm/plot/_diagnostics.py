"""How a fit went: the relevance of each latent dimension (ARD weights 1/ℓ², seed 001 §B; the
RFLVM's mean squared frequency, seed 000 §3) and the objective's trace (the bound per
iteration, or the log-likelihood per sweep of each chain with its split R-hat, Gelman et al.
2013 §11.4)."""

from __future__ import annotations

import numpy as np

from gplvm.plot._axes import legend_outside, new_axes, require

#: the trace's y-range covers the iterations after the first EARLY_FRACTION of them
EARLY_FRACTION = 0.1


def relevance_quantity(model) -> tuple[str, str]:
    """(symbol, axis label) of what ``relevance_`` holds: the ARD inverse squared length-scale
    1/ℓ² of the kernel (the variational GPLVMs), or, for a model with frequency draws
    (``W_samples_``, the RFLVM), their mean square E[ω²], which equals 1/ℓ² for an RBF kernel
    (its spectral density is N(0, diag(1/ℓ²)), seed 000 §2)."""
    if has_frequencies(model):
        return "E[ω²]", "relevance E[ω²]\n(mean squared frequency; = 1/ℓ² for RBF)"
    return "1/ℓ²", "relevance 1/ℓ²\n(inverse squared ARD length-scale)"


def has_frequencies(model) -> bool:
    """A random-feature model (frequency draws ``W_samples_``, the RFLVM)."""
    return getattr(model, "W_samples_", None) is not None


def relevance(model, ax=None):
    """Bars of ``relevance_`` per latent dimension (one group of bars per row when a model has
    one row per column group, as the DP-GP-LVM).

    Returns:
        The Axes; bar heights are the values of ``relevance_``.
    """
    rel = np.atleast_2d(np.asarray(require(model, "relevance_", "relevance"), dtype=float))
    ax = new_axes(ax, figsize=(5.0, 3.5))
    G, Q = rel.shape
    width = 0.8 / G
    for g in range(G):
        ax.bar(np.arange(Q) + (g - (G - 1) / 2) * width, rel[g], width=width,
               label=f"group {g}" if G > 1 else None)
    if G > 1:
        legend_outside(ax)
    integer_ticks(ax.xaxis, Q)
    ax.set_xlabel("latent dimension")
    ax.set_ylabel(relevance_quantity(model)[1], fontsize=9)
    ax.set_title(f"{type(model).__name__}: relevance of each latent dimension", fontsize=9)
    return ax


def integer_ticks(axis, n: int, most: int = 15) -> None:
    """Ticks at 0..n-1, every one up to ``most`` of them, else every k-th so that at most
    ``most`` remain (30 labels side by side overlap)."""
    axis.set_ticks(range(0, n, -(-n // most)))


def is_map_fit(model) -> bool:
    """An RFLVM fitted with ``inference='map'``: one mode per chain, no sweeps."""
    return model.get_params().get("inference") == "map"


def kept_trace(model) -> np.ndarray | None:
    """(chains, sweeps) log-likelihood after burn-in of an MCMC model (a 2-D ``history_``; a
    MAP fit's is its modes', (chains, 1)), or None for a model with one objective per
    iteration."""
    history = np.asarray(model.history_, dtype=float)
    if history.ndim != 2:
        return None
    if is_map_fit(model):
        return history
    burn_in = int(model.get_params().get("burn_in", 0) or 0)
    return history[:, min(burn_in, history.shape[1]):]


def split_rhat_of(model) -> float | None:
    """The split R-hat of the kept log-likelihood trace (NaN when it is too short), or None
    for a model that is not sampled (a MAP fit included)."""
    from gplvm.inference.mcmc import split_rhat

    kept = kept_trace(model)
    return None if kept is None or is_map_fit(model) else float(split_rhat(kept))


def trace(model, ax=None):
    """The objective per iteration: ``history_`` as one line (the bound), or one line per chain
    (log-likelihood per sweep) with the end of burn-in dotted and the split R-hat of the kept
    sweeps in the title; for an RFLVM fitted with ``inference='map'``, one point per chain (the
    log-likelihood at its mode).

    Returns:
        The Axes, one line per row of ``history_``.
    """
    history = np.atleast_1d(np.asarray(require(model, "history_", "trace"), dtype=float))
    ax = new_axes(ax, figsize=(5.0, 3.5))
    name = type(model).__name__
    if history.ndim == 1:
        return _bound_trace(ax, history, name)
    if is_map_fit(model):         # one mode per chain: a point each, no sweeps, no R-hat
        for c, chain in enumerate(history):
            ax.plot([c], chain[:1], "o")
        ax.set_xticks(range(history.shape[0]))
        ax.set_xlabel("restart (chain)")
        ax.set_ylabel("log-likelihood at the mode")
        ax.set_title(f"{name} (inference='map'): log-likelihood at each restart's mode",
                     fontsize=9)
        return ax
    for c, chain in enumerate(history):
        ax.plot(np.arange(1, history.shape[1] + 1), chain, lw=0.8, label=f"chain {c}")
    burn_in = int(model.get_params().get("burn_in", 0) or 0)
    if 0 < burn_in < history.shape[1]:
        ax.axvline(burn_in, color="grey", ls=":", lw=0.8)
    legend_outside(ax)
    ax.set_xlabel("sweep (dotted: end of burn-in)" if 0 < burn_in < history.shape[1]
                  else "sweep")
    ax.set_ylabel("log-likelihood")
    ax.set_title(f"{name}: log-likelihood per sweep (split R-hat {split_rhat_of(model):.3f})",
                 fontsize=9)
    return ax


def _bound_trace(ax, history, name):
    """The bound per iteration on a y-range that fits the iterations after the first
    :data:`EARLY_FRACTION` (the first few, far below, would flatten the rest to a line and
    hide whether the fit had settled), with the whole trace in an inset."""
    n = len(history)
    iterations = np.arange(1, n + 1)
    ax.plot(iterations, history, lw=1.0, gid="bound")
    ax.set_xlabel("iteration")
    ax.set_ylabel("bound (nats, standardised data)")
    first = max(1, int(np.ceil(EARLY_FRACTION * n))) if n >= 10 else 0
    late = history[first:]
    late = late[np.isfinite(late)]
    if first and late.size and np.ptp(late) > 0:
        pad = 0.05 * np.ptp(late)
        ax.set_ylim(late.min() - pad, late.max() + pad)
        inset = ax.inset_axes([0.5, 0.1, 0.45, 0.4])
        inset.plot(iterations, history, lw=0.8, gid="bound, all iterations")
        inset.axvspan(first + 0.5, n, color="0.9", zorder=0)
        inset.set_title("all iterations (shaded: main axes)", fontsize=6)
        inset.tick_params(labelsize=6)
        below = int(np.sum(history < late.min() - pad))
        ax.set_title(f"{name}: bound per iteration\ny-axis fits iterations {first + 1}–{n}; "
                     f"{below} earlier (from {history[0]:.6g}) lie below it", fontsize=8)
    else:
        ax.set_title(f"{name}: bound per iteration", fontsize=9)
    return ax

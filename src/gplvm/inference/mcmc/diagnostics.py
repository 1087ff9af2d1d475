"""Convergence diagnostics: ArviZ ``InferenceData`` and rotation-invariant summaries of X.

R-hat and effective sample sizes of the raw latent coordinates are meaningless for the RFLVM:
the posterior is invariant to orthogonal transforms of X (see :mod:`.align`), so chains that
agree on the configuration can still disagree on its orientation.  Distances between rows are
invariant to rotations, reflections and shifts, so :func:`pairwise_distance_summary` reduces the
draws to the distances between a fixed random set of row pairs, which can be diagnosed like any
scalar.

ArviZ is an optional dependency (``pip install gplvm[mcmc]``); only ``az.from_dict``,
``az.rhat``, ``az.ess`` and ``az.summary`` are used, present in every version from 0.20 to 0.23.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array


def _arviz():
    try:
        import arviz
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("MCMC diagnostics need ArviZ: pip install 'gplvm[mcmc]' "
                          "(or pip install 'arviz>=0.20,<0.24')") from err
    return arviz


def _numpy_group(group: Optional[Mapping], name: str, shape2: Optional[tuple]):
    """A dict of NumPy arrays, each with the same leading (chains, draws) shape."""
    if group is None:
        return None, shape2
    out = {}
    for var, value in group.items():
        arr = np.asarray(value)
        if arr.ndim < 2:
            raise ValueError(f"{name}[{var!r}] has shape {arr.shape}; every variable needs "
                             f"leading (chains, draws) axes — use x[None] for one chain")
        if shape2 is not None and arr.shape[:2] != shape2:
            raise ValueError(f"{name}[{var!r}] has (chains, draws) = {arr.shape[:2]} but "
                             f"other variables have {shape2}; record them at the same sweeps")
        shape2 = arr.shape[:2]
        out[var] = arr
    return out, shape2


def to_inference_data(posterior: Mapping, sample_stats: Optional[Mapping] = None,
                      log_likelihood: Optional[Mapping] = None,
                      observed: Optional[Mapping] = None, coords: Optional[dict] = None,
                      dims: Optional[dict] = None):
    """An ``arviz.InferenceData`` from arrays with leading (chains, draws) axes.

    Args:
        posterior: ``{name: Float[Array, "C S ..."]}``, e.g. ``ChainResult.draws``.
        sample_stats: per-draw statistics at the same sweeps, e.g. ``{"lp": (C, S)}``.  The
            ``ChainResult.trace`` covers every sweep (burn-in included): select the kept
            sweeps before passing it here.
        log_likelihood: pointwise log-likelihoods ``{name: (C, S, ...)}`` (for LOO / WAIC).
        observed: ``{name: array}`` of observed data (no chain axes).
        coords, dims: as in ``arviz.from_dict``.

    Returns:
        ``arviz.InferenceData`` with groups ``posterior`` and any of ``sample_stats``,
        ``log_likelihood``, ``observed_data``.
    """
    az = _arviz()
    posterior, shape2 = _numpy_group(posterior, "posterior", None)
    sample_stats, shape2 = _numpy_group(sample_stats, "sample_stats", shape2)
    log_likelihood, _ = _numpy_group(log_likelihood, "log_likelihood", shape2)
    observed = None if observed is None else {k: np.asarray(v) for k, v in observed.items()}
    return az.from_dict(posterior=posterior, sample_stats=sample_stats,
                        log_likelihood=log_likelihood, observed_data=observed,
                        coords=coords, dims=dims)


def summary_rhat_ess(idata, var_names: Optional[Sequence[str]] = None):
    """``arviz.summary`` restricted to diagnostics: rank-normalised split R-hat, bulk and tail
    ESS and Monte Carlo standard errors (a ``pandas.DataFrame``, one row per scalar)."""
    return _arviz().summary(idata, var_names=var_names, kind="diagnostics")


def random_row_pairs(key: Array, n_rows: int, n_pairs: int) -> Array:
    """``Int[Array, "P 2"]``: P pairs of distinct rows ``(i, j)``, with distinct first rows
    when ``n_pairs <= n_rows``.

    Drawn on the host by NumPy, seeded by the key's bits (the same key gives the same pairs):
    as a JAX program the permutation's sort compiled in ~0.5 CPU s of every fit's start-up at
    N = 1000 (issue 30, item 4).
    """
    if n_rows < 2:
        raise ValueError(f"need at least 2 rows to form pairs; got {n_rows}")
    bits = np.asarray(jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
                      else key).astype(np.uint64).ravel()
    rng = np.random.default_rng(bits.tolist())
    n_rows, n_pairs = int(n_rows), int(n_pairs)
    if n_pairs <= n_rows:
        i = rng.permutation(n_rows)[:n_pairs]
    else:
        i = rng.integers(0, n_rows, n_pairs)
    # j = i + offset (mod N) with offset in 1..N-1: never equal to i, uniform over the others
    j = (i + rng.integers(1, n_rows, n_pairs)) % n_rows
    return jnp.asarray(np.stack([i, j], axis=1).astype(np.int32))


def pairwise_distance_summary(X_samples: Array, n_pairs: int = 20,
                              key: Optional[Array] = None,
                              pairs: Optional[Array] = None) -> Array:
    """Distances between a fixed set of row pairs in every draw: invariant to the orthogonal
    transforms (and shifts) that leave the posterior unchanged, so fit for R-hat and ESS.

    Args:
        X_samples: ``Float[Array, "C S N Q"]``.
        n_pairs: how many random pairs (ignored when ``pairs`` is given).
        key: key choosing the pairs (``PRNGKey(0)`` by default, so the same pairs every call).
        pairs: ``Int[Array, "P 2"]`` explicit row pairs, e.g. from :func:`random_row_pairs`.

    Returns:
        ``Float[Array, "C S P"]``, ``||x_i - x_j||`` per draw and pair.
    """
    X_samples = jnp.asarray(X_samples)
    if X_samples.ndim != 4:
        raise ValueError(f"X_samples has shape {X_samples.shape}; expected (chains, draws, N, Q)")
    if pairs is None:
        key = jax.random.PRNGKey(0) if key is None else key
        pairs = random_row_pairs(key, X_samples.shape[2], n_pairs)
    pairs = jnp.asarray(pairs)
    diff = X_samples[:, :, pairs[:, 0]] - X_samples[:, :, pairs[:, 1]]
    return jnp.sqrt(jnp.sum(diff**2, axis=-1))


def split_rhat(chains) -> float:
    """Split R-hat (Gelman et al. 2013, §11.4) of a (chains, draws) array, without ArviZ (an
    optional extra): each chain is cut in half and the between/within variances compared."""
    chains = np.asarray(chains, dtype=float)
    n = chains.shape[1] // 2
    if n < 2:
        return float("nan")
    split = np.concatenate([chains[:, :n], chains[:, n:2 * n]], axis=0)
    within = split.var(axis=1, ddof=1).mean()
    between = n * split.mean(axis=1).var(ddof=1)
    var_plus = (n - 1) / n * within + between / n
    return float(np.sqrt(var_plus / within)) if within > 0 else float("inf")

"""What :func:`~gplvm.inference.mcmc.run_chains` keeps on the host: preallocated NumPy arrays
for the kept draws (light and heavy) and the per-sweep trace, filled block by block from the
per-block device buffers of :mod:`._block`; device memory is bounded by one block, host memory
by the result."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from gplvm.registry import register


@register("gplvm.state.ChainResult")
class ChainResult(NamedTuple):
    """What :func:`~gplvm.inference.mcmc.run_chains` returns.

    Attributes:
        state: the state after the last finished sweep, leading chain axis (device arrays).
        draws: ``record`` outputs stacked as ``(chains, n_kept, ...)`` NumPy arrays (None
            without ``record``).
        heavy: ``record_heavy`` outputs, ``(chains, n_kept_heavy, ...)`` (None without it).
        trace: ``trace`` outputs at every sweep of this run, ``(chains, n_sweeps, ...)``.
        n_done: sweeps finished since the start of the chain (``start`` included).
        interrupted: True when Ctrl-C stopped the run early.
        thin_heavy: the heavy thinning used (useful when it was the default).
    """

    state: Any
    draws: Any
    heavy: Any
    trace: Any
    n_done: int
    interrupted: bool
    thin_heavy: int = 1


def n_kept(n_sweeps: int, burn_in: int, thin: int) -> int:
    """How many of the states after sweeps 1..``n_sweeps`` are kept."""
    return max(0, (n_sweeps - burn_in) // thin)


class Counts(NamedTuple):
    """The sweep counts of a run (see :func:`~gplvm.inference.mcmc.run_chains`)."""

    n_iter: int
    burn_in: int
    thin: int
    thin_heavy: int
    start: int

    def kept(self, done: int, heavy: bool = False) -> int:
        """Draws kept by this run after ``done`` sweeps from the start of the chain."""
        thin = self.thin_heavy if heavy else self.thin
        return n_kept(done, self.burn_in, thin) - n_kept(self.start, self.burn_in, thin)


def _alloc(fn, state, n_chains: int, rows: int):
    """Preallocated NumPy arrays ``(chains, rows, ...)`` for the outputs of ``fn``."""
    if fn is None:
        return None
    shapes = jax.eval_shape(jax.vmap(fn), state)
    return jax.tree_util.tree_map(
        lambda s: np.empty((n_chains, rows) + s.shape[1:], s.dtype), shapes)


def _copy(dst, src, chains: slice, at: int, n: int):
    """Rows ``[0, n)`` of the block output ``src`` (chains, rows, ...) for ``chains`` into
    ``dst[chains, at:at + n]``."""
    if dst is None or n == 0:
        return

    def one(d, s):
        d[chains, at:at + n] = np.asarray(s)[:chains.stop - chains.start, :n]

    jax.tree_util.tree_map(one, dst, src)


def _head(tree, n: int):
    return None if tree is None else jax.tree_util.tree_map(lambda x: x[:, :n], tree)


class Kept:
    """The host arrays of one run: ``draws``, ``heavy`` and ``traced``."""

    def __init__(self, record, record_heavy, trace, init_state, counts: Counts):
        n_chains = jax.tree_util.tree_leaves(init_state)[0].shape[0]
        self.counts = c = counts
        self.draws = _alloc(record, init_state, n_chains, c.kept(c.n_iter))
        self.heavy = _alloc(record_heavy, init_state, n_chains, c.kept(c.n_iter, heavy=True))
        self.traced = _alloc(trace, init_state, n_chains, c.n_iter - c.start)

    def copy(self, buffers, first_chain: int, n_chains: int, done: int, n: int):
        """Copy the buffers ``(buf, buf_heavy, traced)`` of one round, whose first
        ``n_chains`` chains are chains ``first_chain, ...``, after sweeps ``done + 1 ..
        done + n``."""
        c, chains = self.counts, slice(first_chain, first_chain + n_chains)
        buf, buf_heavy, traced = buffers
        a, b = c.kept(done), c.kept(done + n)
        _copy(self.draws, buf, chains, a, b - a)
        a, b = c.kept(done, heavy=True), c.kept(done + n, heavy=True)
        _copy(self.heavy, buf_heavy, chains, a, b - a)
        _copy(self.traced, traced, chains, done - c.start, n)

    def result(self, state, done: int, interrupted: bool):
        """The :class:`ChainResult` after ``done`` sweeps (views)."""
        c = self.counts
        return ChainResult(state, _head(self.draws, c.kept(done)),
                           _head(self.heavy, c.kept(done, heavy=True)),
                           _head(self.traced, done - c.start), done, interrupted, c.thin_heavy)

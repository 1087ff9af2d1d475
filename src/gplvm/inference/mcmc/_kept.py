"""What :func:`~gplvm.inference.mcmc.run_chains` keeps on the host: preallocated NumPy arrays
for the kept draws (light and heavy) and the per-sweep trace, filled block by block from the
per-block device buffers of :mod:`._block`; device memory is bounded by one block, host memory
by the result."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

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
        interrupted: True when Ctrl-C stopped the run early (and in the partial results
            handed to a checkpoint); False when it ran to ``n_iter`` or stopped at
            :class:`~gplvm.inference.mcmc.Execution`'s ``deadline`` (``n_done`` < ``n_iter``).
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


class Sweeps(NamedTuple):
    """Which sweeps of a chain :func:`~gplvm.inference.mcmc.run_chains` runs and which states
    it keeps (sweep ``i``, 0-based, makes the state after ``s = i + 1`` sweeps, kept when
    ``s > burn_in`` and ``(s - burn_in) % thin == 0``).

    Attributes:
        n_iter: sweeps per chain, burn-in included (the paper runs 2000 with 1000 burn-in).
        burn_in: sweeps discarded before the first kept draw.
        thin: ``record`` is kept every ``thin`` sweeps after burn-in.
        thin_heavy: ``record_heavy`` is kept every ``thin_heavy`` sweeps after burn-in; None:
            :func:`~gplvm.inference.mcmc.default_thin_heavy` (at most 200 heavy draws).
        start: sweeps already done, to resume a run from ``ChainResult.state``: sweeps
            ``[0, k)`` and then ``[k, n_iter)`` with ``start=k`` give the same chains as one
            run (join the results with :func:`~gplvm.inference.mcmc.concat_results`).
    """

    n_iter: int
    burn_in: int = 0
    thin: int = 1
    thin_heavy: Optional[int] = None
    start: int = 0

    def kept(self, done: int, heavy: bool = False) -> int:
        """Draws kept by this run after ``done`` sweeps from the start of the chain (with
        ``thin_heavy`` set)."""
        thin = self.thin_heavy if heavy else self.thin
        return n_kept(done, self.burn_in, thin) - n_kept(self.start, self.burn_in, thin)


class Keep(NamedTuple):
    """What :func:`~gplvm.inference.mcmc.run_chains` keeps of each chain's state: functions of
    ONE chain's state (no chain axis), traced into the compiled block and evaluated after every
    sweep (keep them cheap: a selection of the state), written only when kept.

    Attributes:
        record: ``state -> pytree``, kept every ``Sweeps.thin`` sweeps after burn-in.
        record_heavy: like ``record`` for big arrays (β, W), kept every ``Sweeps.thin_heavy``.
        trace: ``state -> pytree`` of small arrays (e.g. the log-likelihood) kept after every
            sweep, burn-in included; its scalar entries are shown on the progress bar.
    """

    record: Optional[Callable] = None
    record_heavy: Optional[Callable] = None
    trace: Optional[Callable] = None


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

    def __init__(self, keep: Keep, init_state, sweeps: Sweeps):
        """``sweeps`` with its ``thin_heavy`` set (the driver sets the default)."""
        n_chains = jax.tree_util.tree_leaves(init_state)[0].shape[0]
        self.sweeps = c = sweeps
        self.draws = _alloc(keep.record, init_state, n_chains, c.kept(c.n_iter))
        self.heavy = _alloc(keep.record_heavy, init_state, n_chains, c.kept(c.n_iter, heavy=True))
        self.traced = _alloc(keep.trace, init_state, n_chains, c.n_iter - c.start)

    def copy(self, buffers, first_chain: int, n_chains: int, done: int, n: int):
        """Copy the buffers ``(buf, buf_heavy, traced)`` of one round, whose first
        ``n_chains`` chains are chains ``first_chain, ...``, after sweeps ``done + 1 ..
        done + n``."""
        c, chains = self.sweeps, slice(first_chain, first_chain + n_chains)
        buf, buf_heavy, traced = buffers
        a, b = c.kept(done), c.kept(done + n)
        _copy(self.draws, buf, chains, a, b - a)
        a, b = c.kept(done, heavy=True), c.kept(done + n, heavy=True)
        _copy(self.heavy, buf_heavy, chains, a, b - a)
        _copy(self.traced, traced, chains, done - c.start, n)

    def result(self, state, done: int, interrupted: bool):
        """The :class:`ChainResult` after ``done`` sweeps (views)."""
        c = self.sweeps
        return ChainResult(state, _head(self.draws, c.kept(done)),
                           _head(self.heavy, c.kept(done, heavy=True)),
                           _head(self.traced, done - c.start), done, interrupted, c.thin_heavy)

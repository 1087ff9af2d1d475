"""The one loop over sweeps and chains (STYLE.md 1): :func:`run_chains`.

A sampler supplies ``sweep(key, state) -> state`` for ONE chain (a Gibbs sweep, any
composition of kernels).  The driver

* runs the sweep over a leading chain axis, the chains one after the other (``lax.map``; or
  ``vmap`` with ``vectorize=True``, see :mod:`._block` for why that is not the default), and
  scans it over a *block* of sweeps, jitted once:
  every block, including the last partial one, calls the same compiled function (a block of
  ``block_size`` steps in which the steps past the end are skipped with ``lax.cond``, so a
  partial block costs no recompilation and no extra sweeps);
* derives the key of sweep ``i`` (0-based, counted from the start of the chain) as
  ``split(fold_in(key, i), C)[c]`` for chain c, so the draws depend on the key only — not on
  ``block_size``, not on interruptions and resumptions (``start``);
* keeps ``record(state)`` every ``thin`` sweeps after ``burn_in``, ``record_heavy(state)``
  every ``thin_heavy`` sweeps after ``burn_in`` (by default at most 200 heavy draws), and
  ``trace(state)`` after every sweep, burn-in included.  Kept draws go into a per-block device
  buffer sized for one block, then into preallocated host (NumPy) arrays: device memory is
  bounded by one block, host memory by the result;
* shows a tqdm bar per block with the chain-mean of the trace, and on Ctrl-C
  (``KeyboardInterrupt``) returns everything finished so far with ``interrupted=True``.

Sweep numbering: sweep ``i`` (0-based) produces the state after ``s = i + 1`` sweeps; that state
is kept when ``s > burn_in`` and ``(s - burn_in) % thin == 0``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from gplvm.inference.mcmc._block import compiled_block
from gplvm.registry import register

MAX_HEAVY_DRAWS = 200


@register("gplvm.state.ChainResult")
class ChainResult(NamedTuple):
    """What :func:`run_chains` returns.

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


def default_thin_heavy(n_iter: int, burn_in: int, thin: int) -> int:
    """A multiple of ``thin`` keeping at most :data:`MAX_HEAVY_DRAWS` heavy draws (so every
    heavy draw is also a light draw)."""
    return thin * max(1, math.ceil(n_kept(n_iter, burn_in, thin) / MAX_HEAVY_DRAWS))


def _strong(tree):
    """Arrays with strong dtypes: a weakly typed scan carry would not match the sweep's output."""
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype=jnp.asarray(x).dtype), tree)


def _check_state(key, init_state, sweep) -> int:
    leaves = jax.tree_util.tree_leaves(init_state)
    if not leaves or any(jnp.ndim(x) == 0 for x in leaves):
        raise ValueError("init_state must be a pytree of arrays with a leading chain axis "
                         "(stack one state per chain, e.g. with jax.vmap(init)(keys))")
    sizes = {int(jnp.shape(x)[0]) for x in leaves}
    if len(sizes) != 1:
        raise ValueError(f"the leaves of init_state have different leading (chain) sizes "
                         f"{sorted(sizes)}; every leaf needs one entry per chain")
    n_chains = sizes.pop()
    keys = jax.random.split(key, n_chains)
    out = jax.eval_shape(jax.vmap(sweep), keys, init_state)
    same = jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(init_state) and all(
        a.shape == jnp.shape(b) for a, b in zip(jax.tree_util.tree_leaves(out), leaves))
    if not same:
        raise ValueError("sweep(key, state) must return a state with the structure and shapes "
                         "of the state it receives (for one chain, without the chain axis)")
    return n_chains


def _check_counts(n_iter, burn_in, thin, thin_heavy, start):
    if n_iter < 1 or not 0 <= burn_in < n_iter:
        raise ValueError(f"need 0 <= burn_in < n_iter (n_iter counts every sweep, burn-in "
                         f"included); got n_iter={n_iter}, burn_in={burn_in}")
    if thin < 1 or (thin_heavy is not None and thin_heavy < 1):
        raise ValueError(f"thin and thin_heavy must be positive integers; got thin={thin}, "
                         f"thin_heavy={thin_heavy}")
    if not 0 <= start <= n_iter:
        raise ValueError(f"start={start} must lie in [0, n_iter={n_iter}]: it is the number of "
                         f"sweeps already done (ChainResult.n_done of the run to resume)")


def _host(fn, state, n_chains: int, rows: int):
    """Preallocated NumPy arrays ``(chains, rows, ...)`` for the outputs of ``fn``."""
    if fn is None:
        return None
    shapes = jax.eval_shape(jax.vmap(fn), state)
    return jax.tree_util.tree_map(
        lambda s: np.empty((n_chains, rows) + s.shape[1:], s.dtype), shapes)


def _copy(dst, src, at: int, n: int, transpose: bool = False):
    """Copy ``n`` rows of the block output ``src`` into ``dst[:, at:at + n]``."""
    if dst is None or n == 0:
        return

    def one(d, s):
        s = np.asarray(s)
        d[:, at:at + n] = np.swapaxes(s[:n], 0, 1) if transpose else s[:, :n]

    jax.tree_util.tree_map(one, dst, src)


def _head(tree, n: int):
    return None if tree is None else jax.tree_util.tree_map(lambda x: x[:, :n], tree)


def _postfix(trace_block, n: int) -> dict:
    """Chain means of the scalar traces at the last sweep of a block, for the progress bar."""
    if isinstance(trace_block, dict):
        items = list(trace_block.items())
    else:
        items = [(f"trace{k}" if k else "trace", v)
                 for k, v in enumerate(jax.tree_util.tree_leaves(trace_block))]
    return {str(name): f"{float(np.mean(np.asarray(v)[n - 1])):.6g}"
            for name, v in items[:3] if np.ndim(v) == 2}


def run_chains(key, init_state, sweep: Callable, *, n_iter: int, burn_in: int = 0,
               thin: int = 1, record: Optional[Callable] = None,
               record_heavy: Optional[Callable] = None, thin_heavy: Optional[int] = None,
               trace: Optional[Callable] = None, block_size: Optional[int] = None,
               progress: bool = True, desc: str = "MCMC", start: int = 0,
               callback: Optional[Callable[[int, Any], None]] = None,
               on_block: Optional[Callable[["ChainResult"], None]] = None,
               vectorize: bool = False) -> ChainResult:
    """Run C chains of ``sweep`` for ``n_iter`` sweeps each.

    Args:
        key: a ``jax.random`` key; the same key gives the same chains whatever ``block_size``.
        init_state: a pytree with a leading chain axis C (one state per chain).
        sweep: ``sweep(key, state) -> state`` for one chain (no chain axis), jit-able.  Pass a
            module-level function or one kept alive across runs: the compiled block is cached
            per ``sweep`` object.
        n_iter: total sweeps per chain, burn-in included (the paper runs 2000 with 1000 burn-in).
        burn_in: sweeps discarded before the first kept draw.
        thin: keep ``record(state)`` every ``thin`` sweeps after burn-in.
        record: ``state -> pytree`` for one chain; keep it cheap (a selection of the state):
            it is evaluated after every sweep and written only when kept.
        record_heavy: like ``record`` for big arrays (β, W), kept every ``thin_heavy`` sweeps.
        thin_heavy: defaults to :func:`default_thin_heavy` (at most 200 heavy draws).
        trace: ``state -> pytree`` of small arrays (e.g. the log-likelihood) kept after every
            sweep, burn-in included; scalar entries are shown on the progress bar.
        block_size: sweeps per compiled block (one progress-bar update and one host copy per
            block); defaults to ``ceil(n_iter / 50)`` capped at 100.
        progress: show a tqdm bar.
        desc: the bar's label.
        start: sweeps already done, to resume a run from ``ChainResult.state``: running
            ``[0, k)`` and then ``[k, n_iter)`` with ``start=k`` gives the same chains as one
            run (join the two results with :func:`concat_results`).
        callback: ``callback(n_done, state)`` after each block, on the host (checkpointing);
            a ``KeyboardInterrupt`` raised there stops the run like Ctrl-C.
        on_block: ``on_block(partial)`` after each block with the :class:`ChainResult` of the
            sweeps done so far (its arrays are views of buffers the run keeps filling: copy
            or write them out before returning), for checkpoints to a file.
        vectorize: ``vmap`` the sweep over chains instead of running them one after the
            other (only for tiny sweeps: under ``vmap`` data-dependent branches compute both
            sides and loops wait for the slowest chain).  Both give the same chains up to
            rounding.

    Returns:
        :class:`ChainResult`.  On Ctrl-C, every finished block is kept, with a warning.
    """
    _check_counts(n_iter, burn_in, thin, thin_heavy, start)
    init_state = _strong(jax.tree_util.tree_map(jnp.asarray, init_state))
    n_chains = _check_state(key, init_state, sweep)
    if record_heavy is not None and thin_heavy is None:
        thin_heavy = default_thin_heavy(n_iter, burn_in, thin)
    thin_heavy = thin_heavy or 1
    n_run = n_iter - start
    block_size = int(block_size or min(100, math.ceil(n_iter / 50)))
    rows, rows_heavy = math.ceil(block_size / thin), math.ceil(block_size / thin_heavy)
    block = compiled_block(sweep, record, record_heavy, trace, block_size, rows, rows_heavy,
                           bool(vectorize))

    kept0, kept_heavy0 = n_kept(start, burn_in, thin), n_kept(start, burn_in, thin_heavy)
    draws = _host(record, init_state, n_chains, n_kept(n_iter, burn_in, thin) - kept0)
    heavy = _host(record_heavy, init_state, n_chains,
                  n_kept(n_iter, burn_in, thin_heavy) - kept_heavy0)
    traced = _host(trace, init_state, n_chains, n_run)
    consts = tuple(jnp.asarray(v, jnp.int32) for v in (burn_in, thin, thin_heavy))

    state, done, interrupted = init_state, start, False
    bar = tqdm(total=n_run, desc=desc, disable=not progress, leave=False, dynamic_ncols=True)
    try:
        while done < n_iter:
            n = min(block_size, n_iter - done)
            new_state, buf, buf_heavy, out = block(key, state, jnp.asarray(done, jnp.int32),
                                                   jnp.asarray(n, jnp.int32), *consts)
            a, b = n_kept(done, burn_in, thin), n_kept(done + n, burn_in, thin)
            _copy(draws, buf, a - kept0, b - a)
            a, b = n_kept(done, burn_in, thin_heavy), n_kept(done + n, burn_in, thin_heavy)
            _copy(heavy, buf_heavy, a - kept_heavy0, b - a)
            _copy(traced, out, done - start, n, transpose=True)
            state, done = new_state, done + n
            if trace is not None:
                bar.set_postfix(_postfix(out, n), refresh=False)
            bar.update(n)
            if callback is not None:
                callback(done, state)
            if on_block is not None:
                on_block(ChainResult(state, _head(draws, n_kept(done, burn_in, thin) - kept0),
                                     _head(heavy, n_kept(done, burn_in, thin_heavy)
                                           - kept_heavy0),
                                     _head(traced, done - start), done, done < n_iter,
                                     thin_heavy))
    except KeyboardInterrupt:
        interrupted = True
        warnings.warn(f"{desc}: interrupted after {done} of {n_iter} sweeps; keeping the "
                      f"draws made so far", RuntimeWarning, stacklevel=2)
    finally:
        bar.close()
    return ChainResult(state, _head(draws, n_kept(done, burn_in, thin) - kept0),
                       _head(heavy, n_kept(done, burn_in, thin_heavy) - kept_heavy0),
                       _head(traced, done - start), done, interrupted, thin_heavy)


def concat_results(first: ChainResult, second: ChainResult) -> ChainResult:
    """Join a run and its resumption (``start=first.n_done``) into one result."""
    def cat(a, b):
        if a is None or b is None:
            return b if a is None else a
        return jax.tree_util.tree_map(lambda x, y: np.concatenate([x, y], axis=1), a, b)

    return ChainResult(second.state, cat(first.draws, second.draws),
                       cat(first.heavy, second.heavy), cat(first.trace, second.trace),
                       second.n_done, second.interrupted, second.thin_heavy)

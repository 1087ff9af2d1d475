"""The one loop over sweeps and chains (STYLE.md 1): :func:`run_chains`.

A sampler supplies ``sweep(key, state) -> state`` for ONE chain (a Gibbs sweep, any
composition of kernels).  The driver

* runs the chains one per device, ``d`` at a time (one CPU device per core, see
  :mod:`._devices`; the chains of one device one after the other with ``lax.map``, or all of
  them under ``vmap`` with ``vectorize=True``, see :mod:`._block` for why that is not the
  default), over a *block* of sweeps compiled once, ahead of time, as its own phase of the
  progress bar (timed, logged, printed with the bar): every block, whatever its length up to
  ``block_size``, is run in calls of the same compiled program (a ``while_loop`` over the
  call's sweeps): the first call is one sweep, later ones about :data:`CALL_SECONDS` of work,
  so the bar moves every two seconds or so however slow the sweep;
* derives the key of sweep ``i`` (0-based, counted from the start of the chain) as
  ``fold_in(fold_in(key, i), c)`` for chain c (``split(fold_in(key, i), C)[c]`` under JAX's
  default partitionable Threefry), so the draws depend on the key only — not on
  ``block_size``, not on interruptions and resumptions (``start``), not on the number of
  devices (every device runs the same one-chain program);
* keeps ``record(state)`` every ``thin`` sweeps after ``burn_in``, ``record_heavy(state)``
  every ``thin_heavy`` sweeps after ``burn_in`` (by default at most 200 heavy draws), and
  ``trace(state)`` after every sweep, burn-in included.  Kept draws go into a per-block device
  buffer sized for one block, then into preallocated host (NumPy) arrays: device memory is
  bounded by one block, host memory by the result;
* shows a tqdm bar (stderr) with the chain-mean of the trace, and on Ctrl-C
  (``KeyboardInterrupt``) returns everything finished so far with ``interrupted=True``.

Sweep numbering: sweep ``i`` (0-based) produces the state after ``s = i + 1`` sweeps; that state
is kept when ``s > burn_in`` and ``(s - burn_in) % thin == 0``.
"""

from __future__ import annotations

import logging
import math
import sys
import time
import warnings
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from gplvm._pytree import to_device
from gplvm.inference.mcmc._block import compiled_block
from gplvm.inference.mcmc._devices import (chain_index, gather, placement, replicated,
                                           row_placement, split_rounds, valid)
from gplvm.inference.mcmc._kept import ChainResult, Counts, Kept, n_kept

MAX_HEAVY_DRAWS = 200
# Each call of a compiled program pays for its allocations (the RFLVM's congress109 sweep has
# 92 MB of temporaries, ~80 ms of page faults on a loaded machine): 2 s calls keep that within
# a few per cent while the bar moves.
CALL_SECONDS = 2.0
BAR_FORMAT = ("{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total_fmt} "
              "[{elapsed}<{remaining}{postfix}]")  # n is fractional between rounds
logger = logging.getLogger("gplvm")


def default_thin_heavy(n_iter: int, burn_in: int, thin: int) -> int:
    """A multiple of ``thin`` keeping at most :data:`MAX_HEAVY_DRAWS` heavy draws (so every
    heavy draw is also a light draw)."""
    return thin * max(1, math.ceil(n_kept(n_iter, burn_in, thin) / MAX_HEAVY_DRAWS))


def _strong(tree):
    """Device arrays with strong dtypes (a weakly typed loop carry would not match the sweep's
    output), host arrays copied over without a conversion program (:func:`to_device`)."""
    return to_device(tree)


def _check_state(init_state) -> int:
    """The number of chains; whether the sweep returns a state like the one it receives is
    checked when the block is traced (:func:`._block.check_sweep_output`), so that the sweep
    is traced once."""
    leaves = jax.tree_util.tree_leaves(init_state)
    if not leaves or any(jnp.ndim(x) == 0 for x in leaves):
        raise ValueError("init_state must be a pytree of arrays with a leading chain axis "
                         "(stack one state per chain, e.g. with jax.vmap(init)(keys))")
    sizes = {int(jnp.shape(x)[0]) for x in leaves}
    if len(sizes) != 1:
        raise ValueError(f"the leaves of init_state have different leading (chain) sizes "
                         f"{sorted(sizes)}; every leaf needs one entry per chain")
    return sizes.pop()


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


def _postfix(traced, n: int) -> dict:
    """Chain means of the scalar traces after sweep ``n`` of this run, for the progress bar;
    a NaN one (a diagnostic the sweep did not measure, e.g. proposals in a MAP sweep) is left
    out."""
    if isinstance(traced, dict):
        items = list(traced.items())
    else:
        items = [(f"trace{k}" if k else "trace", v)
                 for k, v in enumerate(jax.tree_util.tree_leaves(traced))]
    means = {str(name): float(np.mean(v[:, n - 1])) for name, v in items[:3] if np.ndim(v) == 2}
    return {name: f"{mean:.6g}" for name, mean in means.items() if not np.isnan(mean)}


def _next_length(n: int, seconds: float, done: int, block_size: int) -> int:
    """Sweeps in the next call of the compiled block, ``done`` sweeps into the run: about
    :data:`CALL_SECONDS` of work at the pace of the last call (``n`` sweeps in ``seconds``), at
    most ``block_size``, never across a multiple of ``block_size`` (so that the blocks of
    ``block_size`` sweeps, after which callbacks run, end as they would without splitting)."""
    pace = seconds / max(n, 1)
    want = int(CALL_SECONDS / pace) if pace > 0 else block_size
    return max(1, min(want, block_size - done % block_size))


def run_chains(key, init_state, sweep: Callable, *, n_iter: int, burn_in: int = 0,
               thin: int = 1, record: Optional[Callable] = None,
               record_heavy: Optional[Callable] = None, thin_heavy: Optional[int] = None,
               trace: Optional[Callable] = None, block_size: Optional[int] = None,
               progress: bool = True, desc: str = "MCMC",
               stage: Optional[Callable[[int], str]] = None, start: int = 0,
               callback: Optional[Callable[[int, Any], None]] = None,
               on_block: Optional[Callable[["ChainResult"], None]] = None,
               vectorize: bool = False, timings: Optional[dict] = None,
               export_key: Optional[str] = None, row_mesh=None,
               n_rows: Optional[int] = None) -> ChainResult:
    """Run C chains of ``sweep`` for ``n_iter`` sweeps each.

    Args:
        key: a ``jax.random`` key; the same key gives the same chains whatever ``block_size``
            and whatever the number of devices (cores).
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
        block_size: sweeps per block (``callback`` and ``on_block`` run after each);
            defaults to ``ceil(n_iter / 50)`` capped at 100.  A block is run in one or more
            calls of one compiled program (one host copy each): the first call is one sweep,
            later ones about :data:`CALL_SECONDS` of work, so the bar moves every two seconds
            or so however slow the sweep.
        progress: show a tqdm bar on stderr (compilation as its own phase, then sweeps) and
            print the compile time and the devices used.
        desc: the bar's label.
        stage: ``stage(done)`` is added to the label while the sweeps after the first ``done``
            run (the RFLVM's ``'MAP'`` during its uphill warm-up sweeps); '' adds nothing.
        start: sweeps already done, to resume a run from ``ChainResult.state``: running
            ``[0, k)`` and then ``[k, n_iter)`` with ``start=k`` gives the same chains as one
            run (join the two results with :func:`concat_results`).
        callback: ``callback(n_done, state)`` after each block (and after the last, partial
            one), on the host (checkpointing);
            a ``KeyboardInterrupt`` raised there stops the run like Ctrl-C.
        on_block: ``on_block(partial)`` after each block with the :class:`ChainResult` of the
            sweeps done so far (its arrays are views of buffers the run keeps filling: copy
            or write them out before returning), for checkpoints to a file.
        vectorize: ``vmap`` the sweep over chains on one device instead of running them one
            per device (only for tiny sweeps: under ``vmap`` data-dependent branches compute
            both sides and loops wait for the slowest chain).  Both give the same chains up to
            rounding.
        timings: a dict to receive ``compile_s`` (tracing, lowering and compiling the block;
            0 when reused), ``sweep_s`` (wall seconds per sweep of all chains, compilation
            excluded), ``calls`` (sweeps, wall and process CPU seconds of each call of the block),
            ``devices`` and ``rounds`` (see :mod:`._devices`).
        export_key: a string that identifies ``sweep``, ``record``, ``record_heavy`` and
            ``trace`` completely and is the same in every process (e.g. the repr of a static
            model description; the code itself is covered by a digest of gplvm's source).
            With it, and the persistent compilation cache on, the compiled block is kept as an
            exported file that later processes load instead of tracing the sweep
            (:mod:`._exported`).  Leave it None for sweeps defined outside gplvm or closing
            over values the string does not name.
        row_mesh: a :class:`jax.sharding.Mesh` to split each chain over by rows (data sets too
            big for one device): the chains then run one after the other, and every leaf of a
            chain's state whose leading axis has ``n_rows`` entries (the data, the latents) is
            laid out by rows over the mesh's devices, the sweep's computation split by XLA
            (:mod:`._devices`).  The chains equal those of one device up to the order of the
            additions over rows.  None (default): one chain per device.
        n_rows: the number of rows (needed with ``row_mesh``).

    Returns:
        :class:`ChainResult`.  On Ctrl-C, every finished block is kept, with a warning.
    """
    _check_counts(n_iter, burn_in, thin, thin_heavy, start)
    init_state = _strong(init_state)
    n_chains = _check_state(init_state)
    if record_heavy is not None and thin_heavy is None:
        thin_heavy = default_thin_heavy(n_iter, burn_in, thin)
    counts = Counts(n_iter, burn_in, thin, thin_heavy or 1, start)
    block_size = int(block_size or min(100, math.ceil(n_iter / 50)))
    if row_mesh is not None:
        if vectorize:
            raise ValueError("vectorize=True runs every chain on one device; it cannot be "
                             "combined with row_mesh, which splits each chain over several")
        place = row_placement(n_chains, row_mesh, int(n_rows or 0))
    else:
        place = placement(n_chains, bool(vectorize))
    block = compiled_block(sweep, place, record, record_heavy, trace, block_size,
                           math.ceil(block_size / thin), math.ceil(block_size / counts.thin_heavy),
                           bool(vectorize), export_key)
    kept = Kept(record, record_heavy, trace, init_state, counts)
    run = _Run(place, key, init_state, counts)
    bar = tqdm(total=n_iter - start, desc=desc, disable=not progress, leave=False,
               dynamic_ncols=True, bar_format=BAR_FORMAT)
    try:
        if start < n_iter:
            run.compile(block, bar, desc, progress)
        n = 1
        while run.done < n_iter:
            if stage is not None:
                bar.set_description_str(f"{desc} {stage(run.done)}".rstrip(), refresh=False)
            seconds, n = run.call(min(n, n_iter - run.done), kept, bar)   # all rounds
            if trace is not None:
                bar.set_postfix(_postfix(kept.traced, run.done - start), refresh=False)
            if (run.done - start) % block_size == 0 or run.done == n_iter:  # a block ends
                if callback is not None:
                    callback(run.done, run.state())
                if on_block is not None:
                    on_block(kept.result(run.state(), run.done, run.done < n_iter))
            n = _next_length(n, seconds / place.rounds, run.done - start, block_size)
    except KeyboardInterrupt:
        warnings.warn(f"{desc}: interrupted after {run.done} of {n_iter} sweeps; keeping the "
                      f"draws made so far", RuntimeWarning, stacklevel=2)
    finally:
        bar.close()
    if timings is not None:
        timings.update(run.timings())
    return kept.result(run.state(), run.done, run.done < n_iter)


class _Run:
    """The chains' state, as one placed pytree per round, and the calls of the compiled block
    that advance it (:mod:`._devices`)."""

    def __init__(self, place, key, init_state, counts):
        self.place, self.done, self.start = place, counts.start, counts.start
        self.states, self.chains = split_rounds(place, init_state), chain_index(place)
        self.key = replicated(place, key)
        self.consts = [self.scalar(v) for v in (counts.burn_in, counts.thin, counts.thin_heavy)]
        self.program, self.compile_s, self.calls = None, 0.0, []

    def scalar(self, v):
        return replicated(self.place, np.int32(v))

    def compile(self, block, bar, desc, progress):
        """Compile the block as its own phase of the bar; log (and with a bar, print) it."""
        bar.set_description_str(f"{desc} (compiling)")
        bar.refresh()
        self.program, self.compile_s = block.compile(
            self.key, self.states[0], self.chains[0], self.scalar(0), self.scalar(1),
            *self.consts)
        bar.set_description_str(desc)
        msg = (f"{desc}: compiled in {self.compile_s:.1f} s" if self.compile_s > 0 else
               f"{desc}: compiled program reused") + f"; {self.place.describe()}"
        logger.info(msg)
        if progress:
            tqdm.write(msg, file=sys.stderr)

    def call(self, n: int, kept, bar):
        """``n`` sweeps of every chain (every round); the seconds they took and ``n``."""
        tick, cpu = time.perf_counter(), time.process_time()
        first, length = self.scalar(self.done), self.scalar(n)
        outs = [self.program(self.key, state, chains, first, length, *self.consts)
                for state, chains in zip(self.states, self.chains)]
        for r, out in enumerate(outs):
            kept.copy(out[1:], r * self.place.per_call, valid(self.place, r), self.done, n)
            bar.update(n / self.place.rounds)
        # the state moves only once every round is done: Ctrl-C between rounds keeps none
        self.states, self.done = [out[0] for out in outs], self.done + n
        seconds = time.perf_counter() - tick
        self.calls.append((n, seconds, time.process_time() - cpu))
        return seconds, n

    def state(self):
        return gather(self.place, self.states)

    def timings(self) -> dict:
        run_s = sum(call[1] for call in self.calls)
        return dict(compile_s=self.compile_s, sweep_s=run_s / max(self.done - self.start, 1),
                    calls=list(self.calls), devices=self.place.mesh.size,
                    rounds=self.place.rounds)


def concat_results(first: ChainResult, second: ChainResult) -> ChainResult:
    """Join a run and its resumption (``start=first.n_done``) into one result."""
    def cat(a, b):
        if a is None or b is None:
            return b if a is None else a
        return jax.tree_util.tree_map(lambda x, y: np.concatenate([x, y], axis=1), a, b)

    return ChainResult(second.state, cat(first.draws, second.draws),
                       cat(first.heavy, second.heavy), cat(first.trace, second.trace),
                       second.n_done, second.interrupted, second.thin_heavy)

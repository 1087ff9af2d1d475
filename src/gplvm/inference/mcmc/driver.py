"""The one loop over sweeps and chains (STYLE.md 1): :func:`run_chains`.

A sampler supplies ``sweep(key, state) -> state`` for ONE chain (a Gibbs sweep, any
composition of kernels).  The driver

* runs the chains one per device, ``d`` at a time (one CPU device per core, see
  :mod:`._devices`; the chains of one device one after the other with ``lax.map``, or all of
  them under ``vmap`` with ``vectorize=True``, see :mod:`._block` for why that is not the
  default), over a *block* of sweeps compiled once, ahead of time, as its own phase of the
  progress bar (timed, logged, printed with the bar): every block, whatever its length up to
  ``block_size``, is run in calls of the same compiled program (a ``while_loop`` over the
  call's sweeps): the first call is one sweep, later ones about two seconds of work
  (:data:`._calls.CALL_SECONDS`), so the bar moves that often however slow the sweep;
* makes each call (over all rounds of chains) one step of the one run loop,
  :func:`gplvm.inference.run.run` (:mod:`._calls`), which owns the Ctrl-C rule (a call
  interrupted is discarded; its draws are copied to the host and the chains moved on all
  together or not at all) and asks the checkpoint timer at the end of each block;
* derives the key of sweep ``i`` (0-based, counted from the start of the chain) as
  ``fold_in(fold_in(key, i), c)`` for chain c (``split(fold_in(key, i), C)[c]`` under JAX's
  default partitionable Threefry), so the draws depend on the key only — not on
  ``block_size``, not on the calls' lengths, not on interruptions and resumptions
  (``start``), not on the number of devices (every device runs the same one-chain program);
* keeps ``record(state)`` every ``thin`` sweeps after ``burn_in``, ``record_heavy(state)``
  every ``thin_heavy`` sweeps after ``burn_in`` (by default at most 200 heavy draws), and
  ``trace(state)`` after every sweep, burn-in included.  Kept draws go into a per-block device
  buffer sized for one block, then into preallocated host (NumPy) arrays: device memory is
  bounded by one block, host memory by the result;
* shows a tqdm bar (stderr, :class:`gplvm.inference.run.Progress`) with the chain-mean of the
  trace, and on Ctrl-C (``KeyboardInterrupt``) returns everything finished so far with
  ``interrupted=True``.

Sweep numbering: sweep ``i`` (0-based) produces the state after ``s = i + 1`` sweeps; that state
is kept when ``s > burn_in`` and ``(s - burn_in) % thin == 0``.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gplvm._pytree import to_device
from gplvm.inference.mcmc._block import BlockShape, compiled_block
from gplvm.inference.mcmc._calls import Calls
from gplvm.inference.mcmc._devices import placement, row_placement
from gplvm.inference.mcmc._kept import ChainResult, Keep, Kept, Sweeps, n_kept
from gplvm.inference.run import CheckpointTimer, Hooks, run

MAX_HEAVY_DRAWS = 200


class Execution(NamedTuple):
    """How :func:`run_chains` compiles the sweeps, where it runs the chains and when it stops
    early.

    Attributes:
        block_size: sweeps per block (a checkpoint may be written after each); defaults to
            ``ceil(n_iter / 50)`` capped at 100.  A block is run in one or more calls of one
            compiled program (one host copy each): the first call is one sweep, later ones
            about :data:`._calls.CALL_SECONDS` of work, so the bar moves every two seconds or so
            however slow the sweep.
        vectorize: ``vmap`` the sweep over chains on one device instead of running them one
            per device (only for tiny sweeps: under ``vmap`` data-dependent branches compute
            both sides and loops wait for the slowest chain).  Both give the same chains up to
            rounding.
        row_mesh: a :class:`jax.sharding.Mesh` to split each chain over by rows (data sets too
            big for one device): the chains then run one after the other, and every leaf of a
            chain's state whose leading axis has ``n_rows`` entries (the data, the latents) is
            laid out by rows over the mesh's devices, the sweep's computation split by XLA
            (:mod:`._devices`).  The chains equal those of one device up to the order of the
            additions over rows.  None (default): one chain per device.
        n_rows: the number of rows (needed with ``row_mesh``).
        deadline: a ``time.perf_counter()`` value, or None: the run stops after the first call
            of the block that ends past it (about :data:`._calls.CALL_SECONDS` of sweeps per
            round of chains; the first call is one sweep), keeping every finished call as
            Ctrl-C does but without a warning and with ``interrupted=False``; ``n_done`` says
            how far it got, and a run resumed from there (``start=n_done``) gives the chains
            an unstopped run gives.
        export_key: a string that identifies ``sweep`` and the :class:`Keep` functions
            completely and is the same in every process (e.g. the repr of a static model
            description; the code itself is covered by a digest of gplvm's source).  With it,
            and the persistent compilation cache on, the compiled block is kept as an exported
            file that later processes load instead of tracing the sweep (:mod:`._exported`).
            Leave it None for sweeps defined outside gplvm or closing over values the string
            does not name.
    """

    block_size: Optional[int] = None
    vectorize: bool = False
    row_mesh: Any = None
    n_rows: Optional[int] = None
    export_key: Optional[str] = None
    deadline: Optional[float] = None


class Report(NamedTuple):
    """How :func:`run_chains` reports on itself.

    Attributes:
        progress: show a tqdm bar on stderr (compilation as its own phase, then sweeps) and
            print the compile time and the devices used.
        desc: the bar's label.
        stage: ``stage(done)`` is added to the label while the sweeps after the first ``done``
            run (the RFLVM's ``'MAP'`` during its uphill warm-up sweeps); '' adds nothing.
        timings: a dict to receive ``compile_s`` (tracing, lowering and compiling the block;
            0 when reused), ``sweep_s`` (wall seconds per sweep of all chains, compilation
            excluded), ``calls`` (sweeps, wall and process CPU seconds of each call of the
            block), ``devices`` and ``rounds`` (see :mod:`._devices`).
    """

    progress: bool = True
    desc: str = "MCMC"
    stage: Optional[Callable[[int], str]] = None
    timings: Optional[dict] = None


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


def _checked(sweeps: Sweeps, keep: Keep) -> Sweeps:
    """``sweeps`` checked, with its default ``thin_heavy`` set (1 without ``record_heavy``)."""
    n_iter, burn_in, thin, thin_heavy, start = sweeps
    if n_iter < 1 or not 0 <= burn_in < n_iter:
        raise ValueError(f"need 0 <= burn_in < n_iter (n_iter counts every sweep, burn-in "
                         f"included); got n_iter={n_iter}, burn_in={burn_in}")
    if thin < 1 or (thin_heavy is not None and thin_heavy < 1):
        raise ValueError(f"thin and thin_heavy must be positive integers; got thin={thin}, "
                         f"thin_heavy={thin_heavy}")
    if not 0 <= start <= n_iter:
        raise ValueError(f"start={start} must lie in [0, n_iter={n_iter}]: it is the number of "
                         f"sweeps already done (ChainResult.n_done of the run to resume)")
    if keep.record_heavy is not None and thin_heavy is None:
        thin_heavy = default_thin_heavy(n_iter, burn_in, thin)
    return sweeps._replace(thin_heavy=thin_heavy or 1)


def run_chains(key, init_state, sweep: Callable, sweeps: Sweeps, keep: Keep = Keep(), *,
               execution: Execution = Execution(), report: Report = Report(),
               checkpoint: Optional[CheckpointTimer] = None) -> ChainResult:
    """Run C chains of ``sweep`` for ``sweeps.n_iter`` sweeps each.

    What a run takes comes in groups: the sweeps' counts (:class:`Sweeps`: ``n_iter``,
    ``burn_in``, ``thin``, ``thin_heavy``, ``start``), what is kept of each state
    (:class:`Keep`: ``record``, ``record_heavy``, ``trace``), how the sweeps are compiled and
    placed and when it stops early (:class:`Execution`: ``block_size``, ``vectorize``,
    ``row_mesh``, ``n_rows``, ``export_key``, ``deadline``) and how the run reports on itself
    (:class:`Report`: ``progress``,
    ``desc``, ``stage``, ``timings``).

    Args:
        key: a ``jax.random`` key; the same key gives the same chains whatever ``block_size``
            and whatever the number of devices (cores).
        init_state: a pytree with a leading chain axis C (one state per chain).
        sweep: ``sweep(key, state) -> state`` for one chain (no chain axis), jit-able.  Pass a
            module-level function or one kept alive across runs: the compiled block is cached
            per ``sweep`` object.
        sweeps: :class:`Sweeps`, e.g. ``Sweeps(2000, burn_in=1000)`` (the paper's run).
        keep: :class:`Keep`; nothing by default (the final state only).
        execution: :class:`Execution`.
        report: :class:`Report`.
        checkpoint: a :class:`gplvm.inference.run.CheckpointTimer` asked at the end of each
            block (every ``block_size`` sweeps of this run, and after the last one): when a
            write is due its ``write`` receives the :class:`ChainResult` of the sweeps done so
            far (its arrays are views of buffers the run keeps filling: copy or write them out
            before returning).  A ``KeyboardInterrupt`` raised there stops the run like Ctrl-C.
    Returns:
        :class:`ChainResult`.  On Ctrl-C, every finished call of the block is kept, with a
        warning.
    """
    sweeps = _checked(sweeps, keep)
    init_state = _strong(init_state)
    place = _placement(execution, _check_state(init_state))
    block_size = int(execution.block_size or min(100, math.ceil(sweeps.n_iter / 50)))
    shape = BlockShape(block_size, math.ceil(block_size / sweeps.thin),
                       math.ceil(block_size / sweeps.thin_heavy), bool(execution.vectorize))
    block = compiled_block(sweep, place, keep, shape, execution.export_key)
    calls = Calls(block, place, key, sweeps, Kept(keep, init_state, sweeps), report,
                   block_size)
    try:
        ran = run(calls.step, calls.initial(init_state), sweeps.n_iter - sweeps.start,
                  hooks=Hooks(checkpoint=calls.at_block_ends(checkpoint),
                              stop=_stop_by(calls.finished, execution.deadline),
                              commit=calls.commit))
    finally:
        calls.bar.close()
    if ran.interrupted:
        warnings.warn(f"{report.desc}: interrupted after {ran.state.done} of {sweeps.n_iter} "
                      f"sweeps; keeping the draws made so far", RuntimeWarning, stacklevel=2)
    if report.timings is not None:
        report.timings.update(calls.timings(ran))
    result = calls.result(ran.state)
    if not ran.interrupted:         # stopped by the deadline, or done: not an interruption
        result = result._replace(interrupted=False)
    return result


def _stop_by(finished: Callable, deadline: Optional[float]) -> Callable:
    """run()'s stopping test: all sweeps done, or ``deadline`` passed (:class:`Execution`)."""
    if deadline is None:
        return finished
    return lambda chains, info: finished(chains, info) or time.perf_counter() > deadline


def _placement(execution: Execution, n_chains: int):
    if execution.row_mesh is None:
        return placement(n_chains, bool(execution.vectorize))
    if execution.vectorize:
        raise ValueError("vectorize=True runs every chain on one device; it cannot be "
                         "combined with row_mesh, which splits each chain over several")
    return row_placement(n_chains, execution.row_mesh, int(execution.n_rows or 0))


def concat_results(first: ChainResult, second: ChainResult) -> ChainResult:
    """Join a run and its resumption (``start=first.n_done``) into one result."""
    def cat(a, b):
        if a is None or b is None:
            return b if a is None else a
        return jax.tree_util.tree_map(lambda x, y: np.concatenate([x, y], axis=1), a, b)

    return ChainResult(second.state, cat(first.draws, second.draws),
                       cat(first.heavy, second.heavy), cat(first.trace, second.trace),
                       second.n_done, second.interrupted, second.thin_heavy)

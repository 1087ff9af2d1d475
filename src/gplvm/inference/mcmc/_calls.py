"""The calls of the compiled block as the steps of the one run loop
(:func:`gplvm.inference.run.run`): what :func:`~gplvm.inference.mcmc.run_chains` runs.

A step is one call of the compiled block (:mod:`._block`) over every round of chains
(:mod:`._devices`): ``length`` sweeps, one at first, then about :data:`CALL_SECONDS` of work,
never across the end of a block.  The step computes and brings the call's kept draws to the
host; the commit (with Ctrl-C held back) copies them into the run's host arrays (:mod:`._kept`)
and moves the chains on, so a call interrupted by Ctrl-C is discarded whole.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TYPE_CHECKING, NamedTuple, Optional

import jax
import numpy as np
from tqdm.auto import tqdm

from gplvm.inference.mcmc._devices import chain_index, gather, replicated, split_rounds, valid
from gplvm.inference.mcmc._kept import ChainResult, Kept, Sweeps
from gplvm.inference.run import CheckpointTimer, Progress, RunResult

if TYPE_CHECKING:
    from gplvm.inference.mcmc.driver import Report

# Each call of a compiled program pays for its allocations (the RFLVM's congress109 sweep has
# 92 MB of temporaries, ~80 ms of page faults on a loaded machine): 2 s calls keep that within
# a few per cent while the bar moves.
CALL_SECONDS = 2.0
# n is fractional between rounds; {l_bar} is "{desc}: {percentage:3.0f}%|" whether or not
# the description already ends in ": " (Progress sets it with one after compiling)
BAR_FORMAT = "{l_bar}{bar}| {n:.0f}/{total_fmt} [{elapsed}<{remaining}{postfix}]"
logger = logging.getLogger("gplvm")


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
    ``block_size`` sweeps, after which the checkpoint timer is asked, end as they would
    without splitting)."""
    pace = seconds / max(n, 1)
    want = int(CALL_SECONDS / pace) if pace > 0 else block_size
    return max(1, min(want, block_size - done % block_size))


class _Chains(NamedTuple):
    """The state :func:`~gplvm.inference.run.run` carries: the chains as one placed pytree per
    round (:mod:`._devices`), the sweeps done from the start of the chain, and the sweeps of
    the next call."""

    rounds: list
    done: int
    length: int


class _Call(NamedTuple):
    """What a call made: the chains after it (per round), each round's buffers of kept draws
    (host copies), its sweeps and wall seconds."""

    rounds: list
    buffers: list
    n: int
    seconds: float


class Calls:
    """The calls of the compiled block as steps of :func:`~gplvm.inference.run.run`.

    A step is one call over all rounds, of ``length`` sweeps; its ``key`` is unused: the block
    derives sweep i's key from the run's key itself, so calls of any length give the same
    chains.  The bar counts sweeps and moves as each round ends, so the driver advances it,
    not :func:`~gplvm.inference.run.run` (which counts steps).
    """

    def __init__(self, block, place, key, sweeps: Sweeps, kept: Kept, report: Report,
                 block_size: int):
        self.block, self.place, self.sweeps, self.kept = block, place, sweeps, kept
        self.report, self.block_size = report, block_size
        self.chains, self.key = chain_index(place), replicated(place, key)
        self.consts = [self.scalar(v) for v in (sweeps.burn_in, sweeps.thin, sweeps.thin_heavy)]
        self.program, self.compile_s = None, 0.0
        self.bar = Progress(sweeps.n_iter - sweeps.start, report.desc, report.progress,
                            bar_format=BAR_FORMAT)

    def scalar(self, v):
        return replicated(self.place, np.int32(v))

    def initial(self, init_state) -> _Chains:
        """The chains before the run: the first call is one sweep."""
        return _Chains(split_rounds(self.place, init_state), self.sweeps.start, 1)

    def compile(self, state) -> None:
        """Compile the block as its own phase of the bar; log (and with a bar, print) it."""
        with self.bar.compiling():
            self.program, self.compile_s = self.block.compile(
                self.key, state, self.chains[0], self.scalar(0), self.scalar(1), *self.consts)
        desc = self.report.desc
        msg = (f"{desc}: compiled in {self.compile_s:.1f} s" if self.compile_s > 0 else
               f"{desc}: compiled program reused") + f"; {self.place.describe()}"
        logger.info(msg)
        if self.report.progress:
            tqdm.write(msg, file=sys.stderr)

    def step(self, key, chains: _Chains):
        """``chains.length`` sweeps of every chain (every round, the bar moving as each ends);
        the :class:`_Call` and its info ``(sweeps, wall s, process CPU s)``."""
        if self.program is None:
            self.compile(chains.rounds[0])
        if self.report.stage is not None:
            label = f"{self.report.desc} {self.report.stage(chains.done)}".rstrip()
            self.bar.bar.set_description_str(label, refresh=False)
        n = min(chains.length, self.sweeps.n_iter - chains.done)
        tick, cpu = time.perf_counter(), time.process_time()
        first, length = self.scalar(chains.done), self.scalar(n)
        outs = [self.program(self.key, state, index, first, length, *self.consts)
                for state, index in zip(chains.rounds, self.chains)]
        buffers = []
        for out in outs:
            buffers.append(jax.device_get(out[1:]))
            self.bar.advance(n / self.place.rounds)
        seconds = time.perf_counter() - tick
        info = (n, seconds, time.process_time() - cpu)
        return _Call([out[0] for out in outs], buffers, n, seconds), info

    def commit(self, chains: _Chains, call: _Call) -> _Chains:
        """The call's draws into the host arrays, and the chains moved on (run() holds Ctrl-C
        back meanwhile: both happen or neither)."""
        for r, buffers in enumerate(call.buffers):
            self.kept.copy(buffers, r * self.place.per_call, valid(self.place, r), chains.done,
                           call.n)
        done = chains.done + call.n
        if self.kept.traced is not None:   # the bar moved in the step; now its postfix
            self.bar.advance(0, _postfix(self.kept.traced, done - self.sweeps.start))
        length = _next_length(call.n, call.seconds / self.place.rounds,
                              done - self.sweeps.start, self.block_size)
        return _Chains(call.rounds, done, length)

    def finished(self, chains: _Chains, info) -> bool:
        return chains.done >= self.sweeps.n_iter

    def at_block_ends(self, checkpoint: Optional[CheckpointTimer]):
        """run()'s checkpoint: asked after every call (interval 0), it asks ``checkpoint`` at
        the end of each block with the partial :class:`ChainResult`, built only when a write
        is due."""
        if checkpoint is None:
            return None

        def at_block_end(chains: _Chains):
            ran = chains.done - self.sweeps.start
            if ran % self.block_size == 0 or chains.done == self.sweeps.n_iter:
                checkpoint.after_step(lambda: self.result(chains))

        return CheckpointTimer(at_block_end, 0)

    def result(self, chains: _Chains) -> ChainResult:
        done = chains.done
        return self.kept.result(gather(self.place, chains.rounds), done,
                                done < self.sweeps.n_iter)

    def timings(self, ran: RunResult) -> dict:
        run_s = sum(call[1] for call in ran.infos)
        return dict(compile_s=self.compile_s,
                    sweep_s=run_s / max(ran.state.done - self.sweeps.start, 1),
                    calls=list(ran.infos), devices=self.place.mesh.size,
                    rounds=self.place.rounds)

"""Where the chains of :func:`~gplvm.inference.mcmc.run_chains` run: one chain per device.

XLA runs the programs of ONE device one after the other (the CPU client makes each execution
wait for the previous one on that device), so chains dispatched from several Python threads to
one device do not overlap.  A program sharded over several devices does: the CPU client runs
each device's part on its own thread.  ``gplvm`` therefore asks JAX for one CPU device per core
(:mod:`gplvm._config`), and the driver runs the chains ``d`` at a time, one per device
(``shard_map`` over a mesh of ``d`` devices), in ``ceil(C / d)`` *rounds* per block; the last
round is padded with copies of the last chain, whose results are dropped.

Each device runs exactly one chain, so the program a chain runs is the same whatever the number
of devices: the same ``random_state`` gives the same chains, bit for bit, on 1 core or 16.
With ``vectorize=True`` all chains run on one device under ``vmap`` (one round).

With a *row mesh* (:func:`row_placement`, issue 18: data sets too big for one device) it is the
other way round: the chains run one after the other, and each chain's sweep is split over every
device of the mesh by the rows of its data — every state leaf whose leading (per-chain) axis
has ``n_rows`` entries is laid out by rows (:mod:`._block`), and XLA's SPMD partitioner splits
the computation that follows (the row-wise X update, the column-wise β update's N × D products,
the likelihood sums), adding the collectives it needs.  The random numbers do not depend on the
layout (JAX's partitionable Threefry), so the chains are those of one device up to the order
of the additions in the sums over rows.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXIS = "chains"


class Placement(NamedTuple):
    """How C chains are laid out: ``rounds`` calls of ``per_call`` chains, ``per_device`` of
    them on each device of ``mesh``; or, with ``n_rows`` > 0 (a row mesh), every chain in one
    call, one after the other, each split by its ``n_rows`` rows over all of ``mesh``."""

    mesh: Mesh
    n_chains: int
    per_device: int
    rounds: int
    n_rows: int = 0

    @property
    def per_call(self) -> int:
        return self.n_chains if self.n_rows else self.per_device * self.mesh.size

    def describe(self) -> str:
        d = self.mesh.size
        kind = self.mesh.devices.flat[0].platform.upper()
        if self.n_rows:
            return (f"{self.n_chains} chain{'s' * (self.n_chains > 1)} one after the other, "
                    f"the {self.n_rows} rows of each split over {d} {kind} "
                    f"device{'s' * (d > 1)}")
        where = (f"{self.n_chains} chains vectorised on one {kind} device" if self.per_device > 1
                 else f"{self.n_chains} chain{'s' * (self.n_chains > 1)} on {d} {kind} "
                      f"device{'s' * (d > 1)} ({d} at a time, {self.rounds} "
                      f"round{'s' * (self.rounds > 1)} per block)")
        return where


def chain_devices() -> list:
    """The devices chains may use: the default backend's local devices."""
    return list(jax.local_devices())


def placement(n_chains: int, vectorize: bool = False) -> Placement:
    """One chain per device, as many devices as there are chains (or ``vectorize``: every chain
    on the first device)."""
    devices = chain_devices()
    d = 1 if vectorize else min(len(devices), n_chains)
    per_device = n_chains if vectorize else 1
    mesh = Mesh(np.array(devices[:d]), (AXIS,))
    return Placement(mesh, n_chains, per_device, math.ceil(n_chains / (d * per_device)))


def row_placement(n_chains: int, mesh: Mesh, n_rows: int) -> Placement:
    """Every chain in one call, each chain's ``n_rows`` rows split over the devices of
    ``mesh`` (all of its axes)."""
    if n_rows < 1:
        raise ValueError(f"a row mesh needs the number of rows (n_rows >= 1); got {n_rows}")
    return Placement(mesh, n_chains, n_chains, 1, int(n_rows))


def _sharded(p: Placement) -> NamedSharding:
    """The layout of the driver's arrays: by chains over the devices, or (row mesh) a copy on
    each device, the block laying out the rows itself."""
    return NamedSharding(p.mesh, PartitionSpec() if p.n_rows else PartitionSpec(AXIS))


def replicated(p: Placement, x) -> jax.Array:
    """``x`` on every device of the mesh (the scalars of a block call)."""
    return jax.device_put(x, NamedSharding(p.mesh, PartitionSpec()))


def round_chains(p: Placement, r: int) -> np.ndarray:
    """Global chain indices of round ``r``, the padding repeating the last chain."""
    idx = np.arange(r * p.per_call, (r + 1) * p.per_call)
    return np.minimum(idx, p.n_chains - 1).astype(np.int32)


def split_rounds(p: Placement, state) -> list:
    """``state`` (leading chain axis C) as one placed pytree per round (sliced on the host:
    indexing a device array would compile a gather per leaf shape)."""
    host = jax.tree_util.tree_map(_to_host, state)
    if p.rounds == 1 and p.per_call == p.n_chains:
        # from the host: placing a device array on a mesh compiles a slicing program per
        # leaf shape (22 for the RFLVM's state), each lowered again in every new process
        return [jax.device_put(host, _sharded(p))]
    return [jax.device_put(jax.tree_util.tree_map(lambda x: x[round_chains(p, r)], host),
                           _sharded(p)) for r in range(p.rounds)]


def _to_host(x):
    """A NumPy copy of ``x``; typed key arrays stay JAX arrays (NumPy cannot hold them)."""
    return x if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else np.asarray(x)


def chain_index(p: Placement) -> list:
    """The placed chain-index arrays of every round."""
    return [jax.device_put(round_chains(p, r), _sharded(p)) for r in range(p.rounds)]


def valid(p: Placement, r: int) -> int:
    """How many chains of round ``r`` are real (not padding)."""
    return min(p.per_call, p.n_chains - r * p.per_call)


def gather(p: Placement, rounds: list) -> Any:
    """The per-round states joined into one pytree (C, ...) on one device."""
    if p.rounds == 1 and p.per_call == p.n_chains:
        return jax.device_put(rounds[0], jax.devices()[0])

    def join(*xs):
        parts = [_to_host(x)[:valid(p, r)] for r, x in enumerate(xs)]
        return jnp.asarray(np.concatenate(parts)) if isinstance(parts[0], np.ndarray) else \
            jnp.concatenate([jax.device_put(x, jax.devices()[0]) for x in parts])

    return jax.tree_util.tree_map(join, *rounds)

"""The compiled block of :func:`~gplvm.inference.mcmc.run_chains`: up to ``block_size`` sweeps of
the chains of one round (:mod:`._devices`), with kept draws written into per-block buffers.

The number of sweeps is an argument, not a constant: the loop is a ``while_loop`` over
``t < n_valid``, so one compiled program serves blocks of any length up to ``block_size`` (the
driver starts with one sweep per block and lengthens them while the progress bar keeps moving)
and no sweep past ``n_valid`` is computed.

The chains on one device run one after the other (``lax.map``) unless ``vectorize`` asks for
``vmap``.  Under ``vmap`` a data-dependent ``lax.cond`` becomes a select that computes both
branches, and every while loop (slice shrinkage, rejection sampling) runs until the slowest
chain's slowest element is done; measured on the RFLVM (issue 14, ``benchmarks/rflvm_profile.py``)
that doubled the cost of a sweep even for one chain.  One after the other, each chain pays for its
own work only; ``vmap`` pays off only for sweeps so small that per-operation overhead dominates.

Global sweep ``i`` (0-based) uses key ``fold_in(fold_in(key, i), c)`` for chain c (under JAX's
default partitionable Threefry this is ``split(fold_in(key, i), C)[c]``, the earlier scheme), so
the chains never depend on how the sweeps are cut into blocks, on which device runs them, nor on
how many chains run: the program depends on the number of devices, not of chains.

The program is compiled ahead of time (``jit(...).lower(...).compile()``, on CPU with the
options of :func:`gplvm.config.set_cpu_fusion_emitters`, none by default) so that the driver
can time compilation as its own phase; the compiled programs are kept per sweep and argument shapes.
"""

from __future__ import annotations

import time
import weakref
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from gplvm.inference.mcmc._devices import AXIS, Placement
from gplvm._config import cpu_compiler_options
from gplvm.inference.mcmc._exported import compile_exported, compile_lowered
from gplvm.inference.mcmc._kept import Keep

try:
    from jax import shard_map
    _UNCHECKED = {"check_vma": False}
except ImportError:  # JAX < 0.7
    from jax.experimental.shard_map import shard_map
    _UNCHECKED = {"check_rep": False}


class BlockShape(NamedTuple):
    """The static sizes of a compiled block.

    Attributes:
        block_size: the most sweeps one call runs (the length of the trace buffer).
        rows: rows of the ``record`` buffer (``ceil(block_size / thin)``).
        rows_heavy: rows of the ``record_heavy`` buffer (``ceil(block_size / thin_heavy)``).
        vectorize: the chains of a device under ``vmap`` instead of ``lax.map``.
    """

    block_size: int
    rows: int
    rows_heavy: int
    vectorize: bool = False


def _write(buf, rec, j):
    """Put ``rec`` (leading chain axis) in row ``j`` of ``buf``; an out-of-range ``j`` (a sweep
    that is not kept) writes nothing."""
    return jax.tree_util.tree_map(lambda b, r: b.at[:, j].set(r, mode="drop"), buf, rec)


def _alloc(fn, state, rows: int):
    """Zeros for ``rows`` outputs of ``vmap(fn)`` per chain: ``(chains, rows, ...)``."""
    if fn is None:
        return ()
    shapes = jax.eval_shape(jax.vmap(fn), state)
    return jax.tree_util.tree_map(
        lambda s: jnp.zeros((s.shape[0], rows) + s.shape[1:], s.dtype), shapes)


def _chains(sweep, vectorize: bool):
    """``(keys, states) -> states`` for a leading chain axis: ``vmap`` or ``lax.map``."""
    if vectorize:
        return jax.vmap(sweep)
    return lambda keys, state: lax.map(lambda args: sweep(*args), (keys, state))


def check_sweep_output(new, state) -> None:
    """Raise a ValueError (at trace time) unless the sweep returned a state like ``state``."""
    same = jax.tree_util.tree_structure(new) == jax.tree_util.tree_structure(state) and all(
        jnp.shape(a) == jnp.shape(b) for a, b in zip(jax.tree_util.tree_leaves(new),
                                                     jax.tree_util.tree_leaves(state)))
    if not same:
        raise ValueError("sweep(key, state) must return a state with the structure and shapes "
                         "of the state it receives (for one chain, without the chain axis)")


def _keep(fn, buf, state, j, keep, rows):
    """Write ``vmap(fn)(state)`` to row ``j`` of ``buf`` when ``keep``; the next free row."""
    if fn is None:
        return buf, j
    buf = _write(buf, jax.vmap(fn)(state), jnp.where(keep, j, rows))
    return buf, j + keep.astype(jnp.int32)


def _by_rows(tree, mesh, n_rows: int, axis: int):
    """Lay out by rows over ``mesh`` every leaf of ``tree`` whose axis ``axis`` has ``n_rows``
    entries (XLA splits the computation that follows; uneven splits are padded inside)."""
    rows = NamedSharding(mesh, PartitionSpec(*([None] * axis), tuple(mesh.axis_names)))

    def one(x):
        if jnp.ndim(x) > axis and jnp.shape(x)[axis] == n_rows:
            return jax.lax.with_sharding_constraint(x, rows)
        return x
    return jax.tree_util.tree_map(one, tree)


def _local_block(sweep_ref, keep: Keep, shape: BlockShape, row_mesh=None, n_rows=0):
    """The block on one device: ``n_valid`` sweeps of its chains from global sweep ``first``
    (with a ``row_mesh``: the block over that mesh, each chain's rows split over it).

    ``sweep_ref()`` returns the sweep; the block holds it weakly so that caching the compiled
    block under the sweep (:func:`compiled_block`) does not keep the sweep (and its data) alive.
    """
    record, record_heavy, trace = keep
    block_size, rows, rows_heavy, vectorize = shape

    def split_sweep(key, state):
        new = sweep_ref()(key, _by_rows(state, row_mesh, n_rows, 0))
        return _by_rows(new, row_mesh, n_rows, 0)

    def block(key, state, chain, first, n_valid, burn_in, thin, thin_heavy):
        vsweep = _chains(split_sweep if n_rows else sweep_ref(), vectorize)

        def body(carry):
            t, state, buf, buf_heavy, traced, j, j_heavy = carry
            sweep_key = jax.random.fold_in(key, first + t)
            keys = jax.vmap(jax.random.fold_in, (None, 0))(sweep_key, chain)
            new = vsweep(keys, state)
            check_sweep_output(new, state)
            state = jax.tree_util.tree_map(lambda n, o: n.astype(o.dtype), new, state)
            s = first + t + 1 - burn_in
            buf, j = _keep(record, buf, state, j, (s > 0) & (s % thin == 0), rows)
            buf_heavy, j_heavy = _keep(record_heavy, buf_heavy, state, j_heavy,
                                       (s > 0) & (s % thin_heavy == 0), rows_heavy)
            if trace is not None:
                traced = _write(traced, jax.vmap(trace)(state), t)
            return t + 1, state, buf, buf_heavy, traced, j, j_heavy

        zero = jnp.zeros((), jnp.int32)
        if n_rows:  # the carried states keep the row layout from one sweep to the next
            state = _by_rows(state, row_mesh, n_rows, 1)
        init = (zero, state, _alloc(record, state, rows),
                _alloc(record_heavy, state, rows_heavy), _alloc(trace, state, block_size),
                zero, zero)
        _, state, buf, buf_heavy, traced, _, _ = lax.while_loop(
            lambda c: c[0] < n_valid, body, init)
        return state, buf, buf_heavy, traced

    return block


def _make_block(sweep_ref, mesh, keep: Keep, shape: BlockShape, n_rows=0):
    """The jitted block over the devices of ``mesh``: each device runs its chains; with
    ``n_rows`` (a row mesh) the devices run every chain together, split by rows, from and to
    a copy of the arrays on each device."""
    if n_rows:
        local = _local_block(sweep_ref, keep, shape, mesh, n_rows)
        copy = NamedSharding(mesh, PartitionSpec())
        return jax.jit(local, in_shardings=copy, out_shardings=copy)
    local = _local_block(sweep_ref, keep, shape)
    c, rep = PartitionSpec(AXIS), PartitionSpec()
    # unchecked: each device's chains are independent (no collective), and checking would ask
    # every zero-initialised buffer of the loop to be marked as varying over devices
    return jax.jit(shard_map(local, mesh=mesh, in_specs=(rep, c, c, rep, rep, rep,
                                                                   rep, rep),
                             out_specs=c, **_UNCHECKED))


class Block:
    """A jitted block and its compiled programs, one per argument signature.

    With an ``export_key`` (a description of the sweep that is the same in every process), the
    program is compiled through an exported file (:mod:`._exported`) that later processes read
    instead of tracing the sweep again; ``settings`` are the block's own arguments.
    """

    def __init__(self, jitted, export_key=None, settings=None):
        self.jitted = jitted
        self.export_key, self.settings = export_key, settings
        self.programs = {}

    def compile(self, *args):
        """The compiled program for ``args`` and the seconds spent tracing, lowering and
        compiling it (0 when it was compiled before)."""
        leaves, tree = jax.tree_util.tree_flatten(args)
        signature = (tree, tuple((x.shape, x.dtype, x.sharding) for x in leaves),
                     tuple(sorted(cpu_compiler_options().items())))
        if signature in self.programs:
            return self.programs[signature], 0.0
        start = time.perf_counter()
        program = compile_exported(self.jitted, args, self.export_key, self.settings)
        if program is None:
            program = compile_lowered(self.jitted.lower(*args), leaves)
        self.programs[signature] = program
        return program, time.perf_counter() - start


_BLOCKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def compiled_block(sweep, placement: Placement, keep: Keep, shape: BlockShape,
                   export_key=None) -> Block:
    """The block for ``sweep``: the last one built for this sweep is reused when the other
    arguments are the same objects, so repeated runs of one sampler compile once; one block
    per live sweep is kept (a fresh ``record`` lambda per run replaces it, nothing piles up).
    ``export_key`` (see :class:`Block`) keeps the program across processes."""
    cache_key = (placement.mesh, keep, shape, placement.n_rows)
    settings = (*shape, placement.mesh.shape, [d.id for d in placement.mesh.devices.flat],
                placement.n_rows)
    try:
        cached = _BLOCKS.get(sweep)
        sweep_ref = weakref.ref(sweep)
    except TypeError:  # not weakly referenceable: build without caching
        return Block(_make_block(lambda: sweep, *cache_key), export_key, settings)
    if cached is None or cached[0] != (cache_key, export_key):
        cached = ((cache_key, export_key),
                  Block(_make_block(sweep_ref, *cache_key), export_key, settings))
        _BLOCKS[sweep] = cached
    return cached[1]

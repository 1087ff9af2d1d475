"""The compiled block of :func:`~gplvm.inference.mcmc.run_chains`: ``lax.scan`` over a block of
sweeps of every chain, with kept draws written into a per-block buffer.

The chains of a sweep run one after the other (``lax.map``) unless ``vectorize`` asks for
``vmap``.  Under ``vmap`` a data-dependent ``lax.cond`` becomes a select that computes both
branches, and every while loop (slice shrinkage, rejection sampling) runs until the slowest
chain's slowest element is done; measured on the RFLVM (issue 14, ``benchmarks/rflvm_profile.py``)
that doubled the cost of a sweep even for one chain.  One after the other, each chain pays for its
own work only; ``vmap`` pays off only for sweeps so small that per-operation overhead dominates.

Global sweep ``i`` (0-based) uses key ``split(fold_in(key, i), C)[c]`` for chain c, so the
chains never depend on how the sweeps are cut into blocks.
"""

from __future__ import annotations

import weakref

import jax
import jax.numpy as jnp
from jax import lax


def _write(buf, rec, j):
    """Put ``rec`` (leading chain axis) in row ``j`` of ``buf``; an out-of-range ``j`` (a sweep
    that is not kept) writes nothing."""
    return jax.tree_util.tree_map(lambda b, r: b.at[:, j].set(r, mode="drop"), buf, rec)


def _alloc(fn, state, rows: int):
    """Zeros for ``rows`` outputs of ``vmap(fn)`` per chain: ``(chains, rows, ...)``."""
    shapes = jax.eval_shape(jax.vmap(fn), state)
    return jax.tree_util.tree_map(
        lambda s: jnp.zeros((s.shape[0], rows) + s.shape[1:], s.dtype), shapes)


def _chains(sweep, vectorize: bool):
    """``(keys, states) -> states`` for a leading chain axis: ``vmap`` or ``lax.map``."""
    if vectorize:
        return jax.vmap(sweep)
    return lambda keys, state: lax.map(lambda args: sweep(*args), (keys, state))


def _make_block(sweep_ref, record, record_heavy, trace, block_size, rows, rows_heavy,
                vectorize=False):
    """The jitted block: ``block_size`` sweeps of every chain from global sweep ``first``.

    ``sweep_ref()`` returns the sweep; the block holds it weakly so that caching the block
    under the sweep (:func:`compiled_block`) does not keep the sweep (and its data) alive.
    """

    def block(key, state, first, n_valid, burn_in, thin, thin_heavy):
        n_chains = jax.tree_util.tree_leaves(state)[0].shape[0]
        vsweep = _chains(sweep_ref(), vectorize)

        def one_sweep(i, state):
            keys = jax.random.split(jax.random.fold_in(key, i), n_chains)
            new = vsweep(keys, state)
            return jax.tree_util.tree_map(lambda n, o: n.astype(o.dtype), new, state)

        def body(carry, t):
            state, buf, buf_heavy, j, j_heavy = carry
            valid = t < n_valid
            # steps past the end of the run (last, partial block) leave the state alone
            state = lax.cond(valid, lambda s: one_sweep(first + t, s), lambda s: s, state)
            s = first + t + 1 - burn_in
            if record is not None:
                keep = valid & (s > 0) & (s % thin == 0)
                buf = _write(buf, jax.vmap(record)(state), jnp.where(keep, j, rows))
                j = j + keep.astype(jnp.int32)
            if record_heavy is not None:
                keep = valid & (s > 0) & (s % thin_heavy == 0)
                buf_heavy = _write(buf_heavy, jax.vmap(record_heavy)(state),
                                   jnp.where(keep, j_heavy, rows_heavy))
                j_heavy = j_heavy + keep.astype(jnp.int32)
            out = jax.vmap(trace)(state) if trace is not None else ()
            return (state, buf, buf_heavy, j, j_heavy), out

        buf = _alloc(record, state, rows) if record is not None else ()
        buf_heavy = _alloc(record_heavy, state, rows_heavy) if record_heavy is not None else ()
        zero = jnp.zeros((), jnp.int32)
        (state, buf, buf_heavy, _, _), traced = lax.scan(
            body, (state, buf, buf_heavy, zero, zero), jnp.arange(block_size))
        return state, buf, buf_heavy, traced

    return jax.jit(block)


_BLOCKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def compiled_block(sweep, record, record_heavy, trace, block_size, rows, rows_heavy,
                   vectorize=False):
    """The block for ``sweep``: the last one built for this sweep is reused when the other
    arguments are the same objects, so repeated runs of one sampler compile once; one block
    per live sweep is kept (a fresh ``record`` lambda per run replaces it, nothing piles up)."""
    cache_key = (record, record_heavy, trace, block_size, rows, rows_heavy, vectorize)
    try:
        cached = _BLOCKS.get(sweep)
        sweep_ref = weakref.ref(sweep)
    except TypeError:  # not weakly referenceable: build without caching
        return _make_block(lambda: sweep, *cache_key)
    if cached is None or cached[0] != cache_key:
        cached = (cache_key, _make_block(sweep_ref, *cache_key))
        _BLOCKS[sweep] = cached
    return cached[1]

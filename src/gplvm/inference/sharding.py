r"""Devices, meshes and rows split over them: the generic part of sharding (issue 18).

A one-axis :class:`jax.sharding.Mesh` (axis :data:`AXIS`, ``"rows"``) over chosen devices
(:func:`make_mesh`, the ``devices=`` argument's rules in :func:`devices_problem`), arrays split
by rows over it (:func:`shard_rows`, padded to a multiple of the device count:
:func:`padded_rows`, :func:`pad_rows`), placed whole on every device (:func:`replicate`) or
copied back to the default device (:func:`to_default_device`), and the global index of a
device's first row inside ``jax.shard_map`` (:func:`first_row`).  Under :mod:`jax.distributed`
the mesh spans the devices of every process and the same code runs unchanged
(:mod:`gplvm.distributed`).

What is split is the model's business: the collapsed GPLVM bound's sums over rows
(:mod:`gplvm.models.gplvm_family.sharded_bound`, its data split by
:func:`gplvm.models.gplvm_family.sharded_data.shard_data`, chosen as the
:class:`~gplvm.models.gplvm_family.sharded_route.ShardedRoute`) and the RFLVM's chains split by
rows (:mod:`gplvm.inference.mcmc`).
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXIS = "rows"

DevicesLike = Union[None, int, Sequence[Any], Mesh]


def devices_problem(devices) -> Optional[str]:
    """Why ``devices`` cannot choose a mesh (None when it can), without computing anything.

    Accepted: None (every device), an int d in 1..``len(jax.devices())`` (the first d), a
    non-empty list of distinct ``jax.Device``, or a :class:`jax.sharding.Mesh`.
    """
    if devices is None or isinstance(devices, Mesh):
        return None
    n_available = len(jax.devices())
    if isinstance(devices, (int, np.integer)) and not isinstance(devices, (bool, np.bool_)):
        if 1 <= devices <= n_available:
            return None
        return (f"devices={devices} but JAX has {n_available} device(s); ask for 1 to "
                f"{n_available}, or start Python with more (GPLVM_CPU_DEVICES or "
                f"XLA_FLAGS=--xla_force_host_platform_device_count=n)")
    if isinstance(devices, (list, tuple)) and devices and all(
            isinstance(d, jax.Device) for d in devices):
        if len(set(devices)) != len(devices):
            return "devices lists a device twice; give each device once"
        return None
    return (f"devices must be None, a count, a non-empty list of jax.Device (e.g. "
            f"jax.devices()[:2]) or a jax.sharding.Mesh; got {type(devices).__name__}")


def checkpoint_devices_problem(devices, checkpoint) -> Optional[str]:
    """Why ``devices`` cannot go with ``checkpoint`` (None when it can): a checkpoint file
    records the devices as a count, so device objects or a mesh are refused before any
    computation (``save`` would refuse them at the first checkpoint)."""
    if devices is None or checkpoint is None or isinstance(devices, (int, np.integer)):
        return None
    return ("a checkpoint file records the devices as a count, not jax devices or a mesh "
            "(they belong to this process): pass devices=<a count>")


def make_mesh(devices: DevicesLike = None) -> Mesh:
    """A one-axis mesh (axis ``"rows"``) over the chosen devices.

    Args:
        devices: None for every device (of every process under :mod:`jax.distributed`); an int
            d for the first d of them; a list of ``jax.Device``; or a
            :class:`jax.sharding.Mesh`, whose devices (all its axes flattened) are used.

    Raises:
        ValueError: on a count outside 1..``len(jax.devices())``, an empty list, a repeated
            device, or something that is not a device (:func:`devices_problem`).
    """
    problem = devices_problem(devices)
    if problem is not None:
        raise ValueError(problem)
    if devices is None:
        chosen = list(jax.devices())
    elif isinstance(devices, Mesh):
        chosen = list(devices.devices.ravel())
    elif isinstance(devices, (int, np.integer)):
        chosen = list(jax.devices()[:int(devices)])
    else:
        chosen = list(devices)
    return Mesh(np.array(chosen), (AXIS,))


def to_default_device(tree):
    """Every array of ``tree`` copied to the default device as an uncommitted array: a model
    fitted on a mesh then predicts with the same compiled code as one fitted on one device."""
    return jax.tree_util.tree_map(lambda x: jnp.asarray(np.asarray(x))
                                  if isinstance(x, jax.Array) else x, tree)


def replicate(tree, mesh: Mesh):
    """Every array of ``tree`` placed whole on every device of ``mesh`` (``P()``)."""
    return jax.device_put(tree, NamedSharding(mesh, PartitionSpec()))


def padded_rows(n_rows: int, n_devices: int) -> int:
    """The smallest multiple of ``n_devices`` that is at least ``n_rows`` (and at least 1)."""
    return max(1, math.ceil(n_rows / n_devices)) * n_devices


def shard_rows(A, mesh: Mesh, fill: float = 0.0) -> jax.Array:
    """``A`` (N, ...) as a global array split by rows over ``mesh``, padded with ``fill``.

    Each process builds only the blocks of its own devices, reading ``A[start:stop]``, so ``A``
    may be a NumPy memmap (each process then reads only its rows from disk).

    Returns:
        A float array of shape (padded_rows(N, mesh.size), ...) sharded as ``P("rows")``.
    """
    n = A.shape[0]
    shape = (padded_rows(n, mesh.size),) + tuple(A.shape[1:])
    dtype = jnp.result_type(float)

    def block(index):
        start, stop, _ = index[0].indices(shape[0])
        out = np.full((stop - start,) + shape[1:], fill, dtype=dtype)
        real = np.asarray(A[start:min(stop, n)], dtype=dtype)
        out[:len(real)] = real
        return out

    return jax.make_array_from_callback(shape, NamedSharding(mesh, PartitionSpec(AXIS)), block)


def pad_rows(X, n_pad: int, fill: float):
    """Rows of ``X`` padded with ``fill`` to ``n_pad`` (left as they are when already
    ``n_pad``; traceable)."""
    return X if X.shape[0] == n_pad else jnp.pad(X, ((0, n_pad - X.shape[0]), (0, 0)),
                                                 constant_values=fill)


def first_row(X_block):
    """Inside ``jax.shard_map`` over :data:`AXIS`: the index of this device's first row among
    all rows (blocks are consecutive, in the mesh's order).  Monte Carlo Ψ-statistics key their
    draws by it, so a sharded sum draws what the unsharded one does row by row."""
    return jax.lax.axis_index(AXIS) * X_block.shape[0]

r"""The collapsed bound with its rows split across devices and processes (issue 18).

The collapsed Bayesian GPLVM bound (Titsias & Lawrence 2010; seed 001 eqs. 26–32) reads the N
rows only through sums over n (:class:`gplvm.objectives.collapsed.RowSums`):

.. math::
    \psi_{0,g} = \sum_n w_{gn}\psi_0(x_n),\quad \Psi_1^\top Y = \sum_n \psi_1(x_n) y_n^\top,\quad
    \Psi_{2,g} = \sum_n w_{gn}\Psi_2(x_n),\quad \sum_n y_{nd}^2,\quad
    \mathrm{KL} = \sum_n \mathrm{KL}(q(x_n)\,\|\,N(0, I)).

Each device of a one-axis :class:`jax.sharding.Mesh` computes them over its own block of rows
(``jax.shard_map``), one ``psum`` adds the blocks, and every device then does the same M × M
algebra as the unsharded bound (:func:`gplvm.objectives.collapsed.data_term_from_sums`).  Rows
are padded to a multiple of the device count; a padded row has weight 0, y = 0 and
q(x) = N(0, I) (whatever its stored X), so it adds exactly 0 to every sum and gets a zero
gradient.  The result equals the unsharded bound up to the order of the additions (round-off).
Under :mod:`jax.distributed` the mesh spans the devices of every process and the same code runs
unchanged (:mod:`gplvm.distributed`).

Every Ψ-statistic rule gives the same sums however the rows are split: the analytic,
unscented and Gauss–Hermite rules are deterministic, and :class:`~gplvm.expectations.MonteCarlo`
draws row n from ``fold_in(key, n)`` with n its global index (each device passes its first
row's index as ``psi_statistics(row_offset=)``, :func:`_first_row`).

``BayesianGPLVM(devices=...)`` uses this module inside its fit: its
:class:`~gplvm.models.gplvm_family.bound.Problem` carries the :class:`ShardedData`.
With ``inference='svi'`` each minibatch's rows are split instead (:func:`svi_row_sums`: the
sums of the stochastic bound, Hensman, Fusi & Lawrence 2013, added with one ``psum``).
:func:`shard_data` reads Y a chunk of rows at a time to check it and group its columns
(:func:`scan_rows`) and then builds each device's rows on their own, so no (N, D) data array
is ever whole on one device (q(X), N × Q, is replicated).

Typical use::

    mesh = make_mesh(4)                      # or make_mesh(), every device of every process
    data = shard_data(Y, mesh)               # Y (N, D), NaN = missing
    value, grads = bound_and_grad(params, data)
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from gplvm._pytree import pytree_dataclass, static_field
from gplvm._validation import as_2d_float, check_magnitude, check_observed_columns
from gplvm.expectations import psi_statistics
from gplvm.expectations.rules import resolve_rule
from gplvm.objectives import collapsed, svi

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


@pytree_dataclass
class ShardedData:
    """The data of the collapsed bound, split by rows over a mesh (:func:`shard_data`).

    Attributes:
        Y0: (N_pad, D) data with missing entries (and padded rows) set to 0.
        weights_T: (N_pad, G) 1.0 where row n is observed in column group g, 0 on padded rows.
        mask: (N_pad,) 1.0 on real rows, 0 on padded rows.
        column_group: (D,) the group of each column (replicated).
        n_obs: (G,) observed rows per group (replicated).
        mesh: the mesh the rows are split over.
        n_rows: N, the real rows.
    """

    Y0: jax.Array
    weights_T: jax.Array
    mask: jax.Array
    column_group: jax.Array
    n_obs: jax.Array
    mesh: Mesh = static_field()
    n_rows: int = static_field()

    @property
    def groups(self) -> collapsed.MissingGroups:
        """The column groups the M × M algebra reads (their (G, N) weights are sharded here)."""
        return collapsed.MissingGroups(None, self.column_group, self.n_obs)


def shard_data(Y, mesh: Optional[Mesh] = None) -> ShardedData:
    """Split ``Y`` (N, D; NaN = missing; an array or a memmap) by rows over ``mesh``.

    One pass over row chunks (:func:`scan_rows`) checks the entries and finds the column groups
    (missingness patterns, numbered as :func:`gplvm.objectives.collapsed.group_columns` numbers
    them) without holding more than a chunk of ``Y``; each device's block of rows is then read
    and built on its own (:func:`shard_rows`), so no device holds more than its rows.

    Raises:
        ValueError: when ``Y`` is not 2-D, has no rows or columns, has an infinite entry or one
            whose square overflows, or a column with no observed entry.
    """
    if getattr(Y, "ndim", None) != 2 or Y.shape[0] == 0 or Y.shape[1] == 0:
        raise ValueError(f"Y must be a 2-D (N, D) array with N, D ≥ 1; got shape "
                         f"{getattr(Y, 'shape', None)} (use Y.reshape(-1, 1) for one column)")
    column_group, n_obs = scan_rows(Y)
    mesh = make_mesh() if mesh is None else mesh
    replicated = NamedSharding(mesh, PartitionSpec())
    return ShardedData(Y0=shard_rows(_RowsWithoutNaN(Y), mesh),
                       weights_T=shard_rows(_RowWeights(Y, column_group), mesh),
                       mask=shard_rows(np.ones(Y.shape[0]), mesh),
                       column_group=jax.device_put(column_group, replicated),
                       n_obs=jax.device_put(n_obs, replicated),
                       mesh=mesh, n_rows=int(Y.shape[0]))


def scan_rows(Y, chunk_rows: Optional[int] = None):
    """Check ``Y`` and group its columns by missingness pattern, one chunk of rows at a time.

    The groups are refined chunk by chunk: two columns share a group when they shared one
    over the earlier rows and have the same pattern in this chunk.  Ranking the pairs (earlier
    group, this chunk's pattern) lexicographically keeps the groups in the lexicographic order
    of their whole patterns, the order of ``np.unique`` in
    :func:`gplvm.objectives.collapsed.group_columns`, so the numbering is the same.

    Returns:
        column_group (D,) ints and n_obs (G,) observed rows per group (NumPy).

    Raises:
        ValueError: on an infinite or overflowing entry (naming its row and column) or a
            column with no observed entry (:mod:`gplvm._validation`).
    """
    N, D = Y.shape
    chunk_rows = chunk_rows or max(1, 2**22 // D)
    column_group, counts = np.zeros(D, dtype=np.int64), np.zeros(D, dtype=np.int64)
    for start in range(0, N, chunk_rows):
        block = _checked_block(Y, start, min(start + chunk_rows, N))
        observed = ~np.isnan(block)
        counts += observed.sum(axis=0)
        keys = np.concatenate([column_group[:, None], observed.T.astype(np.int64)], axis=1)
        column_group = np.unique(keys, axis=0, return_inverse=True)[1].ravel()
    if not counts.all():
        check_observed_columns(np.where(counts > 0, 0.0, np.nan)[None, :])
    return column_group, counts[_first_columns(column_group)].astype(float)


def _first_columns(column_group: np.ndarray) -> np.ndarray:
    """(G,) the first column of each group (all of a group's columns share its pattern)."""
    return np.array([np.flatnonzero(column_group == g)[0]
                     for g in range(column_group.max() + 1)])


def _checked_block(Y, start: int, stop: int) -> np.ndarray:
    """Rows start..stop of Y as floats, checked by :func:`gplvm._validation.as_2d_float` and
    :func:`~gplvm._validation.check_magnitude`; the message gives rows of the whole of Y."""
    try:
        block = as_2d_float(Y[start:stop], "Y", allow_nan=True)
        check_magnitude(block, "Y", "rescale Y (e.g. divide it by its largest entry)")
    except ValueError as err:
        if start == 0:
            raise
        raise ValueError(f"{err} (in rows {start} to {stop - 1} of Y; the row numbers above "
                         f"count from row {start})") from None
    return block


class _RowsWithoutNaN:
    """Row slices of Y with NaN set to 0, read lazily (a memmap stays on disk)."""

    def __init__(self, Y):
        self.Y, self.shape = Y, Y.shape

    def __getitem__(self, rows):
        return np.nan_to_num(np.asarray(self.Y[rows], dtype=float), nan=0.0)


class _RowWeights:
    """Row slices of the (N, G) group weights: w_ng = 1 when row n is observed in group g."""

    def __init__(self, Y, column_group: np.ndarray):
        self.Y = Y
        self.first = _first_columns(column_group)
        self.shape = (Y.shape[0], len(self.first))

    def __getitem__(self, rows):
        return (~np.isnan(np.asarray(self.Y[rows], dtype=float)[:, self.first])).astype(float)


def _pad(X, n_pad: int, fill: float):
    """Rows of q(X) padded to the data's N_pad (left as they are when already N_pad)."""
    return X if X.shape[0] == n_pad else jnp.pad(X, ((0, n_pad - X.shape[0]), (0, 0)),
                                                 constant_values=fill)


def _first_row(X_block):
    """The index of a device's first row among all rows (blocks are consecutive, in the
    mesh's order): Monte Carlo Ψ-statistics key their draws by it, so a sharded bound draws
    what the unsharded one does row by row."""
    return jax.lax.axis_index(AXIS) * X_block.shape[0]


def _block_sums(kernel, Z, X_mean, X_var, Y0, weights_T, mask, rule):
    """One device's block: its RowSums and KL, added over the mesh, and its rows of Ψ1."""
    real = mask[:, None] > 0
    # padded rows are q(x) = N(0, I): KL 0 and finite gradients whatever is stored there
    X_mean = jnp.where(real, X_mean, 0.0)
    X_var = jnp.where(real, X_var, 1.0)
    psi0, psi1, psi2 = psi_statistics(kernel, Z, X_mean, X_var, rule=rule, weights=weights_T.T,
                                      row_offset=_first_row(X_mean))
    sums = collapsed.row_sums(psi0, psi1, psi2, Y0)
    kl = collapsed.kl_standard_normal(X_mean, X_var)
    return jax.lax.psum((sums, kl), AXIS), psi1


def row_statistics(kernel, Z, X_mean, X_var, data: ShardedData, rule=None):
    """The bound's sums over rows, computed block by block on the mesh and added (``psum``).

    Args:
        kernel: a :mod:`gplvm.kernels` kernel; Z: (M, Q) inducing inputs (both replicated).
        X_mean, X_var: (N, Q) or (N_pad, Q) means and variances of q(X) = Π N(x_n | μ_n, S_n);
            N rows are padded here, N_pad rows (e.g. from :func:`shard_rows`) are used as given.
        data: from :func:`shard_data`.
        rule: a Ψ-statistic rule object or None (:func:`gplvm.expectations.psi_statistics`).

    Returns:
        (:class:`~gplvm.objectives.collapsed.RowSums`, KL(q(X) ‖ N(0, I)), Ψ1 (N_pad, M) sharded
        by rows).
    """
    n_pad = data.Y0.shape[0]
    if X_mean.shape[0] not in (data.n_rows, n_pad) or X_var.shape != X_mean.shape:
        raise ValueError(f"X_mean and X_var must both have shape ({data.n_rows}, Q) (or the "
                         f"padded ({n_pad}, Q)); got {X_mean.shape} and {X_var.shape}")
    rows, rep = PartitionSpec(AXIS), PartitionSpec()
    # check_vma=False: the Ψ-statistics' chunk loop (a lax.scan) starts its sum from a zero
    # that is the same on every device, which the check rejects as a carry that becomes
    # device-varying; the outputs need no check (the sums are psum-med, Ψ1 is split by rows),
    # and the gradients are tested against the unsharded ones (tests/test_sharding.py)
    block = jax.shard_map(_block_sums, mesh=data.mesh,
                          in_specs=(rep, rep, rows, rows, rows, rows, rows, rep),
                          out_specs=((rep, rep), rows), check_vma=False)
    (sums, kl), psi1 = block(kernel, Z, _pad(X_mean, n_pad, 0.0), _pad(X_var, n_pad, 1.0),
                             data.Y0, data.weights_T, data.mask, rule)
    return sums, kl, psi1


def _svi_block(kernel, Z, X_mean, X_var, Y0, observed, mask, rule):
    """One device's rows of an SVI minibatch: their :class:`~gplvm.objectives.svi.RowSums`,
    added over the mesh.  Padded rows (mask 0) have weight 0, y = 0 and q(x) = N(0, I)."""
    real = mask[:, None] > 0
    X_mean = jnp.where(real, X_mean, 0.0)
    X_var = jnp.where(real, X_var, 1.0)
    weights = mask[None, :] if observed is None else observed.T
    psi0, psi1, psi2 = psi_statistics(kernel, Z, X_mean, X_var, rule=rule, weights=weights,
                                      row_offset=_first_row(X_mean))
    n_obs = (jnp.sum(mask) * jnp.ones(Y0.shape[1]) if observed is None
             else jnp.sum(observed, axis=0))
    sums = svi.RowSums(psi0, psi1.T @ Y0, psi2, jnp.sum(Y0**2, axis=0), n_obs,
                       collapsed.kl_standard_normal(X_mean, X_var))
    return jax.lax.psum(sums, AXIS)


def svi_row_sums(kernel, Z, X_mean, X_var, Y0, observed, mesh: Mesh, rule=None):
    """The sums over an SVI minibatch's rows (:class:`gplvm.objectives.svi.RowSums`), its B
    rows split over ``mesh`` (padded to a multiple of the device count with rows of weight 0)
    and each device's sums added with one ``psum``: the unsharded sums up to the order of
    the additions.  Called inside a jitted step (the padding is traced, the rows' gradients
    come back with B rows).

    Args:
        kernel, Z: replicated; X_mean, X_var: (B, Q) the rows' q(x_n) (constrained).
        Y0: (B, D) rows, missing entries 0; observed: (B, D) 0/1, or None for complete rows
            (then G = 1: one weighting of the rows for every column).
        mesh: from :func:`make_mesh`; rule: the Ψ-statistic rule.
    """
    n_pad = padded_rows(Y0.shape[0], mesh.size)

    def pad(A, fill=0.0):
        return jnp.pad(A, ((0, n_pad - A.shape[0]),) + ((0, 0),) * (A.ndim - 1),
                       constant_values=fill)

    mask = pad(jnp.ones(Y0.shape[0]))
    rows, rep = PartitionSpec(AXIS), PartitionSpec()
    if observed is None:    # a function of the other arguments (None is no array to split)
        def block(kernel, Z, X_mean, X_var, Y0, mask, rule):
            return _svi_block(kernel, Z, X_mean, X_var, Y0, None, mask, rule)
        arrays = (pad(X_mean), pad(X_var, 1.0), pad(Y0), mask)
    else:
        block, arrays = _svi_block, (pad(X_mean), pad(X_var, 1.0), pad(Y0), pad(observed), mask)
    # check_vma=False as in row_statistics (the Ψ-statistics' chunk loop)
    sharded = jax.shard_map(block, mesh=mesh, in_specs=(rep, rep) + (rows,) * len(arrays)
                            + (rep,), out_specs=rep, check_vma=False)
    return sharded(kernel, Z, *arrays, rule)


def _bound(params: dict, data: ShardedData, rule=None, jitter=0.0):
    """The collapsed bound (seed 001 eq. 32): the sharded data term minus the KL of q(X),
    (1) the sums over rows on every device, added; (2) the M × M algebra of the unsharded
    bound (:func:`gplvm.objectives.collapsed.data_term_from_sums`)."""
    kernel = params["kernel"]
    sums, kl, _ = row_statistics(kernel, params["Z"], params["X_mean"], params["X_var"], data,
                                 rule)                                                # (1)
    value, _ = collapsed.data_term_from_sums(sums, kernel(params["Z"]), data.groups,
                                             params["noise_var"], jitter)             # (2)
    return value - kl


_bound_jit = jax.jit(_bound)
_bound_and_grad_jit = jax.jit(jax.value_and_grad(_bound))


def _prepare(params: dict, Y, mesh: Optional[Mesh], rule):
    missing = {"kernel", "Z", "X_mean", "X_var", "noise_var"} - set(params)
    if missing:
        raise ValueError(f"params lacks {sorted(missing)}; give a dict with 'kernel' (a "
                         f"gplvm.kernels object), 'Z', 'X_mean', 'X_var' and 'noise_var'")
    data = Y if isinstance(Y, ShardedData) else shard_data(Y, mesh)
    if mesh is not None and mesh != data.mesh:
        raise ValueError("mesh differs from the mesh the data were sharded over; pass one of "
                         "them")
    return data, resolve_rule(rule)


def collapsed_bound(params: dict, Y, mesh: Optional[Mesh] = None, rule=None,
                    jitter: float = 0.0) -> jax.Array:
    r"""The collapsed Bayesian GPLVM bound with q(X) = Π N(μ_n, S_n) under N(0, I), its sums
    over rows split across the devices of ``mesh``.

    .. math:: \mathcal L = \sum_d F_d - \mathrm{KL}(q(X)\,\|\,p(X))   \quad \text{(seed 001 eq. 32)}

    Args:
        params: ``{"kernel": kernel, "Z": (M, Q), "X_mean": (N, Q), "X_var": (N, Q),
            "noise_var": σ²}`` (constrained values; a pytree, so ``jax.grad`` applies).
        Y: (N, D) data (NaN = missing), or :class:`ShardedData` from :func:`shard_data`
            (shard once, evaluate many times).
        mesh: from :func:`make_mesh`; None: every device (or the data's own mesh).
        rule: the Ψ-statistic rule (None: closed form where there is one).
        jitter: added to K_uu's diagonal.

    Returns:
        The bound, a replicated scalar.
    """
    data, rule = _prepare(params, Y, mesh, rule)
    return _bound_jit(params, data, rule, jitter)


def bound_and_grad(params: dict, Y, mesh: Optional[Mesh] = None, rule=None,
                   jitter: float = 0.0):
    """:func:`collapsed_bound` and its gradient with respect to ``params`` (``jax.grad``
    through the ``psum``: each device differentiates its own block)."""
    data, rule = _prepare(params, Y, mesh, rule)
    return _bound_and_grad_jit(params, data, rule, jitter)


def bound_and_grad_compiled(params: dict, Y, mesh: Optional[Mesh] = None, rule=None,
                            jitter: float = 0.0):
    """:func:`bound_and_grad` compiled ahead of time for the shapes of ``params`` and ``Y``:
    returns ``f(params, data) -> (bound, grads)`` for ``data`` from :func:`shard_data`.

    For processes that must start a collective together (:func:`gplvm.distributed.synchronize`
    between compiling and running): the time one process spends compiling is then not time
    the others spend waiting inside a collective."""
    data, rule = _prepare(params, Y, mesh, rule)
    compiled = _bound_and_grad_jit.lower(params, data, rule, jitter).compile()
    return lambda p, d: compiled(p, d, rule, jitter)

r"""The collapsed GPLVM bound with its rows split across devices and processes (issue 18).

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
row's index as ``psi_statistics(row_offset=)``,
:func:`gplvm.inference.sharding.first_row`).

``BayesianGPLVM(devices=...)`` uses this module inside its fit: its
:class:`~.bound.Problem`'s route is a :class:`~.sharded_route.ShardedRoute` over the
:class:`~.sharded_data.ShardedData`.
With ``inference='svi'`` each minibatch's rows are split instead (:func:`svi_row_sums`: the
sums of the stochastic bound, Hensman, Fusi & Lawrence 2013, added with one ``psum``).
:func:`~.sharded_data.shard_data` reads Y a chunk of rows at a time to check it and group its
columns and then builds each device's rows on their own, so no (N, D) data array is ever
whole on one device (q(X), N × Q, is replicated).  The meshes, the padding and the row blocks
are :mod:`gplvm.inference.sharding`'s (generic).

Typical use::

    mesh = sharding.make_mesh(4)             # or make_mesh(), every device of every process
    data = shard_data(Y, mesh)               # Y (N, D), NaN = missing
    value, grads = bound_and_grad(params, data)
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec

from gplvm.expectations import psi_statistics
from gplvm.expectations.rules import resolve_rule
from gplvm.inference import sharding
from gplvm.models.gplvm_family.sharded_data import ShardedData, shard_data
from gplvm.objectives import collapsed, svi


def _block_sums(kernel, Z, X_mean, X_var, Y0, weights_T, mask, rule):
    """One device's block: its RowSums and KL, added over the mesh, and its rows of Ψ1."""
    real = mask[:, None] > 0
    # padded rows are q(x) = N(0, I): KL 0 and finite gradients whatever is stored there
    X_mean = jnp.where(real, X_mean, 0.0)
    X_var = jnp.where(real, X_var, 1.0)
    psi0, psi1, psi2 = psi_statistics(kernel, Z, X_mean, X_var, rule=rule, weights=weights_T.T,
                                      row_offset=sharding.first_row(X_mean))
    sums = collapsed.row_sums(psi0, psi1, psi2, Y0)
    kl = collapsed.kl_standard_normal(X_mean, X_var)
    return jax.lax.psum((sums, kl), sharding.AXIS), psi1


def row_statistics(kernel, Z, X_mean, X_var, data: ShardedData, rule=None):
    """The bound's sums over rows, computed block by block on the mesh and added (``psum``).

    Args:
        kernel: a :mod:`gplvm.kernels` kernel; Z: (M, Q) inducing inputs (both replicated).
        X_mean, X_var: (N, Q) or (N_pad, Q) means and variances of q(X) = Π N(x_n | μ_n, S_n);
            N rows are padded here, N_pad rows (e.g. from
            :func:`~gplvm.inference.sharding.shard_rows`) are used as given.
        data: from :func:`~.sharded_data.shard_data`.
        rule: a Ψ-statistic rule object or None (:func:`gplvm.expectations.psi_statistics`).

    Returns:
        (:class:`~gplvm.objectives.collapsed.RowSums`, KL(q(X) ‖ N(0, I)), Ψ1 (N_pad, M) sharded
        by rows).
    """
    n_pad = data.Y0.shape[0]
    if X_mean.shape[0] not in (data.n_rows, n_pad) or X_var.shape != X_mean.shape:
        raise ValueError(f"X_mean and X_var must both have shape ({data.n_rows}, Q) (or the "
                         f"padded ({n_pad}, Q)); got {X_mean.shape} and {X_var.shape}")
    rows, rep = PartitionSpec(sharding.AXIS), PartitionSpec()
    # check_vma=False: the Ψ-statistics' chunk loop (a lax.scan) starts its sum from a zero
    # that is the same on every device, which the check rejects as a carry that becomes
    # device-varying; the outputs need no check (the sums are psum-med, Ψ1 is split by rows),
    # and the gradients are tested against the unsharded ones (tests/inference/test_sharding.py)
    block = jax.shard_map(_block_sums, mesh=data.mesh,
                          in_specs=(rep, rep, rows, rows, rows, rows, rows, rep),
                          out_specs=((rep, rep), rows), check_vma=False)
    (sums, kl), psi1 = block(kernel, Z, sharding.pad_rows(X_mean, n_pad, 0.0),
                             sharding.pad_rows(X_var, n_pad, 1.0),
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
                                      row_offset=sharding.first_row(X_mean))
    n_obs = (jnp.sum(mask) * jnp.ones(Y0.shape[1]) if observed is None
             else jnp.sum(observed, axis=0))
    sums = svi.RowSums(psi0, psi1.T @ Y0, psi2, jnp.sum(Y0**2, axis=0), n_obs,
                       collapsed.kl_standard_normal(X_mean, X_var))
    return jax.lax.psum(sums, sharding.AXIS)


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
        mesh: from :func:`~gplvm.inference.sharding.make_mesh`; rule: the Ψ-statistic rule.
    """
    n_pad = sharding.padded_rows(Y0.shape[0], mesh.size)

    def pad(A, fill=0.0):
        return jnp.pad(A, ((0, n_pad - A.shape[0]),) + ((0, 0),) * (A.ndim - 1),
                       constant_values=fill)

    mask = pad(jnp.ones(Y0.shape[0]))
    rows, rep = PartitionSpec(sharding.AXIS), PartitionSpec()
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
        Y: (N, D) data (NaN = missing), or :class:`~.sharded_data.ShardedData` from
            :func:`~.sharded_data.shard_data` (shard once, evaluate many times).
        mesh: from :func:`~gplvm.inference.sharding.make_mesh`; None: every device (or the
            data's own mesh).
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
    returns ``f(params, data) -> (bound, grads)`` for ``data`` from
    :func:`~.sharded_data.shard_data`.

    For processes that must start a collective together (:func:`gplvm.distributed.synchronize`
    between compiling and running): the time one process spends compiling is then not time
    the others spend waiting inside a collective."""
    data, rule = _prepare(params, Y, mesh, rule)
    compiled = _bound_and_grad_jit.lower(params, data, rule, jitter).compile()
    return lambda p, d: compiled(p, d, rule, jitter)

r"""The psi-statistics entry point (seed 001 §C; seed 004 §B; STYLE.md 3, 5).

For :math:`q(X) = \prod_n \mathcal N(\mathbf x_n | \mu_n, \mathrm{diag}\,S_n)` and inducing
inputs Z (M × Q):

.. math::
    \psi_0 = \sum_n w_n E[k(\mathbf x_n, \mathbf x_n)], \quad
    [\Psi_1]_{nj} = E[k(\mathbf x_n, z_j)], \quad
    [\Psi_2]_{jj'} = \sum_n w_n E[k(z_j, \mathbf x_n) k(\mathbf x_n, z_{j'})].

The weights w let a collapsed bound with missing data share one pass over the points between
groups of output columns with the same missingness pattern (w_gn = 1 when row n is observed in
group g, else 0) — or carry any other non-negative per-point weight.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gplvm.expectations.analytic import analytic_psi, has_analytic
from gplvm.expectations.quadrature import quadrature_psi
from gplvm.expectations.rules import AbstractRule, Analytic, RuleLike, Unscented, resolve_rule
from gplvm.kernels import AbstractKernel
from gplvm.typing import Array, ArrayLike, Float, Real

#: (psi0, psi1, psi2) for one weighting of the points (weights None or (N,)) ...
PsiStatistics = tuple[Float[Array, ""], Float[Array, "N M"], Float[Array, "M M"]]
#: ... and for G weightings at once (weights (G, N)).
PsiStatisticsBatch = tuple[Float[Array, " G"], Float[Array, "N M"], Float[Array, "G M M"]]


def _check_shapes(Z, X_mean, X_var, weights):
    if X_mean.ndim != 2:
        raise ValueError(f"X_mean must be 2-D (N, Q); got shape {X_mean.shape} "
                         f"(use X_mean.reshape(-1, 1) for one latent dimension)")
    if X_var.shape != X_mean.shape:
        raise ValueError(f"X_var has shape {X_var.shape} but X_mean has {X_mean.shape}; pass "
                         f"the diagonal variances of q(x_n), one per entry of X_mean")
    if Z.ndim != 2 or Z.shape[1] != X_mean.shape[1]:
        raise ValueError(f"Z must be (M, Q) with the Q = {X_mean.shape[1]} columns of X_mean; "
                         f"got shape {Z.shape}")
    N = X_mean.shape[0]
    if weights is not None and (weights.ndim not in (1, 2) or weights.shape[-1] != N):
        raise ValueError(f"weights must have shape (N,) or (G, N) with N = {N}; got "
                         f"{weights.shape}")


def psi_statistics(kernel: AbstractKernel, Z: Real[ArrayLike, "M _Q"],
                   X_mean: Real[ArrayLike, "N _Q"], X_var: Real[ArrayLike, "_N _Q"],
                   rule: RuleLike = None,
                   weights: Real[ArrayLike, " _N"] | Real[ArrayLike, "_G _N"] | None = None,
                   row_offset=0) -> PsiStatistics | PsiStatisticsBatch:
    r"""Expectations of kernel values under a diagonal Gaussian q(X).

    A boundary function (:mod:`gplvm.typing`): the shapes of ``Z``, ``X_var`` and ``weights``
    are checked here, with a ``ValueError`` that names the fix.

    Args:
        kernel: any :mod:`gplvm.kernels` kernel (a pytree: differentiable, jit-able).
        Z: ``Float[Array, "M Q"]`` inducing inputs.
        X_mean: ``Float[Array, "N Q"]`` means μ_n of q(x_n).
        X_var: ``Float[Array, "N Q"]`` positive variances S_n (diagonal covariances).
        rule: ``None`` — closed form where one exists (RBF, Linear, White, Constant and sums of
            them), else :class:`Unscented`; a rule object (:class:`Analytic`,
            :class:`Unscented`, :class:`GaussHermite`, :class:`MonteCarlo`); or one of the names
            ``'analytic' | 'unscented' | 'gauss_hermite' | 'monte_carlo'`` (default settings;
            pass rule objects, not strings, as traced arguments of a jitted function).
        weights: ``None`` (all ones), ``Float[Array, "N"]``, or ``Float[Array, "G N"]`` for G
            weightings at once.
        row_offset: the index of the first row among all rows (an int, or a traced integer
            such as a device's ``axis_index`` times its rows).  Only :class:`MonteCarlo` reads
            it: row n draws from ``fold_in(key, row_offset + n)``, so a block of rows gets the
            draws those rows get in one call over all of them
            (:mod:`gplvm.models.gplvm_family.sharded_bound`).

    Returns:
        ``(psi0, psi1, psi2)``: psi0 a scalar and psi2 ``(M, M)`` for ``weights`` None or
        (N,); psi0 ``(G,)`` and psi2 ``(G, M, M)`` for (G, N) weights; psi1 is always the
        unweighted ``(N, M)``.

    Raises:
        ValueError: on inconsistent shapes, or ``rule=Analytic()`` for a kernel with no closed
        form (use ``Unscented()`` or ``GaussHermite(...)`` there).
    """
    rule = resolve_rule(rule)
    Z = jnp.asarray(Z, dtype=float)
    X_mean = jnp.asarray(X_mean, dtype=float)
    X_var = jnp.asarray(X_var, dtype=float)
    w = None if weights is None else jnp.asarray(weights, dtype=float)
    _check_shapes(Z, X_mean, X_var, w)
    if isinstance(rule, Analytic) and not has_analytic(kernel):
        raise ValueError(f"no closed-form psi-statistics for {type(kernel).__name__} kernels "
                         f"(closed forms: RBF, Linear, White, Constant and their sums); pass "
                         f"rule=Unscented() or GaussHermite(n_points=...) instead")
    return _psi_statistics(kernel, Z, X_mean, X_var, rule, w, row_offset)


@jax.jit
def _psi_statistics(kernel: AbstractKernel, Z: Float[Array, "M Q"], X_mean: Float[Array, "N Q"],
                    X_var: Float[Array, "N Q"], rule: AbstractRule | None,
                    w: Float[Array, " N"] | Float[Array, "G N"] | None, row_offset=0
                    ) -> PsiStatistics | PsiStatisticsBatch:
    """The traced part of :func:`psi_statistics`; jitted so eager callers do not pay for
    op-by-op dispatch of the chunk loops (inside an outer ``jit`` it is simply inlined)."""
    W = jnp.ones((1, X_mean.shape[0])) if w is None else jnp.atleast_2d(w)
    if rule is None:
        rule = Analytic() if has_analytic(kernel) else Unscented()
    if isinstance(rule, Analytic):
        psi0, psi1, psi2 = analytic_psi(kernel, Z, X_mean, X_var, W, rule.chunk_size)
    else:
        psi0, psi1, psi2 = quadrature_psi(kernel, Z, X_mean, X_var, W, rule, row_offset)
    # symmetric up to round-off; mirror the upper triangle so that it is exactly symmetric
    M = Z.shape[0]
    upper = jnp.arange(M)[:, None] <= jnp.arange(M)[None, :]
    psi2 = jnp.where(upper, psi2, jnp.swapaxes(psi2, 1, 2))
    if w is None or w.ndim == 1:
        return psi0[0], psi1, psi2[0]
    return psi0, psi1, psi2

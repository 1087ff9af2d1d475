"""The Kronecker linear-algebra route of the structured GPLVM (seed 003 eqs. 13–28).

:class:`KroneckerRoute` is the family's second route (:mod:`.route`): a
:class:`~.route.PsiRoute` as :class:`~.route.DenseRoute` is, with the data term of
:func:`gplvm.objectives.kronecker.data_term` over one latent factor (from the family's
Ψ-statistics of q(X)) and the spatial factors.  The spatial kernels' trainable values arrive
as ``route_u`` (``u["route"]``, one unconstrained kernel per factor); the pixel coordinates and
the fixed spatial inducing inputs are data.  Missing (image, pixel, channel) entries
(``missing``: their flat indices into Y0) are filled with free means that travel after the
spatial kernels in ``route_u``, and the bound gains the mean-field term of
:mod:`gplvm.objectives.kronecker_missing`; Y0 is one complete column group.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from gplvm._pytree import pytree_dataclass, static_field
from gplvm.kernels import Matern32
from gplvm.linalg import CholeskyError, safe_cholesky
from gplvm.models.gplvm_family.route import PsiRoute
from gplvm.objectives import kronecker
from gplvm.objectives.kronecker_missing import missing_term
from gplvm.registry import register


class KronParts(NamedTuple):
    """What the Kronecker data term leaves for q(U): the factors and the data (n_ξ, n_s, D)."""

    factors: list
    Y: Any


@register("gplvm.state.KroneckerRoute")
@pytree_dataclass
class KroneckerRoute(PsiRoute):
    """K = K_ξ ⊗ K_s,1 [⊗ K_s,2] by per-factor eigendecompositions (seed 003 eqs. 18–28).

    Attributes:
        kernels: one spatial kernel per factor (structure only; values from ``route_u``).
        coords: per factor the pixel coordinates (n_s, d_s), or one axis (n_a,) of a product
            grid (pixels numbered row-major, axis 1 major).
        inducing: per factor fixed spatial inducing inputs, or None for the pixels themselves.
        spatial_jitter: at the pixels a nugget of the spatial kernel, else K_uu,s's jitter.
        n_channels: D, the channels per pixel (Y0's columns are pixel-major, channels last).
        missing: None, or the flat indices (into Y0 raveled) of the missing entries, whose
            means are ``route_u[len(kernels)]``.
    """

    kernels: tuple
    coords: tuple
    inducing: tuple
    spatial_jitter: float = static_field(default=0.0)
    n_channels: int = static_field(default=1)
    missing: Any = None

    def spatial_kernels(self, route_u):
        """The constrained spatial kernels from their unconstrained values."""
        return [k.from_unconstrained(v) for k, v in zip(self.kernels, route_u)]

    def completed(self, Y0, route_u):
        """Y0 with its missing entries set to their variational means (unchanged if none)."""
        if self.missing is None:
            return Y0
        fill = route_u[len(self.kernels)]
        return Y0.reshape(-1).at[self.missing].set(fill).reshape(Y0.shape)

    def missing_counts(self, shape):
        """(n_ξ, n_s) number of missing channels of each (image, pixel)."""
        flags = jnp.zeros(shape[0] * shape[1]).at[self.missing].set(1.0)
        return flags.reshape(shape[0], -1, self.n_channels).sum(-1)

    def factors(self, psi, Kuu, jitter, route_u):
        """The latent factor (ψ0 and Ψ2 of the one column group), then the spatial ones."""
        psi0, psi1, psi2 = psi
        latent = kronecker.latent_factor(psi0[0], psi1, psi2[0], Kuu, jitter)
        return [latent] + kronecker.spatial_factors(self.spatial_kernels(route_u), self.coords,
                                                    list(self.inducing), self.spatial_jitter)

    def images(self, Y0):
        """Y0 (n_ξ, n_s·D) as (n_ξ, n_s, D), channels last."""
        return Y0.reshape(Y0.shape[0], -1, self.n_channels)

    def data_term(self, psi, Kuu, noise_var, problem, route_u=None):
        """The Kronecker data term (seed 003 eq. 13 without the KL) and its :class:`KronParts`.

        ``problem`` (:class:`~.bound.Problem`) gives ``Y0`` and the K_uu ``jitter``; its
        ``groups`` must be one complete group and its ``column_weights`` None (not read);
        missing entries are completed by their means plus the mean-field term
        (:mod:`.kronecker_missing`).  ``psi``, ``Kuu``, ``noise_var``, ``route_u``: as
        :meth:`.route.DenseRoute.data_term`."""
        Y0 = problem.Y0
        factors = self.factors(psi, Kuu, problem.jitter, route_u)
        Y = self.images(self.completed(Y0, route_u))
        value = kronecker.data_term(factors, Y, noise_var)
        if self.missing is not None:
            value = value + missing_term(factors, self.missing_counts(Y0.shape), noise_var)
        return value, KronParts(factors, Y)

    def optimal_q_u(self, parts: KronParts, groups, noise_var):
        """(Ū, Σ_u as Kronecker maps and a diagonal) at the optimum (seed 003 eq. 11)."""
        del groups
        return kronecker.optimal_q_u(kronecker.posterior(parts.factors, parts.Y, noise_var))


def _spacing(axis) -> float:
    """The median distance between neighbouring coordinates of one grid axis (1 if single)."""
    steps = np.diff(np.sort(np.asarray(axis, dtype=float)))
    return float(np.median(steps)) if len(steps) else 1.0


def spatial_kernels(spatial_kernel, layout):
    """The spatial kernel per factor: those given (one, or a tuple of one per grid axis), else
    a Matérn 3/2 per axis with a tenth of the axis (at least one pixel spacing) as its
    length-scale, or one over the 2-D coordinates of a point grid."""
    if isinstance(spatial_kernel, tuple):
        return list(spatial_kernel)
    if spatial_kernel is not None:
        return [spatial_kernel]
    if len(layout.coords) > 1:      # a tenth of each axis, at least one pixel spacing
        return [Matern32(lengthscale=max(float(np.ptp(a)) / 10.0, _spacing(a)),
                         variance=1.0) for a in layout.coords]
    span = np.ptp(np.asarray(layout.coords[0]), axis=0) / 10.0
    return [Matern32(lengthscale=jnp.asarray(np.maximum(span, 1e-3)), variance=1.0)]

def kronecker_route(spatial_inducing, layout, kernels, missing=None) -> KroneckerRoute:
    """The Kronecker route over ``layout``'s grid, with the jitter policy applied to fixed
    spatial inducing inputs (``spatial_inducing``: None, an array, or a tuple of one per
    axis; ``missing``: flat indices of the missing training entries, or None)."""
    if spatial_inducing is None:
        inducing, jitter = (None,) * len(kernels), 0.0
    else:
        inducing = (tuple(np.asarray(z, dtype=float) for z in spatial_inducing)
                    if len(kernels) > 1 else (np.asarray(spatial_inducing, float),))
        jitter = 0.0
        for k, Z in zip(kernels, inducing):
            try:
                jitter = max(jitter, float(safe_cholesky(np.asarray(k(jnp.asarray(Z))),
                                                         name="spatial Kuu").jitter))
            except CholeskyError as err:
                raise ValueError(f"the spatial inducing covariance cannot be factorised "
                                 f"({err}); use distinct spatial_inducing points") from err
    coords = tuple(jnp.asarray(c) for c in layout.coords)
    inducing = tuple(None if z is None else jnp.asarray(z) for z in inducing)
    return KroneckerRoute(tuple(kernels), coords, inducing, jitter, layout.n_channels,
                          None if missing is None else jnp.asarray(missing))

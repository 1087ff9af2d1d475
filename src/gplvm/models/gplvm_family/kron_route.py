"""The Kronecker linear-algebra route of the structured GPLVM (seed 003 eqs. 13–28).

:class:`KroneckerRoute` is the family's second route (:mod:`.route`): the same two methods as
:class:`~.route.DenseRoute`, with the data term of :func:`gplvm.objectives.kronecker.data_term`
over one latent factor (from the family's Ψ-statistics of q(X)) and the spatial factors.  The
spatial kernels' trainable values arrive as ``route_u`` (``u["route"]``, one unconstrained
kernel per factor); the pixel coordinates and the fixed spatial inducing inputs are data.
Every (image, pixel) entry must be observed: one complete column group.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gplvm._pytree import pytree_dataclass, static_field
from gplvm.objectives import kronecker
from gplvm.registry import register


class KronParts(NamedTuple):
    """What the Kronecker data term leaves for q(U): the factors and the data (n_ξ, n_s, D)."""

    factors: list
    Y: Any


@register("gplvm.state.KroneckerRoute")
@pytree_dataclass
class KroneckerRoute:
    """K = K_ξ ⊗ K_s,1 [⊗ K_s,2] by per-factor eigendecompositions (seed 003 eqs. 18–28).

    Attributes:
        kernels: one spatial kernel per factor (structure only; values from ``route_u``).
        coords: per factor the pixel coordinates (n_s, d_s), or one axis (n_a,) of a product
            grid (pixels numbered row-major, axis 1 major).
        inducing: per factor fixed spatial inducing inputs, or None for the pixels themselves.
        spatial_jitter: at the pixels a nugget of the spatial kernel, else K_uu,s's jitter.
        n_channels: D, the channels per pixel (Y0's columns are pixel-major, channels last).
    """

    kernels: tuple
    coords: tuple
    inducing: tuple
    spatial_jitter: float = static_field(default=0.0)
    n_channels: int = static_field(default=1)

    def spatial_kernels(self, route_u):
        """The constrained spatial kernels from their unconstrained values."""
        return [k.from_unconstrained(v) for k, v in zip(self.kernels, route_u)]

    def factors(self, psi0, psi1, psi2, Kuu, jitter, route_u):
        """The latent factor (ψ0 and Ψ2 of the one column group), then the spatial ones."""
        latent = kronecker.latent_factor(psi0[0], psi1, psi2[0], Kuu, jitter)
        return [latent] + kronecker.spatial_factors(self.spatial_kernels(route_u), self.coords,
                                                    list(self.inducing), self.spatial_jitter)

    def images(self, Y0):
        """Y0 (n_ξ, n_s·D) as (n_ξ, n_s, D), channels last."""
        return Y0.reshape(Y0.shape[0], -1, self.n_channels)

    def data_term(self, psi0, psi1, psi2, Kuu, Y0, groups, noise_var, jitter,
                  column_weights=None, route_u=None):
        """The Kronecker data term (seed 003 eq. 13 without the KL) and its :class:`KronParts`.

        ``groups`` must be one complete group and ``column_weights`` None: the Kronecker
        algebra needs every entry observed (:func:`kronecker.check_complete`)."""
        del groups, column_weights
        factors = self.factors(psi0, psi1, psi2, Kuu, jitter, route_u)
        Y = self.images(Y0)
        return kronecker.data_term(factors, Y, noise_var), KronParts(factors, Y)

    def optimal_q_u(self, parts: KronParts, groups, noise_var):
        """(Ū, Σ_u as Kronecker maps and a diagonal) at the optimum (seed 003 eq. 11)."""
        del groups
        return kronecker.optimal_q_u(kronecker.posterior(parts.factors, parts.Y, noise_var))

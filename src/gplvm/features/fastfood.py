r"""Fastfood random features (Le, Sarlós & Smola 2013), used by revrand (seed 002 §1.4).

Fastfood replaces the dense Gaussian frequency matrix by blocks

.. math:: V = \frac{1}{\sqrt{d}}\, S H G \Pi H B ,

with d the input dimension padded to a power of two, H the (unnormalised) Walsh–Hadamard
matrix, B a random ±1 diagonal, Π a random permutation, G a Gaussian diagonal and S a diagonal
that gives the rows their lengths.  Since :math:`(HG\Pi HB)(HG\Pi HB)^\top = d\,HG^2H` has
diagonal :math:`d\|g\|^2`, every row of :math:`HG\Pi HB/\sqrt d` has length :math:`\|g\|`;
taking :math:`S_{ii} = s_i/\|g\|` with :math:`s_i` the length of a draw from the kernel's
standard spectral density in d dimensions (χ_d for the RBF) gives each row the length
distribution of a true frequency while its direction is nearly uniform.  Applying V costs
O(d log d) per block with the fast Walsh–Hadamard transform instead of O(d²).  The inputs are
scaled by the length-scales first (x/ℓ), so ARD works and φ stays differentiable in ℓ.
Exact in distribution for the RBF (Gaussian rows); valid for any isotropic stationary kernel
through the radial law of its frequencies.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp

from gplvm._pytree import pytree_dataclass, replace, static_field
from gplvm.features.base import AbstractFeatureMap, Inputs, sin_cos_features
from gplvm.features.fourier import _check_even
from gplvm.kernels.base import AbstractKernel
from gplvm.kernels.stationary import RBF, AbstractStationary
from gplvm.transforms import inverse_softplus, softplus
from gplvm.registry import register
from gplvm.typing import Array, Float, Parameter, PRNGKeyArray, PyTree


def fwht(x: Float[Array, "*batch d"]) -> Float[Array, "*batch d"]:
    """Unnormalised fast Walsh–Hadamard transform along the last axis (length a power of 2)."""
    d = x.shape[-1]
    lead = x.shape[:-1]
    h = 1
    while h < d:
        y = x.reshape(*lead, d // (2 * h), 2, h)
        a, b = y[..., 0, :], y[..., 1, :]
        x = jnp.stack([a + b, a - b], axis=-2).reshape(*lead, d)
        h *= 2
    return x


@partial(jax.jit, static_argnums=(2, 3))
def _draw_blocks(key, unit_kernel, n_blocks: int, d: int):
    """B (signs), Π (permutations), G (Gaussian) and S (row lengths) for ``n_blocks`` blocks."""
    kb, kp, kg, ks = jax.random.split(key, 4)
    B = jnp.where(jax.random.bernoulli(kb, 0.5, (n_blocks, d)), 1.0, -1.0)
    perm = jax.vmap(lambda k: jax.random.permutation(k, d))(jax.random.split(kp, n_blocks))
    G = jax.random.normal(kg, (n_blocks, d))
    radii = jnp.linalg.norm(unit_kernel.sample_standard_frequencies(ks, n_blocks * d, d),
                            axis=1).reshape(n_blocks, d)
    S = radii / jnp.linalg.norm(G, axis=1, keepdims=True)
    return B, perm, G, S


@register("gplvm.features.FastfoodFeatures")
@pytree_dataclass
class FastfoodFeatures(AbstractFeatureMap):
    """[sin, cos] features with Fastfood frequencies.  Build with :meth:`create`."""

    kernel: AbstractStationary
    B: Parameter     # (n_blocks, d) random signs
    perm: Parameter  # (n_blocks, d) permutations (integer)
    G: Parameter     # (n_blocks, d) Gaussian diagonal
    S: Parameter     # (n_blocks, d) row lengths s_i / ||g||
    n_freq: int = static_field(default=0)  # M/2 (the last block may be cut)
    in_dim: int = static_field(default=0)

    @classmethod
    def create(cls, kernel: AbstractKernel | None = None, n_features: int = 100,
               input_dim: int = 1, key: PRNGKeyArray | None = None) -> "FastfoodFeatures":
        kernel = RBF() if kernel is None else kernel
        if not isinstance(kernel, AbstractStationary):
            raise ValueError("Fastfood needs a stationary kernel")
        _check_even(n_features)
        key = jax.random.PRNGKey(0) if key is None else key
        d = 1 << max(0, math.ceil(math.log2(max(input_dim, 1))))
        n_freq = n_features // 2
        n_blocks = -(-n_freq // d)
        B, perm, G, S = _draw_blocks(key, replace(kernel, lengthscale=1.0), n_blocks, d)
        return cls(kernel=kernel, B=B, perm=perm, G=G, S=S, n_freq=n_freq, in_dim=input_dim)

    @property
    def n_features(self) -> int:
        return 2 * int(self.n_freq)

    @property
    def input_dim(self) -> int:
        return int(self.in_dim)

    def projections(self, X: Inputs) -> Float[Array, "N M2"]:
        """X Wᵀ (N × M/2) computed block by block with two Walsh–Hadamard transforms."""
        return _projections(self, self._check_input(X))

    def _projections(self, X: Float[Array, "N Q"]) -> Float[Array, "N M2"]:
        X = X / jnp.asarray(self.kernel.lengthscale, dtype=float)
        d = self.B.shape[1]
        Xp = jnp.pad(X, ((0, 0), (0, d - X.shape[1])))

        def block(B, perm, G, S):
            v = fwht(Xp * B)                 # H B x
            v = v[:, perm]                   # Π
            v = fwht(v * G)                  # H G
            return v * S / math.sqrt(d)      # S / sqrt(d)

        out = jax.vmap(block, out_axes=1)(self.B, self.perm, self.G, self.S)
        return out.reshape(X.shape[0], -1)[:, : self.n_freq]

    def _features(self, X):
        scale = jnp.sqrt(jnp.asarray(self.kernel.variance, dtype=float) / self.n_freq)
        return sin_cos_features(_projections(self, X), scale)

    def unconstrained(self) -> dict[str, Float[Array, "..."]]:
        return {"lengthscale": inverse_softplus(self.kernel.lengthscale),
                "variance": inverse_softplus(self.kernel.variance)}

    def from_unconstrained(self, u: PyTree) -> "FastfoodFeatures":
        kernel = replace(self.kernel, lengthscale=softplus(u["lengthscale"]),
                         variance=softplus(u["variance"]))
        return replace(self, kernel=kernel)


_projections = jax.jit(FastfoodFeatures._projections)

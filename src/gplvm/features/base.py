r"""Feature-map interface (seed 002 §1.4; seed 000 eq. 18).

A feature map φ: R^Q → R^M is an immutable pytree.  ``fmap(X)`` gives Φ (N × M) with
Φ Φᵀ ≈ K.  Its trainable hyper-parameters are exposed as an unconstrained pytree
(``unconstrained()``) and set back with ``from_unconstrained(u)``, so a model can differentiate
an objective through the features with respect to length-scales (and, for A-la-Carte, the
frequencies themselves) while the random draws stay fixed.  ``blocks`` lists the number of
features of each component of a composition, so a linear model can give each basis its own
weight-prior variance (seed 002 eq. 13, a diagonal Λ per basis).
"""

from __future__ import annotations

import jax.numpy as jnp

from gplvm.typing import Array, ArrayLike, Float, PyTree, Real, ScalarLike

#: Inputs of a feature map: N points with the map's ``input_dim`` columns (its own check, a
#: ValueError naming the widths, keeps that size), or N scalars for one input dimension.
Inputs = Real[ArrayLike, "*batch N _Q"] | Real[ArrayLike, " N"]


class AbstractFeatureMap:
    """Maps inputs X (N × input_dim) to features Φ (N × n_features)."""

    @property
    def n_features(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def input_dim(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def blocks(self) -> tuple[int, ...]:
        """Feature counts of the components (one entry for a single map)."""
        return (self.n_features,)

    def __call__(self, X: Inputs) -> Float[Array, "*batch N M"]:
        """Φ = φ(X): one row of ``n_features`` (M) features per input point.

        Args:
            X: ``(N, input_dim)`` inputs (any leading batch axes allowed), or ``(N,)`` when
                ``input_dim`` is 1.

        Raises:
            ValueError: when X does not have ``input_dim`` columns.
        """
        return self._features(self._check_input(X))

    def _features(self, X):  # pragma: no cover - abstract
        raise NotImplementedError

    def unconstrained(self) -> PyTree:
        """Trainable hyper-parameters mapped to the real line."""
        raise NotImplementedError  # pragma: no cover - abstract

    def from_unconstrained(self, u: PyTree) -> "AbstractFeatureMap":
        """A copy with the trainable hyper-parameters set from ``unconstrained()``'s form."""
        raise NotImplementedError  # pragma: no cover - abstract

    def _check_input(self, X: Inputs) -> Float[Array, "*batch N Q"]:
        X = jnp.asarray(X, dtype=float)
        if X.ndim == 1:
            X = X[:, None]
        if X.shape[-1] != self.input_dim:
            raise ValueError(f"this feature map was built for {self.input_dim} input columns "
                             f"but X has {X.shape[-1]}")
        return X


def sin_cos_features(XW: Float[Array, "*batch M2"], scale: ScalarLike
                     ) -> Float[Array, "*batch 2*M2"]:
    """[sin(X Wᵀ), cos(X Wᵀ)] · scale, the [sin, cos] pairs of seed 000 eq. 18.

    With M/2 frequencies and ``scale = sqrt(σ² / (M/2))``,
    φ(x)·φ(x') = σ²/(M/2) Σ_i [sin a_i sin b_i + cos a_i cos b_i] = σ²/(M/2) Σ_i cos(w_i·(x − x')),
    an unbiased Monte Carlo estimate of k(x − x') (Bochner), with no random phase needed.
    """
    return scale * jnp.concatenate([jnp.sin(XW), jnp.cos(XW)], axis=-1)

"""Composition of feature maps (seed 002 §1.4: "a unified feature composition framework").

``Concat([φ1, φ2])`` stacks features side by side, so the implied kernel is k1 + k2 (a sum of
kernels is a concatenation of feature maps); ``ColumnSubset(φ, columns)`` applies a map to some
input columns only, so different inputs can get different kernels.  ``Bias`` is a constant
feature (an intercept with its own prior variance).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp

from gplvm._pytree import pytree_dataclass, replace, static_field
from gplvm.features.base import AbstractFeatureMap
from gplvm.registry import register
from gplvm.typing import PyTree


@register("gplvm.features.Concat")
@pytree_dataclass
class Concat(AbstractFeatureMap):
    """Φ = [φ_1(X), ..., φ_P(X)]; ``blocks`` keeps each part's width."""

    maps: tuple

    @classmethod
    def of(cls, maps: Sequence[AbstractFeatureMap]) -> "Concat":
        maps = tuple(maps)
        if not maps:
            raise ValueError("Concat needs at least one feature map")
        dims = {m.input_dim for m in maps}
        if len(dims) != 1:
            raise ValueError(f"the maps expect different input widths {sorted(dims)}; wrap "
                             f"them in ColumnSubset so each reads its own columns of one X")
        return cls(maps=maps)

    @property
    def n_features(self) -> int:
        return sum(m.n_features for m in self.maps)

    @property
    def input_dim(self) -> int:
        return self.maps[0].input_dim

    @property
    def blocks(self) -> tuple[int, ...]:
        return tuple(b for m in self.maps for b in m.blocks)

    def _features(self, X):
        return jnp.concatenate([m(X) for m in self.maps], axis=-1)

    def unconstrained(self) -> tuple:
        return tuple(m.unconstrained() for m in self.maps)

    def from_unconstrained(self, u: PyTree) -> "Concat":
        return replace(self, maps=tuple(m.from_unconstrained(ui) for m, ui in zip(self.maps, u)))


@register("gplvm.features.ColumnSubset")
@pytree_dataclass
class ColumnSubset(AbstractFeatureMap):
    """φ applied to ``X[:, columns]`` of a wider X with ``total_dim`` columns."""

    inner: AbstractFeatureMap
    columns: tuple = static_field()
    total_dim: int = static_field()

    @classmethod
    def of(cls, inner: AbstractFeatureMap, columns: Sequence[int], total_dim: int
           ) -> "ColumnSubset":
        columns = tuple(int(c) for c in columns)
        if len(columns) != inner.input_dim:
            raise ValueError(f"the inner map expects {inner.input_dim} columns but "
                             f"{len(columns)} were selected")
        if min(columns) < 0 or max(columns) >= total_dim:
            raise ValueError(f"columns {columns} out of range for {total_dim} inputs")
        return cls(inner=inner, columns=columns, total_dim=int(total_dim))

    @property
    def n_features(self) -> int:
        return self.inner.n_features

    @property
    def input_dim(self) -> int:
        return self.total_dim

    @property
    def blocks(self) -> tuple[int, ...]:
        return self.inner.blocks

    def _features(self, X):
        return self.inner(X[..., jnp.asarray(self.columns)])

    def unconstrained(self) -> PyTree:
        return self.inner.unconstrained()

    def from_unconstrained(self, u: PyTree) -> "ColumnSubset":
        return replace(self, inner=self.inner.from_unconstrained(u))


@register("gplvm.features.Bias")
@pytree_dataclass
class Bias(AbstractFeatureMap):
    """A single constant feature equal to 1 (an intercept); nothing trainable."""

    in_dim: int = static_field(default=1)

    @property
    def n_features(self) -> int:
        return 1

    @property
    def input_dim(self) -> int:
        return self.in_dim

    def _features(self, X):
        return jnp.ones(X.shape[:-1] + (1,), dtype=X.dtype)

    def unconstrained(self) -> tuple:
        return ()

    def from_unconstrained(self, u: PyTree) -> "Bias":
        return self

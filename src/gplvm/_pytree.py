"""Immutable dataclasses that are JAX pytrees.

Kernels, feature maps and likelihoods are small frozen dataclasses whose array fields are pytree
leaves (so ``jax.grad`` differentiates through them) and whose configuration fields are static
(``static_field``).  This is the tinygp / equinox pattern (STYLE.md 3, 4) without the dependency.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import jax

T = TypeVar("T")


def static_field(**kwargs: Any) -> Any:
    """A dataclass field that is part of the pytree structure, not a leaf (hashable config)."""
    metadata = dict(kwargs.pop("metadata", {}) or {})
    metadata["static"] = True
    return dataclasses.field(metadata=metadata, **kwargs)


def pytree_dataclass(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen dataclass registered as a JAX pytree.

    Fields declared with :func:`static_field` are metadata; all others are children (leaves or
    nested pytrees).  Unflattening calls the generated ``__init__``, so classes must not
    transform their fields in ``__post_init__`` (JAX passes placeholders during tree ops).
    """
    cls = dataclasses.dataclass(frozen=True, eq=False)(cls)
    fields = dataclasses.fields(cls)
    data = [f.name for f in fields if not f.metadata.get("static", False)]
    meta = [f.name for f in fields if f.metadata.get("static", False)]
    jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)
    return cls


def replace(obj: T, **changes: Any) -> T:
    """A copy of a pytree dataclass with some fields replaced."""
    return dataclasses.replace(obj, **changes)

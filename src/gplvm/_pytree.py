"""Immutable dataclasses that are JAX pytrees.

Kernels, feature maps and likelihoods are small frozen dataclasses whose array fields are pytree
leaves (so ``jax.grad`` differentiates through them) and whose configuration fields are static
(``static_field``).  This is the tinygp / equinox pattern (STYLE.md 3, 4) without the dependency.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

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

    The class itself is part of the auxiliary data.  ``jax.tree_util.register_dataclass`` (JAX
    0.10) gives two classes with the same fields tree structures that compare *equal* though
    their hashes differ (``Poisson()`` and ``Bernoulli()``, ``White(1.0)`` and ``Constant(1.0)``),
    so a jit cache keyed on the structure can, when two hashes share a bucket, run one class's
    compiled code for the other: a Poisson ``sample`` returned Bernoulli draws in a whole-suite
    run (``tests/test_pytree.py``).
    """
    cls = dataclasses.dataclass(frozen=True, eq=False)(cls)
    fields = dataclasses.fields(cls)
    data = tuple(f.name for f in fields if not f.metadata.get("static", False))
    meta = tuple(f.name for f in fields if f.metadata.get("static", False))

    def flatten_with_keys(obj):
        children = [(jax.tree_util.GetAttrKey(name), getattr(obj, name)) for name in data]
        return children, (cls, tuple(getattr(obj, name) for name in meta))

    def flatten(obj):
        return [getattr(obj, name) for name in data], (cls, tuple(getattr(obj, name)
                                                                  for name in meta))

    def unflatten(aux, children):
        return cls(**dict(zip(data, children)), **dict(zip(meta, aux[1])))

    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    return cls


def replace(obj: T, **changes: Any) -> T:
    """A copy of a pytree dataclass with some fields replaced."""
    return dataclasses.replace(obj, **changes)


def to_device(tree: Any) -> Any:
    """``tree`` with every leaf a device array of a strong dtype, copied rather than computed.

    ``jnp.asarray`` of a NumPy array binds a conversion primitive, i.e. compiles (and, in every
    new process, lowers and looks up in the persistent cache) one program per shape and dtype;
    ``jax.device_put`` copies, with the same dtype (canonicalised to float32/int32 without
    x64).  Device arrays pass unchanged (weak types made strong); Python scalars take NumPy's
    dtype, canonicalised as above.
    """
    def one(x):
        if isinstance(x, jax.Array):
            return jnp.asarray(x, dtype=x.dtype) if x.weak_type else x
        if isinstance(x, (np.ndarray, np.generic)):
            return jax.device_put(x)
        return jax.device_put(np.asarray(x, jax.dtypes.canonicalize_dtype(np.result_type(x))))
    return jax.tree_util.tree_map(one, tree)

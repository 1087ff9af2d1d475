"""Immutable dataclasses that are JAX pytrees, as gplvm's kernels, feature maps and likelihoods
are built (STYLE.md 3, 4; the tinygp / equinox pattern without the dependency).

* :func:`pytree_dataclass` -- a frozen dataclass registered as a pytree: its fields are leaves
  (``jax.grad`` differentiates through them) except those declared with
* :func:`static_field` -- configuration, part of the tree's structure (hashable).
* :func:`replace` -- a copy with some fields replaced.

For code outside the package (a benchmark's own likelihood, a user's kernel); the
implementation and its notes (why the class is part of the structure) are in
:mod:`gplvm._pytree`.
"""

from gplvm._pytree import pytree_dataclass, replace, static_field

__all__ = ["pytree_dataclass", "replace", "static_field"]

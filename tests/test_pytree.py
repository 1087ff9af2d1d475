"""Pytree dataclasses (gplvm._pytree): the tree structure identifies the class.

JAX's jit caches compiled code under the tree structure of its arguments; a structure that
compares equal for two classes lets one class's compiled code run for the other.  With
``jax.tree_util.register_dataclass`` (JAX 0.10) ``Poisson()`` and ``Bernoulli()`` had equal
structures (with different hashes), and a whole-suite run once returned Bernoulli draws from
``Poisson.sample``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gplvm._pytree import pytree_dataclass, static_field
from gplvm.kernels import RBF, Constant, White
from gplvm.likelihoods import Bernoulli, Poisson


def test_classes_with_the_same_fields_have_different_tree_structures():
    for a, b in [(Poisson(), Bernoulli()), (White(1.0), Constant(1.0))]:
        assert jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(b)
    assert jax.tree_util.tree_structure(RBF(1.0, 2.0)) == jax.tree_util.tree_structure(
        RBF(3.0, 4.0))


def test_round_trip_keeps_class_static_fields_and_key_paths():
    @pytree_dataclass
    class Box:
        value: jnp.ndarray
        label: str = static_field(default="a")

    box = Box(jnp.arange(3.0), label="b")
    doubled = jax.tree_util.tree_map(lambda x: 2 * x, box)
    assert type(doubled) is Box and doubled.label == "b"
    np.testing.assert_array_equal(doubled.value, [0.0, 2.0, 4.0])
    (path, leaf), = jax.tree_util.tree_flatten_with_path(box)[0]
    assert path == (jax.tree_util.GetAttrKey("value"),) and leaf is box.value
    other = Box(jnp.arange(3.0), label="c")        # a static field is part of the structure
    assert jax.tree_util.tree_structure(box) != jax.tree_util.tree_structure(other)
    assert float(jax.jit(lambda b: jnp.sum(b.value))(box)) == 3.0

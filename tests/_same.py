"""``assert_same``: two values equal bit for bit and of the same types, recursively -- what a
saved and loaded model must give back (tests/io/test_io.py, tests/test_properties.py)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np


def assert_same(a, b, where="model"):
    """Equal values of equal types, recursively (arrays: dtype, shape and every bit)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, jax.Array) and jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
        assert_same(jax.random.key_data(a), jax.random.key_data(b), where)
        assert jax.random.key_impl(a) == jax.random.key_impl(b), where
    elif isinstance(a, (np.ndarray, np.generic, jax.Array)):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b), where
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), where   # −0.0, NaN payloads
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            assert_same(u, v, f"{where}[{i}]")
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where       # JSON keeps no NaN payload of a Python float
    elif isinstance(a, float):
        assert np.float64(a).tobytes() == np.float64(b).tobytes(), f"{where}: {a!r} != {b!r}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"

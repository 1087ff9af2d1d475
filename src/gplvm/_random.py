"""``random_state`` → ``jax.random`` key (API.md: an int or a key; same seed, same result)."""

from __future__ import annotations

import jax
import numpy as np


def as_key(random_state) -> jax.Array:
    """An int seeds a new key; a key is used as is; None draws a seed from NumPy's global state."""
    if random_state is None:
        return jax.random.PRNGKey(int(np.random.randint(0, 2**31 - 1)))
    if isinstance(random_state, (int, np.integer)):
        return jax.random.PRNGKey(int(random_state))
    arr = jax.numpy.asarray(random_state)
    if arr.dtype == jax.numpy.uint32 and arr.shape == (2,):
        return arr
    if jax.dtypes.issubdtype(arr.dtype, jax.dtypes.prng_key):
        return arr
    raise ValueError(f"random_state must be an int, a jax.random key or None; got "
                     f"{type(random_state).__name__}")

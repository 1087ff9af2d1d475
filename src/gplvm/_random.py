"""``random_state`` → ``jax.random`` key (API.md: an int or a key; same seed, same result)."""

from __future__ import annotations

import numbers

import jax
import numpy as np

#: seeds are non-negative integers below 2**63 (JAX's largest 64-bit seed)
MAX_SEED = 2**63 - 1


def _is_key(value) -> bool:
    """A ``jax.random`` key: a raw uint32 (2,) key or a typed key (no computation)."""
    dtype = getattr(value, "dtype", None)
    if dtype is None or not hasattr(value, "shape"):
        return False
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return True
    return np.dtype(dtype) == np.uint32 and tuple(value.shape) == (2,)


def seed_problem(random_state) -> str | None:
    """What is wrong with ``random_state`` (``None`` when it is a valid seed, key or None).

    Checked without any JAX computation, so estimators can call it before fitting.
    """
    if random_state is None or _is_key(random_state):
        return None
    if isinstance(random_state, (bool, np.bool_)):
        return "a bool is not a seed"
    if isinstance(random_state, numbers.Integral):
        if 0 <= int(random_state) <= MAX_SEED:
            return None
        return "a seed must be a non-negative integer at most 2**63 - 1"
    if isinstance(random_state, (np.random.RandomState, np.random.Generator)):
        return (f"NumPy's {type(random_state).__name__} is not supported (JAX draws its own "
                f"random numbers)")
    if isinstance(random_state, numbers.Real):
        return "a seed must be an integer, not a float"
    return f"{type(random_state).__name__} is neither an integer seed nor a jax.random key"


def check_random_state(random_state, name: str = "random_state", owner: str = "") -> None:
    """Raise a ``ValueError`` naming ``name`` when ``random_state`` is not a seed, key or None."""
    problem = seed_problem(random_state)
    if problem is not None:
        shown = repr(random_state)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        prefix = f"{owner}: " if owner else ""
        raise ValueError(f"{prefix}{name}={shown} is not valid: {problem}; pass a "
                         f"non-negative int (e.g. {name}=0), a jax.random key "
                         f"(jax.random.key(0)) or None for a fresh seed")


def as_key(random_state) -> jax.Array:
    """An int seeds a new key; a key is used as is; None draws a seed from NumPy's global state.

    Raises:
        ValueError: anything else (a string, a float, a negative int, NumPy's RandomState),
            before JAX sees it.
    """
    check_random_state(random_state)
    if random_state is None:
        return jax.random.PRNGKey(int(np.random.randint(0, 2**31 - 1)))
    if _is_key(random_state):
        return random_state
    return jax.random.PRNGKey(int(random_state))

"""Seeds and keys: how every ``random_state`` of gplvm becomes a ``jax.random`` key (API.md: an
int or a key; the same seed gives the same result).

* :func:`as_key` -- an int seeds a new key, a key is used as is, ``None`` draws a fresh seed.
* :func:`check_random_state` -- a ``ValueError`` that names the fix for anything else (a
  float, a negative int, NumPy's ``RandomState``), raised before JAX sees it.

The estimators call these through :mod:`gplvm._random`; scripts and benchmarks that turn their
own ``--seed`` into a key the same way import them from here.
"""

from gplvm._random import MAX_SEED, as_key, check_random_state

__all__ = ["MAX_SEED", "as_key", "check_random_state"]

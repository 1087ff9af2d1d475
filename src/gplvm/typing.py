"""Type aliases for shape-annotated signatures (STYLE.md 7; after GPJax's ``typing.py``).

Public functions state the shapes of their arrays with jaxtyping in the notation of DESIGN.md:
``Float[Array, "N Q"]`` for the latent points X (or ``X_mean``, ``X_var``), ``"M Q"`` for the
inducing inputs Z, ``"N M"`` for psi1 and ``phi``, ``"M M"`` for psi2 and Kuu, ``"N D"`` for Y,
``"M2 Q"`` for the frequencies W.  A dimension name binds across the arguments and the return
value of one call, so ``k(X: "N Q", Z: "M Q") -> "N M"`` says that X and Z share Q.

The annotations are checked at run time in the test suite only: ``tests/conftest.py`` installs
jaxtyping's import hook with beartype for the building-block packages (see
``tests/test_typing.py``).  In users' code nothing is checked and they cost nothing.  Inside
``jax.jit`` the checks run once, at trace time, on the abstract shapes.

Two kinds of signature:

* **Core** functions take JAX arrays that are already valid and say so strictly,
  ``Float[Array, "N Q"]``.
* **Boundary** functions take what a user passes, convert it and validate it themselves with a
  ``ValueError`` that names the fix (STYLE.md 9).  Their inputs are annotated no more strictly
  than that validation: :data:`UserArrayLike` for anything NumPy converts, ``ArrayLike`` (NumPy
  or JAX arrays and scalars) with a dimension written ``_N`` (jaxtyping's anonymous, unchecked
  dimension) where the function itself checks that size, so that under the test hook a user's
  mistake still meets the ``ValueError`` a user sees, not a type-check error.  Their outputs,
  which they build, carry checked dimension names.
"""

from typing import Any, TypeAlias

import jax
import numpy.typing as npt
from jaxtyping import (
    ArrayLike,
    Bool,
    Float,
    Int,
    Integer,
    Num,
    PRNGKeyArray,
    Real,
    Shaped,
    UInt32,
)

__all__ = [
    "Array", "ArrayLike", "Bool", "Float", "Int", "Integer", "Num", "PRNGKeyArray", "Parameter",
    "PyTree", "Real", "ScalarFloat", "ScalarInt", "ScalarLike", "Shaped", "UInt32",
    "UserArrayLike",
]

#: A JAX array (``jax.Array``; tracers inside ``jit`` are instances too).
Array: TypeAlias = jax.Array

#: Anything ``numpy.asarray`` turns into an array: arrays, nested lists, scalars.  For the inputs
#: of boundary functions that convert and validate their argument themselves.
UserArrayLike: TypeAlias = npt.ArrayLike

#: A number: a Python or NumPy scalar, or a 0-d NumPy or JAX array (real or integer).
ScalarLike: TypeAlias = Real[ArrayLike, ""]

#: A 0-d float JAX array (what a reduction to one number returns).
ScalarFloat: TypeAlias = Float[Array, ""]

#: A 0-d integer JAX array.
ScalarInt: TypeAlias = Int[Array, ""]

#: Any pytree of arrays (e.g. the unconstrained parameters of a kernel or feature map).
PyTree: TypeAlias = Any

#: The type of a hyper-parameter field of a pytree dataclass (a positive float, or a ``(Q,)``
#: array for ARD length-scales).  Deliberately ``Any``: JAX rebuilds a pytree through its
#: ``__init__`` with tracers, ``None`` axis specifications, sentinel objects or
#: ``ShapeDtypeStruct`` leaves while it transforms it, so a checked field type would break
#: ``vmap`` and ``eval_shape``.
Parameter: TypeAlias = Any

"""Numerical configuration applied once at import (DESIGN.md, "Numbers and numerics").

float64 is the library default: the collapsed bounds, Woodbury identities and Cholesky factors
used throughout lose several digits in float32.  Import this module (``gplvm`` does) before
any array is created.
"""

import jax

jax.config.update("jax_enable_x64", True)

"""Kernel expectations under a diagonal Gaussian q(X): the psi-statistics (issue 4, item 1).

``psi_statistics(kernel, Z, X_mean, X_var, rule=None, weights=None)`` dispatches on the kernel
type: closed forms for RBF, Linear, White, Constant and their sums (seed 001 §C), and for any
kernel the unscented transform, Gauss–Hermite or Monte Carlo (seed 004 §B).
"""

from gplvm.expectations.analytic import has_analytic
from gplvm.expectations.psi import psi_statistics
from gplvm.expectations.quadrature import gauss_hermite_nodes, unscented_nodes
from gplvm.expectations.rules import (
    AbstractRule,
    Analytic,
    GaussHermite,
    MonteCarlo,
    Unscented,
    resolve_rule,
)

__all__ = [
    "psi_statistics", "has_analytic", "AbstractRule", "Analytic", "Unscented", "GaussHermite",
    "MonteCarlo", "resolve_rule", "gauss_hermite_nodes", "unscented_nodes",
]

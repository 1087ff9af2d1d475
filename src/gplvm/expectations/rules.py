r"""How a psi-statistic is computed: the rule objects (STYLE.md 5).

A rule says *how* an expectation under
:math:`q(\mathbf x_n) = \mathcal N(\mu_n, \mathrm{diag}\,S_n)` is taken;
:func:`gplvm.expectations.psi_statistics` says *what* is computed.  Rules are small immutable
pytrees, so a jitted bound can take one as an argument:

* :class:`Analytic` — closed forms (seed 001 §C for the RBF kernel; Linear, White, Constant and
  sums of them).  Refuses kernels without one.
* :class:`Unscented` — 2Q sigma points :math:`\mu_n \pm \sqrt{Q S_{nq}}\, e_q` with equal weights
  1/(2Q) (seed 004 §B.1).  Exact for polynomials of degree ≤ 3 in x.
* :class:`GaussHermite` — the tensor grid of ``n_points`` Gauss–Hermite nodes per dimension
  (seed 004 §B.2); ``n_points ** Q`` nodes per point.
* :class:`MonteCarlo` — ``n_samples`` reparameterised draws per point (seed 004 §B.3).

Every rule has a static ``chunk_size`` (points of q(X) processed at once; ``None`` chooses it
from a memory budget, see :mod:`gplvm.expectations._chunks`).
"""

from __future__ import annotations

from typing import Any, Optional, Union

from gplvm._pytree import pytree_dataclass, static_field
from gplvm.registry import register


class AbstractRule:
    """A way to take expectations of kernel values under a diagonal Gaussian."""


@register("gplvm.expectations.Analytic")
@pytree_dataclass
class Analytic(AbstractRule):
    """Closed-form psi-statistics (RBF, Linear, White, Constant and their sums)."""

    chunk_size: Optional[int] = static_field(default=None)


@register("gplvm.expectations.Unscented")
@pytree_dataclass
class Unscented(AbstractRule):
    """The symmetric unscented transform of seed 004 §B.1 (2Q sigma points, no tuning knob)."""

    chunk_size: Optional[int] = static_field(default=None)


@register("gplvm.expectations.GaussHermite")
@pytree_dataclass
class GaussHermite(AbstractRule):
    """Tensor-product Gauss–Hermite quadrature with ``n_points`` nodes per latent dimension.

    The cost grows as ``n_points ** Q``; beyond Q ≈ 4 prefer :class:`Unscented`.
    """

    n_points: int = static_field(default=5)
    chunk_size: Optional[int] = static_field(default=None)


@register("gplvm.expectations.MonteCarlo")
@pytree_dataclass
class MonteCarlo(AbstractRule):
    """``n_samples`` reparameterised draws per point, x = μ_n + √S_n ⊙ ε with ε ~ N(0, I).

    ``key`` is a pytree leaf (a ``jax.random`` key); ``None`` means ``jax.random.PRNGKey(0)``.
    Point n draws from ``fold_in(key, n)``, so the result does not depend on ``chunk_size``, and
    a fixed key gives common random numbers across optimisation steps (a smooth surrogate).
    """

    n_samples: int = static_field(default=100)
    key: Any = None
    chunk_size: Optional[int] = static_field(default=None)


RuleLike = Union[None, str, AbstractRule]

_BY_NAME = {
    "analytic": Analytic,
    "unscented": Unscented,
    "gauss_hermite": GaussHermite,
    "monte_carlo": MonteCarlo,
}


def resolve_rule(rule: RuleLike) -> Optional[AbstractRule]:
    """A rule object from ``None`` (kept: "analytic where it exists"), a name, or a rule."""
    if rule is None or isinstance(rule, AbstractRule):
        return rule
    if isinstance(rule, str):
        key = rule.lower().replace("-", "_").replace(" ", "_")
        if key in _BY_NAME:
            return _BY_NAME[key]()
        raise ValueError(f"unknown psi-statistic rule {rule!r}; use one of "
                         f"{sorted(_BY_NAME)} or a rule object such as GaussHermite(n_points=7)")
    raise TypeError(f"rule must be None, a string or a rule object (Analytic(), Unscented(), "
                    f"GaussHermite(...), MonteCarlo(...)); got {type(rule).__name__}")

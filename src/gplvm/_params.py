"""Declarative checks of every estimator's constructor arguments (issue 16, item 1): the
vocabulary of rules.

Each estimator class declares ``_parameter_constraints``, one :class:`Rule` per constructor
argument (scikit-learn's ``_parameter_constraints`` style, issue 33), built from the rules and
rule makers here (:func:`integer`, :func:`real`, :func:`optional`, :func:`choice`,
:func:`pair`, ``POSITIVE_INT``, ``FLAG``, ...; :data:`GPLVM_FAMILY` for the arguments the GPLVM
family shares), and checks across arguments in ``_parameter_relations``.  :func:`check_params`
runs them at the start of ``fit`` (and :func:`check_argument` on the arguments of
``sample``), before any computation, and raises a ``ValueError`` that names the estimator, the
argument, the value received, what is wrong and the fix (STYLE.md 9).
``tests/models/test_bad_input_matrix.py`` checks that every constructor argument of every estimator
has a rule.
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
import os
from typing import Any, Callable, Optional

import jax
import numpy as np

from gplvm._random import seed_problem
from gplvm.expectations import resolve_rule
from gplvm.features import AbstractFeatureMap
from gplvm.kernels import AbstractKernel, AbstractStationary
from gplvm.likelihoods import get_likelihood


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _as_real(value) -> Optional[float]:
    """The value as a float when it is a real number (a 0-d array included; bools are not)."""
    if isinstance(value, (bool, np.bool_, str)) or np.ndim(value) != 0:
        return None
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        return None
    return float(arr) if arr.dtype.kind in "iuf" else None


@dataclasses.dataclass(frozen=True)
class Rule:
    """What one argument must be: ``expected`` (words) and ``problem(value, estimator)``, the
    reason a value fails (``None`` when it is fine); ``example`` is a valid value for the fix
    when the default is ``None`` or is not itself an example."""

    expected: str
    problem: Callable[[Any, Any], Optional[str]]
    example: Optional[str] = None


def integer(low: int, even: bool = False) -> Rule:
    def problem(value, est):
        if not _is_int(value):
            return f"{type(value).__name__} is not an integer"
        if value < low:
            return f"{value} is below {low}"
        return "it is odd" if even and value % 2 else None
    what = "a positive integer" if low == 1 else f"an integer >= {low}"
    return Rule(f"an even integer >= {low}" if even else what, problem)


def real(low: float, high: float = np.inf, closed_low: bool = False) -> Rule:
    def problem(value, est):
        x = _as_real(value)
        if x is None:
            return f"{type(value).__name__} is not a real number"
        if not np.isfinite(x):
            return "it is not finite"
        if x < low or (x == low and not closed_low):
            return f"{x:g} is {'negative' if closed_low else 'not positive'}" if low == 0 \
                else f"{x:g} is below {low:g}"
        return f"{x:g} is above {high:g}" if x > high else None
    if high < np.inf:
        what = f"a number in ({low:g}, {high:g}]"
    else:
        what = "a non-negative number" if closed_low and low == 0 else "a positive number"
    return Rule(what, problem)


POSITIVE_INT, NON_NEGATIVE_INT = integer(1), integer(0)
POSITIVE, NON_NEGATIVE, FRACTION = real(0.0), real(0.0, closed_low=True), real(0.0, 1.0)


def optional(rule: Rule, example: Optional[str] = None) -> Rule:
    return Rule(rule.expected + " or None",
                lambda value, est: None if value is None else rule.problem(value, est),
                example or rule.example)


def choice(*options: str) -> Rule:
    def problem(value, est):
        return None if isinstance(value, str) and value in options else "not an option"
    return Rule("one of " + ", ".join(repr(o) for o in options), problem)


def _flag(value, est):
    ok = isinstance(value, (bool, np.bool_)) or (_is_int(value) and value in (0, 1))
    return None if ok else f"{type(value).__name__} is not a bool"


FLAG = Rule("True or False", _flag)
RANDOM_STATE = Rule("a non-negative int, a jax.random key or None",
                    lambda value, est: seed_problem(value))


# ------------------------------------------------------------------ rules on gplvm objects
def _kernel_problem(kernel, ard_dim: Optional[int], stationary: bool) -> Optional[str]:
    """Why ``kernel`` is not a usable gplvm kernel: not a kernel, a non-positive or
    non-finite hyper-parameter, or a length-scale of neither shape () nor (ard_dim,)."""
    if isinstance(kernel, str):
        return "a string names no kernel"
    if not isinstance(kernel, AbstractKernel):
        return f"{type(kernel).__name__} is not a gplvm.kernels object"
    if stationary and not isinstance(kernel, AbstractStationary):
        return (f"{type(kernel).__name__} is not stationary, so it has no spectral density to "
                f"draw random frequencies from")
    for field, leaf in _kernel_leaves(kernel):
        arr = np.asarray(leaf, dtype=float)
        if not np.all(np.isfinite(arr) & (arr > 0)):
            return f"its {field} {_shown(leaf)} is not positive and finite"
        if field.endswith("lengthscale") and ard_dim is not None and arr.shape not in (
                (), (ard_dim,)):
            return (f"its lengthscale has shape {arr.shape}, but the latent space has "
                    f"n_components={ard_dim} dimensions: give one length-scale or {ard_dim}")
    return None


def _kernel_leaves(kernel):
    """(path, value) of every hyper-parameter (pytree leaf) of a kernel, sums and products
    included; static fields are not leaves."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(kernel)
    for path, leaf in leaves:
        yield jax.tree_util.keystr(path).lstrip("."), leaf


def _kernel(ard: bool, stationary: bool = False, example: str = "None (the default)") -> Rule:
    def problem(value, est):
        if value is None:
            return None
        Q = getattr(est, "n_components", None) if ard else None
        return _kernel_problem(value, Q if _is_int(Q) else None, stationary)
    return Rule("a gplvm.kernels object or None", problem, example)


LATENT_KERNEL = _kernel(True, example="gplvm.kernels.RBF(lengthscale=np.ones(n_components))")
TIME_KERNEL = _kernel(False, example="gplvm.kernels.RBF(lengthscale=1.0)")
STATIONARY_KERNEL = _kernel(True, stationary=True, example="gplvm.kernels.RBF()")


def _spatial_kernel(value, est):
    kernels = value if isinstance(value, tuple) else (value,)
    problems = [_kernel_problem(k, None, False) for k in kernels if k is not None]
    return next((p for p in problems if p), None)


SPATIAL_KERNEL = Rule("None, a gplvm.kernels object or a tuple of one per image axis",
                      _spatial_kernel, "gplvm.kernels.Matern32()")


def _numeric(value, ndims) -> Optional[str]:
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        return f"{type(value).__name__} is not an array of numbers"
    if arr.dtype.kind not in "iuf":
        return f"its entries ({arr.dtype}) are not real numbers"
    if arr.ndim not in ndims:
        return f"it has {arr.ndim} dimensions"
    return None if np.all(np.isfinite(arr)) else "it has non-finite entries"


def _coordinates(value, est):
    """None, a tuple of 1-D axis coordinates, or an array of point coordinates."""
    if value is None:
        return None
    if isinstance(value, tuple):
        return next((p for p in (_numeric(a, (1,)) for a in value) if p), None)
    return _numeric(value, (1, 2))


GRID = Rule("None, a tuple (rows, cols) of axis coordinates or an (n_pixels, d_s) array",
            _coordinates)
SPATIAL_INDUCING = Rule("None, a tuple of 1-D arrays (one per image axis) or an (m_s, d_s) "
                        "array", _coordinates)


def _psi_rule(value, est):
    try:
        resolve_rule(value)
    except (TypeError, ValueError) as err:
        return str(err)
    return None


PSI_RULE = Rule("None, 'analytic', 'unscented', 'gauss_hermite', 'monte_carlo' or a rule "
                "object", _psi_rule)


def _likelihood(value, est):
    try:
        get_likelihood(value)
    except ValueError as err:
        return str(err)
    return None


LIKELIHOOD = Rule("a likelihood name (e.g. 'poisson') or a gplvm.likelihoods object",
                  _likelihood)


def _features(value, est):
    if value is None or isinstance(value, AbstractFeatureMap):
        return None
    return f"{type(value).__name__} is not a gplvm.features map"


FEATURES = Rule("a gplvm.features map or None (random Fourier features)", _features)


def _prior_var(value, est):
    if value is None:
        return None
    problem = _numeric(value, (0, 1))
    if problem is None and not np.all(np.asarray(value, dtype=float) > 0):
        return "it is not positive"
    return problem


PRIOR_VAR = Rule("None, a positive number or one positive number per basis block",
                 _prior_var, "1.0")
MAP_SWEEPS = Rule("'auto' or an integer >= 0", lambda value, est: None if value == "auto"
                  and isinstance(value, str) else NON_NEGATIVE_INT.problem(value, est))
N_ITER_AUTO = Rule("'auto' or a positive integer", lambda value, est: None if value == "auto"
                   and isinstance(value, str) else POSITIVE_INT.problem(value, est))
CHECKPOINT = Rule("None or a file path", lambda value, est: None if value is None or isinstance(
    value, (str, os.PathLike)) else f"{type(value).__name__} is not a path", "'fit.npz'")


def pair(meaning: str, both_positive: bool) -> Rule:
    """Two finite numbers: both positive, or the second positive."""
    def problem(value, est):
        try:
            values = tuple(float(v) for v in value)
        except (TypeError, ValueError):
            return "it is not two numbers"
        if len(values) != 2 or not all(np.isfinite(values)):
            return "it is not two finite numbers"
        positive = values if both_positive else values[1:]
        return None if all(v > 0 for v in positive) else f"{values} has a non-positive entry"
    return Rule(f"two numbers {meaning}, " + ("both positive" if both_positive
                                              else "the second positive"), problem)


def _devices_problem(value, est):
    from gplvm.inference.sharding import devices_problem   # jax.sharding only when asked
    return devices_problem(value)


DEVICES = Rule("None, a device count from 1 to len(jax.devices()), a non-empty list of "
               "jax.Device or a jax.sharding.Mesh", _devices_problem, "2")

N_COMPONENTS_AUTO = Rule("'auto' or a positive integer", lambda value, est: None
                         if isinstance(value, str) and value == "auto"
                         else POSITIVE_INT.problem(value, est))

GPLVM_FAMILY = {
    "n_components": N_COMPONENTS_AUTO, "n_inducing": POSITIVE_INT, "kernel": LATENT_KERNEL,
    "psi_rule": PSI_RULE, "standardize": FLAG, "max_iter": POSITIVE_INT,
    "init_X_var": optional(POSITIVE, "0.1"), "init_noise_fraction": FRACTION,
    "time_kernel": TIME_KERNEL, "transform_max_iter": POSITIVE_INT,
    "random_state": RANDOM_STATE, "progress": FLAG,
    "checkpoint": CHECKPOINT, "checkpoint_interval": NON_NEGATIVE,
}

def fixed_frequencies_need_a_fixed_kernel(est) -> Optional[tuple[str, str]]:
    """The RFLVM: ``frequencies='fixed'`` holds W at a draw from a fixed kernel's spectral
    density; under the DP mixture (``learn_kernel=True``) W is what the kernel learns."""
    if est.frequencies == "sampled" or not est.learn_kernel:
        return None
    return "frequencies", ("frequencies='fixed' holds W at a draw from a fixed kernel's "
                           "spectral density, but learn_kernel=True learns the kernel through "
                           "W; set learn_kernel=False (and kernel=...), or frequencies='sampled'")


def burn_in_below_n_iter(est) -> Optional[tuple[str, str]]:
    if isinstance(est.n_iter, str):            # 'auto' (the rule of n_iter passed)
        if est.burn_in < est.max_iter:
            return None
        return "burn_in", (f"burn_in={est.burn_in} must be below max_iter={est.max_iter} (the "
                           f"most sweeps n_iter='auto' runs); raise max_iter")
    if est.burn_in < est.n_iter:
        return None
    return "burn_in", (f"burn_in={est.burn_in} must be below n_iter={est.n_iter}; keep some "
                       f"sweeps after burn-in (paper: n_iter=2000, burn_in=1000)")




def _fix(owner, name: str, rule: Rule) -> str:
    """A valid value to suggest: the rule's example, else the estimator's default."""
    if rule.example is not None:
        return f"e.g. {name}={rule.example}"
    if isinstance(owner, str):
        return ""
    default = inspect.signature(type(owner)).parameters[name].default
    return f"e.g. {name}={default!r} (the default)"


def _message(owner, name: str, value, problem: str, rule: Rule) -> str:
    label = owner if isinstance(owner, str) else type(owner).__name__
    fix = _fix(owner, name, rule)
    return (f"{label}: {name}={_shown(value)} is not valid ({problem}); it must be "
            f"{rule.expected}" + (f": pass {fix}" if fix else ""))


def check_params(estimator) -> None:
    """Check every constructor argument of ``estimator`` against its class's
    ``_parameter_constraints`` (argument → :class:`Rule`), then the checks across arguments in
    ``_parameter_relations`` (each ``relation(estimator)`` → (argument, message) or None); no
    computation.

    Raises:
        ValueError: naming the estimator, the argument, the value, what is wrong and the fix.
    """
    name = type(estimator).__name__
    for arg, rule in type(estimator)._parameter_constraints.items():
        value = getattr(estimator, arg)
        problem = rule.problem(value, estimator)
        if problem is not None:
            raise ValueError(_message(estimator, arg, value, problem, rule))
    for relation in getattr(type(estimator), "_parameter_relations", ()):
        found = relation(estimator)
        if found is not None:
            raise ValueError(f"{name}: {found[1]}")


def check_batch_size(batch_size, n_rows: int, owner: str = "BayesianGPLVM") -> None:
    """A minibatch is a subset of the rows: ``batch_size`` (when given) must be at most N."""
    if batch_size is not None and batch_size > n_rows:
        raise ValueError(f"{owner}: batch_size={batch_size} exceeds the {n_rows} rows of Y; a "
                         f"minibatch is a subset of the rows: pass batch_size={n_rows} or fewer "
                         f"(batch_size=None chooses min(256, N))")


def check_argument(owner: str, name: str, value, rule: Rule, example: str = "1") -> None:
    """Check one argument of a method (e.g. ``sample(n_samples=...)``) against ``rule``;
    ``example`` is the valid value the message suggests."""
    problem = rule.problem(value, None)
    if problem is not None:
        rule = Rule(rule.expected, rule.problem, rule.example or example)
        raise ValueError(_message(owner, name, value, problem, rule))

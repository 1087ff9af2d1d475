"""The shape annotations are checked in the test run (STYLE.md 7; :mod:`gplvm.typing`).

tests/conftest.py installs jaxtyping's import hook (with beartype) for the building-block
packages before gplvm is imported.  These tests fail loudly if the hook is removed or stops
instrumenting a module: every function defined in those packages must be wrapped, and calls
whose shapes contradict the annotations must raise jaxtyping's ``TypeCheckError`` (which a
mismatch found by JAX itself, a plain ``TypeError``, is not).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import TYPECHECKED
from jaxtyping import TypeCheckError

from gplvm.data.loaders import Dataset
from gplvm.expectations import psi_statistics
from gplvm.expectations.analytic import analytic_psi
from gplvm.expectations.quadrature import quadrature_psi
from gplvm.expectations.rules import Unscented
from gplvm.features import RandomFourierFeatures
from gplvm.kernels import RBF, AbstractKernel, Linear, Matern32
from gplvm.likelihoods import Multinomial, Poisson
from gplvm.samplers import polya_gamma


def _is_checked(fn) -> bool:
    """Whether ``fn`` is jaxtyping's wrapper (its code lives in the jaxtyping package)."""
    code = getattr(fn, "__code__", None)
    return code is not None and "jaxtyping" in Path(code.co_filename).parts


def _source_functions(module):
    """The functions and methods written in ``module``'s own source file (no lambdas)."""
    def written_here(fn):
        return (inspect.isfunction(fn) and fn.__name__ != "<lambda>"
                and inspect.unwrap(fn).__code__.co_filename == module.__file__)

    for name, obj in vars(module).items():
        if written_here(obj):
            yield name, obj
        elif inspect.isclass(obj) and obj.__module__ == module.__name__:
            for attr, member in vars(obj).items():
                if isinstance(member, property):
                    member = member.fget
                elif isinstance(member, (classmethod, staticmethod)):
                    member = member.__func__
                if written_here(member):
                    yield f"{name}.{attr}", member


def _modules_of(name: str) -> list:
    """The module ``name`` and, for a package, every module under it (imported here, through
    the import hook that conftest.py installed)."""
    module = importlib.import_module(name)
    found = [module]
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), prefix=name + "."):
        found.append(importlib.import_module(info.name))
    return found


def test_every_function_of_the_checked_packages_is_instrumented():
    modules = [m for name in TYPECHECKED for m in _modules_of(name)]
    assert len(modules) > 30
    unchecked, n_checked = [], 0
    for module in modules:
        for name, fn in _source_functions(module):
            if _is_checked(fn):
                n_checked += 1
            else:
                unchecked.append(f"{module.__name__}.{name}")
    assert not unchecked, f"not instrumented by jaxtyping's import hook: {unchecked}"
    assert n_checked > 50


def test_public_entry_points_are_instrumented():
    assert _is_checked(AbstractKernel.__call__) and _is_checked(AbstractKernel.diag)
    assert _is_checked(psi_statistics) and _is_checked(analytic_psi)
    assert _is_checked(RandomFourierFeatures.__call__)


def test_kernel_rejects_inducing_inputs_of_another_width():
    X, Z = np.zeros((5, 2)), np.zeros((3, 3))          # Z must be (M, Q) with X's Q = 2
    for kernel in (RBF(), Matern32(), RBF() + Matern32()):
        with pytest.raises(TypeCheckError, match="X2"):
            kernel(X, Z)
        assert kernel(X, Z[:, :2]).shape == (5, 3)


def test_checks_run_at_trace_time_under_jit():
    k = RBF(lengthscale=jnp.ones(2))
    f = jax.jit(lambda X, Z: k(X, Z))
    assert f(jnp.zeros((5, 2)), jnp.zeros((3, 2))).shape == (5, 3)
    with pytest.raises(TypeCheckError):
        f(jnp.zeros((5, 2)), jnp.zeros((3, 3)))


def test_diag_of_one_dimensional_inputs_is_the_diagonal_of_the_gram_matrix():
    # Found by the annotations: diag read a 1-D X as one point of N dimensions (one value).
    x = np.linspace(-1.0, 1.0, 5)
    for kernel in (RBF(), Linear(variance=0.7), RBF() + Linear()):
        np.testing.assert_allclose(kernel.diag(x), np.diag(np.asarray(kernel(x))), rtol=1e-12)


def test_kernel_rejects_a_wrong_output_shape():
    class Broken(AbstractKernel):          # a cross-covariance of the wrong size
        def _cross(self, X1, X2):
            return jnp.zeros((X1.shape[0], X2.shape[0] + 1))

    with pytest.raises(TypeCheckError, match="return value"):
        Broken()(np.zeros((4, 1)), np.zeros((2, 1)))


def test_psi_core_rejects_variances_of_another_shape():
    rng = np.random.default_rng(0)
    Z, mu = jnp.asarray(rng.normal(size=(4, 2))), jnp.asarray(rng.normal(size=(6, 2)))
    S, W = jnp.full((6, 2), 0.3), jnp.ones((1, 6))
    assert analytic_psi(RBF(), Z, mu, S, W)[2].shape == (1, 4, 4)
    with pytest.raises(TypeCheckError, match="S"):
        analytic_psi(RBF(), Z, mu, S[:, :1], W)        # X_var must have X_mean's shape
    with pytest.raises(TypeCheckError, match="S"):
        quadrature_psi(Matern32(), Z, mu, S[:5], W, Unscented())
    with pytest.raises(TypeCheckError, match="W"):
        analytic_psi(RBF(), Z, mu, S, jnp.ones((1, 5)))  # one weight per point
    # the user-facing entry point validates first and names the fix (STYLE.md 9)
    with pytest.raises(ValueError, match="X_var has shape"):
        psi_statistics(RBF(), Z, mu, S[:, :1])


def test_likelihood_rejects_latents_of_other_rows():
    Y, F = np.ones((4, 3)), np.zeros((4, 3))
    assert Poisson().log_prob(Y, F).shape == (4, 3)
    with pytest.raises(TypeCheckError, match="F"):
        Poisson().log_prob(Y, F[:3])                    # one row of F per row of Y
    assert Multinomial().log_prob(Y, F[:, :2]).shape == (4,)
    with pytest.raises(TypeCheckError, match="F"):
        Multinomial().log_prob(Y, F[:2, :2])


def test_samplers_reject_parameters_that_do_not_broadcast():
    key = jax.random.PRNGKey(0)
    assert polya_gamma(key, jnp.ones((2, 3)), jnp.zeros(3)).shape == (2, 3)
    with pytest.raises(TypeCheckError, match="c"):
        polya_gamma(key, jnp.ones((2, 3)), jnp.zeros(2))


def test_dataset_fields_share_their_rows():
    Dataset(np.zeros((3, 2)), "toy", "three rows", labels=np.arange(3))
    with pytest.raises(TypeCheckError, match="labels"):
        Dataset(np.zeros((3, 2)), "toy", "three rows", labels=np.arange(4))

"""gplvm: Bayesian non-linear latent-variable models of the Gaussian-process family.

Building blocks: :mod:`gplvm.kernels`, :mod:`gplvm.features`, :mod:`gplvm.likelihoods`,
:mod:`gplvm.linalg`, :mod:`gplvm.data`, :mod:`gplvm.metrics`, :mod:`gplvm.baselines`.

The public names are imported on first use (PEP 562's module ``__getattr__``), so that
``import gplvm`` -- and the command line's ``gplvm --version`` and ``--help`` -- load neither JAX
nor scikit-learn (issue 32, item 6: 1.9 s of imports otherwise).  JAX's settings of
:mod:`gplvm._config` (float64, the compilation cache, CPU devices) must still be made before
JAX's first computation: they are made right after ``jax`` itself is first imported, by
whichever module imports it (:class:`_ConfigureAfterJax`), or now if JAX is already loaded.
"""

import importlib
import importlib.abc
import importlib.util
import sys

from gplvm._version import __version__

#: public name -> the module that defines it.  The first use of any of them imports all three
#: modules, as ``import gplvm`` did before: the estimators register their classes with
#: :mod:`gplvm.registry` when imported, and ``load`` finds a file's classes only there.
_LAZY = {"BayesianGLM": "gplvm.models", "BayesianGPLVM": "gplvm.models",
         "BayesianLinearRegression": "gplvm.models", "DPGPLVM": "gplvm.models",
         "RFLVM": "gplvm.models", "StructuredGPLVM": "gplvm.models.structured",
         "load": "gplvm.io", "DroppedColumnsWarning": "gplvm._validation"}

__all__ = ["__version__", "config", "BayesianGLM", "BayesianGPLVM", "BayesianLinearRegression", "DPGPLVM",
           "RFLVM", "StructuredGPLVM", "load", "DroppedColumnsWarning"]


class _ConfigureAfterJax(importlib.abc.MetaPathFinder):
    """Finds ``jax`` as the other finders do, and runs ``gplvm._config`` once its module has
    executed: before any computation (which needs ``jax`` imported), whoever imports it."""

    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        sys.meta_path.remove(self)                # once; and find the real spec without us
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_jax = spec.loader.exec_module

        def exec_module(module):
            exec_jax(module)
            importlib.import_module("gplvm._config")

        spec.loader.exec_module = exec_module     # this spec's own loader object only
        return spec


if "jax" in sys.modules:
    from gplvm import _config  # noqa: F401  (JAX is loaded: its settings now)
else:
    sys.meta_path.insert(0, _ConfigureAfterJax())


def __getattr__(name):
    if name in _LAZY:
        modules = {module: importlib.import_module(module) for module in set(_LAZY.values())}
        value = getattr(modules[_LAZY[name]], name)
    elif not name.startswith("_") and importlib.util.find_spec(f"gplvm.{name}") is not None:
        value = importlib.import_module(f"gplvm.{name}")      # gplvm.kernels, gplvm.config, ...
    else:
        raise AttributeError(f"module 'gplvm' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *__all__})

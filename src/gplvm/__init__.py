"""gplvm: Bayesian non-linear latent-variable models of the Gaussian-process family.

Building blocks: :mod:`gplvm.kernels`, :mod:`gplvm.features`, :mod:`gplvm.likelihoods`,
:mod:`gplvm.linalg`, :mod:`gplvm.data`, :mod:`gplvm.metrics`, :mod:`gplvm.baselines`.
"""

from gplvm import _config  # noqa: F401  (chooses the precision once, before anything else)
from gplvm import config
from gplvm._version import __version__
from gplvm.io import load
from gplvm.models import DPGPLVM, RFLVM, BayesianGLM, BayesianGPLVM, BayesianLinearRegression
from gplvm.models.structured import StructuredGPLVM

__all__ = ["__version__", "config", "BayesianGLM", "BayesianGPLVM", "BayesianLinearRegression", "DPGPLVM",
           "RFLVM", "StructuredGPLVM", "load"]

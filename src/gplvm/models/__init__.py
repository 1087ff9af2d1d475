"""Estimators (scikit-learn style) built on the functional core."""

from gplvm.models.bgplvm import BayesianGPLVM
from gplvm.models.dpgplvm import DPGPLVM
from gplvm.models.rflvm import RFLVM
from gplvm.models.glm import BayesianGLM
from gplvm.models.linear_regression import BayesianLinearRegression

__all__ = ["BayesianGLM", "BayesianGPLVM", "BayesianLinearRegression", "DPGPLVM", "RFLVM"]

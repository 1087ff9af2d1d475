"""Covariance functions with an algebra and spectral densities (issue 2, item 2)."""

from gplvm.kernels.base import AbstractKernel, Product, Sum
from gplvm.kernels.block_average import BlockAverage
from gplvm.kernels.coincidence import Coincidence
from gplvm.kernels.dot import Constant, Linear, White
from gplvm.kernels.stationary import (
    RBF,
    AbstractStationary,
    Matern12,
    Matern32,
    Matern52,
    RationalQuadratic,
)

STATIONARY_KERNELS = (RBF, Matern12, Matern32, Matern52, RationalQuadratic)

__all__ = [
    "AbstractKernel", "AbstractStationary", "Sum", "Product", "RBF", "Matern12", "Matern32",
    "Matern52", "RationalQuadratic", "Linear", "White", "Constant", "Coincidence", "BlockAverage",
    "STATIONARY_KERNELS",
]

"""Random feature maps: Fourier, Fastfood, A-la-Carte and their composition (issue 2, item 3)."""

from gplvm.features.alacarte import ALaCarteFeatures
from gplvm.features.base import AbstractFeatureMap, sin_cos_features
from gplvm.features.compose import Bias, ColumnSubset, Concat
from gplvm.features.fastfood import FastfoodFeatures, fwht
from gplvm.features.fourier import RandomFourierFeatures, random_fourier_features

__all__ = [
    "AbstractFeatureMap", "RandomFourierFeatures", "random_fourier_features", "FastfoodFeatures",
    "ALaCarteFeatures", "Concat", "ColumnSubset", "Bias", "fwht", "sin_cos_features",
]

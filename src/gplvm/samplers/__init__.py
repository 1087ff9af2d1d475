"""Random-variate generators used by the samplers: Pólya-gamma draws (seed 000, eq. 27)."""

from gplvm.samplers.polya_gamma import polya_gamma
from gplvm.samplers.polya_gamma_devroye import polya_gamma_one

__all__ = ["polya_gamma", "polya_gamma_one"]

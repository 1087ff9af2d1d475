"""Inference drivers: optimisation of objectives (optax) and MCMC chains."""

from gplvm.inference.optimise import OptimResult, minimise

__all__ = ["OptimResult", "minimise"]

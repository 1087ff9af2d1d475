"""Inference drivers: optimisation of objectives (optax) and MCMC chains."""

from gplvm.inference import mcmc
from gplvm.inference.mcmc import ChainResult, run_chains
from gplvm.inference.optimise import OptimResult, minimise

__all__ = ["ChainResult", "OptimResult", "mcmc", "minimise", "run_chains"]

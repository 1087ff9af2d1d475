"""Inference drivers: optimisation of objectives (optax), MCMC chains, and the devices and
meshes that rows are split over (:mod:`.sharding`)."""

from gplvm.inference import mcmc, sharding
from gplvm.inference.mcmc import ChainResult, run_chains
from gplvm.inference.optimise import OptimOptions, OptimResult, minimise

__all__ = ["ChainResult", "OptimOptions", "OptimResult", "mcmc", "minimise", "run_chains",
           "sharding"]

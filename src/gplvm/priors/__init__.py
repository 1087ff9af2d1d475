"""Latent priors p(X): iid standard normal, or a GP over time (dynamical)."""
